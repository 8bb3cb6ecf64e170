//! Roles over time: the replicator that proposes batches while this instance leads, taking over
//! when it becomes leader, giving up the role when it loses it, and snapshot requests as the
//! ring fills.

use super::*;
use ferrymq_replication::ha::{RaftGroup, Replicator, SnapshotPacer};

/// Proposes the engine's batches to Raft, in order, until leadership is lost (the policy is
/// `ferrymq_replication::ha`'s).
pub async fn replicate(h: Arc<HaHandle>) {
    ferrymq_replication::ha::replicate(Replicator {
        props: h.props.clone(),
        group: RaftGroup {
            raft: h.replica.raft().clone(),
            log: h.replica.storage().clone(),
        },
        max_in_flight: h.cfg.max_in_flight,
    })
    .await
}

/// Makes this (leading) instance's engine complete: confirms leadership with a quorum, waits
/// until every entry in its log — including any it wrote in this term before a restart — is
/// applied, and marks the point after which entries are its own. Returns the last applied id.
pub(super) async fn activate_engine(
    h: &HaHandle,
    raft: &ferrymq_replication::FerryRaft,
) -> Result<(LogId, String), String> {
    let t0 = Instant::now();
    raft.ensure_linearizable()
        .await
        .map_err(|e| format!("leadership not confirmed: {e}"))?;
    let confirmed = t0.elapsed();
    let (applied_before, last) = {
        let m = raft.metrics().borrow().clone();
        (m.last_applied.map_or(0, |l| l.index), m.last_log_index)
    };
    let m = raft
        .wait(Some(Duration::from_secs(30)))
        .applied_index_at_least(last, "activation")
        .await
        .map_err(|e| format!("the log was not applied: {e}"))?;
    let timeline = format!(
        "leadership confirmed in {} ms, {} entries applied in {} ms",
        confirmed.as_millis(),
        last.unwrap_or(0).saturating_sub(applied_before),
        (t0.elapsed() - confirmed).as_millis()
    );
    let applied = m
        .last_applied
        .ok_or_else(|| "nothing applied yet".to_string())?;
    let core = h.app.core.lock();
    // Replies are held within the DR lag bound from the secondary's last recorded
    // acknowledgement (replicated in `DR_ACKED`) before any application is served; the shipper
    // then takes over (or the grace period ends the hold).
    if let (Some(g), Some(pos)) = (&h.dr_gate, crate::dr::recorded_ack(core.engine.dr_state())) {
        g.bound(Some(pos));
    }
    h.props.activate(applied);
    h.app.own_from.store(applied.index + 1, Ordering::Release);
    drop(core);
    Ok((applied, timeline))
}

/// Watches the replica's role: takes over when it becomes leader, restarts the instance when
/// it loses the role, and requests snapshots as the ring fills. `activate` starts the
/// listeners of an instance that has just become active.
pub async fn monitor(h: Arc<HaHandle>, activate: impl Fn()) {
    let raft = h.replica.raft().clone();
    let me = h.cfg.local_id();
    let mut metrics = raft.metrics();
    let mut snapshots = SnapshotPacer::new(h.props.clock().clone());
    let mut in_sync_since: Option<Instant> = None;
    let mut failed_term = 0;
    loop {
        if h.ending.load(Ordering::Acquire) {
            return;
        }
        let m = metrics.borrow().clone();
        if m.state == ServerState::Shutdown {
            restart_instance("the replica stopped");
        }
        let active = h.is_active();
        let leading = m.state == ServerState::Leader && m.current_leader == Some(me);
        if !active && leading {
            let began = Instant::now();
            h.app.own_term.store(m.current_term, Ordering::Release);
            match activate_engine(&h, &raft).await {
                Ok((applied, timeline)) => {
                    h.active.store(true, Ordering::Release);
                    let listening = Instant::now();
                    activate();
                    crate::qm_log!(
                        crate::errlog::ids::HA_ACTIVE, "instance '{}' is now the active instance (term {}, log index {}), {} ms after its election ({timeline}, listeners started in {} ms)",
                        h.cfg.local,
                        m.current_term,
                        applied.index,
                        began.elapsed().as_millis(),
                        listening.elapsed().as_millis()
                    );
                }
                Err(why) => {
                    // A restarted instance can find itself leader of its old term without a
                    // quorum (a partition): say so once per term, then retry quietly.
                    if failed_term != m.current_term {
                        failed_term = m.current_term;
                        crate::qm_log!(
                            crate::errlog::ids::HA_NOT_YET_ACTIVE,
                            "instance '{}' leads term {} but cannot take over yet: {why}",
                            h.cfg.local,
                            m.current_term
                        );
                    }
                    h.app.own_term.store(0, Ordering::Release);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        } else if active {
            if !leading || m.current_term != h.app.own_term.load(Ordering::Acquire) {
                restart_instance("another instance became active");
            }
            if m.millis_since_quorum_ack
                .is_some_and(|ms| ms > QUORUM_LOSS_MS)
            {
                restart_instance("lost contact with the majority of the group");
            }
            if h.props.is_lost() {
                restart_instance("a replicated write failed (leadership lost)");
            }
            if let Some(to) = h.switch_over_due(&m, &mut in_sync_since) {
                let rec = AppRecord {
                    kind: KIND_CONTROL,
                    payload: format!("SWITCHOVER {to} {}", now_ms()).into_bytes(),
                };
                if raft.client_write(rec).await.is_ok() {
                    restart_instance(&format!("switching over to the preferred instance '{to}'"));
                }
            }
        }
        let (cap, _) = h.replica.storage().geometry();
        let used = h.replica.storage().used_bytes().unwrap_or(0);
        if snapshots.due(used, cap, m.last_applied, m.snapshot) {
            let _ = raft.trigger().snapshot().await;
        }
        // Metrics change with every entry; acting on each change would cost more CPU than the
        // decisions are worth. Look again after a change, at most every 20 ms, or every 50 ms.
        tokio::select! {
            r = metrics.changed() => {
                if r.is_err() && !h.ending.load(Ordering::Acquire) {
                    restart_instance("the replica stopped");
                }
                // Except when this instance has just been elected: taking over waits for nothing.
                let elected = {
                    let m = metrics.borrow();
                    m.state == ServerState::Leader && m.current_leader == Some(me)
                };
                if !elected || h.is_active() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(
                ferrymq_replication::timing::MONITOR_POLL_MAX_MS,
            )) => {}
        }
    }
}
