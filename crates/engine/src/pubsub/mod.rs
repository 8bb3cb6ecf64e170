//! Publish/subscribe: topics, subscriptions and publications, on top of the queues.
//!
//! A subscription is a topic string (perhaps with wildcards), an optional selector and a
//! destination queue; a publication is put as one copy on the queue of every subscription it
//! matches, in ONE unit of work: under syncpoint the copies join the publisher's unit of work,
//! otherwise they are logged as one Commit record, so a crash keeps all copies or none. Nothing
//! new is logged for a publication: copies are puts, and a durable subscription is an object
//! (`ObjectKind::Sub`) in the existing DefineObject/DeleteObject records and in checkpoints, so
//! restart, HA replicas and DR sites rebuild subscriptions as they rebuild every other object.
//! Non-durable subscriptions live in memory only, with their connection.
//!
//! Retained publications are messages on SYSTEM.RETAINED.PUB.QUEUE carrying their topic string
//! (property `MQTopicString`), at most one per topic string: a retained publication puts the new
//! one and takes the old one in the same unit of work.

mod cache;
pub mod index;
pub mod selector;
mod status;
pub mod sub;
pub mod tree;

pub use status::{Delivered, Publisher, SubStatus, TopicStatus};

use std::collections::BTreeMap;
use std::sync::Arc;

use ahash::AHashMap;
use bytes::{Bytes, BytesMut};
use ferrymq_types::descriptor::EXPIRY_UNLIMITED;
use ferrymq_types::limits::{SUBS_MAX, SUB_NAME_LEN_MAX};
use ferrymq_types::options::{close, open, pmo, sub as so, PutOptions, Syncpoint};
use ferrymq_types::{
    mqerr, DynamicKind, MessageDescriptor, MqError, ObjectKind, Persistence, Properties,
    PropertyValue, QueueKind, Reason,
};

use crate::conn::{ConnId, Handle};
use crate::message::{Entry, Lsn, Message};
use crate::put::PutDone;
use crate::records::{GetRec, Record};
use crate::Engine;

pub use selector::Selector;
pub use sub::Sub;

/// The queue retained publications are kept on.
pub const RETAINED_QUEUE: &str = "SYSTEM.RETAINED.PUB.QUEUE";
/// The model queues of managed subscriptions' queues, unless a topic names others.
pub const DURABLE_MODEL: &str = "SYSTEM.DURABLE.MODEL.QUEUE";
pub const NDURABLE_MODEL: &str = "SYSTEM.NDURABLE.MODEL.QUEUE";
/// The topic object of the root of the tree.
pub const BASE_TOPIC: &str = "SYSTEM.BASE.TOPIC";
/// The property every publication carries: the topic string it was published on.
pub const TOPIC_PROPERTY: &str = "MQTopicString";
/// The property of a retained publication sent to a new subscriber or on request.
pub const RETAINED_PROPERTY: &str = "MQIsRetained";
/// MQPRI_PRIORITY_AS_TOPIC_DEF.
const PRIORITY_AS_TOPIC_DEF: i32 = -3;

/// PMSGDLV and NPMSGDLV: which subscribers a publication must reach for the put to succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every subscriber, or the put fails and none gets it.
    All,
    /// Every durable subscriber; a non-durable one that cannot take it misses it.
    AllDur,
    /// Whoever can take it.
    AllAvail,
}

/// A node's attributes, ASPARENT resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicAttrs {
    /// The closest topic object (whose node is the topic or an ancestor).
    pub object: String,
    pub publish: bool,
    pub subscribe: bool,
    pub durable_subs: bool,
    pub def_persistent: bool,
    pub def_priority: i32,
    pub pmsgdlv: Delivery,
    pub npmsgdlv: Delivery,
    pub mdurmdl: String,
    pub mndurmdl: String,
    /// DEFPRESP(ASYNC): a put asking MQPMO_RESPONSE_AS_TOPIC_DEF is not answered.
    pub async_put_default: bool,
}

/// What MQSUB asks for.
#[derive(Debug, Clone, Default)]
pub struct SubRequest {
    /// A topic object whose TOPICSTR starts the topic string (MQSD ObjectName).
    pub object: String,
    /// The rest of the topic string (MQSD ObjectString).
    pub topic: String,
    /// SubName: required for a durable subscription.
    pub name: String,
    /// MQSO_* options.
    pub options: u32,
    /// The queue publications go to, unless MQSO_MANAGED.
    pub dest: String,
    pub dest_qmgr: String,
    pub selector: String,
    /// Tenths of a second (-1 or 0: unlimited).
    pub expiry: i32,
    pub user_data: String,
    /// SubCorrelId with MQSO_SET_CORREL_ID: the CorrelId of every copy the subscription gets.
    pub correl_id: Option<[u8; 24]>,
}

/// What MQSUB returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribed {
    /// The subscription handle (closing it ends the subscription's use; MQCO_REMOVE_SUB removes it).
    pub hsub: u32,
    /// The managed queue, open for input (0 for a subscription to a queue the caller named).
    pub hobj: u32,
    /// The queue publications arrive on.
    pub queue: String,
    pub wait_lsn: Lsn,
}

/// A subscription handle of a connection.
#[derive(Debug, Clone)]
pub struct SubHandle {
    pub name: String,
    pub durable: bool,
    /// The managed queue's handle opened with the subscription (0: none).
    pub hobj: u32,
}

/// The engine's publish/subscribe state that is not an object.
#[derive(Debug, Default)]
pub(crate) struct PubSub {
    nondurable: BTreeMap<String, Arc<Sub>>,
    /// The non-durable subscriptions by topic pattern, kept with `nondurable`.
    nondurable_index: index::Index,
    /// Subscriptions open through a handle: who holds each.
    in_use: AHashMap<String, (ConnId, u32)>,
    /// Per subscription name: the copies delivered since the queue manager started, and when
    /// the last was (DISPLAY SBSTATUS NUMMSGS, LMSGDATE, LMSGTIME). Entries go with their
    /// subscription.
    delivered: AHashMap<String, Delivered>,
    /// None: to build from the objects (at first use, and after the objects are replaced).
    cache: Option<Arc<cache::Cache>>,
    durable: Option<cache::Durable>,
    /// Topic strings' resolved attributes, forgotten when a topic object changes: a
    /// publication resolves its topic once, not at every put.
    attrs: AHashMap<Box<str>, Arc<TopicAttrs>>,
}

fn delivery(v: &str) -> Option<Delivery> {
    Some(match v {
        "ALL" => Delivery::All,
        "ALLDUR" => Delivery::AllDur,
        "ALLAVAIL" => Delivery::AllAvail,
        _ => return None,
    })
}

