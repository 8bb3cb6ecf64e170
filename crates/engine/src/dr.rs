//! The engine's part of disaster recovery (DR). A DR primary ships its log records to a recovery
//! site; the secondary there applies them to its own engine *and logs them again* in its own
//! recovery log ([`Engine::apply_shipped`]), so its state survives a restart like any other. What
//! DR itself must remember travels in the same log, so it is exactly as durable as the state it
//! describes:
//!
//! - `DR_STREAM`: the id of the stream this queue manager ships as a primary (chosen once);
//! - `DR_MARK`: how far into a primary's stream this state reaches — written after every applied
//!   chunk, so a restarted secondary asks for exactly what it lacks;
//! - `DR_RESET`: a full copy starts and the state before it is dropped (a recovery HA group's
//!   way; a standalone secondary stages the copy apart and installs it whole as a checkpoint,
//!   [`Engine::replace_with_image`], so it never holds half a copy);
//! - `DR_ACKED`: how far the secondary has acknowledged this primary's stream — written now and
//!   then, so a restarted primary, or the next active instance of an HA group (which gets it
//!   through Raft), bounds the lag from there before its own link is up.
//!
//! A full copy is itself a stream of ordinary records ([`Image::copy_records`]): the queue manager's
//! attributes, its queues and objects, then every persistent message in `COMMIT` records, applied
//! to a staging engine on a standalone secondary, and replicated through Raft like normal work
//! by a recovery HA group.

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_types::codec::{DecodeError, Reader};
use ferrymq_types::{MqError, QmgrAttrs};

use crate::records::{kind, DrMark, Record};
use crate::{Engine, Image, Lsn};

/// What the state knows about DR: the stream it ships as a primary (0: none yet), how far into a
/// primary's stream it has applied as a secondary, and (as a primary) how far its secondary had
/// acknowledged when that was last recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrState {
    pub stream: u64,
    pub mark: Option<DrMark>,
    pub acked: Option<DrMark>,
}

fn put_mark(out: &mut BytesMut, m: Option<DrMark>) {
    match m {
        Some(m) => {
            out.put_u8(1);
            out.put_u64_le(m.stream);
            out.put_u64_le(m.pos);
        }
        None => out.put_u8(0),
    }
}

fn get_mark(r: &mut Reader) -> Result<Option<DrMark>, DecodeError> {
    match r.u8("DR mark flag")? {
        0 => Ok(None),
        1 => Ok(Some(DrMark {
            stream: r.u64("DR mark stream")?,
            pos: r.u64("DR mark position")?,
        })),
        v => Err(DecodeError::invalid("DR mark flag", format!("{v}"))),
    }
}

impl DrState {
    pub fn encode(&self, out: &mut BytesMut) {
        out.put_u64_le(self.stream);
        put_mark(out, self.mark);
        put_mark(out, self.acked);
    }

    /// Decodes a state written by [`encode`](Self::encode) that other fields follow (the
    /// `acked` mark is always present then).
    pub fn decode_prefix(r: &mut Reader) -> Result<DrState, DecodeError> {
        Ok(DrState {
            stream: r.u64("DR stream")?,
            mark: get_mark(r)?,
            acked: get_mark(r)?,
        })
    }

    pub fn decode(r: &mut Reader) -> Result<DrState, DecodeError> {
        let stream = r.u64("DR stream")?;
        let mark = get_mark(r)?;
        // Checkpoints written before DR_ACKED existed end here.
        let acked = if r.remaining() > 0 {
            get_mark(r)?
        } else {
            None
        };
        Ok(DrState {
            stream,
            mark,
            acked,
        })
    }
}

/// A full copy's `COMMIT` records hold about this many bytes of messages each.
const COPY_RECORD_BYTES: usize = 256 * 1024;

impl Engine {
    pub fn dr_state(&self) -> DrState {
        self.dr
    }

    fn log_small(&mut self, rec: &Record) -> Result<Lsn, MqError> {
        let mut out = BytesMut::new();
        let k = rec.encode_small(&mut out);
        self.log.append(k, &[&out])
    }

