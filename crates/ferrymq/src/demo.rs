//! The demo: creates a queue manager in a fresh temporary $FERRYMQ_HOME on a free TCP port, starts
//! it, runs requesters and responders against it over TCP for a few seconds (each requester puts a
//! request and commits, then waits for its reply by CorrelId on its own temporary dynamic queue),
//! prints the round-trip rate, then ends and deletes the queue manager.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::descriptor::msg_type;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};

use crate::lifecycle::{self, Fail, Res};
use crate::mqargs::{parse, Flag};
use crate::samples::connect;

const QMGR: &str = "DEMO";
const REQUEST_QUEUE: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

fn other(m: impl Into<String>) -> Fail {
    Fail {
        code: 1,
        message: m.into(),
    }
}

fn mq(e: ferrymq_types::MqError) -> Fail {
    other(e.to_string())
}

fn free_port() -> Result<u16, Fail> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| other(format!("demo: no free port: {e}")))?;
    Ok(l.local_addr().map_err(|e| other(e.to_string()))?.port())
}

pub fn run(args: &[String]) -> Res {
    let p = parse(
        "demo",
        args,
        &[
            Flag::Value("--seconds"),
            Flag::Value("--requesters"),
            Flag::Switch("--persistent"),
            Flag::Value("--size"),
        ],
    )
    .map_err(other)?;
    let seconds: u64 = p.num("--seconds").map_err(other)?.unwrap_or(5);
    let requesters: usize = p.num("--requesters").map_err(other)?.unwrap_or(4);
    let size: usize = p.num("--size").map_err(other)?.unwrap_or(2048);
    let persistent = p.has("--persistent");
    let home = std::env::temp_dir().join(format!("ferrymq-demo-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| other(format!("demo: {e}")))?;
    // The lifecycle commands and the child queue manager find their data through this variable.
    std::env::set_var("FERRYMQ_HOME", &home);
    println!("demo: FERRYMQ_HOME={}", home.display());
    let port = free_port()?;
    let result = (|| {
        lifecycle::crtmqm(&["-p".into(), port.to_string(), QMGR.into()])?;
        lifecycle::strmqm(&[QMGR.into()])?;
        let r = workload(port, seconds, requesters, size, persistent);
        lifecycle::endmqm(&["-i".into(), "-w".into(), QMGR.into()])?;
        r
    })();
    let _ = lifecycle::dltmqm(&[QMGR.into()]);
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn workload(port: u16, seconds: u64, requesters: usize, size: usize, persistent: bool) -> Res {
    let conname = format!("127.0.0.1({port})");
    let stop = Arc::new(AtomicBool::new(false));
    let trips = Arc::new(AtomicU64::new(0));
    let latency_us = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..requesters {
        let c = connect(QMGR, Some(&conname), "demo responder")?;
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || responder(c, stop)));
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    for _ in 0..requesters {
        let c = connect(QMGR, Some(&conname), "demo requester")?;
        let (trips, latency_us) = (trips.clone(), latency_us.clone());
        threads.push(std::thread::spawn(move || {
            requester(c, deadline, size, persistent, trips, latency_us)
        }));
    }
    println!(
        "demo: {requesters} requesters and {requesters} responders over TCP port {port}, {size}-byte {} requests, {seconds} s",
        if persistent { "persistent" } else { "non-persistent" }
    );
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        println!(
            "demo: {:>8} round trips so far",
            trips.load(Ordering::Relaxed)
        );
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    let mut first_err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(other("a demo thread panicked"));
            }
        }
    }
    let n = trips.load(Ordering::Relaxed);
    let avg_ms = if n > 0 {
        latency_us.load(Ordering::Relaxed) as f64 / n as f64 / 1000.0
    } else {
        0.0
    };
    println!("demo: {n} round trips in {elapsed:.1} s = {:.0} round trips/s, mean latency {avg_ms:.2} ms", n as f64 / elapsed);
    match first_err {
        Some(e) => Err(e),
        None if n == 0 => Err(other("demo: no round trip completed")),
        None => Ok(()),
    }
}

fn requester(
    c: Connection,
    deadline: Instant,
    size: usize,
    persistent: bool,
    trips: Arc<AtomicU64>,
    latency_us: Arc<AtomicU64>,
) -> Res {
    let req_q = c.open(REQUEST_QUEUE, open::OUTPUT).map_err(mq)?;
    let reply_q = c
        .open_dynamic(
            "SYSTEM.DEFAULT.MODEL.QUEUE",
            "DEMO.REPLY.*",
            open::INPUT_EXCLUSIVE,
        )
        .map_err(mq)?;
    let body = Bytes::from(vec![b'x'; size]);
    while Instant::now() < deadline {
        let t = Instant::now();
        let md = MessageDescriptor {
            msg_type: msg_type::REQUEST,
            persistence: if persistent {
                Persistence::Persistent
            } else {
                Persistence::NotPersistent
            },
            reply_to_q: reply_q.name.clone(),
            ..Default::default()
        };
        let (msg_id, _) = c
            .put_commit(&req_q, &md, &Properties::default(), body.clone())
            .map_err(mq)?;
        let opts = GetOptions {
            wait: Wait::Ms(10_000),
            match_correl_id: Some(msg_id),
            ..GetOptions::any()
        };
        c.get(&reply_q, &opts).map_err(mq)?;
        trips.fetch_add(1, Ordering::Relaxed);
        latency_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
    }
    c.close(&reply_q, 0).map_err(mq)?;
    c.disconnect().map_err(mq)
}

fn responder(c: Connection, stop: Arc<AtomicBool>) -> Res {
    let q = c.open(REQUEST_QUEUE, open::INPUT_SHARED).map_err(mq)?;
    let get = GetOptions {
        wait: Wait::Ms(200),
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    while !stop.load(Ordering::Acquire) {
        let m = match c.get(&q, &get) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
            Err(e) => return Err(mq(e)),
        };
        let md = MessageDescriptor {
            msg_type: msg_type::REPLY,
            correl_id: m.md.msg_id,
            // Replies go to temporary dynamic queues, which hold only non-persistent messages.
            persistence: Persistence::NotPersistent,
            ..Default::default()
        };
        let opts = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..Default::default()
        };
        c.put1(&m.md.reply_to_q, &md, &Properties::default(), m.body, &opts)
            .map_err(mq)?;
        c.commit().map_err(mq)?;
    }
    c.disconnect().map_err(mq)
}
