//! Checkpoint images and replay. A checkpoint image is the persistent state at one log position:
//! object definitions, queue manager attributes, and a reference to every persistent message (its
//! queue, sequence number, backout count and place in the message store). Restart loads the newest
//! image and replays the log records written after it; an HA replica or a DR site does the same.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_types::codec::{Codec, DecodeError, PutExt, Reader};
use ferrymq_types::limits::MSG_SEQ_MAX;
use ferrymq_types::{DynamicKind, MqError, ObjectDef, QmgrAttrs, QueueDef};

use crate::dr::DrState;
use crate::message::{Entry, Message};
use crate::queue::Queue;
use crate::records::{GetRec, PutRec, Record};
use crate::{Engine, EngineConfig, LogSink};

/// A persistent message in a checkpoint image.
#[derive(Debug, Clone)]
pub struct ImageMsg {
    /// Shared by every message of the queue (a String each cost ~50 bytes per message).
    pub queue: Arc<str>,
    pub msg: Arc<Message>,
    pub backout_count: u32,
}

/// The persistent state of a queue manager at one log position.
#[derive(Debug, Clone, Default)]
pub struct Image {
    pub attrs: QmgrAttrs,
    pub queues: Vec<QueueDef>,
    pub objects: Vec<ObjectDef>,
    pub next_seq: u64,
    pub messages: Vec<ImageMsg>,
    pub dr: DrState,
    pub channels: crate::channel::ChannelSyncs,
}

/// One message reference in a checkpoint manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestRef {
    pub queue: Arc<str>,
    pub seq: u64,
    /// Packed message-store location.
    pub loc: u64,
    pub backout_count: u32,
}

/// A decoded checkpoint manifest: the image without message contents.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    pub attrs: QmgrAttrs,
    pub queues: Vec<QueueDef>,
    pub objects: Vec<ObjectDef>,
    pub next_seq: u64,
    pub refs: Vec<ManifestRef>,
    pub dr: DrState,
    pub channels: crate::channel::ChannelSyncs,
    /// Opaque metadata stored with the checkpoint: in a replicated queue manager, the Raft
    /// snapshot metadata (the last log entry the checkpoint covers, and the membership).
    pub meta: Vec<u8>,
}

mod tag {
    pub const ATTRS: u8 = 1;
    pub const QUEUE: u8 = 2;
    pub const OBJECT: u8 = 3;
    pub const NEXT_SEQ: u8 = 4;
    pub const REFS: u8 = 5;
    pub const META: u8 = 6;
    pub const DR: u8 = 7;
    pub const CHANNELS: u8 = 8;
}

const REFS_PER_CHUNK: usize = 4096;

/// The manifest's message references encoded as they come, one chunk of up to
/// `REFS_PER_CHUNK` at a time in one reused buffer: a checkpoint of a deep queue streams them to
/// its manifest file without first collecting a [`ManifestRef`] per message (40 bytes each) or
/// every encoded chunk (26 bytes per message), which, freed right after, left the heap of a queue
/// manager holding millions of messages tens of megabytes larger. Reference chunks go after the
/// manifest's others, as [`Manifest::encode`] places them.
#[derive(Default)]
pub struct RefChunks {
    cur: Vec<u8>,
    n: u32,
}

impl RefChunks {
    /// Adds a reference; returns the chunk to write when this one completes it.
    pub fn push(&mut self, queue: &str, seq: u64, loc: u64, backout_count: u32) -> Option<&[u8]> {
        if self.n == 0 {
            self.cur.clear();
            self.cur
                .reserve(5 + REFS_PER_CHUNK * (2 + queue.len() + 20));
            self.cur.put_u8(tag::REFS);
            self.cur.put_u32_le(0);
        }
        self.cur.put_str16(queue);
        self.cur.put_u64_le(seq);
        self.cur.put_u64_le(loc);
        self.cur.put_u32_le(backout_count);
        self.n += 1;
        (self.n as usize == REFS_PER_CHUNK).then(|| self.take())
    }

    /// The last, partial chunk, if references were added since the last full one.
    pub fn rest(&mut self) -> Option<&[u8]> {
        (self.n > 0).then(|| self.take())
    }

    fn take(&mut self) -> &[u8] {
        self.cur[1..5].copy_from_slice(&self.n.to_le_bytes());
        self.n = 0;
        &self.cur
    }
}

