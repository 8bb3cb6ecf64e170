//! One physical socket to a queue manager: the handshake, a reader task that routes every answer
//! to the call waiting for it, a writer task that sends whatever is queued in one write, and a
//! heartbeat task that notices a silent peer. Conversations (MQCONNs) share a socket by taking a
//! conversation id; the [`Pool`] hands those out and opens new sockets when they run out.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_proto::{
    encode_request, encode_request_split, encode_response, frame_limit_for, kind, parse_request,
    parse_response, FrameDecoder, Hello, ProtoError, RawFrame, Request, Response, FLAG_LATER,
    PRE_HANDSHAKE_FRAME_MAX_BYTES, PROTOCOL_VERSION_ANSWER_LATER,
};
use ferrymq_types::{MqError, Reason};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::options::{ConnectOptions, Endpoint};

/// Bytes the writer gathers from its queue before writing; beyond this, batching saves nothing.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// A frame at least this large is written from its own buffer, not coalesced with others.
const LARGE_FRAME_BYTES: usize = 64 * 1024;
/// Read buffer growth step.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// A put body at least this large is written from the program's buffer after its frame's
/// other fields instead of being copied into the frame.
const SPLIT_BODY_MIN_BYTES: usize = 16 * 1024;

type Reply = oneshot::Sender<Result<Response, MqError>>;
type StreamTx = mpsc::UnboundedSender<Result<Response, MqError>>;
type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// What the queue manager agreed to in its `HelloOk`.
#[derive(Debug, Clone)]
pub(crate) struct Negotiated {
    /// The protocol version agreed.
    pub version: u16,
    pub max_msg_len: u32,
    pub heartbeat_ms: u32,
    pub sharecnv: u16,
    pub qmgr_name: String,
}

enum Out {
    /// Frames, and the body of the last of them when it is written from its own buffer right
    /// after them (see [`encode_split`]).
    Frame(BytesMut, Option<Bytes>),
    /// A request nothing answers (an asynchronous put), counted in `Socket::unwritten` until
    /// written.
    Unanswered(BytesMut, Option<Bytes>),
    /// Write what is queued before this, then end the socket.
    Close,
}

/// One buffer of a write: frames, or a put's body that follows them.
enum Piece {
    Frames(BytesMut),
    Body(Bytes),
}

impl Piece {
    fn as_slice(&self) -> &[u8] {
        match self {
            Piece::Frames(f) => f,
            Piece::Body(b) => b,
        }
    }
}

/// Appends `r` as one frame, except a put body of [`SPLIT_BODY_MIN_BYTES`] or more: that is
/// returned, to be written right after the frame from the program's own buffer (the bytes on
/// the wire are the same).
fn encode_split(conv: u16, req: u32, r: &Request, out: &mut BytesMut) -> Option<Bytes> {
    let large = matches!(
        r,
        Request::Put { body, .. } | Request::Put1 { body, .. } | Request::Put1Topic { body, .. }
            if body.len() >= SPLIT_BODY_MIN_BYTES
    );
    if large {
        encode_request_split(conv, req, r, out)
    } else {
        encode_request(conv, req, r, out);
        None
    }
}

#[derive(Default)]
struct State {
    pending: HashMap<(u16, u32), Reply>,
    /// Requests answered by a stream of frames (a consumer's registration status, then its
    /// deliveries), routed here until a failure status ends them.
    streams: HashMap<(u16, u32), StreamTx>,
    /// Set once; every later request fails with it.
    broken: Option<MqError>,
    convs: BTreeSet<u16>,
    /// The last conversation left: no new one may join (the close is already queued).
    closing: bool,
    /// A failure the queue manager announced on conversation 0 just before closing, to explain
    /// the break.
    farewell: Option<String>,
}

pub(crate) struct Socket {
    pub endpoint: Endpoint,
    pub params: Negotiated,
    /// What TLS negotiated, and the queue manager's certificate (None: a plain socket).
    pub tls: Option<ferrymq_security::tls::TlsSession>,
    tx: mpsc::UnboundedSender<Out>,
    state: Mutex<State>,
    next_req: AtomicU32,
    epoch: Instant,
    last_read_ms: AtomicU64,
    stop: watch::Sender<bool>,
    /// Bytes of `Out::Unanswered` frames queued but not yet written, and the writer's signal
    /// that it wrote some (or that the socket ended).
    unwritten: AtomicU64,
    written: tokio::sync::Notify,
}

