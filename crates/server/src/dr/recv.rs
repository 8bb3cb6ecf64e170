//! The secondary's side of DR: listen for the primary, tell it how far this state reaches, apply
//! and log what it sends, and acknowledge each position once this site's log holds it durably.
//! A new connection replaces the one before (a primary that restarted, or the next active
//! instance of an HA group, while the old connection may still look open).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferrymq_dr::wire::{self, CopyProgress, Frame};
use ferrymq_engine::dr::DrState;
use ferrymq_engine::records::DrMark;
use ferrymq_engine::{Engine, MemoryLog};
use ferrymq_replication::link::LinkStream;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::{DrHandle, LinkState};
use crate::qmgr::Shared;
use crate::storage::now_ms;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// A full copy being received: built apart from the state this site holds (which stays whole
/// and is what `makedrprimary` promotes until the copy is complete), then installed at once as a
/// checkpoint, so a copy needs no room in this site's recovery log and a broken link leaves the
/// last consistent state in place. It outlives a session, so a new connection resumes it.
struct Staging {
    stream: u64,
    pos: u64,
    /// Records received in whole frames.
    records: u64,
    engine: Engine,
}

impl Staging {
    fn progress(&self) -> CopyProgress {
        CopyProgress {
            stream: self.stream,
            pos: self.pos,
            records: self.records,
        }
    }
}

/// The file that says a full copy is being staged (for `makedrprimary`, which promotes the last
/// consistent state and says what it leaves out); removed once the copy is installed or dropped.
pub const COPYING_FILE: &str = "dr.copying";

fn note_copying(shared: &Shared, st: Option<&Staging>) {
    let path = shared.storage.store_dir().join(COPYING_FILE);
    match st {
        Some(s) => {
            let _ = std::fs::write(
                &path,
                format!(
                    "stream {:016x} position {} records {}\n",
                    s.stream, s.pos, s.records
                ),
            );
        }
        None => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Listens on `DR:LocalAddress` and takes the primary's stream until the process ends.
pub async fn run_secondary(shared: Arc<Shared>, dr: Arc<DrHandle>) {
    let Some(addr) = dr.cfg.local.clone() else {
        dr.set_error("no DR:LocalAddress to receive the stream on".into());
        return;
    };
    if let Some(m) = shared.core.lock().engine.dr_state().mark {
        dr.stream.store(m.stream, Ordering::Release);
        dr.acked.store(m.pos, Ordering::Release);
    }
    let listener = match TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            let e = format!("cannot listen for the DR stream on {addr}: {e}");
            crate::qm_log!(crate::errlog::ids::DR_RECEIVER_FAILED, "{e}");
            dr.set_error(e);
            return;
        }
    };
    crate::qm_log!(
        crate::errlog::ids::DR_WAITING,
        "DR secondary: waiting for the primary's stream on {addr}"
    );
    let mut current: Option<tokio::task::JoinHandle<()>> = None;
    let staging: Arc<Mutex<Option<Staging>>> = Arc::new(Mutex::new(None));
    note_copying(&shared, None);
    // A connection replaces the session before it only once its link is secured (a TLS
    // handshake, in a task of its own): one refused cannot cut the primary's stream.
    let (secured_tx, mut secured) = mpsc::channel::<(LinkStream, std::net::SocketAddr)>(4);
    loop {
        let (sock, peer) = tokio::select! {
            accepted = listener.accept() => {
                if let Ok((sock, peer)) = accepted {
                    let (links, tx) = (dr.links.clone(), secured_tx.clone());
                    tokio::spawn(async move {
                        if let Ok(s) = links.accept(sock, peer).await {
                            let _ = tx.send((s, peer)).await;
                        }
                    });
                }
                continue;
            }
            Some(s) = secured.recv() => s,
        };
        if let Some(old) = current.take() {
            old.abort();
        }
        let (shared, dr, staging) = (shared.clone(), dr.clone(), staging.clone());
        current = Some(tokio::spawn(async move {
            let peer = peer.to_string();
            if let Err(e) = session(&shared, &dr, sock, &peer, &staging).await {
                crate::qm_log!(
                    crate::errlog::ids::DR_STREAM_ERROR,
                    "DR stream from {peer}: {e}"
                );
                dr.set_error(e);
            }
            dr.set_link(LinkState::Disconnected, "");
        }));
    }
}

