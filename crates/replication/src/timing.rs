//! Every timing constant high availability's safety depends on, in one place, with the orderings
//! between them checked when the crate compiles. They span openraft's configuration, the
//! instance's own monitor (in the server crate), the switch-over and the fast-failover detector;
//! written apart, one could be changed without the others and silently open a window in which two
//! instances believe they are active, or a switch-over is pre-empted.

/// Raft heartbeat interval. openraft also uses it as the AppendEntries timeout, so a follower's
/// append (including its fdatasync) must normally finish within it.
pub const HEARTBEAT_MS: u64 = 100;
/// An election starts after a random 300–600 ms of silence from the leader.
pub const ELECTION_MIN_MS: u64 = 300;
pub const ELECTION_MAX_MS: u64 = 600;
/// openraft's leader lease: voters refuse to vote for this long after they last heard from the
/// leader (it is the election timeout maximum).
pub const LEADER_LEASE_MS: u64 = ELECTION_MAX_MS;
/// openraft's extra wait before a node with a shorter log stands (twice the maximum).
pub const SMALLER_LOG_TIMEOUT_MS: u64 = 2 * ELECTION_MAX_MS;
/// How often openraft refreshes the metrics the monitor reads (its tick: 1.5 heartbeats).
pub const METRICS_TICK_MS: u64 = HEARTBEAT_MS * 3 / 2;
/// The longest sleep of the instance's monitor between two looks at those metrics.
pub const MONITOR_POLL_MAX_MS: u64 = 50;

/// An active instance that has not heard from a majority for this long gives up the role
/// (restarts as a replica): the minority side of a partition stops serving.
pub const QUORUM_LOSS_MS: u64 = 450;

/// After a switch-over record, the preferred instance stands for election after this delay (the
/// old active instance's lease must have run out, or the voters refuse)...
pub const SWITCHOVER_STAND_DELAY_MS: u64 = 700;
/// ...and the others hold their own elections (and fast failover) for this long, so the
/// preferred one wins. A replayed switch-over record older than this is ignored.
pub const SWITCHOVER_WINDOW_MS: u64 = 4_000;

/// Fast failover: how long a probe of the leader's replication address may take.
pub const PROBE_TIMEOUT_MS: u64 = 250;
/// How long a leader whose connection ended may still accept probes before it counts as alive.
pub const DYING_WINDOW_MS: u64 = 600;
/// A campaign (the elections following one detection) ends after this long in any case.
pub const CAMPAIGN_LIMIT_MS: u64 = 3_000;
/// Retry delay after a voter refused because it still holds the old leader's lease.
pub const LEASE_RETRY_MS: u64 = 60;

/// A peer counts as reachable while it was heard from within this long (ten heartbeats), and
/// `dspmq -o ha` counts a reachable replica in sync while it lacks nothing older than this.
pub const REACH_WINDOW_MS: u64 = 10 * HEARTBEAT_MS;

// The orderings, checked at compile time.
const _: () = {
    // openraft's own rules (it also checks them when a replica starts).
    assert!(HEARTBEAT_MS < ELECTION_MIN_MS && ELECTION_MIN_MS < ELECTION_MAX_MS);
    // A cut-off active instance means to be gone within the voters' lease...
    assert!(QUORUM_LOSS_MS < LEADER_LEASE_MS);
    // ...and, counting how late its monitor can notice (a metrics tick and a poll), it is gone
    // before any other instance can have been elected (lease plus the shortest election timeout).
    assert!(
        QUORUM_LOSS_MS + METRICS_TICK_MS + MONITOR_POLL_MAX_MS < LEADER_LEASE_MS + ELECTION_MIN_MS
    );
    // A few lost heartbeats never make an active instance give up.
    assert!(3 * HEARTBEAT_MS < QUORUM_LOSS_MS);
    // The preferred instance stands only once the old active instance's lease has run out, and
    // the others hold off long enough for its election, even a slow one with a shorter log.
    assert!(SWITCHOVER_STAND_DELAY_MS > LEADER_LEASE_MS);
    assert!(
        SWITCHOVER_STAND_DELAY_MS + ELECTION_MAX_MS + SMALLER_LOG_TIMEOUT_MS < SWITCHOVER_WINDOW_MS
    );
    // Fast failover: a probe answers within the window in which a dying listener may linger; a
    // campaign outlasts openraft's slowest election and ends within a switch-over window.
    assert!(PROBE_TIMEOUT_MS < DYING_WINDOW_MS);
    assert!(CAMPAIGN_LIMIT_MS >= LEADER_LEASE_MS + ELECTION_MAX_MS + SMALLER_LOG_TIMEOUT_MS);
    assert!(CAMPAIGN_LIMIT_MS < SWITCHOVER_WINDOW_MS);
    assert!(LEASE_RETRY_MS < HEARTBEAT_MS);
};
