//! FerryMQ's performance tooling: an equivalent of IBM's MQ-CPH (`ferrymq-bench cph`) with the
//! Requester, Responder, PutGet, Sender and Receiver modules, counting the Request/Responder
//! workload exactly as the seed reports count it (see docs/internals/wire.md, "The hot path and what it
//! costs"), measuring the queue manager's and its own CPU from /proc, and latency with HDR
//! histograms. The report generator that sweeps these workloads into the reports' tables builds on
//! it.

pub mod chart;
pub mod cli;
pub mod cph;
pub mod cpu;
/// The progress display lives in the client crate, which the product binary uses too.
pub use ferrymq_client::progress;
pub mod qm;
pub mod report;
pub mod report_channels;
pub mod report_connections;
pub mod report_dr;
pub mod report_ha;
pub mod report_mft;
pub mod report_pubsub;
mod report_rtt;
mod report_security;
pub mod run_info;
