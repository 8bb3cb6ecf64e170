//! The durable position replies wait for, as a watch that wakes a waiter only once the position
//! it needs is reached.
//!
//! Every connection's writer waits for the log to be durable up to what its replies reveal. With
//! a plain watch channel each advance woke every waiting writer, most of them only to find their
//! record still in a later batch and sleep again: with hundreds of connections and several
//! batches in flight (an HA group's replication, a ring's group commit) that was several
//! needless task wake-ups per reply. Here waiters are kept in order of the position they need,
//! and an advance wakes exactly those it satisfies.
//!
//! It lives with the log, on the lowest floor, because every durable position comes from below:
//! a standalone queue manager's ring publishes its synced LSN here, an HA group's proposals
//! (`ferrymq-replication`) their committed record numbers, and a DR primary's lag gate the
//! value it releases.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

#[derive(Default)]
struct Inner {
    cur: AtomicU64,
    closed: AtomicBool,
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    next_id: u64,
    /// (position needed, registration id) -> the waiting task.
    by_need: BTreeMap<(u64, u64), Waker>,
}

/// The publishing side. Dropping it closes the watch: waiters not yet satisfied fail, as
/// nothing more will become durable through it.
pub struct LsnSender {
    inner: Arc<Inner>,
    relay: Option<Relay>,
}

/// Hands a batch of satisfied waiters to be woken elsewhere (see [`LsnSender::set_relay`]).
pub type Relay = Box<dyn Fn(Vec<Waker>) + Send + Sync>;

/// A waiting side (cheap to clone).
#[derive(Clone)]
pub struct LsnWatch {
    inner: Arc<Inner>,
}

/// The watch was closed before the position was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// A new watch starting at `start`.
pub fn channel(start: u64) -> (LsnSender, LsnWatch) {
    let inner = Arc::new(Inner::default());
    inner.cur.store(start, Ordering::Release);
    (
        LsnSender {
            inner: inner.clone(),
            relay: None,
        },
        LsnWatch { inner },
    )
}

impl LsnSender {
    /// Moves the position to `lsn` if that is further (it never goes back) and wakes every
    /// waiter it satisfies.
    pub fn advance(&self, lsn: u64) {
        let prev = self.inner.cur.fetch_max(lsn, Ordering::AcqRel);
        if lsn <= prev {
            return;
        }
        let ready = {
            let mut w = self.inner.waiters.lock();
            if w.by_need.is_empty() {
                return;
            }
            let later = w.by_need.split_off(&(lsn + 1, 0));
            std::mem::replace(&mut w.by_need, later)
        };
        match &self.relay {
            Some(relay) if ready.len() > 1 => relay(ready.into_values().collect()),
            _ => {
                for (_, waker) in ready {
                    waker.wake();
                }
            }
        }
    }

    /// Has `relay` wake the waiters an advance satisfies whenever there are several of them,
    /// instead of the advancing thread. A thread outside an async runtime that wakes its tasks
    /// one by one can pay a worker's unpark for each (the worker runs the task, parks, and is
    /// unparked again by the next wake); handing them to a task on the runtime costs one, and
    /// the rest are scheduled from a worker, where they queue locally.
    pub fn set_relay(&mut self, relay: Relay) {
        self.relay = Some(relay);
    }

    /// The position now.
    pub fn get(&self) -> u64 {
        self.inner.cur.load(Ordering::Acquire)
    }

    /// A waiting side of this watch.
    pub fn subscribe(&self) -> LsnWatch {
        LsnWatch {
            inner: self.inner.clone(),
        }
    }
}

impl Drop for LsnSender {
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::Release);
        let all = std::mem::take(&mut self.inner.waiters.lock().by_need);
        for (_, waker) in all {
            waker.wake();
        }
    }
}

impl LsnWatch {
    /// The position now.
    pub fn get(&self) -> u64 {
        self.inner.cur.load(Ordering::Acquire)
    }

    /// Resolves once the position is at least `need`; fails if the watch closes first.
    pub fn wait(&self, need: u64) -> Wait<'_> {
        Wait {
            inner: &self.inner,
            need,
            key: None,
        }
    }
}

/// The future of [`LsnWatch::wait`].
pub struct Wait<'a> {
    inner: &'a Inner,
    need: u64,
    key: Option<(u64, u64)>,
}

impl Wait<'_> {
    fn outcome(&self) -> Option<Result<(), Closed>> {
        if self.inner.cur.load(Ordering::Acquire) >= self.need {
            Some(Ok(()))
        } else if self.inner.closed.load(Ordering::Acquire) {
            Some(Err(Closed))
        } else {
            None
        }
    }

    fn deregister(&mut self) {
        if let Some(k) = self.key.take() {
            self.inner.waiters.lock().by_need.remove(&k);
        }
    }
}

