//! Definitions of the objects a queue manager holds: queues of every kind with MQ's attributes, and
//! the other named objects (channels, listeners, authentication information) whose full behaviour
//! arrives with later capabilities. Attributes that are accepted but not yet acted upon are kept
//! verbatim in `other` so that nothing an administrator set is silently dropped.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};

use crate::codec::{Codec, DecodeError, PutExt, Reader};
use crate::limits::{MSG_LEN_DEFAULT_BYTES, QUEUE_DEPTH_DEFAULT};

/// MSGDLVSQ: the order in which messages are delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MsgDeliverySequence {
    /// Highest priority first, FIFO within a priority (MQ's default).
    #[default]
    Priority,
    /// FIFO regardless of priority.
    Fifo,
}

/// DEFTYPE of a model queue: what a dynamic queue created from it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DynamicKind {
    /// Deleted when closed by its creator; holds only non-persistent messages.
    #[default]
    Temporary,
    /// Survives restart; deleted only when closed with MQCO_DELETE or by an administrator.
    Permanent,
}

/// The kind of a queue and the attributes only that kind has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueKind {
    Local,
    /// An alias for another queue (TARGET).
    Alias {
        target: String,
    },
    /// A template from which dynamic queues are created.
    Model {
        def_type: DynamicKind,
    },
    /// A definition of a queue on another queue manager.
    Remote {
        rname: String,
        rqmname: String,
        xmitq: String,
    },
}

impl QueueKind {
    pub fn mq_name(&self) -> &'static str {
        match self {
            QueueKind::Local => "QLOCAL",
            QueueKind::Alias { .. } => "QALIAS",
            QueueKind::Model { .. } => "QMODEL",
            QueueKind::Remote { .. } => "QREMOTE",
        }
    }
}

/// A queue definition with MQ's attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueDef {
    pub name: String,
    pub kind: QueueKind,
    pub description: String,
    pub max_depth: u32,
    pub max_msg_len: u32,
    /// DEFPSIST: persistence of messages put with MQPER_PERSISTENCE_AS_Q_DEF.
    pub def_persistent: bool,
    pub def_priority: i32,
    pub msg_delivery_sequence: MsgDeliverySequence,
    pub put_inhibited: bool,
    pub get_inhibited: bool,
    /// BOTHRESH: backouts after which a message moves to BOQNAME (0 = never).
    pub backout_threshold: u32,
    pub backout_queue: String,
    /// USAGE(XMITQ) marks a transmission queue.
    pub is_xmitq: bool,
    /// Set when this queue was created from a model: how it behaves on close.
    pub dynamic: Option<DynamicKind>,
    /// Accepted attributes FerryMQ stores and displays but does not act on yet.
    pub other: BTreeMap<String, String>,
    /// When it was defined and last altered (ms since the epoch, UTC; 0: not recorded, as in
    /// definitions logged before FerryMQ kept them). Chosen by the running queue manager and
    /// logged with the definition, so replay restores them rather than reading the clock.
    pub times: ObjectTimes,
}

/// CRDATE/CRTIME and ALTDATE/ALTTIME of an object, in milliseconds since the epoch (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ObjectTimes {
    pub created_ms: u64,
    pub altered_ms: u64,
}

impl ObjectTimes {
    /// A new object's times: created and last altered now.
    pub fn at(now_ms: u64) -> ObjectTimes {
        ObjectTimes {
            created_ms: now_ms,
            altered_ms: now_ms,
        }
    }

    /// Encoded after everything else a definition holds: records and checkpoints written before
    /// the times existed simply end earlier, and decode as 0 (not recorded).
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.created_ms);
        out.put_u64_le(self.altered_ms);
    }

    fn decode_trailing(r: &mut Reader) -> Result<ObjectTimes, DecodeError> {
        if r.remaining() == 0 {
            return Ok(ObjectTimes::default());
        }
        Ok(ObjectTimes {
            created_ms: r.u64("creation time")?,
            altered_ms: r.u64("alteration time")?,
        })
    }
}

impl QueueDef {
    /// A local queue with MQ's default attributes.
    pub fn local(name: impl Into<String>) -> QueueDef {
        QueueDef::new(name, QueueKind::Local)
    }

