//! The queued publish interface: a message put on a stream queue (`SYSTEM.BROKER.DEFAULT.STREAM`,
//! or `SYSTEM.FTE`, the stream the file-transfer coordination queue manager defines) is published
//! by this queue manager, so that an application on another queue manager, which can only put to
//! this one's queues over a channel, can publish here. The topic string is the stream's topic
//! object's TOPICSTR (a topic object named like the stream queue; the root for the default
//! stream), then `/`, then the message's `MQTopicString` property (none: the stream's topic
//! itself). The message keeps its descriptor, context and properties.
//!
//! Each message is got under syncpoint and published in the same unit of work, committed in
//! batches: a publication and the removal of its message are one logged unit, so a kill at any
//! moment neither loses nor repeats one. A message that cannot be published (publication
//! inhibited, a subscriber's queue full with PMSGDLV(ALL)) goes to the dead-letter queue behind a
//! dead-letter header with the reason, in the same unit of work; without a dead-letter queue the
//! batch backs out, the error log says why (once, until the stream works again), and the stream
//! is tried again every few seconds. Only the active
//! instance publishes (not an HA replica or a DR secondary): the others follow its log.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::pubsub::TOPIC_PROPERTY;
use ferrymq_engine::{ConnId, Engine, GetOutcome, Got};
use ferrymq_types::objects::ObjectKind;
use ferrymq_types::options::{open, pmo, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MqError, PropertyValue, Reason};
use tokio::sync::Notify;

use crate::qmgr::Shared;
use crate::storage::now_ms;

/// The stream queues served, when defined.
pub const STREAMS: &[&str] = &["SYSTEM.BROKER.DEFAULT.STREAM", "SYSTEM.FTE"];
/// Messages published per unit of work (and per hold of the core lock).
const BATCH: usize = 100;
/// How often streams that are not open (not defined yet, or backed out) are looked at again.
const RESCAN: Duration = Duration::from_secs(5);

/// A stream queue held open by its own engine connection.
struct Stream {
    name: &'static str,
    conn: ConnId,
    hobj: u32,
    /// The browse wait that signals an arrival, while the stream is empty.
    waiter: Option<u64>,
}

/// Runs until `stop` is notified (the queue manager ends): then closes its streams, so that a
/// controlled end, which waits for every connection to go, does not wait for these.
pub async fn run(shared: Arc<Shared>, stop: Arc<Notify>) {
    let woken = Arc::new(Notify::new());
    let mut open: Vec<Stream> = Vec::new();
    // Streams whose last attempt failed: the error log says so once, not at every retry.
    let mut failing: HashSet<&'static str> = HashSet::new();
    let mut rescan = tokio::time::interval(RESCAN);
    rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let active = shared.ha.as_ref().is_none_or(|h| h.is_active()) && !shared.is_dr_secondary();
        {
            let mut core = shared.core.lock();
            if active {
                for name in STREAMS {
                    if open.iter().all(|s| s.name != *name) {
                        if let Some(s) = open_stream(&mut core.engine, name, &mut failing) {
                            core.add_waker(s.conn, woken.clone());
                            open.push(s);
                        }
                    }
                }
            }
            let mut i = 0;
            while i < open.len() {
                let keep = active && drain(&mut core.engine, &mut open[i], &mut failing);
                if keep {
                    i += 1;
                } else {
                    let s = open.swap_remove(i);
                    if let Some(w) = s.waiter {
                        core.engine.cancel_wait(w);
                    }
                    core.remove_waker(s.conn);
                    core.engine.disconnect(s.conn, now_ms());
                }
            }
            core.flush_deliveries();
        }
        tokio::select! {
            _ = woken.notified() => {}
            _ = rescan.tick() => {}
            _ = stop.notified() => break,
        }
    }
    let mut core = shared.core.lock();
    for s in open {
        if let Some(w) = s.waiter {
            core.engine.cancel_wait(w);
        }
        core.remove_waker(s.conn);
        core.engine.disconnect(s.conn, now_ms());
    }
    core.flush_deliveries();
}

fn open_stream(
    engine: &mut Engine,
    name: &'static str,
    failing: &mut HashSet<&'static str>,
) -> Option<Stream> {
    if !engine.local_queues().any(|q| q.def.name == name) {
        return None;
    }
    let conn = engine.connect("", "SYSTEM.QPUBSUB");
    match engine.open(conn, name, "", open::INPUT_EXCLUSIVE | open::BROWSE, "") {
        Ok((hobj, _, _)) => Some(Stream {
            name,
            conn,
            hobj,
            waiter: None,
        }),
        Err(e) => {
            engine.disconnect(conn, now_ms());
            if !failing.insert(name) {
                return None;
            }
            crate::qm_log!(
                crate::errlog::ids::QPUBSUB_FAILED,
                "queued publish: stream queue {name} cannot be opened ({e}); trying again in {} s",
                RESCAN.as_secs()
            );
            None
        }
    }
}

