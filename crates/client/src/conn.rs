//! [`Connection`]: one conversation (MQCONN) and every MQI verb on it, with the bookkeeping that
//! automatic reconnect needs — the application's stable object handles mapped to the queue
//! manager's current ones, and whether a unit of work was lost with the old socket.
//!
//! With reconnect enabled, a call that meets a broken socket waits for the reconnect and then:
//! goes out on the new socket if it had not been sent; is sent again if it was in flight and
//! repeating it is harmless or meant (open, inquire, a get with a wait); fails with BACKED_OUT if
//! it was in flight under syncpoint (the unit of work died with the socket, whatever became of
//! the call); succeeds if it was a backout; and otherwise fails with CALL_INTERRUPTED, since
//! whether it took effect is unknown. After a break that lost a unit of work, syncpoint calls
//! and the commit fail with BACKED_OUT until a commit or backout clears it. Reconnecting is
//! driven by calls: a conversation nobody uses notices its broken socket at its next call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ferrymq_proto::{frame_limit_for, Request, Response};
use ferrymq_types::options::{Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, MsgId, Properties, Reason};
use parking_lot::Mutex;

use crate::options::ConnectOptions;
use crate::socket::{CallError, Pool, Socket};
use crate::{Message, ObjectHandle};

mod async_put;
mod consumer;
mod pubsub;
mod reconnect;

pub use async_put::AsyncPutStatus;
pub use consumer::Consumer;
pub use pubsub::{Subscription, SubscriptionOptions};

/// A handle to one conversation with a queue manager (an MQ `hConn`). Clones share the
/// conversation; it ends with [`Connection::disconnect`] or when the last clone is dropped.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Conv>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.inner.bind.lock();
        f.debug_struct("Connection")
            .field("qmgr", &self.inner.qmgr_name)
            .field("endpoint", &b.socket.endpoint)
            .field("conv", &b.conv)
            .finish()
    }
}

#[derive(Clone)]
struct Binding {
    socket: Arc<Socket>,
    conv: u16,
    /// Bumped by every reconnect, so concurrent callers that saw the same break reconnect once.
    generation: u64,
}

struct HandleState {
    /// The queue manager's handle on the current socket.
    server: u32,
    /// What to send to open it again after a reconnect.
    open_name: String,
    /// The queue manager named at open (MQOD ObjectQMgrName); empty for this one.
    open_qmgr: String,
    dynamic_name: String,
    options: u32,
    /// Set when a reconnect could not open the object again; every use reports it.
    lost: Option<MqError>,
    /// How a reconnect opens it again.
    reopen: Reopen,
    /// The object's DEFPRESP is ASYNC: puts asking for its default go unanswered.
    async_default: bool,
}

/// How a handle is opened again on a new socket.
#[derive(Clone)]
enum Reopen {
    /// MQOPEN of `open_name` with the handle's options.
    Open,
    /// MQOPEN of a topic for publishing.
    Topic { object: String, topic: String },
    /// Not at all: a subscription handle (and its queue's) ends with the socket; a durable
    /// subscription is resumed by name, anew.
    Never,
}

#[derive(Default)]
struct Handles {
    next: u32,
    map: HashMap<u32, HandleState>,
}

#[derive(Default)]
struct Uow {
    /// A syncpoint operation succeeded since the last commit or backout.
    in_progress: bool,
    /// The unit of work died with a socket; the next commit reports BACKED_OUT.
    lost: bool,
}

/// How a request relates to the conversation's unit of work.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    /// Joins the unit of work (a put or get under syncpoint).
    Join,
    /// Ends it: commit, or a put followed by a commit.
    Commit,
    Backout,
}

/// A 24-byte identifier unique to this process run: "FMQC", a random per-run prefix and a
/// counter. Applications that set their own MsgId (to match replies by it) use this.
pub fn unique_id() -> MsgId {
    static PREFIX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut z = (t as u64) ^ ((std::process::id() as u64) << 40) ^ 0x9E37_79B9_7F4A_7C15;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
    let mut id = [0u8; 24];
    id[..4].copy_from_slice(b"FMQC");
    id[4..12].copy_from_slice(&prefix.to_be_bytes());
    id[12..20].copy_from_slice(&n.to_be_bytes());
    id
}

