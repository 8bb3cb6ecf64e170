//! A running queue manager: takes the queue manager's lock, recovers its state, listens on its
//! Unix socket (bindings mode) and TCP port (client mode), checkpoints in the background, and ends
//! in a controlled way (wait for applications to disconnect) or immediately (break connections,
//! backing out their units of work) — in both cases with a final checkpoint.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::EngineConfig;
use parking_lot::Mutex;
use tokio::net::UnixListener;
use tokio::sync::{watch, Semaphore};

use crate::config::{Ini, QmConfig, QmPaths};
use crate::core::Core;
use crate::dispatch::AdminAction;
use crate::dr::gate::{Gate, Meter};
use crate::dr::ship::{self, Source};
use crate::dr::{recv, DrHandle};
use crate::ha::{self, HaHandle};
use crate::listeners::{self, Control};
use crate::storage::{now_ms, Storage};
use crate::wait_timer::{self, WaitTimer};

/// What every connection task shares.
pub struct Shared {
    pub core: Arc<Mutex<Core>>,
    pub storage: Arc<Storage>,
    pub cfg: QmConfig,
    /// The log's durable LSN, published by the log writer after each sync.
    pub durable: crate::lsn::LsnWatch,
    /// Set to end every connection at once.
    pub immediate_end: watch::Receiver<bool>,
    immediate_tx: watch::Sender<bool>,
    end_tx: watch::Sender<Option<AdminAction>>,
    /// Listeners, live sockets and connection tasks.
    pub control: Mutex<Control>,
    /// Bounds the client (TCP) connections served at once (qm.ini Channels:MaxChannels).
    pub slots: Arc<Semaphore>,
    /// Bounds the bindings-mode (Unix socket) connections served at once
    /// (`limits::BINDINGS_CONNECTIONS_MAX`): as in MQ, MaxChannels counts channels only.
    pub bindings_slots: Arc<Semaphore>,
    pub started_ms: u64,
    /// Ends waiting gets whose interval ran out.
    pub wait_timer: WaitTimer,
    /// Set on an instance of a replicated (HA) queue manager.
    pub ha: Option<Arc<HaHandle>>,
    /// Set when the queue manager takes part in disaster recovery.
    pub dr: Option<Arc<DrHandle>>,
    /// A DR primary's lag bound (its durable watch is `durable`).
    pub dr_gate: Option<Arc<Gate>>,
}

impl Shared {
    /// True on an HA instance that is not (yet) the active one: it refuses applications.
    pub fn is_standby(&self) -> bool {
        self.ha.as_ref().is_some_and(|h| !h.is_active()) || self.is_dr_secondary()
    }

    /// True on a DR secondary: it takes its primary's stream and refuses applications.
    pub fn is_dr_secondary(&self) -> bool {
        self.dr.as_ref().is_some_and(|d| d.is_secondary())
    }

    /// The `DR STATUS` line.
    pub fn dr_status(&self) -> Option<String> {
        let d = self.dr.as_ref()?;
        Some(d.status_line(self.dr_lag(d)))
    }

    /// A DR primary's durable stream end and the bytes its secondary has not acknowledged,
    /// at risk and held (all 0 on a secondary).
    pub fn dr_lag(&self, d: &DrHandle) -> crate::dr::gate::Lag {
        self.dr_gate.as_ref().map_or(Default::default(), |g| {
            g.lag(d.acked.load(Ordering::Acquire))
        })
    }

    fn new(
        core: Arc<Mutex<Core>>,
        storage: Arc<Storage>,
        cfg: QmConfig,
        durable: crate::lsn::LsnWatch,
        end_tx: watch::Sender<Option<AdminAction>>,
        ha: Option<Arc<HaHandle>>,
        dr: Option<(Arc<DrHandle>, Option<Arc<Gate>>)>,
    ) -> Shared {
        let (dr, dr_gate) = match dr {
            Some((d, g)) => (Some(d), g),
            None => (None, None),
        };
        let (immediate_tx, immediate_rx) = watch::channel(false);
        Shared {
            core,
            storage,
            durable,
            immediate_end: immediate_rx,
            immediate_tx,
            end_tx,
            control: Mutex::new(Control::default()),
            slots: Arc::new(Semaphore::new(cfg.max_sockets)),
            bindings_slots: Arc::new(Semaphore::new(
                ferrymq_types::limits::BINDINGS_CONNECTIONS_MAX,
            )),
            cfg,
            started_ms: now_ms(),
            wait_timer: WaitTimer::default(),
            ha,
            dr,
            dr_gate,
        }
    }

