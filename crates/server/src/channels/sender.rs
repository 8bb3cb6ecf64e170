//! The sending end of a message channel (SDR): connects to CONNAME (each address of the list in
//! order), binds to the receiver's channel of the same name, resolves a batch left in doubt, then
//! moves the transmission queue's messages in batches:
//!
//! 1. get up to BATCHSZ messages from the transmission queue under a unit of work, and send them
//!    (when the queue is empty, wait for an arrival: idle, or up to BATCHINT ms with a batch
//!    open); a batch of only non-persistent messages on a FAST channel ends here, unlogged;
//! 2. log the batch in doubt (`CHANNEL_INDOUBT`: its LUWID and the messages it took) and wait
//!    until that record is durable;
//! 3. send end-of-batch; the receiver commits the batch's puts with the channel's state in one
//!    record and, once that is durable, confirms;
//! 4. commit the gets, ending the doubt (`CHANNEL_COMMIT`).
//!
//! A failure anywhere backs out the unit of work (the messages go back on the transmission
//! queue) and the channel retries: SHORTRTY times every SHORTTMR seconds, then LONGRTY times
//! every LONGTMR. The doubt, if logged, is resolved when it connects again: the receiver names
//! the last batch it committed; the same LUWID means the batch arrived (its messages leave the
//! transmission queue), another means it did not (they are sent again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferrymq_engine::channel::{InDoubt, SyncUpdate};
use ferrymq_engine::{ConnId, GetOutcome};
use ferrymq_proto::channel::{ChannelFrame, InDoubt as WireInDoubt};
use ferrymq_proto::FrameDecoder;
use ferrymq_types::options::{open, Browse, GetOptions, Syncpoint, Wait};
use ferrymq_types::{MqError, ObjectKind, Persistence, Reason};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use super::{attr, attr_u64, ChannelStatus, State};
use crate::qmgr::Shared;
use crate::storage::now_ms;

/// How long a connect to one address, and a wait for the receiver's answer, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// The shortest wait for an answer once heartbeats are negotiated: a receiver committing a large
/// batch on a busy machine is not taken for a cut link.
const ANSWER_MIN: Duration = Duration::from_secs(5);

/// How long a running sender waits for the receiver (an end of batch's confirmation) or for a
/// write to leave: like MQ's receive timeout, twice the negotiated heartbeat interval, within
/// [`ANSWER_MIN`] and [`ANSWER_TIMEOUT`]; with no heartbeats, [`ANSWER_TIMEOUT`]. A link cut
/// without a reset (no RST, no FIN) is noticed that soon, not when TCP gives up.
fn answer_wait(hb: Option<Duration>) -> Duration {
    hb.map_or(ANSWER_TIMEOUT, |h| {
        (h * 2).clamp(ANSWER_MIN, ANSWER_TIMEOUT)
    })
}

/// Why an attempt ended.
enum End {
    Stopped,
    /// DISCINT passed with nothing to send: the channel ends normally (INACTIVE) and starts
    /// again when its transmission queue gets a message.
    Idle,
    Failed(MqError),
}

impl From<MqError> for End {
    fn from(e: MqError) -> End {
        End::Failed(e)
    }
}

fn broken(what: impl std::fmt::Display) -> MqError {
    MqError::new(Reason::CONNECTION_BROKEN, what.to_string())
}

/// Runs the channel until it is stopped.
pub async fn run(
    shared: Arc<Shared>,
    name: String,
    status: Arc<Mutex<ChannelStatus>>,
    stop_tx: Arc<watch::Sender<u8>>,
    to_inactive: Arc<AtomicBool>,
    kick: Arc<Notify>,
) {
    let mut stop = stop_tx.subscribe();
    crate::qm_log!(
        crate::errlog::ids::CHANNEL_STARTED,
        "channel {name} (SDR) is starting"
    );
    let mut failures = 0u64;
    loop {
        if *stop.borrow() > super::RUN {
            break;
        }
        let def = shared
            .core
            .lock()
            .engine
            .object(ObjectKind::Channel, &name)
            .cloned();
        let Some(def) = def else {
            status.lock().last_error = "the channel definition was deleted".into();
            break;
        };
        status.lock().state = State::Binding;
        let mut a = Attempt {
            shared: &shared,
            name: &name,
            status: &status,
            conn: None,
            moved: false,
            receiver_stopped: Default::default(),
        };
        let end = a.run(&def, &mut stop, None).await;
        let moved = a.moved;
        let receiver_stopped = a.receiver_stopped.load(Ordering::SeqCst);
        a.end();
        let end = match end {
            // STOP CHANNEL STATUS(INACTIVE): ended as by DISCINT.
            End::Stopped if to_inactive.swap(false, Ordering::SeqCst) => {
                stop_tx.send_replace(super::RUN);
                status.lock().stop_requested = false;
                End::Idle
            }
            other => other,
        };
        match end {
            End::Stopped => break,
            End::Failed(e) if receiver_stopped => {
                // The receiver cannot take a message and has nowhere to put it: retrying
                // would fail the same way, so the channel stops, and stays stopped (across
                // restarts too) until START CHANNEL, with the batch backed out.
                status.lock().last_error = e.to_string();
                let _ = shared.core.lock().engine.channel_set_stopped(&name, true);
                crate::qm_log!(
                    crate::errlog::ids::CHANNEL_ENDED,
                    "channel {name} stopped: the receiving end cannot put a message ({e}); its batch is back on the transmission queue. Make the destination able to take it (or define a dead-letter queue there), then START CHANNEL({name})"
                );
                break;
            }
            End::Idle => {
                failures = 0;
                {
                    let mut st = status.lock();
                    st.state = State::Inactive;
                    st.substate = "";
                }
                crate::qm_log!(
                    crate::errlog::ids::CHANNEL_ENDED,
                    "channel {name} ended normally: nothing to send for DISCINT; it starts again when its transmission queue gets a message"
                );
                let xmitq = attr(&def, "XMITQ", "");
                if !wait_for_message(&shared, &name, &xmitq, &mut stop, &kick).await {
                    break;
                }
                status.lock().started_ms = now_ms();
            }
            End::Failed(e) => {
                if moved {
                    failures = 0;
                }
                failures += 1;
                let short = attr_u64(&def, "SHORTRTY", 10);
                let (wait_s, kind) = if failures <= short {
                    (attr_u64(&def, "SHORTTMR", 60), "short")
                } else if failures - short <= attr_u64(&def, "LONGRTY", 999_999_999) {
                    (attr_u64(&def, "LONGTMR", 1200), "long")
                } else {
                    status.lock().last_error = e.message.clone();
                    crate::qm_log!(
                        crate::errlog::ids::CHANNEL_ENDED,
                        "channel {name} stopped: its retries are exhausted ({e})"
                    );
                    break;
                };
                {
                    let mut st = status.lock();
                    st.state = State::Retrying;
                    st.last_error = e.message.clone();
                }
                crate::qm_log!(
                    crate::errlog::ids::CHANNEL_RETRYING,
                    "channel {name} is retrying ({kind} retry {failures}, every {wait_s} s): {e}"
                );
                // The first retry comes quickly: a receiver that restarts is usually back in
                // moments, and the timers are for longer outages.
                let wait = if failures == 1 {
                    Duration::from_millis(200).min(Duration::from_secs(wait_s))
                } else {
                    Duration::from_secs(wait_s)
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.wait_for(|v| *v > super::RUN) => break,
                }
            }
        }
    }
    {
        let mut st = status.lock();
        st.state = State::Stopped;
        st.stop_requested = false;
        st.substate = "";
    }
    crate::qm_log!(crate::errlog::ids::CHANNEL_ENDED, "channel {name} stopped");
}

