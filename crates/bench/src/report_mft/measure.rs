//! The measurement of `report mft`: the queue managers of both topologies, the agents (created
//! again with each chunk size), the rows (transfers submitted with `fteCreateTransfer -w`, timed
//! from the first submission to the last outcome, with each process's CPU from /proc over the
//! same span) and the `cp`+`sync` baseline of every file size.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use super::files::{self, SourceSet};
use super::{Mode, Opts, Results, MB_BYTES};
use crate::cpu::cpu_seconds;
use crate::qm::{ferrymq_bin, mq, mq_input};
use crate::report::Qms;
use crate::report_ha::procs::{self, alive};
use crate::run_info::RunInfo;

/// Bindings mode: the sending agent's and the receiving agent's queue managers.
pub(crate) const QM_SRC: &str = "MFTA";
pub(crate) const QM_DST: &str = "MFTB";
/// Client mode: the one queue manager both agents connect to over TCP.
pub(crate) const QM_CLIENT: &str = "MFTC";
/// Log file pages of each queue manager (three primary files).
const LOG_PAGES: u32 = 16384;
/// How long `fteCreateTransfer -w` waits for one row's outcome, seconds.
const TRANSFER_WAIT_S: u64 = 3600;

/// The `cp`+`sync` of one file size's files, measured before and after that size's rows; the
/// faster run counts (the stricter baseline for the goals).
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub size_mb: u64,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    /// Every run's seconds, in order.
    pub runs_s: Vec<f64>,
    /// The relay floor of the same files (`floor::relay_floor`, at the default chunk size):
    /// every run's seconds, and the fastest as MB/s (0 until one ran).
    pub floor_runs_s: Vec<f64>,
    pub floor_mb_per_s: f64,
}

impl Baseline {
    pub(crate) fn new(size_mb: u64, files: u64, bytes: u64) -> Baseline {
        Baseline {
            size_mb,
            files,
            bytes,
            seconds: f64::INFINITY,
            mb_per_s: 0.0,
            runs_s: Vec::new(),
            floor_runs_s: Vec::new(),
            floor_mb_per_s: 0.0,
        }
    }

    /// Adds a run of `secs`; the fastest so far counts.
    pub(crate) fn add(&mut self, secs: f64) {
        self.runs_s.push(secs);
        self.seconds = self.seconds.min(secs);
        self.mb_per_s = self.bytes as f64 / MB_BYTES as f64 / self.seconds;
    }

    /// Adds a relay floor run of `secs`; the fastest so far counts.
    pub(crate) fn add_floor(&mut self, secs: f64) {
        self.floor_runs_s.push(secs);
        let best = self
            .floor_runs_s
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        self.floor_mb_per_s = self.bytes as f64 / MB_BYTES as f64 / best;
    }

    /// The relay floor in percent of `cp`+`sync` (0 until both ran).
    pub fn floor_pct(&self) -> f64 {
        if self.mb_per_s > 0.0 {
            self.floor_mb_per_s / self.mb_per_s * 100.0
        } else {
            0.0
        }
    }
}

/// CPU seconds of one process over a row.
#[derive(Debug, Clone, Serialize)]
pub struct ProcCpu {
    pub label: String,
    pub cpu_s: f64,
}

/// One row of the seed's tables.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub size_mb: u64,
    pub files: u64,
    pub bytes: u64,
    pub mode: Mode,
    /// Ten transfers submitted at once (each a tenth of the files) rather than one of them all.
    pub multiple: bool,
    pub transfers: usize,
    pub chunk_kib: usize,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub sender_cpu_s: f64,
    pub receiver_cpu_s: f64,
    /// The queue manager(s): MFTA and MFTB in bindings mode, MFTC in client mode.
    pub qm_cpu: Vec<ProcCpu>,
    /// This row's rate in percent of `cp`+`sync` of the same files.
    pub pct_of_cp: f64,
}

impl Row {
    pub fn qm_cpu_s(&self) -> f64 {
        self.qm_cpu.iter().map(|p| p.cpu_s).sum()
    }
}

/// One topology: its queue managers and the two agents on them.
struct Topology {
    mode: Mode,
    home: PathBuf,
    qms: Qms,
    sender: String,
    receiver: String,
    /// The agents' chunk size now (None: not created yet).
    chunk_kib: Option<usize>,
}

