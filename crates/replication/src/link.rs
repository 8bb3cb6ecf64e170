//! The sockets between a queue manager's own instances — Raft peers here, the DR stream in the
//! server — plain TCP or mutual TLS: [`Links`] connects and accepts them, bounding the handshake in
//! time and reporting each refusal (which peer, which rule) to the error log without flooding it
//! while the link retries; [`LinkStream`] is what the protocols then read and write, whichever it
//! is. A plain link stays a bare `TcpStream` underneath (no extra copy). What TLS configuration
//! to use and which peers to accept is the owner's ([`TlsPolicy`]; the server's comes from
//! `ferrymq_security::tls::link`).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ferrymq_types::limits;
use parking_lot::{Mutex, RwLock};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, CommonState, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Why a link was refused: the rule (a short name the error log shows and refusals are counted
/// by) and what happened, never key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub rule: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.detail)
    }
}

/// What a TLS link needs from its owner: both ends' configurations, the name offered to the
/// peer, the judgement of a finished handshake, and the rule a rustls error broke.
pub trait TlsPolicy: Send + Sync {
    fn client_config(&self) -> Arc<ClientConfig>;
    fn server_config(&self) -> Arc<ServerConfig>;
    /// The server name offered when connecting to `addr` (`host:port`).
    fn server_name(&self, addr: &str) -> ServerName<'static>;
    /// Accepts or refuses the peer of a finished handshake (its certificate's DN).
    fn check_peer(&self, state: &CommonState) -> Result<(), Refusal>;
    fn classify(&self, e: &rustls::Error) -> Refusal;
}

/// One link socket: plain TCP, or TLS as the side that connected or the side that accepted.
pub enum LinkStream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self.get_mut() {
            LinkStream::Plain($s) => $e,
            LinkStream::Client($s) => $e,
            LinkStream::Server($s) => $e,
        }
    };
}

impl AsyncRead for LinkStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for LinkStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            LinkStream::Plain(s) => s.is_write_vectored(),
            LinkStream::Client(s) => s.is_write_vectored(),
            LinkStream::Server(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// The reading half of a [`LinkStream`] split for a reader task and a writer task: a plain
/// socket splits without a lock, as before TLS existed.
pub enum LinkRead {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<LinkStream>),
}

/// The writing half of a split [`LinkStream`].
pub enum LinkWrite {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<LinkStream>),
}

impl LinkStream {
    pub fn into_split(self) -> (LinkRead, LinkWrite) {
        match self {
            LinkStream::Plain(s) => {
                let (r, w) = s.into_split();
                (LinkRead::Plain(r), LinkWrite::Plain(w))
            }
            tls => {
                let (r, w) = tokio::io::split(tls);
                (LinkRead::Tls(r), LinkWrite::Tls(w))
            }
        }
    }
}

impl AsyncRead for LinkRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkRead::Plain(s) => Pin::new(s).poll_read(cx, buf),
            LinkRead::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for LinkWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            LinkWrite::Plain(s) => Pin::new(s).poll_write(cx, buf),
            LinkWrite::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            LinkWrite::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            LinkWrite::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            LinkWrite::Plain(s) => s.is_write_vectored(),
            LinkWrite::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkWrite::Plain(s) => Pin::new(s).poll_flush(cx),
            LinkWrite::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LinkWrite::Plain(s) => Pin::new(s).poll_shutdown(cx),
            LinkWrite::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Where refusals are reported (the queue manager's error log).
pub type Reporter = Arc<dyn Fn(&str) + Send + Sync>;

/// How the links of one kind (`what`: "HA replication", "DR") are secured, and the memory of
/// recent refusals that keeps a retrying link from filling the error log. Cheap to clone; the
/// TLS configuration can be replaced while links run (new connections use the new one).
#[derive(Clone)]
pub struct Links {
    inner: Arc<Inner>,
}

struct Inner {
    what: &'static str,
    tls: RwLock<Option<Arc<dyn TlsPolicy>>>,
    report: Option<Reporter>,
    /// When each (peer host, rule) was last reported.
    recent: Mutex<HashMap<(String, &'static str), Instant>>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("what", &self.inner.what)
            .field("tls", &self.inner.tls.read().is_some())
            .finish()
    }
}

impl Default for Links {
    fn default() -> Links {
        Links::plain("HA replication")
    }
}

/// The error a refused handshake becomes: its message is the refusal.
fn refused(r: &Refusal) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, r.to_string())
}

/// The TLS refusal an I/O error carries, if it is one.
fn tls_error(policy: &dyn TlsPolicy, e: &io::Error) -> Option<Refusal> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(|e| policy.classify(e))
}

fn handshake_timeout() -> Refusal {
    Refusal {
        rule: "handshake timeout",
        detail: format!(
            "no TLS handshake within {} ms",
            limits::LINK_TLS_HANDSHAKE_MS
        ),
    }
}

fn host_of(addr: &str) -> String {
    addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string()
}

