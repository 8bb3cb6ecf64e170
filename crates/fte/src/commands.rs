//! The logic of the fte* commands: coordination setup, agent creation (its queues and
//! properties), start (spawning the agent process and waiting until it is ready), stop, list,
//! details, and transfer requests (optionally waiting for the outcome).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::limits::{FTE_AGENT_START_WAIT_MS, FTE_QUEUED_REQUESTS_MAX};
use ferrymq_types::options::{open, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue, Reason};

use crate::agent;
use crate::props::{self, AgentProps};
use crate::request::TransferRequest;
use crate::{err, prop, queues, FteError, Result};

fn io(path: &Path) -> impl Fn(std::io::Error) -> FteError + '_ {
    move |e| FteError(format!("{}: {e}", path.display()))
}

/// The MQSC fteSetupCoordination runs on the coordination queue manager: the transfer log's
/// topic, the stream queue agents on other queue managers publish through (the queue manager's
/// queued publish interface publishes what is put there, under SYSTEM.FTE), and the queue its
/// durable subscription keeps the log on.
pub fn coordination_mqsc() -> String {
    "DEFINE TOPIC(SYSTEM.FTE) TOPICSTR('SYSTEM.FTE') REPLACE\n\
     DEFINE QLOCAL(SYSTEM.FTE) MAXDEPTH(999999999) DEFPSIST(YES) REPLACE\n\
     DEFINE QLOCAL(SYSTEM.FTE.LOG) MAXDEPTH(999999999) REPLACE\n\
     DEFINE SUB(SYSTEM.FTE.AUTO.SUB) TOPICOBJ(SYSTEM.FTE) TOPICSTR('Log/#') DEST(SYSTEM.FTE.LOG) REPLACE\n"
        .to_string()
}

/// The MQSC fteCreateAgent runs on the agent's queue manager. The command queue holds the
/// requests that wait for one of the maxSourceTransfers places, so it is deep.
pub fn agent_mqsc(agent: &str) -> String {
    queues::all(agent)
        .iter()
        .map(|q| {
            if *q == queues::command(agent) {
                format!("DEFINE QLOCAL({q}) MAXDEPTH({FTE_QUEUED_REQUESTS_MAX}) REPLACE\n")
            } else {
                format!("DEFINE QLOCAL({q}) REPLACE\n")
            }
        })
        .collect()
}

fn run_mqsc(c: &Connection, mqsc: &str) -> Result<()> {
    for line in mqsc.lines().filter(|l| !l.trim().is_empty()) {
        c.admin(&format!("MQSC {line}"))
            .map_err(|e| FteError(format!("{line}: {e}")))?;
    }
    Ok(())
}

/// `fteSetupCoordination -coordinationQMgr QM`: records the coordination queue manager and
/// defines its log topic, queue and subscription (print only with `print`).
pub fn setup_coordination(home: &Path, qmgr: &str, print: bool) -> Result<String> {
    let mqsc = coordination_mqsc();
    if print {
        return Ok(mqsc);
    }
    let c = Connection::connect(ferrymq_client::ConnectOptions::bindings(qmgr))?;
    run_mqsc(&c, &mqsc)?;
    let dir = props::mqft_dir(home);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let f = dir.join("coordination.properties");
    std::fs::write(&f, format!("coordinationQMgr={qmgr}\n")).map_err(io(&f))?;
    Ok(format!(
        "coordination queue manager {qmgr} set up (transfer log on SYSTEM.FTE.LOG)\n"
    ))
}

/// The transfer log kept on the coordination queue manager (fteSetupCoordination), oldest first:
/// each event as JSON and as XML.
pub fn transfer_log(home: &Path) -> Result<Vec<(serde_json::Value, String)>> {
    let Some(qm) = coordination_qmgr(home) else {
        return err("no coordination queue manager: run fteSetupCoordination first");
    };
    let c = Connection::connect(ferrymq_client::ConnectOptions::bindings(&qm))?;
    crate::translog::read(&c)
}

fn coordination_qmgr(home: &Path) -> Option<String> {
    let text =
        std::fs::read_to_string(props::mqft_dir(home).join("coordination.properties")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("coordinationQMgr="))
        .map(|s| s.trim().to_string())
}

/// `fteCreateAgent`: writes agent.properties and defines the agent's queues (print the MQSC
/// instead with `print`).
pub fn create_agent(home: &Path, mut p: AgentProps, print: bool) -> Result<String> {
    check_name(&p.agent_name)?;
    let mqsc = agent_mqsc(&p.agent_name);
    if print {
        return Ok(mqsc);
    }
    if let Some(cq) = coordination_qmgr(home) {
        p.coordination_qmgr = cq;
    }
    let c = agent::connect(&p)?;
    run_mqsc(&c, &mqsc)?;
    let dir = props::agent_dir(home, &p.agent_name);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let f = dir.join("agent.properties");
    std::fs::write(&f, p.to_text()).map_err(io(&f))?;
    Ok(format!(
        "agent {} created on {} ({})\n",
        p.agent_name,
        p.agent_qmgr,
        f.display()
    ))
}