    /// Starts ending the queue manager (from an admin request or a signal).
    pub fn request_end(&self, a: AdminAction) {
        self.core.lock().quiescing = true;
        self.end_tx.send_replace(Some(a));
    }

    fn checkpoint(&self) -> Result<crate::storage::CheckpointReport, String> {
        self.storage.checkpoint(|| {
            let core = self.core.lock();
            (
                self.storage.ring().end_lsn(),
                core.engine.checkpoint_image(now_ms()),
            )
        })
    }
}

/// Creates a random 64-bit id for this run (MsgId uniqueness across restarts; DR stream ids).
pub(crate) fn instance_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mixed = (t as u64) ^ ((std::process::id() as u64) << 32) ^ (t >> 64) as u64;
    // splitmix64 finaliser: spreads the bits so ids from nearby starts do not share prefixes.
    let mut z = mixed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The DR position the ended queue manager's recovered state holds (`None`: it holds no complete
/// image of any primary's stream — a secondary that never finished a full copy). Recovers it as
/// `strmqm` would (newest checkpoint, then the log), without starting it. For `makedrprimary`.
pub fn dr_recovered_mark(
    paths: &QmPaths,
    cfg: &QmConfig,
) -> Result<Option<ferrymq_engine::records::DrMark>, String> {
    let (storage, engine, _) = Storage::open(
        paths,
        cfg,
        engine_config(cfg),
        Box::new(|_| {}),
        Box::new(|| {}),
    )?;
    let mark = engine.dr_state().mark;
    drop(engine);
    storage.close()?;
    Ok(mark)
}

fn engine_config(cfg: &QmConfig) -> EngineConfig {
    EngineConfig {
        qmgr_name: cfg.name.clone(),
        max_handles: cfg.max_handles,
        instance_id: instance_id(),
        backout_requeue: cfg.backout_requeue,
    }
}

/// Creates the storage of a new queue manager whose `qm.ini` is already written.
pub fn create_storage(paths: &QmPaths) -> Result<(), String> {
    let cfg = QmConfig::from_ini(&Ini::load(&paths.ini())?)?;
    if cfg.ha.is_some() {
        return Storage::create_replicated(paths, engine_config(&cfg));
    }
    Storage::create(paths, &cfg, engine_config(&cfg))
}

/// Runs the queue manager in this process until it is ended. Prints its progress to stderr (the
/// queue manager's error log when started by `strmqm`).
pub fn run(paths: &QmPaths) -> Result<(), String> {
    crate::errlog::install();
    std::fs::create_dir_all(paths.dir.join("errors")).map_err(|e| e.to_string())?;
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(paths.lock_file())
        .map_err(|e| format!("cannot open {}: {e}", paths.lock_file().display()))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(format!(
                "queue manager in {} is already running",
                paths.dir.display()
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", paths.lock_file().display()))
        }
    }
    // From here on this process owns the queue manager: its entries go to its error log files.
    let name = Ini::load(&paths.ini())
        .ok()
        .and_then(|ini| ini.get("QueueManager", "Name").map(str::to_string))
        .unwrap_or_default();
    let (settings, bad) = Ini::load(&paths.ini())
        .map(|ini| crate::config::error_log_settings(&ini))
        .unwrap_or_default();
    crate::errlog::open(&paths.errors_dir(), &name, settings);
    for w in bad {
        crate::qm_log!(crate::errlog::ids::ERROR_LOG_CONFIG, "qm.ini: {w}");
    }
    let status = EndStatus::begin(paths);
    let r = Ini::load(&paths.ini())
        .and_then(|ini| {
            for e in crate::config::unknown_keys(&ini) {
                crate::qm_log!(
                    crate::errlog::ids::INI_UNKNOWN_KEY,
                    "qm.ini: {e}; it is ignored"
                );
            }
            QmConfig::from_ini(&ini)
        })
        .and_then(|mut cfg| {
            // A relative AutoConfig directory is the queue manager directory's.
            cfg.autoconfig_dir = Some(match cfg.autoconfig_dir.take() {
                None => paths.autoconfig_dir(),
                Some(d) => paths.dir.join(d),
            });
            if cfg.ha.is_some() {
                run_ha(paths, cfg)
            } else {
                run_standalone(paths, cfg)
            }
        });
    if let Err(e) = &r {
        crate::qm_log!(
            crate::errlog::ids::QM_FAILED,
            "queue manager '{name}' stops: {e}"
        );
    }
    // Recorded before the lock is released: `endmqm -w` reads it once the lock is free.
    status.record(&r);
    drop(lock);
    r
}

