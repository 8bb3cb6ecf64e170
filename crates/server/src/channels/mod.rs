//! Message channels between queue managers: a task per running sender (SDR) channel
//! (`sender`), and the receiving end (RCVR) a listener socket turns into when its first frame is a
//! channel Hello (`receiver`); a SVR without CONNAME runs the sender over its requester's socket.
//! Their synchronisation state is engine state (`ferrymq_engine::channel`), so it is in the
//! recovery log; what is here is only what runs now: the tasks, their status for DISPLAY
//! CHSTATUS, and the one-instance-per-channel rule of the receiving end.

pub mod receiver;
pub mod sender;
mod status;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ahash::AHashMap;
use ferrymq_engine::Lsn;
use ferrymq_types::{MqError, ObjectDef, ObjectKind, Reason};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::qmgr::Shared;
pub use status::{ChannelStatus, State};

/// Levels of a channel's stop request: running; end after the current batch (MODE(QUIESCE));
/// end now (MODE(FORCE|TERMINATE), or the queue manager ending).
pub(crate) const RUN: u8 = 0;
pub(crate) const QUIESCE: u8 = 1;
pub(crate) const FORCE: u8 = 2;

/// A running instance of a channel: its status and the switch that stops it.
struct Instance {
    status: Arc<Mutex<ChannelStatus>>,
    /// The stop request: [`RUN`], [`QUIESCE`] or [`FORCE`].
    stop: Arc<watch::Sender<u8>>,
    /// STOP CHANNEL STATUS(INACTIVE): the sender ends and waits for its trigger instead.
    to_inactive: Arc<AtomicBool>,
    /// START CHANNEL of an inactive sender: start now.
    kick: Arc<tokio::sync::Notify>,
}

/// The channels running on this queue manager.
#[derive(Default)]
pub struct Registry {
    senders: Mutex<AHashMap<String, Instance>>,
    receivers: Mutex<AHashMap<String, Instance>>,
    /// One receiving instance per channel at a time: the next one waits for the previous one
    /// to have backed out, so it never reports a batch that is about to be committed.
    receiver_turns: Mutex<AHashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The log position of each receiving channel's last commit in this run: what the answer
    /// naming its last LUWID must wait for.
    pub(crate) last_commit_lsn: Mutex<AHashMap<String, Lsn>>,
}

impl Registry {
    /// DISPLAY CHSTATUS rows of the message channels.
    pub fn rows(&self) -> Vec<Vec<(String, String)>> {
        let mut rows: Vec<Vec<(String, String)>> = Vec::new();
        for (m, t) in [(&self.senders, "SDR"), (&self.receivers, "RCVR")] {
            for (name, i) in m.lock().iter() {
                let st = i.status.lock();
                let t = if st.chltype.is_empty() { t } else { st.chltype };
                rows.push(st.row(name, t));
            }
        }
        rows.sort();
        rows
    }

    /// The state of the sending instance of channel `name`, if one has run in this process.
    pub fn sender_state(&self, name: &str) -> Option<State> {
        self.senders.lock().get(name).map(|i| i.status.lock().state)
    }

    /// Status of every message channel instance known, for metrics.
    pub fn snapshot(&self) -> Vec<(String, &'static str, ChannelStatus)> {
        let mut out = Vec::new();
        for (m, t) in [(&self.senders, "SDR"), (&self.receivers, "RCVR")] {
            for (name, i) in m.lock().iter() {
                out.push((name.clone(), t, i.status.lock().clone()));
            }
        }
        out
    }
}