/// Why a request got no answer. The difference matters to reconnect: a request that was never
/// sent can simply be sent again; one in flight may or may not have been carried out.
#[derive(Debug)]
pub(crate) enum CallError {
    NotSent(MqError),
    Interrupted(MqError),
}

impl CallError {
    pub fn into_error(self) -> MqError {
        match self {
            CallError::NotSent(e) | CallError::Interrupted(e) => e,
        }
    }
}

/// An answer being waited for. Dropping it (a cancelled call) forgets the request, so that a late
/// answer is discarded instead of lingering in the map.
pub(crate) struct Pending {
    socket: Arc<Socket>,
    key: (u16, u32),
    rx: oneshot::Receiver<Result<Response, MqError>>,
}

impl Pending {
    pub async fn wait(mut self) -> Result<Response, MqError> {
        match (&mut self.rx).await {
            Ok(r) => r,
            Err(_) => Err(self.socket.broken_error()),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.socket.state.lock().pending.remove(&self.key);
    }
}

/// The frames answering one streaming request, in order: every frame with its (conv, req) until
/// a failure status, which ends the stream. Dropping it forgets the request; later frames for it
/// are discarded.
pub(crate) struct Stream {
    socket: Arc<Socket>,
    key: (u16, u32),
    rx: mpsc::UnboundedReceiver<Result<Response, MqError>>,
}

impl Stream {
    /// The next frame; an error when the socket broke (or the stream was ended without a frame).
    pub async fn recv(&mut self) -> Result<Response, MqError> {
        match self.rx.recv().await {
            Some(r) => r,
            None => Err(self.socket.broken_error()),
        }
    }

    pub fn socket(&self) -> &Arc<Socket> {
        &self.socket
    }

    pub fn conv(&self) -> u16 {
        self.key.0
    }

    pub fn key(&self) -> (u16, u32) {
        self.key
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.socket.state.lock().streams.remove(&self.key);
    }
}

fn broken(message: impl Into<String>) -> MqError {
    MqError::new(Reason::CONNECTION_BROKEN, message)
}

impl Socket {
    /// Connects to `ep`, shakes hands and starts the socket's tasks, all within `limit`.
    /// `qmgr` is the queue manager the socket must reach ("" = any).
    pub async fn open(
        ep: &Endpoint,
        opts: &ConnectOptions,
        qmgr: &str,
        limit: Duration,
    ) -> Result<Arc<Socket>, MqError> {
        let unreachable = |detail: String| {
            match ep {
            Endpoint::Tcp(..) => MqError::new(
                Reason::HOST_NOT_AVAILABLE,
                format!("cannot connect to {ep}: {detail}; check the host, the port and that the listener is running"),
            ),
            Endpoint::Unix(_) => MqError::new(
                Reason::Q_MGR_NOT_AVAILABLE,
                format!("queue manager '{qmgr}' is not available at {ep}: {detail}; is it running?"),
            ),
        }
        };
        let tls_config = match (ep, &opts.tls) {
            (Endpoint::Tcp(..), Some(t)) => Some(t.client_config()?),
            _ => None,
        };
        let mut tls_session = None;
        let work = async {
            let (rd, wr): (BoxRead, BoxWrite) = match ep {
                Endpoint::Tcp(host, port) => {
                    let s = tokio::net::TcpStream::connect((host.as_str(), *port))
                        .await
                        .map_err(|e| unreachable(e.to_string()))?;
                    // Requests are small and answered one by one; Nagle would add a delay to each.
                    let _ = s.set_nodelay(true);
                    match tls_config {
                        None => {
                            let (r, w) = s.into_split();
                            (Box::new(r), Box::new(w))
                        }
                        Some(cfg) => {
                            let t = opts.tls.as_ref().expect("TLS options give a configuration");
                            let name = t.server_name.as_deref().unwrap_or(host).to_string();
                            let server_name = rustls_pki_types::ServerName::try_from(name.clone())
                                .map_err(|e| {
                                    MqError::new(
                                        Reason::SSL_INITIALIZATION_ERROR,
                                        format!(
                                            "'{name}' cannot be checked against a certificate: {e}"
                                        ),
                                    )
                                })?;
                            let tls = tokio_rustls::TlsConnector::from(cfg)
                                .connect(server_name, s)
                                .await
                                .map_err(|e| {
                                    MqError::new(
                                        Reason::SSL_INITIALIZATION_ERROR,
                                        format!("TLS handshake with {ep} failed: {e}"),
                                    )
                                })?;
                            tls_session =
                                ferrymq_security::tls::TlsSession::from_state(tls.get_ref().1);
                            let (r, w) = tokio::io::split(tls);
                            (Box::new(r), Box::new(w))
                        }
                    }
                }
                Endpoint::Unix(path) => {
                    let s = tokio::net::UnixStream::connect(path)
                        .await
                        .map_err(|e| unreachable(e.to_string()))?;
                    let (r, w) = s.into_split();
                    (Box::new(r), Box::new(w))
                }
            };
            handshake(ep, opts, qmgr, rd, wr, opts.tls.is_some()).await
        };
        let (rd, wr, dec, buf, params) = tokio::time::timeout(limit, work)
            .await
            .map_err(|_| unreachable(format!("no answer within {} ms", limit.as_millis())))??;
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, _) = watch::channel(false);
        let sock = Arc::new(Socket {
            endpoint: ep.clone(),
            params,
            tls: tls_session,
            tx,
            state: Mutex::new(State::default()),
            next_req: AtomicU32::new(1),
            epoch: Instant::now(),
            last_read_ms: AtomicU64::new(0),
            stop,
            unwritten: AtomicU64::new(0),
            written: tokio::sync::Notify::new(),
        });
        tokio::spawn(read_loop(sock.clone(), rd, dec, buf, sock.stop.subscribe()));
        tokio::spawn(write_loop(sock.clone(), wr, rx, sock.stop.subscribe()));
        if sock.params.heartbeat_ms > 0 {
            tokio::spawn(heartbeat_loop(sock.clone(), sock.stop.subscribe()));
        }
        Ok(sock)
    }

