//! A small fake queue manager for the client's tests: it speaks the native protocol over real
//! sockets (TCP on 127.0.0.1 or a Unix socket in a temp dir) with just enough queue semantics —
//! queues made on open, syncpoint puts and gets, waiting gets, heartbeats, asynchronous consumers
//! with credit-based flow control — and records what it received so tests can check what went
//! over the wire.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_client::{ConnectOptions, Reconnect};
use ferrymq_proto::{
    encode_request, encode_response, frame_limit_for, kind, negotiate, parse_request, FrameDecoder,
    Request, Response, PRE_HANDSHAKE_FRAME_MAX_BYTES,
};
use ferrymq_types::options::{Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Every test's async body runs under this bound.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test exceeded its time bound")
}

#[derive(Clone, Debug)]
pub struct Config {
    pub qmgr: String,
    pub max_msg_len: u32,
    pub heartbeat_ms: u32,
    pub sharecnv: u16,
    pub answer_heartbeats: bool,
    /// First object handle given out, so that two servers give different numbers.
    pub first_hobj: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            qmgr: "QM1".into(),
            max_msg_len: 4 * 1024 * 1024,
            heartbeat_ms: 0,
            sharecnv: 10,
            answer_heartbeats: true,
            first_hobj: 1,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Stored {
    pub md: MessageDescriptor,
    pub props: Properties,
    pub body: Bytes,
}

/// A request as the server received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub sock: u64,
    pub conv: u16,
    pub kind: u8,
}

#[derive(Default)]
struct ConvSt {
    hobjs: HashMap<u32, String>,
    uow_puts: Vec<(String, Stored)>,
    uow_gets: Vec<(String, Stored)>,
}

/// A registered consumer: pushes `Message` frames with its registration's `req`, one per credit.
struct ConsumerSt {
    req: u32,
    queue: String,
    opts: ferrymq_types::options::GetOptions,
    credit: u64,
}

#[derive(Default)]
struct St {
    queues: HashMap<String, VecDeque<Stored>>,
    convs: HashMap<(u64, u16), ConvSt>,
    next_hobj: u32,
    next_id: u64,
    sockets: u64,
    events: Vec<Event>,
    /// Frame kinds decoded from each read, in order.
    read_batches: Vec<Vec<u8>>,
    heartbeats_from_client: usize,
    acks_from_client: usize,
    writers: HashMap<u64, mpsc::UnboundedSender<BytesMut>>,
    /// By (socket, conversation, hobj).
    consumers: HashMap<(u64, u16, u32), ConsumerSt>,
    /// (socket, conversation, req) of every consumer that ended, in order.
    ended_consumers: Vec<(u64, u16, u32)>,
    /// Messages pushed to consumers, and credits granted to them, in all.
    pushed: u64,
    granted: u64,
}

struct Shared {
    cfg: Config,
    st: Mutex<St>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

pub struct FakeServer {
    shared: Arc<Shared>,
    pub port: u16,
}

impl FakeServer {
    pub async fn start(cfg: Config) -> FakeServer {
        FakeServer::start_on(cfg, 0).await
    }

