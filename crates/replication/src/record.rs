//! How Raft state is laid out as recovery-log records.
//!
//! Kinds start at 200 so they can never collide with the engine's record kinds (1..=9): a log
//! holding both, or a tool dumping one, can always tell them apart. All integers are little
//! endian. A compact hand encoding rather than JSON because every replicated engine record is
//! written once per replica: the Raft framing adds 25 bytes to each record, not a JSON document.
//!
//! | kind | payload |
//! |---|---|
//! | `RAFT_ENTRY` | `log_id` (term u64, leader u64, index u64), tag u8, body: tag 0 blank (no body), 1 normal (`kind u8`, engine payload), 2 membership (JSON of `openraft::Membership`, rare) |
//! | `RAFT_VOTE` | term u64, node u64, committed u8 — the latest one wins |
//! | `RAFT_TRUNCATE` | `from_index` u64 — drops entries with index ≥ it written before the marker |
//! | `RAFT_PURGED` | `log_id` — entries up to it are gone (they are in the snapshot) |
//! | `RAFT_COMMITTED` | flag u8 then `log_id` if 1 — a hint of how far the group had committed |

use openraft::{CommittedLeaderId, EntryPayload, Membership};

use crate::{AppRecord, Entry, LogId, NodeId, Vote};

/// One Raft log entry.
pub const RAFT_ENTRY: u8 = 200;
/// The vote (term, voted-for, committed), re-logged on every change.
pub const RAFT_VOTE: u8 = 201;
/// Conflict truncation marker: the ring stays append-only.
pub const RAFT_TRUNCATE: u8 = 202;
/// The last purged log id (entries up to it are covered by the snapshot).
pub const RAFT_PURGED: u8 = 203;
/// The last committed log id known to this replica (a hint, not waited for).
pub const RAFT_COMMITTED: u8 = 204;

const LOG_ID_LEN: usize = 24;
const TAG_BLANK: u8 = 0;
const TAG_NORMAL: u8 = 1;
const TAG_MEMBERSHIP: u8 = 2;

/// A Raft record that failed to decode: the record passed its CRC, so this is a bug or a record
/// written by an incompatible version, never a torn write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable Raft record of kind {kind}: {why}")]
pub struct DecodeError {
    pub kind: u8,
    pub why: String,
}

fn bad(kind: u8, why: impl Into<String>) -> DecodeError {
    DecodeError {
        kind,
        why: why.into(),
    }
}

