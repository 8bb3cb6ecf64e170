//! Records on their way into Raft: numbered, gathered into batches, proposed in order, and
//! published as durable once committed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_log::lsn::{LsnSender, LsnWatch};
use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

use super::{BATCH_BYTES, LOG_IDS_KEPT, MAX_IN_FLIGHT, MIN_IN_FLIGHT};
use crate::clock::Clock;
use crate::LogId;

/// One committed batch, as subscribers ([`Proposals::subscribe`]) are told of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Its Raft index.
    pub index: u64,
    /// The number of its last record; 0 for an entry another instance proposed and this one
    /// applied ([`Proposals::applied_elsewhere`]), whose records are not numbered here.
    pub last_seq: u64,
    /// Its payload bytes.
    pub bytes: u64,
    /// From its proposal to its commit (zero for an entry applied from elsewhere).
    pub latency: Duration,
}

/// Told of committed batches, in log order, each once. Called with no lock of the proposals
/// held but their delivery order; it must not call back into them.
pub type Subscriber = Box<dyn Fn(&[Committed]) + Send + Sync>;

/// Records logged, numbered, on their way into Raft.
pub struct Proposals {
    st: Mutex<PropState>,
    wake: Notify,
    /// The highest record number committed by the group (the engine's durable LSN).
    durable: LsnSender,
    /// Signalled when a batch's log id becomes known or everything is lost.
    progress: Condvar,
    lost: AtomicBool,
    /// Moving average of the time from proposing a batch to its commit, in microseconds.
    commit_us: AtomicU64,
    /// A snapshot waits for the batch sealed when its state was captured.
    snapshot_waiting: AtomicBool,
    clock: Arc<dyn Clock>,
    /// Taken before the state's lock is released, so that events leave in the order in which
    /// batches became durable.
    subscribers: Mutex<Vec<Subscriber>>,
    subscribed: AtomicBool,
    /// Events made, for the tests to see that none are without a subscriber.
    #[cfg(test)]
    pub(super) events_made: AtomicU64,
}

struct Proposed {
    last_seq: u64,
    id: Option<LogId>,
    at: Duration,
    latency: Duration,
    bytes: usize,
}

struct PropState {
    /// Number of the last record handed out.
    last_seq: u64,
    open: Vec<u8>,
    open_last: u64,
    sealed: VecDeque<(u64, Vec<u8>)>,
    /// Proposed batches in log order.
    proposed: VecDeque<Proposed>,
    /// Log ids of recently committed batches, by last record number.
    ids: BTreeMap<u64, LogId>,
    /// Record number and log id at which this instance became active.
    base: Option<(u64, LogId)>,
}

impl PropState {
    fn seal(&mut self) {
        if !self.open.is_empty() {
            let b = std::mem::take(&mut self.open);
            self.sealed.push_back((self.open_last, b));
        }
    }
}

impl Proposals {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<Proposals> {
        Arc::new(Proposals {
            st: Mutex::new(PropState {
                last_seq: 0,
                open: Vec::new(),
                open_last: 0,
                sealed: VecDeque::new(),
                proposed: VecDeque::new(),
                ids: BTreeMap::new(),
                base: None,
            }),
            wake: Notify::new(),
            durable: ferrymq_log::lsn::channel(0).0,
            progress: Condvar::new(),
            lost: AtomicBool::new(false),
            commit_us: AtomicU64::new(0),
            snapshot_waiting: AtomicBool::new(false),
            clock,
            subscribers: Mutex::new(Vec::new()),
            subscribed: AtomicBool::new(false),
            #[cfg(test)]
            events_made: AtomicU64::new(0),
        })
    }

    /// Tells `s` of every batch committed from now on (nothing is kept for a subscriber that
    /// is not there yet: without one, a commit costs no event at all).
    pub fn subscribe(&self, s: Subscriber) {
        self.subscribers.lock().push(s);
        self.subscribed.store(true, Ordering::Release);
    }

    /// The clock batches are timed by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The highest record number committed, as a watch replies wait on.
    pub fn durable_watch(&self) -> LsnWatch {
        self.durable.subscribe()
    }

    /// Adds one record, which `write` appends to the open batch in the caller's framing, and
    /// returns its number. The batch is sealed once it holds [`BATCH_BYTES`].
    pub fn push(&self, write: impl FnOnce(&mut Vec<u8>)) -> u64 {
        let mut st = self.st.lock();
        write(&mut st.open);
        st.last_seq += 1;
        let seq = st.last_seq;
        st.open_last = seq;
        if st.open.len() >= BATCH_BYTES {
            st.seal();
        }
        drop(st);
        self.wake.notify_one();
        seq
    }

    /// Closes the open batch so that the next record starts a new one; returns the number of
    /// the last record logged so far.
    pub fn seal(&self) -> u64 {
        let mut st = self.st.lock();
        st.seal();
        st.last_seq
    }

    /// Lets the replicator propose what was sealed.
    pub fn wake_replicator(&self) {
        self.wake.notify_one();
    }

