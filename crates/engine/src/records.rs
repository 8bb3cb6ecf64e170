//! The recovery-log records the engine writes and replays, and their encoding. The log crate
//! stores them as opaque `(kind, payload)` pairs; the same records are what HA replicates and DR
//! ships, so every state change that must survive a restart is exactly one record here.
//!
//! Only committed work is logged (redo-only): a unit of work writes one `Commit` record holding all
//! its persistent puts and gets, so recovery never has to undo anything and an unfinished unit of
//! work leaves no trace in the log.

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_types::codec::{Codec, DecodeError, PutExt, Reader};
use ferrymq_types::limits::MSG_SEQ_MAX;
use ferrymq_types::{MessageDescriptor, ObjectDef, ObjectKind, Properties, QmgrAttrs, QueueDef};

use crate::message::Message;

pub mod kind {
    pub const PUT: u8 = 1;
    pub const GET: u8 = 2;
    pub const COMMIT: u8 = 3;
    pub const DEFINE_QUEUE: u8 = 4;
    pub const DELETE_QUEUE: u8 = 5;
    pub const DEFINE_OBJECT: u8 = 6;
    pub const DELETE_OBJECT: u8 = 7;
    pub const QMGR_ATTRS: u8 = 8;
    pub const CLEAR_QUEUE: u8 = 9;
    /// Disaster recovery: the id of the stream this queue manager ships as a DR primary.
    pub const DR_STREAM: u8 = 10;
    /// Disaster recovery: how far into a primary's stream this (secondary) state reaches.
    pub const DR_MARK: u8 = 11;
    /// Disaster recovery: a full copy from the primary starts; everything before is replaced.
    pub const DR_RESET: u8 = 12;
    /// Disaster recovery: how far into this (primary's) stream the secondary has acknowledged,
    /// written now and then, so a restarted primary or the next active instance of an HA group
    /// keeps the lag bound from where it was.
    pub const DR_ACKED: u8 = 13;
    /// Message channels: a sender's batch in doubt (`channel` module).
    pub const CHANNEL_INDOUBT: u8 = 14;
    /// Message channels: a commit with the channel's synchronisation state.
    pub const CHANNEL_COMMIT: u8 = 15;
    /// Message channels: a sender's batch in doubt backed out, or the sequence number reset.
    pub const CHANNEL_BACKOUT: u8 = 16;
    /// Message channels: STOP CHANNEL (the channel stays stopped across restarts) or START.
    pub const CHANNEL_STOPPED: u8 = 17;
    /// A publication's persistent copies: the message once, then each copy's queue and
    /// sequence number (and, like a commit, other puts and gets). Read back as a `Commit`.
    /// Logs written before it have a `COMMIT` per publication, with the body in every copy.
    pub const PUBLISH: u8 = 18;

    /// True for the records that describe DR itself rather than queue manager state: a secondary
    /// does not take them from the stream it receives.
    pub fn is_dr(kind: u8) -> bool {
        (DR_STREAM..=DR_ACKED).contains(&kind)
    }
}

/// A persistent message as logged: which queue, its sequence number and content.
#[derive(Clone, Debug, PartialEq)]
pub struct PutRec {
    pub queue: String,
    pub seq: u64,
    pub md: MessageDescriptor,
    pub props: Properties,
    pub expires_at_ms: Option<u64>,
    pub body: Bytes,
}

/// A removal of a persistent message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetRec {
    pub queue: String,
    pub seq: u64,
    /// The delivery-order rank the message had on its queue, so replay finds it without a scan.
    pub rank: u8,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    Put(PutRec),
    Get(GetRec),
    Commit {
        puts: Vec<PutRec>,
        gets: Vec<GetRec>,
    },
    DefineQueue(QueueDef),
    DeleteQueue(String),
    DefineObject(ObjectDef),
    DeleteObject(ObjectKind, String),
    QmgrAttrs(QmgrAttrs),
    ClearQueue(String),
    DrStream(u64),
    DrMark(DrMark),
    DrAcked(DrMark),
    DrReset,
    /// A sender's batch in doubt.
    ChannelInDoubt(String, crate::channel::InDoubt),
    /// A unit of work's commit carrying a channel's new synchronisation state.
    ChannelCommit {
        sync: crate::channel::SyncUpdate,
        puts: Vec<PutRec>,
        gets: Vec<GetRec>,
    },
    /// A sender's batch in doubt backed out; `reset_seq` set by RESET CHANNEL.
    ChannelBackout {
        channel: String,
        reset_seq: Option<u64>,
    },
    /// STOP CHANNEL (true) or START CHANNEL (false) of a sender.
    ChannelStopped {
        channel: String,
        stopped: bool,
    },
}