fn agent_pid(home: &Path, agent: &str) -> Option<u32> {
    let f = home.join("mqft/agents").join(agent).join("agent.pid");
    std::fs::read_to_string(f).ok()?.trim().parse().ok()
}

impl Topology {
    fn start(home: &Path, mode: Mode) -> Result<Topology, String> {
        let t = match mode {
            Mode::Bindings => {
                let qms = Qms::start_named(
                    home,
                    &[QM_SRC.to_string(), QM_DST.to_string()],
                    LOG_PAGES,
                    &[],
                )?;
                // A channel pair each way: the chunks go A to B, the acknowledgements B to A.
                for (from, to, port) in [
                    (QM_SRC, QM_DST, qms.ports[1]),
                    (QM_DST, QM_SRC, qms.ports[0]),
                ] {
                    mq_input(home, &["runmqsc", from], &channel_mqsc(from, to, port))?;
                }
                Topology {
                    mode,
                    home: home.to_path_buf(),
                    qms,
                    sender: "MFT.SRC.B".into(),
                    receiver: "MFT.DST.B".into(),
                    chunk_kib: None,
                }
            }
            Mode::Client => Topology {
                mode,
                home: home.to_path_buf(),
                qms: Qms::start_named(home, &[QM_CLIENT.to_string()], LOG_PAGES, &[])?,
                sender: "MFT.SRC.C".into(),
                receiver: "MFT.DST.C".into(),
                chunk_kib: None,
            },
        };
        for pid in &t.qms.pids {
            procs::register(*pid);
        }
        Ok(t)
    }

    fn agent_qms(&self) -> (&str, &str) {
        match self.mode {
            Mode::Bindings => (QM_SRC, QM_DST),
            Mode::Client => (QM_CLIENT, QM_CLIENT),
        }
    }

    fn stop_agents(&self) {
        for a in [&self.sender, &self.receiver] {
            let pid = agent_pid(&self.home, a);
            if pid.is_some_and(alive) && mq(&self.home, &["fteStopAgent", a]).is_err() {
                if let Some(p) = pid.filter(|p| alive(*p)) {
                    let _ = procs::kill9(p);
                }
            }
            if let Some(p) = pid {
                procs::unregister(p);
            }
        }
    }

    /// Makes both agents run with `chunk_kib`: stopped, created again (their queues REPLACEd,
    /// agent.properties rewritten), started.
    fn agents_with(&mut self, chunk_kib: usize) -> Result<(), String> {
        if self.chunk_kib == Some(chunk_kib) {
            return Ok(());
        }
        self.stop_agents();
        self.chunk_kib = None;
        let (sqm, dqm) = self.agent_qms();
        // The transfer log goes to the sending agent's queue manager.
        mq(
            &self.home,
            &["fteSetupCoordination", "-coordinationQMgr", sqm],
        )?;
        let chunk = (chunk_kib * 1024).to_string();
        for (agent, qm) in [(&self.sender, sqm), (&self.receiver, dqm)] {
            let mut args = vec![
                "fteCreateAgent",
                "-agentName",
                agent,
                "-agentQMgr",
                qm,
                "-agentChunkSize",
                &chunk,
            ];
            let port = self.qms.ports[0].to_string();
            if self.mode == Mode::Client {
                args.extend(["-agentQMgrHost", "127.0.0.1", "-agentQMgrPort", &port]);
            }
            mq(&self.home, &args)?;
        }
        for agent in [&self.sender, &self.receiver] {
            mq(&self.home, &["fteStartAgent", agent])?;
            if let Some(p) = agent_pid(&self.home, agent) {
                procs::register(p);
            }
        }
        self.chunk_kib = Some(chunk_kib);
        Ok(())
    }

