//! `dspmq -o ha` and plain `dspmq` against a real HA group of three instance processes: a
//! healthy replica is in sync continuously under a producer load (the rule: reachable, and
//! lacking nothing appended more than a second ago), BEHIND is the replica's own delay (small
//! while healthy, growing while it is stopped with SIGSTOP), an instance that is killed is shown
//! unreachable within a second (and with ROLE(Unknown), not as a replica with the whole log as
//! backlog), and plain `dspmq` tells the active instance from the replicas.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::Reconnect;
use ferrymq_types::options::{open, GetOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use support::dr::field;
use support::ha::{HaGroup, NAMES};

const QM: &str = "HASTAT";

/// The status line of instance `name` in a `dspmq -o ha` view.
fn row<'a>(view: &'a str, name: &str) -> &'a str {
    let tag = format!("INSTANCE({name})");
    view.lines()
        .find(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no row for {name} in:\n{view}"))
}

fn behind(line: &str) -> f64 {
    field(line, "BEHIND")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric BEHIND in {line}"))
}

/// Sends `sig` (STOP, CONT) to a process this test started.
fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// Puts persistent 1 KB messages through the group until told to stop; counts them.
fn load(g: &HaGroup, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    let mut opts = g.options();
    opts.reconnect = Reconnect::Enabled {
        timeout: Duration::from_secs(60),
    };
    std::thread::spawn(move || {
        let c = Connection::connect(opts).expect("connect");
        let h = c.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::OUTPUT).unwrap();
        let hin = c
            .open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::INPUT_SHARED)
            .unwrap();
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let get = GetOptions {
            wait: Wait::Ms(5000),
            ..GetOptions::any()
        };
        // Each put is got back (both logged), so the queue never fills. Only the entries matter
        // here: a put that fails (the group re-electing once a stopped replica resumes) is
        // retried after the reconnect.
        while !stop.load(Ordering::Acquire) {
            let b = Bytes::from(vec![7u8; 1024]);
            if c.put_commit(&h, &md, &Properties::default(), b).is_ok() && c.get(&hin, &get).is_ok()
            {
                done.fetch_add(1, Ordering::Relaxed);
            } else {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    })
}

