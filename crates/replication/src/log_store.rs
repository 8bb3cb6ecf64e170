//! The Raft log storage (openraft's `RaftLogStorage`) on the queue manager's circular recovery
//! log.
//!
//! Everything Raft must keep — entries, the vote, conflict truncations, the purge point and a
//! commit hint — is a record in one `RecoveryLog` (layout in `record.rs`), so one `fdatasync`
//! (shared by every append that arrived meanwhile: the log's group commit) hardens all of it.
//! The ring stays append-only: a truncation is a marker record, a purge is a checkpoint move.
//! Opening replays the records from the checkpoint in order, which rebuilds exactly the state
//! the live calls had built (the same functions apply both).
//!
//! Entries are cached in memory from append (or replay) until purged, so reads never touch the
//! disk; each is kept with the LSN of its record, which is what a purge needs to move the
//! checkpoint. Openraft purges only what a snapshot covers, so the cache is bounded by the
//! snapshot policy, like the ring itself.
//!
//! Durability: `append` returns once the records are in the log's buffer (readable from the
//! cache), and openraft is called back once they are synced — from the log writer's thread right
//! after its sync (a flusher thread covers writer failures) — so a follower acknowledges, and a
//! leader counts itself towards a majority, only for entries on its disk.
//! Votes, truncations and purges wait for the disk before returning.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use ferrymq_log::{LogConfig, LogError, Lsn, RecoveryLog, TailProblem};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, RaftLogReader, StorageError, StorageIOError};
use parking_lot::{Condvar, Mutex};

use crate::record::{self, DecodeError};
use crate::record::{RAFT_COMMITTED, RAFT_ENTRY, RAFT_PURGED, RAFT_TRUNCATE, RAFT_VOTE};
use crate::{Entry, LogId, NodeId, ReplicationError, TypeConfig, Vote};

type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// What opening the storage found on disk (for logs and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredLog {
    /// Records replayed from the checkpoint.
    pub records: usize,
    /// Live entries after replay.
    pub entries: usize,
    pub last_log_id: Option<LogId>,
    pub last_purged: Option<LogId>,
    pub vote: Option<Vote>,
    /// Bytes of a torn or corrupt tail record the log dropped (never acknowledged to anyone).
    pub discarded_tail_bytes: u64,
    pub tail_problem: Option<TailProblem>,
}

