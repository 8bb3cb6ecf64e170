//! FerryMQ's measurement programs. Each drives a real queue manager, started with the `ferrymq`
//! binary found beside this one, and prints what it measured together with the exact settings.
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
//!
//! `ferrymq-bench cph ...` is the same harness as `ferrymq cph ...`.

mod core;
mod memory;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("core") => core::run(&args[1..]),
        Some("memory") => memory::run(&args[1..]),
        _ => Err("usage: ferrymq-bench core [--messages N] [--size BYTES] [--samples N]\n       ferrymq-bench memory [--messages N] [--large-messages N] [--sizes 64,2048,20480] [--persistence np,p] [--hold-s N]".to_string()),
    };
    if let Err(e) = r {
        eprintln!("ferrymq-bench: {e}");
        std::process::exit(1);
    }
}
