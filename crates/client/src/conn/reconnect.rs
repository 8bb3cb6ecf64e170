//! Automatic reconnect (MQCNO_RECONNECT) of one conversation: when its socket breaks, a new
//! conversation is drawn from the pool (trying the connection name list in order, with backoff,
//! until the timeout), Connect is sent again and every open handle is reopened, so that the
//! application's handles stay valid. Whether a unit of work died with the socket is recorded for
//! the next commit to report.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ferrymq_proto::{Request, Response};
use ferrymq_types::{MqError, Reason};

use super::{failure, status, Binding, Conv, Uow};
use crate::options::Reconnect;
use crate::socket::CallError;

/// First pause between reconnect attempts; doubled after each failed round up to the maximum.
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

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
        let deadline = Instant::now() + timeout;
        let mut backoff = RECONNECT_BACKOFF_MIN;
        let last = loop {
            match self.rebind(seen, deadline).await {
                Ok(()) => return Ok(()),
                Err(e) if is_fatal(&e) => break e,
                Err(e) => {
                    tracing::debug!(error = %e, "reconnect attempt failed");
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break e;
                    }
                    tokio::time::sleep(backoff.min(left)).await;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
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
            let todo: Vec<(u32, Request)> = self
                .handles
                .lock()
                .map
                .iter()
                .filter(|(_, h)| h.lost.is_none())
                .map(|(id, h)| {
                    let req = Request::Open {
                        name: h.open_name.clone(),
                        qmgr: String::new(),
                        options: h.options,
                        dynamic_name: h.dynamic_name.clone(),
                    };
                    (*id, req)
                })
                .collect();
            let mut done = Vec::with_capacity(todo.len());
            for (id, req) in todo {
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
