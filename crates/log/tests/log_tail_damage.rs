//! Recovery in the face of torn and corrupt tails and mid-log damage.

mod common;

use std::fs::OpenOptions;

use common::*;
use ferrymq_log::{DamagePolicy, LogConfig, LogError, Lsn, RecoveryLog, SpanKind, TailProblem};

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

fn open_skipping(cfg: &LogConfig) -> (RecoveryLog, ferrymq_log::Recovered) {
    RecoveryLog::open_with(cfg, Box::new(|_| {}), DamagePolicy::SkipDamagedRecords).unwrap()
}

/// The truncating policy (the Raft log's) still ends the log at the damage,
/// but reports exactly what that cost: the damaged record and every intact
/// record after it, as one span with its LSN range and counts.
#[test]
fn truncating_at_damage_reports_the_intact_records_it_drops() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[3] + HEADER_LEN + 7, 1, |_, b| *b ^= 2);
    let end = starts[9] + HEADER_LEN + 300;
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 3);
    assert_eq!(rec.discarded.len(), 1, "{:?}", rec.discarded);
    let s = rec.discarded[0];
    assert_eq!((s.from, s.to), (starts[3], end));
    assert_eq!(s.kind, SpanKind::CorruptTail);
    assert_eq!((s.damaged_records, s.intact_records), (1, 6));
    assert_eq!(rec.discarded_tail_bytes, end - starts[3]);
    assert!(rec.may_have_lost_acknowledged());
}

/// A damaged record in the middle of the last sync window costs that record
/// only: the intact records after it are kept (their sync covered the damaged
/// one too, so they may have been acknowledged), the span is reported
/// exactly, and it is overwritten by a filler so the next recovery and
/// `read_from` see one chain again.
#[test]
fn skipping_policy_keeps_the_intact_records_after_a_damaged_one() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[3] + HEADER_LEN + 7, 1, |_, b| *b ^= 2);
    let (log, rec) = open_skipping(&cfg);
    let kept: Vec<Lsn> = rec.records.iter().map(|r| r.lsn).collect();
    let mut want = starts.clone();
    want.remove(3);
    assert_eq!(kept, want);
    for r in &rec.records {
        let i = starts.iter().position(|&s| s == r.lsn).unwrap() as u64;
        assert_eq!(&r.payload[..], &payload(i, 300)[..]);
    }
    assert_eq!(rec.discarded.len(), 1);
    let s = rec.discarded[0];
    assert_eq!(
        (s.from, s.to, s.kind),
        (starts[3], starts[4], SpanKind::Skipped)
    );
    assert_eq!((s.damaged_records, s.intact_records), (1, 0));
    assert_eq!(rec.discarded_tail_bytes, 317);
    assert_eq!(rec.tail_problem, None);
    assert!(rec.may_have_lost_acknowledged());
    // The filler makes the ring one chain again: readers pass over it.
    let read: Vec<Lsn> = log
        .read_from(starts[2], 1 << 20)
        .unwrap()
        .iter()
        .map(|r| r.lsn)
        .collect();
    assert_eq!(read, want[2..].to_vec());
    assert_eq!(log.read_from(starts[3], 1 << 20).unwrap()[0].lsn, starts[4]);
    log.append(5, b"after").unwrap();
    log.close().unwrap();
    let (_log, rec) = open_skipping(&cfg);
    assert!(rec.discarded.is_empty(), "{:?}", rec.discarded);
    assert_eq!(rec.records.len(), 10);
    assert_eq!(&rec.records[9].payload[..], b"after");
}

/// A zeroed record (header and all) with intact records after it in the same
/// window used to read as a clean end, dropping them without a word.
#[test]
fn zeroed_record_in_the_last_window_is_reported_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[6], HEADER_LEN + 300, |_, b| *b = 0);
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 6);
    let s = rec.discarded[0];
    assert_eq!((s.from, s.to), (starts[6], starts[9] + HEADER_LEN + 300));
    assert_eq!((s.damaged_records, s.intact_records), (0, 3));
    drop(_log);
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[6], HEADER_LEN + 300, |_, b| *b = 0);
    let (_log, rec) = open_skipping(&cfg);
    assert_eq!(rec.records.len(), 9);
    assert_eq!(rec.discarded.len(), 1);
    let s = rec.discarded[0];
    assert_eq!(
        (s.from, s.to, s.kind),
        (starts[6], starts[7], SpanKind::Skipped)
    );
    assert_eq!(s.damaged_records, 0);
}

/// A torn last record (never completely written, so never acknowledged) is
/// cut and reported, but is not a possible loss of acknowledged work.
#[test]
fn torn_last_record_is_reported_but_not_a_possible_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[9] + 150, 167, |_, b| *b = 0);
    let (_log, rec) = open_skipping(&cfg);
    assert_eq!(rec.records.len(), 9);
    assert_eq!(rec.discarded.len(), 1);
    let s = rec.discarded[0];
    assert_eq!(
        (s.from, s.to, s.kind),
        (starts[9], starts[9] + 317, SpanKind::TornTail)
    );
    assert!(!rec.may_have_lost_acknowledged());
    // A flipped bit in the last record instead: it was written whole, so it
    // may have been acknowledged.
    drop(_log);
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let starts = fill(&cfg, 10, 300);
    patch(&cfg, starts[9] + HEADER_LEN + 20, 1, |_, b| *b ^= 8);
    let (_log, rec) = open_skipping(&cfg);
    assert_eq!(rec.discarded[0].kind, SpanKind::CorruptTail);
    assert!(rec.may_have_lost_acknowledged());
}

#[test]
fn the_filler_kind_is_reserved() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    assert!(matches!(log.append(255, b"x"), Err(LogError::Invalid(_))));
}

/// With the skipping policy, a damaged record whose successor starts in its
/// own window is skipped even when the log goes on into later windows (that
/// damage hit synced data: truncating would lose every record after it).
#[test]
fn skipping_policy_skips_a_damaged_record_mid_log_too() {
    let (_tmp, cfg, starts) = mid_log_setup();
    patch(&cfg, starts[5] + HEADER_LEN + 10, 1, |_, b| *b ^= 1);
    let (_log, rec) = open_skipping(&cfg);
    assert_eq!(rec.records.len(), 99);
    assert_eq!(rec.discarded.len(), 1);
    assert_eq!(
        (rec.discarded[0].from, rec.discarded[0].to),
        (starts[5], starts[6])
    );
}

/// A skipped span longer than the largest record (a one-page ring takes
/// payloads of 2 KiB at most) is filled with several filler records, each of
/// which verifies: the next recovery sees one chain, not new damage.
#[test]
fn a_skipped_span_longer_than_a_record_gets_several_fillers() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = cfg(tmp.path(), 1, 1);
    let starts = fill(&cfg, 3, 1200);
    patch(&cfg, 0, starts[2], |_, b| *b = 0);
    let (log, rec) = open_skipping(&cfg);
    assert_eq!(rec.records.len(), 1);
    assert_eq!(rec.records[0].lsn, starts[2]);
    assert_eq!((rec.discarded[0].from, rec.discarded[0].to), (0, starts[2]));
    assert!(starts[2] > log.max_payload() as u64 + HEADER_LEN);
    assert_eq!(log.read_from(0, 1 << 20).unwrap()[0].lsn, starts[2]);
    log.close().unwrap();
    let (_log, rec) = open_skipping(&cfg);
    assert!(rec.discarded.is_empty(), "{:?}", rec.discarded);
    assert_eq!(rec.records.len(), 1);
}