/// `qm.end`: how the last run of the queue manager ended, for `endmqm -w` (which is not the
/// process's parent and cannot see its exit status). The record is written in place over bytes
/// written at start-up, so that recording the end needs no new disk space: an end whose final
/// checkpoint failed on a full disk can still say so. `RUNNING` until then, so a process that
/// died without recording anything is told apart from one that ended.
pub struct EndStatus(Option<File>);

/// Size of the `qm.end` record.
const END_STATUS_BYTES: usize = 1024;

impl EndStatus {
    fn begin(paths: &QmPaths) -> EndStatus {
        let path = paths.end_status();
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok();
        let s = EndStatus(f);
        if !s.write(&format!("RUNNING {}", std::process::id())) {
            // No space even for this: leave no stale record of an earlier run.
            crate::qm_log!(
                crate::errlog::ids::END_STATUS_UNWRITTEN,
                "cannot write {}; endmqm -w will not know how this run ends",
                path.display()
            );
            let _ = std::fs::remove_file(&path);
            return EndStatus(None);
        }
        s
    }

    fn write(&self, text: &str) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(f) = &self.0 else { return false };
        let mut rec = vec![b' '; END_STATUS_BYTES];
        let mut n = text.len().min(END_STATUS_BYTES - 1);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        rec[..n].copy_from_slice(&text.as_bytes()[..n]);
        rec[END_STATUS_BYTES - 1] = b'\n';
        f.write_all_at(&rec, 0).is_ok() && f.sync_data().is_ok()
    }

    fn record(&self, r: &Result<(), String>) {
        let text = match r {
            Ok(()) => "ENDED".to_string(),
            Err(e) => format!("FAILED {e}"),
        };
        if self.0.is_some() && !self.write(&text) {
            crate::qm_log!(
                crate::errlog::ids::END_STATUS_UNWRITTEN,
                "cannot record how this run ended in qm.end"
            );
        }
    }

    /// Reads `qm.end`: `Some(Ok(()))` for a clean end, `Some(Err(why))` for an end that failed,
    /// `None` when nothing says how the last run ended (it died, or could not record it).
    pub fn read(paths: &QmPaths) -> Option<Result<(), String>> {
        let text = std::fs::read_to_string(paths.end_status()).ok()?;
        let text = text.trim_end();
        if text == "ENDED" {
            Some(Ok(()))
        } else {
            text.strip_prefix("FAILED ")
                .map(|why| Err(why.trim().to_string()))
        }
    }
}

/// How long a failed checkpoint waits before its first retry; the wait doubles up to
/// `CHECKPOINT_RETRY_MAX`.
const CHECKPOINT_RETRY_FIRST: Duration = Duration::from_millis(250);
const CHECKPOINT_RETRY_MAX: Duration = Duration::from_secs(2);

