//! Disaster recovery (DR): asynchronous shipping of a queue manager's log to a recovery site.
//!
//! - **The stream.** A primary ships the records its engine logged, in log order: a standalone
//!   queue manager reads them from its ring (positions are log LSNs), an HA group's active
//!   instance from the committed Raft entries (positions are Raft indexes, the same on every
//!   instance, so the stream carries on from whichever instance is active after a failover).
//!   The secondary applies each chunk to its engine, logs it in its own log together with a
//!   `DR_MARK` (stream id, position), and acknowledges the position once that is durable. So the
//!   secondary's position is exactly as durable as the state it describes, and a reconnecting
//!   secondary asks for precisely what it lacks ([`ship`], [`recv`]).
//! - **Bounded loss.** Commits never wait for the recovery site, but a reply that reveals durable
//!   work (a put's or commit's acknowledgement, a got message) is held while more than
//!   `DR:MaxLagBytes` (4 MiB by default) of log stands between it and what the secondary has
//!   acknowledged ([`gate`]). Losing the main site while connected therefore loses at most that
//!   much acknowledged work. When the link drops the bound holds for `DR:DisconnectGraceMs`
//!   (5 s by default: a main site whose network fails before the rest of it still loses at most
//!   the bound); after that the primary carries on alone (the status shows `Disconnected` and the
//!   lag growing): an unreachable recovery site must not take the main site down.
//! - **Resynchronisation.** A secondary whose position is still in the primary's log gets only
//!   the difference. Otherwise — a new secondary, one that fell further behind than the log
//!   keeps, or an old primary returning as secondary (its log may hold work the new primary never
//!   received, and a redo-only log cannot be rolled back) — it gets a full copy: `DR_RESET`, then
//!   the primary's whole persistent state as records, then the stream from that point.

pub mod gate;
pub mod recv;
pub mod ship;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::config::{DrConfig, DrRole};

/// What the status shows of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Trying the recovery site's addresses (primary) or waiting for a primary (secondary).
    Connecting,
    /// A full copy is being sent or received.
    FullCopy,
    /// Connected and streaming.
    Normal,
    /// Not connected.
    Disconnected,
}

impl LinkState {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Connecting => "Connecting",
            LinkState::FullCopy => "FullCopy",
            LinkState::Normal => "Normal",
            LinkState::Disconnected => "Disconnected",
        }
    }
}

/// The DR side of a running queue manager: configuration, link status, and (on a primary) the
/// positions that bound the lag.
pub struct DrHandle {
    pub cfg: DrConfig,
    pub qmgr: String,
    st: Mutex<Status>,
    /// Position the secondary has acknowledged as durable (primary), or holds (secondary).
    pub acked: AtomicU64,
    /// Chunks sent and not yet acknowledged: end position and when it was read.
    unacked: Mutex<VecDeque<(u64, Instant)>>,
    /// Bytes received (secondary) or sent (primary) since start.
    pub bytes: AtomicU64,
    pub stream: AtomicU64,
    /// Counts link ups and downs, so a grace timer knows whether its link came back.
    pub sessions: AtomicU64,
    /// The pair's lag bound: the primary's own; on a secondary, the bound its primary gave in
    /// its hello (recorded in qm.ini, so `makedrprimary` keeps it).
    pub max_lag: AtomicU64,
    /// This queue manager's qm.ini, where a secondary records its primary's bound.
    ini: Option<std::path::PathBuf>,
    /// The last full copy's size in wire bytes and how much of it has been sent (counting what
    /// a resumed copy skipped): its progress for `dspmq -o dr -w` (COPYBYTES, COPIEDBYTES).
    pub copy_bytes: AtomicU64,
    pub copy_sent: AtomicU64,
    /// How the DR link is secured (plain TCP unless qm.ini `DR:SslLink=Required`).
    pub links: ferrymq_replication::link::Links,
}

#[derive(Debug, Clone)]
struct Status {
    link: LinkState,
    partner: String,
    resync: &'static str,
    last_error: Option<String>,
}

impl DrHandle {
    pub fn new(cfg: DrConfig, qmgr: &str, ini: Option<std::path::PathBuf>) -> DrHandle {
        DrHandle {
            max_lag: AtomicU64::new(cfg.max_lag_bytes),
            ini,
            cfg,
            qmgr: qmgr.to_string(),
            st: Mutex::new(Status {
                link: LinkState::Connecting,
                partner: String::new(),
                resync: "None",
                last_error: None,
            }),
            acked: AtomicU64::new(0),
            unacked: Mutex::new(VecDeque::new()),
            bytes: AtomicU64::new(0),
            stream: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
            copy_bytes: AtomicU64::new(0),
            copy_sent: AtomicU64::new(0),
            links: ferrymq_replication::link::Links::plain("DR"),
        }
    }

    /// The same, its link secured as `links` says.
    pub fn with_links(mut self, links: ferrymq_replication::link::Links) -> DrHandle {
        self.links = links;
        self
    }

    pub fn is_secondary(&self) -> bool {
        self.cfg.role == DrRole::Secondary
    }