    pub fn new(name: impl Into<String>, kind: QueueKind) -> QueueDef {
        QueueDef {
            name: name.into(),
            kind,
            description: String::new(),
            max_depth: QUEUE_DEPTH_DEFAULT,
            max_msg_len: MSG_LEN_DEFAULT_BYTES,
            def_persistent: false,
            def_priority: 0,
            msg_delivery_sequence: MsgDeliverySequence::Priority,
            put_inhibited: false,
            get_inhibited: false,
            backout_threshold: 0,
            backout_queue: String::new(),
            is_xmitq: false,
            dynamic: None,
            other: BTreeMap::new(),
            times: ObjectTimes::default(),
        }
    }

    /// True for queues that hold messages (local queues, including dynamic ones).
    pub fn holds_messages(&self) -> bool {
        self.kind == QueueKind::Local
    }
}

fn put_map(out: &mut BytesMut, m: &BTreeMap<String, String>) {
    out.put_u16_le(m.len() as u16);
    for (k, v) in m {
        out.put_str16(k);
        out.put_str16(v);
    }
}

fn get_map(r: &mut Reader) -> Result<BTreeMap<String, String>, DecodeError> {
    let n = r.u16("attribute count")?;
    let mut m = BTreeMap::new();
    for _ in 0..n {
        let k = r.str16("attribute name")?;
        let v = r.str16("attribute value")?;
        m.insert(k, v);
    }
    Ok(m)
}

fn dyn_to_u8(d: Option<DynamicKind>) -> u8 {
    match d {
        None => 0,
        Some(DynamicKind::Temporary) => 1,
        Some(DynamicKind::Permanent) => 2,
    }
}

fn dyn_from_u8(v: u8) -> Result<Option<DynamicKind>, DecodeError> {
    Ok(match v {
        0 => None,
        1 => Some(DynamicKind::Temporary),
        2 => Some(DynamicKind::Permanent),
        _ => return Err(DecodeError::invalid("dynamic kind", format!("value {v}"))),
    })
}

impl Codec for QueueDef {
    fn encode(&self, out: &mut BytesMut) {
        out.put_str16(&self.name);
        match &self.kind {
            QueueKind::Local => out.put_u8(1),
            QueueKind::Alias { target } => {
                out.put_u8(2);
                out.put_str16(target);
            }
            QueueKind::Model { def_type } => {
                out.put_u8(3);
                out.put_u8(dyn_to_u8(Some(*def_type)));
            }
            QueueKind::Remote {
                rname,
                rqmname,
                xmitq,
            } => {
                out.put_u8(4);
                out.put_str16(rname);
                out.put_str16(rqmname);
                out.put_str16(xmitq);
            }
        }
        out.put_str16(&self.description);
        out.put_u32_le(self.max_depth);
        out.put_u32_le(self.max_msg_len);
        out.put_bool(self.def_persistent);
        out.put_i32_le(self.def_priority);
        out.put_u8(match self.msg_delivery_sequence {
            MsgDeliverySequence::Priority => 0,
            MsgDeliverySequence::Fifo => 1,
        });
        out.put_bool(self.put_inhibited);
        out.put_bool(self.get_inhibited);
        out.put_u32_le(self.backout_threshold);
        out.put_str16(&self.backout_queue);
        out.put_bool(self.is_xmitq);
        out.put_u8(dyn_to_u8(self.dynamic));
        put_map(out, &self.other);
        self.times.encode(out);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let name = r.str16("queue name")?;
        let kind = match r.u8("queue kind")? {
            1 => QueueKind::Local,
            2 => QueueKind::Alias {
                target: r.str16("alias target")?,
            },
            3 => QueueKind::Model {
                def_type: dyn_from_u8(r.u8("model deftype")?)?
                    .ok_or_else(|| DecodeError::invalid("model deftype", "none"))?,
            },
            4 => QueueKind::Remote {
                rname: r.str16("rname")?,
                rqmname: r.str16("rqmname")?,
                xmitq: r.str16("xmitq")?,
            },
            k => return Err(DecodeError::invalid("queue kind", format!("tag {k}"))),
        };
        Ok(QueueDef {
            name,
            kind,
            description: r.str16("descr")?,
            max_depth: r.u32("maxdepth")?,
            max_msg_len: r.u32("maxmsgl")?,
            def_persistent: r.bool("defpsist")?,
            def_priority: r.i32("defprty")?,
            msg_delivery_sequence: match r.u8("msgdlvsq")? {
                0 => MsgDeliverySequence::Priority,
                1 => MsgDeliverySequence::Fifo,
                v => return Err(DecodeError::invalid("msgdlvsq", format!("value {v}"))),
            },
            put_inhibited: r.bool("put")?,
            get_inhibited: r.bool("get")?,
            backout_threshold: r.u32("bothresh")?,
            backout_queue: r.str16("boqname")?,
            is_xmitq: r.bool("usage")?,
            dynamic: dyn_from_u8(r.u8("dynamic")?)?,
            other: get_map(r)?,
            times: ObjectTimes::decode_trailing(r)?,
        })
    }
}

