//! Administration of objects: define, alter, delete and display queues and other objects, the queue
//! manager's attributes, the default objects every new queue manager has, and MQINQ.

use ferrymq_types::limits::MSG_LEN_MAX_BYTES;
use ferrymq_types::objects::validate_object_name;
use ferrymq_types::options::open;
use ferrymq_types::{
    mqerr, DynamicKind, MqError, MsgDeliverySequence, ObjectDef, ObjectKind, ObjectTimes,
    QmgrAttrs, QueueDef, QueueKind,
};

use crate::conn::ConnId;
use crate::message::Lsn;
use crate::queue::{Key, Queue};
use crate::records::Record;
use crate::Engine;

/// Live status of a queue (MQ's DISPLAY QSTATUS fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStatus {
    pub name: String,
    pub cur_depth: u32,
    pub open_input: u32,
    pub open_output: u32,
    /// Messages put or got under syncpoint and not yet committed.
    pub uncommitted: u32,
    pub oldest_put_ms: Option<u64>,
    pub last_put_ms: u64,
    pub last_get_ms: u64,
}

impl Engine {
    /// Defines a queue (or replaces an existing one of the same kind, keeping its messages).
    pub fn define_queue(&mut self, def: QueueDef, replace: bool) -> Result<Lsn, MqError> {
        validate_object_name(&def.name)
            .map_err(|e| mqerr!(OBJECT_TYPE_ERROR, "queue name: {e}"))?;
        if def.max_msg_len > MSG_LEN_MAX_BYTES {
            return Err(mqerr!(
                DATA_LENGTH_ERROR,
                "MAXMSGL {} of '{}' is above the largest FerryMQ supports ({MSG_LEN_MAX_BYTES})",
                def.max_msg_len,
                def.name
            ));
        }
        if let Some(existing) = self.queues.get(&def.name) {
            if !replace {
                return Err(mqerr!(
                    OBJECT_ALREADY_EXISTS,
                    "queue '{}' already exists; use REPLACE to change it",
                    def.name
                ));
            }
            if std::mem::discriminant(&existing.def.kind) != std::mem::discriminant(&def.kind) {
                return Err(mqerr!(
                    OBJECT_TYPE_ERROR,
                    "'{}' exists as a {}, not a {}; delete it first",
                    def.name,
                    existing.def.kind.mq_name(),
                    def.kind.mq_name()
                ));
            }
        }
        let lsn = self.log_record(&Record::DefineQueue(def.clone()))?;
        self.apply_define_queue(def);
        Ok(lsn)
    }

    pub(crate) fn apply_define_queue(&mut self, def: QueueDef) {
        match self.queues.get_mut(&def.name) {
            Some(q) => {
                let name = def.name.clone();
                if q.set_def(def) {
                    self.rekey_browse_cursors(&name);
                }
            }
            None => {
                self.queues.insert(def.name.clone(), Queue::new(def));
            }
        }
    }

    /// Deletes a queue. A local queue must be closed and, unless `purge`, empty.
    pub fn delete_queue(&mut self, name: &str, purge: bool) -> Result<Lsn, MqError> {
        let q = self
            .queues
            .get(name)
            .ok_or_else(|| self.no_such_queue(name))?;
        if q.stats.open_input + q.stats.open_output > 0 || self.handles_on(name) > 0 {
            return Err(mqerr!(
                OBJECT_IN_USE,
                "queue '{name}' is open by {} handle(s); close them first",
                self.handles_on(name)
            ));
        }
        if q.uncommitted_puts > 0 || q.locked > 0 {
            return Err(mqerr!(
                Q_NOT_EMPTY,
                "queue '{name}' has uncommitted puts or gets; they must end first"
            ));
        }
        if q.depth() > 0 && !purge {
            return Err(mqerr!(
                Q_NOT_EMPTY,
                "queue '{name}' holds {} message(s); clear it or delete with PURGE",
                q.depth()
            ));
        }
        self.remove_queue(name)
    }

