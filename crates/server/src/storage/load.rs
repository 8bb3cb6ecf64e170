//! Reading checkpoints back: the newest manifest and the messages it references from the message
//! store, and the whole-state image exported to (and decoded by) a replica behind the Raft log.

use super::*;

/// Reads every message a manifest references from the message store.
/// A message the store could not read back costs that message only: it is left out and described
/// in the second list.
///
/// The references are put in store order (segment, then offset) and each segment's scan is
/// matched against them by walking both in order: 4 bytes per message for the order, where a
/// hash table of every reference cost about 35, freed again among the restored messages.
fn load_messages(
    segs: &SegmentStore,
    refs: &[ManifestRef],
) -> Result<(Vec<ImageMsg>, Vec<String>), String> {
    let mut order: Vec<u32> = (0..refs.len() as u32).collect();
    order.sort_unstable_by_key(|&i| refs[i as usize].loc);
    let r = |i: &u32| &refs[*i as usize];
    let mut out = Vec::with_capacity(refs.len());
    let mut lost = Vec::new();
    for group in order.chunk_by(|a, b| segment_of(r(a).loc) == segment_of(r(b).loc)) {
        let seg = segment_of(r(&group[0]).loc);
        let scan = segs
            .scan_report(seg)
            .map_err(|e| format!("message store segment {seg}: {e}"))?;
        let mut records = scan.records.into_iter().peekable();
        let mut missing: Vec<&ManifestRef> = Vec::new();
        for i in group {
            let want = r(i);
            while records.next_if(|(loc, ..)| loc.pack() < want.loc).is_some() {}
            let Some((_, _, _, payload)) =
                records.next_if(|(loc, id, ..)| loc.pack() == want.loc && *id == want.seq)
            else {
                missing.push(want);
                continue;
            };
            let p = decode_stored(payload).map_err(|e| {
                format!(
                    "message store segment {seg}: stored message {}: {e}",
                    want.seq
                )
            })?;
            // The payload is a slice of the whole segment read at once: copy the body out (small
            // bodies are copied by `Message::new`) so no queued message keeps a segment alive.
            let body = ferrymq_engine::message::detach_large(p.body);
            let msg = Message::new(p.seq, p.md, p.props, body, p.expires_at_ms, 0);
            msg.set_store_loc(want.loc);
            out.push(ImageMsg {
                queue: want.queue.clone(),
                msg: Arc::new(msg),
                backout_count: want.backout_count,
            });
        }
        for r in missing {
            let offset = StoreLoc::unpack(r.loc, 0).map_or(0, |l| l.offset);
            // Past damage the scan could not resynchronise on: read it where the manifest says.
            if let Ok((_, id, _, payload)) = segs.read_at(seg, offset) {
                if id == r.seq {
                    if let Ok(p) = decode_stored(payload) {
                        let msg = Message::new(p.seq, p.md, p.props, p.body, p.expires_at_ms, 0);
                        msg.set_store_loc(r.loc);
                        out.push(ImageMsg {
                            queue: r.queue.clone(),
                            msg: Arc::new(msg),
                            backout_count: r.backout_count,
                        });
                        continue;
                    }
                }
            }
            lost.push(format!(
                "message store: message {} on queue {} (segment {seg} offset {offset}) is damaged or missing and was not restored",
                r.seq, r.queue
            ));
        }
    }
    Ok((out, lost))
}

/// Reads the newest checkpoint: its key, the image it holds (messages read from the store) and
/// the metadata stored with it. No checkpoint yet: key 0 and an empty image.
fn load_latest(
    segments: &SegmentStore,
    store_dir: &std::path::Path,
) -> Result<(Lsn, Image, Vec<u8>), String> {
    let (key, image, meta, lost) = load_latest_reporting(segments, store_dir)?;
    for l in lost {
        tracing::warn!("{l}");
    }
    Ok((key, image, meta))
}

