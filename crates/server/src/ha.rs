//! A queue manager instance in a replicated (HA) group: the engine's log records go through Raft
//! instead of straight to the ring, the Raft state machine is the engine itself, and only the
//! instance that leads the group (the *active* instance) accepts applications.
//!
//! - **Writes.** The engine's [`LogSink`] here is [`HaSink`]: each record is numbered and added to
//!   an open batch ([`Proposals`]); one replicator task proposes batches to Raft in order (several
//!   in flight, so replication latency overlaps) and, as each is committed — on a majority's
//!   disks — publishes its last number as the durable "LSN". The durability gate every reply
//!   passes through is the standalone one, so a put or commit returns only once a majority holds
//!   it.
//! - **Replicas** apply committed batches to their own engine (`Engine::replay`), so a standby is
//!   a warm copy: taking over replays nothing more than what was committed and not yet applied.
//! - **Taking over.** When an instance's replica becomes Raft leader it confirms its leadership
//!   with a quorum and waits until every entry before its term is applied
//!   (`ensure_linearizable`), then starts its TCP listeners. Entries of its own term are already
//!   in its engine (it made them), so its state machine skips them.
//! - **Losing the role.** An active instance that stops being leader (deposed, or out of touch
//!   with a majority for longer than an election takes) may hold engine state the group never
//!   committed; it therefore restarts itself (`exec` of the same command), dropping every
//!   connection, and comes back as a replica rebuilt from its checkpoint and the committed log.
//! - **Snapshots** are the engine's incremental checkpoints (`Storage::write_checkpoint`), taken
//!   when the ring is half full; the Raft snapshot metadata is stored in the checkpoint manifest.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_engine::{Engine, EngineConfig, LogSink, Lsn};
use ferrymq_replication::openraft::{ServerState, SnapshotPolicy};
use ferrymq_replication::{
    fast_failover_config, AppRecord, Apply, Capture, CaptureAt, LogId, Meta, Replica, ReplicaConfig,
};
use ferrymq_types::{MqError, Reason};
use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

use crate::config::{HaConfig, QmConfig, QmPaths};
use crate::core::Core;
use crate::storage::{decode_export, now_ms, Storage};

/// AppRecord kind of a batch of engine log records.
pub(crate) const KIND_ENGINE_BATCH: u8 = 1;
/// AppRecord kind of a group control record (text): `PREFER [name]`, `SWITCHOVER name at_ms`.
const KIND_CONTROL: u8 = 2;
/// Non-preferred instances do not start elections for this long after a switch-over record.
const SWITCHOVER_WINDOW_MS: u64 = 4_000;
/// A batch is proposed once it holds this much (or as soon as the replicator is free).
const BATCH_BYTES: usize = 1 << 20;
/// Batches proposed and not yet committed, at most: about one per millisecond a commit takes
/// (an average of recent ones), between these bounds, unless qm.ini `NativeHA:MaxInFlight` fixes
/// it. Few on a fast link: while they are in flight, records gather into the next batch, so one
/// Raft entry (one round of appends, syncs and acknowledgements on every instance) carries many
/// commits — group commit across the group. More when the link is slow, so that replication
/// round trips overlap (measured with 10 ms: 2 in flight gave 2.2k round trips/s, 32 gave 4.1k;
/// on loopback 32 cost a fifth of the rate).
const MIN_IN_FLIGHT: usize = 2;
const MAX_IN_FLIGHT: usize = 64;
/// Proposals stop while the Raft log ring is this full (percent), until a snapshot frees it.
const RING_STOP_PCT: u64 = 85;
/// A snapshot is requested once the ring is this full (percent).
const RING_SNAPSHOT_PCT: u64 = 40;
/// A snapshot just built is followed at once by the next (ring still filling) only once this
/// many entries have been applied after it; otherwise the monitor waits 500 ms between requests.
const SNAPSHOT_AGAIN_ENTRIES: u64 = 64;
/// An active instance that has not heard from a majority for this long gives up the role. Below
/// the followers' leader lease (openraft: the 600 ms election timeout maximum, during which they
/// refuse to vote), so a cut-off active instance is gone before another can be elected.
const QUORUM_LOSS_MS: u64 = 450;
/// `dspmq -o ha`: a reachable instance whose oldest missing entry was appended less than this
/// long ago is in sync (see [`HaHandle::status_rows`]).
pub const INSYNC_MS: u64 = 1000;

fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

/// Records the engine logged, numbered, on their way into Raft.
pub struct Proposals {
    st: Mutex<PropState>,
    wake: Notify,
    /// The highest record number committed by the group (the engine's durable LSN).
    durable: crate::lsn::LsnSender,
    /// Signalled when a batch's log id becomes known or everything is lost.
    progress: Condvar,
    lost: AtomicBool,
    /// Moving average of the time from proposing a batch to its commit, in microseconds.
    commit_us: AtomicU64,
    /// A snapshot waits for the batch sealed when its state was captured.
    snapshot_waiting: AtomicBool,
    /// A DR primary's lag gate, told of every commit (as the ring's is of every sync).
    dr_gate: std::sync::OnceLock<Arc<crate::dr::gate::Gate>>,
}