async fn session(
    shared: &Shared,
    dr: &DrHandle,
    sock: LinkStream,
    peer: &str,
    staging: &Arc<Mutex<Option<Staging>>>,
) -> Result<(), String> {
    let (mut rd, mut wr) = sock.into_split();
    let io = |e: std::io::Error| e.to_string();
    let hello = tokio::time::timeout(HELLO_TIMEOUT, wire::read(&mut rd))
        .await
        .map_err(|_| "no hello".to_string())?
        .map_err(io)?;
    let Some(Frame::Hello {
        qmgr,
        stream,
        max_lag,
    }) = hello
    else {
        return Err(format!("expected a hello, got {hello:?}"));
    };
    if qmgr != shared.cfg.name {
        let why = format!("this is queue manager '{}', not '{qmgr}'", shared.cfg.name);
        let _ = wire::write(&mut wr, &Frame::Refuse(why.clone())).await;
        return Err(why);
    }
    if let Some(b) = max_lag {
        dr.primary_bound(b);
    }
    let state = shared.core.lock().engine.dr_state();
    let progress = staging.lock().as_ref().map(Staging::progress);
    wire::write(&mut wr, &Frame::Position(state, progress))
        .await
        .map_err(io)?;
    dr.set_link(LinkState::Normal, peer);
    crate::qm_log!(
        crate::errlog::ids::DR_PRIMARY_CONNECTED,
        "DR secondary: primary connected from {peer} (stream {stream:016x}); this site holds {}",
        state.mark.map_or("no position".to_string(), |m| format!(
            "stream {:016x} to {}",
            m.stream, m.pos
        ))
    );

    // Acknowledgements go out as this site's log makes each position durable.
    let (ack_tx, mut ack_rx) = mpsc::unbounded_channel::<(u64, u64)>();
    let durable = shared.durable.clone();
    let acker = tokio::spawn(async move {
        while let Some((mut lsn, mut pos)) = ack_rx.recv().await {
            // Coalesce: acknowledge the newest position whose record is already queued.
            while let Ok((l, p)) = ack_rx.try_recv() {
                (lsn, pos) = (l, p);
            }
            if durable.wait(lsn).await.is_err() {
                return;
            }
            if wire::write(&mut wr, &Frame::Ack(pos)).await.is_err() {
                return;
            }
        }
    });
    let mut cur = stream;
    let r = loop {
        let f = match wire::read(&mut rd).await {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(io(e)),
        };
        match f {
            Frame::Reset { stream, pos } if shared.ha.is_none() => {
                crate::qm_log!(crate::errlog::ids::DR_COPY_STARTED, "DR secondary: full copy from {peer} (stream {stream:016x} at {pos}); staged apart, this site's state stays until it is complete");
                dr.set_link(LinkState::FullCopy, peer);
                dr.set_resync("FullCopy");
                cur = stream;
                let ecfg = shared.core.lock().engine.config().clone();
                let st = Staging {
                    stream,
                    pos,
                    records: 0,
                    engine: Engine::new(ecfg, Box::new(MemoryLog::default())),
                };
                note_copying(shared, Some(&st));
                *staging.lock() = Some(st);
            }
            Frame::Reset { stream, pos } => {
                // A recovery HA group takes the copy through its own replicated log.
                crate::qm_log!(crate::errlog::ids::DR_COPY_STARTED, "DR secondary: full copy from {peer} (stream {stream:016x} at {pos}); this site's state is replaced");
                dr.set_link(LinkState::FullCopy, peer);
                dr.set_resync("FullCopy");
                cur = stream;
                if let Err(e) = shared.core.lock().engine.dr_reset() {
                    break Err(format!("cannot start the full copy: {e}"));
                }
            }
            Frame::ResumeCopy { stream, pos, skip } => {
                let mut g = staging.lock();
                match g.as_ref() {
                    Some(s) if s.stream == stream && s.pos == pos && s.records == skip => {
                        crate::qm_log!(
                            crate::errlog::ids::DR_COPY_RESUMED,
                            "DR secondary: the full copy from {peer} resumes after {skip} records"
                        );
                        dr.set_link(LinkState::FullCopy, peer);
                        note_copying(shared, Some(s));
                        cur = stream;
                    }
                    other => {
                        let why = format!(
                            "cannot resume a full copy at record {skip} of stream {stream:016x} at {pos}: this site has staged {:?}",
                            other.map(Staging::progress)
                        );
                        // Start afresh next time.
                        *g = None;
                        drop(g);
                        note_copying(shared, None);
                        break Err(why);
                    }
                }
            }
            Frame::Records { end, mark, records } if staging.lock().is_some() => {
                let len = records.len();
                dr.bytes.fetch_add(len as u64, Ordering::Relaxed);
                let recs = match ferrymq_engine::batch::split(&records) {
                    Ok(r) => r,
                    Err(e) => break Err(e.to_string()),
                };
                let n = recs.len() as u64;
                let staged = {
                    let mut g = staging.lock();
                    let st = g.as_mut().expect("checked");
                    let mut res = Ok(());
                    for (k, p) in recs {
                        if ferrymq_engine::records::kind::is_dr(k) {
                            continue;
                        }
                        if let Err(e) = st.engine.replay(k, p) {
                            res = Err(format!("cannot apply a record of the full copy: {e}"));
                            break;
                        }
                    }
                    if res.is_ok() {
                        st.records += n;
                    } else {
                        // A copy that does not apply is dropped whole; the next one starts afresh.
                        *g = None;
                    }
                    res
                };
                if let Err(e) = staged {
                    note_copying(shared, None);
                    break Err(e);
                }
                if !mark {
                    continue;
                }
                let st = staging.lock().take().expect("checked");
                let (stream, records) = (st.stream, st.records);
                let installed = tokio::task::block_in_place(|| install_copy(shared, st, end));
                note_copying(shared, None);
                match installed {
                    Ok(msgs) => {
                        crate::qm_log!(crate::errlog::ids::DR_COPY_INSTALLED, "DR secondary: full copy installed ({records} records, {msgs} messages); this site holds stream {stream:016x} to {end}");
                        dr.stream.store(stream, Ordering::Release);
                        dr.acked.store(end, Ordering::Release);
                        dr.set_link(LinkState::Normal, peer);
                        // The checkpoint holding it is durable already.
                        let _ = ack_tx.send((0, end));
                    }
                    Err(e) => break Err(format!("cannot install the full copy: {e}")),
                }
            }
            Frame::Records { end, mark, records } => {
                let len = records.len();
                let recs = match ferrymq_engine::batch::split(&records) {
                    Ok(r) => r,
                    Err(e) => break Err(e.to_string()),
                };
                let applied = {
                    let mut core = shared.core.lock();
                    let mut res = core
                        .engine
                        .apply_shipped_chunk(recs)
                        .map(|_| None)
                        .map_err(|e| format!("cannot apply a record from the primary: {e}"));
                    if mark && res.is_ok() {
                        res = core
                            .engine
                            .log_dr_mark(DrMark {
                                stream: cur,
                                pos: end,
                            })
                            .map(Some)
                            .map_err(|e| format!("cannot record the DR position: {e}"));
                    }
                    res
                };
                dr.bytes.fetch_add(len as u64, Ordering::Relaxed);
                match applied {
                    Ok(Some(lsn)) => {
                        dr.stream.store(cur, Ordering::Release);
                        dr.acked.store(end, Ordering::Release);
                        if dr.st.lock().link == LinkState::FullCopy {
                            dr.set_link(LinkState::Normal, peer);
                        }
                        let _ = ack_tx.send((lsn, end));
                    }
                    Ok(None) => {}
                    Err(e) => break Err(e),
                }
            }
            other => break Err(format!("unexpected frame from the primary: {other:?}")),
        }
    };
    drop(ack_tx);
    let _ = tokio::time::timeout(Duration::from_secs(1), acker).await;
    r
}

/// Makes a completed full copy this site's state: written as a checkpoint (its messages into the
/// message store, then the manifest, then the log's checkpoint moved past everything before),
/// and only then swapped in, under the checkpoint lock so no other checkpoint can come between.
/// A crash before the manifest is written leaves the previous state; after it, the copy.
/// Returns the number of messages installed.
fn install_copy(shared: &Shared, st: Staging, end: u64) -> Result<usize, String> {
    let mut image = st.engine.checkpoint_image(now_ms());
    drop(st.engine);
    image.dr = DrState {
        stream: 0,
        mark: Some(DrMark {
            stream: st.stream,
            pos: end,
        }),
        acked: None,
    };
    let msgs = image.messages.len();
    let core = &shared.core;
    shared
        .storage
        .install_image(image, |image| core.lock().engine.replace_with_image(image))?;
    Ok(msgs)
}
