//! The agent process (`ferrymq fte agent NAME`): connects to its queue manager, announces that it
//! is ready with its pid file, then serves its command queue (transfer requests, each sent by a
//! thread of its own, at most maxSourceTransfers at once; the others wait their turn) and its
//! data queue (the transfers it receives).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::limits::FTE_REQUEST_LEN_MAX_BYTES;
use ferrymq_types::options::{open, GetOptions, Wait};
use ferrymq_types::{PropertyValue, Reason};

use crate::props::{self, AgentProps};
use crate::request::TransferRequest;
use crate::{err, prop, queues, Result};

/// How long one get of the agent's loops waits before it looks again (it ends no sooner).
const POLL_MS: u64 = 500;

pub fn connect(p: &AgentProps) -> Result<Connection> {
    let mut opts = match &p.agent_qmgr_host {
        Some(h) => ConnectOptions::client(&p.agent_qmgr, &format!("{h}({})", p.agent_qmgr_port))?,
        None => ConnectOptions::bindings(&p.agent_qmgr),
    };
    if p.agent_qmgr_host.is_some() {
        opts.channel = p.agent_qmgr_channel.clone();
    }
    opts.app_name = format!("fteAgent {}", p.agent_name);
    Ok(Connection::connect(opts)?)
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
    fn give(&self) {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *u = u.saturating_sub(1);
        self.freed.notify_one();
    }
}

/// Runs the agent until a stop request arrives (or its queue manager goes away for good).
pub fn run(home: &Path, agent: &str) -> Result<()> {
    let p = props::load(home, agent)?;
    let c = connect(&p)?;
    let cmd_q = c.open(&queues::command(agent), open::INPUT_EXCLUSIVE)?;
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
    let pid = pid_file(home, agent);
    std::fs::write(&pid, format!("{}\n", std::process::id()))
        .map_err(|e| crate::FteError(format!("{}: {e}", pid.display())))?;
    eprintln!("fte agent {agent}: ready on {}", p.agent_qmgr);
    let slots = Arc::new(Slots {
        used: Mutex::new(0),
        freed: Condvar::new(),
        max: p.max_source_transfers,
    });
    let gopts = GetOptions {
        wait: Wait::Ms(POLL_MS),
        max_len: FTE_REQUEST_LEN_MAX_BYTES as u32,
        ..Default::default()
    };
    loop {
        let m = match c.get(&cmd_q, &gopts) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
            Err(e) => {
                let _ = std::fs::remove_file(&pid);
                return Err(e.into());
            }
        };
        if let Some(PropertyValue::String(k)) = m.props.get(prop::KIND) {
            if k == "stop" {
                let _ = std::fs::remove_file(&pid);
                eprintln!("fte agent {agent}: stopped");
                return Ok(());
            }
        }
        let text = String::from_utf8_lossy(&m.body).into_owned();
        let req = match TransferRequest::from_xml(&text) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("fte agent {agent}: request refused: {e}");
                crate::sender::reply(&c, &m.md, false, &e.0);
                continue;
            }
        };
        if req.source_agent != agent {
            let why = format!(
                "the request's source agent is '{}', this agent is '{agent}'",
                req.source_agent
            );
            crate::sender::reply(&c, &m.md, false, &why);
            continue;
        }
        slots.take();
        let sc = c.share()?;
        let sp = p.clone();
        let sl = slots.clone();
        let md = m.md.clone();
        let spawned = std::thread::Builder::new()
            .name("fte-sender".into())
            .spawn(move || {
                crate::sender::run(&sc, &sp, &req, &md);
                sl.give();
            });
        if spawned.is_err() {
            slots.give();
            return err("no thread for a transfer");
        }
    }
}
