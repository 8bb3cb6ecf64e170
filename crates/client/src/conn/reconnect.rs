//! Automatic reconnect (MQCNO_RECONNECT) of one conversation: when its socket breaks, a new
//! conversation is drawn from the pool (trying the connection name list in order, every
//! [`RECONNECT_RETRY`] for [`RECONNECT_FAST_FOR`], then with back-off, until the timeout), Connect is sent again and every open handle is reopened, so that the
//! application's handles stay valid. Whether a unit of work died with the socket is recorded for
//! the next commit to report.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ferrymq_proto::{Request, Response};
use ferrymq_types::{MqError, Reason};

use super::{failure, status, Binding, Conv, Uow};
use crate::options::Reconnect;
use crate::socket::CallError;

/// Pause between rounds over the connection name list during the first [`RECONNECT_FAST_FOR`]
/// of a break. An HA group elects a new active instance about a second after its active one dies,
/// and only the active instance listens: a client retrying this often connects within this
/// interval of the new instance listening, instead of at the next step of a doubling back-off
/// (which made applications wait up to twice the election time). A round against instances that
/// refuse connections costs a few connect calls, so this is not a hot spin.
const RECONNECT_RETRY: Duration = Duration::from_millis(25);
/// How long a break is retried every [`RECONNECT_RETRY`]: longer than an election normally takes
/// (elections that need a second vote included).
const RECONNECT_FAST_FOR: Duration = Duration::from_secs(5);
/// After that, the pause starts here and doubles after each failed round up to the maximum, so a
/// queue manager that is down for a long time is not polled 40 times a second by every client.
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(100);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The pause before the next round of a reconnect that began at `started` and has paused
/// `backoff` last (updated).
fn next_pause(started: Instant, now: Instant, backoff: &mut Duration) -> Duration {
    if now.saturating_duration_since(started) < RECONNECT_FAST_FOR {
        return RECONNECT_RETRY;
    }
    let pause = *backoff;
    *backoff = (*backoff * 2).min(RECONNECT_BACKOFF_MAX);
    pause
}

/// Errors a reconnect does not retry: trying again would only repeat them.
fn is_fatal(e: &MqError) -> bool {
    [
        Reason::NOT_AUTHORIZED,
        Reason::CONNECTION_NOT_AUTHORIZED,
        Reason::SECURITY_ERROR,
    ]
    .contains(&e.reason)
}

impl Conv {
    /// Returns `err` when reconnect is disabled; otherwise reconnects (once per break, however
    /// many callers noticed it).
    pub(super) async fn after_break(&self, seen: &Binding, err: MqError) -> Result<(), MqError> {
        let Reconnect::Enabled { timeout } = self.pool.opts.reconnect else {
            return Err(err);
        };
        let _g = self.reconnect_lock.lock().await;
        self.check_alive()?;
        if self.bind.lock().generation != seen.generation {
            return Ok(());
        }
        tracing::info!(qmgr = %self.qmgr_name, error = %err, "connection broken; reconnecting");
        let started = Instant::now();
        let deadline = started + timeout;
        let mut backoff = RECONNECT_BACKOFF_MIN;
        let last = loop {
            match self.rebind(seen, deadline).await {
                Ok(()) => return Ok(()),
                Err(e) if is_fatal(&e) => break e,
                Err(e) => {
                    tracing::debug!(error = %e, "reconnect attempt failed");
                    let now = Instant::now();
                    let left = deadline.saturating_duration_since(now);
                    if left.is_zero() {
                        break e;
                    }
                    let pause = next_pause(started, now, &mut backoff);
                    tokio::time::sleep(pause.min(left)).await;
                }
            }
        };
        let e = MqError::new(
            Reason::RECONNECT_FAILED,
            format!(
                "could not reconnect to queue manager '{}' within {} ms: {last}",
                self.qmgr_name,
                timeout.as_millis()
            ),
        );
        tracing::warn!(error = %e, "giving up reconnecting");
        *self.dead.lock() = Some(e.clone());
        Err(e)
    }