struct PropState {
    /// Number of the last record handed out.
    last_seq: u64,
    open: Vec<u8>,
    open_last: u64,
    sealed: VecDeque<(u64, Vec<u8>)>,
    /// Proposed batches in log order: last record number, log id once committed, when proposed.
    proposed: VecDeque<(u64, Option<LogId>, Instant, usize)>,
    /// Committed batches for the DR lag bound.
    ledger: crate::dr::gate::BatchLedger,
    /// Log ids of recently committed batches, by last record number.
    ids: BTreeMap<u64, LogId>,
    /// Record number and log id at which this instance became active.
    base: Option<(u64, LogId)>,
    trace: (u64, u64, Instant, u64),
}

impl Proposals {
    fn new() -> Arc<Proposals> {
        Arc::new(Proposals {
            st: Mutex::new(PropState {
                last_seq: 0,
                open: Vec::new(),
                open_last: 0,
                sealed: VecDeque::new(),
                proposed: VecDeque::new(),
                ledger: Default::default(),
                ids: BTreeMap::new(),
                base: None,
                trace: (0, 0, Instant::now(), 0),
            }),
            wake: Notify::new(),
            durable: crate::lsn::channel(0).0,
            progress: Condvar::new(),
            lost: AtomicBool::new(false),
            commit_us: AtomicU64::new(0),
            snapshot_waiting: AtomicBool::new(false),
            dr_gate: std::sync::OnceLock::new(),
        })
    }

    /// Feeds every commit to a DR primary's lag gate from now on.
    pub fn set_dr_gate(&self, g: Arc<crate::dr::gate::Gate>) {
        let _ = self.dr_gate.set(g);
    }

    pub fn durable_watch(&self) -> crate::lsn::LsnWatch {
        self.durable.subscribe()
    }

    fn push(&self, kind: u8, parts: &[&[u8]]) -> u64 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut st = self.st.lock();
        st.open.push(kind);
        st.open.extend_from_slice(&(len as u32).to_le_bytes());
        for p in parts {
            st.open.extend_from_slice(p);
        }
        st.last_seq += 1;
        let seq = st.last_seq;
        st.open_last = seq;
        if st.open.len() >= BATCH_BYTES {
            seal(&mut st);
        }
        drop(st);
        self.wake.notify_one();
        seq
    }

    /// Closes the open batch so that the next record starts a new one; returns the number of
    /// the last record logged so far.
    pub(crate) fn seal(&self) -> u64 {
        let mut st = self.st.lock();
        seal(&mut st);
        st.last_seq
    }

    /// Lets the replicator propose what was sealed.
    pub(crate) fn wake_replicator(&self) {
        self.wake.notify_one();
    }

    /// The next batch to propose (waits for one).
    async fn next_batch(&self) -> (u64, Vec<u8>) {
        loop {
            let notified = self.wake.notified();
            {
                let mut st = self.st.lock();
                seal(&mut st);
                if let Some(b) = st.sealed.pop_front() {
                    st.proposed
                        .push_back((b.0, None, Instant::now(), b.1.len()));
                    return b;
                }
            }
            notified.await;
        }
    }

    fn committed(&self, last: u64, id: LogId) {
        let mut st = self.st.lock();
        if let Some(p) = st.proposed.iter_mut().find(|p| p.0 == last) {
            p.1 = Some(id);
            let at = p.2;
            let sample = at.elapsed().as_micros() as u64;
            let avg = self.commit_us.load(Ordering::Relaxed);
            self.commit_us
                .store(avg - avg / 8 + sample / 8, Ordering::Relaxed);
            if trace_enabled() {
                st.trace.0 += 1;
                st.trace.1 += at.elapsed().as_micros() as u64;
                if st.trace.2.elapsed() > Duration::from_secs(2) {
                    crate::qm_log!(
                        crate::errlog::ids::LOG_TRACE,
                        "trace: {} batches, {} records, avg commit {} us",
                        st.trace.0,
                        last - st.trace.3,
                        st.trace.1 / st.trace.0.max(1)
                    );
                    st.trace = (0, 0, Instant::now(), last);
                }
            }
        }
        let mut durable = None;
        while let Some(&(seq, Some(id), _, bytes)) = st.proposed.front() {
            st.proposed.pop_front();
            st.ledger.push(id.index, seq, bytes);
            st.ids.insert(seq, id);
            durable = Some(seq);
        }
        while st.ids.len() > 4096 {
            st.ids.pop_first();
        }
        drop(st);
        if let Some(seq) = durable {
            self.durable.advance(seq);
            if let Some(g) = self.dr_gate.get() {
                g.durable(seq);
            }
        }
        self.progress.notify_all();
    }

    /// How many batches may be in flight now (see [`MIN_IN_FLIGHT`]).
    fn adaptive_in_flight(&self) -> usize {
        let us = self.commit_us.load(Ordering::Relaxed) as usize;
        (us / 1000).clamp(MIN_IN_FLIGHT, MAX_IN_FLIGHT)
    }

    fn set_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.progress.notify_all();
    }

    /// The log id of the entry whose state ends with record `seq`: blocks until it is known,
    /// `None` if it never will be.
    pub(crate) fn log_id_of(&self, seq: u64) -> Option<LogId> {
        self.snapshot_waiting.store(true, Ordering::Release);
        let r = self.wait_log_id(seq);
        self.snapshot_waiting.store(false, Ordering::Release);
        r
    }

    fn wait_log_id(&self, seq: u64) -> Option<LogId> {
        let mut st = self.st.lock();
        loop {
            if let Some((base_seq, id)) = st.base {
                if seq == base_seq {
                    return Some(id);
                }
            }
            if let Some(id) = st.ids.get(&seq) {
                return Some(*id);
            }
            if self.lost.load(Ordering::Acquire) {
                return None;
            }
            self.progress.wait_for(&mut st, Duration::from_millis(100));
        }
    }

    /// An entry another instance committed was applied here: its bytes count towards the DR
    /// lag should this instance become active before the secondary has acknowledged it.
    fn note_applied(&self, index: u64, bytes: usize) {
        self.st.lock().ledger.push(index, 0, bytes);
    }

    /// On becoming active: holds replies within the DR lag bound from the secondary's last
    /// recorded acknowledgement (replicated in `DR_ACKED`), before any application is served;
    /// the shipper then takes over (or the grace period ends the hold).
    fn hold_dr_bound(&self, dr: ferrymq_engine::dr::DrState) {
        if let (Some(g), Some(pos)) = (self.dr_gate.get(), crate::dr::recorded_ack(dr)) {
            g.bound(Some(pos));
        }
    }

    /// The largest committed record number whose reply may go out with the DR secondary at
    /// Raft index `acked` and at most `max` bytes of log allowed beyond it.
    pub fn dr_allowed(&self, raw: u64, acked: u64, max: u64) -> u64 {
        self.st.lock().ledger.allowed(raw, acked, max)
    }

    /// Bytes committed after the DR secondary's index `acked` whose replies may have gone out
    /// (up to record number `released`).
    pub fn dr_released_bytes(&self, acked: u64, released: u64) -> u64 {
        self.st.lock().ledger.released_bytes(acked, released)
    }

    /// The last committed index, and the bytes committed (by this active instance) after the
    /// DR secondary's index `acked`.
    pub fn dr_lag(&self, acked: u64) -> (u64, u64) {
        let mut st = self.st.lock();
        let end = st.ledger.last_index().max(acked);
        (end, st.ledger.lag_bytes(acked))
    }
}

