//! The transmission queue header (MQ's MQXQH, version 1) and the message descriptor it embeds
//! (MQMD version 1, followed by an MQMDE when the message belongs to a group or is a segment):
//! what a message put to a remote queue carries on its transmission queue, laid out as MQ lays it
//! out (fixed-width blank-padded character fields, integers little-endian as MQENC_NATIVE on x86
//! and ARM), so that a program written for MQ that browses a transmission queue reads it. The
//! message on the transmission queue has Format `MQXMIT`; the header's descriptor is the
//! original message's, and the application data follows the header unchanged.

use crate::descriptor::{msg_type, MessageDescriptor, MsgId, Persistence, ID_NONE};
use crate::dlh::{get_fixed, put_fixed};

/// MQXQH's StrucId and version.
pub const STRUC_ID: &[u8; 4] = b"XQH ";
pub const VERSION: i32 = 1;
/// MQFMT_XMIT_Q_HEADER as the descriptor's Format carries it (without trailing blanks).
pub const FORMAT: &str = "MQXMIT";
/// MQXQH_LENGTH_1: the header with its version-1 descriptor.
pub const LEN_BYTES: usize = 104 + MD1_LEN_BYTES;
/// MQMD_LENGTH_1.
pub const MD1_LEN_BYTES: usize = 324;
/// MQMDE_LENGTH_2, and the Format naming an MQMDE (MQFMT_MD_EXTENSION).
pub const MDE_LEN_BYTES: usize = 72;
pub const MDE_FORMAT: &str = "MQHMDE";

const QNAME_LEN: usize = 48;

/// A message's destination beyond this queue manager and its own descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct TransmissionHeader {
    /// The queue and queue manager the message is going to.
    pub remote_q: String,
    pub remote_qmgr: String,
    pub md: MessageDescriptor,
}

/// Whether `md` has version-2 fields (group or segment) an MQMDE must carry.
fn needs_mde(md: &MessageDescriptor) -> bool {
    let d = MessageDescriptor::default();
    md.group_id != ID_NONE
        || md.msg_seq_number != d.msg_seq_number
        || md.offset != d.offset
        || md.msg_flags != d.msg_flags
        || md.original_length != d.original_length
}

impl TransmissionHeader {
    /// The header followed by an MQMDE when the descriptor needs one: what goes in front of
    /// the application data on the transmission queue.
    pub fn encode(&self) -> Vec<u8> {
        let mde = needs_mde(&self.md);
        let mut out = Vec::with_capacity(LEN_BYTES + if mde { MDE_LEN_BYTES } else { 0 });
        out.extend_from_slice(STRUC_ID);
        out.extend_from_slice(&VERSION.to_le_bytes());
        put_fixed(&mut out, &self.remote_q, QNAME_LEN);
        put_fixed(&mut out, &self.remote_qmgr, QNAME_LEN);
        encode_md1(
            &mut out,
            &self.md,
            if mde { MDE_FORMAT } else { &self.md.format },
        );
        if mde {
            encode_mde(&mut out, &self.md);
        }
        out
    }

    /// Reads a header (and its MQMDE, if its descriptor's Format names one) from the start of
    /// `body`; returns it and the application data after it, or `None` when `body` does not
    /// start with a version-1 transmission header.
    pub fn parse(body: &[u8]) -> Option<(TransmissionHeader, &[u8])> {
        if body.len() < LEN_BYTES || &body[..4] != STRUC_ID {
            return None;
        }
        if i32::from_le_bytes(body[4..8].try_into().ok()?) != VERSION {
            return None;
        }
        let remote_q = get_fixed(&body[8..56]);
        let remote_qmgr = get_fixed(&body[56..104]);
        let mut md = parse_md1(&body[104..LEN_BYTES])?;
        let mut rest = &body[LEN_BYTES..];
        if md.format == MDE_FORMAT {
            if rest.len() < MDE_LEN_BYTES {
                return None;
            }
            parse_mde(&rest[..MDE_LEN_BYTES], &mut md)?;
            rest = &rest[MDE_LEN_BYTES..];
        }
        Some((
            TransmissionHeader {
                remote_q,
                remote_qmgr,
                md,
            },
            rest,
        ))
    }
}

