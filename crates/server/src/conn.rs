//! One socket: the handshake, then a loop that reads whatever bytes arrived, decodes every complete
//! frame, runs them all under one core lock, and queues the replies; a writer task sends queued
//! replies in one write once the log is durable up to what they reveal. Replies that may leave at
//! once are written by the reader itself at the end of its batch when the writer is idle, so the
//! common request/reply costs no hand-off between tasks. When the socket ends —
//! cleanly, by a protocol error, by missed heartbeats, by a client that does not take its replies
//! or by an immediate shutdown — every conversation on it is disconnected, which backs out its
//! unit of work.
//!
//! Back pressure: every frame queued for the socket is counted in bytes (`core::OutQueue`). Above
//! the pause bound the reader stops running and reading requests until the writer has drained the
//! queue below it; a socket that stays above it for a heartbeat interval, whose writes make no
//! progress for a heartbeat interval, or whose queue passes the hard cap
//! (`Channels:MaxConnMemory`) is closed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use ahash::AHashMap;
use bytes::BytesMut;
use ferrymq_proto::{
    kind, negotiate, parse_request, FrameDecoder, RawFrame, Request, Response, FLAG_LATER,
};
use ferrymq_types::{limits, MqError, Reason};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::core::{encode, error_response, Out, OutQueue};
use crate::dispatch::{self, Action, Session};
use crate::listeners::SocketInfo;
use crate::qmgr::Shared;
use crate::storage::now_ms;

pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A socket's read buffer grows from the small size (enough for a handshake or a heartbeat) by
/// doubling while reads fill it, up to the large one, and is given back when the socket is idle
/// for a heartbeat interval: tens of thousands of idle sockets hold almost nothing.
const READ_CHUNK_MIN_BYTES: usize = 512;
const READ_CHUNK_MAX_BYTES: usize = 64 * 1024;
/// How long a socket keeps its read buffer after a read that had to allocate it, if it is empty
/// by then (rounded up to the heartbeat grid): tens of thousands of mostly idle sockets must not
/// each hold one, while a busy socket pays for a new one about once a second.
const READ_BUF_KEEP: Duration = Duration::from_secs(1);
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// Frames at least this large are written from their own buffer, not copied into the batch.
const LARGE_FRAME_BYTES: usize = 64 * 1024;

/// Serves one accepted socket until it closes.
pub async fn serve<S>(stream: S, shared: Arc<Shared>, bindings: bool, info: SocketInfo)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    serve_from(stream, BytesMut::new(), shared, bindings, info).await
}

/// Serves a socket whose first bytes were already read (`read`): a requester channel's own
/// socket, on which its server's sender Hello came, served as if the server had connected.
pub async fn serve_from<S>(
    stream: S,
    read: BytesMut,
    shared: Arc<Shared>,
    bindings: bool,
    info: SocketInfo,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, wr) = tokio::io::split(stream);
    // The write half is shared: the writer task writes what waits for the log or comes from
    // other sockets; the reader writes the replies of a batch it ran itself when the writer is
    // idle (see `write_inline`).
    let wr = Arc::new(tokio::sync::Mutex::new(wr));

    let hard = shared.cfg.max_conn_memory;
    let q = Arc::new(OutQueue::new(
        limits::CONN_OUTBOUND_PAUSE_BYTES.min(hard / 4),
        hard,
    ));
    let (tx, rx) = crate::core::out_channel(q.clone());
    // Until the handshake says otherwise, a write that makes no progress for the server's own
    // heartbeat interval means the peer is not reading.
    let stall = Arc::new(std::sync::atomic::AtomicU64::new(stall_ms(
        shared.cfg.heartbeat_ms,
    )));
    let writer = tokio::spawn(write_loop(
        wr.clone(),
        rx,
        shared.durable.clone(),
        q.clone(),
        stall.clone(),
    ));
    let mut session = Session {
        convs: AHashMap::new(),
        sharecnv: 1,
        bindings,
        tx: tx.clone(),
        info,
        admin_refusal_logged: false,
        principals: AHashMap::new(),
        channel: None,
        identities: AHashMap::new(),
        connect_groups: Vec::new(),
        version: 1,
        async_puts: AHashMap::new(),
    };
    if let Err(e) = run(&mut rd, &wr, read, &shared, &mut session, &stall).await {
        // Tell the peer why before closing, when the socket can still carry it.
        if !q.is_killed() {
            let _ = tx.send(Out::frame(encode(0, 0, &error_response(e)), 0, true));
        }
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
    // A peer that does not read must not keep the socket (and what is queued for it) open: the
    // writer gets one stall interval to finish, then is dropped with the socket.
    let wait = Duration::from_millis(stall.load(std::sync::atomic::Ordering::Relaxed));
    let mut writer = writer;
    if q.is_killed() || tokio::time::timeout(wait, &mut writer).await.is_err() {
        writer.abort();
        let _ = writer.await;
    }
}

