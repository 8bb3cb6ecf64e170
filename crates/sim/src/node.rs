//! One life of a simulated node (from a start to its crash or restart): the real openraft
//! `Raft`, its log on the node's simulated disk, and a queue manager like the server's — the real
//! engine, applying committed batches while a replica, serving clients while the active instance,
//! and thrown away when it stops leading.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrymq_engine::{Engine, EngineConfig, Image};
use ferrymq_log::lsn::LsnWatch;
use ferrymq_replication::ha::Proposals;
use ferrymq_replication::openraft::storage::{RaftStateMachine, Snapshot};
use ferrymq_replication::openraft::{
    AnyError, EntryPayload, RaftSnapshotBuilder, ServerState, StorageError, StorageIOError,
    StoredMembership,
};
use ferrymq_replication::{
    AppRecord, Entry, FerryRaft, LogId, Meta, NodeId, TypeConfig, KIND_ENGINE_BATCH,
};
use parking_lot::Mutex;

use crate::replication::{SimClock, SimGroup, SimSink};
use crate::world::{Shared, World};

type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// The queue manager of one node life.
pub struct Qm {
    pub node: NodeId,
    pub engine: Mutex<Engine>,
    /// The production proposals the engine's records go into.
    pub props: Arc<Proposals>,
    /// Their durable position: the last record number whose reply may go out.
    pub durable: LsnWatch,
    /// The number of the last record the engine logged.
    logged: Arc<AtomicU64>,
    /// The term this life is active in (0: none yet).
    pub own_term: AtomicU64,
    /// Entries of `own_term` by this node from this index on are already in the engine.
    own_from: AtomicU64,
    pub active: AtomicBool,
    pub alive: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

impl Qm {
    pub fn new(
        node: NodeId,
        life: u64,
        image: Image,
        alive: Arc<AtomicBool>,
        shared: Arc<Shared>,
    ) -> Arc<Qm> {
        let props = Proposals::new(SimClock::start());
        let logged = Arc::new(AtomicU64::new(0));
        let cfg = EngineConfig {
            qmgr_name: "SIMQM".into(),
            max_handles: 16,
            instance_id: node * 1_000_000 + life,
            backout_requeue: false,
            message_memory_max: 0,
        };
        let sink = SimSink {
            props: props.clone(),
            logged: logged.clone(),
        };
        let engine = Engine::restore(cfg, Box::new(sink), image)
            .expect("a simulated node restores the image its own engine captured");
        Arc::new(Qm {
            node,
            engine: Mutex::new(engine),
            durable: props.durable_watch(),
            props,
            logged,
            own_term: AtomicU64::new(0),
            own_from: AtomicU64::new(u64::MAX),
            active: AtomicBool::new(false),
            alive,
            shared,
        })
    }

    /// The number of the last record the engine logged.
    pub fn logged(&self) -> u64 {
        self.logged.load(Ordering::Acquire)
    }

    pub fn is_serving(&self) -> bool {
        self.alive.load(Ordering::Acquire) && self.active.load(Ordering::Acquire)
    }

    /// Applies one committed entry (as the server's `HaApp::apply`).
    fn apply(&self, log_id: &LogId, rec: &AppRecord) {
        if log_id.index >= self.own_from.load(Ordering::Acquire)
            && log_id.leader_id.term == self.own_term.load(Ordering::Acquire)
            && log_id.leader_id.node_id == self.node
        {
            return;
        }
        if rec.kind != KIND_ENGINE_BATCH {
            self.shared.violation(format!(
                "entry {} has unknown kind {}",
                log_id.index, rec.kind
            ));
            return;
        }
        self.props
            .applied_elsewhere(log_id.index, rec.payload.len());
        let mut engine = self.engine.lock();
        for r in ferrymq_engine::batch::records(&rec.payload) {
            let res = r.map_err(|e| e.to_string()).and_then(|(kind, payload)| {
                engine
                    .replay(kind, Bytes::copy_from_slice(payload))
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = res {
                self.shared.violation(format!(
                    "node {} cannot apply committed entry {}: {e}",
                    self.node, log_id.index
                ));
            }
        }
    }
}

/// openraft's state machine for a node life: committed entries go to its engine.
pub struct SimStateMachine {
    pub qm: Arc<Qm>,
    applied: Option<LogId>,
    membership: StoredMembership<NodeId, ferrymq_replication::openraft::BasicNode>,
}

impl SimStateMachine {
    pub fn new(qm: Arc<Qm>) -> SimStateMachine {
        SimStateMachine {
            qm,
            applied: None,
            membership: StoredMembership::default(),
        }
    }
}

fn no_snapshots() -> StorageError<NodeId> {
    let e = std::io::Error::other("snapshots are not simulated");
    StorageIOError::read_snapshot(None, AnyError::new(&e)).into()
}

/// Never used: the simulated group takes no snapshots.
pub struct NoSnapshots;

impl RaftSnapshotBuilder<TypeConfig> for NoSnapshots {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        Err(no_snapshots())
    }
}

impl RaftStateMachine<TypeConfig> for SimStateMachine {
    type SnapshotBuilder = NoSnapshots;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(
        Option<LogId>,
        StoredMembership<NodeId, ferrymq_replication::openraft::BasicNode>,
    )> {
        Ok((self.applied, self.membership.clone()))
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
                EntryPayload::Normal(rec) => self.qm.apply(&entry.log_id, rec),
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m.clone())
                }
            }
            self.applied = Some(entry.log_id);
            out.push(());
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        NoSnapshots
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<std::io::Cursor<Vec<u8>>>> {
        Err(no_snapshots())
    }