/// An inactive channel's built-in trigger: waits until the transmission queue has a message
/// (or START CHANNEL); false when the channel is stopped instead.
async fn wait_for_message(
    shared: &Arc<Shared>,
    name: &str,
    xmitq: &str,
    stop: &mut watch::Receiver<u8>,
    kick: &Notify,
) -> bool {
    let woken = Arc::new(Notify::new());
    let (conn, waiter) = {
        let mut core = shared.core.lock();
        let conn = core.engine.connect("", name);
        core.add_waker(conn, woken.clone());
        let arrival = GetOptions {
            browse: Browse::First,
            wait: Wait::Unlimited,
            ..GetOptions::any()
        };
        let waiter = match core.engine.open(conn, xmitq, "", open::BROWSE, "") {
            Ok((h, _, _)) => match core.engine.get(conn, h, &arrival, 0, now_ms()) {
                Ok(GetOutcome::Waiting(w)) => Some(w),
                // A message (or an error the next start reports): start now.
                _ => None,
            },
            Err(_) => None,
        };
        (conn, waiter)
    };
    let go = match waiter {
        None => *stop.borrow() == super::RUN,
        Some(w) => {
            let go = tokio::select! {
                _ = woken.notified() => true,
                _ = kick.notified() => true,
                _ = stop.wait_for(|v| *v > super::RUN) => false,
            };
            shared.core.lock().engine.cancel_wait(w);
            go
        }
    };
    let mut core = shared.core.lock();
    core.remove_waker(conn);
    core.engine.disconnect(conn, now_ms());
    core.flush_deliveries();
    go
}

struct Attempt<'a> {
    shared: &'a Arc<Shared>,
    name: &'a str,
    status: &'a Arc<Mutex<ChannelStatus>>,
    /// The engine connection holding the transmission queue open and the batch's gets.
    conn: Option<ConnId>,
    /// Whether a batch was confirmed in this attempt (the retry count starts again).
    moved: bool,
    /// The receiver refused to go on and asked the channel to stop rather than retry.
    receiver_stopped: Arc<AtomicBool>,
}

/// The channel's socket: plain TCP or TLS over it, or the requester's socket it accepted.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// A message body at least this large is written to the link from its own buffer, after its
/// frame's head, rather than copied into the batch's buffer.
const SPLIT_BODY_MIN_BYTES: usize = 16 * 1024;

struct Link<'s> {
    sock: Box<dyn Io + 's>,
    /// Over an accepted socket, writes go to its outbound queue: the sender waits for it to
    /// drain below its pause bound, so a batch never piles up past the queue's hard cap.
    drain: Option<Arc<crate::core::OutQueue>>,
    dec: FrameDecoder,
    buf: BytesMut,
    /// When the last frame went to the receiver: heartbeats flow HBINT after it.
    last_sent: tokio::time::Instant,
    /// When the last frame came from the receiver.
    last_heard: tokio::time::Instant,
    /// Set when the receiver refuses with its stop flag.
    receiver_stopped: Arc<AtomicBool>,
    /// Heartbeats sent and not yet answered, and when the oldest of them left.
    unanswered: u32,
    oldest_unanswered: Option<tokio::time::Instant>,
    /// See [`answer_wait`].
    answer_wait: Duration,
}

