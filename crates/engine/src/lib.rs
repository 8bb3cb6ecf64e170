//! The queue engine: the state of one queue manager (objects, queues, messages, connections, open
//! handles, units of work and waiting getters) and the MQI verbs that change it. It is a
//! deterministic state machine with no I/O, no threads and no clock of its own: callers pass the
//! time in, and every durable change is handed to a [`LogSink`] as one recovery-log record before
//! it becomes visible. Replaying those records (after loading the last checkpoint image) rebuilds
//! the same persistent state, which is what restart, HA replicas and DR sites do.
//!
//! Replies that reveal durable state come with a log position (`wait_lsn`): the server must not send
//! the reply before the log is durable up to it, so an application never keeps a message or an
//! outcome that a crash could take back. A get under syncpoint is answered at once: what the
//! application does with the message stays in its unit of work, whose commit waits for the put's
//! record too (earlier in the one ordered log), so a crash takes both back together.

mod admin;
pub mod batch;
pub mod channel;
pub mod conn;
mod consume;
pub mod dr;
pub mod expiry;
mod get;
pub mod group;
pub mod message;
mod open;
pub mod pubsub;
mod put;
pub mod queue;
pub mod records;
mod recovery;
mod report;
mod set;
mod uow;
pub mod waiters;

use std::collections::BTreeMap;

use ahash::AHashMap;
use bytes::Bytes;
use ferrymq_types::{
    MessageDescriptor, MqError, ObjectDef, ObjectKind, Properties, QmgrAttrs, Reason,
};

pub use admin::{queue_attributes, ConnInfo, HandleInfo, QueueStatus};
pub use conn::ConnId;
pub use message::{Lsn, Message};
pub use put::PutDone;
pub use recovery::{Image, ImageMsg, Manifest, ManifestRef, RefChunks};

use crate::conn::Conn;
use crate::queue::Queue;
use crate::waiters::Waiters;

/// Where the engine writes its recovery-log records. The server implements it over the circular
/// log; tests use [`MemoryLog`].
pub trait LogSink: Send {
    /// Appends one record made of `parts` concatenated; returns the LSN at which it is durable.
    /// An error means nothing was written and the change must not happen.
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError>;

    /// Like [`append`](Self::append), for a record that may wait for the next one to be
    /// written (nobody waits on it alone: the records of a DR chunk before its mark).
    fn append_lazy(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        self.append(kind, parts)
    }
}

/// An in-memory log: records kept in a vector, each "durable" at its index + 1.
#[derive(Debug, Default)]
pub struct MemoryLog {
    pub records: Vec<(u8, Vec<u8>)>,
    /// When set, appends fail with this reason (to test a full or broken log).
    pub fail_with: Option<Reason>,
}

impl LogSink for MemoryLog {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        if let Some(r) = self.fail_with {
            return Err(MqError::new(
                r,
                "the recovery log refused the record (test)",
            ));
        }
        self.records.push((kind, parts.concat()));
        Ok(self.records.len() as Lsn)
    }
}

/// A message handed to an application by a get.
#[derive(Debug, Clone)]
pub struct Got {
    pub md: MessageDescriptor,
    pub props: Properties,
    pub body: Bytes,
    /// The message's full length (larger than `body` when truncated).
    pub data_len: u32,
    /// `NONE`, or `TRUNCATED_MSG_ACCEPTED` when `body` was cut to the caller's buffer.
    pub reason: Reason,
}

/// A reply the engine produced for a get that was waiting.
#[derive(Debug)]
pub struct Delivery {
    pub conn: ConnId,
    pub token: u64,
    pub result: Result<Got, MqError>,
    /// Send only once the log is durable up to here (0: at once).
    pub wait_lsn: Lsn,
}

/// The result of a get: a message now, or a registered wait. (Not boxed: it is returned once per
/// get and moved straight into a response; a box would add an allocation to every get.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum GetOutcome {
    Got(Got, Lsn),
    /// The get waits; its reply will come as a [`Delivery`] with this waiter id, or the caller
    /// cancels it with [`Engine::cancel_wait`] when the wait interval ends.
    Waiting(u64),
}