impl Manifest {
    /// Encodes the manifest as chunks for the checkpoint file.
    pub fn encode(&self) -> Vec<Bytes> {
        let mut chunks = Vec::new();
        let mut one = |t: u8, f: &dyn Fn(&mut BytesMut)| {
            let mut b = BytesMut::new();
            b.put_u8(t);
            f(&mut b);
            chunks.push(b.freeze());
        };
        one(tag::ATTRS, &|b| self.attrs.encode(b));
        for q in &self.queues {
            one(tag::QUEUE, &|b| q.encode(b));
        }
        for o in &self.objects {
            one(tag::OBJECT, &|b| o.encode(b));
        }
        one(tag::NEXT_SEQ, &|b| b.put_u64_le(self.next_seq));
        if self.dr != DrState::default() {
            one(tag::DR, &|b| self.dr.encode(b));
        }
        if !self.channels.is_empty() {
            one(tag::CHANNELS, &|b| {
                crate::channel::encode_syncs(&self.channels, b)
            });
        }
        if !self.meta.is_empty() {
            one(tag::META, &|b| b.extend_from_slice(&self.meta));
        }
        let mut refs = RefChunks::default();
        for r in &self.refs {
            if let Some(c) = refs.push(&r.queue, r.seq, r.loc, r.backout_count) {
                chunks.push(Bytes::copy_from_slice(c));
            }
        }
        if let Some(c) = refs.rest() {
            chunks.push(Bytes::copy_from_slice(c));
        }
        chunks
    }

    pub fn decode(chunks: &[Bytes]) -> Result<Manifest, DecodeError> {
        let mut m = Manifest::default();
        for c in chunks {
            let mut r = Reader::new(c.clone());
            match r.u8("manifest tag")? {
                tag::ATTRS => m.attrs = QmgrAttrs::decode(&mut r)?,
                tag::QUEUE => m.queues.push(QueueDef::decode(&mut r)?),
                tag::OBJECT => m.objects.push(ObjectDef::decode(&mut r)?),
                tag::NEXT_SEQ => {
                    m.next_seq = r.u64("next seq")?;
                    if m.next_seq > MSG_SEQ_MAX + 1 {
                        return Err(DecodeError::invalid(
                            "next seq",
                            format!("{} is beyond the sequence numbers", m.next_seq),
                        ));
                    }
                }
                tag::DR => m.dr = DrState::decode(&mut r)?,
                tag::CHANNELS => m.channels = crate::channel::decode_syncs(&mut r)?,
                tag::META => {
                    m.meta = c[1..].to_vec();
                    continue;
                }
                tag::REFS => {
                    let n = r.u32("ref count")?;
                    for _ in 0..n {
                        let name = r.str16("ref queue")?;
                        // Refs come grouped by queue: share one name among them.
                        let queue = match m.refs.last() {
                            Some(last) if *last.queue == *name => last.queue.clone(),
                            _ => Arc::from(name),
                        };
                        let seq = r.u64("ref seq")?;
                        if seq > MSG_SEQ_MAX {
                            return Err(DecodeError::invalid(
                                "ref seq",
                                format!("{seq} is beyond the sequence numbers"),
                            ));
                        }
                        m.refs.push(ManifestRef {
                            queue,
                            seq,
                            loc: r.u64("ref loc")?,
                            backout_count: r.u32("ref backout")?,
                        });
                    }
                }
                t => return Err(DecodeError::invalid("manifest tag", format!("{t}"))),
            }
            r.finish("manifest chunk")?;
        }
        Ok(m)
    }
}

impl Engine {
    /// Captures the persistent state now: what a checkpoint at the current log end must hold.
    /// Messages taken by unfinished units of work are included (they are still on the queue as far
    /// as the log is concerned); uncommitted puts, non-persistent messages and temporary dynamic
    /// queues are not.
    pub fn checkpoint_image(&self, now_ms: u64) -> Image {
        let durable_queue = |d: &QueueDef| d.dynamic != Some(DynamicKind::Temporary);
        let mut queues: Vec<QueueDef> = self
            .queues
            .values()
            .map(|q| q.def.clone())
            .filter(|d| durable_queue(d))
            .collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        // Sized once: growing it by doubling left a trail of freed buffers (up to half its size)
        // in the heap on every checkpoint of a deep queue. The bound counts non-persistent
        // messages too; the pages they would take are never touched, so cost no memory.
        let upper = self.queues.values().map(|q| q.available()).sum::<usize>()
            + self.conns.values().map(|c| c.uow.gets.len()).sum::<usize>();
        let mut messages = Vec::with_capacity(upper);
        for (name, q) in &self.queues {
            if !durable_queue(&q.def) {
                continue;
            }
            let name: Arc<str> = Arc::from(name.as_str());
            for (_, e) in q.iter() {
                if e.msg.persistent && !e.msg.is_expired(now_ms) {
                    messages.push(ImageMsg {
                        queue: name.clone(),
                        msg: e.msg.clone(),
                        backout_count: e.backout_count,
                    });
                }
            }
        }
        for c in self.conns.values() {
            for (name, _, e) in &c.uow.gets {
                let durable = self.queues.get(name).is_some_and(|q| durable_queue(&q.def));
                if durable && e.msg.persistent {
                    messages.push(ImageMsg {
                        queue: Arc::from(name.as_str()),
                        msg: e.msg.clone(),
                        backout_count: e.backout_count,
                    });
                }
            }
        }
        Image {
            attrs: self.attrs.clone(),
            queues,
            objects: self.objects.values().cloned().collect(),
            next_seq: self.next_seq,
            messages,
            dr: self.dr,
            channels: self.channels.clone(),
        }
    }