/// MQ's agent names: up to 28 characters, letters, digits, '.' and '_'.
pub fn check_name(agent: &str) -> Result<()> {
    if agent.is_empty()
        || agent.len() > 28
        || !agent
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
    {
        return err(format!(
            "agent name '{agent}': 1 to 28 letters, digits, '.' or '_'"
        ));
    }
    Ok(())
}

fn running_pid(home: &Path, agent: &str) -> Option<u32> {
    let text = std::fs::read_to_string(agent::pid_file(home, agent)).ok()?;
    let pid: u32 = text.trim().parse().ok()?;
    // A killed agent not reaped yet (a zombie) is not running.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.rsplit(')').next()?.split_whitespace().next()?;
    (state != "Z" && state != "X").then_some(pid)
}

/// `fteStartAgent A`: spawns `ferrymq fte agent A` (with `exe`) and returns once it is ready.
pub fn start_agent(home: &Path, exe: &Path, agent: &str) -> Result<String> {
    check_name(agent)?;
    props::load(home, agent)?;
    if let Some(pid) = running_pid(home, agent) {
        return err(format!("agent {agent} is already running (pid {pid})"));
    }
    let dir = props::agent_dir(home, agent);
    let pidf = agent::pid_file(home, agent);
    let _ = std::fs::remove_file(&pidf);
    let out_path = dir.join("agent.log");
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out_path)
        .map_err(io(&out_path))?;
    let err_out = out.try_clone().map_err(io(&out_path))?;
    let log_start = out.metadata().map(|m| m.len()).unwrap_or(0);
    let mut child = std::process::Command::new(exe)
        .args(["fte", "agent", agent])
        .env("FERRYMQ_HOME", home)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err_out)
        .spawn()
        .map_err(io(exe))?;
    let deadline = Instant::now() + Duration::from_millis(FTE_AGENT_START_WAIT_MS);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return err(format!(
                "agent {agent} ended at start ({status}){}; see {}",
                said_since(&out_path, log_start),
                out_path.display()
            ));
        }
        if pidf.exists() {
            return Ok(format!("agent {agent} started (pid {})\n", child.id()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    err(format!(
        "agent {agent} was not ready within {} s; see {}",
        FTE_AGENT_START_WAIT_MS / 1000,
        out_path.display()
    ))
}

/// What an agent wrote to its log from `from` on (its last 2 KiB at most), as `: TEXT`, for the
/// command that started it: why it ended.
fn said_since(log: &Path, from: u64) -> String {
    const MAX: usize = 2048;
    let text = std::fs::read(log).unwrap_or_default();
    let new = text.get(from as usize..).unwrap_or_default();
    let tail = &new[new.len().saturating_sub(MAX)..];
    let t = String::from_utf8_lossy(tail);
    let t = t.trim();
    if t.is_empty() {
        String::new()
    } else {
        format!(": {}", t.replace('\n', " / "))
    }
}

/// The priority of cancel and stop requests: the agent serves them ahead of the transfer
/// requests waiting on its command queue.
const CONTROL_PRIORITY: i32 = 9;

/// `fteStopAgent A`: asks the agent to stop and waits until it has.
pub fn stop_agent(home: &Path, agent: &str) -> Result<String> {
    let p = props::load(home, agent)?;
    let Some(pid) = running_pid(home, agent) else {
        return err(format!("agent {agent} is not running"));
    };
    let c = agent::connect(&p)?;
    let mut props = Properties::default();
    props.set(prop::KIND, PropertyValue::String("stop".into()));
    // Ahead of the requests waiting for a place.
    let md = MessageDescriptor {
        persistence: Persistence::NotPersistent,
        priority: CONTROL_PRIORITY,
        ..Default::default()
    };
    c.put1(
        &queues::command(agent),
        &md,
        &props,
        Bytes::new(),
        &PutOptions::default(),
    )?;
    let deadline = Instant::now() + Duration::from_millis(FTE_AGENT_START_WAIT_MS);
    while Instant::now() < deadline {
        if !Path::new(&format!("/proc/{pid}")).exists() || running_pid(home, agent).is_none() {
            return Ok(format!("agent {agent} stopped\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    err(format!("agent {agent} (pid {pid}) did not stop in time"))
}

fn agent_names(home: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(props::mqft_dir(home).join("agents"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `fteListAgents`: each agent with its queue manager and whether it runs.
pub fn list_agents(home: &Path) -> String {
    let mut s = format!(
        "{:<28} {:<48} {}\n",
        "Agent Name:", "Queue Manager Name:", "Status:"
    );
    for a in agent_names(home) {
        let qm = props::load(home, &a)
            .map(|p| p.agent_qmgr)
            .unwrap_or_default();
        let st = if running_pid(home, &a).is_some() {
            "READY"
        } else {
            "STOPPED"
        };
        s.push_str(&format!("{a:<28} {qm:<48} {st}\n"));
    }
    s
}

/// `fteShowAgentDetails A`: its properties and state.
pub fn show_agent_details(home: &Path, agent: &str) -> Result<String> {
    let p = props::load(home, agent)?;
    let status = match running_pid(home, agent) {
        Some(pid) => format!("READY (pid {pid})"),
        None => "STOPPED".into(),
    };
    Ok(format!(
        "Agent Information:\n  Name: {}\n  Queue Manager: {}\n  Status: {status}\n\
         Properties:\n{}",
        p.agent_name,
        p.agent_qmgr,
        p.to_text()
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
    ))
}

/// The outcome of a transfer request that was waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    pub text: String,
}

/// `fteCreateTransfer`: puts the request on the source agent's command queue (through the
/// source agent's queue manager) and, with `wait`, waits up to `wait_ms` for its outcome.
pub fn create_transfer(
    home: &Path,
    req: &TransferRequest,
    wait: Option<u64>,
) -> Result<(MsgId, Option<Outcome>)> {
    // The command connects like the source agent does, when the agent is defined here.
    let c = match props::load(home, &req.source_agent) {
        Ok(p) if p.agent_qmgr == req.source_qmgr || req.source_qmgr.is_empty() => {
            agent::connect(&p)?
        }
        _ => Connection::connect(ferrymq_client::ConnectOptions::bindings(&req.source_qmgr))?,
    };
    let reply_q = match wait {
        Some(_) => Some(c.open_dynamic(
            "SYSTEM.DEFAULT.MODEL.QUEUE",
            "FTE.REPLY.*",
            open::INPUT_EXCLUSIVE,
        )?),
        None => None,
    };
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        reply_to_q: reply_q.as_ref().map(|h| h.name.clone()).unwrap_or_default(),
        reply_to_qmgr: reply_q
            .as_ref()
            .map(|_| c.qmgr_name().to_string())
            .unwrap_or_default(),
        ..Default::default()
    };
    let h = c.open(&queues::command(&req.source_agent), open::OUTPUT)?;
    let (msg_id, _) = c.put(
        &h,
        &md,
        &Properties::default(),
        Bytes::from(req.to_xml()),
        &PutOptions {
            new_msg_id: true,
            ..PutOptions::default()
        },
    )?;
    let _ = c.close(&h, 0);
    let (Some(rq), Some(ms)) = (reply_q, wait) else {
        return Ok((msg_id, None));
    };
    let g = GetOptions {
        wait: Wait::Ms(ms),
        match_correl_id: Some(msg_id),
        max_len: u32::MAX,
        ..Default::default()
    };
    match c.get(&rq, &g) {
        Ok(m) => Ok((
            msg_id,
            Some(Outcome {
                ok: matches!(m.props.get(prop::OK), Some(PropertyValue::Bool(true))),
                text: String::from_utf8_lossy(&m.body).into_owned(),
            }),
        )),
        Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => err(format!(
            "no outcome within {} s; the transfer may still complete (is agent {} running?)",
            ms / 1000,
            req.source_agent
        )),
        Err(e) => Err(e.into()),
    }
}

/// `fteCancelTransfer -agentName A ID`: asks the source agent to stop the transfer and waits
/// for its answer (it removes the partial destination; the source stays).
pub fn cancel_transfer(home: &Path, agent: &str, id: &str) -> Result<String> {
    check_name(agent)?;
    let p = props::load(home, agent)?;
    let c = agent::connect(&p)?;
    let rq = c.open_dynamic(
        "SYSTEM.DEFAULT.MODEL.QUEUE",
        "FTE.REPLY.*",
        open::INPUT_EXCLUSIVE,
    )?;
    let mut props = Properties::default();
    props.set(prop::KIND, PropertyValue::String("cancel".into()));
    props.set(
        prop::TID,
        PropertyValue::String(id.trim().to_ascii_lowercase()),
    );
    let md = MessageDescriptor {
        persistence: Persistence::NotPersistent,
        priority: CONTROL_PRIORITY,
        reply_to_q: rq.name.clone(),
        reply_to_qmgr: c.qmgr_name().to_string(),
        ..Default::default()
    };
    let (msg_id, _) = c.put1(
        &queues::command(agent),
        &md,
        &props,
        Bytes::new(),
        &PutOptions {
            new_msg_id: true,
            ..PutOptions::default()
        },
    )?;
    let g = GetOptions {
        wait: Wait::Ms(FTE_AGENT_START_WAIT_MS),
        match_correl_id: Some(msg_id),
        max_len: u32::MAX,
        ..Default::default()
    };
    match c.get(&rq, &g) {
        Ok(m) => {
            let text = String::from_utf8_lossy(&m.body).into_owned();
            if matches!(m.props.get(prop::OK), Some(PropertyValue::Bool(true))) {
                Ok(format!("{text}\n"))
            } else {
                err(text)
            }
        }
        Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
            err(format!("agent {agent} did not answer (is it running?)"))
        }
        Err(e) => Err(e.into()),
    }
}

/// Where an absolute path for a request is made from a command-line one.
pub fn absolute(p: &str) -> String {
    let path = PathBuf::from(p);
    if path.is_absolute() {
        return p.to_string();
    }
    std::env::current_dir()
        .map(|d| d.join(path).to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_string())
}