/// How long a write may make no progress, or the queue stay over its pause bound, before the
/// peer is taken for one that does not read: the heartbeat interval (a day without heartbeats).
fn stall_ms(heartbeat_ms: u32) -> u64 {
    if heartbeat_ms == 0 {
        24 * 3600 * 1000
    } else {
        heartbeat_ms as u64
    }
}

/// Reads what arrived into `buf`, reserving `chunk` bytes of room; a read that fills the room
/// doubles `chunk` for the next one.
async fn read_more<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    dec: &FrameDecoder,
    chunk: &mut usize,
) -> Result<bool, MqError> {
    buf.reserve(dec.read_room(buf, *chunk));
    let room = buf.capacity() - buf.len();
    match rd.read_buf(buf).await {
        Ok(0) => Ok(false),
        Ok(n) => {
            if n >= room {
                *chunk = (*chunk * 2).min(READ_CHUNK_MAX_BYTES);
            }
            Ok(true)
        }
        Err(e) => Err(MqError::new(
            Reason::CONNECTION_BROKEN,
            format!("socket read failed: {e}"),
        )),
    }
}

async fn run<R: AsyncRead + Unpin + Send, W: AsyncWrite + Unpin + Send>(
    rd: &mut R,
    wr: &tokio::sync::Mutex<W>,
    mut buf: BytesMut,
    shared: &Arc<Shared>,
    s: &mut Session,
    stall: &std::sync::atomic::AtomicU64,
) -> Result<(), MqError> {
    let mut dec = FrameDecoder::new(ferrymq_proto::PRE_HANDSHAKE_FRAME_MAX_BYTES);
    let mut chunk = READ_CHUNK_MIN_BYTES;
    let proto = |e: ferrymq_proto::ProtoError| MqError::new(e.reason(), e.to_string());

    // Handshake: the first frame must be Hello, within a bounded time.
    let hello = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        loop {
            if let Some(f) = dec.decode(&mut buf).map_err(proto)? {
                return Ok::<RawFrame, MqError>(f);
            }
            if !read_more(rd, &mut buf, &dec, &mut chunk).await? {
                return Err(MqError::new(
                    Reason::CONNECTION_BROKEN,
                    "peer closed before the handshake",
                ));
            }
        }
    })
    .await
    .map_err(|_| MqError::new(Reason::HEADER_ERROR, "no handshake within 10 seconds"))??;
    // A sender channel of another queue manager: the socket becomes its receiving end.
    let channel_kinds = [
        ferrymq_proto::channel::kind::HELLO,
        ferrymq_proto::channel::kind::PING,
        ferrymq_proto::channel::kind::REQUEST,
    ];
    if channel_kinds.contains(&hello.kind) && !s.bindings {
        // Boxed, as are the other rare paths below: a socket's task is as large as its largest
        // state, and tens of thousands of idle client sockets must not each carry room for a
        // channel receiver or a password check.
        return Box::pin(crate::channels::receiver::run(
            rd, dec, buf, hello, shared, s,
        ))
        .await;
    }
    // The handshake's values end here: locals alive across the loop's waits below are part of
    // every idle socket's task.
    let frame_limit: u32;
    let heartbeat_ms = {
        let hello = hello;
        let Request::Hello(h) = parse_request(&hello).map_err(proto)? else {
            return Err(MqError::new(
                Reason::HEADER_ERROR,
                "the first frame must be Hello",
            ));
        };
        if !s.bindings {
            check_channel(shared, s, &h.channel)?;
        }
        let cfg = &shared.cfg;
        // A client socket runs as the channel its Hello names; that channel's limits bound what is
        // negotiated. A bindings connection has no channel.
        let (max_msg, binding) = {
            let core = shared.core.lock();
            let b = if s.bindings {
                None
            } else {
                Some(crate::connsec::bind_channel(
                    &core,
                    &h.channel,
                    &s.info.conname,
                )?)
            };
            (core.engine.attrs().max_msg_len, b)
        };
        let (srv_max, srv_hb, srv_cnv) = match &binding {
            Some(b) => b.bound(max_msg, cfg.heartbeat_ms, cfg.sharecnv),
            None => (max_msg, cfg.heartbeat_ms, cfg.sharecnv),
        };
        let (version, max_msg_len, heartbeat_ms, sharecnv) =
            negotiate(&h, srv_max, srv_hb, srv_cnv).map_err(proto)?;
        if let Some(b) = &binding {
            s.info.state.lock().channel = b.name.clone();
        }
        s.channel = binding;
        s.sharecnv = sharecnv;
        s.version = version;
        // Frames as large as the negotiated length only once a conversation has connected
        // (below): before that, who is sending is not known, and a 100 MB frame from anyone
        // who can say Hello would take its room in MaxMessageMemory while it arrives.
        frame_limit = ferrymq_proto::frame_limit_for(max_msg_len);
        let ok = Response::HelloOk {
            version,
            max_msg_len,
            heartbeat_ms,
            sharecnv,
            qmgr_name: cfg.name.clone(),
            server_id: format!("ferrymq {}", env!("CARGO_PKG_VERSION")),
        };
        s.tx.reply(0, 0, &ok, 0);
        heartbeat_ms
    };

    stall.store(stall_ms(heartbeat_ms), std::sync::atomic::Ordering::Relaxed);
    let stall = Duration::from_millis(stall_ms(heartbeat_ms));
    let idle = if heartbeat_ms == 0 {
        Duration::from_secs(3600 * 24)
    } else {
        Duration::from_millis(heartbeat_ms as u64)
    };
    let mut missed = 0u32;
    let mut shutdown = shared.immediate_end.clone();
    // One registration for the life of the socket, not one per wake-up: an immediate end.
    let ending = async move {
        let _ = shutdown.wait_for(|v| *v).await;
    };
    tokio::pin!(ending);
    let mut frames: VecDeque<RawFrame> = VecDeque::new();
    let mut inline_buf: Vec<bytes::Bytes> = Vec::new();
    let q = s.tx.q.clone();
    let not_reading = || {
        MqError::new(
            Reason::CONNECTION_BROKEN,
            "the client is not taking its replies (closed to bound the memory it holds)",
        )
    };
    // One registration for the life of the socket, not one per batch.
    let killed = q.kill.notified();
    tokio::pin!(killed);
    // One heartbeat timer for the life of the socket, moved lazily (see below), its deadlines
    // on a shared grid (`beat_due`).
    let grid = beat_grid(idle);
    let mut heard = tokio::time::Instant::now();
    let beat = tokio::time::sleep_until(beat_due(heard + idle, grid));
    tokio::pin!(beat);
    // Room reserved for the large frame at the front of `buf` while its bytes arrive (see
    // `inbound`): the first frame cut off after it was reserved is that frame.
    let mut arriving: Option<crate::inbound::InboundReservation> = None;
    let memory_max = shared.cfg.message_memory_max;
    // Frames behind a Connect on a socket still limited are decoded once it has been decided.
    let mut after_connect = false;
    loop {
        if dec.max_frame_bytes() < frame_limit && !s.convs.is_empty() {
            dec.set_max_frame_bytes(frame_limit);
        }
        let limited = dec.max_frame_bytes() < frame_limit;
        let refused = |e: ferrymq_proto::ProtoError| {
            let mut e = proto(e);
            if limited && e.reason == Reason::MSG_TOO_BIG_FOR_CHANNEL {
                e.message
                    .push_str(" until a conversation on it has connected (Connect first)");
            }
            e
        };
        while let Some(f) = dec.decode(&mut buf).map_err(refused)? {
            let connect = f.kind == kind::CONNECT;
            frames.push_back(f);
            arriving = None;
            if connect && dec.max_frame_bytes() < frame_limit {
                after_connect = true;
                break;
            }
        }
        // Heartbeat answers need nothing but to have been heard (below): no core lock for them.
        if !frames.is_empty() && frames.iter().all(|f| f.kind == kind::HEARTBEAT_ACK) {
            s.info
                .frames
                .fetch_add(frames.len() as u64, std::sync::atomic::Ordering::Relaxed);
            frames.clear();
        }
        // A Connect is decided outside the core lock (password hashing, FAILDLAY), before the
        // frames behind it run.
        if frames.front().is_some_and(|f| f.kind == kind::CONNECT) {
            let f = frames.pop_front().expect("front exists");
            Box::pin(connect(shared, s, f)).await;
        }
        if !frames.is_empty() {
            wait_for_log_room(shared).await;
            crate::wake_latency::note_activity_if(|| {
                frames
                    .iter()
                    .any(|f| f.kind != kind::HEARTBEAT && f.kind != kind::HEARTBEAT_ACK)
            });
            s.tx.hold();
            let r = process(shared, s, &mut frames);
            write_inline(s, wr, &shared.durable, stall, &mut inline_buf).await?;
            r?;
        }
        if q.is_killed() {
            return Err(not_reading());
        }
        if q.pause() {
            // Back pressure: read and run nothing more until the client has taken its replies.
            // Every write the writer completes wakes this; a heartbeat interval without one
            // means the client is not reading.
            loop {
                let r = tokio::select! {
                    _ = q.drained.notified() => Ok(()),
                    _ = &mut killed => Err(not_reading()),
                    _ = tokio::time::sleep(stall) => Err(not_reading()),
                    _ = &mut ending => Err(MqError::new(Reason::Q_MGR_STOPPING, "the queue manager is ending immediately")),
                };
                q.resume();
                r?;
                if !q.pause() {
                    break;
                }
            }
            continue;
        }
        if !frames.is_empty() || std::mem::take(&mut after_connect) {
            continue;
        }
        if memory_max > 0 && arriving.is_none() {
            if let Some(len) = crate::inbound::arriving_large(&buf) {
                arriving = Some(tokio::select! {
                    r = crate::inbound::room_for(len, memory_max, "this connection") => r?,
                    _ = &mut ending => return Err(MqError::new(Reason::Q_MGR_STOPPING, "the queue manager is ending immediately")),
                    _ = &mut killed => return Err(not_reading()),
                });
            }
        }
        // A read into an empty buffer allocates one: it goes back once the socket has been
        // quiet for a moment (below), not a heartbeat interval later.
        let fresh = buf.capacity() == 0;
        tokio::select! {
            r = read_more(rd, &mut buf, &dec, &mut chunk) => {
                if !r? {
                    return Ok(());
                }
                missed = 0;
                heard = tokio::time::Instant::now();
                if fresh {
                    let due = beat_due(heard + READ_BUF_KEEP, grid);
                    if due < beat.deadline() {
                        beat.as_mut().reset(due);
                    }
                }
            }
            _ = &mut beat => {
                // Quiet since the timer was set: what the socket holds for reading and running
                // frames goes back (an idle socket keeps no buffer), unless a frame is half read.
                if buf.is_empty() && buf.capacity() > 0 {
                    buf = BytesMut::new();
                    chunk = READ_CHUNK_MIN_BYTES;
                }
                if frames.is_empty() && frames.capacity() > 0 {
                    frames = VecDeque::new();
                }
                if inline_buf.is_empty() && inline_buf.capacity() > 0 {
                    inline_buf = Vec::new();
                }
                s.tx.shrink_idle();
                // The timer is set once per interval, not at every frame: when it fires after
                // something was heard, it is only moved to an interval after that.
                let now = tokio::time::Instant::now();
                if missed == 0 {
                    let due = beat_due(heard + idle, grid);
                    if due > now {
                        beat.as_mut().reset(due);
                        continue;
                    }
                }
                // Nothing heard for a heartbeat interval: probe. Three silent intervals mean the
                // peer is gone and its units of work must be backed out.
                missed += 1;
                if missed >= 3 {
                    return Err(MqError::new(Reason::CONNECTION_BROKEN, "peer missed three heartbeats"));
                }
                let mut b = BytesMut::new();
                ferrymq_proto::encode_request(0, 0, &Request::Heartbeat, &mut b);
                // Written by this task when the writer is idle, as a batch's replies are.
                s.tx.hold();
                s.tx.send(Out::frame(b.freeze(), 0, false)).ok();
                write_inline(s, wr, &shared.durable, stall, &mut inline_buf).await?;
                beat.as_mut().reset(beat_due(now + idle, grid));
            }
            _ = &mut ending => {
                return Err(MqError::new(Reason::Q_MGR_STOPPING, "the queue manager is ending immediately"));
            }
            _ = &mut killed => {
                return Err(not_reading());
            }
        }
    }
}