    pub fn is_broken(&self) -> bool {
        self.state.lock().broken.is_some()
    }

    pub fn broken_error(&self) -> MqError {
        self.state
            .lock()
            .broken
            .clone()
            .unwrap_or_else(|| broken("the connection ended"))
    }

    /// Takes the lowest free conversation id, or `None` when SHARECNV is used up or the socket is
    /// ending.
    pub fn claim_conv(&self) -> Option<u16> {
        let mut st = self.state.lock();
        if st.broken.is_some() || st.closing {
            return None;
        }
        let conv = (1..=self.params.sharecnv).find(|c| !st.convs.contains(c))?;
        st.convs.insert(conv);
        Some(conv)
    }

    /// Gives a conversation id back; the last one closes the socket, after whatever is queued
    /// (a farewell Disconnect) has been written.
    pub fn release_conv(&self, conv: u16) {
        let mut st = self.state.lock();
        st.convs.remove(&conv);
        if st.convs.is_empty() && !st.closing {
            st.closing = true;
            drop(st);
            let _ = self.tx.send(Out::Close);
        }
    }

    fn next_req(&self) -> u32 {
        loop {
            // Per socket rather than per conversation, so ids stay unique even when a conversation
            // id is reused while a late answer to its previous owner is still on its way.
            let id = self.next_req.fetch_add(1, Ordering::Relaxed);
            if id != 0 {
                return id;
            }
        }
    }

    /// Sends `reqs` on conversation `conv` in one write (pipelined) and returns one [`Pending`]
    /// per request, in order. The caller waits for all of them: every request but the last goes
    /// with `FLAG_LATER` where the server takes it, so the server may write all the answers
    /// once, when the last is ready (a put and commit whose get waits for a reply).
    pub fn start(
        self: &Arc<Self>,
        conv: u16,
        reqs: &[&Request],
    ) -> Result<Vec<Pending>, CallError> {
        let mut out = BytesMut::new();
        let mut tail: Option<Bytes> = None;
        let mut ids = Vec::with_capacity(reqs.len());
        let later = self.params.version >= PROTOCOL_VERSION_ANSWER_LATER;
        // Encoded before taking the lock, so a large body does not hold up the reader.
        for (i, r) in reqs.iter().enumerate() {
            let id = self.next_req();
            if let Some(body) = tail.take() {
                // Only the last frame's body is written from its own buffer.
                out.extend_from_slice(&body);
            }
            let start = out.len();
            tail = encode_split(conv, id, r, &mut out);
            if later && i + 1 < reqs.len() {
                // The header's flags byte (after the length and the kind).
                out[start + 5] |= FLAG_LATER;
            }
            ids.push(id);
        }
        let mut pending = Vec::with_capacity(reqs.len());
        {
            let mut st = self.state.lock();
            if let Some(e) = &st.broken {
                return Err(CallError::NotSent(e.clone()));
            }
            for id in ids {
                let (tx, rx) = oneshot::channel();
                st.pending.insert((conv, id), tx);
                pending.push(Pending {
                    socket: self.clone(),
                    key: (conv, id),
                    rx,
                });
            }
        }
        if self.tx.send(Out::Frame(out, tail)).is_err() {
            return Err(CallError::NotSent(self.broken_error()));
        }
        Ok(pending)
    }