/// The Raft log of one replica. Cheap to clone: clones share the same log (openraft's log
/// readers are clones).
#[derive(Clone)]
pub struct LogStorage {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Entries after this index are kept through purges for a reader outside Raft (a DR
    /// secondary resuming from there), as long as they fill at most a quarter of the ring.
    retain: std::sync::atomic::AtomicU64,
    flush: Arc<FlushQueue>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

struct Cached {
    /// Where the entry's record starts: the checkpoint position that keeps it.
    lsn: Lsn,
    entry: Entry,
    /// When this replica appended it (or found it, on opening): how long a peer that lacks
    /// it has been behind.
    at: std::time::Instant,
}

struct State {
    /// `None` once closed.
    log: Option<Arc<RecoveryLog>>,
    /// Start of the next record. This storage is the log's only writer, so it is exact.
    next_lsn: Lsn,
    entries: BTreeMap<u64, Cached>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
}

/// Appends waiting for the disk, in LSN order, each with openraft's callback.
struct FlushQueue {
    q: Mutex<FlushState>,
    cv: Condvar,
}

struct FlushState {
    pending: VecDeque<(Lsn, LogFlushed<TypeConfig>)>,
    stop: bool,
}

fn io_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

impl State {
    fn log(&self) -> Result<Arc<RecoveryLog>, LogError> {
        self.log.clone().ok_or(LogError::Closed)
    }

    fn append(&mut self, log: &RecoveryLog, kind: u8, parts: &[&[u8]]) -> Result<Lsn, LogError> {
        let end = log.append_parts(kind, parts)?;
        self.next_lsn = end;
        Ok(end)
    }

    // The four state changes below are shared by the live calls and by replay, which is what
    // makes a reopened log equal to the one that was running.

    fn insert_entry(&mut self, lsn: Lsn, entry: Entry) {
        let index = entry.log_id.index;
        if self.last_purged.is_some_and(|p| index <= p.index) {
            return;
        }
        // An entry at an index that exists replaces it and everything after (openraft truncates
        // first, so this only matters for a log written without the marker; be safe anyway).
        drop(self.entries.split_off(&index));
        self.entries.insert(
            index,
            Cached {
                lsn,
                entry,
                at: std::time::Instant::now(),
            },
        );
    }

    fn truncate_from(&mut self, index: u64) {
        drop(self.entries.split_off(&index));
    }

    fn purge_upto(&mut self, id: LogId) {
        if self.last_purged.is_some_and(|p| p.index >= id.index) {
            return;
        }
        self.last_purged = Some(id);
        // A purge up to the largest index leaves nothing (a damaged or hostile record can say so).
        self.entries = match id.index.checked_add(1) {
            Some(next) => self.entries.split_off(&next),
            None => BTreeMap::new(),
        };
    }

    fn replay(&mut self, lsn: Lsn, kind: u8, b: &[u8]) -> Result<(), DecodeError> {
        match kind {
            RAFT_ENTRY => self.insert_entry(lsn, record::decode_entry(b)?),
            RAFT_VOTE => self.vote = Some(record::decode_vote(b)?),
            RAFT_TRUNCATE => self.truncate_from(record::decode_index(b)?),
            RAFT_PURGED => self.purge_upto(record::decode_log_id(kind, b)?),
            RAFT_COMMITTED => self.committed = record::decode_opt_log_id(kind, b)?,
            other => {
                return Err(DecodeError {
                    kind: other,
                    why: "not a Raft record; this log does not belong to a replica".to_string(),
                })
            }
        }
        Ok(())
    }

    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .last_key_value()
            .map(|(_, c)| c.entry.log_id)
            .or(self.last_purged)
    }
}

/// Replays Raft records (`(kind, payload)` in log order, as the ring hands them back) into a
/// fresh state exactly as [`LogStorage::open`] does, and says what they leave: the part of
/// opening that reads the records' bytes, without a ring (what the fuzz targets drive).
pub fn replay_records<'a>(
    records: impl IntoIterator<Item = (u8, &'a [u8])>,
) -> Result<RecoveredLog, String> {
    let mut st = State {
        log: None,
        next_lsn: 0,
        entries: BTreeMap::new(),
        vote: None,
        committed: None,
        last_purged: None,
    };
    let mut n = 0;
    for (kind, b) in records {
        st.replay(n as Lsn, kind, b).map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(RecoveredLog {
        records: n,
        entries: st.entries.len(),
        last_log_id: st.last_log_id(),
        last_purged: st.last_purged,
        vote: st.vote,
        discarded_tail_bytes: 0,
        tail_problem: None,
    })
}

impl LogStorage {
    /// Opens the Raft log in `cfg.dir`, creating the recovery log first if the directory does
    /// not hold one yet, and replays it.
    pub fn open(cfg: &LogConfig) -> Result<(LogStorage, RecoveredLog), ReplicationError> {
        if !holds_anything(&cfg.dir)? {
            RecoveryLog::create(cfg)?;
        }
        let flush = Arc::new(FlushQueue {
            q: Mutex::new(FlushState {
                pending: VecDeque::new(),
                stop: false,
            }),
            cv: Condvar::new(),
        });
        // Appends are reported durable from the log writer's own thread right after its sync
        // (one thread hand-off fewer per append than waking the flusher); the flusher thread
        // remains for writer failures and as a backstop.
        let on_durable = Arc::clone(&flush);
        let (log, rec) =
            RecoveryLog::open(cfg, Box::new(move |lsn| on_durable.complete_upto(lsn)))?;
        if let Some(p) = rec.tail_problem {
            tracing::warn!(problem = ?p, bytes = rec.discarded_tail_bytes,
                spans = ?rec.describe_discarded(),
                "Raft log had a torn or corrupt tail, cut there (the leader resends what a replica lacks)");
        }
        let log = Arc::new(log);
        let mut st = State {
            log: Some(Arc::clone(&log)),
            next_lsn: rec.tail_lsn,
            entries: BTreeMap::new(),
            vote: None,
            committed: None,
            last_purged: None,
        };
        for r in &rec.records {
            st.replay(r.lsn, r.kind, &r.payload)?;
        }
        let summary = RecoveredLog {
            records: rec.records.len(),
            entries: st.entries.len(),
            last_log_id: st.last_log_id(),
            last_purged: st.last_purged,
            vote: st.vote,
            discarded_tail_bytes: rec.discarded_tail_bytes,
            tail_problem: rec.tail_problem,
        };
        let thread_flush = Arc::clone(&flush);
        let flusher = std::thread::Builder::new()
            .name("ferrymq-raft-flush".to_string())
            .spawn(move || run_flusher(&log, &thread_flush))
            .map_err(|e| ReplicationError::io("starting the Raft log flusher thread", e))?;
        let storage = LogStorage {
            inner: Arc::new(Inner {
                retain: std::sync::atomic::AtomicU64::new(u64::MAX),
                state: Mutex::new(st),
                flush,
                flusher: Mutex::new(Some(flusher)),
            }),
        };
        Ok((storage, summary))
    }

    /// The vote last saved.
    pub fn vote(&self) -> Option<Vote> {
        self.inner.state.lock().vote
    }

    /// The highest index this replica has been told is committed (openraft saves it before
    /// applying), if any.
    pub fn committed_index(&self) -> Option<u64> {
        self.inner.state.lock().committed.map(|l| l.index)
    }

    /// The last purged log id.
    pub fn last_purged(&self) -> Option<LogId> {
        self.inner.state.lock().last_purged
    }

    /// Indexes of the live entries, in order.
    pub fn entry_indexes(&self) -> Vec<u64> {
        self.inner.state.lock().entries.keys().copied().collect()
    }

    /// Where recovery of the underlying log would start (moves forward on purge).
    pub fn checkpoint_lsn(&self) -> Option<Lsn> {
        self.inner
            .state
            .lock()
            .log
            .as_ref()
            .map(|l| l.checkpoint_lsn())
    }

    /// Bytes of ring in use (checkpoint to end).
    pub fn used_bytes(&self) -> Option<u64> {
        self.inner.state.lock().log.as_ref().map(|l| l.used_bytes())
    }

    /// Size of the ring, and the largest record it holds (0, 0 once closed).
    pub fn geometry(&self) -> (u64, usize) {
        self.inner
            .state
            .lock()
            .log
            .as_ref()
            .map_or((0, 0), |l| (l.capacity(), l.max_payload()))
    }

    /// Bytes of log written after entry `index` (what a replica that holds entries up to
    /// `index` still has to receive); `None` when entries after it are already purged.
    pub fn bytes_after(&self, index: u64) -> Option<u64> {
        let st = self.inner.state.lock();
        if st.last_purged.is_some_and(|p| p.index > index) {
            return None;
        }
        let from = st
            .entries
            .range(index.saturating_add(1)..)
            .next()
            .map_or(st.next_lsn, |(_, c)| c.lsn);
        Some(st.next_lsn.saturating_sub(from))
    }

    /// When the first entry after `index` still in the log was appended here (`None`: there
    /// is none). On the leader, the age of what a replica holding entries up to `index` lacks.
    pub fn appended_after(&self, index: u64) -> Option<std::time::Instant> {
        let st = self.inner.state.lock();
        st.entries
            .range(index.saturating_add(1)..)
            .next()
            .map(|(_, c)| c.at)
    }

    /// Keeps the entries after `index` through later purges (see [`Inner::retain`]); purging
    /// catches up at the next purge once they are no longer wanted.
    pub fn retain_from(&self, index: u64) {
        self.inner
            .retain
            .store(index, std::sync::atomic::Ordering::Release);
    }

    /// Stops the flusher (after it has reported every pending append) and closes the recovery
    /// log, so the directory may be reopened. Idempotent; later calls on any clone fail.
    pub fn close(&self) -> Result<(), ReplicationError> {
        self.inner.stop_flusher();
        let log = self.inner.state.lock().log.take();
        match log.map(Arc::try_unwrap) {
            Some(Ok(log)) => log.close()?,
            // A blocking wait still holds it (only while a Raft call is being torn down); the
            // log closes itself when that finishes.
            Some(Err(_)) => {
                tracing::warn!("Raft log still in use at close; it closes when released")
            }
            None => {}
        }
        Ok(())
    }

    /// Runs a blocking wait on the log off the async runtime.
    async fn wait_durable(log: Arc<RecoveryLog>, end: Lsn) -> StorageResult<()> {
        tokio::task::spawn_blocking(move || log.wait_durable(end))
            .await
            .map_err(io_err)?
            .map_err(io_err)
    }
}

fn holds_anything(dir: &Path) -> Result<bool, ReplicationError> {
    match std::fs::read_dir(dir) {
        Ok(mut it) => Ok(it.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ReplicationError::io(
            format!("reading Raft log directory {}", dir.display()),
            e,
        )),
    }
}

impl Inner {
    fn stop_flusher(&self) {
        self.flush.q.lock().stop = true;
        self.flush.cv.notify_all();
        if let Some(h) = self.flusher.lock().take() {
            if h.join().is_err() {
                tracing::error!("the Raft log flusher thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

/// Waits for the oldest pending append to be durable, then reports every append the same sync
/// covered (group commit makes that usually all of them). A writer failure fails every pending
/// append, which makes openraft stop this node rather than wait forever.
impl FlushQueue {
    /// Reports every queued append that ends at or before `durable` as flushed, in order.
    fn complete_upto(&self, durable: Lsn) {
        let mut q = self.q.lock();
        let n = q.pending.iter().take_while(|(e, _)| *e <= durable).count();
        for (_, cb) in q.pending.drain(..n) {
            cb.log_io_completed(Ok(()));
        }
    }
}

/// How often the flusher looks for appends the writer could not report (it failed).
const FLUSH_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(20);

/// The writer thread reports appends durable itself (`complete_upto` from its `on_durable`).
/// This thread is the backstop: every `FLUSH_BACKSTOP` it fails the pending appends if the
/// writer has failed, and at stop it waits until every pending append is reported. It is not
/// woken per append: that cost two thread switches per Raft append on every instance.
fn run_flusher(log: &RecoveryLog, flush: &FlushQueue) {
    loop {
        let (target, stopping) = {
            let mut q = flush.q.lock();
            if !q.stop {
                flush.cv.wait_for(&mut q, FLUSH_BACKSTOP);
            }
            (q.pending.front().map(|(end, _)| *end), q.stop)
        };
        let Some(target) = target else {
            if stopping {
                return;
            }
            continue;
        };
        let r = if stopping {
            log.wait_durable(target)
        } else {
            log.failure().map_or(Ok(()), Err)
        };
        match r {
            Ok(()) => flush.complete_upto(log.durable_lsn()),
            Err(e) => {
                // Callbacks run under the queue lock, so they stay in LSN order whichever
                // thread runs them.
                let mut q = flush.q.lock();
                for (_, cb) in q.pending.drain(..) {
                    cb.log_io_completed(Err(std::io::Error::other(e.to_string())));
                }
            }
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStorage {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry>> {
        let st = self.inner.state.lock();
        if st.log.is_none() {
            return Err(read_err(LogError::Closed));
        }
        Ok(st
            .entries
            .range(range)
            .map(|(_, c)| c.entry.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStorage {
    type LogReader = LogStorage;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let st = self.inner.state.lock();
        Ok(LogState {
            last_purged_log_id: st.last_purged,
            last_log_id: st.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        let (log, end) = {
            let mut st = self.inner.state.lock();
            let log = st.log().map_err(io_err)?;
            let end = st
                .append(&log, RAFT_VOTE, &[&record::encode_vote(vote)])
                .map_err(io_err)?;
            st.vote = Some(*vote);
            (log, end)
        };
        // Raft's safety rests on a vote never being forgotten: wait for the disk.
        Self::wait_durable(log, end).await
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        Ok(self.inner.state.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> StorageResult<()> {
        // A hint that lets a restarted replica re-apply its own committed entries at once; an
        // older value after a crash is safe, so this does not wait for the disk.
        // Nor does it wake the log writer: it is written with the next entry (a sync of its own
        // per commit-index move cost every instance one more fdatasync per entry).
        let mut st = self.inner.state.lock();
        let log = st.log().map_err(io_err)?;
        let end = log
            .append_lazy(
                RAFT_COMMITTED,
                &[&record::encode_opt_log_id(committed.as_ref())],
            )
            .map_err(io_err)?;
        st.next_lsn = end;
        st.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId>> {
        Ok(self.inner.state.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut st = self.inner.state.lock();
        let log = st.log().map_err(io_err)?;
        let mut end = None;
        for entry in entries {
            let lsn = st.next_lsn;
            let (head, body) = record::entry_parts(&entry);
            end = Some(
                st.append(&log, RAFT_ENTRY, &[&head, body])
                    .map_err(io_err)?,
            );
            st.insert_entry(lsn, entry);
        }
        match end {
            None => callback.log_io_completed(Ok(())),
            Some(end) => {
                // Queued under the state lock so the queue stays in LSN order.
                self.inner.flush.q.lock().pending.push_back((end, callback));
                // The writer may have synced past it before it was queued.
                self.inner.flush.complete_upto(log.durable_lsn());
            }
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> StorageResult<()> {
        let (log, end) = {
            let mut st = self.inner.state.lock();
            let log = st.log().map_err(io_err)?;
            let end = st
                .append(&log, RAFT_TRUNCATE, &[&record::encode_index(log_id.index)])
                .map_err(io_err)?;
            st.truncate_from(log_id.index);
            (log, end)
        };
        Self::wait_durable(log, end).await
    }

    async fn purge(&mut self, log_id: LogId) -> StorageResult<()> {
        let (log, end, ckpt) = {
            let mut st = self.inner.state.lock();
            let log = st.log().map_err(io_err)?;
            // Purge less when a reader outside Raft still needs the entries (openraft reads
            // nothing it purged, and restart tolerates entries older than the snapshot).
            let hold = self.inner.retain.load(std::sync::atomic::Ordering::Acquire);
            let log_id = match st.entries.get(&hold) {
                Some(c) if hold < log_id.index && st.next_lsn - c.lsn <= log.capacity() / 4 => {
                    c.entry.log_id
                }
                _ => log_id,
            };
            if st.last_purged.is_some_and(|p| p.index >= log_id.index) {
                return Ok(());
            }
            st.purge_upto(log_id);
            let marker = st.next_lsn;
            st.append(&log, RAFT_PURGED, &[&record::encode_log_id(&log_id)])
                .map_err(io_err)?;
            // The checkpoint is about to move past the records holding the vote and the commit
            // hint: write them again after it, or a restart would forget them.
            if let Some(v) = st.vote {
                st.append(&log, RAFT_VOTE, &[&record::encode_vote(&v)])
                    .map_err(io_err)?;
            }
            let c = st.committed;
            let end = st
                .append(
                    &log,
                    RAFT_COMMITTED,
                    &[&record::encode_opt_log_id(c.as_ref())],
                )
                .map_err(io_err)?;
            // Live entries are in index order in the ring, so the first kept one is where
            // recovery must start; with none left, the purge marker is.
            let ckpt = st.entries.first_key_value().map_or(marker, |(_, c)| c.lsn);
            (log, end, ckpt)
        };
        tokio::task::spawn_blocking(move || -> Result<(), LogError> {
            log.wait_durable(end)?;
            if ckpt > log.checkpoint_lsn() {
                log.set_checkpoint(ckpt)?;
            }
            Ok(())
        })
        .await
        .map_err(io_err)?
        .map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    #[test]
    fn a_purge_up_to_the_largest_index_replays_without_overflow() {
        let id = LogId::new(CommittedLeaderId::new(1, 1), u64::MAX);
        let purged = record::encode_log_id(&id);
        let r = replay_records([(RAFT_PURGED, purged.as_slice())]).unwrap();
        assert_eq!(r.entries, 0);
        assert_eq!(r.last_log_id, Some(id));
    }
}
