//! The managed file transfer commands with MQ's names and single-dash flags (fteCreateAgent
//! -agentName A -agentQMgr QM, fteCreateTransfer -sa A -da B -df FILE SRC, ...). Each flag is
//! rewritten to its double-dash form before clap reads it, so `--help` works too. The work is
//! ferrymq-fte's; this module only reads command lines.

use std::path::PathBuf;

use clap::Parser;
use ferrymq_fte::checksum::Method;
use ferrymq_fte::props::AgentProps;
use ferrymq_fte::request::{Disposition, Exist, Item, Mode, TransferRequest};
use ferrymq_fte::{commands, FteError};

use crate::lifecycle::{other, Fail, Res};
use crate::samples::parse_args;

/// `-agentName` → `--agentName`; `-?` → `--help`. Values and `--` forms are left alone.
pub fn mq_flags(args: &[String]) -> Vec<String> {
    args.iter()
        .map(|a| {
            if a == "-?" {
                "--help".to_string()
            } else if a.len() >= 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && a.as_bytes()[1].is_ascii_alphabetic()
            {
                format!("-{a}")
            } else {
                a.clone()
            }
        })
        .collect()
}

fn home() -> PathBuf {
    ferrymq_client::ferrymq_home()
}

fn fte_err(e: FteError) -> Fail {
    other(e.0)
}

fn print(s: &str) {
    crate::print_out(s);
}

/// `fteSetupCoordination`
#[derive(Parser, Debug)]
struct SetupCoordination {
    /// The coordination queue manager (it keeps the transfer log)
    #[arg(long = "coordinationQMgr", value_name = "QMNAME")]
    coordination_qmgr: String,
    /// Print the MQSC only; run nothing
    #[arg(long = "p")]
    print: bool,
}

/// `fteCreateAgent`
#[derive(Parser, Debug)]
struct CreateAgent {
    /// The agent's name (1 to 28 letters, digits, '.' or '_')
    #[arg(long = "agentName", value_name = "AGENT")]
    agent_name: String,
    /// The agent's queue manager
    #[arg(long = "agentQMgr", value_name = "QMNAME")]
    agent_qmgr: String,
    /// Client mode: the queue manager's host
    #[arg(long = "agentQMgrHost", value_name = "HOST")]
    host: Option<String>,
    /// Client mode: the queue manager's port
    #[arg(long = "agentQMgrPort", value_name = "PORT", default_value_t = 1414)]
    port: u16,
    /// Client mode: the server-connection channel
    #[arg(
        long = "agentQMgrChannel",
        value_name = "CHANNEL",
        default_value = "SYSTEM.DEF.SVRCONN"
    )]
    channel: String,
    /// Client mode: the queue manager's other instances, host(port)[,host(port)...], tried in
    /// turn after the first at every connect (agentQMgrStandby)
    #[arg(long = "agentQMgrStandby", value_name = "HOST(PORT),...")]
    standby: Option<String>,
    /// The MQMFTCredentials.xml holding the user id and password for the agent's queue manager
    /// (agentQMgrAuthenticationCredentialsFile; readable by its owner only)
    #[arg(long = "credentialsFile", value_name = "FILE")]
    credentials_file: Option<PathBuf>,
    /// agentChunkSize: bytes of file per message (default 262144)
    #[arg(long = "agentChunkSize", value_name = "BYTES")]
    chunk_size: Option<usize>,
    /// agentWindowSize: frames a sender may have unacknowledged (default 10)
    #[arg(long = "agentWindowSize", value_name = "N")]
    window_size: Option<usize>,
    /// agentFrameSize: chunks per frame (default 5)
    #[arg(long = "agentFrameSize", value_name = "N")]
    frame_size: Option<usize>,
    /// agentCheckpointInterval: frames between checkpoints (default 1)
    #[arg(long = "agentCheckpointInterval", value_name = "N")]
    checkpoint_interval: Option<usize>,
    /// maxSourceTransfers: transfers the agent sends at once; others queue (default 25)
    #[arg(long = "maxSourceTransfers", value_name = "N")]
    max_source: Option<usize>,
    /// Print the MQSC that defines the agent's queues; create nothing
    #[arg(long = "p")]
    print: bool,
}