    /// The next batch to propose, with the number of its last record (waits for one). It
    /// counts as proposed from now on.
    pub async fn next_batch(&self) -> (u64, Vec<u8>) {
        loop {
            let notified = self.wake.notified();
            {
                let mut st = self.st.lock();
                st.seal();
                if let Some(b) = st.sealed.pop_front() {
                    let at = self.clock.now();
                    st.proposed.push_back(Proposed {
                        last_seq: b.0,
                        id: None,
                        at,
                        latency: Duration::ZERO,
                        bytes: b.1.len(),
                    });
                    return b;
                }
            }
            notified.await;
        }
    }

    /// The batch ending with record `last` was committed at `id` (batches may commit out of
    /// order; the durable position moves only over a contiguous run of committed ones).
    pub fn committed(&self, last: u64, id: LogId) {
        let mut st = self.st.lock();
        let now = self.clock.now();
        if let Some(p) = st.proposed.iter_mut().find(|p| p.last_seq == last) {
            p.id = Some(id);
            p.latency = now.saturating_sub(p.at);
            let sample = p.latency.as_micros() as u64;
            let avg = self.commit_us.load(Ordering::Relaxed);
            self.commit_us
                .store(avg - avg / 8 + sample / 8, Ordering::Relaxed);
        }
        let subscribed = self.subscribed.load(Ordering::Acquire);
        let mut events = Vec::new();
        let mut durable = None;
        while let Some(&Proposed {
            last_seq,
            id: Some(id),
            latency,
            bytes,
            ..
        }) = st.proposed.front()
        {
            st.proposed.pop_front();
            st.ids.insert(last_seq, id);
            if subscribed {
                events.push(Committed {
                    index: id.index,
                    last_seq,
                    bytes: bytes as u64,
                    latency,
                });
            }
            durable = Some(last_seq);
        }
        while st.ids.len() > LOG_IDS_KEPT {
            st.ids.pop_first();
        }
        #[cfg(test)]
        self.events_made
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        let subscribers = (!events.is_empty()).then(|| self.subscribers.lock());
        drop(st);
        if let Some(seq) = durable {
            self.durable.advance(seq);
        }
        if let Some(subs) = subscribers {
            for s in subs.iter() {
                s(&events);
            }
        }
        self.progress.notify_all();
    }

    /// An entry another instance proposed was applied here: subscribers (a DR primary's lag
    /// gate) count its bytes, should this instance become active before the recovery site has
    /// acknowledged it. Without a subscriber this does nothing.
    pub fn applied_elsewhere(&self, index: u64, bytes: usize) {
        if !self.subscribed.load(Ordering::Acquire) {
            return;
        }
        let ev = [Committed {
            index,
            last_seq: 0,
            bytes: bytes as u64,
            latency: Duration::ZERO,
        }];
        #[cfg(test)]
        self.events_made.fetch_add(1, Ordering::Relaxed);
        for s in self.subscribers.lock().iter() {
            s(&ev);
        }
    }

    /// How many batches may be in flight now (see [`MIN_IN_FLIGHT`]).
    pub fn adaptive_in_flight(&self) -> usize {
        let us = self.commit_us.load(Ordering::Relaxed) as usize;
        (us / 1000).clamp(MIN_IN_FLIGHT, MAX_IN_FLIGHT)
    }

    /// A proposal failed: nothing more will be committed through this instance.
    pub fn set_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.progress.notify_all();
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// A snapshot is waiting for a batch to commit (see [`super::ring_admits`]).
    pub fn snapshot_waiting(&self) -> bool {
        self.snapshot_waiting.load(Ordering::Acquire)
    }

    /// This instance became active with everything up to `applied` in its engine: closes the
    /// open batch and answers [`Proposals::log_id_of`] for the last record logged so far with
    /// `applied`. Returns that record's number.
    pub fn activate(&self, applied: LogId) -> u64 {
        let mut st = self.st.lock();
        st.seal();
        st.base = Some((st.last_seq, applied));
        st.last_seq
    }

    /// Set once [`Proposals::activate`] was called.
    pub fn is_active(&self) -> bool {
        self.st.lock().base.is_some()
    }

    /// The log id of the entry whose state ends with record `seq`, for a snapshot: blocks until
    /// it is known, `None` if it never will be. While it waits, the replicator may propose
    /// into the ring's headroom.
    pub fn log_id_of(&self, seq: u64) -> Option<LogId> {
        self.snapshot_waiting.store(true, Ordering::Release);
        let r = self.wait_log_id(seq);
        self.snapshot_waiting.store(false, Ordering::Release);
        r
    }

    /// The log id of the entry whose state ends with record `seq` (blocks until it is known,
    /// `None` if it never will be).
    pub fn wait_log_id(&self, seq: u64) -> Option<LogId> {
        let mut st = self.st.lock();
        loop {
            if let Some((base_seq, id)) = st.base {
                if seq == base_seq {
                    return Some(id);
                }
            }
            if let Some(id) = st.ids.get(&seq) {
                return Some(*id);
            }
            if self.lost.load(Ordering::Acquire) {
                return None;
            }
            self.progress.wait_for(&mut st, Duration::from_millis(100));
        }
    }
}