fn explicit(v: Option<&String>) -> Option<&str> {
    v.map(|s| s.trim())
        .filter(|s| !s.is_empty() && *s != "ASPARENT")
}

impl Engine {
    /// The full topic string named by a topic object and a string (MQOD/MQSD ObjectName and
    /// ObjectString).
    fn topic_of(&self, object: &str, given: &str) -> Result<String, MqError> {
        let object_str = if object.is_empty() {
            String::new()
        } else {
            let o = self.objects.get(&(ObjectKind::Topic, object.to_string()));
            let o = o.ok_or_else(|| {
                mqerr!(
                    UNKNOWN_OBJECT_NAME,
                    "topic object '{object}' is not defined on queue manager '{}'",
                    self.cfg.qmgr_name
                )
            })?;
            o.attrs.get("TOPICSTR").cloned().unwrap_or_default()
        };
        if object.is_empty() && given.is_empty() {
            return Err(mqerr!(
                TOPIC_STRING_ERROR,
                "no topic: name a topic object, a topic string, or both"
            ));
        }
        tree::full_topic(&object_str, given)
    }

    /// The closest topic object of the topic named by `object` and `topic`: the object whose
    /// authority records decide who may publish and subscribe there.
    pub fn topic_object_for(&mut self, object: &str, topic: &str) -> Result<String, MqError> {
        let full = self.topic_of(object, topic)?;
        Ok(self.topic_attrs(&full).object.clone())
    }

    /// Opens a topic for publishing (MQOPEN of MQOT_TOPIC): returns the handle and the full
    /// topic string.
    pub fn open_topic(
        &mut self,
        conn: ConnId,
        object: &str,
        topic: &str,
        options: u32,
    ) -> Result<(u32, String), MqError> {
        let allowed = open::OUTPUT
            | (open::CONTEXT & !open::SAVE_ALL_CONTEXT)
            | open::FAIL_IF_QUIESCING
            | open::BIND_AS_Q_DEF;
        if options & open::OUTPUT == 0 || options & !allowed != 0 {
            return Err(mqerr!(
                OPTION_NOT_VALID_FOR_TYPE,
                "a topic is opened for output (publishing) only; subscribe to receive its publications"
            ));
        }
        let full = self.topic_of(object, topic)?;
        if tree::has_wildcard(&full) {
            return Err(mqerr!(
                TOPIC_STRING_ERROR,
                "topic string '{full}' has a wildcard level ('#' or '+'): publications go to one topic"
            ));
        }
        let c = self.conn_mut(conn)?;
        if c.handles.len() as u32 >= c.max_handles {
            return Err(mqerr!(
                HANDLE_NOT_AVAILABLE,
                "connection already has {} handles open (MAXHANDS, crtmqm -h); close some",
                c.max_handles
            ));
        }
        let hobj = c.next_hobj;
        c.next_hobj = c.next_hobj.wrapping_add(1).max(1);
        c.handles.insert(
            hobj,
            Box::new(Handle {
                queue: String::new(),
                opened_name: if object.is_empty() {
                    full.clone()
                } else {
                    object.to_string()
                },
                alias: None,
                options,
                browse_cursor: None,
                owns_temporary: false,
                groups: Default::default(),
                saved_context: None,
                remote: None,
                topic: Some(Arc::from(full.as_str())),
                publications: 0,
                last_publication_ms: 0,
            }),
        );
        Ok((hobj, full))
    }

    /// MQPUT1 to a topic.
    #[allow(clippy::too_many_arguments)]
    pub fn put1_topic(
        &mut self,
        conn: ConnId,
        object: &str,
        topic: &str,
        opts: &PutOptions,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        now_ms: u64,
    ) -> Result<PutDone, MqError> {
        let context = match opts.context {
            pmo::SET_ALL_CONTEXT => open::SET_ALL_CONTEXT,
            pmo::SET_IDENTITY_CONTEXT => open::SET_IDENTITY_CONTEXT,
            pmo::PASS_ALL_CONTEXT => open::PASS_ALL_CONTEXT,
            pmo::PASS_IDENTITY_CONTEXT => open::PASS_IDENTITY_CONTEXT,
            _ => 0,
        };
        let (hobj, _) = self.open_topic(conn, object, topic, open::OUTPUT | context)?;
        let res = self.put(conn, hobj, opts, md, props, body, now_ms);
        let _ = self.close(conn, hobj, 0, now_ms);
        res
    }

    /// Where a subscription's copies go when its destination is another queue manager's queue
    /// (DESTQMGR, or a remote queue definition): the transmission queue and the destination.
    /// `None` for a queue of this queue manager.
    fn remote_route(&self, s: &Sub) -> Result<Option<(String, crate::conn::RemoteDest)>, MqError> {
        use crate::open::Route;
        let route = if !s.dest_qmgr.is_empty() && s.dest_qmgr != self.cfg.qmgr_name {
            self.route(&s.dest, &s.dest_qmgr, 0)?
        } else {
            match self.queues.get(&s.dest).map(|q| &q.def.kind) {
                Some(QueueKind::Remote {
                    rname,
                    rqmname,
                    xmitq,
                }) if !xmitq.is_empty() => Route::Xmit(
                    xmitq.clone(),
                    crate::conn::RemoteDest {
                        remote_q: rname.clone(),
                        remote_qmgr: rqmname.clone(),
                    },
                ),
                Some(QueueKind::Remote { rname, rqmname, .. }) => self.route(rname, rqmname, 0)?,
                _ => return Ok(None),
            }
        };
        Ok(match route {
            Route::Local(_) => None,
            Route::Xmit(x, d) => Some((x, d)),
        })
    }

    /// Every subscription, durable first.
    fn all_subs(&mut self) -> Vec<Arc<Sub>> {
        let mut v: Vec<Arc<Sub>> = self.durable().subs.values().cloned().collect();
        v.extend(self.pubsub.nondurable.values().cloned());
        v
    }

    /// The subscriptions whose topic pattern matches `topic`, durable first, each kind in name
    /// order (the order copies are delivered in): found through the index, so the cost follows
    /// the subscriptions that match, not all of them.
    fn matching_subs(&mut self, topic: &str) -> Vec<Arc<Sub>> {
        let mut v = self.durable().index.matching(topic);
        v.extend(self.pubsub.nondurable_index.matching(topic));
        v
    }