/// The checkpointer thread: a checkpoint when the log is filling up (`pressure`) or every
/// `interval` while anything was logged; a failed one (a full disk) is retried with back-off until
/// one succeeds, and nothing it meets — not an error, not a panic, not an unwritable error log —
/// ends the thread before `stop`.
fn checkpointer(
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    pressure: std_mpsc::Receiver<()>,
    interval: Duration,
) {
    let mut last = shared.storage.ring().end_lsn();
    let mut failures: u32 = 0;
    let mut last_error = String::new();
    while !stop.load(Ordering::Acquire) {
        let due = if failures == 0 {
            pressure.recv_timeout(interval).is_ok()
        } else {
            // Back off whatever the pressure: appends keep asking while the log stays full.
            let wait = CHECKPOINT_RETRY_FIRST
                .saturating_mul(1 << (failures - 1).min(8))
                .min(CHECKPOINT_RETRY_MAX);
            let until = std::time::Instant::now() + wait;
            while !stop.load(Ordering::Acquire) {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                let _ = pressure.recv_timeout(left);
            }
            true
        };
        if stop.load(Ordering::Acquire) {
            break;
        }
        let end = shared.storage.ring().end_lsn();
        if !due && end == last {
            continue;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shared.checkpoint()))
            .unwrap_or_else(|p| Err(format!("the checkpoint panicked: {}", panic_text(&p))));
        match r {
            Ok(rep) => {
                if failures > 0 {
                    crate::qm_log!(
                        crate::errlog::ids::CHECKPOINT_RESUMED, "checkpoint succeeded after {failures} failed attempt(s) (LSN {}, {} persistent messages); the recovery log has room again",
                        rep.lsn, rep.messages
                    );
                }
                failures = 0;
                last_error.clear();
                last = end;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                // The first failure, a new error, and then ever more rarely: a disk that stays
                // full must not fill the error log (it cannot be written to anyway).
                if failures.is_power_of_two() || e != last_error {
                    crate::qm_log!(
                        crate::errlog::ids::CHECKPOINT_FAILED, "checkpoint failed ({failures} in a row): {e}; retrying every {} s at most; persistent work stops once the recovery log is full",
                        CHECKPOINT_RETRY_MAX.as_secs()
                    );
                }
                last_error = e;
            }
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs a standalone (not replicated) queue manager until it is ended.
fn run_standalone(paths: &QmPaths, cfg: QmConfig) -> Result<(), String> {
    let (durable_tx, durable_rx) = crate::lsn::channel(0);
    let (ckpt_tx, ckpt_rx) = std_mpsc::sync_channel::<()>(1);
    let pressure_tx = ckpt_tx.clone();
    let dr = cfg
        .dr
        .clone()
        .map(|c| Arc::new(DrHandle::new(c, &cfg.name, Some(paths.ini()))));
    // A DR primary's replies wait on the lag bound, fed by the ring's durable LSN.
    let gate = dr
        .as_ref()
        .filter(|d| !d.is_secondary())
        .map(|d| Gate::new(Meter::Ring, d.cfg.max_lag_bytes, 0));
    let gate_in = gate.clone();
    let (storage, engine, report) = Storage::open(
        paths,
        &cfg,
        engine_config(&cfg),
        Box::new(move |lsn| {
            durable_tx.advance(lsn);
            if let Some(g) = &gate_in {
                g.durable(lsn);
            }
        }),
        Box::new(move || {
            let _ = pressure_tx.try_send(());
        }),
    )?;
    crate::qm_log!(
        crate::errlog::ids::RECOVERED, "queue manager '{}' recovered in {} ms: checkpoint at LSN {}, {} persistent messages loaded, {} log records replayed{}",
        cfg.name,
        report.elapsed_ms,
        report.checkpoint_lsn,
        report.messages_loaded,
        report.records_replayed,
        report.tail_problem.as_ref().map(|t| format!("; log tail: {t}")).unwrap_or_default()
    );
    if let Some((id, lines)) = report.discard_lines() {
        for line in lines {
            crate::qm_log!(id, "{line}");
        }
    }
    let (end_tx, end_rx) = watch::channel(None);
    let storage = Arc::new(storage);
    if let Some(g) = &gate {
        // What recovery found is durable; the gate (and the status's POSITION) starts there.
        g.durable(storage.ring().durable_lsn());
    }
    let source = gate.as_ref().map(|_| Source::Ring {
        ring: storage.ring().clone(),
        storage: storage.clone(),
        durable: durable_rx.clone(),
    });
    let shared = Arc::new(Shared::new(
        Arc::new(Mutex::new(Core::new(engine))),
        storage,
        cfg.clone(),
        gate.as_ref().map_or(durable_rx, |g| g.watch()),
        end_tx,
        None,
        dr.map(|d| (d, gate.clone())),
    ));

    // A log recovered past the checkpoint trigger (a run that ended while its checkpoints
    // failed) would refuse the first persistent work until a checkpoint ran: take it now, before
    // accepting any. If it fails, the checkpointer retries.
    {
        let log = shared.storage.ring();
        let trigger = log.capacity() * ferrymq_types::limits::LOG_CHECKPOINT_TRIGGER_PCT / 100;
        if log.used_bytes() >= trigger {
            let pct = log.used_bytes() * 100 / log.capacity().max(1);
            match shared.checkpoint() {
                Ok(r) => crate::qm_log!(
                    crate::errlog::ids::STARTUP_CHECKPOINT, "start-up checkpoint at LSN {} with {} persistent messages ({} newly stored): the recovered log was {}% full",
                    r.lsn,
                    r.messages,
                    r.newly_stored,
                    pct
                ),
                Err(e) => {
                    crate::qm_log!(crate::errlog::ids::STARTUP_CHECKPOINT_FAILED, "start-up checkpoint failed: {e}; the checkpointer retries")
                }
            }
        }
    }
    let stop_ckpt = Arc::new(AtomicBool::new(false));
    let ckpt_thread = {
        let shared = shared.clone();
        let stop = stop_ckpt.clone();
        let interval = Duration::from_millis(cfg.checkpoint_interval_ms.max(100));
        std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || checkpointer(shared, stop, ckpt_rx, interval))
            .map_err(|e| e.to_string())?
    };

    let rt = io_runtime()?;
    let served = rt.block_on(async {
        start_dr(&shared, source);
        serve(shared.clone(), paths.clone(), end_rx, None).await
    });
    rt.shutdown_timeout(Duration::from_secs(2));

    stop_ckpt.store(true, Ordering::Release);
    let _ = ckpt_tx.try_send(());
    let _ = ckpt_thread.join();
    let last = shared.checkpoint();
    let _ = std::fs::remove_file(paths.socket());
    let _ = std::fs::remove_file(paths.pid_file());
    served?;
    // An error goes to the error log (printed by run-qmgr) and to qm.end (for endmqm -w).
    let r = last.map_err(|e| {
        let log = shared.storage.ring();
        let kept = log.wait_durable(log.end_lsn()).is_ok();
        format!(
            "its final checkpoint failed: {e}{}",
            if kept {
                "; nothing is lost: the recovery log holds all work since the last good checkpoint and the next start replays it"
            } else {
                ""
            }
        )
    })?;
    crate::qm_log!(
        crate::errlog::ids::QM_ENDED,
        "queue manager '{}' ended; final checkpoint at LSN {} with {} persistent messages",
        cfg.name,
        r.lsn,
        r.messages
    );
    Ok(())
}

/// Least time between two syncs of a standalone DR secondary's log (see `start_dr`), unless
/// `SECONDARY_SYNC_UNLESS_BYTES` wait to be written.
const SECONDARY_SYNC_GAP: Duration = Duration::from_millis(50);
const SECONDARY_SYNC_UNLESS_BYTES: usize = 512 << 10;
/// The recent log a standalone DR primary keeps in memory for its shipper.
const SHIP_TAIL_BYTES: usize = 8 << 20;

/// Starts the DR side: the shipper on a primary (reading `source`), the receiver on a secondary.
/// On an HA group's instances this runs when the instance becomes active.
fn start_dr(shared: &Arc<Shared>, source: Option<Source>) {
    let Some(d) = shared.dr.clone() else { return };
    if d.is_secondary() {
        if shared.ha.is_none() {
            // Nothing waits on this log but the acknowledgements to the primary, whose lag
            // bound is megabytes: fewer, larger syncs cost the recovery site less CPU.
            shared
                .storage
                .ring()
                .set_min_sync_gap(SECONDARY_SYNC_GAP, SECONDARY_SYNC_UNLESS_BYTES);
        }
        tokio::spawn(recv::run_secondary(shared.clone(), d));
    } else if let (Some(g), Some(src)) = (shared.dr_gate.clone(), source) {
        if let Source::Ring { ring, .. } = &src {
            // The shipper follows the durable end; serve it from memory.
            ring.keep_tail(SHIP_TAIL_BYTES);
            // Hold replies within the bound from the last recorded acknowledgement before the
            // listeners start (an HA instance does this as it becomes active).
            // (The engine lock is released before the gate is taken.)
            let recorded = crate::dr::recorded_ack(shared.core.lock().engine.dr_state());
            if let Some(pos) = recorded {
                g.bound(Some(pos));
            }
        }
        tokio::spawn(ship::run_primary(shared.clone(), d, g, src));
    }
}

/// Starts the queue manager's TCP listener and the listener objects defined to start with it
/// (none on a DR secondary: it takes no applications until it is made primary).
fn start_listeners(shared: &Arc<Shared>) -> Result<(), String> {
    if shared.is_dr_secondary() {
        return Ok(());
    }
    // An HA group gets its QMID when its first instance becomes active (its instances are
    // created apart, from identical state), and a queue manager created before FerryMQ kept
    // one gets it now.
    if let Some(Err(e)) = shared
        .core
        .lock()
        .engine
        .assign_identity(crate::storage::now_ms(), crate::storage::now_stamp())
    {
        crate::qm_log!(
            crate::errlog::ids::QMID_NOT_RECORDED,
            "the queue manager's identifier (QMID) could not be recorded: {e}; DISPLAY QMGR shows none until a later start records it"
        );
    }
    // Declarative configuration: applied before applications can connect.
    crate::autoconfig::apply(shared);
    if shared.cfg.port != 0 {
        // Already running (this instance became active before) is fine.
        match listeners::start(
            shared,
            listeners::QMGR_LISTENER,
            &shared.cfg.bind_address,
            shared.cfg.port,
        ) {
            Err(e) if e.reason != ferrymq_types::Reason::LISTENER_STARTED => {
                return Err(e.to_string())
            }
            _ => {}
        }
    }
    let defined: Vec<_> = shared
        .core
        .lock()
        .engine
        .objects()
        .filter(|o| o.kind == ferrymq_types::ObjectKind::Listener)
        .cloned()
        .collect();
    listeners::start_controlled(shared, defined);
    Ok(())
}

/// The queue manager's I/O runtime: two worker threads (one queue manager is about one core of
/// work; the second overlaps socket reads and writes).
fn io_runtime() -> Result<tokio::runtime::Runtime, String> {
    runtime(2, "ferrymq-io", "I/O")
}

/// The Raft runtime of an HA instance: one thread of its own for openraft's core, replication
/// and state-machine tasks, the Raft network and the proposer. On the I/O runtime they queued
/// behind hundreds of client connection tasks woken by each commit, and every hop of a commit's
/// path waited its turn.
fn raft_runtime() -> Result<tokio::runtime::Runtime, String> {
    runtime(1, "ferrymq-raft", "Raft")
}

fn runtime(workers: usize, thread: &str, what: &str) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .thread_name(thread)
        .build()
        .map_err(|e| format!("cannot start the {what} runtime: {e}"))
}

