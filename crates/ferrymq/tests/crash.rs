//! Crash safety with evidence: clients put and commit persistent messages and consume them under
//! syncpoint while the queue manager process is killed with SIGKILL at random moments, twenty
//! times, and restarted each time, while an administrator ALTERs the queue's attributes
//! (MSGDLVSQ, DEFPRTY, DEFPSIST, MAXDEPTH, MAXMSGL, BOTHRESH, BOQNAME, DESCR, ...) and
//! checkpoints run between the alters and the kills. Afterwards every message whose commit
//! returned is found exactly once (consumed or still queued): none lost, none duplicated, no
//! consumed message resurrected, and no uncommitted message ever shows.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use support::workload::{check, consumer, producer, Ledger, Target, Q};
use support::{Home, Qm};

const KILLS: usize = 20;
const PRODUCERS: usize = 3;
const CONSUMERS: usize = 2;

#[test]
fn committed_messages_survive_twenty_sigkills_exactly_once() {
    let home = Home::new();
    // A small log (2 x 256 pages = 2 MiB) so checkpoints and log wrap happen during the run too,
    // and a checkpoint at least every 200 ms so that alters land between checkpoints and kills.
    let qm = Qm::create(&home, "QCRASH", &["-lp", "2", "-lf", "256"]);
    qm.set_ini("Log", "CheckpointIntervalMs", "200");
    qm.restart();
    let target = Target {
        name: qm.name.clone(),
        conname: qm.conname(),
    };
    let stop = AtomicBool::new(false);
    let ledger = Mutex::new(Ledger::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xC0FFEE);
    let alters = AtomicUsize::new(0);
    let alters = &alters;
    std::thread::scope(|s| {
        for id in 0..PRODUCERS {
            let (qm, stop, ledger) = (&target, &stop, &ledger);
            s.spawn(move || producer(id, qm, stop, ledger));
        }
        for _ in 0..CONSUMERS {
            s.spawn(|| consumer(&target, &stop, &ledger));
        }
        {
            let (home, stop, name) = (&home, &stop, qm.name.clone());
            s.spawn(move || alterer(home, &name, stop, alters));
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
        eprintln!("{} alters applied", alters.load(Ordering::Relaxed));
        assert!(
            alters.load(Ordering::Relaxed) >= KILLS,
            "too few attribute changes to prove anything"
        );
    });

    let (acked, consumed) = check(&target, ledger.into_inner().unwrap(), KILLS, PRODUCERS);
    assert!(
        acked >= 200,
        "too little load to prove anything: {acked} acknowledged puts"
    );
    assert!(consumed > 0, "the consumer made no progress");
}

/// ALTERs the workload's queue with random attribute values every 30-120 ms through `runmqsc`,
/// counting the alters that were applied (those sent while the queue manager is down fail).
fn alterer(home: &Home, qm: &str, stop: &AtomicBool, applied: &AtomicUsize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xA17E);
    while !stop.load(Ordering::Acquire) {
        let mut attrs = vec![
            format!(
                "MSGDLVSQ({})",
                if rng.gen_bool(0.5) {
                    "FIFO"
                } else {
                    "PRIORITY"
                }
            ),
            format!("DEFPRTY({})", rng.gen_range(0..10)),
            format!("DEFPSIST({})", if rng.gen_bool(0.5) { "YES" } else { "NO" }),
            format!("MAXDEPTH({})", rng.gen_range(100_000..200_000)),
            format!("MAXMSGL({})", rng.gen_range(4096..4_194_304)),
            format!("BOTHRESH({})", rng.gen_range(0..5)),
            format!(
                "BOQNAME({})",
                if rng.gen_bool(0.5) {
                    "SYSTEM.DEAD.LETTER.QUEUE"
                } else {
                    "' '"
                }
            ),
            format!("DESCR('altered {}')", rng.gen::<u32>()),
            format!("SHARE"),
            format!("HARDENBO"),
        ];
        // Some alters change one attribute only, some all of them.
        if rng.gen_bool(0.5) {
            let i = rng.gen_range(0..attrs.len());
            attrs = vec![attrs.swap_remove(i)];
        }
        let cmd = format!("ALTER QLOCAL({Q}) {}\n", attrs.join(" "));
        let out = home.run_with_input(&["runmqsc", qm], &cmd);
        if out.status.success() {
            applied.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(30..120)));
    }
}

