//! Report messages and the dead-letter queue. A message whose Report field asks for it makes the
//! queue manager put a report (MsgType MQMT_REPORT) to its ReplyToQ when it arrives on its
//! destination queue (COA), when it is got destructively (COD), when it expires (expiration) or
//! when it cannot be delivered (exception). A report is part of the event that caused it: it is
//! logged in the same record (a unit of work's commit, or a commit record of its own where the
//! event was a single put or get), so recovery — which only replays records and never looks at
//! the clock — brings back both or neither. A report, or any message, that its destination cannot
//! take goes to the dead-letter queue with a dead-letter header in front of its body.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferrymq_types::descriptor::{msg_type, EXPIRY_UNLIMITED};
use ferrymq_types::dlh::{self, DeadLetterHeader};
use ferrymq_types::limits::PUT_APPL_NAME_LEN_MAX;
use ferrymq_types::options::{feedback, report};
use ferrymq_types::{mqerr, DynamicKind, MessageDescriptor, MqError, Properties, QueueKind};

use crate::message::{Entry, Lsn, Message};
use crate::put::cut;
use crate::records::{kind, GetRec, Record};
use crate::Engine;

/// What happened to a message that asked for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Put to its destination queue (confirm on arrival).
    Arrived,
    /// Got destructively (confirm on delivery).
    Delivered,
    Expired,
    /// Not delivered, for this reason (the report's feedback).
    Undeliverable(i32),
}

impl Event {
    /// The report option bits for the event (the plain option, with data, with full data) and
    /// the report's feedback.
    fn bits(self) -> (i32, i32, i32, i32) {
        match self {
            Event::Arrived => (
                report::COA,
                report::COA_WITH_DATA,
                report::COA_WITH_FULL_DATA,
                feedback::COA,
            ),
            Event::Delivered => (
                report::COD,
                report::COD_WITH_DATA,
                report::COD_WITH_FULL_DATA,
                feedback::COD,
            ),
            Event::Expired => (
                report::EXPIRATION,
                report::EXPIRATION_WITH_DATA,
                report::EXPIRATION_WITH_FULL_DATA,
                feedback::EXPIRATION,
            ),
            Event::Undeliverable(reason) => (
                report::EXCEPTION,
                report::EXCEPTION_WITH_DATA,
                report::EXCEPTION_WITH_FULL_DATA,
                reason,
            ),
        }
    }
}

/// The report options that need a ReplyToQ to send a report to.
pub(crate) const NEEDS_REPLY_TO: i32 =
    report::COA | report::COD | report::EXPIRATION | report::EXCEPTION;

/// Whether `report` asks for a report on `event`.
pub(crate) fn wants(report_opts: i32, event: Event) -> bool {
    report_opts & event.bits().0 != 0
}

/// A message the queue manager generated, and the queue it goes to. Its place on that queue is
/// counted in the queue's `uncommitted_puts` until [`Engine::place`] inserts it (or
/// [`Engine::forget`] drops it), so several generated in one event cannot overfill the queue.
#[derive(Debug)]
pub(crate) struct Generated {
    pub queue: String,
    pub msg: Message,
}

impl Engine {
    /// The report `msg` asks for on `event`, addressed to its ReplyToQ (or to the dead-letter
    /// queue when that cannot take it), or `None` when none is asked for or none can be placed.
    pub(crate) fn report_for(
        &mut self,
        msg: &Message,
        event: Event,
        now_ms: u64,
    ) -> Option<Generated> {
        if !wants(msg.report(), event) || msg.msg_type() == msg_type::REPORT {
            return None;
        }
        let md = msg.md();
        let (_, with_data, with_full, fb) = event.bits();
        let body = if md.report & with_full == with_full {
            msg.body.clone()
        } else if md.report & with_data == with_data {
            msg.body
                .slice(..msg.body.len().min(report::WITH_DATA_BYTES))
        } else {
            Bytes::new()
        };
        let qmgr = self.cfg.qmgr_name.clone();
        let rmd = MessageDescriptor {
            msg_id: if md.report & report::PASS_MSG_ID != 0 {
                md.msg_id
            } else {
                self.new_id()
            },
            correl_id: if md.report & report::PASS_CORREL_ID != 0 {
                md.correl_id
            } else {
                md.msg_id
            },
            persistence: md.persistence,
            priority: md.priority,
            expiry: EXPIRY_UNLIMITED,
            msg_type: msg_type::REPORT,
            format: if body.is_empty() {
                String::new()
            } else {
                md.format.clone()
            },
            reply_to_q: String::new(),
            reply_to_qmgr: qmgr.clone(),
            backout_count: 0,
            put_time_ms: now_ms,
            user_id: md.user_id.clone(),
            appl_identity: md.appl_identity.clone(),
            put_appl_name: cut(&qmgr, PUT_APPL_NAME_LEN_MAX),
            encoding: md.encoding,
            ccsid: md.ccsid,
            feedback: fb,
            report: report::NONE,
            // A report is a message of its own, not part of the original's group.
            ..MessageDescriptor::default()
        };
        self.deliver_generated(
            rmd,
            Properties::default(),
            body,
            &md.reply_to_q,
            &md.reply_to_qmgr,
        )
    }

