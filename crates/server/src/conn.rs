//! One socket: the handshake, then a loop that reads whatever bytes arrived, decodes every complete
//! frame, runs them all under one core lock, and queues the replies; a writer task sends queued
//! replies in one write once the log is durable up to what they reveal. When the socket ends —
//! cleanly, by a protocol error, by missed heartbeats or by an immediate shutdown — every
//! conversation on it is disconnected, which backs out its unit of work.

use std::sync::Arc;
use std::time::Duration;

use ahash::AHashMap;
use bytes::BytesMut;
use ferrymq_proto::{kind, negotiate, parse_request, FrameDecoder, RawFrame, Request, Response};
use ferrymq_types::{MqError, Reason};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::core::{encode, error_response, Out};
use crate::dispatch::{self, Action, Session};
use crate::listeners::SocketInfo;
use crate::qmgr::Shared;
use crate::storage::now_ms;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const READ_CHUNK_BYTES: usize = 64 * 1024;
const WRITE_BATCH_BYTES: usize = 1 << 20;

/// Serves one accepted socket until it closes.
pub async fn serve<S>(stream: S, shared: Arc<Shared>, bindings: bool, info: SocketInfo)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(write_loop(wr, rx, shared.durable.clone()));
    let mut session = Session {
        convs: AHashMap::new(),
        sharecnv: 1,
        bindings,
        tx: tx.clone(),
        info,
    };
    if let Err(e) = run(&mut rd, &shared, &mut session).await {
        // Tell the peer why before closing, when the socket can still carry it.
        let _ = tx.send(Out {
            frame: encode(0, 0, &error_response(e)),
            wait_lsn: 0,
            close: true,
        });
    }
    {
        let mut core = shared.core.lock();
        let now = now_ms();
        for (_, conn) in session.convs.drain() {
            core.engine.disconnect(conn, now);
            core.remove_route(conn);
        }
        core.flush_deliveries();
    }
    drop(session);
    drop(tx);
    let _ = writer.await;
}

async fn read_more<R: AsyncRead + Unpin>(rd: &mut R, buf: &mut BytesMut) -> Result<bool, MqError> {
    buf.reserve(READ_CHUNK_BYTES);
    match rd.read_buf(buf).await {
        Ok(0) => Ok(false),
        Ok(_) => Ok(true),
        Err(e) => Err(MqError::new(
            Reason::CONNECTION_BROKEN,
            format!("socket read failed: {e}"),
        )),
    }
}

async fn run<R: AsyncRead + Unpin>(
    rd: &mut R,
    shared: &Arc<Shared>,
    s: &mut Session,
) -> Result<(), MqError> {
    let mut dec = FrameDecoder::new(ferrymq_proto::PRE_HANDSHAKE_FRAME_MAX_BYTES);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let proto = |e: ferrymq_proto::ProtoError| MqError::new(e.reason(), e.to_string());

    // Handshake: the first frame must be Hello, within a bounded time.
    let hello = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        loop {
            if let Some(f) = dec.decode(&mut buf).map_err(proto)? {
                return Ok::<RawFrame, MqError>(f);
            }
            if !read_more(rd, &mut buf).await? {
                return Err(MqError::new(
                    Reason::CONNECTION_BROKEN,
                    "peer closed before the handshake",
                ));
            }
        }
    })
    .await
    .map_err(|_| MqError::new(Reason::HEADER_ERROR, "no handshake within 10 seconds"))??;
    let Request::Hello(h) = parse_request(&hello).map_err(proto)? else {
        return Err(MqError::new(
            Reason::HEADER_ERROR,
            "the first frame must be Hello",
        ));
    };
    let cfg = &shared.cfg;
    let max_msg = shared.core.lock().engine.attrs().max_msg_len;
    let (version, max_msg_len, heartbeat_ms, sharecnv) =
        negotiate(&h, max_msg, cfg.heartbeat_ms, cfg.sharecnv).map_err(proto)?;
    s.sharecnv = sharecnv;
    dec.set_max_frame_bytes(ferrymq_proto::frame_limit_for(max_msg_len));
    let ok = Response::HelloOk {
        version,
        max_msg_len,
        heartbeat_ms,
        sharecnv,
        qmgr_name: cfg.name.clone(),
        server_id: format!("ferrymq {}", env!("CARGO_PKG_VERSION")),
    };
    s.tx.send(Out {
        frame: encode(0, 0, &ok),
        wait_lsn: 0,
        close: false,
    })
    .ok();

    let idle = if heartbeat_ms == 0 {
        Duration::from_secs(3600 * 24)
    } else {
        Duration::from_millis(heartbeat_ms as u64)
    };
    let mut missed = 0u32;
    let mut shutdown = shared.immediate_end.clone();
    let mut frames: Vec<RawFrame> = Vec::new();
    loop {
        while let Some(f) = dec.decode(&mut buf).map_err(proto)? {
            frames.push(f);
        }
        if !frames.is_empty() {
            process(shared, s, &mut frames)?;
        }
        tokio::select! {
            r = read_more(rd, &mut buf) => {
                if !r? {
                    return Ok(());
                }
                missed = 0;
            }
            _ = tokio::time::sleep(idle) => {
                // Nothing heard for a heartbeat interval: probe; three silent intervals mean the
                // peer is gone and its units of work must be backed out.
                missed += 1;
                if missed >= 3 {
                    return Err(MqError::new(Reason::CONNECTION_BROKEN, "peer missed three heartbeats"));
                }
                let mut b = BytesMut::new();
                ferrymq_proto::encode_request(0, 0, &Request::Heartbeat, &mut b);
                s.tx.send(Out { frame: b.freeze(), wait_lsn: 0, close: false }).ok();
            }
            _ = shutdown.wait_for(|v| *v) => {
                return Err(MqError::new(Reason::Q_MGR_STOPPING, "the queue manager is ending immediately"));
            }
        }
    }
}