    /// One request, one answer.
    pub async fn call(self: &Arc<Self>, conv: u16, req: &Request) -> Result<Response, CallError> {
        let mut p = self.start(conv, &[req])?;
        let p = p.pop().expect("one request gives one pending answer");
        p.wait().await.map_err(CallError::Interrupted)
    }

    /// Sends `first` and then `then` on conversation `conv` in one write; the frames answering
    /// `first` come through the returned [`Stream`], those answering `then` are discarded (they
    /// are requests without an answer).
    pub fn start_stream(
        self: &Arc<Self>,
        conv: u16,
        first: &Request,
        then: &[&Request],
    ) -> Result<Stream, CallError> {
        let mut out = BytesMut::new();
        let id = self.next_req();
        encode_request(conv, id, first, &mut out);
        for r in then {
            encode_request(conv, self.next_req(), r, &mut out);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut st = self.state.lock();
            if let Some(e) = &st.broken {
                return Err(CallError::NotSent(e.clone()));
            }
            st.streams.insert((conv, id), tx);
        }
        let stream = Stream {
            socket: self.clone(),
            key: (conv, id),
            rx,
        };
        if self.tx.send(Out::Frame(out, None)).is_err() {
            return Err(CallError::NotSent(self.broken_error()));
        }
        Ok(stream)
    }

    /// Ends a stream from this side: `last` is its final frame, and later frames from the queue
    /// manager are discarded.
    pub fn end_stream(&self, key: (u16, u32), last: Response) {
        let tx = self.state.lock().streams.remove(&key);
        if let Some(tx) = tx {
            let _ = tx.send(Ok(last));
        }
    }

    /// Sends a request the queue manager does not answer (an asynchronous put), once fewer than
    /// `backlog` bytes of such requests wait to be written: a program putting faster than the
    /// socket drains waits here.
    pub async fn send_unanswered(
        &self,
        conv: u16,
        req: &Request,
        backlog: u64,
    ) -> Result<(), CallError> {
        loop {
            let written = self.written.notified();
            if let Some(e) = &self.state.lock().broken {
                return Err(CallError::NotSent(e.clone()));
            }
            if self.unwritten.load(Ordering::Acquire) < backlog {
                break;
            }
            written.await;
        }
        let mut out = BytesMut::new();
        let tail = encode_split(conv, self.next_req(), req, &mut out);
        let len = out.len() + tail.as_ref().map_or(0, |b| b.len());
        self.unwritten.fetch_add(len as u64, Ordering::AcqRel);
        if self.tx.send(Out::Unanswered(out, tail)).is_err() {
            return Err(CallError::NotSent(self.broken_error()));
        }
        Ok(())
    }

    /// Sends without waiting for the answer (which the reader then discards).
    pub fn send_oneway(&self, conv: u16, req: &Request) {
        let mut out = BytesMut::new();
        encode_request(conv, self.next_req(), req, &mut out);
        let _ = self.tx.send(Out::Frame(out, None));
    }

    /// Marks the socket broken and fails every outstanding request and stream with `err`. Idempotent: the
    /// first cause wins.
    fn fail(&self, err: MqError) {
        let (pending, streams) = {
            let mut st = self.state.lock();
            if st.broken.is_some() {
                return;
            }
            let err = match &st.farewell {
                Some(f) => MqError::new(
                    err.reason,
                    format!("{}; the queue manager said: {f}", err.message),
                ),
                None => err,
            };
            tracing::debug!(endpoint = %self.endpoint, error = %err, "socket ended");
            st.broken = Some(err);
            (
                std::mem::take(&mut st.pending),
                std::mem::take(&mut st.streams),
            )
        };
        let err = self.broken_error();
        for (_, tx) in pending {
            let _ = tx.send(Err(err.clone()));
        }
        for (_, tx) in streams {
            let _ = tx.send(Err(err.clone()));
        }
        self.stop.send_replace(true);
        self.written.notify_waiters();
    }