fn put_log_id(out: &mut Vec<u8>, id: &LogId) {
    out.extend_from_slice(&id.leader_id.term.to_le_bytes());
    out.extend_from_slice(&id.leader_id.node_id.to_le_bytes());
    out.extend_from_slice(&id.index.to_le_bytes());
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn get_log_id(kind: u8, b: &[u8]) -> Result<LogId, DecodeError> {
    if b.len() < LOG_ID_LEN {
        return Err(bad(
            kind,
            format!("{} bytes is too short for a log id", b.len()),
        ));
    }
    Ok(LogId::new(
        CommittedLeaderId::new(u64_at(b, 0), u64_at(b, 8)),
        u64_at(b, 16),
    ))
}

/// The header of an entry record (log id, tag, and the app kind for a normal entry); the
/// engine payload itself is passed as a separate part so it is copied only once, into the log's
/// buffer.
pub(crate) fn entry_parts(entry: &Entry) -> (Vec<u8>, &[u8]) {
    let mut head = Vec::with_capacity(LOG_ID_LEN + 2);
    put_log_id(&mut head, &entry.log_id);
    match &entry.payload {
        EntryPayload::Blank => {
            head.push(TAG_BLANK);
            (head, &[])
        }
        EntryPayload::Normal(rec) => {
            head.push(TAG_NORMAL);
            head.push(rec.kind);
            (head, &rec.payload)
        }
        EntryPayload::Membership(m) => {
            head.push(TAG_MEMBERSHIP);
            // Membership is a handful of node ids and addresses; JSON keeps it readable and
            // serde_json cannot fail on these plain types.
            head.extend_from_slice(&serde_json::to_vec(m).unwrap_or_default());
            (head, &[])
        }
    }
}

/// Decodes an entry record payload.
pub(crate) fn decode_entry(b: &[u8]) -> Result<Entry, DecodeError> {
    let log_id = get_log_id(RAFT_ENTRY, b)?;
    let rest = &b[LOG_ID_LEN..];
    let Some((&tag, body)) = rest.split_first() else {
        return Err(bad(RAFT_ENTRY, "missing payload tag"));
    };
    let payload = match tag {
        TAG_BLANK => EntryPayload::Blank,
        TAG_NORMAL => {
            let Some((&kind, payload)) = body.split_first() else {
                return Err(bad(RAFT_ENTRY, "normal entry without a record kind"));
            };
            EntryPayload::Normal(AppRecord {
                kind,
                payload: payload.to_vec(),
            })
        }
        TAG_MEMBERSHIP => {
            let m: Membership<NodeId, openraft::BasicNode> = serde_json::from_slice(body)
                .map_err(|e| bad(RAFT_ENTRY, format!("membership: {e}")))?;
            EntryPayload::Membership(m)
        }
        t => return Err(bad(RAFT_ENTRY, format!("unknown payload tag {t}"))),
    };
    Ok(Entry { log_id, payload })
}

pub(crate) fn encode_vote(v: &Vote) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    out.extend_from_slice(&v.leader_id.term.to_le_bytes());
    out.extend_from_slice(&v.leader_id.node_id.to_le_bytes());
    out.push(u8::from(v.committed));
    out
}

pub(crate) fn decode_vote(b: &[u8]) -> Result<Vote, DecodeError> {
    if b.len() != 17 || b[16] > 1 {
        return Err(bad(RAFT_VOTE, format!("{} bytes is not a vote", b.len())));
    }
    let (term, node) = (u64_at(b, 0), u64_at(b, 8));
    Ok(if b[16] == 1 {
        Vote::new_committed(term, node)
    } else {
        Vote::new(term, node)
    })
}

pub(crate) fn encode_index(i: u64) -> Vec<u8> {
    i.to_le_bytes().to_vec()
}

pub(crate) fn decode_index(b: &[u8]) -> Result<u64, DecodeError> {
    if b.len() != 8 {
        return Err(bad(
            RAFT_TRUNCATE,
            format!("{} bytes is not an index", b.len()),
        ));
    }
    Ok(u64_at(b, 0))
}

pub(crate) fn encode_log_id(id: &LogId) -> Vec<u8> {
    let mut out = Vec::with_capacity(LOG_ID_LEN);
    put_log_id(&mut out, id);
    out
}

pub(crate) fn decode_log_id(kind: u8, b: &[u8]) -> Result<LogId, DecodeError> {
    if b.len() != LOG_ID_LEN {
        return Err(bad(kind, format!("{} bytes is not a log id", b.len())));
    }
    get_log_id(kind, b)
}

pub(crate) fn encode_opt_log_id(id: Option<&LogId>) -> Vec<u8> {
    match id {
        None => vec![0],
        Some(id) => {
            let mut out = vec![1];
            put_log_id(&mut out, id);
            out
        }
    }
}

pub(crate) fn decode_opt_log_id(kind: u8, b: &[u8]) -> Result<Option<LogId>, DecodeError> {
    match b.split_first() {
        Some((0, [])) => Ok(None),
        Some((1, rest)) => decode_log_id(kind, rest).map(Some),
        _ => Err(bad(kind, "not an optional log id")),
    }
}

