//! The error type of this crate's public API. openraft's own errors are generic and deeply
//! nested; callers (the queue manager) need to tell three things apart: "not the leader, go
//! there", "storage is broken", and "the replica has stopped".

use crate::NodeId;

/// What can go wrong starting or using a replica.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// The recovery log under the Raft storage failed (I/O, full, damaged).
    #[error("replication storage: {0}")]
    Log(#[from] ferrymq_log::LogError),
    /// A Raft record in the log passed its checksum but cannot be decoded.
    #[error("replication storage is damaged: {0}")]
    Decode(#[from] crate::record::DecodeError),
    /// An I/O error outside the recovery log (snapshot file, listener).
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// This replica is not the leader; writes must go to `leader` (at `addr`) if one is known.
    #[error("not the leader; the leader is {}", match (leader, addr) {
        (Some(l), Some(a)) => format!("node {l} at {a}"),
        (Some(l), None) => format!("node {l}"),
        _ => "not known yet (an election may be in progress)".to_string(),
    })]
    NotLeader {
        leader: Option<NodeId>,
        addr: Option<String>,
    },
    /// The Raft configuration is invalid.
    #[error("invalid Raft configuration: {0}")]
    Config(String),
    /// Raft refused or failed the request (initialization conflict, membership change in
    /// progress, node shutting down, storage error, ...). The text is openraft's.
    #[error("raft: {0}")]
    Raft(String),
}

impl ReplicationError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ReplicationError::Io {
            context: context.into(),
            source,
        }
    }
}