    fn ms_since_epoch(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Routes one frame from the queue manager.
    fn dispatch(&self, f: RawFrame) -> Result<(), ProtoError> {
        if f.kind == kind::HEARTBEAT {
            // The queue manager checks that we are alive with a request-kind frame.
            parse_request(&f)?;
            let mut out = BytesMut::new();
            encode_response(f.conv, f.req, &Response::HeartbeatAck, &mut out);
            let _ = self.tx.send(Out::Frame(out, None));
            return Ok(());
        }
        let resp = parse_response(&f)?;
        let mut st = self.state.lock();
        match st.pending.remove(&(f.conv, f.req)) {
            Some(tx) => {
                drop(st);
                let _ = tx.send(Ok(resp));
            }
            None if st.streams.contains_key(&(f.conv, f.req)) => {
                // A failure status is the stream's last frame.
                let last = is_failure(&resp);
                let key = (f.conv, f.req);
                let delivered = st.streams[&key].send(Ok(resp)).is_ok();
                if last || !delivered {
                    st.streams.remove(&key);
                }
            }
            None => match resp {
                Response::Status { reason, message } if f.conv == 0 && reason != Reason::NONE => {
                    st.farewell = Some(format!("{reason}: {message}"));
                }
                other => tracing::debug!(
                    conv = f.conv,
                    req = f.req,
                    kind = other.name(),
                    "answer to a request nobody waits for any more"
                ),
            },
        }
        Ok(())
    }
}

type Handshaken = (BoxRead, BoxWrite, FrameDecoder, BytesMut, Negotiated);

async fn handshake(
    ep: &Endpoint,
    opts: &ConnectOptions,
    qmgr: &str,
    mut rd: BoxRead,
    mut wr: BoxWrite,
    tls: bool,
) -> Result<Handshaken, MqError> {
    let hello = Hello {
        max_msg_len: opts.max_msg_len,
        heartbeat_ms: opts.heartbeat_ms,
        sharecnv: opts.sharecnv,
        // A bindings connection runs as no channel.
        channel: match ep {
            Endpoint::Tcp(..) => opts.channel.clone(),
            Endpoint::Unix(_) => String::new(),
        },
        ..Hello::new(opts.app_name.clone())
    };
    let mut out = BytesMut::new();
    encode_request(0, 0, &Request::Hello(hello), &mut out);
    let io = |e: std::io::Error| {
        // Over TLS the queue manager may refuse this client's certificate only now (TLS 1.3
        // verifies it after the client's side of the handshake ended).
        let refused = e
            .get_ref()
            .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some());
        if tls && refused {
            MqError::new(
                Reason::SSL_INITIALIZATION_ERROR,
                format!("TLS with {ep} failed: {e}"),
            )
        } else {
            broken(format!("handshake with {ep} failed: {e}"))
        }
    };
    let proto =
        |e: ProtoError| MqError::new(e.reason(), format!("handshake with {ep} failed: {e}"));
    wr.write_all(&out).await.map_err(io)?;
    // Until the peer has proved it is a queue manager, it may send only small frames.
    let mut dec = FrameDecoder::new(PRE_HANDSHAKE_FRAME_MAX_BYTES);
    let mut buf = BytesMut::with_capacity(4096);
    let frame = loop {
        if let Some(f) = dec.decode(&mut buf).map_err(proto)? {
            break f;
        }
        if rd.read_buf(&mut buf).await.map_err(io)? == 0 {
            return Err(broken(format!(
                "{ep} closed the connection during the handshake"
            )));
        }
    };
    let params = match parse_response(&frame).map_err(proto)? {
        Response::HelloOk {
            version,
            max_msg_len,
            heartbeat_ms,
            sharecnv,
            qmgr_name,
            ..
        } => Negotiated {
            version,
            max_msg_len,
            heartbeat_ms,
            sharecnv: sharecnv.max(1),
            qmgr_name,
        },
        Response::Status { reason, message } => return Err(MqError::new(reason, message)),
        other => {
            return Err(MqError::new(
                Reason::HEADER_ERROR,
                format!("{ep} answered Hello with {}", other.name()),
            ))
        }
    };
    // Checked here as well as by the queue manager, so that a connection name list pointing at
    // the wrong queue manager fails over to the next address instead of connecting, and so that
    // a reconnect never lands on a different queue manager than the one first connected to.
    if !qmgr.is_empty() && params.qmgr_name != qmgr {
        return Err(MqError::new(
            Reason::Q_MGR_NAME_ERROR,
            format!(
                "{ep} is queue manager '{}', not '{}'",
                params.qmgr_name, qmgr
            ),
        ));
    }
    dec.set_max_frame_bytes(frame_limit_for(params.max_msg_len));
    Ok((rd, wr, dec, buf, params))
}

