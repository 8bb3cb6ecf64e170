//! Disaster recovery with real processes: a DR primary ships to a secondary through a relay
//! that adds 200 ms of round trip (so the recovery site really lags), producers and a consumer
//! work on the primary, and the whole main site is killed with SIGKILL. The recovery site is
//! then promoted (`makedrprimary`, `strmqm`) and drained. The checker proves that what the
//! disaster took is at most the configured bound (`-drlag`), measured exactly in log bytes from
//! the records the lost work would have written, and that nothing arrives twice or corrupted.
//! A second run shows a secondary that was down catching up with the difference only; another,
//! that a planned end (`endmqm -i`) under the same load loses nothing.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::options::{open, GetOptions, Syncpoint, Wait};
use ferrymq_types::{Properties, Reason};
use support::dr::{body, check_body, field, persistent, record_sizes, BODY, RING_FRAMING};
use support::{free_port, relay, relay_limited, Home, Qm};

const QM: &str = "DRQM";
const Q: &str = "DR.PUT";
/// The consumer takes messages from here, filled before the load starts, so that a lost put (a
/// message missing from `Q`) and a lost consumption (a message back on `CQ`) are both visible:
/// were they on one queue, a put and its consumption lost together would leave no trace.
const CQ: &str = "DR.CONSUME";
const PREFILL: u64 = 2000;
/// Room under the bound, in log bytes, at which the link is cut: a few puts' worth.
const ROOM: u64 = 16 * 1024;
const MAX_LAG: u64 = 256 * 1024;
/// Round trip the relay adds to the DR link: long enough that the bound, not the link, limits
/// the producers (256 KiB per 200 ms is about 570 puts/s), so the recovery site lags by most of
/// the bound when the disaster strikes.
const RTT_MS: u32 = 200;

#[derive(Default)]
struct Ledger {
    acked: Vec<String>,
    in_doubt: Vec<String>,
    consumed: Vec<String>,
}

/// Puts until the first failure (the main site is gone).
fn producer(id: usize, conname: String, stop: Arc<AtomicBool>, ledger: Arc<Mutex<Ledger>>) {
    let c = Connection::connect(ConnectOptions::client(QM, &conname).unwrap()).unwrap();
    let h = c.open(Q, open::OUTPUT).unwrap();
    let mut n = 0;
    while !stop.load(Ordering::Acquire) {
        let b = body(id, n);
        let name = b[..b.find('|').unwrap()].to_string();
        n += 1;
        match c.put_commit(&h, &persistent(), &Properties::default(), Bytes::from(b)) {
            Ok(_) => ledger.lock().unwrap().acked.push(name),
            Err(_) => {
                ledger.lock().unwrap().in_doubt.push(name);
                return;
            }
        }
    }
}

/// Gets under syncpoint and commits, until the first failure.
fn consumer(conname: String, stop: Arc<AtomicBool>, ledger: Arc<Mutex<Ledger>>) {
    let c = Connection::connect(ConnectOptions::client(QM, &conname).unwrap()).unwrap();
    let h = c.open(CQ, open::INPUT_SHARED).unwrap();
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        wait: Wait::Ms(50),
        ..GetOptions::any()
    };
    while !stop.load(Ordering::Acquire) {
        match c.get(&h, &opts) {
            Ok(m) => {
                let name = check_body(std::str::from_utf8(&m.body).unwrap());
                if c.commit().is_err() {
                    return; // in doubt: consumed or not, either is allowed
                }
                ledger.lock().unwrap().consumed.push(name);
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {}
            Err(_) => return,
        }
    }
}

/// Waits for the primary's first contact with the secondary, then defines the producers' queue.
fn linked_with_queue(main: &Home) {
    wait_for(main, "the primary never reached the secondary", |s| {
        s.contains("DRSTATUS(Normal)")
    });
    let out = main.run_with_input(
        &["runmqsc", QM],
        &format!("DEFINE QLOCAL({Q}) MAXDEPTH(100000)\n"),
    );
    assert!(out.status.success(), "{out:?}");
}

/// `n` producer threads putting on `primary` until `stop` (or their first failure).
fn producers(
    n: usize,
    primary: &Qm,
    stop: &Arc<AtomicBool>,
    ledger: &Arc<Mutex<Ledger>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|id| {
            let (c, s, l) = (primary.conname(), stop.clone(), ledger.clone());
            std::thread::spawn(move || producer(id, c, s, l))
        })
        .collect()
}