    /// One reconnect attempt: a conversation on a live socket, Connect, and every handle reopened.
    async fn rebind(&self, seen: &Binding, deadline: Instant) -> Result<(), MqError> {
        let (socket, conv) = self.pool.claim(Some(deadline)).await?;
        let reopened = async {
            status(
                "Connect",
                socket
                    .call(conv, &self.connect_req)
                    .await
                    .map_err(CallError::into_error)?,
            )?;
            let todo: Vec<(u32, Option<Request>)> = self
                .handles
                .lock()
                .map
                .iter()
                .filter(|(_, h)| h.lost.is_none())
                .map(|(id, h)| {
                    let req = match &h.reopen {
                        super::Reopen::Open => Some(Request::Open {
                            name: h.open_name.clone(),
                            qmgr: h.open_qmgr.clone(),
                            options: h.options,
                            dynamic_name: h.dynamic_name.clone(),
                        }),
                        super::Reopen::Topic { object, topic } => Some(Request::OpenTopic {
                            object: object.clone(),
                            topic: topic.clone(),
                            options: h.options,
                        }),
                        super::Reopen::Never => None,
                    };
                    (*id, req)
                })
                .collect();
            let mut done = Vec::with_capacity(todo.len());
            for (id, req) in todo {
                let Some(req) = req else {
                    done.push((
                        id,
                        Err(MqError::new(
                            Reason::NO_SUBSCRIPTION,
                            "a subscription does not survive a reconnect: subscribe again (a durable one with MQSO_RESUME)",
                        )),
                    ));
                    continue;
                };
                let r = socket
                    .call(conv, &req)
                    .await
                    .map_err(CallError::into_error)?;
                done.push((
                    id,
                    match r {
                        Response::Opened { hobj, .. } => Ok(hobj),
                        other => Err(failure("Open", other)),
                    },
                ));
            }
            Ok::<_, MqError>(done)
        }
        .await;
        let done = match reopened {
            Ok(d) => d,
            Err(e) => {
                socket.release_conv(conv);
                return Err(e);
            }
        };
        {
            let mut h = self.handles.lock();
            for (id, r) in done {
                if let Some(st) = h.map.get_mut(&id) {
                    match r {
                        Ok(server) => st.server = server,
                        Err(e) => {
                            tracing::warn!(hobj = id, error = %e, "object could not be reopened after reconnect");
                            st.lost = Some(MqError::new(
                                e.reason,
                                format!(
                                    "the object could not be reopened after a reconnect: {}",
                                    e.message
                                ),
                            ));
                        }
                    }
                }
            }
        }
        {
            let mut u = self.uow.lock();
            if u.in_progress {
                *u = Uow {
                    in_progress: false,
                    lost: true,
                };
            }
        }
        *self.bind.lock() = Binding {
            socket,
            conv,
            generation: seen.generation + 1,
        };
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        tracing::info!(qmgr = %self.qmgr_name, "reconnected");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_fixed_and_short_while_a_group_elects_then_back_off_to_a_bound() {
        let t0 = Instant::now();
        let mut b = RECONNECT_BACKOFF_MIN;
        let mut now = t0;
        let mut pauses = Vec::new();
        while now < t0 + Duration::from_secs(20) {
            let p = next_pause(t0, now, &mut b);
            pauses.push((now - t0, p));
            now += p;
        }
        for (at, p) in &pauses {
            if *at < RECONNECT_FAST_FOR {
                assert_eq!(*p, RECONNECT_RETRY, "at {at:?}");
            } else {
                assert!(*p >= RECONNECT_BACKOFF_MIN && *p <= RECONNECT_BACKOFF_MAX);
            }
        }
        // Bounded: about 200 rounds in the first 5 s, then a handful more.
        assert!(pauses.len() < 230, "{} rounds", pauses.len());
        assert_eq!(pauses.last().unwrap().1, RECONNECT_BACKOFF_MAX);
    }
}