async fn read_loop(
    sock: Arc<Socket>,
    mut rd: BoxRead,
    mut dec: FrameDecoder,
    mut buf: BytesMut,
    mut stop: watch::Receiver<bool>,
) {
    let err = 'run: loop {
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(f)) => {
                    if let Err(e) = sock.dispatch(f) {
                        break 'run broken(format!("protocol error from {}: {e}", sock.endpoint));
                    }
                }
                Ok(None) => break,
                Err(e) => break 'run broken(format!("protocol error from {}: {e}", sock.endpoint)),
            }
        }
        buf.reserve(dec.read_room(&buf, READ_CHUNK_BYTES));
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) => break broken(format!("the queue manager at {} closed the connection", sock.endpoint)),
                Ok(_) => sock.last_read_ms.store(sock.ms_since_epoch(), Ordering::Relaxed),
                Err(e) => break broken(format!("reading from {} failed: {e}", sock.endpoint)),
            }
        }
    };
    sock.fail(err);
}

async fn write_loop(
    sock: Arc<Socket>,
    mut wr: BoxWrite,
    mut rx: mpsc::UnboundedReceiver<Out>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let first = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            m = rx.recv() => m,
        };
        let Some(mut item) = first else { return };
        // Everything queued goes out together: a put and its commit, answers to heartbeats.
        // Small frames are coalesced into one buffer; a large one, or a put's body sent after
        // its frame's other fields, is written from its own buffer rather than copied again.
        let mut batch: Vec<Piece> = Vec::new();
        let mut bytes = 0usize;
        let mut closing = false;
        let mut unanswered = 0u64;
        loop {
            if let Out::Unanswered(f, body) = item {
                unanswered += (f.len() + body.as_ref().map_or(0, |b| b.len())) as u64;
                item = Out::Frame(f, body);
            }
            match item {
                Out::Frame(f, body) => {
                    bytes += f.len();
                    match batch.last_mut() {
                        Some(Piece::Frames(last))
                            if f.len() < LARGE_FRAME_BYTES && last.len() < LARGE_FRAME_BYTES =>
                        {
                            last.extend_from_slice(&f)
                        }
                        _ => batch.push(Piece::Frames(f)),
                    }
                    if let Some(b) = body {
                        bytes += b.len();
                        batch.push(Piece::Body(b));
                    }
                }
                Out::Unanswered(..) => unreachable!("turned into a frame above"),
                Out::Close => {
                    closing = true;
                    break;
                }
            }
            if bytes >= WRITE_BATCH_BYTES {
                break;
            }
            match rx.try_recv() {
                Ok(next) => item = next,
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            let write_all = async {
                let mut i = 0;
                while i < batch.len() {
                    match (&batch[i], batch.get(i + 1)) {
                        // Frames and the body after them in one (vectored) write.
                        (Piece::Frames(f), Some(Piece::Body(b))) => {
                            let mut both = bytes::Buf::chain(&f[..], &b[..]);
                            wr.write_all_buf(&mut both).await?;
                            i += 2;
                        }
                        (p, _) => {
                            wr.write_all(p.as_slice()).await?;
                            i += 1;
                        }
                    }
                }
                Ok::<(), std::io::Error>(())
            };
            let written = tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                r = write_all => r,
            };
            // A TLS stream may hold records it could not write yet (a no-op on a plain socket).
            let written = match written {
                Ok(()) => wr.flush().await,
                e => e,
            };
            if let Err(e) = written {
                sock.fail(broken(format!("writing to {} failed: {e}", sock.endpoint)));
                return;
            }
            if unanswered > 0 {
                sock.unwritten.fetch_sub(unanswered, Ordering::AcqRel);
                sock.written.notify_waiters();
            }
        }
        if closing {
            let _ = wr.shutdown().await;
            sock.fail(broken("the connection was closed by the application"));
            return;
        }
    }
}

