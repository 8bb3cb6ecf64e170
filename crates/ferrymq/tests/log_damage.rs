//! Damage to the recovery log and the message store, with the real binary: persistent messages
//! are put (each acknowledged), the queue manager is killed with SIGKILL (or ended), bytes of a
//! record the test finds by parsing the ring or a segment itself are flipped or zeroed, and
//! `strmqm` must then say exactly what recovery discarded — in its exit status (3 when something
//! acknowledged may be gone), on stderr, and in the error log with the LSN range and byte count
//! the test knows it damaged — while every other acknowledged message is still there.

mod support;

use std::os::unix::fs::FileExt;
use std::path::Path;

use bytes::Bytes;
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use support::{Home, Qm};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";
const HEADER: u64 = 17;
/// Ring geometry the tests create: 3 files of 1024 pages (4 MiB), so the sync window is 1 MiB.
const FILES: u64 = 3;
const FILE_BYTES: u64 = 1024 * 4096;
const WINDOW: u64 = 1 << 20;
const BODY: usize = 2000;
/// strmqm's documented status for "running, but recovery discarded what may have been
/// acknowledged".
const EXIT_RECOVERY_LOSS: i32 = 3;

fn body(i: usize) -> String {
    let mut s = format!("M{i:05}|");
    let fill = (b'a' + (i % 26) as u8) as char;
    while s.len() < BODY {
        s.push(fill);
    }
    s
}

/// Creates and starts a queue manager with a 12 MiB ring and no timed checkpoint during the test
/// (so the records the test damages are all after the checkpoint).
fn start<'h>(home: &'h Home, name: &str) -> Qm<'h> {
    let port = support::free_port();
    home.ok(&[
        "crtmqm",
        "-p",
        &port.to_string(),
        "-lp",
        &FILES.to_string(),
        "-lf",
        "1024",
        "--insecure",
        name,
    ]);
    home.ok(&[
        "setmqini",
        "-m",
        name,
        "-s",
        "Log",
        "-k",
        "CheckpointIntervalMs",
        "-v",
        "3600000",
    ]);
    home.ok(&["strmqm", name]);
    Qm {
        home,
        name: name.to_string(),
        port,
    }
}

/// Puts `n` persistent messages outside syncpoint; each returns only once durable.
fn put_all(qm: &Qm, n: usize) -> Vec<String> {
    put_to(qm, Q, 0..n)
}

/// Puts messages `range` to `queue` as `put_all` does.
fn put_to(qm: &Qm, queue: &str, range: std::ops::Range<usize>) -> Vec<String> {
    let c = qm.connect();
    let h = c.open(queue, open::OUTPUT).unwrap();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    range
        .map(|i| {
            let b = body(i);
            c.put(
                &h,
                &md,
                &Properties::default(),
                Bytes::from(b.clone()),
                &PutOptions::default(),
            )
            .unwrap();
            b
        })
        .collect()
}

/// Every message left on the queue, in order.
fn drain(qm: &Qm) -> Vec<String> {
    drain_from(qm, Q)
}

fn drain_from(qm: &Qm, queue: &str) -> Vec<String> {
    let c = qm.connect();
    let h = c.open(queue, open::INPUT_EXCLUSIVE).unwrap();
    let mut out = Vec::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => out.push(String::from_utf8(m.body.to_vec()).unwrap()),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return out,
            Err(e) => panic!("draining: {e}"),
        }
    }
}

/// One record of the ring as the test reads it (independently of the log crate).
#[derive(Debug, Clone, Copy)]
struct Rec {
    lsn: u64,
    len: u64,
    kind: u8,
}

fn ring(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for i in 0..FILES {
        all.extend(std::fs::read(dir.join("log").join(format!("S{i:07}.LOG"))).unwrap());
    }
    assert_eq!(all.len() as u64, FILES * FILE_BYTES);
    all
}

/// Walks the ring from LSN 0 (the log has not lapped): `[len u32][crc u32][lsn u64][kind u8]`.
fn records(raw: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + HEADER as usize <= raw.len() {
        let len = u32::from_le_bytes(raw[pos..pos + 4].try_into().unwrap()) as u64;
        let lsn = u64::from_le_bytes(raw[pos + 8..pos + 16].try_into().unwrap());
        if lsn != pos as u64 || raw[pos..pos + 17].iter().all(|&b| b == 0) {
            break;
        }
        out.push(Rec {
            lsn,
            len: HEADER + len,
            kind: raw[pos + 16],
        });
        pos += (HEADER + len) as usize;
    }
    out
}

