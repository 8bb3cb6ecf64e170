//! Start-up and run of one instance of a replicated (HA) queue manager: the Raft replica started
//! on its own runtime, then served until ended.

use super::*;

/// Runs one instance of a replicated queue manager (qm.ini `NativeHA:`) until it is ended.
pub(super) fn run_ha(paths: &QmPaths, cfg: QmConfig) -> Result<(), String> {
    let rt = io_runtime()?;
    let raft_rt = raft_runtime()?;
    let raft_handle = raft_rt.handle().clone();
    let served = rt.block_on(async {
        let began = std::time::Instant::now();
        let (p2, c2) = (paths.clone(), cfg.clone());
        let started = raft_handle
            .spawn(async move { ha::start(&p2, &c2, engine_config(&c2)).await })
            .await
            .map_err(|e| format!("starting the replica: {e}"))??;
        let h = started.handle.clone();
        crate::qm_log!(
            crate::errlog::ids::HA_REPLICA_STARTED,
            "instance '{}' of queue manager '{}' started as a replica in {} ms (Raft log: {})",
            h.cfg.local,
            cfg.name,
            began.elapsed().as_millis(),
            h.replica
                .recovered()
                .last_log_id
                .map_or("empty".to_string(), |l| format!(
                    "last entry {} of term {}",
                    l.index, l.leader_id.term
                )),
        );
        let (end_tx, end_rx) = watch::channel(None);
        let dr = cfg
            .dr
            .clone()
            .map(|c| Arc::new(DrHandle::new(c, &cfg.name, Some(paths.ini()))));
        // A DR primary's replies wait on the lag bound, fed by the group's commits.
        let gate = dr.as_ref().filter(|d| !d.is_secondary()).map(|d| {
            let g = Gate::new(Meter::Raft(h.props.clone()), d.cfg.max_lag_bytes, 0);
            h.props.set_dr_gate(g.clone());
            g
        });
        let shared = Arc::new(Shared::new(
            started.core,
            started.storage,
            cfg.clone(),
            gate.as_ref()
                .map_or_else(|| h.props.durable_watch(), |g| g.watch()),
            end_tx,
            Some(h.clone()),
            dr.map(|d| (d, gate.clone())),
        ));
        let r = serve(shared, paths.clone(), end_rx, Some(raft_handle.clone())).await;
        h.ending.store(true, std::sync::atomic::Ordering::Release);
        let _ = h.replica.raft().shutdown().await;
        let _ = h.replica.storage().close();
        r
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    raft_rt.shutdown_timeout(Duration::from_secs(2));
    let _ = std::fs::remove_file(paths.socket());
    let _ = std::fs::remove_file(paths.pid_file());
    served?;
    crate::qm_log!(
        crate::errlog::ids::HA_INSTANCE_ENDED,
        "instance of queue manager '{}' ended",
        cfg.name
    );
    Ok(())
}
