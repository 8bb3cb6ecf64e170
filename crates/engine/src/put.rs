//! MQPUT and MQPUT1: validating a message against the queue and the queue manager, filling in its
//! descriptor, and either logging and enqueuing it at once or holding it in the unit of work.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferrymq_types::descriptor::{EXPIRY_UNLIMITED, ID_NONE, PRIORITY_AS_Q_DEF};
use ferrymq_types::limits::{APPL_IDENTITY_LEN_MAX, PUT_APPL_NAME_LEN_MAX, USER_ID_LEN_MAX};
use ferrymq_types::options::{open, pmo, PutOptions, Syncpoint};
use ferrymq_types::xqh::{self, TransmissionHeader};
use ferrymq_types::{
    mqerr, DynamicKind, MessageDescriptor, MqError, Persistence, Properties, QueueKind,
};

use crate::conn::{ConnId, Context, RemoteDest};
use crate::message::{Entry, Lsn, Message};
use crate::records::{kind, put_head};
use crate::report::Event;
use crate::Engine;

/// What a successful put reports back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutDone {
    pub msg_id: [u8; 24],
    pub correl_id: [u8; 24],
    /// Send the reply once the log is durable up to here (0: at once).
    pub wait_lsn: Lsn,
    /// GroupId, MsgSeqNumber and Offset the queue manager gave a put in logical order.
    pub group: Option<([u8; 24], i32, i32)>,
    /// A warning the put completed with (MQRC_NO_SUBS_MATCHED for a publication that asked).
    pub warning: Option<ferrymq_types::Reason>,
}

/// Resolves MQPRI_PRIORITY_AS_Q_DEF and MQPER_PERSISTENCE_AS_Q_DEF from `def` (DEFPRTY,
/// DEFPSIST); explicit values are left as they are.
fn apply_queue_defaults(md: &mut MessageDescriptor, def: &ferrymq_types::QueueDef) {
    if md.priority == PRIORITY_AS_Q_DEF {
        md.priority = def.def_priority.clamp(0, 9);
    }
    if md.persistence == Persistence::AsQueueDef {
        md.persistence = if def.def_persistent {
            Persistence::Persistent
        } else {
            Persistence::NotPersistent
        };
    }
}

/// `s` cut to at most `max` characters (MQ's fixed-width context fields).
pub(crate) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => s[..at].to_string(),
        None => s.to_string(),
    }
}

/// Writes a context into a descriptor: identity always, origin when `origin` is set.
fn apply_context(md: &mut MessageDescriptor, c: &Context, origin: bool) {
    md.user_id = cut(&c.user_id, USER_ID_LEN_MAX);
    md.appl_identity = cut(&c.appl_identity, APPL_IDENTITY_LEN_MAX);
    if origin {
        md.put_appl_name = cut(&c.put_appl_name, PUT_APPL_NAME_LEN_MAX);
        md.put_time_ms = c.put_time_ms;
    }
}