impl Future for Wait<'_> {
    type Output = Result<(), Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(r) = this.outcome() {
            this.deregister();
            return Poll::Ready(r);
        }
        let mut w = this.inner.waiters.lock();
        // Checked again under the lock: an advance stores the position before it takes the lock
        // to collect its waiters, so either it finds this registration or this sees its value.
        if let Some(r) = this.outcome() {
            if let Some(k) = this.key.take() {
                w.by_need.remove(&k);
            }
            return Poll::Ready(r);
        }
        let key = match this.key {
            Some(k) => k,
            None => {
                w.next_id += 1;
                let k = (this.need, w.next_id);
                this.key = Some(k);
                k
            }
        };
        match w.by_need.get_mut(&key) {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            Some(waker) => *waker = cx.waker().clone(),
            // Taken by an advance that did not reach far enough (it cannot: it takes only
            // satisfied keys) or by the first poll: (re)register.
            None => {
                w.by_need.insert(key, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        self.deregister();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiter_wakes_when_its_position_is_reached_not_before() {
        let (tx, rx) = channel(10);
        assert_eq!(rx.wait(10).await, Ok(()));
        let rx2 = rx.clone();
        let t = tokio::spawn(async move { rx2.wait(100).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.advance(50);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!t.is_finished(), "woke at 50 for 100");
        assert_eq!(tx.inner.waiters.lock().by_need.len(), 1);
        tx.advance(40); // never goes back
        assert_eq!(rx.get(), 50);
        tx.advance(100);
        assert_eq!(t.await.unwrap(), Ok(()));
        assert!(tx.inner.waiters.lock().by_need.is_empty());
    }

    #[tokio::test]
    async fn an_advance_wakes_only_the_waiters_it_satisfies() {
        let (tx, rx) = channel(0);
        let mut tasks = Vec::new();
        for need in [5u64, 10, 15, 20] {
            let rx = rx.clone();
            tasks.push(tokio::spawn(async move { rx.wait(need).await }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.advance(12);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let done: Vec<bool> = tasks.iter().map(|t| t.is_finished()).collect();
        assert_eq!(done, vec![true, true, false, false]);
        assert_eq!(tx.inner.waiters.lock().by_need.len(), 2);
        drop(tx);
        for t in tasks.drain(2..) {
            assert_eq!(t.await.unwrap(), Err(Closed));
        }
    }

    #[tokio::test]
    async fn a_relay_wakes_several_satisfied_waiters_and_a_lone_one_is_woken_at_once() {
        let (mut tx, rx) = channel(0);
        let relayed = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = relayed.clone();
        tx.set_relay(Box::new(move |wakers: Vec<Waker>| {
            seen.lock().unwrap().push(wakers.len());
            tokio::spawn(async move {
                for w in wakers {
                    w.wake();
                }
            });
        }));
        let mut tasks = Vec::new();
        for need in [5u64, 6, 7, 30] {
            let rx = rx.clone();
            tasks.push(tokio::spawn(async move { rx.wait(need).await }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.advance(10);
        let last = tasks.pop().unwrap();
        for t in tasks {
            assert_eq!(t.await.unwrap(), Ok(()));
        }
        assert_eq!(*relayed.lock().unwrap(), vec![3]);
        tx.advance(30);
        assert_eq!(last.await.unwrap(), Ok(()));
        assert_eq!(
            *relayed.lock().unwrap(),
            vec![3],
            "one waiter is not relayed"
        );
    }

    #[tokio::test]
    async fn a_dropped_wait_leaves_no_registration() {
        let (tx, rx) = channel(0);
        let r = tokio::time::timeout(Duration::from_millis(10), rx.wait(7)).await;
        assert!(r.is_err());
        assert!(tx.inner.waiters.lock().by_need.is_empty());
    }

    #[test]
    fn many_threads_advancing_and_waiting_never_strand_a_waiter() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = channel(0);
        let tx = Arc::new(tx);
        rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..200u64 {
                let rx = rx.clone();
                tasks.push(tokio::spawn(async move {
                    for k in 0..50u64 {
                        rx.wait(i * 7 + k * 31).await.unwrap();
                    }
                }));
            }
            let tx2 = tx.clone();
            let feeder = std::thread::spawn(move || {
                for v in 0..=3000u64 {
                    tx2.advance(v);
                    if v % 100 == 0 {
                        std::thread::yield_now();
                    }
                }
            });
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(10), t)
                    .await
                    .expect("a waiter was stranded")
                    .unwrap();
            }
            feeder.join().unwrap();
        });
    }
}