/// Sends a heartbeat whenever nothing has been heard for the negotiated interval, and declares the
/// socket broken when the answer does not come within two intervals: a queue manager that vanished
/// without closing the socket (host down, cable cut) is noticed instead of hanging every call.
async fn heartbeat_loop(sock: Arc<Socket>, mut stop: watch::Receiver<bool>) {
    let interval = Duration::from_millis(sock.params.heartbeat_ms as u64);
    loop {
        let idle = Duration::from_millis(
            sock.ms_since_epoch()
                .saturating_sub(sock.last_read_ms.load(Ordering::Relaxed)),
        );
        if idle < interval {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(interval - idle) => continue,
            }
        }
        let Ok(mut p) = sock.start(0, &[&Request::Heartbeat]) else {
            return;
        };
        let p = p.pop().expect("one request gives one pending answer");
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            r = tokio::time::timeout(2 * interval, p.wait()) => match r {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    sock.fail(broken(format!(
                        "the queue manager at {} did not answer a heartbeat within {} ms",
                        sock.endpoint,
                        2 * interval.as_millis()
                    )));
                    return;
                }
            }
        }
    }
}

/// The sockets of one application connection and the conversations shared out of them
/// ([`crate::Connection::share`] and reconnects draw from here).
pub(crate) struct Pool {
    pub opts: ConnectOptions,
    endpoints: Vec<Endpoint>,
    /// The queue manager every socket must reach: the one named in the options, else the one the
    /// first socket found (so shared conversations and reconnects stay with it).
    qmgr: Mutex<String>,
    // A tokio mutex because opening a socket is held under it: two conversations needing a new
    // socket at once (both reconnecting) must end up sharing one, not opening two.
    sockets: tokio::sync::Mutex<Vec<Arc<Socket>>>,
}

impl Pool {
    pub fn new(opts: ConnectOptions) -> Result<Pool, MqError> {
        let endpoints = crate::options::endpoints(&opts)?;
        Ok(Pool {
            qmgr: Mutex::new(opts.qmgr.clone()),
            opts,
            endpoints,
            sockets: tokio::sync::Mutex::new(Vec::new()),
        })
    }

    /// A conversation id on a live socket with room, opening a socket if none has. With a
    /// `deadline` (reconnecting) each connect is cut short by it.
    pub async fn claim(&self, deadline: Option<Instant>) -> Result<(Arc<Socket>, u16), MqError> {
        let mut socks = self.sockets.lock().await;
        socks.retain(|s| !s.is_broken());
        for s in socks.iter() {
            if let Some(c) = s.claim_conv() {
                return Ok((s.clone(), c));
            }
        }
        let s = self.open_socket(deadline).await?;
        let c = s.claim_conv().ok_or_else(|| s.broken_error())?;
        socks.push(s.clone());
        Ok((s, c))
    }

    /// Tries each address of the list once, in order.
    async fn open_socket(&self, deadline: Option<Instant>) -> Result<Arc<Socket>, MqError> {
        let qmgr = self.qmgr.lock().clone();
        let mut errors: Vec<MqError> = Vec::new();
        for ep in &self.endpoints {
            let limit = match deadline {
                None => self.opts.connect_timeout,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    left.min(self.opts.connect_timeout)
                }
            };
            match Socket::open(ep, &self.opts, &qmgr, limit).await {
                Ok(s) => {
                    if qmgr.is_empty() {
                        *self.qmgr.lock() = s.params.qmgr_name.clone();
                    }
                    return Ok(s);
                }
                Err(e) => {
                    tracing::debug!(endpoint = %ep, error = %e, "connect attempt failed");
                    errors.push(e);
                }
            }
        }
        Err(match errors.len() {
            0 => MqError::new(Reason::HOST_NOT_AVAILABLE, "no time left to connect"),
            1 => errors.pop().expect("one error"),
            n => MqError::new(
                errors[n - 1].reason,
                format!(
                    "none of the {n} addresses could be used: {}",
                    errors
                        .iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ),
        })
    }
}

/// A status reporting a failure (which ends a consumer's stream).
fn is_failure(r: &Response) -> bool {
    match r {
        Response::Status { reason, .. } => *reason != Reason::NONE,
        _ => false,
    }
}
