//! Start-up and run of a standalone (not replicated) queue manager: storage recovered from
//! checkpoint and log, the engine wired to the ring, and the background checkpointer.

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

/// Runs a standalone (not replicated) queue manager until it is ended.
pub(super) fn run_standalone(paths: &QmPaths, cfg: QmConfig) -> Result<(), String> {
    let (durable_tx, durable_rx) = crate::lsn::channel(0);
    let (ckpt_tx, ckpt_rx) = std_mpsc::sync_channel::<()>(1);
    let pressure_tx = ckpt_tx.clone();
    let dr = cfg
        .dr
        .clone()
        .map(|c| Arc::new(DrHandle::new(c, &cfg.name, Some(paths.ini()))));
    // A DR primary's replies wait on the lag bound, fed by the ring's durable LSN.
    let gate = dr
        .as_ref()
        .filter(|d| !d.is_secondary())
        .map(|d| Gate::new(Meter::Ring, d.cfg.max_lag_bytes, 0));
    let gate_in = gate.clone();
    let (storage, engine, report) = Storage::open(
        paths,
        &cfg,
        engine_config(&cfg),
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
        crate::errlog::ids::RECOVERED, "queue manager '{}' recovered in {} ms: checkpoint at LSN {}, {} persistent messages loaded, {} log records replayed{}",
        cfg.name,
        report.elapsed_ms,
        report.checkpoint_lsn,
        report.messages_loaded,
        report.records_replayed,
        report.tail_problem.as_ref().map(|t| format!("; log tail: {t}")).unwrap_or_default()
    );
    if let Some((id, lines)) = report.discard_lines() {
        for line in lines {
            crate::qm_log!(id, "{line}");
        }
    }
    let (end_tx, end_rx) = watch::channel(None);
    let storage = Arc::new(storage);
    if let Some(g) = &gate {
        // What recovery found is durable; the gate (and the status's POSITION) starts there.
        g.durable(storage.ring().durable_lsn());
    }
    let source = gate.as_ref().map(|_| Source::Ring {
        ring: storage.ring().clone(),
        storage: storage.clone(),
        durable: durable_rx.clone(),
    });
    let shared = Arc::new(Shared::new(
        Arc::new(Mutex::new(Core::new(engine))),
        storage,
        cfg.clone(),
        gate.as_ref().map_or(durable_rx, |g| g.watch()),
        end_tx,
        None,
        dr.map(|d| (d, gate.clone())),
    ));

    // A log recovered past the checkpoint trigger (a run that ended while its checkpoints
    // failed) would refuse the first persistent work until a checkpoint ran: take it now, before
    // accepting any. If it fails, the checkpointer retries.
    {
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
    }
    let stop_ckpt = Arc::new(AtomicBool::new(false));
    let ckpt_thread = {
        let shared = shared.clone();
        let stop = stop_ckpt.clone();
        let interval = Duration::from_millis(cfg.checkpoint_interval_ms.max(100));
        std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || checkpointer(shared, stop, ckpt_rx, interval))
            .map_err(|e| e.to_string())?
    };

    let rt = io_runtime()?;
    let served = rt.block_on(async {
        start_dr(&shared, source);
        serve(shared.clone(), paths.clone(), end_rx, None).await
    });
    rt.shutdown_timeout(Duration::from_secs(2));

    stop_ckpt.store(true, Ordering::Release);
    let _ = ckpt_tx.try_send(());
    let _ = ckpt_thread.join();
    let last = shared.checkpoint();
    let _ = std::fs::remove_file(paths.socket());
    let _ = std::fs::remove_file(paths.pid_file());
    served?;
    // An error goes to the error log (printed by run-qmgr) and to qm.end (for endmqm -w).
    let r = last.map_err(|e| {
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
    })?;
    crate::qm_log!(
        crate::errlog::ids::QM_ENDED,
        "queue manager '{}' ended; final checkpoint at LSN {} with {} persistent messages",
        cfg.name,
        r.lsn,
        r.messages
    );
    Ok(())
}
