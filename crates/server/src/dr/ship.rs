//! The primary's side of DR: connect to the recovery site, agree where the stream resumes (the
//! difference, or a full copy), then send durable records as they come and take the
//! secondary's acknowledgements, which move the lag bound ([`super::gate`]) and let the log
//! release what the secondary holds.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_dr::wire::{self, Frame, CHUNK_BYTES};
use ferrymq_dr::{RaftSource, RingSource, StreamSource, Unit};
use ferrymq_engine::records::DrMark;
use ferrymq_log::RecoveryLog;
use ferrymq_replication::ha::Proposals;
use ferrymq_replication::link::{LinkStream, Links};
use ferrymq_replication::{LogId, LogStorage};
use tokio::sync::watch;

use super::gate::Gate;
use super::{DrHandle, LinkState};
use crate::qmgr::Shared;
use crate::storage::{now_ms, Storage};

/// How long connecting to one address, or the secondary's answer to Hello, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// After a chunk that was not full, while the secondary lacks less than a quarter of the lag
/// bound, the shipper waits `SHIP_GAP` before it reads the next: a queue manager would
/// otherwise send a frame, and wake the recovery site, for every log sync. Larger chunks cost
/// the recovery site less per byte (fewer wake-ups, and more of the messages a chunk puts are
/// also removed within it: see `Engine::apply_shipped_chunk`); the lag they add stays inside
/// that quarter, and once the lag nears it chunks go back to back.
const SHIP_GAP: Duration = Duration::from_millis(25);
/// How often the secondary's acknowledged position may be recorded (`DR_ACKED`), and how far it
/// must have moved: in log bytes (standalone) or Raft entries (HA group).
const ACK_RECORD_EVERY: Duration = Duration::from_millis(100);
const ACK_RECORD_STEP_BYTES: u64 = 64 * 1024;
const ACK_RECORD_STEP_ENTRIES: u64 = 16;

/// Where the stream comes from: the log it reads ([`StreamSource`]: the ring, or the committed
/// Raft entries), and beside it how a full copy's position is taken in that log.
pub struct Source {
    pub stream: Box<dyn StreamSource>,
    pub copy: CopyFrom,
}

impl Source {
    /// A standalone queue manager's ring: positions are LSNs. `durable` is the ring's own
    /// durable LSN (not the gated one).
    pub fn ring(
        ring: Arc<RecoveryLog>,
        storage: &Storage,
        durable: crate::lsn::LsnWatch,
    ) -> Source {
        Source {
            stream: Box::new(RingSource::new(
                ring.clone(),
                durable,
                storage.dr_retain.clone(),
            )),
            copy: CopyFrom::Ring(ring),
        }
    }

    /// An HA group's committed Raft entries: positions are Raft indexes.
    pub fn raft(
        log: LogStorage,
        applied: watch::Receiver<Option<LogId>>,
        props: Arc<Proposals>,
    ) -> Source {
        Source {
            stream: Box::new(RaftSource::new(log, applied)),
            copy: CopyFrom::Raft(props),
        }
    }
}

/// How a full copy is taken: the engine's image under the core lock, at a position of the
/// source's log that is durable before the copy is sent.
pub enum CopyFrom {
    /// The ring's end LSN as the image is taken.
    Ring(Arc<RecoveryLog>),
    /// The Raft index of the batch the proposals seal as the image is taken.
    Raft(Arc<Proposals>),
}

impl CopyFrom {
    /// The whole persistent state as records, and the stream position it corresponds to (durable
    /// before this returns).
    async fn full_copy(&self, shared: &Shared) -> Result<(u64, Vec<(u8, Bytes)>), String> {
        match self {
            CopyFrom::Ring(ring) => {
                let (pos, image) = {
                    let core = shared.core.lock();
                    (ring.end_lsn(), core.engine.checkpoint_image(now_ms()))
                };
                let recs = image.copy_records();
                let ring = ring.clone();
                tokio::task::spawn_blocking(move || ring.wait_durable(pos))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                Ok((pos, recs))
            }
            CopyFrom::Raft(props) => {
                let (seq, image) = {
                    let core = shared.core.lock();
                    (props.seal(), core.engine.checkpoint_image(now_ms()))
                };
                let recs = image.copy_records();
                props.wake_replicator();
                let p = props.clone();
                let id = tokio::task::spawn_blocking(move || p.log_id_of(seq))
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("leadership was lost while taking the copy")?;
                Ok((id.index, recs))
            }
        }
    }
}

/// A full copy sent to the secondary and not yet acknowledged, kept (its records are shared, not
/// copied again) so that a copy cut off by a broken link resumes where the secondary's staged
/// copy ends instead of starting over.
#[derive(Clone)]
struct SentCopy {
    stream: u64,
    pos: u64,
    recs: Arc<Vec<(u8, Bytes)>>,
    bytes: u64,
}

