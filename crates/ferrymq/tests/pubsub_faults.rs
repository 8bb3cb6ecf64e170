//! Publish/subscribe under SIGKILL with a ledger: publishers publish persistent messages (one at
//! a time outside syncpoint, or several in a unit of work that is committed or backed out) to
//! four durable subscriptions (two wildcards, one topic, one selector) while their subscribers
//! get under syncpoint and commit, and the queue manager is killed with SIGKILL at random
//! moments and restarted, ten times. Afterwards every subscription holds each publication it
//! matches exactly once (got and committed, or still queued): no acknowledged publication lost,
//! none delivered twice, nothing backed out visible, and a publication whose put was interrupted
//! reached either every subscription it matches or none of them. The same load and count run
//! against a high-availability group of three instances whose active instance is killed six
//! times: the subscriptions and their publications go over with the replicated log.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::SubscriptionOptions;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, PropertyValue, Reason};
use rand::{Rng, SeedableRng};
use support::workload::{browse_bodies, connect_retrying, retrying, Target};
use support::{Home, Qm};

const KILLS: usize = 10;
const FAILOVERS: usize = 6;
const PUBLISHERS: usize = 3;

/// The durable subscriptions: name, topic string, selector, and which publications they match
/// (publisher id, sequence number).
struct Sub {
    name: &'static str,
    topic: &'static str,
    selector: Option<&'static str>,
    matches: fn(usize, u64) -> bool,
}

const SUBS: [Sub; 4] = [
    Sub {
        name: "LOAD.ALL",
        topic: "load/#",
        selector: None,
        matches: |_, _| true,
    },
    Sub {
        name: "LOAD.LEVEL",
        topic: "load/+",
        selector: None,
        matches: |_, _| true,
    },
    Sub {
        name: "LOAD.P1",
        topic: "load/p1",
        selector: None,
        matches: |p, _| p == 1,
    },
    Sub {
        name: "LOAD.ODD",
        topic: "load/#",
        selector: Some("parity = 1"),
        matches: |_, n| n % 2 == 1,
    },
];

#[derive(Default)]
struct Ledger {
    /// Publications whose put (outside syncpoint) or commit returned.
    acked: Vec<String>,
    /// The put or the commit was interrupted: in every matching subscription, or in none.
    in_doubt: Vec<String>,
    /// Put under syncpoint and backed out: never seen.
    backed_out: Vec<String>,
    /// Refused because a matching subscription's queue was full: never seen.
    refused: Vec<String>,
    /// Per subscription: got under syncpoint and the commit returned.
    consumed: HashMap<&'static str, Vec<String>>,
    /// Per subscription: got, but the commit was interrupted (consumed or still queued).
    consumed_in_doubt: HashMap<&'static str, Vec<String>>,
}

/// Sets the flag when dropped, also while unwinding.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn body(id: usize, n: u64) -> String {
    format!("p{id}-{n}")
}

fn parse(body: &str) -> (usize, u64) {
    let (p, n) = body[1..].split_once('-').expect("publication body");
    (p.parse().unwrap(), n.parse().unwrap())
}

fn publication(n: u64) -> (MessageDescriptor, Properties) {
    let mut props = Properties::default();
    props.set("parity", PropertyValue::Int((n % 2) as i64));
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    (md, props)
}