fn encode_md1(out: &mut Vec<u8>, md: &MessageDescriptor, format: &str) {
    let start = out.len();
    let int = |out: &mut Vec<u8>, v: i32| out.extend_from_slice(&v.to_le_bytes());
    out.extend_from_slice(b"MD  ");
    int(out, 1);
    int(out, md.report);
    int(out, md.msg_type);
    int(out, md.expiry);
    int(out, md.feedback);
    int(out, md.encoding);
    int(out, md.ccsid);
    put_fixed(out, format, 8);
    int(out, md.priority);
    int(out, md.persistence.to_i32());
    out.extend_from_slice(&md.msg_id);
    out.extend_from_slice(&md.correl_id);
    int(out, md.backout_count.min(i32::MAX as u32) as i32);
    put_fixed(out, &md.reply_to_q, 48);
    put_fixed(out, &md.reply_to_qmgr, 48);
    put_fixed(out, &md.user_id, 12);
    out.extend_from_slice(&[0u8; 32]); // AccountingToken
    put_fixed(out, &md.appl_identity, 32);
    int(out, 6); // PutApplType: MQAT_UNIX
    put_fixed(out, &md.put_appl_name, 28);
    let (date, time) = md.put_date_time();
    put_fixed(out, &date, 8);
    put_fixed(out, &time, 8);
    put_fixed(out, "", 4); // ApplOriginData
    debug_assert_eq!(out.len() - start, MD1_LEN_BYTES);
}

fn parse_md1(b: &[u8]) -> Option<MessageDescriptor> {
    if &b[..4] != b"MD  " {
        return None;
    }
    let int = |at: usize| i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let id = |at: usize| -> MsgId { b[at..at + 24].try_into().expect("24 bytes") };
    let text = |at: usize, width: usize| get_fixed(&b[at..at + width]);
    Some(MessageDescriptor {
        report: int(8),
        msg_type: int(12),
        expiry: int(16),
        feedback: int(20),
        encoding: int(24),
        ccsid: int(28),
        format: text(32, 8),
        priority: int(40),
        persistence: Persistence::from_i32(int(44)).ok()?,
        msg_id: id(48),
        correl_id: id(72),
        backout_count: int(96).max(0) as u32,
        reply_to_q: text(100, 48),
        reply_to_qmgr: text(148, 48),
        user_id: text(196, 12),
        appl_identity: text(240, 32),
        put_appl_name: text(276, 28),
        put_time_ms: put_time_ms(&text(304, 8), &text(312, 8))?,
        ..MessageDescriptor {
            msg_type: msg_type::DATAGRAM,
            ..Default::default()
        }
    })
}

