//! High availability under fault injection: three instances of one queue manager, each a real
//! process with its own data directory, replicating over loopback TCP. Producers put and commit
//! persistent messages and consumers get them under syncpoint, through the instances' connection
//! name list, while the active instance is killed with SIGKILL again and again (each time the
//! killed instance is restarted and rejoins as a replica, catching up by itself). Afterwards every
//! message whose commit returned is found exactly once across the whole run, nothing backed out
//! or uncommitted is visible, and every instance is back in sync.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use support::ha::HaGroup;
use support::workload::{check, consumer, producer, Ledger, Target};

const FAILOVERS: usize = 12;
const PRODUCERS: usize = 3;
const CONSUMERS: usize = 2;

#[test]
fn committed_messages_survive_twelve_failovers_exactly_once() {
    // A small ring (3 x 512 pages = 6 MiB) so snapshots and log reuse happen during the run too.
    let g = HaGroup::start("QHA", &["-lp", "3", "-lf", "512"]);
    let target = Target {
        name: g.name.clone(),
        conname: g.conname(),
    };
    let stop = AtomicBool::new(false);
    let ledger = Mutex::new(Ledger::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xFA11);
    let mut failover_ms = Vec::new();
    std::thread::scope(|s| {
        for id in 0..PRODUCERS {
            let (t, stop, ledger) = (&target, &stop, &ledger);
            s.spawn(move || producer(id, t, stop, ledger));
        }
        for _ in 0..CONSUMERS {
            s.spawn(|| consumer(&target, &stop, &ledger));
        }
        for round in 0..FAILOVERS {
            std::thread::sleep(Duration::from_millis(rng.gen_range(300..900)));
            let active = g.wait_active(Duration::from_secs(30));
            let before = ledger.lock().unwrap().acked.len();
            g.kill9(active);
            let killed = Instant::now();
            let next = g.wait_active(Duration::from_secs(30));
            failover_ms.push(killed.elapsed().as_millis());
            assert_ne!(next, active, "the killed instance cannot be active");
            g.start_instance(active);
            eprintln!(
                "failover {round}: killed instance {active}, instance {next} active after {} ms; {before} acknowledged puts so far",
                killed.elapsed().as_millis()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Release);
    });
    let (acked, consumed) = check(&target, ledger.into_inner().unwrap(), FAILOVERS, PRODUCERS);
    eprintln!("failover times (kill to an instance reporting active), ms: {failover_ms:?}");
    assert!(
        acked >= 200,
        "too little load to prove anything: {acked} acknowledged puts"
    );
    assert!(consumed > 0, "the consumers made no progress");

    // Every instance, including each one killed and restarted, catches up with the active one.
    let t = Instant::now();
    loop {
        let active = g.wait_active(Duration::from_secs(30));
        let status = g.status(active).unwrap_or_default();
        let in_sync = status.matches("INSYNC(YES)").count();
        if in_sync == 3 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "replicas did not catch up:\n{status}\n{}",
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sethapreferred_moves_the_active_role_without_losing_messages() {
    use bytes::Bytes;
    use ferrymq_types::options::{open, GetOptions, Syncpoint};
    use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};

    let g = HaGroup::start("QPREF", &["-lp", "3", "-lf", "512"]);
    let first = g.wait_active(Duration::from_secs(30));
    let c = g.connect_reconnecting(30);
    let h = c.open(support::workload::Q, open::OUTPUT).unwrap();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    for i in 0..50 {
        c.put_commit(
            &h,
            &md,
            &Properties::default(),
            Bytes::from(format!("m{i}")),
        )
        .unwrap();
    }
    // Prefer another instance, asking it (a replica) to record the preference.
    let target = (first + 1) % 3;
    let out = g.homes[target].ok(&["sethapreferred", "-m", "QPREF"]);
    assert!(out.contains("preferred"), "{out}");
    let t = Instant::now();
    while g.active() != Some(target) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "instance {target} did not become active:\n{}",
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("switch-over took {} ms", t.elapsed().as_millis());
    // The same connection carries on after reconnecting; every message is there once. The gets
    // are under syncpoint because the connection can still break after the new instance reports
    // itself active (seen once in CI, with the other test's group on the same cores: the first
    // get ended MQRC_CALL_INTERRUPTED), and a get interrupted before its commit is backed out,
    // so nothing may go missing. Only a commit that was interrupted leaves its message in doubt
    // (consumed, or got again later: not both). The group's logs are printed when it happens.
    let h = c.open(support::workload::Q, open::INPUT_EXCLUSIVE).unwrap();
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    let (mut got, mut in_doubt, mut interrupted) = (Vec::new(), Vec::new(), 0);
    loop {
        match c.get(&h, &opts) {
            Ok(m) => {
                let body = String::from_utf8(m.body.to_vec()).unwrap();
                match c.commit() {
                    Ok(()) => got.push(body),
                    Err(e) if e.reason == Reason::CALL_INTERRUPTED => in_doubt.push(body),
                    Err(e) => panic!("commit after switch-over: {e}"),
                }
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) if matches!(e.reason, Reason::CALL_INTERRUPTED | Reason::BACKED_OUT) => {
                interrupted += 1;
                eprintln!("get interrupted after switch-over: {e}\n{}", g.logs());
            }
            Err(e) => panic!("get after switch-over: {e}"),
        }
        assert!(
            interrupted + in_doubt.len() <= 3,
            "calls keep failing after the switch-over:\n{}",
            g.logs()
        );
    }
    let number = |b: &String| -> u32 {
        match b.strip_prefix('m').and_then(|n| n.parse().ok()) {
            Some(i) if i < 50 => i,
            _ => panic!("got {b}, which was never put"),
        }
    };
    let got: Vec<u32> = got.iter().map(number).collect();
    let in_doubt: Vec<u32> = in_doubt.iter().map(number).collect();
    for i in 0..50 {
        let n = got.iter().filter(|&&g| g == i).count();
        if in_doubt.contains(&i) {
            assert!(n <= 1, "m{i} got {n} times (its commit was in doubt)");
        } else {
            assert_eq!(n, 1, "m{i} got {n} times; got {got:?}");
        }
    }
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "messages out of order: {got:?}"
    );
    // The preference is the group's: every instance shows it, and clearing it is too.
    let status = g.status(first).unwrap();
    assert!(status.contains("PREFERRED(YES)"), "{status}");
    g.homes[first].ok(&["clearhapreferred", "-m", "QPREF"]);
    let t = Instant::now();
    while g
        .status(target)
        .unwrap_or_default()
        .contains("PREFERRED(YES)")
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "preference not cleared"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        g.active(),
        Some(target),
        "clearing the preference moves nothing"
    );
}