/// The resurrection first reported: ten persistent messages queued, MSGDLVSQ changed under them,
/// a checkpoint, all ten got and committed, kill -9, restart: the queue must stay empty (the
/// restart used to recompute the messages' delivery keys from the new setting while the logged
/// gets carried the old ones, and the gets missed in silence).
#[test]
fn consumed_messages_stay_consumed_after_msgdlvsq_changed_under_them() {
    use bytes::Bytes;
    use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
    use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};

    let home = Home::new();
    let qm = Qm::create(&home, "QRESURRECT", &[]);
    qm.set_ini("Log", "CheckpointIntervalMs", "100");
    qm.restart();
    let mqsc = |cmd: &str| {
        let out = home.run_with_input(&["runmqsc", &qm.name], cmd);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "runmqsc {cmd}: {text}");
        text
    };
    mqsc("DEFINE QLOCAL(ORDERS) MSGDLVSQ(PRIORITY)\n");
    let c = qm.connect();
    let h = c.open("ORDERS", open::OUTPUT | open::INPUT_SHARED).unwrap();
    for i in 0..10 {
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            priority: i % 10,
            ..Default::default()
        };
        c.put(
            &h,
            &md,
            &Properties::default(),
            Bytes::from(format!("m{i}")),
            &PutOptions::default(),
        )
        .unwrap();
    }
    mqsc("ALTER QLOCAL(ORDERS) MSGDLVSQ(FIFO)\n");
    let before = qm.manifests();
    qm.wait_for_checkpoint_after(&before);
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    for _ in 0..10 {
        c.get(&h, &sp).unwrap();
    }
    c.commit().unwrap();
    assert!(mqsc("DISPLAY QLOCAL(ORDERS) CURDEPTH\n").contains("CURDEPTH(0)"));
    drop(c);
    qm.kill9();
    qm.restart();
    let depth = mqsc("DISPLAY QLOCAL(ORDERS) CURDEPTH\n");
    assert!(
        depth.contains("CURDEPTH(0)"),
        "consumed messages came back after the restart: {depth}"
    );
    let c = qm.connect();
    let h = c.open("ORDERS", open::INPUT_SHARED).unwrap();
    let e = c.get(&h, &GetOptions::any()).unwrap_err();
    assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);
}

/// Request/responder under SIGKILL: responders get each request under syncpoint (answered before
/// the request's put is on disk), put the reply under the same unit of work and commit, while
/// requesters put and commit requests and the queue manager is killed ten times. Afterwards each
/// request is either still queued or answered, never both and never twice; every reply whose
/// commit returned is there; and nothing appears that was never put.
#[test]
fn responders_consume_and_reply_in_one_unit_of_work_across_sigkills() {
    use support::workload::rr;

    const ROUNDS: usize = 10;
    let home = Home::new();
    let qm = Qm::create(&home, "QRESPOND", &["-lp", "2", "-lf", "256"]);
    qm.set_ini("Log", "CheckpointIntervalMs", "300");
    qm.restart();
    support::mqsc(&home, &qm.name, rr::DEFINE);
    let target = Target {
        name: qm.name.clone(),
        conname: qm.conname(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5E5);
    rr::run(&target, ROUNDS, |book| {
        for round in 0..ROUNDS {
            std::thread::sleep(Duration::from_millis(rng.gen_range(150..500)));
            qm.kill9();
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..50)));
            qm.restart();
            eprintln!("round {round}: {}", book.lock().unwrap().progress());
        }
    });
}