/// The message index whose body a record holds.
fn message_in(raw: &[u8], r: &Rec) -> usize {
    let payload = &raw[r.lsn as usize..(r.lsn + r.len) as usize];
    let at = payload
        .windows(7)
        .position(|w| w[0] == b'M' && w[6] == b'|' && w[1..6].iter().all(u8::is_ascii_digit))
        .unwrap_or_else(|| panic!("no message in record {r:?}"));
    std::str::from_utf8(&payload[at + 1..at + 6])
        .unwrap()
        .parse()
        .unwrap()
}

fn patch(dir: &Path, lsn: u64, len: u64, f: impl Fn(u8) -> u8) {
    for p in lsn..lsn + len {
        let phys = p % (FILES * FILE_BYTES);
        let path = dir
            .join("log")
            .join(format!("S{:07}.LOG", phys / FILE_BYTES));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut b = [0u8];
        file.read_exact_at(&mut b, phys % FILE_BYTES).unwrap();
        file.write_all_at(&[f(b[0])], phys % FILE_BYTES).unwrap();
    }
}

fn error_log(qm: &Qm) -> String {
    support::error_log(&qm.dir())
}

/// PUT records (kind 1) of the last sync window: the first one of the window and how many
/// records follow it there.
fn last_window_puts(recs: &[Rec]) -> Vec<Rec> {
    let tail = recs.last().map(|r| r.lsn + r.len).unwrap();
    let start = (tail - 1) / WINDOW * WINDOW;
    recs.iter()
        .filter(|r| r.lsn >= start && r.kind == 1)
        .copied()
        .collect()
}