    /// Transfers the files of `src` to `dest` (one transfer of all the groups, or one transfer
    /// per group submitted at once) and measures the row.
    fn row(
        &mut self,
        src: &SourceSet,
        dest: &Path,
        chunk_kib: usize,
        multiple: bool,
        base: &Baseline,
    ) -> Result<Row, String> {
        self.agents_with(chunk_kib)?;
        let _ = std::fs::remove_dir_all(dest);
        std::fs::create_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        let (sqm, dqm) = self.agent_qms();
        let pid =
            |a: &str| agent_pid(&self.home, a).ok_or_else(|| format!("agent {a}: no pid file"));
        let (spid, rpid) = (pid(&self.sender)?, pid(&self.receiver)?);
        let groups: Vec<String> = src
            .groups()
            .iter()
            .map(|g| g.join("*").to_string_lossy().into_owned())
            .collect();
        let batches: Vec<Vec<String>> = if multiple {
            groups.iter().map(|g| vec![g.clone()]).collect()
        } else {
            vec![groups]
        };
        let cpu = |p: u32| cpu_seconds(p).unwrap_or(0.0);
        let qm0: Vec<f64> = self.qms.pids.iter().map(|p| cpu(*p)).collect();
        let (s0, r0) = (cpu(spid), cpu(rpid));
        let t = Instant::now();
        let wait = TRANSFER_WAIT_S.to_string();
        let dest_s = dest.to_string_lossy().into_owned();
        let mut children = Vec::new();
        for sources in &batches {
            let mut c = Command::new(ferrymq_bin()?);
            c.args([
                "fteCreateTransfer",
                "-sa",
                &self.sender,
                "-sm",
                sqm,
                "-da",
                &self.receiver,
                "-dm",
                dqm,
                "-dd",
                &dest_s,
                "-w",
                &wait,
            ])
            .args(sources)
            .env("FERRYMQ_HOME", &self.home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            children.push(c.spawn().map_err(|e| format!("fteCreateTransfer: {e}"))?);
        }
        let mut failures = Vec::new();
        for ch in children {
            let out = ch
                .wait_with_output()
                .map_err(|e| format!("fteCreateTransfer: {e}"))?;
            if !out.status.success() {
                failures.push(format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        let seconds = t.elapsed().as_secs_f64();
        let (s1, r1) = (cpu(spid), cpu(rpid));
        let qm_cpu = self
            .qms
            .pids
            .iter()
            .zip(&qm0)
            .zip(&self.qms.names)
            .map(|((p, c0), n)| ProcCpu {
                label: n.clone(),
                cpu_s: cpu(*p) - c0,
            })
            .collect();
        if !failures.is_empty() {
            return Err(format!(
                "{} of {} transfer(s) failed; first: {}",
                failures.len(),
                batches.len(),
                failures[0]
            ));
        }
        files::verify_flat(src, dest)?;
        let _ = std::fs::remove_dir_all(dest);
        let bytes = src.total_bytes();
        let mb_per_s = bytes as f64 / MB_BYTES as f64 / seconds;
        Ok(Row {
            size_mb: src.file_bytes / MB_BYTES,
            files: src.files.len() as u64,
            bytes,
            mode: self.mode,
            multiple,
            transfers: batches.len(),
            chunk_kib,
            seconds,
            mb_per_s,
            sender_cpu_s: s1 - s0,
            receiver_cpu_s: r1 - r0,
            qm_cpu,
            pct_of_cp: mb_per_s / base.mb_per_s * 100.0,
        })
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Before the queue managers end: an agent that loses its queue manager waits for it.
        self.stop_agents();
        for pid in &self.qms.pids {
            procs::unregister(*pid);
        }
    }
}

/// The MQSC that joins `from` to `to`: a transmission queue named like `to`, a sender channel
/// to `to`'s listener on `port`, and the receiver of `to`'s channel back.
pub(crate) fn channel_mqsc(from: &str, to: &str, port: u16) -> String {
    format!(
        "DEFINE QLOCAL({to}) USAGE(XMITQ) MAXDEPTH(100000)\n\
         DEFINE CHANNEL({to}.TO.{from}) CHLTYPE(RCVR) TRPTYPE(TCP)\n\
         DEFINE CHANNEL({from}.TO.{to}) CHLTYPE(SDR) TRPTYPE(TCP) CONNAME('127.0.0.1({port})') XMITQ({to})\n\
         START CHANNEL({from}.TO.{to})\n"
    )
}

/// Runs the whole matrix in `home`, calling `each` with the results so far after each file size
/// (so that a long run that stops still leaves the sizes it finished).
pub(crate) fn run(
    o: &Opts,
    home: &Path,
    each: &mut dyn FnMut(&Results) -> Result<(), String>,
) -> Result<Results, String> {
    let files_dir = home.join("files");
    let mut r = Results {
        info: RunInfo::now(
            &o.command,
            o.quick,
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
            0,
        ),
        total_mb: o.total_mb,
        mb_bytes: MB_BYTES,
        files_dir: files_dir.display().to_string(),
        filesystem: filesystem_of(home),
        load_at_start: std::fs::read_to_string("/proc/loadavg")
            .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
        baselines: Vec::new(),
        rows: Vec::new(),
        goals: Vec::new(),
    };
    let mut tops: Vec<Topology> = Vec::new();
    for m in &o.modes {
        tops.push(Topology::start(home, *m)?);
    }
    let total = o.rows();
    for (k, &size) in o.sizes_mb.iter().enumerate() {
        let count = o.files(size);
        let src_dir = files_dir.join("src");
        let _ = std::fs::remove_dir_all(&src_dir);
        eprintln!(
            "report: writing {count} × {size} MB files to {}",
            src_dir.display()
        );
        let src = files::write_sources(&src_dir, count, size * MB_BYTES, 0x5EED + k as u64)?;
        let mut base = Baseline::new(size, count, src.total_bytes());
        let cp = |base: &mut Baseline| -> Result<(), String> {
            // An unrecorded copy first, then two recorded: on this kind of virtual disk the same
            // copy takes either about 0.7 s or about 1.7 s per GB, by the host's state, so the
            // fastest of several runs is the disk's real pace (and the strictest baseline).
            files::cp_sync(&src, &files_dir.join("cp"))?;
            for _ in 0..2 {
                let secs = files::cp_sync(&src, &files_dir.join("cp"))?;
                base.add(secs);
                eprintln!(
                    "report: cp+sync {count} × {size} MB: {secs:.2} s, {:.1} MB/s",
                    src.total_bytes() as f64 / MB_BYTES as f64 / secs
                );
            }
            let secs = super::floor::relay_floor(
                &src,
                &files_dir.join("floor"),
                super::DEFAULT_CHUNK_KIB * 1024,
            )?;
            base.add_floor(secs);
            eprintln!(
                "report: relay floor {count} × {size} MB (no queue manager): {secs:.2} s, {:.1} MB/s",
                src.total_bytes() as f64 / MB_BYTES as f64 / secs
            );
            Ok(())
        };
        cp(&mut base)?;
        for t in tops.iter_mut() {
            for &chunk in &o.chunks_kib {
                for &multiple in &o.multiple {
                    let row = t
                        .row(&src, &files_dir.join("dst"), chunk, multiple, &base)
                        .map_err(|e| {
                            format!(
                                "{count} × {size} MB, {}, {} KiB chunks, {}: {e}",
                                t.mode.label(),
                                chunk,
                                if multiple { "multiple" } else { "single" }
                            )
                        })?;
                    eprintln!(
                        "report: {}/{total}: {}",
                        r.rows.len() + 1,
                        super::render::row_line(&row)
                    );
                    r.rows.push(row);
                }
            }
        }
        // Again after the rows: the fastest run counts, and every row is read against it.
        cp(&mut base)?;
        for row in r.rows.iter_mut().filter(|x| x.size_mb == size) {
            row.pct_of_cp = row.mb_per_s / base.mb_per_s * 100.0;
        }
        r.baselines.push(base);
        r.goals = super::goals(&r.rows, &r.baselines);
        each(&r)?;
        std::fs::remove_dir_all(&src_dir).map_err(|e| format!("{}: {e}", src_dir.display()))?;
    }
    drop(tops);
    r.goals = super::goals(&r.rows, &r.baselines);
    Ok(r)
}

/// The file system (device and type) holding `dir`, as /proc/mounts shows its mount point.
fn filesystem_of(dir: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let d = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && d.starts_with(f[1])).then(|| {
                (
                    f[1].len(),
                    format!("{} ({}) mounted on {}", f[0], f[2], f[1]),
                )
            })
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, s)| s)
        .unwrap_or_else(|| "unknown".into())
}
