//! Durable storage of a FerryMQ queue manager: the circular recovery log,
//! the message store segments and the checkpoint manifests. This crate knows
//! nothing about what the bytes mean — a record is an opaque `(kind, payload)`
//! pair whose contents the engine defines — it only guarantees that what it
//! acknowledges as durable comes back intact after a crash, and that damage is
//! reported rather than silently skipped. The records written here will later
//! be replicated (HA, via Raft) and shipped asynchronously (DR), which is why a
//! reader API over the durable log ([`RecoveryLog::read_from`]) exists from the
//! start.

mod circular;
mod control;
mod durability;
mod error;
mod fsutil;
mod record;
mod recovery;
mod ring;
mod tail;
mod writer;

pub mod checkpoint;
pub mod inspect;
pub mod lsn;
pub mod segments;

pub use checkpoint::{CheckpointReader, CheckpointWriter};
pub use circular::{LogConfig, LogRecord, Recovered, RecoveryLog, TailProblem};
pub use durability::{Durability, ParseDurabilityError};
pub use error::LogError;
/// Bytes a record occupies in the log beyond its payload.
pub use record::HEADER_LEN as RECORD_HEADER_LEN;
pub use recovery::{DamagePolicy, DiscardedSpan, SpanKind};
pub use ring::WriteMode;
pub use segments::{SegmentScan, SegmentStore, StoreLoc};

/// A position in the infinite logical byte stream of the recovery log; the
/// first record starts at LSN 0. A record's end LSN is its start LSN plus its
/// encoded length (header + payload).
pub type Lsn = u64;
