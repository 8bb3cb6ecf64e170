//! DR resynchronisation by full copy, with real processes: a primary holding three times more
//! persistent data than the secondary's recovery log sends a full copy through a relay with
//! 20 ms of round trip and a WAN's bandwidth, the link is cut twice in the middle of the copy,
//! and producers keep putting meanwhile. The copy must complete (resumed, not resent from the
//! start), the secondary must never hold a half-applied copy, acknowledgements during the copy
//! must stay within the lag bound (the copy itself counts as unacknowledged work), and a site
//! loss afterwards must lose at most the bound. A second test kills the main site in the middle
//! of a copy: `makedrprimary` then refuses the secondary, which holds no complete image, unless
//! `-f` is given.

mod support;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{Properties, Reason};
use support::dr::{body, check_body, field, num, persistent, record_sizes, BODY, RING_FRAMING};
use support::{free_port, relay_limited, Home, Qm, Relay};

const QM: &str = "DRCOPY";
const Q: &str = "DR.COPY";
const MAX_LAG: u64 = 512 * 1024;
const RTT_MS: u32 = 20;
/// 40 Mbit/s: the copy takes seconds, long enough to cut it twice.
const MBPS: u32 = 40;
/// The secondary's recovery log: 2 files of 512 pages = 4 MiB.
const SEC_LOG: [&str; 4] = ["-lp", "2", "-lf", "512"];
/// 6,000 x 2 KB = 12 MB persistent: three times the secondary's log.
const PREFILL: u64 = 6000;

fn dr_status(home: &Home) -> String {
    home.ok(&["dspmq", "-o", "dr", "-m", QM])
}

fn wait_until<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < limit, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn copying_file(home: &Home) -> PathBuf {
    home.path()
        .join("qmgrs")
        .join(QM)
        .join("store")
        .join("dr.copying")
}

fn qm_log(home: &Home) -> String {
    support::error_log(&home.path().join("qmgrs").join(QM))
}

/// Puts `n` persistent messages of producer `id` in units of work of 100.
fn prefill(qm: &Qm, id: usize, n: u64) {
    let c = qm.connect();
    let h = c.open(Q, open::OUTPUT).unwrap();
    let sp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    for i in 0..n {
        c.put(
            &h,
            &persistent(),
            &Properties::default(),
            Bytes::from(body(id, i)),
            &sp,
        )
        .unwrap();
        if i % 100 == 99 {
            c.commit().unwrap();
        }
    }
    c.commit().unwrap();
}

#[derive(Default)]
struct Ledger {
    /// (name, when the put returned)
    acked: Vec<(String, Instant)>,
    in_doubt: Vec<String>,
}

/// Puts until stopped or the first failure (the main site is gone).
fn producer(id: usize, conname: String, stop: Arc<AtomicBool>, ledger: Arc<Mutex<Ledger>>) {
    let c = Connection::connect(ConnectOptions::client(QM, &conname).unwrap()).unwrap();
    let h = c.open(Q, open::OUTPUT).unwrap();
    let mut n = 0;
    while !stop.load(Ordering::Acquire) {
        let b = body(id, n);
        let name = b[..b.find('|').unwrap()].to_string();
        n += 1;
        match c.put_commit(&h, &persistent(), &Properties::default(), Bytes::from(b)) {
            Ok(_) => ledger.lock().unwrap().acked.push((name, Instant::now())),
            Err(_) => {
                ledger.lock().unwrap().in_doubt.push(name);
                return;
            }
        }
    }
}

/// Every message on `Q` at a (promoted) queue manager, by name, checking each body.
fn drain(qm: &Qm) -> (Vec<String>, Option<ferrymq_client::Message>) {
    let c = qm.connect();
    let h = c.open(Q, open::INPUT_EXCLUSIVE).unwrap();
    let mut found = Vec::new();
    let mut sample = None;
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                found.push(check_body(std::str::from_utf8(&m.body).unwrap()));
                sample.get_or_insert(m);
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("draining at the recovery site: {e}"),
        }
    }
    (found, sample)
}

/// A main site (primary, prefilled while its recovery site is unreachable) and a recovery site
/// (secondary with a small log), not yet linked: the caller starts the relay.
fn sites<'h>(main: &'h Home, rec: &'h Home, relay_port: u16, dr_port: u16) -> (Qm<'h>, Qm<'h>) {
    let mut flags = vec!["-dr", "secondary"];
    let drl = format!("127.0.0.1({dr_port})");
    flags.extend(["-drl", &drl]);
    flags.extend(SEC_LOG);
    let secondary = Qm::start(rec, QM, &flags);
    let (drr, lag) = (format!("127.0.0.1({relay_port})"), MAX_LAG.to_string());
    let primary = Qm::start(main, QM, &["-dr", "primary", "-drr", &drr, "-drlag", &lag]);
    let out = main.run_with_input(
        &["runmqsc", QM],
        &format!("DEFINE QLOCAL({Q}) MAXDEPTH(1000000)\n"),
    );
    assert!(out.status.success(), "{out:?}");
    prefill(&primary, 99, PREFILL);
    (primary, secondary)
}

