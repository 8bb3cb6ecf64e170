//! Durable storage wired to the engine: the engine's [`LogSink`] over the circular recovery log,
//! restart (load the newest checkpoint manifest, read the referenced messages from the message
//! store, replay the log after the checkpoint), and incremental checkpoints that copy only the
//! persistent messages not yet in the store, so that the ring can be reused and restart work is
//! bounded by the checkpoint interval rather than by everything ever logged.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_engine::records::{decode_stored, encode_stored};
use ferrymq_engine::{
    Engine, EngineConfig, Image, ImageMsg, LogSink, Lsn, Manifest, ManifestRef, Message, RefChunks,
};
use ferrymq_log::checkpoint::remove_older_than;
use ferrymq_log::{
    CheckpointReader, CheckpointWriter, DamagePolicy, LogConfig, LogError, RecoveryLog,
    SegmentStore, SpanKind, StoreLoc,
};
use ferrymq_types::codec::{DecodeError, PutExt, Reader};
use ferrymq_types::{MqError, Reason};
use parking_lot::Mutex;

use crate::config::{QmConfig, QmPaths};

/// Whether checkpoints are failing, so that a full log's reason says why it is full.
#[derive(Default)]
pub struct CheckpointHealth {
    /// Consecutive failed checkpoints and the last one's error.
    failing: Mutex<Option<(u32, String)>>,
}

impl CheckpointHealth {
    fn record<T>(&self, r: &Result<T, String>) {
        let mut f = self.failing.lock();
        match r {
            Ok(_) => *f = None,
            Err(e) => {
                let n = f.as_ref().map_or(0, |(n, _)| *n);
                *f = Some((n + 1, e.clone()));
            }
        }
    }

    /// Consecutive failed checkpoints and the last error, while checkpoints fail.
    pub fn failing(&self) -> Option<(u32, String)> {
        self.failing.lock().clone()
    }
}

/// The engine's log sink: appends to the ring and turns a full or failed log into MQ reasons.
pub struct RingSink {
    log: Arc<RecoveryLog>,
    /// Wakes the checkpointer when the log is filling up.
    pub on_pressure: Box<dyn Fn() + Send>,
    trigger_bytes: u64,
    health: Arc<CheckpointHealth>,
}

impl RingSink {
    fn appended(&self, r: Result<Lsn, LogError>) -> Result<Lsn, MqError> {
        if self.log.used_bytes() >= self.trigger_bytes {
            (self.on_pressure)();
        }
        r.map_err(|e| match e {
            LogError::Full { .. } => match self.health.failing() {
                Some((n, why)) => MqError::new(
                    Reason::RESOURCE_PROBLEM,
                    format!(
                        "the recovery log is full ({e}) and checkpoints are failing ({n} in a row; last: {why}); persistent work resumes by itself once a checkpoint succeeds — {}",
                        if why.contains("No space left on device") {
                            "the disk is full: free space on the queue manager's filesystem"
                        } else {
                            "fix the cause"
                        }
                    ),
                ),
                None => MqError::new(
                    Reason::RESOURCE_PROBLEM,
                    format!("the recovery log is full ({e}); a checkpoint has been asked for to free space — retry, or enlarge the log with crtmqm -lp/-lf"),
                ),
            },
            LogError::RecordTooLarge { len, max } => MqError::new(
                Reason::RESOURCE_PROBLEM,
                format!("a log record of {len} bytes exceeds the largest the recovery log holds ({max}); enlarge the log (-lf) for messages this big"),
            ),
            other => MqError::new(Reason::RESOURCE_PROBLEM, format!("the recovery log failed: {other}")),
        })
    }
}

impl LogSink for RingSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let r = self.log.append_parts(kind, parts);
        self.appended(r)
    }

    fn append_lazy(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let r = self.log.append_lazy(kind, parts);
        self.appended(r)
    }
}

/// Storage of a running queue manager. A standalone queue manager's engine logs to `log`; in a
/// replicated one (HA) the ring carries the Raft log and belongs to the replica, so `log` is
/// `None` and checkpoints are written on Raft's request.
pub struct Storage {
    pub log: Option<Arc<RecoveryLog>>,
    /// A DR primary's secondary holds the log up to here: checkpoints keep the ring after it
    /// (within a quarter of the ring), so the secondary can resume with the difference.
    pub dr_retain: std::sync::atomic::AtomicU64,
    segments: Mutex<SegmentStore>,
    store_dir: PathBuf,
    checkpointing: Mutex<()>,
    /// Shared with the engine's sink (standalone only).
    pub health: Arc<CheckpointHealth>,
}