impl Link<'_> {
    async fn send(&mut self, frames: &BytesMut) -> Result<(), MqError> {
        self.send_all(std::slice::from_ref(frames)).await
    }

    /// Writes the buffers in order, as one stream of frames.
    async fn send_all<B: AsRef<[u8]>>(&mut self, pieces: &[B]) -> Result<(), MqError> {
        let sock = &mut self.sock;
        // In as few (vectored) writes as the socket takes: a body goes out with its frame's head.
        let write = crate::conn::write_all_vectored(sock, pieces, None);
        tokio::time::timeout(self.answer_wait, write)
            .await
            .map_err(|_| {
                broken(format!(
                    "nothing could be sent to the receiver for {} s",
                    self.answer_wait.as_secs()
                ))
            })?
            .map_err(|e| broken(format!("sending to the receiver failed: {e}")))?;
        self.last_sent = tokio::time::Instant::now();
        if let Some(q) = &self.drain {
            while q.pause() {
                if q.is_killed() {
                    q.resume();
                    return Err(broken("the requester does not take what is sent"));
                }
                let _ = tokio::time::timeout(ANSWER_TIMEOUT, q.drained.notified()).await;
            }
            q.resume();
        }
        Ok(())
    }

    async fn heartbeat(&mut self) -> Result<(), MqError> {
        let mut b = BytesMut::new();
        ChannelFrame::Heartbeat.encode(&mut b);
        self.send(&b).await?;
        self.unanswered += 1;
        self.oldest_unanswered
            .get_or_insert_with(tokio::time::Instant::now);
        Ok(())
    }

    /// The next frame from the receiver that is not a heartbeat's answer.
    async fn recv_skip(&mut self, timeout: Duration) -> Result<ChannelFrame, MqError> {
        let until = tokio::time::Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            match self.recv(left).await? {
                ChannelFrame::HeartbeatOk => continue,
                other => return Ok(other),
            }
        }
    }

    /// The next frame from the receiver; a Refused is an error with its reason.
    async fn recv(&mut self, timeout: Duration) -> Result<ChannelFrame, MqError> {
        let f = tokio::time::timeout(timeout, async {
            loop {
                if let Some(f) = self
                    .dec
                    .decode(&mut self.buf)
                    .map_err(|e| MqError::new(e.reason(), e.to_string()))?
                {
                    return Ok::<_, MqError>(f);
                }
                self.buf.reserve(self.dec.read_room(&self.buf, 64 * 1024));
                match self.sock.read_buf(&mut self.buf).await {
                    Ok(0) => return Err(broken("the receiver closed the connection")),
                    Ok(_) => {}
                    Err(e) => return Err(broken(format!("reading from the receiver failed: {e}"))),
                }
            }
        })
        .await
        .map_err(|_| {
            broken(format!(
                "no answer from the receiver in {} s",
                timeout.as_secs()
            ))
        })??;
        self.last_heard = tokio::time::Instant::now();
        match ChannelFrame::parse(&f).map_err(|e| MqError::new(e.reason(), e.to_string()))? {
            ChannelFrame::Refused {
                reason,
                message,
                stop,
            } => {
                if stop {
                    self.receiver_stopped.store(true, Ordering::SeqCst);
                }
                Err(MqError::new(Reason::from_code(reason), message))
            }
            ChannelFrame::HeartbeatOk => {
                self.unanswered = self.unanswered.saturating_sub(1);
                if self.unanswered == 0 {
                    self.oldest_unanswered = None;
                }
                Ok(ChannelFrame::HeartbeatOk)
            }
            other => Ok(other),
        }
    }
}

