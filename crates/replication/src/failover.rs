//! Fast failover: standing for election as soon as the leader's *process* is known to be gone,
//! instead of after the leader lease and an election timeout of silence.
//!
//! A process that dies on a live host has its sockets closed by the kernel: every connection on
//! which it sent AppendEntries ends at once (FIN or RST). When such a connection ends, this
//! replica tries to connect to the leader's replication address. *Connection refused* means no
//! process listens there — the leader is gone — and the replica calls an election at once. Any
//! other outcome (the connect succeeds: the leader only dropped that connection; it times out or
//! the host is unreachable: a partition) changes nothing, and the normal timeouts apply. Raft's
//! safety never depends on this timing; it only decides how soon an election starts.
//!
//! openraft refuses votes while the voter's leader lease runs (its vote is committed and was
//! refreshed less than `election_timeout_max` ago). Both survivors see the same closed
//! connections and both call an election, which makes their votes uncommitted (no lease); with
//! openraft's default leader ids, `(term, node id)` are totally ordered, so of two candidates in
//! one term the one with the higher id gets the other's vote — if its log is not shorter. The
//! cases left are settled here from the vote responses this replica receives, without waiting
//! for openraft's timers (300–600 ms, plus twice the maximum when it saw a longer log):
//!
//! - rejected by a rival candidate whose log is shorter than ours: we must be the one, and a
//!   higher term wins its vote — call the next election at once;
//! - rejected by a voter still holding the old leader's lease (it has not noticed yet): call
//!   again a little later;
//! - rejected by a longer log: do nothing; that replica goes.
//!
//! Retries are bounded, and only the replica with the strictly longer log retries at once, so the
//! two cannot outbid each other for long. The whole mechanism can be switched off
//! ([`FastFailover::set_enabled`]), as a planned switch-over does for its duration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::raft::{VoteRequest, VoteResponse};
use openraft::ServerState;
use tokio::sync::mpsc;

use crate::{FerryRaft, LogId, NodeId};

/// How long a probe of the leader's replication address may take. Refused comes back within a
/// round trip; anything slower is not the signal this looks for.
const PROBE_TIMEOUT: Duration = Duration::from_millis(crate::timing::PROBE_TIMEOUT_MS);
/// How long a leader whose connection ended may still accept probes before it counts as alive:
/// a dying process's listener outlives its connections by up to a few hundred milliseconds.
const DYING_WINDOW: Duration = Duration::from_millis(crate::timing::DYING_WINDOW_MS);
/// A campaign (the elections following one detection) ends after this long in any case.
const CAMPAIGN_LIMIT: Duration = Duration::from_millis(crate::timing::CAMPAIGN_LIMIT_MS);
/// Elections this replica calls itself in one campaign, after the first.
const MAX_RETRIES: u32 = 6;
/// Retry delay after a voter refused because it still holds the old leader's lease.
const LEASE_RETRY: Duration = Duration::from_millis(crate::timing::LEASE_RETRY_MS);
/// Before calling the election, the replica lets its state machine apply what it already knows
/// is committed (a switch-over record, which turns this mechanism off), for at most this long.
const APPLY_WAIT: Duration = Duration::from_millis(50);

/// What the detector has done since the replica started (for status and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailoverStats {
    /// Connections from the leader that ended and were followed by a probe.
    pub probes: u64,
    /// Probes that found no process listening (connection refused).
    pub leader_gone: u64,
    /// Probes that connected: the leader is alive; nothing was done.
    pub leader_alive: u64,
    /// Probes that neither connected nor were refused (timeout, unreachable): nothing was done.
    pub inconclusive: u64,
    /// Elections called at once after a refused probe.
    pub elections: u64,
    /// Further elections called from vote responses.
    pub retries: u64,
}

pub(crate) enum Event {
    /// A connection on which `leader` sent AppendEntries ended.
    LinkClosed(NodeId),
    /// A vote request this replica sent was rejected.
    VoteRejected {
        req: VoteRequest<NodeId>,
        resp: VoteResponse<NodeId>,
    },
}

/// What the embedding application does with the detector's sentences.
type Reporter = Box<dyn Fn(&str) + Send + Sync>;

struct Inner {
    enabled: AtomicBool,
    tx: mpsc::UnboundedSender<Event>,
    stats: parking_lot::Mutex<FailoverStats>,
    /// Called with a sentence whenever the detector acts (the embedding application logs it).
    report: parking_lot::Mutex<Option<Reporter>>,
}