impl Links {
    /// Plain TCP links.
    pub fn plain(what: &'static str) -> Links {
        Links {
            inner: Arc::new(Inner {
                what,
                tls: RwLock::new(None),
                report: None,
                recent: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Mutual TLS links with `tls`, refusals reported to `report`.
    pub fn tls(what: &'static str, tls: Arc<dyn TlsPolicy>, report: Reporter) -> Links {
        Links {
            inner: Arc::new(Inner {
                what,
                tls: RwLock::new(Some(tls)),
                report: Some(report),
                recent: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn is_tls(&self) -> bool {
        self.inner.tls.read().is_some()
    }

    /// Replaces the TLS configuration of TLS links (a refreshed key repository): connections
    /// made from now on use it, open ones keep theirs. Plain links stay plain.
    pub fn replace(&self, tls: Arc<dyn TlsPolicy>) {
        let mut cur = self.inner.tls.write();
        if cur.is_some() {
            *cur = Some(tls);
        }
    }

    /// Reports a refusal of the link to or from `addr`, once per peer host and rule within the
    /// reporting interval.
    fn report(&self, direction: &str, addr: &str, r: &Refusal) {
        tracing::debug!(link = self.inner.what, %addr, refusal = %r, "instance link refused");
        let Some(report) = &self.inner.report else {
            return;
        };
        let now = Instant::now();
        let interval = Duration::from_millis(limits::LINK_REFUSAL_LOG_INTERVAL_MS);
        {
            let mut recent = self.inner.recent.lock();
            let key = (host_of(addr), r.rule);
            if recent.get(&key).is_some_and(|t| now - *t < interval) {
                return;
            }
            if recent.len() >= limits::LINK_REFUSAL_PEERS_MAX {
                recent.retain(|_, t| now - *t < interval);
                if recent.len() >= limits::LINK_REFUSAL_PEERS_MAX {
                    recent.clear();
                }
            }
            recent.insert(key, now);
        }
        report(&format!(
            "{} link {direction} {addr} refused ({}): {}",
            self.inner.what, r.rule, r.detail
        ));
    }

    /// A connection that broke during the handshake without a TLS alert: the other end gave up
    /// (an RPC deadline passed, the process ended) rather than refused — a peer that refuses a
    /// certificate says so with an alert. Not worth the error log; the link retries.
    fn broken(&self, addr: &str, e: io::Error) -> io::Error {
        tracing::debug!(link = self.inner.what, %addr, error = %e, "instance link broke during the TLS handshake");
        e
    }

    /// Whether `e`, met on a link to `addr` just after it connected, is the peer refusing this
    /// instance (TLS 1.3 tells the client only after its side of the handshake has finished);
    /// if so it is reported. The caller then treats the peer as unreachable, not as broken.
    pub fn refusal_after_connect(&self, addr: &str, e: &io::Error) -> bool {
        let Some(tls) = self.inner.tls.read().clone() else {
            return false;
        };
        match tls_error(&*tls, e) {
            Some(r) => {
                self.report("to", addr, &r);
                true
            }
            None => false,
        }
    }

    /// Connects to `addr` within `limit` (TCP_NODELAY set) and, for TLS links, runs the
    /// handshake (within the handshake limit) and checks the peer. A refusal is reported and
    /// returned as a `PermissionDenied` error.
    pub async fn connect(&self, addr: &str, limit: Duration) -> io::Result<LinkStream> {
        let tls = self.inner.tls.read().clone();
        let s = tokio::time::timeout(limit, TcpStream::connect(addr))
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no connection to {addr} within {limit:?}"),
                ))
            })?;
        s.set_nodelay(true)?;
        let Some(tls) = tls else {
            return Ok(LinkStream::Plain(s));
        };
        {
            let connector = tokio_rustls::TlsConnector::from(tls.client_config());
            let hs = tokio::time::timeout(
                Duration::from_millis(limits::LINK_TLS_HANDSHAKE_MS),
                connector.connect(tls.server_name(addr), s),
            )
            .await;
            let r = match hs {
                Err(_) => Err(handshake_timeout()),
                Ok(Err(e)) => match tls_error(&*tls, &e) {
                    Some(r) => Err(r),
                    // Closed without a TLS alert: not a refusal (see `broken`).
                    None => return Err(self.broken(addr, e)),
                },
                Ok(Ok(s)) => tls.check_peer(s.get_ref().1).map(|_| s),
            };
            match r {
                Ok(s) => Ok(LinkStream::Client(Box::new(s))),
                Err(r) => {
                    self.report("to", addr, &r);
                    Err(refused(&r))
                }
            }
        }
    }

    /// Takes a socket accepted from `peer` (TCP_NODELAY set) and, for TLS links, runs the
    /// handshake and checks the peer within the handshake limit. A refusal is reported and
    /// returned as a `PermissionDenied` error.
    pub async fn accept(&self, s: TcpStream, peer: SocketAddr) -> io::Result<LinkStream> {
        s.set_nodelay(true)?;
        let Some(tls) = self.inner.tls.read().clone() else {
            return Ok(LinkStream::Plain(s));
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config());
        let hs = tokio::time::timeout(
            Duration::from_millis(limits::LINK_TLS_HANDSHAKE_MS),
            acceptor.accept(s),
        )
        .await;
        let r = match hs {
            Err(_) => Err(handshake_timeout()),
            Ok(Err(e)) => match tls_error(&*tls, &e) {
                Some(r) => Err(r),
                None => return Err(self.broken(&peer.to_string(), e)),
            },
            Ok(Ok(s)) => tls.check_peer(s.get_ref().1).map(|_| s),
        };
        match r {
            Ok(s) => Ok(LinkStream::Server(Box::new(s))),
            Err(r) => {
                self.report("from", &peer.to_string(), &r);
                Err(refused(&r))
            }
        }
    }
}
