//! High availability for FerryMQ: this crate owns replicating the recovery log synchronously to a
//! majority of queue manager instances with Raft (openraft 0.9). It provides the Raft log storage
//! built on the engine's own circular recovery log (`ferrymq_log::RecoveryLog` — every Raft entry,
//! vote, truncation and purge is one record in that ring, so group commit and the torn-tail
//! recovery come for free), the state-machine adapter through which committed records reach the
//! queue manager ([`Apply`]), the TCP network between instances, the fast-failover detector that
//! calls an election as soon as a leader's process is known gone ([`FastFailover`]), the links
//! between instances, plain or mutual TLS ([`link::Links`], also used by DR), and
//! [`Replica`], which bundles them into one running member of a replicated group. Nothing here knows what an engine record
//! means: an [`AppRecord`] is an opaque `(kind, payload)` pair, exactly as in the recovery log.

pub mod clock;
mod error;
mod failover;
pub mod ha;
pub mod link;
mod log_store;
mod network;
mod record;
mod replica;
pub mod runtime;
mod state_machine;
pub mod timing;

use serde::{Deserialize, Serialize};

pub use error::ReplicationError;
pub use failover::{FailoverStats, FastFailover};
pub use log_store::{replay_records, LogStorage, RecoveredLog};
pub use network::{
    forward_write, reencode_peer_frame, serve, Contact, Contacts, Network, PeerConnection,
    PeerFrame, REACH_WINDOW,
};
pub use record::{
    reencode_record, DecodeError as RecordDecodeError, RAFT_COMMITTED, RAFT_ENTRY, RAFT_PURGED,
    RAFT_TRUNCATE, RAFT_VOTE,
};
pub use replica::{fast_failover_config, Replica, ReplicaConfig};
pub use state_machine::{Apply, Capture, CaptureAt, CaptureWrite, Meta, StateMachine};

/// Re-exported so users name exactly the openraft this crate was built against.
pub use openraft;

/// The Raft node id of one queue manager instance.
pub type NodeId = u64;

/// One engine log record carried through Raft: the same `(kind, payload)` the engine hands to the
/// recovery log, opaque here. On the wire (bincode) the payload travels as raw bytes; in the
/// human-readable formats such as JSON as a hex string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRecord {
    pub kind: u8,
    #[serde(with = "record::hex_bytes")]
    pub payload: Vec<u8>,
}

/// The [`AppRecord`] kind of a batch of engine log records (framed by `ferrymq_engine::batch`):
/// what an HA group's queue manager proposes, and what DR ships from its committed entries. This
/// crate carries it without reading it; it is defined here, below both, so it has one owner.
pub const KIND_ENGINE_BATCH: u8 = 1;

openraft::declare_raft_types!(
    /// The openraft type configuration of a FerryMQ replica group.
    pub TypeConfig:
        D = AppRecord,
        R = (),
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = runtime::FerryRuntime,
);

/// The Raft handle of a replica.
pub type FerryRaft = openraft::Raft<TypeConfig>;
/// A Raft log entry of a replica group.
pub type Entry = openraft::Entry<TypeConfig>;
/// A Raft log id (term, leader, index).
pub type LogId = openraft::LogId<NodeId>;
/// A persisted vote.
pub type Vote = openraft::Vote<NodeId>;
/// Raft metrics of a replica.
pub type Metrics = openraft::RaftMetrics<NodeId, openraft::BasicNode>;
