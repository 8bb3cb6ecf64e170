//! The message descriptor (MQ's MQMD) and named message properties.

use bytes::{BufMut, BytesMut};

use crate::codec::{Codec, DecodeError, PutExt, Reader};
use crate::limits::PROPERTIES_PER_MSG_MAX;

/// A 24-byte message or correlation identifier, as in MQ.
pub type MsgId = [u8; 24];

/// MQ's all-zero identifier (MQMI_NONE / MQCI_NONE).
pub const ID_NONE: MsgId = [0u8; 24];

/// MQMT_* message types.
pub mod msg_type {
    pub const REQUEST: i32 = 1;
    pub const REPLY: i32 = 2;
    pub const REPORT: i32 = 4;
    pub const DATAGRAM: i32 = 8;
}

/// Whether a message survives a restart of the queue manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Persistence {
    NotPersistent,
    Persistent,
    /// Take the queue's DEFPSIST (MQPER_PERSISTENCE_AS_Q_DEF).
    #[default]
    AsQueueDef,
}

impl Persistence {
    pub fn to_i32(self) -> i32 {
        match self {
            Persistence::NotPersistent => 0,
            Persistence::Persistent => 1,
            Persistence::AsQueueDef => 2,
        }
    }
    pub fn from_i32(v: i32) -> Result<Persistence, DecodeError> {
        match v {
            0 => Ok(Persistence::NotPersistent),
            1 => Ok(Persistence::Persistent),
            2 => Ok(Persistence::AsQueueDef),
            _ => Err(DecodeError::invalid("persistence", format!("value {v}"))),
        }
    }
}

/// MQMF_* message flags: membership of a group and segmentation (MQ's numbers).
pub mod msg_flags {
    pub const SEGMENTATION_INHIBITED: i32 = 0;
    pub const SEGMENTATION_ALLOWED: i32 = 0x1;
    pub const SEGMENT: i32 = 0x2;
    pub const LAST_SEGMENT: i32 = 0x4;
    pub const MSG_IN_GROUP: i32 = 0x8;
    pub const LAST_MSG_IN_GROUP: i32 = 0x10;
    /// Every flag a put may carry.
    pub const KNOWN: i32 =
        SEGMENTATION_ALLOWED | SEGMENT | LAST_SEGMENT | MSG_IN_GROUP | LAST_MSG_IN_GROUP;
    /// The flags that make a message a member of a group.
    pub const IN_GROUP: i32 = MSG_IN_GROUP | LAST_MSG_IN_GROUP;
    /// The flags that make a message a segment of a logical message.
    pub const SEGMENTED: i32 = SEGMENT | LAST_SEGMENT;
}

/// MQOL_UNDEFINED: the OriginalLength of a message that is not a segment.
pub const ORIGINAL_LENGTH_UNDEFINED: i32 = -1;

/// MQGS_* group status and MQSS_* segment status, as a get reports them (MQ's characters).
pub mod status {
    pub const NOT_IN_GROUP: u8 = b' ';
    pub const MSG_IN_GROUP: u8 = b'G';
    pub const LAST_MSG_IN_GROUP: u8 = b'L';
    pub const NOT_A_SEGMENT: u8 = b' ';
    pub const SEGMENT: u8 = b'S';
    pub const LAST_SEGMENT: u8 = b'L';
}

/// Set in the encoded persistence word when the group and segment fields follow the descriptor's
/// last fixed field. Encodings written before these fields existed never set it (persistence is
/// 0..=2), so they decode unchanged, and a message outside any group pays nothing for them.
const EXT_GROUP: i32 = 1 << 8;
/// The persistence value itself; the bits above it flag optional trailing parts.
const PERSISTENCE_MASK: i32 = 0xff;

/// MQPRI_PRIORITY_AS_Q_DEF.
pub const PRIORITY_AS_Q_DEF: i32 = -1;
/// MQEI_UNLIMITED.
pub const EXPIRY_UNLIMITED: i32 = -1;