/// The fast-failover detector of one replica: fed by its network (closed leader connections,
/// rejected votes), acting on its Raft. Cheap to clone.
#[derive(Clone)]
pub struct FastFailover(Arc<Inner>);

impl std::fmt::Debug for FastFailover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastFailover")
            .field("enabled", &self.enabled())
            .field("stats", &self.stats())
            .finish()
    }
}

impl FastFailover {
    pub(crate) fn new() -> (FastFailover, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            FastFailover(Arc::new(Inner {
                enabled: AtomicBool::new(true),
                tx,
                stats: parking_lot::Mutex::new(FailoverStats::default()),
                report: parking_lot::Mutex::new(None),
            })),
            rx,
        )
    }

    /// Turns the mechanism on or off (on by default). Off, a closed leader connection is ignored
    /// and elections follow openraft's timers alone.
    pub fn set_enabled(&self, on: bool) {
        self.0.enabled.store(on, Ordering::Release);
    }

    pub fn enabled(&self) -> bool {
        self.0.enabled.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> FailoverStats {
        *self.0.stats.lock()
    }

    /// Sets what is called with a sentence each time the detector acts.
    pub fn on_report(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        *self.0.report.lock() = Some(Box::new(f));
    }

    fn report(&self, what: &str) {
        tracing::info!("{what}");
        if let Some(f) = self.0.report.lock().as_ref() {
            f(what);
        }
    }

    pub(crate) fn link_closed(&self, leader: NodeId) {
        let _ = self.0.tx.send(Event::LinkClosed(leader));
    }

    pub(crate) fn vote_rejected(&self, req: VoteRequest<NodeId>, resp: VoteResponse<NodeId>) {
        let _ = self.0.tx.send(Event::VoteRejected { req, resp });
    }
}

enum Probe {
    Refused,
    Connected,
    Inconclusive(String),
}

/// Probes `addr` until it refuses, for up to [`DYING_WINDOW`]: a process being killed closes
/// its connections before its listening socket, so the first connect can still be accepted
/// (into the backlog of a listener about to go). Connected every time: the leader lives.
async fn probe(addr: &str) -> Probe {
    let end = Instant::now() + DYING_WINDOW;
    loop {
        match probe_once(addr).await {
            Probe::Connected if Instant::now() < end => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            p => return p,
        }
    }
}

