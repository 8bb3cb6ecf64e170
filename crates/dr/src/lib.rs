//! Disaster recovery's stream, apart from the queue manager that runs it: this crate owns the
//! sans-IO wire between a primary and its recovery site ([`wire`]: frames, their encoding and
//! decoding, and the async read and write of one frame), and what a primary ships from
//! ([`StreamSource`]: the oldest position it can resume from, the durable end, keeping the log
//! from releasing what the secondary lacks, and the next chunk of engine records after a
//! position), with its two implementations: a standalone queue manager's own ring
//! ([`RingSource`], positions are log LSNs) and an HA group's committed Raft entries
//! ([`RaftSource`], positions are Raft indexes). The session (hello, resynchronisation, full
//! copy, acknowledgements), the lag gate and the secondary's applying stay in the server, which
//! wires them to the engine.

pub mod source;
pub mod wire;

pub use source::{RaftSource, RingSource, StreamSource, Unit};
