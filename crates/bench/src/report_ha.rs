//! `ferrymq report ha [--quick] [--out DIR] [--rtts 0,1,2,5,10] [--failover-messages 0,500000]
//! [--requesters 1,2,4,...] [--distance-requesters 16,64,256] [--steps ha1,ha2,distance,failover]`:
//! the HA benchmark report. In a private $FERRYMQ_HOME it creates standalone queue managers and
//! groups of three HA instances (each instance its own home directory, client port and
//! replication address, all on this machine) and measures:
//!
//! 1. HA1: one HA group against one standalone queue manager, 2 KB persistent Request/Responder
//!    (the `report standalone` workload), requesters swept upward until the rate stops rising;
//! 2. HA2 (full mode only): two HA groups (six instance processes) against two standalone queue
//!    managers;
//! 3. distance: one HA group with `ferrymq relay` processes in front of every instance's
//!    replication port adding 0, 1, 2, 5, 10 ms of round trip, against a group without relays;
//! 4. failover: N persistent messages loaded, a marker put, the active instance killed with
//!    SIGKILL, and the time until an already connected client gets the marker from the new active
//!    instance, with the loaded queue's depth checked afterwards.
//!
//! It writes README.md (tables), one SVG chart per sweep and runs.json (every raw run) to DIR.
//! Every queue manager, instance and relay it starts is stopped again (also when a step fails)
//! and the private home is deleted at the end.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrymq_client::{
    open, ConnectOptions, Connection, GetOptions, Persistence, PutOptions, Reconnect, Syncpoint,
    Wait,
};
use ferrymq_types::{MessageDescriptor, Properties};
use serde::Serialize;

use crate::cph::{self, Args, RunResult};
use crate::qm::{ferrymq_bin, free_port, mq};
use crate::report::Qms;

/// The HA queue manager's name in a one-group step.
const QM: &str = "HAQM";
const INSTANCES: [&str; 3] = ["a", "b", "c"];
const MSG_SIZE: usize = 2048;
/// Queue pairs per queue manager, as `report standalone`.
const QUEUE_PAIRS: usize = 10;

/// Responders per queue manager for a run with `requesters`: as many as requesters, between 10
/// and 128. Each responder waits for one commit per request, so with a fixed 10 the responders,
/// not the queue manager, set the rate once commits take milliseconds (replication latency):
/// the seeds' reports ran 300. Standalone and HA runs use the same count.
fn responders_for(requesters: usize) -> usize {
    requesters.clamp(QUEUE_PAIRS, 128)
}
/// Log geometry of every queue manager and instance: 3 primary files of this many pages.
const LOG_PAGES: u32 = 4096;
/// Failover load: concurrent putters, each committing every this many messages.
const LOAD_PUTTERS: usize = 8;
const LOAD_COMMIT_EVERY: u64 = 50;
const LOAD_QUEUE: &str = "HA.LOAD";
const MARKER_QUEUE: &str = "HA.MARKER";
/// How long an HA group may take to elect and activate an instance.
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(30);
const ACTIVE_POLL: Duration = Duration::from_millis(100);
/// An active instance must stay active (no new activation in its log) this long to count.
const ACTIVE_STABLE: Duration = Duration::from_secs(1);
/// How long instances get to end after `endmqm -i` before they are killed.
const END_GRACE: Duration = Duration::from_secs(3);
/// Targets the report is checked against.
const TARGET_HA1_PCT: f64 = 85.0;
const TARGET_DISTANCE: [(f64, f64); 2] = [(1.0, 60.0), (10.0, 20.0)];
const TARGET_FAILOVER_MS: f64 = 2000.0;

const USAGE: &str = "usage: ferrymq report ha [--quick] [--out DIR] [--rtts 0,1,2,5,10] \
[--failover-messages 0,500000] [--requesters 1,2,4,8,...] [--distance-requesters 16,64,256] \
[--steps ha1,ha2,distance,failover]";

const STEPS: [&str; 4] = ["ha1", "ha2", "distance", "failover"];

#[derive(Debug, Clone, PartialEq)]
struct Opts {
    quick: bool,
    out: PathBuf,
    /// Round trips (ms) added on the replication links, one distance row each (0 = relays only).
    rtts: Vec<f64>,
    failover_messages: Vec<u64>,
    requesters: Vec<usize>,
    distance_requesters: Vec<usize>,
    steps: Vec<String>,
    warmup: Duration,
    duration: Duration,
    /// The command line as given, for the report header.
    command: String,
}

/// Parses a comma-separated list for `flag`; empty entries and an empty list are errors.
fn parse_list<T: FromStr>(flag: &str, text: &str) -> Result<Vec<T>, String> {
    let v: Vec<T> = text
        .split(',')
        .map(|s| {
            let s = s.trim();
            s.parse()
                .map_err(|_| format!("{flag}: '{s}' is not a valid number"))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("{flag} needs at least one value"));
    }
    Ok(v)
}

fn parse_rtts(text: &str) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = parse_list("--rtts", text)?;
    if let Some(bad) = v.iter().find(|r| !(0.0..=60_000.0).contains(*r)) {
        return Err(format!(
            "--rtts: {bad} is not a round trip in ms between 0 and 60000"
        ));
    }
    Ok(v)
}

/// Quotes an argument for the header's command line when a shell would need it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./,=:@%+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

impl Opts {
    fn parse(argv: &[String]) -> Result<Opts, String> {
        let quick = argv.iter().any(|a| a == "--quick");
        let mut o = Opts {
            quick,
            out: PathBuf::from("ha-report"),
            rtts: vec![0.0, 1.0, 2.0, 5.0, 10.0],
            failover_messages: if quick {
                vec![0, 20_000]
            } else {
                vec![0, 500_000]
            },
            requesters: if quick {
                vec![8, 32, 128, 256]
            } else {
                vec![1, 2, 4, 8, 16, 32, 64, 128, 256]
            },
            // Under latency each requester waits longer per round trip, so more of them are
            // needed before the rate stops rising (the seeds' sweeps went to 300).
            distance_requesters: if quick {
                vec![64, 256, 1024]
            } else {
                vec![16, 64, 256, 512, 1024]
            },
            steps: STEPS
                .iter()
                .filter(|s| !quick || **s != "ha2")
                .map(|s| s.to_string())
                .collect(),
            warmup: Duration::from_secs(if quick { 1 } else { 2 }),
            duration: Duration::from_secs(if quick { 3 } else { 8 }),
            command: std::iter::once("ferrymq report ha".to_string())
                .chain(argv.iter().map(|a| shell_word(a)))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut i = 0;
        while i < argv.len() {
            let flag = argv[i].as_str();
            if flag == "--quick" {
                i += 1;
                continue;
            }
            let value = argv
                .get(i + 1)
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            match flag {
                "--out" => o.out = PathBuf::from(value),
                "--rtts" => o.rtts = parse_rtts(value)?,
                "--failover-messages" => o.failover_messages = parse_list(flag, value)?,
                "--requesters" => o.requesters = parse_list(flag, value)?,
                "--distance-requesters" => o.distance_requesters = parse_list(flag, value)?,
                "--steps" => {
                    o.steps = value.split(',').map(|s| s.trim().to_string()).collect();
                    if let Some(bad) = o.steps.iter().find(|s| !STEPS.contains(&s.as_str())) {
                        return Err(format!(
                            "--steps: '{bad}' is not one of {}",
                            STEPS.join(",")
                        ));
                    }
                }
                _ => return Err(format!("unknown option '{flag}'\n{USAGE}")),
            }
            i += 2;
        }
        if o.requesters.contains(&0) || o.distance_requesters.contains(&0) {
            return Err("requester counts must be at least 1".into());
        }
        Ok(o)
    }

    fn step(&self, name: &str) -> bool {
        self.steps.iter().any(|s| s == name)
    }
}

// ---------------------------------------------------------------------------------------------
// Processes: relays, HA groups, liveness.

/// Ports in LISTEN state in a /proc/net/tcp{,6} table.
fn listening_ports(table: &str) -> Vec<u16> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(3) != Some(&"0A") {
                return None;
            }
            u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

fn is_listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|p| {
        std::fs::read_to_string(p)
            .map(|t| listening_ports(&t).contains(&port))
            .unwrap_or(false)
    })
}

