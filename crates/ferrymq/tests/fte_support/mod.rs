//! What the managed file transfer tests share: agents started on a queue manager (and killed
//! when the test ends, whatever its outcome), test data and directories.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::support::{self, kill9_pid, Home};

/// Stops (kills) the agents a test started, whatever the test's outcome.
pub struct Agents<'h> {
    pub home: &'h Home,
    pub names: Vec<String>,
}

impl Drop for Agents<'_> {
    fn drop(&mut self) {
        for a in &self.names {
            let pid = self
                .home
                .path()
                .join("mqft/agents")
                .join(a)
                .join("agent.pid");
            if let Some(pid) = std::fs::read_to_string(pid)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                if support::alive(pid) {
                    kill9_pid(pid);
                }
            }
        }
    }
}

/// Creates and starts agents on `qm`, with small chunks so that files span many messages.
pub fn agents<'h>(home: &'h Home, qm: &str, names: &[&str], chunk: usize) -> Agents<'h> {
    agents_checkpointing(home, qm, names, chunk, 1)
}

/// As [`agents`], with a checkpoint every `interval` frames.
pub fn agents_checkpointing<'h>(
    home: &'h Home,
    qm: &str,
    names: &[&str],
    chunk: usize,
    interval: usize,
) -> Agents<'h> {
    agents_with(home, qm, names, chunk, interval, &[])
}

/// As [`agents_checkpointing`], with `extra` fteCreateAgent flags (client mode, credentials).
pub fn agents_with<'h>(
    home: &'h Home,
    qm: &str,
    names: &[&str],
    chunk: usize,
    interval: usize,
    extra: &[&str],
) -> Agents<'h> {
    let chunk = chunk.to_string();
    let interval = interval.to_string();
    for a in names {
        let mut args = vec![
            "fteCreateAgent",
            "-agentName",
            a,
            "-agentQMgr",
            qm,
            "-agentChunkSize",
            &chunk,
            "-agentWindowSize",
            "2",
            "-agentFrameSize",
            "2",
            "-agentCheckpointInterval",
            &interval,
        ];
        args.extend_from_slice(extra);
        home.ok(&args);
    }
    let guard = Agents {
        home,
        names: names.iter().map(|s| s.to_string()).collect(),
    };
    for a in names {
        let out = home.ok(&["fteStartAgent", a]);
        assert!(out.contains("started"), "{out}");
    }
    guard
}

pub fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
        .collect()
}

pub fn dir(base: &Path, name: &str) -> PathBuf {
    let d = base.join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn text(o: &std::process::Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The pid an agent's process wrote, if it is running.
pub fn agent_pid(home: &Home, agent: &str) -> Option<u32> {
    let f = home
        .path()
        .join("mqft/agents")
        .join(agent)
        .join("agent.pid");
    std::fs::read_to_string(f).ok()?.trim().parse().ok()
}

/// What an agent wrote to its log so far.
pub fn agent_log(home: &Home, agent: &str) -> String {
    let f = home
        .path()
        .join("mqft/agents")
        .join(agent)
        .join("agent.log");
    std::fs::read_to_string(f).unwrap_or_default()
}

/// The line of `agent`'s log that ends a transfer (complete or failed), once there is one.
pub fn result_line(home: &Home, agent: &str) -> Option<String> {
    agent_log(home, agent)
        .lines()
        .find(|l| l.contains("transfer complete") || l.contains("transfer failed"))
        .map(str::to_string)
}

/// Waits (bounded by `secs`) for [`result_line`]; `what` names the wait in a failure.
pub fn wait_result(home: &Home, agent: &str, what: &str, secs: u64) -> String {
    let mut result = String::new();
    wait_until(what, secs, || match result_line(home, agent) {
        Some(r) => {
            result = r;
            true
        }
        None => false,
    });
    result
}

/// `<path>.part`.
pub fn part_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".part");
    PathBuf::from(p)
}

/// Waits (bounded) until `cond` holds.
pub fn wait_until(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(secs),
            "not within {secs} s: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The "resumed N times, B bytes re-sent" of a transfer's result.
pub fn resumes_and_resent(result: &str) -> (u64, u64) {
    let tail = result
        .split("resumed ")
        .nth(1)
        .unwrap_or_else(|| panic!("no resume count in: {result}"));
    let mut nums = tail
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse::<u64>().unwrap());
    (nums.next().unwrap(), nums.next().unwrap())
}

/// `fteCreateTransfer -w 60 ARGS`, waited for.
pub fn transfer(home: &Home, args: &[&str]) -> std::process::Output {
    let mut v = vec!["fteCreateTransfer", "-w", "60"];
    v.extend_from_slice(args);
    home.run(&v)
}

/// `fteCreateTransfer ARGS` started in the background.
pub fn spawn_transfer(home: &Home, args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferrymq"))
        .arg("fteCreateTransfer")
        .args(args)
        .env("FERRYMQ_HOME", home.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fteCreateTransfer")
}

/// Kills an agent with SIGKILL.
pub fn kill_agent(home: &Home, agent: &str) {
    let pid = agent_pid(home, agent).expect("agent pid");
    kill9_pid(pid);
}

/// A receiving agent stopped with SIGSTOP once the `.part` of `dst` holds data, so that the
/// transfer to it holds still mid-file. [`Stopped::resume`] (or the drop, if a test fails
/// first) continues it with SIGCONT.
pub struct Stopped {
    pid: u32,
    /// Whether the file was still under way when its receiver stopped (not yet renamed).
    mid_file: bool,
}

pub fn stop_receiver_mid_file(home: &Home, agent: &str, dst: &Path) -> Stopped {
    let part = part_of(dst);
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "no {} came",
            part.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let pid = agent_pid(home, agent).expect("receiver pid");
    signal(pid, "-STOP");
    Stopped {
        pid,
        mid_file: part.exists() && !dst.exists(),
    }
}

impl Stopped {
    /// Continues the receiver, then fails the test if the file had arrived before the receiver
    /// stopped (the test would not show what it means to).
    pub fn resume(self) {
        let mid_file = self.mid_file;
        drop(self);
        assert!(
            mid_file,
            "the file arrived before its receiver could be stopped"
        );
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.pid, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}
