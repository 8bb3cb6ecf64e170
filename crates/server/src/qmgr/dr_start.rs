//! Starting the DR side of a queue manager: the shipper on a primary, the receiver on a
//! secondary.

use super::*;

/// Least time between two syncs of a standalone DR secondary's log (see `start_dr`), unless
/// `SECONDARY_SYNC_UNLESS_BYTES` wait to be written.
const SECONDARY_SYNC_GAP: Duration = Duration::from_millis(50);
const SECONDARY_SYNC_UNLESS_BYTES: usize = 512 << 10;
/// The recent log a standalone DR primary keeps in memory for its shipper.
const SHIP_TAIL_BYTES: usize = 8 << 20;

/// Starts the DR side: the shipper on a primary (reading `source`), the receiver on a secondary.
/// On an HA group's instances this runs when the instance becomes active.
pub(super) fn start_dr(shared: &Arc<Shared>, source: Option<Source>) {
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
        if let CopyFrom::Ring(ring) = &src.copy {
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
