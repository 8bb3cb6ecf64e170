//! FerryMQ's measurement programs. Each drives a real queue manager, started with the `ferrymq`
//! binary found beside this one, and prints what it measured together with the exact settings.
//! The product binary does not contain them: `cargo build --release -p ferrymq -p ferrymq-bench`
//! builds both side by side.
//!
//! `ferrymq-bench cph MODULE ...` is MQ-CPH's equivalent (rr, requester, responder, putget,
//! sender, receiver) against a running queue manager.
//!
//! `ferrymq-bench report standalone|ha|dr|channels|pubsub|mft [--quick] ...` sweeps those workloads into the reports'
//! tables, charts and JSON.
//!
//! `ferrymq-bench core [--messages N] [--size BYTES] [--samples N]` measures what the queue manager
//! core promises: restart time with N queued persistent messages (after a controlled end and after
//! SIGKILL), and single-client persistent put+commit latency next to the raw `fdatasync` latency of
//! the same file system.
//!
//! `ferrymq-bench memory [--messages N] [--large-messages N] [--sizes 64,2048,20480]
//! [--persistence np,p] [--hold-s N]` measures the queue manager's resident memory per queued
//! message and the overhead beyond the payload, for each size, non-persistent and persistent,
//! before and after a restart (`--hold-s` keeps the queue manager N seconds after each
//! measurement, to inspect it).

mod core;
mod fanout;
mod memory;

use clap::Parser;

const EXAMPLES_CPH: &str = "\
Examples:
  ferrymq-bench cph rr --qm QM1 --requesters 64 --size 2048 --persistent --duration-s 30
  ferrymq-bench cph rr --help        the options (the same for every module)";

const EXAMPLES_REPORT: &str = "\
Examples:
  ferrymq-bench report standalone --quick
  ferrymq-bench report ha --quick --out ha-report
  ferrymq-bench report channels --quick
  ferrymq-bench report pubsub --quick
  ferrymq-bench report mft --quick
  ferrymq-bench report connections --quick";

const EXAMPLES_CORE: &str = "\
Examples:
  ferrymq-bench core --messages 500000 --size 2048 --samples 2000

Options: --messages N (queued before the restarts), --size BYTES, --samples N (latency samples).";

const EXAMPLES_FANOUT: &str = "\
Examples:
  ferrymq-bench fanout --deliveries 50000 --size 2048

Options: --deliveries N (copies delivered per row), --size BYTES, --subscribers 1,10,100,1000.
The rows of `ferrymq-bench report pubsub`, printed without writing a report.";

const EXAMPLES_MEMORY: &str = "\
Examples:
  ferrymq-bench memory --messages 200000

Options: --messages N, --large-messages N, --sizes 64,2048,20480, --persistence np,p,
--hold-s N (keep the queue manager N seconds after each measurement).";

/// FerryMQ's measurement harness: drives the `ferrymq` binary found beside it
#[derive(Parser, Debug)]
#[command(
    name = "ferrymq-bench",
    version,
    after_help = "The workload is described in docs/internals/wire.md, 'The hot path and what it costs', and in\n\
                  the ferrymq-bench crate's docs (crates/bench/src/lib.rs)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// MQ-CPH equivalent: request/reply and put/get workloads with rates and latencies
    #[command(after_help = EXAMPLES_CPH)]
    Cph {
        #[command(subcommand)]
        module: ferrymq_bench::cph::CphCmd,
    },
    /// Benchmark reports: tables, charts and JSON (standalone, HA, DR, channels, pubsub, mft,
    /// connections)
    #[command(after_help = EXAMPLES_REPORT)]
    Report {
        #[command(subcommand)]
        report: ferrymq_bench::report::ReportCmd,
    },
    /// Restart time with queued persistent messages, and persistent put+commit latency
    #[command(after_help = EXAMPLES_CORE)]
    Core(Raw),
    /// Queue manager resident memory per queued message
    #[command(after_help = EXAMPLES_MEMORY)]
    Memory(Raw),
    /// Publish/subscribe fan-out: 1 publisher to 1..1000 subscribers, against plain put/get
    #[command(after_help = EXAMPLES_FANOUT)]
    Fanout(Raw),
}

/// A command that reads its own options.
#[derive(clap::Args, Debug)]
struct Raw {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match Cli::try_parse_from(
        std::iter::once("ferrymq-bench".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version on stdout (exit 0); usage errors on stderr, exit 1.
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 1 } else { 0 });
        }
    };
    // cph and report read their options again from the same clap definitions (they record the
    // command line as given in their reports).
    let r = match cli.cmd {
        Cmd::Cph { .. } => ferrymq_bench::cph::main(&args[1..]).map_err(|m| format!("cph: {m}")),
        Cmd::Report { .. } => {
            ferrymq_bench::report::main(&args[1..]).map_err(|m| format!("report: {m}"))
        }
        Cmd::Core(a) => core::run(&a.args),
        Cmd::Memory(a) => memory::run(&a.args),
        Cmd::Fanout(a) => fanout::run(&a.args),
    };
    if let Err(e) = r {
        eprintln!("ferrymq-bench: {e}");
        std::process::exit(1);
    }
}
