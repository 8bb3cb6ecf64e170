//! The simulator's own proposer (the seam between a leader's engine and Raft): the engine's
//! records are numbered and framed into an open batch (`ferrymq_engine::batch`, the production
//! framing); one replicator proposes batches in order, a few in flight, and publishes the last
//! record number of each committed batch as the durable watermark every reply waits for. It
//! mirrors the server's `ha::proposals` in a few lines; swapping it for a shared implementation
//! touches only this file.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ferrymq_engine::{LogSink, Lsn};
use ferrymq_replication::{AppRecord, FerryRaft, LogId};
use ferrymq_types::MqError;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// AppRecord kind of a batch of engine records: the server's own, from the replication crate.
pub use ferrymq_replication::KIND_ENGINE_BATCH;
/// Batches proposed and not yet committed, at most.
const IN_FLIGHT: usize = 2;

pub struct Proposer {
    st: Mutex<State>,
    wake: Notify,
    /// The durable watermark, and its waiters. (Not a `tokio::sync::watch`: that one wakes its
    /// waiters in a random order, which the simulation must not depend on.)
    durable: Mutex<u64>,
    advanced: Notify,
    lost: AtomicBool,
    /// Test-only broken invariant: publish a batch as durable once the leader appended it.
    ack_before_commit: bool,
}

#[derive(Default)]
struct State {
    last_seq: u64,
    open: Vec<u8>,
    open_last: u64,
    /// Proposed batches in order: last record number, committed yet.
    proposed: VecDeque<(u64, bool)>,
}

impl Proposer {
    pub fn new(ack_before_commit: bool) -> Arc<Proposer> {
        Arc::new(Proposer {
            st: Mutex::new(State::default()),
            wake: Notify::new(),
            durable: Mutex::new(0),
            advanced: Notify::new(),
            lost: AtomicBool::new(false),
            ack_before_commit,
        })
    }

    fn push(&self, kind: u8, parts: &[&[u8]]) -> u64 {
        let mut st = self.st.lock();
        ferrymq_engine::batch::push_record(&mut st.open, kind, parts);
        st.last_seq += 1;
        st.open_last = st.last_seq;
        let seq = st.last_seq;
        drop(st);
        self.wake.notify_one();
        seq
    }

    /// The number of the last record logged so far.
    pub fn last_seq(&self) -> u64 {
        self.st.lock().last_seq
    }

    /// The durable watermark: the last record number whose reply may go out.
    pub fn durable(&self) -> u64 {
        *self.durable.lock()
    }

    /// Resolves after the watermark moves or leadership is lost (create it before looking).
    pub fn advanced(&self) -> tokio::sync::futures::Notified<'_> {
        self.advanced.notified()
    }

    fn advance(&self, to: u64) {
        {
            let mut d = self.durable.lock();
            *d = (*d).max(to);
        }
        self.advanced.notify_waiters();
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    fn set_lost(&self) {
        self.lost.store(true, Ordering::Release);
        // Wakes every waiter, which then sees the loss.
        self.advanced.notify_waiters();
    }

    /// Where the records of a new leader start: everything logged before is discarded (a
    /// replica's engine logs nothing, so this is empty in practice).
    pub fn reset(&self) {
        let mut st = self.st.lock();
        st.open.clear();
        let last = st.last_seq;
        drop(st);
        self.advance(last);
    }

    fn committed(&self, last: u64) {
        let mut st = self.st.lock();
        if let Some(p) = st.proposed.iter_mut().find(|p| p.0 == last) {
            p.1 = true;
        }
        let mut durable = None;
        while let Some(&(seq, true)) = st.proposed.front() {
            st.proposed.pop_front();
            durable = Some(seq);
        }
        drop(st);
        if let Some(seq) = durable {
            if !self.ack_before_commit {
                self.advance(seq);
            }
        }
    }

    /// Proposes batches to `raft` in order until leadership is lost (runs as the leader's task).
    pub async fn replicate(self: Arc<Proposer>, raft: FerryRaft, on_commit: impl Fn(LogId)) {
        let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
        loop {
            // Results first: they free room and move the watermark.
            while let Ok((last, r)) = done_rx.try_recv() {
                match r {
                    Some(id) => {
                        on_commit(id);
                        self.committed(last);
                    }
                    None => {
                        self.set_lost();
                        return;
                    }
                }
            }
            let batch = {
                let mut st = self.st.lock();
                if st.open.is_empty() || in_flight.available_permits() == 0 {
                    None
                } else {
                    let b = std::mem::take(&mut st.open);
                    let last = st.open_last;
                    st.proposed.push_back((last, false));
                    Some((last, b))
                }
            };
            let Some((last, payload)) = batch else {
                tokio::select! {
                biased;
                    _ = self.wake.notified() => {}
                    Some((last, r)) = done_rx.recv() => {
                        match r {
                            Some(id) => { on_commit(id); self.committed(last); }
                            None => { self.set_lost(); return; }
                        }
                    }
                }
                continue;
            };
            let permit = in_flight
                .clone()
                .acquire_owned()
                .await
                .expect("never closed");
            let rec = AppRecord {
                kind: KIND_ENGINE_BATCH,
                payload,
            };
            match raft.client_write_ff(rec).await {
                Ok(rx) => {
                    if self.ack_before_commit {
                        // The broken variant: the leader has the batch in its own log only.
                        self.advance(last);
                    }
                    let tx = done_tx.clone();
                    tokio::spawn(async move {
                        let r = rx.await;
                        drop(permit);
                        let id = match r {
                            Ok(Ok(resp)) => Some(resp.log_id),
                            _ => None,
                        };
                        let _ = tx.send((last, id));
                    });
                }
                Err(_) => {
                    self.set_lost();
                    return;
                }
            }
        }
    }
}

/// The engine's log sink on a simulated node.
pub struct SimSink(pub Arc<Proposer>);

impl LogSink for SimSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        Ok(self.0.push(kind, parts))
    }
}