fn publisher(id: usize, qm: &Target, stop: &AtomicBool, ledger: &Mutex<Ledger>) {
    let mut n = 0u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x9B5 + id as u64);
    let topic = format!("load/p{id}");
    'outer: while !stop.load(Ordering::Acquire) {
        let Some(c) = connect_retrying(qm, stop) else {
            break;
        };
        let Ok(h) = c.open_topic("", &topic, open::OUTPUT) else {
            continue;
        };
        while !stop.load(Ordering::Acquire) {
            if rng.gen_ratio(1, 3) {
                // A unit of work of 1-5 publications, committed or (one time in four) backed out.
                let sp = PutOptions {
                    syncpoint: Syncpoint::Yes,
                    ..Default::default()
                };
                let count = rng.gen_range(1..=5);
                let back_out = rng.gen_ratio(1, 4);
                let mut uow = Vec::new();
                for _ in 0..count {
                    let b = body(id, n);
                    n += 1;
                    let (md, props) = publication(n - 1);
                    uow.push(b.clone());
                    if let Err(e) = c.put(&h, &md, &props, Bytes::from(b), &sp) {
                        // Not committed: the queue manager backs the unit of work out when the
                        // connection goes.
                        ledger.lock().unwrap().backed_out.extend(uow);
                        if e.reason == Reason::Q_FULL {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        continue 'outer;
                    }
                }
                if back_out {
                    // A backout that fails leaves the unit of work to be backed out by the
                    // queue manager: never visible either way.
                    ledger.lock().unwrap().backed_out.extend(uow);
                    if c.backout().is_err() {
                        continue 'outer;
                    }
                    continue;
                }
                match c.commit() {
                    Ok(()) => ledger.lock().unwrap().acked.extend(uow),
                    Err(_) => {
                        ledger.lock().unwrap().in_doubt.extend(uow);
                        continue 'outer;
                    }
                }
            } else {
                let b = body(id, n);
                n += 1;
                let (md, props) = publication(n - 1);
                match c.put(
                    &h,
                    &md,
                    &props,
                    Bytes::from(b.clone()),
                    &PutOptions::default(),
                ) {
                    Ok(_) => ledger.lock().unwrap().acked.push(b),
                    Err(e) if e.reason == Reason::Q_FULL => {
                        // A subscription's queue is full: the publication went to nobody.
                        ledger.lock().unwrap().refused.push(b);
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => {
                        ledger.lock().unwrap().in_doubt.push(b);
                        continue 'outer;
                    }
                }
            }
        }
    }
}

/// The bodies of the publications on `sub`'s queue, in order, left where they are.
fn browse_all(target: &Target, sub: &Sub) -> Result<Vec<String>, MqError> {
    let c = connect_retrying(target, &AtomicBool::new(false)).expect("a connection");
    let s = c.subscribe(&durable(sub))?;
    let h = c.open(&s.queue_name, open::BROWSE)?;
    browse_bodies(&c, &h)
}

fn durable(sub: &Sub) -> SubscriptionOptions {
    SubscriptionOptions {
        topic: sub.topic.into(),
        name: Some(sub.name.into()),
        durable: true,
        resume: true,
        create: true,
        selector: sub.selector.map(str::to_string),
        ..Default::default()
    }
}

