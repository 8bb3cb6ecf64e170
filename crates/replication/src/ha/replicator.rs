//! The replicator: proposes the sealed batches to Raft in order while this instance leads, with
//! room in flight and in the log ring.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{Proposals, RING_RETRY_MS, RING_SNAPSHOT_HEADROOM_PCT, RING_STOP_PCT};
use crate::{AppRecord, FerryRaft, LogId, LogStorage, KIND_ENGINE_BATCH};

/// A proposal's outcome: the log id it was committed at, or `None` if it never will be.
pub type Commit = Pin<Box<dyn Future<Output = Option<LogId>> + Send>>;

/// What the replicator proposes to.
pub trait Group: Send + Sync + 'static {
    /// Bytes of the Raft log ring in use, and its capacity (0: unknown).
    fn ring_usage(&self) -> (u64, u64);
    /// Hands `rec` to Raft, in the order of the calls; resolves once it is accepted, with its
    /// commit to wait for (`None`: not accepted, leadership is lost).
    fn propose(&self, rec: AppRecord) -> Pin<Box<dyn Future<Output = Option<Commit>> + Send + '_>>;
}

impl<G: Group> Group for Arc<G> {
    fn ring_usage(&self) -> (u64, u64) {
        (**self).ring_usage()
    }

    fn propose(&self, rec: AppRecord) -> Pin<Box<dyn Future<Output = Option<Commit>> + Send + '_>> {
        (**self).propose(rec)
    }
}

/// The group as a replica sees it: its Raft and its log.
pub struct RaftGroup {
    pub raft: FerryRaft,
    pub log: LogStorage,
}

impl Group for RaftGroup {
    fn ring_usage(&self) -> (u64, u64) {
        (self.log.used_bytes().unwrap_or(0), self.log.geometry().0)
    }

    fn propose(&self, rec: AppRecord) -> Pin<Box<dyn Future<Output = Option<Commit>> + Send + '_>> {
        Box::pin(async move {
            let rx = self.raft.client_write_ff(rec).await.ok()?;
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

/// What the replicator proposes with.
pub struct Replicator<G: Group> {
    pub props: Arc<Proposals>,
    pub group: G,
    /// How many batches may be in flight, if fixed (qm.ini `NativeHA:MaxInFlight`); otherwise
    /// [`Proposals::adaptive_in_flight`].
    pub max_in_flight: Option<usize>,
}

/// Whether a batch may be proposed with `used` of the ring's `cap` bytes taken: not while it is
/// [`RING_STOP_PCT`] full, so that the ring does not fill faster than snapshots free it —
/// except for the batch a snapshot being built waits for (it is what frees the ring), within
/// the headroom up to [`RING_SNAPSHOT_HEADROOM_PCT`]. A ring of unknown size admits everything.
pub fn ring_admits(used: u64, cap: u64, snapshot_waiting: bool) -> bool {
    cap == 0
        || used * 100 < cap * RING_STOP_PCT
        || (snapshot_waiting && used * 100 < cap * RING_SNAPSHOT_HEADROOM_PCT)
}

/// Proposes the batches to the group, in order, until a proposal fails (leadership lost; the
/// proposals are then marked lost).
pub async fn replicate<G: Group>(r: Replicator<G>) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let freed = Arc::new(Notify::new());
    let clock = r.props.clock().clone();
    loop {
        // Room first, then the batch: whatever arrived while waiting goes into it.
        loop {
            let limit = r
                .max_in_flight
                .unwrap_or_else(|| r.props.adaptive_in_flight());
            let notified = freed.notified();
            if in_flight.load(Ordering::Acquire) < limit {
                break;
            }
            notified.await;
        }
        let (last, payload) = r.props.next_batch().await;
        loop {
            let (used, cap) = r.group.ring_usage();
            if ring_admits(used, cap, r.props.snapshot_waiting()) {
                break;
            }
            clock.sleep(Duration::from_millis(RING_RETRY_MS)).await;
        }
        let rec = AppRecord {
            kind: KIND_ENGINE_BATCH,
            payload,
        };
        in_flight.fetch_add(1, Ordering::AcqRel);
        match r.group.propose(rec).await {
            Some(commit) => {
                let props = r.props.clone();
                let (in_flight, freed) = (in_flight.clone(), freed.clone());
                tokio::spawn(async move {
                    let id = commit.await;
                    in_flight.fetch_sub(1, Ordering::AcqRel);
                    freed.notify_one();
                    match id {
                        Some(id) => props.committed(last, id),
                        None => props.set_lost(),
                    }
                });
            }
            None => {
                r.props.set_lost();
                return;
            }
        }
    }
}
