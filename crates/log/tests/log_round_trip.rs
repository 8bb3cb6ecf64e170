//! Append / reopen round trips of the circular log, including records that
//! wrap across file boundaries and the ring end while the ring laps.

mod common;

use common::*;
use ferrymq_log::{LogError, LogRecord, RecoveryLog};

/// Appends records of varied sizes on a 16 KiB ring, checkpointing whenever
/// it is full, reopening every so often, and checks each recovery returns
/// exactly the records appended since the checkpoint.
#[test]
fn records_survive_reopen_while_the_ring_laps_and_wraps() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (mut log, rec) = create_open(&cfg);
    assert!(rec.records.is_empty());
    assert_eq!(rec.tail_problem, None);
    let cap = log.capacity();
    let file_bytes = cap / 2;
    let mut model: Vec<LogRecord> = Vec::new();
    let (mut wrapped_file, mut wrapped_ring) = (0, 0);
    for i in 0..600u64 {
        let len = ((i * 397) % 1500) as usize;
        let data = payload(i, len);
        let end = match log.append((i % 255) as u8, &data) {
            Ok(end) => end,
            Err(LogError::Full { .. }) => {
                log.wait_durable(log.end_lsn()).unwrap();
                log.set_checkpoint(log.durable_lsn()).unwrap();
                model.clear();
                log.append((i % 255) as u8, &data).unwrap()
            }
            Err(e) => panic!("append failed: {e}"),
        };
        model.push(LogRecord {
            lsn: end - HEADER_LEN - len as u64,
            kind: (i % 255) as u8,
            payload: data.into(),
        });
        if i % 37 == 36 {
            log.close().unwrap();
            let (l, rec) = open(&cfg);
            log = l;
            assert_eq!(rec.tail_problem, None, "clean close must not look damaged");
            assert_eq!(rec.records, model, "recovery after record {i}");
            assert_eq!(rec.tail_lsn, log.end_lsn());
            for r in &rec.records {
                let (s, e) = (r.lsn, r.end_lsn());
                if s / file_bytes != (e - 1) / file_bytes {
                    wrapped_file += 1;
                }
                if s / cap != (e - 1) / cap {
                    wrapped_ring += 1;
                }
            }
        }
    }
    assert!(log.end_lsn() > 10 * cap, "the ring must lap many times");
    assert!(
        wrapped_file > 0 && wrapped_ring > 0,
        "records must span file and ring ends"
    );
    log.close().unwrap();
}

#[test]
fn append_parts_equals_append_of_the_concatenation() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    let a = log.append_parts(9, &[b"head:", b"", b"body"]).unwrap();
    let b = log.append(9, b"head:body").unwrap();
    assert_eq!(b - a, a, "both records have the same encoded length");
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 2);
    assert_eq!(rec.records[0].payload, rec.records[1].payload);
    assert_eq!(&rec.records[0].payload[..], b"head:body");
}

#[test]
fn full_until_checkpoint_releases_space() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    let cap = log.capacity();
    let data = vec![7u8; 1000];
    let mut ends = Vec::new();
    let err = loop {
        match log.append(1, &data) {
            Ok(end) => ends.push(end),
            Err(e) => break e,
        }
    };
    match err {
        LogError::Full { needed, free } => {
            assert_eq!(needed, 1017);
            assert!(free < needed);
            assert_eq!(free, cap - log.used_bytes());
        }
        other => panic!("expected Full, got {other}"),
    }
    assert_eq!(ends.len() as u64, cap / 1017);
    log.wait_durable(*ends.last().unwrap()).unwrap();
    // A checkpoint that is not a record boundary is refused.
    assert!(matches!(
        log.set_checkpoint(ends[0] + 1),
        Err(LogError::Invalid(_))
    ));
    // Beyond durable is refused too.
    assert!(log.set_checkpoint(log.end_lsn() + 17).is_err());
    log.set_checkpoint(ends[2]).unwrap();
    assert_eq!(log.checkpoint_lsn(), ends[2]);
    // Exactly the three released records' worth of space came back.
    for _ in 0..3 {
        log.append(1, &data).unwrap();
    }
    assert!(matches!(log.append(1, &data), Err(LogError::Full { .. })));
    // Checkpoints never move backwards.
    assert!(log.set_checkpoint(ends[1]).is_err());
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.checkpoint_lsn, ends[2]);
    assert_eq!(rec.records.first().unwrap().lsn, ends[2]);
}

#[test]
fn oversized_record_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, _) = create_open(&tiny(tmp.path()));
    let max = log.max_payload();
    assert_eq!(max as u64, log.capacity() / 2);
    match log.append(1, &vec![0u8; max + 1]) {
        Err(LogError::RecordTooLarge { len, max: m }) => assert_eq!((len, m), (max + 1, max)),
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    log.append(1, &vec![1u8; max]).unwrap();
}

