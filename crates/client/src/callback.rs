//! Callback consumers (MQ's MQCB with a message consumer function): a thread of the client runs
//! the application's function for each message an asynchronous consumer receives. The function
//! gets the connection too, so it can commit or back out the unit of work its syncpoint
//! deliveries joined — inside the callback, or later from any thread. Under syncpoint the
//! consumer does not read ahead (see [`crate::Connection::consume`]): a commit covers exactly
//! the messages the function has been given.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ferrymq_types::options::GetOptions;
use ferrymq_types::{MqError, Reason};

use crate::blocking::{runtime, Connection};
use crate::{Message, ObjectHandle};

/// What a message callback asks for after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// End the consumer (as MQCTL's MQOP_STOP from inside the callback).
    Stop,
}

/// How often the callback thread looks whether [`CallbackConsumer::stop`] was asked for while
/// no message arrives.
const STOP_POLL: Duration = Duration::from_millis(50);

/// A running callback consumer. Dropping it stops it (without waiting for the thread).
#[derive(Debug)]
pub struct CallbackConsumer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), MqError>>>,
}

impl Connection {
    /// Starts calling `callback` for each message the queue manager delivers through `h`,
    /// selected by `opts` as for a get (`wait` is ignored). `window` messages may be pushed
    /// ahead, except under syncpoint, where each message is handed over only once the callback
    /// has returned from the one before. The callback runs on a thread of its own; it ends when
    /// the callback returns [`Flow::Stop`], on [`CallbackConsumer::stop`], or when the consumer
    /// fails (the error is what [`CallbackConsumer::stop`] or [`CallbackConsumer::wait`]
    /// return).
    pub fn consume_with<F>(
        &self,
        h: &ObjectHandle,
        opts: &GetOptions,
        window: u32,
        mut callback: F,
    ) -> Result<CallbackConsumer, MqError>
    where
        F: FnMut(&Connection, Message) -> Flow + Send + 'static,
    {
        let mut consumer = runtime().block_on(self.as_async().consume(h, opts, window))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let conn = self.clone();
        let thread = std::thread::Builder::new()
            .name("ferrymq-callback".into())
            .spawn(move || {
                while !stopping.load(Ordering::Acquire) {
                    match runtime().block_on(consumer.next_timeout(STOP_POLL)) {
                        Ok(m) => {
                            if callback(&conn, m) == Flow::Stop {
                                break;
                            }
                        }
                        Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
                        Err(e) => return Err(e),
                    }
                }
                runtime().block_on(consumer.cancel())
            })
            .map_err(|e| {
                MqError::new(
                    Reason::RESOURCE_PROBLEM,
                    format!("cannot start the callback thread: {e}"),
                )
            })?;
        Ok(CallbackConsumer {
            stop,
            thread: Some(thread),
        })
    }
}

impl CallbackConsumer {
    /// Stops calling the callback (after the call under way returns) and cancels the consumer.
    pub fn stop(mut self) -> Result<(), MqError> {
        self.stop.store(true, Ordering::Release);
        self.join()
    }

    /// Waits until the callback asks to stop or the consumer fails.
    pub fn wait(mut self) -> Result<(), MqError> {
        self.join()
    }

    /// Whether the callback thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    fn join(&mut self) -> Result<(), MqError> {
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(MqError::new(
                    Reason::UNEXPECTED_ERROR,
                    "the message callback panicked",
                ))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for CallbackConsumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}
