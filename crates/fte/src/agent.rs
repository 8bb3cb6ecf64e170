//! The agent process (`ferrymq fte agent NAME`): connects to its queue manager, resumes the
//! transfers its state queue records, announces that it is ready with its pid file, then serves
//! its command queue (transfer requests, each recorded on the state queue and sent by a thread of
//! its own, at most maxSourceTransfers at once, the others waiting their turn on the command
//! queue, which only a cancel or stop request passes; cancel and stop requests), its data queue (the transfers it receives) and its resource monitors. When it loses
//! its queue manager it waits for it and replaces itself.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::limits::{FTE_RECONNECT_WAIT_MS, FTE_REQUEST_LEN_MAX_BYTES};
use ferrymq_types::options::{open, Browse, GetOptions, Syncpoint, Wait};
use ferrymq_types::{PropertyValue, Reason};

use crate::props::{self, AgentProps};
use crate::request::TransferRequest;
use crate::state::Outbound;
use crate::{err, prop, queues, Result};

/// How long one get of the agent's loops waits before it looks again (it ends no sooner).
const POLL_MS: u64 = 500;

/// Connects to the agent's queue manager as its properties say: in bindings mode, or in client
/// mode through agentQMgrHost and then each agentQMgrStandby instance, with the user id and
/// password of the credentials file's entry for the queue manager, if there is one.
pub fn connect(p: &AgentProps) -> Result<Connection> {
    let mut opts = match &p.agent_qmgr_host {
        Some(h) => {
            let mut list = format!("{h}({})", p.agent_qmgr_port);
            if !p.agent_qmgr_standby.is_empty() {
                list.push(',');
                list.push_str(&p.agent_qmgr_standby);
            }
            let mut o = ConnectOptions::client(&p.agent_qmgr, &list)?;
            o.channel = p.agent_qmgr_channel.clone();
            if !p.ssl_cipher_spec.is_empty() {
                let key = (!p.ssl_key_store.is_empty()).then(|| PathBuf::from(&p.ssl_key_store));
                o.tls = Some(ferrymq_client::TlsOptions {
                    ca_file: PathBuf::from(&p.ssl_trust_store),
                    cert_file: key.clone(),
                    key_file: key,
                    cipher: Some(p.ssl_cipher_spec.clone()),
                    server_name: None,
                });
            }
            o
        }
        None => ConnectOptions::bindings(&p.agent_qmgr),
    };
    if !p.credentials_file.is_empty() {
        let path = Path::new(&p.credentials_file);
        if let Some(c) = crate::credentials::load(
            path,
            &p.agent_qmgr,
            &ferrymq_security::users::os::current_user(),
        )? {
            opts.user = c.user;
            opts.password = c.password;
        }
    }
    opts.app_name = format!("fteAgent {}", p.agent_name);
    Connection::connect(opts).map_err(|e| {
        if e.reason == Reason::NOT_AUTHORIZED {
            crate::FteError(format!(
                "{e} (agent {}: the user id and password come from \
                 agentQMgrAuthenticationCredentialsFile{})",
                p.agent_name,
                if p.credentials_file.is_empty() {
                    ", which is not set".to_string()
                } else {
                    format!(" = {}", p.credentials_file)
                }
            ))
        } else if e.reason == Reason::SSL_INITIALIZATION_ERROR {
            crate::FteError(format!(
                "{e} (agent {}: TLS comes from agentSslCipherSpec, agentSslTrustStore and \
                 agentSslKeyStore in its agent.properties)",
                p.agent_name
            ))
        } else {
            e.into()
        }
    })
}

pub fn pid_file(home: &Path, agent: &str) -> PathBuf {
    props::agent_dir(home, agent).join("agent.pid")
}

/// Admission of sending transfers: a counting semaphore of maxSourceTransfers places.
struct Slots {
    used: Mutex<usize>,
    freed: Condvar,
    max: usize,
}

impl Slots {
    fn take(&self) {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *u >= self.max {
            u = self.freed.wait(u).unwrap_or_else(|e| e.into_inner());
        }
        *u += 1;
    }
    /// Waits up to `ms` for a free place; whether there is one.
    fn wait_room(&self, ms: u64) -> bool {
        let u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let (u, _) = self
            .freed
            .wait_timeout_while(u, Duration::from_millis(ms), |u| *u >= self.max)
            .unwrap_or_else(|e| e.into_inner());
        *u < self.max
    }
    fn give(&self) {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *u = u.saturating_sub(1);
        self.freed.notify_one();
    }
}

/// The agent's properties, for a reconnect from any thread.
static PROPS: OnceLock<AgentProps> = OnceLock::new();
static RECONNECTING: AtomicBool = AtomicBool::new(false);
/// Set in the environment of an agent that replaced itself after losing its queue manager: it
/// waits for the queue manager at start instead of ending.
const RECONNECT_ENV: &str = "FERRYMQ_FTE_RECONNECT";

