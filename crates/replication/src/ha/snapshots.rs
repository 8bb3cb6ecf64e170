//! When the active instance asks for a snapshot: as the Raft log ring fills, paced so that a
//! heavy load does not reach the proposal stop before a snapshot frees the ring, and a ring
//! waiting for its purge does not get a snapshot per look.

use std::sync::Arc;
use std::time::Duration;

use super::{RING_SNAPSHOT_PCT, SNAPSHOT_AGAIN_ENTRIES, SNAPSHOT_GAP_MS};
use crate::clock::Clock;
use crate::LogId;

/// Decides, at each look at the replica's metrics, whether to request a snapshot.
pub struct SnapshotPacer {
    clock: Arc<dyn Clock>,
    /// When the last one was requested.
    last_request: Option<Duration>,
    /// The newest snapshot when it was requested.
    snapshot_at_request: Option<LogId>,
}

impl SnapshotPacer {
    pub fn new(clock: Arc<dyn Clock>) -> SnapshotPacer {
        SnapshotPacer {
            clock,
            last_request: None,
            snapshot_at_request: None,
        }
    }

    /// Whether to request a snapshot now, with `used` of the ring's `cap` bytes taken, and
    /// `last_applied` and `snapshot` as the replica reports them (a `true` counts as the
    /// request). Once the ring is [`RING_SNAPSHOT_PCT`] full: at once if the snapshot requested
    /// last is built and [`SNAPSHOT_AGAIN_ENTRIES`] entries have been applied after it (under a
    /// heavy load the ring fills in a fraction of a second), otherwise [`SNAPSHOT_GAP_MS`] after
    /// the last request (a full ring the newest snapshot already covers is waiting for its purge,
    /// not for another snapshot).
    pub fn due(
        &mut self,
        used: u64,
        cap: u64,
        last_applied: Option<LogId>,
        snapshot: Option<LogId>,
    ) -> bool {
        if cap == 0 || used * 100 < cap * RING_SNAPSHOT_PCT {
            return false;
        }
        let index = |l: Option<LogId>| l.map_or(0, |l| l.index);
        let again = snapshot != self.snapshot_at_request
            && index(last_applied) >= index(snapshot) + SNAPSHOT_AGAIN_ENTRIES;
        let now = self.clock.now();
        let gap_over = self
            .last_request
            .is_none_or(|t| now.saturating_sub(t) > Duration::from_millis(SNAPSHOT_GAP_MS));
        if !(again || gap_over) {
            return false;
        }
        self.last_request = Some(now);
        self.snapshot_at_request = snapshot;
        true
    }
}
