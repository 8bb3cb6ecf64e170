//! Group commit: concurrent appenders share fdatasyncs, and durability is
//! reported through `wait_durable` and the `on_durable` callback.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use ferrymq_log::{Durability, RecoveryLog};

#[test]
fn concurrent_appenders_share_fdatasyncs() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = cfg(tmp.path(), 4, 256); // 4 MiB: no checkpoint needed
    RecoveryLog::create(&cfg).unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let seen2 = Arc::clone(&seen);
    let (log, _) = RecoveryLog::open(
        &cfg,
        Box::new(move |lsn| {
            // Durable LSNs only ever grow.
            let prev = seen2.swap(lsn, Ordering::SeqCst);
            assert!(lsn > prev);
        }),
    )
    .unwrap();
    let log = Arc::new(log);
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 150;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let end = log.append(t as u8, &payload(t * 1000 + i, 100)).unwrap();
                    log.wait_durable(end).unwrap();
                    assert!(log.durable_lsn() >= end);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let appends = THREADS * PER_THREAD;
    let syncs = log.sync_count();
    assert!(syncs > 0);
    assert!(
        syncs < appends,
        "{syncs} fdatasyncs for {appends} appends: no group commit"
    );
    assert_eq!(log.durable_lsn(), log.end_lsn());
    let end = log.end_lsn();
    eprintln!("{syncs} fdatasyncs for {appends} appends");
    Arc::into_inner(log).unwrap().close().unwrap();
    // The callback runs after waiters are woken; once the writer has stopped
    // it must have seen the final durable LSN.
    assert_eq!(seen.load(Ordering::SeqCst), end);
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len() as u64, appends);
    for t in 0..THREADS {
        // Each thread's records are in its own append order.
        let mine: Vec<_> = rec.records.iter().filter(|r| r.kind == t as u8).collect();
        assert_eq!(mine.len() as u64, PER_THREAD);
        for (i, r) in mine.iter().enumerate() {
            assert_eq!(&r.payload[..], &payload(t * 1000 + i as u64, 100)[..]);
        }
    }
}

#[test]
fn os_buffered_mode_never_fdatasyncs_while_running_and_drop_flushes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = tiny(tmp.path());
    cfg.durability = Durability::OsBuffered;
    let (log, _) = create_open(&cfg);
    let mut end = 0;
    for i in 0..10 {
        end = log.append(1, &payload(i, 50)).unwrap();
    }
    log.wait_durable(end).unwrap();
    assert_eq!(log.sync_count(), 0);
    for i in 10..20 {
        log.append(1, &payload(i, 50)).unwrap();
    }
    // No close(): Drop must still write what was buffered.
    drop(log);
    let (_log, rec) = open(&cfg);
    assert_eq!(rec.records.len(), 20);
}

#[test]
fn wait_durable_beyond_the_end_is_an_error_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, _) = create_open(&tiny(tmp.path()));
    let end = log.append(1, b"x").unwrap();
    assert!(log.wait_durable(end + 1).is_err());
    log.wait_durable(end).unwrap();
}

#[test]
fn recovery_log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RecoveryLog>();
}

/// Once the writer has failed, nothing more is acknowledged: waits and
/// appends return the stored error instead of hanging or succeeding. (A
/// panicking `on_durable` callback is the failure we can inject portably.)
#[test]
fn writer_failure_is_reported_to_every_later_append_and_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tiny(tmp.path());
    RecoveryLog::create(&cfg).unwrap();
    let (log, _) =
        RecoveryLog::open(&cfg, Box::new(|_| panic!("injected callback failure"))).unwrap();
    let end = log.append(1, b"first").unwrap();
    // The record itself reached the disk before the callback failed.
    log.wait_durable(end).unwrap();
    let err = loop {
        match log.append(1, b"more") {
            Ok(end) => {
                if let Err(e) = log.wait_durable(end) {
                    break e;
                }
            }
            Err(e) => break e,
        }
    };
    assert!(err.to_string().contains("writer has stopped"), "{err}");
    assert!(log.append(1, b"again").is_err());
    assert!(log.close().is_err());
}
