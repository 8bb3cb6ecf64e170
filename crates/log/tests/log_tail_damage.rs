//! Recovery in the face of torn and corrupt tails and mid-log damage.

mod common;

use std::fs::OpenOptions;

use common::*;
use ferrymq_log::{LogConfig, LogError, Lsn, RecoveryLog, TailProblem};

/// Appends `n` records of `len` payload bytes, closes, returns their start LSNs.
fn fill(cfg: &LogConfig, n: u64, len: usize) -> Vec<Lsn> {
    let (log, _) = create_open(cfg);
    let starts = (0..n)
        .map(|i| log.append(1, &payload(i, len)).unwrap() - HEADER_LEN - len as u64)
        .collect();
    log.close().unwrap();
    starts
}

fn open_err(cfg: &LogConfig) -> LogError {
    match RecoveryLog::open(cfg, Box::new(|_| {})) {
        Ok(_) => panic!("open should have failed"),
        Err(e) => e,
    }
}

#[test]
fn zeroed_end_of_last_record_is_a_torn_tail_and_appends_continue_there() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    let last = starts[9];
    patch(&cfg, last + 150, 167, |_, b| *b = 0);
    let (log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 9);
    assert_eq!(rec.tail_problem, Some(TailProblem::Torn { at: last }));
    assert_eq!(rec.discarded_tail_bytes, 317);
    assert_eq!(rec.tail_lsn, last);
    assert_eq!(log.end_lsn(), last);
    log.append(2, b"after the tear").unwrap();
    log.append(2, b"and another").unwrap();
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.tail_problem, None);
    assert_eq!(rec.records.len(), 11);
    assert_eq!(rec.records[9].lsn, last);
    assert_eq!(&rec.records[10].payload[..], b"and another");
}

#[test]
fn truncated_log_file_is_a_torn_tail_and_is_restored_to_full_size() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    let path = cfg.dir.join("S0000000.LOG");
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(starts[9] + 100).unwrap();
    drop(f);
    let (log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 9);
    assert_eq!(rec.tail_problem, Some(TailProblem::Torn { at: starts[9] }));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    log.append(2, b"x").unwrap();
    log.close().unwrap();
    assert_eq!(open(&cfg).1.records.len(), 10);
}

#[test]
fn flipped_byte_in_last_record_drops_exactly_that_record_as_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[9] + HEADER_LEN + 120, 1, |_, b| *b ^= 0x40);
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 9);
    assert_eq!(rec.records.last().unwrap().lsn, starts[8]);
    assert_eq!(
        rec.tail_problem,
        Some(TailProblem::Corrupt { at: starts[9] })
    );
    assert_eq!(rec.discarded_tail_bytes, 317);
}

/// 32 KiB ring, sync window 16 KiB; ~21 KiB of records so valid records
/// exist in a later sync window than the damage.
fn mid_log_setup() -> (tempfile::TempDir, LogConfig, Vec<Lsn>) {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = cfg(tmp.path(), 2, 4);
    let starts = fill(&cfg, 100, 200);
    assert!(*starts.last().unwrap() > 16384);
    (tmp, cfg, starts)
}

#[test]
fn flipped_payload_byte_mid_log_is_damage_not_a_tail() {
    let (_tmp, cfg, starts) = mid_log_setup();
    patch(&cfg, starts[5] + HEADER_LEN + 10, 1, |_, b| *b ^= 1);
    match open_err(&cfg) {
        LogError::Damaged(msg) => assert!(msg.contains(&starts[5].to_string()), "{msg}"),
        other => panic!("expected Damaged, got {other}"),
    }
}

#[test]
fn damaged_lsn_field_mid_log_is_damage() {
    let (_tmp, cfg, starts) = mid_log_setup();
    patch(&cfg, starts[5] + 8, 1, |_, b| *b ^= 0x80);
    assert!(matches!(open_err(&cfg), LogError::Damaged(_)));
}

#[test]
fn zeroed_record_mid_log_is_damage() {
    let (_tmp, cfg, starts) = mid_log_setup();
    patch(&cfg, starts[5], HEADER_LEN + 200, |_, b| *b = 0);
    assert!(matches!(open_err(&cfg), LogError::Damaged(_)));
}

/// Damage followed by valid records only within the same sync window is
/// indistinguishable from a power loss during that window's write (pages may
/// land out of order), so it is a tail. The unacknowledged records after it
/// must then never come back, even when a new record ends exactly where one
/// of them starts.
#[test]
fn damage_within_the_last_sync_window_is_a_tail_and_later_records_stay_dead() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path()); // sync window = 8 KiB file
    let starts = fill(&cfg, 10, 300); // all within the first window
    patch(&cfg, starts[5] + HEADER_LEN + 7, 1, |_, b| *b ^= 2);
    let (log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 5);
    assert_eq!(
        rec.tail_problem,
        Some(TailProblem::Corrupt { at: starts[5] })
    );
    // Same size as the old record 5: the new tail is old record 6's start.
    let end = log.append(7, &payload(99, 300)).unwrap();
    assert_eq!(end, starts[6]);
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(
        rec.records.len(),
        6,
        "records after the damage were resurrected"
    );
    assert_eq!(rec.records[5].kind, 7);
    assert_eq!(rec.tail_lsn, starts[6]);
}