/// [`load_latest`] that also returns the messages it could not read back.
pub(super) fn load_latest_reporting(
    segments: &SegmentStore,
    store_dir: &std::path::Path,
) -> Result<(Lsn, Image, Vec<u8>, Vec<String>), String> {
    let (key, manifest) = match CheckpointReader::latest(store_dir).map_err(io_err)? {
        Some((lsn, chunks)) => (
            lsn,
            Manifest::decode(&chunks)
                .map_err(|e| format!("checkpoint manifest is damaged: {e}"))?,
        ),
        None => (0, Manifest::default()),
    };
    let (messages, lost) = load_messages(segments, &manifest.refs)?;
    let image = Image {
        attrs: manifest.attrs,
        queues: manifest.queues,
        objects: manifest.objects,
        next_seq: manifest.next_seq,
        messages,
        dr: manifest.dr,
        channels: manifest.channels,
    };
    Ok((key, image, manifest.meta, lost))
}

/// A whole-state image: the checkpoint's metadata and the image bytes.
pub type Exported = (Vec<u8>, Vec<u8>);

/// Magic of a whole-state image sent to a replica behind the purged Raft log.
const EXPORT_MAGIC: &[u8; 8] = b"FMQIMG01";

impl Storage {
    /// Opens only the message store (a replicated queue manager: the ring is the replica's).
    pub fn open_store(paths: &QmPaths) -> Result<Storage, String> {
        let store_dir = paths.store_dir();
        let segments = SegmentStore::open(&store_dir).map_err(io_err)?;
        Ok(Storage {
            log: None,
            segments: Mutex::new(segments),
            store_dir,
            checkpointing: Mutex::new(()),
            dr_retain: Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
            health: Arc::default(),
            room_wait_off_until_ms: std::sync::atomic::AtomicU64::new(0),
            room_low: Arc::default(),
        })
    }

    /// Creates the message store of a new instance of a replicated queue manager: a first
    /// checkpoint holding the default objects and no Raft metadata (every instance starts from
    /// the same definitions; everything after comes through the replicated log).
    pub fn create_replicated(
        paths: &QmPaths,
        ecfg: EngineConfig,
        setup: &mut dyn FnMut(&mut Engine) -> Result<(), String>,
    ) -> Result<(), String> {
        let storage = Storage::open_store(paths)?;
        let mut engine = Engine::new(ecfg, Box::new(ferrymq_engine::MemoryLog::default()));
        engine
            .install_defaults()
            .map_err(|e| format!("cannot define the default objects: {e}"))?;
        setup(&mut engine)?;
        storage.write_checkpoint(1, engine.checkpoint_image(now_ms()), Vec::new())?;
        Ok(())
    }

    /// The newest checkpoint: key, image and metadata.
    pub fn load_latest(&self) -> Result<(Lsn, Image, Vec<u8>), String> {
        let _one_at_a_time = self.checkpointing.lock();
        load_latest(&self.segments.lock(), &self.store_dir)
    }

    /// The newest checkpoint as one self-contained image (metadata, bytes): the manifest's
    /// chunks followed by every message it references, as stored.
    pub fn export_latest(&self) -> Result<Option<Exported>, String> {
        let (key, image, meta) = self.load_latest()?;
        if key == 0 {
            return Ok(None);
        }
        let mut out = BytesMut::new();
        out.extend_from_slice(EXPORT_MAGIC);
        let manifest = Manifest {
            attrs: image.attrs,
            queues: image.queues,
            objects: image.objects,
            next_seq: image.next_seq,
            refs: Vec::new(),
            dr: image.dr,
            channels: image.channels,
            meta: Vec::new(),
        };
        let chunks = manifest.encode();
        out.put_u32_le(chunks.len() as u32);
        for c in chunks {
            out.put_bytes32(&c);
        }
        out.put_u64_le(image.messages.len() as u64);
        for m in &image.messages {
            let (head, body) = encode_stored(&m.queue, &m.msg);
            out.put_u32_le(m.backout_count);
            out.put_u32_le((head.len() + body.len()) as u32);
            out.extend_from_slice(&head);
            out.extend_from_slice(body);
        }
        Ok(Some((meta, out.to_vec())))
    }
}

