//! The seam between a leader's engine and Raft, wired as the server wires it, with the
//! production policy of `ferrymq_replication::ha`: the engine's records join the open batch of
//! a [`Proposals`] (numbered, in the engine's batch framing), the production [`replicate`] loop
//! proposes the batches to the node's Raft (in order, its adaptive number in flight) and, as each
//! commits, moves the durable position replies wait on ([`Proposals::durable_watch`]).
//!
//! What is the simulator's own here: the clock (tokio's, which the simulation pauses), the group
//! the loop proposes to (the simulated log is never purged: there is no ring to fill), and the
//! deliberately broken build, which lives in that group and nowhere in production code.
//!
//! [`replicate`]: ferrymq_replication::ha::replicate

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::{LogSink, Lsn};
use ferrymq_replication::clock::{Clock, Sleep};
use ferrymq_replication::ha::{Commit, Group, Proposals, Replicator};
use ferrymq_replication::{AppRecord, FerryRaft, LogId};
use ferrymq_types::MqError;

/// The simulation's clock for the policy: tokio's, paused (time moves only when every task
/// waits), so commit latencies — and the in-flight limit they set — are the same on every run.
/// (The production `RealClock` reads `std::time::Instant`, which the pause does not stop.)
pub struct SimClock {
    start: tokio::time::Instant,
}

impl SimClock {
    /// A clock starting now, as the policy takes it.
    pub fn start() -> Arc<dyn Clock> {
        Arc::new(SimClock {
            start: tokio::time::Instant::now(),
        })
    }
}

impl Clock for SimClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, d: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }
}

/// The engine's log sink on a simulated node (as the server's `HaSink`): each record, in the
/// engine's batch framing, joins the open batch of the proposals.
pub struct SimSink {
    pub props: Arc<Proposals>,
    /// The number of the last record logged (the proposals keep it too, but read it only while
    /// sealing the open batch).
    pub logged: Arc<AtomicU64>,
}

impl LogSink for SimSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let seq = self
            .props
            .push(|open| ferrymq_engine::batch::push_record(open, kind, parts));
        self.logged.store(seq, Ordering::Release);
        Ok(seq)
    }
}

/// The group a simulated leader proposes to: its Raft, as the server's `RaftGroup` uses it, over
/// a log that is never purged (no ring: every batch is admitted).
pub struct SimGroup {
    raft: FerryRaft,
    /// The deliberately broken build (`SimConfig::ack_before_commit`): a batch counts as
    /// committed as soon as the leader's Raft has taken it, before any other node has it; the
    /// proposals are still marked lost if its real commit fails.
    ack_before_commit: Option<Arc<Proposals>>,
}

impl SimGroup {
    pub fn new(raft: FerryRaft, props: &Arc<Proposals>, ack_before_commit: bool) -> SimGroup {
        SimGroup {
            raft,
            ack_before_commit: ack_before_commit.then(|| props.clone()),
        }
    }
}

impl Group for SimGroup {
    fn ring_usage(&self) -> (u64, u64) {
        (0, 0)
    }

    fn propose(
        &self,
        rec: AppRecord,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Commit>> + Send + '_>> {
        Box::pin(async move {
            let rx = self.raft.client_write_ff(rec).await.ok()?;
            if let Some(props) = &self.ack_before_commit {
                let props = props.clone();
                tokio::spawn(async move {
                    if !matches!(rx.await, Ok(Ok(_))) {
                        props.set_lost();
                    }
                });
                // The entry's log id is not known yet: a default one stands in for it (only a
                // snapshot would read it, and the simulation takes none).
                let commit: Commit = Box::pin(std::future::ready(Some(LogId::default())));
                return Some(commit);
            }
            let commit: Commit = Box::pin(async move {
                match rx.await {
                    Ok(Ok(resp)) => Some(resp.log_id),
                    _ => None,
                }
            });
            Some(commit)
        })
    }
}

/// Proposes the node's batches until leadership is lost: the production loop, its in-flight
/// limit adaptive as in a queue manager without `NativeHA:MaxInFlight`.
pub async fn replicate(props: Arc<Proposals>, group: SimGroup) {
    ferrymq_replication::ha::replicate(Replicator {
        props,
        group,
        max_in_flight: None,
    })
    .await
}