#[test]
fn create_refuses_an_existing_log_and_open_refuses_other_geometry() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    RecoveryLog::create(&cfg).unwrap();
    assert!(matches!(
        RecoveryLog::create(&cfg),
        Err(LogError::Invalid(_))
    ));
    let mut other = cfg.clone();
    other.file_pages = 3;
    assert!(matches!(
        RecoveryLog::open(&other, Box::new(|_| {})),
        Err(LogError::Invalid(_))
    ));
    let missing = tiny(&tmp.path().join("nowhere"));
    assert!(matches!(
        RecoveryLog::open(&missing, Box::new(|_| {})),
        Err(LogError::Io { .. })
    ));
}

/// Lap 1 fills the ring with equal records, lap 2 rewrites only three of
/// them, so the bytes right after the tail are an intact lap-1 record whose
/// CRC is valid for its old LSN. Recovery must not return it.
#[test]
fn stale_records_from_a_previous_lap_are_never_returned() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    let cap = log.capacity();
    let data_len = 1024 - HEADER_LEN as usize;
    for i in 0..cap / 1024 {
        log.append(1, &payload(i, data_len)).unwrap();
    }
    assert_eq!(log.end_lsn(), cap);
    log.wait_durable(cap).unwrap();
    log.set_checkpoint(cap).unwrap();
    for i in 0..3 {
        log.append(2, &payload(100 + i, data_len)).unwrap();
    }
    log.close().unwrap();
    let (log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 3);
    assert!(rec.records.iter().all(|r| r.kind == 2 && r.lsn >= cap));
    assert_eq!(rec.tail_lsn, cap + 3 * 1024);
    assert_eq!(rec.tail_problem, None);
    assert_eq!(log.read_from(cap, usize::MAX).unwrap(), rec.records);
}

#[test]
fn read_from_returns_the_same_records_as_recovery() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    // Lap once so reads cross the ring end.
    for i in 0..80u64 {
        let len = (i * 211 % 700) as usize;
        match log.append(3, &payload(i, len)) {
            Ok(_) => {}
            Err(LogError::Full { .. }) => {
                log.wait_durable(log.end_lsn()).unwrap();
                log.set_checkpoint(log.durable_lsn()).unwrap();
                log.append(3, &payload(i, len)).unwrap();
            }
            Err(e) => panic!("append failed: {e}"),
        }
    }
    log.wait_durable(log.end_lsn()).unwrap();
    let ckpt = log.checkpoint_lsn();
    assert!(
        ckpt > 0 && log.end_lsn() > log.capacity(),
        "the ring must have lapped"
    );
    let all = log.read_from(ckpt, usize::MAX).unwrap();
    // Paged reads give the same sequence; each page holds at least one record.
    let mut paged = Vec::new();
    let mut from = ckpt;
    loop {
        let page = log.read_from(from, 500).unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() == 1 || page.iter().map(|r| r.payload.len()).sum::<usize>() <= 500);
        from = page.last().unwrap().end_lsn();
        paged.extend(page);
    }
    assert_eq!(paged, all);
    assert!(matches!(
        log.read_from(ckpt + 1, 100),
        Err(LogError::Invalid(_))
    ));
    assert!(matches!(
        log.read_from(ckpt - 1, 100),
        Err(LogError::Invalid(_))
    ));
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records, all);
}

#[test]
fn the_tail_cache_serves_the_same_records_as_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    log.keep_tail(1 << 20);
    let mut served_from_memory = 0;
    for i in 0..80u64 {
        let len = (i * 211 % 700) as usize;
        let from = log.end_lsn();
        match log.append(3, &payload(i, len)) {
            Ok(_) => {}
            Err(LogError::Full { .. }) => {
                log.wait_durable(log.end_lsn()).unwrap();
                log.set_checkpoint(log.durable_lsn()).unwrap();
                log.append(3, &payload(i, len)).unwrap();
            }
            Err(e) => panic!("append failed: {e}"),
        }
        log.wait_durable(log.end_lsn()).unwrap();
        // What the cache serves is exactly what the files hold (read_from with the cache
        // off would read the files; compare with a fresh log below too).
        if let Some(cached) = log.read_cached(from, usize::MAX) {
            served_from_memory += 1;
            assert_eq!(cached.len(), 1);
            assert_eq!(cached[0].payload, payload(i, len));
            assert_eq!(cached[0].lsn, from);
        }
    }
    assert!(
        served_from_memory > 70,
        "the cache served {served_from_memory} of 80 reads"
    );
    let ckpt = log.checkpoint_lsn();
    assert!(log.end_lsn() > log.capacity(), "the ring must have lapped");
    let cached = log.read_from(ckpt, usize::MAX).unwrap();
    assert!(
        log.read_cached(log.durable_lsn(), 100).is_none(),
        "nothing durable after the end"
    );
    log.close().unwrap();
    let (log, rec) = open(&cfg);
    assert_eq!(rec.records, cached);
    assert_eq!(log.read_from(ckpt, usize::MAX).unwrap(), cached);
}

