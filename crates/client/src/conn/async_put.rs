//! Asynchronous put response (MQPMO_ASYNC_RESPONSE, or MQPMO_RESPONSE_AS_Q_DEF /
//! _AS_TOPIC_DEF with the object's DEFPRESP(ASYNC)): the put is sent and returns at once with
//! success; the queue manager answers nothing and counts what became of it, for
//! [`Connection::stat`] (MQSTAT). Such puts are still carried out in order, before any later
//! request of the conversation.
//!
//! The queue manager keeps those counts per conversation, so a reconnect (MQCNO_RECONNECT)
//! would lose them, and with them any failure of a put sent before the break: the client keeps
//! a ledger of the puts outside syncpoint sent on each binding and not yet counted by an
//! answered MQSTAT. Those sent on a binding that broke may or may not have been carried out;
//! the next MQSTAT counts them as failed with MQRC_CONNECTION_BROKEN (their MsgIds, which the
//! client made, let the application find out which arrived), so an application that checks
//! MQSTAT never takes a lost put for a delivered one. Puts under syncpoint need no ledger: the
//! reconnect already makes their unit of work back out at MQCMIT.

use ferrymq_proto::{Request, Response, PROTOCOL_VERSION_ASYNC_PUT};
use ferrymq_types::limits::CLIENT_ASYNC_PUT_BACKLOG_BYTES;
use ferrymq_types::options::{pmo, PutOptions, Syncpoint, STAT_TYPE_ASYNC_ERROR};
use ferrymq_types::{MessageDescriptor, MqError, MsgId, Reason};

use super::{failure, unique_id, Conv, Role};
use crate::Connection;

/// MQSTS: what became of the conversation's asynchronous puts since the last
/// [`Connection::stat`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsyncPutStatus {
    /// PutSuccessCount.
    pub put_success_count: u64,
    /// PutWarningCount (e.g. a publication that matched no subscription, when asked to warn).
    pub put_warning_count: u64,
    /// PutFailureCount.
    pub put_failure_count: u64,
    /// CompCode of the first failure (or, when none failed, the first warning): MQCC_OK 0,
    /// MQCC_WARNING 1, MQCC_FAILED 2.
    pub comp_code: u32,
    /// Reason of that first failure or warning; `Reason::NONE` when there was none.
    pub reason: Reason,
    /// The object (queue or topic) it was put to.
    pub object_name: String,
}

/// Asynchronous puts outside syncpoint sent and not yet counted by an answered MQSTAT.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// The binding (its generation) the `sent` puts went out on.
    generation: u64,
    sent: u64,
    /// The object of the first of them.
    sent_object: Option<String>,
    /// Puts sent on bindings that broke before an MQSTAT counted them, and the first's object.
    unknown: u64,
    unknown_object: Option<String>,
}

impl Ledger {
    /// Moves the puts of an older binding than `generation` to `unknown`.
    fn settle(&mut self, generation: u64) {
        if self.generation != generation {
            self.unknown += std::mem::take(&mut self.sent);
            if self.unknown_object.is_none() {
                self.unknown_object = self.sent_object.take();
            }
            self.sent_object = None;
            self.generation = generation;
        }
    }

    /// A put went out on binding `generation`; `object` names what it was put to, asked only
    /// for the first put of a binding (the only one a status names).
    pub(super) fn sent(&mut self, generation: u64, object: impl FnOnce() -> String) {
        self.settle(generation);
        self.sent += 1;
        if self.sent_object.is_none() {
            self.sent_object = Some(object());
        }
    }

    /// An MQSTAT was answered on binding `generation` with `status`, which counts every put
    /// sent on that binding before it: adds the puts whose fate is unknown, as failures that
    /// came first, and starts again.
    pub(super) fn answered(&mut self, generation: u64, status: &mut AsyncPutStatus) {
        self.settle(generation);
        self.sent = 0;
        self.sent_object = None;
        let unknown = std::mem::take(&mut self.unknown);
        if unknown > 0 {
            status.put_failure_count += unknown;
            status.comp_code = 2;
            status.reason = Reason::CONNECTION_BROKEN;
            status.object_name = self.unknown_object.take().unwrap_or_default();
        }
    }
}