    /// Puts a publication on `topic` (a put through a topic handle, context already filled in).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish(
        &mut self,
        conn: ConnId,
        topic: &str,
        opts: &PutOptions,
        mut md: MessageDescriptor,
        mut props: Properties,
        body: Bytes,
        now_ms: u64,
    ) -> Result<PutDone, MqError> {
        let attrs = self.topic_attrs(topic);
        if !attrs.publish {
            return Err(mqerr!(
                PUT_INHIBITED,
                "publications on topic '{topic}' are inhibited (PUB(DISABLED), from topic object '{}')",
                attrs.object
            ));
        }
        if opts.logical_order {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "MQPMO_LOGICAL_ORDER applies to queues, not to publications"
            ));
        }
        if opts.pubsub & !pmo::PUBSUB != 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "publish/subscribe put options {:#x} include bits FerryMQ does not know",
                opts.pubsub
            ));
        }
        let len = body.len() as u64;
        if len > self.attrs.max_msg_len as u64 {
            return Err(mqerr!(
                MSG_TOO_BIG_FOR_Q_MGR,
                "publication of {len} bytes exceeds the queue manager's MAXMSGL {}",
                self.attrs.max_msg_len
            ));
        }
        if md.priority == ferrymq_types::descriptor::PRIORITY_AS_Q_DEF
            || md.priority == PRIORITY_AS_TOPIC_DEF
        {
            md.priority = attrs.def_priority.clamp(0, 9);
        } else if !(0..=9).contains(&md.priority) {
            return Err(mqerr!(
                PRIORITY_ERROR,
                "priority {} is not 0..9 or MQPRI_PRIORITY_AS_TOPIC_DEF",
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
        if md.persistence == Persistence::AsQueueDef {
            md.persistence = if attrs.def_persistent {
                Persistence::Persistent
            } else {
                Persistence::NotPersistent
            };
        }
        let persistent = md.persistence == Persistence::Persistent;
        if opts.new_msg_id || md.msg_id == ferrymq_types::descriptor::ID_NONE {
            md.msg_id = self.new_id();
        }
        if opts.new_correl_id {
            md.correl_id = self.new_id();
        }
        md.backout_count = 0;
        let expires_at_ms =
            (md.expiry != EXPIRY_UNLIMITED).then(|| now_ms + md.expiry as u64 * 100);
        props.set(TOPIC_PROPERTY, PropertyValue::String(topic.to_string()));
        let retain = opts.pubsub & pmo::RETAIN != 0;

        // Where copies go: every matching subscription that can take one, or a failure when
        // the topic's delivery rule needs a subscription that cannot. A copy to a local queue
        // is the publication itself (`Copy::Same`), or its non-persistent twin for a temporary
        // queue (`Copy::NonPersistent`): both are built once below and shared by their copies.
        let mut targets: Vec<(String, Copy)> = Vec::new();
        // The subscriptions that take a copy, for their delivery counts.
        let mut took: Vec<Arc<Sub>> = Vec::new();
        let mut matched = 0;
        for s in self.matching_subs(topic) {
            if s.is_expired(now_ms) || !s.selects(&props) {
                continue;
            }
            matched += 1;
            // A destination on another queue manager: the copy goes to its transmission
            // queue behind a transmission header.
            let remote = match self.remote_route(&s) {
                Ok(r) => r,
                Err(e) => {
                    if attrs_require(&attrs, persistent, s.durable) {
                        return Err(undelivered(topic, &s, &e, persistent));
                    }
                    continue;
                }
            };
            if let Some((xmitq, dest)) = remote {
                let (wmd, wbody, _) =
                    self.wrap_for_transmission(&xmitq, &dest, opts, md.clone(), body.clone());
                match self.can_take(&xmitq, "", &wmd, wbody.len()) {
                    Ok(q) => {
                        targets.push((q, Copy::Wrapped(Box::new(wmd), wbody)));
                        took.push(s);
                    }
                    Err(e) => {
                        if attrs_require(&attrs, persistent, s.durable) {
                            return Err(undelivered(topic, &s, &e, persistent));
                        }
                    }
                }
                continue;
            }
            // A non-durable managed subscription's queue is temporary: it cannot outlive the
            // subscription, so its copy need not be persistent (and a temporary queue takes no
            // persistent messages).
            let temporary = persistent
                && self
                    .queues
                    .get(&s.dest)
                    .is_some_and(|q| q.def.dynamic == Some(DynamicKind::Temporary));
            let taken = if let Some(correl_id) = s.correl_id {
                // MQSO_SET_CORREL_ID: this subscription's copy has its own CorrelId.
                let mut cmd = md.clone();
                cmd.correl_id = correl_id;
                if temporary {
                    cmd.persistence = Persistence::NotPersistent;
                }
                self.can_take(&s.dest, "", &cmd, body.len())
                    .map(|q| (q, Copy::Wrapped(Box::new(cmd), body.clone())))
            } else if temporary {
                let mut cmd = md.clone();
                cmd.persistence = Persistence::NotPersistent;
                self.can_take(&s.dest, "", &cmd, body.len())
                    .map(|q| (q, Copy::NonPersistent))
            } else {
                self.can_take(&s.dest, "", &md, body.len())
                    .map(|q| (q, Copy::Same))
            };
            match taken {
                Ok(t) => {
                    targets.push(t);
                    took.push(s);
                }
                Err(e) => {
                    if attrs_require(&attrs, persistent, s.durable) {
                        return Err(undelivered(topic, &s, &e, persistent));
                    }
                }
            }
        }
        // The retained publication replaces the topic's previous one.
        let mut replaced = Vec::new();
        if retain {
            self.ensure_system_queue(RETAINED_QUEUE, now_ms)?;
            let Some(q) = self.queues.get(RETAINED_QUEUE) else {
                return Err(mqerr!(
                    UNKNOWN_OBJECT_NAME,
                    "MQPMO_RETAIN needs queue '{RETAINED_QUEUE}': DEFINE QLOCAL('{RETAINED_QUEUE}') MAXDEPTH(999999999)"
                ));
            };
            replaced = retained_keys(q, |t| t == topic);
            let mut rmd = md.clone();
            rmd.report = 0;
            targets.push((
                RETAINED_QUEUE.to_string(),
                Copy::Wrapped(Box::new(rmd), body.clone()),
            ));
        }
        let in_uow = opts.syncpoint == Syncpoint::Yes;
        let (msg_id, correl_id) = (md.msg_id, md.correl_id);
        let warning = (matched == 0 && opts.pubsub & pmo::WARN_IF_NO_SUBS_MATCHED != 0)
            .then_some(Reason::NO_SUBS_MATCHED);
        if in_uow {
            let max = self.attrs.max_uncommitted_msgs;
            let held = self.conns[&conn].uow.len();
            if held + targets.len() + replaced.len() > max as usize {
                return Err(mqerr!(
                    SYNCPOINT_LIMIT_REACHED,
                    "the publication's {} copies do not fit the unit of work's MAXUMSGS {max} ({held} held); commit first",
                    targets.len()
                ));
            }
        }
        // The publication as a message, once: the copies share its descriptor, properties and
        // body (one body copy per publication, not per subscriber).
        let same = Message::new(0, md.clone(), props.clone(), body, expires_at_ms, 0);
        let mut non_persistent: Option<Message> = None;
        let mut copies: Vec<(String, Message)> = Vec::with_capacity(targets.len());
        // Which copies are `same` under another sequence number: logged as a reference to it.
        let mut shared: Vec<bool> = Vec::with_capacity(targets.len());
        for (queue, copy) in targets {
            let seq = self.alloc_seq();
            shared.push(matches!(copy, Copy::Same));
            let msg = match copy {
                Copy::Same => same.copy_as(seq),
                Copy::NonPersistent => non_persistent
                    .get_or_insert_with(|| {
                        let mut cmd = md.clone();
                        cmd.persistence = Persistence::NotPersistent;
                        Message::new(0, cmd, props.clone(), same.body.clone(), expires_at_ms, 0)
                    })
                    .copy_as(seq),
                Copy::Wrapped(cmd, cbody) => {
                    Message::new(seq, *cmd, props.clone(), cbody, expires_at_ms, 0)
                }
            };
            copies.push((queue, msg));
        }
        if in_uow {
            let uow = &mut self.conns.get_mut(&conn).expect("checked").uow;
            for (queue, msg) in copies {
                let q = self.queues.get_mut(&queue).expect("checked");
                let msg = Arc::new(msg);
                let key = q.key_for(msg.priority, msg.seq);
                q.uncommitted_puts += 1;
                q.stats.last_put_ms = now_ms;
                uow.puts.push((
                    queue,
                    key,
                    Entry {
                        msg,
                        backout_count: 0,
                    },
                ));
            }
            let q = self.queues.get_mut(RETAINED_QUEUE);
            if let Some(q) = q {
                for key in replaced {
                    if let Some(entry) = q.remove(key) {
                        q.locked += 1;
                        uow.gets.push((RETAINED_QUEUE.to_string(), key, entry));
                    }
                }
            }
            self.count_deliveries(&took, now_ms);
            return Ok(PutDone {
                msg_id,
                correl_id,
                wait_lsn: 0,
                group: None,
                warning,
            });
        }
        let generated: Vec<_> = copies
            .into_iter()
            .map(|(queue, msg)| self.generated_message(queue, msg))
            .collect();
        let gets: Vec<GetRec> = match self.queues.get(RETAINED_QUEUE) {
            Some(q) => replaced
                .iter()
                .filter(|k| q.entry(**k).is_some_and(|e| e.msg.persistent))
                .map(|k| GetRec {
                    queue: RETAINED_QUEUE.to_string(),
                    seq: k.seq(),
                    rank: k.rank(),
                })
                .collect(),
            None => Vec::new(),
        };
        let logged = if persistent && shared.iter().filter(|s| **s).count() >= 2 {
            self.log_publication(&same, &generated, &shared, &gets)
        } else {
            let puts: Vec<(&str, &Message)> = generated
                .iter()
                .map(|g| (g.queue.as_str(), &g.msg))
                .collect();
            self.log_event(&puts, &gets)
        };
        let lsn = match logged {
            Ok(l) => l.unwrap_or(0),
            Err(e) => {
                self.forget(generated);
                return Err(e);
            }
        };
        if let Some(q) = self.queues.get_mut(RETAINED_QUEUE) {
            for key in replaced {
                if q.remove(key).is_some() {
                    q.stats.gets += 1;
                }
            }
        }
        self.place(generated, lsn, now_ms);
        self.count_deliveries(&took, now_ms);
        Ok(PutDone {
            msg_id,
            correl_id,
            wait_lsn: lsn,
            group: None,
            warning,
        })
    }

    /// Logs a persistent publication as one `kind::PUBLISH` record: the message once and each
    /// copy of it (`shared`) as its queue and sequence number; the other copies (to
    /// transmission queues, the retained one) and `gets` as a commit logs them.
    fn log_publication(
        &mut self,
        same: &Message,
        generated: &[crate::report::Generated],
        shared: &[bool],
        gets: &[GetRec],
    ) -> Result<Option<Lsn>, MqError> {
        let mut copies: Vec<(&str, u64)> = Vec::new();
        let mut others: Vec<(&str, &Message)> = Vec::new();
        for (g, s) in generated.iter().zip(shared) {
            if *s {
                copies.push((g.queue.as_str(), g.msg.seq));
            } else if g.msg.persistent {
                others.push((g.queue.as_str(), &g.msg));
            }
        }
        let mut buf = BytesMut::with_capacity(
            same.body.len()
                + 512
                + copies.iter().map(|(q, _)| q.len() + 10).sum::<usize>()
                + others
                    .iter()
                    .map(|(_, m)| m.body.len() + 256)
                    .sum::<usize>(),
        );
        Record::encode_publication(same, &copies, &others, gets, &mut buf);
        Ok(Some(
            self.log.append(crate::records::kind::PUBLISH, &[&buf])?,
        ))
    }

    /// Subscribes (MQSUB): creates a subscription or resumes a durable one.
    pub fn subscribe(
        &mut self,
        conn: ConnId,
        r: &SubRequest,
        now_ms: u64,
    ) -> Result<Subscribed, MqError> {
        self.conn_mut(conn)?;
        if r.options & !so::KNOWN != 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "subscription options {:#x} include bits FerryMQ does not know",
                r.options
            ));
        }
        if r.options & so::WILDCARD_CHAR != 0 && r.options & so::WILDCARD_TOPIC != 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "MQSO_WILDCARD_CHAR and MQSO_WILDCARD_TOPIC exclude each other"
            ));
        }
        let alter = r.options & so::ALTER != 0;
        // MQSO_ALTER resumes the subscription with new attributes.
        let (create, resume) = (
            r.options & so::CREATE != 0,
            alter || r.options & so::RESUME != 0,
        );
        let durable = r.options & so::DURABLE != 0;
        if !create && !resume {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "a subscription needs MQSO_CREATE, MQSO_RESUME or both"
            ));
        }
        if resume && !durable {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "only a durable subscription (MQSO_DURABLE) can be resumed"
            ));
        }
        if r.name.len() > SUB_NAME_LEN_MAX || (durable && r.name.trim().is_empty()) {
            return Err(mqerr!(
                SUB_NAME_ERROR,
                "a durable subscription needs a name of 1 to {SUB_NAME_LEN_MAX} bytes"
            ));
        }
        let existing = if durable {
            self.objects
                .get(&(ObjectKind::Sub, r.name.clone()))
                .map(|o| Arc::new(Sub::from_object(o)))
                .filter(|s| !s.is_expired(now_ms))
        } else {
            self.pubsub.nondurable.get(&r.name).cloned()
        };
        if let Some(s) = existing {
            if !resume {
                return Err(mqerr!(
                    SUB_ALREADY_EXISTS,
                    "subscription '{}' already exists; resume it (MQSO_RESUME) or remove it first",
                    s.name
                ));
            }
            if self.pubsub.in_use.contains_key(&s.name) {
                return Err(mqerr!(
                    SUBSCRIPTION_IN_USE,
                    "subscription '{}' is open through another handle",
                    s.name
                ));
            }
            let (s, lsn) = if alter {
                self.alter_sub(&s, r, now_ms)?
            } else {
                (s, 0)
            };
            let mut done = self.open_sub(conn, &s, 0)?;
            done.wait_lsn = done.wait_lsn.max(lsn);
            return Ok(done);
        }
        if !create {
            return Err(mqerr!(
                NO_SUBSCRIPTION,
                "there is no durable subscription named '{}'",
                r.name
            ));
        }
        let topic = self.topic_of(&r.object, &r.topic)?;
        let attrs = self.topic_attrs(&topic);
        if !attrs.subscribe {
            return Err(mqerr!(
                SUB_INHIBITED,
                "subscriptions to '{topic}' are inhibited (SUB(DISABLED), from topic object '{}')",
                attrs.object
            ));
        }
        if durable && !attrs.durable_subs {
            return Err(mqerr!(
                DURABILITY_NOT_ALLOWED,
                "durable subscriptions to '{topic}' are not allowed (DURSUB(NO), from topic object '{}')",
                attrs.object
            ));
        }
        let selector = if r.selector.trim().is_empty() {
            None
        } else {
            Some(Selector::parse(&r.selector)?)
        };
        let count = self.pubsub.nondurable.len() + self.durable().subs.len();
        if count >= SUBS_MAX {
            return Err(mqerr!(
                RESOURCE_PROBLEM,
                "the queue manager already holds {count} subscriptions (at most {SUBS_MAX})"
            ));
        }
        let managed = r.options & so::MANAGED != 0;
        let name = if r.name.is_empty() {
            let id = self.new_id();
            format!("SYSTEM.NDURABLE.{}", hex(&id[4..]))
        } else {
            r.name.clone()
        };
        let mut lsn = 0;
        let (dest, hobj) = if managed {
            if !r.dest.is_empty() {
                return Err(mqerr!(
                    OPTIONS_ERROR,
                    "a managed subscription (MQSO_MANAGED) names no destination queue"
                ));
            }
            let (model, prefix) = if durable {
                (attrs.mdurmdl.clone(), "SYSTEM.MANAGED.DURABLE.*")
            } else {
                (attrs.mndurmdl.clone(), "SYSTEM.MANAGED.NDURABLE.*")
            };
            let mut lsn_model = self.ensure_system_queue(&model, now_ms)?;
            match self.queues.get(&model).map(|q| &q.def.kind) {
                Some(QueueKind::Model { def_type }) => {
                    if durable && *def_type != DynamicKind::Permanent {
                        return Err(mqerr!(
                            DURABILITY_NOT_ALLOWED,
                            "model queue '{model}' (MDURMDL of '{topic}') makes temporary queues; a durable subscription needs DEFTYPE(PERMDYN)"
                        ));
                    }
                }
                _ => {
                    return Err(mqerr!(
                        UNKNOWN_OBJECT_NAME,
                        "model queue '{model}' for the subscription's managed queue is not defined: DEFINE QMODEL('{model}') DEFTYPE({})",
                        if durable { "PERMDYN" } else { "TEMPDYN" }
                    ));
                }
            }
            self.note_time(now_ms);
            let (hobj, q, l) = self.open(conn, &model, "", open::INPUT_AS_Q_DEF, prefix)?;
            lsn_model = lsn_model.max(l);
            lsn = lsn_model;
            (q, hobj)
        } else {
            if r.dest.is_empty() {
                return Err(mqerr!(
                    OPTIONS_ERROR,
                    "a subscription names its destination queue or asks for a managed one (MQSO_MANAGED)"
                ));
            }
            if r.dest_qmgr.is_empty() || r.dest_qmgr == self.cfg.qmgr_name {
                match self.queues.get(&r.dest).map(|q| &q.def.kind) {
                    Some(QueueKind::Local)
                    | Some(QueueKind::Alias { .. })
                    | Some(QueueKind::Remote { .. }) => {}
                    Some(k) => {
                        return Err(mqerr!(
                        Q_TYPE_ERROR,
                        "destination '{}' is a {}; publications go to a local, alias or remote queue",
                        r.dest,
                        k.mq_name()
                    ))
                    }
                    None => return Err(self.no_such_queue(&r.dest)),
                }
            }
            (r.dest.clone(), 0)
        };
        let user = self.conns[&conn].ctx_user.clone();
        let s = Sub {
            name,
            id: self.new_id(),
            topic,
            topic_obj: r.object.clone(),
            dest,
            dest_qmgr: r.dest_qmgr.clone(),
            managed,
            durable,
            selector_text: r.selector.trim().to_string(),
            selector,
            expiry: if r.expiry > 0 { r.expiry } else { -1 },
            created_ms: now_ms,
            altered_ms: now_ms,
            user,
            user_data: r.user_data.clone(),
            on_request: r.options & so::PUBLICATIONS_ON_REQUEST != 0,
            admin: false,
            char_wildcards: r.options & so::WILDCARD_CHAR != 0,
            correl_id: if r.options & so::SET_CORREL_ID != 0 {
                let Some(c) = r.correl_id else {
                    return Err(mqerr!(
                        OPTIONS_ERROR,
                        "MQSO_SET_CORREL_ID needs a SubCorrelId"
                    ));
                };
                Some(c)
            } else {
                None
            },
        };
        let s = Arc::new(s);
        if durable {
            match self.log_record(&Record::DefineObject(s.to_object())) {
                Ok(l) => lsn = lsn.max(l),
                Err(e) => {
                    if hobj != 0 {
                        let _ = self.close(conn, hobj, close::DELETE_PURGE, now_ms);
                    }
                    return Err(e);
                }
            }
            self.objects
                .insert((ObjectKind::Sub, s.name.clone()), s.to_object());
            self.objects_version += 1;
            self.ps_object_changed(ObjectKind::Sub, &s.name);
        } else {
            self.pubsub.nondurable.insert(s.name.clone(), s.clone());
            self.pubsub.nondurable_index.insert(s.clone());
        }
        let mut done = self.open_sub(conn, &s, hobj)?;
        done.wait_lsn = done.wait_lsn.max(lsn);
        if r.options & (so::NEW_PUBLICATIONS_ONLY | so::PUBLICATIONS_ON_REQUEST) == 0 {
            // A retained publication that cannot be sent is not a reason to refuse the
            // subscription: it was made, and MQSUBRQ can ask again.
            if let Ok((_, l)) = self.send_retained(&s, now_ms) {
                done.wait_lsn = done.wait_lsn.max(l);
            }
        }
        Ok(done)
    }

    /// MQSO_ALTER: a durable subscription's attributes that do not choose its publications
    /// (USERDATA, EXPIRY, REQONLY) take the request's values, logged as its new definition. Its
    /// topic string and selector cannot change: remove it and make it again for that.
    fn alter_sub(
        &mut self,
        s: &Sub,
        r: &SubRequest,
        now_ms: u64,
    ) -> Result<(Arc<Sub>, Lsn), MqError> {
        let topic = if r.object.is_empty() && r.topic.is_empty() {
            s.topic.clone()
        } else {
            self.topic_of(&r.object, &r.topic)?
        };
        if topic != s.topic || r.selector.trim() != s.selector_text {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "MQSO_ALTER cannot change subscription '{}''s topic string or selector; remove it and make it again",
                s.name
            ));
        }
        let mut n = s.clone();
        n.user_data = r.user_data.clone();
        n.expiry = if r.expiry > 0 { r.expiry } else { -1 };
        n.on_request = r.options & so::PUBLICATIONS_ON_REQUEST != 0;
        n.altered_ms = now_ms;
        let lsn = self.log_record(&Record::DefineObject(n.to_object()))?;
        self.objects
            .insert((ObjectKind::Sub, n.name.clone()), n.to_object());
        self.objects_version += 1;
        self.ps_object_changed(ObjectKind::Sub, &n.name);
        Ok((Arc::new(n), lsn))
    }

    /// Gives the connection a handle to subscription `s` (and opens its managed queue for input
    /// unless `hobj` already is that).
    fn open_sub(&mut self, conn: ConnId, s: &Sub, hobj: u32) -> Result<Subscribed, MqError> {
        let mut hobj = hobj;
        let mut lsn = 0;
        if s.managed && hobj == 0 {
            let (h, _, l) = self.open(conn, &s.dest, "", open::INPUT_AS_Q_DEF, "")?;
            hobj = h;
            lsn = l;
        }
        let c = self.conn_mut(conn)?;
        let hsub = c.next_hobj;
        c.next_hobj = c.next_hobj.wrapping_add(1).max(1);
        c.subs.insert(
            hsub,
            SubHandle {
                name: s.name.clone(),
                durable: s.durable,
                hobj,
            },
        );
        self.pubsub.in_use.insert(s.name.clone(), (conn, hsub));
        Ok(Subscribed {
            hsub,
            hobj,
            queue: s.dest.clone(),
            wait_lsn: lsn,
        })
    }

    /// Whether `hsub` is one of the connection's subscription handles.
    pub(crate) fn is_sub_handle(&self, conn: ConnId, hsub: u32) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.subs.contains_key(&hsub))
    }

    /// Closes a subscription handle: a non-durable subscription ends (its managed queue with
    /// it); a durable one stays unless `options` has MQCO_REMOVE_SUB. The managed queue's
    /// handle opened with the subscription is closed too.
    pub(crate) fn close_sub(
        &mut self,
        conn: ConnId,
        hsub: u32,
        options: u32,
        now_ms: u64,
    ) -> Result<Lsn, MqError> {
        if options & !(close::KEEP_SUB | close::REMOVE_SUB) != 0
            || options & close::KEEP_SUB != 0 && options & close::REMOVE_SUB != 0
        {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "a subscription handle closes with MQCO_KEEP_SUB or MQCO_REMOVE_SUB"
            ));
        }
        let h = self
            .conn_mut(conn)?
            .subs
            .remove(&hsub)
            .expect("the caller checked the handle");
        if self.pubsub.in_use.get(&h.name) == Some(&(conn, hsub)) {
            self.pubsub.in_use.remove(&h.name);
        }
        let remove = !h.durable || options & close::REMOVE_SUB != 0;
        let mut lsn = 0;
        if h.hobj != 0 && self.handle(conn, h.hobj).is_ok() {
            lsn = self.close(conn, h.hobj, 0, now_ms)?;
        }
        if remove {
            lsn = lsn.max(self.remove_sub(&h.name, h.durable)?);
        }
        Ok(lsn)
    }

    /// Removes a subscription (and its managed queue, if the queue manager made one).
    pub(crate) fn remove_sub(&mut self, name: &str, durable: bool) -> Result<Lsn, MqError> {
        let s = if durable {
            let Some(o) = self.objects.get(&(ObjectKind::Sub, name.to_string())) else {
                return Ok(0);
            };
            Sub::from_object(o)
        } else {
            match self.pubsub.nondurable.remove(name) {
                Some(s) => {
                    self.pubsub.nondurable_index.remove(&s.topic, name);
                    (*s).clone()
                }
                None => return Ok(0),
            }
        };
        let mut lsn = 0;
        self.pubsub.delivered.remove(name);
        if durable {
            lsn = self.log_record(&Record::DeleteObject(ObjectKind::Sub, name.to_string()))?;
            self.objects.remove(&(ObjectKind::Sub, name.to_string()));
            self.objects_version += 1;
            self.ps_object_changed(ObjectKind::Sub, name);
        }
        if s.managed
            && self
                .queues
                .get(&s.dest)
                .is_some_and(|q| q.def.dynamic.is_some())
            && self.handles_on(&s.dest) == 0
        {
            lsn = lsn.max(self.remove_queue(&s.dest)?);
        }
        Ok(lsn)
    }

    /// Sends the retained publications that match `s` to its queue (MQSUBRQ, or a new
    /// subscription), as one unit of work. Returns how many were sent.
    pub(crate) fn send_retained(&mut self, s: &Sub, now_ms: u64) -> Result<(u32, Lsn), MqError> {
        let Some(q) = self.queues.get(RETAINED_QUEUE) else {
            return Ok((0, 0));
        };
        let found: Vec<Arc<Message>> = q
            .iter()
            .filter(|(_, e)| !e.msg.is_expired(now_ms))
            .filter(|(_, e)| match e.msg.props().get(TOPIC_PROPERTY) {
                Some(PropertyValue::String(t)) => s.takes(t, e.msg.props()),
                _ => false,
            })
            .map(|(_, e)| e.msg.clone())
            .collect();
        let mut generated = Vec::new();
        for m in found {
            let mut md = m.md();
            if self
                .queues
                .get(&s.dest)
                .is_some_and(|q| q.def.dynamic == Some(DynamicKind::Temporary))
            {
                md.persistence = Persistence::NotPersistent;
            }
            let Ok(queue) = self.can_take(&s.dest, &s.dest_qmgr, &md, m.body.len()) else {
                continue;
            };
            let mut props = m.props().clone();
            props.set(RETAINED_PROPERTY, PropertyValue::Bool(true));
            generated.push(self.generated(queue, md, props, m.body.clone(), m.expires_at_ms()));
        }
        let n = generated.len() as u32;
        let puts: Vec<(&str, &Message)> = generated
            .iter()
            .map(|g| (g.queue.as_str(), &g.msg))
            .collect();
        let lsn = match self.log_event(&puts, &[]) {
            Ok(l) => l.unwrap_or(0),
            Err(e) => {
                self.forget(generated);
                return Err(e);
            }
        };
        self.place(generated, lsn, now_ms);
        Ok((n, lsn))
    }

    /// MQSUBRQ(MQSR_ACTION_PUBLICATION): sends the retained publications matching the
    /// subscription again. MQRC_NO_RETAINED_MSG when there is none.
    pub fn sub_request(
        &mut self,
        conn: ConnId,
        hsub: u32,
        now_ms: u64,
    ) -> Result<(u32, Lsn), MqError> {
        let name = match self.conns.get(&conn).and_then(|c| c.subs.get(&hsub)) {
            Some(h) => h.name.clone(),
            None => {
                return Err(mqerr!(
                    HOBJ_ERROR,
                    "handle {hsub} is not a subscription handle of this connection"
                ))
            }
        };
        let Some(s) = self.all_subs().into_iter().find(|s| s.name == name) else {
            return Err(mqerr!(
                NO_SUBSCRIPTION,
                "subscription '{name}' no longer exists"
            ));
        };
        let (n, lsn) = self.send_retained(&s, now_ms)?;
        if n == 0 {
            return Err(mqerr!(
                NO_RETAINED_MSG,
                "no retained publication matches subscription '{name}' ('{}')",
                s.topic
            ));
        }
        Ok((n, lsn))
    }

    /// DEFINE SUB: an administrative durable subscription, from MQSC keywords (TOPICSTR,
    /// TOPICOBJ, DEST, DESTQMGR, DESTCLAS, SELECTOR, EXPIRY, USERDATA, REQONLY). A managed one
    /// gets a permanent dynamic queue from the topic's MDURMDL. REPLACE keeps an existing
    /// subscription's identity and queue.
    pub fn define_sub(
        &mut self,
        name: &str,
        attrs: &[(String, String)],
        replace: bool,
        now_ms: u64,
    ) -> Result<Lsn, MqError> {
        let get = |k: &str| {
            attrs
                .iter()
                .find(|(a, _)| a == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        if name.trim().is_empty() || name.len() > SUB_NAME_LEN_MAX {
            return Err(mqerr!(
                SUB_NAME_ERROR,
                "a subscription name has 1 to {SUB_NAME_LEN_MAX} bytes"
            ));
        }
        if self.pubsub.nondurable.contains_key(name) {
            return Err(mqerr!(
                SUB_ALREADY_EXISTS,
                "'{name}' is a non-durable subscription of a connected application"
            ));
        }
        let old = self
            .objects
            .get(&(ObjectKind::Sub, name.to_string()))
            .map(Sub::from_object);
        if old.is_some() && !replace {
            return Err(mqerr!(
                OBJECT_ALREADY_EXISTS,
                "SUB '{name}' already exists; use REPLACE to change it"
            ));
        }
        let topic = self.topic_of(&get("TOPICOBJ"), &get("TOPICSTR"))?;
        let t = self.topic_attrs(&topic);
        if !t.subscribe {
            return Err(mqerr!(
                SUB_INHIBITED,
                "subscriptions to '{topic}' are inhibited (SUB(DISABLED), from topic object '{}')",
                t.object
            ));
        }
        if !t.durable_subs {
            return Err(mqerr!(
                DURABILITY_NOT_ALLOWED,
                "durable subscriptions to '{topic}' are not allowed (DURSUB(NO), from topic object '{}')",
                t.object
            ));
        }
        let selector_text = get("SELECTOR").trim().to_string();
        let selector = if selector_text.is_empty() {
            None
        } else {
            Some(Selector::parse(&selector_text)?)
        };
        let managed = get("DESTCLAS") == "MANAGED";
        let mut lsn = 0;
        let dest = match (&old, managed) {
            (Some(o), true) if o.managed => o.dest.clone(),
            (_, true) => {
                let (q, l) = self.managed_queue(&t.mdurmdl, now_ms)?;
                lsn = l;
                q
            }
            (_, false) => {
                let dest = get("DEST");
                if dest.is_empty() {
                    return Err(mqerr!(
                        UNKNOWN_OBJECT_NAME,
                        "DEFINE SUB('{name}') names no DEST: name a queue, or DESTCLAS(MANAGED)"
                    ));
                }
                let dq = get("DESTQMGR");
                if (dq.is_empty() || dq == self.cfg.qmgr_name) && self.queues.get(&dest).is_none() {
                    return Err(self.no_such_queue(&dest));
                }
                dest
            }
        };
        let expiry = match get("EXPIRY").as_str() {
            "" | "UNLIMITED" => -1,
            v => v.parse::<i32>().unwrap_or(-1),
        };
        let s = Sub {
            name: name.to_string(),
            id: old.as_ref().map_or_else(|| self.new_id(), |o| o.id),
            topic,
            topic_obj: get("TOPICOBJ"),
            dest,
            dest_qmgr: get("DESTQMGR"),
            managed,
            durable: true,
            selector_text,
            selector,
            expiry,
            created_ms: old.as_ref().map_or(now_ms, |o| o.created_ms),
            altered_ms: now_ms,
            user: self.cfg.qmgr_name.clone(),
            user_data: get("USERDATA"),
            on_request: get("REQONLY") == "YES",
            admin: true,
            char_wildcards: get("WSCHEMA") == "CHAR",
            correl_id: sub::correl_id_from_hex(&get("DESTCORL")),
        };
        lsn = lsn.max(self.log_record(&Record::DefineObject(s.to_object()))?);
        self.objects
            .insert((ObjectKind::Sub, s.name.clone()), s.to_object());
        self.objects_version += 1;
        self.ps_object_changed(ObjectKind::Sub, &s.name);
        if old.is_none() && !s.on_request {
            if let Ok((_, l)) = self.send_retained(&s, now_ms) {
                lsn = lsn.max(l);
            }
        }
        Ok(lsn)
    }

    /// A permanent dynamic queue for a managed durable subscription, from model `model`.
    fn managed_queue(&mut self, model: &str, now_ms: u64) -> Result<(String, Lsn), MqError> {
        let first = self.ensure_system_queue(model, now_ms)?;
        let def = match self.queues.get(model).map(|q| &q.def) {
            Some(d) if matches!(d.kind, QueueKind::Model { def_type: DynamicKind::Permanent }) => {
                d.clone()
            }
            _ => {
                return Err(mqerr!(
                    UNKNOWN_OBJECT_NAME,
                    "model queue '{model}' for a managed durable subscription is not defined with DEFTYPE(PERMDYN)"
                ))
            }
        };
        let name = self.dynamic_queue_name("SYSTEM.MANAGED.DURABLE.*")?;
        let mut q = def;
        q.name = name.clone();
        q.kind = QueueKind::Local;
        q.dynamic = Some(DynamicKind::Permanent);
        q.times = ferrymq_types::ObjectTimes::at(now_ms);
        let lsn = self.log_record(&Record::DefineQueue(q.clone()))?;
        self.queues
            .insert(name.clone(), crate::queue::Queue::new(q));
        Ok((name, lsn.max(first)))
    }

    /// Defines one of publish/subscribe's system queues if it is missing: a queue manager
    /// created before publish/subscribe existed gets them when they are first needed (logged
    /// like any definition, so replicas, restarts and DR sites see the same). Other names are
    /// left alone. Returns the LSN of the definition (0: nothing to do).
    fn ensure_system_queue(&mut self, name: &str, now_ms: u64) -> Result<Lsn, MqError> {
        if self.queues.contains_key(name) {
            return Ok(0);
        }
        let mut q = match name {
            DURABLE_MODEL => ferrymq_types::QueueDef::new(
                name,
                QueueKind::Model {
                    def_type: DynamicKind::Permanent,
                },
            ),
            NDURABLE_MODEL => ferrymq_types::QueueDef::new(
                name,
                QueueKind::Model {
                    def_type: DynamicKind::Temporary,
                },
            ),
            RETAINED_QUEUE => {
                let mut q = ferrymq_types::QueueDef::local(name);
                q.max_depth = ferrymq_types::limits::QUEUE_DEPTH_MAX;
                q
            }
            _ => return Ok(0),
        };
        q.times = ferrymq_types::ObjectTimes::at(now_ms);
        let lsn = self.log_record(&Record::DefineQueue(q.clone()))?;
        self.queues
            .insert(name.to_string(), crate::queue::Queue::new(q));
        Ok(lsn)
    }

    /// DELETE SUB: removes a durable subscription that no application has open (with its
    /// managed queue).
    pub fn delete_sub(&mut self, name: &str) -> Result<Lsn, MqError> {
        if self.pubsub.nondurable.contains_key(name) {
            return Err(mqerr!(
                SUBSCRIPTION_IN_USE,
                "'{name}' is a non-durable subscription: it ends with its application's connection"
            ));
        }
        if !self
            .objects
            .contains_key(&(ObjectKind::Sub, name.to_string()))
        {
            return Err(mqerr!(UNKNOWN_OBJECT_NAME, "SUB '{name}' is not defined"));
        }
        if self.pubsub.in_use.contains_key(name) {
            return Err(mqerr!(
                SUBSCRIPTION_IN_USE,
                "SUB '{name}' is open through an application's handle; it can be deleted once closed"
            ));
        }
        self.remove_sub(name, true)
    }

    /// Removes expired subscriptions that no handle has open (durable ones with a DeleteObject
    /// record; publications already skip them). Returns how many.
    pub fn expire_subscriptions(&mut self, now_ms: u64) -> Result<usize, MqError> {
        let expired: Vec<Arc<Sub>> = self
            .all_subs()
            .into_iter()
            .filter(|s| s.is_expired(now_ms) && !self.pubsub.in_use.contains_key(&s.name))
            .collect();
        for s in &expired {
            self.remove_sub(&s.name, s.durable)?;
        }
        Ok(expired.len())
    }

    /// Ends the subscription handles of a connection that is going away.
    pub(crate) fn close_subs_of(&mut self, conn: ConnId, now_ms: u64) {
        let hsubs: Vec<u32> = self
            .conns
            .get(&conn)
            .map(|c| c.subs.keys().copied().collect())
            .unwrap_or_default();
        for h in hsubs {
            let _ = self.close_sub(conn, h, 0, now_ms);
        }
    }
}

/// What a subscription's copy of a publication is.
enum Copy {
    /// The publication as published.
    Same,
    /// The publication, not persistent (for a temporary queue).
    NonPersistent,
    /// Its own descriptor and body (behind a transmission header; the retained copy).
    Wrapped(Box<MessageDescriptor>, Bytes),
}

/// Whether the topic's delivery rule (PMSGDLV, NPMSGDLV) needs a subscription that cannot take
/// a copy: then the publication fails and no one gets it.
fn attrs_require(attrs: &TopicAttrs, persistent: bool, durable: bool) -> bool {
    match if persistent {
        attrs.pmsgdlv
    } else {
        attrs.npmsgdlv
    } {
        Delivery::All => true,
        Delivery::AllDur => durable,
        Delivery::AllAvail => false,
    }
}

fn undelivered(topic: &str, s: &Sub, e: &MqError, persistent: bool) -> MqError {
    MqError::new(
        e.reason,
        format!(
            "publication on '{topic}' not delivered to anyone: subscription '{}' cannot take it ({}); the topic's {} needs it to",
            s.name,
            e.message,
            if persistent { "PMSGDLV" } else { "NPMSGDLV" },
        ),
    )
}

/// The keys of the retained publications on `q` whose topic passes `f`.
fn retained_keys(q: &crate::queue::Queue, f: impl Fn(&str) -> bool) -> Vec<crate::queue::Key> {
    q.iter()
        .filter(|(_, e)| matches!(e.msg.props().get(TOPIC_PROPERTY), Some(PropertyValue::String(t)) if f(t)))
        .map(|(k, _)| *k)
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02X}")).collect()
}
