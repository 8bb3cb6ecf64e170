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

mod checkpoint;
mod load;
mod sink;

pub use load::{decode_export, Exported};
pub use sink::{CheckpointHealth, RingSink};

/// Storage of a running queue manager. A standalone queue manager's engine logs to `log`; in a
/// replicated one (HA) the ring carries the Raft log and belongs to the replica, so `log` is
/// `None` and checkpoints are written on Raft's request.
pub struct Storage {
    pub log: Option<Arc<RecoveryLog>>,
    /// A DR primary's secondary holds the log up to here: checkpoints keep the ring after it
    /// (within a quarter of the ring), so the secondary can resume with the difference. Shared
    /// with the DR shipper's ring source, which moves it.
    pub dr_retain: Arc<std::sync::atomic::AtomicU64>,
    segments: Mutex<SegmentStore>,
    store_dir: PathBuf,
    checkpointing: Mutex<()>,
    /// Shared with the engine's sink (standalone only).
    pub health: Arc<CheckpointHealth>,
    /// Until when (ms since the epoch) sockets stop waiting for room in a nearly full log: set
    /// when a wait ran out, so a log held full by something a checkpoint cannot free (a long
    /// unit of work, failing checkpoints) costs one wait, not one per batch.
    pub room_wait_off_until_ms: std::sync::atomic::AtomicU64,
    /// Raised by the engine's sink when an append leaves the log past `LOG_ROOM_WAIT_PCT`;
    /// lowered by the socket that finds it below again. Sockets look at the log's fill (which
    /// takes the log's lock) only while it is raised, so a batch costs one atomic load.
    pub room_low: Arc<std::sync::atomic::AtomicBool>,
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
        direct_writes: cfg.log_direct_writes,
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
    /// Creates the log and store of a new queue manager holding the default objects and what
    /// `setup` adds to them.
    pub fn create(
        paths: &QmPaths,
        cfg: &QmConfig,
        ecfg: EngineConfig,
        setup: &mut dyn FnMut(&mut Engine) -> Result<(), String>,
    ) -> Result<(), String> {
        let lcfg = log_config(paths, cfg);
        std::fs::create_dir_all(&lcfg.dir)
            .map_err(|e| format!("cannot create {}: {e}", lcfg.dir.display()))?;
        RecoveryLog::create(&lcfg).map_err(io_err)?;
        let (storage, mut engine, _) =
            Storage::open(paths, cfg, ecfg, Box::new(|_| {}), Box::new(|| {}))?;
        engine
            .install_defaults_at(now_ms(), now_stamp())
            .map_err(|e| format!("cannot define the default objects: {e}"))?;
        setup(&mut engine)?;
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
        let (ckpt_lsn, image, _, lost) = load::load_latest_reporting(&segments, &store_dir)?;
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
        let room_low = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sink = RingSink {
            log: log.clone(),
            on_pressure,
            trigger_bytes,
            room_bytes: log.capacity() / 100 * ferrymq_types::limits::LOG_ROOM_WAIT_PCT,
            room_low: room_low.clone(),
            health: health.clone(),
        };
        let mut engine = Engine::restore(ecfg, Box::new(sink), image)
            .map_err(|e| format!("cannot restore the newest checkpoint: {e}"))?;
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
                dr_retain: Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
                health,
                room_wait_off_until_ms: std::sync::atomic::AtomicU64::new(0),
                room_low,
            },
            engine,
            report,
        ))
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