fn attr(def: &ObjectDef, key: &str, default: &str) -> String {
    def.attrs
        .get(key)
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn attr_u64(def: &ObjectDef, key: &str, default: u64) -> u64 {
    attr(def, key, "").parse().unwrap_or(default)
}

/// START CHANNEL of a sender: runs its task (again, if it stopped).
pub fn start(shared: &Arc<Shared>, def: &ObjectDef) -> Result<String, MqError> {
    let t = attr(def, "CHLTYPE", "");
    match t.as_str() {
        "SDR" => {}
        "SVR" if !attr(def, "CONNAME", "").trim().is_empty() => {}
        "SVR" => {
            return Err(MqError::new(
                Reason::MISSING_CONN_NAME,
                format!(
                    "CHANNEL({}) is a SVR without CONNAME: it can only be started by its requester (START CHANNEL of the RQSTR at the partner queue manager)",
                    def.name
                ),
            ))
        }
        "RQSTR" => {
            tokio::spawn(sender::request(shared.clone(), def.clone()));
            return Ok(format!(
                "CHANNEL({}) is asking its server to start.",
                def.name
            ));
        }
        "RCVR" => {
            return Ok(format!(
                "CHANNEL({}): a receiver channel runs when its sender connects.",
                def.name
            ))
        }
        _ => {
            return Err(MqError::new(
                Reason::COMMAND_FAILED,
                format!(
                    "CHANNEL({}) is a {t} channel; this release runs SDR and RCVR message channels",
                    def.name
                ),
            ))
        }
    }
    if attr(def, "XMITQ", "").is_empty() {
        return Err(MqError::new(
            Reason::COMMAND_FAILED,
            format!("CHANNEL({}) names no XMITQ; ALTER it first", def.name),
        ));
    }
    let mut senders = shared.channels.senders.lock();
    if let Some(i) = senders.get(&def.name) {
        let st = i.status.lock().state;
        if st == State::Inactive {
            i.kick.notify_one();
            return Ok(format!("CHANNEL({}) is starting.", def.name));
        }
        if st != State::Stopped {
            return Err(MqError::new(
                Reason::COMMAND_FAILED,
                format!("CHANNEL({}) is already {}", def.name, st.name()),
            ));
        }
    }
    let stop = Arc::new(watch::Sender::new(RUN));
    let to_inactive = Arc::new(AtomicBool::new(false));
    let status = Arc::new(Mutex::new(ChannelStatus::new(
        &attr(def, "CONNAME", ""),
        &attr(def, "XMITQ", ""),
    )));
    status.lock().chltype = if t == "SVR" { "SVR" } else { "SDR" };
    let kick = Arc::new(tokio::sync::Notify::new());
    senders.insert(
        def.name.clone(),
        Instance {
            status: status.clone(),
            stop: stop.clone(),
            to_inactive: to_inactive.clone(),
            kick: kick.clone(),
        },
    );
    drop(senders);
    tokio::spawn(sender::run(
        shared.clone(),
        def.name.clone(),
        status,
        stop,
        to_inactive,
        kick,
    ));
    Ok(format!("CHANNEL({}) is starting.", def.name))
}

/// STOP CHANNEL: the channel ends after its current batch (`force`: at once, a sender's batch in
/// doubt staying in doubt until it starts again; a receiver's batch in progress backed out) and
/// shows STOPPED, or with `inactive` INACTIVE (a sender then starts again when its
/// transmission queue gets a message).
pub fn stop(
    shared: &Arc<Shared>,
    name: &str,
    force: bool,
    inactive: bool,
) -> Result<String, MqError> {
    let level = if force { FORCE } else { QUIESCE };
    let mut stopped = false;
    if let Some(i) = shared.channels.senders.lock().get(name) {
        let state = i.status.lock().state;
        if state != State::Stopped && !(inactive && state == State::Inactive) {
            i.to_inactive.store(inactive, Ordering::SeqCst);
            i.stop.send_if_modified(|v| {
                let raise = *v < level;
                *v = (*v).max(level);
                raise
            });
            i.status.lock().stop_requested = true;
            stopped = true;
        }
    }
    if let Some(i) = shared.channels.receivers.lock().get(name) {
        i.stop.send_if_modified(|v| {
            let raise = *v < level;
            *v = (*v).max(level);
            raise
        });
        stopped = true;
    }
    if stopped {
        Ok(format!("CHANNEL({name}) is stopping."))
    } else {
        Err(MqError::new(
            Reason::CHANNEL_NOT_ACTIVE,
            format!("channel {name} is not active"),
        ))
    }
}

/// Stops every channel (the queue manager is ending).
pub fn stop_all(shared: &Arc<Shared>) {
    for i in shared.channels.senders.lock().values() {
        i.stop.send_replace(FORCE);
    }
    for i in shared.channels.receivers.lock().values() {
        i.stop.send_replace(FORCE);
    }
}

/// At start: runs every sender channel that has run before (it has a synchronisation state)
/// and was not stopped by STOP CHANNEL, as MQ restarts the channels that were running; a batch
/// it left in doubt is resolved first.
/// One stopped by STOP CHANNEL shows STATUS(STOPPED) in DISPLAY CHSTATUS until it is started.
pub fn start_at_strmqm(shared: &Arc<Shared>) {
    let (defs, stopped): (Vec<ObjectDef>, Vec<ObjectDef>) = {
        let core = shared.core.lock();
        core.engine
            .objects()
            .filter(|o| o.kind == ObjectKind::Channel)
            .filter(|o| match o.attrs.get("CHLTYPE").map(String::as_str) {
                Some("SDR") => true,
                // Without CONNAME, a server waits for its requester.
                Some("SVR") => !attr(o, "CONNAME", "").trim().is_empty(),
                _ => false,
            })
            .filter(|o| core.engine.channel_syncs().contains_key(&o.name))
            .cloned()
            .partition(|o| {
                core.engine
                    .channel_syncs()
                    .get(&o.name)
                    .is_some_and(|s| !s.stopped)
            })
    };
    let mut senders = shared.channels.senders.lock();
    for d in stopped {
        let mut st = ChannelStatus::new(&attr(&d, "CONNAME", ""), &attr(&d, "XMITQ", ""));
        st.state = State::Stopped;
        st.chltype = if attr(&d, "CHLTYPE", "") == "SVR" {
            "SVR"
        } else {
            "SDR"
        };
        senders.insert(
            d.name.clone(),
            Instance {
                status: Arc::new(Mutex::new(st)),
                stop: Arc::new(watch::Sender::new(FORCE)),
                to_inactive: Arc::new(AtomicBool::new(false)),
                kick: Arc::new(tokio::sync::Notify::new()),
            },
        );
    }
    drop(senders);
    for d in defs {
        if let Err(e) = start(shared, &d) {
            crate::qm_log!(
                crate::errlog::ids::CHANNEL_ENDED,
                "channel {} did not start: {e}",
                d.name
            );
        }
    }
}