    /// Rebuilds an engine from a checkpoint image (then [`Engine::replay`] the log after it).
    /// An image that holds two messages with one sequence number on one queue is damaged (a
    /// running queue manager never makes one): OBJECT_DAMAGED, naming the queue and number,
    /// rather than one message silently taking the other's place.
    pub fn restore(
        cfg: EngineConfig,
        log: Box<dyn LogSink>,
        image: Image,
    ) -> Result<Engine, MqError> {
        let mut e = Engine::new(cfg, log);
        e.load_image(image)?;
        Ok(e)
    }

    /// Replaces this engine's whole persistent state with `image`, keeping its log sink and
    /// configuration: a DR secondary installing a completed full copy (the caller has made the
    /// image its checkpoint first, so the log after it replays onto exactly this state). Only a
    /// queue manager that serves no applications may do this: connections keep their ids but
    /// lose their handles and units of work.
    pub fn replace_with_image(&mut self, image: Image) {
        self.queues.clear();
        self.objects.clear();
        self.pubsub = Default::default();
        self.channels.clear();
        for c in self.conns.values_mut() {
            c.subs.clear();
            c.handles.clear();
            c.uow = Default::default();
            c.waiting = None;
        }
        self.waiters = Default::default();
        self.deliveries.clear();
        // The copy comes from a staging engine's own checkpoint image, whose keys are unique: a
        // duplicate cannot occur here, and if it did the first message would be kept.
        let _ = self.load_image(image);
    }