/// Decodes a Raft record of `kind` as opening the log does and encodes the value again (what the
/// fuzz targets drive: the decoders they reach are the ones recovery runs).
pub fn reencode_record(kind: u8, b: &[u8]) -> Result<Vec<u8>, DecodeError> {
    Ok(match kind {
        RAFT_ENTRY => {
            let e = decode_entry(b)?;
            let (head, body) = entry_parts(&e);
            [head.as_slice(), body].concat()
        }
        RAFT_VOTE => encode_vote(&decode_vote(b)?),
        RAFT_TRUNCATE => encode_index(decode_index(b)?),
        RAFT_PURGED => encode_log_id(&decode_log_id(kind, b)?),
        RAFT_COMMITTED => encode_opt_log_id(decode_opt_log_id(kind, b)?.as_ref()),
        other => return Err(bad(other, "not a Raft record")),
    })
}

/// `serde(with)` helper: bytes as a lowercase hex string. serde_json would otherwise write a
/// byte vector as an array of decimal numbers (up to 4 bytes per byte); hex is 2.
pub(crate) mod hex_bytes {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        if !s.is_human_readable() {
            return s.serialize_bytes(b);
        }
        let mut out = String::with_capacity(b.len() * 2);
        for &x in b {
            out.push(DIGITS[usize::from(x >> 4)] as char);
            out.push(DIGITS[usize::from(x & 15)] as char);
        }
        s.serialize_str(&out)
    }

    struct Raw;

    impl serde::de::Visitor<'_> for Raw {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("bytes")
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        if !d.is_human_readable() {
            return d.deserialize_byte_buf(Raw);
        }
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let s = s.as_bytes();
        if s.len() % 2 != 0 {
            return Err(D::Error::custom("hex string of odd length"));
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(D::Error::custom("invalid hex digit")),
        };
        s.chunks_exact(2)
            .map(|p| Ok(nibble(p[0])? << 4 | nibble(p[1])?))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn id(term: u64, node: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, node), index)
    }

    fn roundtrip(e: &Entry) -> Entry {
        let (head, body) = entry_parts(e);
        decode_entry(&[head.as_slice(), body].concat()).unwrap()
    }

    #[test]
    fn entries_of_every_payload_roundtrip() {
        let normal = Entry {
            log_id: id(3, 2, 77),
            payload: EntryPayload::Normal(AppRecord {
                kind: 4,
                payload: b"body".to_vec(),
            }),
        };
        assert_eq!(roundtrip(&normal), normal);
        let blank = Entry {
            log_id: id(1, 1, 1),
            payload: EntryPayload::Blank,
        };
        assert_eq!(roundtrip(&blank), blank);
        let nodes: BTreeMap<u64, openraft::BasicNode> =
            [(1, openraft::BasicNode::new("127.0.0.1:1"))].into();
        let m = Membership::new(vec![BTreeSet::from([1])], nodes);
        let member = Entry {
            log_id: id(1, 1, 2),
            payload: EntryPayload::Membership(m),
        };
        assert_eq!(roundtrip(&member), member);
        assert!(decode_entry(&[0u8; 10]).is_err());
        assert!(decode_entry(&[[0u8; 24].as_slice(), &[9]].concat()).is_err());
    }

    #[test]
    fn votes_and_log_ids_roundtrip() {
        for v in [Vote::new(5, 3), Vote::new_committed(6, 1)] {
            assert_eq!(decode_vote(&encode_vote(&v)).unwrap(), v);
        }
        let l = id(9, 2, 1234);
        assert_eq!(decode_log_id(RAFT_PURGED, &encode_log_id(&l)).unwrap(), l);
        for o in [None, Some(l)] {
            let b = encode_opt_log_id(o.as_ref());
            assert_eq!(decode_opt_log_id(RAFT_COMMITTED, &b).unwrap(), o);
        }
        assert_eq!(decode_index(&encode_index(42)).unwrap(), 42);
    }

    #[test]
    fn app_record_json_uses_hex() {
        let r = AppRecord {
            kind: 7,
            payload: vec![0, 1, 0xab, 0xff],
        };
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(j, r#"{"kind":7,"payload":"0001abff"}"#);
        assert_eq!(serde_json::from_str::<AppRecord>(&j).unwrap(), r);
        assert!(serde_json::from_str::<AppRecord>(r#"{"kind":7,"payload":"0g"}"#).is_err());
    }
}
