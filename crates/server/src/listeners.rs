//! TCP listeners as MQ objects: the queue manager's own port from `qm.ini`, plus LISTENER objects
//! started by START LISTENER or, with CONTROL(QMGR), with the queue manager. Also the registry of
//! live sockets behind DISPLAY CHSTATUS. Each listener is an accept task; stopping one aborts it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ferrymq_security::tls::TlsSession;
use ferrymq_types::{limits, MqError, ObjectDef, Reason};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::qmgr::Shared;
use crate::security::tls::{sniff, FirstByte};
use crate::storage::now_ms;

/// The listener for the port in `qm.ini` (MQ creates a similar system listener).
pub const QMGR_LISTENER: &str = "SYSTEM.QMGR.TCP";

/// A started listener name; several names may share one port's accept task.
struct Running {
    port: u16,
    started_ms: u64,
}

/// The accept task of one port and how many listener names use it.
struct Port {
    task: JoinHandle<()>,
    users: usize,
}

/// A live socket, as DISPLAY CHSTATUS shows it.
#[derive(Debug, Clone)]
pub struct SocketInfo {
    pub conname: String,
    pub bindings: bool,
    /// The operating-system user of a bindings connection's process (from the socket's peer
    /// credentials): the UserIdentifier of the messages it puts.
    pub os_user: Option<String>,
    pub started_ms: u64,
    pub conversations: Arc<AtomicU64>,
    pub frames: Arc<AtomicU64>,
    /// The channel the socket runs as and the effective user of its latest conversation.
    pub state: Arc<parking_lot::Mutex<SocketState>>,
    /// What a TLS socket negotiated and its client's certificate (None: a plain socket).
    pub tls: Option<Arc<TlsSession>>,
}

/// What DISPLAY CHSTATUS shows of who a socket is, filled in at Hello and Connect.
#[derive(Debug, Clone, Default)]
pub struct SocketState {
    pub channel: String,
    pub user: String,
}

/// The channel client sockets are on until the Hello names one.
pub const DEFAULT_SVRCONN: &str = "SYSTEM.DEF.SVRCONN";

#[derive(Default)]
pub struct Control {
    listeners: BTreeMap<String, Running>,
    ports: BTreeMap<u16, Port>,
    pub sockets: BTreeMap<u64, SocketInfo>,
    next_socket: u64,
    /// Connection tasks running (an immediate end waits for them to finish).
    pub live: Arc<AtomicUsize>,
    /// Connections refused since the last refusal entry, and when that entry was written.
    refused: u64,
    refused_logged_ms: u64,
}

pub(crate) fn fmt_date_time(ms: u64) -> (String, String) {
    let md = ferrymq_types::MessageDescriptor {
        put_time_ms: ms,
        ..Default::default()
    };
    let (d, t) = md.put_date_time();
    (
        format!("{}-{}-{}", &d[..4], &d[4..6], &d[6..8]),
        format!("{}.{}.{}", &t[..2], &t[2..4], &t[4..6]),
    )
}

impl Control {
    pub fn register_socket(
        &mut self,
        conname: String,
        bindings: bool,
        os_user: Option<String>,
        tls: Option<Arc<TlsSession>>,
    ) -> (u64, SocketInfo) {
        self.next_socket += 1;
        let info = SocketInfo {
            conname,
            bindings,
            os_user,
            tls,
            started_ms: now_ms(),
            conversations: Arc::new(AtomicU64::new(0)),
            frames: Arc::new(AtomicU64::new(0)),
            state: Arc::default(),
        };
        self.sockets.insert(self.next_socket, info.clone());
        (self.next_socket, info)
    }

    pub fn listener_rows(&self) -> Vec<Vec<(String, String)>> {
        self.listeners
            .iter()
            .map(|(name, r)| {
                let (d, t) = fmt_date_time(r.started_ms);
                vec![
                    ("LISTENER".into(), name.clone()),
                    (
                        "STATUS".into(),
                        if self
                            .ports
                            .get(&r.port)
                            .is_some_and(|p| !p.task.is_finished())
                        {
                            "RUNNING".into()
                        } else {
                            "STOPPED".into()
                        },
                    ),
                    ("PORT".into(), r.port.to_string()),
                    ("TRPTYPE".into(), "TCP".into()),
                    ("STARTDA".into(), d),
                    ("STARTTI".into(), t),
                ]
            })
            .collect()
    }

