//! Resource monitors: an agent watches a directory by polling it, and when a file whose name
//! matches the trigger pattern has kept the same size and modification time for `stable` polls
//! and no process has it open for writing, submits the monitor's task (a transfer request's XML,
//! with `${FilePath}` and `${FileName}` replaced) to its own command queue, where it waits its turn like any request. A file fires
//! once: it is recorded (name, size, modification time) before its request is put, so a crash
//! can lose a trigger but never repeat one.
//!
//! Definitions live beside the agent's properties, `monitors/<NAME>.monitor` and
//! `monitors/<NAME>.task.xml`, so that fteCreateMonitor and fteDeleteMonitor act on a running
//! agent (it reads the directory at each poll).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::limits::{FTE_MONITOR_FILES_MAX, FTE_MONITOR_POLL_MIN_MS};
use ferrymq_types::options::{open, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use quick_xml::escape::escape;

use crate::props::{self, AgentProps};
use crate::request::TransferRequest;
use crate::{err, queues, FteError, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitor {
    pub name: String,
    pub directory: String,
    /// `*`/`?` wildcard of the file names that trigger.
    pub pattern: String,
    pub poll_ms: u64,
    /// Polls a file's size and modification time must stay the same before it triggers.
    pub stable: u32,
}

fn dir(home: &Path, agent: &str) -> PathBuf {
    props::agent_dir(home, agent).join("monitors")
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> FteError + '_ {
    move |e| FteError(format!("{}: {e}", p.display()))
}

/// `fteCreateMonitor`: checks the task and writes the definition.
pub fn create(home: &Path, agent: &str, m: &Monitor, task_xml: &str) -> Result<String> {
    crate::commands::check_name(agent)?;
    crate::commands::check_name(&m.name)?;
    props::load(home, agent)?;
    let probe = substitute(task_xml, "/probe/file.txt", "file.txt");
    TransferRequest::from_xml(&probe)?;
    if !Path::new(&m.directory).is_absolute() {
        return err(format!("{}: give an absolute directory", m.directory));
    }
    let d = dir(home, agent);
    std::fs::create_dir_all(&d).map_err(io(&d))?;
    let def = d.join(format!("{}.monitor", m.name));
    if def.exists() {
        return err(format!("monitor {} exists at agent {agent}", m.name));
    }
    let task = d.join(format!("{}.task.xml", m.name));
    std::fs::write(&task, task_xml).map_err(io(&task))?;
    let text = format!(
        "directory={}\npattern={}\npollMs={}\nstable={}\n",
        m.directory, m.pattern, m.poll_ms, m.stable
    );
    std::fs::write(&def, text).map_err(io(&def))?;
    Ok(format!("monitor {} created at agent {agent}\n", m.name))
}

/// `fteListMonitors`: the agents' monitors, one a line.
pub fn list(home: &Path, agent: Option<&str>) -> String {
    let mut out = String::new();
    let agents_dir = props::mqft_dir(home).join("agents");
    let mut agents: Vec<String> = std::fs::read_dir(&agents_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    agents.sort();
    for a in agents
        .iter()
        .filter(|a| agent.is_none_or(|x| x == a.as_str()))
    {
        for m in load_all(home, a) {
            out.push_str(&format!(
                "{a:<16} {:<16} {} {} every {} ms, stable for {} polls\n",
                m.name, m.directory, m.pattern, m.poll_ms, m.stable
            ));
        }
    }
    if out.is_empty() {
        out.push_str("no monitors\n");
    }
    out
}

/// `fteDeleteMonitor`.
pub fn delete(home: &Path, agent: &str, name: &str) -> Result<String> {
    crate::commands::check_name(agent)?;
    crate::commands::check_name(name)?;
    let d = dir(home, agent);
    let def = d.join(format!("{name}.monitor"));
    if !def.exists() {
        return err(format!("no monitor {name} at agent {agent}"));
    }
    std::fs::remove_file(&def).map_err(io(&def))?;
    let _ = std::fs::remove_file(d.join(format!("{name}.task.xml")));
    let _ = std::fs::remove_file(d.join(format!("{name}.fired")));
    Ok(format!("monitor {name} deleted at agent {agent}\n"))
}

fn load_all(home: &Path, agent: &str) -> Vec<Monitor> {
    let mut v: Vec<Monitor> = std::fs::read_dir(dir(home, agent))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let name = n.strip_suffix(".monitor")?.to_string();
                    parse(&name, &std::fs::read_to_string(e.path()).ok()?)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn parse(name: &str, text: &str) -> Option<Monitor> {
    let mut m = Monitor {
        name: name.to_string(),
        directory: String::new(),
        pattern: "*".into(),
        poll_ms: 60_000,
        stable: 2,
    };
    for l in text.lines() {
        let (k, v) = l.split_once('=')?;
        match k {
            "directory" => m.directory = v.to_string(),
            "pattern" => m.pattern = v.to_string(),
            "pollMs" => m.poll_ms = v.parse().ok()?,
            "stable" => m.stable = v.parse().ok()?,
            _ => {}
        }
    }
    (!m.directory.is_empty()).then_some(m)
}

/// The task with `${FilePath}` and `${FileName}` replaced (XML-escaped).
pub fn substitute(task: &str, path: &str, name: &str) -> String {
    task.replace("${FilePath}", &escape(path))
        .replace("${FileName}", &escape(name))
}

/// The files some process (of those this agent may inspect) has open for writing, from
/// `/proc/<pid>/fd` and the access mode in `/proc/<pid>/fdinfo`.
fn open_for_writing() -> HashSet<PathBuf> {
    let mut set = HashSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return set;
    };
    for p in procs.filter_map(|e| e.ok()) {
        let pid = p.file_name();
        if !pid.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(|e| e.ok()) {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if !target.is_absolute() {
                continue;
            }
            let info = p.path().join("fdinfo").join(fd.file_name());
            let flags = std::fs::read_to_string(info).ok().and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            });
            // O_ACCMODE: 1 write only, 2 read and write.
            if flags.is_some_and(|f| f & 3 != 0) {
                set.insert(target);
            }
        }
    }
    set
}

/// What a monitor remembers of the files it saw.
#[derive(Default)]
struct Seen {
    /// Size, modification time and polls unchanged, of each candidate file.
    files: HashMap<String, ((u64, i64), u32)>,
    /// Files that fired: name, size and modification time.
    fired: HashSet<String>,
    loaded: bool,
    next_poll: Option<Instant>,
}

fn fired_key(name: &str, ident: (u64, i64)) -> String {
    format!("{name}\t{}\t{}", ident.0, ident.1)
}

/// Runs the agent's monitors until the process ends.
pub fn run(home: &Path, c: Connection, p: &AgentProps) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    loop {
        std::thread::sleep(Duration::from_millis(FTE_MONITOR_POLL_MIN_MS));
        let monitors = load_all(home, &p.agent_name);
        seen.retain(|k, _| monitors.iter().any(|m| &m.name == k));
        for m in monitors {
            let s = seen.entry(m.name.clone()).or_default();
            if s.next_poll.is_some_and(|t| Instant::now() < t) {
                continue;
            }
            s.next_poll = Some(Instant::now() + Duration::from_millis(m.poll_ms));
            if let Err(e) = poll(home, &c, p, &m, s) {
                eprintln!("fte agent {}: monitor {}: {e}", p.agent_name, m.name);
            }
        }
    }
}