    /// Listens on `port` of 127.0.0.1 (0: any free port).
    pub async fn start_on(cfg: Config, port: u16) -> FakeServer {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = new_shared(cfg);
        let sh = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let _ = s.set_nodelay(true);
                spawn_conn(&sh, s);
            }
        });
        shared.tasks.lock().push(accept);
        FakeServer { shared, port }
    }

    /// Listens on the bindings socket of `cfg.qmgr` under `home`.
    pub async fn start_unix(cfg: Config, home: &Path) -> FakeServer {
        let path = ferrymq_client::bindings_socket_path(home, &cfg.qmgr).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let shared = new_shared(cfg);
        let sh = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                spawn_conn(&sh, s);
            }
        });
        shared.tasks.lock().push(accept);
        FakeServer { shared, port: 0 }
    }

    pub fn conn_name(&self) -> String {
        format!("127.0.0.1({})", self.port)
    }

    /// Client options for this server, with short timeouts and no heartbeat proposal.
    pub fn client_options(&self) -> ConnectOptions {
        let mut o =
            ConnectOptions::client(self.shared.cfg.qmgr.clone(), &self.conn_name()).unwrap();
        o.heartbeat_ms = 0;
        o.connect_timeout = Duration::from_secs(2);
        o
    }

    /// Stops listening and drops every socket at once, like a crashed queue manager.
    pub async fn kill(&self) {
        let tasks: Vec<_> = self.shared.tasks.lock().drain(..).collect();
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
        self.shared.st.lock().writers.clear();
    }

    pub fn enqueue(&self, queue: &str, body: &'static [u8]) {
        let m = Stored {
            md: MessageDescriptor::default(),
            props: Properties::default(),
            body: Bytes::from_static(body),
        };
        let mut st = self.shared.st.lock();
        st.queues.entry(queue.to_string()).or_default().push_back(m);
        pump(&mut st);
    }

    /// Messages pushed to consumers so far.
    pub fn pushed(&self) -> u64 {
        self.shared.st.lock().pushed
    }

    /// Credits granted by clients so far (with registrations and Credit frames).
    pub fn granted(&self) -> u64 {
        self.shared.st.lock().granted
    }

    pub fn consumers(&self) -> usize {
        self.shared.st.lock().consumers.len()
    }

    /// Ends every consumer from the server side with a final `Status{reason}`, as when its
    /// queue is deleted.
    pub fn end_consumers(&self, reason: Reason) {
        let mut st = self.shared.st.lock();
        let all: Vec<_> = st.consumers.drain().collect();
        for ((sock, conv, _), c) in all {
            if let Some(tx) = st.writers.get(&sock) {
                send(tx, conv, c.req, &status(reason, "the consumer ended"));
            }
            st.ended_consumers.push((sock, conv, c.req));
        }
    }

    /// Sends a message frame for every consumer that already ended (a late delivery the client
    /// must discard).
    pub fn push_to_ended_consumers(&self, body: &'static [u8]) {
        let st = self.shared.st.lock();
        for (sock, conv, req) in &st.ended_consumers {
            if let Some(tx) = st.writers.get(sock) {
                let m = Response::Message {
                    reason: Reason::NONE,
                    data_len: body.len() as u32,
                    md: MessageDescriptor::default(),
                    props: Properties::default(),
                    body: Bytes::from_static(body),
                };
                send(tx, *conv, *req, &m);
            }
        }
    }

    pub fn depth(&self, queue: &str) -> usize {
        self.shared
            .st
            .lock()
            .queues
            .get(queue)
            .map_or(0, |q| q.len())
    }

    pub fn events(&self) -> Vec<Event> {
        self.shared.st.lock().events.clone()
    }

    pub fn count(&self, kind: u8) -> usize {
        self.events().iter().filter(|e| e.kind == kind).count()
    }

    pub fn read_batches(&self) -> Vec<Vec<u8>> {
        self.shared.st.lock().read_batches.clone()
    }

    pub fn sockets_accepted(&self) -> u64 {
        self.shared.st.lock().sockets
    }

    pub fn client_heartbeats(&self) -> usize {
        self.shared.st.lock().heartbeats_from_client
    }

    pub fn acks_from_client(&self) -> usize {
        self.shared.st.lock().acks_from_client
    }

    /// Sends a Heartbeat request frame to every connected client.
    pub fn push_heartbeat(&self) {
        for tx in self.shared.st.lock().writers.values() {
            let mut b = BytesMut::new();
            encode_request(0, 7, &Request::Heartbeat, &mut b);
            let _ = tx.send(b);
        }
    }
}

/// Polls `f` until it holds, or panics after a few seconds.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Options to connect to `servers` in order with reconnect enabled.
pub fn reconnecting_options(servers: &[&FakeServer], timeout: Duration) -> ConnectOptions {
    let list: Vec<String> = servers.iter().map(|s| s.conn_name()).collect();
    let mut o = servers[0].client_options();
    o.transport = ferrymq_client::Transport::Client {
        conn_names: ferrymq_client::parse_conn_name(&list.join(", ")).unwrap(),
    };
    o.reconnect = Reconnect::Enabled { timeout };
    o
}

fn new_shared(cfg: Config) -> Arc<Shared> {
    let st = St {
        next_hobj: cfg.first_hobj,
        ..St::default()
    };
    Arc::new(Shared {
        cfg,
        st: Mutex::new(st),
        tasks: Mutex::new(Vec::new()),
    })
}