#[test]
fn a_minimum_sync_gap_batches_appends_into_fewer_syncs() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    log.set_min_sync_gap(std::time::Duration::from_millis(20), 0);
    let before = log.sync_count();
    let t = std::time::Instant::now();
    // Appends 2 ms apart without waiting: with a 20 ms gap they share a few syncs.
    for i in 0..20u64 {
        log.append(1, &payload(i, 100)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    log.wait_durable(log.end_lsn()).unwrap();
    let syncs = log.sync_count() - before;
    assert!(
        syncs <= 6,
        "{syncs} syncs for 20 appends over {:?}",
        t.elapsed()
    );
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 20);
}

#[test]
fn a_lazy_append_rides_with_the_next_one_and_a_waiter_still_gets_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    log.append(1, b"first").unwrap();
    log.wait_durable(log.end_lsn()).unwrap();
    // A lazy append does not wake the writer, but a writer still looping after its last sync
    // (descheduled between publishing and looking again, as on a loaded machine) finds it in
    // the buffer and takes it along. So each attempt counts only if the writer was asleep; a
    // log whose lazy appends always sync fails every attempt.
    let (mut quiet, mut lazies) = (false, 0);
    for _ in 0..5 {
        lazies += 1;
        let syncs = log.sync_count();
        let lazy_end = log.append_lazy(2, &[b"hint"]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        if log.sync_count() == syncs {
            assert!(log.durable_lsn() < lazy_end);
            quiet = true;
            break;
        }
    }
    assert!(quiet, "a lazy append alone does not sync");
    // The next normal append takes it along; and waiting for it directly also works.
    let end = log.append(3, b"next").unwrap();
    log.wait_durable(end).unwrap();
    let lazy2 = log.append_lazy(2, &[b"hint2"]).unwrap();
    log.wait_durable(lazy2).unwrap();
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    let kinds: Vec<u8> = rec.records.iter().map(|r| r.kind).collect();
    let mut want = vec![1u8];
    want.extend(std::iter::repeat_n(2, lazies));
    want.extend([3, 2]);
    assert_eq!(kinds, want);
}

#[test]
fn a_sync_gap_gives_way_once_enough_bytes_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    let (log, _) = create_open(&cfg);
    let end = log.append(1, &payload(0, 100)).unwrap();
    log.wait_durable(end).unwrap();
    // A gap far longer than the test: only the byte limit can let the writer go early.
    log.set_min_sync_gap(std::time::Duration::from_secs(30), 4096);
    let t = std::time::Instant::now();
    for i in 1..40u64 {
        log.append_lazy(1, &[&payload(i, 200)[..]]).unwrap();
    }
    let end = log.append(1, &payload(40, 200)).unwrap();
    log.wait_durable(end).unwrap();
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "8 KiB waiting should not sit out a 30 s gap ({:?})",
        t.elapsed()
    );
    log.close().unwrap();
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 41);
}

/// Whether a file in `dir` can be opened for direct I/O at all.
fn direct_io_allowed(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join("probe");
    std::fs::write(&p, [0u8; 4096]).unwrap();
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .is_ok();
    std::fs::remove_file(&p).unwrap();
    ok
}

/// Appends a few hundred records, reopens, and checks they all come back and
/// that the log is written the way it says.
/// Returns the syncs (fdatasyncs or direct writes) the appends took.
fn round_trip_in(
    dir: &std::path::Path,
    cfg: ferrymq_log::LogConfig,
    want: ferrymq_log::WriteMode,
) -> u64 {
    let (log, _) = create_open(&cfg);
    assert_eq!(log.write_mode(), want, "{}", dir.display());
    let mut ends = Vec::new();
    for i in 0..300u64 {
        ends.push(log.append(7, &payload(i, (i * 37 % 900) as usize)).unwrap());
    }
    log.wait_durable(*ends.last().unwrap()).unwrap();
    let syncs = log.sync_count();
    log.close().unwrap();
    let (log, rec) = open(&cfg);
    assert_eq!(log.write_mode(), want);
    assert_eq!(rec.records.len(), 300);
    for (i, r) in rec.records.iter().enumerate() {
        assert_eq!(
            r.payload[..],
            payload(i as u64, (i as u64 * 37 % 900) as usize)[..]
        );
    }
    syncs
}

/// Under fsync durability the log is written directly wherever the filesystem
/// allows it; asked not to, or under `os` durability, through the page cache.
#[test]
fn the_log_is_written_directly_where_the_filesystem_allows_it_and_buffered_when_asked() {
    use ferrymq_log::{Durability, WriteMode};
    let tmp = tempfile::tempdir().unwrap();
    let direct = if direct_io_allowed(tmp.path()) {
        WriteMode::Direct
    } else {
        WriteMode::Buffered
    };
    let d = tmp.path().join("direct");
    assert!(round_trip_in(&d, cfg(&d, 2, 64), direct) > 0);
    let b = tmp.path().join("asked");
    let mut asked = cfg(&b, 2, 64);
    asked.direct_writes = false;
    assert!(round_trip_in(&b, asked, WriteMode::Buffered) > 0);
    let o = tmp.path().join("os");
    let mut os = cfg(&o, 2, 64);
    os.durability = Durability::OsBuffered;
    assert_eq!(round_trip_in(&o, os, WriteMode::Buffered), 0);
}