/// What restart found, for the error log and tests.
#[derive(Debug, Clone)]
pub struct RecoveryReport {
    pub checkpoint_lsn: Lsn,
    pub messages_loaded: usize,
    pub records_replayed: usize,
    pub tail_problem: Option<String>,
    pub elapsed_ms: u128,
    /// What recovery did not restore, one line each: log spans not replayed (LSN range, bytes,
    /// records) and messages the store could not read back.
    pub discarded: Vec<String>,
    /// Log bytes not replayed (the total of the log spans in `discarded`).
    pub discarded_log_bytes: u64,
    /// Something acknowledged to an application may be among `discarded` (anything but a torn
    /// tail of the log): `strmqm` warns and exits [`RECOVERY_LOSS_EXIT`].
    pub may_have_lost_acknowledged: bool,
}

/// `strmqm`'s exit status when the queue manager runs but recovery discarded what may have been
/// acknowledged.
pub const RECOVERY_LOSS_EXIT: i32 = 3;

impl RecoveryReport {
    /// The entries for the error log: one summary, then one per discarded item, all with one id
    /// ([`ids::RECOVERY_LOSS`](crate::errlog::ids::RECOVERY_LOSS) when something acknowledged may
    /// be among them, which `strmqm` looks for; else [`ids::RECOVERY_NOTE`](crate::errlog::ids::RECOVERY_NOTE)).
    pub fn discard_lines(&self) -> Option<(crate::errlog::MsgId, Vec<String>)> {
        use crate::errlog::ids;
        if self.discarded.is_empty() {
            return None;
        }
        let (id, head) = if self.may_have_lost_acknowledged {
            (
                ids::RECOVERY_LOSS,
                format!(
                    "recovery discarded {} item(s) that may have been acknowledged ({} log bytes in all):",
                    self.discarded.len(),
                    self.discarded_log_bytes
                ),
            )
        } else {
            (
                ids::RECOVERY_NOTE,
                format!(
                    "recovery note: nothing acknowledged was lost at this start ({} log bytes of torn tail cut):",
                    self.discarded_log_bytes
                ),
            )
        };
        let lines = std::iter::once(head)
            .chain(self.discarded.iter().map(|d| format!("  {d}")))
            .collect();
        Some((id, lines))
    }
}

/// What a checkpoint did.
#[derive(Debug, Clone, Default)]
pub struct CheckpointReport {
    pub lsn: Lsn,
    pub messages: usize,
    pub newly_stored: usize,
    pub elapsed_ms: u128,
}

fn io_err(e: LogError) -> String {
    e.to_string()
}

pub fn log_config(paths: &QmPaths, cfg: &QmConfig) -> LogConfig {
    LogConfig {
        dir: paths.log_dir(),
        primary_files: cfg.log_primary_files,
        file_pages: cfg.log_file_pages,
        durability: cfg.durability,
    }
}

