//! The engine as the Raft state machine: committed batches applied, snapshots that are the
//! engine's checkpoints, and the group's control records (preferred instance, switch-over).

use super::*;

/// The engine as the Raft state machine.
pub struct HaApp {
    pub(super) core: Arc<Mutex<Core>>,
    pub(super) storage: Arc<Storage>,
    pub(super) props: Arc<Proposals>,
    pub(super) ecfg: EngineConfig,
    pub(super) max_record: usize,
    pub(super) me: u64,
    /// The term this instance is active in (0: not active).
    pub(super) own_term: AtomicU64,
    /// Entries of `own_term` from this instance at or after this index are the ones this process
    /// proposed as the active instance: already in its engine. (`u64::MAX` until active.) Earlier
    /// entries of the same term can exist — written before this instance restarted and took the
    /// role again in that term — and are replayed like any other.
    pub(super) own_from: AtomicU64,
    pub(super) ha: HaConfig,
    pub(super) ini: std::path::PathBuf,
    /// The preferred instance (`sethapreferred`), as the group last agreed.
    pub(super) preferred: Mutex<Option<String>>,
    pub(super) raft: std::sync::OnceLock<ferrymq_replication::FerryRaft>,
    pub(super) fast_failover: std::sync::OnceLock<ferrymq_replication::FastFailover>,
}

impl HaApp {
    pub(super) fn sink(&self) -> Box<dyn LogSink> {
        Box::new(HaSink {
            props: self.props.clone(),
            max_record: self.max_record,
        })
    }

    pub(super) fn io(e: String) -> std::io::Error {
        std::io::Error::other(e)
    }

    pub fn preferred(&self) -> Option<String> {
        self.preferred.lock().clone()
    }

    pub(super) fn apply_control(&self, text: &str) {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["PREFER", rest @ ..] => {
                let name = rest.first().map(|n| n.to_string());
                *self.preferred.lock() = name.clone();
                // Kept in qm.ini too, so a restarted instance knows it before the log says so.
                match crate::config::Ini::load(&self.ini) {
                    Ok(mut ini) => {
                        match &name {
                            Some(n) => ini.set("NativeHA", "PreferredInstance", n),
                            None => {
                                for (st, kv) in ini.stanzas.iter_mut() {
                                    if st.eq_ignore_ascii_case("NativeHA") {
                                        kv.retain(|(k, _)| k != "PreferredInstance");
                                    }
                                }
                            }
                        }
                        if let Err(e) = ini.save(&self.ini) {
                            crate::qm_log!(
                                crate::errlog::ids::HA_PREFERRED_UNRECORDED,
                                "cannot record the preferred instance: {e}"
                            );
                        }
                    }
                    Err(e) => crate::qm_log!(
                        crate::errlog::ids::HA_PREFERRED_UNRECORDED,
                        "cannot record the preferred instance: {e}"
                    ),
                }
                crate::qm_log!(
                    crate::errlog::ids::HA_PREFERRED,
                    "preferred instance is now {}",
                    name.as_deref().unwrap_or("none")
                );
            }
            ["SWITCHOVER", to, at] => {
                let at: u64 = at.parse().unwrap_or(0);
                if now_ms().saturating_sub(at) > SWITCHOVER_WINDOW_MS {
                    return; // an old record replayed on restart
                }
                let Some(raft) = self.raft.get().cloned() else {
                    return;
                };
                // The old active instance restarts itself next: its connections end and its
                // port refuses, which must not start the immediate election of a replica
                // failure (it would pre-empt the preferred instance's).
                if let Some(ff) = self.fast_failover.get().cloned() {
                    ff.set_enabled(false);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(SWITCHOVER_WINDOW_MS)).await;
                        ff.set_enabled(true);
                    });
                }
                if self.ha.node_id(to) == Some(self.me) {
                    // Stand for election once the old active's lease has run out.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(
                            ferrymq_replication::timing::SWITCHOVER_STAND_DELAY_MS,
                        ))
                        .await;
                        let _ = raft.trigger().elect().await;
                    });
                } else {
                    raft.runtime_config().elect(false);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(SWITCHOVER_WINDOW_MS)).await;
                        raft.runtime_config().elect(true);
                    });
                }
            }
            _ => crate::qm_log!(
                crate::errlog::ids::HA_UNKNOWN_CONTROL,
                "unknown HA control record '{text}'; ignored"
            ),
        }
    }
}

