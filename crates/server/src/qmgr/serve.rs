//! Serving a started queue manager and ending it: the bindings socket and listeners, the
//! accept loop, and a controlled or immediate end.

use super::*;

/// Starts the queue manager's TCP listener and the listener objects defined to start with it
/// (none on a DR secondary: it takes no applications until it is made primary).
fn start_listeners(shared: &Arc<Shared>) -> Result<(), String> {
    if shared.is_dr_secondary() {
        return Ok(());
    }
    // An HA group gets its QMID when its first instance becomes active (its instances are
    // created apart, from identical state), and a queue manager created before FerryMQ kept
    // one gets it now.
    if let Some(Err(e)) = shared
        .core
        .lock()
        .engine
        .assign_identity(crate::storage::now_ms(), crate::storage::now_stamp())
    {
        crate::qm_log!(
            crate::errlog::ids::QMID_NOT_RECORDED,
            "the queue manager's identifier (QMID) could not be recorded: {e}; DISPLAY QMGR shows none until a later start records it"
        );
    }
    // Declarative configuration: applied before applications can connect.
    crate::autoconfig::apply(shared);
    if shared.cfg.port != 0 {
        // Already running (this instance became active before) is fine.
        match listeners::start(
            shared,
            listeners::QMGR_LISTENER,
            &shared.cfg.bind_address,
            shared.cfg.port,
        ) {
            Err(e) if e.reason != ferrymq_types::Reason::LISTENER_STARTED => {
                return Err(e.to_string())
            }
            _ => {}
        }
    }
    let defined: Vec<_> = shared
        .core
        .lock()
        .engine
        .objects()
        .filter(|o| o.kind == ferrymq_types::ObjectKind::Listener)
        .cloned()
        .collect();
    listeners::start_controlled(shared, defined);
    crate::channels::start_at_strmqm(shared);
    Ok(())
}

pub(super) async fn serve(
    shared: Arc<Shared>,
    paths: QmPaths,
    mut end_rx: watch::Receiver<Option<AdminAction>>,
    raft_rt: Option<tokio::runtime::Handle>,
) -> Result<(), String> {
    let sock = paths.socket();
    // The lock is ours, so a socket file left here is stale (a killed predecessor).
    let _ = std::fs::remove_file(&sock);
    let unix = UnixListener::bind(&sock)
        .map_err(|e| format!("cannot listen on {}: {e}", sock.display()))?;
    crate::metrics::start(shared.clone()).await?;
    crate::fdlimit::raise_and_check(shared.cfg.max_sockets.min(shared.cfg.max_active));
    if let Some(w) = crate::wake_latency::start(shared.cfg.cpu_wake_latency_us) {
        crate::qm_log!(crate::errlog::ids::WAKE_LATENCY_UNAVAILABLE, "{w}");
    }
    let timer = tokio::spawn(wait_timer::run(shared.clone()));
    let expiry = tokio::spawn(crate::expiry::run(shared.clone()));
    let memory_watch = tokio::spawn(crate::memory_watch::run(shared.clone()));
    let qpubsub_stop = Arc::new(tokio::sync::Notify::new());
    let mut qpubsub = tokio::spawn(crate::qpubsub::run(shared.clone(), qpubsub_stop.clone()));
    match shared.ha.clone() {
        None => start_listeners(&shared)?,
        Some(h) => {
            let s2 = shared.clone();
            let rt = raft_rt.unwrap_or_else(tokio::runtime::Handle::current);
            rt.spawn(ha::replicate(h.clone()));
            tokio::spawn(ha::monitor(h.clone(), move || {
                if let Err(e) = start_listeners(&s2) {
                    crate::qm_log!(crate::errlog::ids::LISTENER_FAILED, "{e}");
                }
                let source = Source::raft(
                    h.replica.storage().clone(),
                    h.replica.applied_watch(),
                    h.props.clone(),
                );
                start_dr(&s2, Some(source));
            }));
        }
    }
    // Written whole, then renamed into place: strmqm (and every reader) takes an existing
    // qm.pid as the running process's, so it must never be seen empty or half written.
    let pid_tmp = paths.dir.join("qm.pid.tmp");
    std::fs::write(&pid_tmp, format!("{}\n", std::process::id()))
        .and_then(|()| std::fs::rename(&pid_tmp, paths.pid_file()))
        .map_err(|e| format!("writing {}: {e}", paths.pid_file().display()))?;
    crate::qm_log!(
        crate::errlog::ids::QM_RUNNING,
        "queue manager '{}' running (pid {}), bindings socket {}, TCP port {}",
        shared.cfg.name,
        std::process::id(),
        sock.display(),
        shared.cfg.port
    );
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| e.to_string())?;
    let mode = loop {
        tokio::select! {
            r = unix.accept() => {
                if let Ok((s, _)) = r {
                    let user = listeners::peer_user(&s);
                    listeners::spawn_conn(&shared, s, "local".into(), true, user);
                }
            }
            _ = sigterm.recv() => break AdminAction::ShutdownImmediate,
            _ = sigint.recv() => break AdminAction::ShutdownImmediate,
            _ = end_rx.changed() => {
                match *end_rx.borrow() {
                    Some(AdminAction::ShutdownImmediate) => break AdminAction::ShutdownImmediate,
                    Some(AdminAction::ShutdownControlled) => break AdminAction::ShutdownControlled,
                    None => {}
                }
            }
        }
    };
    shared.core.lock().quiescing = true;
    drop(unix);
    shared.control.lock().stop_all();
    crate::channels::stop_all(&shared);
    // The queued publish interface's connections are the queue manager's own: they go now.
    qpubsub_stop.notify_one();
    let _ = tokio::time::timeout(Duration::from_secs(2), &mut qpubsub).await;
    if mode == AdminAction::ShutdownControlled {
        crate::qm_log!(
            crate::errlog::ids::QM_ENDING,
            "controlled end: waiting for applications to disconnect"
        );
        // Applications keep working until they disconnect; an immediate end or a signal cuts it short.
        loop {
            if shared.core.lock().engine.connection_count() == 0 {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = sigterm.recv() => break,
                _ = end_rx.changed() => {
                    if *end_rx.borrow() == Some(AdminAction::ShutdownImmediate) { break; }
                }
            }
        }
    }
    shared.immediate_tx.send_replace(true);
    timer.abort();
    expiry.abort();
    memory_watch.abort();
    qpubsub.abort();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let live = shared.control.lock().live.clone();
    while live.load(std::sync::atomic::Ordering::Acquire) > 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Nothing more is acknowledged now: a DR primary gives its secondary the rest.
    crate::dr::ship::hand_over(&shared).await;
    Ok(())
}