/// Waits until something listens on `port`; `check` may give up early with an error.
fn wait_listening(
    port: u16,
    timeout: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<bool, String> {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if is_listening(port) {
            return Ok(true);
        }
        check()?;
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(false)
}

/// `count` distinct free loopback ports.
fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let mut v: Vec<u16> = Vec::new();
    let mut tries = 0;
    while v.len() < count {
        let p = free_port()?;
        if !v.contains(&p) {
            v.push(p);
        }
        tries += 1;
        if tries > count * 20 {
            return Err("cannot find enough free TCP ports".into());
        }
    }
    Ok(v)
}

/// A process of ours still running (not gone, not a zombie)?
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(st) => st
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
    }
}

/// SIGKILLs `pid` (with the `kill` command: this crate has no unsafe code for kill(2)).
fn kill9(pid: u32) -> Result<(), String> {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("kill -9 {pid}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("kill -9 {pid} failed ({st})"))
    }
}

/// Pids of every process the report started and has not stopped yet (instances, standalone
/// queue managers, relays), for the interrupt handler.
static LIVE: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

fn register(pid: u32) {
    if let Ok(mut l) = LIVE.lock() {
        l.push(pid);
    }
}

fn unregister(pid: u32) {
    if let Ok(mut l) = LIVE.lock() {
        l.retain(|p| *p != pid);
    }
}

/// On SIGINT or SIGTERM: kill every process the report started, delete its private home and
/// exit, so an interrupted report leaves nothing running (instances run in their own process
/// groups and would not see a terminal's Ctrl-C).
fn stop_on_interrupt(home: PathBuf) {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        let interrupted = rt.block_on(async {
            let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            else {
                return false;
            };
            tokio::select! {
                r = tokio::signal::ctrl_c() => r.is_ok(),
                _ = term.recv() => true,
            }
        });
        if !interrupted {
            return;
        }
        eprintln!("report: interrupted; stopping everything it started");
        let pids: Vec<u32> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
        for pid in pids {
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("ferrymq"))
                .unwrap_or(false);
            if ours && alive(pid) {
                let _ = kill9(pid);
            }
        }
        let _ = std::fs::remove_dir_all(&home);
        std::process::exit(130);
    });
}

/// The instance that reports itself active in `dspmq -o ha` output: its own row
/// (`LOCAL(YES)`) with `ROLE(Active)`.
fn local_active(dspmq: &str) -> Option<String> {
    dspmq
        .lines()
        .find(|l| l.contains("LOCAL(YES)") && l.contains("ROLE(Active)"))
        .and_then(|l| field(l, "INSTANCE"))
}

/// The value of `NAME(value)` in an MQSC-style line.
fn field(line: &str, name: &str) -> Option<String> {
    let key = format!("{name}(");
    let mut from = 0;
    while let Some(at) = line[from..].find(&key) {
        let start = from + at;
        // A whole word: not the tail of a longer name (CURDEPTH inside XCURDEPTH).
        if start == 0 || !line.as_bytes()[start - 1].is_ascii_alphanumeric() {
            let rest = &line[start + key.len()..];
            return rest.find(')').map(|end| rest[..end].trim().to_string());
        }
        from = start + key.len();
    }
    None
}

/// CURDEPTH from MQSC DISPLAY output.
fn parse_curdepth(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| field(l, "CURDEPTH"))
        .and_then(|v| v.parse().ok())
}