    /// A secondary learns its primary's lag bound (from its hello) and keeps it in qm.ini
    /// (`DR:MaxLagBytes`), so the bound is the pair's, not this site's own, when `makedrprimary`
    /// promotes it. Values below qm.ini's minimum are not recorded.
    pub fn primary_bound(&self, bytes: u64) {
        if bytes < crate::config::DR_MIN_LAG || self.max_lag.swap(bytes, Ordering::AcqRel) == bytes
        {
            return;
        }
        let Some(path) = &self.ini else { return };
        let r = crate::config::Ini::load(path).and_then(|mut ini| {
            ini.set("DR", "MaxLagBytes", &bytes.to_string());
            ini.save(path)
        });
        match r {
            Ok(()) => crate::qm_log!(
                crate::errlog::ids::DR_BOUND_RECORDED, "DR secondary: the primary's lag bound is {bytes} bytes; recorded in qm.ini (DR:MaxLagBytes), which makedrprimary keeps"
            ),
            Err(e) => crate::qm_log!(
                crate::errlog::ids::DR_BOUND_UNRECORDED, "DR secondary: cannot record the primary's lag bound ({bytes} bytes) in qm.ini: {e}"
            ),
        }
    }

    pub fn set_link(&self, link: LinkState, partner: &str) {
        let mut st = self.st.lock();
        st.link = link;
        if !partner.is_empty() {
            st.partner = partner.to_string();
        }
        if link == LinkState::Normal {
            st.last_error = None;
        }
    }

    pub fn set_resync(&self, how: &'static str) {
        self.st.lock().resync = how;
    }

    pub fn set_error(&self, e: String) {
        self.st.lock().last_error = Some(e);
    }

    /// Records that a chunk ending at `end` was sent.
    pub fn sent(&self, end: u64, read_at: Instant, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.unacked.lock().push_back((end, read_at));
    }

    /// Records the secondary's acknowledgement of everything up to `pos`.
    pub fn ack(&self, pos: u64) {
        {
            let mut q = self.unacked.lock();
            while q.front().is_some_and(|(e, _)| *e <= pos) {
                q.pop_front();
            }
        }
        self.acked.fetch_max(pos, Ordering::AcqRel);
    }

    /// The link dropped: unacknowledged chunks will be sent again; the oldest one's time stays
    /// as the age of the lag (or now, when nothing was in flight).
    pub fn reset_unacked(&self) {
        let mut q = self.unacked.lock();
        let oldest = q.front().map_or_else(Instant::now, |(_, t)| *t);
        q.clear();
        q.push_back((0, oldest));
    }

    /// The link's state now.
    pub fn link(&self) -> LinkState {
        self.st.lock().link
    }

    /// The link's state now, as `dspmq -o dr` names it (DRSTATUS).
    pub fn link_name(&self) -> &'static str {
        self.link().as_str()
    }

    /// Seconds since the oldest work the secondary has not acknowledged (0 without lag).
    pub fn lag_secs(&self, lag_bytes: u64) -> f64 {
        if lag_bytes == 0 {
            return 0.0;
        }
        self.unacked
            .lock()
            .front()
            .map_or(0.0, |(_, t)| t.elapsed().as_secs_f64())
    }

    /// `NAME(value)` pairs for `dspmq -o dr` and `DR STATUS`; `lag` comes from the gate (it
    /// knows how positions translate into bytes, and what it has released).
    pub fn status_line(&self, lag: gate::Lag) -> String {
        let st = self.st.lock().clone();
        let role = match self.cfg.role {
            DrRole::Primary => "Primary",
            DrRole::Secondary => "Secondary",
        };
        let mut f = vec![
            format!("QMNAME({})", self.qmgr),
            format!("DRROLE({role})"),
            format!("DRSTATUS({})", st.link.as_str()),
            format!("PARTNER({})", st.partner),
            format!("STREAM({:016x})", self.stream.load(Ordering::Acquire)),
        ];
        match self.cfg.role {
            DrRole::Primary => {
                f.push(format!("POSITION({})", lag.end));
                f.push(format!("ACKED({})", self.acked.load(Ordering::Acquire)));
                f.push(format!("LAGBYTES({})", lag.at_risk));
                f.push(format!("HELDBYTES({})", lag.held));
                f.push(format!("LAGSECS({:.3})", self.lag_secs(lag.total())));
                f.push(format!("MAXLAG({})", self.max_lag.load(Ordering::Acquire)));
                f.push(format!("SENTBYTES({})", self.bytes.load(Ordering::Relaxed)));
                if st.resync == "FullCopy" {
                    f.push(format!(
                        "COPYBYTES({})",
                        self.copy_bytes.load(Ordering::Acquire)
                    ));
                    f.push(format!(
                        "COPIEDBYTES({})",
                        self.copy_sent.load(Ordering::Acquire)
                    ));
                }
            }
            DrRole::Secondary => {
                f.push(format!("POSITION({})", self.acked.load(Ordering::Acquire)));
                f.push(format!(
                    "RECEIVEDBYTES({})",
                    self.bytes.load(Ordering::Relaxed)
                ));
                f.push(format!("MAXLAG({})", self.max_lag.load(Ordering::Acquire)));
            }
        }
        f.push(format!("RESYNC({})", st.resync));
        if let Some(e) = st.last_error {
            f.push(format!("LASTERROR({})", e.replace(['(', ')'], "")));
        }
        f.join(" ")
    }
}

/// The secondary's position as last recorded in this primary's own stream (`DR_ACKED`), if any:
/// where the lag bound starts when the queue manager starts, or an HA instance becomes active,
/// before its link to the secondary is up.
pub fn recorded_ack(st: ferrymq_engine::dr::DrState) -> Option<u64> {
    st.acked
        .filter(|m| st.stream != 0 && m.stream == st.stream)
        .map(|m| m.pos)
}

/// A fresh stream id (never 0, which means none).
pub fn new_stream_id() -> u64 {
    crate::qmgr::instance_id().max(1)
}