fn dr_status(home: &Home) -> String {
    home.ok(&["dspmq", "-o", "dr", "-m", QM])
}

fn wait_for(home: &Home, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let s = dr_status(home);
        if pred(&s) {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{what}: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn losing_the_main_site_loses_at_most_the_bound_and_nothing_arrives_twice() {
    let (main, rec) = (Home::new(), Home::new());
    let (dr_port, relay_port) = (free_port(), free_port());
    let lag = MAX_LAG.to_string();
    let secondary = Qm::start(
        &rec,
        QM,
        &["-dr", "secondary", "-drl", &format!("127.0.0.1({dr_port})")],
    );
    let link = relay(relay_port, dr_port, RTT_MS);
    let primary = Qm::start(
        &main,
        QM,
        &[
            "-dr",
            "primary",
            "-drr",
            &format!("127.0.0.1({relay_port})"),
            "-drlag",
            &lag,
        ],
    );
    wait_for(&main, "the primary never reached the secondary", |s| {
        s.contains("DRSTATUS(Normal)")
    });
    let out = main.run_with_input(
        &["runmqsc", QM],
        &format!("DEFINE QLOCAL({Q}) MAXDEPTH(100000)\nDEFINE QLOCAL({CQ}) MAXDEPTH(100000)\n"),
    );
    assert!(out.status.success(), "{out:?}");
    {
        let c = primary.connect();
        let h = c.open(CQ, open::OUTPUT).unwrap();
        for n in 0..PREFILL {
            c.put_commit(
                &h,
                &persistent(),
                &Properties::default(),
                Bytes::from(body(99, n)),
            )
            .unwrap();
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut workers = Vec::new();
    for id in 0..3 {
        let (c, s, l) = (primary.conname(), stop.clone(), ledger.clone());
        workers.push(std::thread::spawn(move || producer(id, c, s, l)));
    }
    {
        let (c, s, l) = (primary.conname(), stop.clone(), ledger.clone());
        workers.push(std::thread::spawn(move || consumer(c, s, l)));
    }
    // Run a while, then strike when the bound has room left: just after an acknowledgement
    // came back, before the producers have used the room it made. With the link's 200 ms round
    // trip the producers are held at the bound most of the time, and a secondary that already
    // holds everything unacknowledged (its acknowledgements wait for its next sync and the trip
    // back) would lose nothing if struck then. With room, the primary goes on acknowledging work
    // after the link is gone, and that work is lost: some loss, and at most the bound.
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    let before = loop {
        let s = dr_status(&main);
        let bytes: u64 = field(&s, "LAGBYTES").unwrap().parse().unwrap();
        if bytes + ROOM < MAX_LAG || t.elapsed() > Duration::from_secs(20) {
            break s;
        }
    };
    let lag_seen: u64 = field(&before, "LAGBYTES").unwrap().parse().unwrap();
    assert!(
        lag_seen <= MAX_LAG + 2 * 1024 * 1024,
        "lag {lag_seen} far past the bound: {before}"
    );

    // The disaster: the main site's network goes first (the relay is killed, with what it still
    // held), and the rest of the site a moment later — long enough for the primary to release
    // everything the bound allows, so the loss is as large as the bound lets it be.
    drop(link);
    std::thread::sleep(Duration::from_millis(200));
    let cut = dr_status(&main);
    assert!(cut.contains("DRSTATUS(Disconnected)"), "{cut}");
    primary.kill9();
    stop.store(true, Ordering::Release);
    for w in workers {
        w.join().unwrap();
    }

    let held = dr_status(&rec);
    rec.ok(&["makedrprimary", "-m", QM]);
    rec.ok(&["strmqm", QM]);
    let c = secondary.connect();
    let drain = |queue: &str| {
        let h = c.open(queue, open::INPUT_EXCLUSIVE).unwrap();
        let mut found: Vec<String> = Vec::new();
        let mut sample = None;
        loop {
            match c.get(&h, &GetOptions::any()) {
                Ok(m) => {
                    found.push(check_body(std::str::from_utf8(&m.body).unwrap()));
                    sample.get_or_insert(m);
                }
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
                Err(e) => panic!("draining {queue} at the recovery site: {e}"),
            }
        }
        (found, sample)
    };
    let (found, sample) = drain(Q);
    let (left, _) = drain(CQ);
    drop(c);

    let l = ledger.lock().unwrap();
    let acked: HashSet<&str> = l.acked.iter().map(String::as_str).collect();
    let in_doubt: HashSet<&str> = l.in_doubt.iter().map(String::as_str).collect();
    let consumed: HashSet<&str> = l.consumed.iter().map(String::as_str).collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for f in found.iter().chain(&left) {
        *seen.entry(f.as_str()).or_default() += 1;
    }
    for (name, n) in &seen {
        assert_eq!(*n, 1, "{name} is at the recovery site {n} times");
        assert!(
            acked.contains(name) || in_doubt.contains(name) || name.starts_with("P99-"),
            "{name} at the recovery site was never put"
        );
    }
    assert!(
        left.len() as u64 + consumed.len() as u64 >= PREFILL,
        "consumed messages vanished beyond what was consumed"
    );
    // Lost puts: acknowledged on the main site, not at the recovery site.
    let lost_puts = acked.iter().filter(|a| !seen.contains_key(*a)).count() as u64;
    // Lost consumptions: committed gets the recovery site never heard of (the message is there
    // again). Each is a lost log record like a lost put, and counts against the bound.
    let lost_gets = consumed.iter().filter(|c| seen.contains_key(*c)).count() as u64;
    let (put_bytes, get_bytes) = sample
        .as_ref()
        .map_or((0, 0), |m| record_sizes(m, Q, CQ, RING_FRAMING));
    let lost_bytes = lost_puts * put_bytes + lost_gets * get_bytes;
    eprintln!(
        "DR disaster: {} puts acknowledged, {} in doubt, {} consumed on the main site; {} at the recovery site; lost: {lost_puts} puts ({put_bytes} log bytes each) and {lost_gets} consumptions ({get_bytes} bytes each) = {lost_bytes} log bytes of the {MAX_LAG} allowed; status before the link was cut: {before}; after: {cut}; the recovery site then: {held}",
        l.acked.len(),
        l.in_doubt.len(),
        l.consumed.len(),
        found.len(),
    );
    assert!(l.acked.len() > 500, "too little load to mean anything");
    assert!(
        lost_puts + lost_gets > 0,
        "with the link cut before the site, some acknowledged work must be lost; finding none \
         means the test does not exercise the bound"
    );
    assert!(
        lost_bytes <= MAX_LAG,
        "lost {lost_bytes} log bytes, more than the bound {MAX_LAG}"
    );
}

/// A planned end is not a disaster: a primary ended with `endmqm -i` while producers press on
/// the default 4 MiB bound over a link of 32 Mbit/s (so megabytes of acknowledged work are not
/// yet at the recovery site, most of them not even sent, when the end comes) hands the secondary
/// the rest of its stream before its process exits, and the recovery site, promoted, holds every
/// put the main site acknowledged, once.
#[test]
fn a_planned_end_hands_the_secondary_every_acknowledged_put() {
    let (main, rec) = (Home::new(), Home::new());
    let (dr_port, relay_port) = (free_port(), free_port());
    let secondary = Qm::start(
        &rec,
        QM,
        &["-dr", "secondary", "-drl", &format!("127.0.0.1({dr_port})")],
    );
    let _link = relay_limited(relay_port, dr_port, 20, Some(32));
    let primary = Qm::start(
        &main,
        QM,
        &[
            "-dr",
            "primary",
            "-drr",
            &format!("127.0.0.1({relay_port})"),
        ],
    );
    linked_with_queue(&main);
    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let workers = producers(3, &primary, &stop, &ledger);
    std::thread::sleep(Duration::from_secs(1));
    // The end comes while the recovery site lacks acknowledged work.
    let t = Instant::now();
    let before = loop {
        let s = dr_status(&main);
        let bytes: u64 = field(&s, "LAGBYTES").unwrap().parse().unwrap();
        if bytes > 0 {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the recovery site never lagged: the test proves nothing: {s}"
        );
    };
    primary.end();
    stop.store(true, Ordering::Release);
    for w in workers {
        w.join().unwrap();
    }
    let log = support::error_log(&main.path().join("qmgrs").join(QM));
    rec.ok(&["makedrprimary", "-m", QM]);
    rec.ok(&["strmqm", QM]);
    let c = secondary.connect();
    let h = c.open(Q, open::INPUT_EXCLUSIVE).unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                *seen
                    .entry(check_body(std::str::from_utf8(&m.body).unwrap()))
                    .or_default() += 1
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("draining {Q} at the recovery site: {e}"),
        }
    }
    let l = ledger.lock().unwrap();
    let put: HashSet<&str> = l
        .acked
        .iter()
        .chain(&l.in_doubt)
        .map(String::as_str)
        .collect();
    for (name, n) in &seen {
        assert_eq!(*n, 1, "{name} is at the recovery site {n} times");
        assert!(put.contains(name.as_str()), "{name} was never put");
    }
    let lost: Vec<&String> = l.acked.iter().filter(|a| !seen.contains_key(*a)).collect();
    eprintln!(
        "planned end: {} puts acknowledged, {} in doubt; {} at the recovery site; status at the end: {before}",
        l.acked.len(),
        l.in_doubt.len(),
        seen.len()
    );
    assert!(l.acked.len() > 200, "too little load to mean anything");
    assert!(
        lost.is_empty(),
        "{} acknowledged puts missing after a planned end (first: {:?})",
        lost.len(),
        lost.first()
    );
    assert!(
        log.contains("the recovery site holds the whole stream"),
        "the end is logged: {log}"
    );
}

#[test]
fn a_secondary_that_was_down_gets_only_the_difference() {
    let (main, rec) = (Home::new(), Home::new());
    let dr_port = free_port();
    let secondary = Qm::start(
        &rec,
        QM,
        &["-dr", "secondary", "-drl", &format!("127.0.0.1({dr_port})")],
    );
    let primary = Qm::start(
        &main,
        QM,
        &["-dr", "primary", "-drr", &format!("127.0.0.1({dr_port})")],
    );
    wait_for(&main, "first contact", |s| s.contains("DRSTATUS(Normal)"));
    let out = main.run_with_input(&["runmqsc", QM], &format!("DEFINE QLOCAL({Q})\n"));
    assert!(out.status.success(), "{out:?}");
    let put_some = |from: u64, to: u64| {
        let c = primary.connect();
        let h = c.open(Q, open::OUTPUT).unwrap();
        for n in from..to {
            c.put_commit(
                &h,
                &persistent(),
                &Properties::default(),
                Bytes::from(body(9, n)),
            )
            .unwrap();
        }
    };
    put_some(0, 200);
    secondary.end();
    put_some(200, 400);
    let down = wait_for(&main, "the primary noticed", |s| {
        s.contains("DRSTATUS(Disconnected)")
    });
    let lag: u64 = field(&down, "LAGBYTES").unwrap().parse().unwrap();
    assert!(
        lag > 200 * BODY as u64,
        "lag while the secondary is down: {down}"
    );
    secondary.restart();
    let caught_up = wait_for(&main, "catching up", |s| {
        s.contains("DRSTATUS(Normal)") && s.contains("LAGBYTES(0)")
    });
    assert!(
        caught_up.contains("RESYNC(Difference)"),
        "a secondary whose position is in the log gets the difference: {caught_up}"
    );
    let sent: u64 = field(&caught_up, "SENTBYTES").unwrap().parse().unwrap();
    // A primary restarted cleanly resumes where the secondary is, from its own log.
    primary.end();
    primary.restart();
    let resumed = wait_for(&main, "resuming after a primary restart", |s| {
        s.contains("DRSTATUS(Normal)")
    });
    assert!(
        resumed.contains("RESYNC(Difference)"),
        "a restarted primary sends the difference, not a full copy: {resumed}"
    );
    put_some(400, 450);
    let again = wait_for(&main, "catching up after the restart", |s| {
        s.contains("DRSTATUS(Normal)") && s.contains("LAGBYTES(0)")
    });
    let (pos, acked) = (field(&again, "POSITION"), field(&again, "ACKED"));
    assert!(
        pos == acked && pos.as_deref() != Some("0"),
        "position after the restart: {again}"
    );
    drop(primary);
    rec.ok(&["makedrprimary", "-m", QM]);
    rec.ok(&["strmqm", QM]);
    let c = secondary.connect();
    let h = c.open(Q, open::INPUT_EXCLUSIVE).unwrap();
    let mut n = 0;
    while c.get(&h, &GetOptions::any()).is_ok() {
        n += 1;
    }
    assert_eq!(n, 450);
    eprintln!("difference resync: {sent} bytes sent in all for 400 messages; {caught_up}");
}

/// `dspmq -o dr` under producers pressing on a 64 KiB bound over a 100 ms link: LAGBYTES (the
/// acknowledged work a disaster would take) never exceeds MAXLAG, and HELDBYTES shows the
/// durable rest whose replies are held. The secondary learns the primary's bound from its
/// hello, and `makedrprimary` keeps it (or takes `-drlag`); `makedrsecondary -drlag` sets it.
#[test]
fn lagbytes_stays_within_the_bound_and_the_bound_survives_makedrprimary() {
    const BOUND: u64 = 64 * 1024;
    let (main, rec) = (Home::new(), Home::new());
    let (dr_port, relay_port) = (free_port(), free_port());
    let bound = BOUND.to_string();
    // The secondary is created with the default bound (4 MiB): the pair's is the primary's.
    let secondary = Qm::start(
        &rec,
        QM,
        &["-dr", "secondary", "-drl", &format!("127.0.0.1({dr_port})")],
    );
    let _link = relay(relay_port, dr_port, 100);
    let primary = Qm::start(
        &main,
        QM,
        &[
            "-dr",
            "primary",
            "-drr",
            &format!("127.0.0.1({relay_port})"),
            "-drlag",
            &bound,
        ],
    );
    linked_with_queue(&main);

    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let workers = producers(4, &primary, &stop, &ledger);
    let t = Instant::now();
    let (mut samples, mut pressed, mut max_lag, mut max_held) = (0, 0, 0u64, 0u64);
    while t.elapsed() < Duration::from_secs(5) {
        let s = dr_status(&main);
        let lag: u64 = field(&s, "LAGBYTES").unwrap().parse().unwrap();
        let held: u64 = field(&s, "HELDBYTES")
            .unwrap_or_else(|| panic!("no HELDBYTES: {s}"))
            .parse()
            .unwrap();
        let max: u64 = field(&s, "MAXLAG").unwrap().parse().unwrap();
        assert_eq!(max, BOUND, "{s}");
        if s.contains("DRSTATUS(Normal)") {
            assert!(
                lag <= BOUND,
                "acknowledged work at risk beyond the bound ({lag} > {BOUND}): {s}"
            );
        }
        samples += 1;
        max_lag = max_lag.max(lag);
        max_held = max_held.max(held);
        if lag + held > BOUND {
            pressed += 1;
        }
    }
    stop.store(true, Ordering::Release);
    for w in workers {
        w.join().unwrap();
    }
    let acked = ledger.lock().unwrap().acked.len();
    eprintln!(
        "{samples} samples, {acked} puts: largest LAGBYTES {max_lag}, largest HELDBYTES {max_held}, {pressed} samples with more unacknowledged than the bound"
    );
    assert!(
        pressed > 0 && max_held > 0,
        "the load never pressed on the bound: nothing proven ({samples} samples, {acked} puts)"
    );

    // The secondary knows the primary's bound, and keeps it in its qm.ini.
    let sec = wait_for(&rec, "the secondary shows the primary's bound", |s| {
        field(s, "MAXLAG").as_deref() == Some(bound.as_str())
    });
    assert!(sec.contains("DRROLE(Secondary)"), "{sec}");
    primary.kill9();
    let back = free_port();
    rec.ok(&[
        "makedrprimary",
        "-m",
        QM,
        "-r",
        &format!("127.0.0.1({back})"),
    ]);
    let ini = rec.ok(&["dspmqini", "-m", QM]);
    assert!(
        ini.contains(&format!("MaxLagBytes={BOUND}")),
        "makedrprimary must keep the pair's bound:\n{ini}"
    );
    secondary.restart();
    let promoted = dr_status(&rec);
    assert!(
        promoted.contains("DRROLE(Primary)") && promoted.contains(&format!("MAXLAG({BOUND})")),
        "{promoted}"
    );
    // -drlag on either command.
    secondary.end();
    rec.ok(&["makedrprimary", "-m", QM, "-drlag", "131072"]);
    assert!(rec
        .ok(&["dspmqini", "-m", QM])
        .contains("MaxLagBytes=131072"));
    main.ok(&[
        "makedrsecondary",
        "-m",
        QM,
        "-l",
        &format!("127.0.0.1({back})"),
        "-drlag",
        "262144",
    ]);
    assert!(main
        .ok(&["dspmqini", "-m", QM])
        .contains("MaxLagBytes=262144"));
    let refused = rec.run(&["makedrprimary", "-m", QM, "-drlag", "100"]);
    assert!(
        !refused.status.success(),
        "a bound below the minimum is refused"
    );
}
