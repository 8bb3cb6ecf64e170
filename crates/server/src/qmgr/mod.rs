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
use crate::dr::ship::{self, CopyFrom, Source};
use crate::dr::{recv, DrHandle};
use crate::ha::{self, HaHandle};
use crate::listeners::{self, Control};
use crate::storage::{now_ms, Storage};
use crate::wait_timer::{self, WaitTimer};

mod dr_start;
mod end_status;
mod initial;
mod replicated;
mod serve;
mod standalone;

use dr_start::start_dr;
pub use end_status::EndStatus;
use serve::serve;

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
    /// Bounds the client (TCP) connections served at once (qm.ini Channels:MaxChannels and
    /// MaxActiveChannels, the smaller).
    pub slots: Arc<Semaphore>,
    /// Bounds the bindings-mode (Unix socket) connections served at once
    /// (`limits::BINDINGS_CONNECTIONS_MAX`): as in MQ, MaxChannels counts channels only.
    pub bindings_slots: Arc<Semaphore>,
    /// Bounds the refused sockets being told why at once (`limits::REFUSALS_IN_FLIGHT_MAX`).
    pub refusals: Arc<Semaphore>,
    pub started_ms: u64,
    /// Ends waiting gets whose interval ran out.
    pub wait_timer: WaitTimer,
    /// Set on an instance of a replicated (HA) queue manager.
    pub ha: Option<Arc<HaHandle>>,
    /// Set when the queue manager takes part in disaster recovery.
    pub dr: Option<Arc<DrHandle>>,
    /// A DR primary's lag bound (its durable watch is `durable`).
    pub dr_gate: Option<Arc<Gate>>,
    /// The user store and the counts of refused connections.
    pub security: crate::connsec::Security,
    /// The TLS key repository new client sockets are served with.
    pub tls: crate::security::tls::TlsState,
    /// The message channels running (senders, receivers) and their status.
    pub channels: crate::channels::Registry,
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

    // Each argument is one independently opened part of the queue manager; a builder would only
    // rename them.
    #[allow(clippy::too_many_arguments)]
    fn new(
        core: Arc<Mutex<Core>>,
        storage: Arc<Storage>,
        cfg: QmConfig,
        durable: crate::lsn::LsnWatch,
        end_tx: watch::Sender<Option<AdminAction>>,
        ha: Option<Arc<HaHandle>>,
        dr: Option<(Arc<DrHandle>, Option<Arc<Gate>>)>,
        users: std::path::PathBuf,
        tls: crate::security::tls::TlsState,
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
            slots: Arc::new(Semaphore::new(cfg.max_sockets.min(cfg.max_active))),
            bindings_slots: Arc::new(Semaphore::new(
                ferrymq_types::limits::BINDINGS_CONNECTIONS_MAX,
            )),
            refusals: Arc::new(Semaphore::new(
                ferrymq_types::limits::REFUSALS_IN_FLIGHT_MAX,
            )),
            cfg,
            started_ms: now_ms(),
            wait_timer: WaitTimer::default(),
            ha,
            dr,
            dr_gate,
            security: crate::connsec::Security::new(users),
            tls,
            channels: Default::default(),
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
        message_memory_max: cfg.message_memory_max,
    }
}

/// Creates the storage of a new queue manager whose `qm.ini` is already written.
pub fn create_storage(paths: &QmPaths) -> Result<(), String> {
    create_storage_with(paths, "")
}

