//! The replicated (HA) side of the start path: the Raft replica started on a runtime of its own,
//! the engine fed by the group's committed log, and the replica stopped in order at the end.

use super::*;

/// An HA instance's log: the group's Raft log, on the Raft runtime.
pub(super) struct Raft {
    rt: tokio::runtime::Runtime,
    handle: Arc<HaHandle>,
}

impl Raft {
    /// Starts the instance's replica (which loads its checkpoint and applies the committed log).
    /// A DR primary's lag gate (`max_lag`) is fed by the group's commits.
    pub(super) fn open(
        paths: &QmPaths,
        cfg: &QmConfig,
        io: &tokio::runtime::Runtime,
        max_lag: Option<u64>,
    ) -> Result<(Opened, Raft), String> {
        let rt = raft_runtime()?;
        let began = std::time::Instant::now();
        // A DR primary's replies wait on the lag bound, fed by the group's commits from the
        // start (the entries an instance re-applies count towards the lag it inherits).
        let gate = max_lag.map(|max| Gate::new(Meter::raft(), max, 0));
        let (p2, c2, g2) = (paths.clone(), cfg.clone(), gate.clone());
        let started = io.block_on(async {
            rt.spawn(async move { ha::start(&p2, &c2, engine_config(&c2), g2).await })
                .await
                .map_err(|e| format!("starting the replica: {e}"))?
        })?;
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
        let opened = Opened {
            core: started.core,
            storage: started.storage,
            durable: gate
                .as_ref()
                .map_or_else(|| h.props.durable_watch(), |g| g.watch()),
            gate,
            // The shipper starts when this instance becomes active.
            source: None,
            ha: Some(h.clone()),
        };
        Ok((opened, Raft { rt, handle: h }))
    }

    /// Where Raft's tasks run (the connection tasks hand it their proposals).
    pub(super) fn runtime(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }

    /// After the last application (on the I/O runtime): stops Raft and closes its log.
    pub(super) async fn stop(&self) {
        let h = &self.handle;
        h.ending.store(true, std::sync::atomic::Ordering::Release);
        let _ = h.replica.raft().shutdown().await;
        let _ = h.replica.storage().close();
    }

    /// Stops the Raft runtime.
    pub(super) fn finish(self) {
        self.rt.shutdown_timeout(Duration::from_secs(2));
    }
}