/// Publishes what `s` holds, a batch per unit of work, until it is empty, and leaves a browse
/// wait that signals the next arrival. False: close the stream (deleted, or a batch that backed
/// out), to be opened again at the next rescan.
fn drain(engine: &mut Engine, s: &mut Stream, failing: &mut HashSet<&'static str>) -> bool {
    if let Some(w) = s.waiter.take() {
        engine.cancel_wait(w);
    }
    let take = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    loop {
        let now = now_ms();
        let mut n = 0;
        let mut empty = false;
        while n < BATCH {
            match engine.get(s.conn, s.hobj, &take, 0, now) {
                Ok(GetOutcome::Got(got, _)) => {
                    n += 1;
                    if let Err(e) = publish(engine, s, got, now) {
                        let _ = engine.backout(s.conn, now);
                        if !failing.insert(s.name) {
                            return false;
                        }
                        crate::qm_log!(
                            crate::errlog::ids::QPUBSUB_FAILED,
                            "queued publish: a message on {} could not be published or dead-lettered ({e}); the batch is backed out and tried again in {} s",
                            s.name,
                            RESCAN.as_secs()
                        );
                        return false;
                    }
                }
                Ok(GetOutcome::Waiting(w)) => {
                    engine.cancel_wait(w);
                    empty = true;
                    break;
                }
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                    empty = true;
                    break;
                }
                Err(e) => {
                    let _ = engine.backout(s.conn, now);
                    if !failing.insert(s.name) {
                        return false;
                    }
                    crate::qm_log!(
                        crate::errlog::ids::QPUBSUB_FAILED,
                        "queued publish: stream queue {} cannot be read ({e})",
                        s.name
                    );
                    return false;
                }
            }
        }
        if n > 0 {
            if let Err(e) = engine.commit(s.conn, now) {
                if !failing.insert(s.name) {
                    return false;
                }
                crate::qm_log!(
                    crate::errlog::ids::QPUBSUB_FAILED,
                    "queued publish: committing publications from {} failed ({e})",
                    s.name
                );
                return false;
            }
            failing.remove(s.name);
        }
        if empty {
            break;
        }
    }
    let arrival = GetOptions {
        browse: Browse::First,
        wait: Wait::Unlimited,
        ..GetOptions::any()
    };
    match engine.get(s.conn, s.hobj, &arrival, 0, now_ms()) {
        Ok(GetOutcome::Waiting(w)) => {
            s.waiter = Some(w);
            true
        }
        // The core lock was held since the stream was found empty, so nothing arrived in
        // between; a message the browse sees but the get did not take waits for the rescan.
        Ok(GetOutcome::Got(..)) => true,
        Err(_) => false,
    }
}

/// The topic a stream's message is published on: the stream's topic object's and the message's.
fn topic_of(engine: &Engine, stream: &str, got: &Got) -> (String, String) {
    let object = if engine
        .objects()
        .any(|o| o.kind == ObjectKind::Topic && o.name == stream)
    {
        stream.to_string()
    } else {
        String::new()
    };
    let topic = match got.props.get(TOPIC_PROPERTY) {
        Some(PropertyValue::String(t)) => t.clone(),
        _ => String::new(),
    };
    (object, topic)
}

/// Publishes `got` in the stream connection's unit of work, or dead-letters it there.
fn publish(engine: &mut Engine, s: &Stream, got: Got, now: u64) -> Result<(), MqError> {
    let (object, topic) = topic_of(engine, s.name, &got);
    let opts = PutOptions {
        syncpoint: Syncpoint::Yes,
        context: pmo::SET_ALL_CONTEXT,
        ..PutOptions::default()
    };
    let mut props = got.props.clone();
    props.0.retain(|(n, _)| n != TOPIC_PROPERTY);
    match engine.put1_topic(
        s.conn,
        &object,
        &topic,
        &opts,
        got.md.clone(),
        props,
        got.body.clone(),
        now,
    ) {
        Ok(_) => Ok(()),
        Err(e) => dead_letter(engine, s, got, &topic, e.reason, now),
    }
}

/// Puts a message that could not be published on the dead-letter queue, behind a dead-letter
/// header naming the stream and the reason, in the stream connection's unit of work.
fn dead_letter(
    engine: &mut Engine,
    s: &Stream,
    got: Got,
    topic: &str,
    reason: Reason,
    now: u64,
) -> Result<(), MqError> {
    use ferrymq_types::dlh::{self, DeadLetterHeader};
    let dlq = engine.attrs().dead_letter_queue.clone();
    if dlq.is_empty() {
        return Err(MqError::new(
            reason,
            format!(
                "publishing on '{topic}' failed with {reason} and the queue manager has no dead-letter queue (DEADQ)"
            ),
        ));
    }
    let qmgr = engine.qmgr_name().to_string();
    let (md, body) = DeadLetterHeader::for_message(
        &got.md,
        reason.code() as i32,
        s.name,
        &qmgr,
        dlh::APPL_TYPE_QMGR,
        "SYSTEM.QPUBSUB",
        now,
    )
    .wrap(&got.md, &got.body);
    let opts = PutOptions {
        syncpoint: Syncpoint::Yes,
        context: pmo::SET_ALL_CONTEXT,
        ..PutOptions::default()
    };
    engine
        .put1(s.conn, &dlq, "", &opts, md, got.props, body, now)
        .map(|_| ())
}
