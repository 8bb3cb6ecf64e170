//! Time as the replication policy sees it: a monotonic reading and a sleep, behind a trait, so
//! that the policy runs on the real clock in a queue manager and on a clock a test moves by hand.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// A sleep of a [`Clock`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A monotonic clock.
pub trait Clock: Send + Sync + 'static {
    /// Time since the clock started; never goes back.
    fn now(&self) -> Duration;
    /// Resolves once `d` has passed on this clock.
    fn sleep(&self, d: Duration) -> Sleep;
}

/// The real clock: `std::time::Instant` and tokio's timer.
pub struct RealClock {
    start: Instant,
}

impl RealClock {
    pub fn new() -> RealClock {
        RealClock {
            start: Instant::now(),
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        RealClock::new()
    }
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, d: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A clock that moves only when told to ([`ManualClock::advance`]); sleepers wake when it
/// passes their deadline.
#[derive(Default)]
pub struct ManualClock {
    inner: Arc<Manual>,
}

#[derive(Default)]
struct Manual {
    now_ns: AtomicU64,
    moved: Notify,
}

impl ManualClock {
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves the clock forward by `d` and wakes every sleeper whose deadline is reached.
    pub fn advance(&self, d: Duration) {
        self.inner
            .now_ns
            .fetch_add(d.as_nanos() as u64, Ordering::AcqRel);
        self.inner.moved.notify_waiters();
    }
}

impl Manual {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns.load(Ordering::Acquire))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.inner.now()
    }

    fn sleep(&self, d: Duration) -> Sleep {
        let inner = self.inner.clone();
        let deadline = inner.now() + d;
        Box::pin(async move {
            loop {
                // Taken before the reading, so an advance in between is not missed.
                let moved = inner.moved.notified();
                if inner.now() >= deadline {
                    return;
                }
                moved.await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_sleep_ends_when_the_clock_passes_its_deadline_not_before() {
        let clock = ManualClock::new();
        assert_eq!(clock.now(), Duration::ZERO);
        let mut sleep = clock.sleep(Duration::from_millis(10));
        let waker = futures_noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(9));
        assert!(
            sleep.as_mut().poll(&mut cx).is_pending(),
            "woke at 9 ms of 10"
        );
        clock.advance(Duration::from_millis(1));
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
        assert_eq!(clock.now(), Duration::from_millis(10));
    }

    fn futures_noop_waker() -> std::task::Waker {
        std::task::Waker::noop().clone()
    }
}
