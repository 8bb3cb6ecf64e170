//! Writing checkpoints: the engine's image captured at a log position, messages not yet in the
//! message store copied there (half-empty segments compacted), the manifest written, and the
//! ring's space before it released; a DR copy installed as a checkpoint.

use super::*;

impl Storage {
    /// Takes a checkpoint: captures the persistent state at the current log end under the engine
    /// lock (cheap: messages are shared, not copied), then — outside the lock — copies messages
    /// not yet in the message store there, writes the manifest, and moves the log's checkpoint so
    /// the ring space before it can be reused.
    ///
    /// `capture` must return the log's end LSN and the engine's image read under one lock, so that
    /// the image holds exactly the records before that LSN.
    ///
    /// A failure changes nothing that restart relies on (the log keeps everything after the last
    /// good checkpoint); it is recorded in [`health`](Self::health) until a checkpoint succeeds.
    pub fn checkpoint(
        &self,
        capture: impl FnOnce() -> (Lsn, Image),
    ) -> Result<CheckpointReport, String> {
        let r = self.checkpoint_unrecorded(capture);
        self.health.record(&r);
        r
    }

    fn checkpoint_unrecorded(
        &self,
        capture: impl FnOnce() -> (Lsn, Image),
    ) -> Result<CheckpointReport, String> {
        let _one_at_a_time = self.checkpointing.lock();
        let started = Instant::now();
        let (lsn, image) = capture();
        let log = self.ring();
        log.wait_durable(lsn).map_err(io_err)?;
        let report = self.write_checkpoint_locked(lsn, image, Vec::new())?;
        // Restart replays from the manifest's LSN whatever the ring keeps before it, so keeping
        // more ring for a DR secondary costs nothing but space.
        let hold = self.dr_retain.load(std::sync::atomic::Ordering::Acquire);
        let keep = if hold < lsn && log.end_lsn().saturating_sub(hold) <= log.capacity() / 4 {
            hold
        } else {
            lsn
        };
        if keep > log.checkpoint_lsn() {
            log.set_checkpoint(keep).map_err(io_err)?;
        }
        Ok(CheckpointReport {
            elapsed_ms: started.elapsed().as_millis(),
            ..report
        })
    }

    /// Makes `image` the whole state of a standalone queue manager (a DR secondary installing a
    /// completed full copy): under the checkpoint lock, the image is written as the checkpoint
    /// at the log's end (messages, then the manifest) and the log's checkpoint moves there; only
    /// then does `swap` put it in the engine. Nothing of the state before remains needed, and a
    /// crash before the manifest is written restarts with that state intact. The caller must
    /// be the only writer of the log meanwhile.
    pub fn install_image(&self, image: Image, swap: impl FnOnce(Image)) -> Result<Lsn, String> {
        let _one_at_a_time = self.checkpointing.lock();
        let log = self.ring();
        let lsn = log.end_lsn();
        log.wait_durable(lsn).map_err(io_err)?;
        self.write_checkpoint_locked(lsn, image.clone(), Vec::new())?;
        if lsn > log.checkpoint_lsn() {
            log.set_checkpoint(lsn).map_err(io_err)?;
        }
        swap(image);
        Ok(lsn)
    }

    /// Writes `image` as the checkpoint keyed `key` (the newest key wins on restart), with `meta`
    /// stored in its manifest: messages not yet in the message store are copied there first,
    /// then the manifest is written, then older manifests and unreferenced segments are removed.
    pub fn write_checkpoint(
        &self,
        key: Lsn,
        image: Image,
        meta: Vec<u8>,
    ) -> Result<CheckpointReport, String> {
        let _one_at_a_time = self.checkpointing.lock();
        let started = Instant::now();
        let report = self.write_checkpoint_locked(key, image, meta)?;
        Ok(CheckpointReport {
            elapsed_ms: started.elapsed().as_millis(),
            ..report
        })
    }

    fn write_checkpoint_locked(
        &self,
        lsn: Lsn,
        image: Image,
        meta: Vec<u8>,
    ) -> Result<CheckpointReport, String> {
        let mut segs = self.segments.lock();
        let compact = self.segments_to_compact(&segs, &image.messages);
        let messages = image.messages;
        let manifest = Manifest {
            attrs: image.attrs,
            queues: image.queues,
            objects: image.objects,
            next_seq: image.next_seq,
            refs: Vec::new(),
            dr: image.dr,
            channels: image.channels,
            meta,
        };
        // The manifest is written while the messages are stored, its references one chunk at a
        // time (see RefChunks); it counts only once `finish` renames it, after the segments are
        // synced. Dropped unfinished (any error below), it leaves no file behind.
        let mut w = CheckpointWriter::create(&self.store_dir, lsn).map_err(io_err)?;
        for chunk in manifest.encode() {
            w.write_chunk(&chunk).map_err(io_err)?;
        }
        let mut refs = RefChunks::default();
        let mut keep: HashSet<u32> = HashSet::new();
        let mut newly: Vec<(Arc<Message>, u64)> = Vec::new();
        let mut buf = BytesMut::new();
        for m in &messages {
            let mut loc = m.msg.store_loc();
            if loc == 0 || compact.contains(&segment_of(loc)) {
                buf.clear();
                let (head, body) = encode_stored(&m.queue, &m.msg);
                buf.extend_from_slice(&head);
                buf.extend_from_slice(body);
                loc = segs.append(m.msg.seq, 1, &buf).map_err(io_err)?.pack();
                newly.push((m.msg.clone(), loc));
            }
            keep.insert(segment_of(loc));
            if let Some(chunk) = refs.push(&m.queue, m.msg.seq, loc, m.backout_count) {
                w.write_chunk(chunk).map_err(io_err)?;
            }
        }
        if let Some(chunk) = refs.rest() {
            w.write_chunk(chunk).map_err(io_err)?;
        }
        let report = CheckpointReport {
            lsn,
            messages: messages.len(),
            newly_stored: newly.len(),
            elapsed_ms: 0,
        };
        drop(messages);
        segs.sync().map_err(io_err)?;
        w.finish().map_err(io_err)?;
        for (msg, loc) in newly {
            msg.set_store_loc(loc);
        }
        segs.remove_unreferenced(&keep).map_err(io_err)?;
        remove_older_than(&self.store_dir, lsn).map_err(io_err)?;
        Ok(report)
    }

    /// Segments (other than the one being written) whose live messages fill less than half of
    /// them: their live messages are rewritten so the segment can be deleted.
    fn segments_to_compact(&self, segs: &SegmentStore, msgs: &[ImageMsg]) -> HashSet<u32> {
        let mut live: HashMap<u32, u64> = HashMap::new();
        for m in msgs {
            let loc = m.msg.store_loc();
            if loc != 0 {
                *live.entry(segment_of(loc)).or_default() += m.msg.body.len() as u64 + 256;
            }
        }
        let current = segs.current_segment();
        segs.segments()
            .into_iter()
            .filter(|s| *s != current)
            .filter(|s| {
                let size = std::fs::metadata(self.store_dir.join(format!("seg-{s:08}.dat")))
                    .map(|m| m.len())
                    .unwrap_or(0);
                live.get(s).copied().unwrap_or(0) * 2 < size
            })
            .collect()
    }
}
