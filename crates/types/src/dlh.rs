//! The dead-letter header (MQ's MQDLH, version 1): what the queue manager puts in front of a
//! message it moves to the dead-letter queue, laid out as MQ lays it out (172 bytes, fixed-width
//! blank-padded character fields, integers in the message's encoding), so that a DLQ handler
//! written for MQ reads it. The message's descriptor then says Format `MQDEAD  ` and the header's
//! own Format field names the original message's format.

use crate::descriptor::MessageDescriptor;

/// MQDLH's StrucId.
pub const STRUC_ID: &[u8; 4] = b"DLH ";
/// The version FerryMQ writes (MQDLH_VERSION_1, the only one MQ defines).
pub const VERSION: i32 = 1;
/// The length of a version-1 header (MQDLH_LENGTH_1).
pub const LEN_BYTES: usize = 172;
/// MQFMT_DEAD_LETTER_HEADER as the descriptor's Format carries it (FerryMQ keeps formats
/// without their trailing blanks).
pub const FORMAT: &str = "MQDEAD";
/// MQAT_QMGR: the queue manager itself put the message to the dead-letter queue.
pub const APPL_TYPE_QMGR: i32 = 7;
/// MQENC_NATIVE on little-endian machines (integers little-endian): the encoding the header is
/// written in.
pub const ENCODING_NATIVE: i32 = 546;

const QNAME_LEN: usize = 48;
const FORMAT_LEN: usize = 8;
const APPL_NAME_LEN: usize = 28;
const DATE_LEN: usize = 8;
const TIME_LEN: usize = 8;

/// A dead-letter header's fields (strings without their padding).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DeadLetterHeader {
    /// Why the message was dead-lettered: an MQRC_* or MQFB_* code.
    pub reason: i32,
    /// Where the message was going.
    pub dest_q_name: String,
    pub dest_q_mgr_name: String,
    /// The original message's Encoding, CodedCharSetId and Format.
    pub encoding: i32,
    pub ccsid: i32,
    pub format: String,
    /// Who put the message to the dead-letter queue, and when (`YYYYMMDD`, `HHMMSSTH`).
    pub put_appl_type: i32,
    pub put_appl_name: String,
    pub put_date: String,
    pub put_time: String,
}

/// Writes `s` into a fixed-width, blank-padded MQ character field (cut at `width` bytes).
pub(crate) fn put_fixed(out: &mut Vec<u8>, s: &str, width: usize) {
    let b = s.as_bytes();
    let n = b.len().min(width);
    out.extend_from_slice(&b[..n]);
    out.extend(std::iter::repeat_n(b' ', width - n));
}

/// Reads a fixed-width MQ character field without its trailing blanks (or NULs).
pub(crate) fn get_fixed(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .trim_end_matches([' ', '\0'])
        .to_string()
}

impl DeadLetterHeader {
    /// The header for `md` (the message as it was going to `dest_q_name`), put to the
    /// dead-letter queue by `put_appl_name` at `now_ms`.
    pub fn for_message(
        md: &MessageDescriptor,
        reason: i32,
        dest_q_name: &str,
        dest_q_mgr_name: &str,
        put_appl_type: i32,
        put_appl_name: &str,
        now_ms: u64,
    ) -> DeadLetterHeader {
        let (put_date, put_time) = MessageDescriptor {
            put_time_ms: now_ms,
            ..Default::default()
        }
        .put_date_time();
        DeadLetterHeader {
            reason,
            dest_q_name: dest_q_name.to_string(),
            dest_q_mgr_name: dest_q_mgr_name.to_string(),
            encoding: md.encoding,
            ccsid: md.ccsid,
            format: md.format.clone(),
            put_appl_type,
            put_appl_name: put_appl_name.to_string(),
            put_date,
            put_time,
        }
    }

    /// The dead-letter queue's copy of a message with descriptor `md` and body `body`: this
    /// header then the body, and `md` with the header's format (MQDEAD) and encoding.
    pub fn wrap(&self, md: &MessageDescriptor, body: &[u8]) -> (MessageDescriptor, bytes::Bytes) {
        let mut out = self.encode();
        out.extend_from_slice(body);
        let md = MessageDescriptor {
            format: FORMAT.to_string(),
            encoding: ENCODING_NATIVE,
            ..md.clone()
        };
        (md, bytes::Bytes::from(out))
    }