/// A position in a DR primary's stream: the stream's id and the position (the primary's log
/// position, or Raft index in an HA group) up to which the stream has been applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DrMark {
    pub stream: u64,
    pub pos: u64,
}

/// A commit record's layout, written once for both its forms: `after_head` runs after each put's
/// head and writes its body ([`Record::encode_commit`]) or notes where the head ended
/// ([`Record::encode_commit_heads`]).
fn encode_commit_with(
    puts: &[(&str, &Message)],
    gets: &[GetRec],
    out: &mut BytesMut,
    mut after_head: impl FnMut(&mut BytesMut, &Message),
) {
    out.put_u32_le(puts.len() as u32);
    for (q, m) in puts {
        put_head(q, m, out);
        after_head(out, m);
    }
    out.put_u32_le(gets.len() as u32);
    for g in gets {
        encode_get(g, out);
    }
}

/// Where each put's head ends in a commit record's head buffer (a request/reply commit has one
/// or two puts: kept on the stack).
pub type CommitEnds = smallvec::SmallVec<[usize; 4]>;

/// The slices of a commit record [`Record::encode_commit_heads`] laid out: each put's head
/// followed by its body, then the rest of `head` (the gets).
pub fn commit_parts<'a>(
    puts: &[(&str, &'a Message)],
    head: &'a [u8],
    ends: &[usize],
) -> smallvec::SmallVec<[&'a [u8]; 9]> {
    let mut parts = smallvec::SmallVec::with_capacity(puts.len() * 2 + 1);
    let mut from = 0;
    for ((_, m), &end) in puts.iter().zip(ends) {
        parts.push(&head[from..end]);
        parts.push(&m.body[..]);
        from = end;
    }
    parts.push(&head[from..]);
    parts
}

/// Encodes the part of a put record that precedes the body, so the body can be handed to the log
/// as a separate slice instead of being copied twice.
pub fn put_head(queue: &str, msg: &Message, out: &mut BytesMut) {
    out.put_str16(queue);
    out.put_u64_le(msg.seq);
    msg.md_ref().encode(out);
    msg.props().encode(out);
    out.put_u64_le(msg.expires_at_ms().unwrap_or(0));
    out.put_u32_le(msg.body.len() as u32);
}

/// A message sequence number, refused beyond what the engine ever numbers (damage, which would
/// otherwise alias a real message's delivery key).
fn decode_seq(r: &mut Reader) -> Result<u64, DecodeError> {
    let seq = r.u64("seq")?;
    if seq > MSG_SEQ_MAX {
        return Err(DecodeError::invalid(
            "seq",
            format!("{seq} is beyond the largest message sequence number {MSG_SEQ_MAX}"),
        ));
    }
    Ok(seq)
}

fn decode_put(r: &mut Reader) -> Result<PutRec, DecodeError> {
    let queue = r.str16("queue")?;
    let seq = decode_seq(r)?;
    let md = MessageDescriptor::decode(r)?;
    let props = Properties::decode(r)?;
    let exp = r.u64("expiry")?;
    let body = r.bytes32("body")?;
    Ok(PutRec {
        queue,
        seq,
        md,
        props,
        expires_at_ms: (exp != 0).then_some(exp),
        body,
    })
}

fn encode_get(g: &GetRec, out: &mut BytesMut) {
    out.put_str16(&g.queue);
    out.put_u64_le(g.seq);
    out.put_u8(g.rank);
}

fn decode_get(r: &mut Reader) -> Result<GetRec, DecodeError> {
    Ok(GetRec {
        queue: r.str16("queue")?,
        seq: decode_seq(r)?,
        rank: r.u8("rank")?,
    })
}

impl Record {
    /// Encodes a commit from the messages it puts and the messages it gets.
    pub fn encode_commit(puts: &[(&str, &Message)], gets: &[GetRec], out: &mut BytesMut) {
        encode_commit_with(puts, gets, out, |out, m| out.put_slice(&m.body));
    }

    /// The record [`encode_commit`](Self::encode_commit) writes, as the parts to hand the log:
    /// `head` (already holding whatever precedes the commit, such as a channel's sync update) gets
    /// everything but the message bodies, which are referred to where the messages keep them, so
    /// the log copies each body once. `ends` receives where each put's head ends in `head`; see
    /// [`commit_parts`] for the slices in order.
    pub fn encode_commit_heads(
        puts: &[(&str, &Message)],
        gets: &[GetRec],
        head: &mut BytesMut,
        ends: &mut CommitEnds,
    ) {
        encode_commit_with(puts, gets, head, |head, _| ends.push(head.len()));
    }

    /// Encodes a publication (`kind::PUBLISH`): `shared` once, the copies of it as `(queue,
    /// sequence number)`, then the other `puts` and the `gets` as a commit has them.
    pub fn encode_publication(
        shared: &Message,
        copies: &[(&str, u64)],
        puts: &[(&str, &Message)],
        gets: &[GetRec],
        out: &mut BytesMut,
    ) {
        out.put_u8(PUBLISH_VERSION);
        put_head("", shared, out);
        out.put_slice(&shared.body);
        out.put_u32_le(copies.len() as u32);
        for (q, seq) in copies {
            out.put_str16(q);
            out.put_u64_le(*seq);
        }
        Record::encode_commit(puts, gets, out);
    }

    /// The record kind and payload for records that carry no message body.
    pub fn encode_small(&self, out: &mut BytesMut) -> u8 {
        match self {
            Record::Get(g) => {
                encode_get(g, out);
                kind::GET
            }
            Record::DefineQueue(d) => {
                d.encode(out);
                kind::DEFINE_QUEUE
            }
            Record::DeleteQueue(n) => {
                out.put_str16(n);
                kind::DELETE_QUEUE
            }
            Record::DefineObject(o) => {
                o.encode(out);
                kind::DEFINE_OBJECT
            }
            Record::DeleteObject(k, n) => {
                out.put_u8(k.tag());
                out.put_str16(n);
                kind::DELETE_OBJECT
            }
            Record::QmgrAttrs(a) => {
                a.encode(out);
                kind::QMGR_ATTRS
            }
            Record::ClearQueue(n) => {
                out.put_str16(n);
                kind::CLEAR_QUEUE
            }
            Record::DrStream(id) => {
                out.put_u64_le(*id);
                kind::DR_STREAM
            }
            Record::DrMark(m) => {
                out.put_u64_le(m.stream);
                out.put_u64_le(m.pos);
                kind::DR_MARK
            }
            Record::DrReset => kind::DR_RESET,
            Record::DrAcked(m) => {
                out.put_u64_le(m.stream);
                out.put_u64_le(m.pos);
                kind::DR_ACKED
            }
            Record::Put(p) => {
                out.put_str16(&p.queue);
                out.put_u64_le(p.seq);
                p.md.encode(out);
                p.props.encode(out);
                out.put_u64_le(p.expires_at_ms.unwrap_or(0));
                out.put_bytes32(&p.body);
                kind::PUT
            }
            Record::ChannelInDoubt(name, d) => {
                crate::channel::encode_indoubt(name, d, out);
                kind::CHANNEL_INDOUBT
            }
            Record::ChannelBackout { channel, reset_seq } => {
                out.put_str16(channel);
                out.put_u64_le(reset_seq.map_or(0, |s| s.saturating_add(1)));
                kind::CHANNEL_BACKOUT
            }
            Record::ChannelStopped { channel, stopped } => {
                out.put_str16(channel);
                out.put_u8(u8::from(*stopped));
                kind::CHANNEL_STOPPED
            }
            Record::ChannelCommit { sync, puts, gets } => {
                crate::channel::encode_sync(sync, out);
                encode_commit_body(puts, gets, out);
                kind::CHANNEL_COMMIT
            }
            Record::Commit { puts, gets } => {
                out.put_u32_le(puts.len() as u32);
                for p in puts {
                    out.put_str16(&p.queue);
                    out.put_u64_le(p.seq);
                    p.md.encode(out);
                    p.props.encode(out);
                    out.put_u64_le(p.expires_at_ms.unwrap_or(0));
                    out.put_bytes32(&p.body);
                }
                out.put_u32_le(gets.len() as u32);
                for g in gets {
                    encode_get(g, out);
                }
                kind::COMMIT
            }
        }
    }

    pub fn decode(kind: u8, payload: Bytes) -> Result<Record, DecodeError> {
        let mut r = Reader::new(payload);
        let rec = match kind {
            kind::PUT => Record::Put(decode_put(&mut r)?),
            kind::GET => Record::Get(decode_get(&mut r)?),
            kind::COMMIT => {
                let (puts, gets) = decode_commit_body(&mut r)?;
                Record::Commit { puts, gets }
            }
            kind::PUBLISH => decode_publication(&mut r)?,
            kind::CHANNEL_INDOUBT => {
                let (name, d) = crate::channel::decode_indoubt(&mut r)?;
                Record::ChannelInDoubt(name, d)
            }
            kind::CHANNEL_COMMIT => {
                let sync = crate::channel::decode_sync(&mut r)?;
                let (puts, gets) = decode_commit_body(&mut r)?;
                Record::ChannelCommit { sync, puts, gets }
            }
            kind::CHANNEL_STOPPED => Record::ChannelStopped {
                channel: r.str16("channel")?,
                stopped: r.bool("stopped")?,
            },
            kind::CHANNEL_BACKOUT => Record::ChannelBackout {
                channel: r.str16("channel")?,
                reset_seq: r.u64("reset seq")?.checked_sub(1),
            },
            kind::DEFINE_QUEUE => Record::DefineQueue(QueueDef::decode(&mut r)?),
            kind::DELETE_QUEUE => Record::DeleteQueue(r.str16("queue")?),
            kind::DEFINE_OBJECT => Record::DefineObject(ObjectDef::decode(&mut r)?),
            kind::DELETE_OBJECT => {
                let k = ObjectKind::from_tag(r.u8("object kind")?)?;
                Record::DeleteObject(k, r.str16("object name")?)
            }
            kind::QMGR_ATTRS => Record::QmgrAttrs(QmgrAttrs::decode(&mut r)?),
            kind::CLEAR_QUEUE => Record::ClearQueue(r.str16("queue")?),
            kind::DR_STREAM => Record::DrStream(r.u64("DR stream")?),
            kind::DR_MARK => Record::DrMark(DrMark {
                stream: r.u64("DR stream")?,
                pos: r.u64("DR position")?,
            }),
            kind::DR_RESET => Record::DrReset,
            kind::DR_ACKED => Record::DrAcked(DrMark {
                stream: r.u64("DR stream")?,
                pos: r.u64("DR position")?,
            }),
            k => return Err(DecodeError::invalid("record kind", format!("{k}"))),
        };
        r.finish("log record")?;
        Ok(rec)
    }
}

fn encode_commit_body(puts: &[PutRec], gets: &[GetRec], out: &mut BytesMut) {
    out.put_u32_le(puts.len() as u32);
    for p in puts {
        out.put_str16(&p.queue);
        out.put_u64_le(p.seq);
        p.md.encode(out);
        p.props.encode(out);
        out.put_u64_le(p.expires_at_ms.unwrap_or(0));
        out.put_bytes32(&p.body);
    }
    out.put_u32_le(gets.len() as u32);
    for g in gets {
        encode_get(g, out);
    }
}

/// The version of `kind::PUBLISH`'s layout, its first byte.
const PUBLISH_VERSION: u8 = 1;

/// A publication record, as the commit it stands for: one put per copy, sharing the body.
fn decode_publication(r: &mut Reader) -> Result<Record, DecodeError> {
    let v = r.u8("publication version")?;
    if v != PUBLISH_VERSION {
        return Err(DecodeError::invalid(
            "publication version",
            format!("{v} (this queue manager reads version {PUBLISH_VERSION})"),
        ));
    }
    let shared = decode_put(r)?;
    let n = r.u32("copy count")? as usize;
    let mut puts = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        puts.push(PutRec {
            queue: r.str16("queue")?,
            seq: decode_seq(r)?,
            ..shared.clone()
        });
    }
    let (others, gets) = decode_commit_body(r)?;
    puts.extend(others);
    Ok(Record::Commit { puts, gets })
}