/// `fteStartAgent` / `fteStopAgent` / `fteShowAgentDetails`
#[derive(Parser, Debug)]
struct AgentName {
    /// The agent
    #[arg(value_name = "AGENT")]
    agent: String,
}

/// `fteCreateMonitor`
#[derive(Parser, Debug)]
struct CreateMonitor {
    /// The agent that monitors (and sends)
    #[arg(long = "ma", value_name = "AGENT")]
    ma: String,
    /// The monitor's name
    #[arg(long = "mn", value_name = "NAME")]
    mn: String,
    /// The directory to watch
    #[arg(long = "md", value_name = "DIR", required_unless_present = "mq")]
    md: Option<String>,
    /// The queue to watch instead (on the agent's queue manager): each message triggers the
    /// task once, its properties standing for ${NAME} and the queue for ${QueueName}
    #[arg(long = "mq", value_name = "QUEUE", conflicts_with = "md")]
    mq: Option<String>,
    /// The task: a transfer request's XML (fteCreateTransfer -gt writes one), with ${FilePath}
    /// and ${FileName} standing for the file that triggered
    #[arg(long = "mt", value_name = "TASK.xml")]
    mt: PathBuf,
    /// The trigger: match,PATTERN (`*` and `?` wildcards); queueNotEmpty with -mq
    #[arg(long = "tr", value_name = "match,PATTERN", default_value = "match,*")]
    tr: String,
    /// Poll interval, in -pu units (default 60)
    #[arg(long = "pi", value_name = "N", default_value_t = 60)]
    pi: u64,
    /// Poll interval units: seconds (default) or minutes
    #[arg(long = "pu", value_name = "UNITS", default_value = "seconds")]
    pu: String,
    /// Polls a file's size must stay the same before it triggers (default 2)
    #[arg(long = "stable", value_name = "N", default_value_t = 2)]
    stable: u32,
}

/// `fteListMonitors`, `fteDeleteMonitor`
#[derive(Parser, Debug)]
struct MonitorName {
    /// The agent
    #[arg(long = "ma", value_name = "AGENT")]
    ma: Option<String>,
    /// The monitor (fteDeleteMonitor)
    #[arg(long = "mn", value_name = "NAME")]
    mn: Option<String>,
}

/// `fteCancelTransfer`
#[derive(Parser, Debug)]
struct CancelTransfer {
    /// The transfer's source agent
    #[arg(long = "agentName", value_name = "AGENT")]
    agent_name: String,
    /// The transfer's id (fteCreateTransfer prints it)
    #[arg(value_name = "TRANSFER_ID")]
    id: String,
}

/// `fteListAgents`
#[derive(Parser, Debug)]
struct ListAgents {}

/// `fteCreateTransfer`
#[derive(Parser, Debug)]
struct CreateTransfer {
    /// Source agent (with -td, only if the definition does not name it, or to override it)
    #[arg(long = "sa", value_name = "AGENT")]
    sa: Option<String>,
    /// Source agent's queue manager
    #[arg(long = "sm", value_name = "QMNAME")]
    sm: Option<String>,
    /// Destination agent (with -td, only if the definition does not name it, or to override it)
    #[arg(long = "da", value_name = "AGENT")]
    da: Option<String>,
    /// Destination agent's queue manager
    #[arg(long = "dm", value_name = "QMNAME")]
    dm: Option<String>,
    /// Destination file (one source file)
    #[arg(long = "df", value_name = "FILE", conflicts_with = "dd")]
    df: Option<String>,
    /// Destination directory
    #[arg(long = "dd", value_name = "DIR")]
    dd: Option<String>,
    /// If the destination exists: error (default) or overwrite
    #[arg(long = "de", value_name = "POLICY", default_value = "error")]
    de: String,
    /// binary (default) or text
    #[arg(long = "t", value_name = "MODE", default_value = "binary")]
    t: String,
    /// Text mode: the source's encoding, UTF-8 (default) or ISO-8859-1 (or a CCSID, 1208/819)
    #[arg(long = "sce", value_name = "ENCODING", default_value = "")]
    sce: String,
    /// Text mode: the destination's encoding, UTF-8 (default) or ISO-8859-1
    #[arg(long = "dce", value_name = "ENCODING", default_value = "")]
    dce: String,
    /// Text mode: the destination's line ending, LF (default, the agents' platform) or CRLF
    #[arg(long = "dle", value_name = "EOL", default_value = "")]
    dle: String,
    /// Source disposition after success: leave (default) or delete
    #[arg(long = "sd", value_name = "DISPOSITION", default_value = "leave")]
    sd: String,
    /// Transfer directories recursively
    #[arg(long = "r")]
    r: bool,
    /// Checksum: BLAKE3 (default), SHA-256, MD5 or none
    #[arg(long = "cs", value_name = "METHOD", default_value = "BLAKE3")]
    cs: String,
    /// Wait for the outcome (up to SECONDS, default 600); exit 1 if the transfer failed
    #[arg(long = "w", value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
    w: Option<u64>,
    /// Job name
    #[arg(long = "jn", value_name = "NAME")]
    jn: Option<String>,
    /// Write the request's XML to FILE instead of submitting it
    #[arg(long = "gt", value_name = "FILE")]
    gt: Option<PathBuf>,
    /// Read the transfer definition from FILE: a whole <request> (as -gt writes), or
    /// <transferSpecifications> items whose agents -sa and -da name
    #[arg(long = "td", value_name = "FILE")]
    td: Option<PathBuf>,
    /// Source files, directories (with -r) or wildcards
    #[arg(value_name = "SOURCE")]
    sources: Vec<String>,
}