    pub fn channel_rows(&self) -> Vec<Vec<(String, String)>> {
        self.sockets
            .values()
            .filter(|s| !s.bindings)
            .map(|s| {
                let (d, t) = fmt_date_time(s.started_ms);
                let st = s.state.lock().clone();
                // Between accept and Hello a socket is not bound to a channel yet.
                let (channel, status) = if st.channel.is_empty() {
                    ("SYSTEM.DEF.SVRCONN".to_string(), "BINDING")
                } else {
                    (st.channel, "RUNNING")
                };
                let (ciph, peer) = match &s.tls {
                    Some(t) => (
                        t.cipher_name(),
                        t.peer
                            .as_ref()
                            .map(|p| p.subject.clone())
                            .unwrap_or_default(),
                    ),
                    None => (String::new(), String::new()),
                };
                vec![
                    ("CHANNEL".into(), channel),
                    ("CHLTYPE".into(), "SVRCONN".into()),
                    ("CONNAME".into(), s.conname.clone()),
                    ("STATUS".into(), status.into()),
                    ("MCAUSER".into(), st.user),
                    (
                        "CURSHCNV".into(),
                        s.conversations.load(Ordering::Relaxed).to_string(),
                    ),
                    ("MSGS".into(), s.frames.load(Ordering::Relaxed).to_string()),
                    ("CHSTADA".into(), d),
                    ("CHSTATI".into(), t),
                    ("SSLCIPH".into(), ciph),
                    ("SSLPEER".into(), peer),
                ]
            })
            .collect()
    }

    pub fn stop_all(&mut self) {
        self.listeners.clear();
        for (_, p) in std::mem::take(&mut self.ports) {
            p.task.abort();
        }
    }
}

/// Starts a named listener on `port`. A port some running listener already serves is shared, so
/// a LISTENER object on the queue manager's own port starts cleanly.
pub fn start(
    shared: &Arc<Shared>,
    name: &str,
    address: &str,
    port: u16,
) -> Result<String, MqError> {
    let mut ctl = shared.control.lock();
    ctl.ports.retain(|_, p| !p.task.is_finished());
    if let Some(r) = ctl.listeners.get(name) {
        if ctl.ports.contains_key(&r.port) {
            return Err(MqError::new(
                Reason::LISTENER_STARTED,
                format!("listener {name} is already running on port {}", r.port),
            ));
        }
    }
    if let Some(p) = ctl.ports.get_mut(&port) {
        p.users += 1;
        ctl.listeners.insert(
            name.to_string(),
            Running {
                port,
                started_ms: now_ms(),
            },
        );
        return Ok(format!(
            "listener {name} started on port {port}, which the queue manager already listens on"
        ));
    }
    let addr = format!("{address}:{port}");
    let listener = bind(&addr).map_err(|e| {
        MqError::new(
            Reason::RESOURCE_PROBLEM,
            format!("listener {name} cannot listen on {addr}: {e}"),
        )
    })?;
    let task = tokio::spawn(accept_loop(shared.clone(), listener));
    ctl.ports.insert(port, Port { task, users: 1 });
    ctl.listeners.insert(
        name.to_string(),
        Running {
            port,
            started_ms: now_ms(),
        },
    );
    Ok(format!("listener {name} started on port {port}"))
}

/// Listens on `addr` with a deep accept backlog (`limits::LISTEN_BACKLOG`): thousands of
/// clients connecting at once must wait in it, not have their SYNs dropped and retried a second
/// later.
fn bind(addr: &str) -> std::io::Result<TcpListener> {
    use std::net::ToSocketAddrs;
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        let s = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        s.set_reuseaddr(true)?;
        match s.bind(a).and_then(|_| s.listen(limits::LISTEN_BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other(format!("{addr} names no address"))))
}

pub fn stop(shared: &Arc<Shared>, name: &str) -> Result<String, MqError> {
    let mut ctl = shared.control.lock();
    let r = ctl.listeners.remove(name).ok_or_else(|| {
        MqError::new(
            Reason::LISTENER_STOPPED,
            format!("listener {name} is not running"),
        )
    })?;
    if let Some(p) = ctl.ports.get_mut(&r.port) {
        p.users -= 1;
        if p.users == 0 {
            p.task.abort();
            ctl.ports.remove(&r.port);
        }
    }
    Ok(format!("listener {name} stopped"))
}