/// The spacing of the grid heartbeat deadlines are rounded up to: a second, or a sixteenth of a
/// short interval. Tens of thousands of idle sockets each have a heartbeat timer; at their exact
/// deadlines, spread over every interval, each one's firing would wake a runtime thread of its
/// own, while on the grid all that fall due in the same second fire in one wake-up. A heartbeat
/// is so at most a grid step late, never early.
fn beat_grid(idle: Duration) -> Duration {
    (idle / 16).clamp(Duration::from_millis(1), Duration::from_secs(1))
}

/// `t` rounded up to the heartbeat grid of step `grid`, which every socket of the process shares.
fn beat_due(t: tokio::time::Instant, grid: Duration) -> tokio::time::Instant {
    static ORIGIN: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(tokio::time::Instant::now);
    round_up(t, origin, grid)
}

/// `t` rounded up to the next point `origin + k * grid` (k ≥ 0).
fn round_up(
    t: tokio::time::Instant,
    origin: tokio::time::Instant,
    grid: Duration,
) -> tokio::time::Instant {
    let since = t.saturating_duration_since(origin).as_nanos();
    let step = grid.as_nanos().max(1);
    let k = since.div_ceil(step);
    let off = u64::try_from(k * step).unwrap_or(u64::MAX);
    origin + Duration::from_nanos(off)
}

