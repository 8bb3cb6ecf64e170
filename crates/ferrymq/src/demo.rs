//! The demo: creates a queue manager in a fresh temporary $FERRYMQ_HOME on a free TCP port, starts
//! it, runs requesters and responders against it over TCP for a few seconds (each requester puts a
//! request and commits, then waits for its reply by CorrelId on its own temporary dynamic queue),
//! prints the round-trip rate, then ends and deletes the queue manager. SIGINT (Ctrl-C) or SIGTERM
//! cuts the run short and still ends and deletes the queue manager and the temporary directory
//! (the queue manager runs in its own process group, so Ctrl-C at a terminal does not reach it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::descriptor::msg_type;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};

use crate::cli;
use crate::lifecycle::{self, Fail, Res};

const QMGR: &str = "DEMO";
/// Exit status after an interrupted (but cleaned-up) run: 128 + SIGINT, as shells report it.
const EXIT_INTERRUPTED: i32 = 130;

/// Set by SIGINT or SIGTERM.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Acquire)
}

/// Replaces the default action of SIGINT and SIGTERM (die at once, leaving the queue manager
/// running) with setting [`INTERRUPTED`]; the run then winds down and cleans up.
fn watch_signals() -> Result<(), Fail> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| other(format!("demo: {e}")))?;
    let (mut int, mut term) = {
        let _in = rt.enter();
        let int = signal(SignalKind::interrupt()).map_err(|e| other(format!("demo: {e}")))?;
        let term = signal(SignalKind::terminate()).map_err(|e| other(format!("demo: {e}")))?;
        (int, term)
    };
    std::thread::Builder::new()
        .name("demo-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                loop {
                    let name = tokio::select! {
                        _ = int.recv() => "SIGINT",
                        _ = term.recv() => "SIGTERM",
                    };
                    if !INTERRUPTED.swap(true, Ordering::AcqRel) {
                        say(&format!(
                            "demo: {name} received; ending the queue manager and removing its directory"
                        ));
                    }
                }
            })
        })
        .map_err(|e| other(format!("demo: {e}")))?;
    Ok(())
}

/// println! that cannot panic (the terminal or pipe may be gone by now).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}
/// The development configuration's (`crtmqm --dev`) first queue: user 'app' may put and get it.
const REQUEST_QUEUE: &str = "DEV.QUEUE.1";

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

pub fn run(p: &cli::Demo) -> Res {
    let (seconds, requesters, size, persistent) = (p.seconds, p.requesters, p.size, p.persistent);
    watch_signals()?;
    let home = std::env::temp_dir().join(format!("ferrymq-demo-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| other(format!("demo: {e}")))?;
    // The lifecycle commands and the child queue manager find their data through this variable.
    std::env::set_var("FERRYMQ_HOME", &home);
    say(&format!("demo: FERRYMQ_HOME={}", home.display()));
    let port = free_port()?;
    let result = (|| {
        lifecycle::crtmqm(&cli::Crtmqm {
            p: Some(port),
            dev: true,
            name: QMGR.into(),
            ..Default::default()
        })?;
        lifecycle::strmqm(&cli::Strmqm {
            name: QMGR.into(),
            ..Default::default()
        })?;
        let r = workload(port, seconds, requesters, size, persistent);
        lifecycle::endmqm(&cli::Endmqm {
            i: true,
            w: true,
            name: QMGR.into(),
            ..Default::default()
        })?;
        r
    })();
    let _ = lifecycle::dltmqm(&cli::Dltmqm {
        name: QMGR.into(),
        ..Default::default()
    });
    let _ = std::fs::remove_dir_all(&home);
    if interrupted() {
        return Err(Fail {
            code: EXIT_INTERRUPTED,
            message: match result {
                Ok(()) => "demo: interrupted; the queue manager was ended and deleted".into(),
                Err(e) => format!("demo: interrupted; {}", e.message),
            },
        });
    }
    result
}

/// A client connection as the development configuration's application user, on its channel
/// (with app's password when crtmqm was given one in FERRYMQ_APP_PASSWORD).
fn connect_app(conname: &str, app: &str) -> Result<Connection, Fail> {
    let mut o = ferrymq_client::ConnectOptions::client(QMGR, conname).map_err(mq)?;
    o.app_name = app.to_string();
    o.channel = crate::initial::DEV_APP_CHANNEL.to_string();
    o.user = crate::initial::DEV_APP_USER.to_string();
    o.password = std::env::var("FERRYMQ_APP_PASSWORD").unwrap_or_default();
    Connection::connect(o).map_err(mq)
}

fn workload(port: u16, seconds: u64, requesters: usize, size: usize, persistent: bool) -> Res {
    let conname = format!("127.0.0.1({port})");
    let stop = Arc::new(AtomicBool::new(false));
    let trips = Arc::new(AtomicU64::new(0));
    let latency_us = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..requesters {
        let c = connect_app(&conname, "demo responder")?;
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || responder(c, stop)));
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    for _ in 0..requesters {
        let c = connect_app(&conname, "demo requester")?;
        let (trips, latency_us) = (trips.clone(), latency_us.clone());
        threads.push(std::thread::spawn(move || {
            requester(c, deadline, size, persistent, trips, latency_us)
        }));
    }
    say(&format!(
        "demo: {requesters} requesters and {requesters} responders over TCP port {port}, {size}-byte {} requests, {seconds} s",
        if persistent { "persistent" } else { "non-persistent" }
    ));
    let mut next_report = start + Duration::from_secs(1);
    while Instant::now() < deadline && !interrupted() {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(1);
            say(&format!(
                "demo: {:>8} round trips so far",
                trips.load(Ordering::Relaxed)
            ));
        }
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
    say(&format!("demo: {n} round trips in {elapsed:.1} s = {:.0} round trips/s, mean latency {avg_ms:.2} ms", n as f64 / elapsed));
    match first_err {
        Some(e) => Err(e),
        None if n == 0 && !interrupted() => Err(other("demo: no round trip completed")),
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
            // Under DEV.**, where 'app' may put the replies.
            "DEV.DEMO.REPLY.*",
            open::INPUT_EXCLUSIVE,
        )
        .map_err(mq)?;
    let body = Bytes::from(vec![b'x'; size]);
    while Instant::now() < deadline && !interrupted() {
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