/// The address and port a LISTENER object listens on. As in MQ, PORT(0) (the default) means
/// the queue manager's own port (qm.ini `QueueManager:Port`), or MQ's 1414 when it has none; an
/// empty IPADDR means the queue manager's bind address.
pub fn address_of(shared: &Shared, def: &ObjectDef) -> (String, u16) {
    let port = match def.attrs.get("PORT").and_then(|p| p.parse::<u16>().ok()) {
        Some(p) if p != 0 => p,
        _ if shared.cfg.port != 0 => shared.cfg.port,
        _ => MQ_DEFAULT_PORT,
    };
    let addr = def
        .attrs
        .get("IPADDR")
        .filter(|a| !a.is_empty())
        .cloned()
        .unwrap_or_else(|| shared.cfg.bind_address.clone());
    (addr, port)
}

/// MQ's registered port, for a listener with PORT(0) on a queue manager without a port.
const MQ_DEFAULT_PORT: u16 = 1414;

/// Starts every LISTENER object defined with CONTROL(QMGR).
pub fn start_controlled(shared: &Arc<Shared>, defs: Vec<ObjectDef>) {
    for d in defs {
        if d.attrs.get("CONTROL").map(String::as_str) != Some("QMGR") {
            continue;
        }
        let (addr, port) = address_of(shared, &d);
        match start(shared, &d.name, &addr, port) {
            Ok(m) => crate::qm_log!(crate::errlog::ids::LISTENER_STARTED, "{m}"),
            // Started when this instance became active before.
            Err(e) if e.reason == Reason::LISTENER_STARTED => {}
            Err(e) => crate::qm_log!(
                crate::errlog::ids::LISTENER_FAILED,
                "listener {} did not start: {e}",
                d.name
            ),
        }
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    // One descriptor held in reserve: when accept fails for want of descriptors, it is let go so
    // that the connection waiting in the backlog can be accepted and refused with a reason,
    // instead of staying there and keeping the listener readable (a spin) or the client hanging.
    let mut reserve = std::fs::File::open("/dev/null").ok();
    // Failures are logged once per burst: the first after a successful accept.
    let mut failing = false;
    loop {
        match listener.accept().await {
            Ok((s, peer)) => {
                failing = false;
                // BLOCKADDR decides on the address alone, before any frame is read.
                if crate::connsec::refused_at_accept(&shared, &peer.ip().to_string()) {
                    drop(s);
                    continue;
                }
                let _ = s.set_nodelay(true);
                accept_tcp(&shared, s, peer.ip().to_string());
            }
            Err(e) => {
                let out_of_fds = matches!(e.raw_os_error(), Some(c) if c == EMFILE || c == ENFILE);
                if !failing {
                    failing = true;
                    crate::qm_log!(
                        crate::errlog::ids::ACCEPT_FAILED,
                        "accept failed: {e}{}; accepting again every {} ms, refusing what cannot be served",
                        if out_of_fds { " (the open-file limit is reached)" } else { "" },
                        limits::ACCEPT_BACKOFF_MS
                    );
                }
                // Shed what waits in the backlog: each connection accepted with the reserve's
                // descriptor, told why and closed at once (which frees the descriptor for the
                // reserve again), until none is waiting.
                while out_of_fds && reserve.take().is_some() {
                    let next = tokio::time::timeout(
                        std::time::Duration::from_millis(1),
                        listener.accept(),
                    )
                    .await;
                    let shed = match next {
                        Ok(Ok((s, peer))) => {
                            refuse_now(
                                &shared,
                                s,
                                peer.ip().to_string(),
                                "the queue manager is out of file descriptors (its open-file limit)",
                            );
                            true
                        }
                        _ => false,
                    };
                    reserve = std::fs::File::open("/dev/null").ok();
                    if !shed {
                        break;
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(limits::ACCEPT_BACKOFF_MS))
                    .await;
            }
        }
    }
}

/// errno values for a process (EMFILE) or system (ENFILE) out of file descriptors.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// Takes one of the connection slots (client and bindings connections are counted apart).
fn take_slot(shared: &Arc<Shared>, bindings: bool) -> Option<OwnedSemaphorePermit> {
    let slots: &Arc<Semaphore> = if bindings {
        &shared.bindings_slots
    } else {
        &shared.slots
    };
    slots.clone().try_acquire_owned().ok()
}

/// The refusal of a connection beyond MaxChannels or MaxActiveChannels.
fn channels_full(shared: &Shared) -> String {
    let cfg = &shared.cfg;
    if cfg.max_active < cfg.max_sockets {
        format!(
            "Channels:MaxActiveChannels ({}) channels are running",
            cfg.max_active
        )
    } else {
        format!(
            "Channels:MaxChannels ({}) channels are running",
            cfg.max_sockets
        )
    }
}

/// Refuses a client socket: logs it (at most once per interval, with how many), then tells the
/// client MQRC_CHANNEL_NOT_AVAILABLE (2537) and closes. The client's Hello is read and dropped
/// until it closes, or for a bounded time, so that the close does not reset the connection
/// before the client has read the reason.
fn refuse(shared: &Arc<Shared>, s: TcpStream, conname: String, why: &str) {
    log_refusal(shared, &conname, why);
    let Ok(permit) = shared.refusals.clone().try_acquire_owned() else {
        // Too many refusals in flight: this one is closed without a word.
        return;
    };
    let frame = refusal_frame(why);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = s;
        let linger = std::time::Duration::from_millis(limits::REFUSAL_LINGER_MS);
        let _ = tokio::time::timeout(linger, async {
            s.write_all(&frame).await?;
            s.shutdown().await?;
            let mut sink = [0u8; 512];
            while s.read(&mut sink).await? > 0 {}
            Ok::<(), std::io::Error>(())
        })
        .await;
        drop(permit);
    });
}

