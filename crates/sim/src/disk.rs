//! A node's Raft log storage in memory, with a simulated disk under it: what openraft writes is
//! visible to it at once, but durable only once a simulated fsync has covered it (the append's
//! flush callback fires then, as the real storage's does after its `fdatasync`). Votes and
//! truncations wait for their fsync, the commit hint does not. A crash keeps what was durable,
//! and possibly a prefix of what was not (a write that reached the platter before the power
//! went), never anything out of order.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_replication::openraft::storage::{LogFlushed, RaftLogStorage};
use ferrymq_replication::openraft::{
    AnyError, LogState, RaftLogReader, StorageError, StorageIOError,
};
use ferrymq_replication::{Entry, LogId, NodeId, TypeConfig, Vote};
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};

use crate::world::Shared;

type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// What a node's Raft log holds.
#[derive(Clone, Default)]
pub struct LogImage {
    pub entries: BTreeMap<u64, Entry>,
    pub vote: Option<Vote>,
    pub committed: Option<LogId>,
    pub last_purged: Option<LogId>,
}

impl LogImage {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Entries(es) => {
                for e in es {
                    drop(self.entries.split_off(&e.log_id.index));
                    self.entries.insert(e.log_id.index, e.clone());
                }
            }
            Op::Truncate(from) => drop(self.entries.split_off(from)),
            Op::Vote(v) => self.vote = Some(*v),
            Op::Committed(c) => self.committed = *c,
            Op::Purge(id) => {
                self.entries = self.entries.split_off(&(id.index + 1));
                self.last_purged = Some(*id);
            }
        }
    }

    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .last_key_value()
            .map(|(_, e)| e.log_id)
            .or(self.last_purged)
    }
}

enum Op {
    Entries(Vec<Entry>),
    Truncate(u64),
    Vote(Vote),
    Committed(Option<LogId>),
    Purge(LogId),
}

/// A node's disk: outlives the node's lives (crash and restart).
pub struct Disk {
    st: Mutex<DiskState>,
}

struct DiskState {
    durable: LogImage,
    /// Written, not yet synced: `(op number, op)`.
    pending: VecDeque<(u64, Op)>,
    /// Flush callbacks of appends, by the op number that makes them durable.
    callbacks: VecDeque<(u64, LogFlushed<TypeConfig>)>,
    next_op: u64,
    /// The life allowed to write (others are gone).
    life: u64,
}

impl Disk {
    pub fn new() -> Arc<Disk> {
        Arc::new(Disk {
            st: Mutex::new(DiskState {
                durable: LogImage::default(),
                pending: VecDeque::new(),
                callbacks: VecDeque::new(),
                next_op: 1,
                life: 0,
            }),
        })
    }

    /// The power goes: returns how many unsynced writes were kept (a prefix of `keep` of them at
    /// most) and forgets the others. No callback fires for them.
    pub fn crash(&self, keep: usize) -> (usize, usize) {
        let mut st = self.st.lock();
        let pending = std::mem::take(&mut st.pending);
        let n = pending.len();
        let kept = keep.min(n);
        for (_, op) in pending.iter().take(kept) {
            st.durable.apply(op);
        }
        st.callbacks.clear();
        st.life = u64::MAX;
        (kept, n)
    }

    /// What survives on the disk (for a restart, and for the end-of-run checks).
    pub fn durable(&self) -> LogImage {
        self.st.lock().durable.clone()
    }

    /// Opens the storage for a new life of the node.
    pub fn open(
        self: &Arc<Disk>,
        life: u64,
        alive: Arc<AtomicBool>,
        shared: Arc<Shared>,
    ) -> MemLog {
        let image = {
            let mut st = self.st.lock();
            st.life = life;
            st.durable.clone()
        };
        let (synced, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            disk: self.clone(),
            life,
            alive,
            view: Mutex::new(image),
            synced,
            wake: Notify::new(),
            shared,
        });
        tokio::spawn(run_fsync(inner.clone()));
        MemLog { inner }
    }
}

struct Inner {
    disk: Arc<Disk>,
    life: u64,
    alive: Arc<AtomicBool>,
    /// What openraft sees: the durable image plus every write since.
    view: Mutex<LogImage>,
    /// The last op number synced.
    synced: watch::Sender<u64>,
    wake: Notify,
    shared: Arc<Shared>,
}