/// Runs one instance of a replicated queue manager (qm.ini `NativeHA:`) until it is ended.
fn run_ha(paths: &QmPaths, cfg: QmConfig) -> Result<(), String> {
    let rt = io_runtime()?;
    let raft_rt = raft_runtime()?;
    let raft_handle = raft_rt.handle().clone();
    let served = rt.block_on(async {
        let began = std::time::Instant::now();
        let (p2, c2) = (paths.clone(), cfg.clone());
        let started = raft_handle
            .spawn(async move { ha::start(&p2, &c2, engine_config(&c2)).await })
            .await
            .map_err(|e| format!("starting the replica: {e}"))??;
        let h = started.handle.clone();
        crate::qm_log!(
            crate::errlog::ids::HA_REPLICA_STARTED,
            "instance '{}' of queue manager '{}' started as a replica in {} ms (Raft log: {})",
            h.cfg.local,
            cfg.name,
            began.elapsed().as_millis(),
            h.replica
                .recovered()
                .last_log_id
                .map_or("empty".to_string(), |l| format!(
                    "last entry {} of term {}",
                    l.index, l.leader_id.term
                )),
        );
        let (end_tx, end_rx) = watch::channel(None);
        let dr = cfg
            .dr
            .clone()
            .map(|c| Arc::new(DrHandle::new(c, &cfg.name, Some(paths.ini()))));
        // A DR primary's replies wait on the lag bound, fed by the group's commits.
        let gate = dr.as_ref().filter(|d| !d.is_secondary()).map(|d| {
            let g = Gate::new(Meter::Raft(h.props.clone()), d.cfg.max_lag_bytes, 0);
            h.props.set_dr_gate(g.clone());
            g
        });
        let shared = Arc::new(Shared::new(
            started.core,
            started.storage,
            cfg.clone(),
            gate.as_ref()
                .map_or_else(|| h.props.durable_watch(), |g| g.watch()),
            end_tx,
            Some(h.clone()),
            dr.map(|d| (d, gate.clone())),
        ));
        let r = serve(shared, paths.clone(), end_rx, Some(raft_handle.clone())).await;
        h.ending.store(true, std::sync::atomic::Ordering::Release);
        let _ = h.replica.raft().shutdown().await;
        let _ = h.replica.storage().close();
        r
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    raft_rt.shutdown_timeout(Duration::from_secs(2));
    let _ = std::fs::remove_file(paths.socket());
    let _ = std::fs::remove_file(paths.pid_file());
    served?;
    crate::qm_log!(
        crate::errlog::ids::HA_INSTANCE_ENDED,
        "instance of queue manager '{}' ended",
        cfg.name
    );
    Ok(())
}

async fn serve(
    shared: Arc<Shared>,
    paths: QmPaths,
    mut end_rx: watch::Receiver<Option<AdminAction>>,
    raft_rt: Option<tokio::runtime::Handle>,
) -> Result<(), String> {
    let sock = paths.socket();
    // The lock is ours, so a socket file left here is stale (a killed predecessor).
    let _ = std::fs::remove_file(&sock);
    let unix = UnixListener::bind(&sock)
        .map_err(|e| format!("cannot listen on {}: {e}", sock.display()))?;
    crate::metrics::start(shared.clone()).await?;
    let timer = tokio::spawn(wait_timer::run(shared.clone()));
    match shared.ha.clone() {
        None => start_listeners(&shared)?,
        Some(h) => {
            let s2 = shared.clone();
            let rt = raft_rt.unwrap_or_else(tokio::runtime::Handle::current);
            rt.spawn(ha::replicate(h.clone()));
            tokio::spawn(ha::monitor(h.clone(), move || {
                if let Err(e) = start_listeners(&s2) {
                    crate::qm_log!(crate::errlog::ids::LISTENER_FAILED, "{e}");
                }
                let source = Source::Raft {
                    log: h.replica.storage().clone(),
                    applied: h.replica.applied_watch(),
                    props: h.props.clone(),
                };
                start_dr(&s2, Some(source));
            }));
        }
    }
    std::fs::write(paths.pid_file(), format!("{}\n", std::process::id()))
        .map_err(|e| e.to_string())?;
    crate::qm_log!(
        crate::errlog::ids::QM_RUNNING,
        "queue manager '{}' running (pid {}), bindings socket {}, TCP port {}",
        shared.cfg.name,
        std::process::id(),
        sock.display(),
        shared.cfg.port
    );
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| e.to_string())?;
    let mode = loop {
        tokio::select! {
            r = unix.accept() => {
                if let Ok((s, _)) = r {
                    let user = listeners::peer_user(&s);
                    listeners::spawn_conn(&shared, s, "local".into(), true, user);
                }
            }
            _ = sigterm.recv() => break AdminAction::ShutdownImmediate,
            _ = sigint.recv() => break AdminAction::ShutdownImmediate,
            _ = end_rx.changed() => {
                match *end_rx.borrow() {
                    Some(AdminAction::ShutdownImmediate) => break AdminAction::ShutdownImmediate,
                    Some(AdminAction::ShutdownControlled) => break AdminAction::ShutdownControlled,
                    None => {}
                }
            }
        }
    };
    shared.core.lock().quiescing = true;
    drop(unix);
    shared.control.lock().stop_all();
    if mode == AdminAction::ShutdownControlled {
        crate::qm_log!(
            crate::errlog::ids::QM_ENDING,
            "controlled end: waiting for applications to disconnect"
        );
        // Applications keep working until they disconnect; an immediate end or a signal cuts it short.
        loop {
            if shared.core.lock().engine.connection_count() == 0 {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = sigterm.recv() => break,
                _ = end_rx.changed() => {
                    if *end_rx.borrow() == Some(AdminAction::ShutdownImmediate) { break; }
                }
            }
        }
    }
    shared.immediate_tx.send_replace(true);
    timer.abort();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while shared.control.lock().tasks.iter().any(|t| !t.is_finished())
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