/// Ships the stream until the process ends, reconnecting after every failure.
pub async fn run_primary(shared: Arc<Shared>, dr: Arc<DrHandle>, gate: Arc<Gate>, mut src: Source) {
    let stream = match ensure_stream(&shared) {
        Ok(s) => s,
        Err(e) => {
            crate::qm_log!(
                crate::errlog::ids::DR_STREAM_ID_UNRECORDED,
                "DR: cannot record this queue manager's stream id: {e}"
            );
            dr.set_error(e);
            return;
        }
    };
    dr.stream.store(stream, Ordering::Release);
    // The caller has already held replies within the bound from the secondary's last recorded
    // position, if there is one; that hold lasts until a session takes over, or the grace
    // period passes without one.
    let recorded = super::recorded_ack(shared.core.lock().engine.dr_state());
    if let Some(pos) = recorded {
        dr.acked.store(pos, Ordering::Release);
        unbound_after_grace(&dr, &gate, dr.sessions.load(Ordering::Acquire));
    }
    let mut persisted = recorded.unwrap_or(0);
    if dr.cfg.remote.is_empty() {
        dr.set_link(LinkState::Disconnected, "");
        dr.set_error("no recovery site configured (DR:RemoteAddresses)".into());
        return;
    }
    let mut backoff = Duration::from_millis(200);
    let mut copy: Option<SentCopy> = None;
    loop {
        let began = Instant::now();
        let r = session(
            &shared,
            &dr,
            &gate,
            &mut src,
            stream,
            &mut persisted,
            &mut copy,
        )
        .await;
        let generation = dr.sessions.fetch_add(1, Ordering::AcqRel) + 1;
        if let Err(e) = r {
            if dr.st.lock().last_error.as_deref() != Some(e.as_str()) {
                crate::qm_log!(crate::errlog::ids::DR_SHIP_ERROR, "DR: {e}");
            }
            dr.set_error(e);
        }
        unbound_after_grace(&dr, &gate, generation);
        dr.reset_unacked();
        dr.set_link(LinkState::Disconnected, "");
        if began.elapsed() > Duration::from_secs(5) {
            backoff = Duration::from_millis(200);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// A primary ending in an orderly way (`endmqm`, SIGTERM), its applications and channels gone,
/// waits while its link is up until the secondary has acknowledged the whole stream, for at most
/// `DR:DisconnectGraceMs`: a planned end or switchover loses no acknowledged work, where only a
/// disaster may lose up to the bound. Without a link there is nobody to wait for.
pub async fn hand_over(shared: &Shared) {
    let (Some(dr), Some(gate)) = (shared.dr.as_ref(), shared.dr_gate.as_ref()) else {
        return;
    };
    let live = |l| matches!(l, LinkState::Normal | LinkState::FullCopy);
    if !live(dr.link()) {
        return;
    }
    let began = Instant::now();
    let grace = Duration::from_millis(dr.cfg.disconnect_grace_ms);
    loop {
        let lag = gate.lag(dr.acked.load(Ordering::Acquire));
        if lag.total() == 0 {
            crate::qm_log!(
                crate::errlog::ids::DR_HANDED_OVER,
                "DR: the recovery site holds the whole stream (to position {}) as this queue manager ends",
                lag.end
            );
            return;
        }
        if !live(dr.link()) || began.elapsed() >= grace {
            crate::qm_log!(
                crate::errlog::ids::DR_HANDED_OVER,
                "DR: ending with {} bytes of log the recovery site has not acknowledged ({} of them acknowledged to applications); the link is {}",
                lag.total(),
                lag.at_risk,
                dr.link_name()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The bound stays for a grace period after the link is lost (a blip, or a main site whose
/// network goes down before the rest of it loses no more than the bound), then the site
/// carries on alone: unless a session has started since `generation` was read.
fn unbound_after_grace(dr: &Arc<DrHandle>, gate: &Arc<Gate>, generation: u64) {
    let (g, d) = (gate.clone(), dr.clone());
    let grace = Duration::from_millis(dr.cfg.disconnect_grace_ms);
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if d.sessions.load(Ordering::Acquire) == generation {
            g.bound(None);
        }
    });
}

/// Records the secondary's acknowledged position in this queue manager's own stream when it
/// has moved on by at least `step` (in the source's positions) since `persisted`: enough to
/// keep the bound close after a restart or failover, and no echo (the record itself is shipped
/// and acknowledged, but moves the position by less than a step).
fn persist_ack(
    shared: &Shared,
    dr: &DrHandle,
    stream: u64,
    step: u64,
    persisted: &mut u64,
) -> Result<(), String> {
    let pos = dr.acked.load(Ordering::Acquire);
    if pos < persisted.saturating_add(step) {
        return Ok(());
    }
    shared
        .core
        .lock()
        .engine
        .log_dr_acked(DrMark { stream, pos })
        .map_err(|e| format!("cannot record the secondary's position: {e}"))?;
    *persisted = pos;
    Ok(())
}

/// This queue manager's stream id, recorded in its log the first time it ships.
fn ensure_stream(shared: &Shared) -> Result<u64, String> {
    let mut core = shared.core.lock();
    let id = core.engine.dr_state().stream;
    if id != 0 {
        return Ok(id);
    }
    let id = super::new_stream_id();
    core.engine.log_dr_stream(id).map_err(|e| e.to_string())?;
    Ok(id)
}

async fn connect_any(links: &Links, addrs: &[String]) -> Result<(LinkStream, String), String> {
    let mut errs = Vec::new();
    for a in addrs {
        match links.connect(a, CONNECT_TIMEOUT).await {
            Ok(s) => return Ok((s, a.clone())),
            Err(e) => errs.push(format!("{a}: {e}")),
        }
    }
    Err(format!(
        "the recovery site is not reachable ({})",
        errs.join("; ")
    ))
}

async fn session(
    shared: &Shared,
    dr: &Arc<DrHandle>,
    gate: &Arc<Gate>,
    src: &mut Source,
    stream: u64,
    persisted: &mut u64,
    kept: &mut Option<SentCopy>,
) -> Result<(), String> {
    dr.set_link(LinkState::Connecting, "");
    let (sock, addr) = connect_any(&dr.links, &dr.cfg.remote).await?;
    let (mut rd, mut wr) = sock.into_split();
    let io = |e: std::io::Error| format!("DR link to {addr}: {e}");
    wire::write(
        &mut wr,
        &Frame::Hello {
            qmgr: dr.qmgr.clone(),
            stream,
            max_lag: Some(dr.cfg.max_lag_bytes),
        },
    )
    .await
    .map_err(io)?;
    let (st, progress) = match tokio::time::timeout(HELLO_TIMEOUT, wire::read(&mut rd)).await {
        Err(_) => return Err(format!("{addr} did not answer the DR hello")),
        Ok(r) => match r.map_err(io)? {
            Some(Frame::Position(st, progress)) => (st, progress),
            Some(Frame::Refuse(why)) => {
                return Err(format!(
                    "the recovery site at {addr} refused the stream: {why}"
                ))
            }
            other => return Err(format!("{addr} answered the DR hello with {other:?}")),
        },
    };
    let (start, end) = (src.stream.start(), src.stream.end());
    // Set when this session sends (or resumes) a full copy: its position, unconfirmed until the
    // secondary acknowledges it.
    let mut copy_at = None;
    let from = match st.mark {
        Some(m) if m.stream == stream && m.pos >= start && m.pos <= end => {
            if kept.as_ref().is_some_and(|k| k.pos <= m.pos) {
                *kept = None;
            }
            dr.set_resync("Difference");
            crate::qm_log!(
                crate::errlog::ids::DR_SHIP_RESUMED,
                "DR: {addr} holds the stream to position {}; sending the {} {} after it",
                m.pos,
                end - m.pos,
                src.stream.unit().name()
            );
            m.pos
        }
        _ => {
            let why = match st.mark {
                None => "it holds no position in any stream (a new secondary, or a former primary whose log may hold work this site never received)".to_string(),
                Some(m) if m.stream != stream => format!("its position is in another stream ({:016x}: a former primary's, or another queue manager's)", m.stream),
                Some(m) if m.pos < start => format!("the log no longer holds its position {} (it starts at {start})", m.pos),
                Some(m) => format!("its position {} is beyond this log's end {end}", m.pos),
            };
            dr.set_resync("FullCopy");
            dr.set_link(LinkState::FullCopy, &addr);
            // A copy the secondary has partly staged goes on where it stopped, provided this
            // log still holds the copy's position (the stream continues from there).
            let resume = match (kept.as_ref(), progress) {
                (Some(k), Some(p))
                    if k.stream == stream
                        && p.stream == stream
                        && p.pos == k.pos
                        && p.records <= k.recs.len() as u64
                        && k.pos >= start =>
                {
                    Some((k.clone(), p.records))
                }
                _ => None,
            };
            let (copy, skip) = match resume {
                Some(r) => {
                    crate::qm_log!(
                        crate::errlog::ids::DR_SHIP_COPY,
                        "DR: resuming the full copy to {addr} after its first {} of {} records",
                        r.1,
                        r.0.recs.len()
                    );
                    r
                }
                None => {
                    crate::qm_log!(
                        crate::errlog::ids::DR_SHIP_COPY,
                        "DR: sending a full copy to {addr}: {why}"
                    );
                    let (pos, recs) = src.copy.full_copy(shared).await?;
                    let bytes = recs
                        .iter()
                        .map(|(_, p)| (ferrymq_engine::batch::RECORD_HEAD_BYTES + p.len()) as u64)
                        .sum();
                    let c = SentCopy {
                        stream,
                        pos,
                        recs: Arc::new(recs),
                        bytes,
                    };
                    *kept = Some(c.clone());
                    (c, 0)
                }
            };
            let pos = copy.pos;
            // Until the secondary confirms the copy, the whole copy is work it does not hold.
            src.stream.retain(pos);
            gate.bound_copy(pos, copy.bytes);
            copy_at = Some(pos);
            if skip == 0 {
                wire::write(&mut wr, &Frame::Reset { stream, pos })
                    .await
                    .map_err(io)?;
            } else {
                wire::write(&mut wr, &Frame::ResumeCopy { stream, pos, skip })
                    .await
                    .map_err(io)?;
            }
            let skipped: u64 = copy.recs[..(skip as usize).min(copy.recs.len())]
                .iter()
                .map(|(_, p)| (ferrymq_engine::batch::RECORD_HEAD_BYTES + p.len()) as u64)
                .sum();
            dr.copy_bytes.store(copy.bytes, Ordering::Release);
            dr.copy_sent.store(skipped, Ordering::Release);
            let mut chunk = BytesMut::new();
            let n = copy.recs.len();
            for (i, (k, p)) in copy.recs.iter().enumerate().skip(skip as usize) {
                ferrymq_engine::batch::push_record(&mut chunk, *k, &[p]);
                if chunk.len() >= CHUNK_BYTES && i + 1 < n {
                    let records = std::mem::take(&mut chunk).freeze();
                    let len = records.len() as u64;
                    dr.bytes.fetch_add(len, Ordering::Relaxed);
                    wire::write_records(&mut wr, pos, false, records)
                        .await
                        .map_err(io)?;
                    dr.copy_sent.fetch_add(len, Ordering::AcqRel);
                }
            }
            let records = chunk.freeze();
            let len = records.len() as u64;
            dr.sent(pos, Instant::now(), records.len());
            wire::write_records(&mut wr, pos, true, records)
                .await
                .map_err(io)?;
            dr.copy_sent.fetch_add(len, Ordering::AcqRel);
            pos
        }
    };
    src.stream.retain(from);
    dr.sessions.fetch_add(1, Ordering::AcqRel);
    if copy_at.is_none() {
        // The secondary's own durable mark: it holds the stream up to here.
        dr.acked.store(from, Ordering::Release);
        gate.bound(Some(from));
        dr.set_link(LinkState::Normal, &addr);
    }

    let (dr2, gate2, addr2) = (dr.clone(), gate.clone(), addr.clone());
    let mut acks = tokio::spawn(async move {
        loop {
            match wire::read(&mut rd).await {
                Ok(Some(Frame::Ack(p))) => {
                    dr2.ack(p);
                    gate2.acked(p);
                    if copy_at.is_some_and(|at| p >= at)
                        && dr2.st.lock().link == LinkState::FullCopy
                    {
                        dr2.set_link(LinkState::Normal, &addr2);
                    }
                }
                Ok(Some(f)) => return format!("unexpected frame from the recovery site: {f:?}"),
                Ok(None) => return "the recovery site closed the DR link".to_string(),
                Err(e) => return format!("DR link: {e}"),
            }
        }
    });
    let mut pos = from;
    let step = match src.stream.unit() {
        Unit::Bytes => ACK_RECORD_STEP_BYTES,
        Unit::Entries => ACK_RECORD_STEP_ENTRIES,
    };
    let mut tick = tokio::time::interval(ACK_RECORD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let r = loop {
        tokio::select! {
            _ = tick.tick() => {
                if kept.as_ref().is_some_and(|k| dr.acked.load(Ordering::Acquire) >= k.pos) {
                    *kept = None;
                }
                if let Err(e) = persist_ack(shared, dr, stream, step, persisted) {
                    break Err(e);
                }
            }
            next = src.stream.next(pos) => {
                let (end, records) = match next {
                    Ok(n) => n,
                    Err(e) => break Err(e),
                };
                let read_at = Instant::now();
                let len = records.len();
                if let Err(e) = wire::write_records(&mut wr, end, true, records).await {
                    break Err(io(e));
                }
                dr.sent(end, read_at, len);
                src.stream.retain(dr.acked.load(Ordering::Acquire));
                pos = end;
                let lag = gate.lag(dr.acked.load(Ordering::Acquire)).total();
                if len < CHUNK_BYTES / 2 && lag < dr.cfg.max_lag_bytes / 4 {
                    tokio::time::sleep(SHIP_GAP).await;
                }
            }
            why = &mut acks => break Err(why.unwrap_or_else(|e| e.to_string())),
        }
    };
    acks.abort();
    r
}