#[test]
fn flipped_bit_in_the_last_sync_window_costs_that_record_only_and_strmqm_says_so() {
    let home = Home::new();
    let qm = start(&home, "QDMG1");
    let sent = put_all(&qm, 650);
    qm.kill9();
    let raw = ring(&qm.dir());
    let recs = records(&raw);
    let window = last_window_puts(&recs);
    assert!(
        window.len() >= 20,
        "the last window holds only {} puts",
        window.len()
    );
    let victim = window[0];
    let lost = message_in(&raw, &victim);
    let after = recs.iter().filter(|r| r.lsn > victim.lsn).count();
    assert!(after >= 19, "{after} records after the damaged one");
    patch(&qm.dir(), victim.lsn + HEADER + 100, 1, |b| b ^ 0x04);

    // The dump lists every record, the damaged one with a bad CRC.
    let dump = home.ok(&["dmplog", &qm.name]);
    let bad: Vec<&str> = dump.lines().filter(|l| l.contains("BAD CRC")).collect();
    assert_eq!(bad.len(), 1, "{dump}");
    let cols: Vec<&str> = bad[0].split_whitespace().collect();
    assert_eq!(cols[0], victim.lsn.to_string(), "{}", bad[0]);
    assert_eq!(cols[1], victim.len.to_string(), "{}", bad[0]);
    assert_eq!(cols[2], "1", "{}", bad[0]);
    let ckpt: u64 = dump
        .split("checkpoint LSN ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .expect("checkpoint LSN in the dump");
    assert!(ckpt <= victim.lsn);
    let readable = recs.iter().filter(|r| r.lsn >= ckpt).count() - 1;
    assert!(
        dump.contains(&format!("{readable} readable records, 1 damaged span(s)")),
        "{dump}"
    );

    let before = error_log(&qm).len();
    let out = home.run(&["strmqm", &qm.name]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(EXIT_RECOVERY_LOSS),
        "stdout: {}\nstderr: {stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("WARNING"), "{stderr}");
    let log = error_log(&qm)[before..].to_string();
    let line = format!(
        "log LSN {}..{} ({} bytes): damaged, skipped (the records after it were kept); 1 damaged record(s), 0 intact record(s) dropped",
        victim.lsn,
        victim.lsn + victim.len,
        victim.len
    );
    assert!(log.contains(&line), "expected «{line}» in:\n{log}");
    assert!(stderr.contains(&line), "strmqm must show it too:\n{stderr}");
    let head = format!(
        "1 item(s) that may have been acknowledged ({} log bytes in all)",
        victim.len
    );
    assert!(log.contains(&head), "{log}");

    let mut want = sent.clone();
    want.remove(lost);
    let got = drain(&qm);
    assert_eq!(got.len(), want.len(), "lost more than message {lost}");
    assert!(got == want, "messages differ from all-but-{lost}");

    // The damage was reported once: the next restart is clean.
    qm.end();
    let out = home.run(&["strmqm", &qm.name]);
    assert!(out.status.success(), "{:?}", out);
}

#[test]
fn zeroed_records_in_the_last_window_are_reported_and_a_torn_tail_alone_is_not_a_loss() {
    let home = Home::new();
    let qm = start(&home, "QDMG2");
    let sent = put_all(&qm, 600);
    qm.kill9();
    let raw = ring(&qm.dir());
    let recs = records(&raw);
    let window = last_window_puts(&recs);
    assert!(window.len() >= 10);
    // The last record's payload zeroed from its middle on: exactly what a write cut short
    // leaves, so a torn tail — reported, but not a possible loss.
    let last = *recs.last().unwrap();
    assert_eq!(last.kind, 1);
    let last_msg = message_in(&raw, &last);
    patch(
        &qm.dir(),
        last.lsn + last.len / 2,
        last.len - last.len / 2,
        |_| 0,
    );
    let before = error_log(&qm).len();
    let out = home.run(&["strmqm", &qm.name]);
    assert!(out.status.success(), "{out:?}");
    let log = error_log(&qm)[before..].to_string();
    let line = format!(
        "log LSN {}..{} ({} bytes): torn tail (never completely written), cut; 1 damaged record(s), 0 intact record(s) dropped",
        last.lsn,
        last.lsn + last.len,
        last.len
    );
    assert!(log.contains(&line), "expected «{line}» in:\n{log}");
    // A note, not the warning that acknowledged work may be lost (FMQ2002E).
    assert!(!log.contains("FMQ2002E"), "{log}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&line), "strmqm must show it:\n{stderr}");
    qm.kill9();

    // A whole record zeroed (header too) in the middle of the last window: intact records
    // follow, so it is damage to acknowledged data — reported with its exact span, and the
    // records after it kept.
    let victim = window[window.len() / 2];
    let lost = message_in(&raw, &victim);
    patch(&qm.dir(), victim.lsn, victim.len, |_| 0);
    let before = error_log(&qm).len();
    let out = home.run(&["strmqm", &qm.name]);
    assert_eq!(out.status.code(), Some(EXIT_RECOVERY_LOSS), "{out:?}");
    let log = error_log(&qm)[before..].to_string();
    let line = format!(
        "log LSN {}..{} ({} bytes): damaged, skipped (the records after it were kept); damaged bytes of unknown record count, 0 intact record(s) dropped",
        victim.lsn,
        victim.lsn + victim.len,
        victim.len
    );
    assert!(log.contains(&line), "expected «{line}» in:\n{log}");
    let want: Vec<String> = sent
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != lost && *i != last_msg)
        .map(|(_, b)| b.clone())
        .collect();
    assert!(
        drain(&qm) == want,
        "messages other than {lost} and {last_msg} are missing"
    );
}

/// Segment records: `[len u32][crc u32][id u64][kind u8][payload]` from offset 0.
fn segment_records(raw: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 17 <= raw.len() {
        let len = u32::from_le_bytes(raw[off..off + 4].try_into().unwrap()) as usize;
        if off + 17 + len > raw.len() {
            break;
        }
        out.push((off, 17 + len));
        off += 17 + len;
    }
    out
}

#[test]
fn one_flipped_byte_in_a_store_segment_costs_that_message_only() {
    let home = Home::new();
    let qm = start(&home, "QDMG3");
    let sent = put_all(&qm, 400);
    // A controlled end checkpoints: the messages move to a store segment.
    qm.end();
    let store = qm.dir().join("store");
    let mut segs: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dat"))
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .collect();
    segs.sort();
    let seg = segs.last().expect("a segment with messages").clone();
    let mut raw = std::fs::read(&seg).unwrap();
    let recs = segment_records(&raw);
    assert!(
        recs.len() >= 400,
        "{} records in {}",
        recs.len(),
        seg.display()
    );
    // A message in the middle of the segment.
    let (off, len) = recs
        .iter()
        .copied()
        .find(|&(o, l)| raw[o..o + l].windows(7).any(|w| w == b"M00200|"))
        .expect("message 200 in the segment");
    raw[off + len - 50] ^= 0x20;
    std::fs::write(&seg, &raw).unwrap();

    let dump = home.ok(&["dmplog", &qm.name]);
    assert!(
        dump.contains(&format!("damaged: offset {off}, {len} bytes")),
        "{dump}"
    );

    let before = error_log(&qm).len();
    let out = home.run(&["strmqm", &qm.name]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_RECOVERY_LOSS), "{stderr}");
    let log = error_log(&qm)[before..].to_string();
    assert!(
        log.contains(&format!(
            "offset {off}) is damaged or missing and was not restored"
        )),
        "{log}"
    );
    let mut want = sent.clone();
    want.remove(200);
    let got = drain(&qm);
    assert_eq!(got.len(), 399, "{log}");
    assert!(got == want, "messages other than 200 are missing");
}

/// Damage that reaches the end of an earlier sync window (so valid records follow only in a later
/// one) is refused by recovery as mid-log damage; `dmplog --salvage` overwrites the damaged span
/// with a filler so that the queue manager starts with every record after it.
#[test]
fn mid_log_damage_is_refused_and_dmplog_salvage_recovers_the_records_after_it() {
    let home = Home::new();
    let qm = start(&home, "QDMG4");
    let sent = put_all(&qm, 650);
    qm.kill9();
    let raw = ring(&qm.dir());
    let recs = records(&raw);
    let first_next = recs.iter().position(|r| r.lsn >= WINDOW).unwrap();
    let victims: Vec<Rec> = recs[first_next - 3..first_next].to_vec();
    assert!(victims.iter().all(|r| r.kind == 1));
    let lost: Vec<usize> = victims.iter().map(|r| message_in(&raw, r)).collect();
    let from = victims[0].lsn;
    patch(&qm.dir(), from, WINDOW - from, |_| 0);

    let out = home.run(&["strmqm", &qm.name]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("LSN {from}")) && stderr.contains("dmplog"),
        "{stderr}"
    );

    let to = recs[first_next].lsn;
    let dump = home.ok(&["dmplog", "--salvage", &qm.name]);
    let line = format!(
        "Salvaged: LSN {from}..{to} ({} bytes) overwritten",
        to - from
    );
    assert!(dump.contains(&line), "expected «{line}» in:\n{dump}");
    let out = home.run(&["strmqm", &qm.name]);
    assert!(out.status.success(), "{out:?}");
    let want: Vec<String> = sent
        .iter()
        .enumerate()
        .filter(|(i, _)| !lost.contains(i))
        .map(|(_, b)| b.clone())
        .collect();
    assert!(
        drain(&qm) == want,
        "messages other than {lost:?} are missing"
    );
}

