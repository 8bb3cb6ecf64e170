//! The queue manager server: wiring only. It owns the runtime, the listeners (Unix socket for
//! bindings mode, TCP for client mode), one task per socket that turns frames into engine calls,
//! the durability gate that holds each reply until the log is durable up to what it reveals, the
//! background checkpointer, restart from storage, and orderly or immediate shutdown; an HA
//! instance's side of replication (`ha`) and disaster recovery's log shipping (`dr`). Queue
//! semantics live in `ferrymq-engine`, bytes on disk in `ferrymq-log`, bytes on the wire in
//! `ferrymq-proto`.

mod admin_ops;
mod async_put;
mod authz;
mod autoconfig;
mod channels;
pub mod config;
mod conn;
mod connsec;
mod core;
mod dispatch;
pub mod dr;
pub mod errlog;
mod expiry;
mod fdlimit;
pub mod ha;
mod inbound;
mod listeners;
mod memory_watch;
pub use ferrymq_log::lsn;
pub mod metrics;
pub mod qmgr;
mod qpubsub;
pub mod security;
pub mod storage;
mod wait_timer;
mod wake_latency;

pub use config::{ferrymq_home, Ini, QmConfig, QmPaths};
pub use qmgr::{create_storage, create_storage_with, dr_recovered_mark, run};
