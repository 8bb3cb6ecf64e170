//! The network between replicas: openraft's RPCs over TCP, plain or mutual TLS ([`Links`]).
//!
//! A frame is `len u32 (little endian) | bincode body` (openraft's serde types; engine payloads
//! as raw bytes); a connection carries one request, then its
//! response, then the next request — openraft drives each peer's replication stream
//! sequentially, so pipelining would buy nothing and lock-step keeps matching trivial. The
//! client keeps one persistent connection per peer stream, reconnects on failure, and retries a
//! request once on a fresh connection when a reused one turns out dead (a peer that restarted):
//! Raft RPCs are idempotent, so the retry is safe, and it saves a heartbeat of lag. The body is
//! bincode: JSON with hex payloads cost the followers more CPU than applying the records.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use crate::link::{LinkStream, Links};
use crate::{FastFailover, FerryRaft, NodeId, TypeConfig};

/// Largest frame accepted. Peers are trusted members of the group, so this guards against a
/// stray connection (a port scanner, a misdirected client) making us allocate gigabytes, not
/// against an attacker; it must exceed the largest AppendEntries openraft builds (up to
/// `max_payload_entries` records, each at most a log record, doubled by hex).
pub const MAX_FRAME: usize = 1 << 30;

/// How long to wait before retrying a peer that refused connections: short, because a
/// restarted replica should be caught up promptly, but not a busy loop.
const UNREACHABLE_BACKOFF: Duration = Duration::from_millis(200);

/// The longest a TCP connect to a peer may take (the TLS handshake has its own limit). A
/// connection attempt runs in a task of its own and outlives the RPC that started it.
const CONNECT_LIMIT: Duration = Duration::from_secs(2);

#[derive(Serialize, Deserialize)]
enum Request {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// A write a replica forwards to the leader (administrative records, rare).
    Forward(crate::AppRecord),
}

type AppendResult = Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>;
type VoteResult = Result<VoteResponse<NodeId>, RaftError<NodeId>>;
type SnapshotResult =
    Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>;

#[derive(Serialize, Deserialize)]
enum Response {
    Append(AppendResult),
    Vote(VoteResult),
    Snapshot(SnapshotResult),
    /// The forwarded write's log id, or why it failed.
    Forward(Result<crate::LogId, String>),
}

async fn write_frame<T: Serialize>(s: &mut (impl AsyncWrite + Unpin), v: &T) -> io::Result<()> {
    let mut buf = vec![0u8; 4];
    bincode::serialize_into(&mut buf, v).map_err(io::Error::other)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("Raft frame of {len} bytes exceeds the {MAX_FRAME}-byte limit"),
        ));
    }
    buf[..4].copy_from_slice(&(len as u32).to_le_bytes());
    s.write_all(&buf).await?;
    // A TLS stream may hold the last records until flushed (a no-op on plain TCP).
    s.flush().await
}

/// Reads one frame; `None` on a clean end of stream at a frame boundary.
async fn read_frame<T: DeserializeOwned>(
    s: &mut (impl AsyncRead + Unpin),
) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("Raft frame of {len} bytes exceeds the {MAX_FRAME}-byte limit"),
        ));
    }
    // Read into spare capacity: no zero-fill pass over what the socket is about to overwrite.
    let mut body = Vec::with_capacity(len);
    while body.len() < len {
        let want = (len - body.len()) as u64;
        if (&mut *s).take(want).read_buf(&mut body).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed mid-frame",
            ));
        }
    }
    decode_body(&body).map(Some)
}