    /// Removes every committed message from a local queue (CLEAR QLOCAL).
    pub fn clear_queue(&mut self, name: &str) -> Result<Lsn, MqError> {
        let q = self
            .queues
            .get(name)
            .ok_or_else(|| self.no_such_queue(name))?;
        if !q.def.holds_messages() {
            return Err(mqerr!(
                Q_TYPE_ERROR,
                "'{name}' is a {}; only local queues hold messages",
                q.def.kind.mq_name()
            ));
        }
        if q.uncommitted_puts > 0 || q.locked > 0 || q.stats.open_input > 0 {
            return Err(mqerr!(
                OBJECT_IN_USE,
                "queue '{name}' is in use (open for input or in a unit of work)"
            ));
        }
        let lsn = self.log_record(&Record::ClearQueue(name.to_string()))?;
        self.queues.get_mut(name).expect("checked").drain();
        Ok(lsn)
    }

    /// After a queue was re-keyed, moves each browse cursor on it to its message's new key (or,
    /// for a message gone since, to where its sequence number now sorts).
    fn rekey_browse_cursors(&mut self, name: &str) {
        let Some(q) = self.queues.get(name) else {
            return;
        };
        for c in self.conns.values_mut() {
            for h in c.handles.values_mut() {
                if h.queue != name {
                    continue;
                }
                if let Some(k) = h.browse_cursor {
                    let rank = match q.key_of_seq(k.seq(), k.rank()) {
                        Some(now) => now.rank(),
                        None if q.def.msg_delivery_sequence == MsgDeliverySequence::Fifo => 0,
                        None => k.rank(),
                    };
                    h.browse_cursor = Some(Key::new(rank, k.seq()));
                }
            }
        }
    }

    pub(crate) fn handles_on(&self, name: &str) -> usize {
        self.conns
            .values()
            .flat_map(|c| c.handles.values())
            .filter(|h| h.queue == name || h.alias.as_deref() == Some(name))
            .count()
    }

    pub fn define_object(&mut self, def: ObjectDef, replace: bool) -> Result<Lsn, MqError> {
        if !def.kind.is_security_record() {
            validate_object_name(&def.name)
                .map_err(|e| mqerr!(OBJECT_TYPE_ERROR, "{} name: {e}", def.kind.mq_name()))?;
        }
        if !replace && self.objects.contains_key(&(def.kind, def.name.clone())) {
            return Err(mqerr!(
                OBJECT_ALREADY_EXISTS,
                "{} '{}' already exists; use REPLACE to change it",
                def.kind.mq_name(),
                def.name
            ));
        }
        let lsn = self.log_record(&Record::DefineObject(def.clone()))?;
        let (kind, name) = (def.kind, def.name.clone());
        self.objects.insert((kind, name.clone()), def);
        self.objects_version += 1;
        self.ps_object_changed(kind, &name);
        Ok(lsn)
    }

    pub fn delete_object(&mut self, kind: ObjectKind, name: &str) -> Result<Lsn, MqError> {
        if !self.objects.contains_key(&(kind, name.to_string())) {
            return Err(mqerr!(
                UNKNOWN_OBJECT_NAME,
                "{} '{name}' is not defined",
                kind.mq_name()
            ));
        }
        let lsn = self.log_record(&Record::DeleteObject(kind, name.to_string()))?;
        self.objects.remove(&(kind, name.to_string()));
        self.objects_version += 1;
        self.ps_object_changed(kind, name);
        Ok(lsn)
    }

    pub fn object(&self, kind: ObjectKind, name: &str) -> Option<&ObjectDef> {
        self.objects.get(&(kind, name.to_string()))
    }

    pub fn objects(&self) -> impl Iterator<Item = &ObjectDef> {
        self.objects.values()
    }

    /// A number that changes whenever an object other than a queue is defined, replaced or
    /// deleted: a cache built from [`Engine::objects`] is current while it stays the same.
    pub fn objects_version(&self) -> u64 {
        self.objects_version
    }

    /// Every local queue (with its depth and counters), for status and metrics.
    pub fn local_queues(&self) -> impl Iterator<Item = &Queue> {
        self.queues
            .values()
            .filter(|q| matches!(q.def.kind, QueueKind::Local))
    }

    pub fn set_qmgr_attrs(&mut self, attrs: QmgrAttrs) -> Result<Lsn, MqError> {
        if attrs.max_msg_len > MSG_LEN_MAX_BYTES {
            return Err(mqerr!(
                DATA_LENGTH_ERROR,
                "MAXMSGL {} is above the largest FerryMQ supports ({MSG_LEN_MAX_BYTES})",
                attrs.max_msg_len
            ));
        }
        let lsn = self.log_record(&Record::QmgrAttrs(attrs.clone()))?;
        self.attrs = attrs;
        Ok(lsn)
    }

