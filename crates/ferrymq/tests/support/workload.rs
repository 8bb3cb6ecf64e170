//! The crash workload shared by the fault-injection tests: producers putting persistent messages
//! (committed, or under syncpoint and backed out) and consumers getting them under syncpoint,
//! each reconnecting whenever a call fails, with a ledger of what each call's outcome promises;
//! and the checker that drains the queue and holds the ledger to those promises.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use rand::{Rng, SeedableRng};

pub const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

/// Where the workload connects: a queue manager name and a connection name (list).
pub struct Target {
    pub name: String,
    pub conname: String,
}

#[derive(Default)]
pub struct Ledger {
    /// put_commit returned: must be found exactly once.
    pub acked: Vec<String>,
    /// The put or its commit was interrupted: may be found once, or not at all.
    pub in_doubt_puts: Vec<String>,
    /// Refused with a definite reason (the queue was full): must never be found.
    pub refused: Vec<String>,
    /// Got under syncpoint and the commit returned.
    pub consumed: Vec<String>,
    /// Got under syncpoint but the commit was interrupted: consumed or still there, not both.
    pub in_doubt_gets: Vec<String>,
}

/// Connects to `qm`, trying again every 20 ms for up to a minute (the queue manager may be
/// restarting); `None` once `stop` is set.
pub fn connect_retrying(qm: &Target, stop: &AtomicBool) -> Option<Connection> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        if let Ok(c) = ferrymq_client::blocking::Connection::connect(
            ferrymq_client::ConnectOptions::client(&qm.name, &qm.conname).unwrap(),
        ) {
            return Some(c);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("could not reconnect within 60 s");
}

fn persistent() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

pub fn producer(id: usize, qm: &Target, stop: &AtomicBool, ledger: &Mutex<Ledger>) {
    let mut n = 0u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(id as u64);
    'outer: while !stop.load(Ordering::Acquire) {
        let Some(c) = connect_retrying(qm, stop) else {
            break;
        };
        let Ok(h) = c.open(Q, open::OUTPUT) else {
            continue;
        };
        while !stop.load(Ordering::Acquire) {
            if rng.gen_ratio(1, 10) {
                // Work that is put under syncpoint and backed out must never be seen.
                let sp = PutOptions {
                    syncpoint: Syncpoint::Yes,
                    ..Default::default()
                };
                let body = format!("U{id}-{n}");
                n += 1;
                if c.put(
                    &h,
                    &persistent(),
                    &Properties::default(),
                    Bytes::from(body),
                    &sp,
                )
                .is_err()
                    || c.backout().is_err()
                {
                    continue 'outer;
                }
                continue;
            }
            let body = format!("P{id}-{n}");
            n += 1;
            // Mixed priorities, so that delivery keys differ with the queue's MSGDLVSQ.
            let md = MessageDescriptor {
                priority: rng.gen_range(0..10),
                ..persistent()
            };
            match c.put_commit(&h, &md, &Properties::default(), Bytes::from(body.clone())) {
                Ok(_) => ledger.lock().unwrap().acked.push(body),
                Err(e) if e.reason == Reason::Q_FULL => {
                    ledger.lock().unwrap().refused.push(body);
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => {
                    ledger.lock().unwrap().in_doubt_puts.push(body);
                    continue 'outer;
                }
            }
        }
    }
}

pub fn consumer(qm: &Target, stop: &AtomicBool, ledger: &Mutex<Ledger>) {
    'outer: while !stop.load(Ordering::Acquire) {
        let Some(c) = connect_retrying(qm, stop) else {
            break;
        };
        let Ok(h) = c.open(Q, open::INPUT_SHARED) else {
            continue;
        };
        let opts = GetOptions {
            syncpoint: Syncpoint::Yes,
            wait: Wait::Ms(50),
            ..GetOptions::any()
        };
        while !stop.load(Ordering::Acquire) {
            match c.get(&h, &opts) {
                Ok(m) => {
                    let body = String::from_utf8(m.body.to_vec()).unwrap();
                    match c.commit() {
                        Ok(()) => ledger.lock().unwrap().consumed.push(body),
                        Err(_) => {
                            ledger.lock().unwrap().in_doubt_gets.push(body);
                            continue 'outer;
                        }
                    }
                }
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {}
                Err(_) => continue 'outer,
            }
        }
    }
}

/// Drains the queue and checks the ledger: every acknowledged put found exactly once (consumed or
/// left), nothing backed out or refused visible, nothing delivered twice, and no more calls in
/// doubt than `kills` can explain. Returns (acknowledged, consumed) counts.
pub fn check(qm: &Target, ledger: Ledger, kills: usize, producers: usize) -> (usize, usize) {
    // Drain what is left.
    let c =
        Connection::connect(ferrymq_client::ConnectOptions::client(&qm.name, &qm.conname).unwrap())
            .expect("connect to drain");
    let h = c.open(Q, open::INPUT_EXCLUSIVE).unwrap();
    let mut remaining = Vec::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => remaining.push(String::from_utf8(m.body.to_vec()).unwrap()),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("draining: {e}"),
        }
    }
    let l = ledger;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for b in l.consumed.iter().chain(remaining.iter()) {
        *seen.entry(b.as_str()).or_default() += 1;
    }
    let in_doubt_get: std::collections::HashSet<&str> =
        l.in_doubt_gets.iter().map(String::as_str).collect();
    let in_doubt_put: std::collections::HashSet<&str> =
        l.in_doubt_puts.iter().map(String::as_str).collect();
    for (body, n) in &seen {
        assert!(
            !body.starts_with('U'),
            "backed-out message {body} became visible"
        );
        assert_eq!(*n, 1, "message {body} delivered {n} times");
        assert!(
            l.acked.iter().any(|a| a == body) || in_doubt_put.contains(body),
            "{body} was never put"
        );
    }
    for r in &l.refused {
        assert!(
            !seen.contains_key(r.as_str()),
            "{r} was refused with Q_FULL but delivered"
        );
    }
    // Each kill interrupts at most one call per worker; anything more means errors are being
    // misread as crashes and the proof is weaker than it looks.
    assert!(
        l.in_doubt_puts.len() <= kills * producers * 2,
        "{} puts in doubt for {kills} kills: calls are failing for other reasons",
        l.in_doubt_puts.len()
    );
    let mut lost = Vec::new();
    for a in &l.acked {
        if !seen.contains_key(a.as_str()) && !in_doubt_get.contains(a.as_str()) {
            lost.push(a.clone());
        }
    }
    assert!(
        lost.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    eprintln!(
        "{} acknowledged, {} in doubt, {} refused (queue full), {} consumed, {} consumed in doubt, {} left on the queue",
        l.acked.len(),
        l.in_doubt_puts.len(),
        l.refused.len(),
        l.consumed.len(),
        l.in_doubt_gets.len(),
        remaining.len()
    );
    (l.acked.len(), l.consumed.len())
}