/// Decodes a frame's body (after its length): the one place bytes from a peer become values.
fn decode_body<T: DeserializeOwned>(body: &[u8]) -> io::Result<T> {
    bincode::deserialize(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Which side of the peer protocol a frame body comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerFrame {
    Request,
    Response,
}

/// Decodes a frame body received from a peer as [`serve`] (a request) or a client (a response)
/// does, and encodes the value again: what the fuzz targets drive, so the decoder they reach
/// is the one a replica runs.
pub fn reencode_peer_frame(body: &[u8], side: PeerFrame) -> io::Result<Vec<u8>> {
    let again = match side {
        PeerFrame::Request => bincode::serialize(&decode_body::<Request>(body)?),
        PeerFrame::Response => bincode::serialize(&decode_body::<Response>(body)?),
    };
    again.map_err(io::Error::other)
}

/// A peer counts as reachable while it was heard from within this long (ten heartbeats), and no
/// connect to it failed since. Calls that time out do not count against it by themselves: one
/// AppendEntries that outlasts its 100 ms timeout behind a busy disk is not a lost peer, and a
/// peer that stops answering is unreachable once this window has passed. A connect that fails
/// (refused: nothing listens there) marks it at once, so a peer that dies is marked by the call
/// that follows.
pub const REACH_WINDOW: Duration = Duration::from_millis(crate::timing::REACH_WINDOW_MS);

/// What this replica knows of its contact with each peer: when it last heard from it (an
/// answer to one of its RPCs, or an RPC from it), when a call to it last failed, and since when
/// the current run of contact lasts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Contact {
    pub last_ok: Option<Instant>,
    pub last_fail: Option<Instant>,
    pub up_since: Option<Instant>,
    /// A connect to the peer failed since `last_ok`.
    pub refused: bool,
}

impl Contact {
    /// Heard from within [`REACH_WINDOW`], and no connect to it refused since.
    pub fn reachable(&self) -> bool {
        self.reachable_at(Instant::now())
    }

    fn reachable_at(&self, now: Instant) -> bool {
        self.last_ok
            .is_some_and(|ok| now.saturating_duration_since(ok) <= REACH_WINDOW && !self.refused)
    }

    /// When the current state began: the start of the contact while reachable, the last
    /// contact (if any) while not.
    pub fn since(&self) -> Option<Instant> {
        if self.reachable() {
            self.up_since
        } else {
            self.last_ok.or(self.last_fail)
        }
    }

    fn heard_at(&mut self, now: Instant) {
        if !self.reachable_at(now) {
            self.up_since = Some(now);
        }
        self.last_ok = Some(now);
        self.refused = false;
    }

    fn failed_at(&mut self, now: Instant, refused: bool) {
        self.last_fail = Some(now);
        self.refused |= refused;
    }
}

/// Contact with every peer, shared by the RPC clients (answers, failures) and the server
/// (requests received).
#[derive(Debug, Clone, Default)]
pub struct Contacts(Arc<parking_lot::Mutex<BTreeMap<NodeId, Contact>>>);

impl Contacts {
    pub fn heard(&self, id: NodeId) {
        self.0
            .lock()
            .entry(id)
            .or_default()
            .heard_at(Instant::now());
    }

    /// A call to `id` failed; `refused`: its connect failed.
    pub fn failed(&self, id: NodeId, refused: bool) {
        self.0
            .lock()
            .entry(id)
            .or_default()
            .failed_at(Instant::now(), refused);
    }

    /// What is known of `id` (`None`: never heard from nor tried).
    pub fn get(&self, id: NodeId) -> Option<Contact> {
        self.0.lock().get(&id).copied()
    }
}

/// Creates one [`PeerConnection`] per peer replication stream (openraft's network factory).
#[derive(Debug, Clone)]
pub struct Network {
    id: NodeId,
    contacts: Contacts,
    failover: Option<FastFailover>,
    links: Links,
}

impl Network {
    /// The factory of replica `id` (named in timeout errors), recording contact in `contacts`,
    /// connecting to peers over `links`.
    pub fn new(id: NodeId, contacts: Contacts, links: Links) -> Network {
        Network {
            id,
            contacts,
            failover: None,
            links,
        }
    }

    /// Also tells `ff` of every vote of this replica that a peer rejects.
    pub fn with_failover(mut self, ff: FastFailover) -> Network {
        self.failover = Some(ff);
        self
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerConnection {
        // Connects lazily: openraft creates clients for peers that may be down.
        PeerConnection {
            id: self.id,
            target,
            addr: node.addr.clone(),
            conn: None,
            connecting: None,
            in_flight: false,
            contacts: self.contacts.clone(),
            failover: self.failover.clone(),
            links: self.links.clone(),
        }
    }
}

/// The client side of the link to one peer.
pub struct PeerConnection {
    id: NodeId,
    target: NodeId,
    addr: String,
    conn: Option<LinkStream>,
    /// A connection attempt in progress, picked up by the next call if this one's deadline
    /// passes first.
    connecting: Option<JoinHandle<io::Result<LinkStream>>>,
    /// Set while a request awaits its response. Openraft drops an RPC future that outlives its
    /// deadline; the response may still arrive later, so a connection found in this state is
    /// discarded rather than read out of step.
    in_flight: bool,
    contacts: Contacts,
    failover: Option<FastFailover>,
    links: Links,
}

enum CallError {
    /// Could not connect at all: back off.
    Unreachable(io::Error),
    /// The connection failed mid-request.
    Io(io::Error),
    Timeout,
}

impl PeerConnection {
    /// Connects to the peer. A TLS handshake can outlast one RPC's deadline (a heartbeat's is
    /// 100 ms) on a loaded host, so the attempt runs in a task of its own that the next call
    /// picks up: it is never cut off and started afresh again and again.
    async fn connect(&mut self) -> Result<(), io::Error> {
        let task = self.connecting.get_or_insert_with(|| {
            let (links, addr) = (self.links.clone(), self.addr.clone());
            // Heartbeats and votes are tiny: the link sets TCP_NODELAY so Nagle never holds
            // them.
            tokio::spawn(async move { links.connect(&addr, CONNECT_LIMIT).await })
        });
        let done = task.await;
        self.connecting = None;
        self.conn = Some(done.map_err(io::Error::other)??);
        Ok(())
    }

    async fn exchange(&mut self, req: &Request) -> io::Result<Response> {
        let Some(s) = self.conn.as_mut() else {
            return Err(io::Error::from(io::ErrorKind::NotConnected));
        };
        self.in_flight = true;
        write_frame(s, req).await?;
        let resp = read_frame(s).await?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the connection")
        })?;
        self.in_flight = false;
        Ok(resp)
    }

    async fn call(&mut self, req: &Request, ttl: Duration) -> Result<Response, CallError> {
        if self.in_flight {
            self.conn = None;
            self.in_flight = false;
        }
        let attempt = async {
            let reused = self.conn.is_some();
            if !reused {
                self.connect().await.map_err(CallError::Unreachable)?;
            }
            match self.exchange(req).await {
                Ok(r) => Ok(r),
                Err(_) if reused => {
                    // The peer may have restarted since this connection was opened.
                    self.in_flight = false;
                    self.connect().await.map_err(CallError::Unreachable)?;
                    self.exchange(req).await.map_err(|e| self.fresh_failure(e))
                }
                Err(e) => Err(self.fresh_failure(e)),
            }
        };
        let res = match tokio::time::timeout(ttl, attempt).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout),
        };
        if let Err(e) = &res {
            self.conn = None;
            self.in_flight = false;
            self.contacts
                .failed(self.target, matches!(e, CallError::Unreachable(_)));
        } else {
            self.contacts.heard(self.target);
        }
        res
    }

    /// A request failed on a connection just opened: a peer that refused this instance's
    /// certificate after the handshake is unreachable (back off), not a broken stream.
    fn fresh_failure(&self, e: io::Error) -> CallError {
        if self.links.refusal_after_connect(&self.addr, &e) {
            CallError::Unreachable(e)
        } else {
            CallError::Io(e)
        }
    }

    fn rpc_error<E: std::error::Error>(
        &self,
        e: CallError,
        action: RPCTypes,
        ttl: Duration,
    ) -> RPCError<NodeId, BasicNode, E> {
        match e {
            CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
            CallError::Timeout => RPCError::Timeout(Timeout {
                action,
                id: self.id,
                target: self.target,
                timeout: ttl,
            }),
        }
    }

    /// A response of the wrong kind: the stream is out of step, start afresh.
    fn mismatch<E: std::error::Error>(&mut self) -> RPCError<NodeId, BasicNode, E> {
        tracing::warn!(target = self.target, addr = %self.addr, "Raft peer answered out of step");
        self.conn = None;
        let e = io::Error::new(
            io::ErrorKind::InvalidData,
            "response does not match request",
        );
        RPCError::Network(NetworkError::new(&e))
    }

    // openraft's RPC error is large by design and the trait returns it anyway.
    #[allow(clippy::result_large_err)]
    fn remote<T, E: std::error::Error>(
        &self,
        r: Result<T, RaftError<NodeId, E>>,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let ttl = option.hard_ttl();
        match self.call(&Request::Append(rpc), ttl).await {
            Ok(Response::Append(r)) => self.remote(r),
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.rpc_error(e, RPCTypes::AppendEntries, ttl)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let ttl = option.hard_ttl();
        match self.call(&Request::Snapshot(rpc), ttl).await {
            Ok(Response::Snapshot(r)) => self.remote(r),
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.rpc_error(e, RPCTypes::InstallSnapshot, ttl)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let ttl = option.hard_ttl();
        let sent = self.failover.as_ref().map(|_| rpc.clone());
        match self.call(&Request::Vote(rpc), ttl).await {
            Ok(Response::Vote(r)) => {
                if let (Some(ff), Some(req), Ok(resp)) = (&self.failover, sent, &r) {
                    if !resp.vote_granted {
                        ff.vote_rejected(req, resp.clone());
                    }
                }
                self.remote(r)
            }
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.rpc_error(e, RPCTypes::Vote, ttl)),
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(UNREACHABLE_BACKOFF))
    }
}

