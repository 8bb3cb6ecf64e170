//! The active instance's replication policy: how the records its engine logs become Raft entries.
//!
//! Each record is numbered and added to an open batch ([`Proposals`]); one replicator task
//! ([`replicate`]) proposes batches to Raft in order, several in flight so that replication round
//! trips overlap, and as each is committed — on a majority's disks — publishes its last number as
//! the durable position replies wait for, and tells subscribers ([`Committed`]) of it. Nothing
//! here knows what a record means (the queue manager hands in its framing) or reads the wall
//! clock: time comes from a [`Clock`](crate::clock::Clock), so tests drive it by hand.

mod proposals;
mod replicator;
mod snapshots;
#[cfg(test)]
mod tests;

pub use proposals::{Committed, Proposals, Subscriber};
pub use replicator::{replicate, ring_admits, Commit, Group, RaftGroup, Replicator};
pub use snapshots::SnapshotPacer;

/// A batch is proposed once it holds this much (or as soon as the replicator is free).
pub const BATCH_BYTES: usize = 1 << 20;
/// Batches proposed and not yet committed, at most: about one per millisecond a commit takes
/// (an average of recent ones), between these bounds, unless qm.ini `NativeHA:MaxInFlight` fixes
/// it. Few on a fast link: while they are in flight, records gather into the next batch, so one
/// Raft entry (one round of appends, syncs and acknowledgements on every instance) carries many
/// commits — group commit across the group. More when the link is slow, so that replication
/// round trips overlap (measured with 10 ms: 2 in flight gave 2.2k round trips/s, 32 gave 4.1k;
/// on loopback 32 cost a fifth of the rate).
pub const MIN_IN_FLIGHT: usize = 2;
pub const MAX_IN_FLIGHT: usize = 64;
/// Proposals stop while the Raft log ring is this full (percent), until a snapshot frees it...
pub const RING_STOP_PCT: u64 = 85;
/// ...except the batch a snapshot in progress waits for (it is what frees the ring), up to this.
pub const RING_SNAPSHOT_HEADROOM_PCT: u64 = 95;
/// A snapshot is requested once the ring is this full (percent).
pub const RING_SNAPSHOT_PCT: u64 = 40;
/// A snapshot just built is followed at once by the next (ring still filling) only once this
/// many entries have been applied after it; otherwise requests are this far apart.
pub const SNAPSHOT_AGAIN_ENTRIES: u64 = 64;
pub const SNAPSHOT_GAP_MS: u64 = 500;
/// How long the replicator waits before it looks at a full ring again.
pub const RING_RETRY_MS: u64 = 5;
/// Log ids of this many recently committed batches are kept for [`Proposals::log_id_of`].
pub const LOG_IDS_KEPT: usize = 4096;