fn decode_commit_body(r: &mut Reader) -> Result<(Vec<PutRec>, Vec<GetRec>), DecodeError> {
    let n = r.u32("put count")? as usize;
    let mut puts = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        puts.push(decode_put(r)?);
    }
    let n = r.u32("get count")? as usize;
    let mut gets = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        gets.push(decode_get(r)?);
    }
    Ok((puts, gets))
}

/// Encodes a stored message for the message store (a put record without the queue change): the
/// head, and the body to write after it. The body is lent, not cloned: cloning a `Bytes` that owns
/// its buffer outright (as a body copied out by `Message::new` does) allocates a shared header for
/// it that then lives as long as the message — 32 bytes per queued persistent message, each time
/// a checkpoint stored one.
pub fn encode_stored<'m>(queue: &str, msg: &'m Message) -> (BytesMut, &'m [u8]) {
    let mut head = BytesMut::with_capacity(256);
    put_head(queue, msg, &mut head);
    (head, &msg.body)
}

/// Decodes what `encode_stored` wrote (head and body concatenated).
pub fn decode_stored(payload: Bytes) -> Result<PutRec, DecodeError> {
    let mut r = Reader::new(payload);
    let p = decode_put(&mut r)?;
    r.finish("stored message")?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrymq_types::Persistence;

    fn sample_put(seq: u64) -> PutRec {
        PutRec {
            queue: "Q1".into(),
            seq,
            md: MessageDescriptor {
                persistence: Persistence::Persistent,
                msg_id: [seq as u8; 24],
                ..Default::default()
            },
            props: Properties(vec![(
                "color".into(),
                ferrymq_types::PropertyValue::String("red".into()),
            )]),
            expires_at_ms: Some(99),
            body: Bytes::from(vec![seq as u8; 100]),
        }
    }

    #[test]
    fn a_commit_in_parts_is_the_commit_record() {
        let msg = |seq: u64, len: usize| {
            let p = sample_put(seq);
            Message::new(
                seq,
                p.md,
                p.props,
                Bytes::from(vec![seq as u8; len]),
                Some(99),
                0,
            )
        };
        let (a, b) = (msg(1, 2048), msg(2, 0));
        let gets = vec![GetRec {
            queue: "Q2".into(),
            seq: 7,
            rank: 3,
        }];
        for (puts, gets) in [
            (vec![("Q1", &a), ("QUEUE.TWO", &b)], gets.clone()),
            (vec![], gets.clone()),
            (vec![("Q1", &a)], vec![]),
        ] {
            let mut whole = BytesMut::from(&b"prefix"[..]);
            Record::encode_commit(&puts, &gets, &mut whole);
            let (mut head, mut ends) = (BytesMut::from(&b"prefix"[..]), CommitEnds::new());
            Record::encode_commit_heads(&puts, &gets, &mut head, &mut ends);
            assert_eq!(commit_parts(&puts, &head, &ends).concat(), &whole[..]);
        }
    }

    #[test]
    fn every_record_round_trips() {
        let recs = vec![
            Record::Put(sample_put(1)),
            Record::Get(GetRec {
                queue: "Q".into(),
                seq: 5,
                rank: 9,
            }),
            Record::Commit {
                puts: vec![sample_put(2), sample_put(3)],
                gets: vec![GetRec {
                    queue: "Q".into(),
                    seq: 1,
                    rank: 0,
                }],
            },
            Record::DefineQueue(QueueDef::local("A")),
            Record::DeleteQueue("A".into()),
            Record::DefineObject(ObjectDef {
                kind: ObjectKind::Listener,
                name: "L1".into(),
                attrs: Default::default(),
                times: ferrymq_types::ObjectTimes::at(1_700_000_000_123),
            }),
            Record::DefineObject(ObjectDef {
                kind: ObjectKind::AuthRec,
                name: "QUEUE|Q1|P:app".into(),
                attrs: Default::default(),
                times: Default::default(),
            }),
            Record::DeleteObject(ObjectKind::ChlAuth, "K".into()),
            Record::DeleteObject(ObjectKind::Channel, "C".into()),
            Record::QmgrAttrs(QmgrAttrs::default()),
            Record::ClearQueue("Q".into()),
            Record::ChannelInDoubt(
                "QM1.QM2".into(),
                crate::channel::InDoubt {
                    luwid: 7,
                    seq: 40,
                    gets: vec![GetRec {
                        queue: "QM2".into(),
                        seq: 3,
                        rank: 1,
                    }],
                },
            ),
            Record::ChannelCommit {
                sync: crate::channel::SyncUpdate {
                    channel: "QM1.QM2".into(),
                    seq: 40,
                    luwid: 7,
                },
                puts: vec![sample_put(4)],
                gets: vec![],
            },
            Record::ChannelBackout {
                channel: "QM1.QM2".into(),
                reset_seq: None,
            },
            Record::ChannelBackout {
                channel: "QM1.QM2".into(),
                reset_seq: Some(0),
            },
            Record::ChannelStopped {
                channel: "QM1.QM2".into(),
                stopped: true,
            },
        ];
        for rec in recs {
            let mut b = BytesMut::new();
            let k = rec.encode_small(&mut b);
            assert_eq!(Record::decode(k, b.freeze()).unwrap(), rec);
        }
    }

    /// A commit record as logs written before the descriptor had group fields hold it: the
    /// descriptor's bytes laid out by hand, field by field, as that format defined them.
    #[test]
    fn a_commit_record_written_before_group_fields_still_replays() {
        let mut b = BytesMut::new();
        b.put_u32_le(1); // puts
        b.put_str16("Q.OLD");
        b.put_u64_le(42);
        b.put_slice(&[7; 24]);
        b.put_slice(&[0; 24]);
        for v in [1, 3, -1, 8] {
            b.put_i32_le(v); // persistence, priority, expiry, msg_type
        }
        for s in ["MQSTR", "", ""] {
            b.put_str16(s);
        }
        b.put_u32_le(0);
        b.put_u64_le(1_700_000_000_000);
        for s in ["", "", "app"] {
            b.put_str16(s);
        }
        for v in [546, 1208, 0, 0] {
            b.put_i32_le(v);
        }
        b.put_u16_le(0); // properties
        b.put_u64_le(0); // expiry time
        b.put_bytes32(b"old body");
        b.put_u32_le(0); // gets
        let Record::Commit { puts, gets } = Record::decode(kind::COMMIT, b.freeze()).unwrap()
        else {
            panic!("not a commit");
        };
        assert!(gets.is_empty());
        let p = &puts[0];
        assert_eq!(
            (p.queue.as_str(), p.seq, &p.body[..]),
            ("Q.OLD", 42, &b"old body"[..])
        );
        assert_eq!(p.md.persistence, Persistence::Persistent);
        assert_eq!(p.md.format, "MQSTR");
        assert_eq!(p.md.put_appl_name, "app");
        assert!(!p.md.has_group_fields());
        // Re-encoded today, a message outside any group is byte for byte what it was.
        let m = Message::new(
            p.seq,
            p.md.clone(),
            p.props.clone(),
            p.body.clone(),
            None,
            0,
        );
        let (mut head, body) = encode_stored("Q.OLD", &m);
        head.extend_from_slice(body);
        assert_eq!(decode_stored(head.freeze()).unwrap(), *p);
    }

    #[test]
    fn a_grouped_message_round_trips_through_the_log() {
        let mut p = sample_put(9);
        p.md.group_id = [8; 24];
        p.md.msg_seq_number = 4;
        p.md.offset = 10;
        p.md.msg_flags = ferrymq_types::descriptor::msg_flags::SEGMENT
            | ferrymq_types::descriptor::msg_flags::MSG_IN_GROUP;
        p.md.original_length = 30;
        let rec = Record::Put(p);
        let mut b = BytesMut::new();
        let k = rec.encode_small(&mut b);
        assert_eq!(Record::decode(k, b.freeze()).unwrap(), rec);
    }

    #[test]
    fn split_put_encoding_matches_the_decoder() {
        let p = sample_put(7);
        let m = Message::new(
            p.seq,
            p.md.clone(),
            p.props.clone(),
            p.body.clone(),
            p.expires_at_ms,
            0,
        );
        let (mut head, body) = encode_stored("Q1", &m);
        head.extend_from_slice(body);
        assert_eq!(decode_stored(head.freeze()).unwrap(), p);
    }
}