#[test]
fn a_full_copy_larger_than_the_secondarys_log_survives_two_cuts_and_the_bound_holds() {
    let (main, rec) = (Home::new(), Home::new());
    let (dr_port, relay_port) = (free_port(), free_port());
    let (primary, secondary) = sites(&main, &rec, relay_port, dr_port);
    let copy_file = copying_file(&rec);

    let stop = Arc::new(AtomicBool::new(false));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut link: Relay = relay_limited(relay_port, dr_port, RTT_MS, Some(MBPS));
    wait_until("the copy starts", Duration::from_secs(30), || {
        copy_file.exists().then_some(())
    });
    let copy_started = Instant::now();
    let mut workers = Vec::new();
    for id in 0..2 {
        let (c, s, l) = (primary.conname(), stop.clone(), ledger.clone());
        workers.push(std::thread::spawn(move || producer(id, c, s, l)));
    }

    // Two cuts in the middle of the copy; the relay comes back each time at once.
    for cut in 0..2 {
        std::thread::sleep(Duration::from_millis(800));
        let st = dr_status(&main);
        assert!(
            st.contains("DRSTATUS(FullCopy)"),
            "cut {cut}: the copy should still be under way: {st}"
        );
        assert!(
            copy_file.exists(),
            "cut {cut}: the secondary is not staging a copy"
        );
        drop(link);
        std::thread::sleep(Duration::from_millis(300));
        link = relay_limited(relay_port, dr_port, RTT_MS, Some(MBPS));
        // Wait until the copy goes on again (the secondary rewrites its staging note).
        let before = std::fs::metadata(&copy_file)
            .and_then(|m| m.modified())
            .ok();
        wait_until("the copy resumes", Duration::from_secs(20), || {
            let now = std::fs::metadata(&copy_file)
                .and_then(|m| m.modified())
                .ok();
            (now != before || !copy_file.exists()).then_some(())
        });
    }
    let done = wait_until("the copy completes", Duration::from_secs(60), || {
        let s = dr_status(&main);
        (s.contains("DRSTATUS(Normal)") && !copy_file.exists()).then_some(s)
    });
    let copy_took = copy_started.elapsed();
    let sec_log = qm_log(&rec);
    assert!(
        sec_log.contains("resumes after"),
        "the copy was not resumed after a cut:\n{sec_log}"
    );
    assert!(
        sec_log.contains("full copy installed"),
        "no copy installed:\n{sec_log}"
    );
    // Resumed, not resent: one copy taken, continued twice; a copy resent from the start after
    // each cut would have sent about three copies.
    let main_log = qm_log(&main);
    assert_eq!(
        (
            main_log.matches("sending a full copy").count(),
            main_log.matches("resuming the full copy").count()
        ),
        (1, 2),
        "one copy, resumed after each cut:\n{main_log}"
    );
    // (What was in the cut link's socket buffers is sent again; the rest is not.)
    let sent = num(&done, "SENTBYTES");

    // While the copy was unconfirmed (larger than the bound), no put could be acknowledged
    // beyond what the bound leaves.
    // (The last half second is left out: the copy may have been confirmed before the status
    // poll saw it.)
    let during = {
        let l = ledger.lock().unwrap();
        let confirmed_by = copy_took.saturating_sub(Duration::from_millis(500));
        l.acked
            .iter()
            .filter(|(_, t)| t.duration_since(copy_started) < confirmed_by)
            .count() as u64
    };
    eprintln!("{during} puts acknowledged during the {copy_took:?} copy");
    assert!(
        during * BODY as u64 <= MAX_LAG,
        "{during} puts acknowledged while a copy larger than the bound was unconfirmed"
    );

    // Load on the new stream, then the disaster: the link first, the site a moment later.
    std::thread::sleep(Duration::from_millis(1500));
    drop(link);
    std::thread::sleep(Duration::from_millis(200));
    primary.kill9();
    stop.store(true, Ordering::Release);
    for w in workers {
        w.join().unwrap();
    }
    rec.ok(&["makedrprimary", "-m", QM]);
    rec.ok(&["strmqm", QM]);
    let (found, sample) = drain(&secondary);
    let l = ledger.lock().unwrap();
    let acked: HashSet<&str> = l.acked.iter().map(|(n, _)| n.as_str()).collect();
    let in_doubt: HashSet<&str> = l.in_doubt.iter().map(String::as_str).collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for f in &found {
        *seen.entry(f.as_str()).or_default() += 1;
    }
    for (name, n) in &seen {
        assert_eq!(*n, 1, "{name} is at the recovery site {n} times");
        assert!(
            acked.contains(name) || in_doubt.contains(name) || name.starts_with("P99-"),
            "{name} at the recovery site was never put"
        );
    }
    let prefilled = seen.keys().filter(|n| n.starts_with("P99-")).count() as u64;
    assert_eq!(prefilled, PREFILL, "the copied messages are all there");
    let lost = acked.iter().filter(|a| !seen.contains_key(*a)).count() as u64;
    let (put_bytes, _) = record_sizes(sample.as_ref().unwrap(), Q, Q, RING_FRAMING);
    eprintln!(
        "DR resync: copy of {PREFILL} messages in {copy_took:?} with two cuts, {sent} bytes sent; {} puts acknowledged, {lost} lost ({} log bytes of the {MAX_LAG} allowed)",
        l.acked.len(),
        lost * put_bytes
    );
    assert!(l.acked.len() > 50, "too little load after the copy");
    assert!(
        lost * put_bytes <= MAX_LAG,
        "lost {lost} acknowledged puts ({} log bytes), more than the bound {MAX_LAG}",
        lost * put_bytes
    );
}

