//! Asynchronous put response (MQPMO_ASYNC_RESPONSE, or MQPMO_RESPONSE_AS_Q_DEF /
//! _AS_TOPIC_DEF with the object's DEFPRESP(ASYNC)): the put is sent and returns at once with
//! success; the queue manager answers nothing and counts what became of it, for
//! [`Connection::stat`] (MQSTAT). Such puts are still carried out in order, before any later
//! request of the conversation.

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

impl Connection {
    /// MQSTAT with MQSTAT_TYPE_ASYNC_ERROR: what became of this conversation's asynchronous
    /// puts since the last call, which resets the counts. It answers once the puts it counts
    /// are on disk, so it also makes asynchronous persistent puts outside syncpoint durable.
    pub async fn stat(&self) -> Result<AsyncPutStatus, MqError> {
        let req = Request::Stat {
            stat_type: STAT_TYPE_ASYNC_ERROR,
        };
        match self.inner.call1(req, Role::Plain).await? {
            Response::InquireReply { attrs } => {
                let get = |k: &str| {
                    attrs
                        .iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.as_str())
                        .unwrap_or("")
                };
                let num = |k: &str| get(k).parse::<u64>().unwrap_or(0);
                Ok(AsyncPutStatus {
                    put_success_count: num("PUTSUCCESS"),
                    put_warning_count: num("PUTWARNING"),
                    put_failure_count: num("PUTFAILURE"),
                    comp_code: num("COMPCODE") as u32,
                    reason: Reason::from_code(num("REASON") as u32),
                    object_name: get("OBJNAME").trim().to_string(),
                })
            }
            other => Err(failure("Stat", other)),
        }
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
                    return Ok(());
                }
                // Never written: safe to send again once reconnected.
                Err(e) => self.after_break(&b, e.into_error()).await?,
            }
        }
    }
}
