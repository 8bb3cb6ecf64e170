//! The state shared between appenders, waiters and the writer thread, and the
//! writer thread itself (group commit).
//!
//! Appenders frame records into `State::buf` under a short mutex and wake the
//! writer. The writer swaps that buffer with its own empty one (so appenders
//! carry on into a fresh buffer while it writes, and neither buffer is
//! reallocated in steady state), writes the bytes at their ring positions,
//! fdatasyncs (in `Fsync` mode) every file it touched, then publishes the new
//! durable LSN. All appends that arrived while the previous sync was running
//! therefore share the next one. When several records came during a sync, the writer yields the
//! CPU once before it takes the next batch, so the appenders its sync released append first.
//!
//! The writer never has unsynced bytes in two sync windows at once (it syncs
//! before crossing a window boundary); recovery depends on that to tell a torn
//! tail from mid-log damage. Durable LSNs are only ever published at record
//! boundaries, so `durable_lsn()` is always a valid `set_checkpoint` target.
//!
//! If a write or sync fails, nothing more is reported durable: the error is
//! kept and returned to every later append and wait. Losing an
//! acknowledgement is acceptable; acknowledging lost data is not.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::control::Control;
use crate::durability::Durability;
use crate::error::LogError;
use crate::record::HEADER_LEN;
use crate::ring::{Geometry, RingFiles};
use crate::tail::TailCache;
use crate::Lsn;

/// Capacity a batch buffer is trimmed back to after an unusually large batch.
const BUF_KEEP: usize = 4 << 20;

/// A batch write (with its sync) slower than this is reported: a replica's log write must
/// normally finish within the leader's AppendEntries timeout (a Raft heartbeat, 100 ms).
const SLOW_WRITE: Duration = Duration::from_millis(100);
/// At most one slow-write report per this long; it counts the slow writes it stands for.
const SLOW_REPORT_EVERY: Duration = Duration::from_secs(5);

/// Slow batch writes since the last report.
#[derive(Default)]
struct SlowWrites {
    last_report: Option<Instant>,
    count: u64,
    worst: Duration,
    bytes: usize,
}

impl SlowWrites {
    /// Notes a batch write of `bytes` that took `took`; returns the report to log, if one is due.
    fn note(&mut self, took: Duration, bytes: usize, now: Instant) -> Option<String> {
        if took < SLOW_WRITE {
            return None;
        }
        self.count += 1;
        if took > self.worst {
            self.worst = took;
            self.bytes = bytes;
        }
        if self
            .last_report
            .is_some_and(|t| now.duration_since(t) < SLOW_REPORT_EVERY)
        {
            return None;
        }
        let report = format!(
            "recovery log writes are slow: {} batch write(s) with their sync took over {} ms, the slowest {} ms ({} bytes); the disk is slow or busy",
            self.count,
            SLOW_WRITE.as_millis(),
            self.worst.as_millis(),
            self.bytes
        );
        *self = SlowWrites {
            last_report: Some(now),
            ..SlowWrites::default()
        };
        Some(report)
    }
}

/// Appender side of the log, under `Shared::state`.
pub(crate) struct State {
    /// Framed records not yet taken by the writer.
    pub buf: Vec<u8>,
    /// LSN of `buf[0]`; `buf_start + buf.len()` is the end LSN.
    pub buf_start: Lsn,
    /// Records framed into `buf` since the writer last took it.
    pub appends: u32,
    pub shutdown: bool,
}

impl State {
    pub(crate) fn end_lsn(&self) -> Lsn {
        self.buf_start + self.buf.len() as u64
    }
}

/// A writer failure, kept so it can be reported again and again (io::Error
/// is not Clone).
#[derive(Clone)]
pub(crate) struct StoredError {
    context: String,
    kind: io::ErrorKind,
    message: String,
}

impl StoredError {
    fn from_log_error(e: &LogError) -> StoredError {
        match e {
            LogError::Io { context, source } => StoredError {
                context: context.clone(),
                kind: source.kind(),
                message: source.to_string(),
            },
            other => StoredError {
                context: "running the log writer".to_string(),
                kind: io::ErrorKind::Other,
                message: other.to_string(),
            },
        }
    }

    pub(crate) fn to_error(&self) -> LogError {
        LogError::Io {
            context: format!(
                "{} (the log writer has stopped: nothing after the last durable LSN is on disk; \
                 stop the queue manager, fix the cause and restart to recover)",
                self.context
            ),
            source: io::Error::new(self.kind, self.message.clone()),
        }
    }
}