fn poll(home: &Path, c: &Connection, p: &AgentProps, m: &Monitor, s: &mut Seen) -> Result<()> {
    let d = dir(home, &p.agent_name);
    let fired_path = d.join(format!("{}.fired", m.name));
    if !s.loaded {
        s.loaded = true;
        if let Ok(t) = std::fs::read_to_string(&fired_path) {
            s.fired = t.lines().map(str::to_string).collect();
        }
    }
    let mut present = HashSet::new();
    // Built once per poll, when a file is first ready to fire.
    let mut writing: Option<HashSet<PathBuf>> = None;
    let rd = std::fs::read_dir(&m.directory).map_err(io(Path::new(&m.directory)))?;
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !crate::sender::wildcard_match(m.pattern.as_bytes(), name.as_bytes()) {
            continue;
        }
        let Ok(md) = e.metadata() else { continue };
        if !md.is_file() {
            continue;
        }
        let ident = {
            let (size, mtime) = crate::sender::ident_of(&md);
            (size.max(0) as u64, mtime)
        };
        present.insert(name.clone());
        if s.fired.contains(&fired_key(&name, ident)) {
            continue;
        }
        if s.files.len() >= FTE_MONITOR_FILES_MAX && !s.files.contains_key(&name) {
            continue;
        }
        let entry = s.files.entry(name.clone()).or_insert((ident, 0));
        if entry.0 == ident {
            entry.1 += 1;
        } else {
            *entry = (ident, 0);
        }
        if entry.1 < m.stable {
            continue;
        }
        let path = Path::new(&m.directory).join(&name);
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if writing.get_or_insert_with(open_for_writing).contains(&real) {
            continue;
        }
        // Recorded before the request is put: a crash between loses this trigger rather than
        // repeating it.
        let key = fired_key(&name, ident);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&fired_path)
            .map_err(io(&fired_path))?;
        f.write_all(format!("{key}\n").as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(io(&fired_path))?;
        s.fired.insert(key);
        s.files.remove(&name);
        let task =
            std::fs::read_to_string(d.join(format!("{}.task.xml", m.name))).map_err(io(&d))?;
        let xml = substitute(&task, &path.to_string_lossy(), &name);
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            format: "MQSTR".into(),
            ..Default::default()
        };
        let h = c.open(&queues::command(&p.agent_name), open::OUTPUT)?;
        c.put(
            &h,
            &md,
            &Properties::default(),
            Bytes::from(xml),
            &PutOptions::default(),
        )?;
        let _ = c.close(&h, 0);
        eprintln!(
            "fte agent {}: monitor {} fired for {}",
            p.agent_name,
            m.name,
            path.display()
        );
    }
    // Files gone are forgotten, except that they fired (a file that comes back with the same
    // size and time does not fire again).
    s.files.retain(|n, _| present.contains(n));
    Ok(())
}