    fn load_image(&mut self, image: Image) -> Result<(), MqError> {
        let e = self;
        e.attrs = image.attrs;
        e.next_seq = image.next_seq.max(1);
        e.dr = image.dr;
        e.channels = image.channels;
        for d in image.queues {
            e.queues.insert(d.name.clone(), Queue::new(d));
        }
        for o in image.objects {
            e.objects.insert((o.kind, o.name.clone()), o);
        }
        e.objects_version += 1;
        e.ps_objects_reset();
        for m in image.messages {
            // A damaged image's last sequence number must not overflow the counter.
            e.next_seq = e.next_seq.max(m.msg.seq.saturating_add(1));
            if let Some(q) = e.queues.get_mut(&*m.queue) {
                let key = q.key_for(m.msg.priority, m.msg.seq);
                let seq = m.msg.seq;
                let entry = Entry {
                    msg: m.msg,
                    backout_count: m.backout_count,
                };
                if q.insert_new(key, entry).is_err() {
                    return Err(MqError::new(
                        ferrymq_types::Reason::OBJECT_DAMAGED,
                        format!(
                            "the checkpoint image holds two messages with sequence number {seq} on queue '{}'",
                            m.queue
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// What replaying a put leaves behind when the same records also remove its message again:
    /// only the sequence counter moves (and a put to an undefined queue is still refused).
    pub(crate) fn replay_put_consumed(&mut self, p: &PutRec) -> Result<(), MqError> {
        self.next_seq = self.next_seq.max(p.seq + 1);
        if self.queues.contains_key(&p.queue) {
            Ok(())
        } else {
            Err(MqError::new(
                ferrymq_types::Reason::OBJECT_DAMAGED,
                format!("log replay: put to queue '{}' that is not defined", p.queue),
            ))
        }
    }

    fn replay_put(&mut self, p: PutRec) -> Result<(), MqError> {
        self.next_seq = self.next_seq.max(p.seq + 1);
        let q = self.queues.get_mut(&p.queue).ok_or_else(|| {
            MqError::new(
                ferrymq_types::Reason::OBJECT_DAMAGED,
                format!("log replay: put to queue '{}' that is not defined", p.queue),
            )
        })?;
        // Replayed records (the log at restart, a replica's entries, a shipped DR chunk) are
        // slices of large buffers: even a large body is copied out.
        let body = crate::message::detach_large(p.body);
        let msg = Message::new(p.seq, p.md, p.props, body, p.expires_at_ms, 0);
        let key = q.key_for(msg.priority, msg.seq);
        if q.key_of_seq(msg.seq, key.rank()).is_some() {
            // Two puts of one message: replacing it would lose the first and corrupt the
            // queue's identifier indexes; keeping both (at two priorities) would make two
            // messages of one delivery key once the queue turns FIFO.
            return Err(MqError::new(
                ferrymq_types::Reason::OBJECT_DAMAGED,
                format!(
                    "log replay: integrity error: put of message {} to queue '{}', which already holds it",
                    p.seq, p.queue
                ),
            ));
        }
        q.insert(
            key,
            Entry {
                msg: Arc::new(msg),
                backout_count: 0,
            },
        );
        Ok(())
    }

    /// Removes the message a logged get took. The message is found by its sequence number (the
    /// logged rank is only where to look first), and a get that finds nothing is damage: the
    /// state rebuilt so far is not the state that wrote the log, and carrying on silently would
    /// bring consumed messages back or lose others.
    fn replay_get(&mut self, g: &GetRec) -> Result<(), MqError> {
        let q = self.queues.get_mut(&g.queue).ok_or_else(|| {
            MqError::new(
                ferrymq_types::Reason::OBJECT_DAMAGED,
                format!(
                    "log replay: integrity error: get of message {} from queue '{}', which is not defined",
                    g.seq, g.queue
                ),
            )
        })?;
        match q.key_of_seq(g.seq, g.rank) {
            Some(key) => {
                q.remove(key);
                Ok(())
            }
            None => Err(MqError::new(
                ferrymq_types::Reason::OBJECT_DAMAGED,
                format!(
                    "log replay: integrity error: get of message {} from queue '{}' matches no message on it ({} queued)",
                    g.seq,
                    g.queue,
                    q.available()
                ),
            )),
        }
    }

    /// Applies one log record written after the loaded checkpoint, without logging it again.
    pub fn replay(&mut self, kind: u8, payload: Bytes) -> Result<(), MqError> {
        self.replay_record(decode_for_replay(kind, payload)?)
    }

    /// Applies one decoded log record (see [`replay`](Self::replay)).
    pub(crate) fn replay_record(&mut self, rec: Record) -> Result<(), MqError> {
        match rec {
            Record::Put(p) => self.replay_put(p)?,
            Record::Get(g) => self.replay_get(&g)?,
            Record::Commit { puts, gets } => {
                for g in &gets {
                    self.replay_get(g)?;
                }
                for p in puts {
                    self.replay_put(p)?;
                }
            }
            Record::DefineQueue(d) => self.apply_define_queue(d),
            Record::DeleteQueue(n) => {
                self.queues.remove(&n);
            }
            Record::DefineObject(o) => {
                let (kind, name) = (o.kind, o.name.clone());
                self.objects.insert((kind, name.clone()), o);
                self.objects_version += 1;
                self.ps_object_changed(kind, &name);
            }
            Record::DeleteObject(k, n) => {
                self.objects.remove(&(k, n.clone()));
                self.objects_version += 1;
                self.ps_object_changed(k, &n);
            }
            Record::QmgrAttrs(a) => self.attrs = a,
            Record::ClearQueue(n) => {
                if let Some(q) = self.queues.get_mut(&n) {
                    q.drain();
                }
            }
            Record::DrStream(id) => self.dr.stream = id,
            Record::DrMark(m) => self.dr.mark = Some(m),
            Record::DrAcked(m) => self.dr.acked = Some(m),
            Record::DrReset => self.reset_for_copy(),
            Record::ChannelInDoubt(name, d) => {
                self.channels.entry(name).or_default().indoubt = Some(d);
            }
            Record::ChannelCommit { sync, puts, gets } => {
                for g in &gets {
                    self.replay_get(g)?;
                }
                for p in puts {
                    self.replay_put(p)?;
                }
                self.apply_sync(sync);
            }
            Record::ChannelBackout { channel, reset_seq } => {
                self.apply_backout(&channel, reset_seq)
            }
            Record::ChannelStopped { channel, stopped } => {
                self.channels.entry(channel).or_default().stopped = stopped;
            }
        }
        Ok(())
    }
}

/// Decodes a log record for replay; an undecodable one is damage.
pub(crate) fn decode_for_replay(kind: u8, payload: Bytes) -> Result<Record, MqError> {
    Record::decode(kind, payload).map_err(|e| {
        MqError::new(
            ferrymq_types::Reason::OBJECT_DAMAGED,
            format!("log replay: undecodable record: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::kind;
    use crate::MemoryLog;
    use bytes::BytesMut;
    use ferrymq_types::{MessageDescriptor, Properties};

    fn engine() -> Engine {
        let cfg = EngineConfig {
            qmgr_name: "QM".into(),
            max_handles: 16,
            instance_id: 1,
            backout_requeue: true,
            message_memory_max: 0,
        };
        let mut e = Engine::new(cfg, Box::new(MemoryLog::default()));
        e.define_queue(QueueDef::local("Q"), false).unwrap();
        e
    }

    fn put(seq: u64) -> PutRec {
        PutRec {
            queue: "Q".into(),
            seq,
            md: MessageDescriptor::default(),
            props: Properties::default(),
            expires_at_ms: None,
            body: Bytes::from_static(b"m"),
        }
    }

    fn encoded(rec: &Record) -> (u8, Bytes) {
        let mut b = BytesMut::new();
        let k = rec.encode_small(&mut b);
        (k, b.freeze())
    }

    #[test]
    fn a_replayed_put_numbered_beyond_the_sequence_range_is_damage_not_an_overflow() {
        let mut e = engine();
        for seq in [u64::MAX, MSG_SEQ_MAX + 1] {
            let (k, b) = encoded(&Record::Put(put(seq)));
            assert_eq!(k, kind::PUT);
            let err = e.replay(k, b).unwrap_err();
            assert_eq!(err.reason, ferrymq_types::Reason::OBJECT_DAMAGED, "{err}");
            let (k, b) = encoded(&Record::Commit {
                puts: vec![put(seq)],
                gets: vec![],
            });
            assert!(e.replay(k, b).is_err());
        }
        // The engine still numbers its messages as before.
        e.replay(kind::PUT, encoded(&Record::Put(put(7))).1)
            .unwrap();
        assert_eq!(e.next_seq, 8);
    }

    #[test]
    fn a_replayed_second_put_of_one_message_is_damage_and_keeps_the_first() {
        let mut e = engine();
        let first = put(5);
        e.replay(kind::PUT, encoded(&Record::Put(first.clone())).1)
            .unwrap();
        for priority in [0, 9] {
            let mut second = PutRec {
                body: Bytes::from_static(b"other"),
                ..first.clone()
            };
            second.md.priority = priority;
            let err = e
                .replay(kind::PUT, encoded(&Record::Put(second)).1)
                .unwrap_err();
            assert_eq!(err.reason, ferrymq_types::Reason::OBJECT_DAMAGED, "{err}");
            assert!(err.to_string().contains("already holds"), "{err}");
        }
        let q = &e.queues["Q"];
        assert_eq!(q.available(), 1);
        let (_, kept) = q.iter().next().unwrap();
        assert_eq!(&kept.msg.body[..], b"m");
    }

    /// A get's sequence number beyond the 60 bits of a delivery key would alias a real message's
    /// key (and its rank is only a hint): it must remove nothing.
    #[test]
    fn a_replayed_get_beyond_the_sequence_range_removes_nothing() {
        let mut e = engine();
        e.replay(kind::PUT, encoded(&Record::Put(put(5))).1)
            .unwrap();
        for (seq, rank) in [(MSG_SEQ_MAX + 1 + 5, 5), (u64::MAX, 16), (5 | 1 << 62, 0)] {
            let get = Record::Get(GetRec {
                queue: "Q".into(),
                seq,
                rank,
            });
            let (k, b) = encoded(&get);
            assert!(e.replay(k, b).is_err(), "{get:?}");
        }
        assert_eq!(e.queues["Q"].available(), 1, "message 5 is still queued");
        // A hint outside the ranks is ignored, not trusted.
        let get = Record::Get(GetRec {
            queue: "Q".into(),
            seq: 5,
            rank: 16,
        });
        let (k, b) = encoded(&get);
        e.replay(k, b).unwrap();
        assert_eq!(e.queues["Q"].available(), 0);
    }
}