/// `FERRYMQ_HA_TRACE` set: the active instance logs batch counts and commit latency every 2 s.
fn trace_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("FERRYMQ_HA_TRACE").is_some())
}

fn seal(st: &mut PropState) {
    if !st.open.is_empty() {
        let b = std::mem::take(&mut st.open);
        let last = st.open_last;
        st.sealed.push_back((last, b));
    }
}

/// The engine's log sink in a replicated queue manager.
pub struct HaSink {
    props: Arc<Proposals>,
    max_record: usize,
}

impl LogSink for HaSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len + 5 > self.max_record {
            return Err(MqError::new(
                Reason::RESOURCE_PROBLEM,
                format!(
                    "a log record of {len} bytes exceeds the largest the replicated log holds ({}); enlarge the log (-lf) for messages this big",
                    self.max_record
                ),
            ));
        }
        Ok(self.props.push(kind, parts))
    }
}

/// The engine as the Raft state machine.
pub struct HaApp {
    core: Arc<Mutex<Core>>,
    storage: Arc<Storage>,
    props: Arc<Proposals>,
    ecfg: EngineConfig,
    max_record: usize,
    me: u64,
    /// The term this instance is active in (0: not active).
    own_term: AtomicU64,
    /// Entries of `own_term` from this instance at or after this index are the ones this process
    /// proposed as the active instance: already in its engine. (`u64::MAX` until active.) Earlier
    /// entries of the same term can exist — written before this instance restarted and took the
    /// role again in that term — and are replayed like any other.
    own_from: AtomicU64,
    ha: HaConfig,
    ini: std::path::PathBuf,
    /// The preferred instance (`sethapreferred`), as the group last agreed.
    preferred: Mutex<Option<String>>,
    raft: std::sync::OnceLock<ferrymq_replication::FerryRaft>,
    fast_failover: std::sync::OnceLock<ferrymq_replication::FastFailover>,
}

impl HaApp {
    fn sink(&self) -> Box<dyn LogSink> {
        Box::new(HaSink {
            props: self.props.clone(),
            max_record: self.max_record,
        })
    }

    fn io(e: String) -> std::io::Error {
        std::io::Error::other(e)
    }

    pub fn preferred(&self) -> Option<String> {
        self.preferred.lock().clone()
    }

    fn apply_control(&self, text: &str) {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["PREFER", rest @ ..] => {
                let name = rest.first().map(|n| n.to_string());
                *self.preferred.lock() = name.clone();
                // Kept in qm.ini too, so a restarted instance knows it before the log says so.
                match crate::config::Ini::load(&self.ini) {
                    Ok(mut ini) => {
                        match &name {
                            Some(n) => ini.set("NativeHA", "PreferredInstance", n),
                            None => {
                                for (st, kv) in ini.stanzas.iter_mut() {
                                    if st.eq_ignore_ascii_case("NativeHA") {
                                        kv.retain(|(k, _)| k != "PreferredInstance");
                                    }
                                }
                            }
                        }
                        if let Err(e) = ini.save(&self.ini) {
                            crate::qm_log!(
                                crate::errlog::ids::HA_PREFERRED_UNRECORDED,
                                "cannot record the preferred instance: {e}"
                            );
                        }
                    }
                    Err(e) => crate::qm_log!(
                        crate::errlog::ids::HA_PREFERRED_UNRECORDED,
                        "cannot record the preferred instance: {e}"
                    ),
                }
                crate::qm_log!(
                    crate::errlog::ids::HA_PREFERRED,
                    "preferred instance is now {}",
                    name.as_deref().unwrap_or("none")
                );
            }
            ["SWITCHOVER", to, at] => {
                let at: u64 = at.parse().unwrap_or(0);
                if now_ms().saturating_sub(at) > SWITCHOVER_WINDOW_MS {
                    return; // an old record replayed on restart
                }
                let Some(raft) = self.raft.get().cloned() else {
                    return;
                };
                // The old active instance restarts itself next: its connections end and its
                // port refuses, which must not start the immediate election of a replica
                // failure (it would pre-empt the preferred instance's).
                if let Some(ff) = self.fast_failover.get().cloned() {
                    ff.set_enabled(false);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(SWITCHOVER_WINDOW_MS)).await;
                        ff.set_enabled(true);
                    });
                }
                if self.ha.node_id(to) == Some(self.me) {
                    // Stand for election once the old active's lease has run out.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(700)).await;
                        let _ = raft.trigger().elect().await;
                    });
                } else {
                    raft.runtime_config().elect(false);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(SWITCHOVER_WINDOW_MS)).await;
                        raft.runtime_config().elect(true);
                    });
                }
            }
            _ => crate::qm_log!(
                crate::errlog::ids::HA_UNKNOWN_CONTROL,
                "unknown HA control record '{text}'; ignored"
            ),
        }
    }
}

