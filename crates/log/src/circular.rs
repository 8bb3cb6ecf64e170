//! The circular recovery log: its public API (create, open with recovery,
//! append, wait for durability, checkpoint, read back) on top of the ring
//! files (`ring`), the control file (`control`), the recovery scan
//! (`recovery`) and the group-commit writer thread (`writer`).
//!
//! Space accounting: the log may hold at most `capacity` bytes between the
//! checkpoint LSN and the end LSN. Everything below the checkpoint is
//! released and will be overwritten by later laps; that is safe only because
//! the checkpoint is made durable in the control file *before* the space is
//! released.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::control::{self, Control};
use crate::durability::Durability;
use crate::error::{IoContext, LogError};
use crate::record::{encode_into, HEADER_LEN};
use crate::recovery::{
    read_record_at, scan, write_filler, DamagePolicy, DiscardedSpan, Found, RingReader, SpanKind,
    FILLER_KIND,
};
use crate::ring::{Geometry, RingFiles, WriteMode};
use crate::tail::TailCache;
use crate::writer::{self, Shared, State, WaitState};
use crate::Lsn;

/// Where and how big the log is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    pub dir: PathBuf,
    /// Number of ring files.
    pub primary_files: u32,
    /// Size of each ring file in 4 KiB pages.
    pub file_pages: u32,
    pub durability: Durability,
    /// Under `fsync` durability, write the ring with `O_DIRECT | O_DSYNC`
    /// where the filesystem allows it (see [`RecoveryLog::write_mode`]).
    pub direct_writes: bool,
}

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub lsn: Lsn,
    pub kind: u8,
    pub payload: Bytes,
}

impl LogRecord {
    /// LSN just past this record: the position of the next one.
    pub fn end_lsn(&self) -> Lsn {
        self.lsn + HEADER_LEN as u64 + self.payload.len() as u64
    }
}

/// Why the recovery scan stopped before a clean end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailProblem {
    /// The record at `at` was not completely written (zeros, short record,
    /// partial header): the usual result of a crash during a write.
    Torn { at: Lsn },
    /// The record at `at` has a plausible header for its position but fails
    /// its checksum or length check.
    Corrupt { at: Lsn },
}

/// What `open` found: the records to replay and where the log now ends.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// Where the scan started (from the control file).
    pub checkpoint_lsn: Lsn,
    /// Every valid record from `checkpoint_lsn` to the tail, in order.
    pub records: Vec<LogRecord>,
    /// First byte after the last valid record; new appends start here.
    pub tail_lsn: Lsn,
    /// Bytes not replayed: the total of `discarded` (0 on a clean end).
    pub discarded_tail_bytes: u64,
    /// How the log ended, when it did not end cleanly.
    pub tail_problem: Option<TailProblem>,
    /// Every span recovery did not replay, in LSN order: skipped damage
    /// (valid records after it were kept) and the damaged tail.
    pub discarded: Vec<DiscardedSpan>,
    /// LSN of the first filler record among `records`' positions: damage an
    /// earlier recovery skipped (records after it may depend on what it lost).
    pub first_filler: Option<Lsn>,
}

impl Recovered {
    /// True when something recovery did not replay may have been
    /// acknowledged to an application (see [`DiscardedSpan::may_hold_acknowledged`]).
    pub fn may_have_lost_acknowledged(&self) -> bool {
        self.discarded
            .iter()
            .any(DiscardedSpan::may_hold_acknowledged)
    }

    /// One line per discarded span, for an error log: what, where, how much.
    pub fn describe_discarded(&self) -> Vec<String> {
        self.discarded
            .iter()
            .map(|s| {
                let what = match s.kind {
                    SpanKind::Skipped => "damaged, skipped (the records after it were kept)",
                    SpanKind::TornTail => "torn tail (never completely written), cut",
                    SpanKind::CorruptTail if s.intact_records > 0 => {
                        "damaged, cut with the intact records after it"
                    }
                    SpanKind::CorruptTail => "damaged tail record, cut",
                };
                let records = if s.damaged_records > 0 {
                    format!("{} damaged record(s)", s.damaged_records)
                } else {
                    "damaged bytes of unknown record count".to_string()
                };
                format!(
                    "LSN {}..{} ({} bytes): {what}; {records}, {} intact record(s) dropped",
                    s.from,
                    s.to,
                    s.bytes(),
                    s.intact_records
                )
            })
            .collect()
    }
}