fn spawn_conn<S: AsyncRead + AsyncWrite + Send + 'static>(sh: &Arc<Shared>, s: S) {
    let (rd, mut wr) = tokio::io::split(s);
    let (tx, mut rx) = mpsc::unbounded_channel::<BytesMut>();
    let sock = {
        let mut st = sh.st.lock();
        st.sockets += 1;
        let id = st.sockets;
        st.writers.insert(id, tx.clone());
        id
    };
    let writer = tokio::spawn(async move {
        while let Some(b) = rx.recv().await {
            if wr.write_all(&b).await.is_err() {
                return;
            }
        }
    });
    let reader = tokio::spawn(serve(sh.clone(), sock, rd, tx));
    sh.tasks.lock().extend([writer, reader]);
}

type Tx = mpsc::UnboundedSender<BytesMut>;

fn send(tx: &Tx, conv: u16, req: u32, r: &Response) {
    let mut b = BytesMut::new();
    encode_response(conv, req, r, &mut b);
    let _ = tx.send(b);
}

fn status(reason: Reason, message: &str) -> Response {
    Response::Status {
        reason,
        message: message.into(),
    }
}

async fn serve<R: AsyncRead + Unpin>(sh: Arc<Shared>, sock: u64, mut rd: R, tx: Tx) {
    let mut dec = FrameDecoder::new(PRE_HANDSHAKE_FRAME_MAX_BYTES);
    let mut buf = BytesMut::new();
    let mut hello_done = false;
    loop {
        // Room for whatever the client wrote at once, so each read shows one client write.
        buf.reserve(64 * 1024);
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut kinds = Vec::new();
        while let Some(f) = dec.decode(&mut buf).expect("client sent a bad frame") {
            kinds.push(f.kind);
            if f.kind == kind::HEARTBEAT_ACK {
                sh.st.lock().acks_from_client += 1;
                continue;
            }
            let req = parse_request(&f).expect("client sent a bad request");
            if !hello_done {
                let Request::Hello(h) = req else {
                    panic!("first frame was not Hello")
                };
                let c = &sh.cfg;
                let (version, max_msg_len, heartbeat_ms, sharecnv) =
                    negotiate(&h, c.max_msg_len, c.heartbeat_ms, c.sharecnv).unwrap();
                dec.set_max_frame_bytes(frame_limit_for(max_msg_len));
                let ok = Response::HelloOk {
                    version,
                    max_msg_len,
                    heartbeat_ms,
                    sharecnv,
                    qmgr_name: c.qmgr.clone(),
                    server_id: "fake".into(),
                };
                send(&tx, 0, 0, &ok);
                hello_done = true;
                continue;
            }
            sh.st.lock().events.push(Event {
                sock,
                conv: f.conv,
                kind: f.kind,
            });
            handle(&sh, sock, f.conv, f.req, req, &tx);
        }
        sh.st.lock().read_batches.push(kinds);
    }
    // The socket ended: its conversations end, backing out their units of work.
    let mut st = sh.st.lock();
    st.writers.remove(&sock);
    st.consumers.retain(|k, _| k.0 != sock);
    let convs: Vec<_> = st.convs.keys().filter(|k| k.0 == sock).copied().collect();
    for k in convs {
        if let Some(c) = st.convs.remove(&k) {
            backout(&mut st, c);
        }
    }
}

fn backout(st: &mut St, mut c: ConvSt) {
    for (q, m) in c.uow_gets.drain(..).rev() {
        st.queues.entry(q).or_default().push_front(m);
    }
}

fn commit(st: &mut St, key: (u64, u16)) {
    let c = st.convs.get_mut(&key).unwrap();
    let puts = std::mem::take(&mut c.uow_puts);
    c.uow_gets.clear();
    for (q, m) in puts {
        st.queues.entry(q).or_default().push_back(m);
    }
}