    /// The 172 bytes of the header (integers little-endian, MQENC_NATIVE on x86 and ARM).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(LEN_BYTES);
        out.extend_from_slice(STRUC_ID);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.reason.to_le_bytes());
        put_fixed(&mut out, &self.dest_q_name, QNAME_LEN);
        put_fixed(&mut out, &self.dest_q_mgr_name, QNAME_LEN);
        out.extend_from_slice(&self.encoding.to_le_bytes());
        out.extend_from_slice(&self.ccsid.to_le_bytes());
        put_fixed(&mut out, &self.format, FORMAT_LEN);
        out.extend_from_slice(&self.put_appl_type.to_le_bytes());
        put_fixed(&mut out, &self.put_appl_name, APPL_NAME_LEN);
        put_fixed(&mut out, &self.put_date, DATE_LEN);
        put_fixed(&mut out, &self.put_time, TIME_LEN);
        debug_assert_eq!(out.len(), LEN_BYTES);
        out
    }

    /// Reads a header from the start of `body`; returns it and the original message's bytes
    /// after it, or `None` when `body` does not start with a version-1 header. Integers are read
    /// little-endian, or big-endian when the version reads as 1 that way (a header written on a
    /// big-endian machine).
    pub fn parse(body: &[u8]) -> Option<(DeadLetterHeader, &[u8])> {
        if body.len() < LEN_BYTES || &body[..4] != STRUC_ID {
            return None;
        }
        let word = |at: usize| -> [u8; 4] { body[at..at + 4].try_into().expect("4 bytes") };
        let big = if i32::from_le_bytes(word(4)) == VERSION {
            false
        } else if i32::from_be_bytes(word(4)) == VERSION {
            true
        } else {
            return None;
        };
        let int = |at: usize| {
            if big {
                i32::from_be_bytes(word(at))
            } else {
                i32::from_le_bytes(word(at))
            }
        };
        let text = |at: usize, width: usize| get_fixed(&body[at..at + width]);
        Some((
            DeadLetterHeader {
                reason: int(8),
                dest_q_name: text(12, QNAME_LEN),
                dest_q_mgr_name: text(60, QNAME_LEN),
                encoding: int(108),
                ccsid: int(112),
                format: text(116, FORMAT_LEN),
                put_appl_type: int(124),
                put_appl_name: text(128, APPL_NAME_LEN),
                put_date: text(156, DATE_LEN),
                put_time: text(164, TIME_LEN),
            },
            &body[LEN_BYTES..],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_message_is_the_header_then_the_body_under_the_mqdead_format() {
        let md = MessageDescriptor {
            format: "MQSTR".into(),
            priority: 7,
            ..Default::default()
        };
        let h = DeadLetterHeader::for_message(&md, 2051, "Q", "QM", APPL_TYPE_QMGR, "CH", 1);
        let (dmd, body) = h.wrap(&md, b"payload");
        assert_eq!(
            (dmd.format.as_str(), dmd.encoding),
            (FORMAT, ENCODING_NATIVE)
        );
        assert_eq!(dmd.priority, 7, "the rest of the descriptor is kept");
        let (back, rest) = DeadLetterHeader::parse(&body).unwrap();
        assert_eq!(rest, b"payload");
        assert_eq!((back.reason, back.dest_q_name.as_str()), (2051, "Q"));
    }

    #[test]
    fn header_is_172_bytes_in_mq_order_and_round_trips() {
        let h = DeadLetterHeader {
            reason: 2053,
            dest_q_name: "APP.IN".into(),
            dest_q_mgr_name: "QM1".into(),
            encoding: 546,
            ccsid: 1208,
            format: "MQSTR".into(),
            put_appl_type: APPL_TYPE_QMGR,
            put_appl_name: "QM1".into(),
            put_date: "20261127".into(),
            put_time: "10150000".into(),
        };
        let b = h.encode();
        assert_eq!(b.len(), LEN_BYTES);
        assert_eq!(&b[..4], b"DLH ");
        assert_eq!(&b[12..18], b"APP.IN");
        assert_eq!(&b[60..63], b"QM1");
        assert_eq!(&b[116..124], b"MQSTR   ");
        assert_eq!(&b[156..164], b"20261127");
        let mut whole = b.clone();
        whole.extend_from_slice(b"body");
        let (back, rest) = DeadLetterHeader::parse(&whole).unwrap();
        assert_eq!(back, h);
        assert_eq!(rest, b"body");
        assert!(DeadLetterHeader::parse(&whole[..100]).is_none());
        assert!(DeadLetterHeader::parse(b"plain message").is_none());
    }
}
