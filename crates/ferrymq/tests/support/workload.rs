//! The crash workload shared by the fault-injection tests: producers putting persistent messages
//! (committed, or under syncpoint and backed out) and consumers getting them under syncpoint,
//! each reconnecting whenever a call fails, with a ledger of what each call's outcome promises;
//! and the checker that reads what is left on the queue and holds the ledger to those promises. [`rr`] is the
//! request/responder variant: a get and a reply's put in one unit of work.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
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

/// `f` until it succeeds, at most 10 times, 200 ms apart, printing each failure; the last
/// failure's text if all fail. For the final count, which in HA can meet a failover too.
pub fn retrying<T>(what: &str, mut f: impl FnMut() -> Result<T, MqError>) -> Result<T, String> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if attempt < 10 => {
                eprintln!("{what}: {e}; once more");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(format!("{what} failed {attempt} times, last: {e}")),
        }
    }
}

/// The bodies of the messages on queue `q` of `qm`, in order, read by browsing on a fresh
/// connection and left where they are: a pass that fails has changed nothing and can simply be
/// made again. The queue is opened exclusively too, so the pass waits (fails, to be retried)
/// while a worker's connection still holds it, with a unit of work not yet backed out.
pub fn browse_queue(qm: &Target, q: &str) -> Result<Vec<String>, MqError> {
    let c = connect_retrying(qm, &AtomicBool::new(false)).expect("a connection");
    let h = c.open(q, open::INPUT_EXCLUSIVE | open::BROWSE)?;
    browse_bodies(&c, &h)
}