fn handle(sh: &Arc<Shared>, sock: u64, conv: u16, req: u32, r: Request, tx: &Tx) {
    let key = (sock, conv);
    let mut st = sh.st.lock();
    let reply = match r {
        Request::Heartbeat => {
            st.heartbeats_from_client += 1;
            if !sh.cfg.answer_heartbeats {
                return;
            }
            Response::HeartbeatAck
        }
        Request::Connect { qmgr, .. } => {
            if !qmgr.is_empty() && qmgr != sh.cfg.qmgr {
                status(Reason::Q_MGR_NAME_ERROR, "wrong queue manager")
            } else {
                st.convs.insert(key, ConvSt::default());
                status(Reason::NONE, "")
            }
        }
        Request::Admin { command } => match command.as_str() {
            // Never answered: lets a test break the socket with a call in flight.
            "STALL" => return,
            "FAIL" => Response::AdminReply {
                text: "it failed".into(),
                reason: Reason::OBJECT_DAMAGED,
            },
            _ => Response::AdminReply {
                text: format!("OK {command}"),
                reason: Reason::NONE,
            },
        },
        _ if !st.convs.contains_key(&key) => status(Reason::HCONN_ERROR, "not connected"),
        Request::Disconnect => {
            st.consumers.retain(|k, _| (k.0, k.1) != key);
            let c = st.convs.remove(&key).unwrap();
            backout(&mut st, c);
            status(Reason::NONE, "")
        }
        Request::Open {
            name, dynamic_name, ..
        } => {
            if name == "MISSING" {
                status(Reason::UNKNOWN_OBJECT_NAME, "no such queue")
            } else {
                let resolved = if dynamic_name.is_empty() {
                    name
                } else {
                    dynamic_name.replace('*', &format!("{:08}", st.next_id))
                };
                let hobj = st.next_hobj;
                st.next_hobj += 1;
                st.next_id += 1;
                st.queues.entry(resolved.clone()).or_default();
                st.convs
                    .get_mut(&key)
                    .unwrap()
                    .hobjs
                    .insert(hobj, resolved.clone());
                Response::Opened {
                    hobj,
                    name: resolved,
                    async_default: false,
                }
            }
        }
        Request::Close { hobj, .. } => match st.convs.get_mut(&key).unwrap().hobjs.remove(&hobj) {
            Some(_) => {
                st.consumers.remove(&(sock, conv, hobj));
                status(Reason::NONE, "")
            }
            None => status(Reason::HOBJ_ERROR, "bad hobj"),
        },
        Request::Put {
            hobj,
            opts,
            md,
            props,
            body,
        } => match st.convs[&key].hobjs.get(&hobj).cloned() {
            None => status(Reason::HOBJ_ERROR, "bad hobj"),
            Some(q) => put(&mut st, key, q, opts.syncpoint, md, props, body),
        },
        Request::Put1 {
            name,
            opts,
            md,
            props,
            body,
            ..
        } => put(&mut st, key, name, opts.syncpoint, md, props, body),
        Request::Get { hobj, opts } => {
            let Some(q) = st.convs[&key].hobjs.get(&hobj).cloned() else {
                send(tx, conv, req, &status(Reason::HOBJ_ERROR, "bad hobj"));
                return;
            };
            if let Some(m) = take(&mut st, key, &q, &opts) {
                m
            } else {
                let deadline = match opts.wait {
                    Wait::NoWait => {
                        send(tx, conv, req, &status(Reason::NO_MSG_AVAILABLE, "empty"));
                        return;
                    }
                    Wait::Ms(ms) => Some(Instant::now() + Duration::from_millis(ms)),
                    Wait::Unlimited => None,
                };
                let (sh2, tx2) = (sh.clone(), tx.clone());
                drop(st);
                // Waits by polling: simple, and the tests only need it to be prompt.
                let waiter = tokio::spawn(async move {
                    loop {
                        if tx2.is_closed() {
                            return;
                        }
                        let got = {
                            let mut st = sh2.st.lock();
                            if !st.convs.contains_key(&key) {
                                return;
                            }
                            take(&mut st, key, &q, &opts)
                        };
                        if let Some(m) = got {
                            send(&tx2, conv, req, &m);
                            return;
                        }
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            send(
                                &tx2,
                                conv,
                                req,
                                &status(Reason::NO_MSG_AVAILABLE, "wait ended"),
                            );
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                });
                sh.tasks.lock().push(waiter);
                return;
            }
        }
        Request::Commit => {
            commit(&mut st, key);
            status(Reason::NONE, "")
        }
        Request::Backout => {
            let c = std::mem::take(st.convs.get_mut(&key).unwrap());
            let hobjs = c.hobjs.clone();
            backout(&mut st, c);
            st.convs.get_mut(&key).unwrap().hobjs = hobjs;
            status(Reason::NONE, "")
        }
        Request::Inquire { hobj, selectors } => match st.convs[&key].hobjs.get(&hobj).cloned() {
            None => status(Reason::HOBJ_ERROR, "bad hobj"),
            Some(q) => {
                let depth = st.queues.get(&q).map_or(0, |q| q.len());
                Response::InquireReply {
                    attrs: selectors
                        .into_iter()
                        .map(|s| {
                            let v = if s == "CURDEPTH" {
                                depth.to_string()
                            } else {
                                "?".into()
                            };
                            (s, v)
                        })
                        .collect(),
                }
            }
        },
        Request::RegisterConsumer { hobj, opts } => {
            match st.convs[&key].hobjs.get(&hobj).cloned() {
                None => status(Reason::HOBJ_ERROR, "bad hobj"),
                Some(_) if opts.browse != ferrymq_types::options::Browse::No => {
                    status(Reason::OPTIONS_ERROR, "a consumer cannot browse")
                }
                Some(queue) => {
                    // Replaces any earlier consumer of the handle.
                    st.consumers.insert(
                        (sock, conv, hobj),
                        ConsumerSt {
                            req,
                            queue,
                            opts,
                            credit: 0,
                        },
                    );
                    status(Reason::NONE, "")
                }
            }
        }
        Request::Credit { hobj, n } => {
            // No answer.
            if let Some(c) = st.consumers.get_mut(&(sock, conv, hobj)) {
                c.credit += u64::from(n);
                st.granted += u64::from(n);
                pump(&mut st);
            }
            return;
        }
        Request::CancelConsumer { hobj } => {
            if let Some(c) = st.consumers.remove(&(sock, conv, hobj)) {
                st.ended_consumers.push((sock, conv, c.req));
            }
            status(Reason::NONE, "")
        }
        other => status(
            Reason::OPTIONS_ERROR,
            &format!("{} not supported", other.name()),
        ),
    };
    drop(st);
    send(tx, conv, req, &reply);
    // A put may have given a consumer something to push.
    pump(&mut sh.st.lock());
}

/// Pushes what every consumer has credit for, and never more. A message too long for a consumer that does not
/// accept truncation ends it with TRUNCATED_MSG_FAILED (the message stays on the queue).
fn pump(st: &mut St) {
    let keys: Vec<_> = st.consumers.keys().copied().collect();
    for k in keys {
        while let Some(c) = st.consumers.get(&k) {
            if c.credit == 0 {
                break;
            }
            let (queue, opts, req) = (c.queue.clone(), c.opts.clone(), c.req);
            let Some(tx) = st.writers.get(&k.0).cloned() else {
                break;
            };
            let Some(r) = take(st, (k.0, k.1), &queue, &opts) else {
                break;
            };
            let end = matches!(r, Response::Status { .. });
            send(&tx, k.1, req, &r);
            if end {
                st.consumers.remove(&k);
                st.ended_consumers.push((k.0, k.1, req));
                break;
            }
            let c = st.consumers.get_mut(&k).unwrap();
            c.credit -= 1;
            st.pushed += 1;
        }
    }
}

fn put(
    st: &mut St,
    key: (u64, u16),
    q: String,
    sp: Syncpoint,
    mut md: MessageDescriptor,
    props: Properties,
    body: Bytes,
) -> Response {
    st.next_id += 1;
    let mut id = [0u8; 24];
    id[..8].copy_from_slice(&st.next_id.to_le_bytes());
    md.msg_id = id;
    let (msg_id, correl_id) = (md.msg_id, md.correl_id);
    let m = Stored { md, props, body };
    if sp == Syncpoint::Yes {
        st.convs.get_mut(&key).unwrap().uow_puts.push((q, m));
    } else {
        st.queues.entry(q).or_default().push_back(m);
    }
    Response::PutOk {
        msg_id,
        correl_id,
        group: None,
    }
}

fn take(
    st: &mut St,
    key: (u64, u16),
    q: &str,
    opts: &ferrymq_types::options::GetOptions,
) -> Option<Response> {
    let queue = st.queues.get_mut(q)?;
    let front = queue.front()?;
    let len = front.body.len();
    let truncated = len > opts.max_len as usize;
    if truncated && !opts.accept_truncated {
        return Some(status(Reason::TRUNCATED_MSG_FAILED, "buffer too small"));
    }
    let m = queue.pop_front().unwrap();
    let body = if truncated {
        m.body.slice(..opts.max_len as usize)
    } else {
        m.body.clone()
    };
    let resp = Response::Message {
        reason: if truncated {
            Reason::TRUNCATED_MSG_ACCEPTED
        } else {
            Reason::NONE
        },
        data_len: len as u32,
        md: m.md.clone(),
        props: m.props.clone(),
        body,
    };
    if opts.syncpoint == Syncpoint::Yes {
        st.convs
            .get_mut(&key)
            .unwrap()
            .uow_gets
            .push((q.to_string(), m));
    }
    Some(resp)
}
