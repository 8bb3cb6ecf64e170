//! [`Replica`]: one running member of a replica group — its Raft log on a recovery log in its
//! directory, its state machine feeding an [`Apply`], the TCP server peers talk to, and the
//! openraft instance tying them together.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ferrymq_log::{Durability, LogConfig};
use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Config, Raft, ServerState};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::link::Links;
use crate::log_store::{LogStorage, RecoveredLog};
use crate::network::{serve, Contacts, Network};
use crate::state_machine::StateMachine;
use crate::{AppRecord, Apply, FastFailover, FerryRaft, LogId, Metrics, NodeId, ReplicationError};

/// Where a replica keeps its state and how it runs Raft.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// This replica's Raft node id; must stay the same across restarts of this directory.
    pub id: NodeId,
    /// Holds `log/` (the recovery log carrying the Raft log); also handed to [`Apply::open`],
    /// whose checkpoints are the snapshots.
    pub dir: PathBuf,
    /// Ring geometry of the log (see `ferrymq_log::LogConfig`); fixed once created.
    pub log_files: u32,
    pub log_file_pages: u32,
    pub durability: Durability,
    /// Write the log directly where the filesystem allows (see `ferrymq_log::LogConfig`).
    pub direct_writes: bool,
    pub raft: Config,
    /// How links to and from peers are secured (plain TCP by default).
    pub links: Links,
}

impl ReplicaConfig {
    /// Defaults: a 4 × 4 MiB ring, fsync durability, [`fast_failover_config`].
    pub fn new(id: NodeId, dir: impl Into<PathBuf>) -> ReplicaConfig {
        ReplicaConfig {
            id,
            dir: dir.into(),
            log_files: 4,
            log_file_pages: 1024,
            durability: Durability::Fsync,
            direct_writes: true,
            raft: fast_failover_config(),
            links: Links::default(),
        }
    }

    fn log_config(&self) -> LogConfig {
        LogConfig {
            dir: self.dir.join("log"),
            primary_files: self.log_files,
            file_pages: self.log_file_pages,
            durability: self.durability,
            direct_writes: self.direct_writes,
        }
    }
}

/// Raft timing for instances on one host or one LAN: heartbeats every 100 ms, an election after
/// 300–600 ms of silence, so a dead leader is replaced within about a second. Openraft also uses
/// the heartbeat interval as the AppendEntries timeout, so a follower's append (including its
/// fdatasync) must normally finish within it.
pub fn fast_failover_config() -> Config {
    Config {
        cluster_name: "ferrymq".to_string(),
        heartbeat_interval: crate::timing::HEARTBEAT_MS,
        election_timeout_min: crate::timing::ELECTION_MIN_MS,
        election_timeout_max: crate::timing::ELECTION_MAX_MS,
        ..Config::default()
    }
}

/// One member of a replica group. Call [`shutdown`](Self::shutdown) to stop it in order.
/// Dropping it stops serving peers at once; Raft and the log then stop when the last
/// [`raft`](Self::raft) handle is gone, in the background.
pub struct Replica {
    id: NodeId,
    addr: SocketAddr,
    raft: FerryRaft,
    storage: LogStorage,
    recovered: RecoveredLog,
    applied: tokio::sync::watch::Receiver<Option<LogId>>,
    server: Option<JoinHandle<()>>,
    contacts: Contacts,
    failover: FastFailover,
    detector: Option<JoinHandle<()>>,
    links: Links,
}

impl Replica {
    /// Opens (or creates) the replica's storage in `cfg.dir`, installs its last snapshot into
    /// `app`, starts Raft and serves peers on `listener` (whose address peers must know).
    pub async fn start(
        cfg: ReplicaConfig,
        listener: TcpListener,
        app: Arc<dyn Apply>,
    ) -> Result<Replica, ReplicationError> {
        let raft_cfg = Arc::new(
            cfg.raft
                .clone()
                .validate()
                .map_err(|e| ReplicationError::Config(e.to_string()))?,
        );
        let addr = listener
            .local_addr()
            .map_err(|e| ReplicationError::io("reading the Raft listener address", e))?;
        // Opening scans the log and may install a snapshot: blocking work.
        let dir = cfg.dir.clone();
        let log_cfg = cfg.log_config();
        let opened = tokio::task::spawn_blocking(move || {
            let (storage, recovered) = LogStorage::open(&log_cfg)?;
            let sm = StateMachine::open(&dir, app)?;
            Ok::<_, ReplicationError>((storage, recovered, sm))
        })
        .await
        .map_err(|e| ReplicationError::Raft(format!("opening replica storage: {e}")))?;
        let (storage, recovered, sm) = opened?;
        tracing::info!(id = cfg.id, %addr, ?recovered, "starting replica");
        let export = sm.export_switch();
        let applied = sm.applied_watch();
        export.store(false, std::sync::atomic::Ordering::Release);
        let contacts = Contacts::default();
        let (failover, events) = FastFailover::new();
        let network = Network::new(cfg.id, contacts.clone(), cfg.links.clone())
            .with_failover(failover.clone());
        let raft = Raft::new(cfg.id, raft_cfg, network, storage.clone(), sm).await;
        export.store(true, std::sync::atomic::Ordering::Release);
        let raft = raft.map_err(|e| ReplicationError::Raft(e.to_string()))?;
        let detector = tokio::spawn(crate::failover::run(
            cfg.id,
            raft.clone(),
            storage.clone(),
            failover.clone(),
            events,
        ));
        let server = serve(
            listener,
            raft.clone(),
            contacts.clone(),
            Some(failover.clone()),
            cfg.links.clone(),
        );
        Ok(Replica {
            id: cfg.id,
            addr,
            raft,
            storage,
            recovered,
            applied,
            server: Some(server),
            contacts,
            failover,
            detector: Some(detector),
            links: cfg.links,
        })
    }