pub(super) fn checkpoint_key(meta: &[u8]) -> std::io::Result<Lsn> {
    let m: Meta = serde_json::from_slice(meta).map_err(std::io::Error::other)?;
    // Key 1 is the instance's initial checkpoint (crtmqm); later ones must sort after it.
    Ok(m.last_log_id.map_or(1, |l| l.index + 2))
}

impl Apply for HaApp {
    fn open(&self, _dir: &Path) -> std::io::Result<Option<Vec<u8>>> {
        let (_, image, meta) = self.storage.load_latest().map_err(HaApp::io)?;
        let engine = Engine::restore(self.ecfg.clone(), self.sink(), image)
            .map_err(|e| HaApp::io(e.to_string()))?;
        self.core.lock().engine = engine;
        Ok((!meta.is_empty()).then_some(meta))
    }

    fn apply(&self, log_id: &LogId, rec: &AppRecord) {
        if rec.kind == KIND_CONTROL {
            self.apply_control(&String::from_utf8_lossy(&rec.payload));
            return;
        }
        let term = self.own_term.load(Ordering::Acquire);
        if log_id.index >= self.own_from.load(Ordering::Acquire)
            && log_id.leader_id.term == term
            && log_id.leader_id.node_id == self.me
        {
            return;
        }
        if rec.kind != KIND_ENGINE_BATCH {
            crate::qm_log!(
                crate::errlog::ids::HA_UNKNOWN_ENTRY,
                "replicated entry {} has unknown kind {}; ignored",
                log_id.index,
                rec.kind
            );
            return;
        }
        self.props
            .applied_elsewhere(log_id.index, rec.payload.len());
        let mut core = self.core.lock();
        for r in ferrymq_engine::batch::records(&rec.payload) {
            let res = r.map_err(|e| e.to_string()).and_then(|(kind, payload)| {
                core.engine
                    .replay(kind, Bytes::copy_from_slice(payload))
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = res {
                // The group committed a record this engine cannot apply: its state can no longer
                // be trusted. Restart and rebuild from the checkpoint and the log.
                crate::qm_log!(
                    crate::errlog::ids::HA_APPLY_FAILED,
                    "cannot apply replicated entry {}: {e}; restarting this instance",
                    log_id.index
                );
                restart_instance("state machine failure");
            }
        }
    }

    fn capture(&self) -> Capture {
        let core = self.core.lock();
        let image = core.engine.checkpoint_image(now_ms());
        // Active (its base is set under the core lock when it takes over): the engine may hold
        // records not yet applied. Otherwise the engine is exactly the applied state.
        let active = self.props.is_active();
        let at: Option<CaptureAt> = if active {
            // The active engine is ahead of what is applied: its image ends at the last
            // record logged, whose batch must be cut here and committed first.
            let seq = self.props.seal();
            drop(core);
            self.props.wake_replicator();
            let props = self.props.clone();
            Some(Box::pin(async move {
                tokio::task::spawn_blocking(move || props.log_id_of(seq))
                    .await
                    .ok()
                    .flatten()
            }))
        } else {
            None
        };
        let storage = self.storage.clone();
        Capture {
            at,
            write: Box::new(move |meta| {
                let key = checkpoint_key(meta)?;
                storage
                    .write_checkpoint(key, image, meta.to_vec())
                    .map(|_| ())
                    .map_err(HaApp::io)
            }),
        }
    }

    fn export(&self) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.storage.export_latest().map_err(HaApp::io)
    }

    fn import(&self, meta: &[u8], data: &[u8]) -> std::io::Result<()> {
        let image = decode_export(data).map_err(HaApp::io)?;
        let key = checkpoint_key(meta)?;
        // Restored first: a damaged image is refused before it becomes this instance's checkpoint.
        let engine = Engine::restore(self.ecfg.clone(), self.sink(), image.clone())
            .map_err(|e| HaApp::io(e.to_string()))?;
        self.storage
            .write_checkpoint(key, image, meta.to_vec())
            .map_err(HaApp::io)?;
        self.core.lock().engine = engine;
        Ok(())
    }
}