/// Request/responder across failovers: responders get each request under syncpoint (answered
/// before the request's put is replicated to a majority), put the reply under the same unit of
/// work and commit, while the active instance is killed six times. Each request ends up queued
/// or answered, never both and never twice, and every reply whose commit returned is there.
#[test]
fn responders_consume_and_reply_in_one_unit_of_work_across_failovers() {
    use support::workload::rr;

    const ROUNDS: usize = 6;
    let g = HaGroup::start("QHARR", &["-lp", "3", "-lf", "512"]);
    let active = g.wait_active(Duration::from_secs(30));
    support::mqsc(&g.homes[active], &g.name, rr::DEFINE);
    let target = Target {
        name: g.name.clone(),
        conname: g.conname(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x4A22);
    rr::run(&target, ROUNDS, |book| {
        for round in 0..ROUNDS {
            std::thread::sleep(Duration::from_millis(rng.gen_range(300..900)));
            let active = g.wait_active(Duration::from_secs(30));
            g.kill9(active);
            let next = g.wait_active(Duration::from_secs(30));
            assert_ne!(next, active, "the killed instance cannot be active");
            g.start_instance(active);
            eprintln!(
                "failover {round}: killed instance {active}, instance {next} active; {}",
                book.lock().unwrap().progress()
            );
        }
    });
}