fn checkpoint_key(meta: &[u8]) -> std::io::Result<Lsn> {
    let m: Meta = serde_json::from_slice(meta).map_err(std::io::Error::other)?;
    // Key 1 is the instance's initial checkpoint (crtmqm); later ones must sort after it.
    Ok(m.last_log_id.map_or(1, |l| l.index + 2))
}

/// Splits a batch payload (`kind u8 | len u32 | payload` each) into its engine records.
pub fn records(payload: &[u8]) -> impl Iterator<Item = Result<(u8, &[u8]), String>> {
    let mut p = payload;
    std::iter::from_fn(move || {
        if p.is_empty() {
            return None;
        }
        if p.len() < 5 {
            p = &[];
            return Some(Err("truncated record header".into()));
        }
        let kind = p[0];
        let len = u32::from_le_bytes([p[1], p[2], p[3], p[4]]) as usize;
        if p.len() < 5 + len {
            p = &[];
            return Some(Err("truncated record".into()));
        }
        let rec = &p[5..5 + len];
        p = &p[5 + len..];
        Some(Ok((kind, rec)))
    })
}

impl Apply for HaApp {
    fn open(&self, _dir: &Path) -> std::io::Result<Option<Vec<u8>>> {
        let (_, image, meta) = self.storage.load_latest().map_err(HaApp::io)?;
        let engine = Engine::restore(self.ecfg.clone(), self.sink(), image);
        self.core.lock().engine = engine;
        Ok((!meta.is_empty()).then_some(meta))
    }