impl Connection {
    /// MQSTAT with MQSTAT_TYPE_ASYNC_ERROR: what became of this conversation's asynchronous
    /// puts since the last call, which resets the counts. It answers once the puts it counts
    /// are on disk, so it also makes asynchronous persistent puts outside syncpoint durable.
    /// Puts outside syncpoint sent before a reconnect are counted as failed with
    /// MQRC_CONNECTION_BROKEN (their fate is unknown: see the module's docs).
    pub async fn stat(&self) -> Result<AsyncPutStatus, MqError> {
        let req = Request::Stat {
            stat_type: STAT_TYPE_ASYNC_ERROR,
        };
        let (answer, generation) = self.inner.call1_on(req, Role::Plain).await?;
        let mut status = match answer {
            Response::InquireReply { attrs } => {
                let get = |k: &str| {
                    attrs
                        .iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.as_str())
                        .unwrap_or("")
                };
                let num = |k: &str| get(k).parse::<u64>().unwrap_or(0);
                AsyncPutStatus {
                    put_success_count: num("PUTSUCCESS"),
                    put_warning_count: num("PUTWARNING"),
                    put_failure_count: num("PUTFAILURE"),
                    comp_code: num("COMPCODE") as u32,
                    reason: Reason::from_code(num("REASON") as u32),
                    object_name: get("OBJNAME").trim().to_string(),
                }
            }
            other => return Err(failure("Stat", other)),
        };
        self.inner
            .async_puts
            .lock()
            .answered(generation, &mut status);
        Ok(status)
    }

    /// Whether a put with `opts` through handle `hobj` (None: MQPUT1) goes unanswered:
    /// MQPMO_ASYNC_RESPONSE, or neither response option and the object's DEFPRESP(ASYNC). An
    /// MQPUT1 asking for the queue's default is answered (the queue is not open to know it).
    /// A queue manager too old to know asynchronous puts answers every put.
    pub(super) fn put_is_async(&self, hobj: Option<u32>, opts: &PutOptions) -> bool {
        if opts.response & pmo::SYNC_RESPONSE != 0 {
            return false;
        }
        let wanted = opts.response & pmo::ASYNC_RESPONSE != 0
            || hobj.is_some_and(|h| {
                self.inner
                    .handles
                    .lock()
                    .map
                    .get(&h)
                    .is_some_and(|s| s.async_default)
            });
        wanted && self.inner.bind.lock().socket.params.version >= PROTOCOL_VERSION_ASYNC_PUT
    }

    /// Sends a put nobody answers. Its MsgId (and CorrelId, with MQPMO_NEW_CORREL_ID) are made
    /// here, as MQ's client does, so that the program learns them at once.
    pub(super) async fn put_unanswered(&self, mut req: Request) -> Result<(MsgId, MsgId), MqError> {
        let (opts, md) = match &mut req {
            Request::Put { opts, md, .. }
            | Request::Put1 { opts, md, .. }
            | Request::Put1Topic { opts, md, .. } => (opts, md),
            _ => unreachable!("only puts go unanswered"),
        };
        fill_ids(opts, md);
        let ids = (md.msg_id, md.correl_id);
        let role = if opts.syncpoint == Syncpoint::No {
            Role::Plain
        } else {
            Role::Join
        };
        self.inner.send_unanswered(&req, role).await?;
        Ok(ids)
    }
}