impl Attempt<'_> {
    /// One attempt: connects to CONNAME (or, `given`, uses the requester's socket), binds
    /// and moves batches until it ends.
    async fn run(
        &mut self,
        def: &ferrymq_types::ObjectDef,
        stop: &mut watch::Receiver<u8>,
        given: Option<Link<'_>>,
    ) -> End {
        let conname = attr(def, "CONNAME", "");
        let xmitq = attr(def, "XMITQ", "");
        let batch_size = attr_u64(def, "BATCHSZ", 50).clamp(1, 9999) as u32;
        let max_msg_len = attr_u64(def, "MAXMSGL", 4 * 1024 * 1024) as u32;
        let our_hb_s =
            attr_u64(def, "HBINT", 300).min(ferrymq_types::limits::CHANNEL_HB_INT_MAX_S) as u32;
        let (sync, qmgr) = {
            let core = self.shared.core.lock();
            (
                core.engine.channel_sync(self.name),
                core.engine.qmgr_name().to_string(),
            )
        };
        self.status.lock().indoubt = sync.indoubt.is_some();
        let mut hello = BytesMut::new();
        ChannelFrame::Hello {
            channel: self.name.to_string(),
            sender_qmgr: qmgr,
            batch_size,
            max_msg_len,
            seq: sync.seq,
            indoubt: sync.indoubt.as_ref().map(|d| WireInDoubt {
                luwid: d.luwid,
                seq: d.seq,
            }),
            fast_np: attr(def, "NPMSPEED", "FAST") == "FAST",
            hb_int_s: our_hb_s,
        }
        .encode(&mut hello);
        self.status.lock().substate = "NET_CONNECTING";
        let mut last = broken(format!("CONNAME '{conname}' names no address"));
        let mut bound = None;
        // Each address of CONNAME in order, until one binds (an HA group's replicas refuse);
        // none for a server over its requester's socket.
        let addrs = if let Some(mut link) = given {
            match bind(&mut link, &hello, stop).await {
                Ok(Some(p)) => bound = Some((link, p.0, p.1, p.2, p.3, p.4)),
                Ok(None) => return End::Stopped,
                Err(e) => last = e,
            }
            Vec::new()
        } else {
            match ferrymq_types::conname::parse_conn_name(&conname) {
                Ok(a) => a,
                Err(e) => return End::Failed(e),
            }
        };
        // SSLCIPH set: mutual TLS with this queue manager's key repository; SSLPEER checks
        // the receiver's certificate.
        let tls = match attr(def, "SSLCIPH", "").trim() {
            _ if addrs.is_empty() => None,
            "" => None,
            _ => {
                let peer = attr(def, "SSLPEER", "");
                match self
                    .shared
                    .tls
                    .channel_client(Some(peer.as_str()).filter(|p| !p.trim().is_empty()))
                {
                    Ok(t) => Some(t),
                    Err(e) => {
                        return End::Failed(MqError::new(
                            Reason::SSL_INITIALIZATION_ERROR,
                            format!(
                                "channel {} has SSLCIPH set, and TLS cannot start: {e}",
                                self.name
                            ),
                        ))
                    }
                }
            }
        };
        for (host, port) in addrs {
            let mut link = match self.connect(&host, port, tls.as_ref()).await {
                Ok(l) => l,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            match bind(&mut link, &hello, stop).await {
                Ok(Some(p)) => {
                    self.status.lock().conname = format!("{host}({port})");
                    bound = Some((link, p.0, p.1, p.2, p.3, p.4));
                    break;
                }
                Ok(None) => return End::Stopped,
                Err(e) => last = e,
            }
        }
        let Some((mut link, batch_size, max_msg_len, their_luwid, fast_np, hb_int_s)) = bound
        else {
            return End::Failed(last);
        };
        // The receiver answers with the interval both ends use (the larger of the two; 0 at
        // either end: none); a receiver that predates heartbeats answers 0.
        let hb_int_s = if our_hb_s == 0 { 0 } else { hb_int_s };
        let hb = (hb_int_s > 0).then(|| Duration::from_secs(u64::from(hb_int_s)));
        self.status.lock().hb_int_s = hb_int_s;
        link.answer_wait = answer_wait(hb);
        link.dec
            .set_max_frame_bytes(ferrymq_proto::frame_limit_for(max_msg_len));
        // A batch in doubt: the receiver's last LUWID says whether it arrived.
        if let Some(d) = &sync.indoubt {
            let commit = d.luwid == their_luwid;
            let r = self
                .shared
                .core
                .lock()
                .engine
                .channel_resolve(self.name, commit);
            match r {
                Ok(lsn) => {
                    if let Err(e) = self.durable(lsn).await {
                        return End::Failed(e);
                    }
                }
                Err(e) => return End::Failed(e),
            }
            crate::qm_log!(
                crate::errlog::ids::CHANNEL_RESOLVED,
                "channel {}: the batch in doubt (LUWID {:016X}) was {} at channel start",
                self.name,
                d.luwid,
                if commit {
                    "committed: the receiver had it"
                } else {
                    "backed out: it will be sent again"
                }
            );
        }
        let sync = self.shared.core.lock().engine.channel_sync(self.name);
        let mut seq = sync.seq;
        let mut luwid = sync.luwid;
        {
            let mut st = self.status.lock();
            st.state = State::Running;
            st.last_seq = seq;
            st.last_luwid = luwid;
            st.indoubt = false;
            st.last_error.clear();
        }
        crate::qm_log!(
            crate::errlog::ids::CHANNEL_STARTED,
            "channel {} is running to {} (transmission queue {xmitq}, BATCHSZ {batch_size})",
            self.name,
            conname
        );
        // The transmission queue, opened exclusively: only the channel takes its messages.
        let hobj = {
            let mut core = self.shared.core.lock();
            let conn = core.engine.connect("", self.name);
            self.conn = Some(conn);
            match core
                .engine
                .open(conn, &xmitq, "", open::INPUT_EXCLUSIVE | open::BROWSE, "")
            {
                Ok((h, _, _)) => h,
                Err(e) => return End::Failed(e),
            }
        };
        let conn = self.conn.expect("set above");
        // NPMSPEED(FAST) at both ends: non-persistent messages leave the transmission queue as
        // they are sent, outside the batch (lost, as MQ loses them, if the link fails).
        let opts = GetOptions {
            syncpoint: if fast_np {
                Syncpoint::IfPersistent
            } else {
                Syncpoint::Yes
            },
            ..GetOptions::any()
        };
        // An idle channel waits on a browse of its transmission queue: the engine wakes it when
        // a message arrives, so it costs nothing while there is nothing to send.
        let woken = Arc::new(Notify::new());
        self.shared.core.lock().add_waker(conn, woken.clone());
        let arrival = GetOptions {
            browse: Browse::First,
            wait: Wait::Unlimited,
            ..GetOptions::any()
        };
        let batch_int = Duration::from_millis(attr_u64(def, "BATCHINT", 0).min(999_999_999));
        let disc = match attr_u64(def, "DISCINT", 0) {
            0 => None,
            s => Some(Duration::from_secs(
                s.min(ferrymq_types::limits::CHANNEL_DISC_INT_MAX_S),
            )),
        };
        let batch_hb = Duration::from_millis(attr_u64(def, "BATCHHB", 0).min(999_999));
        let batch_lim_bytes = attr_u64(def, "BATCHLIM", 5000)
            .min(ferrymq_types::limits::CHANNEL_BATCH_LIM_MAX_KB)
            * 1024;
        let mut idle_since = tokio::time::Instant::now();
        loop {
            if *stop.borrow() > super::RUN {
                return End::Stopped;
            }
            // 1. Up to BATCHSZ messages, sent as they are taken; with BATCHINT, the batch stays
            // open that long for more.
            let mut n = 0u32;
            let mut dead = 0u32;
            let mut persistent = 0u32;
            let mut sent_bytes = 0u64;
            let mut opened: Option<tokio::time::Instant> = None;
            let mut batch_bytes = 0u64;
            loop {
                let mut batch = Vec::new();
                self.status.lock().substate = "MQGET";
                let (done, waiter) = {
                    let mut core = self.shared.core.lock();
                    let now = now_ms();
                    let mut empty = false;
                    // BATCHLIM (KB, 0: none) ends a batch once its messages reach that size.
                    while n < batch_size && (batch_lim_bytes == 0 || batch_bytes < batch_lim_bytes)
                    {
                        match core.engine.get(conn, hobj, &opts, 0, now) {
                            Ok(GetOutcome::Got(got, _))
                                if got.body.len() as u64 > max_msg_len as u64 =>
                            {
                                // Larger than the channel carries: to the dead-letter queue
                                // here, in the batch's unit of work, as MQ's sending MCA does.
                                if let Err(e) =
                                    dead_letter(&mut core.engine, conn, self.name, got, now)
                                {
                                    return End::Failed(e);
                                }
                                dead += 1;
                            }
                            Ok(GetOutcome::Got(got, _)) => {
                                if got.md.persistence == Persistence::Persistent {
                                    persistent += 1;
                                }
                                let waited_ms = now.saturating_sub(got.md.put_time_ms);
                                self.status.lock().xq_time.add(waited_ms as f64 * 1000.0);
                                n += 1;
                                batch_bytes += got.body.len() as u64;
                                batch.push(got);
                            }
                            Ok(GetOutcome::Waiting(w)) => {
                                core.engine.cancel_wait(w);
                                empty = true;
                                break;
                            }
                            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                                empty = true;
                                break;
                            }
                            Err(e) => return End::Failed(e),
                        }
                    }
                    if n == 0 && dead > 0 {
                        // Only dead letters: nothing to send, so nothing to wait for.
                        if let Err(e) = core.engine.commit(conn, now) {
                            return End::Failed(e);
                        }
                        dead = 0;
                    }
                    let expired = opened.is_some_and(|t| t.elapsed() >= batch_int);
                    let full =
                        n >= batch_size || (batch_lim_bytes > 0 && batch_bytes >= batch_lim_bytes);
                    let done = n > 0 && (full || batch_int.is_zero() || expired);
                    // Wait for an arrival when idle, or while BATCHINT keeps the batch open.
                    let waiter = if !done && empty {
                        match core.engine.get(conn, hobj, &arrival, 0, now) {
                            Ok(GetOutcome::Waiting(w)) => Some(w),
                            Ok(GetOutcome::Got(..)) => None,
                            Err(e) => return End::Failed(e),
                        }
                    } else {
                        None
                    };
                    (done, waiter)
                };
                // Encoded outside the core lock: small bodies are copied into the frames, a
                // large one is written from the buffer it is queued in.
                if !batch.is_empty() {
                    let first = seq + u64::from(n) - batch.len() as u64;
                    let mut frames = BytesMut::new();
                    let mut pieces: Vec<bytes::Bytes> = Vec::new();
                    for (i, got) in batch.into_iter().enumerate() {
                        let f = ChannelFrame::Msg {
                            seq: first + i as u64 + 1,
                            md: got.md,
                            props: got.props,
                            body: got.body,
                        };
                        match &f {
                            ChannelFrame::Msg { body, .. }
                                if body.len() >= SPLIT_BODY_MIN_BYTES =>
                            {
                                if let Some(body) = f.encode_split(&mut frames) {
                                    pieces.push(frames.split().freeze());
                                    pieces.push(body);
                                }
                            }
                            _ => f.encode(&mut frames),
                        }
                    }
                    if !frames.is_empty() {
                        pieces.push(frames.freeze());
                    }
                    self.status.lock().substate = "SEND";
                    if let Err(e) = link.send_all(&pieces).await {
                        return End::Failed(e);
                    }
                    sent_bytes += pieces.iter().map(|p| p.len() as u64).sum::<u64>();
                    opened.get_or_insert_with(tokio::time::Instant::now);
                }
                if done {
                    break;
                }
                let Some(w) = waiter else {
                    continue;
                };
                let far = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
                let until = match opened {
                    Some(t) if n > 0 => t + batch_int,
                    _ => far,
                };
                // Heartbeats: HBINT after the last frame sent; one unanswered for HBINT means
                // the link is dead (a relay or firewall that stopped forwarding and did not
                // close). With a batch open, they only keep the receiver from timing out.
                let beat_at = hb.map(|h| match link.oldest_unanswered {
                    Some(t) if n == 0 => t + h,
                    _ => link.last_sent + h,
                });
                // DISCINT counts from the end of the last batch, while there is nothing to send.
                let disc_at = disc.filter(|_| n == 0).map(|d| idle_since + d);
                self.status.lock().substate = if n == 0 { "MQGET" } else { "RECEIVE" };
                enum Woke {
                    Arrival,
                    /// A heartbeat's answer (Ok) or the end of the link.
                    Frame(Result<(), MqError>),
                    Beat,
                    Disconnect,
                    Stop,
                }
                // Idle, a receiver that goes away is noticed at once.
                let woke = tokio::select! {
                    _ = woken.notified() => Woke::Arrival,
                    _ = tokio::time::sleep_until(until) => Woke::Arrival,
                    _ = stop.wait_for(|v| *v > super::RUN) => Woke::Stop,
                    r = link.recv(Duration::from_secs(24 * 3600)), if n == 0 => Woke::Frame(r.and_then(|f| match f {
                        ChannelFrame::HeartbeatOk => Ok(()),
                        _ => Err(broken("the receiver sent a frame out of turn")),
                    })),
                    _ = tokio::time::sleep_until(beat_at.unwrap_or(far)), if beat_at.is_some() => Woke::Beat,
                    _ = tokio::time::sleep_until(disc_at.unwrap_or(far)), if disc_at.is_some() => Woke::Disconnect,
                };
                self.shared.core.lock().engine.cancel_wait(w);
                match woke {
                    Woke::Arrival | Woke::Frame(Ok(())) => {}
                    Woke::Frame(Err(e)) => return End::Failed(e),
                    Woke::Stop => return End::Stopped,
                    Woke::Disconnect => return End::Idle,
                    Woke::Beat => {
                        if n == 0 && link.unanswered > 0 {
                            return End::Failed(broken(format!(
                                "the receiver did not answer a heartbeat in {hb_int_s} s (HBINT): the link is down"
                            )));
                        }
                        self.status.lock().substate = "HEARTBEATING";
                        if let Err(e) = link.heartbeat().await {
                            return End::Failed(e);
                        }
                    }
                }
            }
            if fast_np && persistent == 0 && dead == 0 {
                // Only non-persistent messages on a FAST channel: they left the transmission
                // queue as they were sent, so there is no unit of work to end and nothing to
                // log at either end; the batch needs no end-of-batch and no confirmation.
                self.moved = true;
                idle_since = tokio::time::Instant::now();
                let mut st = self.status.lock();
                st.msgs += n as u64;
                st.batches += 1;
                st.bytes_sent += sent_bytes;
                continue;
            }
            // BATCHHB: a receiver not heard from for that long is asked whether it is still
            // there before the batch goes in doubt; no answer backs the batch out instead.
            if !batch_hb.is_zero() && link.last_heard.elapsed() >= batch_hb {
                self.status.lock().substate = "HEARTBEATING";
                let asked = tokio::time::Instant::now();
                if let Err(e) = link.heartbeat().await {
                    return End::Failed(e);
                }
                let wait = link.answer_wait;
                while link.last_heard < asked || link.unanswered > 0 {
                    let left =
                        (asked + wait).saturating_duration_since(tokio::time::Instant::now());
                    let r = tokio::select! {
                        r = link.recv(left) => r,
                        _ = stop.wait_for(|v| *v > super::RUN) => return End::Stopped,
                    };
                    match r {
                        Ok(ChannelFrame::HeartbeatOk) => {}
                        Ok(other) => {
                            return End::Failed(broken(format!(
                                "the receiver answered a batch heartbeat with frame 0x{:02x}",
                                other.kind()
                            )))
                        }
                        Err(e) => return End::Failed(e),
                    }
                }
            }
            let batch_luwid = luwid.max(now_luwid_floor(&sync)) + 1;
            let batch_seq = seq + n as u64;
            {
                let mut st = self.status.lock();
                st.cur_seq = batch_seq;
                st.cur_luwid = batch_luwid;
                st.xq_msgs_avail = n as u64;
            }
            // 2. The batch in doubt, durable before the receiver may commit it.
            let lsn = {
                let mut core = self.shared.core.lock();
                let gets = core.engine.uow_gets(conn);
                core.engine.channel_indoubt(
                    self.name,
                    InDoubt {
                        luwid: batch_luwid,
                        seq: batch_seq,
                        gets,
                    },
                )
            };
            match lsn {
                Ok(lsn) => {
                    self.status.lock().indoubt = true;
                    if let Err(e) = self.durable(lsn).await {
                        return End::Failed(e);
                    }
                }
                Err(e) => return End::Failed(e),
            }
            // 3. End of batch; the receiver confirms once its commit is durable.
            let mut end = BytesMut::new();
            ChannelFrame::EndBatch {
                luwid: batch_luwid,
                seq: batch_seq,
            }
            .encode(&mut end);
            self.status.lock().substate = "END_OF_BATCH";
            let end_sent = tokio::time::Instant::now();
            if let Err(e) = link.send(&end).await {
                return End::Failed(e);
            }
            // A stop while the batch is in doubt leaves it in doubt: resolved at the next start.
            let wait = link.answer_wait;
            let answer = tokio::select! {
                r = link.recv_skip(wait) => r,
                _ = stop.wait_for(|v| *v >= super::FORCE) => return End::Stopped,
            };
            match answer {
                Ok(ChannelFrame::Confirm { luwid: l, .. }) if l == batch_luwid => {
                    let rtt = end_sent.elapsed().as_secs_f64() * 1e6;
                    self.status.lock().net_time.add(rtt);
                }
                Ok(other) => {
                    return End::Failed(broken(format!(
                        "the receiver answered end of batch {batch_luwid:016X} with frame 0x{:02x}",
                        other.kind()
                    )))
                }
                Err(e) => return End::Failed(e),
            }
            // 4. The gets committed, the doubt ended, in one record.
            let r = self.shared.core.lock().engine.channel_commit(
                conn,
                SyncUpdate {
                    channel: self.name.to_string(),
                    seq: batch_seq,
                    luwid: batch_luwid,
                },
                now_ms(),
            );
            if let Err(e) = r {
                return End::Failed(e);
            }
            self.moved = true;
            idle_since = tokio::time::Instant::now();
            seq = batch_seq;
            luwid = batch_luwid;
            let mut st = self.status.lock();
            st.msgs += n as u64;
            st.batches += 1;
            st.bytes_sent += sent_bytes + end.len() as u64;
            st.last_seq = seq;
            st.last_luwid = luwid;
            st.indoubt = false;
        }
    }

    async fn connect(
        &self,
        host: &str,
        port: u16,
        tls: Option<&ferrymq_security::tls::link::LinkTls>,
    ) -> Result<Link<'static>, MqError> {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host, port))).await {
            Ok(Ok(sock)) => {
                let _ = sock.set_nodelay(true);
                let sock: Box<dyn Io> = match tls {
                    None => Box::new(sock),
                    Some(t) => Box::new(self.handshake(sock, host, port, t).await?),
                };
                let now = tokio::time::Instant::now();
                Ok(Link {
                    sock,
                    drain: None,
                    dec: FrameDecoder::new(ferrymq_proto::PRE_HANDSHAKE_FRAME_MAX_BYTES),
                    buf: BytesMut::with_capacity(64 * 1024),
                    last_sent: now,
                    last_heard: now,
                    receiver_stopped: self.receiver_stopped.clone(),
                    unanswered: 0,
                    oldest_unanswered: None,
                    answer_wait: ANSWER_TIMEOUT,
                })
            }
            Ok(Err(e)) => Err(MqError::new(
                Reason::HOST_NOT_AVAILABLE,
                format!("cannot connect to {host}({port}): {e}"),
            )),
            Err(_) => Err(MqError::new(
                Reason::HOST_NOT_AVAILABLE,
                format!(
                    "connecting to {host}({port}) took longer than {} s",
                    CONNECT_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    /// The TLS handshake as the client, and the receiver's certificate judged (SSLPEER).
    async fn handshake(
        &self,
        sock: TcpStream,
        host: &str,
        port: u16,
        t: &ferrymq_security::tls::link::LinkTls,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, MqError> {
        use ferrymq_security::tls::link::LinkRule;
        let name = ferrymq_security::tls::link::LinkTls::server_name(&format!("{host}:{port}"));
        let connector = tokio_rustls::TlsConnector::from(t.client.clone());
        let s = match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, sock)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(MqError::new(
                    Reason::SSL_INITIALIZATION_ERROR,
                    format!("the TLS handshake with {host}({port}) failed: {e}"),
                ))
            }
            Err(_) => {
                return Err(MqError::new(
                    Reason::SSL_INITIALIZATION_ERROR,
                    format!("the TLS handshake with {host}({port}) took too long"),
                ))
            }
        };
        if let Err(r) = t.check_peer(s.get_ref().1) {
            let reason = if r.rule == LinkRule::DnMismatch {
                Reason::SSL_PEER_NAME_MISMATCH
            } else {
                Reason::SSL_INITIALIZATION_ERROR
            };
            return Err(MqError::new(
                reason,
                format!(
                    "channel {}: the receiver at {host}({port}) is refused ({}): {}",
                    self.name,
                    r.rule.name(),
                    r.detail
                ),
            ));
        }
        Ok(s)
    }

    async fn durable(&self, lsn: ferrymq_engine::Lsn) -> Result<(), MqError> {
        if lsn == 0 {
            return Ok(());
        }
        self.shared.durable.wait(lsn).await.map_err(|_| {
            MqError::new(
                Reason::Q_MGR_STOPPING,
                "the recovery log stopped before the channel's record was durable",
            )
        })
    }

    /// Backs out whatever the attempt holds (its gets go back on the transmission queue).
    fn end(self) {
        if let Some(conn) = self.conn {
            let mut core = self.shared.core.lock();
            core.remove_waker(conn);
            core.engine.disconnect(conn, now_ms());
            core.flush_deliveries();
        }
    }
}