    /// Records the id of the stream this queue manager ships as a DR primary.
    pub fn log_dr_stream(&mut self, id: u64) -> Result<Lsn, MqError> {
        let lsn = self.log_small(&Record::DrStream(id))?;
        self.dr.stream = id;
        Ok(lsn)
    }

    /// Records that everything of `mark.stream` up to `mark.pos` is applied.
    pub fn log_dr_mark(&mut self, mark: DrMark) -> Result<Lsn, MqError> {
        let lsn = self.log_small(&Record::DrMark(mark))?;
        self.dr.mark = Some(mark);
        Ok(lsn)
    }

    /// Records (as a primary) that the secondary has acknowledged `mark.stream` up to
    /// `mark.pos`.
    pub fn log_dr_acked(&mut self, mark: DrMark) -> Result<Lsn, MqError> {
        let lsn = self.log_small(&Record::DrAcked(mark))?;
        self.dr.acked = Some(mark);
        Ok(lsn)
    }

    /// Starts a full copy: logs `DR_RESET` and drops every queue, object and message.
    pub fn dr_reset(&mut self) -> Result<Lsn, MqError> {
        let lsn = self.log_small(&Record::DrReset)?;
        self.reset_for_copy();
        Ok(lsn)
    }

    pub(crate) fn reset_for_copy(&mut self) {
        self.queues.clear();
        self.objects.clear();
        self.ps_objects_reset();
        self.attrs = QmgrAttrs::default();
        self.dr = DrState::default();
        self.channels.clear();
    }

    /// Applies one record received from a DR primary and logs it in this queue manager's own
    /// log. DR records of the primary's own (its stream id, its marks) are not taken. The record
    /// is applied before it is logged: a record that does not apply (a damaged stream) is not
    /// written, so the log never holds a record that restart could not replay.
    pub fn apply_shipped(&mut self, kind: u8, payload: Bytes) -> Result<Option<Lsn>, MqError> {
        self.apply_shipped_chunk(vec![(kind, payload)])
    }

    /// Applies a chunk of the primary's records in order and logs each (as
    /// [`apply_shipped`](Self::apply_shipped)), without the work of a message the chunk both puts
    /// and removes: such a pair leaves no trace in the state (replay keeps no statistics), so
    /// only the sequence counter moves. In request/reply traffic most messages live for less
    /// than a chunk, so most of a secondary's inserts, index entries and removals are saved.
    /// Returns the LSN of the last record logged (None if the chunk held only DR records).
    pub fn apply_shipped_chunk(&mut self, recs: Vec<(u8, Bytes)>) -> Result<Option<Lsn>, MqError> {
        let mut decoded = Vec::with_capacity(recs.len());
        for (k, payload) in recs {
            if !kind::is_dr(k) {
                let rec = crate::recovery::decode_for_replay(k, payload.clone())?;
                decoded.push((k, payload, rec));
            }
        }
        let consumed = consumed_within(decoded.iter().map(|(_, _, r)| r));
        let mut last = None;
        for (i, (k, payload, rec)) in decoded.into_iter().enumerate() {
            let rec = match rec {
                Record::Put(p) if consumed.puts.contains(&(i, 0)) => {
                    self.replay_put_consumed(&p)?;
                    None
                }
                Record::Get(_) if consumed.gets.contains(&(i, 0)) => None,
                Record::Commit { mut puts, mut gets } => {
                    // Filtered in place: no new vectors per record on the secondary's hot path.
                    for (j, p) in puts.iter().enumerate() {
                        if consumed.puts.contains(&(i, j)) {
                            self.replay_put_consumed(p)?;
                        }
                    }
                    let mut j = 0;
                    puts.retain(|_| {
                        j += 1;
                        !consumed.puts.contains(&(i, j - 1))
                    });
                    let mut j = 0;
                    gets.retain(|_| {
                        j += 1;
                        !consumed.gets.contains(&(i, j - 1))
                    });
                    Some(Record::Commit { puts, gets })
                }
                other => Some(other),
            };
            if let Some(rec) = rec {
                self.replay_record(rec)?;
            }
            // The chunk's DR mark follows and is what the acknowledgement waits on.
            last = Some(self.log.append_lazy(k, &[&payload])?);
        }
        Ok(last)
    }
}