/// The view of whichever of the instances `ask` says it is the active one, polled until `pred`
/// holds (bounded). (A stopped instance is never asked: it would not answer.)
fn wait_view(
    g: &HaGroup,
    ask: &[usize],
    what: &str,
    limit: Duration,
    pred: impl Fn(&str) -> bool,
) -> String {
    let t = Instant::now();
    loop {
        let v = ask
            .iter()
            .filter_map(|&i| g.status(i))
            .find(|v| {
                v.lines()
                    .any(|l| l.contains("LOCAL(YES)") && l.contains("ROLE(Active)"))
            })
            .unwrap_or_default();
        if v.lines().filter(|l| l.contains("INSTANCE(")).count() == 3 && pred(&v) {
            return v;
        }
        assert!(
            t.elapsed() < limit,
            "{what} within {limit:?}; last view:\n{v}\n{}",
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn status_shows_sync_delay_and_reachability_truthfully() {
    let g = HaGroup::start(QM, &[]);
    let a = g.wait_active(Duration::from_secs(30));
    let (r1, r2) = ((a + 1) % 3, (a + 2) % 3);
    wait_view(
        &g,
        &[a],
        "all three in sync",
        Duration::from_secs(20),
        |v| v.matches("INSYNC(YES)").count() == 3,
    );

    // Plain dspmq: MQ's words for a Native HA instance.
    let plain = |i: usize| g.homes[i].ok(&["dspmq", "-m", QM]);
    assert!(plain(a).contains("STATUS(Running)"), "{}", plain(a));
    for r in [r1, r2] {
        let s = plain(r);
        assert!(
            s.contains("STATUS(Replica)"),
            "a replica is not running as the active: {s}"
        );
    }

    // 1. Under load, healthy replicas stay in sync in every sample, and BEHIND is their delay
    //    (well under the in-sync rule's second), not the active instance's uptime.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..4)
        .map(|_| load(&g, stop.clone(), done.clone()))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let (mut samples, mut lagging, mut worst) = (0, 0, 0.0f64);
    while t.elapsed() < Duration::from_secs(4) {
        let v = g.status(a).expect("the active instance answers");
        for r in [r1, r2] {
            let line = row(&v, NAMES[r]);
            assert!(
                line.contains("INSYNC(YES)") && line.contains("REACHABLE(YES)"),
                "a healthy replica under load must show in sync and reachable:\n{v}"
            );
            assert!(line.contains("ROLE(Replica)"), "{v}");
            let b = behind(line);
            worst = worst.max(b);
            if field(line, "LAGENTRIES").is_some_and(|e| e != "0") {
                lagging += 1;
            }
        }
        samples += 1;
    }
    let puts = done.load(Ordering::Relaxed);
    eprintln!(
        "{samples} samples under load ({puts} puts): replica rows one or more entries behind: {lagging}, worst BEHIND {worst:.3} s"
    );
    assert!(puts > 100, "too little load to prove anything: {puts} puts");
    assert!(samples >= 10, "too few samples: {samples}");
    assert!(
        worst < 1.0,
        "BEHIND of a healthy replica must be its delay, not an uptime: {worst}"
    );

    // 2. A stopped replica: unreachable, out of sync, and BEHIND grows with the time it has
    //    been stopped (the load goes on: the two others are a majority). Views come from
    //    whichever instance is active.
    let pid = g.pid(r1).expect("replica pid");
    signal(pid, "STOP");
    let stopped = Instant::now();
    let v = wait_view(
        &g,
        &[a, r2],
        "the stopped replica shown unreachable",
        Duration::from_secs(3),
        |v| {
            let l = row(v, NAMES[r1]);
            l.contains("REACHABLE(NO)") && l.contains("INSYNC(NO)")
        },
    );
    let first = behind(row(&v, NAMES[r1]));
    std::thread::sleep(Duration::from_millis(1500));
    let v2 = wait_view(
        &g,
        &[a, r2],
        "an active instance answers",
        Duration::from_secs(5),
        |_| true,
    );
    let l2 = row(&v2, NAMES[r1]);
    let second = behind(l2);
    let elapsed = stopped.elapsed().as_secs_f64();
    assert!(
        second >= first + 1.0 && second >= 1.5 && second <= elapsed + 0.5,
        "BEHIND of a stopped replica must grow with the time it has been stopped ({elapsed:.3} s): {first} then {second}\n{v2}"
    );
    assert!(l2.contains("ROLE(Unknown)"), "{v2}");
    stop.store(true, Ordering::Release);
    for p in producers {
        p.join().unwrap();
    }
    signal(pid, "CONT");
    let v = wait_view(
        &g,
        &[0, 1, 2],
        "the resumed replica back in sync",
        Duration::from_secs(30),
        |v| {
            let l = row(v, NAMES[r1]);
            (l.contains("LOCAL(YES)") || l.contains("REACHABLE(YES)")) && l.contains("INSYNC(YES)")
        },
    );
    assert!(behind(row(&v, NAMES[r1])) < 1.0, "{v}");

    // 3. A killed replica is shown unreachable within a second, as ROLE(Unknown).
    let a = g.wait_active(Duration::from_secs(30));
    let victim = (a + 1) % 3;
    wait_view(
        &g,
        &[a],
        "all three in sync again",
        Duration::from_secs(30),
        |v| v.matches("INSYNC(YES)").count() == 3,
    );
    g.kill9(victim);
    let killed = Instant::now();
    let v = wait_view(
        &g,
        &[a],
        "the killed replica shown unreachable",
        Duration::from_secs(5),
        |v| row(v, NAMES[victim]).contains("REACHABLE(NO)"),
    );
    let shown = killed.elapsed();
    eprintln!(
        "killed replica shown unreachable after {} ms",
        shown.as_millis()
    );
    assert!(
        shown < Duration::from_secs(1),
        "a killed instance must be shown unreachable within a second, took {shown:?}:\n{v}"
    );
    let l = row(&v, NAMES[victim]);
    assert!(
        l.contains("ROLE(Unknown)") && l.contains("INSYNC(NO)"),
        "{v}"
    );
    assert!(field(l, "REACHDATE").is_some(), "since when: {v}");
}