/// The TLS rules of the socket's channel (SSLCIPH, SSLCAUTH, SSLPEER), at Hello: a refusal is
/// logged with the channel, the rule and the client's DN, and the client told why.
/// `requested` is the channel the Hello names (empty: the default SVRCONN); an unknown channel
/// passes here and is refused by the channel binding that follows.
fn check_channel(shared: &Arc<Shared>, s: &Session, requested: &str) -> Result<(), MqError> {
    let channel = if requested.is_empty() {
        crate::listeners::DEFAULT_SVRCONN
    } else {
        requested
    };
    let attrs = shared
        .core
        .lock()
        .engine
        .object(ferrymq_types::ObjectKind::Channel, channel)
        .map(|d| d.attrs.clone());
    let Some(attrs) = attrs else {
        return Ok(());
    };
    crate::security::tls::check_channel(channel, &attrs, s.info.tls.as_deref()).map_err(|r| {
        crate::qm_log!(
            crate::errlog::ids::CHANNEL_TLS_REFUSED,
            "connection from {} refused by {}: {}",
            s.info.conname,
            r.rule,
            r.message
        );
        MqError::new(r.reason, r.message)
    })
}

/// Runs a batch of frames under one lock. Each frame's reply, and the deliveries its work pushed
/// to waiting getters and consumers, are queued before the next frame runs, so a socket sees
/// replies and pushed messages in the order they happened. Stops early, leaving the rest in
/// `frames`, once the socket's outbound queue is over its pause bound.
fn process(
    shared: &Arc<Shared>,
    s: &mut Session,
    frames: &mut VecDeque<RawFrame>,
) -> Result<(), MqError> {
    let now = now_ms();
    let mut soonest = u64::MAX;
    let mut admin = None;
    let mut fatal = None;
    {
        let mut core = shared.core.lock();
        let mut n = 0u64;
        while let Some(f) = frames.pop_front() {
            if f.kind == kind::CONNECT && n > 0 {
                // Left for `connect`, outside the lock.
                frames.push_front(f);
                break;
            }
            n += 1;
            if f.kind == kind::HEARTBEAT_ACK {
                continue;
            }
            let req = match parse_request(&f) {
                Ok(r) => fit_put_body(r, f.body.len()),
                Err(e) => {
                    // The stream is still framed correctly, so the peer can be told and kept.
                    let r = Response::Status {
                        reason: e.reason(),
                        message: e.to_string(),
                    };
                    s.tx.reply(f.conv, f.req, &r, 0);
                    if f.conv == 0 && f.kind != kind::HEARTBEAT {
                        fatal = Some(MqError::new(e.reason(), e.to_string()));
                        frames.clear();
                        break;
                    }
                    continue;
                }
            };
            match dispatch::handle(&mut core, shared, s, f.conv, f.req, req, now) {
                Action::Reply(r, lsn) => {
                    // A request sent with LATER: its answer leaves with the next one due.
                    s.tx.answer(f.conv, f.req, &r, lsn, f.flags & FLAG_LATER != 0);
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
                        tx.reply(conv, req, &r, 0);
                    });
                }
                Action::Admin(a, r) => {
                    admin = Some(a);
                    s.tx.reply(f.conv, f.req, &r, 0);
                }
            }
            core.flush_deliveries();
            if s.tx.q.over_soft() {
                break;
            }
        }
        s.info
            .frames
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
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