/// Puts a transmission-queue message the channel cannot carry to this queue manager's
/// dead-letter queue, behind a dead-letter header (MQRC_MSG_TOO_BIG_FOR_CHANNEL, the destination
/// its transmission header names), under the batch's unit of work.
fn dead_letter(
    engine: &mut ferrymq_engine::Engine,
    conn: ConnId,
    channel: &str,
    got: ferrymq_engine::Got,
    now: u64,
) -> Result<(), MqError> {
    use ferrymq_types::dlh::{self, DeadLetterHeader};
    use ferrymq_types::options::{pmo, PutOptions};
    let dlq = engine.attrs().dead_letter_queue.clone();
    let (q, qmgr) = ferrymq_types::xqh::TransmissionHeader::parse(&got.body)
        .map(|(x, _)| (x.remote_q, x.remote_qmgr))
        .unwrap_or_default();
    let reason = Reason::MSG_TOO_BIG_FOR_CHANNEL;
    let (md, body) = DeadLetterHeader::for_message(
        &got.md,
        reason.code() as i32,
        &q,
        &qmgr,
        dlh::APPL_TYPE_QMGR,
        channel,
        now,
    )
    .wrap(&got.md, &got.body);
    let opts = PutOptions {
        syncpoint: Syncpoint::Yes,
        context: pmo::SET_ALL_CONTEXT,
        ..Default::default()
    };
    engine
        .put1(conn, &dlq, "", &opts, md, got.props, body, now)
        .map(|_| ())
        .map_err(|e| {
            MqError::new(
                reason,
                format!(
                    "channel {channel}: a message for {q}({qmgr}) is larger than the channel's MAXMSGL and the dead-letter queue '{dlq}' cannot take it: {e}"
                ),
            )
        })
}

