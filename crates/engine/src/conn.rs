//! Connection-scoped state: open handles, the browse cursor of each handle, and the unit of work
//! the connection has in progress.

use std::sync::Arc;

use ahash::AHashMap;
use ferrymq_types::options::GetOptions;

use crate::message::Entry;
use crate::queue::Key;

/// Identifies one connection (one MQCONN; several may share a socket).
pub type ConnId = u64;

/// An open object handle (MQHOBJ).
#[derive(Debug, Clone)]
pub struct Handle {
    /// The local queue messages go to or come from (an alias is resolved at open).
    pub queue: String,
    /// The name the application opened (an alias name, or the queue itself).
    pub opened_name: String,
    /// The alias opened, if any: its PUT/GET inhibit applies too.
    pub alias: Option<String>,
    pub options: u32,
    pub browse_cursor: Option<Key>,
    /// This handle created a temporary dynamic queue: closing it deletes the queue.
    pub owns_temporary: bool,
    /// Where puts and gets in logical order stand in a group or segmented message.
    pub groups: crate::group::HandleGroups,
    /// Opened with MQOO_SAVE_ALL_CONTEXT: the context of the last message got through it, for
    /// a put that passes it on (MQPMO_PASS_IDENTITY_CONTEXT, MQPMO_PASS_ALL_CONTEXT).
    pub saved_context: Option<Box<Context>>,
    /// The handle leads to another queue manager: `queue` is the transmission queue, and each
    /// put carries this destination in a transmission header.
    pub remote: Option<Box<RemoteDest>>,
    /// A topic opened for publishing: puts through the handle are publications on this
    /// (full) topic string, and `queue` is empty.
    pub topic: Option<Arc<str>>,
    /// Publications made through the handle and when the last was (ms since the epoch; 0:
    /// none), for DISPLAY TPSTATUS TYPE(PUB) (NUMPUBS, LPUBDATE, LPUBTIME).
    pub publications: u64,
    pub last_publication_ms: u64,
}

/// Where a message put through a remote queue definition (or with another queue manager's name)
/// is going: the queue and queue manager its transmission header names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteDest {
    pub remote_q: String,
    pub remote_qmgr: String,
}

/// A message's context: identity (who) and origin (which program, when).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub user_id: String,
    pub appl_identity: String,
    pub put_appl_name: String,
    pub put_time_ms: u64,
}

/// Work done under syncpoint and not yet committed.
#[derive(Debug, Default)]
pub struct Uow {
    /// Messages put: invisible until commit, inserted at their keys then.
    pub puts: Vec<(String, Key, Entry)>,
    /// Messages got: removed from their queue, restored at their keys on backout.
    pub gets: Vec<(String, Key, Entry)>,
}

impl Uow {
    pub fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.gets.is_empty()
    }

    pub fn len(&self) -> usize {
        self.puts.len() + self.gets.len()
    }
}

/// An asynchronous consumer (MQCB) on one handle: the server pushes a message per credit.
#[derive(Debug, Clone)]
pub struct Consumer {
    /// The registration's request id: every delivery carries it.
    pub token: u64,
    pub opts: GetOptions,
    /// Messages the application has allowed the server to push and not yet received.
    pub credit: u32,
    /// The waiter standing in for this consumer while no message matches.
    pub waiter: Option<u64>,
}

#[derive(Debug)]
pub struct Conn {
    pub id: ConnId,
    pub user: String,
    pub app: String,
    /// `user` and `app` cut once, when the connection is made, to MQ's UserIdentifier and
    /// PutApplName widths: the context every default put writes into its message.
    pub ctx_user: String,
    pub ctx_app: String,
    /// Boxed, so that the table's spare slots are a pointer wide, not a `Handle`.
    pub handles: AHashMap<u32, Box<Handle>>,
    pub next_hobj: u32,
    pub max_handles: u32,
    pub uow: Uow,
    /// The get this connection is waiting in, if any: a connection makes one call at a time.
    pub waiting: Option<u64>,
    /// Asynchronous consumers by object handle.
    pub consumers: AHashMap<u32, Consumer>,
    /// Subscription handles (MQSUB's Hsub), numbered with the object handles.
    pub subs: AHashMap<u32, crate::pubsub::SubHandle>,
}

impl Conn {
    pub fn new(id: ConnId, user: String, app: String, max_handles: u32) -> Conn {
        Conn {
            id,
            ctx_user: crate::put::cut(&user, ferrymq_types::limits::USER_ID_LEN_MAX),
            ctx_app: crate::put::cut(&app, ferrymq_types::limits::PUT_APPL_NAME_LEN_MAX),
            user,
            app,
            handles: AHashMap::new(),
            next_hobj: 1,
            max_handles,
            uow: Uow::default(),
            waiting: None,
            consumers: AHashMap::new(),
            subs: AHashMap::new(),
        }
    }
}
