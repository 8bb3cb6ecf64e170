//! The receiving end of a message channel (RCVR): a listener socket whose first frame is a
//! channel Hello. It binds to the RCVR definition of the channel's name (none: refused with
//! MQRC_UNKNOWN_CHANNEL_NAME), answers with the last batch it committed, then puts each message
//! of a batch to its destination under one unit of work — a message that cannot be put goes to
//! the dead-letter queue behind a dead-letter header naming the reason, or, with USEDLQ(NO) or no
//! dead-letter queue, the batch is backed out and the channel ends with that reason. At end of
//! batch the puts and the channel's new sequence number and LUWID are committed in one record
//! (`CHANNEL_COMMIT`), and the confirmation leaves only once that record is durable.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferrymq_engine::channel::SyncUpdate;
use ferrymq_engine::ConnId;
use ferrymq_proto::channel::ChannelFrame;
use ferrymq_proto::{FrameDecoder, RawFrame};
use ferrymq_types::dlh::{self, DeadLetterHeader};
use ferrymq_types::options::{pmo, PutOptions, Syncpoint};
use ferrymq_types::xqh::TransmissionHeader;
use ferrymq_types::{MessageDescriptor, MqError, ObjectKind, Persistence, Properties, Reason};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::{attr, attr_u64, ChannelStatus, Instance, State};
use crate::core::Out;
use crate::dispatch::Session;
use crate::qmgr::Shared;
use crate::storage::now_ms;

fn send(s: &Session, f: &ChannelFrame, wait_lsn: u64, close: bool) {
    let mut b = BytesMut::new();
    f.encode(&mut b);
    let _ = s.tx.send(Out::frame(b.freeze(), wait_lsn, close));
}

/// Refuses the channel: tells the sender why, and ends the socket.
fn refuse(s: &Session, e: MqError) -> Result<(), MqError> {
    refuse_as(s, e, false)
}

/// Ends the channel for a reason retrying does not cure: the sender stops (STOPPED) rather
/// than retry.
fn refuse_stop(s: &Session, e: MqError) -> Result<(), MqError> {
    refuse_as(s, e, true)
}

fn refuse_as(s: &Session, e: MqError, stop: bool) -> Result<(), MqError> {
    send(
        s,
        &ChannelFrame::Refused {
            reason: e.reason.code(),
            message: e.message.clone(),
            stop,
        },
        0,
        true,
    );
    Err(e)
}

/// A put failure that may pass with time, so worth the message retries (MRRTY).
fn may_pass(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::Q_FULL
            | Reason::PUT_INHIBITED
            | Reason::Q_SPACE_NOT_AVAILABLE
            | Reason::STORAGE_NOT_AVAILABLE
    )
}

/// The definition of `channel` on this queue manager; refused with MQRC_STANDBY_Q_MGR when this
/// instance is an HA replica or a DR secondary, which take no channels (a sender then tries its
/// next address).
fn active_definition(
    shared: &Arc<Shared>,
    s: &Session,
    channel: &str,
) -> Result<Option<ferrymq_types::ObjectDef>, MqError> {
    if shared.is_standby() {
        refuse(
            s,
            MqError::new(
                Reason::STANDBY_Q_MGR,
                format!(
                    "this instance of queue manager {} is not the active one",
                    shared.cfg.name
                ),
            ),
        )?;
    }
    Ok(shared
        .core
        .lock()
        .engine
        .object(ObjectKind::Channel, channel)
        .cloned())
}

/// A receiving end's definition: a RCVR, or a RQSTR its server calls back.
fn receiving(def: &ferrymq_types::ObjectDef) -> bool {
    matches!(
        def.attrs.get("CHLTYPE").map(String::as_str),
        Some("RCVR" | "RQSTR")
    )
}