async fn probe_once(addr: &str) -> Probe {
    match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Probe::Connected,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::Refused,
        Ok(Err(e)) => Probe::Inconclusive(e.to_string()),
        Err(_) => Probe::Inconclusive(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

/// The elections that follow one detection.
struct Campaign {
    /// The term the dead leader led.
    old_term: u64,
    began: Instant,
    retries: u32,
    /// A retry due at this time (a voter still held the lease).
    retry_at: Option<Instant>,
    /// The highest term this replica has already retried from (one retry per term).
    retried_term: u64,
}

/// Runs the detector of replica `me` until the Raft handle's metrics end.
pub(crate) async fn run(
    me: NodeId,
    raft: FerryRaft,
    log: crate::LogStorage,
    ff: FastFailover,
    mut rx: mpsc::UnboundedReceiver<Event>,
) {
    let mut campaign: Option<Campaign> = None;
    loop {
        let ev = match &campaign {
            None => match rx.recv().await {
                Some(e) => Some(e),
                None => return,
            },
            Some(_) => match tokio::time::timeout(Duration::from_millis(10), rx.recv()).await {
                Ok(Some(e)) => Some(e),
                Ok(None) => return,
                Err(_) => None,
            },
        };
        match ev {
            Some(Event::LinkClosed(leader)) if campaign.is_none() => {
                campaign = detect(me, leader, &raft, &log, &ff).await;
            }
            Some(Event::LinkClosed(_)) => {}
            Some(Event::VoteRejected { req, resp }) => {
                if let Some(c) = campaign.as_mut() {
                    on_rejected(me, c, &req, &resp, &raft, &ff).await;
                }
            }
            None => {}
        }
        if let Some(c) = campaign.as_mut() {
            let m = raft.metrics().borrow().clone();
            let settled = m.vote.is_committed() && m.vote.leader_id().term > c.old_term;
            if settled || c.began.elapsed() > CAMPAIGN_LIMIT || !ff.enabled() {
                campaign = None;
            } else if c.retry_at.is_some_and(|t| Instant::now() >= t) {
                c.retry_at = None;
                retry(
                    c,
                    &m,
                    &raft,
                    &ff,
                    "a voter still held the old leader's lease",
                )
                .await;
            }
        }
    }
}

/// A connection from `leader` ended: probe it; if nothing listens there, call an election.
async fn detect(
    me: NodeId,
    leader: NodeId,
    raft: &FerryRaft,
    log: &crate::LogStorage,
    ff: &FastFailover,
) -> Option<Campaign> {
    let m = raft.metrics().borrow().clone();
    if !ff.enabled()
        || leader == me
        || m.current_leader != Some(leader)
        || m.state != ServerState::Follower
    {
        return None;
    }
    let addr = m
        .membership_config
        .nodes()
        .find(|(id, _)| **id == leader)
        .map(|(_, n)| n.addr.clone())?;
    let term = m.current_term;
    ff.0.stats.lock().probes += 1;
    let began = Instant::now();
    match probe(&addr).await {
        Probe::Connected => {
            tracing::debug!(leader, %addr, "leader link closed; the leader still listens");
            ff.0.stats.lock().leader_alive += 1;
            return None;
        }
        Probe::Inconclusive(why) => {
            ff.0.stats.lock().inconclusive += 1;
            ff.report(&format!(
                "the connection from leader {leader} ended and probing {addr} was inconclusive ({why}); waiting for the election timeout"
            ));
            return None;
        }
        Probe::Refused => ff.0.stats.lock().leader_gone += 1,
    }
    // Let the state machine apply what is known committed (it may turn this off).
    let committed = log.committed_index();
    let deadline = Instant::now() + APPLY_WAIT;
    while Instant::now() < deadline {
        let applied = raft.metrics().borrow().last_applied.map(|l| l.index);
        if applied >= committed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let m = raft.metrics().borrow().clone();
    if !ff.enabled() || m.current_term != term || m.current_leader != Some(leader) {
        return None;
    }
    ff.0.stats.lock().elections += 1;
    ff.report(&format!(
        "leader {leader} is gone (its connection ended and {addr} refuses connections, probed in {} ms); standing for election",
        began.elapsed().as_millis()
    ));
    if raft.trigger().elect().await.is_err() {
        return None;
    }
    Some(Campaign {
        old_term: term,
        began: Instant::now(),
        retries: 0,
        retry_at: None,
        retried_term: 0,
    })
}

fn log_gt(a: &Option<LogId>, b: &Option<LogId>) -> bool {
    a > b
}

async fn on_rejected(
    me: NodeId,
    c: &mut Campaign,
    req: &VoteRequest<NodeId>,
    resp: &VoteResponse<NodeId>,
    raft: &FerryRaft,
    ff: &FastFailover,
) {
    if resp.vote_granted || req.vote.leader_id().voted_for() != Some(me) {
        return;
    }
    let req_term = req.vote.leader_id().term;
    let m = raft.metrics().borrow().clone();
    // Only a rejection of our current candidacy says anything about what to do now.
    if m.state != ServerState::Candidate || m.vote != req.vote {
        return;
    }
    if log_gt(&resp.last_log_id, &req.last_log_id) {
        // The voter holds more log: it must win; leave the field to it.
        return;
    }
    if resp.vote.is_committed() {
        if resp.vote.leader_id().term >= req_term {
            return; // a leader exists
        }
        // The voter still trusts the old leader's lease: it has not noticed yet.
        c.retry_at.get_or_insert(Instant::now() + LEASE_RETRY);
        return;
    }
    if log_gt(&req.last_log_id, &resp.last_log_id) {
        // A rival candidate outbid us by id but holds less log: only we can win.
        retry(c, &m, raft, ff, "a rival candidate holds less log").await;
    }
    // Equal logs and a higher rival: it wins with our vote.
}

async fn retry(
    c: &mut Campaign,
    m: &crate::Metrics,
    raft: &FerryRaft,
    ff: &FastFailover,
    why: &str,
) {
    if c.retries >= MAX_RETRIES
        || m.state != ServerState::Candidate
        || c.retried_term >= m.current_term
        || !ff.enabled()
    {
        return;
    }
    c.retries += 1;
    c.retried_term = m.current_term;
    ff.0.stats.lock().retries += 1;
    ff.report(&format!(
        "election of term {} not won ({why}); standing again",
        m.current_term
    ));
    let _ = raft.trigger().elect().await;
}