/// A put's body as the engine should be given it (see [`body_from_frame`]).
///
/// [`body_from_frame`]: ferrymq_engine::message::body_from_frame
fn fit_put_body(mut req: Request, frame_len: usize) -> Request {
    if let Request::Put { body, .. } | Request::Put1 { body, .. } = &mut req {
        *body = ferrymq_engine::message::body_from_frame(std::mem::take(body), frame_len);
    }
    req
}

/// A conversation's Connect: who it runs as (CHLAUTH, CONNAUTH, the effective user), then the
/// engine connection under the core lock. A refusal is answered on the conversation; the socket
/// stays, so that the application can try again.
async fn connect(shared: &Arc<Shared>, s: &mut Session, f: RawFrame) {
    let req = match parse_request(&f) {
        Ok(r) => r,
        Err(e) => {
            let r = Response::Status {
                reason: e.reason(),
                message: e.to_string(),
            };
            s.tx.reply(f.conv, f.req, &r, 0);
            return;
        }
    };
    let Request::Connect {
        qmgr,
        user,
        password,
        app_name,
    } = req
    else {
        unreachable!("a CONNECT frame parses to Connect");
    };
    let admitted = crate::connsec::admit(
        shared,
        s.channel.as_ref(),
        &s.info.conname,
        s.info.os_user.as_deref(),
        s.info
            .tls
            .as_ref()
            .and_then(|t| t.peer.as_ref())
            .map(|p| p.subject.as_str()),
        crate::connsec::ConnectRequest {
            user: &user,
            password: &password,
            app: &app_name,
        },
    )
    .await;
    let id = match admitted {
        Ok(id) => id,
        Err(e) => {
            s.tx.reply(f.conv, f.req, &error_response(e), 0);
            return;
        }
    };
    let req = Request::Connect {
        qmgr,
        user: id.user.clone(),
        password: String::new(),
        app_name,
    };
    s.connect_groups = id.groups.clone();
    let action = {
        let mut core = shared.core.lock();
        let a = dispatch::handle(&mut core, shared, s, f.conv, f.req, req, now_ms());
        core.flush_deliveries();
        a
    };
    if let Action::Reply(r, lsn) = action {
        if matches!(&r, Response::Status { reason, .. } if *reason == Reason::NONE)
            && s.convs.contains_key(&f.conv)
        {
            s.info.state.lock().user = id.user.clone();
            s.identities.insert(f.conv, id);
        }
        s.tx.reply(f.conv, f.req, &r, lsn);
    }
}

