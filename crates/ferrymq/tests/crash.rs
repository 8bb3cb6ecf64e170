//! Crash safety with evidence: clients put and commit persistent messages and consume them under
//! syncpoint while the queue manager process is killed with SIGKILL at random moments, twenty
//! times, and restarted each time. Afterwards every message whose commit returned is found exactly
//! once (consumed or still queued), nothing is duplicated, and no uncommitted message ever shows.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use support::workload::{check, consumer, producer, Ledger, Target};
use support::{Home, Qm};

const KILLS: usize = 20;
const PRODUCERS: usize = 3;
const CONSUMERS: usize = 2;

#[test]
fn committed_messages_survive_twenty_sigkills_exactly_once() {
    let home = Home::new();
    // A small log (2 x 256 pages = 2 MiB) so checkpoints and log wrap happen during the run too.
    let qm = Qm::start(&home, "QCRASH", &["-lp", "2", "-lf", "256"]);
    let target = Target {
        name: qm.name.clone(),
        conname: qm.conname(),
    };
    let stop = AtomicBool::new(false);
    let ledger = Mutex::new(Ledger::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xC0FFEE);
    std::thread::scope(|s| {
        for id in 0..PRODUCERS {
            let (qm, stop, ledger) = (&target, &stop, &ledger);
            s.spawn(move || producer(id, qm, stop, ledger));
        }
        for _ in 0..CONSUMERS {
            s.spawn(|| consumer(&target, &stop, &ledger));
        }
        for round in 0..KILLS {
            std::thread::sleep(Duration::from_millis(rng.gen_range(150..600)));
            let before = ledger.lock().unwrap().acked.len();
            qm.kill9();
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..50)));
            qm.restart();
            eprintln!("round {round}: killed and restarted with {before} acknowledged puts so far");
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Release);
    });

    let (acked, consumed) = check(&target, ledger.into_inner().unwrap(), KILLS, PRODUCERS);
    assert!(
        acked >= 200,
        "too little load to prove anything: {acked} acknowledged puts"
    );
    assert!(consumed > 0, "the consumer made no progress");
}