fn gone() -> StorageError<NodeId> {
    let e = std::io::Error::other("the node is down");
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

impl Inner {
    fn live(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Writes `op` (visible at once); returns its op number.
    // openraft's storage error is large by design and its traits return it anyway.
    #[allow(clippy::result_large_err)]
    fn write(&self, op: Op, callback: Option<LogFlushed<TypeConfig>>) -> StorageResult<u64> {
        if !self.live() {
            return Err(gone());
        }
        let mut st = self.disk.st.lock();
        if st.life != self.life {
            return Err(gone());
        }
        self.view.lock().apply(&op);
        let n = st.next_op;
        st.next_op += 1;
        st.pending.push_back((n, op));
        if let Some(cb) = callback {
            st.callbacks.push_back((n, cb));
        }
        drop(st);
        self.wake.notify_one();
        Ok(n)
    }

    async fn wait_synced(&self, n: u64) -> StorageResult<()> {
        let mut rx = self.synced.subscribe();
        loop {
            if *rx.borrow_and_update() >= n {
                return Ok(());
            }
            if !self.live() {
                return Err(gone());
            }
            tokio::select! {
                biased;
                r = rx.changed() => if r.is_err() { return Err(gone()); },
                // A crash does not signal the watch: look again now and then.
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }
}

/// The disk's fsync loop: each sync takes a seeded while and covers what was written before it
/// started.
async fn run_fsync(inner: Arc<Inner>) {
    loop {
        let notified = inner.wake.notified();
        let upto = {
            let st = inner.disk.st.lock();
            if st.life != inner.life || !inner.live() {
                return;
            }
            st.pending.back().map(|(n, _)| *n)
        };
        let Some(upto) = upto else {
            tokio::select! {
                biased;
                _ = notified => {}
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            continue;
        };
        let us = {
            let mut rng = inner.shared.rng.lock();
            // Mostly a fast device, now and then a slow sync.
            if rand::Rng::gen_range(&mut *rng, 0..20) == 0 {
                rand::Rng::gen_range(&mut *rng, 5_000..40_000)
            } else {
                rand::Rng::gen_range(&mut *rng, 50..1_500)
            }
        };
        tokio::time::sleep(Duration::from_micros(us)).await;
        let mut st = inner.disk.st.lock();
        if st.life != inner.life || !inner.live() {
            return;
        }
        while st.pending.front().is_some_and(|(n, _)| *n <= upto) {
            let (_, op) = st.pending.pop_front().expect("checked");
            st.durable.apply(&op);
        }
        let mut done = Vec::new();
        while st.callbacks.front().is_some_and(|(n, _)| *n <= upto) {
            done.push(st.callbacks.pop_front().expect("checked").1);
        }
        drop(st);
        for cb in done {
            cb.log_io_completed(Ok(()));
        }
        inner.synced.send_replace(upto);
    }
}

/// openraft's log storage for one node life.
#[derive(Clone)]
pub struct MemLog {
    inner: Arc<Inner>,
}

impl RaftLogReader<TypeConfig> for MemLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry>> {
        if !self.inner.live() {
            return Err(gone());
        }
        Ok(self
            .inner
            .view
            .lock()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for MemLog {
    type LogReader = MemLog;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let v = self.inner.view.lock();
        Ok(LogState {
            last_purged_log_id: v.last_purged,
            last_log_id: v.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        let n = self.inner.write(Op::Vote(*vote), None)?;
        self.inner.wait_synced(n).await
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        Ok(self.inner.view.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> StorageResult<()> {
        // A hint, as in the real storage: written with the next sync, not waited for.
        self.inner.write(Op::Committed(committed), None).map(|_| ())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId>> {
        Ok(self.inner.view.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        if entries.is_empty() {
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        self.inner
            .write(Op::Entries(entries), Some(callback))
            .map(|_| ())
    }

    async fn truncate(&mut self, log_id: LogId) -> StorageResult<()> {
        let n = self.inner.write(Op::Truncate(log_id.index), None)?;
        self.inner.wait_synced(n).await
    }

    async fn purge(&mut self, log_id: LogId) -> StorageResult<()> {
        let n = self.inner.write(Op::Purge(log_id), None)?;
        self.inner.wait_synced(n).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimConfig;
    use ferrymq_replication::openraft::CommittedLeaderId;

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    #[test]
    fn writes_are_durable_only_once_synced_and_a_crash_keeps_at_most_a_prefix() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let shared = Shared::new(SimConfig::new(1));
            let disk = Disk::new();
            let alive = Arc::new(AtomicBool::new(true));
            let mut log = disk.open(1, alive.clone(), shared.clone());
            // A vote returns once synced.
            let vote = Vote::new(3, 2);
            log.save_vote(&vote).await.unwrap();
            assert_eq!(disk.durable().vote, Some(vote));
            // The commit hint is visible at once, durable only after the next sync.
            log.save_committed(Some(log_id(5))).await.unwrap();
            assert_eq!(log.read_committed().await.unwrap(), Some(log_id(5)));
            assert_eq!(disk.durable().committed, None);
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(disk.durable().committed, Some(log_id(5)));
            // Unsynced writes are lost in a crash, except a prefix of those asked to be kept.
            log.save_committed(Some(log_id(6))).await.unwrap();
            log.save_committed(Some(log_id(7))).await.unwrap();
            alive.store(false, Ordering::Release);
            assert_eq!(disk.crash(1), (1, 2));
            assert_eq!(disk.durable().committed, Some(log_id(6)));
            assert!(
                log.save_committed(None).await.is_err(),
                "a dead life cannot write"
            );
            // The next life starts from what the disk kept.
            let mut log = disk.open(2, Arc::new(AtomicBool::new(true)), shared);
            assert_eq!(log.read_vote().await.unwrap(), Some(vote));
            assert_eq!(log.read_committed().await.unwrap(), Some(log_id(6)));
        });
    }
}