/// Decodes an image made by [`Storage::export_latest`].
pub fn decode_export(data: &[u8]) -> Result<Image, String> {
    let bad = |what: &str| format!("the state image from the leader is damaged: {what}");
    let body = data
        .strip_prefix(EXPORT_MAGIC.as_slice())
        .ok_or_else(|| bad("wrong magic"))?;
    let mut r = Reader::new(Bytes::copy_from_slice(body));
    let err = |e: DecodeError| bad(&e.to_string());
    let n = r.u32("chunk count").map_err(err)?;
    let chunks = (0..n)
        .map(|_| r.bytes32("manifest chunk"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let m = Manifest::decode(&chunks).map_err(err)?;
    let count = r.u64("message count").map_err(err)?;
    let mut messages = Vec::with_capacity(count.min(1 << 24) as usize);
    for _ in 0..count {
        let backout_count = r.u32("backout count").map_err(err)?;
        // Copied out so that a queued message does not keep the whole image in memory.
        let rec = Bytes::copy_from_slice(&r.bytes32("stored message").map_err(err)?);
        let s = decode_stored(rec).map_err(err)?;
        let msg = Message::new(s.seq, s.md, s.props, s.body, s.expires_at_ms, 0);
        messages.push(ImageMsg {
            queue: Arc::from(s.queue),
            msg: Arc::new(msg),
            backout_count,
        });
    }
    r.finish("state image").map_err(err)?;
    Ok(Image {
        attrs: m.attrs,
        queues: m.queues,
        objects: m.objects,
        next_seq: m.next_seq,
        messages,
        dr: m.dr,
        channels: m.channels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrymq_engine::MemoryLog;
    use ferrymq_types::options::{open, PutOptions};
    use ferrymq_types::{MessageDescriptor, Persistence, Properties, QueueDef};

    fn ecfg() -> EngineConfig {
        EngineConfig {
            qmgr_name: "QM1".into(),
            max_handles: 16,
            instance_id: 7,
            backout_requeue: true,
            message_memory_max: 0,
        }
    }

    /// What a replica behind the purged Raft log receives: the leader's newest checkpoint as one
    /// image, written as the replica's own checkpoint and loaded, holds the same queues and
    /// persistent messages (and not the non-persistent one).
    #[test]
    fn an_exported_checkpoint_is_installed_whole_elsewhere() {
        let tmp = tempfile::tempdir().unwrap();
        let leader = Storage::open_store(&QmPaths::new(tmp.path(), "A").unwrap()).unwrap();
        assert!(leader.export_latest().unwrap().is_none(), "nothing yet");
        let mut e = Engine::new(ecfg(), Box::new(MemoryLog::default()));
        e.install_defaults().unwrap();
        e.define_queue(QueueDef::local("Q1"), false).unwrap();
        let c = e.connect("u", "t");
        let (h, _, _) = e.open(c, "Q1", "", open::OUTPUT, "").unwrap();
        for (i, persistence) in [
            Persistence::Persistent,
            Persistence::NotPersistent,
            Persistence::Persistent,
        ]
        .into_iter()
        .enumerate()
        {
            let md = MessageDescriptor {
                persistence,
                ..Default::default()
            };
            let body = Bytes::from(format!("m{i}").repeat(300));
            e.put(
                c,
                h,
                &PutOptions::default(),
                md,
                Properties::default(),
                body,
                1,
            )
            .unwrap();
        }
        leader
            .write_checkpoint(9, e.checkpoint_image(1), b"meta".to_vec())
            .unwrap();
        let (meta, data) = leader.export_latest().unwrap().unwrap();
        assert_eq!(meta, b"meta");

        let image = decode_export(&data).unwrap();
        let replica = Storage::open_store(&QmPaths::new(tmp.path(), "B").unwrap()).unwrap();
        replica.write_checkpoint(9, image, meta.clone()).unwrap();
        let (key, loaded, meta2) = replica.load_latest().unwrap();
        assert_eq!((key, meta2), (9, meta));
        assert!(loaded.queues.iter().any(|q| q.name == "Q1"));
        let mut bodies: Vec<String> = loaded
            .messages
            .iter()
            .map(|m| String::from_utf8(m.msg.body.to_vec()).unwrap())
            .collect();
        bodies.sort();
        assert_eq!(bodies, vec!["m0".repeat(300), "m2".repeat(300)]);

        let mut damaged = data.clone();
        damaged.truncate(data.len() - 10);
        assert!(decode_export(&damaged).unwrap_err().contains("damaged"));
    }
}