/// Waiter side, under `Shared::waiters`.
#[derive(Default)]
pub(crate) struct WaitState {
    pub error: Option<StoredError>,
    /// The writer thread has exited; nothing will become durable any more.
    pub stopped: bool,
}

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub geo: Geometry,
    pub durability: Durability,
    pub files: RingFiles,
    pub state: Mutex<State>,
    /// Wakes the writer when `state.buf` gets bytes or on shutdown.
    pub work: Condvar,
    pub durable: AtomicU64,
    pub checkpoint: AtomicU64,
    /// Fast check for appenders; the error itself is in `waiters`.
    pub failed: AtomicBool,
    pub waiters: Mutex<WaitState>,
    pub durable_cv: Condvar,
    pub sync_count: AtomicU64,
    /// Serializes checkpoint updates; holds the control file's contents.
    pub control: Mutex<Control>,
    pub on_durable: Box<dyn Fn(Lsn) + Send + Sync>,
    /// The recent batches, for a reader following the durable end (off unless asked for).
    pub tail: Mutex<TailCache>,
    /// Least time between the starts of two batch writes, in microseconds (0: none). A log
    /// whose appenders do not wait on each sync (a DR secondary) trades a little latency for
    /// fewer, larger syncs.
    pub min_sync_gap_us: AtomicU64,
    /// With a gap: the writer goes before the gap has passed once this many bytes wait, so a
    /// busy stream is not held back (0: no such limit).
    pub min_sync_unless_bytes: AtomicU64,
}

impl Shared {
    pub(crate) fn stored_error(&self) -> Option<LogError> {
        self.waiters
            .lock()
            .error
            .as_ref()
            .map(StoredError::to_error)
    }

    fn fail(&self, e: &LogError) {
        tracing::error!(error = %e, "recovery log writer failed; no further LSNs will become durable");
        let mut w = self.waiters.lock();
        if w.error.is_none() {
            w.error = Some(StoredError::from_log_error(e));
        }
        self.failed.store(true, Ordering::Release);
        self.durable_cv.notify_all();
    }