/// MQPMO_NEW_MSG_ID or an all-zero MsgId, and MQPMO_NEW_CORREL_ID, resolved by the client.
fn fill_ids(opts: &mut PutOptions, md: &mut MessageDescriptor) {
    if opts.new_msg_id || md.msg_id == [0u8; 24] {
        md.msg_id = unique_id();
        opts.new_msg_id = false;
    }
    if opts.new_correl_id {
        md.correl_id = unique_id();
        opts.new_correl_id = false;
    }
}

impl Conv {
    async fn send_unanswered(&self, req: &Request, role: Role) -> Result<(), MqError> {
        loop {
            let b = self.bound().await?;
            if !self.uow_gate(role)? {
                return Ok(());
            }
            let mut wire = self.to_wire(req, &b)?;
            if let Request::Put { opts, .. }
            | Request::Put1 { opts, .. }
            | Request::Put1Topic { opts, .. } = &mut wire
            {
                opts.response = pmo::ASYNC_RESPONSE;
            }
            match b
                .socket
                .send_unanswered(b.conv, &wire, CLIENT_ASYNC_PUT_BACKLOG_BYTES)
                .await
            {
                Ok(()) => {
                    self.joined(role);
                    if role == Role::Plain {
                        // Only the first put since the last MQSTAT needs its object's name.
                        let object = || match req {
                            Request::Put { hobj, .. } => self
                                .handles
                                .lock()
                                .map
                                .get(hobj)
                                .map(|h| h.open_name.clone())
                                .unwrap_or_default(),
                            Request::Put1 { name, .. } => name.clone(),
                            Request::Put1Topic { object, topic, .. } => {
                                if object.is_empty() {
                                    topic.clone()
                                } else {
                                    object.clone()
                                }
                            }
                            _ => String::new(),
                        };
                        self.async_puts.lock().sent(b.generation, object);
                    }
                    return Ok(());
                }
                // Never written: safe to send again once reconnected.
                Err(e) => self.after_break(&b, e.into_error()).await?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> AsyncPutStatus {
        AsyncPutStatus {
            put_success_count: 0,
            put_warning_count: 0,
            put_failure_count: 0,
            comp_code: 0,
            reason: Reason::NONE,
            object_name: String::new(),
        }
    }

    #[test]
    fn puts_counted_by_an_answer_on_their_own_binding_are_settled() {
        let mut l = Ledger::default();
        l.sent(0, || "Q1".into());
        l.sent(0, || "Q1".into());
        let mut s = status();
        s.put_success_count = 2;
        l.answered(0, &mut s);
        assert_eq!((s.put_success_count, s.put_failure_count), (2, 0));
        assert_eq!(s.reason, Reason::NONE);
        // Nothing is carried into the next answer.
        let mut s = status();
        l.answered(3, &mut s);
        assert_eq!(s.put_failure_count, 0);
    }

    #[test]
    fn puts_sent_before_a_reconnect_count_as_failed_with_connection_broken_first() {
        let mut l = Ledger::default();
        l.sent(0, || "A.Q".into());
        l.sent(0, || "B.Q".into());
        l.sent(0, || "A.Q".into());
        // The socket broke; two more went out on the new binding, one of which failed there.
        l.sent(1, || "C.Q".into());
        l.sent(1, || "C.Q".into());
        let mut s = status();
        s.put_success_count = 1;
        s.put_failure_count = 1;
        s.comp_code = 2;
        s.reason = Reason::from_code(2053);
        s.object_name = "C.Q".into();
        l.answered(1, &mut s);
        assert_eq!((s.put_success_count, s.put_failure_count), (1, 4));
        assert_eq!((s.comp_code, s.reason), (2, Reason::CONNECTION_BROKEN));
        assert_eq!(s.object_name, "A.Q");
        // Two breaks before an answer: all of them are unknown.
        l.sent(1, || "D.Q".into());
        l.sent(2, || "E.Q".into());
        let mut s = status();
        l.answered(3, &mut s);
        assert_eq!(s.put_failure_count, 2);
        assert_eq!(s.object_name, "D.Q");
    }
}
