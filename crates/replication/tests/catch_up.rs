//! A follower stopped and restarted from its directory replays its own log, then receives what
//! it missed, ending with the same applied sequence as the others.

mod common;

use std::time::Duration;

use common::{bounded, eventually, payloads, record, Cluster};
use ferrymq_replication::openraft::SnapshotPolicy;

/// Writes 100 records, waits until a follower has applied them all (so its stop is not
/// mid-replication) and stops it; returns the follower and the last write's index.
async fn stop_a_follower_after_100_writes(cluster: &mut Cluster) -> (usize, u64) {
    let leader = cluster
        .wait_leader(Duration::from_secs(10))
        .await
        .expect("no leader");
    let mut last = 0;
    for i in 0..100 {
        last = cluster.write(record(i)).await;
    }
    let f = (leader + 1) % 3;
    let caught = eventually(Duration::from_secs(10), || {
        cluster.members[f].sm.len() >= 100
    })
    .await;
    assert!(caught, "follower did not apply the first 100 writes");
    cluster.stop(f).await;
    (f, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_catches_up() {
    bounded(Duration::from_secs(60), async {
        let mut cluster = Cluster::start(3).await;
        let (f, last_before) = stop_a_follower_after_100_writes(&mut cluster).await;

        for i in 100..200 {
            cluster.write(record(i)).await;
        }

        cluster.restart(f).await;
        let rec = cluster.members[f]
            .replica
            .as_ref()
            .unwrap()
            .recovered()
            .clone();
        // Its own log came back from disk: everything up to the last write before the stop.
        let last = rec
            .last_log_id
            .expect("restarted follower found an empty log")
            .index;
        assert!(
            last >= last_before,
            "recovered log ends at {last}, before {last_before}"
        );
        assert!(rec.vote.is_some(), "recovered log has no vote");

        let want = payloads(0..200);
        let done = eventually(Duration::from_secs(15), || {
            cluster.members[f].sm.len() >= 200
        })
        .await;
        assert!(
            done,
            "restarted follower applied only {}",
            cluster.members[f].sm.len()
        );
        for m in cluster.running() {
            assert_eq!(m.sm.payloads(), want, "replica {} differs", m.id);
        }
        cluster.shutdown().await;
    })
    .await;
}

/// With snapshots every 50 entries and no log kept behind them, the leader has purged what a
/// stopped follower missed, so it must send a snapshot (over the TCP network, in chunks) before
/// the follower can take the rest from the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_purged_log_receives_a_snapshot() {
    bounded(Duration::from_secs(60), async {
        let mut cluster = Cluster::start_with(3, |cfg| {
            cfg.raft.snapshot_policy = SnapshotPolicy::LogsSinceLast(50);
            cfg.raft.max_in_snapshot_log_to_keep = 0;
            // Small chunks so the transfer takes several InstallSnapshot round trips.
            cfg.raft.snapshot_max_chunk_size = 1024;
        })
        .await;
        let (f, _) = stop_a_follower_after_100_writes(&mut cluster).await;

        for i in 100..300 {
            cluster.write(record(i)).await;
        }
        let leader = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no leader");
        let purged_on_leader = eventually(Duration::from_secs(10), || {
            let m = cluster.members[leader].replica.as_ref().unwrap().metrics();
            m.purged.is_some_and(|p| p.index > 150)
        })
        .await;
        assert!(purged_on_leader, "the leader never purged its log");

        cluster.restart(f).await;
        let want = payloads(0..300);
        let done = eventually(Duration::from_secs(15), || {
            cluster.members[f].sm.len() >= 300
        })
        .await;
        assert!(
            done,
            "restarted follower applied only {}",
            cluster.members[f].sm.len()
        );
        let m = cluster.members[f].replica.as_ref().unwrap().metrics();
        assert!(
            m.snapshot.is_some_and(|s| s.index > 150),
            "the follower caught up without a snapshot from the leader: {:?}",
            m.snapshot
        );
        for m in cluster.running() {
            assert_eq!(m.sm.payloads(), want, "replica {} differs", m.id);
        }
        cluster.shutdown().await;
    })
    .await;
}