/// The negotiated start of a channel: the receiver's batch size, MAXMSGL, last LUWID, FAST
/// non-persistent messages and heartbeat interval.
type Bound = (u32, u32, u64, bool, u32);

/// Sends the channel's Hello over `link` and takes the receiver's answer; None: stopped
/// meanwhile.
async fn bind(
    link: &mut Link<'_>,
    hello: &BytesMut,
    stop: &mut watch::Receiver<u8>,
) -> Result<Option<Bound>, MqError> {
    link.send(hello).await?;
    let answer = tokio::select! {
        r = link.recv(ANSWER_TIMEOUT) => r,
        _ = stop.wait_for(|v| *v > super::RUN) => return Ok(None),
    };
    match answer? {
        ChannelFrame::HelloOk {
            batch_size,
            max_msg_len,
            luwid,
            fast_np,
            hb_int_s,
            ..
        } => Ok(Some((
            batch_size.max(1),
            max_msg_len,
            luwid,
            fast_np,
            hb_int_s,
        ))),
        other => Err(broken(format!(
            "the receiver answered the channel start with frame 0x{:02x}",
            other.kind()
        ))),
    }
}

/// The lowest LUWID the next batch may take: above the last committed one and any in doubt.
fn now_luwid_floor(sync: &ferrymq_engine::channel::ChannelSync) -> u64 {
    sync.indoubt
        .as_ref()
        .map_or(sync.luwid, |d| d.luwid.max(sync.luwid))
}