pub fn run(name: &str, rest: &[String]) -> Res {
    let args = mq_flags(rest);
    let h = home();
    match name {
        "fteSetupCoordination" => {
            let Some(a) = parse_args::<SetupCoordination>(
                "ferrymq fteSetupCoordination",
                Some("Set up the coordination queue manager (the transfer log)"),
                "Examples:\n  ferrymq fteSetupCoordination -coordinationQMgr QM1",
                &args,
            )?
            else {
                return Ok(());
            };
            print(
                &commands::setup_coordination(&h, &a.coordination_qmgr, a.print)
                    .map_err(fte_err)?,
            );
            Ok(())
        }
        "fteCreateAgent" => {
            let Some(a) = parse_args::<CreateAgent>(
                "ferrymq fteCreateAgent",
                Some("Create a file transfer agent: its queues and agent.properties"),
                "Examples:\n  ferrymq fteCreateAgent -agentName AGENT1 -agentQMgr QM1\n  \
                 ferrymq fteCreateAgent -agentName AGENT1 -agentQMgr QM1 -p   # print the MQSC\n  \
                 ferrymq fteCreateAgent -agentName AGENT1 -agentQMgr QM1 -agentQMgrHost host1 \\\n      \
                 -agentQMgrPort 1414 -agentQMgrStandby 'host2(1414),host3(1414)' \\\n      \
                 -credentialsFile ~/MQMFTCredentials.xml   # client mode, an HA group",
                &args,
            )?
            else {
                return Ok(());
            };
            let mut p = AgentProps::new(&a.agent_name, &a.agent_qmgr);
            p.agent_qmgr_host = a.host;
            p.agent_qmgr_port = a.port;
            p.agent_qmgr_channel = a.channel;
            if let Some(v) = a.standby {
                p.agent_qmgr_standby = v;
            }
            if let Some(f) = a.credentials_file {
                // The agent runs from its own directory: the path must not depend on where the
                // command ran.
                let f =
                    std::path::absolute(&f).map_err(|e| other(format!("{}: {e}", f.display())))?;
                p.credentials_file = f.to_string_lossy().into_owned();
            }
            if let Some(v) = a.chunk_size {
                p.agent_chunk_size = v;
            }
            if let Some(v) = a.window_size {
                p.agent_window_size = v;
            }
            if let Some(v) = a.frame_size {
                p.agent_frame_size = v;
            }
            if let Some(v) = a.checkpoint_interval {
                p.agent_checkpoint_interval = v;
            }
            if let Some(v) = a.max_source {
                p.max_source_transfers = v;
            }
            // The same bounds as a hand-edited agent.properties.
            AgentProps::parse(&p.to_text()).map_err(fte_err)?;
            print(&commands::create_agent(&h, p, a.print).map_err(fte_err)?);
            Ok(())
        }
        "fteCreateMonitor" => {
            let Some(a) = parse_args::<CreateMonitor>(
                "ferrymq fteCreateMonitor",
                Some("Create a resource monitor: files appearing in a directory, or messages on a queue, trigger a task"),
                "Examples:\n  ferrymq fteCreateMonitor -ma AGENT1 -mn INBOX -md /srv/out \\\n      \
                 -mt task.xml -tr 'match,*.csv' -pi 5\n  ferrymq fteCreateMonitor -ma AGENT1 -mn ONREQ -mq FILES.TO.SEND \\\n      \
                 -mt task.xml -tr queueNotEmpty -pi 1",
                &args,
            )?
            else {
                return Ok(());
            };
            let pattern = match (a.tr.strip_prefix("match,"), &a.mq) {
                (Some(p), None) => p,
                (_, Some(_)) if a.tr == "queueNotEmpty" || a.tr == "match,*" => "*",
                (_, Some(_)) => return Err(other("fteCreateMonitor: -mq takes -tr queueNotEmpty")),
                (None, None) => return Err(other("fteCreateMonitor: -tr match,PATTERN")),
            };
            let unit_ms = match a.pu.as_str() {
                "seconds" => 1_000,
                "minutes" => 60_000,
                u => {
                    return Err(other(format!(
                        "fteCreateMonitor: -pu {u}: seconds or minutes"
                    )))
                }
            };
            let task = std::fs::read_to_string(&a.mt)
                .map_err(|e| other(format!("fteCreateMonitor: {}: {e}", a.mt.display())))?;
            let m = ferrymq_fte::monitor::Monitor {
                name: a.mn.clone(),
                directory: a.md.as_deref().map(commands::absolute).unwrap_or_default(),
                queue: a.mq.clone(),
                pattern: pattern.to_string(),
                poll_ms: a.pi.max(1).saturating_mul(unit_ms),
                stable: a.stable,
            };
            print(&ferrymq_fte::monitor::create(&h, &a.ma, &m, &task).map_err(fte_err)?);
            Ok(())
        }
        "fteListMonitors" | "fteDeleteMonitor" => {
            let Some(a) = parse_args::<MonitorName>(
                if name == "fteListMonitors" {
                    "ferrymq fteListMonitors"
                } else {
                    "ferrymq fteDeleteMonitor"
                },
                None,
                "Examples:\n  ferrymq fteListMonitors\n  ferrymq fteDeleteMonitor -ma AGENT1 -mn INBOX",
                &args,
            )?
            else {
                return Ok(());
            };
            if name == "fteListMonitors" {
                print(&ferrymq_fte::monitor::list(&h, a.ma.as_deref()));
                return Ok(());
            }
            let (Some(ma), Some(mn)) = (a.ma, a.mn) else {
                return Err(other("fteDeleteMonitor: give -ma AGENT and -mn NAME"));
            };
            print(&ferrymq_fte::monitor::delete(&h, &ma, &mn).map_err(fte_err)?);
            Ok(())
        }
        "fteCancelTransfer" => {
            let Some(a) = parse_args::<CancelTransfer>(
                "ferrymq fteCancelTransfer",
                Some("Cancel a transfer: the partial destination goes, the source stays"),
                "Examples:\n  ferrymq fteCancelTransfer -agentName AGENT1 414d5120...",
                &args,
            )?
            else {
                return Ok(());
            };
            print(&commands::cancel_transfer(&h, &a.agent_name, &a.id).map_err(fte_err)?);
            Ok(())
        }
        "fteStartAgent" | "fteStopAgent" | "fteShowAgentDetails" => {
            let Some(a) = parse_args::<AgentName>(
                match name {
                    "fteStartAgent" => "ferrymq fteStartAgent",
                    "fteStopAgent" => "ferrymq fteStopAgent",
                    _ => "ferrymq fteShowAgentDetails",
                },
                None,
                "Examples:\n  ferrymq fteStartAgent AGENT1",
                &args,
            )?
            else {
                return Ok(());
            };
            let out = match name {
                "fteStartAgent" => {
                    let exe = std::env::current_exe()
                        .map_err(|e| other(format!("fteStartAgent: {e}")))?;
                    commands::start_agent(&h, &exe, &a.agent)
                }
                "fteStopAgent" => commands::stop_agent(&h, &a.agent),
                _ => commands::show_agent_details(&h, &a.agent),
            }
            .map_err(fte_err)?;
            print(&out);
            Ok(())
        }
        "fteListAgents" => {
            let Some(_) = parse_args::<ListAgents>(
                "ferrymq fteListAgents",
                Some("List the agents defined under this FerryMQ home"),
                "Examples:\n  ferrymq fteListAgents",
                &args,
            )?
            else {
                return Ok(());
            };
            print(&commands::list_agents(&h));
            Ok(())
        }
        "fteCreateTransfer" => {
            let Some(a) = parse_args::<CreateTransfer>(
                "ferrymq fteCreateTransfer",
                Some("Ask a source agent to transfer files to a destination agent"),
                "Examples:\n  ferrymq fteCreateTransfer -sa A1 -sm QM1 -da B1 -dm QM2 -df /in/x.dat -w /out/x.dat\n  \
                 ferrymq fteCreateTransfer -sa A1 -da B1 -dd /in -r -w /out/reports\n  \
                 ferrymq fteCreateTransfer -sa A1 -da B1 -dd /in -sd delete '/out/*.csv'",
                &args,
            )?
            else {
                return Ok(());
            };
            create_transfer(&h, a)
        }
        _ => Err(other(format!("ferrymq: unknown command '{name}'"))),
    }
}