/// A requester asks this queue manager's SVR of the same name to start: a SVR with a CONNAME
/// starts as a sender to it (the callback), and the requester is told so; a SVR without one
/// runs as the sender over this socket.
async fn answer_request<R: AsyncRead + Unpin + Send>(
    shared: &Arc<Shared>,
    s: &Session,
    channel: &str,
    requester_qmgr: &str,
    rd: &mut R,
    dec: FrameDecoder,
    buf: BytesMut,
) -> Result<(), MqError> {
    let def = active_definition(shared, s, channel)?;
    let Some(def) = def.filter(|d| d.attrs.get("CHLTYPE").map(String::as_str) == Some("SVR"))
    else {
        return refuse(
            s,
            MqError::new(
                Reason::UNKNOWN_CHANNEL_NAME,
                format!(
                    "queue manager {} has no SVR channel named {channel}",
                    shared.cfg.name
                ),
            ),
        );
    };
    if let Err(r) = crate::security::tls::check_channel(channel, &def.attrs, s.info.tls.as_deref())
    {
        return refuse(s, MqError::new(r.reason, r.message));
    }
    if attr(&def, "CONNAME", "").trim().is_empty() {
        if attr(&def, "XMITQ", "").is_empty() {
            return refuse(
                s,
                MqError::new(
                    Reason::COMMAND_FAILED,
                    format!("SVR channel {channel} names no XMITQ"),
                ),
            );
        }
        let _ = shared
            .core
            .lock()
            .engine
            .channel_set_stopped(channel, false);
        crate::qm_log!(
            crate::errlog::ids::CHANNEL_STARTED,
            "server channel {channel} started at the request of queue manager {requester_qmgr} ({}), sending over its connection",
            s.info.conname
        );
        return super::sender::serve_requester(shared, def, rd, dec, buf, s).await;
    }
    // Already running is as good as started.
    let _ = super::start(shared, &def);
    let _ = shared
        .core
        .lock()
        .engine
        .channel_set_stopped(channel, false);
    crate::qm_log!(
        crate::errlog::ids::CHANNEL_STARTED,
        "server channel {channel} started at the request of queue manager {requester_qmgr} ({})",
        s.info.conname
    );
    send(s, &ChannelFrame::RequestOk, 0, true);
    Ok(())
}

/// PING CHANNEL from a sender: answered with its data when this queue manager could run the
/// channel (it is the active instance, has a RCVR of that name, and the socket suits its TLS
/// attributes), else refused with the reason a Hello would get.
fn answer_ping(
    shared: &Arc<Shared>,
    s: &Session,
    channel: &str,
    data: Bytes,
) -> Result<(), MqError> {
    let def = active_definition(shared, s, channel)?;
    let Some(def) = def.filter(receiving) else {
        return refuse(
            s,
            MqError::new(
                Reason::UNKNOWN_CHANNEL_NAME,
                format!(
                    "queue manager {} has no RCVR channel named {channel}",
                    shared.cfg.name
                ),
            ),
        );
    };
    if let Err(r) = crate::security::tls::check_channel(channel, &def.attrs, s.info.tls.as_deref())
    {
        return refuse(s, MqError::new(r.reason, r.message));
    }
    send(s, &ChannelFrame::PingOk { data }, 0, true);
    Ok(())
}