/// Settings the engine takes from the queue manager's configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub qmgr_name: String,
    /// Open handles per connection (`crtmqm -h`).
    pub max_handles: u32,
    /// Distinguishes this run's generated MsgIds from every other run's.
    pub instance_id: u64,
    /// Whether a backout moves a message that reached its queue's BOTHRESH to BOQNAME (or the
    /// dead-letter queue), or leaves it on its queue with its BackoutCount for the application
    /// to act on, as MQ does (qm.ini `QueueManager:BackoutRequeue`). Only the running queue
    /// manager's backouts depend on it: a move is logged like any commit, so recovery replays
    /// it whatever the setting.
    pub backout_requeue: bool,
    /// Most memory the messages alive in this process may hold ([`message::held_bytes`]); a put
    /// or publication past it is refused with MQRC_STORAGE_NOT_AVAILABLE (qm.ini
    /// `TuningParameters:MaxMessageMemory`; 0: no limit). Only what applications and channels
    /// put is refused: recovery and a replica's replay load what the log holds.
    pub message_memory_max: u64,
}

pub struct Engine {
    cfg: EngineConfig,
    attrs: QmgrAttrs,
    queues: AHashMap<String, Queue>,
    objects: BTreeMap<(ObjectKind, String), ObjectDef>,
    /// Boxed: a map of tens of thousands of connections holds a pointer per slot, not a `Conn`
    /// (the table's spare slots would otherwise each be a `Conn` wide).
    conns: AHashMap<ConnId, Box<Conn>>,
    next_conn: ConnId,
    next_seq: u64,
    id_counter: u64,
    log: Box<dyn LogSink>,
    waiters: Waiters,
    deliveries: Vec<Delivery>,
    dr: dr::DrState,
    /// The end of the last administrative record logged (definitions, deletions, clears, the
    /// queue manager's attributes): what a reply that shows definitions must wait for.
    admin_lsn: Lsn,
    /// Moves whenever an object other than a queue is defined, replaced or deleted (live,
    /// replayed or restored): what a cache built from objects (authority records) compares.
    objects_version: u64,
    /// The time the server last passed in (`note_time`), for records of verbs that take none.
    now_hint_ms: u64,
    /// Non-durable subscriptions, subscriptions in use, and what is derived from the objects.
    pubsub: pubsub::PubSub,
    /// Message channels' synchronisation state (sequence numbers, LUWIDs, batches in doubt).
    channels: channel::ChannelSyncs,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("qmgr", &self.cfg.qmgr_name)
            .field("queues", &self.queues.len())
            .field("conns", &self.conns.len())
            .finish()
    }
}

/// Where a new engine's objects version starts: each engine of the process gets its own range
/// of 2^32 versions, so a cache keyed on the version alone cannot take a replaced engine (an HA
/// instance installing a snapshot) for the one it was built from.
fn first_objects_version() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1 << 32, std::sync::atomic::Ordering::Relaxed)
}

