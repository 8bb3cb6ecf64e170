//! The standalone (not replicated) side of the start path: storage recovered from checkpoint and
//! log, the engine wired to the ring, the background checkpointer and the final checkpoint.

use super::*;

/// How long a failed checkpoint waits before its first retry; the wait doubles up to
/// `CHECKPOINT_RETRY_MAX`.
const CHECKPOINT_RETRY_FIRST: Duration = Duration::from_millis(250);
const CHECKPOINT_RETRY_MAX: Duration = Duration::from_secs(2);

/// The checkpointer thread: a checkpoint when the log is filling up (`pressure`) or every
/// `interval` while anything was logged; a failed one (a full disk) is retried with back-off until
/// one succeeds, and nothing it meets — not an error, not a panic, not an unwritable error log —
/// ends the thread before `stop`.
fn checkpointer(
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    pressure: std_mpsc::Receiver<()>,
    interval: Duration,
) {
    let mut last = shared.storage.ring().end_lsn();
    let mut failures: u32 = 0;
    let mut last_error = String::new();
    while !stop.load(Ordering::Acquire) {
        let due = if failures == 0 {
            pressure.recv_timeout(interval).is_ok()
        } else {
            // Back off whatever the pressure: appends keep asking while the log stays full.
            let wait = CHECKPOINT_RETRY_FIRST
                .saturating_mul(1 << (failures - 1).min(8))
                .min(CHECKPOINT_RETRY_MAX);
            let until = std::time::Instant::now() + wait;
            while !stop.load(Ordering::Acquire) {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                let _ = pressure.recv_timeout(left);
            }
            true
        };
        if stop.load(Ordering::Acquire) {
            break;
        }
        let end = shared.storage.ring().end_lsn();
        if !due && end == last {
            continue;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shared.checkpoint()))
            .unwrap_or_else(|p| Err(format!("the checkpoint panicked: {}", panic_text(&p))));
        match r {
            Ok(rep) => {
                if failures > 0 {
                    crate::qm_log!(
                        crate::errlog::ids::CHECKPOINT_RESUMED, "checkpoint succeeded after {failures} failed attempt(s) (LSN {}, {} persistent messages); the recovery log has room again",
                        rep.lsn, rep.messages
                    );
                }
                failures = 0;
                last_error.clear();
                last = end;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                // The first failure, a new error, and then ever more rarely: a disk that stays
                // full must not fill the error log (it cannot be written to anyway).
                if failures.is_power_of_two() || e != last_error {
                    crate::qm_log!(
                        crate::errlog::ids::CHECKPOINT_FAILED, "checkpoint failed ({failures} in a row): {e}; retrying every {} s at most; persistent work stops once the recovery log is full",
                        CHECKPOINT_RETRY_MAX.as_secs()
                    );
                }
                last_error = e;
            }
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// A standalone queue manager's log: its own ring, synced by its writer thread, checkpointed by
/// the checkpointer thread.
pub(super) struct Ring {
    ckpt_tx: std_mpsc::SyncSender<()>,
    ckpt_rx: Option<std_mpsc::Receiver<()>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ring {
    /// Recovers the queue manager from its checkpoint and log. A DR primary's lag gate
    /// (`max_lag`) is fed by the ring's durable LSN from the first sync.
    pub(super) fn open(
        paths: &QmPaths,
        cfg: &QmConfig,
        max_lag: Option<u64>,
        rt: &tokio::runtime::Handle,
    ) -> Result<(Opened, Ring), String> {
        let (mut durable_tx, durable_rx) = crate::lsn::channel(0);
        let rt = rt.clone();
        durable_tx.set_relay(Box::new(move |wakers| {
            rt.spawn(async move {
                for w in wakers {
                    w.wake();
                }
            });
        }));
        let (ckpt_tx, ckpt_rx) = std_mpsc::sync_channel::<()>(1);
        let pressure_tx = ckpt_tx.clone();
        let gate = max_lag.map(|max| Gate::new(Meter::Ring, max, 0));
        let gate_in = gate.clone();
        let (storage, engine, report) = Storage::open(
            paths,
            cfg,
            engine_config(cfg),
            Box::new(move |lsn| {
                durable_tx.advance(lsn);
                if let Some(g) = &gate_in {
                    g.durable(lsn);
                }
            }),
            Box::new(move || {
                let _ = pressure_tx.try_send(());
            }),
        )?;
        crate::qm_log!(
            crate::errlog::ids::RECOVERED, "queue manager '{}' recovered in {} ms: checkpoint at LSN {}, {} persistent messages loaded, {} log records replayed; log writes {}{}",
            cfg.name,
            report.elapsed_ms,
            report.checkpoint_lsn,
            report.messages_loaded,
            report.records_replayed,
            match (cfg.durability, storage.ring().write_mode()) {
                (ferrymq_log::Durability::OsBuffered, _) => "buffered (Durability=os: no sync)",
                (_, ferrymq_log::WriteMode::Direct) => "direct (O_DIRECT|O_DSYNC)",
                (_, ferrymq_log::WriteMode::Buffered) => "buffered with fdatasync",
            },
            report.tail_problem.as_ref().map(|t| format!("; log tail: {t}")).unwrap_or_default()
        );
        if let Some((id, lines)) = report.discard_lines() {
            for line in lines {
                crate::qm_log!(id, "{line}");
            }
        }
        let storage = Arc::new(storage);
        if let Some(g) = &gate {
            // What recovery found is durable; the gate (and the status's POSITION) starts there.
            g.durable(storage.ring().durable_lsn());
        }
        let source = gate
            .as_ref()
            .map(|_| Source::ring(storage.ring().clone(), &storage, durable_rx.clone()));
        let opened = Opened {
            core: Arc::new(Mutex::new(Core::new(engine))),
            storage,
            durable: gate.as_ref().map_or(durable_rx, |g| g.watch()),
            gate,
            source,
            ha: None,
        };
        let ring = Ring {
            ckpt_tx,
            ckpt_rx: Some(ckpt_rx),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        };
        Ok((opened, ring))
    }

    /// Before applications: a log recovered past the checkpoint trigger (a run that ended while
    /// its checkpoints failed) would refuse the first persistent work until a checkpoint ran, so
    /// one is taken now (if it fails, the checkpointer retries); then the checkpointer starts.
    pub(super) fn before_serving(&mut self, shared: &Arc<Shared>) -> Result<(), String> {
        let log = shared.storage.ring();
        let trigger = log.capacity() * ferrymq_types::limits::LOG_CHECKPOINT_TRIGGER_PCT / 100;
        if log.used_bytes() >= trigger {
            let pct = log.used_bytes() * 100 / log.capacity().max(1);
            match shared.checkpoint() {
                Ok(r) => crate::qm_log!(
                    crate::errlog::ids::STARTUP_CHECKPOINT, "start-up checkpoint at LSN {} with {} persistent messages ({} newly stored): the recovered log was {}% full",
                    r.lsn,
                    r.messages,
                    r.newly_stored,
                    pct
                ),
                Err(e) => {
                    crate::qm_log!(crate::errlog::ids::STARTUP_CHECKPOINT_FAILED, "start-up checkpoint failed: {e}; the checkpointer retries")
                }
            }
        }
        let rx = self.ckpt_rx.take().ok_or("the checkpointer runs already")?;
        let (shared, stop) = (shared.clone(), self.stop.clone());
        let interval = Duration::from_millis(shared.cfg.checkpoint_interval_ms.max(100));
        self.thread = Some(
            std::thread::Builder::new()
                .name("checkpointer".into())
                .spawn(move || checkpointer(shared, stop, rx, interval))
                .map_err(|e| e.to_string())?,
        );
        Ok(())
    }

    /// After the last application: stops the checkpointer and takes the final checkpoint.
    pub(super) fn finish(
        mut self,
        shared: &Shared,
    ) -> Result<crate::storage::CheckpointReport, String> {
        self.stop.store(true, Ordering::Release);
        let _ = self.ckpt_tx.try_send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // An error goes to the error log (printed by run-qmgr) and to qm.end (for endmqm -w).
        shared.checkpoint().map_err(|e| {
            let log = shared.storage.ring();
            let kept = log.wait_durable(log.end_lsn()).is_ok();
            format!(
                "its final checkpoint failed: {e}{}",
                if kept {
                    "; nothing is lost: the recovery log holds all work since the last good checkpoint and the next start replays it"
                } else {
                    ""
                }
            )
        })
    }
}