    fn publish(&self, lsn: Lsn) -> Result<(), LogError> {
        self.durable.store(lsn, Ordering::Release);
        {
            // Taking the lock orders the store before any waiter's re-check,
            // so no waiter can miss this wake-up.
            let _w = self.waiters.lock();
            self.durable_cv.notify_all();
        }
        // A panicking callback must not kill the writer silently and leave
        // waiters blocked forever.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.on_durable)(lsn))).map_err(
            |_| LogError::Damaged(format!("the on_durable callback panicked at LSN {lsn}")),
        )
    }

    /// Writes one batch of whole records starting at `start`, window by
    /// window, syncing and publishing after each window piece.
    fn write_batch(&self, start: Lsn, batch: &[u8]) -> Result<(), LogError> {
        let w = self.geo.sync_window;
        let mut touched = vec![false; self.files.file_count()];
        let mut off = 0usize; // bytes of the batch written
        let mut rec_off = 0usize; // start of the first record not yet fully written
        while off < batch.len() {
            let pos = start + off as u64;
            let window_end = (pos / w + 1) * w;
            let piece_end = batch.len().min((window_end - start) as usize);
            touched.fill(false);
            // Live: the checkpoint up to this write; nothing after it yet.
            let live = self.checkpoint.load(Ordering::Acquire)..pos;
            let durable_writes =
                self.files
                    .write_span(pos, &batch[off..piece_end], &mut touched, live)?;
            self.sync_count.fetch_add(durable_writes, Ordering::Relaxed);
            if self.durability == Durability::Fsync {
                for (i, t) in touched.iter().enumerate() {
                    if *t {
                        self.files.sync(i)?;
                        self.sync_count.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            let before = rec_off;
            while rec_off < batch.len() {
                let len =
                    u32::from_le_bytes(batch[rec_off..rec_off + 4].try_into().expect("4 bytes"));
                let next = rec_off + HEADER_LEN + len as usize;
                if next > piece_end {
                    break;
                }
                rec_off = next;
            }
            if rec_off > before {
                self.publish(start + rec_off as u64)?;
            }
            off = piece_end;
        }
        Ok(())
    }

    /// Makes everything written so far durable regardless of mode (used at
    /// close: `OsBuffered` promises kill -9 safety while running, but a clean
    /// shutdown should leave nothing in the page cache).
    pub(crate) fn sync_all_files(&self) -> Result<(), LogError> {
        for i in 0..self.files.file_count() {
            self.files.sync(i)?;
            self.sync_count.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Marks the writer stopped even if it unwinds, so waiters never hang.
struct StopGuard<'a>(&'a Shared);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let mut w = self.0.waiters.lock();
        w.stopped = true;
        self.0.durable_cv.notify_all();
    }
}

/// The writer thread's main loop. Returns when shut down (after draining the
/// buffer) or after a failure.
pub(crate) fn run(shared: Arc<Shared>) {
    let _guard = StopGuard(&shared);
    let mut batch: Vec<u8> = Vec::new();
    let mut last_write = Instant::now();
    let mut slow = SlowWrites::default();
    // One clock read per batch: the write's start is `last_write`.
    let mut note_write = |started: Instant, bytes: usize| {
        let now = Instant::now();
        if let Some(report) = slow.note(now - started, bytes, now) {
            tracing::warn!(dir = %shared.dir.display(), "{report}");
        }
    };
    loop {
        // Several records that came during the last sync mean several committers at work: the
        // waiters that sync released are runnable now, so let them have the CPU first, and what
        // they append in answer joins the next batch instead of following it in a sync of its
        // own (fewer syncs per commit, shorter waits). A lone committer's one record goes at
        // once: yielding would only make it wait for whoever runs first.
        let start = {
            let mut st = shared.state.lock();
            if st.appends >= 2 {
                MutexGuard::unlocked(&mut st, std::thread::yield_now);
            }
            while st.buf.is_empty() && !st.shutdown {
                shared.work.wait(&mut st);
            }
            if st.buf.is_empty() {
                return; // shut down and drained
            }
            let gap = Duration::from_micros(shared.min_sync_gap_us.load(Ordering::Relaxed));
            let deadline = last_write + gap;
            // Only a log with a gap waits here (a standalone queue manager's never does, and must
            // not pay a timed wait per write). Appenders wake the wait (lazy ones do not: see
            // `append_lazy`); each wake-up looks whether enough has come to go early.
            if Instant::now() < deadline {
                let enough = shared.min_sync_unless_bytes.load(Ordering::Relaxed) as usize;
                while !st.shutdown && (enough == 0 || st.buf.len() < enough) {
                    if shared.work.wait_until(&mut st, deadline).timed_out() {
                        break;
                    }
                }
            }
            std::mem::swap(&mut st.buf, &mut batch);
            st.appends = 0;
            let start = st.buf_start;
            st.buf_start += batch.len() as u64;
            start
        };
        last_write = Instant::now();
        if shared.tail.lock().enabled() {
            // The batch becomes a shared buffer the cache keeps (appended before it is durable;
            // readers stop at the durable LSN), and the appenders get one of its size: the
            // buffer of a batch the cache has dropped, when nobody holds it any more.
            let bytes = {
                let mut tail = shared.tail.lock();
                let next = tail.buffer(batch.len().min(BUF_KEEP));
                let bytes = Bytes::from(std::mem::replace(&mut batch, next));
                tail.push(start, bytes.clone());
                bytes
            };
            if let Err(e) = shared.write_batch(start, &bytes) {
                shared.fail(&e);
                return;
            }
            note_write(last_write, bytes.len());
            continue;
        }
        if let Err(e) = shared.write_batch(start, &batch) {
            shared.fail(&e);
            return;
        }
        note_write(last_write, batch.len());
        batch.clear();
        if batch.capacity() > BUF_KEEP {
            batch.shrink_to(BUF_KEEP);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_batch_writes_are_reported_at_most_every_five_seconds_with_a_count_and_the_worst() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut slow = SlowWrites::default();
        assert_eq!(slow.note(ms(99), 10, t0), None, "under the threshold");
        let first = slow
            .note(ms(150), 140, t0)
            .expect("the first slow write is reported");
        assert!(
            first.contains("1 batch write(s)") && first.contains("slowest 150 ms (140 bytes)"),
            "{first}"
        );
        // Within five seconds: counted, not reported.
        assert_eq!(slow.note(ms(400), 76, t0 + ms(1000)), None);
        assert_eq!(slow.note(ms(120), 9000, t0 + ms(4000)), None);
        assert_eq!(
            slow.note(ms(20), 10, t0 + ms(5500)),
            None,
            "fast writes never report"
        );
        let next = slow.note(ms(101), 500, t0 + ms(5600)).expect("due again");
        assert!(
            next.contains("3 batch write(s)") && next.contains("slowest 400 ms (76 bytes)"),
            "{next}"
        );
        let after = slow.note(ms(130), 1, t0 + ms(11_000)).expect("due again");
        assert!(
            after.contains("1 batch write(s)") && after.contains("slowest 130 ms"),
            "{after}"
        );
    }
}