struct Conv {
    pool: Arc<Pool>,
    qmgr_name: String,
    connect_req: Request,
    bind: Mutex<Binding>,
    handles: Mutex<Handles>,
    consumers: Mutex<consumer::Consumers>,
    uow: Mutex<Uow>,
    // Async because reconnecting awaits I/O; serializes reconnects of this conversation.
    reconnect_lock: tokio::sync::Mutex<()>,
    /// Set by disconnect (HCONN_ERROR) or a failed reconnect (RECONNECT_FAILED): every later call
    /// fails with it.
    dead: Mutex<Option<MqError>>,
    reconnects: AtomicU64,
    /// Asynchronous puts outside syncpoint not yet counted by an answered MQSTAT, by binding.
    async_puts: Mutex<async_put::Ledger>,
}

impl Drop for Conv {
    fn drop(&mut self) {
        if self.dead.lock().is_some() {
            return;
        }
        // The application dropped its last handle without disconnecting: as MQ does for an
        // application that ends without MQDISC, back out its unit of work, then end the
        // conversation (an explicit Disconnect would commit), without waiting for the answers.
        let b = self.bind.lock();
        if !b.socket.is_broken() {
            b.socket.send_oneway(b.conv, &Request::Backout);
            b.socket.send_oneway(b.conv, &Request::Disconnect);
            b.socket.release_conv(b.conv);
        }
    }
}

fn unexpected(what: &str, r: &Response) -> MqError {
    MqError::new(
        Reason::UNEXPECTED_ERROR,
        format!("the queue manager answered {what} with {}", r.name()),
    )
}

/// Success for calls answered by a bare status.
fn status(what: &str, r: Response) -> Result<(), MqError> {
    match r {
        Response::Status {
            reason: Reason::NONE,
            ..
        } => Ok(()),
        other => Err(failure(what, other)),
    }
}

/// The error a non-success answer stands for.
fn failure(what: &str, r: Response) -> MqError {
    match r {
        Response::Status { reason, message } if reason != Reason::NONE => {
            MqError::new(reason, message)
        }
        other => unexpected(what, &other),
    }
}

fn backed_out() -> MqError {
    MqError::new(
        Reason::BACKED_OUT,
        "the unit of work was backed out when the connection to the queue manager was lost; redo its work and commit again",
    )
}

/// Requests sent again on the new socket when the old one broke with them in flight: their effect
/// died with the old conversation (an open, an inquire), or the application asked to wait for a
/// message and a new wait is what it meant (a message handed out just as the socket broke is lost,
/// as with MQ; under syncpoint it went back to the queue with the backed-out unit of work).
fn is_reissuable(r: &Request) -> bool {
    match r {
        Request::Get { opts, .. } => opts.wait != Wait::NoWait,
        // MQSTAT only reads (and resets) counts, which a reconnect lost anyway: the client's
        // ledger of asynchronous puts makes up for them.
        Request::Open { .. }
        | Request::OpenTopic { .. }
        | Request::Inquire { .. }
        | Request::Stat { .. } => true,
        _ => false,
    }
}

impl Connection {
    /// Connects to the queue manager `opts` names (MQCONNX). Must be called inside a tokio runtime,
    /// which then runs the socket's tasks.
    pub async fn connect(opts: ConnectOptions) -> Result<Connection, MqError> {
        let pool = Arc::new(Pool::new(opts)?);
        Connection::start(pool).await
    }

    /// Opens a new conversation drawn from `pool`.
    async fn start(pool: Arc<Pool>) -> Result<Connection, MqError> {
        let o = &pool.opts;
        let connect_req = Request::Connect {
            qmgr: o.qmgr.clone(),
            user: asserted_user(&o.user),
            password: o.password.clone(),
            app_name: o.app_name.clone(),
        };
        let (socket, conv) = pool.claim(None).await?;
        let r = socket
            .call(conv, &connect_req)
            .await
            .map_err(CallError::into_error)
            .and_then(|r| status("Connect", r));
        if let Err(e) = r {
            socket.release_conv(conv);
            return Err(e);
        }
        let qmgr_name = socket.params.qmgr_name.clone();
        Ok(Connection {
            inner: Arc::new(Conv {
                pool,
                qmgr_name,
                connect_req,
                bind: Mutex::new(Binding {
                    socket,
                    conv,
                    generation: 0,
                }),
                handles: Mutex::new(Handles::default()),
                consumers: Mutex::new(consumer::Consumers::default()),
                uow: Mutex::new(Uow::default()),
                reconnect_lock: tokio::sync::Mutex::new(()),
                dead: Mutex::new(None),
                reconnects: AtomicU64::new(0),
                async_puts: Mutex::new(async_put::Ledger::default()),
            }),
        })
    }