/// Sends `frame` to the partner of `def` as the channel connects (CONNAME in order, TLS when
/// SSLCIPH is set) and gives its answer to `accept`: the first address whose answer it takes
/// wins (with its socket); otherwise the last reason.
async fn ask_partner<T>(
    shared: &Arc<Shared>,
    def: &ferrymq_types::ObjectDef,
    frame: &BytesMut,
    accept: impl Fn(&str, u16, ChannelFrame) -> Result<T, MqError>,
) -> Result<(T, Link<'static>), MqError> {
    let status = Arc::new(Mutex::new(ChannelStatus::new("", "")));
    let a = Attempt {
        shared,
        name: &def.name,
        status: &status,
        conn: None,
        moved: false,
        receiver_stopped: Default::default(),
    };
    let conname = attr(def, "CONNAME", "");
    let tls = match attr(def, "SSLCIPH", "").trim() {
        "" => None,
        _ => {
            let peer = attr(def, "SSLPEER", "");
            Some(
                shared
                    .tls
                    .channel_client(Some(peer.as_str()).filter(|p| !p.trim().is_empty()))
                    .map_err(|e| MqError::new(Reason::SSL_INITIALIZATION_ERROR, e))?,
            )
        }
    };
    let mut last = broken(format!("CONNAME '{conname}' names no address"));
    for (host, port) in ferrymq_types::conname::parse_conn_name(&conname)? {
        let mut link = match a.connect(&host, port, tls.as_ref()).await {
            Ok(l) => l,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let r = async {
            link.send(frame).await?;
            link.recv(ANSWER_TIMEOUT).await
        }
        .await;
        match r.and_then(|answer| accept(&host, port, answer)) {
            Ok(t) => return Ok((t, link)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// PING CHANNEL of a sender: connects as the channel would (CONNAME in order, TLS when SSLCIPH
/// is set), sends `datalen` bytes and checks that the partner returns them; no message moves.
pub async fn ping(
    shared: Arc<Shared>,
    def: ferrymq_types::ObjectDef,
    datalen: u32,
) -> Result<String, MqError> {
    let data: bytes::Bytes = (0..datalen).map(|i| (i % 251) as u8).collect();
    let mut frame = BytesMut::new();
    ChannelFrame::Ping {
        channel: def.name.clone(),
        data: data.clone(),
    }
    .encode(&mut frame);
    let started = tokio::time::Instant::now();
    ask_partner(&shared, &def, &frame, |host, port, answer| match answer {
        ChannelFrame::PingOk { data: back } if back == data => Ok(format!(
            "CHANNEL({}): {host}({port}) returned the {datalen} bytes in {} ms.",
            def.name,
            started.elapsed().as_millis()
        )),
        _ => Err(broken(format!(
            "{host}({port}) did not return the ping's data unchanged"
        ))),
    })
    .await
    .map(|(t, _)| t)
}

/// START CHANNEL of a requester (RQSTR): asks the server channel of the same name at CONNAME
/// to start. A server with a CONNAME calls back as the sender, and this queue manager's listener
/// takes it as the receiving end; a server without one answers with its sender's Hello on this
/// very socket, which is then served as if the server had connected: the requester is its
/// receiving end until the socket closes. The outcome goes to the error log.
pub async fn request(shared: Arc<Shared>, def: ferrymq_types::ObjectDef) {
    let mut frame = BytesMut::new();
    ChannelFrame::Request {
        channel: def.name.clone(),
        requester_qmgr: shared.cfg.name.clone(),
    }
    .encode(&mut frame);
    let r = ask_partner(&shared, &def, &frame, |host, port, answer| match answer {
        ChannelFrame::RequestOk => Ok((format!("{host}({port})"), None)),
        hello @ ChannelFrame::Hello { .. } => {
            let mut first = BytesMut::new();
            hello.encode(&mut first);
            Ok((format!("{host}({port})"), Some(first)))
        }
        other => Err(broken(format!(
            "{host}({port}) answered the request with frame 0x{:02x}",
            other.kind()
        ))),
    })
    .await;
    match r {
        Ok(((server, None), _)) => crate::qm_log!(
            crate::errlog::ids::CHANNEL_STARTED,
            "requester channel {}: the server at {server} is starting and will call back",
            def.name
        ),
        Ok(((server, Some(mut first)), link)) => {
            crate::qm_log!(
                crate::errlog::ids::CHANNEL_STARTED,
                "requester channel {}: the server at {server} is sending over the requester's connection",
                def.name
            );
            first.extend_from_slice(&link.buf);
            let info = crate::listeners::SocketInfo {
                conname: server,
                bindings: false,
                os_user: None,
                tls: None,
                started_ms: now_ms(),
                conversations: Default::default(),
                frames: Default::default(),
                state: Default::default(),
            };
            crate::conn::serve_from(link.sock, first, shared.clone(), false, info).await;
        }
        Err(last) => crate::qm_log!(
            crate::errlog::ids::CHANNEL_ENDED,
            "requester channel {} could not start its server: {last}",
            def.name
        ),
    }
}

/// Writes of a server channel over its requester's socket: to the socket's outbound queue.
struct Accepted<'r, R> {
    rd: &'r mut R,
    out: crate::core::Outbox,
}

impl<R: AsyncRead + Unpin> AsyncRead for Accepted<'_, R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.rd).poll_read(cx, buf)
    }
}

impl<R: Unpin> tokio::io::AsyncWrite for Accepted<'_, R> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let out = crate::core::Out::frame(bytes::Bytes::copy_from_slice(buf), 0, false);
        std::task::Poll::Ready(match self.out.send(out) {
            Ok(()) => Ok(buf.len()),
            Err(_) => Err(std::io::ErrorKind::BrokenPipe.into()),
        })
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A SVR without CONNAME its requester asked to start: runs as the sender over the requester's
/// socket (one attempt: when it ends, the requester starts it again), with the same batches,
/// resynchronisation and status as a sender that connected.
pub(crate) async fn serve_requester<R: AsyncRead + Unpin + Send>(
    shared: &Arc<Shared>,
    def: ferrymq_types::ObjectDef,
    rd: &mut R,
    dec: FrameDecoder,
    buf: BytesMut,
    s: &crate::dispatch::Session,
) -> Result<(), MqError> {
    let name = def.name.clone();
    // The requester asking again means its previous connection is gone, though this end may not
    // have noticed yet: that instance is ended (a batch in doubt stays in doubt, resolved below).
    let old = shared.channels.senders.lock().get(&name).map(|i| {
        i.stop.send_replace(super::FORCE);
        i.status.clone()
    });
    if let Some(old) = old {
        let until = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        while !matches!(old.lock().state, State::Stopped | State::Inactive) {
            if tokio::time::Instant::now() >= until {
                return Err(MqError::new(
                    Reason::CHANNEL_NOT_AVAILABLE,
                    format!("server channel {name} did not end its previous instance"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let (status, stop_tx) = {
        let mut senders = shared.channels.senders.lock();
        let stop_tx = Arc::new(watch::Sender::new(super::RUN));
        let status = Arc::new(Mutex::new(ChannelStatus::new(
            &s.info.conname,
            &attr(&def, "XMITQ", ""),
        )));
        status.lock().chltype = "SVR";
        senders.insert(
            name.clone(),
            super::Instance {
                status: status.clone(),
                stop: stop_tx.clone(),
                to_inactive: Default::default(),
                kick: Default::default(),
            },
        );
        (status, stop_tx)
    };
    status.lock().state = State::Binding;
    let mut stop = stop_tx.subscribe();
    let mut a = Attempt {
        shared,
        name: &name,
        status: &status,
        conn: None,
        moved: false,
        receiver_stopped: Default::default(),
    };
    let now = tokio::time::Instant::now();
    let link = Link {
        sock: Box::new(Accepted {
            rd,
            out: s.tx.clone(),
        }),
        drain: Some(s.tx.q.clone()),
        dec,
        buf,
        last_sent: now,
        last_heard: now,
        receiver_stopped: a.receiver_stopped.clone(),
        unanswered: 0,
        oldest_unanswered: None,
        answer_wait: ANSWER_TIMEOUT,
    };
    let end = a.run(&def, &mut stop, Some(link)).await;
    let receiver_stopped = a.receiver_stopped.load(Ordering::SeqCst);
    a.end();
    let mut st = status.lock();
    st.stop_requested = false;
    st.substate = "";
    match end {
        End::Failed(e) => {
            if receiver_stopped {
                let _ = shared.core.lock().engine.channel_set_stopped(&name, true);
            }
            st.state = State::Stopped;
            st.last_error = e.to_string();
            crate::qm_log!(
                crate::errlog::ids::CHANNEL_ENDED,
                "server channel {name} ended: {e}; its requester starts it again"
            );
            Err(e)
        }
        End::Stopped => {
            st.state = State::Stopped;
            crate::qm_log!(crate::errlog::ids::CHANNEL_ENDED, "channel {name} stopped");
            Ok(())
        }
        End::Idle => {
            st.state = State::Inactive;
            crate::qm_log!(
                crate::errlog::ids::CHANNEL_ENDED,
                "server channel {name} ended normally: nothing to send for DISCINT"
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{answer_wait, Duration};

    #[test]
    fn the_answer_wait_is_twice_hbint_within_its_bounds() {
        let s = Duration::from_secs;
        assert_eq!(answer_wait(None), s(60));
        assert_eq!(answer_wait(Some(s(1))), s(5));
        assert_eq!(answer_wait(Some(s(10))), s(20));
        assert_eq!(answer_wait(Some(s(300))), s(60));
    }
}
