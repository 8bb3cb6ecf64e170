//! Resource monitors: an agent watches a directory (with inotify where the file system reports
//! changes, and by polling: a watched directory without events is not scanned, except every
//! `RESCAN_POLLS` polls), and when a file whose name matches the trigger pattern has kept the
//! same size and modification time for `stable` polls, was not written in between and no
//! process has it open for writing, submits the monitor's task (a transfer request's XML, with
//! `${FilePath}` and `${FileName}` replaced) to its own command queue, where it waits its turn
//! like any request. A file fires once: it is recorded (name, size, modification time) before
//! its request is put, so a crash can lose a trigger but never repeat one; it is forgotten once
//! it left the directory or changed (at most `FTE_MONITOR_FIRED_MAX` are remembered). A queue
//! monitor (`monitor_queue`) fires once for each message on a queue.
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
use ferrymq_types::limits::{
    FTE_MONITOR_FILES_MAX, FTE_MONITOR_FIRED_MAX, FTE_MONITOR_POLL_MIN_MS,
};
use ferrymq_types::options::{open, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use quick_xml::escape::escape;

use crate::props::{self, AgentProps};
use crate::request::TransferRequest;
use crate::{err, queues, FteError, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitor {
    pub name: String,
    /// The directory watched (empty for a queue monitor).
    pub directory: String,
    /// The queue watched instead of a directory (`-mq`).
    pub queue: Option<String>,
    /// `*`/`?` wildcard of the file names that trigger.
    pub pattern: String,
    pub poll_ms: u64,
    /// Polls a file's size and modification time must stay the same before it triggers.
    pub stable: u32,
}

pub(crate) fn dir(home: &Path, agent: &str) -> PathBuf {
    props::agent_dir(home, agent).join("monitors")
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> FteError + '_ {
    move |e| FteError(format!("{}: {e}", p.display()))
}

/// `fteCreateMonitor`: checks the task and writes the definition.
pub fn create(home: &Path, agent: &str, m: &Monitor, task_xml: &str) -> Result<String> {
    crate::commands::check_name(agent)?;
    crate::commands::check_name(&m.name)?;
    let p = props::load(home, agent)?;
    let probe = substitute(task_xml, "/probe/file.txt", "file.txt");
    TransferRequest::from_xml(&probe)?;
    if let Some(q) = &m.queue {
        if q.is_empty() || q.len() > 48 {
            return err(format!("{q}: not a queue name"));
        }
    } else if !Path::new(&m.directory).is_absolute() {
        return err(format!("{}: give an absolute directory", m.directory));
    } else {
        p.sandbox
            .check(Path::new(&m.directory), false)
            .map_err(FteError)?;
    }
    let d = dir(home, agent);
    std::fs::create_dir_all(&d).map_err(io(&d))?;
    let def = d.join(format!("{}.monitor", m.name));
    if def.exists() {
        return err(format!("monitor {} exists at agent {agent}", m.name));
    }
    let task = d.join(format!("{}.task.xml", m.name));
    std::fs::write(&task, task_xml).map_err(io(&task))?;
    let what = match &m.queue {
        Some(q) => format!("queue={q}"),
        None => format!("directory={}", m.directory),
    };
    let text = format!(
        "{what}\npattern={}\npollMs={}\nstable={}\n",
        m.pattern, m.poll_ms, m.stable
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
            out.push_str(&match &m.queue {
                Some(q) => format!(
                    "{a:<16} {:<16} queue {q}: each message, every {} ms\n",
                    m.name, m.poll_ms
                ),
                None => format!(
                    "{a:<16} {:<16} {} {} every {} ms, stable for {} polls\n",
                    m.name, m.directory, m.pattern, m.poll_ms, m.stable
                ),
            });
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
        queue: None,
        pattern: "*".into(),
        poll_ms: 60_000,
        stable: 2,
    };
    for l in text.lines() {
        let (k, v) = l.split_once('=')?;
        match k {
            "directory" => m.directory = v.to_string(),
            "queue" => m.queue = Some(v.to_string()),
            "pattern" => m.pattern = v.to_string(),
            "pollMs" => m.poll_ms = v.parse().ok()?,
            "stable" => m.stable = v.parse().ok()?,
            _ => {}
        }
    }
    (!m.directory.is_empty() || m.queue.is_some()).then_some(m)
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
    /// Files that fired, with their size and modification time, while they are still in the
    /// directory as they were (at most `FTE_MONITOR_FIRED_MAX`).
    fired: HashMap<String, (u64, i64)>,
    loaded: bool,
    next_poll: Option<Instant>,
    /// The directory's inotify watch, while it has one (else the monitor polls only).
    watch: Option<i32>,
    /// Something changed in the directory since the last scan (or the events overflowed).
    dirty: bool,
    /// Names inotify saw written since the last scan: their stable count starts again even if
    /// their size and modification time look the same.
    written: HashSet<String>,
    /// Polls since the last full scan of the directory.
    idle_polls: u32,
    /// Whether the monitor said it is full (said once until it is not).
    said_full: bool,
}

/// The fired file's line: name, size and modification time, tab-separated. A name may hold any
/// character a file name can, a line break too: `\` and line breaks are escaped (`\\`, `\n`,
/// `\r`), so that one name is always one line.
fn fired_line(name: &str, ident: (u64, i64)) -> String {
    let mut line = String::with_capacity(name.len() + 24);
    for c in name.chars() {
        match c {
            '\\' => line.push_str("\\\\"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            c => line.push(c),
        }
    }
    line.push_str(&format!("\t{}\t{}\n", ident.0, ident.1));
    line
}

fn parse_fired(text: &str) -> HashMap<String, (u64, i64)> {
    text.split('\n')
        .filter_map(|l| {
            let mut it = l.rsplitn(3, '\t');
            let mtime = it.next()?.parse().ok()?;
            let size = it.next()?.parse().ok()?;
            let mut name = String::new();
            let mut chars = it.next()?.chars();
            while let Some(c) = chars.next() {
                name.push(if c != '\\' {
                    c
                } else {
                    match chars.next() {
                        Some('n') => '\n',
                        Some('r') => '\r',
                        Some(other) => other,
                        None => '\\',
                    }
                });
            }
            Some((name, (size, mtime)))
        })
        .collect()
}

/// Rewrites the fired file with what is still remembered (a new file renamed over the old).
fn rewrite_fired(path: &Path, fired: &HashMap<String, (u64, i64)>) -> Result<()> {
    let tmp = path.with_extension("fired.new");
    let mut text = String::new();
    for (n, id) in fired {
        text.push_str(&fired_line(n, *id));
    }
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_data())
        .map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// The agent's inotify instance and which monitor each watch belongs to.
struct Watcher {
    inotify: Option<inotify::Inotify>,
    /// Watch id → its descriptor and the monitors watching that directory.
    owners: HashMap<i32, (inotify::WatchDescriptor, Vec<String>)>,
    buf: Vec<u8>,
}

fn watch_mask() -> inotify::WatchMask {
    use inotify::WatchMask as W;
    W::CREATE
        | W::MODIFY
        | W::CLOSE_WRITE
        | W::ATTRIB
        | W::MOVED_TO
        | W::MOVED_FROM
        | W::DELETE
        | W::DELETE_SELF
        | W::MOVE_SELF
}

impl Watcher {
    fn new() -> Watcher {
        Watcher {
            inotify: inotify::Inotify::init().ok(),
            owners: HashMap::new(),
            buf: vec![0; 64 * 1024],
        }
    }

    /// Watches the monitor's directory if it can (inotify may be missing, or out of watches,
    /// or the file system may not report changes: the monitor then polls).
    fn watch(&mut self, m: &Monitor, s: &mut Seen) {
        if s.watch.is_some() {
            return;
        }
        let Some(ino) = self.inotify.as_mut() else {
            return;
        };
        if let Ok(wd) = ino.watches().add(&m.directory, watch_mask()) {
            let id = wd.get_watch_descriptor_id();
            let (_, v) = self.owners.entry(id).or_insert_with(|| (wd, Vec::new()));
            if !v.contains(&m.name) {
                v.push(m.name.clone());
            }
            s.watch = Some(id);
            s.dirty = true;
        }
    }

    /// Reads the events so far into the monitors' state.
    fn drain(&mut self, seen: &mut HashMap<String, Seen>) {
        use inotify::EventMask as E;
        let Some(ino) = self.inotify.as_mut() else {
            return;
        };
        loop {
            let events = match ino.read_events(&mut self.buf) {
                Ok(ev) => ev,
                Err(_) => return,
            };
            let mut any = false;
            for ev in events {
                any = true;
                if ev.mask.contains(E::Q_OVERFLOW) {
                    for s in seen.values_mut() {
                        s.dirty = true;
                    }
                    continue;
                }
                let id = ev.wd.get_watch_descriptor_id();
                let gone = ev
                    .mask
                    .intersects(E::IGNORED | E::DELETE_SELF | E::MOVE_SELF);
                for owner in self.owners.get(&id).into_iter().flat_map(|(_, v)| v) {
                    if let Some(s) = seen.get_mut(owner) {
                        s.dirty = true;
                        if gone {
                            // Watched again (if it comes back) at the next poll.
                            s.watch = None;
                        }
                        if let Some(n) = ev.name {
                            if ev.mask.contains(E::MODIFY) {
                                s.written.insert(n.to_string_lossy().into_owned());
                            }
                        }
                    }
                }
                if gone {
                    self.owners.remove(&id);
                }
            }
            if !any {
                return;
            }
        }
    }

    fn forget(&mut self, name: &str, s: &Seen) {
        let Some(id) = s.watch else { return };
        if let Some((wd, v)) = self.owners.get_mut(&id) {
            v.retain(|n| n != name);
            if v.is_empty() {
                let wd = wd.clone();
                self.owners.remove(&id);
                if let Some(ino) = self.inotify.as_mut() {
                    let _ = ino.watches().remove(wd);
                }
            }
        }
    }
}

/// Runs the agent's monitors until the process ends.
pub fn run(home: &Path, c: Connection, p: &AgentProps) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut watcher = Watcher::new();
    let cmd_q = loop {
        match c.open(&queues::command(&p.agent_name), open::OUTPUT) {
            Ok(h) => break h,
            Err(e) if crate::sender::lost(&e) => crate::agent::reconnect(),
            Err(e) => {
                eprintln!("fte agent {}: monitors: {e}", p.agent_name);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    loop {
        std::thread::sleep(Duration::from_millis(FTE_MONITOR_POLL_MIN_MS));
        let monitors = load_all(home, &p.agent_name);
        let gone: Vec<String> = seen
            .keys()
            .filter(|k| !monitors.iter().any(|m| &m.name == *k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(s) = seen.remove(&k) {
                watcher.forget(&k, &s);
            }
        }
        watcher.drain(&mut seen);
        for m in monitors {
            let s = seen.entry(m.name.clone()).or_default();
            if s.next_poll.is_some_and(|t| Instant::now() < t) {
                continue;
            }
            s.next_poll = Some(Instant::now() + Duration::from_millis(m.poll_ms));
            let r = match &m.queue {
                Some(q) => crate::monitor_queue::poll(home, &c, &cmd_q, p, &m, q),
                None => {
                    watcher.watch(&m, s);
                    poll(home, &c, &cmd_q, p, &m, s)
                }
            };
            if let Err(e) = r {
                if e.lost {
                    crate::agent::reconnect();
                }
                eprintln!("fte agent {}: monitor {}: {}", p.agent_name, m.name, e.err);
            }
        }
    }
}

/// A monitor's failure, and whether it was the loss of the queue manager.
pub(crate) struct PollError {
    pub err: FteError,
    pub lost: bool,
}

impl From<FteError> for PollError {
    fn from(err: FteError) -> Self {
        PollError { err, lost: false }
    }
}

impl From<ferrymq_types::MqError> for PollError {
    fn from(e: ferrymq_types::MqError) -> Self {
        PollError {
            lost: crate::sender::lost(&e),
            err: e.into(),
        }
    }
}

/// Puts a triggered task on the agent's command queue.
pub(crate) fn put_task(
    c: &Connection,
    cmd_q: &ferrymq_client::ObjectHandle,
    xml: String,
    opts: &PutOptions,
) -> std::result::Result<(), PollError> {
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    c.put(cmd_q, &md, &Properties::default(), Bytes::from(xml), opts)?;
    Ok(())
}

/// Polls of a watched directory without events after which it is scanned anyway (a change
/// inotify did not report, e.g. on a network file system, is seen this late at most).
const RESCAN_POLLS: u32 = 10;

fn poll(
    home: &Path,
    c: &Connection,
    cmd_q: &ferrymq_client::ObjectHandle,
    p: &AgentProps,
    m: &Monitor,
    s: &mut Seen,
) -> std::result::Result<(), PollError> {
    let d = dir(home, &p.agent_name);
    let fired_path = d.join(format!("{}.fired", m.name));
    if !s.loaded {
        s.loaded = true;
        s.dirty = true;
        if let Ok(t) = std::fs::read_to_string(&fired_path) {
            s.fired = parse_fired(&t);
        }
    }
    // A watched directory without news and no file on its way to firing needs no scan.
    s.idle_polls += 1;
    if s.watch.is_some() && !s.dirty && s.files.is_empty() && s.idle_polls < RESCAN_POLLS {
        return Ok(());
    }
    s.idle_polls = 0;
    s.dirty = false;
    let written = std::mem::take(&mut s.written);
    let mut present: HashMap<String, (u64, i64)> = HashMap::new();
    let mut ready: Vec<(String, (u64, i64))> = Vec::new();
    // Built once per poll, when a file is first ready to fire.
    let mut writing: Option<HashSet<PathBuf>> = None;
    // The sandbox as it is now (agent.properties may have changed since the monitor was made).
    p.sandbox
        .check(Path::new(&m.directory), false)
        .map_err(FteError)?;
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
        present.insert(name.clone(), ident);
        if s.fired.get(&name) == Some(&ident) {
            continue;
        }
        if s.files.len() >= FTE_MONITOR_FILES_MAX && !s.files.contains_key(&name) {
            continue;
        }
        let entry = s.files.entry(name.clone()).or_insert((ident, 0));
        if entry.0 == ident && !written.contains(&name) {
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
        ready.push((name, ident));
    }
    // Files gone (or changed) are forgotten: a file of the same name that comes later fires.
    s.files.retain(|n, _| present.contains_key(n));
    let before = s.fired.len();
    s.fired.retain(|n, id| present.get(n) == Some(id));
    let forgot = s.fired.len() < before;
    let room = FTE_MONITOR_FIRED_MAX.saturating_sub(s.fired.len());
    if ready.len() > room {
        if !s.said_full {
            eprintln!(
                "fte agent {}: monitor {}: {} files fired and still in {}: the others wait \
                 until some leave it",
                p.agent_name,
                m.name,
                s.fired.len(),
                m.directory
            );
        }
        s.said_full = true;
        ready.truncate(room);
    } else {
        s.said_full = false;
    }
    if ready.is_empty() {
        if forgot {
            rewrite_fired(&fired_path, &s.fired)?;
        }
        return Ok(());
    }
    // Recorded (synced, all of this poll's at once) before the requests are put: a crash in
    // between loses these triggers rather than repeating them.
    for (n, id) in &ready {
        s.fired.insert(n.clone(), *id);
        s.files.remove(n);
    }
    if forgot {
        rewrite_fired(&fired_path, &s.fired)?;
    } else {
        let mut text = String::new();
        for (n, id) in &ready {
            text.push_str(&fired_line(n, *id));
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&fired_path)
            .map_err(io(&fired_path))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(io(&fired_path))?;
    }
    let task = std::fs::read_to_string(d.join(format!("{}.task.xml", m.name))).map_err(io(&d))?;
    for (name, _) in &ready {
        let path = Path::new(&m.directory).join(name);
        let xml = substitute(&task, &path.to_string_lossy(), name);
        put_task(c, cmd_q, xml, &PutOptions::default())?;
        eprintln!(
            "fte agent {}: monitor {} fired for {}",
            p.agent_name,
            m.name,
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fired_file_keeps_every_name_whole_whatever_characters_it_holds() {
        let names = [
            "plain.csv",
            "two\nlines.csv",
            "cr\r\nlf.csv",
            "tab\there.csv",
            "back\\slash\\n.csv",
            "ends\\",
            "ünïcödé 文件.txt",
        ];
        let mut text = String::new();
        for (i, n) in names.iter().enumerate() {
            text.push_str(&fired_line(n, (i as u64 * 10, -(i as i64))));
        }
        assert_eq!(
            text.lines().count(),
            names.len(),
            "one line per name:\n{text}"
        );
        let back = parse_fired(&text);
        assert_eq!(back.len(), names.len());
        for (i, n) in names.iter().enumerate() {
            assert_eq!(back.get(*n), Some(&(i as u64 * 10, -(i as i64))), "{n:?}");
        }
        // A line cut short by a crash is left out, the others kept.
        let cut = format!("{}{}", text, "half\t12");
        assert_eq!(parse_fired(&cut).len(), names.len());
    }
}