/// Serves Raft RPCs from peers on `listener` (each connection secured as `links` says, the TLS
/// handshake in the connection's own task), one task per connection, until the returned task
/// is aborted — which also aborts every connection task (they live in its `JoinSet`), so a
/// stopped replica goes silent at once. `failover`, if given, is told when a connection on which
/// a peer sent AppendEntries ends (see [`FastFailover`]).
pub fn serve(
    listener: TcpListener,
    raft: FerryRaft,
    contacts: Contacts,
    failover: Option<FastFailover>,
    links: Links,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((s, peer)) => {
                        let (raft, contacts) = (raft.clone(), contacts.clone());
                        let (failover, links) = (failover.clone(), links.clone());
                        conns.spawn(async move {
                            let mut appender = None;
                            let r = match links.accept(s, peer).await {
                                Ok(s) => serve_conn(s, raft, contacts, &mut appender).await,
                                Err(e) => Err(e),
                            };
                            if let Err(e) = &r {
                                tracing::debug!(%peer, error = %e, "Raft peer connection ended");
                            }
                            if let (Some(ff), Some(leader)) = (failover, appender) {
                                ff.link_closed(leader);
                            }
                        });
                    }
                    Err(e) => {
                        // Out of descriptors or similar: keep serving the connections we have.
                        tracing::warn!(error = %e, "accepting a Raft peer connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    })
}

/// Serves one peer connection; `appender` is set to the peer that last sent AppendEntries on it.
async fn serve_conn(
    mut s: LinkStream,
    raft: FerryRaft,
    contacts: Contacts,
    appender: &mut Option<NodeId>,
) -> io::Result<()> {
    while let Some(req) = read_frame::<Request>(&mut s).await? {
        if let Request::Append(r) = &req {
            *appender = r.vote.leader_id().voted_for();
        }
        let from = match &req {
            Request::Append(r) => r.vote.leader_id().voted_for(),
            Request::Vote(r) => r.vote.leader_id().voted_for(),
            Request::Snapshot(r) => r.vote.leader_id().voted_for(),
            Request::Forward(_) => None,
        };
        if let Some(id) = from {
            contacts.heard(id);
        }
        let resp = match req {
            Request::Append(r) => Response::Append(raft.append_entries(r).await),
            Request::Vote(r) => Response::Vote(raft.vote(r).await),
            Request::Snapshot(r) => Response::Snapshot(raft.install_snapshot(r).await),
            Request::Forward(rec) => Response::Forward(
                raft.client_write(rec)
                    .await
                    .map(|r| r.log_id)
                    .map_err(|e| e.to_string()),
            ),
        };
        write_frame(&mut s, &resp).await?;
    }
    Ok(())
}

/// Sends one write to the replica at `addr` (the leader) over a fresh connection of `links` and
/// waits for it to be committed there.
pub async fn forward_write(
    links: &Links,
    addr: &str,
    rec: crate::AppRecord,
    limit: Duration,
) -> Result<crate::LogId, String> {
    let attempt = async {
        let mut s = links
            .connect(addr, limit)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        write_frame(&mut s, &Request::Forward(rec))
            .await
            .map_err(|e| format!("sending to {addr}: {e}"))?;
        match read_frame::<Response>(&mut s).await {
            Ok(Some(Response::Forward(r))) => r,
            Ok(_) => Err(format!("{addr} answered something else")),
            Err(e) => Err(format!("reading from {addr}: {e}")),
        }
    };
    tokio::time::timeout(limit, attempt)
        .await
        .map_err(|_| format!("{addr} did not answer within {limit:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_unreachable_once_silent_for_the_window_or_a_connect_is_refused() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut c = Contact::default();
        assert!(!c.reachable_at(t0), "never heard from");
        c.heard_at(t0);
        assert!(c.reachable_at(t0 + ms(900)));
        assert!(
            !c.reachable_at(t0 + REACH_WINDOW + ms(1)),
            "silent too long"
        );

        // Calls that time out behind a slow disk, then an answer: reachable throughout, and
        // the run of contact does not break.
        c.failed_at(t0 + ms(100), false);
        c.failed_at(t0 + ms(500), false);
        assert!(c.reachable_at(t0 + ms(600)));
        c.heard_at(t0 + ms(700));
        assert_eq!(c.up_since, Some(t0));
        assert!(c.reachable_at(t0 + ms(1500)));
        // Timing out on and on: unreachable once the window has passed since the last answer,
        // and the next answer starts a new run.
        c.failed_at(t0 + ms(900), false);
        assert!(!c.reachable_at(t0 + ms(700) + REACH_WINDOW + ms(1)));
        c.heard_at(t0 + ms(2000));
        assert_eq!(c.up_since, Some(t0 + ms(2000)));

        // A refused connect: at once, until heard from again.
        c.failed_at(t0 + ms(2100), true);
        assert!(!c.reachable_at(t0 + ms(2100)));
        c.failed_at(t0 + ms(2200), false);
        assert!(!c.reachable_at(t0 + ms(2200)));
        c.heard_at(t0 + ms(2300));
        assert!(c.reachable_at(t0 + ms(2300)));
    }
}