    /// A new conversation on the same socket (SHARECNV), or a new socket when the negotiated
    /// sharecnv is used up. It is independent: its own unit of work and object handles.
    pub async fn share(&self) -> Result<Connection, MqError> {
        self.inner.check_alive()?;
        Connection::start(self.inner.pool.clone()).await
    }

    /// The name of the queue manager connected to.
    pub fn qmgr_name(&self) -> &str {
        &self.inner.qmgr_name
    }

    /// What TLS negotiated on the current socket and the queue manager's certificate (None: a
    /// plain or bindings connection).
    pub fn tls_session(&self) -> Option<ferrymq_security::tls::TlsSession> {
        self.inner.bind.lock().socket.tls.clone()
    }

    /// The negotiated largest message length.
    pub fn max_msg_len(&self) -> u32 {
        self.inner.bind.lock().socket.params.max_msg_len
    }

    /// The negotiated heartbeat interval (0 = none).
    pub fn heartbeat_ms(&self) -> u32 {
        self.inner.bind.lock().socket.params.heartbeat_ms
    }

    /// How many times this conversation has been reconnected.
    pub fn reconnects(&self) -> u64 {
        self.inner.reconnects.load(Ordering::Relaxed)
    }

    /// Opens a queue (or other object) with MQOO_* `options`.
    pub async fn open(&self, name: &str, options: u32) -> Result<ObjectHandle, MqError> {
        self.open_object(name, "", "", options).await
    }

    /// Opens queue `name` of queue manager `qmgr` (MQOD's ObjectQMgrName): another queue
    /// manager's queue is reached through a transmission queue, to put to it.
    pub async fn open_qmgr(
        &self,
        name: &str,
        qmgr: &str,
        options: u32,
    ) -> Result<ObjectHandle, MqError> {
        self.open_object(name, qmgr, "", options).await
    }

    /// Opens a model queue, creating a dynamic queue named after `dynamic_name` (`*` completes a
    /// prefix); the handle's `name` is the created queue's.
    pub async fn open_dynamic(
        &self,
        model: &str,
        dynamic_name: &str,
        options: u32,
    ) -> Result<ObjectHandle, MqError> {
        self.open_object(model, "", dynamic_name, options).await
    }

    async fn open_object(
        &self,
        name: &str,
        qmgr: &str,
        dynamic_name: &str,
        options: u32,
    ) -> Result<ObjectHandle, MqError> {
        let req = Request::Open {
            name: name.to_string(),
            qmgr: qmgr.to_string(),
            options,
            dynamic_name: dynamic_name.to_string(),
        };
        match self.inner.call1(req, Role::Plain).await? {
            Response::Opened {
                hobj,
                name: resolved,
                async_default,
            } => {
                let mut h = self.inner.handles.lock();
                h.next += 1;
                let id = h.next;
                // A reopen after a reconnect targets the resolved name, so that a dynamic queue
                // is found again (or recreated under the same name) instead of a new one made.
                let (open_name, dynamic_name) = if dynamic_name.is_empty() {
                    (name.to_string(), String::new())
                } else {
                    (resolved.clone(), String::new())
                };
                h.map.insert(
                    id,
                    HandleState {
                        server: hobj,
                        open_name,
                        open_qmgr: qmgr.to_string(),
                        dynamic_name,
                        options,
                        lost: None,
                        reopen: Reopen::Open,
                        async_default,
                    },
                );
                Ok(ObjectHandle {
                    hobj: id,
                    name: resolved,
                })
            }
            other => Err(failure("Open", other)),
        }
    }

    /// Closes a handle with MQCO_* `options`.
    pub async fn close(&self, h: &ObjectHandle, options: u32) -> Result<(), MqError> {
        let req = Request::Close {
            hobj: h.hobj,
            options,
        };
        status("Close", self.inner.call1(req, Role::Plain).await?)?;
        self.inner.handles.lock().map.remove(&h.hobj);
        self.inner.end_consumer(
            h.hobj,
            MqError::new(Reason::HOBJ_ERROR, "the object handle was closed"),
        );
        Ok(())
    }

