//! The state-machine adapter: openraft's `RaftStateMachine` on top of an [`Apply`] — the queue
//! manager — whose snapshots are the application's own checkpoints.
//!
//! Openraft needs the last applied log id and membership, and a snapshot it can send to a
//! replica that fell behind the purged log. The queue manager already checkpoints its state
//! incrementally (only messages not yet in its message store are written), so a Raft snapshot
//! *is* such a checkpoint, with the snapshot's metadata stored inside it: building one costs what
//! a checkpoint costs, not a copy of every queued message. Only when a lagging replica needs the
//! whole state is the newest checkpoint turned into one self-contained image ([`Apply::export`])
//! and, on the receiving side, written as that replica's checkpoint ([`Apply::import`]).
//!
//! The application's state is volatile (rebuilt on start): on open its newest checkpoint is
//! loaded, after which Raft re-applies the committed entries that follow it. That is the
//! "persistent snapshot" model of openraft's docs, and why purging the log is safe: openraft only
//! purges entries a persisted snapshot covers.
//!
//! A leader's application may be *ahead* of what has been applied: the queue manager changes its
//! state first and proposes the records after. Its [`Capture`] therefore says which entry the
//! captured state corresponds to once that entry exists and has been applied (`at`), and the
//! builder waits for it before recording the snapshot.

use std::future::Future;
use std::io::Cursor;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership,
};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::{AppRecord, Entry, LogId, NodeId, ReplicationError, TypeConfig};

type StorageResult<T> = Result<T, StorageError<NodeId>>;
/// The metadata of a snapshot (= of a checkpoint).
pub type Meta = SnapshotMeta<NodeId, openraft::BasicNode>;

/// Resolves to the log entry a captured state corresponds to.
pub type CaptureAt = Pin<Box<dyn Future<Output = Option<LogId>> + Send>>;
/// Writes a captured state with the given snapshot metadata.
pub type CaptureWrite = Box<dyn FnOnce(&[u8]) -> std::io::Result<()> + Send>;

/// A captured state waiting to be written as a checkpoint.
pub struct Capture {
    /// `None`: the captured state is exactly the last applied entry's. `Some`: it resolves to
    /// the entry the state corresponds to once that entry is known (`None` if it never will be,
    /// e.g. leadership was lost); the builder then waits until that entry is applied.
    pub at: Option<CaptureAt>,
    /// Persists the captured state with the given metadata (blocking; run off the runtime).
    pub write: CaptureWrite,
}

/// What the replicated application (the queue manager) implements.
///
/// Calls to `apply`, `capture` and `import` come from one task at a time, in log order. On
/// start, [`open`](Self::open) loads the newest checkpoint, then `apply` is called for each
/// committed entry after it — so an implementation rebuilt from scratch sees every record once.
pub trait Apply: Send + Sync + 'static {
    /// Loads the newest persisted checkpoint in `dir` into the state and returns the metadata
    /// stored with it (`None`: no checkpoint carries Raft metadata yet; the state is the initial
    /// one).
    fn open(&self, dir: &Path) -> std::io::Result<Option<Vec<u8>>>;
    /// Applies one committed record.
    fn apply(&self, log_id: &LogId, rec: &AppRecord);
    /// Captures the current state cheaply, to be written by the returned [`Capture`].
    fn capture(&self) -> Capture;
    /// The newest checkpoint as one self-contained image: `(metadata, data)`.
    fn export(&self) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>>;
    /// Replaces the whole state with an image made by `export` (on another replica) and persists
    /// it as the newest checkpoint, with `meta`.
    fn import(&self, meta: &[u8], data: &[u8]) -> std::io::Result<()>;
}

/// openraft's state machine for a replica, delegating records to an [`Apply`].
pub struct StateMachine {
    app: Arc<dyn Apply>,
    state: Arc<Mutex<SmState>>,
    applied: watch::Sender<Option<LogId>>,
    /// Cleared while Raft starts: openraft then reads the current snapshot for its metadata
    /// only, and exporting a large state for nothing would slow every start.
    export: Arc<AtomicBool>,
}

#[derive(Default)]
struct SmState {
    last_applied: Option<LogId>,
    membership: StoredMembership<NodeId, openraft::BasicNode>,
    current: Option<Meta>,
}

/// The state captured when openraft asked for a builder; building (writing the checkpoint) runs
/// concurrently with further applies.
pub struct SnapshotBuilder {
    state: Arc<Mutex<SmState>>,
    applied: watch::Receiver<Option<LogId>>,
    captured_at: Option<LogId>,
    /// In a mutex only because openraft wants the builder `Sync`.
    capture: Mutex<Option<Capture>>,
}

fn sm_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

