//! Asynchronous consume (MQ's MQCB) with flow control: [`Connection::consume`] registers a
//! consumer on an open handle and the queue manager pushes messages to it, never more than the
//! credit the client has granted. The client grants `window` credits with the registration (in
//! the same write) and then, as the application takes messages, grants again in batches of at
//! least half the window, so a busy consumer costs few writes and the queue manager is never more
//! than `window` messages ahead of the application.
//!
//! Deliveries under syncpoint join the conversation's unit of work like gets, and are not read
//! ahead: the window is one message, granted again only when the application asks for the next,
//! so a commit never covers a message the application has not been given. With reconnect
//! enabled, a consumer whose socket broke registers again on the reopened handle with a fresh
//! window; the messages pushed but not yet taken are dropped (without syncpoint they are lost, as
//! with MQ's read-ahead; under syncpoint the queue manager backed them out). If the break lost a
//! unit of work the consumer had joined, [`Consumer::next`] reports BACKED_OUT, as a syncpoint get
//! would, until the application commits or backs out: deliveries must not join the new unit of
//! work while the application still believes in the old one.
//!
//! One consumer per handle: a later `consume` on the same handle replaces the earlier consumer
//! (on the queue manager too), whose `next` then fails with HOBJ_ERROR. Closing the handle or
//! disconnecting ends the consumer the same way.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferrymq_proto::{Request, Response};
use ferrymq_types::options::{Browse, GetOptions, Syncpoint};
use ferrymq_types::{MqError, Reason};

use super::{failure, status, Binding, Connection, Conv, Role};
use crate::socket::{Socket, Stream};
use crate::{Message, ObjectHandle};

/// The consumer of each application handle, so that only the current one cancels itself on the
/// queue manager (a stale cancel would end its successor) and closing a handle or disconnecting
/// can end the consumer's stream.
#[derive(Default)]
pub(super) struct Consumers {
    next_token: u64,
    map: HashMap<u32, Registration>,
}

pub(super) struct Registration {
    token: u64,
    /// The stream the consumer currently reads, once registered.
    stream: Option<(Arc<Socket>, (u16, u32))>,
}

/// A registered asynchronous consumer (see [`Connection::consume`]). Dropping it without
/// [`Consumer::cancel`] cancels it on the queue manager without waiting for the answer.
pub struct Consumer {
    conn: Connection,
    hobj: u32,
    opts: GetOptions,
    window: u32,
    token: u64,
    /// `None` when the consumer must register again (after a reconnect) before receiving.
    live: Option<Live>,
    /// Set when the consumer ended for good; every later `next` reports it.
    ended: Option<MqError>,
    /// Messages the application has taken since credit was last granted.
    taken: u32,
    /// No read-ahead (under syncpoint): credit for the next message is granted only when the
    /// application asks for it.
    paced: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("hobj", &self.hobj)
            .field("window", &self.window)
            .field("registered", &self.live.is_some())
            .field("ended", &self.ended)
            .finish()
    }
}

/// A registration on one socket.
struct Live {
    /// The binding registered on, to recognise its break.
    seen: Binding,
    stream: Stream,
    /// The queue manager's handle the consumer was registered with.
    server_hobj: u32,
}

impl Live {
    fn send(&self, req: &Request) {
        let socket = self.stream.socket();
        if !socket.is_broken() {
            socket.send_oneway(self.stream.conv(), req);
        }
    }
}

fn replaced() -> MqError {
    MqError::new(
        Reason::HOBJ_ERROR,
        "a later consume on the same object handle replaced this consumer",
    )
}

impl Connection {
    /// Registers an asynchronous consumer on an open handle (MQCB); the queue manager may push up
    /// to `window` messages (at least 1) ahead of the application. `opts` select the messages as
    /// for [`Connection::get`], except that `wait` is ignored: a consumer waits indefinitely.
    /// Under syncpoint `window` is ignored: nothing is read ahead (see the module's notes).
    /// Replaces an earlier consumer of the same handle.
    pub async fn consume(
        &self,
        h: &ObjectHandle,
        opts: &GetOptions,
        window: u32,
    ) -> Result<Consumer, MqError> {
        let conv = &self.inner;
        // Under syncpoint a delivery joins the unit of work when the queue manager pushes it:
        // with read-ahead, a commit would commit messages the application has not seen, lost if
        // it then dies. So, as in MQ, a syncpoint consumer does not read ahead: one credit, and
        // the next only when the application asks for the next message.
        let paced = opts.syncpoint != Syncpoint::No && opts.browse == Browse::No;
        let window = if paced { 1 } else { window.max(1) };
        let (token, previous) = conv.reserve_consumer(h.hobj);
        let live = match conv.register_consumer(h.hobj, opts, window).await {
            Ok(l) => l,
            Err(e) => {
                conv.unreserve_consumer(h.hobj, token, previous);
                return Err(e);
            }
        };
        conv.consumer_registered(h.hobj, token, &live.stream);
        if let Some((socket, key)) = previous.and_then(|p| p.stream) {
            socket.end_stream(key, error_status(replaced()));
        }
        Ok(Consumer {
            conn: self.clone(),
            hobj: h.hobj,
            opts: opts.clone(),
            window,
            token,
            live: Some(live),
            ended: None,
            taken: 0,
            paced,
        })
    }
}

