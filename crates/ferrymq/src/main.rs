//! The `ferrymq` command: queue manager lifecycle with MQ's command names (crtmqm, strmqm, endmqm,
//! dltmqm, dspmq, setmqini, dspmqini), HA and DR control, runmqsc, the sample programs (put, get,
//! browse, like MQ's amqsput, amqsget and amqsbcg), the latency relay and a self-contained demo
//! (the benchmarks are the `ferrymq-bench` binary's, which drives this one from outside). It
//! reads the command line (one clap tree, `cli`) and calls the crates that do the work; it holds
//! no queue logic of its own.

mod authcmds;
mod cli;
mod demo;
mod devcerts;
mod dlq_handler;
mod dmplog;
mod dr_cmds;
mod fte_cmds;
mod initial;
mod lifecycle;
mod lines;
mod pubsub;
mod relay;
mod req;
mod runmqsc;
mod samples;
mod users;
mod version;

use cli::{Cli, Cmd, Parsed};
use lifecycle::Res;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match cli::parse(&args) {
        Parsed::Run(cli) => cli,
        Parsed::Exit(code) => std::process::exit(code),
    };
    let r: Res = run(*cli);
    if let Err(f) = r {
        if !f.message.is_empty() {
            // Not eprintln!: run-qmgr's stderr is its error log, which a full disk cannot take,
            // and a panic here would turn the exit status into 101.
            cli::err(&format!("{}\n", f.message));
        }
        std::process::exit(f.code);
    }
}

fn run(cli: Cli) -> Res {
    match cli.cmd {
        Cmd::Crtmqm(a) => lifecycle::crtmqm(&a),
        Cmd::Strmqm(a) => lifecycle::strmqm(&a),
        Cmd::Endmqm(a) => lifecycle::endmqm(&a),
        Cmd::Dltmqm(a) => lifecycle::dltmqm(&a),
        Cmd::Dspmq(a) => lifecycle::dspmq(&a),
        Cmd::Setmqini(a) => lifecycle::setmqini(&a),
        Cmd::Dspmqini(a) => lifecycle::dspmqini(&a),
        Cmd::Setmqusr(a) => users::setmqusr(&a),
        Cmd::Dltmqusr(a) => users::dltmqusr(&a),
        Cmd::Dspmqusr(a) => users::dspmqusr(&a),
        Cmd::Sethapreferred(a) => lifecycle::hapreferred(&a.m.unwrap_or_default(), Some(a.i)),
        Cmd::Clearhapreferred(a) => lifecycle::hapreferred(&a.m.unwrap_or_default(), None),
        Cmd::Makedrprimary(a) => dr_cmds::makedrprimary(&a),
        Cmd::Makedrsecondary(a) => dr_cmds::makedrsecondary(&a),
        Cmd::RunQmgr(a) => lifecycle::run_qmgr(&a.name),
        Cmd::Runmqsc(a) => runmqsc::run(&a),
        Cmd::Dmpmqcfg(a) => runmqsc::dmpmqcfg(&a),
        Cmd::Setmqaut(a) => authcmds::setmqaut(&a),
        Cmd::Dspmqaut(a) => authcmds::dspmqaut(&a),
        Cmd::Dmpmqaut(a) => authcmds::dmpmqaut(&a),
        Cmd::Mkdevcerts(a) => devcerts::run(&a),
        Cmd::Dmplog(a) => dmplog::run(&a),
        Cmd::Put(a) => samples::put(&a.args),
        Cmd::Get(a) => samples::get(&a.args, false),
        Cmd::Browse(a) => samples::get(&a.args, true),
        Cmd::Pub(a) => pubsub::publish(&a.args),
        Cmd::Sub(a) => pubsub::subscribe(&a.args),
        Cmd::FteSetupCoordination(a) => fte_cmds::run("fteSetupCoordination", &a.args),
        Cmd::FteCreateAgent(a) => fte_cmds::run("fteCreateAgent", &a.args),
        Cmd::FteStartAgent(a) => fte_cmds::run("fteStartAgent", &a.args),
        Cmd::FteStopAgent(a) => fte_cmds::run("fteStopAgent", &a.args),
        Cmd::FteListAgents(a) => fte_cmds::run("fteListAgents", &a.args),
        Cmd::FteShowAgentDetails(a) => fte_cmds::run("fteShowAgentDetails", &a.args),
        Cmd::FteCreateTransfer(a) => fte_cmds::run("fteCreateTransfer", &a.args),
        Cmd::FteCancelTransfer(a) => fte_cmds::run("fteCancelTransfer", &a.args),
        Cmd::FteCreateMonitor(a) => fte_cmds::run("fteCreateMonitor", &a.args),
        Cmd::FteListMonitors(a) => fte_cmds::run("fteListMonitors", &a.args),
        Cmd::FteDeleteMonitor(a) => fte_cmds::run("fteDeleteMonitor", &a.args),
        Cmd::Fte(a) => fte_cmds::fte(&a.args),
        Cmd::Req(a) => req::run(&a),
        Cmd::Runmqdlq(a) => dlq_handler::run(&a),
        Cmd::Demo(a) => demo::run(&a),
        Cmd::Relay(a) => relay::run(&a),
        Cmd::Dspmqver => {
            print_out(&version::dspmqver());
            Ok(())
        }
        Cmd::Completions { shell } => {
            print_out(&cli::completions(shell));
            Ok(())
        }
        Cmd::Man { out } => {
            let files = cli::man_pages(&out)
                .map_err(|e| lifecycle::other(format!("man: {}: {e}", out.display())))?;
            print_out(&format!(
                "man: {} pages written to {}\n",
                files.len(),
                out.display()
            ));
            Ok(())
        }
        Cmd::Help { command } => match cli::help_of(&command) {
            Some(h) => {
                print_out(&h);
                Ok(())
            }
            None => Err(lifecycle::other(format!(
                "ferrymq help: no command '{}'",
                command.join(" ")
            ))),
        },
        Cmd::Commands => {
            print_out(&(cli::all_commands().join("\n") + "\n"));
            Ok(())
        }
    }
}

/// Writes to stdout without panicking on a closed pipe.
pub(crate) fn print_out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}