/// Puts and gets (record index, index within the record) that cancel out within a run of
/// records: a message put and then removed again by a later record.
#[derive(Default)]
struct Consumed {
    puts: ahash::AHashSet<(usize, usize)>,
    gets: ahash::AHashSet<(usize, usize)>,
}

fn consumed_within<'a>(recs: impl Iterator<Item = &'a Record>) -> Consumed {
    use std::collections::hash_map::Entry;
    let mut out = Consumed::default();
    // Messages put so far and not yet removed: sequence number -> (queue, where it was put).
    let mut open: ahash::AHashMap<u64, (&str, (usize, usize))> = ahash::AHashMap::new();
    for (i, rec) in recs.enumerate() {
        let (puts, gets): (&[crate::records::PutRec], &[crate::records::GetRec]) = match rec {
            Record::Put(p) => (std::slice::from_ref(p), &[]),
            Record::Get(g) => (&[], std::slice::from_ref(g)),
            Record::Commit { puts, gets } => (puts, gets),
            _ => continue,
        };
        // A commit's gets are applied before its puts, so they can only remove earlier puts.
        for (j, g) in gets.iter().enumerate() {
            if let Entry::Occupied(e) = open.entry(g.seq) {
                if e.get().0 == g.queue {
                    out.puts.insert(e.remove().1);
                    out.gets.insert((i, j));
                }
            }
        }
        for (j, p) in puts.iter().enumerate() {
            open.insert(p.seq, (&p.queue, (i, j)));
        }
    }
    out
}