/// A skipped record that later records depend on (a queue definition, then puts to that queue):
/// those records are lost with it and each is reported; everything else is restored.
#[test]
fn records_that_depended_on_a_skipped_record_are_reported_not_fatal() {
    let home = Home::new();
    let qm = start(&home, "QDMG5");
    let mut sent = put_all(&qm, 520);
    let out = home.run_with_input(&["runmqsc", &qm.name], "DEFINE QLOCAL(DAMAGED.Q)\n");
    assert!(out.status.success(), "{out:?}");
    put_to(&qm, "DAMAGED.Q", 1000..1004);
    sent.extend(put_to(&qm, Q, 520..540));
    qm.kill9();
    let raw = ring(&qm.dir());
    let recs = records(&raw);
    let define = *recs
        .iter()
        .rev()
        .find(|r| r.kind == 4)
        .expect("the DEFINE record");
    assert!(define.lsn >= WINDOW, "{define:?} is not in the last window");
    let dependants: Vec<Rec> = recs
        .iter()
        .filter(|r| r.lsn > define.lsn && r.kind == 1)
        .filter(|r| message_in(&raw, r) >= 1000)
        .copied()
        .collect();
    assert_eq!(dependants.len(), 4);
    patch(&qm.dir(), define.lsn + define.len - 3, 1, |b| b ^ 0x01);

    let before = error_log(&qm).len();
    let out = home.run(&["strmqm", &qm.name]);
    assert_eq!(out.status.code(), Some(EXIT_RECOVERY_LOSS), "{out:?}");
    let log = error_log(&qm)[before..].to_string();
    assert!(
        log.contains(&format!(
            "log LSN {}..{} ({} bytes): damaged, skipped",
            define.lsn,
            define.lsn + define.len,
            define.len
        )),
        "{log}"
    );
    for d in &dependants {
        assert!(
            log.contains(&format!(
                "log record at LSN {} (kind 1, {} bytes) could not be applied",
                d.lsn, d.len
            )),
            "{log}"
        );
    }
    assert!(
        log.contains("5 item(s) that may have been acknowledged"),
        "{log}"
    );
    // Killed again before any checkpoint: the filler now stands where the damage was, the
    // records after it still cannot be applied — listed again, but the start is not refused
    // and the loss is not announced twice.
    qm.kill9();
    let before = error_log(&qm).len();
    let out = home.run(&["strmqm", &qm.name]);
    assert!(out.status.success(), "{out:?}");
    let log = error_log(&qm)[before..].to_string();
    assert_eq!(log.matches("could not be applied").count(), 4, "{log}");
    // A note, not the warning that acknowledged work may be lost (FMQ2002E).
    assert!(!log.contains("FMQ2002E"), "{log}");
    assert!(
        drain(&qm) == sent,
        "messages on the intact queue are missing"
    );
}
