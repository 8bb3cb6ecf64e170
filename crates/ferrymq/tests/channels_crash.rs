//! Once and once only across a channel, with evidence: a producer puts persistent messages to a
//! remote queue on QM1 (each put committed, its acknowledgement written in a ledger) while the
//! sending and the receiving queue managers are each killed with SIGKILL at random moments —
//! twenty-four kills in all, both sides — and restarted, with checkpoints running. The channel
//! restarts by itself (at strmqm on QM1; by retrying when QM2 returns) and resolves its batch in
//! doubt. Afterwards every acknowledged put is on QM2's queue exactly once, nothing else is there
//! (a put whose acknowledgement was lost may be there once), and the messages of each priority
//! arrived in the order they were put.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{open, GetOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use rand::{Rng, SeedableRng};
use support::ha::HaGroup;
use support::{mqsc, Home, Qm};

const KILLS: usize = 24;

#[derive(Default)]
struct Ledger {
    /// (number, priority) of each put whose commit returned, in the order they returned.
    acked: Vec<(u64, i32)>,
    /// Puts whose outcome the producer cannot know (the connection broke).
    in_doubt: Vec<u64>,
}

fn depth(home: &Home, qm: &str, q: &str) -> Option<u32> {
    let out = home.run_with_input(&["runmqsc", qm], &format!("DISPLAY QLOCAL({q}) CURDEPTH\n"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = text.find("CURDEPTH(")? + "CURDEPTH(".len();
    text[at..].split(')').next()?.trim().parse().ok()
}

fn connect(qm: &Qm, stop: &AtomicBool) -> Option<Connection> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        if let Ok(c) = Connection::connect(
            ferrymq_client::ConnectOptions::client(&qm.name, &qm.conname()).unwrap(),
        ) {
            return Some(c);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("could not reconnect to {} within 60 s", qm.name);
}

fn producer(qm: &Qm, stop: &AtomicBool, ledger: &Mutex<Ledger>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut n = 0u64;
    'outer: while !stop.load(Ordering::Acquire) {
        let Some(c) = connect(qm, stop) else { break };
        let Ok(h) = c.open("ORDERS", open::OUTPUT) else {
            continue;
        };
        while !stop.load(Ordering::Acquire) {
            n += 1;
            let priority = if rng.gen_ratio(1, 4) { 8 } else { 2 };
            let md = MessageDescriptor {
                persistence: Persistence::Persistent,
                priority,
                ..Default::default()
            };
            match c.put_commit(&h, &md, &Properties::default(), Bytes::from(n.to_string())) {
                Ok(_) => ledger.lock().unwrap().acked.push((n, priority)),
                Err(_) => {
                    ledger.lock().unwrap().in_doubt.push(n);
                    continue 'outer;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[test]
fn every_acknowledged_put_crosses_exactly_once_while_both_ends_are_killed() {
    let home = Home::new();
    let qm2 = Qm::create(&home, "QM2", &["-lp", "2", "-lf", "256"]);
    qm2.set_ini("Log", "CheckpointIntervalMs", "300");
    qm2.restart();
    mqsc(
        &home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN) MAXDEPTH(1000000)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)\n",
    );
    let qm1 = Qm::create(&home, "QM1", &["-lp", "2", "-lf", "256"]);
    qm1.set_ini("Log", "CheckpointIntervalMs", "300");
    qm1.restart();
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ) MAXDEPTH(1000000)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1({})') XMITQ(QM2) BATCHSZ(20) SHORTTMR(1)\n\
             START CHANNEL(QM1.TO.QM2)\n",
            qm2.port
        ),
    );
    let stop = AtomicBool::new(false);
    let ledger = Mutex::new(Ledger::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xC4A77E1);
    let (mut kills1, mut kills2) = (0, 0);
    std::thread::scope(|s| {
        s.spawn(|| producer(&qm1, &stop, &ledger));
        for round in 0..KILLS {
            std::thread::sleep(Duration::from_millis(rng.gen_range(150..600)));
            // Each side about as often; never the same side three times running.
            let first = if round % 2 == 0 {
                rng.gen_bool(0.5)
            } else {
                kills1 <= kills2
            };
            let qm = if first { &qm1 } else { &qm2 };
            if first {
                kills1 += 1;
            } else {
                kills2 += 1;
            }
            let acked = ledger.lock().unwrap().acked.len();
            qm.kill9();
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..100)));
            qm.restart();
            eprintln!(
                "round {round}: killed {} ({acked} acknowledged so far)",
                qm.name
            );
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Release);
    });
    assert!(
        kills1 >= 5 && kills2 >= 5,
        "both sides were killed: {kills1} and {kills2}"
    );
    let ledger = ledger.into_inner().unwrap();
    assert!(
        ledger.acked.len() >= 200,
        "too little load to prove anything: {} acknowledged puts",
        ledger.acked.len()
    );

    // The channel drains the transmission queue.
    let t = Instant::now();
    while depth(&home, "QM1", "QM2") != Some(0) {
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "the transmission queue did not drain: depth {:?}\n{}",
            depth(&home, "QM1", "QM2"),
            mqsc(&home, "QM1", "DISPLAY CHSTATUS(QM1.TO.QM2)\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let c2 = qm2.connect_bindings();
    let h = c2.open("ORDERS.IN", open::INPUT_EXCLUSIVE).unwrap();
    let mut arrived: Vec<(u64, i32)> = Vec::new();
    loop {
        match c2.get(&h, &GetOptions::any()) {
            Ok(m) => arrived.push((
                String::from_utf8(m.body.to_vec()).unwrap().parse().unwrap(),
                m.md.priority,
            )),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("draining ORDERS.IN: {e}"),
        }
    }
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for (n, _) in &arrived {
        *seen.entry(*n).or_default() += 1;
    }
    let dups: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "messages arrived more than once: {dups:?}");
    let lost: Vec<u64> = ledger
        .acked
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !seen.contains_key(n))
        .collect();
    assert!(lost.is_empty(), "acknowledged puts lost: {lost:?}");
    let acked: std::collections::HashSet<u64> = ledger.acked.iter().map(|(n, _)| *n).collect();
    let in_doubt: std::collections::HashSet<u64> = ledger.in_doubt.iter().copied().collect();
    let strangers: Vec<u64> = seen
        .keys()
        .copied()
        .filter(|n| !acked.contains(n) && !in_doubt.contains(n))
        .collect();
    assert!(strangers.is_empty(), "messages nobody put: {strangers:?}");
    // Per priority, in the order they were put (the queue delivers by priority, then FIFO).
    for p in [2i32, 8] {
        let order: Vec<u64> = arrived
            .iter()
            .filter(|(_, q)| *q == p)
            .map(|(n, _)| *n)
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "priority {p} arrived out of order: {order:?}"
        );
    }
    // The kills left batches in doubt, which the channel resolved when it started again.
    let log = support::error_log(&qm1.dir());
    let committed = log.matches("was committed: the receiver had it").count();
    let backed_out = log.matches("was backed out: it will be sent again").count();
    eprintln!("batches in doubt resolved: {committed} committed, {backed_out} backed out");
    assert!(
        committed + backed_out > 0,
        "no batch was ever in doubt: the kills proved nothing"
    );
    eprintln!(
        "{} acknowledged, {} in doubt, {} arrived; kills: QM1 {kills1}, QM2 {kills2}",
        ledger.acked.len(),
        ledger.in_doubt.len(),
        arrived.len()
    );
}

