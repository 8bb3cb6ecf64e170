//! The engine's records on their way into Raft: numbered, gathered into batches, proposed in
//! order, and published as durable once committed; and the engine's log sink that feeds them.

use super::*;

/// Records the engine logged, numbered, on their way into Raft.
pub struct Proposals {
    pub(super) st: Mutex<PropState>,
    pub(super) wake: Notify,
    /// The highest record number committed by the group (the engine's durable LSN).
    pub(super) durable: crate::lsn::LsnSender,
    /// Signalled when a batch's log id becomes known or everything is lost.
    pub(super) progress: Condvar,
    pub(super) lost: AtomicBool,
    /// Moving average of the time from proposing a batch to its commit, in microseconds.
    pub(super) commit_us: AtomicU64,
    /// A snapshot waits for the batch sealed when its state was captured.
    pub(super) snapshot_waiting: AtomicBool,
    /// A DR primary's lag gate, told of every commit (as the ring's is of every sync).
    pub(super) dr_gate: std::sync::OnceLock<Arc<crate::dr::gate::Gate>>,
}

pub(super) struct PropState {
    /// Number of the last record handed out.
    pub(super) last_seq: u64,
    pub(super) open: Vec<u8>,
    pub(super) open_last: u64,
    pub(super) sealed: VecDeque<(u64, Vec<u8>)>,
    /// Proposed batches in log order: last record number, log id once committed, when proposed.
    pub(super) proposed: VecDeque<(u64, Option<LogId>, Instant, usize)>,
    /// Committed batches for the DR lag bound.
    pub(super) ledger: crate::dr::gate::BatchLedger,
    /// Log ids of recently committed batches, by last record number.
    pub(super) ids: BTreeMap<u64, LogId>,
    /// Record number and log id at which this instance became active.
    pub(super) base: Option<(u64, LogId)>,
    pub(super) trace: (u64, u64, Instant, u64),
}

impl Proposals {
    pub(super) fn new() -> Arc<Proposals> {
        Arc::new(Proposals {
            st: Mutex::new(PropState {
                last_seq: 0,
                open: Vec::new(),
                open_last: 0,
                sealed: VecDeque::new(),
                proposed: VecDeque::new(),
                ledger: Default::default(),
                ids: BTreeMap::new(),
                base: None,
                trace: (0, 0, Instant::now(), 0),
            }),
            wake: Notify::new(),
            durable: crate::lsn::channel(0).0,
            progress: Condvar::new(),
            lost: AtomicBool::new(false),
            commit_us: AtomicU64::new(0),
            snapshot_waiting: AtomicBool::new(false),
            dr_gate: std::sync::OnceLock::new(),
        })
    }

    /// Feeds every commit to a DR primary's lag gate from now on.
    pub fn set_dr_gate(&self, g: Arc<crate::dr::gate::Gate>) {
        let _ = self.dr_gate.set(g);
    }

    pub fn durable_watch(&self) -> crate::lsn::LsnWatch {
        self.durable.subscribe()
    }

    pub(super) fn push(&self, kind: u8, parts: &[&[u8]]) -> u64 {
        let mut st = self.st.lock();
        ferrymq_engine::batch::push_record(&mut st.open, kind, parts);
        st.last_seq += 1;
        let seq = st.last_seq;
        st.open_last = seq;
        if st.open.len() >= BATCH_BYTES {
            seal(&mut st);
        }
        drop(st);
        self.wake.notify_one();
        seq
    }

    /// Closes the open batch so that the next record starts a new one; returns the number of
    /// the last record logged so far.
    pub(crate) fn seal(&self) -> u64 {
        let mut st = self.st.lock();
        seal(&mut st);
        st.last_seq
    }

    /// Lets the replicator propose what was sealed.
    pub(crate) fn wake_replicator(&self) {
        self.wake.notify_one();
    }

    /// The next batch to propose (waits for one).
    pub(super) async fn next_batch(&self) -> (u64, Vec<u8>) {
        loop {
            let notified = self.wake.notified();
            {
                let mut st = self.st.lock();
                seal(&mut st);
                if let Some(b) = st.sealed.pop_front() {
                    st.proposed
                        .push_back((b.0, None, Instant::now(), b.1.len()));
                    return b;
                }
            }
            notified.await;
        }
    }