/// From an instance's qm.log: the last "is now the active instance ... N ms after its election".
fn parse_activation_ms(log: &str) -> Option<u64> {
    log.lines()
        .rev()
        .find(|l| l.contains("is now the active instance"))
        .and_then(|l| {
            let head = l.split(" ms after its election").next()?;
            head.rsplit(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
}

/// How many times an instance's log says it became the active instance.
fn activations(log: &str) -> usize {
    log.matches("is now the active instance").count()
}

/// Lines of a queue manager log worth a reader's attention.
fn notable(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "error",
        "panic",
        "warn",
        "fail",
        "restarting",
        "cannot",
        "lost",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// A `ferrymq relay` child process in front of one replication port.
struct Relay {
    child: Child,
    listen: u16,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(self.child.id());
    }
}

impl Relay {
    fn start(listen: u16, target: u16, rtt_ms: f64, log: &Path) -> Result<Relay, String> {
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new(ferrymq_bin()?)
            .args([
                "relay",
                "--listen",
                &format!("127.0.0.1:{listen}"),
                "--target",
                &format!("127.0.0.1:{target}"),
                "--rtt-ms",
                &rtt_ms.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot start ferrymq relay: {e}"))?;
        register(child.id());
        let mut r = Relay { child, listen };
        let up = wait_listening(listen, Duration::from_secs(10), || {
            match r.child.try_wait() {
                Ok(Some(st)) => Err(format!(
                    "ferrymq relay on port {listen} ended ({st}): {}",
                    std::fs::read_to_string(log).unwrap_or_default().trim()
                )),
                _ => Ok(()),
            }
        })?;
        if !up {
            return Err(format!(
                "ferrymq relay did not listen on port {} within 10 s",
                r.listen
            ));
        }
        Ok(r)
    }
}

/// Three instances of one HA queue manager on this machine, optionally with relays on the
/// replication links. Dropping it ends every instance and relay and deletes its directories.
struct HaGroup {
    root: PathBuf,
    qm: String,
    client_ports: Vec<u16>,
    /// Where each instance binds its replication listener.
    repl_ports: Vec<u16>,
    rtt_ms: Option<f64>,
    /// Instances created so far (for cleanup after a partial start).
    created: usize,
    pids: Vec<u32>,
    relays: Vec<Relay>,
}

impl HaGroup {
    fn inst_home(&self, i: usize) -> PathBuf {
        self.root.join(INSTANCES[i])
    }

    fn qm_dir(&self, i: usize) -> PathBuf {
        self.inst_home(i).join("qmgrs").join(&self.qm)
    }

    /// The client connection name list of the group.
    fn conn_list(&self) -> String {
        self.client_ports
            .iter()
            .map(|p| format!("127.0.0.1({p})"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Creates and starts the group. With `rtt_ms`, the instances' addresses in the group list
    /// are relay ports; each instance binds its real port (qm.ini NativeHA:LocalAddress) and a
    /// relay in front of it adds `rtt_ms` to every round trip into it.
    fn start(root: &Path, qm: &str, rtt_ms: Option<f64>) -> Result<HaGroup, String> {
        let n = INSTANCES.len();
        let ports = free_ports(if rtt_ms.is_some() { 3 * n } else { 2 * n })?;
        let mut g = HaGroup {
            root: root.to_path_buf(),
            qm: qm.to_string(),
            client_ports: ports[..n].to_vec(),
            repl_ports: ports[n..2 * n].to_vec(),
            rtt_ms,
            created: 0,
            pids: Vec::new(),
            relays: Vec::new(),
        };
        let listed: Vec<u16> = if rtt_ms.is_some() {
            ports[2 * n..].to_vec()
        } else {
            g.repl_ports.clone()
        };
        let list = INSTANCES
            .iter()
            .zip(&listed)
            .map(|(name, p)| format!("{name}=127.0.0.1({p})"))
            .collect::<Vec<_>>()
            .join(",");
        if let Some(rtt) = rtt_ms {
            std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
            for (i, name) in INSTANCES.iter().enumerate() {
                let log = root.join(format!("relay-{name}.log"));
                g.relays
                    .push(Relay::start(listed[i], g.repl_ports[i], rtt, &log)?);
            }
        }
        for (i, name) in INSTANCES.iter().enumerate() {
            let home = g.inst_home(i);
            std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
            mq(
                &home,
                &[
                    "crtmqm",
                    "-p",
                    &g.client_ports[i].to_string(),
                    "-lp",
                    "3",
                    "-lf",
                    &LOG_PAGES.to_string(),
                    "-ha",
                    &list,
                    "-hi",
                    name,
                    qm,
                ],
            )?;
            g.created += 1;
            if rtt_ms.is_some() {
                mq(
                    &home,
                    &[
                        "setmqini",
                        "-m",
                        qm,
                        "-s",
                        "NativeHA",
                        "-k",
                        "LocalAddress",
                        "-v",
                        &format!("127.0.0.1:{}", g.repl_ports[i]),
                    ],
                )?;
            }
        }
        let hint = "the distance step needs qm.ini NativeHA:LocalAddress (the address an instance \
                    binds for replication, overriding its entry in Instances); this ferrymq build \
                    does not seem to honour it";
        for (i, name) in INSTANCES.iter().enumerate() {
            let home = g.inst_home(i);
            mq(&home, &["strmqm", qm]).map_err(|e| match rtt_ms {
                Some(_) => format!("{e}\n{hint}"),
                None => e,
            })?;
            let pid = std::fs::read_to_string(g.qm_dir(i).join("qm.pid"))
                .map_err(|e| format!("instance {name}: qm.pid: {e}"))?;
            let pid: u32 = pid
                .trim()
                .parse()
                .map_err(|_| format!("instance {name}: bad qm.pid"))?;
            register(pid);
            g.pids.push(pid);
        }
        for (i, name) in INSTANCES.iter().enumerate() {
            let pid = g.pids[i];
            let up = wait_listening(g.repl_ports[i], Duration::from_secs(10), || {
                if alive(pid) {
                    Ok(())
                } else {
                    Err(format!("instance {name} (pid {pid}) ended; see its log"))
                }
            })?;
            if !up {
                let mut m = format!(
                    "instance {} of {qm} does not listen for replication on 127.0.0.1:{}",
                    INSTANCES[i], g.repl_ports[i]
                );
                if rtt_ms.is_some() {
                    let _ = write!(m, " (its NativeHA:LocalAddress)\n{hint}");
                }
                return Err(m);
            }
        }
        Ok(g)
    }

    /// Polls `dspmq -o ha` on the instances (all but `skip`) every 100 ms until one says it is
    /// the active instance and listens on its client port, and is still so a second later
    /// without having been activated again (an instance may restart right after its first
    /// activation); returns its index.
    fn wait_active(&self, timeout: Duration, skip: Option<usize>) -> Result<usize, String> {
        let t = Instant::now();
        let mut last = String::new();
        // The instance seen active, when, and how many activations its log held then.
        let mut seen: Option<(usize, Instant, usize)> = None;
        loop {
            let mut now_active = None;
            for i in (0..self.created).filter(|i| Some(*i) != skip) {
                match mq(&self.inst_home(i), &["dspmq", "-o", "ha", "-m", &self.qm]) {
                    Ok(out) => {
                        let k = local_active(&out)
                            .and_then(|name| INSTANCES.iter().position(|n| *n == name));
                        last = out;
                        if let Some(k) = k.filter(|k| is_listening(self.client_ports[*k])) {
                            now_active = Some(k);
                            break;
                        }
                    }
                    Err(e) => last = e,
                }
            }
            match (now_active, seen) {
                (Some(k), Some((s, since, n))) if k == s && activations(&self.log(k)) == n => {
                    if since.elapsed() >= ACTIVE_STABLE {
                        return Ok(k);
                    }
                }
                (Some(k), _) => seen = Some((k, Instant::now(), activations(&self.log(k)))),
                (None, _) => seen = None,
            }
            if t.elapsed() > timeout {
                return Err(format!(
                    "no instance of {} became (and stayed) active within {} s; last status:\n{}\n{}",
                    self.qm,
                    timeout.as_secs(),
                    last.trim(),
                    self.findings().join("\n")
                ));
            }
            std::thread::sleep(ACTIVE_POLL);
        }
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.qm_dir(i).join("errors").join("qm.log")).unwrap_or_default()
    }

    /// Notable lines of the instances' logs (errors, warnings, restarts), at most 12 per instance.
    fn findings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, name) in INSTANCES.iter().enumerate().take(self.created) {
            let log = self.log(i);
            let lines: Vec<&str> = log.lines().filter(|l| notable(l)).collect();
            let skipped = lines.len().saturating_sub(12);
            for l in lines.iter().take(12) {
                let l: String = l.chars().take(300).collect();
                out.push(format!(
                    "[{}] {} instance {name}: {}",
                    self.tag(),
                    self.qm,
                    l.trim()
                ));
            }
            if skipped > 0 {
                out.push(format!(
                    "[{}] {} instance {name}: ... and {skipped} more such lines",
                    self.tag(),
                    self.qm
                ));
            }
        }
        out
    }

    /// The group's directory name, which says which step it belongs to.
    fn tag(&self) -> String {
        self.root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn label(&self) -> String {
        match self.rtt_ms {
            None => format!("{} (direct replication links)", self.qm),
            Some(r) => format!("{} (relays adding {r} ms round trip)", self.qm),
        }
    }
}

impl Drop for HaGroup {
    fn drop(&mut self) {
        for i in 0..self.created {
            let _ = mq(&self.inst_home(i), &["endmqm", "-i", &self.qm]);
        }
        let t = Instant::now();
        while self.pids.iter().any(|p| alive(*p)) && t.elapsed() < END_GRACE {
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut killed = Vec::new();
        for &pid in &self.pids {
            // Only our instance processes: a pid reused by something else is left alone.
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("run-qmgr"))
                .unwrap_or(false);
            if alive(pid) && ours && kill9(pid).is_ok() {
                killed.push(pid.to_string());
            }
        }
        if !killed.is_empty() {
            eprintln!(
                "report: {}: endmqm -i did not end instance pid(s) {} within {} s; killed them",
                self.qm,
                killed.join(", "),
                END_GRACE.as_secs()
            );
        }
        for i in 0..self.created {
            let _ = mq(&self.inst_home(i), &["dltmqm", &self.qm]);
        }
        for &pid in &self.pids {
            unregister(pid);
        }
        self.relays.clear();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

// ---------------------------------------------------------------------------------------------
// Results.

#[derive(Serialize)]
struct CompareRow {
    requesters: usize,
    standalone: RunResult,
    ha: RunResult,
    /// CPU of the active instances alone (percent of one core): what one host of a group whose
    /// instances have their own hosts, as the appliances do, would spend.
    ha_active_cpu_pct: Option<f64>,
}

impl CompareRow {
    /// Round trips per CPU-second of the active instances, as a percentage of the standalone
    /// queue managers' round trips per CPU-second: the per-core comparison of BENCHMARK.md.
    fn per_core_pct(&self) -> Option<f64> {
        let s = self.standalone.round_trips_per_s / self.standalone.server_cpu_pct?;
        let h = self.ha.round_trips_per_s / self.ha_active_cpu_pct?;
        pct(h, s)
    }
}

#[derive(Serialize)]
struct Comparison {
    name: String,
    queue_managers: usize,
    ha_processes: usize,
    rows: Vec<CompareRow>,
}

#[derive(Serialize)]
struct DistanceRow {
    /// None: no relays (direct replication links).
    rtt_ms: Option<f64>,
    runs: Vec<RunResult>,
}

#[derive(Serialize)]
struct FailoverResult {
    messages: u64,
    load_s: f64,
    killed_instance: String,
    killed_pid: u32,
    new_active: Option<String>,
    kill_to_get_ms: Option<f64>,
    /// From the kill until another instance listens on its client port (polled every 2 ms).
    kill_to_listening_ms: Option<f64>,
    activation_ms_after_election: Option<u64>,
    depth_after: Option<u64>,
    marker_depth_after: Option<u64>,
    reconnects: u64,
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    command: String,
    version: String,
    date: String,
    cores: usize,
    cpu_model: String,
    kernel: String,
    quick: bool,
    warmup_s: f64,
    duration_s: f64,
    elapsed_s: f64,
    msg_size: usize,
    failover_messages: Vec<u64>,
    ha1: Option<Comparison>,
    ha2: Option<Comparison>,
    distance: Vec<DistanceRow>,
    failover: Vec<FailoverResult>,
    /// Notable lines from the instances' logs.
    log_findings: Vec<String>,
    errors: Vec<String>,
}

fn best(runs: &[RunResult]) -> Option<&RunResult> {
    runs.iter()
        .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s))
}

fn pct(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b * 100.0)
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

fn met(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements.

fn rr_args(
    o: &Opts,
    qms: Vec<String>,
    conns: Vec<String>,
    pids: Vec<u32>,
    requesters: usize,
) -> Args {
    let nqm = qms.len();
    Args {
        module: cph::Module::Rr,
        qms,
        conns,
        requesters,
        responders: responders_for(requesters) * nqm,
        size: MSG_SIZE,
        persistent: true,
        syncpoint: None,
        duration: o.duration,
        warmup: o.warmup,
        queues: QUEUE_PAIRS,
        request_prefix: "REQUEST".into(),
        reply_prefix: "REPLY".into(),
        rate: 0,
        json: false,
        live: false,
        server_pids: pids,
        setup: true,
        client_threads: 1,
    }
}

fn run_logged(label: &str, a: &Args) -> Result<RunResult, String> {
    let r = cph::run(a).map_err(|e| format!("{label}, {} requesters: {e}", a.requesters))?;
    eprintln!(
        "report:   {label:<24} {:>4} requesters: {:>8.0} RT/s  QM CPU {:>5.1}%  client CPU {:>5.1}%  p50 {:.2} ms{}",
        a.requesters,
        r.round_trips_per_s,
        r.server_cpu_pct.unwrap_or(0.0),
        r.client_cpu_pct,
        r.latency_ms_p50,
        if r.errors > 0 {
            format!(
                "  {} errors: {}",
                r.errors,
                r.first_error.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        }
    );
    Ok(r)
}

/// Tracks a sweep: stops once two steps in a row add less than 5% to every series' best.
struct Flat {
    best: Vec<f64>,
    flat: usize,
}

impl Flat {
    fn new(series: usize) -> Flat {
        Flat {
            best: vec![0.0; series],
            flat: 0,
        }
    }

    /// Records one step's rates; true when the sweep should stop.
    fn step(&mut self, rates: &[f64]) -> bool {
        let mut rose = false;
        for (b, r) in self.best.iter_mut().zip(rates) {
            if *r > *b * 1.05 {
                rose = true;
            }
            *b = b.max(*r);
        }
        if rose {
            self.flat = 0;
        } else {
            self.flat += 1;
        }
        self.flat >= 2
    }
}

/// HA1/HA2: `nqm` HA groups against `nqm` standalone queue managers, both alive for the whole
/// sweep and measured at each requester count in turn.
fn compare(o: &Opts, home: &Path, nqm: usize, rep: &mut Report) -> Result<Comparison, String> {
    let name = format!("HA{nqm}");
    let std_home = home.join(format!("std{nqm}"));
    std::fs::create_dir_all(&std_home).map_err(|e| e.to_string())?;
    eprintln!("report: {name}: starting {nqm} standalone queue manager(s) and {nqm} HA group(s)");
    let std = Qms::start_with(&std_home, nqm, LOG_PAGES)?;
    let std_pids = std.pids.clone();
    std_pids.iter().for_each(|p| register(*p));
    let mut groups = Vec::new();
    for g in 0..nqm {
        let qm = if nqm == 1 {
            QM.to_string()
        } else {
            format!("{QM}{g}")
        };
        groups.push(HaGroup::start(
            &home.join(format!("ha{nqm}-{g}")),
            &qm,
            None,
        )?);
    }
    // Index, in the pids handed to cph, of each group's active instance.
    let mut active_pos = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let a = g.wait_active(ACTIVE_TIMEOUT, None)?;
        active_pos.push(gi * INSTANCES.len() + a);
        eprintln!("report:   {}: instance {} is active", g.qm, INSTANCES[a]);
    }
    let mut c = Comparison {
        name,
        queue_managers: nqm,
        ha_processes: nqm * INSTANCES.len(),
        rows: Vec::new(),
    };
    let mut flat = Flat::new(2);
    let result = (|| {
        for &req in &o.requesters {
            let s = run_logged(
                "standalone",
                &rr_args(
                    o,
                    std.names.clone(),
                    std.ports
                        .iter()
                        .map(|p| format!("127.0.0.1({p})"))
                        .collect(),
                    std.pids.clone(),
                    req,
                ),
            )?;
            let h = run_logged(
                "HA",
                &rr_args(
                    o,
                    groups.iter().map(|g| g.qm.clone()).collect(),
                    groups.iter().map(HaGroup::conn_list).collect(),
                    groups.iter().flat_map(|g| g.pids.clone()).collect(),
                    req,
                ),
            )?;
            let stop = flat.step(&[s.round_trips_per_s, h.round_trips_per_s]);
            let each = &h.server_cpu_pct_each;
            let ha_active_cpu_pct = (each.len() == groups.len() * INSTANCES.len())
                .then(|| active_pos.iter().map(|&i| each[i]).sum::<f64>());
            c.rows.push(CompareRow {
                requesters: req,
                standalone: s,
                ha: h,
                ha_active_cpu_pct,
            });
            if stop {
                break;
            }
        }
        Ok::<(), String>(())
    })();
    for g in &groups {
        rep.log_findings.extend(g.findings());
    }
    drop(groups);
    drop(std);
    std_pids.iter().for_each(|p| unregister(*p));
    match result {
        Ok(()) => Ok(c),
        Err(e) if !c.rows.is_empty() => {
            rep.errors.push(format!("{}: {e}", c.name));
            Ok(c)
        }
        Err(e) => Err(e),
    }
}

/// The distance rows: a group without relays, then one behind relays per round trip.
fn distance(o: &Opts, home: &Path, rep: &mut Report, out: &Path) -> Result<(), String> {
    let rows: Vec<Option<f64>> = std::iter::once(None)
        .chain(o.rtts.iter().map(|r| Some(*r)))
        .collect();
    for (k, rtt) in rows.into_iter().enumerate() {
        let dir = match rtt {
            None => format!("dist{k}-direct"),
            Some(r) => format!("dist{k}-{r}ms"),
        };
        let g = HaGroup::start(&home.join(dir), QM, rtt)?;
        eprintln!("report: distance: {}", g.label());
        let a = g.wait_active(ACTIVE_TIMEOUT, None)?;
        eprintln!("report:   instance {} is active", INSTANCES[a]);
        let mut row = DistanceRow {
            rtt_ms: rtt,
            runs: Vec::new(),
        };
        let label = match rtt {
            None => "HA direct".to_string(),
            Some(r) => format!("HA +{r} ms RTT"),
        };
        let mut flat = Flat::new(1);
        let mut failed = None;
        for &req in &o.distance_requesters {
            match run_logged(
                &label,
                &rr_args(
                    o,
                    vec![g.qm.clone()],
                    vec![g.conn_list()],
                    g.pids.clone(),
                    req,
                ),
            ) {
                Ok(r) => {
                    let stop = flat.step(&[r.round_trips_per_s]);
                    row.runs.push(r);
                    if stop {
                        break;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        rep.log_findings.extend(g.findings());
        drop(g);
        if !row.runs.is_empty() {
            rep.distance.push(row);
        }
        write_report(out, rep)?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(())
}

fn client_options(qm: &str, conns: &str, app: &str) -> Result<ConnectOptions, String> {
    let mut c = ConnectOptions::client(qm, conns).map_err(|e| e.to_string())?;
    c.app_name = app.into();
    c.sharecnv = 1;
    Ok(c)
}

fn persistent_md() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

/// Puts `n` persistent 2 KB messages on the load queue with several putters, each committing
/// every 50; returns the seconds it took.
async fn load(qm: &str, conns: &str, n: u64) -> Result<f64, String> {
    let t = Instant::now();
    let putters = (LOAD_PUTTERS as u64).min(n);
    let mut set = tokio::task::JoinSet::new();
    for p in 0..putters {
        let count = n / putters + u64::from(p < n % putters);
        let opts = client_options(qm, conns, "ferrymq report ha loader")?;
        set.spawn(async move {
            let c = Connection::connect(opts).await?;
            let h = c.open(LOAD_QUEUE, open::OUTPUT).await?;
            let md = persistent_md();
            let props = Properties::default();
            let body = Bytes::from(vec![b'L'; MSG_SIZE]);
            let po = PutOptions {
                syncpoint: Syncpoint::Yes,
                ..PutOptions::default()
            };
            for i in 1..=count {
                if i % LOAD_COMMIT_EVERY == 0 || i == count {
                    c.put_commit(&h, &md, &props, body.clone()).await?;
                } else {
                    c.put(&h, &md, &props, body.clone(), &po).await?;
                }
            }
            c.disconnect().await
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| format!("loader task: {e}"))?
            .map_err(|e| format!("loader: {e}"))?;
    }
    Ok(t.elapsed().as_secs_f64())
}

async fn depth(c: &Connection, queue: &str) -> Result<u64, String> {
    let text = c
        .admin(&format!("MQSC DISPLAY QLOCAL({queue}) CURDEPTH"))
        .await
        .map_err(|e| format!("DISPLAY QLOCAL({queue}): {e}"))?;
    parse_curdepth(&text).ok_or_else(|| format!("no CURDEPTH in: {text}"))
}

/// One failover measurement with `n` messages loaded.
fn failover(home: &Path, n: u64, rep: &mut Report) -> Result<FailoverResult, String> {
    let g = HaGroup::start(home, QM, None)?;
    let active = g.wait_active(ACTIVE_TIMEOUT, None)?;
    let killed_pid = g.pids[active];
    eprintln!(
        "report: failover with {n} messages: instance {} (pid {killed_pid}) is active",
        INSTANCES[active]
    );
    let mut r = FailoverResult {
        messages: n,
        load_s: 0.0,
        killed_instance: INSTANCES[active].to_string(),
        killed_pid,
        new_active: None,
        kill_to_get_ms: None,
        kill_to_listening_ms: None,
        activation_ms_after_election: None,
        depth_after: None,
        marker_depth_after: None,
        reconnects: 0,
        error: None,
    };
    let e = failover_inner(&g, active, n, &mut r);
    rep.log_findings.extend(g.findings());
    if let Err(e) = e {
        r.error = Some(e);
    }
    Ok(r)
}

fn failover_inner(
    g: &HaGroup,
    active: usize,
    n: u64,
    r: &mut FailoverResult,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let conns = g.conn_list();
    let marker_body = format!("failover marker {n} {}", std::process::id());
    let (getter, h) = rt.block_on(async {
        let admin = Connection::connect(client_options(&g.qm, &conns, "ferrymq report ha")?)
            .await
            .map_err(|e| e.to_string())?;
        for q in [
            format!("DEFINE QLOCAL({LOAD_QUEUE}) MAXDEPTH(999999999)"),
            format!("DEFINE QLOCAL({MARKER_QUEUE})"),
        ] {
            admin
                .admin(&format!("MQSC {q}"))
                .await
                .map_err(|e| format!("{q}: {e}"))?;
        }
        r.load_s = load(&g.qm, &conns, n).await?;
        eprintln!(
            "report:   loaded {n} messages in {:.1} s ({:.0} msg/s)",
            r.load_s,
            n as f64 / r.load_s.max(1e-9)
        );
        let loaded = depth(&admin, LOAD_QUEUE).await?;
        if loaded != n {
            return Err(format!(
                "{LOAD_QUEUE} holds {loaded} messages after loading {n}"
            ));
        }
        let mh = admin
            .open(MARKER_QUEUE, open::OUTPUT)
            .await
            .map_err(|e| e.to_string())?;
        admin
            .put_commit(
                &mh,
                &persistent_md(),
                &Properties::default(),
                Bytes::from(marker_body.clone()),
            )
            .await
            .map_err(|e| format!("marker put: {e}"))?;
        let _ = admin.disconnect().await;
        let mut opts = client_options(&g.qm, &conns, "ferrymq report ha failover")?;
        opts.reconnect = Reconnect::Enabled {
            timeout: Duration::from_secs(60),
        };
        let getter = Connection::connect(opts).await.map_err(|e| e.to_string())?;
        let h = getter
            .open(MARKER_QUEUE, open::INPUT_SHARED)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((getter, h))
    })?;
    // Timed from just before the kill command runs, so the figure is an upper bound.
    let t0 = Instant::now();
    kill9(g.pids[active])?;
    let others: Vec<u16> = (0..INSTANCES.len())
        .filter(|i| *i != active)
        .map(|i| g.client_ports[i])
        .collect();
    let watcher = std::thread::spawn(move || {
        while t0.elapsed() < Duration::from_secs(30) {
            if others.iter().any(|p| is_listening(*p)) {
                return Some(t0.elapsed().as_secs_f64() * 1000.0);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        None
    });
    let got = rt.block_on(getter.get(
        &h,
        &GetOptions {
            wait: Wait::Ms(30_000),
            ..GetOptions::any()
        },
    ));
    let elapsed = t0.elapsed().as_secs_f64() * 1000.0;
    r.kill_to_listening_ms = watcher.join().ok().flatten();
    let m = got.map_err(|e| format!("get of the marker after the kill: {e}"))?;
    if m.body.as_ref() != marker_body.as_bytes() {
        return Err(format!(
            "the message got after the kill is not the marker: {:?}",
            String::from_utf8_lossy(&m.body)
        ));
    }
    r.kill_to_get_ms = Some(elapsed);
    r.reconnects = getter.reconnects();
    let now = g.wait_active(Duration::from_secs(10), Some(active))?;
    r.new_active = Some(INSTANCES[now].to_string());
    r.activation_ms_after_election = parse_activation_ms(&g.log(now));
    r.depth_after = Some(rt.block_on(depth(&getter, LOAD_QUEUE))?);
    r.marker_depth_after = Some(rt.block_on(depth(&getter, MARKER_QUEUE))?);
    let _ = rt.block_on(getter.disconnect());
    eprintln!(
        "report:   kill -> get {elapsed:.0} ms (new active listening after {} ms); instance {} active ({} ms after its election); {} messages on {LOAD_QUEUE} after failover",
        fmt_opt(r.kill_to_listening_ms, 0),
        INSTANCES[now],
        fmt_opt(r.activation_ms_after_election.map(|v| v as f64), 0),
        fmt_opt(r.depth_after.map(|v| v as f64), 0)
    );
    if r.depth_after != Some(n) {
        return Err(format!(
            "{LOAD_QUEUE} holds {} messages after failover, expected {n}",
            fmt_opt(r.depth_after.map(|v| v as f64), 0)
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Report.

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the Unix epoch.
fn utc_string(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The package version and, when the binary sits in a git work tree, `git describe`.
fn version() -> String {
    let pkg = env!("CARGO_PKG_VERSION");
    let describe = ferrymq_bin()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .and_then(|dir| {
            Command::new("git")
                .args(["describe", "--always", "--dirty", "--tags"])
                .current_dir(dir)
                .stderr(Stdio::null())
                .output()
                .ok()
        })
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    match describe {
        Some(d) => format!("{pkg} (git describe: {d})"),
        None => pkg.to_string(),
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// `1, 2, 3`.
fn join_list<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn comparison_md(c: &Comparison) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Requesters | Standalone (RT/s) | HA (RT/s) | HA % of standalone | Standalone QM CPU% | HA CPU% ({} instances) | HA active instance CPU% | HA per core (active) % of standalone | Standalone QM CPU µs/RT | HA CPU µs/RT | Client CPU% (standalone / HA) | p50 ms (standalone / HA) |",
        c.ha_processes
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &c.rows {
        let (s, h) = (&r.standalone, &r.ha);
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {}% | {} | {} | {} | {}% | {} | {} | {:.1} / {:.1} | {:.2} / {:.2} |",
            r.requesters,
            s.round_trips_per_s,
            h.round_trips_per_s,
            fmt_opt(pct(h.round_trips_per_s, s.round_trips_per_s), 1),
            fmt_opt(s.server_cpu_pct, 1),
            fmt_opt(h.server_cpu_pct, 1),
            fmt_opt(r.ha_active_cpu_pct, 1),
            fmt_opt(r.per_core_pct(), 1),
            fmt_opt(s.server_cpu_us_per_rt, 1),
            fmt_opt(h.server_cpu_us_per_rt, 1),
            s.client_cpu_pct,
            h.client_cpu_pct,
            s.latency_ms_p50,
            h.latency_ms_p50
        );
    }
    md
}

/// Best rates of a comparison: (standalone best, HA best).
fn comparison_best(c: &Comparison) -> (Option<&RunResult>, Option<&RunResult>) {
    let sb = c
        .rows
        .iter()
        .map(|r| &r.standalone)
        .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s));
    let hb = c
        .rows
        .iter()
        .map(|r| &r.ha)
        .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s));
    (sb, hb)
}

fn distance_label(rtt: Option<f64>) -> String {
    match rtt {
        None => "direct (no relays)".into(),
        Some(0.0) => "via relays, 0 ms added".into(),
        Some(r) => format!("via relays, {r} ms RTT"),
    }
}

fn distance_target(rtt: Option<f64>) -> Option<f64> {
    let r = rtt?;
    TARGET_DISTANCE
        .iter()
        .find(|(at, _)| *at == r)
        .map(|(_, t)| *t)
}

fn distance_md(rows: &[DistanceRow], requesters: &[usize]) -> String {
    let mut md = String::new();
    let direct = rows
        .iter()
        .find(|r| r.rtt_ms.is_none())
        .and_then(|r| best(&r.runs))
        .map(|b| b.round_trips_per_s);
    let _ = writeln!(
        md,
        "| Replication links | Best rate (RT/s) | Requesters at best | % of direct | Target | Met | HA CPU% (3 instances) | p50 at best (ms) |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---|---:|---:|");
    for row in rows {
        let Some(b) = best(&row.runs) else { continue };
        let p = direct.and_then(|d| pct(b.round_trips_per_s, d));
        let target = distance_target(row.rtt_ms);
        let _ = writeln!(
            md,
            "| {} | {:.0} | {} | {}% | {} | {} | {} | {:.2} |",
            distance_label(row.rtt_ms),
            b.round_trips_per_s,
            b.threads,
            fmt_opt(p, 1),
            target.map_or("-".into(), |t| format!(">= {t:.0}%")),
            match (target, p) {
                (Some(t), Some(p)) => met(p >= t),
                _ => "-",
            },
            fmt_opt(b.server_cpu_pct, 1),
            b.latency_ms_p50
        );
    }
    // Every run, one column per requester count.
    let _ = writeln!(md, "\nRate (RT/s) by requester count:\n");
    let _ = write!(md, "| Replication links |");
    for r in requesters {
        let _ = write!(md, " {r} |");
    }
    let _ = write!(md, "\n|---|");
    for _ in requesters {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    for row in rows {
        let _ = write!(md, "| {} |", distance_label(row.rtt_ms));
        for req in requesters {
            match row.runs.iter().find(|r| r.threads == *req) {
                Some(r) => {
                    let _ = write!(md, " {:.0} |", r.round_trips_per_s);
                }
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    md
}

fn failover_md(rows: &[FailoverResult]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Messages loaded | Load time (s) | Killed (SIGKILL) | New active | Kill -> marker got (ms) | Target | Met | Kill -> new active listening (ms) | Activation after election (ms, qm.log) | Depth after failover | Depth correct | Client reconnects |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---|---|---:|---:|---|---:|---:|---:|---|---:|"
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {:.1} | instance {} (pid {}) | {} | {} | < {:.0} | {} | {} | {} | {} | {} | {} |",
            r.messages,
            r.load_s,
            r.killed_instance,
            r.killed_pid,
            r.new_active
                .as_deref()
                .map_or("-".into(), |a| format!("instance {a}")),
            fmt_opt(r.kill_to_get_ms, 0),
            TARGET_FAILOVER_MS,
            r.kill_to_get_ms
                .map_or("-", |t| met(t < TARGET_FAILOVER_MS)),
            fmt_opt(r.kill_to_listening_ms, 0),
            fmt_opt(r.activation_ms_after_election.map(|v| v as f64), 0),
            fmt_opt(r.depth_after.map(|v| v as f64), 0),
            r.depth_after.map_or("-", |d| met(d == r.messages)),
            r.reconnects
        );
    }
    for r in rows {
        if let Some(e) = &r.error {
            let _ = writeln!(md, "\nFailover with {} messages failed: {e}", r.messages);
        }
    }
    md
}

/// The targets table at the top of the report.
fn targets_md(rep: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "| Check | Target | Result | Met |");
    let _ = writeln!(md, "|---|---:|---:|---|");
    for c in [&rep.ha1, &rep.ha2].into_iter().flatten() {
        if let (Some(s), Some(h)) = comparison_best(c) {
            let p = pct(h.round_trips_per_s, s.round_trips_per_s);
            let _ = writeln!(
                md,
                "| {}: best HA rate vs best standalone rate ({:.0} vs {:.0} RT/s) | >= {TARGET_HA1_PCT:.0}% | {}% | {} |",
                c.name,
                h.round_trips_per_s,
                s.round_trips_per_s,
                fmt_opt(p, 1),
                p.map_or("-", |p| met(p >= TARGET_HA1_PCT))
            );
        }
        // Per core (BENCHMARK.md): the best HA row's rate per CPU of its active instances against
        // the best standalone row's rate per CPU. Informative: the target is the rate above.
        let best_row = c
            .rows
            .iter()
            .max_by(|a, b| a.ha.round_trips_per_s.total_cmp(&b.ha.round_trips_per_s));
        if let Some(p) = best_row.and_then(CompareRow::per_core_pct) {
            let _ = writeln!(
                md,
                "| {}: per core, active instance(s) only, at the best HA row (instances on their own hosts) | - | {p:.1}% | - |",
                c.name
            );
        }
    }
    let direct = rep
        .distance
        .iter()
        .find(|r| r.rtt_ms.is_none())
        .and_then(|r| best(&r.runs))
        .map(|b| b.round_trips_per_s);
    for (rtt, target) in TARGET_DISTANCE {
        let row = rep
            .distance
            .iter()
            .find(|r| r.rtt_ms == Some(rtt))
            .and_then(|r| best(&r.runs));
        if let (Some(b), Some(d)) = (row, direct) {
            let p = pct(b.round_trips_per_s, d);
            let _ = writeln!(
                md,
                "| Distance: {rtt} ms RTT on the replication links vs direct | >= {target:.0}% | {}% | {} |",
                fmt_opt(p, 1),
                p.map_or("-", |p| met(p >= target))
            );
        }
    }
    for f in &rep.failover {
        let _ = writeln!(
            md,
            "| Failover with {} messages: kill -> marker got | < {TARGET_FAILOVER_MS:.0} ms | {} ms | {} |",
            f.messages,
            fmt_opt(f.kill_to_get_ms, 0),
            match (f.kill_to_get_ms, f.depth_after) {
                (Some(t), Some(d)) => met(t < TARGET_FAILOVER_MS && d == f.messages),
                _ => met(false),
            }
        );
    }
    md
}

fn render(rep: &Report, requesters: &[usize], distance_requesters: &[usize]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# FerryMQ HA benchmark report{}\n",
        if rep.quick { " (quick)" } else { "" }
    );
    let _ = writeln!(md, "- Command: `{}`", rep.command);
    let _ = writeln!(md, "- ferrymq: {}", rep.version);
    let _ = writeln!(
        md,
        "- Date: {}; the report took {:.0} s",
        rep.date, rep.elapsed_s
    );
    let _ = writeln!(
        md,
        "- Machine: {} CPU cores ({}), Linux {}; the client, the standalone queue managers and every HA instance share them",
        rep.cores, rep.cpu_model, rep.kernel
    );
    let _ = writeln!(
        md,
        "- Each run: {:.0} s warm-up, then a {:.0} s measured window; {} B persistent messages",
        rep.warmup_s, rep.duration_s, rep.msg_size
    );
    let _ = writeln!(
        md,
        "- Requesters swept: {} (HA1/HA2), {} (distance); a sweep stops once two steps in a row add less than 5%",
        join_list(requesters),
        join_list(distance_requesters)
    );
    let _ = writeln!(
        md,
        "- Failover message counts: {}",
        join_list(&rep.failover_messages)
    );
    let _ = writeln!(
        md,
        "\nWorkload (as `ferrymq report standalone`): {QUEUE_PAIRS} queue pairs REQUEST0..9/REPLY0..9 per queue manager; requesters put a \
         request under syncpoint and commit, then get the reply by CorrelId; responders (as many as requesters, 10 to 128 per queue manager) \
         get under syncpoint, put the reply and commit. Clients connect over TCP (SHARECNV 1); HA clients use the group's connection name list \
         (only the active instance listens). Every queue manager and instance has 3 primary log files of {LOG_PAGES} pages. \
         An HA group is 3 instances of one queue manager on this machine, each with its own FERRYMQ_HOME, client port and \
         replication address. CPU is percent of one core; the HA figure is the sum over the group's 3 instance processes.\n"
    );
    let _ = writeln!(md, "## Targets\n\n{}", targets_md(rep));
    if let Some(c) = &rep.ha1 {
        let _ = writeln!(
            md,
            "## HA1: one HA group vs one standalone queue manager\n\n![HA1](ha1.svg)\n\n{}",
            comparison_md(c)
        );
    }
    if let Some(c) = &rep.ha2 {
        let _ = writeln!(
            md,
            "## HA2: {} HA groups ({} instance processes) vs {} standalone queue managers\n\n\
             The most this {}-core machine reasonably holds: every process shares the same cores with the client.\n\n\
             ![HA2](ha2.svg)\n\n{}",
            c.queue_managers,
            c.ha_processes,
            c.queue_managers,
            rep.cores,
            comparison_md(c)
        );
    }
    if !rep.distance.is_empty() {
        let _ = writeln!(
            md,
            "## Distance: latency on the replication links\n\n\
             A `ferrymq relay` in front of each instance's replication port delays each direction by half the round trip; the \
             group's instance list names the relay ports and each instance binds its real port (qm.ini NativeHA:LocalAddress), \
             so every replication round trip between two instances crosses one relay each way. The direct row has no relays; \
             the 0 ms row shows the cost of the relays themselves. Each row is a fresh group; the best rate over the requester \
             sweep is compared with the direct row's best.\n\n![Distance](distance.svg)\n\n{}",
            distance_md(&rep.distance, distance_requesters)
        );
    }
    if !rep.failover.is_empty() {
        let _ = writeln!(
            md,
            "## Failover\n\n\
             For each message count a fresh group is created and N persistent {} B messages are put on {LOAD_QUEUE} by {LOAD_PUTTERS} \
             concurrent putters (under syncpoint, committing every {LOAD_COMMIT_EVERY}); a persistent marker message is put on \
             {MARKER_QUEUE}; a client connected with the group's connection list and automatic reconnect opens {MARKER_QUEUE}; the \
             active instance is killed with SIGKILL and the client issues MQGET (wait 30 s). The time is measured from just before \
             `kill -9` runs until the get returns the marker from the new active instance; afterwards DISPLAY QLOCAL({LOAD_QUEUE}) \
             CURDEPTH must show N. \"New active listening\" is when another instance's client port is first seen listening \
             (/proc/net/tcp polled every 2 ms); the client's own reconnect backoff (50 ms doubling to 2 s) adds to the get time. \
             \"Activation after election\" is what the new active instance logs (qm.log: \"is now the active \
             instance ... N ms after its election\"); the election itself is not in the log.\n\n{}",
            rep.msg_size,
            failover_md(&rep.failover)
        );
    }
    if !rep.errors.is_empty() {
        let _ = writeln!(md, "## Problems\n");
        for e in &rep.errors {
            let _ = writeln!(md, "- {}", e.replace('\n', " / "));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Notable lines in the instances' logs\n");
    if rep.log_findings.is_empty() {
        let _ = writeln!(md, "None (no errors, warnings or restarts logged).");
    } else {
        let _ = writeln!(md, "```");
        for l in &rep.log_findings {
            let _ = writeln!(md, "{l}");
        }
        let _ = writeln!(md, "```");
    }
    md
}

const COLORS: [&str; 7] = [
    "#1f6feb", "#d1242f", "#1a7f37", "#bc4c00", "#8250df", "#1b9aaa", "#57606a",
];

/// A round axis maximum at or above `v` that divides into four round steps.
fn nice_max(v: f64) -> f64 {
    let raw = (v / 4.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|k| k * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    step * 4.0
}

/// A line chart of rate against requesters (log2 x axis), one line per series, legend at the
/// right.
fn svg_lines(title: &str, series: &[(String, Vec<(usize, f64)>)]) -> String {
    let (w, h, m, left, legend) = (860.0, 380.0, 50.0, 80.0, 210.0);
    let right = w - legend;
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| (*x as f64).log2()))
        .collect();
    let xmin = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let xmin = if xmin.is_finite() { xmin } else { 0.0 };
    let xmax = xs.iter().cloned().fold(xmin + 1.0, f64::max);
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
            .fold(1.0, f64::max)
            * 1.05,
    );
    let px = |x: f64| left + 10.0 + (x - xmin) / (xmax - xmin) * (right - left - 30.0);
    let py = |y: f64| h - m - y / ymax * (h - 2.0 * m);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        out,
        r#"<rect width="{w}" height="{h}" fill="white"/><text x="{left}" y="24" font-size="14">{title}</text>"#
    );
    for i in 0..=4 {
        let y = ymax * i as f64 / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{left}" y1="{0:.1}" x2="{right}" y2="{0:.1}" stroke="#d0d7de"/><text x="{1}" y="{2:.1}" text-anchor="end">{y:.0}</text>"##,
            py(y),
            left - 6.0,
            py(y) + 4.0
        );
    }
    let _ = write!(
        out,
        r#"<line x1="{left}" y1="{0}" x2="{right}" y2="{0}" stroke="black"/><line x1="{left}" y1="{m}" x2="{left}" y2="{0}" stroke="black"/>"#,
        h - m
    );
    let mut ticks: Vec<usize> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    for t in ticks {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{t}</text>"#,
            px((t as f64).log2()),
            h - m + 16.0
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">requesters</text>"#,
        (left + right) / 2.0,
        h - 10.0
    );
    let _ = write!(
        out,
        r#"<text x="14" y="{0}" transform="rotate(-90 14 {0})" text-anchor="middle">round trips/s</text>"#,
        h / 2.0
    );
    for (k, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px((*x as f64).log2()), py(*y)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            p.join(" ")
        );
        for (x, y) in pts {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px((*x as f64).log2()),
                py(*y)
            );
        }
        let ly = m + 8.0 + 20.0 * k as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="14" height="4" fill="{color}"/><text x="{}" y="{}">{label}</text>"#,
            right + 16.0,
            ly - 5.0,
            right + 36.0,
            ly
        );
    }
    out.push_str("</svg>\n");
    out
}

fn comparison_svg(c: &Comparison) -> String {
    let pts = |f: &dyn Fn(&CompareRow) -> &RunResult| -> Vec<(usize, f64)> {
        c.rows
            .iter()
            .map(|r| (r.requesters, f(r).round_trips_per_s))
            .collect()
    };
    svg_lines(
        &format!("{}: 2 KB persistent Request/Responder", c.name),
        &[
            (
                format!("standalone ({} QM)", c.queue_managers),
                pts(&|r| &r.standalone),
            ),
            (
                format!("HA ({} group(s) of 3)", c.queue_managers),
                pts(&|r| &r.ha),
            ),
        ],
    )
}

fn write_report(out: &Path, rep: &Report) -> Result<(), String> {
    write_report_with(out, rep, &[], &[])
}

fn write_report_with(
    out: &Path,
    rep: &Report,
    requesters: &[usize],
    distance_requesters: &[usize],
) -> Result<(), String> {
    let w = |name: &str, text: String| {
        std::fs::write(out.join(name), text).map_err(|e| format!("{}: {e}", out.display()))
    };
    if let Some(c) = &rep.ha1 {
        w("ha1.svg", comparison_svg(c))?;
    }
    if let Some(c) = &rep.ha2 {
        w("ha2.svg", comparison_svg(c))?;
    }
    if !rep.distance.is_empty() {
        let series: Vec<(String, Vec<(usize, f64)>)> = rep
            .distance
            .iter()
            .map(|r| {
                (
                    distance_label(r.rtt_ms),
                    r.runs
                        .iter()
                        .map(|x| (x.threads, x.round_trips_per_s))
                        .collect(),
                )
            })
            .collect();
        w(
            "distance.svg",
            svg_lines(
                "HA1 with latency on the replication links, 2 KB persistent",
                &series,
            ),
        )?;
    }
    let mut dreq: Vec<usize> = distance_requesters.to_vec();
    if dreq.is_empty() {
        dreq = rep
            .distance
            .iter()
            .flat_map(|r| r.runs.iter().map(|x| x.threads))
            .collect();
        dreq.sort_unstable();
        dreq.dedup();
    }
    let mut req: Vec<usize> = requesters.to_vec();
    if req.is_empty() {
        req = [&rep.ha1, &rep.ha2]
            .into_iter()
            .flatten()
            .flat_map(|c| c.rows.iter().map(|r| r.requesters))
            .collect();
        req.sort_unstable();
        req.dedup();
    }
    w("README.md", render(rep, &req, &dreq))?;
    w(
        "runs.json",
        serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?,
    )
}

pub fn main(argv: &[String]) -> Result<(), String> {
    let o = Opts::parse(argv)?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let home = std::env::temp_dir().join(format!("ferrymq-report-ha-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    stop_on_interrupt(home.clone());
    let started = Instant::now();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut rep = Report {
        command: o.command.clone(),
        version: version(),
        date: utc_string(now),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        cpu_model: cpu_model(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into()),
        quick: o.quick,
        warmup_s: o.warmup.as_secs_f64(),
        duration_s: o.duration.as_secs_f64(),
        elapsed_s: 0.0,
        msg_size: MSG_SIZE,
        failover_messages: if o.step("failover") {
            o.failover_messages.clone()
        } else {
            Vec::new()
        },
        ha1: None,
        ha2: None,
        distance: Vec::new(),
        failover: Vec::new(),
        log_findings: Vec::new(),
        errors: Vec::new(),
    };
    eprintln!(
        "report: HA report into {} (private FERRYMQ_HOME {})",
        o.out.display(),
        home.display()
    );
    let result = steps(&o, &home, &mut rep, started);
    rep.elapsed_s = started.elapsed().as_secs_f64();
    if let Err(e) = result {
        rep.errors.push(e);
    }
    let written = write_report_with(&o.out, &rep, &o.requesters, &o.distance_requesters);
    let _ = std::fs::remove_dir_all(&home);
    written?;
    eprintln!(
        "report: done in {:.0} s; written to {}",
        rep.elapsed_s,
        o.out.display()
    );
    if rep.errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} step(s) failed (see Problems in {}):\n{}",
            rep.errors.len(),
            o.out.join("README.md").display(),
            rep.errors.join("\n")
        ))
    }
}

/// Runs the selected steps; a failed step is recorded and the next one still runs.
fn steps(o: &Opts, home: &Path, rep: &mut Report, started: Instant) -> Result<(), String> {
    let checkpoint = |rep: &mut Report| {
        rep.elapsed_s = started.elapsed().as_secs_f64();
        write_report_with(&o.out, rep, &o.requesters, &o.distance_requesters)
    };
    for (step, nqm) in [("ha1", 1), ("ha2", 2)] {
        if o.step(step) {
            match compare(o, home, nqm, rep) {
                Ok(c) if nqm == 1 => rep.ha1 = Some(c),
                Ok(c) => rep.ha2 = Some(c),
                Err(e) => rep.errors.push(format!("{}: {e}", step.to_uppercase())),
            }
            checkpoint(rep)?;
        }
    }
    if o.step("distance") {
        if let Err(e) = distance(o, home, rep, &o.out) {
            rep.errors.push(format!("distance: {e}"));
        }
        checkpoint(rep)?;
    }
    if o.step("failover") {
        for (k, &n) in o.failover_messages.iter().enumerate() {
            match failover(&home.join(format!("fo{k}-{n}msgs")), n, rep) {
                Ok(r) => {
                    if let Some(e) = &r.error {
                        rep.errors.push(format!("failover with {n} messages: {e}"));
                    }
                    rep.failover.push(r);
                }
                Err(e) => rep.errors.push(format!("failover with {n} messages: {e}")),
            }
            checkpoint(rep)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn run(threads: usize, rate: f64, cpu: f64) -> RunResult {
        RunResult {
            module: "rr".into(),
            round_trips_per_s: rate,
            round_trips: (rate * 3.0) as u64,
            server_cpu_pct: Some(cpu),
            server_cpu_pct_each: vec![cpu],
            client_cpu_pct: 20.0,
            server_cpu_us_per_rt: Some(cpu / 100.0 / rate * 1e6),
            client_cpu_us_per_rt: 1.0,
            latency_ms_p50: 1.5,
            latency_ms_p99: 3.0,
            latency_ms_max: 9.0,
            threads,
            responders: 10,
            msg_size: 2048,
            persistent: true,
            queue_managers: 1,
            queues_per_qm: 10,
            transport: "tcp".into(),
            duration_s: 3.0,
            warmup_s: 1.0,
            errors: 0,
            first_error: None,
            version: "test".into(),
        }
    }

    #[test]
    fn options_parse_with_quick_defaults_and_lists() {
        let o = Opts::parse(&v("--quick --out /tmp/x --rtts 0,1,2.5,10")).unwrap();
        assert!(o.quick);
        assert_eq!(o.out, PathBuf::from("/tmp/x"));
        assert_eq!(o.rtts, vec![0.0, 1.0, 2.5, 10.0]);
        assert_eq!(o.failover_messages, vec![0, 20_000]);
        assert!(!o.step("ha2"), "HA2 is for the full mode only");
        assert!(o.step("ha1") && o.step("distance") && o.step("failover"));
        assert_eq!(
            o.command,
            "ferrymq report ha --quick --out /tmp/x --rtts 0,1,2.5,10"
        );

        let o = Opts::parse(&v("--failover-messages 0,500000 --steps failover")).unwrap();
        assert!(!o.quick);
        assert_eq!(o.failover_messages, vec![0, 500_000]);
        assert_eq!(o.steps, vec!["failover"]);
        assert_eq!(o.out, PathBuf::from("ha-report"));
        assert_eq!(Opts::parse(&[]).unwrap().steps.len(), 4);
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for (args, want) in [
            ("--rtts 1,x", "'x' is not a valid number"),
            ("--rtts -1", "between 0 and 60000"),
            ("--rtts 1,,2", "'' is not a valid number"),
            ("--requesters 0,4", "at least 1"),
            ("--steps ha3", "'ha3' is not one of"),
            ("--out", "needs a value"),
            ("--bogus 1", "unknown option"),
        ] {
            let e = Opts::parse(&v(args)).unwrap_err();
            assert!(e.contains(want), "{args}: {e}");
        }
    }

    #[test]
    fn status_log_and_mqsc_output_are_read() {
        let dspmq =
            "QMNAME(HAQM)\n  INSTANCE(a) ROLE(Replica) REPLADDR(127.0.0.1:1) INSYNC(UNKNOWN)\n  \
                     INSTANCE(b) ROLE(Active) REPLADDR(127.0.0.1:2) LOCAL(YES) INSYNC(YES)\n";
        assert_eq!(local_active(dspmq).as_deref(), Some("b"));
        // A replica that knows the leader does not count: the leader must say so itself.
        let replica =
            "  INSTANCE(a) ROLE(Active) REPLADDR(x)\n  INSTANCE(b) ROLE(Replica) LOCAL(YES)\n";
        assert_eq!(local_active(replica), None);
        assert_eq!(
            parse_curdepth("AMQ8409I: Display Queue details.\n   QUEUE(HA.LOAD)  TYPE(QLOCAL)\n   CURDEPTH(20000)\n"),
            Some(20000)
        );
        assert_eq!(parse_curdepth("XCURDEPTH(3)"), None);
        let log = "ferrymq: instance 'b' is now the active instance (term 2, log index 7), 3 ms after its election\n\
                   ferrymq: restarting this instance as a replica: x\n\
                   ferrymq: instance 'b' is now the active instance (term 4, log index 90), 41 ms after its election\n";
        assert_eq!(parse_activation_ms(log), Some(41));
        assert_eq!(parse_activation_ms("nothing"), None);
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue\n   \
                   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n   \
                   1: 0100007F:1F91 0100007F:1F90 01 00000000:00000000\n";
        assert_eq!(listening_ports(tcp), vec![0x1F90]);
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_string(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_string(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn tables_show_percentages_of_the_reference() {
        let c = Comparison {
            name: "HA1".into(),
            queue_managers: 1,
            ha_processes: 3,
            rows: vec![
                CompareRow {
                    requesters: 8,
                    standalone: run(8, 1000.0, 50.0),
                    ha: run(8, 900.0, 80.0),
                    ha_active_cpu_pct: Some(50.0),
                },
                CompareRow {
                    requesters: 32,
                    standalone: run(32, 2000.0, 90.0),
                    ha: run(32, 1600.0, 150.0),
                    ha_active_cpu_pct: None,
                },
            ],
        };
        let t = comparison_md(&c);
        assert!(
            t.contains("| 8 | 1000 | 900 | 90.0% | 50.0 | 80.0 | 50.0 | 90.0% |"),
            "{t}"
        );
        assert!(t.contains("| 150.0 | - | -% |"), "{t}");
        assert!(t.contains("| 32 | 2000 | 1600 | 80.0% |"), "{t}");
        let rows = vec![
            DistanceRow {
                rtt_ms: None,
                runs: vec![run(16, 1000.0, 50.0), run(64, 2000.0, 60.0)],
            },
            DistanceRow {
                rtt_ms: Some(1.0),
                runs: vec![run(16, 900.0, 50.0), run(64, 1300.0, 60.0)],
            },
            DistanceRow {
                rtt_ms: Some(10.0),
                runs: vec![run(16, 100.0, 50.0), run(64, 300.0, 60.0)],
            },
        ];
        let d = distance_md(&rows, &[16, 64]);
        assert!(
            d.contains("| via relays, 1 ms RTT | 1300 | 64 | 65.0% | >= 60% | yes |"),
            "{d}"
        );
        assert!(
            d.contains("| via relays, 10 ms RTT | 300 | 64 | 15.0% | >= 20% | **no** |"),
            "{d}"
        );
        assert!(d.contains("| direct (no relays) | 1000 | 2000 |"), "{d}");
        assert_eq!(nice_max(1548.0), 1600.0);
        assert_eq!(nice_max(4900.0), 6000.0);
        assert_eq!(nice_max(90.0), 100.0);
        let svg = svg_lines("t", &[("a".into(), vec![(16, 1.0), (64, 2.0)])]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn sweeps_stop_when_no_series_rises() {
        let mut f = Flat::new(2);
        assert!(!f.step(&[100.0, 50.0]));
        assert!(!f.step(&[101.0, 80.0]), "the second series still rose");
        assert!(!f.step(&[102.0, 81.0]));
        assert!(f.step(&[100.0, 82.0]));
    }
}