/// A value unique to this moment on this host (nanoseconds since the epoch, mixed with the pid):
/// what a new queue manager's QMID is made from.
pub fn now_stamp() -> u64 {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (ns ^ u64::from(std::process::id())).max(1)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Storage {
    /// Creates the log and store of a new queue manager holding the default objects.
    pub fn create(paths: &QmPaths, cfg: &QmConfig, ecfg: EngineConfig) -> Result<(), String> {
        let lcfg = log_config(paths, cfg);
        std::fs::create_dir_all(&lcfg.dir)
            .map_err(|e| format!("cannot create {}: {e}", lcfg.dir.display()))?;
        RecoveryLog::create(&lcfg).map_err(io_err)?;
        let (storage, mut engine, _) =
            Storage::open(paths, cfg, ecfg, Box::new(|_| {}), Box::new(|| {}))?;
        engine
            .install_defaults_at(now_ms(), now_stamp())
            .map_err(|e| format!("cannot define the default objects: {e}"))?;
        storage
            .checkpoint(|| (storage.ring().end_lsn(), engine.checkpoint_image(now_ms())))
            .map_err(|e| format!("initial checkpoint failed: {e}"))?;
        drop(engine);
        storage.close()
    }

    /// Opens storage and rebuilds the engine: newest checkpoint, then the log after it.
    pub fn open(
        paths: &QmPaths,
        cfg: &QmConfig,
        ecfg: EngineConfig,
        on_durable: Box<dyn Fn(Lsn) + Send + Sync>,
        on_pressure: Box<dyn Fn() + Send>,
    ) -> Result<(Storage, Engine, RecoveryReport), String> {
        let started = Instant::now();
        let (log, recovered) = RecoveryLog::open_with(
            &log_config(paths, cfg),
            on_durable,
            DamagePolicy::SkipDamagedRecords,
        )
        .map_err(io_err)?;
        let log = Arc::new(log);
        let store_dir = paths.store_dir();
        let segments = SegmentStore::open(&store_dir).map_err(io_err)?;
        let (ckpt_lsn, image, _, lost) = load_latest_reporting(&segments, &store_dir)?;
        if ckpt_lsn < recovered.checkpoint_lsn {
            return Err(format!(
                "the newest checkpoint manifest (LSN {ckpt_lsn}) is older than the log's checkpoint (LSN {}); the message store is damaged",
                recovered.checkpoint_lsn
            ));
        }
        let loaded = image.messages.len();
        let trigger_bytes =
            log.capacity() * ferrymq_types::limits::LOG_CHECKPOINT_TRIGGER_PCT / 100;
        let health = Arc::new(CheckpointHealth::default());
        let sink = RingSink {
            log: log.clone(),
            on_pressure,
            trigger_bytes,
            health: health.clone(),
        };
        let mut engine = Engine::restore(ecfg, Box::new(sink), image);
        let mut replayed = 0;
        // Records before the manifest's LSN are already in it (a crash between writing the manifest
        // and moving the log's checkpoint leaves such records behind).
        // After a skipped damaged span, a record that depended on what was lost there (a put to a
        // queue whose definition was in it) cannot be applied: it is lost with it, and reported.
        let first_skip = recovered
            .discarded
            .iter()
            .filter(|s| s.kind == SpanKind::Skipped)
            .map(|s| s.from)
            .chain(recovered.first_filler)
            .min();
        let skipped_now = recovered
            .discarded
            .iter()
            .any(|s| s.kind == SpanKind::Skipped);
        let mut unapplied = Vec::new();
        for rec in recovered.records.iter().filter(|r| r.lsn >= ckpt_lsn) {
            match engine.replay(rec.kind, rec.payload.clone()) {
                Ok(()) => replayed += 1,
                // (A message lost from a damaged store segment likewise leaves its later gets
                // with nothing to remove.)
                Err(e) if first_skip.is_some_and(|f| rec.lsn > f) || !lost.is_empty() => unapplied.push(format!(
                    "log record at LSN {} (kind {}, {} bytes) could not be applied after the damage before it: {e}",
                    rec.lsn,
                    rec.kind,
                    rec.end_lsn() - rec.lsn
                )),
                Err(e) => return Err(format!("log record at LSN {}: {e}", rec.lsn)),
            }
        }
        let report = RecoveryReport {
            checkpoint_lsn: ckpt_lsn,
            messages_loaded: loaded,
            records_replayed: replayed,
            tail_problem: recovered.tail_problem.map(|t| {
                let what = match t {
                    ferrymq_log::TailProblem::Torn { at } => format!("a torn record at LSN {at}"),
                    ferrymq_log::TailProblem::Corrupt { at } => {
                        format!("a damaged record at LSN {at}")
                    }
                };
                format!(
                    "{what} ({} bytes discarded)",
                    recovered.discarded_tail_bytes
                )
            }),
            elapsed_ms: started.elapsed().as_millis(),
            may_have_lost_acknowledged: recovered.may_have_lost_acknowledged()
                || !lost.is_empty()
                // (After a filler only, the loss was reported when the damage was skipped.)
                || (skipped_now && !unapplied.is_empty()),
            discarded_log_bytes: recovered.discarded_tail_bytes,
            discarded: recovered
                .describe_discarded()
                .into_iter()
                .map(|d| format!("log {d}"))
                .chain(unapplied)
                .chain(lost)
                .collect(),
        };
        Ok((
            Storage {
                log: Some(log),
                segments: Mutex::new(segments),
                store_dir,
                checkpointing: Mutex::new(()),
                dr_retain: std::sync::atomic::AtomicU64::new(u64::MAX),
                health,
            },
            engine,
            report,
        ))
    }

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

    /// The message store's directory.
    pub fn store_dir(&self) -> &std::path::Path {
        &self.store_dir
    }

    /// The ring of a standalone queue manager.
    pub fn ring(&self) -> &Arc<RecoveryLog> {
        self.log
            .as_ref()
            .expect("a standalone queue manager's storage has its log")
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

    /// Flushes and closes the log.
    pub fn close(self) -> Result<(), String> {
        let Some(log) = self.log else { return Ok(()) };
        match Arc::try_unwrap(log) {
            Ok(log) => log.close().map_err(io_err),
            // Someone still holds the log (a sink inside an engine not yet dropped): make sure
            // everything appended is durable, and let the last owner stop the writer.
            Err(log) => log.wait_durable(log.end_lsn()).map_err(io_err),
        }
    }
}

fn segment_of(loc: u64) -> u32 {
    StoreLoc::unpack(loc, 0).map(|l| l.segment).unwrap_or(0)
}

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
fn load_latest_reporting(
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
            dr_retain: std::sync::atomic::AtomicU64::new(u64::MAX),
            health: Arc::default(),
        })
    }

    /// Creates the message store of a new instance of a replicated queue manager: a first
    /// checkpoint holding the default objects and no Raft metadata (every instance starts from
    /// the same definitions; everything after comes through the replicated log).
    pub fn create_replicated(paths: &QmPaths, ecfg: EngineConfig) -> Result<(), String> {
        let storage = Storage::open_store(paths)?;
        let mut engine = Engine::new(ecfg, Box::new(ferrymq_engine::MemoryLog::default()));
        engine
            .install_defaults()
            .map_err(|e| format!("cannot define the default objects: {e}"))?;
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