/// The descriptor that travels with every message.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageDescriptor {
    pub msg_id: MsgId,
    pub correl_id: MsgId,
    pub persistence: Persistence,
    /// 0..=9, or `PRIORITY_AS_Q_DEF`.
    pub priority: i32,
    /// Lifetime in tenths of a second as MQ counts it, or `EXPIRY_UNLIMITED`.
    pub expiry: i32,
    pub msg_type: i32,
    pub format: String,
    pub reply_to_q: String,
    pub reply_to_qmgr: String,
    pub backout_count: u32,
    /// Put time, milliseconds since the Unix epoch (UTC); MQ's PutDate/PutTime are derived from it.
    pub put_time_ms: u64,
    pub user_id: String,
    pub appl_identity: String,
    pub put_appl_name: String,
    pub encoding: i32,
    pub ccsid: i32,
    pub feedback: i32,
    pub report: i32,
    /// Identifies the group the message belongs to (MQ's GroupId; all zeros outside a group).
    pub group_id: MsgId,
    /// Position of the (logical) message in its group, from 1 (MQ's MsgSeqNumber).
    pub msg_seq_number: i32,
    /// Position in bytes of this segment's data in its logical message (MQ's Offset).
    pub offset: i32,
    /// MQMF_* flags (`msg_flags`).
    pub msg_flags: i32,
    /// Length of the logical message a segment was cut from, or `ORIGINAL_LENGTH_UNDEFINED`.
    pub original_length: i32,
}

impl Default for MessageDescriptor {
    fn default() -> Self {
        MessageDescriptor {
            msg_id: crate::descriptor::ID_NONE,
            correl_id: crate::descriptor::ID_NONE,
            persistence: Persistence::AsQueueDef,
            priority: PRIORITY_AS_Q_DEF,
            expiry: EXPIRY_UNLIMITED,
            msg_type: msg_type::DATAGRAM,
            format: String::new(),
            reply_to_q: String::new(),
            reply_to_qmgr: String::new(),
            backout_count: 0,
            put_time_ms: 0,
            user_id: String::new(),
            appl_identity: String::new(),
            put_appl_name: String::new(),
            encoding: 546,
            ccsid: 1208,
            feedback: 0,
            report: 0,
            group_id: ID_NONE,
            msg_seq_number: 1,
            offset: 0,
            msg_flags: 0,
            original_length: ORIGINAL_LENGTH_UNDEFINED,
        }
    }
}

impl MessageDescriptor {
    /// Whether any group or segment field differs from its default (the encoding then carries
    /// them).
    pub fn has_group_fields(&self) -> bool {
        self.borrowed().has_group_fields()
    }

    /// MQ's GroupStatus of a got message (`status::*`).
    pub fn group_status(&self) -> u8 {
        if self.msg_flags & msg_flags::LAST_MSG_IN_GROUP != 0 {
            status::LAST_MSG_IN_GROUP
        } else if self.msg_flags & msg_flags::MSG_IN_GROUP != 0 {
            status::MSG_IN_GROUP
        } else {
            status::NOT_IN_GROUP
        }
    }

    /// MQ's SegmentStatus of a got message (`status::*`).
    pub fn segment_status(&self) -> u8 {
        if self.msg_flags & msg_flags::LAST_SEGMENT != 0 {
            status::LAST_SEGMENT
        } else if self.msg_flags & msg_flags::SEGMENT != 0 {
            status::SEGMENT
        } else {
            status::NOT_A_SEGMENT
        }
    }

    /// MQ's PutDate (`YYYYMMDD`) and PutTime (`HHMMSSTH`), in UTC.
    pub fn put_date_time(&self) -> (String, String) {
        let secs = self.put_time_ms / 1000;
        let hundredths = (self.put_time_ms % 1000) / 10;
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (y, m, d) = crate::time::civil_from_days(days);
        (
            format!("{y:04}{m:02}{d:02}"),
            format!(
                "{:02}{:02}{:02}{:02}",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60,
                hundredths
            ),
        )
    }
}