    /// Every queue's definition, sorted by name.
    pub fn queue_defs(&self) -> Vec<&QueueDef> {
        let mut v: Vec<&QueueDef> = self.queues.values().map(|q| &q.def).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    pub fn queue_status(&self, name: &str) -> Option<QueueStatus> {
        let q = self.queues.get(name)?;
        Some(QueueStatus {
            name: name.to_string(),
            cur_depth: q.depth(),
            open_input: q.stats.open_input,
            open_output: q.stats.open_output,
            uncommitted: q.uncommitted_puts + q.locked,
            oldest_put_ms: q.oldest_put_ms(),
            last_put_ms: q.stats.last_put_ms,
            last_get_ms: q.stats.last_get_ms,
        })
    }

    /// Creates the objects every queue manager starts with, as MQ's scripts expect them, with no
    /// creation times and no QMID (an HA group's instances must start from identical state; the
    /// first active instance gives the group its identity, see [`Engine::assign_identity`]).
    pub fn install_defaults(&mut self) -> Result<(), MqError> {
        self.install_defaults_at(0, 0)
    }

    /// As [`Engine::install_defaults`], for a queue manager created at `now_ms`: the objects
    /// and the queue manager record that time, and the QMID is made from the name and `stamp`
    /// (a value unique to this creation, e.g. the time in nanoseconds).
    pub fn install_defaults_at(&mut self, now_ms: u64, stamp: u64) -> Result<(), MqError> {
        let times = ObjectTimes::at(now_ms);
        let local = |name: &str| QueueDef::local(name);
        let model =
            |name: &str, t: DynamicKind| QueueDef::new(name, QueueKind::Model { def_type: t });
        let mut queues = vec![
            local("SYSTEM.DEFAULT.LOCAL.QUEUE"),
            local("SYSTEM.DEAD.LETTER.QUEUE"),
            local("SYSTEM.ADMIN.COMMAND.QUEUE"),
            model("SYSTEM.DEFAULT.MODEL.QUEUE", DynamicKind::Temporary),
            model("SYSTEM.JMS.MODEL.QUEUE", DynamicKind::Temporary),
            model("SYSTEM.JMS.TEMPQ.MODEL", DynamicKind::Temporary),
            // Publish/subscribe: the models of managed subscriptions' queues, and the queue
            // retained publications are kept on.
            model(crate::pubsub::DURABLE_MODEL, DynamicKind::Permanent),
            model(crate::pubsub::NDURABLE_MODEL, DynamicKind::Temporary),
            local(crate::pubsub::RETAINED_QUEUE),
        ];
        for q in &mut queues {
            if q.name == "SYSTEM.DEAD.LETTER.QUEUE" || q.name == crate::pubsub::RETAINED_QUEUE {
                q.max_depth = 999_999_999;
            }
        }
        for mut q in queues {
            q.times = times;
            self.define_queue(q, true)?;
        }
        let obj = |kind, name: &str, attrs: &[(&str, &str)]| ObjectDef {
            kind,
            name: name.to_string(),
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            times,
        };
        let svrconn = [
            ("CHLTYPE", "SVRCONN"),
            ("TRPTYPE", "TCP"),
            ("SHARECNV", "10"),
            ("MAXMSGL", "4194304"),
        ];
        for o in [
            obj(ObjectKind::Channel, "SYSTEM.DEF.SVRCONN", &svrconn),
            obj(ObjectKind::Channel, "SYSTEM.ADMIN.SVRCONN", &svrconn),
            obj(
                ObjectKind::Listener,
                "SYSTEM.DEFAULT.LISTENER.TCP",
                &[("TRPTYPE", "TCP"), ("PORT", "0"), ("CONTROL", "MANUAL")],
            ),
            // The root of the topic tree (the empty topic string) and the object DEFINE TOPIC
            // copies from.
            obj(
                ObjectKind::Topic,
                crate::pubsub::BASE_TOPIC,
                &[
                    ("TOPICSTR", ""),
                    ("PUB", "ENABLED"),
                    ("SUB", "ENABLED"),
                    ("DURSUB", "YES"),
                    ("DEFPSIST", "NO"),
                    ("DEFPRTY", "0"),
                    ("PMSGDLV", "ALLDUR"),
                    ("NPMSGDLV", "ALLAVAIL"),
                    ("MDURMDL", crate::pubsub::DURABLE_MODEL),
                    ("MNDURMDL", crate::pubsub::NDURABLE_MODEL),
                ],
            ),
            obj(
                ObjectKind::Topic,
                "SYSTEM.DEFAULT.TOPIC",
                &[("TOPICSTR", "")],
            ),
            obj(
                ObjectKind::AuthInfo,
                "SYSTEM.DEFAULT.AUTHINFO.IDPWOS",
                &[("AUTHTYPE", "IDPWOS"), ("CHCKCLNT", "REQDADM")],
            ),
        ] {
            self.define_object(o, true)?;
        }
        let mut attrs = self.attrs.clone();
        if stamp != 0 {
            attrs.qmid = qmid(self.qmgr_name(), stamp);
        }
        attrs.times = times;
        self.set_qmgr_attrs(attrs)?;
        Ok(())
    }

    /// Gives a queue manager that has no QMID one (and its creation time, if it has none): an
    /// HA group's first active instance, or a queue manager created before FerryMQ kept them.
    /// Logged like ALTER QMGR, so every instance, replica and restart sees the same identity.
    /// Returns None when there was nothing to do.
    pub fn assign_identity(&mut self, now_ms: u64, stamp: u64) -> Option<Result<Lsn, MqError>> {
        if !self.attrs.qmid.is_empty() {
            return None;
        }
        let mut attrs = self.attrs.clone();
        attrs.qmid = qmid(self.qmgr_name(), stamp);
        if attrs.times.created_ms == 0 {
            attrs.times = ObjectTimes::at(now_ms);
        }
        Some(self.set_qmgr_attrs(attrs))
    }

    /// The time the server last gave the engine (see [`Engine::note_time`]).
    pub fn noted_time(&self) -> u64 {
        self.now_hint_ms
    }

    /// Tells the engine the current time, for the records of verbs that take none (a dynamic
    /// queue created by MQOPEN records its creation time). The engine has no clock of its own.
    pub fn note_time(&mut self, now_ms: u64) {
        self.now_hint_ms = now_ms;
    }

    /// MQINQ on an open handle: the named attributes of its queue (all when `selectors` is empty).
    pub fn inquire(
        &self,
        conn: ConnId,
        hobj: u32,
        selectors: &[String],
    ) -> Result<Vec<(String, String)>, MqError> {
        let h = self.handle(conn, hobj)?;
        if h.options & open::INQUIRE == 0 {
            return Err(mqerr!(
                NOT_OPEN_FOR_INQUIRE,
                "'{}' was not opened for inquire (MQOO_INQUIRE)",
                h.opened_name
            ));
        }
        let name = h.alias.as_deref().unwrap_or(&h.queue);
        let q = self
            .queues
            .get(name)
            .ok_or_else(|| mqerr!(Q_DELETED, "queue '{name}' has been deleted"))?;
        let all = queue_attributes(q);
        if selectors.is_empty() {
            return Ok(all);
        }
        selectors
            .iter()
            .map(|s| {
                let s = s.to_ascii_uppercase();
                all.iter().find(|(k, _)| *k == s).cloned().ok_or_else(|| {
                    mqerr!(
                        SELECTOR_ERROR,
                        "'{s}' is not an attribute of queue '{name}' that MQINQ can return"
                    )
                })
            })
            .collect()
    }
}

/// A QMID as MQ builds one: the queue manager's name, `_`, and a value unique to its creation.
fn qmid(name: &str, stamp: u64) -> String {
    format!("{name}_{stamp:016X}")
}

fn yes_no(b: bool, yes: &str, no: &str) -> String {
    if b { yes } else { no }.to_string()
}

/// A queue's attributes as MQSC keyword/value pairs.
pub fn queue_attributes(q: &Queue) -> Vec<(String, String)> {
    let d = &q.def;
    let mut v = vec![
        ("QUEUE".to_string(), d.name.clone()),
        ("TYPE".to_string(), d.kind.mq_name().to_string()),
        ("DESCR".to_string(), d.description.clone()),
        (
            "PUT".to_string(),
            yes_no(d.put_inhibited, "DISABLED", "ENABLED"),
        ),
        ("DEFPRTY".to_string(), d.def_priority.to_string()),
        (
            "DEFPSIST".to_string(),
            yes_no(d.def_persistent, "YES", "NO"),
        ),
    ];
    match &d.kind {
        QueueKind::Local => {
            v.push(("GET".into(), yes_no(d.get_inhibited, "DISABLED", "ENABLED")));
            v.push(("MAXDEPTH".into(), d.max_depth.to_string()));
            v.push(("MAXMSGL".into(), d.max_msg_len.to_string()));
            v.push(("CURDEPTH".into(), q.depth().to_string()));
            v.push(("IPPROCS".into(), q.stats.open_input.to_string()));
            v.push(("OPPROCS".into(), q.stats.open_output.to_string()));
            v.push((
                "MSGDLVSQ".into(),
                format!("{:?}", d.msg_delivery_sequence).to_ascii_uppercase(),
            ));
            v.push(("BOTHRESH".into(), d.backout_threshold.to_string()));
            v.push(("BOQNAME".into(), d.backout_queue.clone()));
            v.push(("USAGE".into(), yes_no(d.is_xmitq, "XMITQ", "NORMAL")));
            if let Some(k) = d.dynamic {
                v.push((
                    "DEFTYPE".into(),
                    yes_no(k == DynamicKind::Permanent, "PERMDYN", "TEMPDYN"),
                ));
            } else {
                v.push(("DEFTYPE".into(), "PREDEFINED".into()));
            }
        }
        QueueKind::Alias { target } => {
            v.push(("GET".into(), yes_no(d.get_inhibited, "DISABLED", "ENABLED")));
            v.push(("TARGET".into(), target.clone()));
        }
        QueueKind::Model { def_type } => {
            v.push(("GET".into(), yes_no(d.get_inhibited, "DISABLED", "ENABLED")));
            v.push(("MAXDEPTH".into(), d.max_depth.to_string()));
            v.push(("MAXMSGL".into(), d.max_msg_len.to_string()));
            v.push((
                "DEFTYPE".into(),
                yes_no(*def_type == DynamicKind::Permanent, "PERMDYN", "TEMPDYN"),
            ));
        }
        QueueKind::Remote {
            rname,
            rqmname,
            xmitq,
        } => {
            v.push(("RNAME".into(), rname.clone()));
            v.push(("RQMNAME".into(), rqmname.clone()));
            v.push(("XMITQ".into(), xmitq.clone()));
        }
    }
    for (k, val) in &d.other {
        v.push((k.clone(), val.clone()));
    }
    v
}

/// An open handle as DISPLAY QSTATUS TYPE(HANDLE) and DISPLAY CONN show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleInfo {
    pub hobj: u32,
    /// The local queue the handle reaches.
    pub queue: String,
    /// The name opened (an alias or the queue itself).
    pub opened_name: String,
    pub options: u32,
}