/// Holds the socket's next batch while the recovery log is nearly full (past
/// `LOG_ROOM_WAIT_PCT`; a checkpoint has been asked for at `LOG_CHECKPOINT_TRIGGER_PCT`), until
/// the checkpoint has made room, for at most `LOG_ROOM_WAIT_MS`. A burst of persistent work —
/// asynchronous puts above all, which nobody waits for — is so slowed by TCP instead of being
/// refused with 2102 while a checkpoint is merely behind. When a wait runs out, the log is held
/// by something a checkpoint cannot free (a long unit of work, failing checkpoints): sockets stop
/// waiting for `LOG_ROOM_WAIT_OFF_MS` and their work is refused as before, with the reason.
async fn wait_for_log_room(shared: &Shared) {
    use std::sync::atomic::Ordering;
    let st = &shared.storage;
    // The common case: one atomic load (the sink raises the flag past the mark).
    if !st.room_low.load(Ordering::Relaxed) {
        return;
    }
    let Some(log) = st.log.as_ref() else {
        return;
    };
    let high = log.capacity() / 100 * limits::LOG_ROOM_WAIT_PCT;
    if now_ms() < st.room_wait_off_until_ms.load(Ordering::Relaxed) {
        return;
    }
    let started = std::time::Instant::now();
    while log.used_bytes() >= high {
        if started.elapsed() >= Duration::from_millis(limits::LOG_ROOM_WAIT_MS) {
            st.room_wait_off_until_ms
                .store(now_ms() + limits::LOG_ROOM_WAIT_OFF_MS, Ordering::Relaxed);
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    st.room_low.store(false, Ordering::Relaxed);
}

/// Ends a batch the reader ran (see [`crate::core::Outbox::hold`]): when the writer task is idle,
/// the reader writes the replies that may leave now itself, sparing the hand-off to the writer
/// task and its wake-up; what must wait for the log, or finds the writer busy, is left to it.
async fn write_inline<W: AsyncWrite + Unpin>(
    s: &Session,
    wr: &tokio::sync::Mutex<W>,
    durable: &crate::lsn::LsnWatch,
    stall: Duration,
    batch: &mut Vec<bytes::Bytes>,
) -> Result<(), MqError> {
    let Ok(mut w) = wr.try_lock() else {
        s.tx.take_ready(false, 0, batch);
        return Ok(());
    };
    let (frames, bytes) = s.tx.take_ready(true, durable.get(), batch);
    if frames == 0 {
        return Ok(());
    }
    // Boxed: the reader's task waits in many places for an idle socket's whole life, and each
    // wait's room is as large as the largest (this write's).
    let ok = Box::pin(write_frames(&mut *w, batch, stall)).await;
    batch.clear();
    if batch.capacity() > 64 {
        *batch = Vec::new();
    }
    if !ok {
        s.tx.q.kill();
        return Err(MqError::new(
            Reason::CONNECTION_BROKEN,
            "the client is not taking its replies (closed to bound the memory it holds)",
        ));
    }
    s.tx.q.written(frames, bytes);
    Ok(())
}

/// Writes `frames` in order, then flushes: one frame from its own buffer, several coalesced
/// into one write (a batch the reader writes is a few replies). False when the socket broke or
/// a write made no progress for `stall`.
async fn write_frames<W: AsyncWrite + Unpin>(
    wr: &mut W,
    frames: &[bytes::Bytes],
    stall: Duration,
) -> bool {
    let ok = match frames {
        [one] => write_or_stall(wr, one, stall).await.is_ok(),
        _ if frames.iter().all(|f| f.len() < LARGE_FRAME_BYTES) => {
            // A few small replies (the usual batch): one buffer, one plain write.
            let mut buf = Vec::with_capacity(frames.iter().map(|f| f.len()).sum());
            for f in frames {
                buf.extend_from_slice(f);
            }
            write_or_stall(wr, &buf, stall).await.is_ok()
        }
        _ => {
            // Small buffers are coalesced; a large one (a message body) is written from its
            // own buffer, after what was coalesced before it.
            let small: usize = frames
                .iter()
                .filter(|f| f.len() < LARGE_FRAME_BYTES)
                .map(|f| f.len())
                .sum();
            let mut buf = BytesMut::with_capacity(small);
            let mut pieces = Vec::new();
            for f in frames {
                if f.len() < LARGE_FRAME_BYTES {
                    buf.extend_from_slice(f);
                    continue;
                }
                if !buf.is_empty() {
                    pieces.push(buf.split().freeze());
                }
                pieces.push(f.clone());
            }
            if !buf.is_empty() {
                pieces.push(buf.freeze());
            }
            write_all_vectored(wr, &pieces, Some(stall)).await.is_ok()
        }
    };
    // A TLS stream may hold records it could not write yet: they must leave now (a no-op on a
    // plain socket, which sets no timer).
    ok && flush_or_stall(wr, stall).await
}

/// Flushes `wr`, failing if the flush fails or makes no progress for `stall`; a flush that is
/// done at once (always on a plain socket) sets no timer.
async fn flush_or_stall<W: AsyncWrite + Unpin>(wr: &mut W, stall: Duration) -> bool {
    let now =
        std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *wr).poll_flush(cx))).await;
    match now {
        Poll::Ready(r) => r.is_ok(),
        // Boxed (see `write_or_stall`).
        Poll::Pending => Box::pin(tokio::time::timeout(stall, wr.flush()))
            .await
            .is_ok_and(|r| r.is_ok()),
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    wr: Arc<tokio::sync::Mutex<W>>,
    mut rx: crate::core::OutRx,
    durable: crate::lsn::LsnWatch,
    q: Arc<OutQueue>,
    stall: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut batch: Vec<bytes::Bytes> = Vec::new();
    // Each wake-up's work is boxed: this task waits in `ready` for nearly all of an idle socket's
    // life, and should be no larger than that wait while it does.
    while rx.ready().await {
        let more = Box::pin(write_ready(&wr, &mut rx, &durable, &q, &stall, &mut batch)).await;
        if !more {
            return;
        }
    }
    let _ = wr.lock().await.flush().await;
}

