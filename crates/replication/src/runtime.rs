//! [`FerryRuntime`]: openraft's async runtime for a replica group — tokio, exactly as openraft's
//! own `TokioRuntime`, except for the random numbers openraft draws (its election timeouts).
//! Those come from a per-thread generator seeded from entropy unless
//! [`seed_thread_rng`] fixes the seed, which is what lets a deterministic simulation replay the
//! same elections from the same seed.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::async_runtime::TokioOneShotSender;
use openraft::{AsyncRuntime, OptionalSend, TokioInstant};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

thread_local! {
    /// This thread's generator; `None` until first used (then seeded from entropy) or seeded.
    static RNG: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Makes every random number openraft draws on this thread from now on come from `seed`.
pub fn seed_thread_rng(seed: u64) {
    RNG.with(|r| *r.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

/// A handle on the calling thread's generator (see [`seed_thread_rng`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadRng;

impl ThreadRng {
    fn with<T>(f: impl FnOnce(&mut StdRng) -> T) -> T {
        RNG.with(|r| f(r.borrow_mut().get_or_insert_with(StdRng::from_entropy)))
    }
}

impl RngCore for ThreadRng {
    fn next_u32(&mut self) -> u32 {
        Self::with(|r| r.next_u32())
    }
    fn next_u64(&mut self) -> u64 {
        Self::with(|r| r.next_u64())
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        Self::with(|r| r.fill_bytes(dest))
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        Self::with(|r| r.try_fill_bytes(dest))
    }
}

/// openraft's runtime for FerryMQ: tokio, with [`ThreadRng`] as its random numbers.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FerryRuntime;

impl AsyncRuntime for FerryRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = tokio::task::JoinHandle<T>;
    type Sleep = tokio::time::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = tokio::time::error::Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = tokio::time::Timeout<T>;
    type ThreadLocalRng = ThreadRng;
    type OneshotSender<T: OptionalSend> = TokioOneShotSender<T>;
    type OneshotReceiver<T: OptionalSend> = tokio::sync::oneshot::Receiver<T>;
    type OneshotReceiverError = tokio::sync::oneshot::error::RecvError;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        tokio::task::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        tokio::time::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        tokio::time::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        join_error.is_panic()
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ThreadRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (TokioOneShotSender(tx), rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn a_seeded_thread_draws_the_same_numbers_again() {
        seed_thread_rng(7);
        let a: Vec<u64> = (0..4).map(|_| FerryRuntime::thread_rng().gen()).collect();
        seed_thread_rng(7);
        let b: Vec<u64> = (0..4).map(|_| FerryRuntime::thread_rng().gen()).collect();
        assert_eq!(a, b);
        seed_thread_rng(8);
        let c: Vec<u64> = (0..4).map(|_| FerryRuntime::thread_rng().gen()).collect();
        assert_ne!(a, c);
    }
}