/// Serves a socket that opened with a channel Hello until it closes.
pub async fn run<R: AsyncRead + Unpin + Send>(
    rd: &mut R,
    mut dec: FrameDecoder,
    mut buf: BytesMut,
    hello: RawFrame,
    shared: &Arc<Shared>,
    s: &mut Session,
) -> Result<(), MqError> {
    let proto = |e: ferrymq_proto::ProtoError| MqError::new(e.reason(), e.to_string());
    let first = ChannelFrame::parse(&hello).map_err(proto)?;
    if let ChannelFrame::Ping { channel, data } = first {
        return answer_ping(shared, s, &channel, data);
    }
    if let ChannelFrame::Request {
        channel,
        requester_qmgr,
    } = first
    {
        return answer_request(shared, s, &channel, &requester_qmgr, rd, dec, buf).await;
    }
    let ChannelFrame::Hello {
        channel,
        sender_qmgr,
        batch_size,
        max_msg_len,
        fast_np,
        hb_int_s,
        ..
    } = first
    else {
        return Err(MqError::new(
            Reason::HEADER_ERROR,
            "expected a channel Hello",
        ));
    };
    let def = match active_definition(shared, s, &channel)? {
        Some(d) if receiving(&d) => d,
        _ => {
            crate::qm_log!(
                crate::errlog::ids::CHANNEL_REFUSED,
                "message channel {channel} from queue manager {sender_qmgr} at {} refused: no RCVR channel of that name is defined",
                s.info.conname
            );
            return refuse(
                s,
                MqError::new(
                    Reason::UNKNOWN_CHANNEL_NAME,
                    format!(
                        "queue manager {} has no RCVR channel named {channel}; DEFINE CHANNEL({channel}) CHLTYPE(RCVR) there",
                        shared.cfg.name
                    ),
                ),
            );
        }
    };
    // The RCVR's SSLCIPH, SSLCAUTH and SSLPEER decide on the socket, as for client channels.
    if let Err(r) = crate::security::tls::check_channel(&channel, &def.attrs, s.info.tls.as_deref())
    {
        crate::qm_log!(
            crate::errlog::ids::CHANNEL_TLS_REFUSED,
            "message channel {channel} from queue manager {sender_qmgr} at {} refused by {}: {}",
            s.info.conname,
            r.rule,
            r.message
        );
        return refuse(s, MqError::new(r.reason, r.message));
    }
    // One instance per channel: a new one ends the previous one and waits for its backout.
    let turn = shared
        .channels
        .receiver_turns
        .lock()
        .entry(channel.clone())
        .or_default()
        .clone();
    if let Some(old) = shared.channels.receivers.lock().get(&channel) {
        old.stop.send_replace(super::FORCE);
    }
    let _turn = turn.lock().await;
    let stop_tx = Arc::new(watch::Sender::new(super::RUN));
    let mut stop = stop_tx.subscribe();
    let status = Arc::new(Mutex::new(ChannelStatus::new(&s.info.conname, "")));
    status.lock().chltype = if attr(&def, "CHLTYPE", "") == "RQSTR" {
        "RQSTR"
    } else {
        "RCVR"
    };
    shared.channels.receivers.lock().insert(
        channel.clone(),
        Instance {
            status: status.clone(),
            stop: stop_tx,
            to_inactive: Default::default(),
            kick: Default::default(),
        },
    );
    // MCAUSER: the receiver's puts are checked as that user; blank: the queue manager's own.
    let mcauser = attr(&def, "MCAUSER", "");
    let who = (!mcauser.trim().is_empty()).then(|| {
        let user = mcauser.trim();
        let store_groups = shared
            .security
            .store()
            .get(user)
            .map(|u| u.groups.clone())
            .unwrap_or_default();
        shared
            .core
            .lock()
            .authz
            .resolve(&shared.cfg.admin_group, user, &store_groups)
    });
    let mut r = Receiver {
        shared,
        who,
        name: &channel,
        status: &status,
        conn: None,
        use_dlq: attr(&def, "USEDLQ", "YES") == "YES",
        mr_rty: attr_u64(&def, "MRRTY", 10).min(ferrymq_types::limits::CHANNEL_MSG_RETRIES_MAX),
        mr_tmr: Duration::from_millis(
            attr_u64(&def, "MRTMR", 1000).min(ferrymq_types::limits::CHANNEL_MSG_RETRY_WAIT_MAX_MS),
        ),
        fast_np: fast_np && attr(&def, "NPMSPEED", "FAST") == "FAST",
    };
    let res = r
        .serve(
            rd,
            &mut dec,
            &mut buf,
            s,
            &mut stop,
            &def,
            batch_size,
            max_msg_len,
            hb_int_s,
        )
        .await;
    if let Some(conn) = r.conn {
        let mut core = shared.core.lock();
        core.engine.disconnect(conn, now_ms());
        core.flush_deliveries();
    }
    {
        let mut recv = shared.channels.receivers.lock();
        if recv
            .get(&channel)
            .is_some_and(|i| Arc::ptr_eq(&i.status, &status))
        {
            recv.remove(&channel);
        }
    }
    if let Err(e) = &res {
        crate::qm_log!(
            crate::errlog::ids::CHANNEL_ENDED,
            "receiver channel {channel} from {} ended: {e}",
            s.info.conname
        );
    }
    res
}

