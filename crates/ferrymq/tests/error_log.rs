//! The error log an operator reads (issue 18): every entry one line with an ISO-8601 UTC
//! timestamp, a severity, an `FMQnnnnX` message id and a sentence (no Rust debug output); files
//! rotated by size (`QMErrorLog:ErrorLogSize`) into FMQERR01..03.LOG; JSON lines with
//! `QMErrorLog:Format=json`. Black-box, against the real binary.

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::options::open;
use ferrymq_types::Reason;
use support::{Home, Qm, BIN};

const SEVERITIES: [(&str, char); 4] = [
    ("INFO", 'I'),
    ("WARNING", 'W'),
    ("ERROR", 'E'),
    ("SEVERE", 'S'),
];

fn is_iso_utc_millis(t: &str) -> bool {
    // 2026-11-25T05:52:13.873Z
    let b = t.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Checks one text entry; returns (time, id, message).
fn text_entry(line: &str) -> (String, String, String) {
    let mut it = line.splitn(3, ' ');
    let time = it.next().unwrap_or_default().to_string();
    let sev = it.next().unwrap_or_default();
    let rest = it.next().unwrap_or_default().trim_start();
    let (id, msg) = rest.split_once(' ').unwrap_or((rest, ""));
    assert!(is_iso_utc_millis(&time), "no ISO timestamp: {line}");
    let letter = SEVERITIES
        .iter()
        .find(|(w, _)| *w == sev)
        .unwrap_or_else(|| panic!("no severity: {line}"))
        .1;
    assert!(
        id.len() == 8
            && id.starts_with("FMQ")
            && id[3..7].chars().all(|c| c.is_ascii_digit())
            && id.ends_with(letter),
        "no FMQnnnnX id matching the severity: {line}"
    );
    assert!(!msg.trim().is_empty(), "no sentence: {line}");
    for debug in ["Some(", "None)", "LogId", "{ ", "Torn {", "\\\""] {
        assert!(!msg.contains(debug), "Rust debug output in: {line}");
    }
    (time, id.to_string(), msg.to_string())
}

#[test]
fn entries_have_a_timestamp_a_severity_an_id_and_a_sentence() {
    let home = Home::new();
    let qm = Qm::start(&home, "ELOG", &[]);
    qm.end();
    qm.restart();
    qm.end();
    let text = std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    let entries: Vec<_> = text.lines().map(text_entry).collect();
    let ids: Vec<&str> = entries.iter().map(|e| e.1.as_str()).collect();
    // Two runs: each recovered, ran and ended, in that order.
    let runs = ids.iter().filter(|i| **i == "FMQ1001I").count();
    assert_eq!(runs, 2, "{text}");
    assert_eq!(
        ids.iter().filter(|i| **i == "FMQ1002I").count(),
        2,
        "{text}"
    );
    let first_run = ids.iter().position(|i| *i == "FMQ1001I").unwrap();
    let first_end = ids.iter().position(|i| *i == "FMQ1002I").unwrap();
    assert!(first_run < first_end, "{text}");
    assert!(entries[first_run].2.contains("'ELOG' running"), "{text}");
    // Entries are in time order.
    for w in entries.windows(2) {
        assert!(w[0].0 <= w[1].0, "out of order:\n{text}");
    }
}

/// Connection attempts beyond Channels:MaxChannels are refused, one warning entry each: a quick
/// way to write many entries.
fn refused_connections(qm: &Qm, n: usize) {
    for _ in 0..n {
        let mut s = TcpStream::connect(("127.0.0.1", qm.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 64];
        // Refused: the queue manager closes it without a word.
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// MaxChannels counts client channels, as in MQ: a local (bindings) connection, such as the
/// readiness probe `strmqm` makes, never takes a client's place, and clients at the limit do not
/// lock out local applications.
#[test]
fn bindings_connections_do_not_count_against_max_channels() {
    let home = Home::new();
    let qm = Qm::create(&home, "EMAXC", &[]);
    qm.set_ini("Channels", "MaxChannels", "1");
    qm.restart();
    let local = qm.connect_bindings();
    let client = qm.connect();
    let local2 = qm.connect_bindings();
    refused_connections(&qm, 1);
    for c in [local, client, local2] {
        c.disconnect().unwrap();
    }
    qm.end();
    let log = std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    let refused = log
        .lines()
        .map(text_entry)
        .filter(|e| e.1 == "FMQ3004W")
        .count();
    assert_eq!(refused, 1, "one client refused: {log}");
}

fn refusal_entries(qm: &Qm) -> usize {
    std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG"))
        .unwrap_or_default()
        .lines()
        .map(text_entry)
        .filter(|e| e.1 == "FMQ3004W")
        .count()
}

/// Past Channels:MaxChannels a client is told MQRC_CHANNEL_NOT_AVAILABLE (2537), the refusals
/// are logged at most once a second, and the queue manager goes on serving: the refused
/// application connects once a channel is free.
#[test]
fn a_connection_past_max_channels_is_refused_with_2537_and_the_queue_manager_stays_healthy() {
    let home = Home::new();
    let qm = Qm::create(&home, "EMAX2537", &[]);
    qm.set_ini("Channels", "MaxChannels", "2");
    qm.restart();
    let a = qm.connect();
    let b = qm.connect();
    let opts = || ConnectOptions::client("EMAX2537", &qm.conname()).unwrap();
    let t = Instant::now();
    for _ in 0..20 {
        let e = Connection::connect(opts()).expect_err("past MaxChannels");
        assert_eq!(e.reason, Reason::CHANNEL_NOT_AVAILABLE, "{e}");
        assert!(e.message.contains("MaxChannels"), "{e}");
    }
    let within_a_second = t.elapsed() < Duration::from_secs(1);
    a.disconnect().unwrap();
    // The freed channel is taken again (the socket's end may take a moment to be seen).
    let t = Instant::now();
    let c = loop {
        match Connection::connect(opts()) {
            Ok(c) => break c,
            Err(e) if t.elapsed() < Duration::from_secs(20) => {
                assert_eq!(e.reason, Reason::CHANNEL_NOT_AVAILABLE, "{e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("no channel freed: {e}"),
        }
    };
    let pid = qm.pid().expect("running");
    assert!(support::alive(pid));
    c.disconnect().unwrap();
    b.disconnect().unwrap();
    let t = Instant::now();
    while refusal_entries(&qm) == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let entries = refusal_entries(&qm);
    assert!(entries >= 1, "the refusal is logged");
    if within_a_second {
        assert!(entries < 20, "refusals are rate-limited: {entries} entries");
    }
    qm.end();
}

/// MaxActiveChannels, as in MQ, bounds the channels running at once even below MaxChannels.
#[test]
fn max_active_channels_bounds_client_connections_too() {
    let home = Home::new();
    let qm = Qm::create(&home, "EMAXACT", &[]);
    qm.set_ini("Channels", "MaxActiveChannels", "1");
    qm.restart();
    let a = qm.connect();
    let e = Connection::connect(ConnectOptions::client("EMAXACT", &qm.conname()).unwrap())
        .expect_err("past MaxActiveChannels");
    assert_eq!(e.reason, Reason::CHANNEL_NOT_AVAILABLE, "{e}");
    assert!(e.message.contains("MaxActiveChannels"), "{e}");
    a.disconnect().unwrap();
    qm.end();
}

/// The soft open-file limit of the queue manager process is raised to the hard limit at start
/// (a process started with the common 1,024 holds no more connections than that), and a hard
/// limit below what MaxChannels needs is a warning in the error log and in strmqm's output.
#[test]
fn strmqm_raises_the_open_file_limit_and_warns_when_it_is_below_max_channels() {
    let home = Home::new();
    let qm = Qm::create(&home, "EFDS", &[]);
    // More channels than any kernel gives one process descriptors.
    qm.set_ini("Channels", "MaxChannels", "2000000000");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -Sn 256 && exec {BIN} strmqm EFDS"))
        .env("FERRYMQ_HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("open-file limit"),
        "strmqm says the limit is low: {stderr}"
    );
    let pid = qm.pid().expect("running");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    // "Max open files  SOFT  HARD  files"
    assert_eq!(f[3], f[4], "soft limit raised to the hard one: {line}");
    assert_ne!(f[3], "256", "{line}");
    let log = std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    assert!(log.contains("FMQ1013W"), "{log}");
    qm.end();
}

#[test]
fn the_log_rotates_by_size_into_three_files() {
    let home = Home::new();
    let qm = Qm::create(&home, "EROT", &[]);
    qm.set_ini("QMErrorLog", "ErrorLogSize", "4096");
    qm.restart();
    // Each connection naming a channel that does not exist writes one entry.
    for _ in 0..120 {
        let mut o = ConnectOptions::client("EROT", &qm.conname()).unwrap();
        o.channel = "NO.SUCH.CHANNEL".into();
        Connection::connect(o).expect_err("an unknown channel is refused");
    }
    let errors = qm.dir().join("errors");
    // The last refusal's entry may still be on its way.
    let t = Instant::now();
    let count = || {
        ["FMQERR03.LOG", "FMQERR02.LOG", "FMQERR01.LOG"]
            .iter()
            .map(|f| std::fs::read_to_string(errors.join(f)).unwrap_or_default())
            .collect::<String>()
    };
    while count().matches("FMQ3009W").count() < 20 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    qm.end();
    let mut all = Vec::new();
    for f in ["FMQERR03.LOG", "FMQERR02.LOG", "FMQERR01.LOG"] {
        let path = errors.join(f);
        let len = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{f}: {e}"))
            .len();
        assert!(len > 0 && len <= 4096, "{f} is {len} bytes");
        let text = std::fs::read_to_string(&path).unwrap();
        all.extend(text.lines().map(text_entry));
    }
    assert!(!errors.join("FMQERR04.LOG").exists());
    // Oldest first across the files, and the newest entries (the end) kept.
    for w in all.windows(2) {
        assert!(w[0].0 <= w[1].0, "out of order: {:?} then {:?}", w[0], w[1]);
    }
    let refused = all.iter().filter(|e| e.1 == "FMQ3009W").count();
    assert!(refused > 20, "only {refused} refusals kept");
    assert_eq!(
        all.last().unwrap().1,
        "FMQ1002I",
        "the end is the newest entry"
    );
}

#[test]
fn json_lines_for_log_shippers() {
    let home = Home::new();
    let qm = Qm::create(&home, "EJSON", &[]);
    qm.set_ini("QMErrorLog", "Format", "json");
    qm.restart();
    qm.end();
    let text = std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    let mut ids = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let s = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_str())
                .unwrap_or_else(|| panic!("no {k}: {line}"))
                .to_string()
        };
        assert!(is_iso_utc_millis(&s("time")), "{line}");
        let sev = s("severity");
        let id = s("id");
        let letter = SEVERITIES.iter().find(|(w, _)| *w == sev).unwrap().1;
        assert!(id.starts_with("FMQ") && id.ends_with(letter), "{line}");
        assert_eq!(s("qmgr"), "EJSON");
        assert!(!s("message").is_empty());
        assert!(v.get("pid").and_then(|p| p.as_u64()).is_some(), "{line}");
        ids.push(id);
    }
    assert!(ids.contains(&"FMQ1001I".to_string()), "{text}");
    assert!(ids.contains(&"FMQ1002I".to_string()), "{text}");
}

#[test]
fn a_bad_error_log_setting_is_reported_and_the_default_used() {
    let home = Home::new();
    let qm = Qm::create(&home, "EBAD", &[]);
    qm.set_ini("QMErrorLog", "Format", "xml");
    qm.restart();
    qm.end();
    let text = std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    let entries: Vec<_> = text.lines().map(text_entry).collect();
    assert!(
        entries
            .iter()
            .any(|e| e.1 == "FMQ1007W" && e.2.contains("QMErrorLog:Format=xml")),
        "{text}"
    );
}

/// The kernel's current CPU latency bound (the least of every request held), in microseconds.
fn cpu_latency_bound() -> i32 {
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/cpu_dma_latency")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("/dev/cpu_dma_latency readable");
    i32::from_ne_bytes(b)
}

/// `TuningParameters:CpuWakeLatencyUs`: where this user may make the kernel's CPU latency
/// request, the queue manager holds it while application requests flow and drops it a quiet
/// second later; where it may not, strmqm and the error log say so and the queue manager runs.
#[test]
fn cpu_wake_latency_is_held_while_requests_flow_dropped_when_quiet_or_refused_with_a_warning() {
    let home = Home::new();
    let qm = Qm::create(&home, "EWAKE", &[]);
    // A value no other holder is likely to use, so the bound read back is this queue manager's.
    qm.set_ini("TuningParameters", "CpuWakeLatencyUs", "7");
    let permitted = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .is_ok();
    let out = std::process::Command::new(BIN)
        .args(["strmqm", "EWAKE"])
        .env("FERRYMQ_HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = || std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    if !permitted {
        assert!(
            stderr.contains("warning") && stderr.contains("CpuWakeLatencyUs"),
            "strmqm says the request cannot be made: {stderr}"
        );
        assert!(log().contains("FMQ1015W"), "{}", log());
        let c = qm.connect_bindings();
        c.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::INQUIRE).unwrap();
        return;
    }
    assert!(!stderr.contains("CpuWakeLatencyUs"), "{stderr}");
    assert!(!log().contains("FMQ1015W"), "{}", log());
    let idle = cpu_latency_bound();
    assert!(
        idle > 7,
        "another holder bounds the CPU latency to {idle} µs already"
    );
    // Requests flowing: the bound is taken within a check or two.
    let c = qm.connect_bindings();
    let held = Instant::now();
    let mut seen = idle;
    while held.elapsed() < Duration::from_secs(5) {
        let h = c.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::INQUIRE).unwrap();
        c.close(&h, 0).unwrap();
        seen = cpu_latency_bound();
        if seen == 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(seen, 7, "the bound while requests flow");
    // Quiet (the connection stays, its heartbeats do not count): dropped after about a second.
    let quiet = Instant::now();
    while cpu_latency_bound() == 7 && quiet.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(cpu_latency_bound(), idle, "the bound once quiet");
    assert!(
        quiet.elapsed() >= Duration::from_millis(800),
        "held for a quiet second, not dropped at once ({:?})",
        quiet.elapsed()
    );
    drop(c);
    qm.end();
}
