//! The error log an operator reads (issue 18): every entry one line with an ISO-8601 UTC
//! timestamp, a severity, an `FMQnnnnX` message id and a sentence (no Rust debug output); files
//! rotated by size (`QMErrorLog:ErrorLogSize`) into FMQERR01..03.LOG; JSON lines with
//! `QMErrorLog:Format=json`. Black-box, against the real binary.

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{Home, Qm};

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

#[test]
fn the_log_rotates_by_size_into_three_files() {
    let home = Home::new();
    let qm = Qm::create(&home, "EROT", &[]);
    qm.set_ini("QMErrorLog", "ErrorLogSize", "4096");
    qm.set_ini("Channels", "MaxChannels", "1");
    qm.restart();
    let held = qm.connect();
    refused_connections(&qm, 120);
    let errors = qm.dir().join("errors");
    // The last refusal's entry may still be on its way.
    let t = Instant::now();
    let count = || {
        ["FMQERR03.LOG", "FMQERR02.LOG", "FMQERR01.LOG"]
            .iter()
            .map(|f| std::fs::read_to_string(errors.join(f)).unwrap_or_default())
            .collect::<String>()
    };
    while !count().contains("FMQ3004W") && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    held.disconnect().unwrap();
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
    let refused = all.iter().filter(|e| e.1 == "FMQ3004W").count();
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
