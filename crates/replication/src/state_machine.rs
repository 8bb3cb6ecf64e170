//! The state-machine adapter: openraft's `RaftStateMachine` on top of an [`Apply`] — the queue
//! manager, later — plus the one persisted snapshot.
//!
//! Openraft needs the last applied log id and membership, and a snapshot it can send to a
//! replica that fell behind the purged log. The application only needs to apply records in
//! order and to dump and load its state, so that is all [`Apply`] asks for; the bookkeeping lives
//! here.
//!
//! The application's state is assumed volatile (rebuilt on start): the snapshot is what is
//! persisted (`snapshot.bin` beside the log, replaced atomically), and on open it is installed
//! into the application before Raft starts, after which Raft re-applies the committed entries
//! that follow it. That is the "persistent snapshot" model of openraft's docs, and it is why
//! purging the log is safe: openraft only purges entries a persisted snapshot covers.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership,
};
use parking_lot::Mutex;

use crate::{AppRecord, Entry, LogId, NodeId, ReplicationError, TypeConfig};

type StorageResult<T> = Result<T, StorageError<NodeId>>;
type Meta = SnapshotMeta<NodeId, openraft::BasicNode>;

const SNAPSHOT_FILE: &str = "snapshot.bin";
const SNAPSHOT_MAGIC: &[u8; 8] = b"FMQRSNP1";

/// What the replicated application (the queue manager) implements.
///
/// Calls come from one task at a time, in log order. After a restart, [`install`](Self::install)
/// is first called with the last persisted snapshot (if any), then `apply` for each committed
/// entry after it — so an implementation whose state is rebuilt from scratch on start sees every
/// record exactly once.
pub trait Apply: Send + Sync + 'static {
    /// Applies one committed record; `index` is its Raft log index (increasing, with gaps where
    /// Raft logged its own blank or membership entries).
    fn apply(&self, index: u64, rec: &AppRecord);
    /// A complete image of the state, consistent with the last `apply`.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the whole state with an image produced by `snapshot` (possibly on another
    /// replica).
    fn install(&self, data: &[u8]);
}

/// openraft's state machine for a replica, delegating records to an [`Apply`].
pub struct StateMachine {
    app: Arc<dyn Apply>,
    dir: PathBuf,
    state: Arc<Mutex<SmState>>,
}

#[derive(Default)]
struct SmState {
    last_applied: Option<LogId>,
    membership: StoredMembership<NodeId, openraft::BasicNode>,
    current: Option<(Meta, Arc<Vec<u8>>)>,
}

/// A view of the state captured when openraft asked for a builder: building runs concurrently
/// with further applies, so the image must be taken before them.
pub struct SnapshotBuilder {
    dir: PathBuf,
    state: Arc<Mutex<SmState>>,
    meta: Meta,
    data: Arc<Vec<u8>>,
}

fn sm_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

impl StateMachine {
    /// Opens the state machine whose snapshot lives in `dir`, installing that snapshot into
    /// `app` if there is one.
    pub fn open(dir: &Path, app: Arc<dyn Apply>) -> Result<StateMachine, ReplicationError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| ReplicationError::io(format!("creating {}", dir.display()), e))?;
        let mut st = SmState::default();
        if let Some((meta, data)) = read_snapshot(dir)? {
            app.install(&data);
            st.last_applied = meta.last_log_id;
            st.membership = meta.last_membership.clone();
            st.current = Some((meta, Arc::new(data)));
        }
        Ok(StateMachine {
            app,
            dir: dir.to_path_buf(),
            state: Arc::new(Mutex::new(st)),
        })
    }

    /// The last log id applied (or covered by the installed snapshot).
    pub fn last_applied(&self) -> Option<LogId> {
        self.state.lock().last_applied
    }
}

