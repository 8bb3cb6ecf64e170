//! A message as the engine holds it: immutable content shared by `Arc` (so a checkpoint, a
//! delivery and a queue can all hold it without copying the body), plus where it lives on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ferrymq_types::{MessageDescriptor, Properties};

/// A log sequence number: the end position of a recovery-log record.
pub type Lsn = u64;

/// The stored content of one message. The descriptor's backout count here is the count at put
/// time; the live count is kept beside the message on its queue.
#[derive(Debug)]
pub struct Message {
    /// Queue-manager-wide sequence number given at put: the message's identity in the log and its
    /// FIFO position on a queue.
    pub seq: u64,
    pub md: MessageDescriptor,
    pub props: Properties,
    pub body: Bytes,
    pub persistent: bool,
    /// 0..=9 after resolving MQPRI_PRIORITY_AS_Q_DEF.
    pub priority: u8,
    /// Absolute expiry time (ms since the Unix epoch), if the message expires.
    pub expires_at_ms: Option<u64>,
    /// The log record that made this message durable (0 for non-persistent or recovered ones).
    /// A reply that reveals the message waits until the log is durable to here.
    put_lsn: AtomicU64,
    /// Packed location in the message store once a checkpoint has copied it there (0 = not yet).
    store_loc: AtomicU64,
}

impl Message {
    pub fn new(
        seq: u64,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        expires_at_ms: Option<u64>,
        put_lsn: Lsn,
    ) -> Message {
        let persistent = md.persistence == ferrymq_types::Persistence::Persistent;
        let priority = md.priority.clamp(0, 9) as u8;
        Message {
            seq,
            md,
            props,
            body,
            persistent,
            priority,
            expires_at_ms,
            put_lsn: AtomicU64::new(put_lsn),
            store_loc: AtomicU64::new(0),
        }
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|t| now_ms >= t)
    }

    pub fn put_lsn(&self) -> Lsn {
        self.put_lsn.load(Ordering::Acquire)
    }

    /// Set when the record that makes the message durable is known (a commit of a unit of work).
    pub fn set_put_lsn(&self, lsn: Lsn) {
        self.put_lsn.store(lsn, Ordering::Release);
    }

    pub fn store_loc(&self) -> u64 {
        self.store_loc.load(Ordering::Acquire)
    }

    /// Recorded by the checkpointer once the message is durable in the message store.
    pub fn set_store_loc(&self, loc: u64) {
        self.store_loc.store(loc, Ordering::Release);
    }

    /// A copy of this message under a new sequence number (a move to another queue).
    pub fn renumbered(&self, seq: u64, put_lsn: Lsn) -> Message {
        Message::new(
            seq,
            self.md.clone(),
            self.props.clone(),
            self.body.clone(),
            self.expires_at_ms,
            put_lsn,
        )
    }
}

/// A message on a queue with its live backout count.
#[derive(Debug, Clone)]
pub struct Entry {
    pub msg: Arc<Message>,
    pub backout_count: u32,
}