    async fn install_snapshot(
        &mut self,
        _meta: &Meta,
        _snapshot: Box<std::io::Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        Err(no_snapshots())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        Ok(None)
    }
}

/// A running node life.
pub struct Life {
    pub node: NodeId,
    pub life: u64,
    pub alive: Arc<AtomicBool>,
    pub raft: FerryRaft,
    pub qm: Arc<Qm>,
}

impl Life {
    pub fn metrics(&self) -> ferrymq_replication::Metrics {
        self.raft.metrics().borrow().clone()
    }

    fn leading(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.node)
    }
}

/// Makes a new leader's engine complete before it serves (as the server's `activate_engine`):
/// leadership confirmed by a quorum, every entry in its log applied.
async fn activate(life: &Life) -> Result<LogId, String> {
    let raft = &life.raft;
    raft.ensure_linearizable()
        .await
        .map_err(|e| format!("leadership not confirmed: {e}"))?;
    let last = raft.metrics().borrow().last_log_index;
    let m = raft
        .wait(Some(Duration::from_secs(5)))
        .applied_index_at_least(last, "activation")
        .await
        .map_err(|e| format!("the log was not applied: {e}"))?;
    let applied = m.last_applied.ok_or("nothing applied")?;
    let _engine = life.qm.engine.lock();
    life.qm.props.activate(applied);
    life.qm.own_from.store(applied.index + 1, Ordering::Release);
    Ok(applied)
}

/// Watches a life's role (as the server's `monitor`): takes over when it leads, and throws its
/// engine away — a restart of the node, keeping its disk — once it stops leading, loses the
/// majority, or a replicated write fails.
pub async fn monitor(world: Arc<World>, life: Arc<Life>) {
    let qm = &life.qm;
    let sh = &world.shared;
    loop {
        if !life.alive.load(Ordering::Acquire) {
            return;
        }
        let m = life.metrics();
        let active = qm.active.load(Ordering::Acquire);
        if !active && life.leading() {
            qm.own_term.store(m.current_term, Ordering::Release);
            let r = tokio::time::timeout(Duration::from_secs(3), activate(&life)).await;
            match r {
                Ok(Ok(applied)) if life.alive.load(Ordering::Acquire) => {
                    qm.active.store(true, Ordering::Release);
                    sh.ledger.lock().stats.activations += 1;
                    sh.trace(format!(
                        "node {} active term {} applied {}",
                        life.node, m.current_term, applied.index
                    ));
                    let group =
                        SimGroup::new(life.raft.clone(), &qm.props, sh.cfg.ack_before_commit);
                    tokio::spawn(crate::replication::replicate(qm.props.clone(), group));
                }
                Ok(Ok(_)) => return,
                _ => {
                    qm.own_term.store(0, Ordering::Release);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            continue;
        }
        if active {
            let own = qm.own_term.load(Ordering::Acquire);
            let why = if !life.leading() || m.current_term != own {
                Some("another instance became active")
            } else if m
                .millis_since_quorum_ack
                .is_some_and(|ms| ms > ferrymq_replication::timing::QUORUM_LOSS_MS)
            {
                Some("lost contact with the majority")
            } else if qm.props.is_lost() {
                Some("a replicated write failed")
            } else {
                None
            };
            if let Some(why) = why {
                sh.trace(format!("node {} gives up the role: {why}", life.node));
                qm.active.store(false, Ordering::Release);
                world.clone().restart_deposed(life.node, life.life);
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(
            ferrymq_replication::timing::MONITOR_POLL_MAX_MS / 5,
        ))
        .await;
    }
}