    /// Forms the group: `members` maps every voter's id to its `host:port`. Call it on one
    /// replica of a brand-new group (calling it on several with the same members is safe);
    /// on a replica that already belongs to a group it does nothing.
    pub async fn initialize(
        &self,
        members: BTreeMap<NodeId, String>,
    ) -> Result<(), ReplicationError> {
        let nodes: BTreeMap<NodeId, BasicNode> = members
            .into_iter()
            .map(|(id, addr)| (id, BasicNode::new(addr)))
            .collect();
        match self.raft.initialize(nodes).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
                tracing::info!(id = self.id, reason = %e, "replica already initialized");
                Ok(())
            }
            Err(e) => Err(ReplicationError::Raft(e.to_string())),
        }
    }

    /// Follows the last log id applied to the state machine.
    pub fn applied_watch(&self) -> tokio::sync::watch::Receiver<Option<LogId>> {
        self.applied.clone()
    }

    /// Replicates one record and returns its Raft log id once a majority has it on disk
    /// and this leader has applied it. Fails with [`ReplicationError::NotLeader`] on a
    /// follower (naming the leader when known). If the leader dies meanwhile, the outcome is
    /// unknown: the record may or may not be committed by the next leader.
    pub async fn write(&self, rec: AppRecord) -> Result<LogId, ReplicationError> {
        match self.raft.client_write(rec).await {
            Ok(resp) => Ok(resp.log_id),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(ReplicationError::NotLeader {
                    leader: f.leader_id,
                    addr: f.leader_node.map(|n| n.addr),
                })
            }
            Err(e) => Err(ReplicationError::Raft(e.to_string())),
        }
    }

    /// Like [`write`](Self::write), but from any replica: a follower forwards the record to the
    /// leader it knows of.
    pub async fn write_anywhere(&self, rec: AppRecord) -> Result<LogId, ReplicationError> {
        // While an election is in progress no leader is known: wait for one, a while.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match self.write(rec.clone()).await {
                Err(ReplicationError::NotLeader {
                    addr: Some(addr), ..
                }) => {
                    return crate::network::forward_write(
                        &self.links,
                        &addr,
                        rec,
                        std::time::Duration::from_secs(10),
                    )
                    .await
                    .map_err(ReplicationError::Raft)
                }
                Err(ReplicationError::NotLeader { addr: None, .. })
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await
                }
                other => return other,
            }
        }
    }

    /// True while this replica believes it leads (it may just have been deposed without
    /// knowing; a write is the only proof).
    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.id)
    }

    /// The leader this replica knows of.
    pub fn current_leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// A copy of openraft's current metrics (term, last log and applied index, membership...).
    /// This replica's contact with each peer (for status: reachable, and since when).
    pub fn contacts(&self) -> &Contacts {
        &self.contacts
    }

    /// The fast-failover detector (on by default): an election as soon as the leader's process
    /// is known to be gone (see [`FastFailover`]).
    pub fn fast_failover(&self) -> &FastFailover {
        &self.failover
    }

    pub fn metrics(&self) -> Metrics {
        self.raft.metrics().borrow().clone()
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// How links to and from peers are secured.
    pub fn links(&self) -> &Links {
        &self.links
    }

    /// The address peers reach this replica at.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What opening the log found.
    pub fn recovered(&self) -> &RecoveredLog {
        &self.recovered
    }

    /// The openraft handle, for what this type does not wrap (membership changes, waits).
    pub fn raft(&self) -> &FerryRaft {
        &self.raft
    }

    /// The Raft log storage (inspection).
    pub fn storage(&self) -> &LogStorage {
        &self.storage
    }

    /// Stops serving peers (they see this replica gone at once), stops Raft, and closes the
    /// log so the directory can be reopened.
    pub async fn shutdown(mut self) -> Result<(), ReplicationError> {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
        if let Some(d) = self.detector.take() {
            d.abort();
        }
        self.raft
            .shutdown()
            .await
            .map_err(|e| ReplicationError::Raft(format!("stopping Raft: {e}")))?;
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || storage.close())
            .await
            .map_err(|e| ReplicationError::Raft(format!("closing the Raft log: {e}")))?
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
        if let Some(d) = self.detector.take() {
            d.abort();
        }
    }
}
