//! The simulator in CI: a thousand seeds of the replicated group under faults must keep every
//! promise, and the deliberately broken build (replies released before their batch is committed)
//! must be caught on the same seeds (the first seed that catches it ends that test) — which is
//! what shows the checks can fail.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use ferrymq_sim::{run, SimConfig};

/// Seeds run in CI.
const SEEDS: u64 = 1_000;

/// Runs `seeds` on two threads (each its own runtime); returns the failure reports, in seed
/// order. With `broken`, the deliberately wrong build, and only until a seed catches it.
fn run_all(seeds: std::ops::Range<u64>, broken: bool) -> Vec<(u64, String)> {
    let next = AtomicU64::new(seeds.start);
    let failed = Mutex::new(Vec::new());
    let caught = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end || caught.load(Ordering::Relaxed) {
                    return;
                }
                let mut cfg = SimConfig::new(seed);
                cfg.ack_before_commit = broken;
                let out = run(&cfg);
                if !out.passed() {
                    failed.lock().unwrap().push((seed, out.report(&cfg)));
                    caught.store(broken, Ordering::Relaxed);
                }
            });
        }
    });
    let mut f = failed.into_inner().unwrap();
    f.sort();
    f
}

#[test]
fn a_thousand_seeds_of_faults_keep_every_acknowledged_message() {
    let failed = run_all(0..SEEDS, false);
    if let Some((_, report)) = failed.first() {
        panic!(
            "{} of {SEEDS} seeds failed (seeds {:?}); the first:\n{report}",
            failed.len(),
            failed.iter().map(|f| f.0).collect::<Vec<_>>()
        );
    }
}

#[test]
fn replies_released_before_commit_are_caught() {
    let failed = run_all(0..SEEDS, true);
    assert!(
        !failed.is_empty(),
        "no seed caught replies released before their batch was committed"
    );
    let (seed, report) = &failed[0];
    println!("the broken build was caught; seed {seed}:\n{report}");
}