/// A connection as DISPLAY CONN shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnInfo {
    pub id: ConnId,
    pub user: String,
    pub app: String,
    pub handles: Vec<HandleInfo>,
    /// Messages put or got in its unit of work.
    pub uow_msgs: usize,
    pub waiting: bool,
}

impl Engine {
    /// Every connection with its open handles, ordered by id.
    pub fn connections(&self) -> Vec<ConnInfo> {
        let mut v: Vec<ConnInfo> = self
            .conns
            .values()
            .map(|c| {
                let mut handles: Vec<HandleInfo> = c
                    .handles
                    .iter()
                    .map(|(h, x)| HandleInfo {
                        hobj: *h,
                        queue: x.queue.clone(),
                        opened_name: x.opened_name.clone(),
                        options: x.options,
                    })
                    .collect();
                handles.sort_by_key(|h| h.hobj);
                ConnInfo {
                    id: c.id,
                    user: c.user.clone(),
                    app: c.app.clone(),
                    handles,
                    uow_msgs: c.uow.len(),
                    waiting: c.waiting.is_some(),
                }
            })
            .collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// Replaces a queue's definition in place (ALTER), keeping its messages. The kind cannot change.
    pub fn alter_queue(&mut self, def: QueueDef) -> Result<Lsn, MqError> {
        if !self.queues.contains_key(&def.name) {
            return Err(self.no_such_queue(&def.name));
        }
        self.define_queue(def, true)
    }
}