impl Engine {
    /// An engine with no objects (use [`Engine::install_defaults`] for a new queue manager).
    pub fn new(cfg: EngineConfig, log: Box<dyn LogSink>) -> Engine {
        Engine {
            cfg,
            attrs: QmgrAttrs::default(),
            queues: AHashMap::new(),
            objects: BTreeMap::new(),
            conns: AHashMap::new(),
            next_conn: 1,
            next_seq: 1,
            id_counter: 0,
            log,
            waiters: Waiters::default(),
            deliveries: Vec::new(),
            dr: dr::DrState::default(),
            admin_lsn: 0,
            objects_version: first_objects_version(),
            now_hint_ms: 0,
            pubsub: Default::default(),
            channels: Default::default(),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn qmgr_name(&self) -> &str {
        &self.cfg.qmgr_name
    }

    pub fn attrs(&self) -> &QmgrAttrs {
        &self.attrs
    }

    /// Opens a connection (MQCONN).
    pub fn connect(&mut self, user: &str, app: &str) -> ConnId {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Box::new(Conn::new(
                id,
                user.to_string(),
                app.to_string(),
                self.cfg.max_handles,
            )),
        );
        id
    }

    /// Ends a connection the application asked to end (MQDISC): as MQ does for a
    /// queue-manager-coordinated unit of work, uncommitted work is committed (and backed out if the
    /// commit fails, which the error reports); then as [`Engine::disconnect`]. Returns the LSN the
    /// reply must wait for.
    pub fn disconnect_normally(&mut self, conn: ConnId, now_ms: u64) -> Result<Lsn, MqError> {
        let r = self.commit(conn, now_ms);
        self.disconnect(conn, now_ms);
        r
    }

    /// Ends a connection that went away without MQDISC (the socket dropped, the queue manager is
    /// ending): uncommitted work is backed out, handles closed (temporary dynamic queues deleted),
    /// a waiting get cancelled.
    pub fn disconnect(&mut self, conn: ConnId, now_ms: u64) {
        if !self.conns.contains_key(&conn) {
            return;
        }
        if let Some(w) = self.conns.get_mut(&conn).and_then(|c| c.waiting.take()) {
            self.waiters.remove(w);
        }
        // Its consumers end first: the backout makes messages available again, and one of this
        // connection's own consumers must not take them into a unit of work about to vanish.
        let consumers: Vec<u32> = self.conns[&conn].consumers.keys().copied().collect();
        // Its non-durable subscriptions end with it; its durable ones are released.
        self.close_subs_of(conn, now_ms);
        for h in consumers {
            self.cancel_consumer(conn, h);
        }
        // A failed backout log write leaves messages where they are, which is the safe outcome.
        let _ = self.backout(conn, now_ms);
        let hobjs: Vec<u32> = self.conns[&conn].handles.keys().copied().collect();
        for h in hobjs {
            let _ = self.close(conn, h, ferrymq_types::options::close::NONE, now_ms);
        }
        self.conns.remove(&conn);
    }

    /// Drains the replies produced for waiting gets since the last call.
    pub fn take_deliveries(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.deliveries)
    }

    /// Whether replies for waiting gets are pending (cheap check before draining).
    pub fn has_deliveries(&self) -> bool {
        !self.deliveries.is_empty()
    }

    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    fn conn_mut(&mut self, conn: ConnId) -> Result<&mut Conn, MqError> {
        self.conns.get_mut(&conn).map(|c| &mut **c).ok_or_else(|| {
            MqError::new(
                Reason::HCONN_ERROR,
                format!("connection {conn} is not connected"),
            )
        })
    }

    /// The name a connection's handle was opened with (a queue, an alias, a topic string), for
    /// reports about it; None when the handle is not open.
    pub fn handle_name(&self, conn: ConnId, hobj: u32) -> Option<String> {
        self.handle(conn, hobj).ok().map(|h| h.opened_name.clone())
    }

    /// The open handle `hobj` of a connection, or the MQ reason saying which of the two is wrong.
    fn handle(&self, conn: ConnId, hobj: u32) -> Result<&conn::Handle, MqError> {
        let c = self.conns.get(&conn).ok_or_else(|| {
            MqError::new(
                Reason::HCONN_ERROR,
                format!("connection {conn} is not connected"),
            )
        })?;
        c.handles.get(&hobj).map(|h| &**h).ok_or_else(|| {
            MqError::new(
                Reason::HOBJ_ERROR,
                format!("object handle {hobj} is not open on this connection"),
            )
        })
    }

    /// A fresh, unique 24-byte identifier: "FMQ", the run's instance id and a counter.
    fn new_id(&mut self) -> [u8; 24] {
        self.id_counter += 1;
        let mut id = [0u8; 24];
        id[..4].copy_from_slice(b"FMQ\x01");
        id[4..12].copy_from_slice(&self.cfg.instance_id.to_be_bytes());
        id[12..20].copy_from_slice(&self.id_counter.to_be_bytes());
        id
    }

    fn alloc_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }
}
