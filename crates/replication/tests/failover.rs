//! The leader dies: the survivors elect a new one, keep accepting writes with 2 of 3, and
//! still hold everything written before, exactly once and in order.

mod common;

use std::time::{Duration, Instant};

use common::{bounded, eventually, payloads, record, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_nothing_committed_is_lost() {
    bounded(Duration::from_secs(60), async {
        let mut cluster = Cluster::start(3).await;
        let old = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no leader");
        for i in 0..100 {
            cluster.write(record(i)).await;
        }
        let old_id = cluster.members[old].id;

        let died = Instant::now();
        cluster.stop(old).await;
        let new = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no new leader within 10 s of the leader's death");
        assert_ne!(cluster.members[new].id, old_id);
        tracing::info!(elapsed = ?died.elapsed(), "failover");

        for i in 100..200 {
            cluster.write(record(i)).await;
        }
        let want = payloads(0..200);
        let applied = eventually(Duration::from_secs(10), || {
            cluster.running().all(|m| m.sm.len() >= 200)
        })
        .await;
        assert!(applied, "survivors did not apply all 200 writes");
        assert_eq!(cluster.running().count(), 2);
        for m in cluster.running() {
            assert_eq!(
                m.sm.payloads(),
                want,
                "replica {} lost, duplicated or reordered writes",
                m.id
            );
        }
        cluster.shutdown().await;
    })
    .await;
}

/// A leader whose process is gone (its connections end, its port refuses): a survivor probes it
/// and stands for election at once rather than after the lease and an election timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_leader_is_replaced_by_an_immediate_election() {
    bounded(Duration::from_secs(60), async {
        let mut cluster = Cluster::start(3).await;
        let old = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no leader");
        for i in 0..20 {
            cluster.write(record(i)).await;
        }
        cluster.stop(old).await;
        let new = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no new leader");
        assert_ne!(new, old);
        let stats: Vec<_> = cluster
            .running()
            .map(|m| m.replica.as_ref().unwrap().fast_failover().stats())
            .collect();
        assert!(
            stats.iter().any(|s| s.leader_gone >= 1 && s.elections >= 1),
            "no survivor found the leader gone and stood at once: {stats:?}"
        );
        cluster.write(record(20)).await;
        cluster.shutdown().await;
    })
    .await;
}

/// Switched off (as during a planned switch-over), a closed leader connection starts nothing:
/// the survivors elect by openraft's timers alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switched_off_the_detector_leaves_the_election_to_the_timers() {
    bounded(Duration::from_secs(60), async {
        let mut cluster = Cluster::start(3).await;
        let old = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no leader");
        cluster.write(record(0)).await;
        for m in cluster.running() {
            m.replica
                .as_ref()
                .unwrap()
                .fast_failover()
                .set_enabled(false);
        }
        cluster.stop(old).await;
        let new = cluster
            .wait_leader(Duration::from_secs(10))
            .await
            .expect("no new leader by the election timeout");
        assert_ne!(new, old);
        for m in cluster.running() {
            let s = m.replica.as_ref().unwrap().fast_failover().stats();
            assert_eq!(s.elections + s.retries, 0, "replica {}: {s:?}", m.id);
        }
        cluster.shutdown().await;
    })
    .await;
}
