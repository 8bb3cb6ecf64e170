//! `report standalone`'s round-trip cost section: the goals for one round trip (queue manager CPU
//! per non-persistent 2 KB round trip at 64 requesters, the persistent rate as a share of the
//! non-persistent one at 64 or more requesters, the single-requester non-persistent median),
//! each beside the value a baseline `ferrymq` binary (`--baseline-bin`) reached in the same run;
//! and where the queue manager's CPU of a round trip goes: user and kernel time, system calls by
//! kind and thread switches per round trip, counted in a separate probed window (`perf stat` on
//! the queue manager's process when `perf` is there, /proc otherwise).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::Serialize;

use crate::cph::RunResult;

/// Goals of the round trip, as the section states them.
const CPU_GOAL_US: f64 = 25.0;
const PERSISTENT_GOAL_PCT: f64 = 60.0;
const P50_GOAL_MS: f64 = 0.10;
/// Requesters at which the CPU goal is read, and from which the persistent share is.
pub(crate) const GOAL_REQUESTERS: usize = 64;
/// Responders per queue manager: one per request queue at every step.
pub(crate) const RESPONDERS: usize = 10;
/// Responders per queue manager also tried from the goals' requester count on: three and six
/// per request queue (the seeds' 10-queue-manager runs had three, their 1-queue-manager runs 30
/// per queue, 300 in all). A responder waits for its commit before it takes the next request,
/// so with persistent messages each responder completes at most one request per log sync or
/// two, and the responders, not the disk, bound the rate until there are enough of them; with
/// non-persistent ones on 2 cores, more client connections cost more than they add. Each step
/// at these counts keeps the fastest (the seeds' tables report the maximum rate), for both
/// persistences and for the baseline alike, and the report names the count.
pub(crate) const MORE_RESPONDERS: [usize; 2] = [30, 60];

/// The responder counts (per queue manager) a step of `requesters` runs with.
pub(crate) fn responder_counts(requesters: usize) -> Vec<usize> {
    let mut counts = vec![RESPONDERS];
    if requesters >= GOAL_REQUESTERS {
        counts.extend(MORE_RESPONDERS);
    }
    counts
}

/// The fastest of one step's runs; the others go to `others`.
pub(crate) fn keep_best(
    mut runs: Vec<RunResult>,
    others: &mut Vec<RunResult>,
) -> Option<RunResult> {
    let i = (0..runs.len()).max_by(|&a, &b| {
        runs[a]
            .round_trips_per_s
            .total_cmp(&runs[b].round_trips_per_s)
    })?;
    let best = runs.swap_remove(i);
    others.extend(runs);
    Some(best)
}

/// The single-requester non-persistent run with the CPUs' wake-up latency bounded (see
/// `TuningParameters:CpuWakeLatencyUs`): on a virtual machine whose idle CPUs halt, each of a
/// round trip's four hand-offs between processes pays for waking a halted CPU, and the median is
/// mostly that.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WakeRuns {
    /// This build, on a queue manager started with `CpuWakeLatencyUs=0`.
    pub(crate) now: Option<RunResult>,
    /// The baseline (no such key), with the same kernel request held by the report for its run.
    pub(crate) base: Option<RunResult>,
    /// What this build's queue manager logged when it could not make the request.
    pub(crate) refused: Option<String>,
}

/// The kernel's CPU latency request, held while the returned file is open: what the queue
/// manager does with `TuningParameters:CpuWakeLatencyUs`, made here for a binary that cannot.
/// An error (no permission) leaves the CPUs as they are.
pub(crate) fn hold_cpu_wake_latency(us: u32) -> std::io::Result<std::fs::File> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")?;
    f.write_all(&(us as i32).to_ne_bytes())?;
    Ok(f)
}

/// The warning (FMQ1015W) queue manager `name` of `home` logged if it could not make its CPU
/// latency request.
pub(crate) fn wake_request_refused(home: &Path, name: &str) -> Option<String> {
    let log = home
        .join("qmgrs")
        .join(name)
        .join("errors")
        .join("FMQERR01.LOG");
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .find(|l| l.contains("FMQ1015W"))
        .map(|l| l.split("FMQ1015W").nth(1).unwrap_or("").trim().to_string())
}