fn connect_waiting(p: &AgentProps, wait_ms: u64) -> Result<Connection> {
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    loop {
        match connect(p) {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// The agent lost its queue manager: waits until it is back, then replaces the process with a
/// fresh agent (same pid), which resumes the transfers recorded on its state queue. Never
/// returns; other threads that get here wait for the replacement.
pub fn reconnect() -> ! {
    if RECONNECTING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let Some(p) = PROPS.get() else {
        std::process::exit(1)
    };
    eprintln!(
        "fte agent {}: lost queue manager {}: reconnecting",
        p.agent_name, p.agent_qmgr
    );
    std::thread::sleep(Duration::from_millis(250));
    if let Err(e) = connect_waiting(p, FTE_RECONNECT_WAIT_MS) {
        eprintln!("fte agent {}: no queue manager: {e}", p.agent_name);
        std::process::exit(1);
    }
    use std::os::unix::process::CommandExt;
    let e = match std::env::current_exe() {
        Ok(exe) => std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(RECONNECT_ENV, "1")
            .exec(),
        Err(e) => e,
    };
    eprintln!("fte agent {}: could not restart: {e}", p.agent_name);
    std::process::exit(1)
}

/// Opens one of the agent's own queues for exclusive input (with `more` options). An agent
/// started again right after it was killed may find its predecessor's connection still holding
/// the queue, until its queue manager has noticed the connection's end: it waits for that
/// (`FTE_EXCLUSIVE_OPEN_WAIT_MS`), rather than failing at start.
pub(crate) fn open_exclusive(
    c: &Connection,
    q: &str,
    more: u32,
) -> std::result::Result<ferrymq_client::ObjectHandle, ferrymq_types::MqError> {
    let deadline =
        Instant::now() + Duration::from_millis(ferrymq_types::limits::FTE_EXCLUSIVE_OPEN_WAIT_MS);
    loop {
        match c.open(q, open::INPUT_EXCLUSIVE | more) {
            Err(e) if e.reason == Reason::OBJECT_IN_USE && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// Runs the agent until a stop request arrives (or its queue manager goes away for good).
pub fn run(home: &Path, agent: &str) -> Result<()> {
    let p = props::load(home, agent)?;
    let _ = PROPS.set(p.clone());
    let c = if std::env::var_os(RECONNECT_ENV).is_some() {
        connect_waiting(&p, FTE_RECONNECT_WAIT_MS)?
    } else {
        connect(&p)?
    };
    let cmd_q = open_exclusive(&c, &queues::command(agent), open::BROWSE)?;
    let state_q = c.open(
        &queues::state(agent),
        open::INPUT_SHARED | open::OUTPUT | open::BROWSE,
    )?;
    let recv_conn = c.share()?;
    let recv_props = p.clone();
    std::thread::Builder::new()
        .name("fte-receiver".into())
        .spawn(move || {
            if let Err(e) = crate::receiver::run(recv_conn, &recv_props) {
                eprintln!(
                    "fte agent {}: receiving stopped: {e}",
                    recv_props.agent_name
                );
                std::process::exit(1);
            }
        })
        .map_err(|e| crate::FteError(format!("thread: {e}")))?;
    let mon_conn = c.share()?;
    let (mon_home, mon_props) = (home.to_path_buf(), p.clone());
    std::thread::Builder::new()
        .name("fte-monitors".into())
        .spawn(move || crate::monitor::run(&mon_home, mon_conn, &mon_props))
        .map_err(|e| crate::FteError(format!("thread: {e}")))?;
    let slots = Arc::new(Slots {
        used: Mutex::new(0),
        freed: Condvar::new(),
        max: p.max_source_transfers,
    });
    // Transfers under way when the agent ended (killed, or its queue manager lost) resume.
    let pending = Outbound::list(&c, &state_q)?;
    let pid = pid_file(home, agent);
    std::fs::write(&pid, format!("{}\n", std::process::id()))
        .map_err(|e| crate::FteError(format!("{}: {e}", pid.display())))?;
    eprintln!("fte agent {agent}: ready on {}", p.agent_qmgr);
    for rec in pending {
        eprintln!(
            "fte agent {agent}: resuming a transfer ({} files finished)",
            rec.done
        );
        spawn_sender(&c, &p, &slots, rec, true)?;
    }
    let gopts = GetOptions {
        wait: Wait::Ms(POLL_MS),
        syncpoint: Syncpoint::Yes,
        max_len: FTE_REQUEST_LEN_MAX_BYTES as u32,
        ..Default::default()
    };
    let control = GetOptions {
        browse: Browse::First,
        wait: Wait::NoWait,
        max_len: FTE_REQUEST_LEN_MAX_BYTES as u32,
        accept_truncated: true,
        ..Default::default()
    };
    loop {
        // While every place is taken, requests wait on the command queue; a cancel or a stop
        // (put at priority 9, so delivered first) is still served.
        let mut opts = gopts.clone();
        if !slots.wait_room(0) {
            match c.get(&cmd_q, &control) {
                Ok(m) if matches!(m.props.get(prop::KIND), Some(PropertyValue::String(_))) => {
                    opts.match_msg_id = Some(m.md.msg_id);
                }
                Ok(_) => {
                    slots.wait_room(POLL_MS);
                    continue;
                }
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                    slots.wait_room(POLL_MS);
                    continue;
                }
                Err(e) if crate::sender::lost(&e) => reconnect(),
                Err(e) => {
                    let _ = std::fs::remove_file(&pid);
                    return Err(e.into());
                }
            }
        }
        let m = match c.get(&cmd_q, &opts) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
            Err(e) if crate::sender::lost(&e) => reconnect(),
            Err(e) => {
                let _ = std::fs::remove_file(&pid);
                return Err(e.into());
            }
        };
        if let Some(PropertyValue::String(k)) = m.props.get(prop::KIND) {
            if k == "cancel" {
                let id = match m.props.get(prop::TID) {
                    Some(PropertyValue::String(t)) => t.clone(),
                    _ => String::new(),
                };
                let tid = crate::state::unhex(&id);
                let known = crate::sender::request_cancel(tid);
                // A request still waiting for a place leaves the command queue, answered.
                let queued = !known && cancel_queued(&c, &cmd_q, tid);
                let text = if known {
                    format!("transfer {id} is being cancelled")
                } else if queued {
                    format!("transfer {id} cancelled before it started")
                } else {
                    format!("no transfer {id} in progress at agent {agent}")
                };
                let known = known || queued;
                eprintln!("fte agent {agent}: {text}");
                crate::sender::reply(&c, &m.md, known, &text);
                let _ = c.commit();
                continue;
            }
            if k == "stop" {
                let _ = c.commit();
                let _ = std::fs::remove_file(&pid);
                eprintln!("fte agent {agent}: stopped");
                return Ok(());
            }
        }
        let text = String::from_utf8_lossy(&m.body).into_owned();
        let refuse = |why: &str| {
            crate::sender::reply(&c, &m.md, false, why);
            let _ = c.commit();
        };
        let req = match TransferRequest::from_xml(&text) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("fte agent {agent}: request refused: {e}");
                refuse(&e.0);
                continue;
            }
        };
        if req.source_agent != agent {
            refuse(&format!(
                "the request's source agent is '{}', this agent is '{agent}'",
                req.source_agent
            ));
            continue;
        }
        // The transfer's id is its request's MsgId, which fteCreateTransfer prints.
        let rec = Outbound {
            tid: m.md.msg_id,
            request_xml: text,
            reply_q: m.md.reply_to_q.clone(),
            reply_qm: m.md.reply_to_qmgr.clone(),
            request_msg_id: m.md.msg_id,
            ..Default::default()
        };
        // The request leaves the command queue in the unit of work that records it.
        if let Err(e) = rec.write(&c, &state_q, true).and_then(|_| c.commit()) {
            let _ = c.backout();
            if crate::sender::lost(&e) {
                reconnect();
            }
            return Err(e.into());
        }
        spawn_sender(&c, &p, &slots, rec, false)?;
    }
}

/// Takes the request `tid` off the command queue if it is still there (in the caller's unit of
/// work) and answers its requester; whether it was there.
fn cancel_queued(
    c: &Connection,
    cmd_q: &ferrymq_client::ObjectHandle,
    tid: ferrymq_types::MsgId,
) -> bool {
    let g = GetOptions {
        wait: Wait::NoWait,
        syncpoint: Syncpoint::Yes,
        match_msg_id: Some(tid),
        max_len: FTE_REQUEST_LEN_MAX_BYTES as u32,
        accept_truncated: true,
        ..Default::default()
    };
    match c.get(cmd_q, &g) {
        Ok(m) => {
            crate::sender::reply(c, &m.md, false, "transfer cancelled before it started");
            true
        }
        Err(e) if crate::sender::lost(&e) => reconnect(),
        Err(_) => false,
    }
}

/// Runs one transfer on a thread of its own once one of the maxSourceTransfers places is free.
fn spawn_sender(
    c: &Connection,
    p: &AgentProps,
    slots: &Arc<Slots>,
    rec: Outbound,
    restarted: bool,
) -> Result<()> {
    slots.take();
    let sc = match c.share() {
        Ok(sc) => sc,
        Err(e) if crate::sender::lost(&e) => reconnect(),
        Err(e) => {
            slots.give();
            return Err(e.into());
        }
    };
    let sp = p.clone();
    let sl = slots.clone();
    let spawned = std::thread::Builder::new()
        .name("fte-sender".into())
        .spawn(move || {
            crate::sender::run(&sc, &sp, rec, restarted);
            sl.give();
        });
    if spawned.is_err() {
        slots.give();
        return err("no thread for a transfer");
    }
    Ok(())
}