    fn apply(&self, log_id: &LogId, rec: &AppRecord) {
        if rec.kind == KIND_CONTROL {
            self.apply_control(&String::from_utf8_lossy(&rec.payload));
            return;
        }
        let term = self.own_term.load(Ordering::Acquire);
        if log_id.index >= self.own_from.load(Ordering::Acquire)
            && log_id.leader_id.term == term
            && log_id.leader_id.node_id == self.me
        {
            return;
        }
        if rec.kind != KIND_ENGINE_BATCH {
            crate::qm_log!(
                crate::errlog::ids::HA_UNKNOWN_ENTRY,
                "replicated entry {} has unknown kind {}; ignored",
                log_id.index,
                rec.kind
            );
            return;
        }
        self.props.note_applied(log_id.index, rec.payload.len());
        let mut core = self.core.lock();
        for r in records(&rec.payload) {
            let res = r.and_then(|(kind, payload)| {
                core.engine
                    .replay(kind, Bytes::copy_from_slice(payload))
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = res {
                // The group committed a record this engine cannot apply: its state can no longer
                // be trusted. Restart and rebuild from the checkpoint and the log.
                crate::qm_log!(
                    crate::errlog::ids::HA_APPLY_FAILED,
                    "cannot apply replicated entry {}: {e}; restarting this instance",
                    log_id.index
                );
                restart_instance("state machine failure");
            }
        }
    }

    fn capture(&self) -> Capture {
        let core = self.core.lock();
        let image = core.engine.checkpoint_image(now_ms());
        // Active (its base is set under the core lock when it takes over): the engine may hold
        // records not yet applied. Otherwise the engine is exactly the applied state.
        let active = self.props.st.lock().base.is_some();
        let at: Option<CaptureAt> = if active {
            // The active engine is ahead of what is applied: its image ends at the last
            // record logged, whose batch must be cut here and committed first.
            let seq = self.props.seal();
            drop(core);
            self.props.wake.notify_one();
            let props = self.props.clone();
            Some(Box::pin(async move {
                tokio::task::spawn_blocking(move || props.log_id_of(seq))
                    .await
                    .ok()
                    .flatten()
            }))
        } else {
            None
        };
        let storage = self.storage.clone();
        Capture {
            at,
            write: Box::new(move |meta| {
                let key = checkpoint_key(meta)?;
                storage
                    .write_checkpoint(key, image, meta.to_vec())
                    .map(|_| ())
                    .map_err(HaApp::io)
            }),
        }
    }

    fn export(&self) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.storage.export_latest().map_err(HaApp::io)
    }

    fn import(&self, meta: &[u8], data: &[u8]) -> std::io::Result<()> {
        let image = decode_export(data).map_err(HaApp::io)?;
        let key = checkpoint_key(meta)?;
        self.storage
            .write_checkpoint(key, image.clone(), meta.to_vec())
            .map_err(HaApp::io)?;
        let engine = Engine::restore(self.ecfg.clone(), self.sink(), image);
        self.core.lock().engine = engine;
        Ok(())
    }
}

/// Replaces this process with a fresh start of the same command: what an instance does when it
/// can no longer trust its engine (deposed while active, Raft stopped). The pid stays the same.
pub fn restart_instance(why: &str) -> ! {
    use std::os::unix::process::CommandExt;
    crate::qm_log!(
        crate::errlog::ids::HA_RESTART,
        "restarting this instance as a replica: {why}"
    );
    let exe = std::env::current_exe();
    let err = match exe {
        Ok(exe) => std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .exec(),
        Err(e) => e,
    };
    crate::qm_log!(
        crate::errlog::ids::HA_RESTART_FAILED,
        "cannot restart ({err}); exiting"
    );
    std::process::exit(1)
}

/// The HA side of a running instance, for status and the role monitor.
pub struct HaHandle {
    pub cfg: HaConfig,
    pub replica: Replica,
    pub props: Arc<Proposals>,
    pub app: Arc<HaApp>,
    /// Set once this instance is the active one (it stays set until the process restarts).
    pub active: AtomicBool,
    /// Set when the instance is being ended (endmqm): the monitor stops acting.
    pub ending: AtomicBool,
    pub started: Instant,
}

impl HaHandle {
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// One row of `NAME=value` pairs per instance, as this instance sees the group.
    ///
    /// - `REACHABLE`: heard from within [`ferrymq_replication::REACH_WINDOW`] with no failed
    ///   call since (the active instance hears from every replica; a replica only from the
    ///   active instance, so it says `UNKNOWN` of the others); `REACHDATE`/`REACHTIME`/`REACHSECS`
    ///   say since when (the start of the contact, or the last contact once unreachable). An
    ///   instance this one cannot reach has `ROLE(Unknown)`.
    /// - `LOGINDEX`, `LAGENTRIES`, `BACKLOG`, `BEHIND`: the last entry it is known to hold, the
    ///   entries and bytes of log after it, and how long ago the first of those was appended
    ///   (its delay; 0 when it lacks nothing). `UNKNOWN` while the active instance has not yet
    ///   matched its log (one that died before this instance became active).
    /// - `INSYNC(YES)`: reachable, and it lacks nothing or only entries appended less than
    ///   [`INSYNC_MS`] ago — a replica one batch behind under load is in sync; a replica that
    ///   stops answering or falls a second behind is not.
    pub fn status_rows(&self) -> Vec<Vec<(String, String)>> {
        let m = self.replica.metrics();
        let me = self.cfg.local_id();
        let leader = m.current_leader;
        let leading = m.state == ServerState::Leader;
        let last = m.last_log_index.unwrap_or(0);
        let contacts = self.replica.contacts();
        let mut rows = Vec::new();
        for (i, (name, addr)) in self.cfg.instances.iter().enumerate() {
            let id = i as u64 + 1;
            let local = id == me;
            // (reachable, since when); None when this instance cannot know.
            let reach = if local {
                Some((true, Some(self.started)))
            } else if leading || leader == Some(id) {
                let c = contacts.get(id).unwrap_or_default();
                Some((c.reachable(), c.since()))
            } else {
                None
            };
            let reachable = reach.map(|r| r.0);
            let role = if reachable == Some(false) {
                "Unknown"
            } else if leader == Some(id) {
                if local && !self.is_active() {
                    "Starting"
                } else {
                    "Active"
                }
            } else {
                "Replica"
            };
            let mut row = vec![
                ("INSTANCE".to_string(), name.clone()),
                ("ROLE".to_string(), role.to_string()),
                ("REPLADDR".to_string(), addr.clone()),
            ];
            if local {
                row.push(("LOCAL".into(), "YES".into()));
            }
            if self.app.preferred().as_deref() == Some(name.as_str()) {
                row.push(("PREFERRED".into(), "YES".into()));
            }
            match reach {
                Some((up, since)) => {
                    row.push(("REACHABLE".into(), yes_no(up).into()));
                    if let Some(t) = since {
                        let ms = now_ms().saturating_sub(t.elapsed().as_millis() as u64);
                        let (d, tm) = crate::listeners::fmt_date_time(ms);
                        row.push(("REACHDATE".into(), d));
                        row.push(("REACHTIME".into(), tm));
                        row.push((
                            "REACHSECS".into(),
                            format!("{:.3}", t.elapsed().as_secs_f64()),
                        ));
                    }
                }
                None => row.push(("REACHABLE".into(), "UNKNOWN".into())),
            }
            // The last entry the instance is known to hold.
            let matched = if leading {
                if local {
                    Some(Some(last))
                } else {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id))
                        .map(|l| l.map(|l| l.index))
                }
            } else if local {
                Some(m.last_applied.map(|l| l.index))
            } else {
                None
            };
            // A replica's own row: in contact with the active instance, or not.
            let connected = if local && !leading {
                leader
                    .filter(|&l| l != me)
                    .and_then(|l| contacts.get(l))
                    .is_some_and(|c| c.reachable())
            } else {
                reachable == Some(true)
            };
            match (matched, reach) {
                (Some(Some(matched)), Some(_)) => {
                    let behind = if matched >= last {
                        Duration::ZERO
                    } else {
                        self.replica
                            .storage()
                            .appended_after(matched)
                            .map_or(Duration::ZERO, |t| t.elapsed())
                    };
                    let bytes = if matched >= last {
                        Some(0)
                    } else {
                        self.replica.storage().bytes_after(matched)
                    };
                    let insync = connected && behind <= Duration::from_millis(INSYNC_MS);
                    row.push(("INSYNC".into(), yes_no(insync).into()));
                    row.push(("LOGINDEX".into(), matched.to_string()));
                    row.push((
                        "LAGENTRIES".into(),
                        last.saturating_sub(matched).to_string(),
                    ));
                    row.push((
                        "BACKLOG".into(),
                        bytes.map_or("SNAPSHOT".into(), |b| b.to_string()),
                    ));
                    row.push(("BEHIND".into(), format!("{:.3}", behind.as_secs_f64())));
                }
                (Some(_), Some(_)) => {
                    row.push(("INSYNC".into(), "NO".into()));
                    for k in ["LOGINDEX", "LAGENTRIES", "BACKLOG", "BEHIND"] {
                        row.push((k.into(), "UNKNOWN".into()));
                    }
                }
                _ => row.push(("INSYNC".into(), "UNKNOWN".into())),
            }
            rows.push(row);
        }
        rows
    }

    /// The preferred instance to hand the active role to, once it has been in sync for a second.
    fn switch_over_due(
        &self,
        m: &ferrymq_replication::Metrics,
        in_sync_since: &mut Option<Instant>,
    ) -> Option<String> {
        let pref = self.app.preferred()?;
        let id = self.cfg.node_id(&pref)?;
        if id == self.cfg.local_id() {
            *in_sync_since = None;
            return None;
        }
        let last = m.last_log_index.unwrap_or(0);
        let matched = m
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).copied().flatten())
            .map_or(0, |l| l.index);
        if matched < last {
            *in_sync_since = None;
            return None;
        }
        let since = *in_sync_since.get_or_insert_with(Instant::now);
        (since.elapsed() >= Duration::from_secs(1)).then_some(pref)
    }

    /// Records (through the group's log, from any instance) which instance should be active
    /// whenever it is available; `None` clears the preference.
    pub async fn set_preferred(&self, name: Option<&str>) -> Result<String, String> {
        if let Some(n) = name {
            if self.cfg.node_id(n).is_none() {
                return Err(format!(
                    "'{n}' is not an instance of this group ({})",
                    self.cfg
                        .instances
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let rec = AppRecord {
            kind: KIND_CONTROL,
            payload: match name {
                Some(n) => format!("PREFER {n}"),
                None => "PREFER".to_string(),
            }
            .into_bytes(),
        };
        self.replica
            .write_anywhere(rec)
            .await
            .map_err(|e| format!("the group did not record it: {e}"))?;
        Ok(match name {
            Some(n) => {
                format!("instance '{n}' is now preferred; it becomes active once it is in sync")
            }
            None => "no instance is preferred now".to_string(),
        })
    }

    /// Extra QMSTATUS rows of an HA instance.
    pub fn qmstatus_rows(&self) -> Vec<(String, String)> {
        let m = self.replica.metrics();
        let (cap, _) = self.replica.storage().geometry();
        let used = self.replica.storage().used_bytes().unwrap_or(0);
        vec![
            ("HAINST".into(), self.cfg.local.clone()),
            (
                "HAROLE".into(),
                if self.is_active() {
                    "ACTIVE"
                } else {
                    "REPLICA"
                }
                .into(),
            ),
            (
                "HALEADER".into(),
                m.current_leader
                    .map_or("NONE".into(), |l| self.cfg.name_of(l).to_string()),
            ),
            ("HATERM".into(), m.current_term.to_string()),
            ("LOGUTIL".into(), (used * 100 / cap.max(1)).to_string()),
            ("CURRLOG".into(), m.last_log_index.unwrap_or(0).to_string()),
        ]
    }
}

/// Builds the Raft configuration of an instance.
fn raft_config() -> ferrymq_replication::openraft::Config {
    let mut c = fast_failover_config();
    // Snapshots are requested by ring usage (see `monitor`), not by entry count: entries are
    // batches of very different sizes.
    c.snapshot_policy = SnapshotPolicy::Never;
    c.max_in_snapshot_log_to_keep = 8;
    c.purge_batch_size = 1;
    c.max_payload_entries = 64;
    c
}

/// What [`start`] returns: the engine's core (already holding the recovered state) and the HA
/// handle.
pub struct Started {
    pub core: Arc<Mutex<Core>>,
    pub storage: Arc<Storage>,
    pub handle: Arc<HaHandle>,
}

/// Opens the instance's store, starts its replica (which loads the newest checkpoint into the
/// engine and re-applies the committed log after it) and, for a brand-new group, forms it.
pub async fn start(paths: &QmPaths, cfg: &QmConfig, ecfg: EngineConfig) -> Result<Started, String> {
    let ha = cfg.ha.clone().expect("an HA configuration");
    let storage = Arc::new(Storage::open_store(paths)?);
    let props = Proposals::new();
    let mut rcfg = ReplicaConfig::new(ha.local_id(), paths.dir.clone());
    rcfg.log_files = cfg.log_primary_files;
    rcfg.log_file_pages = cfg.log_file_pages;
    rcfg.durability = cfg.durability;
    rcfg.raft = raft_config();
    let max_record = (cfg.log_file_pages as usize * 4096) / 2;
    let core = Arc::new(Mutex::new(Core::new(Engine::new(
        ecfg.clone(),
        Box::new(HaSink {
            props: props.clone(),
            max_record,
        }),
    ))));
    let app = Arc::new(HaApp {
        core: core.clone(),
        storage: storage.clone(),
        props: props.clone(),
        ecfg,
        max_record,
        me: ha.local_id(),
        own_term: AtomicU64::new(0),
        own_from: AtomicU64::new(u64::MAX),
        ha: ha.clone(),
        ini: paths.ini(),
        preferred: Mutex::new(ha.preferred.clone()),
        raft: std::sync::OnceLock::new(),
        fast_failover: std::sync::OnceLock::new(),
    });
    let listener = replication_listener(ha.bind_addr())
        .await
        .map_err(|e| format!("cannot listen for replication on {}: {e}", ha.bind_addr()))?;
    let replica = Replica::start(rcfg, listener, app.clone())
        .await
        .map_err(|e| format!("cannot start the replica: {e}"))?;
    let _ = app.raft.set(replica.raft().clone());
    let ff = replica.fast_failover().clone();
    ff.on_report(|what| crate::qm_log!(crate::errlog::ids::HA_FAST_ELECTION, "{what}"));
    let _ = app.fast_failover.set(ff);
    let fresh = replica.recovered().last_log_id.is_none() && replica.recovered().vote.is_none();
    // The first instance listed forms a brand-new group (the others join when it contacts them):
    // one initializer, so the group's first election is not contested.
    if fresh && ha.local_id() == 1 {
        let members: BTreeMap<u64, String> = ha
            .instances
            .iter()
            .enumerate()
            .map(|(i, (_, a))| (i as u64 + 1, a.clone()))
            .collect();
        replica
            .initialize(members)
            .await
            .map_err(|e| format!("cannot form the HA group: {e}"))?;
    }
    let handle = Arc::new(HaHandle {
        cfg: ha,
        replica,
        props,
        app,
        active: AtomicBool::new(false),
        ending: AtomicBool::new(false),
        started: Instant::now(),
    });
    Ok(Started {
        core,
        storage,
        handle,
    })
}

/// Proposes the engine's batches to Raft, in order, until leadership is lost.
pub async fn replicate(h: Arc<HaHandle>) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let freed = Arc::new(Notify::new());
    let raft = h.replica.raft().clone();
    loop {
        // Room first, then the batch: whatever arrived while waiting goes into it.
        loop {
            let limit = h
                .cfg
                .max_in_flight
                .unwrap_or_else(|| h.props.adaptive_in_flight());
            let notified = freed.notified();
            if in_flight.load(Ordering::Acquire) < limit {
                break;
            }
            notified.await;
        }
        let (last, payload) = h.props.next_batch().await;
        // Keep the ring from filling faster than snapshots free it — except for the batch a
        // snapshot being built waits for (it is what frees the ring), within the headroom.
        loop {
            let (cap, _) = h.replica.storage().geometry();
            let used = h.replica.storage().used_bytes().unwrap_or(0);
            if cap == 0 || used * 100 < cap * RING_STOP_PCT {
                break;
            }
            if h.props.snapshot_waiting.load(Ordering::Acquire) && used * 100 < cap * 95 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let rec = AppRecord {
            kind: KIND_ENGINE_BATCH,
            payload,
        };
        in_flight.fetch_add(1, Ordering::AcqRel);
        match raft.client_write_ff(rec).await {
            Ok(rx) => {
                let props = h.props.clone();
                let (in_flight, freed) = (in_flight.clone(), freed.clone());
                tokio::spawn(async move {
                    let r = rx.await;
                    in_flight.fetch_sub(1, Ordering::AcqRel);
                    freed.notify_one();
                    match r {
                        Ok(Ok(resp)) => props.committed(last, resp.log_id),
                        _ => props.set_lost(),
                    }
                });
            }
            Err(_) => {
                h.props.set_lost();
                return;
            }
        }
    }
}

/// Makes this (leading) instance's engine complete: confirms leadership with a quorum, waits
/// until every entry in its log — including any it wrote in this term before a restart — is
/// applied, and marks the point after which entries are its own. Returns the last applied id.
async fn activate_engine(
    h: &HaHandle,
    raft: &ferrymq_replication::FerryRaft,
) -> Result<(LogId, String), String> {
    let t0 = Instant::now();
    raft.ensure_linearizable()
        .await
        .map_err(|e| format!("leadership not confirmed: {e}"))?;
    let confirmed = t0.elapsed();
    let (applied_before, last) = {
        let m = raft.metrics().borrow().clone();
        (m.last_applied.map_or(0, |l| l.index), m.last_log_index)
    };
    let m = raft
        .wait(Some(Duration::from_secs(30)))
        .applied_index_at_least(last, "activation")
        .await
        .map_err(|e| format!("the log was not applied: {e}"))?;
    let timeline = format!(
        "leadership confirmed in {} ms, {} entries applied in {} ms",
        confirmed.as_millis(),
        last.unwrap_or(0).saturating_sub(applied_before),
        (t0.elapsed() - confirmed).as_millis()
    );
    let applied = m
        .last_applied
        .ok_or_else(|| "nothing applied yet".to_string())?;
    let core = h.app.core.lock();
    let seq = h.props.seal();
    h.props.hold_dr_bound(core.engine.dr_state());
    h.props.st.lock().base = Some((seq, applied));
    h.app.own_from.store(applied.index + 1, Ordering::Release);
    drop(core);
    Ok((applied, timeline))
}

/// Watches the replica's role: takes over when it becomes leader, restarts the instance when
/// it loses the role, and requests snapshots as the ring fills. `activate` starts the
/// listeners of an instance that has just become active.
pub async fn monitor(h: Arc<HaHandle>, activate: impl Fn()) {
    let raft = h.replica.raft().clone();
    let me = h.cfg.local_id();
    let mut metrics = raft.metrics();
    let mut last_snapshot_request = Instant::now() - Duration::from_secs(10);
    let mut snapshot_at_request = None;
    let mut in_sync_since: Option<Instant> = None;
    let mut failed_term = 0;
    loop {
        if h.ending.load(Ordering::Acquire) {
            return;
        }
        let m = metrics.borrow().clone();
        if m.state == ServerState::Shutdown {
            restart_instance("the replica stopped");
        }
        let active = h.is_active();
        let leading = m.state == ServerState::Leader && m.current_leader == Some(me);
        if !active && leading {
            let began = Instant::now();
            h.app.own_term.store(m.current_term, Ordering::Release);
            match activate_engine(&h, &raft).await {
                Ok((applied, timeline)) => {
                    h.active.store(true, Ordering::Release);
                    let listening = Instant::now();
                    activate();
                    crate::qm_log!(
                        crate::errlog::ids::HA_ACTIVE, "instance '{}' is now the active instance (term {}, log index {}), {} ms after its election ({timeline}, listeners started in {} ms)",
                        h.cfg.local,
                        m.current_term,
                        applied.index,
                        began.elapsed().as_millis(),
                        listening.elapsed().as_millis()
                    );
                }
                Err(why) => {
                    // A restarted instance can find itself leader of its old term without a
                    // quorum (a partition): say so once per term, then retry quietly.
                    if failed_term != m.current_term {
                        failed_term = m.current_term;
                        crate::qm_log!(
                            crate::errlog::ids::HA_NOT_YET_ACTIVE,
                            "instance '{}' leads term {} but cannot take over yet: {why}",
                            h.cfg.local,
                            m.current_term
                        );
                    }
                    h.app.own_term.store(0, Ordering::Release);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        } else if active {
            if !leading || m.current_term != h.app.own_term.load(Ordering::Acquire) {
                restart_instance("another instance became active");
            }
            if m.millis_since_quorum_ack
                .is_some_and(|ms| ms > QUORUM_LOSS_MS)
            {
                restart_instance("lost contact with the majority of the group");
            }
            if h.props.lost.load(Ordering::Acquire) {
                restart_instance("a replicated write failed (leadership lost)");
            }
            if let Some(to) = h.switch_over_due(&m, &mut in_sync_since) {
                let rec = AppRecord {
                    kind: KIND_CONTROL,
                    payload: format!("SWITCHOVER {to} {}", now_ms()).into_bytes(),
                };
                if raft.client_write(rec).await.is_ok() {
                    restart_instance(&format!("switching over to the preferred instance '{to}'"));
                }
            }
        }
        let (cap, _) = h.replica.storage().geometry();
        let used = h.replica.storage().used_bytes().unwrap_or(0);
        // Once the last snapshot requested is built, the next may be asked for at once if entries
        // have been applied since: under a heavy load the ring fills in a fraction of a second,
        // and a fixed gap between requests let it reach the proposal stop (a stall of every
        // reply). A full ring the newest snapshot already covers is waiting for its purge, not
        // for another snapshot.
        let index = |l: Option<LogId>| l.map_or(0, |l| l.index);
        let again = m.snapshot != snapshot_at_request
            && index(m.last_applied) >= index(m.snapshot) + SNAPSHOT_AGAIN_ENTRIES;
        if cap > 0
            && used * 100 >= cap * RING_SNAPSHOT_PCT
            && (again || last_snapshot_request.elapsed() > Duration::from_millis(500))
        {
            last_snapshot_request = Instant::now();
            snapshot_at_request = m.snapshot;
            let _ = raft.trigger().snapshot().await;
        }
        // Metrics change with every entry; acting on each change would cost more CPU than the
        // decisions are worth. Look again after a change, at most every 20 ms, or every 50 ms.
        tokio::select! {
            r = metrics.changed() => {
                if r.is_err() && !h.ending.load(Ordering::Acquire) {
                    restart_instance("the replica stopped");
                }
                // Except when this instance has just been elected: taking over waits for nothing.
                let elected = {
                    let m = metrics.borrow();
                    m.state == ServerState::Leader && m.current_leader == Some(me)
                };
                if !elected || h.is_active() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

/// The replication listener, with SO_REUSEADDR so that an instance restarted at once (by itself,
/// after losing the role, or by an operator) can listen again while connections of its previous
/// life are still in TIME_WAIT. Warns (once per start) when the port is in the kernel's ephemeral
/// range, where an unrelated outgoing connection can hold it while the instance is down.
async fn replication_listener(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for sa in tokio::net::lookup_host(addr).await? {
        let sock = if sa.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        match sock.bind(sa).and_then(|()| sock.listen(1024)) {
            Ok(l) => {
                if let Some(w) = crate::config::ephemeral_port_range()
                    .and_then(|r| crate::config::ephemeral_port_warning(&sa.to_string(), r))
                {
                    crate::qm_log!(crate::errlog::ids::HA_WARNING, "{w}");
                }
                return Ok(l);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the address resolves to nothing",
        )
    }))
}
