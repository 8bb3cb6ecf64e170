//! Property: for any sequence of appends (of any size the ring accepts),
//! checkpoints and reopens, recovery returns exactly the records appended
//! since the last checkpoint, and `read_from` agrees with it.

mod common;

use common::*;
use ferrymq_log::{Durability, LogError, LogRecord, RecoveryLog};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append {
        len: usize,
        kind: u8,
    },
    /// Checkpoint at the start of the n-th (mod count) live record, or at
    /// the end when there are none.
    Checkpoint {
        pick: usize,
    },
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..3000, 0u8..=254).prop_map(|(len, kind)| Op::Append { len, kind }),
        1 => any::<usize>().prop_map(|pick| Op::Checkpoint { pick }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

fn reopen_and_check(
    cfg: &ferrymq_log::LogConfig,
    log: RecoveryLog,
    clean: bool,
    model: &[LogRecord],
) -> RecoveryLog {
    if clean {
        log.close().unwrap();
    } else {
        drop(log); // Drop must flush too
    }
    let (log, rec) = open(cfg);
    assert_eq!(rec.tail_problem, None);
    assert_eq!(rec.records, model);
    assert_eq!(
        log.read_from(rec.checkpoint_lsn, usize::MAX).unwrap(),
        model
    );
    log
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn recovery_returns_exactly_the_records_since_the_checkpoint(
        files in 1u32..=3,
        pages in 1u32..=2,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = cfg(tmp.path(), files, pages);
        cfg.durability = Durability::OsBuffered;
        let (mut log, _) = create_open(&cfg);
        let max = log.max_payload();
        let mut model: Vec<LogRecord> = Vec::new();
        let mut counter = 0u64;
        for op in ops {
            match op {
                Op::Append { len, kind } => {
                    let len = len % (max + 1);
                    counter += 1;
                    let data = payload(counter, len);
                    let end = match log.append(kind, &data) {
                        Ok(end) => end,
                        Err(LogError::Full { .. }) => {
                            // Make room the way the engine would: checkpoint
                            // at the end of everything appended.
                            log.wait_durable(log.end_lsn()).unwrap();
                            log.set_checkpoint(log.durable_lsn()).unwrap();
                            model.clear();
                            log.append(kind, &data).unwrap()
                        }
                        Err(e) => panic!("append: {e}"),
                    };
                    model.push(LogRecord { lsn: end - HEADER_LEN - len as u64, kind, payload: data.into() });
                }
                Op::Checkpoint { pick } => {
                    log.wait_durable(log.end_lsn()).unwrap();
                    let at = if model.is_empty() { 0 } else { pick % (model.len() + 1) };
                    let lsn = model.get(at).map_or(log.end_lsn(), |r| r.lsn);
                    log.set_checkpoint(lsn).unwrap();
                    model.drain(..at);
                }
                Op::Reopen { clean } => log = reopen_and_check(&cfg, log, clean, &model),
            }
            prop_assert!(log.used_bytes() <= log.capacity());
        }
        reopen_and_check(&cfg, log, true, &model).close().unwrap();
    }
}

/// Sector fates after a simulated power loss.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Kept,
    Zeroed,
    Garbage(u8),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        2 => Just(Fate::Kept),
        1 => Just(Fate::Zeroed),
        1 => any::<u8>().prop_map(Fate::Garbage),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A power loss can leave any subset of the 512-byte sectors of the last
    /// sync window (the only one with unsynced bytes) unwritten or garbled.
    /// Recovery must then never report mid-log damage, must keep every record
    /// that ended before that window, must return a prefix of what was
    /// appended, and must accept new appends that survive another reopen.
    #[test]
    fn power_loss_in_the_last_sync_window_loses_only_a_suffix(
        lens in prop::collection::vec(0usize..2500, 1..40),
        fates in prop::collection::vec(fate(), 16),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = tiny(tmp.path()); // sync window = 8 KiB file
        let (log, _) = create_open(&cfg);
        let mut model: Vec<LogRecord> = Vec::new();
        for (i, len) in lens.iter().enumerate() {
            let data = payload(i as u64, *len);
            let end = match log.append(1, &data) {
                Ok(end) => end,
                Err(LogError::Full { .. }) => {
                    log.wait_durable(log.end_lsn()).unwrap();
                    log.set_checkpoint(log.durable_lsn()).unwrap();
                    model.clear();
                    log.append(1, &data).unwrap()
                }
                Err(e) => panic!("append: {e}"),
            };
            model.push(LogRecord { lsn: end - HEADER_LEN - *len as u64, kind: 1, payload: data.into() });
        }
        let end = log.end_lsn();
        let ckpt = log.checkpoint_lsn();
        log.close().unwrap();
        let window = 8192;
        let damage_from = (((end - 1) / window) * window).max(ckpt);
        let must_keep = model.iter().take_while(|r| r.end_lsn() <= damage_from).count();
        // Apply a fate to every sector overlapping [damage_from, end).
        let first_sector = damage_from / 512;
        for (k, sector) in (first_sector..end.div_ceil(512)).enumerate() {
            let lo = (sector * 512).max(damage_from);
            let hi = ((sector + 1) * 512).min(end);
            match fates[k % fates.len()] {
                Fate::Kept => {}
                Fate::Zeroed => patch(&cfg, lo, hi - lo, |_, b| *b = 0),
                Fate::Garbage(g) => patch(&cfg, lo, hi - lo, |i, b| *b = g.wrapping_add(i as u8)),
            }
        }
        let (log, rec) = match RecoveryLog::open(&cfg, Box::new(|_| {})) {
            Ok(v) => v,
            Err(e) => panic!("power loss must not look like mid-log damage: {e}"),
        };
        let k = rec.records.len();
        prop_assert!(k >= must_keep && k <= model.len());
        prop_assert_eq!(&rec.records[..], &model[..k]);
        prop_assert_eq!(rec.tail_lsn, model.get(k).map_or(end, |r| r.lsn));
        log.append(9, b"after power loss").unwrap();
        log.close().unwrap();
        let (_log, rec2) = open(&cfg);
        prop_assert_eq!(rec2.tail_problem, None);
        prop_assert_eq!(&rec2.records[..k], &model[..k]);
        prop_assert_eq!(rec2.records.len(), k + 1);
        prop_assert_eq!(&rec2.records[k].payload[..], b"after power loss");
    }
}