/// Writes what is ready in `rx` (once the log is durable as far as it needs); false when the
/// writer is done (the socket closed, broke or stalled, or the log stopped).
async fn write_ready<W: AsyncWrite + Unpin>(
    wr_lock: &tokio::sync::Mutex<W>,
    rx: &mut crate::core::OutRx,
    durable: &crate::lsn::LsnWatch,
    q: &OutQueue,
    stall_ms: &std::sync::atomic::AtomicU64,
    batch: &mut Vec<bytes::Bytes>,
) -> bool {
    // Frames are taken only under the write lock (the reader takes the ones it writes
    // itself under it too), so they leave in queue order whoever writes them.
    let mut guard = wr_lock.lock().await;
    let wr = &mut *guard;
    let Some(first) = rx.try_recv() else {
        // The reader wrote them.
        return true;
    };
    let mut need = first.wait_lsn;
    let mut close = first.close;
    let mut bytes = first.len();
    let mut frames = 1u64;
    first.push_to(batch);
    while bytes < WRITE_BATCH_BYTES {
        match rx.try_recv() {
            Some(o) => {
                need = need.max(o.wait_lsn);
                close |= o.close;
                bytes += o.len();
                frames += 1;
                o.push_to(batch);
            }
            None => break,
        }
    }
    if need > durable.get() && durable.wait(need).await.is_err() {
        // The log stopped: nothing more may be acknowledged.
        return false;
    }
    let stall = Duration::from_millis(stall_ms.load(std::sync::atomic::Ordering::Relaxed));
    // Coalesced as the reader's batches are (`write_frames`).
    let ok = write_frames(wr, batch, stall).await;
    batch.clear();
    if !ok {
        // A peer that takes nothing for a heartbeat interval is not reading: the reader
        // closes the socket and backs out its units of work.
        q.kill();
        return false;
    }
    q.written(frames, bytes as u64);
    if close {
        let _ = wr.shutdown().await;
        return false;
    }
    true
}

/// Most buffers given to one vectored write.
const WRITE_SLICES_MAX: usize = 64;

