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
