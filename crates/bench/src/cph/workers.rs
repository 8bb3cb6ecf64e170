//! The loops each simulated application runs: requester, responder, put/get, sender, receiver.
//! Each owns its connection (MQ-CPH gives every thread its own), counts what it completes, and
//! records latency only inside the measurement window.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::{unique_id, Connection, ObjectHandle};
use ferrymq_types::descriptor::msg_type;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
use hdrhistogram::Histogram;

/// What every worker shares with the orchestrator.
pub struct Shared {
    pub stop: AtomicBool,
    /// Responders stop after the requesters, so no requester is left waiting for a reply.
    pub stop_responders: AtomicBool,
    pub measuring: AtomicBool,
    /// Completed units (round trips, or messages for one-sided modules).
    pub done: AtomicU64,
    pub errors: AtomicU64,
    /// Puts that found the queue full (MQRC_Q_FULL) and waited 1 ms to try again: a sender
    /// ahead of its receivers, or with none.
    pub full_waits: AtomicU64,
    pub first_error: Mutex<Option<String>>,
    /// Latency in microseconds, recorded inside the window.
    pub hist: Mutex<Histogram<u64>>,
    /// Delay between two units of one worker, for rate limits (0 = none).
    pub pace: Duration,
}

impl Shared {
    pub fn new(pace: Duration) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            stop_responders: AtomicBool::new(false),
            measuring: AtomicBool::new(false),
            done: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            full_waits: AtomicU64::new(0),
            first_error: Mutex::new(None),
            hist: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")),
            pace,
        }
    }

    fn fail(&self, what: &str, e: MqError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut f = self.first_error.lock().unwrap();
        if f.is_none() {
            *f = Some(format!("{what}: {e}"));
        }
    }

    fn record(&self, started: Instant) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if self.measuring.load(Ordering::Relaxed) {
            let us = started.elapsed().as_micros().max(1) as u64;
            let _ = self.hist.lock().unwrap().record(us);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

fn persistence(p: bool) -> Persistence {
    if p {
        Persistence::Persistent
    } else {
        Persistence::NotPersistent
    }
}

async fn pace(sh: &Shared, started: Instant) {
    if !sh.pace.is_zero() {
        if let Some(rest) = sh.pace.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
}

/// Puts a request under syncpoint and commits (one write), then waits for the reply by CorrelId.
pub async fn requester(
    c: Connection,
    request_q: String,
    reply_q: String,
    size: usize,
    persistent: bool,
    sh: Arc<Shared>,
) {
    let run = async {
        let req = c.open(&request_q, open::OUTPUT).await?;
        let rep = c.open(&reply_q, open::INPUT_SHARED).await?;
        let body = Bytes::from(vec![b'R'; size]);
        let md = MessageDescriptor {
            msg_type: msg_type::REQUEST,
            persistence: persistence(persistent),
            reply_to_q: reply_q.clone(),
            ..Default::default()
        };
        let props = Properties::default();
        let mut md = md;
        while !sh.stopped() {
            let t = Instant::now();
            // The request carries a MsgId chosen here, so its put, commit and the get of the reply
            // by that CorrelId go out in one write.
            md.msg_id = unique_id();
            let opts = GetOptions {
                wait: Wait::Ms(10_000),
                match_correl_id: Some(md.msg_id),
                ..GetOptions::any()
            };
            match c
                .put_commit_get(&req, &md, &props, body.clone(), &rep, &opts)
                .await
            {
                Ok(_) => sh.record(t),
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE && sh.stopped() => break,
                Err(e) => return Err(e),
            }
            pace(&sh, t).await;
        }
        Ok::<(), MqError>(())
    };
    if let Err(e) = run.await {
        sh.fail("requester", e);
    }
    let _ = c.disconnect().await;
}

/// Gets a request under syncpoint, puts the reply (same size, CorrelId = request MsgId) to its
/// reply-to queue and commits both — in the same write as the get of its next request.
pub async fn responder(
    c: Connection,
    request_q: String,
    persistent: bool,
    sh: Arc<Shared>,
    count: bool,
) {
    let run = async {
        let req = c.open(&request_q, open::INPUT_SHARED).await?;
        let mut replies: HashMap<String, ObjectHandle> = HashMap::new();
        let get = GetOptions {
            wait: Wait::Ms(200),
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        };
        let props = Properties::default();
        let mut pending: Option<ferrymq_client::Message> = None;
        while !sh.stop_responders.load(Ordering::Relaxed) {
            let m = match pending.take() {
                Some(m) => m,
                None => match c.get(&req, &get).await {
                    Ok(m) => m,
                    Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
                    Err(e) => return Err(e),
                },
            };
            let t = Instant::now();
            if !replies.contains_key(&m.md.reply_to_q) {
                let h = c.open(&m.md.reply_to_q, open::OUTPUT).await?;
                replies.insert(m.md.reply_to_q.clone(), h);
            }
            let h = &replies[&m.md.reply_to_q];
            let md = MessageDescriptor {
                msg_type: msg_type::REPLY,
                correl_id: m.md.msg_id,
                persistence: persistence(persistent),
                ..Default::default()
            };
            match c.put_commit_get(h, &md, &props, m.body, &req, &get).await {
                Ok((_, next)) => pending = Some(next),
                // The reply is committed; only the next get found nothing within its wait.
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {}
                Err(e) => return Err(e),
            }
            if count {
                sh.record(t);
            }
        }
        Ok::<(), MqError>(())
    };
    if let Err(e) = run.await {
        sh.fail("responder", e);
    }
    let _ = c.disconnect().await;
}

/// One-sided and looped-back modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simple {
    PutGet,
    Sender,
    Receiver,
}

pub async fn simple(
    kind: Simple,
    c: Connection,
    queue: String,
    size: usize,
    persistent: bool,
    syncpoint: bool,
    sh: Arc<Shared>,
) {
    let run = async {
        let h = c.open(&queue, open::OUTPUT | open::INPUT_SHARED).await?;
        let body = Bytes::from(vec![b'S'; size]);
        let md = MessageDescriptor {
            persistence: persistence(persistent),
            ..Default::default()
        };
        let props = Properties::default();
        let sync = if syncpoint {
            Syncpoint::Yes
        } else {
            Syncpoint::No
        };
        while !sh.stopped() {
            let t = Instant::now();
            let id = match kind {
                Simple::PutGet | Simple::Sender => {
                    let put = if syncpoint {
                        c.put_commit(&h, &md, &props, body.clone()).await
                    } else {
                        c.put(&h, &md, &props, body.clone(), &PutOptions::default())
                            .await
                    };
                    match put {
                        Ok((id, _)) => Some(id),
                        // A sender running ahead of its receivers fills the queue: back off.
                        Err(e) if e.reason == Reason::Q_FULL => {
                            sh.full_waits.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Simple::Receiver => None,
            };
            if kind != Simple::Sender {
                let opts = GetOptions {
                    wait: Wait::Ms(1000),
                    syncpoint: sync,
                    match_msg_id: id,
                    ..GetOptions::any()
                };
                match c.get(&h, &opts).await {
                    Ok(_) => {
                        if syncpoint {
                            c.commit().await?;
                        }
                    }
                    Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
                    Err(e) => return Err(e),
                }
            }
            sh.record(t);
            pace(&sh, t).await;
        }
        Ok::<(), MqError>(())
    };
    if let Err(e) = run.await {
        sh.fail("worker", e);
    }
    let _ = c.disconnect().await;
}