/// Writes all of `bufs` in order in as few (vectored) writes as the socket takes: a message
/// body written from its own buffer goes out in the same write as the frame head before it.
/// With `stall`, fails if a write makes no progress for that long (a write that can go at once
/// sets no timer).
pub(crate) async fn write_all_vectored<W: AsyncWrite + Unpin, B: AsRef<[u8]>>(
    wr: &mut W,
    bufs: &[B],
    stall: Option<Duration>,
) -> std::io::Result<()> {
    let (mut i, mut off) = (0usize, 0usize);
    loop {
        while i < bufs.len() && off == bufs[i].as_ref().len() {
            i += 1;
            off = 0;
        }
        if i == bufs.len() {
            return Ok(());
        }
        let mut slices = Vec::with_capacity((bufs.len() - i).min(WRITE_SLICES_MAX));
        slices.push(std::io::IoSlice::new(&bufs[i].as_ref()[off..]));
        for b in bufs[i + 1..].iter().map(|b| b.as_ref()) {
            if slices.len() == WRITE_SLICES_MAX {
                break;
            }
            if !b.is_empty() {
                slices.push(std::io::IoSlice::new(b));
            }
        }
        let mut n = match stall {
            None => wr.write_vectored(&slices).await?,
            Some(stall) => {
                let now = std::future::poll_fn(|cx| {
                    Poll::Ready(std::pin::Pin::new(&mut *wr).poll_write_vectored(cx, &slices))
                })
                .await;
                match now {
                    Poll::Ready(r) => r?,
                    // Boxed (see `write_or_stall`).
                    Poll::Pending => {
                        Box::pin(tokio::time::timeout(stall, wr.write_vectored(&slices)))
                            .await
                            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??
                    }
                }
            }
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let rest = bufs[i].as_ref().len() - off;
            if n >= rest {
                n -= rest;
                i += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
}

/// Writes all of `buf`, failing if the socket is broken or a write makes no progress for `stall`.
/// A write that can go at once (nearly always) sets no timer.
async fn write_or_stall<W: AsyncWrite + Unpin>(
    wr: &mut W,
    buf: &[u8],
    stall: Duration,
) -> Result<(), ()> {
    let mut off = 0;
    while off < buf.len() {
        let now = std::future::poll_fn(|cx| {
            Poll::Ready(std::pin::Pin::new(&mut *wr).poll_write(cx, &buf[off..]))
        })
        .await;
        let n = match now {
            Poll::Ready(r) => r.map_err(|_| ())?,
            // Boxed: a socket that takes the bytes at once (nearly always) needs no timer, and
            // every idle socket's task would otherwise carry room for one.
            Poll::Pending => Box::pin(tokio::time::timeout(stall, wr.write(&buf[off..])))
                .await
                .map_err(|_| ())?
                .map_err(|_| ())?,
        };
        if n == 0 {
            return Err(());
        }
        off += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    #[test]
    fn heartbeat_deadlines_round_up_to_the_grid_never_down() {
        let o = Instant::now();
        let s = Duration::from_secs(1);
        // On a grid point: unchanged.
        assert_eq!(round_up(o, o, s), o);
        assert_eq!(round_up(o + 3 * s, o, s), o + 3 * s);
        // Between two points: the later one, at most a step later.
        assert_eq!(round_up(o + Duration::from_millis(1), o, s), o + s);
        assert_eq!(round_up(o + Duration::from_millis(2999), o, s), o + 3 * s);
        assert_eq!(
            round_up(o + Duration::from_millis(300_000 + 1), o, s),
            o + Duration::from_secs(301)
        );
        // Before the origin: the origin (a deadline is never moved earlier than asked, and the
        // origin is taken before any socket's first deadline).
        assert_eq!(round_up(o, o + s, s), o + s);
    }

    #[test]
    fn deadlines_that_fall_due_in_the_same_step_share_one_instant() {
        let o = Instant::now();
        let grid = beat_grid(Duration::from_secs(300));
        let a = round_up(o + Duration::from_millis(300_010), o, grid);
        let b = round_up(o + Duration::from_millis(300_990), o, grid);
        assert_eq!(a, b);
    }

    #[test]
    fn the_grid_is_a_second_or_a_sixteenth_of_a_short_interval() {
        assert_eq!(beat_grid(Duration::from_secs(300)), Duration::from_secs(1));
        assert_eq!(
            beat_grid(Duration::from_secs(3600 * 24)),
            Duration::from_secs(1)
        );
        assert_eq!(
            beat_grid(Duration::from_secs(1)),
            Duration::from_micros(62_500)
        );
        assert_eq!(
            beat_grid(Duration::from_millis(150)),
            Duration::from_micros(9_375)
        );
        assert_eq!(
            beat_grid(Duration::from_micros(100)),
            Duration::from_millis(1)
        );
    }
}
