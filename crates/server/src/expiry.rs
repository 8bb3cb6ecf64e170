//! The queue manager's expiry scan: every `QueueManager:ExpiryInterval` seconds (0: never) the
//! active queue manager walks its queues and discards the messages whose expiry has passed, a
//! bounded batch per hold of the core lock ([`ferrymq_engine::Engine::scan_expired`]), so that
//! queue depths, MAXDEPTH and the message store stop counting messages no application can get,
//! and expiration reports leave when messages expire; subscriptions past their EXPIRY are
//! removed in the same pass. A replica or DR secondary never scans: it
//! follows what its active instance logs.

use std::sync::Arc;
use std::time::Duration;

use crate::qmgr::Shared;
use crate::storage::now_ms;

/// Messages examined per hold of the core lock.
const BATCH_MESSAGES: usize = 20_000;
/// Pause between two batches of one pass, so that applications get the lock in between.
const BATCH_PAUSE: Duration = Duration::from_millis(2);

/// One whole pass over every queue `select` accepts; returns (examined, discarded).
pub fn pass(shared: &Shared, select: &dyn Fn(&str) -> bool) -> (usize, usize) {
    let (mut examined, mut discarded) = (0, 0);
    let mut cursor = Default::default();
    loop {
        let p = {
            let mut core = shared.core.lock();
            let p = core
                .engine
                .scan_expired(&mut cursor, now_ms(), BATCH_MESSAGES, select);
            core.flush_deliveries();
            p
        };
        examined += p.examined;
        discarded += p.discarded;
        if p.wrapped {
            return (examined, discarded);
        }
        std::thread::sleep(BATCH_PAUSE);
    }
}

/// Runs until the queue manager ends.
pub async fn run(shared: Arc<Shared>) {
    let every = shared.cfg.expiry_interval_s;
    if every == 0 {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(every));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let active = shared.ha.as_ref().is_none_or(|h| h.is_active()) && !shared.is_dr_secondary();
        if !active {
            continue;
        }
        let s = shared.clone();
        let Ok((examined, discarded)) =
            tokio::task::spawn_blocking(move || pass(&s, &|_| true)).await
        else {
            continue;
        };
        if discarded > 0 {
            crate::qm_log!(
                crate::errlog::ids::EXPIRY_SCAN,
                "expiry scan: {discarded} expired messages discarded ({examined} examined)"
            );
        }
        // Subscriptions past their EXPIRY go in the same pass.
        let subs = shared.core.lock().engine.expire_subscriptions(now_ms());
        if let Ok(n @ 1..) = subs {
            crate::qm_log!(
                crate::errlog::ids::EXPIRY_SCAN,
                "expiry scan: {n} expired subscriptions removed"
            );
        }
    }
}