/// A descriptor's fields borrowed from wherever they are kept, encoded exactly as the owned
/// [`MessageDescriptor`] is (its codec goes through this one): the engine logs a queued message's
/// descriptor from the message itself, without rebuilding six strings per logged message.
#[derive(Clone, Copy, Debug)]
pub struct DescriptorRef<'a> {
    pub msg_id: &'a MsgId,
    pub correl_id: &'a MsgId,
    pub persistence: Persistence,
    pub priority: i32,
    pub expiry: i32,
    pub msg_type: i32,
    pub format: &'a str,
    pub reply_to_q: &'a str,
    pub reply_to_qmgr: &'a str,
    pub backout_count: u32,
    pub put_time_ms: u64,
    pub user_id: &'a str,
    pub appl_identity: &'a str,
    pub put_appl_name: &'a str,
    pub encoding: i32,
    pub ccsid: i32,
    pub feedback: i32,
    pub report: i32,
    pub group_id: &'a MsgId,
    pub msg_seq_number: i32,
    pub offset: i32,
    pub msg_flags: i32,
    pub original_length: i32,
}

impl DescriptorRef<'_> {
    /// See [`MessageDescriptor::has_group_fields`].
    pub fn has_group_fields(&self) -> bool {
        *self.group_id != ID_NONE
            || self.msg_seq_number != 1
            || self.offset != 0
            || self.msg_flags != 0
            || self.original_length != ORIGINAL_LENGTH_UNDEFINED
    }

    /// An owned copy.
    pub fn to_descriptor(&self) -> MessageDescriptor {
        MessageDescriptor {
            msg_id: *self.msg_id,
            correl_id: *self.correl_id,
            persistence: self.persistence,
            priority: self.priority,
            expiry: self.expiry,
            msg_type: self.msg_type,
            format: self.format.to_string(),
            reply_to_q: self.reply_to_q.to_string(),
            reply_to_qmgr: self.reply_to_qmgr.to_string(),
            backout_count: self.backout_count,
            put_time_ms: self.put_time_ms,
            user_id: self.user_id.to_string(),
            appl_identity: self.appl_identity.to_string(),
            put_appl_name: self.put_appl_name.to_string(),
            encoding: self.encoding,
            ccsid: self.ccsid,
            feedback: self.feedback,
            report: self.report,
            group_id: *self.group_id,
            msg_seq_number: self.msg_seq_number,
            offset: self.offset,
            msg_flags: self.msg_flags,
            original_length: self.original_length,
        }
    }

    /// Writes the descriptor as [`MessageDescriptor`]'s codec does.
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_slice(self.msg_id);
        out.put_slice(self.correl_id);
        let group = self.has_group_fields();
        out.put_i32_le(self.persistence.to_i32() | if group { EXT_GROUP } else { 0 });
        out.put_i32_le(self.priority);
        out.put_i32_le(self.expiry);
        out.put_i32_le(self.msg_type);
        out.put_str16(self.format);
        out.put_str16(self.reply_to_q);
        out.put_str16(self.reply_to_qmgr);
        out.put_u32_le(self.backout_count);
        out.put_u64_le(self.put_time_ms);
        out.put_str16(self.user_id);
        out.put_str16(self.appl_identity);
        out.put_str16(self.put_appl_name);
        out.put_i32_le(self.encoding);
        out.put_i32_le(self.ccsid);
        out.put_i32_le(self.feedback);
        out.put_i32_le(self.report);
        if group {
            out.put_slice(self.group_id);
            out.put_i32_le(self.msg_seq_number);
            out.put_i32_le(self.offset);
            out.put_i32_le(self.msg_flags);
            out.put_i32_le(self.original_length);
        }
    }
}

impl MessageDescriptor {
    /// This descriptor, borrowed.
    pub fn borrowed(&self) -> DescriptorRef<'_> {
        DescriptorRef {
            msg_id: &self.msg_id,
            correl_id: &self.correl_id,
            persistence: self.persistence,
            priority: self.priority,
            expiry: self.expiry,
            msg_type: self.msg_type,
            format: &self.format,
            reply_to_q: &self.reply_to_q,
            reply_to_qmgr: &self.reply_to_qmgr,
            backout_count: self.backout_count,
            put_time_ms: self.put_time_ms,
            user_id: &self.user_id,
            appl_identity: &self.appl_identity,
            put_appl_name: &self.put_appl_name,
            encoding: self.encoding,
            ccsid: self.ccsid,
            feedback: self.feedback,
            report: self.report,
            group_id: &self.group_id,
            msg_seq_number: self.msg_seq_number,
            offset: self.offset,
            msg_flags: self.msg_flags,
            original_length: self.original_length,
        }
    }
}

