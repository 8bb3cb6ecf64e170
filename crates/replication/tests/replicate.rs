//! Three replicas elect a leader and apply everything written through it in the same order.

mod common;

use std::time::Duration;

use common::{bounded, eventually, payloads, record, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_apply_500_writes_in_the_same_order() {
    bounded(Duration::from_secs(60), async {
        let cluster = Cluster::start(3).await;
        assert!(
            cluster.wait_leader(Duration::from_secs(10)).await.is_some(),
            "no leader elected"
        );
        let mut last = 0;
        for i in 0..500 {
            let index = cluster.write(record(i)).await;
            assert!(index > last, "log indexes must increase");
            last = index;
        }
        let want = payloads(0..500);
        let all_applied = eventually(Duration::from_secs(10), || {
            cluster.members.iter().all(|m| m.sm.len() >= 500)
        })
        .await;
        assert!(all_applied, "not every replica applied all 500 writes");
        for m in &cluster.members {
            assert_eq!(
                m.sm.payloads(),
                want,
                "replica {} applied a different sequence",
                m.id
            );
            let indexes: Vec<u64> = m.sm.applied.lock().iter().map(|(i, _)| *i).collect();
            assert!(
                indexes.windows(2).all(|w| w[0] < w[1]),
                "applied out of index order"
            );
        }
        cluster.shutdown().await;
    })
    .await;
}