impl Image {
    /// The state as records that rebuild it when applied after `DR_RESET`: attributes, queues,
    /// objects, then every persistent message (as `COMMIT` records of about 256 KiB, in queue
    /// order, with their sequence numbers, so delivery order is kept). Capture the image under
    /// the engine lock ([`Engine::checkpoint_image`], cheap: messages are shared); encode it
    /// here, outside the lock.
    pub fn copy_records(&self) -> Vec<(u8, Bytes)> {
        let image = self;
        let mut out = Vec::new();
        let one = |rec: Record, out: &mut Vec<(u8, Bytes)>| {
            let mut b = BytesMut::new();
            let k = rec.encode_small(&mut b);
            out.push((k, b.freeze()));
        };
        one(Record::QmgrAttrs(image.attrs.clone()), &mut out);
        for q in &image.queues {
            one(Record::DefineQueue(q.clone()), &mut out);
        }
        for o in &image.objects {
            one(Record::DefineObject(o.clone()), &mut out);
        }
        let mut puts: Vec<(&str, &crate::Message)> = Vec::new();
        let mut bytes = 0;
        let flush = |puts: &mut Vec<(&str, &crate::Message)>, out: &mut Vec<(u8, Bytes)>| {
            if puts.is_empty() {
                return;
            }
            let mut b = BytesMut::new();
            Record::encode_commit(puts, &[], &mut b);
            out.push((kind::COMMIT, b.freeze()));
            puts.clear();
        };
        for m in &image.messages {
            puts.push((&m.queue, &m.msg));
            bytes += m.msg.body.len() + 256;
            if bytes >= COPY_RECORD_BYTES {
                flush(&mut puts, &mut out);
                bytes = 0;
            }
        }
        flush(&mut puts, &mut out);
        // The channels' synchronisation state: a commit carrying it, and any batch in doubt.
        for (name, c) in &image.channels {
            one(
                Record::ChannelCommit {
                    sync: crate::channel::SyncUpdate {
                        channel: name.clone(),
                        seq: c.seq,
                        luwid: c.luwid,
                    },
                    puts: Vec::new(),
                    gets: Vec::new(),
                },
                &mut out,
            );
            if let Some(d) = &c.indoubt {
                one(Record::ChannelInDoubt(name.clone(), d.clone()), &mut out);
            }
            if c.stopped {
                one(
                    Record::ChannelStopped {
                        channel: name.clone(),
                        stopped: true,
                    },
                    &mut out,
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EngineConfig, MemoryLog};

    fn engine() -> Engine {
        let mut e = Engine::new(
            EngineConfig {
                qmgr_name: "QM".into(),
                max_handles: 256,
                instance_id: 7,
                backout_requeue: true,
                message_memory_max: 0,
            },
            Box::new(MemoryLog::default()),
        );
        e.install_defaults().unwrap();
        e
    }

    #[test]
    fn dr_state_round_trips_through_the_codec() {
        for st in [
            DrState::default(),
            DrState {
                stream: 9,
                mark: Some(DrMark { stream: 3, pos: 77 }),
                acked: None,
            },
            DrState {
                stream: 9,
                mark: None,
                acked: Some(DrMark { stream: 9, pos: 5 }),
            },
        ] {
            let mut b = BytesMut::new();
            st.encode(&mut b);
            let mut r = Reader::new(b.freeze());
            assert_eq!(DrState::decode(&mut r).unwrap(), st);
        }
        // A checkpoint from before DR_ACKED: stream and mark only.
        let mut b = BytesMut::new();
        b.put_u64_le(4);
        b.put_u8(0);
        let old = DrState::decode(&mut Reader::new(b.freeze())).unwrap();
        assert_eq!((old.stream, old.mark, old.acked), (4, None, None));
    }

    #[test]
    fn the_acknowledged_position_survives_replay() {
        let mut src = engine();
        let m = DrMark {
            stream: 5,
            pos: 1234,
        };
        src.log_dr_acked(m).unwrap();
        assert_eq!(src.dr_state().acked, Some(m));
        let mut b = BytesMut::new();
        let k = Record::DrAcked(m).encode_small(&mut b);
        let mut dst = engine();
        dst.replay(k, b.freeze()).unwrap();
        assert_eq!(dst.dr_state().acked, Some(m));
        // A secondary does not take its primary's DR records.
        let mut b = BytesMut::new();
        let k = Record::DrAcked(m).encode_small(&mut b);
        let mut sec = engine();
        assert_eq!(sec.apply_shipped(k, b.freeze()).unwrap(), None);
        assert_eq!(sec.dr_state().acked, None);
    }

    #[test]
    fn a_message_put_and_removed_within_a_run_cancels_out() {
        use crate::records::{GetRec, PutRec};
        let put = |q: &str, seq| PutRec {
            queue: q.into(),
            seq,
            md: Default::default(),
            props: Default::default(),
            expires_at_ms: None,
            body: Bytes::new(),
        };
        let get = |q: &str, seq| GetRec {
            queue: q.into(),
            seq,
            rank: 4,
        };
        let recs = [
            Record::Put(put("Q1", 1)),
            // Takes 1 and puts its reply 2 in one unit of work.
            Record::Commit {
                puts: vec![put("Q2", 2)],
                gets: vec![get("Q1", 1)],
            },
            Record::Get(get("Q2", 2)),
            Record::Put(put("Q1", 3)),
            // Same number, other queue: not the message put above.
            Record::Get(get("Q2", 3)),
            // A message from before the run.
            Record::Get(get("Q1", 0)),
        ];
        let c = consumed_within(recs.iter());
        let mut puts: Vec<_> = c.puts.into_iter().collect();
        let mut gets: Vec<_> = c.gets.into_iter().collect();
        puts.sort();
        gets.sort();
        assert_eq!(puts, vec![(0, 0), (1, 0)]);
        assert_eq!(gets, vec![(1, 0), (2, 0)]);
    }

    #[test]
    fn shipped_dr_records_are_not_taken_by_the_secondary() {
        let mut dst = engine();
        let mut b = BytesMut::new();
        let k = Record::DrStream(44).encode_small(&mut b);
        assert_eq!(dst.apply_shipped(k, b.freeze()).unwrap(), None);
        assert_eq!(dst.dr_state().stream, 0);
    }
}
