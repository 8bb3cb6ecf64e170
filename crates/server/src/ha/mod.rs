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

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_engine::{Engine, EngineConfig, LogSink, Lsn};
use ferrymq_replication::clock::RealClock;
use ferrymq_replication::openraft::{ServerState, SnapshotPolicy};
use ferrymq_replication::{
    fast_failover_config, AppRecord, Apply, Capture, CaptureAt, LogId, Meta, Replica, ReplicaConfig,
};
use ferrymq_types::{MqError, Reason};
use parking_lot::Mutex;

use crate::config::{HaConfig, QmConfig, QmPaths};
use crate::core::Core;
use crate::dr::gate::Gate;
use crate::storage::{decode_export, now_ms, Storage};

/// AppRecord kind of a batch of engine log records.
pub(crate) use ferrymq_replication::KIND_ENGINE_BATCH;
/// AppRecord kind of a group control record (text): `PREFER [name]`, `SWITCHOVER name at_ms`.
const KIND_CONTROL: u8 = 2;
/// An active instance that has not heard from a majority for this long gives up the role. Below
/// the followers' leader lease (openraft: the 600 ms election timeout maximum, during which they
/// refuse to vote), so a cut-off active instance is gone before another can be elected (the
/// orderings are checked in `ferrymq_replication::timing`).
use ferrymq_replication::timing::QUORUM_LOSS_MS;
/// Non-preferred instances do not start elections for this long after a switch-over record.
use ferrymq_replication::timing::SWITCHOVER_WINDOW_MS;
/// `dspmq -o ha`: a reachable instance whose oldest missing entry was appended less than this
/// long ago is in sync (see [`HaHandle::status_rows`]): the reachability window.
pub const INSYNC_MS: u64 = ferrymq_replication::timing::REACH_WINDOW_MS;

fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

mod app;
mod handle;
mod roles;

pub use app::HaApp;
pub use ferrymq_replication::ha::Proposals;
pub use handle::HaHandle;
pub use roles::{monitor, replicate};

/// The engine's log sink in a replicated queue manager: each record, in the engine's batch
/// framing, joins the open batch of the proposals.
pub struct HaSink {
    pub(super) props: Arc<Proposals>,
    pub(super) max_record: usize,
}

impl LogSink for HaSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len + ferrymq_engine::batch::RECORD_HEAD_BYTES > self.max_record {
            return Err(MqError::new(
                Reason::RESOURCE_PROBLEM,
                format!(
                    "a log record of {len} bytes exceeds the largest the replicated log holds ({}); enlarge the log (-lf) for messages this big",
                    self.max_record
                ),
            ));
        }
        Ok(self
            .props
            .push(|open| ferrymq_engine::batch::push_record(open, kind, parts)))
    }
}

/// `FERRYMQ_HA_TRACE` set: the active instance logs batch counts and commit latency every 2 s.
fn trace_commits(props: &Proposals) {
    if std::env::var_os("FERRYMQ_HA_TRACE").is_none() {
        return;
    }
    // Batches, their summed commit latency, since when, and the last record number then.
    let window = Mutex::new((0u64, Duration::ZERO, Instant::now(), 0u64));
    props.subscribe(Box::new(move |batches| {
        let mut w = window.lock();
        for b in batches.iter().filter(|b| b.last_seq != 0) {
            w.0 += 1;
            w.1 += b.latency;
            if w.2.elapsed() > Duration::from_secs(2) {
                crate::qm_log!(
                    crate::errlog::ids::LOG_TRACE,
                    "trace: {} batches, {} records, avg commit {} us",
                    w.0,
                    b.last_seq - w.3,
                    w.1.as_micros() as u64 / w.0.max(1)
                );
                *w = (0, Duration::ZERO, Instant::now(), b.last_seq);
            }
        }
    }));
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
///
/// A DR primary's lag gate (`dr_gate`) hears of every batch committed or applied from the start,
/// re-applied entries included, so that it counts the log an instance inherits.
pub async fn start(
    paths: &QmPaths,
    cfg: &QmConfig,
    ecfg: EngineConfig,
    dr_gate: Option<Arc<Gate>>,
) -> Result<Started, String> {
    let ha = cfg.ha.clone().expect("an HA configuration");
    let storage = Arc::new(Storage::open_store(paths)?);
    let props = Proposals::new(Arc::new(RealClock::new()));
    if let Some(g) = &dr_gate {
        let g = g.clone();
        props.subscribe(Box::new(move |batches| g.committed(batches)));
    }
    trace_commits(&props);
    let mut rcfg = ReplicaConfig::new(ha.local_id(), paths.dir.clone());
    rcfg.log_files = cfg.log_primary_files;
    rcfg.log_file_pages = cfg.log_file_pages;
    rcfg.durability = cfg.durability;
    rcfg.direct_writes = cfg.log_direct_writes;
    rcfg.raft = raft_config();
    rcfg.links = crate::security::tls::instance_links(
        "HA replication",
        &ha.link_tls,
        cfg.ssl.as_ref(),
        &paths.dir,
    )?;
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
        dr_gate,
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