/// As [`create_storage`], then runs the MQSC `script` (see [`initial`]) before the first
/// checkpoint: the queue manager starts with what it defines. An HA instance runs it at time 0
/// (no creation times), so that every instance of the group starts from the same state.
pub fn create_storage_with(paths: &QmPaths, script: &str) -> Result<(), String> {
    let cfg = QmConfig::from_ini(&Ini::load(&paths.ini())?)?;
    if cfg.ha.is_some() {
        return Storage::create_replicated(paths, engine_config(&cfg), &mut |e| {
            initial::apply(e, script, 0)
        });
    }
    Storage::create(paths, &cfg, engine_config(&cfg), &mut |e| {
        initial::apply(e, script, now_ms())
    })
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
    // A pid file left by a killed predecessor would tell `strmqm` this process is ready as soon
    // as its bindings socket is bound, before its TCP listener runs: it is written again once
    // everything listens.
    let _ = std::fs::remove_file(paths.pid_file());
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
            run_instance(paths, cfg)
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

/// What opening a queue manager's log hands to the one start path: the engine holding the
/// recovered state, its storage, the watch replies wait on, and DR's gate and stream source.
struct Opened {
    core: Arc<Mutex<Core>>,
    storage: Arc<Storage>,
    /// The position a reply's record must reach before the reply goes out: the ring's durable
    /// LSN or the group's committed record number, behind a DR primary's lag gate.
    durable: crate::lsn::LsnWatch,
    gate: Option<Arc<Gate>>,
    /// A standalone DR primary's stream (an HA instance builds its own when it becomes active).
    source: Option<Source>,
    ha: Option<Arc<HaHandle>>,
}

/// Where an instance's log lives: its own ring, or a Raft group's log.
enum Log {
    Ring(standalone::Ring),
    Raft(replicated::Raft),
}

/// The one start path of a queue manager, standalone or an HA instance: open its log (recovering
/// the engine), wire the shared state, serve until ended, then stop the log in order.
fn run_instance(paths: &QmPaths, cfg: QmConfig) -> Result<(), String> {
    let dr = match cfg.dr.clone() {
        None => None,
        Some(c) => {
            let links = crate::security::tls::instance_links(
                "DR",
                &c.link_tls,
                cfg.ssl.as_ref(),
                &paths.dir,
            )?;
            Some(Arc::new(
                DrHandle::new(c, &cfg.name, Some(paths.ini())).with_links(links),
            ))
        }
    };
    // A DR primary's replies wait on the lag bound.
    let max_lag = dr
        .as_ref()
        .filter(|d| !d.is_secondary())
        .map(|d| d.cfg.max_lag_bytes);
    let rt = io_runtime(cfg.io_threads)?;
    let (opened, mut log) = if cfg.ha.is_some() {
        let (o, r) = replicated::Raft::open(paths, &cfg, &rt, max_lag)?;
        (o, Log::Raft(r))
    } else {
        let (o, r) = standalone::Ring::open(paths, &cfg, max_lag, rt.handle())?;
        (o, Log::Ring(r))
    };
    let (end_tx, end_rx) = watch::channel(None);
    let tls =
        crate::security::tls::TlsState::load(cfg.ssl.as_ref(), paths.ini(), paths.dir.clone());
    if let Some(h) = &opened.ha {
        tls.refresh_links(h.replica.links().clone(), h.cfg.link_tls.peer.clone());
    }
    if let Some(d) = &dr {
        tls.refresh_links(d.links.clone(), d.cfg.link_tls.peer.clone());
    }
    let shared = Arc::new(Shared::new(
        opened.core,
        opened.storage,
        cfg,
        opened.durable,
        end_tx,
        opened.ha,
        dr.map(|d| (d, opened.gate)),
        paths.users(),
        tls,
    ));
    if let Log::Ring(r) = &mut log {
        r.before_serving(&shared)?;
    }
    let source = opened.source;
    let served = rt.block_on(async {
        let raft_rt = match &log {
            Log::Raft(r) => Some(r.runtime()),
            Log::Ring(_) => {
                start_dr(&shared, source);
                None
            }
        };
        let r = serve(shared.clone(), paths.clone(), end_rx, raft_rt).await;
        if let Log::Raft(raft) = &log {
            raft.stop().await;
        }
        r
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    // The final checkpoint is taken even after a failed serve.
    let last = match log {
        Log::Ring(r) => Some(r.finish(&shared)),
        Log::Raft(r) => {
            r.finish();
            None
        }
    };
    let _ = std::fs::remove_file(paths.socket());
    let _ = std::fs::remove_file(paths.pid_file());
    served?;
    match last {
        Some(r) => {
            let r = r?;
            crate::qm_log!(
                crate::errlog::ids::QM_ENDED,
                "queue manager '{}' ended; final checkpoint at LSN {} with {} persistent messages",
                shared.cfg.name,
                r.lsn,
                r.messages
            );
        }
        None => crate::qm_log!(
            crate::errlog::ids::HA_INSTANCE_ENDED,
            "instance of queue manager '{}' ended",
            shared.cfg.name
        ),
    }
    Ok(())
}

/// The queue manager's I/O runtime: `TuningParameters:IoThreads` worker threads, two by default
/// (one queue manager is about one core of work; the second overlaps socket reads and writes).
fn io_runtime(threads: usize) -> Result<tokio::runtime::Runtime, String> {
    runtime(threads, "ferrymq-io", "I/O")
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
