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
        }
    }
}

impl MessageDescriptor {
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

impl Codec for MessageDescriptor {
    fn encode(&self, out: &mut BytesMut) {
        out.put_slice(&self.msg_id);
        out.put_slice(&self.correl_id);
        out.put_i32_le(self.persistence.to_i32());
        out.put_i32_le(self.priority);
        out.put_i32_le(self.expiry);
        out.put_i32_le(self.msg_type);
        out.put_str16(&self.format);
        out.put_str16(&self.reply_to_q);
        out.put_str16(&self.reply_to_qmgr);
        out.put_u32_le(self.backout_count);
        out.put_u64_le(self.put_time_ms);
        out.put_str16(&self.user_id);
        out.put_str16(&self.appl_identity);
        out.put_str16(&self.put_appl_name);
        out.put_i32_le(self.encoding);
        out.put_i32_le(self.ccsid);
        out.put_i32_le(self.feedback);
        out.put_i32_le(self.report);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(MessageDescriptor {
            msg_id: r.fixed::<24>("msg_id")?,
            correl_id: r.fixed::<24>("correl_id")?,
            persistence: Persistence::from_i32(r.i32("persistence")?)?,
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
        })
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
    fn truncated_descriptor_is_an_error_not_a_panic() {
        let b = MessageDescriptor::default().to_bytes();
        for cut in 0..b.len() {
            assert!(
                MessageDescriptor::from_bytes(b.slice(..cut)).is_err(),
                "cut at {cut}"
            );
        }
    }
}