/// PutDate `YYYYMMDD` and PutTime `HHMMSSTH` (UTC) as milliseconds since the epoch; blank
/// fields give 0.
fn put_time_ms(date: &str, time: &str) -> Option<u64> {
    if date.is_empty() && time.is_empty() {
        return Some(0);
    }
    let num = |s: &str| s.parse::<u32>().ok();
    if date.len() != 8 || time.len() != 8 {
        return None;
    }
    let (y, m, d) = (num(&date[..4])?, num(&date[4..6])?, num(&date[6..])?);
    let (hh, mm, ss, th) = (
        num(&time[..2])?,
        num(&time[2..4])?,
        num(&time[4..6])?,
        num(&time[6..])?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = crate::time::days_from_civil(i64::from(y), m, d);
    let secs = days * 86_400 + i64::from(hh * 3600 + mm * 60 + ss);
    u64::try_from(secs * 1000 + i64::from(th) * 10).ok()
}

fn encode_mde(out: &mut Vec<u8>, md: &MessageDescriptor) {
    let int = |out: &mut Vec<u8>, v: i32| out.extend_from_slice(&v.to_le_bytes());
    out.extend_from_slice(b"MDE ");
    int(out, 2);
    int(out, MDE_LEN_BYTES as i32);
    int(out, md.encoding);
    int(out, md.ccsid);
    put_fixed(out, &md.format, 8);
    int(out, 0); // Flags
    out.extend_from_slice(&md.group_id);
    int(out, md.msg_seq_number);
    int(out, md.offset);
    int(out, md.msg_flags);
    int(out, md.original_length);
}

fn parse_mde(b: &[u8], md: &mut MessageDescriptor) -> Option<()> {
    if &b[..4] != b"MDE " {
        return None;
    }
    let int = |at: usize| i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    md.encoding = int(12);
    md.ccsid = int(16);
    md.format = get_fixed(&b[20..28]);
    md.group_id = b[32..56].try_into().expect("24 bytes");
    md.msg_seq_number = int(56);
    md.offset = int(60);
    md.msg_flags = int(64);
    md.original_length = int(68);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn md() -> MessageDescriptor {
        MessageDescriptor {
            msg_id: *b"MSGID-0123456789-ABCDEFG",
            correl_id: *b"CORREL-0123456789-ABCDEF",
            persistence: Persistence::Persistent,
            priority: 7,
            expiry: 600,
            msg_type: msg_type::REQUEST,
            format: "MQSTR".into(),
            reply_to_q: "REPLY.Q".into(),
            reply_to_qmgr: "QM1".into(),
            put_time_ms: 1_764_000_000_120,
            user_id: "alice".into(),
            appl_identity: "orders".into(),
            put_appl_name: "ferrymq put".into(),
            report: 0x100,
            ..Default::default()
        }
    }

    #[test]
    fn a_header_is_428_bytes_and_reads_back() {
        let h = TransmissionHeader {
            remote_q: "ORDERS.IN".into(),
            remote_qmgr: "QM2".into(),
            md: md(),
        };
        let mut bytes = h.encode();
        assert_eq!(bytes.len(), 428);
        assert_eq!(&bytes[..4], b"XQH ");
        bytes.extend_from_slice(b"payload");
        let (back, data) = TransmissionHeader::parse(&bytes).expect("parses");
        assert_eq!(back, h);
        assert_eq!(data, b"payload");
    }

    #[test]
    fn group_fields_travel_in_an_mqmde() {
        let h = TransmissionHeader {
            remote_q: "Q".into(),
            remote_qmgr: "QM2".into(),
            md: MessageDescriptor {
                group_id: *b"GROUP-0123456789-ABCDEFG",
                msg_seq_number: 3,
                offset: 100,
                msg_flags: crate::descriptor::msg_flags::SEGMENT,
                original_length: 4096,
                ..md()
            },
        };
        let bytes = h.encode();
        assert_eq!(bytes.len(), 428 + 72);
        assert_eq!(&bytes[104 + 32..104 + 40], b"MQHMDE  ");
        let (back, data) = TransmissionHeader::parse(&bytes).expect("parses");
        assert_eq!(back, h);
        assert!(data.is_empty());
    }

    #[test]
    fn anything_else_is_not_a_header() {
        assert!(TransmissionHeader::parse(b"XQH ").is_none());
        assert!(TransmissionHeader::parse(&[0u8; 600]).is_none());
    }

    proptest! {
        #[test]
        fn every_descriptor_round_trips(
            pri in 0i32..=9, exp in prop_oneof![Just(-1i32), 1i32..i32::MAX],
            ms in 0u64..4_000_000_000_000u64, seq in 1i32..1000, user in "[a-z]{0,12}",
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let md = MessageDescriptor {
                priority: pri,
                expiry: exp,
                put_time_ms: ms / 10 * 10,
                msg_seq_number: seq,
                user_id: user,
                ..md()
            };
            let h = TransmissionHeader { remote_q: "R.Q".into(), remote_qmgr: "QMX".into(), md };
            let mut bytes = h.encode();
            bytes.extend_from_slice(&body);
            let (back, data) = TransmissionHeader::parse(&bytes).expect("parses");
            prop_assert_eq!(back, h);
            prop_assert_eq!(data, &body[..]);
        }
    }
}