/// System calls counted per round trip, as `perf` names their tracepoints.
const SYSCALLS: &[&str] = &[
    "sendto",
    "recvfrom",
    "write",
    "writev",
    "read",
    "epoll_wait",
    "futex",
    "sched_yield",
    "pwrite64",
    "fdatasync",
];

/// What one probed window counted in a queue manager's process, per round trip.
#[derive(Serialize, Clone, Debug, Default)]
pub(crate) struct Probe {
    pub label: String,
    pub persistent: bool,
    pub responders: usize,
    pub round_trips_per_s: f64,
    pub user_us: f64,
    pub sys_us: f64,
    pub voluntary_switches: f64,
    pub involuntary_switches: f64,
    /// All system calls, then by kind (`perf` only).
    pub syscalls: Option<f64>,
    pub by_syscall: Vec<(String, f64)>,
    /// Whether `perf stat` counted (its tracepoints cost the process some CPU of their own).
    pub perf: bool,
}

/// A process's user and system CPU seconds and its threads' voluntary and involuntary context
/// switches, summed over its threads.
fn snapshot(pid: u32) -> Option<(f64, f64, u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user = f.get(11)?.parse::<f64>().ok()? / 100.0;
    let sys = f.get(12)?.parse::<f64>().ok()? / 100.0;
    let (mut vol, mut invol) = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Ok(s) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        for l in s.lines() {
            let num = |l: &str| l.split_whitespace().nth(1)?.parse::<u64>().ok();
            if l.starts_with("voluntary_ctxt_switches") {
                vol += num(l).unwrap_or(0);
            } else if l.starts_with("nonvoluntary_ctxt_switches") {
                invol += num(l).unwrap_or(0);
            }
        }
    }
    Some((user, sys, vol, invol))
}

/// Counts in `pid` for `window`, starting after `delay` (inside a run's measured window); the
/// totals, to be divided by the round trips of the window.
pub(crate) fn start_probe(
    pid: u32,
    delay: Duration,
    window: Duration,
) -> std::thread::JoinHandle<Option<(Probe, Duration)>> {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        let t0 = std::time::Instant::now();
        let a = snapshot(pid)?;
        let events: Vec<String> = std::iter::once("raw_syscalls:sys_enter".to_string())
            .chain(SYSCALLS.iter().map(|s| format!("syscalls:sys_enter_{s}")))
            .collect();
        let perf = Command::new("perf")
            .args(["stat", "-x", ",", "-e", &events.join(","), "-p"])
            .arg(pid.to_string())
            .arg("--")
            .arg("sleep")
            .arg(format!("{:.3}", window.as_secs_f64()))
            .output()
            .ok()
            .filter(|o| o.status.success());
        if perf.is_none() {
            std::thread::sleep(window.saturating_sub(t0.elapsed()));
        }
        let b = snapshot(pid)?;
        // `perf` counted for its own window (its start-up aside); /proc for all of it.
        let took = t0.elapsed();
        let scale = window.as_secs_f64() / took.as_secs_f64().max(1e-9);
        let mut p = Probe {
            user_us: (b.0 - a.0) * 1e6,
            sys_us: (b.1 - a.1) * 1e6,
            voluntary_switches: (b.2 - a.2) as f64,
            involuntary_switches: (b.3 - a.3) as f64,
            ..Default::default()
        };
        if let Some(o) = perf {
            p.perf = true;
            // CSV lines: count,unit,event,...
            for l in String::from_utf8_lossy(&o.stderr).lines() {
                let f: Vec<&str> = l.split(',').collect();
                let (Some(n), Some(ev)) = (f.first(), f.get(2)) else {
                    continue;
                };
                let Ok(n) = n.parse::<f64>() else { continue };
                // Scaled to the whole window, so every count divides by the same round trips.
                let n = n / scale;
                if *ev == "raw_syscalls:sys_enter" {
                    p.syscalls = Some(n);
                } else if let Some(s) = ev.strip_prefix("syscalls:sys_enter_") {
                    p.by_syscall.push((s.to_string(), n));
                }
            }
        }
        Some((p, took))
    })
}