/// Kinds of non-queue objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Channel,
    Listener,
    AuthInfo,
    /// A channel authentication record (SET CHLAUTH), named by its key: profile, type and
    /// what it matches.
    ChlAuth,
    /// An authority record (SET AUTHREC), named by its key: object type, profile and entity.
    AuthRec,
    /// A topic object: a node of the topic tree (TOPICSTR) and its publish/subscribe defaults.
    Topic,
    /// A durable subscription (MQSUB with MQSO_DURABLE, or DEFINE SUB), named by its
    /// subscription name. Non-durable subscriptions are never objects: they live and die with
    /// their connection.
    Sub,
}

impl ObjectKind {
    pub fn mq_name(self) -> &'static str {
        match self {
            ObjectKind::Channel => "CHANNEL",
            ObjectKind::Listener => "LISTENER",
            ObjectKind::AuthInfo => "AUTHINFO",
            ObjectKind::ChlAuth => "CHLAUTH",
            ObjectKind::AuthRec => "AUTHREC",
            ObjectKind::Topic => "TOPIC",
            ObjectKind::Sub => "SUB",
        }
    }

    /// The tag that stands for the kind in log records and checkpoints.
    pub fn tag(self) -> u8 {
        match self {
            ObjectKind::Channel => 1,
            ObjectKind::Listener => 2,
            ObjectKind::AuthInfo => 3,
            ObjectKind::ChlAuth => 4,
            ObjectKind::AuthRec => 5,
            ObjectKind::Topic => 6,
            ObjectKind::Sub => 7,
        }
    }

    pub fn from_tag(tag: u8) -> Result<ObjectKind, DecodeError> {
        Ok(match tag {
            1 => ObjectKind::Channel,
            2 => ObjectKind::Listener,
            3 => ObjectKind::AuthInfo,
            4 => ObjectKind::ChlAuth,
            5 => ObjectKind::AuthRec,
            6 => ObjectKind::Topic,
            7 => ObjectKind::Sub,
            k => return Err(DecodeError::invalid("object kind", format!("tag {k}"))),
        })
    }

    /// Security records (CHLAUTH, AUTHREC) are keyed by what they match, not by an MQ object
    /// name, and are set with SET rather than DEFINE.
    pub fn is_security_record(self) -> bool {
        matches!(self, ObjectKind::ChlAuth | ObjectKind::AuthRec)
    }
}

/// A non-queue object: its kind, name and attributes (MQSC keyword to value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectDef {
    pub kind: ObjectKind,
    pub name: String,
    pub attrs: BTreeMap<String, String>,
    pub times: ObjectTimes,
}

impl Codec for ObjectDef {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.kind.tag());
        out.put_str16(&self.name);
        put_map(out, &self.attrs);
        self.times.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let kind = ObjectKind::from_tag(r.u8("object kind")?)?;
        Ok(ObjectDef {
            kind,
            name: r.str16("object name")?,
            attrs: get_map(r)?,
            times: ObjectTimes::decode_trailing(r)?,
        })
    }
}

