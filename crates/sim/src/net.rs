//! The simulated switch between the three nodes: every Raft RPC is a call into the target's
//! real openraft handle, after a seeded delay each way, unless the link is cut (both ways or one
//! way), the message is dropped, or the target is down. A lost request or reply looks to the
//! sender as it would over TCP: a timeout (a down target: refused at once).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_replication::openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use ferrymq_replication::openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use ferrymq_replication::openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use ferrymq_replication::openraft::BasicNode;
use ferrymq_replication::{FerryRaft, NodeId, TypeConfig};
use parking_lot::Mutex;

use crate::world::Shared;
use crate::NODES;

/// Link conditions, changed by the fault schedule.
#[derive(Debug, Clone)]
pub struct Links {
    /// `cut[a][b]`: nothing from node a+1 reaches node b+1.
    pub cut: [[bool; NODES]; NODES],
    /// One-way delay: uniform in this range, microseconds.
    pub delay_us: (u64, u64),
    /// Per-message loss, per mille.
    pub drop_permille: u32,
}

impl Default for Links {
    fn default() -> Links {
        Links {
            cut: [[false; NODES]; NODES],
            delay_us: (100, 2_000),
            drop_permille: 0,
        }
    }
}

/// A node life on the switch: its Raft handle and whether it still runs.
pub(crate) type Up = (FerryRaft, Arc<AtomicBool>);

/// The switch: which node lives are up, and the links between them.
pub struct Switch {
    pub(crate) links: Mutex<Links>,
    /// The Raft handle of each node's running life (`None`: down).
    pub(crate) up: Mutex<[Option<Up>; NODES]>,
    pub(crate) shared: Arc<Shared>,
}

impl Switch {
    pub fn new(shared: Arc<Shared>) -> Switch {
        Switch {
            links: Mutex::new(Links::default()),
            up: Mutex::new([None, None, None]),
            shared,
        }
    }

    /// One hop from `from` to `to`: the delay it takes, or `None` if it is lost.
    fn hop(&self, from: NodeId, to: NodeId) -> Option<Duration> {
        let links = self.links.lock();
        let (lo, hi) = links.delay_us;
        let mut rng = self.shared.rng.lock();
        let lost = rand::Rng::gen_range(&mut *rng, 0..1000) < links.drop_permille;
        let us = rand::Rng::gen_range(&mut *rng, lo..=hi);
        let cut = links.cut[from as usize - 1][to as usize - 1];
        (!lost && !cut).then_some(Duration::from_micros(us))
    }

    fn target(&self, to: NodeId) -> Option<FerryRaft> {
        self.up.lock()[to as usize - 1]
            .as_ref()
            .filter(|(_, alive)| alive.load(Ordering::Acquire))
            .map(|(r, _)| r.clone())
    }

    /// Carries one RPC: the request after one hop, `f` on the target's Raft, the reply after the
    /// hop back. A lost message never arrives (the caller's timeout ends the wait).
    async fn carry<T, Fut>(
        &self,
        from: NodeId,
        to: NodeId,
        sender_alive: &AtomicBool,
        what: &str,
        f: impl FnOnce(FerryRaft) -> Fut,
    ) -> Result<T, ()>
    where
        Fut: Future<Output = T>,
    {
        let Some(d) = self.hop(from, to) else {
            return std::future::pending().await;
        };
        tokio::time::sleep(d).await;
        // Re-checked on arrival: a cut or a crash may have happened in flight.
        if !sender_alive.load(Ordering::Acquire)
            || self.links.lock().cut[from as usize - 1][to as usize - 1]
        {
            return std::future::pending().await;
        }
        let Some(raft) = self.target(to) else {
            return Err(());
        };
        self.shared.trace(format!("rpc {what} {from}->{to}"));
        let r = f(raft).await;
        let Some(d) = self.hop(to, from) else {
            return std::future::pending().await;
        };
        tokio::time::sleep(d).await;
        if !sender_alive.load(Ordering::Acquire)
            || self.links.lock().cut[to as usize - 1][from as usize - 1]
        {
            return std::future::pending().await;
        }
        Ok(r)
    }
}

/// The network factory of one node life.
pub struct SimNetwork {
    pub(crate) me: NodeId,
    pub(crate) switch: Arc<Switch>,
    pub(crate) alive: Arc<AtomicBool>,
}

impl RaftNetworkFactory<TypeConfig> for SimNetwork {
    type Network = SimConnection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> SimConnection {
        SimConnection {
            me: self.me,
            target,
            switch: self.switch.clone(),
            alive: self.alive.clone(),
        }
    }
}

/// One node's view of a peer.
pub struct SimConnection {
    me: NodeId,
    target: NodeId,
    switch: Arc<Switch>,
    alive: Arc<AtomicBool>,
}

type Rpc<R, E = RaftError<NodeId>> = Result<R, RPCError<NodeId, BasicNode, E>>;

impl SimConnection {
    async fn call<R, E, Fut>(
        &self,
        option: &RPCOption,
        what: &str,
        f: impl FnOnce(FerryRaft) -> Fut,
    ) -> Rpc<R, E>
    where
        Fut: Future<Output = Result<R, E>>,
        E: std::error::Error,
    {
        let ttl = option.hard_ttl();
        let carried = self
            .switch
            .carry(self.me, self.target, &self.alive, what, f);
        match tokio::time::timeout(ttl, carried).await {
            Err(_) => {
                let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
                Err(RPCError::Network(NetworkError::new(&e)))
            }
            Ok(Err(())) => {
                let e = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Ok(Ok(Ok(r))) => Ok(r),
            Ok(Ok(Err(e))) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
        }
    }
}

impl RaftNetwork<TypeConfig> for SimConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<NodeId>> {
        let what = if rpc.entries.is_empty() {
            "heartbeat"
        } else {
            "append"
        };
        self.call(&option, what, |raft| async move {
            raft.append_entries(rpc).await
        })
        .await
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        // The simulated group never purges its log, so it never sends a snapshot.
        self.switch
            .shared
            .violation("openraft tried to send a snapshot; the simulated log is never purged");
        let e = std::io::Error::other("snapshots are not simulated");
        Err(RPCError::Unreachable(Unreachable::new(&e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Rpc<VoteResponse<NodeId>> {
        self.call(&option, "vote", |raft| async move { raft.vote(rpc).await })
            .await
    }
}
