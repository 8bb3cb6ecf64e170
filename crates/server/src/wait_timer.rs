//! One timer for every waiting get of the queue manager. The engine keeps the deadlines (and drops
//! a get's deadline when the get is answered); this task sleeps until the soonest one, answers the
//! gets that ran out, and sleeps again. A new wait wakes it only when its deadline is sooner than
//! the one it sleeps toward, so busy request/reply traffic with long waits costs no timer work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::qmgr::Shared;
use crate::storage::now_ms;

/// How long the task sleeps when no wait has a deadline.
const IDLE_SLEEP_MS: u64 = 1000;

#[derive(Default)]
pub struct WaitTimer {
    /// The deadline the task is sleeping toward (ms since the epoch).
    target_ms: AtomicU64,
    wake: Notify,
}

impl WaitTimer {
    /// A wait with this deadline was registered: wake the task if it would sleep past it.
    pub fn arm(&self, deadline_ms: u64) {
        if deadline_ms < self.target_ms.load(Ordering::Acquire) {
            self.target_ms.store(deadline_ms, Ordering::Release);
            self.wake.notify_one();
        }
    }
}

/// Runs until the queue manager ends.
pub async fn run(shared: Arc<Shared>) {
    let t = &shared.wait_timer;
    loop {
        let now = now_ms();
        let next = {
            let mut core = shared.core.lock();
            core.expire_waits(now);
            core.engine.next_wait_deadline()
        };
        let target = next.unwrap_or(now + IDLE_SLEEP_MS).min(now + IDLE_SLEEP_MS);
        t.target_ms.store(target, Ordering::Release);
        // A wait registered between reading the next deadline and storing the target has called
        // `arm` against the old target; re-check so its wake-up is not lost.
        let again = shared.core.lock().engine.next_wait_deadline();
        if again.is_some_and(|d| d < target) {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(target.saturating_sub(now))) => {}
            _ = t.wake.notified() => {}
        }
    }
}