/// Checks an MQ object name: 1..=48 characters from A-Z a-z 0-9 . / _ %.
pub fn validate_object_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > crate::limits::OBJECT_NAME_LEN_MAX {
        return Err(format!(
            "'{name}' is longer than {} characters",
            crate::limits::OBJECT_NAME_LEN_MAX
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._/%".contains(*c)))
    {
        return Err(format!(
            "'{name}' contains '{c}'; names use A-Z, a-z, 0-9, '.', '/', '_' and '%'"
        ));
    }
    Ok(())
}

/// Checks a queue manager name: MQ's character set (A-Z a-z 0-9 . / _ %), 1 to
/// [`QMGR_NAME_LEN_MAX`](crate::limits::QMGR_NAME_LEN_MAX) characters, and not `.` or `..`.
pub fn validate_qmgr_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the queue manager name is empty".into());
    }
    if name.len() > crate::limits::QMGR_NAME_LEN_MAX {
        return Err(format!(
            "queue manager name '{name}' is longer than {} characters",
            crate::limits::QMGR_NAME_LEN_MAX
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._/%".contains(*c)))
    {
        return Err(format!(
            "queue manager name '{name}' contains '{c}'; names use A-Z, a-z, 0-9, '.', '/', '_' and '%'"
        ));
    }
    if name.chars().all(|c| c == '.') {
        return Err(format!("queue manager name '{name}' is made of dots only"));
    }
    Ok(())
}

/// The error log's files in a queue manager's `errors/` directory, newest first (rotated by size,
/// as MQ keeps `AMQERR01..03.LOG`).
pub const ERROR_LOG_FILES: [&str; 3] = ["FMQERR01.LOG", "FMQERR02.LOG", "FMQERR03.LOG"];
/// The queue manager process's stderr in `errors/`: what did not go through the error log.
pub const CONSOLE_LOG: &str = "console.log";

/// The name of a queue manager's directory under `$FERRYMQ_HOME/qmgrs`, as MQ maps it: `/`
/// becomes `&` and a leading `.` becomes `!`. Neither `&` nor `!` can appear in a valid name, so
/// the mapping is one-to-one, and its result is always one path component that is neither `.`,
/// `..` nor hidden: no name can reach another queue manager's files.
pub fn qmgr_dir_name(name: &str) -> Result<String, String> {
    validate_qmgr_name(name)?;
    let mut out: String = name.replace('/', "&");
    if out.starts_with('.') {
        out.replace_range(0..1, "!");
    }
    Ok(out)
}

/// The queue manager name a directory under `$FERRYMQ_HOME/qmgrs` stands for (the inverse of
/// [`qmgr_dir_name`]); None for a directory no valid name maps to.
pub fn qmgr_name_from_dir(dir: &str) -> Option<String> {
    let mut name = dir.replace('&', "/");
    if name.starts_with('!') {
        name.replace_range(0..1, ".");
    }
    (qmgr_dir_name(&name).ok()? == dir).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qmgr_names_map_to_one_safe_directory_each() {
        for (name, dir) in [
            ("QM1", "QM1"),
            ("SITE/log", "SITE&log"),
            ("a/b/c", "a&b&c"),
            (".hidden", "!hidden"),
            ("x.y%_z", "x.y%_z"),
        ] {
            assert_eq!(qmgr_dir_name(name).unwrap(), dir);
            assert_eq!(qmgr_name_from_dir(dir).as_deref(), Some(name));
        }
        for bad in [
            "",
            ".",
            "..",
            "...",
            "a b",
            "a&b",
            "!x",
            "a\\b",
            &"Q".repeat(49),
        ] {
            assert!(qmgr_dir_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(qmgr_dir_name(&"Q".repeat(48)).is_ok());
        // Directories no name maps to are not queue managers.
        for dir in [".x", "a/b", "a!b", "..", "x y"] {
            assert_eq!(qmgr_name_from_dir(dir), None, "{dir}");
        }
    }

    #[test]
    fn every_queue_kind_round_trips() {
        let kinds = [
            QueueKind::Local,
            QueueKind::Alias { target: "T".into() },
            QueueKind::Model {
                def_type: DynamicKind::Permanent,
            },
            QueueKind::Remote {
                rname: "R".into(),
                rqmname: "QM2".into(),
                xmitq: "XQ".into(),
            },
        ];
        for kind in kinds {
            let mut q = QueueDef::new("Q1", kind);
            q.other.insert("CLUSTER".into(), "C1".into());
            q.dynamic = Some(DynamicKind::Temporary);
            assert_eq!(QueueDef::from_bytes(q.to_bytes()).unwrap(), q);
        }
    }

    #[test]
    fn definitions_written_before_object_times_still_decode() {
        // Older versions ended each definition where the times now start.
        let mut q = QueueDef::local("OLD.Q");
        q.other.insert("CUSTOM".into(), "x".into());
        let mut bytes = q.to_bytes().to_vec();
        q.times = ObjectTimes::at(1_700_000_000_000);
        assert_eq!(QueueDef::from_bytes(q.to_bytes()).unwrap(), q);
        bytes.truncate(bytes.len() - 16);
        let old = QueueDef::from_bytes(bytes.into()).unwrap();
        assert_eq!(old.times, ObjectTimes::default());
        assert_eq!(old.name, "OLD.Q");

        let o = ObjectDef {
            kind: ObjectKind::Listener,
            name: "L".into(),
            attrs: BTreeMap::from([("PORT".into(), "1".into())]),
            times: ObjectTimes::at(5),
        };
        let mut bytes = o.to_bytes().to_vec();
        assert_eq!(ObjectDef::from_bytes(bytes.clone().into()).unwrap(), o);
        bytes.truncate(bytes.len() - 16);
        assert_eq!(
            ObjectDef::from_bytes(bytes.into()).unwrap().times,
            ObjectTimes::default()
        );

        let a = QmgrAttrs {
            qmid: "QM1_0123".into(),
            times: ObjectTimes::at(7),
            ..QmgrAttrs::default()
        };
        let mut bytes = a.to_bytes().to_vec();
        assert_eq!(QmgrAttrs::from_bytes(bytes.clone().into()).unwrap(), a);
        bytes.truncate(bytes.len() - 16 - 2 - a.qmid.len());
        assert_eq!(
            QmgrAttrs::from_bytes(bytes.into()).unwrap(),
            QmgrAttrs::default()
        );
    }

    #[test]
    fn object_names_follow_mq_rules() {
        assert!(validate_object_name("SYSTEM.DEFAULT.LOCAL.QUEUE").is_ok());
        assert!(validate_object_name("").is_err());
        assert!(validate_object_name("has space").is_err());
        assert!(validate_object_name(&"X".repeat(49)).is_err());
    }
}

/// Attributes of the queue manager itself (ALTER QMGR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QmgrAttrs {
    pub description: String,
    pub max_msg_len: u32,
    /// DEADQ: where undeliverable messages go.
    pub dead_letter_queue: String,
    /// MAXUMSGS: most messages in one unit of work.
    pub max_uncommitted_msgs: u32,
    /// Accepted attributes stored and displayed but not acted on yet.
    pub other: BTreeMap<String, String>,
    /// QMID: the queue manager's unique identifier, fixed when it is created (`NAME_` and the
    /// creation time in hex); empty in queue managers created before FerryMQ kept one.
    pub qmid: String,
    /// When the queue manager was created and its attributes last altered.
    pub times: ObjectTimes,
}

impl Default for QmgrAttrs {
    fn default() -> Self {
        QmgrAttrs {
            description: String::new(),
            max_msg_len: MSG_LEN_DEFAULT_BYTES,
            dead_letter_queue: "SYSTEM.DEAD.LETTER.QUEUE".into(),
            max_uncommitted_msgs: crate::limits::UOW_MSGS_MAX,
            other: BTreeMap::new(),
            qmid: String::new(),
            times: ObjectTimes::default(),
        }
    }
}

impl Codec for QmgrAttrs {
    fn encode(&self, out: &mut BytesMut) {
        out.put_str16(&self.description);
        out.put_u32_le(self.max_msg_len);
        out.put_str16(&self.dead_letter_queue);
        out.put_u32_le(self.max_uncommitted_msgs);
        put_map(out, &self.other);
        // Like an object's times, the identity trails what older versions wrote.
        out.put_str16(&self.qmid);
        self.times.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(QmgrAttrs {
            description: r.str16("qmgr descr")?,
            max_msg_len: r.u32("qmgr maxmsgl")?,
            dead_letter_queue: r.str16("deadq")?,
            max_uncommitted_msgs: r.u32("maxumsgs")?,
            other: get_map(r)?,
            qmid: if r.remaining() == 0 {
                String::new()
            } else {
                r.str16("qmid")?
            },
            times: ObjectTimes::decode_trailing(r)?,
        })
    }
}