/// The circular recovery log. `Send + Sync`; share it through an `Arc`.
pub struct RecoveryLog {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

impl RecoveryLog {
    /// Creates a fresh log (fails if `dir` already holds a control file).
    pub fn create(cfg: &LogConfig) -> Result<(), LogError> {
        let geo = Geometry::new(cfg.primary_files, cfg.file_pages)?;
        std::fs::create_dir_all(&cfg.dir)
            .ctx(|| format!("creating log directory {}", cfg.dir.display()))?;
        if control::exists(&cfg.dir) {
            return Err(LogError::Invalid(format!(
                "{} already holds a recovery log; open it instead, or remove the directory to start afresh",
                cfg.dir.display()
            )));
        }
        RingFiles::create(&cfg.dir, geo)?;
        crate::fsutil::sync_dir(&cfg.dir)?;
        // The control file is written last: its presence means "complete".
        control::write(
            &cfg.dir,
            &Control {
                capacity: geo.capacity,
                primary_files: geo.files,
                file_pages: geo.file_pages,
                checkpoint_lsn: 0,
            },
        )
    }

    /// Opens an existing log, recovers it (see the `recovery` module for how
    /// the tail is found and when damage is refused), and starts the writer
    /// thread. `on_durable` is called from the writer thread each time the
    /// durable LSN advances; keep it cheap, it delays the next group commit.
    ///
    /// A damaged record followed by valid records in the same sync window ends
    /// the log there ([`DamagePolicy::TruncateAtDamage`]); see
    /// [`open_with`](Self::open_with) to keep the records after it.
    pub fn open(
        cfg: &LogConfig,
        on_durable: Box<dyn Fn(Lsn) + Send + Sync>,
    ) -> Result<(RecoveryLog, Recovered), LogError> {
        Self::open_with(cfg, on_durable, DamagePolicy::TruncateAtDamage)
    }