/// Turns a probe's totals into per-round-trip figures, with the rate of its run.
pub(crate) fn per_round_trip(mut p: Probe, took: Duration, r: &RunResult) -> Probe {
    let n = (r.round_trips_per_s * took.as_secs_f64()).max(1.0);
    p.round_trips_per_s = r.round_trips_per_s;
    p.persistent = r.persistent;
    p.responders = r.responders;
    p.user_us /= n;
    p.sys_us /= n;
    p.voluntary_switches /= n;
    p.involuntary_switches /= n;
    p.syscalls = p.syscalls.map(|s| s / n);
    for (_, c) in &mut p.by_syscall {
        *c /= n;
    }
    p.by_syscall.retain(|(_, c)| *c >= 0.005);
    p
}

/// One binary's goal figures from its runs of the 2 KB scenarios.
struct Goals {
    cpu_us: Option<f64>,
    persistent_pct: Option<f64>,
    p50_ms: Option<f64>,
}

fn goals(np: &[RunResult], p: &[RunResult]) -> Goals {
    let at = |runs: &[RunResult], n: usize| runs.iter().find(|r| r.threads == n).cloned();
    let best_from = |runs: &[RunResult]| {
        runs.iter()
            .filter(|r| r.threads >= GOAL_REQUESTERS)
            .map(|r| r.round_trips_per_s)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    Goals {
        cpu_us: at(np, GOAL_REQUESTERS).and_then(|r| r.server_cpu_us_per_rt),
        persistent_pct: match (best_from(p), best_from(np)) {
            (Some(p), Some(np)) if np > 0.0 => Some(p / np * 100.0),
            _ => None,
        },
        p50_ms: at(np, 1).map(|r| r.latency_ms_p50),
    }
}

/// The runs of one scenario: this build's and the baseline's.
pub(crate) struct Pair<'a> {
    pub size: usize,
    pub persistent: bool,
    pub queue_managers: usize,
    pub runs: &'a [RunResult],
    pub baseline: &'a [RunResult],
}