    /// Puts a message (MQPUT); returns the (msg_id, correl_id) it was given. As in MQ, the
    /// descriptor's MsgId is kept unless `opts.new_msg_id` (MQPMO_NEW_MSG_ID) asks for a fresh
    /// one or it is all zeros (then one is generated); the default options keep it.
    pub async fn put(
        &self,
        h: &ObjectHandle,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(MsgId, MsgId), MqError> {
        let req = Request::Put {
            hobj: h.hobj,
            opts: opts.clone(),
            md: md.clone(),
            props: props.clone(),
            body,
        };
        if self.put_is_async(Some(h.hobj), opts) {
            return self.put_unanswered(req).await;
        }
        self.put_request(req, opts.syncpoint).await
    }

    /// Opens `queue`, puts one message and closes it, in one call (MQPUT1). The MsgId is kept
    /// or generated as for [`Connection::put`].
    pub async fn put1(
        &self,
        queue: &str,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(MsgId, MsgId), MqError> {
        let req = Request::Put1 {
            name: queue.to_string(),
            qmgr: String::new(),
            opts: opts.clone(),
            md: md.clone(),
            props: props.clone(),
            body,
        };
        if self.put_is_async(None, opts) {
            return self.put_unanswered(req).await;
        }
        self.put_request(req, opts.syncpoint).await
    }

    /// Puts a message as MQPUT does with its descriptor in and out: `md` receives the MsgId and
    /// CorrelId the message was given and, for a put in logical order
    /// (`opts.logical_order`), the GroupId, MsgSeqNumber and Offset the queue manager assigned.
    pub async fn put_md(
        &self,
        h: &ObjectHandle,
        md: &mut MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(), MqError> {
        let req = Request::Put {
            hobj: h.hobj,
            opts: opts.clone(),
            md: md.clone(),
            props: props.clone(),
            body,
        };
        if self.put_is_async(Some(h.hobj), opts) {
            // The queue manager's answer would carry the group fields; an unanswered put
            // leaves them as they were.
            let (msg_id, correl_id) = self.put_unanswered(req).await?;
            md.msg_id = msg_id;
            md.correl_id = correl_id;
            return Ok(());
        }
        let (msg_id, correl_id, group) = self.put_request_full(req, opts.syncpoint).await?;
        md.msg_id = msg_id;
        md.correl_id = correl_id;
        if let Some(g) = group {
            md.group_id = g.group_id;
            md.msg_seq_number = g.msg_seq_number;
            md.offset = g.offset;
        }
        Ok(())
    }

    async fn put_request(&self, req: Request, sp: Syncpoint) -> Result<(MsgId, MsgId), MqError> {
        let (msg_id, correl_id, _) = self.put_request_full(req, sp).await?;
        Ok((msg_id, correl_id))
    }

    async fn put_request_full(
        &self,
        req: Request,
        sp: Syncpoint,
    ) -> Result<(MsgId, MsgId, Option<ferrymq_proto::PutGroup>), MqError> {
        let role = if sp == Syncpoint::No {
            Role::Plain
        } else {
            Role::Join
        };
        match self.inner.call1(req, role).await? {
            Response::PutOk {
                msg_id,
                correl_id,
                group,
            } => {
                self.inner.joined(role);
                Ok((msg_id, correl_id, group))
            }
            other => Err(failure("Put", other)),
        }
    }

    /// Puts under syncpoint and commits, written as one write (pipelined) so the pair costs one
    /// round trip; returns after both answers. The commit ends the whole unit of work, including
    /// earlier syncpoint operations; if the put fails its error is returned (the commit then
    /// commits only that earlier work).
    pub async fn put_commit(
        &self,
        h: &ObjectHandle,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
    ) -> Result<(MsgId, MsgId), MqError> {
        let put = Request::Put {
            hobj: h.hobj,
            opts: PutOptions {
                syncpoint: Syncpoint::Yes,
                ..PutOptions::default()
            },
            md: md.clone(),
            props: props.clone(),
            body,
        };
        let mut answers = self
            .inner
            .call(vec![put, Request::Commit], Role::Commit)
            .await?
            .into_iter();
        let (Some(put), Some(commit)) = (answers.next(), answers.next()) else {
            return Err(backed_out());
        };
        let ids = match put {
            Response::PutOk {
                msg_id, correl_id, ..
            } => (msg_id, correl_id),
            other => return Err(failure("Put", other)),
        };
        status("Commit", commit)?;
        Ok(ids)
    }

    /// Puts a message under syncpoint, commits, and gets a message — three requests in one write,
    /// answered in order. A requester gives the request a MsgId of its own ([`unique_id`]) and
    /// gets the reply by that CorrelId; a responder sends its reply together with the get of its
    /// next request. A put keeps `md.msg_id` unless it is all zeros. If the put fails, the commit
    /// still commits earlier syncpoint work and the get still runs; the put's error is returned.
    #[allow(clippy::too_many_arguments)]
    pub async fn put_commit_get(
        &self,
        put_h: &ObjectHandle,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        get_h: &ObjectHandle,
        get_opts: &GetOptions,
    ) -> Result<((MsgId, MsgId), Message), MqError> {
        let put = Request::Put {
            hobj: put_h.hobj,
            opts: PutOptions {
                syncpoint: Syncpoint::Yes,
                new_msg_id: md.msg_id == [0u8; 24],
                ..PutOptions::default()
            },
            md: md.clone(),
            props: props.clone(),
            body,
        };
        let get = Request::Get {
            hobj: get_h.hobj,
            opts: get_opts.clone(),
        };
        let mut answers = self
            .inner
            .call(vec![put, Request::Commit, get], Role::Commit)
            .await?
            .into_iter();
        let (Some(put), Some(commit), Some(got)) = (answers.next(), answers.next(), answers.next())
        else {
            return Err(backed_out());
        };
        let ids = match put {
            Response::PutOk {
                msg_id, correl_id, ..
            } => (msg_id, correl_id),
            other => return Err(failure("Put", other)),
        };
        status("Commit", commit)?;
        match got {
            Response::Message {
                reason,
                data_len,
                md,
                props,
                body,
            } => {
                if get_opts.syncpoint != Syncpoint::No {
                    self.inner.joined(Role::Join);
                }
                Ok((
                    ids,
                    Message {
                        md,
                        props,
                        body,
                        data_len,
                        truncated: reason == Reason::TRUNCATED_MSG_ACCEPTED,
                    },
                ))
            }
            other => Err(failure("Get", other)),
        }
    }

    /// Gets (or browses) a message. A truncated message accepted by
    /// `accept_truncated` is returned with `truncated = true`.
    ///
    /// Dropping the future of a get that waits does not cancel the wait on the queue manager: a
    /// message it then delivers is discarded (or, under syncpoint, stays in the unit of work).
    pub async fn get(&self, h: &ObjectHandle, opts: &GetOptions) -> Result<Message, MqError> {
        let role = if opts.syncpoint == Syncpoint::No || opts.browse != Browse::No {
            Role::Plain
        } else {
            Role::Join
        };
        let req = Request::Get {
            hobj: h.hobj,
            opts: opts.clone(),
        };
        match self.inner.call1(req, role).await? {
            Response::Message {
                reason,
                data_len,
                md,
                props,
                body,
            } => {
                self.inner.joined(role);
                Ok(Message {
                    md,
                    props,
                    body,
                    data_len,
                    truncated: reason == Reason::TRUNCATED_MSG_ACCEPTED,
                })
            }
            other => Err(failure("Get", other)),
        }
    }

    /// Commits the unit of work. BACKED_OUT when it was lost with a broken connection.
    pub async fn commit(&self) -> Result<(), MqError> {
        let mut r = self.inner.call(vec![Request::Commit], Role::Commit).await?;
        match r.pop() {
            Some(r) => status("Commit", r),
            None => Err(backed_out()),
        }
    }

    /// Backs out the unit of work.
    pub async fn backout(&self) -> Result<(), MqError> {
        let mut r = self
            .inner
            .call(vec![Request::Backout], Role::Backout)
            .await?;
        match r.pop() {
            Some(r) => status("Backout", r),
            // Lost with the socket: already backed out.
            None => Ok(()),
        }
    }

    /// Inquires attributes of an open object by name (e.g. `CURDEPTH`).
    pub async fn inquire(
        &self,
        h: &ObjectHandle,
        selectors: &[&str],
    ) -> Result<Vec<(String, String)>, MqError> {
        let req = Request::Inquire {
            hobj: h.hobj,
            selectors: selectors.iter().map(|s| s.to_string()).collect(),
        };
        match self.inner.call1(req, Role::Plain).await? {
            Response::InquireReply { attrs } => Ok(attrs),
            other => Err(failure("Inquire", other)),
        }
    }

    /// Sets attributes of an open queue (MQSET), named by their MQSC keywords: GET, PUT,
    /// TRIGGER, TRIGTYPE, TRIGDPTH, TRIGMPRI, TRIGDATA, e.g. `[("GET", "DISABLED")]`. The queue
    /// must be open with MQOO_SET. The change is durable, like an ALTER.
    pub async fn set(&self, h: &ObjectHandle, attrs: &[(&str, &str)]) -> Result<(), MqError> {
        let req = Request::Set {
            hobj: h.hobj,
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        status("Set", self.inner.call1(req, Role::Plain).await?)
    }

    /// Runs an administrative command and returns its output.
    pub async fn admin(&self, command: &str) -> Result<String, MqError> {
        let req = Request::Admin {
            command: command.to_string(),
        };
        match self.inner.call1(req, Role::Plain).await? {
            Response::AdminReply {
                text,
                reason: Reason::NONE,
            } => Ok(text),
            Response::AdminReply { text, reason } => Err(MqError::new(reason, text)),
            other => Err(failure("Admin", other)),
        }
    }

    /// Ends the conversation (MQDISC); the queue manager backs out uncommitted work. Other clones
    /// of this handle then fail with HCONN_ERROR. A conversation whose socket already broke is
    /// simply forgotten.
    pub async fn disconnect(self) -> Result<(), MqError> {
        let c = &self.inner;
        c.check_alive()?;
        let b = c.bind.lock().clone();
        let gone = MqError::new(Reason::HCONN_ERROR, "the connection was disconnected");
        *c.dead.lock() = Some(gone.clone());
        c.end_all_consumers(gone);
        let r = match b.socket.call(b.conv, &Request::Disconnect).await {
            Ok(r) => status("Disconnect", r),
            Err(_) => Ok(()),
        };
        b.socket.release_conv(b.conv);
        r
    }
}

impl Conv {
    fn check_alive(&self) -> Result<(), MqError> {
        match &*self.dead.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn joined(&self, role: Role) {
        if role == Role::Join {
            self.uow.lock().in_progress = true;
        }
    }

    async fn call1(&self, req: Request, role: Role) -> Result<Response, MqError> {
        let mut r = self.call(vec![req], role).await?;
        r.pop().ok_or_else(backed_out)
    }

    /// The requests as sent on the current socket: the application's handle replaced by the
    /// queue manager's, and the size checked against what the socket negotiated.
    fn to_wire(&self, req: &Request, b: &Binding) -> Result<Request, MqError> {
        let mut wire = req.clone();
        let hobj = match &mut wire {
            Request::Close { hobj, .. }
            | Request::Put { hobj, .. }
            | Request::Get { hobj, .. }
            | Request::Inquire { hobj, .. }
            | Request::Set { hobj, .. }
            | Request::RegisterConsumer { hobj, .. }
            | Request::CancelConsumer { hobj }
            | Request::Credit { hobj, .. }
            | Request::SubRequest { hsub: hobj } => Some(hobj),
            _ => None,
        };
        if let Some(hobj) = hobj {
            *hobj = self.server_handle(*hobj)?;
        }
        // The handle whose saved context a put passes on is the application's too.
        if let Request::Put { opts, .. }
        | Request::Put1 { opts, .. }
        | Request::Put1Topic { opts, .. } = &mut wire
        {
            // Answered unless the unanswered path sets it again once resolved.
            opts.response = 0;
            if opts.context_hobj != 0 {
                opts.context_hobj = self.server_handle(opts.context_hobj)?;
            }
        }
        let max = b.socket.params.max_msg_len;
        let body_len = match &wire {
            Request::Put { body, .. }
            | Request::Put1 { body, .. }
            | Request::Put1Topic { body, .. } => body.len(),
            _ => 0,
        };
        // Refused here rather than by the queue manager, which would have to drop the socket.
        let frame_len = wire.encoded_len() - 4;
        if body_len > max as usize || frame_len > frame_limit_for(max) as usize {
            return Err(MqError::new(
                Reason::MSG_TOO_BIG_FOR_CHANNEL,
                format!(
                    "message of {body_len} bytes ({} byte frame) exceeds the {max} byte maximum negotiated with the queue manager",
                    wire.encoded_len()
                ),
            ));
        }
        Ok(wire)
    }

    /// The queue manager's handle for the application's `hobj` on the current socket.
    fn server_handle(&self, hobj: u32) -> Result<u32, MqError> {
        let handles = self.handles.lock();
        let h = handles.map.get(&hobj).ok_or_else(|| {
            MqError::new(
                Reason::HOBJ_ERROR,
                format!("object handle {hobj} is not open on this connection"),
            )
        })?;
        match &h.lost {
            Some(e) => Err(e.clone()),
            None => Ok(h.server),
        }
    }

    /// Applies the lost-unit-of-work rule before a request goes out. `Ok(false)`: answer at once,
    /// nothing to send (a backout of a unit of work that is already gone).
    fn uow_gate(&self, role: Role) -> Result<bool, MqError> {
        let mut u = self.uow.lock();
        if !u.lost {
            return Ok(true);
        }
        match role {
            Role::Plain => Ok(true),
            Role::Join => Err(backed_out()),
            Role::Commit => {
                *u = Uow::default();
                Err(backed_out())
            }
            Role::Backout => {
                *u = Uow::default();
                Ok(false)
            }
        }
    }

    /// Sends `reqs` pipelined and returns their answers, reconnecting as the options allow. An
    /// empty result means the unit-of-work gate answered without sending.
    async fn call(&self, reqs: Vec<Request>, role: Role) -> Result<Vec<Response>, MqError> {
        let result = self.call_inner(&reqs, role).await.map(|(r, _)| r);
        if matches!(role, Role::Commit | Role::Backout) {
            // Whatever the outcome — committed, backed out, or unknown after an interruption —
            // the unit of work is over.
            *self.uow.lock() = Uow::default();
        }
        result
    }

    /// One plain request, answered on the binding (its generation) returned beside the answer.
    async fn call1_on(&self, req: Request, role: Role) -> Result<(Response, u64), MqError> {
        let (mut r, generation) = self.call_inner(&[req], role).await?;
        Ok((r.pop().ok_or_else(backed_out)?, generation))
    }

    /// The answers, and the generation of the binding that gave them.
    async fn call_inner(
        &self,
        reqs: &[Request],
        role: Role,
    ) -> Result<(Vec<Response>, u64), MqError> {
        let reissue = reqs.len() == 1 && is_reissuable(&reqs[0]);
        loop {
            let b = self.bound().await?;
            if !self.uow_gate(role)? {
                return Ok((Vec::new(), b.generation));
            }
            let wire = reqs
                .iter()
                .map(|r| self.to_wire(r, &b))
                .collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<&Request> = wire.iter().collect();
            let sent = match b.socket.start(b.conv, &refs) {
                Ok(p) => p,
                // Never written: safe to send again once reconnected.
                Err(e) => {
                    self.after_break(&b, e.into_error()).await?;
                    continue;
                }
            };
            let mut answers = Vec::with_capacity(sent.len());
            let mut broke = None;
            for p in sent {
                match p.wait().await {
                    Ok(r) => answers.push(r),
                    Err(e) => {
                        broke = Some(e);
                        break;
                    }
                }
            }
            let Some(e) = broke else {
                return Ok((answers, b.generation));
            };
            self.after_break(&b, e).await?;
            if reissue {
                continue;
            }
            return match role {
                // Whether or not it was carried out, the unit of work it joined was backed out
                // with the old socket; so is everything else in it, which the next commit learns.
                Role::Join => {
                    self.uow.lock().lost = true;
                    Err(backed_out())
                }
                // Backed out either way: by the backout itself or by the break.
                Role::Backout => Ok((Vec::new(), b.generation)),
                Role::Plain | Role::Commit => Err(MqError::new(
                    Reason::CALL_INTERRUPTED,
                    format!(
                        "the connection to the queue manager broke while {} was in flight and was re-established; whether it took effect is unknown",
                        reqs[0].name()
                    ),
                )),
            };
        }
    }

    /// The current binding, reconnecting first when its socket broke.
    async fn bound(&self) -> Result<Binding, MqError> {
        loop {
            self.check_alive()?;
            let b = self.bind.lock().clone();
            if !b.socket.is_broken() {
                return Ok(b);
            }
            self.after_break(&b, b.socket.broken_error()).await?;
        }
    }
}

/// The user id a connection asserts: the one it was given, or else the operating-system user
/// running the program (`USER`, `LOGNAME`), as an MQ client sends. A client (TCP) connection's
/// messages carry it as their UserIdentifier until connections are authenticated; a bindings
/// connection's carry the user the queue manager sees on its socket instead.
fn asserted_user(given: &str) -> String {
    if !given.is_empty() {
        return given.to_string();
    }
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_default()
}