fn create_transfer(h: &std::path::Path, a: CreateTransfer) -> Res {
    // An agent's queue manager: as given, or from its agent.properties here.
    let qmgr_of = |agent: &str, given: &Option<String>| {
        given.clone().unwrap_or_else(|| {
            ferrymq_fte::props::load(h, agent)
                .map(|p| p.agent_qmgr)
                .unwrap_or_default()
        })
    };
    let req = match &a.td {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| other(format!("fteCreateTransfer: {}: {e}", f.display())))?;
            let mut req = TransferRequest::from_definition_xml(&text).map_err(fte_err)?;
            // The command line names the agents of a <transferSpecifications>, and overrides
            // those of a <request>.
            if let Some(sa) = &a.sa {
                req.source_agent = sa.clone();
                req.source_qmgr = qmgr_of(sa, &a.sm);
            } else if let Some(sm) = &a.sm {
                req.source_qmgr = sm.clone();
            }
            if let Some(da) = &a.da {
                req.dest_agent = da.clone();
                req.dest_qmgr = qmgr_of(da, &a.dm);
            } else if let Some(dm) = &a.dm {
                req.dest_qmgr = dm.clone();
            }
            if req.source_agent.is_empty() || req.dest_agent.is_empty() {
                return Err(other(format!(
                    "fteCreateTransfer: {} names no source or destination agent: give -sa and -da",
                    f.display()
                )));
            }
            if req.source_qmgr.is_empty() {
                req.source_qmgr = qmgr_of(&req.source_agent, &None);
            }
            if req.dest_qmgr.is_empty() {
                req.dest_qmgr = qmgr_of(&req.dest_agent, &None);
            }
            req
        }
        None => {
            let (Some(sa), Some(da)) = (&a.sa, &a.da) else {
                return Err(other(
                    "fteCreateTransfer: give the source agent (-sa) and the destination agent (-da)",
                ));
            };
            let (dest, dest_is_dir) = match (&a.df, &a.dd) {
                (Some(f), None) => (f.clone(), false),
                (None, Some(d)) => (d.clone(), true),
                _ => {
                    return Err(other(
                        "fteCreateTransfer: give a destination file (-df) or directory (-dd)",
                    ))
                }
            };
            if a.sources.is_empty() {
                return Err(other("fteCreateTransfer: give at least one source file"));
            }
            let mode = match a.t.as_str() {
                "binary" => Mode::Binary,
                "text" => Mode::Text,
                t => return Err(other(format!("fteCreateTransfer: -t {t}: binary or text"))),
            };
            for (flag, v) in [("-sce", &a.sce), ("-dce", &a.dce)] {
                ferrymq_fte::text::Encoding::parse(v)
                    .map_err(|e| other(format!("fteCreateTransfer: {flag}: {e}")))?;
            }
            ferrymq_fte::text::Eol::parse(&a.dle)
                .map_err(|e| other(format!("fteCreateTransfer: -dle: {e}")))?;
            let exist = match a.de.as_str() {
                "error" => Exist::Error,
                "overwrite" => Exist::Overwrite,
                d => {
                    return Err(other(format!(
                        "fteCreateTransfer: -de {d}: error or overwrite"
                    )))
                }
            };
            let disposition = match a.sd.as_str() {
                "leave" => Disposition::Leave,
                "delete" => Disposition::Delete,
                d => {
                    return Err(other(format!(
                        "fteCreateTransfer: -sd {d}: leave or delete"
                    )))
                }
            };
            let checksum = Method::parse(&a.cs).ok_or_else(|| {
                other(format!(
                    "fteCreateTransfer: -cs {}: BLAKE3, SHA-256, MD5 or none",
                    a.cs
                ))
            })?;
            TransferRequest {
                source_agent: sa.clone(),
                source_qmgr: qmgr_of(sa, &a.sm),
                dest_agent: da.clone(),
                dest_qmgr: qmgr_of(da, &a.dm),
                job_name: a.jn.clone(),
                items: a
                    .sources
                    .iter()
                    .map(|s| Item {
                        source: commands::absolute(s),
                        recursive: a.r,
                        disposition,
                        dest_is_dir,
                        dest: commands::absolute(&dest),
                        exist,
                        mode,
                        checksum,
                        source_encoding: a.sce.clone(),
                        dest_encoding: a.dce.clone(),
                        dest_eol: a.dle.clone(),
                    })
                    .collect(),
            }
        }
    };
    if let Some(gt) = &a.gt {
        std::fs::write(gt, req.to_xml())
            .map_err(|e| other(format!("fteCreateTransfer: {}: {e}", gt.display())))?;
        return Ok(());
    }
    match commands::create_transfer(h, &req, a.w.map(|s| s * 1000)).map_err(fte_err)? {
        (id, None) => {
            print(&format!(
                "transfer request submitted with ID {}\n",
                ferrymq_fte::state::hex(&id)
            ));
            Ok(())
        }
        (_, Some(o)) => outcome(o),
    }
}