/// Refuses a socket without waiting (its descriptor is needed back at once): what the client
/// sent is read and dropped, the reason written if the socket takes it, and the socket closed.
fn refuse_now(shared: &Arc<Shared>, s: TcpStream, conname: String, why: &str) {
    log_refusal(shared, &conname, why);
    let mut sink = [0u8; 512];
    for _ in 0..16 {
        match s.try_read(&mut sink) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
    let _ = s.try_write(&refusal_frame(why));
}

/// MQRC_CHANNEL_NOT_AVAILABLE, as the client reads it in answer to its Hello.
fn refusal_frame(why: &str) -> bytes::Bytes {
    crate::core::encode(
        0,
        0,
        &crate::core::error_response(MqError::new(
            Reason::CHANNEL_NOT_AVAILABLE,
            format!("connection refused: {why}; try again later"),
        )),
    )
}

/// Logs a refusal, at most once per interval, saying how many there were since the last entry.
fn log_refusal(shared: &Arc<Shared>, conname: &str, why: &str) {
    let now = now_ms();
    let summary = {
        let mut ctl = shared.control.lock();
        ctl.refused += 1;
        if now.saturating_sub(ctl.refused_logged_ms) >= limits::REFUSAL_LOG_INTERVAL_MS {
            ctl.refused_logged_ms = now;
            Some(std::mem::take(&mut ctl.refused))
        } else {
            None
        }
    };
    if let Some(n) = summary {
        crate::qm_log!(
            crate::errlog::ids::MAX_CHANNELS,
            "connection from {conname} refused with MQRC_CHANNEL_NOT_AVAILABLE (2537): {why}{}",
            if n > 1 {
                format!(" ({n} connections refused since the last entry)")
            } else {
                String::new()
            }
        )
    }
}

/// Spawns a connection's task, counted until it ends (an immediate end waits for them). The
/// task is made by `make` around its count, rather than wrapped in another future: a wrapper
/// that moves a future in and awaits it holds it twice, doubling every idle socket's task.
fn spawn_tracked<F>(shared: &Arc<Shared>, make: impl FnOnce(LiveTask) -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let live = shared.control.lock().live.clone();
    // The handle is not kept: a finished task's memory goes with it.
    drop(tokio::spawn(make(LiveTask::new(live))));
}

/// Counts a running connection task; dropped when the task ends or is cancelled.
struct LiveTask(Arc<AtomicUsize>);

impl LiveTask {
    fn new(live: Arc<AtomicUsize>) -> LiveTask {
        live.fetch_add(1, Ordering::AcqRel);
        LiveTask(live)
    }
}

impl Drop for LiveTask {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves an accepted TCP socket, plain or TLS: one port serves both, told apart by the first
/// byte (a TLS handshake record starts with 0x16, a FerryMQ frame never does). The wait for that
/// byte and the TLS handshake are bounded by the handshake timeout.
fn accept_tcp(shared: &Arc<Shared>, s: TcpStream, conname: String) {
    let Some(permit) = take_slot(shared, false) else {
        return refuse(shared, s, conname, &channels_full(shared));
    };
    let sh = shared.clone();
    spawn_tracked(shared, move |live| async move {
        let _live = live;
        let limit = crate::conn::HANDSHAKE_TIMEOUT;
        let mut first = [0u8; 1];
        match tokio::time::timeout(limit, s.peek(&mut first)).await {
            Ok(Ok(1)) => match sniff(first[0]) {
                FirstByte::Tls => {}
                FirstByte::Plain => {
                    return serve_socket(&sh, s, conname, false, None, None, permit).await
                }
            },
            // Closed, failed, or silent: nothing to serve.
            _ => return,
        }
        let Some(cfg) = sh.tls.server_config() else {
            crate::qm_log!(
                crate::errlog::ids::TLS_SOCKET_REFUSED,
                "TLS connection from {conname} closed: this queue manager has no TLS key repository (qm.ini SSL: CertFile, KeyFile, CAFile; then REFRESH SECURITY TYPE(SSL))"
            );
            return;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
        let tls = match tokio::time::timeout(limit, Box::pin(acceptor.accept(s))).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                crate::qm_log!(
                    crate::errlog::ids::TLS_SOCKET_REFUSED,
                    "TLS handshake with {conname} failed: {e}"
                );
                return;
            }
            Err(_) => {
                crate::qm_log!(
                    crate::errlog::ids::TLS_SOCKET_REFUSED,
                    "TLS handshake with {conname} not finished within {} s; closed",
                    limit.as_secs()
                );
                return;
            }
        };
        let session = TlsSession::from_state(tls.get_ref().1).map(Arc::new);
        Box::pin(serve_socket(
            &sh, tls, conname, false, None, session, permit,
        ))
        .await;
    });
}

/// Serves an accepted bindings (Unix) socket, within its bound.
pub fn spawn_conn<S>(
    shared: &Arc<Shared>,
    s: S,
    conname: String,
    bindings: bool,
    os_user: Option<String>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let Some(permit) = take_slot(shared, bindings) else {
        crate::qm_log!(
            crate::errlog::ids::MAX_CHANNELS,
            "local connection refused: {} local connections are served",
            ferrymq_types::limits::BINDINGS_CONNECTIONS_MAX
        );
        return;
    };
    let sh = shared.clone();
    spawn_tracked(shared, move |live| async move {
        let _live = live;
        serve_socket(&sh, s, conname, bindings, os_user, None, permit).await;
    });
}

/// Registers a socket for DISPLAY CHSTATUS, serves it until it ends, then forgets it.
async fn serve_socket<S>(
    shared: &Arc<Shared>,
    s: S,
    conname: String,
    bindings: bool,
    os_user: Option<String>,
    tls: Option<Arc<TlsSession>>,
    permit: OwnedSemaphorePermit,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (id, info) = shared
        .control
        .lock()
        .register_socket(conname, bindings, os_user, tls);
    crate::conn::serve(s, shared.clone(), bindings, info).await;
    shared.control.lock().sockets.remove(&id);
    drop(permit);
}

/// The name of the user a Unix socket's peer process runs as (its uid when `/etc/passwd` does not
/// name it); `None` when the credentials cannot be read.
pub fn peer_user(s: &tokio::net::UnixStream) -> Option<String> {
    let uid = s.peer_cred().ok()?.uid();
    let name = std::fs::read_to_string("/etc/passwd").ok().and_then(|p| {
        p.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_string())
        })
    });
    Some(name.unwrap_or_else(|| uid.to_string()))
}