fn error_status(e: MqError) -> Response {
    Response::Status {
        reason: e.reason,
        message: e.message,
    }
}

impl Consumer {
    /// The next message, waiting as long as needed. A message accepted truncated
    /// (`accept_truncated`) has `truncated = true`. Fails when the consumer ended on the queue
    /// manager (e.g. Q_DELETED, or TRUNCATED_MSG_FAILED for a message too long for `max_len`,
    /// which stays on the queue) — every later call then fails the same way — or when the
    /// connection broke (CONNECTION_BROKEN without reconnect).
    pub async fn next(&mut self) -> Result<Message, MqError> {
        loop {
            if let Some(e) = &self.ended {
                return Err(e.clone());
            }
            let Some(live) = self.live.as_mut() else {
                self.register_again().await?;
                continue;
            };
            if self.paced && self.taken > 0 {
                live.send(&Request::Credit {
                    hobj: live.server_hobj,
                    n: self.taken,
                });
                self.taken = 0;
            }
            match live.stream.recv().await {
                Ok(Response::Message {
                    reason,
                    data_len,
                    md,
                    props,
                    body,
                }) => {
                    self.took_one();
                    return Ok(Message {
                        md,
                        props,
                        body,
                        data_len,
                        truncated: reason == Reason::TRUNCATED_MSG_ACCEPTED,
                    });
                }
                // Only the registration is answered with success, and that was read already.
                Ok(Response::Status {
                    reason: Reason::NONE,
                    ..
                }) => continue,
                Ok(other) => return Err(self.end(failure("the consumer", other))),
                Err(e) => {
                    let Some(live) = self.live.take() else {
                        continue;
                    };
                    if !live.stream.socket().is_broken() {
                        return Err(self.end(e));
                    }
                    // Messages pushed but not taken go with the old stream.
                    let seen = live.seen.clone();
                    drop(live);
                    self.conn.inner.after_break(&seen, e).await?;
                }
            }
        }
    }

    /// Like [`Consumer::next`], but gives up after `timeout` with NO_MSG_AVAILABLE.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Message, MqError> {
        match tokio::time::timeout(timeout, self.next()).await {
            Ok(r) => r,
            Err(_) => Err(MqError::new(
                Reason::NO_MSG_AVAILABLE,
                format!("no message arrived within {} ms", timeout.as_millis()),
            )),
        }
    }

    /// Cancels the consumer and waits for the queue manager to confirm. Messages it pushed
    /// before confirming are dropped (under syncpoint they are in the unit of work: a backout
    /// returns them to the queue). A consumer that already ended, or whose connection broke, has
    /// nothing to cancel.
    pub async fn cancel(mut self) -> Result<(), MqError> {
        let owned = self.conn.inner.release_consumer(self.hobj, self.token);
        let Some(live) = self.live.take() else {
            return Ok(());
        };
        let socket = live.stream.socket().clone();
        if !owned || socket.is_broken() {
            return Ok(());
        }
        let req = Request::CancelConsumer {
            hobj: live.server_hobj,
        };
        // `live` (its stream) lives until the answer, after which no delivery comes.
        let r = match socket.call(live.stream.conv(), &req).await {
            Ok(r) => status("CancelConsumer", r),
            // The socket broke: the consumer ended with it.
            Err(_) => Ok(()),
        };
        drop(live);
        r
    }

    /// Counts a message taken by the application, granting credit once enough have been taken,
    /// and joins the unit of work for a syncpoint delivery.
    fn took_one(&mut self) {
        self.taken += 1;
        if !self.paced && self.taken >= (self.window / 2).max(1) {
            if let Some(live) = &self.live {
                live.send(&Request::Credit {
                    hobj: live.server_hobj,
                    n: self.taken,
                });
            }
            self.taken = 0;
        }
        if self.opts.syncpoint == Syncpoint::Yes && self.opts.browse == Browse::No {
            self.conn.inner.joined(Role::Join);
        }
    }

    /// Registers on the current socket after a break, with a fresh window.
    async fn register_again(&mut self) -> Result<(), MqError> {
        let conv = &self.conn.inner;
        conv.check_alive()?;
        if !conv.owns_consumer(self.hobj, self.token) {
            return Err(self.end(MqError::new(
                Reason::HOBJ_ERROR,
                "the consumer's object handle was closed, or a later consume on it replaced this consumer",
            )));
        }
        let live = conv
            .register_consumer(self.hobj, &self.opts, self.window)
            .await?;
        conv.consumer_registered(self.hobj, self.token, &live.stream);
        self.live = Some(live);
        self.taken = 0;
        Ok(())
    }

    /// Ends the consumer for good with `e` (the queue manager will send nothing more).
    fn end(&mut self, e: MqError) -> MqError {
        self.conn.inner.release_consumer(self.hobj, self.token);
        self.live = None;
        self.ended = Some(e.clone());
        e
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let owned = self.conn.inner.release_consumer(self.hobj, self.token);
        if let Some(live) = self.live.take() {
            if owned && self.conn.inner.dead.lock().is_none() {
                live.send(&Request::CancelConsumer {
                    hobj: live.server_hobj,
                });
            }
        }
    }
}