fn outcome(o: commands::Outcome) -> Res {
    if o.ok {
        print(&format!("{}\n", o.text));
        Ok(())
    } else {
        Err(other(o.text))
    }
}

/// `ferrymq fte agent NAME`, `ferrymq fte log`, `ferrymq fte status`
#[derive(Parser, Debug)]
struct FteProcess {
    /// What to run: `agent` (an agent in the foreground), `log` (the transfer log), `status`
    /// (transfers in progress)
    #[arg(value_name = "WHAT", value_parser = ["agent", "log", "status"])]
    what: String,
    /// The agent (`agent`)
    #[arg(value_name = "AGENT")]
    agent: Option<String>,
    /// log: print each event as JSON, one a line
    #[arg(long = "json")]
    json: bool,
    /// log: print each event as XML
    #[arg(long = "xml", conflicts_with = "json")]
    xml: bool,
}

pub fn fte(rest: &[String]) -> Res {
    let Some(a) = parse_args::<FteProcess>(
        "ferrymq fte",
        Some(
            "Run a file transfer agent in the foreground (fteStartAgent runs it in the \
             background), print the transfer log, or show the transfers in progress",
        ),
        "Examples:\n  ferrymq fte agent AGENT1\n  ferrymq fte log --json\n  ferrymq fte status",
        rest,
    )?
    else {
        return Ok(());
    };
    let h = home();
    if a.what == "agent" {
        let Some(agent) = &a.agent else {
            return Err(other("ferrymq fte agent: name the agent"));
        };
        return ferrymq_fte::agent::run(&h, agent)
            .map_err(|e| other(format!("fte agent {agent}: {e}")));
    }
    let events = commands::transfer_log(&h).map_err(fte_err)?;
    if a.what == "status" {
        let json: Vec<_> = events.into_iter().map(|(j, _)| j).collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        print(&ferrymq_fte::translog::status(&json, now));
        return Ok(());
    }
    let mut out = String::new();
    for (j, xml) in events {
        if a.json {
            out.push_str(&format!("{j}\n"));
        } else if a.xml {
            out.push_str(&xml);
        } else {
            out.push_str(&format!("{}\n", ferrymq_fte::translog::line(&j)));
        }
    }
    print(&out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mq_single_dash_flags_become_long_flags() {
        let v: Vec<String> = ["-agentName", "A", "-p", "--help", "-", "-?", "/tmp/-x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            mq_flags(&v),
            [
                "--agentName",
                "A",
                "--p",
                "--help",
                "-",
                "--help",
                "/tmp/-x"
            ]
        );
    }
}