    /// A generated message (a report) for `dest` at `dest_qmgr`: there if it can take it,
    /// otherwise on the dead-letter queue with a header saying why; `None` if neither can.
    fn deliver_generated(
        &mut self,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        dest: &str,
        dest_qmgr: &str,
    ) -> Option<Generated> {
        match self.can_take(dest, dest_qmgr, &md, body.len()) {
            Ok(queue) => Some(self.generated(queue, md, props, body, None)),
            Err(e) => {
                let now = md.put_time_ms;
                self.dead_letter(
                    &md,
                    props,
                    &body,
                    e.reason.code() as i32,
                    (dest, dest_qmgr),
                    None,
                    now,
                )
            }
        }
    }

    /// The message `md`/`body`, which could not go to `dest` (queue, queue manager), on the
    /// dead-letter queue behind a dead-letter header, keeping its absolute expiry time; `None`
    /// when the queue manager has no dead-letter queue or it cannot take the message.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dead_letter(
        &mut self,
        md: &MessageDescriptor,
        props: Properties,
        body: &[u8],
        reason: i32,
        (dest, dest_qmgr): (&str, &str),
        expires_at_ms: Option<u64>,
        now_ms: u64,
    ) -> Option<Generated> {
        let dlq = self.attrs.dead_letter_queue.clone();
        if dlq.is_empty() {
            return None;
        }
        let qmgr = self.cfg.qmgr_name.clone();
        let header = DeadLetterHeader::for_message(
            md,
            reason,
            dest,
            if dest_qmgr.is_empty() {
                &qmgr
            } else {
                dest_qmgr
            },
            dlh::APPL_TYPE_QMGR,
            &cut(&qmgr, PUT_APPL_NAME_LEN_MAX),
            now_ms,
        );
        let mut whole = header.encode();
        whole.extend_from_slice(body);
        let dmd = MessageDescriptor {
            format: dlh::FORMAT.to_string(),
            encoding: dlh::ENCODING_NATIVE,
            ccsid: 1208,
            ..md.clone()
        };
        let queue = self.can_take(&dlq, "", &dmd, whole.len()).ok()?;
        Some(self.generated(queue, dmd, props, Bytes::from(whole), expires_at_ms))
    }

    pub(crate) fn generated(
        &mut self,
        queue: String,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        expires_at_ms: Option<u64>,
    ) -> Generated {
        let seq = self.alloc_seq();
        let msg = Message::new(seq, md, props, body, expires_at_ms, 0);
        if let Some(q) = self.queues.get_mut(&queue) {
            q.uncommitted_puts += 1;
        }
        Generated { queue, msg }
    }

    /// A generated message already built (its sequence number allocated by the caller).
    pub(crate) fn generated_message(&mut self, queue: String, msg: Message) -> Generated {
        if let Some(q) = self.queues.get_mut(&queue) {
            q.uncommitted_puts += 1;
        }
        Generated { queue, msg }
    }

    /// The local queue a generated message for `name` at `qmgr` lands on (through an alias),
    /// or why it cannot go there.
    pub(crate) fn can_take(
        &self,
        name: &str,
        qmgr: &str,
        md: &MessageDescriptor,
        len: usize,
    ) -> Result<String, MqError> {
        if !qmgr.is_empty() && qmgr != self.cfg.qmgr_name {
            return Err(mqerr!(
                UNKNOWN_REMOTE_Q_MGR,
                "queue manager '{qmgr}' cannot be reached from '{}'",
                self.cfg.qmgr_name
            ));
        }
        let q = self
            .queues
            .get(name)
            .ok_or_else(|| self.no_such_queue(name))?;
        let q = match &q.def.kind {
            QueueKind::Local => q,
            QueueKind::Alias { target } => {
                if q.def.put_inhibited {
                    return Err(mqerr!(PUT_INHIBITED, "puts to '{name}' are inhibited"));
                }
                self.queues
                    .get(target)
                    .filter(|t| t.def.holds_messages())
                    .ok_or_else(|| {
                        mqerr!(UNKNOWN_ALIAS_BASE_Q, "alias '{name}' has no local target")
                    })?
            }
            _ => return Err(mqerr!(Q_TYPE_ERROR, "'{name}' is not a local queue")),
        };
        if q.def.put_inhibited {
            return Err(mqerr!(
                PUT_INHIBITED,
                "puts to '{}' are inhibited",
                q.def.name
            ));
        }
        if q.is_full() {
            return Err(mqerr!(Q_FULL, "queue '{}' is full", q.def.name));
        }
        self.check_message_memory(len)?;
        if len as u64 > q.def.max_msg_len as u64 {
            return Err(mqerr!(MSG_TOO_BIG_FOR_Q, "too big for '{}'", q.def.name));
        }
        if md.persistence == ferrymq_types::Persistence::Persistent
            && q.def.dynamic == Some(DynamicKind::Temporary)
        {
            return Err(mqerr!(
                PERSISTENT_NOT_ALLOWED,
                "'{}' is a temporary dynamic queue",
                q.def.name
            ));
        }
        Ok(q.def.name.clone())
    }

    /// Drops generated messages that will not be placed (their event did not happen).
    pub(crate) fn forget(&mut self, generated: Vec<Generated>) {
        for g in generated {
            if let Some(q) = self.queues.get_mut(&g.queue) {
                q.uncommitted_puts = q.uncommitted_puts.saturating_sub(1);
            }
        }
    }

    /// Puts generated messages on their queues once their record is logged (`lsn`, 0 when none
    /// of them is persistent) and hands them to waiting getters.
    pub(crate) fn place(&mut self, generated: Vec<Generated>, lsn: Lsn, now_ms: u64) {
        for g in generated {
            let Some(q) = self.queues.get_mut(&g.queue) else {
                continue;
            };
            q.uncommitted_puts = q.uncommitted_puts.saturating_sub(1);
            if g.msg.persistent {
                g.msg.set_put_lsn(lsn);
            }
            let msg = Arc::new(g.msg);
            let key = q.key_for(msg.priority, msg.seq);
            q.insert(
                key,
                Entry {
                    msg,
                    backout_count: 0,
                },
            );
            q.stats.puts += 1;
            self.arrived(&g.queue, key, now_ms);
        }
    }

    /// Logs, as one commit record, the persistent ones of `puts` and `gets` (`None` when there
    /// are none to log).
    pub(crate) fn log_event(
        &mut self,
        puts: &[(&str, &Message)],
        gets: &[GetRec],
    ) -> Result<Option<Lsn>, MqError> {
        let puts: Vec<(&str, &Message)> =
            puts.iter().filter(|(_, m)| m.persistent).copied().collect();
        if puts.is_empty() && gets.is_empty() {
            return Ok(None);
        }
        let mut buf = BytesMut::with_capacity(
            puts.iter().map(|(_, m)| m.body.len() + 256).sum::<usize>() + 64,
        );
        Record::encode_commit(&puts, gets, &mut buf);
        Ok(Some(self.log.append(kind::COMMIT, &[&buf])?))
    }

    /// Removes expired messages met by a get (MQ never delivers them). The removal of one that
    /// asks for an expiration report is logged with its report, so that a restart brings back
    /// neither; others' removal is not logged (after a restart they are still expired). A
    /// message whose record cannot be written stays, to be discarded by a later get.
    pub(crate) fn discard_expired(
        &mut self,
        queue: &str,
        keys: Vec<crate::queue::Key>,
        now_ms: u64,
    ) {
        for k in keys {
            let Some(entry) = self.queues.get(queue).and_then(|q| q.entry(k)).cloned() else {
                continue;
            };
            let report = self.report_for(&entry.msg, Event::Expired, now_ms);
            if let Some(g) = report {
                let get = entry.msg.persistent.then(|| GetRec {
                    queue: queue.to_string(),
                    seq: k.seq(),
                    rank: k.rank(),
                });
                let logged = self.log_event(&[(g.queue.as_str(), &g.msg)], get.as_slice());
                match logged {
                    Ok(lsn) => {
                        if let Some(q) = self.queues.get_mut(queue) {
                            q.remove(k);
                        }
                        self.place(vec![g], lsn.unwrap_or(0), now_ms);
                    }
                    Err(_) => self.forget(vec![g]),
                }
            } else if let Some(q) = self.queues.get_mut(queue) {
                q.remove(k);
            }
        }
    }
}