impl Engine {
    /// Fills in the message's context as the put's context option says (MQPMO_*_CONTEXT),
    /// checking that the handle was opened with the matching MQOO_*_CONTEXT option. Whatever the
    /// caller put in these fields is overwritten unless it set them (MQPMO_SET_*_CONTEXT).
    fn fill_context(
        &self,
        conn: ConnId,
        h: &crate::conn::Handle,
        opts: &PutOptions,
        md: &mut MessageDescriptor,
        now_ms: u64,
    ) -> Result<(), MqError> {
        let c = &self.conns[&conn];
        let own = || Context {
            user_id: c.ctx_user.clone(),
            appl_identity: String::new(),
            put_appl_name: c.ctx_app.clone(),
            put_time_ms: now_ms,
        };
        let ctx = opts.context;
        let allowed = |bits: u32, what: &str| -> Result<(), MqError> {
            if h.options & bits == 0 {
                return Err(mqerr!(
                    OPTIONS_ERROR,
                    "the put asks for {what}, but '{}' was not opened with it (or with MQOO_SET_ALL_CONTEXT)",
                    h.opened_name
                ));
            }
            Ok(())
        };
        let saved = |e: &Engine| -> Result<Context, MqError> {
            let from = e.handle(conn, opts.context_hobj).map_err(|_| {
                mqerr!(
                    CONTEXT_HANDLE_ERROR,
                    "the put passes the context of handle {}, which is not open on this connection",
                    opts.context_hobj
                )
            })?;
            if from.options & open::SAVE_ALL_CONTEXT == 0 {
                return Err(mqerr!(
                    CONTEXT_HANDLE_ERROR,
                    "the put passes the context of '{}', which was not opened with MQOO_SAVE_ALL_CONTEXT",
                    from.opened_name
                ));
            }
            Ok(from.saved_context.as_deref().cloned().unwrap_or_default())
        };
        if ctx & !pmo::CONTEXT != 0 || (ctx & pmo::CONTEXT).count_ones() > 1 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "put context options {ctx:#x} name more than one context (or bits that are not MQPMO_*_CONTEXT)"
            ));
        }
        match ctx {
            0 | pmo::DEFAULT_CONTEXT => {
                // Once per message: the connection's own context, already cut to MQ's widths.
                md.user_id.clone_from(&c.ctx_user);
                md.appl_identity.clear();
                md.put_appl_name.clone_from(&c.ctx_app);
                md.put_time_ms = now_ms;
            }
            pmo::NO_CONTEXT => apply_context(md, &Context::default(), true),
            pmo::SET_IDENTITY_CONTEXT => {
                allowed(
                    open::SET_IDENTITY_CONTEXT | open::SET_ALL_CONTEXT,
                    "MQPMO_SET_IDENTITY_CONTEXT",
                )?;
                let given = Context {
                    user_id: md.user_id.clone(),
                    appl_identity: md.appl_identity.clone(),
                    ..own()
                };
                apply_context(md, &given, true);
            }
            pmo::SET_ALL_CONTEXT => {
                allowed(open::SET_ALL_CONTEXT, "MQPMO_SET_ALL_CONTEXT")?;
                let given = Context {
                    user_id: md.user_id.clone(),
                    appl_identity: md.appl_identity.clone(),
                    put_appl_name: md.put_appl_name.clone(),
                    // A caller that sets all the context but no time gets the put's.
                    put_time_ms: if md.put_time_ms == 0 {
                        now_ms
                    } else {
                        md.put_time_ms
                    },
                };
                apply_context(md, &given, true);
            }
            pmo::PASS_IDENTITY_CONTEXT => {
                allowed(
                    open::PASS_IDENTITY_CONTEXT
                        | open::PASS_ALL_CONTEXT
                        | open::SET_IDENTITY_CONTEXT
                        | open::SET_ALL_CONTEXT,
                    "MQPMO_PASS_IDENTITY_CONTEXT",
                )?;
                let passed = saved(self)?;
                apply_context(md, &own(), true);
                apply_context(md, &passed, false);
            }
            pmo::PASS_ALL_CONTEXT => {
                allowed(
                    open::PASS_ALL_CONTEXT | open::SET_ALL_CONTEXT,
                    "MQPMO_PASS_ALL_CONTEXT",
                )?;
                apply_context(md, &saved(self)?, true);
            }
            _ => unreachable!("one context bit at most"),
        }
        Ok(())
    }

    /// Puts a message through an open handle (MQPUT).
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &mut self,
        conn: ConnId,
        hobj: u32,
        opts: &PutOptions,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        now_ms: u64,
    ) -> Result<PutDone, MqError> {
        let h = self.handle(conn, hobj)?;
        if h.options & open::OUTPUT == 0 {
            return Err(mqerr!(
                NOT_OPEN_FOR_OUTPUT,
                "'{}' was not opened for output (MQOO_OUTPUT)",
                h.opened_name
            ));
        }
        let queue = h.queue.clone();
        let mut md = md;
        self.fill_context(conn, h, opts, &mut md, now_ms)?;
        if let Some(topic) = h.topic.clone() {
            let done = self.publish(conn, &topic, opts, md, props, body, now_ms)?;
            if let Some(h) = self
                .conns
                .get_mut(&conn)
                .and_then(|c| c.handles.get_mut(&hobj))
            {
                h.publications += 1;
                h.last_publication_ms = now_ms;
            }
            return Ok(done);
        }
        if let Some(alias) = h.alias.clone() {
            if let Some(a) = self.queues.get(&alias) {
                if a.def.put_inhibited {
                    return Err(mqerr!(
                        PUT_INHIBITED,
                        "puts to alias '{alias}' are inhibited (PUT(DISABLED))"
                    ));
                }
                // As in MQ, the defaults come from the first definition in the name resolution
                // path: the alias, not its target.
                apply_queue_defaults(&mut md, &a.def);
            }
        }
        let remote = h.remote.clone();
        self.resolve_reply_to(&mut md);
        let pos = self.group_put_fields(conn, hobj, opts, &mut md, body.len())?;
        let assigned = (md.group_id, md.msg_seq_number, md.offset);
        if let Some(dest) = remote {
            let (md, body, opts) = self.wrap_for_transmission(&queue, &dest, opts, md, body);
            let mut done = self.put_to_queue(conn, &queue, &opts, md, props, body, now_ms)?;
            if opts.logical_order {
                self.group_put_done(conn, hobj, pos);
                done.group = Some(assigned);
            }
            return Ok(done);
        }
        let mut done = self.put_to_queue(conn, &queue, opts, md, props, body, now_ms)?;
        if opts.logical_order {
            self.group_put_done(conn, hobj, pos);
            done.group = Some(assigned);
        }
        Ok(done)
    }

    /// Reply-to alias resolution, as MQ does it at put: a ReplyToQ with no ReplyToQMgr that
    /// names a remote queue definition here is replaced by its RNAME (when it has one) and
    /// RQMNAME, so the reply finds its way back through the other queue manager's routing.
    fn resolve_reply_to(&self, md: &mut MessageDescriptor) {
        if md.reply_to_q.is_empty() || !md.reply_to_qmgr.trim().is_empty() {
            return;
        }
        if let Some(QueueKind::Remote { rname, rqmname, .. }) =
            self.queues.get(&md.reply_to_q).map(|q| &q.def.kind)
        {
            if !rname.is_empty() {
                md.reply_to_q = rname.clone();
            }
            md.reply_to_qmgr = rqmname.clone();
        }
    }

    /// Opens, puts one message and closes in one call (MQPUT1).
    #[allow(clippy::too_many_arguments)]
    pub fn put1(
        &mut self,
        conn: ConnId,
        name: &str,
        qmgr: &str,
        opts: &PutOptions,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        now_ms: u64,
    ) -> Result<PutDone, MqError> {
        if opts.logical_order {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "MQPMO_LOGICAL_ORDER needs an open handle to continue a group; MQPUT1 has none"
            ));
        }
        // MQPUT1 opens with what its context option needs, as MQ does.
        let context = match opts.context {
            pmo::SET_ALL_CONTEXT => open::SET_ALL_CONTEXT,
            pmo::SET_IDENTITY_CONTEXT => open::SET_IDENTITY_CONTEXT,
            pmo::PASS_ALL_CONTEXT => open::PASS_ALL_CONTEXT,
            pmo::PASS_IDENTITY_CONTEXT => open::PASS_IDENTITY_CONTEXT,
            _ => 0,
        };
        let (hobj, _, open_lsn) = self.open(conn, name, qmgr, open::OUTPUT | context, "")?;
        let res = self.put(conn, hobj, opts, md, props, body, now_ms);
        let close_lsn = self.close(conn, hobj, 0, now_ms).unwrap_or(0);
        res.map(|mut d| {
            d.wait_lsn = d.wait_lsn.max(open_lsn).max(close_lsn);
            d
        })
    }

    /// A message for another queue manager as its transmission queue `xmitq` holds it: the
    /// transmission header (destination and the message's descriptor, its defaults resolved and
    /// its identifiers assigned) in front of the data, Format MQXMIT.
    pub(crate) fn wrap_for_transmission(
        &mut self,
        xmitq: &str,
        dest: &RemoteDest,
        opts: &PutOptions,
        mut md: MessageDescriptor,
        body: Bytes,
    ) -> (MessageDescriptor, Bytes, PutOptions) {
        if let Some(q) = self.queues.get(xmitq) {
            apply_queue_defaults(&mut md, &q.def);
        }
        if opts.new_msg_id || md.msg_id == ID_NONE {
            md.msg_id = self.new_id();
        }
        if opts.new_correl_id {
            md.correl_id = self.new_id();
        }
        let header = TransmissionHeader {
            remote_q: dest.remote_q.clone(),
            remote_qmgr: dest.remote_qmgr.clone(),
            md: md.clone(),
        }
        .encode();
        let mut wrapped = BytesMut::with_capacity(header.len() + body.len());
        wrapped.extend_from_slice(&header);
        wrapped.extend_from_slice(&body);
        md.format = xqh::FORMAT.to_string();
        let opts = PutOptions {
            new_msg_id: false,
            new_correl_id: false,
            ..opts.clone()
        };
        (md, wrapped.freeze(), opts)
    }

    /// Refuses a message of `len` bytes (body and properties) that would take the memory the queue manager's
    /// messages hold past `EngineConfig::message_memory_max`: one application filling queues
    /// with large messages must not take the process past the machine's memory.
    pub(crate) fn check_message_memory(&self, len: usize) -> Result<(), MqError> {
        let max = self.cfg.message_memory_max;
        if max == 0 {
            return Ok(());
        }
        let held = crate::message::held_bytes();
        if held + crate::message::footprint(len) > max {
            crate::message::note_refused_for_memory();
            return Err(mqerr!(
                STORAGE_NOT_AVAILABLE,
                "the queue manager's messages hold {held} bytes of memory, and a message of {len} bytes would take them past its limit of {max} (TuningParameters:MaxMessageMemory); get or clear messages, or raise the limit"
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put_to_queue(
        &mut self,
        conn: ConnId,
        queue: &str,
        opts: &PutOptions,
        mut md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        now_ms: u64,
    ) -> Result<PutDone, MqError> {
        let qmgr_max = self.attrs.max_msg_len;
        let uow_max = self.attrs.max_uncommitted_msgs;
        let q = self
            .queues
            .get(queue)
            .ok_or_else(|| self.no_such_queue(queue))?;
        let def = &q.def;
        if def.put_inhibited {
            return Err(mqerr!(
                PUT_INHIBITED,
                "puts to queue '{queue}' are inhibited (PUT(DISABLED))"
            ));
        }
        let len = body.len() as u64;
        if len > qmgr_max as u64 {
            return Err(mqerr!(
                MSG_TOO_BIG_FOR_Q_MGR,
                "message of {len} bytes exceeds the queue manager's MAXMSGL {qmgr_max}; ALTER QMGR MAXMSGL to raise it"
            ));
        }
        if len > def.max_msg_len as u64 {
            return Err(mqerr!(
                MSG_TOO_BIG_FOR_Q,
                "message of {len} bytes exceeds MAXMSGL {} of queue '{queue}'; ALTER the queue's MAXMSGL to raise it",
                def.max_msg_len
            ));
        }
        if q.is_full() {
            return Err(mqerr!(
                Q_FULL,
                "queue '{queue}' is full: CURDEPTH has reached MAXDEPTH {}",
                def.max_depth
            ));
        }
        self.check_message_memory(body.len() + crate::message::props_bytes(&props))?;
        if md.priority != PRIORITY_AS_Q_DEF && !(0..=9).contains(&md.priority) {
            return Err(mqerr!(
                PRIORITY_ERROR,
                "priority {} is not 0..9 or MQPRI_PRIORITY_AS_Q_DEF",
                md.priority
            ));
        }
        if md.expiry != EXPIRY_UNLIMITED && md.expiry <= 0 {
            return Err(mqerr!(
                EXPIRY_ERROR,
                "expiry {} is neither positive (tenths of a second) nor MQEI_UNLIMITED",
                md.expiry
            ));
        }
        if md.report & crate::report::NEEDS_REPLY_TO != 0 && md.reply_to_q.trim().is_empty() {
            return Err(mqerr!(
                MISSING_REPLY_TO_Q,
                "the message asks for reports (Report {:#x}) but names no ReplyToQ to send them to",
                md.report
            ));
        }
        apply_queue_defaults(&mut md, def);
        let persistent = md.persistence == Persistence::Persistent;
        if persistent && def.dynamic == Some(DynamicKind::Temporary) {
            return Err(mqerr!(
                PERSISTENT_NOT_ALLOWED,
                "queue '{queue}' is a temporary dynamic queue and cannot hold persistent messages"
            ));
        }
        let in_uow = opts.syncpoint == Syncpoint::Yes;
        if in_uow && self.conns[&conn].uow.len() as u32 >= uow_max {
            return Err(mqerr!(
                SYNCPOINT_LIMIT_REACHED,
                "the unit of work already holds {uow_max} messages (MAXUMSGS); commit before putting more"
            ));
        }
        if opts.new_msg_id || md.msg_id == ID_NONE {
            md.msg_id = self.new_id();
        }
        if opts.new_correl_id {
            md.correl_id = self.new_id();
        }
        md.backout_count = 0;
        let expires_at_ms =
            (md.expiry != EXPIRY_UNLIMITED).then(|| now_ms + md.expiry as u64 * 100);
        let seq = self.alloc_seq();
        let (msg_id, correl_id) = (md.msg_id, md.correl_id);

        if in_uow {
            let msg = Arc::new(Message::new(seq, md, props, body, expires_at_ms, 0));
            let q = self.queues.get_mut(queue).expect("checked");
            let key = q.key_for(msg.priority, seq);
            q.uncommitted_puts += 1;
            q.stats.last_put_ms = now_ms;
            self.conns.get_mut(&conn).expect("checked").uow.puts.push((
                queue.to_string(),
                key,
                Entry {
                    msg,
                    backout_count: 0,
                },
            ));
            return Ok(PutDone {
                msg_id,
                correl_id,
                wait_lsn: 0,
                group: None,
                warning: None,
            });
        }

        let msg = Message::new(seq, md, props, body, expires_at_ms, 0);
        // A confirm-on-arrival report is logged with the put, in one commit record.
        let report = self.report_for(&msg, Event::Arrived, now_ms);
        if let Some(g) = report.as_ref().filter(|_| persistent) {
            match self.log_event(&[(queue, &msg), (g.queue.as_str(), &g.msg)], &[]) {
                Ok(lsn) => msg.set_put_lsn(lsn.unwrap_or(0)),
                Err(e) => {
                    self.forget(report.into_iter().collect());
                    return Err(e);
                }
            }
        } else if persistent {
            let mut head = BytesMut::with_capacity(256);
            put_head(queue, &msg, &mut head);
            msg.set_put_lsn(self.log.append(kind::PUT, &[&head, &msg.body])?);
        }
        let wait_lsn = msg.put_lsn();
        let msg = Arc::new(msg);
        let q = self.queues.get_mut(queue).expect("checked");
        let key = q.key_for(msg.priority, seq);
        q.insert(
            key,
            Entry {
                msg,
                backout_count: 0,
            },
        );
        q.stats.last_put_ms = now_ms;
        q.stats.puts += 1;
        self.arrived(queue, key, now_ms);
        self.place(report.into_iter().collect(), wait_lsn, now_ms);
        Ok(PutDone {
            msg_id,
            correl_id,
            wait_lsn,
            group: None,
            warning: None,
        })
    }
}