fn snapshot_id(last: Option<LogId>) -> String {
    // Unique per build: two builds at the same index on different replicas must not be taken
    // for the same snapshot by the chunked transfer.
    format!(
        "{}-{}-{}",
        last.map_or(0, |l| l.leader_id.term),
        last.map_or(0, |l| l.index),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

impl StateMachine {
    /// Opens the state machine: loads `app`'s newest checkpoint in `dir`.
    pub fn open(dir: &Path, app: Arc<dyn Apply>) -> Result<StateMachine, ReplicationError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| ReplicationError::io(format!("creating {}", dir.display()), e))?;
        let mut st = SmState::default();
        let meta = app
            .open(dir)
            .map_err(|e| ReplicationError::io("loading the newest checkpoint", e))?;
        if let Some(bytes) = meta {
            let meta: Meta = serde_json::from_slice(&bytes).map_err(|e| {
                ReplicationError::io(
                    "reading the newest checkpoint's Raft metadata",
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            })?;
            st.last_applied = meta.last_log_id;
            st.membership = meta.last_membership.clone();
            st.current = Some(meta);
        }
        let (applied, _) = watch::channel(st.last_applied);
        Ok(StateMachine {
            app,
            state: Arc::new(Mutex::new(st)),
            applied,
            export: Arc::new(AtomicBool::new(true)),
        })
    }

    /// The last log id applied (or covered by the loaded checkpoint).
    pub fn last_applied(&self) -> Option<LogId> {
        self.state.lock().last_applied
    }

    /// Follows the last applied log id.
    pub fn applied_watch(&self) -> watch::Receiver<Option<LogId>> {
        self.applied.subscribe()
    }

    pub(crate) fn export_switch(&self) -> Arc<AtomicBool> {
        self.export.clone()
    }

    fn set_applied(&self, id: Option<LogId>) {
        self.state.lock().last_applied = id;
        self.applied.send_replace(id);
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let capture = self
            .capture
            .lock()
            .take()
            .ok_or_else(|| sm_err(std::io::Error::other("snapshot builder used twice")))?;
        let last = match capture.at {
            None => self.captured_at,
            Some(at) => {
                let Some(id) = at.await else {
                    return Err(sm_err(std::io::Error::other(
                        "the captured state was never replicated (leadership lost)",
                    )));
                };
                self.applied
                    .wait_for(|a| a.is_some_and(|a| a.index >= id.index))
                    .await
                    .map_err(sm_err)?;
                Some(id)
            }
        };
        let membership = self.state.lock().membership.clone();
        let meta = Meta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id: snapshot_id(last),
        };
        let meta_json = serde_json::to_vec(&meta).map_err(sm_err)?;
        let write = capture.write;
        tokio::task::spawn_blocking(move || write(&meta_json))
            .await
            .map_err(sm_err)?
            .map_err(sm_err)?;
        let mut st = self.state.lock();
        if st
            .current
            .as_ref()
            .is_none_or(|m| m.last_log_id <= meta.last_log_id)
        {
            st.current = Some(meta.clone());
        }
        // Openraft only needs the metadata of a snapshot it built.
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(Vec::new())),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(Option<LogId>, StoredMembership<NodeId, openraft::BasicNode>)> {
        let st = self.state.lock();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<()>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        let mut last = None;
        for entry in entries {
            match &entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(rec) => self.app.apply(&entry.log_id, rec),
                EntryPayload::Membership(m) => {
                    self.state.lock().membership =
                        StoredMembership::new(Some(entry.log_id), m.clone());
                }
            }
            last = Some(entry.log_id);
            out.push(());
        }
        if last.is_some() {
            self.set_applied(last);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Captured here, on the applying task, so the state is not moved on by an apply first.
        let capture = self.app.capture();
        SnapshotBuilder {
            state: Arc::clone(&self.state),
            applied: self.applied.subscribe(),
            captured_at: self.state.lock().last_applied,
            capture: Mutex::new(Some(capture)),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let data = snapshot.into_inner();
        let meta_json = serde_json::to_vec(meta).map_err(sm_err)?;
        let app = Arc::clone(&self.app);
        // Persisted as this replica's checkpoint before anything else sees it: a crash in
        // between restarts from it, never from a state the disk does not know about.
        tokio::task::spawn_blocking(move || app.import(&meta_json, &data))
            .await
            .map_err(sm_err)?
            .map_err(sm_err)?;
        {
            let mut st = self.state.lock();
            st.membership = meta.last_membership.clone();
            st.current = Some(meta.clone());
        }
        self.set_applied(meta.last_log_id);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let Some(meta) = self.state.lock().current.clone() else {
            return Ok(None);
        };
        if !self.export.load(Ordering::Acquire) {
            return Ok(Some(Snapshot {
                meta,
                snapshot: Box::new(Cursor::new(Vec::new())),
            }));
        }
        let app = Arc::clone(&self.app);
        let exported = tokio::task::spawn_blocking(move || app.export())
            .await
            .map_err(sm_err)?
            .map_err(sm_err)?;
        let Some((meta_json, data)) = exported else {
            return Ok(None);
        };
        let meta: Meta = serde_json::from_slice(&meta_json).map_err(sm_err)?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