#[test]
fn makedrprimary_refuses_a_secondary_whose_copy_is_incomplete() {
    let (main, rec) = (Home::new(), Home::new());
    let (dr_port, relay_port) = (free_port(), free_port());
    let (primary, secondary) = sites(&main, &rec, relay_port, dr_port);
    let link = relay_limited(relay_port, dr_port, RTT_MS, Some(MBPS));
    wait_until("the copy starts", Duration::from_secs(30), || {
        copying_file(&rec).exists().then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    // The main site is lost in the middle of the copy.
    drop(link);
    primary.kill9();
    let held = dr_status(&rec);
    assert!(
        field(&held, "DRSTATUS").is_some(),
        "secondary status: {held}"
    );
    let out = rec.run(&["makedrprimary", "-m", QM]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "makedrprimary promoted a secondary without a complete copy: {err}"
    );
    assert!(
        err.contains("no complete image") && err.contains("-f"),
        "the refusal should say what is missing and how to override it: {err}"
    );
    assert!(
        err.contains("was being received"),
        "the refusal should name the copy in progress: {err}"
    );
    // With -f it is promoted, with a warning.
    let out = rec.run(&["makedrprimary", "-m", QM, "-f"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "makedrprimary -f: {err}");
    assert!(err.contains("warning"), "{err}");
    rec.ok(&["strmqm", QM]);
    let out = rec.run_with_input(&["runmqsc", QM], &format!("DISPLAY QLOCAL({Q})\n"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not") || !text.contains(&format!("QUEUE({Q})")),
        "a half copy must not have defined the primary's queue: {text}"
    );
    drop(secondary);
}

/// An operator who makes a new recovery site waits with `dspmq -o dr -w`: it says when the link
/// is down, shows the full copy's progress in bytes, and returns once the recovery site holds
/// the copy — its status then says so too.
#[test]
fn dspmq_w_follows_a_full_copy_until_the_secondary_holds_it() {
    let (main, rec) = (Home::new(), Home::new());
    let (dr_port, relay_port) = (free_port(), free_port());
    let (primary, secondary) = sites(&main, &rec, relay_port, dr_port);
    // No link yet: a short wait fails, naming the state.
    let out = main.run(&["dspmq", "-o", "dr", "-m", QM, "-w", "1"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not streaming after 1 s"), "{err}");
    // -w is for DR only.
    let out = main.run(&["dspmq", "-m", QM, "-w", "5"]);
    assert!(!out.status.success());

    let link = relay_limited(relay_port, dr_port, RTT_MS, Some(MBPS));
    let out = main.run(&["dspmq", "-o", "dr", "-m", QM, "-w", "240"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{err}\n{status}");
    assert_eq!(
        field(&status, "DRSTATUS").as_deref(),
        Some("Normal"),
        "{status}"
    );
    assert!(err.contains("DRSTATUS(FullCopy)"), "{err}");
    let total: u64 = err
        .lines()
        .find_map(|l| l.split("full copy of ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no copy size announced: {err}"));
    // 6,000 messages of about 2 KB were copied.
    assert!(total > PREFILL * 2000, "copy of {total} bytes: {err}");
    assert_eq!(num(&status, "COPIEDBYTES"), total, "{status}");
    // The recovery site holds it: its own status is streaming too.
    wait_until(
        "the secondary reports Normal",
        Duration::from_secs(30),
        || (field(&dr_status(&rec), "DRSTATUS").as_deref() == Some("Normal")).then_some(()),
    );
    drop(link);
    drop(primary);
    drop(secondary);
}