/// The bodies of the messages on the queue open for browse as `h`, in order.
pub fn browse_bodies(c: &Connection, h: &ObjectHandle) -> Result<Vec<String>, MqError> {
    let mut bodies = Vec::new();
    let mut browse = Browse::First;
    loop {
        let opts = GetOptions {
            browse,
            ..GetOptions::any()
        };
        match c.get(h, &opts) {
            Ok(m) => bodies.push(String::from_utf8(m.body.to_vec()).unwrap()),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return Ok(bodies),
            Err(e) => return Err(e),
        }
        browse = Browse::Next;
    }
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

/// Reads what is left on the queue (by browsing) and checks the ledger: every acknowledged put
/// found exactly once (consumed or left), nothing backed out or refused visible, nothing
/// delivered twice, and no more calls in doubt than `kills` can explain. Returns (acknowledged, consumed) counts.
pub fn check(qm: &Target, ledger: Ledger, kills: usize, producers: usize) -> (usize, usize) {
    // What is left on the queue.
    let remaining = retrying(&format!("reading what {Q} holds"), || browse_queue(qm, Q))
        .unwrap_or_else(|e| panic!("{e}"));
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

/// The request/responder crash workload: requesters put and commit persistent requests on `REQ`;
/// responders get each under syncpoint, put it back as the reply on `REP` under the same unit of
/// work and commit. The checker holds the two queues and the book to what the calls promised.
pub mod rr {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
    use ferrymq_types::{Properties, Reason};

    use super::{browse_queue, connect_retrying, persistent, retrying, Target};

    pub const REQUESTERS: usize = 2;
    pub const RESPONDERS: usize = 2;
    /// The queues, defined once by the test.
    pub const DEFINE: &str =
        "DEFINE QLOCAL(REQ) MAXDEPTH(100000)\nDEFINE QLOCAL(REP) MAXDEPTH(100000)\n";

    #[derive(Default)]
    pub struct Book {
        /// The request's put_commit returned: it is queued or answered, exactly once.
        pub acked: Vec<String>,
        /// The request's put or commit was interrupted: found once at most.
        pub in_doubt_puts: Vec<String>,
        /// The responder's commit returned: its reply is there.
        pub answered: Vec<String>,
        /// The responder's put or commit was interrupted: answered or still queued, not both.
        pub in_doubt_answers: Vec<String>,
    }

    impl Book {
        pub fn progress(&self) -> String {
            format!(
                "{} requests acknowledged, {} answered so far",
                self.acked.len(),
                self.answered.len()
            )
        }
    }

    pub fn requester(id: usize, qm: &Target, stop: &AtomicBool, book: &Mutex<Book>) {
        let mut n = 0u64;
        'conn: while let Some(c) = connect_retrying(qm, stop) {
            let Ok(h) = c.open("REQ", open::OUTPUT) else {
                continue;
            };
            while !stop.load(Ordering::Acquire) {
                let body = format!("R{id}-{n}");
                n += 1;
                match c.put_commit(
                    &h,
                    &persistent(),
                    &Properties::default(),
                    body.clone().into(),
                ) {
                    Ok(_) => book.lock().unwrap().acked.push(body),
                    Err(_) => {
                        book.lock().unwrap().in_doubt_puts.push(body);
                        continue 'conn;
                    }
                }
            }
        }
    }

    pub fn responder(qm: &Target, stop: &AtomicBool, book: &Mutex<Book>) {
        let get = GetOptions {
            syncpoint: Syncpoint::Yes,
            wait: Wait::Ms(50),
            ..GetOptions::any()
        };
        let put = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..Default::default()
        };
        'conn: while let Some(c) = connect_retrying(qm, stop) {
            let (Ok(req), Ok(rep)) = (
                c.open("REQ", open::INPUT_SHARED),
                c.open("REP", open::OUTPUT),
            ) else {
                continue;
            };
            while !stop.load(Ordering::Acquire) {
                let m = match c.get(&req, &get) {
                    Ok(m) => m,
                    Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
                    Err(_) => continue 'conn,
                };
                let body = String::from_utf8(m.body.to_vec()).unwrap();
                let done = c
                    .put(&rep, &persistent(), &Properties::default(), m.body, &put)
                    .and_then(|_| c.commit());
                let mut b = book.lock().unwrap();
                match done {
                    Ok(()) => b.answered.push(body),
                    Err(_) => {
                        b.in_doubt_answers.push(body);
                        continue 'conn;
                    }
                }
            }
        }
    }

    /// Sets the stop flag when dropped, so a fault step that panics still ends the workers.
    struct StopOnDrop<'a>(&'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }

    /// Runs the requesters and responders against `qm` while `faults` injects `kills` faults
    /// (it gets the book to report progress), then stops them and [`check`]s the outcome.
    pub fn run(qm: &Target, kills: usize, faults: impl FnOnce(&Mutex<Book>)) {
        let book = Mutex::new(Book::default());
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&stop);
            for id in 0..REQUESTERS {
                let (stop, book) = (&stop, &book);
                s.spawn(move || requester(id, qm, stop, book));
            }
            for _ in 0..RESPONDERS {
                s.spawn(|| responder(qm, &stop, &book));
            }
            faults(&book);
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        check(qm, book.into_inner().unwrap(), kills);
    }

    /// How many times each body is on queue `q`.
    fn counted(qm: &Target, q: &str) -> HashMap<String, usize> {
        let bodies = retrying(&format!("reading what {q} holds"), || browse_queue(qm, q))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut seen: HashMap<String, usize> = HashMap::new();
        for b in bodies {
            *seen.entry(b).or_default() += 1;
        }
        seen
    }

    /// Reads both queues (by browsing) and checks the book: each request still queued or
    /// answered, never both and never twice; every answer whose commit returned there; nothing
    /// that was never put; no more calls in doubt than `kills` explain; enough work to mean
    /// something.
    fn check(qm: &Target, b: Book, kills: usize) {
        let (queued, replies) = (counted(qm, "REQ"), counted(qm, "REP"));
        for (body, n) in queued.iter().chain(replies.iter()) {
            assert_eq!(*n, 1, "{body} found {n} times on one queue");
            assert!(
                b.acked.contains(body) || b.in_doubt_puts.contains(body),
                "{body} was never put"
            );
        }
        for body in queued.keys() {
            assert!(
                !replies.contains_key(body),
                "{body} is both still queued and answered: the get and the reply's put were not one unit of work"
            );
        }
        for body in &b.answered {
            assert!(
                replies.contains_key(body),
                "{body}'s reply was committed and is gone"
            );
        }
        let lost: Vec<&String> = b
            .acked
            .iter()
            .filter(|a| !queued.contains_key(*a) && !replies.contains_key(*a))
            .collect();
        assert!(
            lost.is_empty(),
            "{} acknowledged requests neither queued nor answered, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        assert!(
            b.in_doubt_puts.len() <= kills * REQUESTERS * 2,
            "{} puts in doubt for {kills} kills: calls are failing for other reasons",
            b.in_doubt_puts.len()
        );
        eprintln!(
            "{} requests acknowledged ({} in doubt), {} answered ({} in doubt); {} left queued, {} replies",
            b.acked.len(),
            b.in_doubt_puts.len(),
            b.answered.len(),
            b.in_doubt_answers.len(),
            queued.len(),
            replies.len()
        );
        assert!(
            b.answered.len() >= 200,
            "too little work to prove anything: {} answered",
            b.answered.len()
        );
    }
}