/// The section's markdown: goals beside the baseline, and the probes.
pub(crate) fn markdown(
    pairs: &[Pair],
    probes: &[Probe],
    wake: Option<&WakeRuns>,
    baseline_bin: Option<&Path>,
    load: &str,
) -> String {
    let mut md = String::new();
    let find = |persistent: bool| {
        pairs
            .iter()
            .find(|p| p.size == 2048 && p.queue_managers == 1 && p.persistent == persistent)
    };
    let (Some(np), Some(p)) = (find(false), find(true)) else {
        return md;
    };
    let _ = writeln!(md, "\n## Round trip cost: goals\n");
    let _ = writeln!(
        md,
        "1 queue manager, 2 KB. Machine load (1-minute average) {load}. {}\n",
        match baseline_bin {
            Some(b) => format!(
                "\"Baseline\" is the queue manager built from `{}`, measured in this run beside this build: \
                 each requester step runs both, in alternating order, with the same client.",
                b.display()
            ),
            None => "No baseline binary was given (`--baseline-bin`): only this build's values.".into(),
        }
    );
    let now = goals(np.runs, p.runs);
    let base = goals(np.baseline, p.baseline);
    let f = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
    let _ = writeln!(md, "| Goal | Target | Baseline | This build | Met |");
    let _ = writeln!(md, "|---|---:|---:|---:|---|");
    let met = |ok: Option<bool>| match ok {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    };
    let _ = writeln!(
        md,
        "| QM CPU per non-persistent round trip at {GOAL_REQUESTERS} requesters (µs) | < {CPU_GOAL_US:.0} | {} | {} | {} |",
        f(base.cpu_us, 1),
        f(now.cpu_us, 1),
        met(now.cpu_us.map(|v| v < CPU_GOAL_US))
    );
    let _ = writeln!(
        md,
        "| Persistent rate as % of non-persistent, best at {GOAL_REQUESTERS}+ requesters | ≥ {PERSISTENT_GOAL_PCT:.0}% | {} | {} | {} |",
        f(base.persistent_pct, 0),
        f(now.persistent_pct, 0),
        met(now.persistent_pct.map(|v| v >= PERSISTENT_GOAL_PCT))
    );
    let _ = writeln!(
        md,
        "| Single-requester non-persistent p50 (ms) | < {P50_GOAL_MS:.2} | {} | {} | {} |",
        f(base.p50_ms, 3),
        f(now.p50_ms, 3),
        met(now.p50_ms.map(|v| v < P50_GOAL_MS))
    );
    if let Some(w) = wake {
        let p50 = |r: &Option<RunResult>| r.as_ref().map(|r| r.latency_ms_p50);
        // A request the queue manager could not make measured nothing of it.
        let mine = if w.refused.is_some() {
            None
        } else {
            p50(&w.now)
        };
        let _ = writeln!(
            md,
            "| Single-requester non-persistent p50 (ms), CPU wake-up latency bounded¹ | < {P50_GOAL_MS:.2} | {} | {} | {} |",
            f(p50(&w.base), 3),
            f(mine, 3),
            met(mine.map(|v| v < P50_GOAL_MS))
        );
        let _ = writeln!(
            md,
            "\n¹ This build on a queue manager started with `TuningParameters:CpuWakeLatencyUs=0`: \
             while application requests flow it asks the kernel (`/dev/cpu_dma_latency`) to keep \
             idle CPUs polling instead of halting, and drops the request after a quiet second. \
             The baseline has no such key, so the report holds the same kernel request during its \
             run. On a virtual machine whose idle CPUs halt, each of a round trip's four \
             hand-offs between processes otherwise pays for waking a halted CPU. The cost while \
             held: idle CPUs spin (CPU taken from other guests on a shared host), which is why \
             the key is off by default.{}{}",
            idle_setting().map(|t| format!(" {t}")).unwrap_or_default(),
            match &w.refused {
                Some(why) => format!(" **This build's request was refused**: {why}"),
                None => String::new(),
            }
        );
    }
    if !np.baseline.is_empty() {
        let _ = writeln!(md, "\nEvery step of both binaries:\n");
        let _ = writeln!(md, "| Persistence | Requesters | Baseline RT/s (responders) | This build RT/s (responders) | Baseline QM µs/RT | This build QM µs/RT | Baseline p50 (ms) | This build p50 (ms) |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for s in [np, p] {
            for r in s.runs {
                let Some(b) = s.baseline.iter().find(|b| b.threads == r.threads) else {
                    continue;
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} ({}) | {:.0} ({}) | {:.1} | {:.1} | {:.3} | {:.3} |",
                    if s.persistent {
                        "persistent"
                    } else {
                        "non-persistent"
                    },
                    r.threads,
                    b.round_trips_per_s,
                    b.responders,
                    r.round_trips_per_s,
                    r.responders,
                    b.server_cpu_us_per_rt.unwrap_or(0.0),
                    r.server_cpu_us_per_rt.unwrap_or(0.0),
                    b.latency_ms_p50,
                    r.latency_ms_p50
                );
            }
        }
    }
    if !probes.is_empty() {
        md.push_str(&probe_markdown(probes));
    }
    md
}