    /// [`open`](Self::open) with the given policy for damage that valid
    /// records follow. With [`DamagePolicy::SkipDamagedRecords`] each skipped
    /// span is overwritten with a filler record before the writer starts, so
    /// the ring reads as one chain again and the damage is reported once.
    pub fn open_with(
        cfg: &LogConfig,
        on_durable: Box<dyn Fn(Lsn) + Send + Sync>,
        policy: DamagePolicy,
    ) -> Result<(RecoveryLog, Recovered), LogError> {
        let ctl = control::read(&cfg.dir)?;
        if ctl.primary_files != cfg.primary_files || ctl.file_pages != cfg.file_pages {
            return Err(LogError::Invalid(format!(
                "log in {} was created with primary_files={} file_pages={}, but the configuration says \
                 primary_files={} file_pages={}; configure the original values (the ring cannot be resized in place)",
                cfg.dir.display(),
                ctl.primary_files,
                ctl.file_pages,
                cfg.primary_files,
                cfg.file_pages
            )));
        }
        let geo = Geometry::new(ctl.primary_files, ctl.file_pages)?;
        if geo.capacity != ctl.capacity {
            return Err(LogError::Damaged(format!(
                "control file in {} records capacity {} but its geometry gives {}",
                cfg.dir.display(),
                ctl.capacity,
                geo.capacity
            )));
        }
        // Direct writes only where each write must be durable anyway.
        let direct = cfg.direct_writes && cfg.durability == Durability::Fsync;
        let files = RingFiles::open(&cfg.dir, geo, direct)?;
        let out = scan(&files, ctl.checkpoint_lsn, policy)?;
        for s in out.spans.iter().filter(|s| s.kind == SpanKind::Skipped) {
            write_filler(&files, s.from, s.to, ctl.checkpoint_lsn..out.tail)?;
        }
        if out.scrub_end > out.tail {
            files.zero_range(out.tail, out.scrub_end, ctl.checkpoint_lsn..out.tail)?;
        }
        let tail = out.tail;
        let shared = Arc::new(Shared {
            dir: cfg.dir.clone(),
            geo,
            durability: cfg.durability,
            files,
            state: Mutex::new(State {
                buf: Vec::new(),
                buf_start: tail,
                appends: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            durable: AtomicU64::new(tail),
            checkpoint: AtomicU64::new(ctl.checkpoint_lsn),
            failed: AtomicBool::new(false),
            waiters: Mutex::new(WaitState::default()),
            durable_cv: Condvar::new(),
            sync_count: AtomicU64::new(0),
            control: Mutex::new(ctl),
            on_durable,
            tail: Mutex::new(TailCache::default()),
            min_sync_gap_us: AtomicU64::new(0),
            min_sync_unless_bytes: AtomicU64::new(0),
        });
        let thread_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("ferrymq-log-writer".to_string())
            .spawn(move || writer::run(thread_shared))
            .ctx(|| "starting the log writer thread".to_string())?;
        let recovered = Recovered {
            checkpoint_lsn: ctl.checkpoint_lsn,
            records: out.records,
            tail_lsn: tail,
            discarded_tail_bytes: out.spans.iter().map(DiscardedSpan::bytes).sum(),
            tail_problem: out.problem,
            discarded: out.spans,
            first_filler: out.first_filler,
        };
        Ok((
            RecoveryLog {
                shared,
                writer: Some(writer),
            },
            recovered,
        ))
    }

    /// Appends one record to the in-memory write buffer (does not wait for
    /// disk) and returns its end LSN.
    pub fn append(&self, kind: u8, payload: &[u8]) -> Result<Lsn, LogError> {
        self.append_parts(kind, &[payload])
    }

    /// Like [`append`](Self::append) for a payload given in several parts
    /// (e.g. header + body), copied straight into the buffer.
    pub fn append_parts(&self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, LogError> {
        let end = self.append_quietly(kind, parts)?;
        self.shared.work.notify_one();
        Ok(end)
    }

    /// Like [`append_parts`](Self::append_parts), but does not wake the writer: the record goes
    /// to disk with the next record appended normally (or at close). For hints nobody waits on,
    /// which should not cost a write and a sync of their own.
    pub fn append_lazy(&self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, LogError> {
        self.append_quietly(kind, parts)
    }

    fn append_quietly(&self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, LogError> {
        if kind == FILLER_KIND {
            return Err(LogError::Invalid(format!(
                "record kind {FILLER_KIND} is reserved to the log itself"
            )));
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let max = self.shared.geo.max_payload();
        if len > max {
            return Err(LogError::RecordTooLarge { len, max });
        }
        let rec_len = (HEADER_LEN + len) as u64;
        let end = {
            let mut st = self.shared.state.lock();
            if self.shared.failed.load(Ordering::Acquire) {
                drop(st);
                return Err(self.shared.stored_error().unwrap_or(LogError::Closed));
            }
            if st.shutdown {
                return Err(LogError::Closed);
            }
            let lsn = st.end_lsn();
            // Read under the state lock: the checkpoint only grows, so a
            // stale value can only make this check stricter.
            let ckpt = self.shared.checkpoint.load(Ordering::Acquire);
            let used = lsn - ckpt;
            if used + rec_len > self.shared.geo.capacity {
                return Err(LogError::Full {
                    needed: rec_len,
                    free: self.shared.geo.capacity - used,
                });
            }
            encode_into(&mut st.buf, lsn, kind, parts, len as u32);
            st.appends = st.appends.saturating_add(1);
            lsn + rec_len
        };
        Ok(end)
    }

    /// Next append position.
    pub fn end_lsn(&self) -> Lsn {
        self.shared.state.lock().end_lsn()
    }

    /// Everything below this LSN is on disk as far as the configured
    /// durability promises. Always a record boundary.
    pub fn durable_lsn(&self) -> Lsn {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Blocks the calling thread until `lsn` is durable, or the writer fails.
    pub fn wait_durable(&self, lsn: Lsn) -> Result<(), LogError> {
        if self.durable_lsn() >= lsn {
            return Ok(());
        }
        let end = self.end_lsn();
        if lsn > end {
            return Err(LogError::Invalid(format!(
                "cannot wait for LSN {lsn}: the log only extends to {end}"
            )));
        }
        // Whatever is waited for gets written, even if only lazy appends came before it.
        self.shared.work.notify_one();
        let mut w = self.shared.waiters.lock();
        loop {
            if self.durable_lsn() >= lsn {
                return Ok(());
            }
            if let Some(e) = &w.error {
                return Err(e.to_error());
            }
            if w.stopped {
                return Err(LogError::Closed);
            }
            self.shared.durable_cv.wait(&mut w);
        }
    }

    /// Where recovery will start.
    pub fn checkpoint_lsn(&self) -> Lsn {
        self.shared.checkpoint.load(Ordering::Acquire)
    }

    /// Records durably (in the control file) that recovery may start at
    /// `lsn`, then releases the ring space below it. `lsn` must be a record
    /// boundary with `checkpoint_lsn() <= lsn <= durable_lsn()`.
    pub fn set_checkpoint(&self, lsn: Lsn) -> Result<(), LogError> {
        let mut ctl = self.shared.control.lock();
        let cur = ctl.checkpoint_lsn;
        if lsn == cur {
            return Ok(());
        }
        if lsn < cur {
            return Err(LogError::Invalid(format!(
                "checkpoint LSN {lsn} is below the current checkpoint {cur}; checkpoints only move forward"
            )));
        }
        let durable = self.durable_lsn();
        if lsn > durable {
            return Err(LogError::Invalid(format!(
                "checkpoint LSN {lsn} is beyond the durable LSN {durable}; wait for durability first"
            )));
        }
        // The durable LSN is a boundary by construction; anything below it
        // must be proven one, or recovery would start mid-record and lose
        // the whole log.
        if lsn < durable {
            let mut rd = RingReader::new(&self.shared.files, HEADER_LEN);
            if !matches!(
                read_record_at(&mut rd, lsn, durable, self.shared.geo.max_payload())?,
                Found::Valid(_)
            ) {
                return Err(LogError::Invalid(format!(
                    "checkpoint LSN {lsn} is not the start of a record"
                )));
            }
        }
        let next = Control {
            checkpoint_lsn: lsn,
            ..*ctl
        };
        control::write(&self.shared.dir, &next)?;
        *ctl = next;
        self.shared.checkpoint.store(lsn, Ordering::Release);
        Ok(())
    }

    /// Total ring size in bytes.
    pub fn capacity(&self) -> u64 {
        self.shared.geo.capacity
    }

    /// Bytes between the checkpoint and the end of the log.
    pub fn used_bytes(&self) -> u64 {
        self.end_lsn() - self.checkpoint_lsn()
    }

    /// Largest payload `append` accepts.
    pub fn max_payload(&self) -> usize {
        self.shared.geo.max_payload()
    }

    /// How the ring is written: directly, or through the page cache with
    /// `fdatasync` (asked for, or where the filesystem refuses direct I/O).
    pub fn write_mode(&self) -> WriteMode {
        self.shared.files.write_mode()
    }

    /// Number of syncs made so far: `fdatasync` calls, or direct writes,
    /// each durable on its own (observability, and the proof that group
    /// commit shares syncs).
    pub fn sync_count(&self) -> u64 {
        self.shared.sync_count.load(Ordering::Relaxed)
    }

    /// Reads durable records starting at `from` (a record boundary at or
    /// after the checkpoint), returning at most `max_bytes` of payload but
    /// always at least one record if any is durable. For log shipping (DR)
    /// and replica catch-up.
    pub fn read_from(&self, from: Lsn, max_bytes: usize) -> Result<Vec<LogRecord>, LogError> {
        if let Some(recs) = self.read_cached(from, max_bytes) {
            return Ok(recs);
        }
        let ckpt = self.checkpoint_lsn();
        let durable = self.durable_lsn();
        if from < ckpt {
            return Err(LogError::Invalid(format!(
                "LSN {from} is below the checkpoint {ckpt}: that part of the log has been released and may be overwritten"
            )));
        }
        if from > durable {
            return Err(LogError::Invalid(format!(
                "LSN {from} is beyond the durable end of the log ({durable})"
            )));
        }
        let chunk = max_bytes
            .saturating_add(4 * HEADER_LEN)
            .clamp(4096, 1 << 20);
        let mut rd = RingReader::new(&self.shared.files, chunk);
        let max_payload = self.shared.geo.max_payload();
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut pos = from;
        while pos < durable {
            let rec = match read_record_at(&mut rd, pos, durable, max_payload)? {
                Found::Valid(r) => r,
                _ if pos == from => {
                    return Err(LogError::Invalid(format!(
                        "LSN {from} is not the start of a readable record"
                    )))
                }
                // The region may have been released and overwritten while
                // we were reading it; that is the caller's race, not damage.
                _ if self.checkpoint_lsn() > pos => {
                    return Err(LogError::Invalid(format!(
                        "LSN {pos} was overwritten while being read (the checkpoint moved past it)"
                    )))
                }
                _ => {
                    return Err(LogError::Damaged(format!(
                        "durable recovery log record at LSN {pos} fails verification"
                    )))
                }
            };
            if rec.kind == FILLER_KIND {
                pos = rec.end_lsn();
                continue;
            }
            if !out.is_empty() && total + rec.payload.len() > max_bytes {
                break;
            }
            total += rec.payload.len();
            pos = rec.end_lsn();
            out.push(rec);
        }
        Ok(out)
    }

    /// The writer's failure, if it has failed (then nothing more becomes durable).
    pub fn failure(&self) -> Option<LogError> {
        if self.shared.failed.load(Ordering::Acquire) {
            self.shared.stored_error()
        } else {
            None
        }
    }

    /// Keeps about `bytes` of the most recently written records in memory, so that
    /// [`read_cached`](Self::read_cached) (and `read_from`) can serve a reader that follows the
    /// durable end without reading the files back. 0 turns the cache off.
    pub fn keep_tail(&self, bytes: usize) {
        self.shared.tail.lock().set_limit(bytes);
    }

    /// `read_from` served from the in-memory tail only (see [`keep_tail`](Self::keep_tail)):
    /// cheap enough to call on an async task. None when `from` is not there (or there is
    /// nothing durable after it); the caller then uses `read_from`.
    pub fn read_cached(&self, from: Lsn, max_bytes: usize) -> Option<Vec<LogRecord>> {
        let durable = self.durable_lsn();
        if from >= durable || from < self.checkpoint_lsn() {
            return None;
        }
        self.shared.tail.lock().read(from, durable, max_bytes)
    }

    /// Makes the writer start batch writes at least `gap` apart (zero: as soon as there is
    /// work), unless `unless_bytes` (when not 0) are waiting to be written. For a log whose
    /// appenders do not wait on every sync: fewer, larger writes and syncs at the cost of up to
    /// `gap` more latency while little is written, and no more than `unless_bytes` held back
    /// while much is.
    pub fn set_min_sync_gap(&self, gap: std::time::Duration, unless_bytes: usize) {
        let us = u64::try_from(gap.as_micros()).unwrap_or(u64::MAX);
        self.shared.min_sync_gap_us.store(us, Ordering::Relaxed);
        self.shared
            .min_sync_unless_bytes
            .store(unless_bytes as u64, Ordering::Relaxed);
    }

    /// Flushes and syncs everything appended so far and stops the writer.
    pub fn close(mut self) -> Result<(), LogError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), LogError> {
        let Some(handle) = self.writer.take() else {
            return Ok(());
        };
        self.shared.state.lock().shutdown = true;
        self.shared.work.notify_all();
        if handle.join().is_err() {
            return Err(LogError::Damaged(
                "the log writer thread panicked".to_string(),
            ));
        }
        if let Some(e) = self.shared.stored_error() {
            return Err(e);
        }
        if self.shared.durability == Durability::OsBuffered {
            self.shared.sync_all_files()?;
        }
        Ok(())
    }
}

impl Drop for RecoveryLog {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "recovery log dropped without close() and failed to flush");
        }
    }
}
