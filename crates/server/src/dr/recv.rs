//! The secondary's side of DR: listen for the primary, tell it how far this state reaches, apply
//! and log what it sends, and acknowledge each position once this site's log holds it durably.
//! A new connection replaces the one before (a primary that restarted, or the next active
//! instance of an HA group, while the old connection may still look open).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::records::DrMark;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::wire::{self, Frame};
use super::{DrHandle, LinkState};
use crate::qmgr::Shared;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

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
            crate::qm_log!("ferrymq: {e}");
            dr.set_error(e);
            return;
        }
    };
    crate::qm_log!("ferrymq: DR secondary: waiting for the primary's stream on {addr}");
    let mut current: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            continue;
        };
        if let Some(old) = current.take() {
            old.abort();
        }
        let (shared, dr) = (shared.clone(), dr.clone());
        current = Some(tokio::spawn(async move {
            let peer = peer.to_string();
            if let Err(e) = session(&shared, &dr, sock, &peer).await {
                crate::qm_log!("ferrymq: DR stream from {peer}: {e}");
                dr.set_error(e);
            }
            dr.set_link(LinkState::Disconnected, "");
        }));
    }
}

async fn session(
    shared: &Shared,
    dr: &DrHandle,
    sock: TcpStream,
    peer: &str,
) -> Result<(), String> {
    let _ = sock.set_nodelay(true);
    let (mut rd, mut wr) = sock.into_split();
    let io = |e: std::io::Error| e.to_string();
    let hello = tokio::time::timeout(HELLO_TIMEOUT, wire::read(&mut rd))
        .await
        .map_err(|_| "no hello".to_string())?
        .map_err(io)?;
    let Some(Frame::Hello { qmgr, stream }) = hello else {
        return Err(format!("expected a hello, got {hello:?}"));
    };
    if qmgr != shared.cfg.name {
        let why = format!("this is queue manager '{}', not '{qmgr}'", shared.cfg.name);
        let _ = wire::write(&mut wr, &Frame::Refuse(why.clone())).await;
        return Err(why);
    }
    let state = shared.core.lock().engine.dr_state();
    wire::write(&mut wr, &Frame::Position(state))
        .await
        .map_err(io)?;
    dr.set_link(LinkState::Normal, peer);
    crate::qm_log!(
        "ferrymq: DR secondary: primary connected from {peer} (stream {stream:016x}); this site holds {}",
        state.mark.map_or("no position".to_string(), |m| format!("stream {:016x} to {}", m.stream, m.pos))
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
            Frame::Reset { stream, pos } => {
                crate::qm_log!("ferrymq: DR secondary: full copy from {peer} (stream {stream:016x} at {pos}); this site's state is replaced");
                dr.set_link(LinkState::FullCopy, peer);
                dr.set_resync("FullCopy");
                cur = stream;
                if let Err(e) = shared.core.lock().engine.dr_reset() {
                    break Err(format!("cannot start the full copy: {e}"));
                }
            }
            Frame::Records { end, mark, records } => {
                let len = records.len();
                let recs = match wire::split_records(records) {
                    Ok(r) => r,
                    Err(e) => break Err(e),
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