fn probe_markdown(probes: &[Probe]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## Round trip cost: where the queue manager's microseconds go\n"
    );
    let _ = writeln!(
        md,
        "A separate window at {GOAL_REQUESTERS} requesters per binary and persistence, counted in the queue manager's process: \
         user and kernel CPU from /proc/PID/stat (10 ms ticks), thread switches summed over its threads from /proc/PID/task/*/status, \
         system calls by `perf stat` on its tracepoints (which cost the process some CPU of their own, so these windows' CPU is a little \
         above the goal rows'). Per round trip = count ÷ (rate × window). One round trip is two requests on two sockets \
         (the requester's put+commit+get in one write, the responder's put+commit+get in one write) and their answers: \
         on a protocol version 3 build the put's and commit's answers wait for the get's and leave in its write, \
         on an older one they leave in a write of their own; \
         the kernel's share is mostly loopback TCP: a send runs the receiver's TCP input too.\n"
    );
    let mut kinds: Vec<String> = Vec::new();
    for p in probes {
        for (k, _) in &p.by_syscall {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
    }
    let _ = write!(
        md,
        "| Binary | Persistence | RT/s | user µs/RT | kernel µs/RT | switches/RT (voluntary + involuntary) | syscalls/RT | kernel µs per syscall |"
    );
    for k in &kinds {
        let _ = write!(md, " {k} |");
    }
    let _ = writeln!(md);
    let _ = write!(md, "|---|---|---:|---:|---:|---:|---:|---:|");
    for _ in &kinds {
        let _ = write!(md, "---:|");
    }
    let _ = writeln!(md);
    for p in probes {
        let _ = write!(
            md,
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.2} + {:.2} | {} | {} |",
            p.label,
            if p.persistent {
                "persistent"
            } else {
                "non-persistent"
            },
            p.round_trips_per_s,
            p.user_us,
            p.sys_us,
            p.voluntary_switches,
            p.involuntary_switches,
            p.syscalls.map_or("-".into(), |s| format!("{s:.2}")),
            p.syscalls
                .filter(|s| *s > 0.0)
                .map_or("-".into(), |s| format!("{:.1}", p.sys_us / s)),
        );
        for k in &kinds {
            let v = p.by_syscall.iter().find(|(n, _)| n == k).map(|(_, c)| *c);
            let _ = write!(md, " {} |", v.map_or("-".into(), |v| format!("{v:.2}")));
        }
        let _ = writeln!(md);
    }
    for p in probes.iter().filter(|p| p.persistent) {
        let Some(syncs) = log_syncs(p) else {
            continue;
        };
        let per_sync = 1.0 / syncs;
        let _ = writeln!(
            md,
            "\n{} persistent: {:.0} log syncs/s ({:.2} ms apart), {:.1} round trips per sync; each of the {} responders \
             completes one round trip per {:.1} syncs. {}",
            p.label,
            p.round_trips_per_s * syncs,
            1000.0 / (p.round_trips_per_s * syncs).max(1e-9),
            per_sync,
            p.responders,
            p.responders as f64 / per_sync,
            persistent_limit(p, per_sync)
        );
    }
    md
}

/// A persistent probe's log syncs per round trip: its `fdatasync`s, or, on a build whose log is
/// written with `O_DIRECT | O_DSYNC` (no `fdatasync`), its `pwrite64`s, each durable on its own
/// (the checkpointer's few writes count too).
fn log_syncs(p: &Probe) -> Option<f64> {
    let count = |name: &str| {
        p.by_syscall
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .filter(|c| *c > 0.0)
    };
    count("fdatasync").or_else(|| count("pwrite64"))
}

/// Syncs per responder round trip up to which the responders, waiting for the disk, set the
/// persistent rate: a round trip needs two (a commit that arrives during a sync waits for that
/// one and the next), and more means the responders wait for something else.
const DISK_BOUND_SYNCS: f64 = 3.0;

/// What sets a persistent probe's rate: the responders waiting for the disk, or the CPU.
fn persistent_limit(p: &Probe, per_sync: f64) -> String {
    let waits = p.responders as f64 / per_sync;
    let cpu_pct = (p.user_us + p.sys_us) * p.round_trips_per_s / 1e4;
    if waits <= DISK_BOUND_SYNCS {
        "A round trip has two commits whose answers wait for a sync that began after them (the requester's put, \
         the responder's get and put), and a responder takes its next request only once its commit is answered: a \
         commit that arrives while a sync runs waits for that one and the next. So the persistent rate is about \
         responders ÷ (two sync times), set by the disk's sync latency, not by the queue manager's CPU."
            .to_string()
    } else {
        format!(
            "That is more than the two syncs a round trip's commits need, so the responders are not waiting for the \
             disk alone: the queue manager used {cpu_pct:.0}% of a core ({:.1} µs per round trip), and its CPU with the \
             client's on the machine's cores sets the rate.",
            p.user_us + p.sys_us
        )
    }
}

