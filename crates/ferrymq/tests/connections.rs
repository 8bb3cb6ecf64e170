//! Many client connections against the real binary: thousands connect from several source
//! addresses, stay, and close cleanly without leaving a descriptor behind in the queue manager;
//! a queue manager out of descriptors refuses the excess instead of spinning on its listener and
//! serves again once connections close.

mod support;

use std::time::{Duration, Instant};

use ferrymq_bench::report_connections::driver::{self, Plan};
use support::{mqsc, Home, Qm, BIN};

const QUEUE: &str = "CONN.Q";
/// Descriptors the queue manager may open or close of its own between two counts (a log file,
/// a local connection ending): far fewer than any leak of the connections' sockets.
const SLACK: usize = 3;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// What an idle client connection may cost the queue manager in resident memory (issue 25's
/// bound): its task, its engine connection and handle, no buffers held while it is quiet.
const RSS_PER_IDLE_CONNECTION_MAX: u64 = 8 * 1024;

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Polls until the queue manager holds at most `n` descriptors; returns what it holds.
fn wait_fds_at_most(pid: u32, n: usize, within: Duration) -> usize {
    let t = Instant::now();
    while fds(pid) > n && t.elapsed() < within {
        std::thread::sleep(Duration::from_millis(50));
    }
    fds(pid)
}

fn plans(qm: &Qm, total: usize, sources: usize) -> Vec<Plan> {
    (0..sources)
        .map(|i| Plan {
            qm: qm.name.clone(),
            port: qm.port,
            queue: QUEUE.into(),
            count: total / sources + usize::from(i < total % sources),
            source: format!("127.0.0.{}", 2 + i).parse().unwrap(),
            put_interval: Duration::from_secs(100),
        })
        .collect()
}

/// Starts a created queue manager with `ulimit ULIMIT` applied to strmqm (and so to it).
fn start_with_open_files(home: &Home, name: &str, ulimit: &str) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit {ulimit} && exec {BIN} strmqm {name}"))
        .env("FERRYMQ_HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn five_thousand_connections_from_several_addresses_connect_stay_and_close_without_leaking_descriptors(
) {
    ferrymq_bench::report_connections::raise_open_files();
    let home = Home::new();
    let qm = Qm::create(&home, "CONN5K", &[]);
    // Started with the common soft limit of 1,024 open files: the queue manager raises it.
    start_with_open_files(&home, "CONN5K", "-Sn 1024");
    mqsc(&home, "CONN5K", &format!("DEFINE QLOCAL({QUEUE})\n"));
    let pid = qm.pid().unwrap();
    let before = fds(pid);
    let rss_before = rss_kib(pid);
    let rt = runtime();
    let (conns, errors, first) = rt.block_on(async {
        let tasks: Vec<_> = plans(&qm, 5000, 4)
            .into_iter()
            .map(|p| tokio::spawn(async move { driver::connect_all(&p).await }))
            .collect();
        let (mut all, mut errors, mut first) = (Vec::new(), 0, None);
        for t in tasks {
            let (c, e, f) = t.await.unwrap();
            all.extend(c);
            errors += e;
            first = first.or(f);
        }
        (all, errors, first)
    });
    assert_eq!(errors, 0, "first error: {first:?}");
    assert_eq!(conns.len(), 5000);
    // Every connection is a socket the queue manager holds (DISPLAY CHSTATUS would list them).
    // (`before` may count a descriptor of the queue manager's own that comes and goes.)
    let held = fds(pid);
    assert!(
        held + SLACK >= before + 5000,
        "the queue manager holds {held} descriptors, {before} before 5,000 connections"
    );
    // Quiet for a few seconds, each gives its read buffer back: what is left is the connection.
    std::thread::sleep(Duration::from_secs(3));
    let per_conn = (rss_kib(pid).saturating_sub(rss_before)) * 1024 / 5000;
    assert!(
        per_conn <= RSS_PER_IDLE_CONNECTION_MAX,
        "{per_conn} bytes of queue manager RSS per idle connection (at most {RSS_PER_IDLE_CONNECTION_MAX})"
    );
    // They stay: a while later every one still works (a Disconnect answered each), and the
    // queue manager serves a new client meanwhile.
    let c = qm.connect();
    c.disconnect().unwrap();
    rt.block_on(async {
        let closes: Vec<_> = conns
            .into_iter()
            .map(|c| tokio::spawn(driver::close(c)))
            .collect();
        for c in closes {
            c.await.unwrap();
        }
    });
    let after = wait_fds_at_most(pid, before + SLACK, Duration::from_secs(60));
    assert!(
        after <= before + SLACK,
        "descriptors leaked: {after} after closing, {before} before"
    );
    qm.end();
}

/// Started with a hard open-file limit of 64, the queue manager cannot take 200 clients: the
/// ones past the limit are refused (told 2537 or closed), the accept failure is logged once per
/// burst rather than ten times a second, the process does not spin, and once the connections
/// close a new client is served.
#[test]
fn out_of_descriptors_the_listener_refuses_the_excess_without_spinning_and_recovers() {
    let home = Home::new();
    let qm = Qm::create(&home, "CONNFD", &[]);
    start_with_open_files(&home, "CONNFD", "-n 64");
    mqsc(&home, "CONNFD", &format!("DEFINE QLOCAL({QUEUE})\n"));
    let pid = qm.pid().unwrap();
    let rt = runtime();
    let mut plan = plans(&qm, 200, 1).remove(0);
    plan.put_interval = Duration::from_secs(100);
    let (conns, errors, first) = rt.block_on(driver::connect_all(&plan));
    assert!(errors > 0 && !conns.is_empty(), "{errors} errors");
    let first = first.unwrap_or_default();
    assert!(
        first.contains("2537") || first.contains("closed") || first.contains("reset"),
        "refused, not hung: {first}"
    );
    // Held at the limit: no spin on the listener.
    let cpu = |pid: u32| -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
    };
    let c0 = cpu(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu(pid) - c0;
    assert!(used < 1.0, "{used} s of CPU in 2 s at the descriptor limit");
    let log = std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    let accept_failures = log.matches("FMQ3003W").count();
    assert!(
        (1..20).contains(&accept_failures),
        "{accept_failures} accept failure entries:\n{log}"
    );
    rt.block_on(async {
        for c in conns {
            driver::close(c).await;
        }
    });
    // Serves again.
    let t = Instant::now();
    loop {
        let (c, _, f) = rt.block_on(driver::connect_all(&Plan {
            count: 1,
            ..plan.clone()
        }));
        if let Some(c) = c.into_iter().next() {
            rt.block_on(driver::close(c));
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "not served again: {f:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    qm.end();
}