fn subscriber(sub: &'static Sub, qm: &Target, stop: &AtomicBool, ledger: &Mutex<Ledger>) {
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        wait: Wait::Ms(50),
        ..GetOptions::any()
    };
    'outer: while !stop.load(Ordering::Acquire) {
        let Some(c) = connect_retrying(qm, stop) else {
            break;
        };
        // Resuming can meet the subscription still held by the connection the kill cut (the
        // queue manager clears it as it notices): try again.
        let Ok(s) = c.subscribe(&durable(sub)) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let q = s.queue.as_ref().expect("a managed queue");
        while !stop.load(Ordering::Acquire) {
            match c.get(q, &opts) {
                Ok(m) => {
                    let b = String::from_utf8(m.body.to_vec()).unwrap();
                    match c.commit() {
                        Ok(()) => ledger
                            .lock()
                            .unwrap()
                            .consumed
                            .entry(sub.name)
                            .or_default()
                            .push(b),
                        Err(_) => {
                            ledger
                                .lock()
                                .unwrap()
                                .consumed_in_doubt
                                .entry(sub.name)
                                .or_default()
                                .push(b);
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

#[test]
fn durable_subscribers_get_every_acknowledged_publication_once_across_sigkills() {
    let home = Home::new();
    // A small log, so checkpoints and the log's wrap happen during the run too.
    let qm = Qm::create(&home, "PSKILL", &["-lp", "2", "-lf", "256"]);
    qm.set_ini("Log", "CheckpointIntervalMs", "200");
    qm.restart();
    let target = Target {
        name: qm.name.clone(),
        conname: qm.conname(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EB5);
    let fault = || {
        std::thread::sleep(Duration::from_millis(rng.gen_range(200..700)));
        qm.kill9();
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..50)));
        qm.restart();
        "killed and restarted".to_string()
    };
    publish_and_count_across(&target, KILLS, fault, || support::error_log(&qm.dir()));
}

/// The same load and the same count on a high-availability group of three instances: the
/// active instance is killed with SIGKILL, another takes over with the subscriptions, their
/// queued publications and the retained ones from the replicated log, and the killed one is
/// started again and rejoins as a replica.
#[test]
fn durable_subscribers_get_every_acknowledged_publication_once_across_failovers() {
    // A small ring, so snapshots and log reuse happen during the run too.
    let g = support::ha::HaGroup::start("PSHAKILL", &["-lp", "3", "-lf", "512"]);
    let target = Target {
        name: g.name.clone(),
        conname: g.conname(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EB6);
    let fault = || {
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..900)));
        let active = g.wait_active(Duration::from_secs(30));
        g.kill9(active);
        let killed = std::time::Instant::now();
        let next = g.wait_active(Duration::from_secs(30));
        assert_ne!(next, active, "the killed instance cannot be active");
        let took = killed.elapsed().as_millis();
        g.start_instance(active);
        format!("killed instance {active}; instance {next} active after {took} ms")
    };
    publish_and_count_across(&target, FAILOVERS, fault, || g.logs());
}

/// Publishers and subscribers run against `target` while `fault` strikes `rounds` times (each
/// call waits a while, injects one fault and says what it did), then every subscription's
/// deliveries are counted against the ledger. `logs` gives the queue managers' error logs for
/// a failure's message.
fn publish_and_count_across(
    target: &Target,
    rounds: usize,
    mut fault: impl FnMut() -> String,
    logs: impl Fn() -> String,
) {
    {
        // The subscriptions exist before anything is published (made again on a connection
        // that breaks: in HA even the start can meet a failover).
        for s in &SUBS {
            retrying(&format!("subscribing {}", s.name), || {
                let c = connect_retrying(target, &AtomicBool::new(false)).expect("a connection");
                c.subscribe(&durable(s)).map(drop)
            })
            .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs()));
        }
    }
    let stop = AtomicBool::new(false);
    let ledger = Mutex::new(Ledger::default());
    std::thread::scope(|s| {
        for id in 0..PUBLISHERS {
            let (stop, ledger) = (&stop, &ledger);
            s.spawn(move || publisher(id, target, stop, ledger));
        }
        for sub in &SUBS {
            let (stop, ledger) = (&stop, &ledger);
            s.spawn(move || subscriber(sub, target, stop, ledger));
        }
        // A fault that fails its assertion still stops the workers, so the panic is reported.
        let _stop = StopOnDrop(&stop);
        for round in 0..rounds {
            let what = fault();
            let before = ledger.lock().unwrap().acked.len();
            eprintln!("round {round}: {what}, with {before} acknowledged publications so far");
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Release);
    });
    let l = ledger.into_inner().unwrap();

    // What each subscription still holds, browsed: a pass that fails (in HA the drain can meet
    // a failover too) has changed nothing and is simply made again.
    let mut remaining: HashMap<&str, Vec<String>> = HashMap::new();
    for sub in &SUBS {
        let left = retrying(&format!("reading what {} holds", sub.name), || {
            browse_all(target, sub)
        })
        .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs()));
        remaining.insert(sub.name, left);
    }

    let acked: HashSet<&str> = l.acked.iter().map(String::as_str).collect();
    let in_doubt: HashSet<&str> = l.in_doubt.iter().map(String::as_str).collect();
    let never: HashSet<&str> = l
        .backed_out
        .iter()
        .chain(l.refused.iter())
        .map(String::as_str)
        .collect();
    assert!(
        l.acked.len() >= 300,
        "too little load to prove anything: {} acknowledged publications",
        l.acked.len()
    );
    assert!(
        l.in_doubt.len() <= rounds * PUBLISHERS * 5,
        "{} publications in doubt for {rounds} faults: calls are failing for other reasons",
        l.in_doubt.len()
    );
    // Per in-doubt publication: the subscriptions that certainly hold or held it (delivered
    // under a commit that returned, or left at the end), and those whose subscriber got it and
    // then could not learn whether its commit took. A get sees a publication as soon as the
    // queue manager has it, before it is durable; a kill then takes back both the publication
    // and the get, so a copy consumed in doubt does not prove the publication exists.
    let mut reached: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut maybe: HashMap<&str, Vec<&str>> = HashMap::new();
    let empty = Vec::new();
    for sub in &SUBS {
        let consumed = l.consumed.get(sub.name).unwrap_or(&empty);
        let consumed_in_doubt: HashSet<&str> = l
            .consumed_in_doubt
            .get(sub.name)
            .unwrap_or(&empty)
            .iter()
            .map(String::as_str)
            .collect();
        let left = &remaining[sub.name];
        assert!(
            !consumed.is_empty(),
            "{}: the subscriber made no progress",
            sub.name
        );
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for b in consumed.iter().chain(left.iter()) {
            *seen.entry(b.as_str()).or_default() += 1;
        }
        for (b, k) in &seen {
            assert_eq!(*k, 1, "{}: {b} delivered {k} times", sub.name);
            assert!(
                !never.contains(b),
                "{}: {b}, backed out or refused, became visible",
                sub.name
            );
            assert!(
                acked.contains(b) || in_doubt.contains(b),
                "{}: {b} was never published",
                sub.name
            );
            let (p, n) = parse(b);
            assert!((sub.matches)(p, n), "{}: {b} does not match it", sub.name);
        }
        for b in seen.keys().filter(|b| in_doubt.contains(*b)) {
            reached.entry(b).or_default().push(sub.name);
        }
        for b in consumed_in_doubt.iter().filter(|b| in_doubt.contains(*b)) {
            maybe.entry(b).or_default().push(sub.name);
        }
        let lost: Vec<&&str> = acked
            .iter()
            .filter(|b| {
                let (p, n) = parse(b);
                (sub.matches)(p, n) && !seen.contains_key(**b) && !consumed_in_doubt.contains(**b)
            })
            .collect();
        assert!(
            lost.is_empty(),
            "{}: {} acknowledged publications lost, e.g. {:?}",
            sub.name,
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        eprintln!(
            "{}: {} consumed, {} consumed in doubt, {} left",
            sub.name,
            consumed.len(),
            consumed_in_doubt.len(),
            left.len()
        );
    }
    // All copies or none: an interrupted publication that certainly reached one subscription
    // reached every subscription it matches (a copy consumed in doubt may be the one it had).
    for (b, subs) in &reached {
        let (p, n) = parse(b);
        let want: Vec<&str> = SUBS
            .iter()
            .filter(|s| (s.matches)(p, n))
            .map(|s| s.name)
            .collect();
        let mut got = subs.clone();
        got.extend(maybe.get(b).into_iter().flatten());
        got.sort_unstable();
        got.dedup();
        let mut want = want;
        want.sort_unstable();
        assert_eq!(
            got, want,
            "in-doubt publication {b} reached only some subscriptions"
        );
    }
    eprintln!(
        "{} acknowledged, {} in doubt ({} of them delivered), {} backed out, {} refused (queue full)",
        l.acked.len(),
        l.in_doubt.len(),
        reached.len(),
        l.backed_out.len(),
        l.refused.len()
    );
}