impl Conv {
    /// Registers a consumer of the application's `hobj` on the current socket — the registration
    /// and the first credit in one write — and waits for the queue manager to accept it,
    /// reconnecting as the options allow.
    async fn register_consumer(
        &self,
        hobj: u32,
        opts: &GetOptions,
        window: u32,
    ) -> Result<Live, MqError> {
        loop {
            let b = self.bound().await?;
            if opts.syncpoint == Syncpoint::Yes && opts.browse == Browse::No {
                // Deliveries would join a unit of work the application does not yet know is lost.
                self.uow_gate(Role::Join)?;
            }
            let server = self.server_handle(hobj)?;
            let register = Request::RegisterConsumer {
                hobj: server,
                opts: opts.clone(),
            };
            let credit = Request::Credit {
                hobj: server,
                n: window,
            };
            let mut stream = match b.socket.start_stream(b.conv, &register, &[&credit]) {
                Ok(s) => s,
                Err(e) => {
                    self.after_break(&b, e.into_error()).await?;
                    continue;
                }
            };
            match stream.recv().await {
                Ok(Response::Status {
                    reason: Reason::NONE,
                    ..
                }) => {
                    return Ok(Live {
                        seen: b,
                        stream,
                        server_hobj: server,
                    })
                }
                Ok(other) => return Err(failure("RegisterConsumer", other)),
                Err(e) if !stream.socket().is_broken() => return Err(e),
                // Registering again on the new socket is what the application asked for.
                Err(e) => {
                    drop(stream);
                    self.after_break(&b, e).await?;
                }
            }
        }
    }

    /// Makes a new consumer of `hobj` the current one before it registers; returns its token and
    /// the registration it replaces.
    fn reserve_consumer(&self, hobj: u32) -> (u64, Option<Registration>) {
        let mut c = self.consumers.lock();
        c.next_token += 1;
        let token = c.next_token;
        let previous = c.map.insert(
            hobj,
            Registration {
                token,
                stream: None,
            },
        );
        (token, previous)
    }

    /// The registration failed: the earlier consumer (if any) is still the current one.
    fn unreserve_consumer(&self, hobj: u32, token: u64, previous: Option<Registration>) {
        let mut c = self.consumers.lock();
        if c.map.get(&hobj).is_some_and(|r| r.token == token) {
            match previous {
                Some(p) => c.map.insert(hobj, p),
                None => c.map.remove(&hobj),
            };
        }
    }

    fn consumer_registered(&self, hobj: u32, token: u64, stream: &Stream) {
        let mut c = self.consumers.lock();
        if let Some(r) = c.map.get_mut(&hobj).filter(|r| r.token == token) {
            r.stream = Some((stream.socket().clone(), stream.key()));
        }
    }

    fn owns_consumer(&self, hobj: u32, token: u64) -> bool {
        self.consumers
            .lock()
            .map
            .get(&hobj)
            .is_some_and(|r| r.token == token)
    }

    /// Forgets the consumer if it is the current one of `hobj`; true if it was.
    fn release_consumer(&self, hobj: u32, token: u64) -> bool {
        let mut c = self.consumers.lock();
        if c.map.get(&hobj).is_some_and(|r| r.token == token) {
            c.map.remove(&hobj);
            true
        } else {
            false
        }
    }

    /// Ends the consumer of `hobj` on this side (its handle was closed): its `next` fails with
    /// `e`.
    pub(super) fn end_consumer(&self, hobj: u32, e: MqError) {
        let r = self.consumers.lock().map.remove(&hobj);
        if let Some((socket, key)) = r.and_then(|r| r.stream) {
            socket.end_stream(key, error_status(e));
        }
    }

    /// Ends every consumer on this side (the conversation was disconnected).
    pub(super) fn end_all_consumers(&self, e: MqError) {
        let all: Vec<_> = self.consumers.lock().map.drain().collect();
        for (_, r) in all {
            if let Some((socket, key)) = r.stream {
                socket.end_stream(key, error_status(e.clone()));
            }
        }
    }
}