    pub(super) fn committed(&self, last: u64, id: LogId) {
        let mut st = self.st.lock();
        if let Some(p) = st.proposed.iter_mut().find(|p| p.0 == last) {
            p.1 = Some(id);
            let at = p.2;
            let sample = at.elapsed().as_micros() as u64;
            let avg = self.commit_us.load(Ordering::Relaxed);
            self.commit_us
                .store(avg - avg / 8 + sample / 8, Ordering::Relaxed);
            if trace_enabled() {
                st.trace.0 += 1;
                st.trace.1 += at.elapsed().as_micros() as u64;
                if st.trace.2.elapsed() > Duration::from_secs(2) {
                    crate::qm_log!(
                        crate::errlog::ids::LOG_TRACE,
                        "trace: {} batches, {} records, avg commit {} us",
                        st.trace.0,
                        last - st.trace.3,
                        st.trace.1 / st.trace.0.max(1)
                    );
                    st.trace = (0, 0, Instant::now(), last);
                }
            }
        }
        let mut durable = None;
        while let Some(&(seq, Some(id), _, bytes)) = st.proposed.front() {
            st.proposed.pop_front();
            st.ledger.push(id.index, seq, bytes);
            st.ids.insert(seq, id);
            durable = Some(seq);
        }
        while st.ids.len() > 4096 {
            st.ids.pop_first();
        }
        drop(st);
        if let Some(seq) = durable {
            self.durable.advance(seq);
            if let Some(g) = self.dr_gate.get() {
                g.durable(seq);
            }
        }
        self.progress.notify_all();
    }

    /// How many batches may be in flight now (see [`MIN_IN_FLIGHT`]).
    pub(super) fn adaptive_in_flight(&self) -> usize {
        let us = self.commit_us.load(Ordering::Relaxed) as usize;
        (us / 1000).clamp(MIN_IN_FLIGHT, MAX_IN_FLIGHT)
    }

    pub(super) fn set_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.progress.notify_all();
    }

    /// The log id of the entry whose state ends with record `seq`: blocks until it is known,
    /// `None` if it never will be.
    pub(crate) fn log_id_of(&self, seq: u64) -> Option<LogId> {
        self.snapshot_waiting.store(true, Ordering::Release);
        let r = self.wait_log_id(seq);
        self.snapshot_waiting.store(false, Ordering::Release);
        r
    }

    pub(super) fn wait_log_id(&self, seq: u64) -> Option<LogId> {
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

    /// An entry another instance committed was applied here: its bytes count towards the DR
    /// lag should this instance become active before the secondary has acknowledged it.
    pub(super) fn note_applied(&self, index: u64, bytes: usize) {
        self.st.lock().ledger.push(index, 0, bytes);
    }

    /// On becoming active: holds replies within the DR lag bound from the secondary's last
    /// recorded acknowledgement (replicated in `DR_ACKED`), before any application is served;
    /// the shipper then takes over (or the grace period ends the hold).
    pub(super) fn hold_dr_bound(&self, dr: ferrymq_engine::dr::DrState) {
        if let (Some(g), Some(pos)) = (self.dr_gate.get(), crate::dr::recorded_ack(dr)) {
            g.bound(Some(pos));
        }
    }

    /// The largest committed record number whose reply may go out with the DR secondary at
    /// Raft index `acked` and at most `max` bytes of log allowed beyond it.
    pub fn dr_allowed(&self, raw: u64, acked: u64, max: u64) -> u64 {
        self.st.lock().ledger.allowed(raw, acked, max)
    }

    /// Bytes committed after the DR secondary's index `acked` whose replies may have gone out
    /// (up to record number `released`).
    pub fn dr_released_bytes(&self, acked: u64, released: u64) -> u64 {
        self.st.lock().ledger.released_bytes(acked, released)
    }

    /// The last committed index, and the bytes committed (by this active instance) after the
    /// DR secondary's index `acked`.
    pub fn dr_lag(&self, acked: u64) -> (u64, u64) {
        let mut st = self.st.lock();
        let end = st.ledger.last_index().max(acked);
        (end, st.ledger.lag_bytes(acked))
    }
}

/// `FERRYMQ_HA_TRACE` set: the active instance logs batch counts and commit latency every 2 s.
pub(super) fn trace_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("FERRYMQ_HA_TRACE").is_some())
}

pub(super) fn seal(st: &mut PropState) {
    if !st.open.is_empty() {
        let b = std::mem::take(&mut st.open);
        let last = st.open_last;
        st.sealed.push_back((last, b));
    }
}

/// The engine's log sink in a replicated queue manager.
pub struct HaSink {
    pub(super) props: Arc<Proposals>,
    pub(super) max_record: usize,
}

impl LogSink for HaSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len + ferrymq_engine::batch::RECORD_HEAD_BYTES > self.max_record {
            return Err(MqError::new(
                Reason::RESOURCE_PROBLEM,
                format!(
                    "a log record of {len} bytes exceeds the largest the replicated log holds ({}); enlarge the log (-lf) for messages this big",
                    self.max_record
                ),
            ));
        }
        Ok(self.props.push(kind, parts))
    }
}
