//! FerryMQ's native Rust client: this crate owns the application side of the native protocol —
//! connecting by queue manager name (bindings mode, over the queue manager's Unix socket) or by
//! connection name list (client mode, over TCP), conversations sharing a socket (SHARECNV), every
//! MQI verb (open, close, put, put1, get, commit, backout, inquire, set, admin), asynchronous consume
//! with flow control ([`Connection::consume`], MQ's MQCB; [`blocking::Connection::consume_with`]
//! runs a function per message), pipelining (a put and its commit in one
//! write), heartbeats in both directions and automatic reconnect (MQCNO_RECONNECT)
//! with stable object handles. The API is async on tokio ([`Connection`]); [`blocking::Connection`]
//! wraps it for threads that do not run an async runtime. Each socket has a reader and a writer
//! task; calls wait for their own answer, so any number of calls may be outstanding at once.
//!
//! Puts follow MQ's put options: [`PutOptions::default()`] is MQPMO_DEFAULT, without
//! MQPMO_NEW_MSG_ID, so the descriptor's MsgId is kept (set `new_msg_id: true` for a fresh one;
//! an all-zero MsgId is always replaced by a generated one). Every put returns the MsgId and
//! CorrelId the message was given. A get returns the descriptor with Expiry counted down: the time
//! left, in tenths of a second.

mod callback;
mod conn;
mod options;
mod socket;

pub mod blocking;
pub mod progress;

/// The dead-letter header (MQDLH) in front of messages the queue manager puts to the
/// dead-letter queue: [`dlh::DeadLetterHeader::parse`] splits a got message's body into the
/// header and the original message.
pub mod dlh {
    pub use ferrymq_types::dlh::*;
}

use bytes::Bytes;
use ferrymq_types::{MessageDescriptor, Properties};

pub use callback::{CallbackConsumer, Flow};
pub use conn::{
    unique_id, AsyncPutStatus, Connection, Consumer, Subscription, SubscriptionOptions,
};
pub use ferrymq_security::tls::{CertNames, TlsSession};
pub use options::{
    bindings_socket_path, ferrymq_home, parse_conn_name, ConnectOptions, Reconnect, TlsOptions,
    Transport, CONNECT_TIMEOUT_DEFAULT, DEFAULT_CHANNEL, DEFAULT_PORT,
};

// Re-exported so that an application needs only this crate for the values its calls take.
pub use ferrymq_types::options::{
    close, feedback, open, pmo, report, sub, Browse, GetOptions, PutOptions, Syncpoint, Wait,
};
pub use ferrymq_types::{MqError, MsgId, Persistence, PropertyValue, Reason};

/// An open object (MQ `hObj`). The number is the client's own: it stays valid across a reconnect,
/// whatever handle the queue manager gives the reopened object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectHandle {
    pub hobj: u32,
    /// The resolved name: for a dynamic queue, the name the queue manager generated.
    pub name: String,
}

/// A message returned by [`Connection::get`] or [`Consumer::next`].
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub md: MessageDescriptor,
    pub props: Properties,
    pub body: Bytes,
    /// Length of the whole message on the queue; more than `body.len()` when truncated.
    pub data_len: u32,
    /// Only the first `body.len()` bytes were returned (TRUNCATED_MSG_ACCEPTED).
    pub truncated: bool,
}