#[test]
fn a_receiver_ha_group_that_loses_its_active_instance_mid_batch_still_gets_everything_once() {
    let g = HaGroup::start("QM2", &[]);
    let admin = g.connect();
    for cmd in [
        "MQSC DEFINE QLOCAL(ORDERS.IN) MAXDEPTH(1000000)",
        "MQSC DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)",
    ] {
        admin.admin(cmd).expect(cmd);
    }
    drop(admin);
    let home = Home::new();
    let qm1 = Qm::start(&home, "QM1", &[]);
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ) MAXDEPTH(1000000)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('{}') XMITQ(QM2) BATCHSZ(20) SHORTTMR(1)\n\
             START CHANNEL(QM1.TO.QM2)\n",
            g.conname()
        ),
    );
    let stop = AtomicBool::new(false);
    let ledger = Mutex::new(Ledger::default());
    std::thread::scope(|s| {
        s.spawn(|| producer(&qm1, &stop, &ledger));
        // Messages flowing, then the receiving group's active instance dies.
        let t = Instant::now();
        while ledger.lock().unwrap().acked.len() < 200 {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the producer made no progress"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let active = g.wait_active(Duration::from_secs(30));
        g.kill9(active);
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Release);
    });
    let acked: Vec<u64> = ledger
        .into_inner()
        .unwrap()
        .acked
        .iter()
        .map(|(n, _)| *n)
        .collect();
    let t = Instant::now();
    while depth(&home, "QM1", "QM2") != Some(0) {
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "the transmission queue did not drain:\n{}\n{}",
            mqsc(&home, "QM1", "DISPLAY CHSTATUS(QM1.TO.QM2)\n"),
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = g.connect();
    let h = c.open("ORDERS.IN", open::INPUT_EXCLUSIVE).unwrap();
    let mut seen: HashMap<u64, usize> = HashMap::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                *seen
                    .entry(String::from_utf8(m.body.to_vec()).unwrap().parse().unwrap())
                    .or_default() += 1
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("draining ORDERS.IN: {e}"),
        }
    }
    let dups: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "messages arrived more than once: {dups:?}");
    let lost: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|n| !seen.contains_key(n))
        .collect();
    assert!(lost.is_empty(), "acknowledged puts lost: {lost:?}");
    eprintln!(
        "{} acknowledged, {} arrived across the failover",
        acked.len(),
        seen.len()
    );
}