/// Runs a batch of frames under one lock. Each frame's reply, and the deliveries its work pushed
/// to waiting getters and consumers, are queued before the next frame runs, so a socket sees
/// replies and pushed messages in the order they happened.
fn process(
    shared: &Arc<Shared>,
    s: &mut Session,
    frames: &mut Vec<RawFrame>,
) -> Result<(), MqError> {
    let now = now_ms();
    let mut soonest = u64::MAX;
    let mut admin = None;
    let mut fatal = None;
    {
        let mut core = shared.core.lock();
        s.info
            .frames
            .fetch_add(frames.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for f in frames.drain(..) {
            if f.kind == kind::HEARTBEAT_ACK {
                continue;
            }
            let req = match parse_request(&f) {
                Ok(r) => r,
                Err(e) => {
                    // The stream is still framed correctly, so the peer can be told and kept.
                    let r = Response::Status {
                        reason: e.reason(),
                        message: e.to_string(),
                    };
                    s.tx.send(Out {
                        frame: encode(f.conv, f.req, &r),
                        wait_lsn: 0,
                        close: false,
                    })
                    .ok();
                    if f.conv == 0 && f.kind != kind::HEARTBEAT {
                        fatal = Some(MqError::new(e.reason(), e.to_string()));
                        break;
                    }
                    continue;
                }
            };
            match dispatch::handle(&mut core, shared, s, f.conv, f.req, req, now) {
                Action::Reply(r, lsn) => {
                    s.tx.send(Out {
                        frame: encode(f.conv, f.req, &r),
                        wait_lsn: lsn,
                        close: false,
                    })
                    .ok();
                }
                Action::Nothing => {}
                Action::Wait { deadline_ms } => {
                    if let Some(d) = deadline_ms {
                        soonest = soonest.min(d);
                    }
                }
                Action::Later(fut) => {
                    let tx = s.tx.clone();
                    let (conv, req) = (f.conv, f.req);
                    tokio::spawn(async move {
                        let r = fut.await;
                        let _ = tx.send(Out {
                            frame: encode(conv, req, &r),
                            wait_lsn: 0,
                            close: false,
                        });
                    });
                }
                Action::Admin(a, r) => {
                    admin = Some(a);
                    s.tx.send(Out {
                        frame: encode(f.conv, f.req, &r),
                        wait_lsn: 0,
                        close: false,
                    })
                    .ok();
                }
            }
            core.flush_deliveries();
        }
    }
    shared.wait_timer.arm(soonest);
    if let Some(a) = admin {
        shared.request_end(a);
    }
    match fatal {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<Out>,
    durable: crate::lsn::LsnWatch,
) {
    let mut buf = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let mut need = first.wait_lsn;
        let mut close = first.close;
        buf.extend_from_slice(&first.frame);
        while buf.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(o) => {
                    need = need.max(o.wait_lsn);
                    close |= o.close;
                    buf.extend_from_slice(&o.frame);
                }
                Err(_) => break,
            }
        }
        if need > durable.get() && durable.wait(need).await.is_err() {
            // The log stopped: nothing more may be acknowledged.
            return;
        }
        if wr.write_all(&buf).await.is_err() {
            return;
        }
        buf.clear();
        if close {
            let _ = wr.shutdown().await;
            return;
        }
    }
    let _ = wr.flush().await;
}