impl Codec for MessageDescriptor {
    fn encode(&self, out: &mut BytesMut) {
        self.borrowed().encode(out)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let msg_id = r.fixed::<24>("msg_id")?;
        let correl_id = r.fixed::<24>("correl_id")?;
        let word = r.i32("persistence")?;
        if word & !(PERSISTENCE_MASK | EXT_GROUP) != 0 {
            return Err(DecodeError::invalid(
                "persistence",
                format!("unknown flags in {word:#x}"),
            ));
        }
        let mut md = MessageDescriptor {
            msg_id,
            correl_id,
            persistence: Persistence::from_i32(word & PERSISTENCE_MASK)?,
            priority: r.i32("priority")?,
            expiry: r.i32("expiry")?,
            msg_type: r.i32("msg_type")?,
            format: r.str16("format")?,
            reply_to_q: r.str16("reply_to_q")?,
            reply_to_qmgr: r.str16("reply_to_qmgr")?,
            backout_count: r.u32("backout_count")?,
            put_time_ms: r.u64("put_time_ms")?,
            user_id: r.str16("user_id")?,
            appl_identity: r.str16("appl_identity")?,
            put_appl_name: r.str16("put_appl_name")?,
            encoding: r.i32("encoding")?,
            ccsid: r.i32("ccsid")?,
            feedback: r.i32("feedback")?,
            report: r.i32("report")?,
            ..MessageDescriptor::default()
        };
        if word & EXT_GROUP != 0 {
            md.group_id = r.fixed::<24>("group_id")?;
            md.msg_seq_number = r.i32("msg_seq_number")?;
            md.offset = r.i32("offset")?;
            md.msg_flags = r.i32("msg_flags")?;
            md.original_length = r.i32("original_length")?;
        }
        Ok(md)
    }
}

