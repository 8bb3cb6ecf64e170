//! `ferrymq-sim`: runs the deterministic HA simulation for one seed or a range of seeds and
//! prints, for a failing seed, what broke, the command that replays it and the end of its trace.
//!
//! ```text
//! ferrymq-sim --seed 1234
//! ferrymq-sim --seeds 0..1000 [--ack-before-commit] [--trace-hash] [--trace] [--trace]
//! ```

use std::process::ExitCode;
use std::time::Instant;

use ferrymq_sim::{run, SimConfig};

fn usage() -> ExitCode {
    eprintln!("usage: ferrymq-sim (--seed N | --seeds A..B) [--ack-before-commit] [--trace-hash] [--trace]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut seeds = None;
    let mut broken = false;
    let mut hashes = false;
    let mut print = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seed" => {
                let Some(n) = args.next().and_then(|v| v.parse::<u64>().ok()) else {
                    return usage();
                };
                seeds = Some(n..n + 1);
            }
            "--seeds" => {
                let Some((a, b)) = args.next().and_then(|v| {
                    let (a, b) = v.split_once("..")?;
                    Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
                }) else {
                    return usage();
                };
                seeds = Some(a..b);
            }
            "--ack-before-commit" => broken = true,
            "--trace-hash" => hashes = true,
            "--trace" => print = true,
            _ => return usage(),
        }
    }
    let Some(seeds) = seeds else {
        return usage();
    };
    let started = Instant::now();
    let (mut failed, mut total) = (0u64, 0u64);
    for seed in seeds {
        let mut cfg = SimConfig::new(seed);
        cfg.ack_before_commit = broken;
        cfg.print_trace = print;
        let out = run(&cfg);
        total += 1;
        if hashes {
            println!(
                "seed {seed} trace {:016x} ({} events)",
                out.trace_hash, out.events
            );
        }
        if !out.passed() {
            failed += 1;
            println!("{}", out.report(&cfg));
        } else if total == 1 {
            println!(
                "seed {seed} passed: {:?}, {:?} simulated",
                out.stats, out.simulated
            );
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{total} seeds, {failed} failed, {secs:.1} s ({:.1} seeds/s)",
        total as f64 / secs
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