fn read_snapshot(dir: &Path) -> Result<Option<(Meta, Vec<u8>)>, ReplicationError> {
    let path = dir.join(SNAPSHOT_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ReplicationError::io(
                format!("reading {}", path.display()),
                e,
            ))
        }
    };
    let damaged = |why: &str| {
        ReplicationError::io(
            format!("reading {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string()),
        )
    };
    if bytes.len() < 12 || &bytes[..8] != SNAPSHOT_MAGIC {
        return Err(damaged("not a FerryMQ Raft snapshot"));
    }
    let meta_len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let Some(meta_bytes) = bytes.get(12..12 + meta_len) else {
        return Err(damaged("snapshot metadata is truncated"));
    };
    let meta: Meta =
        serde_json::from_slice(meta_bytes).map_err(|_| damaged("snapshot metadata is invalid"))?;
    Ok(Some((meta, bytes[12 + meta_len..].to_vec())))
}

/// `magic | meta_len u32 | meta JSON | data`, written to a temporary file, synced, renamed over
/// the old one and the directory synced: a crash leaves either the old or the new snapshot.
fn write_snapshot(dir: &Path, meta: &Meta, data: &[u8]) -> std::io::Result<()> {
    let meta_json = serde_json::to_vec(meta).map_err(std::io::Error::other)?;
    let tmp = dir.join(format!("{SNAPSHOT_FILE}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(SNAPSHOT_MAGIC)?;
        f.write_all(&(meta_json.len() as u32).to_le_bytes())?;
        f.write_all(&meta_json)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(SNAPSHOT_FILE))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Persists and records a snapshot off the async runtime (it writes and syncs a file).
async fn store_snapshot(
    dir: PathBuf,
    state: Arc<Mutex<SmState>>,
    meta: Meta,
    data: Arc<Vec<u8>>,
) -> StorageResult<()> {
    tokio::task::spawn_blocking(move || {
        write_snapshot(&dir, &meta, &data)?;
        let mut st = state.lock();
        // A concurrent install may have stored a newer one meanwhile; keep the newest.
        if st
            .current
            .as_ref()
            .is_none_or(|(m, _)| m.last_log_id <= meta.last_log_id)
        {
            st.current = Some((meta, data));
        }
        Ok::<(), std::io::Error>(())
    })
    .await
    .map_err(sm_err)?
    .map_err(sm_err)
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        store_snapshot(
            self.dir.clone(),
            Arc::clone(&self.state),
            self.meta.clone(),
            Arc::clone(&self.data),
        )
        .await?;
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(self.data.to_vec())),
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
        for entry in entries {
            match &entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(rec) => self.app.apply(entry.log_id.index, rec),
                EntryPayload::Membership(m) => {
                    self.state.lock().membership =
                        StoredMembership::new(Some(entry.log_id), m.clone());
                }
            }
            self.state.lock().last_applied = Some(entry.log_id);
            out.push(());
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        let data = Arc::new(self.app.snapshot());
        let st = self.state.lock();
        let last = st.last_applied;
        let meta = Meta {
            last_log_id: last,
            last_membership: st.membership.clone(),
            // Unique per build: two builds at the same index on different replicas must not be
            // taken for the same snapshot by the chunked transfer.
            snapshot_id: format!(
                "{}-{}-{}",
                last.map_or(0, |l| l.leader_id.term),
                last.map_or(0, |l| l.index),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
            ),
        };
        SnapshotBuilder {
            dir: self.dir.clone(),
            state: Arc::clone(&self.state),
            meta,
            data,
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
        let data = Arc::new(snapshot.into_inner());
        // Persisted before the application sees it: a crash in between restarts from this
        // snapshot, never from an application state the disk does not know about.
        store_snapshot(
            self.dir.clone(),
            Arc::clone(&self.state),
            meta.clone(),
            Arc::clone(&data),
        )
        .await?;
        self.app.install(&data);
        let mut st = self.state.lock();
        st.last_applied = meta.last_log_id;
        st.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let st = self.state.lock();
        Ok(st.current.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.to_vec())),
        }))
    }
}