/// The value of a named message property.
#[derive(Clone, Debug, PartialEq)]
pub enum PropertyValue {
    String(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Bytes(Vec<u8>),
}

/// Named properties of a message, in the order they were set.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Properties(pub Vec<(String, PropertyValue)>);

impl Properties {
    pub fn get(&self, name: &str) -> Option<&PropertyValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
    pub fn set(&mut self, name: impl Into<String>, value: PropertyValue) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Codec for Properties {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16_le(self.0.len() as u16);
        for (name, value) in &self.0 {
            out.put_str16(name);
            match value {
                PropertyValue::String(s) => {
                    out.put_u8(1);
                    out.put_str16(s);
                }
                PropertyValue::Int(i) => {
                    out.put_u8(2);
                    out.put_i64_le(*i);
                }
                PropertyValue::Float(f) => {
                    out.put_u8(3);
                    out.put_f64_le(*f);
                }
                PropertyValue::Bool(b) => {
                    out.put_u8(4);
                    out.put_bool(*b);
                }
                PropertyValue::Bytes(b) => {
                    out.put_u8(5);
                    out.put_bytes32(b);
                }
            }
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let n = r.u16("property count")? as usize;
        if n > PROPERTIES_PER_MSG_MAX {
            return Err(DecodeError::invalid(
                "property count",
                format!("{n} > {PROPERTIES_PER_MSG_MAX}"),
            ));
        }
        let mut props = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.str16("property name")?;
            if name.is_empty() {
                return Err(DecodeError::invalid("property name", "empty"));
            }
            let value = match r.u8("property type")? {
                1 => PropertyValue::String(r.str16("property value")?),
                2 => PropertyValue::Int(r.i64("property value")?),
                3 => PropertyValue::Float(r.f64("property value")?),
                4 => PropertyValue::Bool(r.bool("property value")?),
                5 => PropertyValue::Bytes(r.bytes32("property value")?.to_vec()),
                t => return Err(DecodeError::invalid("property type", format!("tag {t}"))),
            };
            props.push((name, value));
        }
        Ok(Properties(props))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_date_and_time_are_mq_formatted() {
        let md = MessageDescriptor {
            put_time_ms: 1_700_000_000_123,
            ..Default::default()
        };
        assert_eq!(
            md.put_date_time(),
            ("20231114".to_string(), "22132012".to_string())
        );
    }

    #[test]
    fn descriptor_round_trips() {
        let md = MessageDescriptor {
            msg_id: [7; 24],
            correl_id: [9; 24],
            persistence: Persistence::Persistent,
            priority: 4,
            reply_to_q: "REPLY1".into(),
            format: "MQSTR".into(),
            ..Default::default()
        };
        assert_eq!(MessageDescriptor::from_bytes(md.to_bytes()).unwrap(), md);
    }

    #[test]
    fn group_fields_round_trip_and_cost_nothing_when_unset() {
        let plain = MessageDescriptor::default();
        let grouped = MessageDescriptor {
            group_id: [3; 24],
            msg_seq_number: 7,
            offset: 100,
            msg_flags: msg_flags::MSG_IN_GROUP | msg_flags::SEGMENT,
            original_length: 400,
            ..Default::default()
        };
        assert_eq!(
            MessageDescriptor::from_bytes(grouped.to_bytes()).unwrap(),
            grouped
        );
        assert_eq!(grouped.to_bytes().len(), plain.to_bytes().len() + 40);
        assert_eq!(grouped.group_status(), status::MSG_IN_GROUP);
        assert_eq!(grouped.segment_status(), status::SEGMENT);
        assert_eq!(plain.group_status(), status::NOT_IN_GROUP);
    }

    /// The encoding as it was before the group and segment fields existed (and as it still is for
    /// a message outside any group): it must keep decoding, as logs and checkpoints hold it.
    #[test]
    fn a_descriptor_encoded_before_group_fields_existed_still_decodes() {
        let mut old = BytesMut::new();
        old.put_slice(&[7; 24]);
        old.put_slice(&[9; 24]);
        for v in [1, 4, 5, 8] {
            old.put_i32_le(v); // persistence, priority, expiry, msg_type
        }
        for s in ["MQSTR", "REPLY1", ""] {
            old.put_str16(s);
        }
        old.put_u32_le(2); // backout count
        old.put_u64_le(1_700_000_000_000);
        for s in ["app", "", "prog"] {
            old.put_str16(s);
        }
        for v in [546, 1208, 0, 0] {
            old.put_i32_le(v); // encoding, ccsid, feedback, report
        }
        let md = MessageDescriptor::from_bytes(old.freeze()).unwrap();
        assert_eq!(md.persistence, Persistence::Persistent);
        assert_eq!((md.priority, md.expiry, md.msg_type), (4, 5, 8));
        assert_eq!(md.reply_to_q, "REPLY1");
        assert_eq!(md.put_appl_name, "prog");
        assert_eq!(md.group_id, ID_NONE);
        assert_eq!(md.msg_seq_number, 1);
        assert_eq!(md.original_length, ORIGINAL_LENGTH_UNDEFINED);
        assert!(!md.has_group_fields());
    }

    #[test]
    fn unknown_flags_in_the_persistence_word_are_refused() {
        let mut b = BytesMut::from(&MessageDescriptor::default().to_bytes()[..]);
        b[48..52].copy_from_slice(&(2i32 | (1 << 9)).to_le_bytes());
        assert!(MessageDescriptor::from_bytes(b.freeze()).is_err());
    }

    #[test]
    fn truncated_descriptor_is_an_error_not_a_panic() {
        let grouped = MessageDescriptor {
            group_id: [3; 24],
            ..Default::default()
        }
        .to_bytes();
        for cut in 0..grouped.len() {
            assert!(MessageDescriptor::from_bytes(grouped.slice(..cut)).is_err());
        }
        let b = MessageDescriptor::default().to_bytes();
        for cut in 0..b.len() {
            assert!(
                MessageDescriptor::from_bytes(b.slice(..cut)).is_err(),
                "cut at {cut}"
            );
        }
    }
}