/// The machine's 1-minute load average, as `uptime` shows it.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// How this machine's idle CPUs wait, from sysfs: the cpuidle driver and, for a virtual machine's
/// `haltpoll` driver, how long an idle CPU polls before it halts (`guest_halt_poll_ns`; 0 means it
/// halts at once, so every wake-up of an idle CPU goes through the hypervisor). None where sysfs
/// says nothing.
fn idle_setting() -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|t| t.trim().to_string())
    };
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver")?;
    let mut t = format!("This machine's CPU idle driver is `{driver}`");
    if let Some(ns) = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns") {
        t.push_str(&format!(
            ", with `guest_halt_poll_ns` {ns}{}",
            if ns == "0" {
                ": an idle CPU halts at once instead of polling first (the kernel's default \
                 polls up to 200000 ns), which is what makes these wake-ups slow here"
            } else {
                ""
            }
        ));
    }
    t.push('.');
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(threads: usize, persistent: bool, rate: f64, cpu: f64, p50: f64) -> RunResult {
        RunResult {
            module: "rr".into(),
            round_trips_per_s: rate,
            round_trips: 1,
            server_cpu_pct: Some(50.0),
            server_cpu_pct_each: Vec::new(),
            client_cpu_pct: 50.0,
            server_cpu_us_per_rt: Some(cpu),
            client_cpu_us_per_rt: 1.0,
            latency_ms_p50: p50,
            latency_ms_p99: p50,
            latency_ms_max: p50,
            machine_steal_pct: 0.0,
            threads,
            responders: 10,
            msg_size: 2048,
            persistent,
            queue_managers: 1,
            queues_per_qm: 10,
            transport: "tcp".into(),
            duration_s: 1.0,
            warmup_s: 1.0,
            errors: 0,
            queue_full_waits: 0,
            first_error: None,
            version: String::new(),
        }
    }

    #[test]
    fn goals_read_the_right_rows_and_show_the_baseline_beside() {
        let np = vec![
            run(1, false, 10_000.0, 30.0, 0.05),
            run(64, false, 20_000.0, 20.0, 1.0),
        ];
        let p = vec![
            run(1, true, 500.0, 90.0, 1.0),
            run(64, true, 13_000.0, 40.0, 5.0),
        ];
        let bnp = vec![
            run(1, false, 9_000.0, 35.0, 0.06),
            run(64, false, 18_000.0, 26.0, 1.2),
        ];
        let bp = vec![
            run(1, true, 400.0, 95.0, 1.1),
            run(64, true, 9_000.0, 45.0, 6.0),
        ];
        let pairs = [
            Pair {
                size: 2048,
                persistent: false,
                queue_managers: 1,
                runs: &np,
                baseline: &bnp,
            },
            Pair {
                size: 2048,
                persistent: true,
                queue_managers: 1,
                runs: &p,
                baseline: &bp,
            },
        ];
        let md = markdown(&pairs, &[], None, Some(Path::new("/old/ferrymq")), "0.50");
        assert!(md.contains("| < 25 | 26.0 | 20.0 | yes |"), "{md}");
        assert!(md.contains("| ≥ 60% | 50 | 65 | yes |"), "{md}");
        assert!(md.contains("| < 0.10 | 0.060 | 0.050 | yes |"), "{md}");
        assert!(md.contains("load (1-minute average) 0.50"), "{md}");
    }

    #[test]
    fn the_bounded_wake_latency_row_counts_only_a_request_that_was_made() {
        let (np, p) = (vec![run(1, false, 9_000.0, 40.0, 0.14)], vec![]);
        let pair = |persistent: bool, runs| Pair {
            size: 2048,
            persistent,
            queue_managers: 1,
            runs,
            baseline: runs,
        };
        let pairs = [pair(false, &np), pair(true, &p)];
        let mut w = WakeRuns {
            now: Some(run(1, false, 20_000.0, 18.0, 0.04)),
            base: Some(run(1, false, 19_000.0, 19.0, 0.05)),
            refused: None,
        };
        let md = markdown(&pairs, &[], Some(&w), None, "0.10");
        assert!(
            md.contains("latency bounded¹ | < 0.10 | 0.050 | 0.040 | yes |"),
            "{md}"
        );
        assert!(!md.contains("was refused"), "{md}");
        w.refused = Some("/dev/cpu_dma_latency: Permission denied".into());
        let md = markdown(&pairs, &[], Some(&w), None, "0.10");
        assert!(
            md.contains("latency bounded¹ | < 0.10 | 0.050 | - | - |"),
            "{md}"
        );
        assert!(md.contains("was refused**: /dev/cpu_dma_latency"), "{md}");
    }

    #[test]
    fn the_goal_steps_also_run_three_and_six_responders_per_queue_and_keep_the_fastest() {
        assert_eq!(responder_counts(1), vec![RESPONDERS]);
        assert_eq!(responder_counts(32), vec![RESPONDERS]);
        assert_eq!(responder_counts(64), vec![RESPONDERS, 30, 60]);
        assert_eq!(responder_counts(256), vec![RESPONDERS, 30, 60]);
        let with = |responders: usize, rate: f64| {
            let mut r = run(64, true, rate, 40.0, 4.0);
            r.responders = responders;
            r
        };
        let mut others = Vec::new();
        let kept = keep_best(
            vec![with(10, 8_000.0), with(30, 14_000.0), with(60, 12_000.0)],
            &mut others,
        )
        .unwrap();
        assert_eq!(kept.responders, 30);
        let mut rest: Vec<usize> = others.iter().map(|r| r.responders).collect();
        rest.sort();
        assert_eq!(rest, vec![10, 60]);
        assert!(keep_best(Vec::new(), &mut others).is_none());
    }

    #[test]
    fn a_persistent_probe_names_the_disk_or_the_cpu_as_its_limit() {
        let probe = |responders: usize, rate: f64| Probe {
            persistent: true,
            responders,
            round_trips_per_s: rate,
            user_us: 18.0,
            sys_us: 27.0,
            ..Default::default()
        };
        // 10 responders, 5 round trips per sync: each waits 2 syncs per round trip.
        let disk = persistent_limit(&probe(10, 9_000.0), 5.0);
        assert!(disk.contains("set by the disk's sync latency"), "{disk}");
        // 30 responders, 5.2 round trips per sync: 5.8 syncs each, the CPU at 100%.
        let cpu = persistent_limit(&probe(30, 22_294.0), 5.2);
        assert!(
            cpu.contains("used 100% of a core (45.0 µs per round trip)"),
            "{cpu}"
        );
        assert!(!cpu.contains("sync latency"), "{cpu}");
    }

    #[test]
    fn log_syncs_are_the_fdatasyncs_or_else_the_direct_writes() {
        let probe = |calls: &[(&str, f64)]| Probe {
            persistent: true,
            by_syscall: calls.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
            ..Default::default()
        };
        assert_eq!(
            log_syncs(&probe(&[("pwrite64", 0.1), ("fdatasync", 0.09)])),
            Some(0.09)
        );
        assert_eq!(log_syncs(&probe(&[("pwrite64", 0.08)])), Some(0.08));
        assert_eq!(log_syncs(&probe(&[("sendto", 2.0)])), None);
    }

    #[test]
    fn a_probe_is_divided_by_the_round_trips_of_its_window() {
        let p = Probe {
            user_us: 2e6,
            sys_us: 1e6,
            voluntary_switches: 1000.0,
            syscalls: Some(40_000.0),
            by_syscall: vec![("sendto".into(), 20_000.0), ("fdatasync".into(), 1.0)],
            ..Default::default()
        };
        let r = run(64, false, 10_000.0, 20.0, 1.0);
        let q = per_round_trip(p, Duration::from_secs(2), &r);
        assert!((q.user_us - 100.0).abs() < 1e-9);
        assert!((q.sys_us - 50.0).abs() < 1e-9);
        assert_eq!(q.syscalls, Some(2.0));
        assert_eq!(q.by_syscall, vec![("sendto".to_string(), 1.0)]);
    }

    #[test]
    fn the_idle_setting_names_the_driver_sysfs_shows_and_its_poll_time() {
        let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver");
        match (idle_setting(), driver) {
            (Some(t), Ok(d)) => {
                assert!(t.contains(&format!("`{}`", d.trim())), "{t}");
                if let Ok(ns) =
                    std::fs::read_to_string("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
                {
                    assert!(
                        t.contains(&format!("`guest_halt_poll_ns` {}", ns.trim())),
                        "{t}"
                    );
                }
            }
            (None, Err(_)) => {}
            (t, d) => panic!("idle setting {t:?} against sysfs {d:?}"),
        }
    }
}