struct Receiver<'a> {
    shared: &'a Arc<Shared>,
    /// MCAUSER's identity, whose authority each put needs (None: the queue manager's own).
    who: Option<Arc<crate::authz::Who>>,
    name: &'a str,
    status: &'a Arc<Mutex<ChannelStatus>>,
    conn: Option<ConnId>,
    use_dlq: bool,
    /// MRRTY and MRTMR: how often, and how far apart, a put that may pass is tried again.
    mr_rty: u64,
    mr_tmr: Duration,
    /// Non-persistent messages are put at once, outside the batch's unit of work.
    fast_np: bool,
}

impl Receiver<'_> {
    #[allow(clippy::too_many_arguments)]
    async fn serve<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
        dec: &mut FrameDecoder,
        buf: &mut BytesMut,
        s: &mut Session,
        stop: &mut watch::Receiver<u8>,
        def: &ferrymq_types::ObjectDef,
        their_batch: u32,
        their_max: u32,
        their_hb_s: u32,
    ) -> Result<(), MqError> {
        let proto = |e: ferrymq_proto::ProtoError| MqError::new(e.reason(), e.to_string());
        let ours_max = attr_u64(def, "MAXMSGL", 4 * 1024 * 1024) as u32;
        let max_msg_len = match (their_max, ours_max) {
            (0, m) | (m, 0) => m,
            (a, b) => a.min(b),
        };
        let batch_size = their_batch.min(attr_u64(def, "BATCHSZ", 50) as u32).max(1);
        // As MQ negotiates it: the larger of both ends' HBINT, but 0 at either end (or a
        // sender that predates heartbeats) means none.
        let our_hb_s =
            attr_u64(def, "HBINT", 300).min(ferrymq_types::limits::CHANNEL_HB_INT_MAX_S) as u32;
        let hb_int_s = negotiated_hb_int_s(their_hb_s, our_hb_s);
        // Without a frame (a message, an end of batch or a heartbeat) for twice the interval,
        // the link is taken for dead.
        let silence_max = (hb_int_s > 0).then(|| Duration::from_secs(2 * u64::from(hb_int_s)));
        let (sync, conn) = {
            let mut core = self.shared.core.lock();
            let conn = core.engine.connect("", self.name);
            (core.engine.channel_sync(self.name), conn)
        };
        self.conn = Some(conn);
        // The answer names the last committed batch, so it must not leave before that commit
        // is durable (it may be this run's, and not on disk yet).
        let wait = self
            .shared
            .channels
            .last_commit_lsn
            .lock()
            .get(self.name)
            .copied()
            .unwrap_or(0);
        send(
            s,
            &ChannelFrame::HelloOk {
                receiver_qmgr: self.shared.cfg.name.clone(),
                batch_size,
                max_msg_len,
                luwid: sync.luwid,
                seq: sync.seq,
                fast_np: self.fast_np,
                hb_int_s,
            },
            wait,
            false,
        );
        dec.set_max_frame_bytes(ferrymq_proto::frame_limit_for(max_msg_len));
        {
            let mut st = self.status.lock();
            st.state = State::Running;
            st.last_seq = sync.seq;
            st.last_luwid = sync.luwid;
            st.hb_int_s = hb_int_s;
            st.substate = "RECEIVE";
        }
        let mut ending = self.shared.immediate_end.clone();
        // Messages put in the batch's unit of work since its last end: STOP CHANNEL
        // MODE(QUIESCE) waits for the batch to end.
        let mut mid_batch = false;
        // Room reserved for the large message at the front of `buf` while it arrives (see
        // `crate::inbound`); the first frame cut off after it was reserved is that message.
        let mut arriving: Option<crate::inbound::InboundReservation> = None;
        let memory_max = self.shared.cfg.message_memory_max;
        loop {
            while let Some(f) = dec.decode(buf).map_err(proto)? {
                arriving = None;
                let bytes = f.body.len() as u64 + ferrymq_proto::HEADER_LEN as u64;
                self.status.lock().bytes_rcvd += bytes;
                match ChannelFrame::parse(&f).map_err(proto)? {
                    ChannelFrame::Msg {
                        seq,
                        md,
                        props,
                        body,
                    } => {
                        let body = ferrymq_engine::message::body_from_frame(body, f.body.len());
                        match self.put(conn, md, props, body).await {
                            Ok(in_batch) => mid_batch |= in_batch,
                            // The channel stops (it would fail the same way at every retry):
                            // the batch is backed out, and the sender told to stop.
                            Err(e) => return refuse_stop(s, e),
                        }
                        let mut st = self.status.lock();
                        st.cur_seq = seq;
                        st.msgs += 1;
                    }
                    ChannelFrame::EndBatch { luwid, seq } => {
                        let r = {
                            let mut core = self.shared.core.lock();
                            let r = core.engine.channel_commit(
                                conn,
                                SyncUpdate {
                                    channel: self.name.to_string(),
                                    seq,
                                    luwid,
                                },
                                now_ms(),
                            );
                            core.flush_deliveries();
                            r
                        };
                        let lsn = match r {
                            Ok(l) => l,
                            Err(e) => return refuse(s, e),
                        };
                        self.shared
                            .channels
                            .last_commit_lsn
                            .lock()
                            .insert(self.name.to_string(), lsn);
                        send(s, &ChannelFrame::Confirm { luwid, seq }, lsn, false);
                        mid_batch = false;
                        let mut st = self.status.lock();
                        st.batches += 1;
                        st.last_seq = seq;
                        st.last_luwid = luwid;
                        st.cur_luwid = luwid;
                    }
                    ChannelFrame::Heartbeat => {
                        send(s, &ChannelFrame::HeartbeatOk, 0, false);
                    }
                    other => {
                        return Err(MqError::new(
                            Reason::HEADER_ERROR,
                            format!("frame 0x{:02x} is not one a sender sends", other.kind()),
                        ))
                    }
                }
            }
            if memory_max > 0 && arriving.is_none() {
                if let Some(len) = crate::inbound::arriving_large(buf) {
                    let from = format!("channel {}", self.name);
                    arriving = Some(tokio::select! {
                        r = crate::inbound::room_for(len, memory_max, &from) => r?,
                        _ = stop.wait_for(|v| *v >= super::FORCE) => {
                            return Err(MqError::new(Reason::CHANNEL_NOT_AVAILABLE, format!("channel {} was stopped", self.name)));
                        }
                        _ = ending.wait_for(|v| *v) => {
                            return Err(MqError::new(Reason::Q_MGR_STOPPING, "the queue manager is ending immediately"));
                        }
                    });
                }
            }
            buf.reserve(dec.read_room(buf, 64 * 1024));
            let far = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
            let silent_at = silence_max.map(|d| tokio::time::Instant::now() + d);
            tokio::select! {
                r = rd.read_buf(buf) => match r {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(MqError::new(Reason::CONNECTION_BROKEN, format!("socket read failed: {e}"))),
                },
                _ = stop.wait_for(|v| *v >= super::FORCE || (*v > super::RUN && !mid_batch)) => {
                    return Err(MqError::new(Reason::CHANNEL_NOT_AVAILABLE, format!("channel {} was stopped", self.name)));
                }
                _ = ending.wait_for(|v| *v) => {
                    return Err(MqError::new(Reason::Q_MGR_STOPPING, "the queue manager is ending immediately"));
                }
                _ = tokio::time::sleep_until(silent_at.unwrap_or(far)), if silent_at.is_some() => {
                    return Err(MqError::new(Reason::CONNECTION_BROKEN, format!(
                        "nothing came from the sender for {} s, twice the heartbeat interval: the link is down",
                        2 * u64::from(hb_int_s)
                    )));
                }
            }
        }
    }

    /// Puts one transmission-queue message to its destination under the batch's unit of work,
    /// or to the dead-letter queue when it cannot go there.
    /// Whether the message was put in the batch's unit of work.
    async fn put(
        &mut self,
        conn: ConnId,
        xmit_md: MessageDescriptor,
        props: Properties,
        body: Bytes,
    ) -> Result<bool, MqError> {
        let Some((xqh, data)) = TransmissionHeader::parse(&body) else {
            return Err(MqError::new(
                Reason::FORMAT_ERROR,
                format!(
                    "a message on channel {} has no transmission header (format '{}')",
                    self.name, xmit_md.format
                ),
            ));
        };
        let data = body.slice_ref(data);
        let outside = self.fast_np && xqh.md.persistence != Persistence::Persistent;
        let opts = PutOptions {
            syncpoint: if outside {
                Syncpoint::No
            } else {
                Syncpoint::Yes
            },
            context: pmo::SET_ALL_CONTEXT,
            ..Default::default()
        };
        // A put that fails for a reason that may pass (queue full, puts inhibited) is tried
        // again MRRTY times, MRTMR ms apart, before the dead-letter queue.
        let mut tries = 0u64;
        let e = loop {
            {
                let mut core = self.shared.core.lock();
                if let Some(who) = &self.who {
                    let core = &mut *core;
                    if let Err(e) = core.authz.check(
                        &core.engine,
                        who,
                        &format!("put a message from channel {} (MCAUSER)", self.name),
                        "QUEUE",
                        &xqh.remote_q,
                        crate::authz::put1_needs(opts.context),
                    ) {
                        break e;
                    }
                }
                let r = core.engine.put1(
                    conn,
                    &xqh.remote_q,
                    &xqh.remote_qmgr,
                    &opts,
                    xqh.md.clone(),
                    props.clone(),
                    data.clone(),
                    now_ms(),
                );
                match r {
                    Ok(_) => {
                        if outside {
                            // Outside the batch: getters waiting on the queue have it at once.
                            core.flush_deliveries();
                        }
                        return Ok(!outside);
                    }
                    Err(e) if tries >= self.mr_rty || !may_pass(e.reason) => break e,
                    Err(_) => tries += 1,
                }
            }
            tokio::time::sleep(self.mr_tmr).await;
        };
        let mut core = self.shared.core.lock();
        let now = now_ms();
        let dlq = core.engine.attrs().dead_letter_queue.clone();
        if !self.use_dlq || dlq.is_empty() {
            return Err(MqError::new(
                e.reason,
                format!(
                    "channel {} stopped: a message for {}({}) cannot be put ({}) and {}",
                    self.name,
                    xqh.remote_q,
                    xqh.remote_qmgr,
                    e.message,
                    if self.use_dlq {
                        "the queue manager has no dead-letter queue"
                    } else {
                        "the channel has USEDLQ(NO)"
                    }
                ),
            ));
        }
        let (md, dead) = DeadLetterHeader::for_message(
            &xqh.md,
            e.reason.code() as i32,
            &xqh.remote_q,
            &xqh.remote_qmgr,
            dlh::APPL_TYPE_QMGR,
            self.name,
            now,
        )
        .wrap(&xqh.md, &data);
        core.engine
            .put1(conn, &dlq, "", &opts, md, props, dead, now)
            .map(|_| !outside)
            .map_err(|e2| {
                MqError::new(
                    e.reason,
                    format!(
                        "channel {} stopped: a message for {}({}) cannot be put ({}), nor to the dead-letter queue {dlq} ({})",
                        self.name, xqh.remote_q, xqh.remote_qmgr, e.message, e2.message
                    ),
                )
            })
    }
}

/// The heartbeat interval both ends of a message channel use, as MQ negotiates it: the larger
/// of the two ends' HBINT, but none (0) when either end asks for none.
fn negotiated_hb_int_s(theirs: u32, ours: u32) -> u32 {
    if theirs == 0 || ours == 0 {
        0
    } else {
        theirs.max(ours)
    }
}

#[cfg(test)]
mod hb_tests {
    use super::negotiated_hb_int_s;

    #[test]
    fn heartbeats_use_the_larger_interval_and_none_if_either_end_wants_none() {
        assert_eq!(negotiated_hb_int_s(300, 300), 300);
        assert_eq!(negotiated_hb_int_s(1, 300), 300);
        assert_eq!(negotiated_hb_int_s(600, 300), 600);
        assert_eq!(negotiated_hb_int_s(0, 300), 0);
        assert_eq!(negotiated_hb_int_s(300, 0), 0);
    }
}
