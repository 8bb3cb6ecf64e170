//! `ferrymq-bench report standalone [--quick] [--qms 1,10] [--sizes ...] [--out DIR]`: reproduces the seed reports' standalone
//! Request/Responder tables on this machine. It creates its own queue managers (1 and 10, each
//! with REQUEST0..9/REPLY0..9, MAXDEPTH 5000) in a private $FERRYMQ_HOME, sweeps the requester
//! count upward for each message size and persistence until the rate stops rising, and writes a
//! folder with a markdown report (tables in the seeds' layout: Max Rate, CPU%, Clients, Latency),
//! one SVG chart per scenario (rate vs requesters) and the raw JSON of every run. A security
//! section follows (`--security yes`, the default; `only` runs it alone): TLS and an authorized
//! user against plain TCP as ratios with their goals, and connection rates (`report_security`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cph::{self, Args, RunResult};
use crate::qm::{free_port, mq_with};
use crate::report_rtt;
use crate::report_security::{self, SecurityPlan, SecurityResults};

struct Plan {
    sizes: Vec<usize>,
    persistence: Vec<bool>,
    qm_counts: Vec<usize>,
    requesters: Vec<usize>,
    warmup: Duration,
    duration: Duration,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            sizes: vec![256, 2048, 20_480, 204_800],
            persistence: vec![false, true],
            qm_counts: vec![1, 10],
            requesters: vec![1, 2, 4, 8, 16, 32, 64, 128, 256],
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(8),
        }
    }

    /// Under five minutes on a 2-core machine: the headline 2 KB size, both persistences, 1 QM.
    fn quick() -> Plan {
        Plan {
            sizes: vec![2048],
            persistence: vec![false, true],
            qm_counts: vec![1],
            requesters: vec![1, 4, 16, 64],
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(3),
        }
    }
}

#[derive(Serialize)]
struct Scenario {
    name: String,
    size: usize,
    persistent: bool,
    queue_managers: usize,
    runs: Vec<RunResult>,
    /// The same steps on the baseline binary (`--baseline-bin`), run beside these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    baseline_runs: Vec<RunResult>,
    /// Steps run with more than one responder count: the runs that were not the step's best,
    /// this build's and the baseline's (`runs` and `baseline_runs` keep each step's best).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    other_runs: Vec<RunResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    other_baseline_runs: Vec<RunResult>,
}

/// What a sweep measured: the scenarios, the round-trip probes, the machine's load before and
/// after.
struct Sweep {
    scenarios: Vec<Scenario>,
    probes: Vec<report_rtt::Probe>,
    /// The single-requester runs with the CPUs' wake-up latency bounded.
    wake: Option<report_rtt::WakeRuns>,
    load: String,
    /// The command that produced the report, as given.
    command: String,
}

pub(crate) struct Qms {
    pub(crate) home: PathBuf,
    pub(crate) names: Vec<String>,
    pub(crate) ports: Vec<u16>,
    pub(crate) pids: Vec<u32>,
    /// The `ferrymq` binary they run, when not the one beside this program.
    pub(crate) bin: Option<PathBuf>,
}

impl Qms {
    fn start(home: &Path, n: usize) -> Result<Qms, String> {
        Qms::start_with(home, n, 16384)
    }

    /// `n` standalone queue managers PERF0.. with 3 primary log files of `log_pages` pages each.
    pub(crate) fn start_with(home: &Path, n: usize, log_pages: u32) -> Result<Qms, String> {
        let names: Vec<String> = (0..n).map(|i| format!("PERF{i}")).collect();
        Qms::start_named(home, &names, log_pages, &[])
    }

    /// Creates and starts the queue managers `names` in `home`, each on a free client port with 3
    /// primary log files of `log_pages` pages; `extra[i]`, when given, is added to the `crtmqm`
    /// of queue manager `i` (e.g. its disaster recovery role).
    pub(crate) fn start_named(
        home: &Path,
        names: &[String],
        log_pages: u32,
        extra: &[Vec<String>],
    ) -> Result<Qms, String> {
        Qms::start_prepared(home, names, log_pages, extra, &|_| Ok(()))
    }

    /// [`Qms::start_named`], with `prepare(name)` run on each queue manager between its creation
    /// and its start (its qm.ini, certificates, users). Every queue manager the reports measure
    /// is created here, so that what a new queue manager needs before it serves a benchmark is
    /// added in one place.
    pub(crate) fn start_prepared(
        home: &Path,
        names: &[String],
        log_pages: u32,
        extra: &[Vec<String>],
        prepare: &dyn Fn(&str) -> Result<(), String>,
    ) -> Result<Qms, String> {
        Qms::start_bin(home, names, log_pages, extra, prepare, None)
    }

    /// [`Qms::start_prepared`] with the `ferrymq` binary `bin` (None: the one beside this
    /// program).
    pub(crate) fn start_bin(
        home: &Path,
        names: &[String],
        log_pages: u32,
        extra: &[Vec<String>],
        prepare: &dyn Fn(&str) -> Result<(), String>,
        bin: Option<PathBuf>,
    ) -> Result<Qms, String> {
        let mut q = Qms {
            home: home.to_path_buf(),
            names: Vec::new(),
            ports: Vec::new(),
            pids: Vec::new(),
            bin,
        };
        let mq = |home: &Path, args: &[&str]| mq_with(q.bin.as_deref(), home, args);
        for (i, name) in names.iter().enumerate() {
            let port = free_port()?;
            let (port_s, pages) = (port.to_string(), log_pages.to_string());
            // The measuring clients connect without credentials: no security defaults.
            let mut args = vec![
                "crtmqm",
                "-p",
                &port_s,
                "-lp",
                "3",
                "-lf",
                &pages,
                "--insecure",
            ];
            if let Some(e) = extra.get(i) {
                args.extend(e.iter().map(String::as_str));
            }
            args.push(name);
            mq(home, &args)?;
            // Recorded as soon as it exists, so that a failure in any later step still ends and
            // deletes it (on drop) instead of leaving a running queue manager behind.
            q.names.push(name.clone());
            q.ports.push(port);
            // The measurements set their queues up over TCP (`cph`'s setup).
            mq(
                home,
                &[
                    "setmqini",
                    "-m",
                    name,
                    "-s",
                    "Channels",
                    "-k",
                    "RemoteAdmin",
                    "-v",
                    "yes",
                ],
            )?;
            prepare(name)?;
            mq(home, &["strmqm", name])?;
            let pid_file = home.join("qmgrs").join(name).join("qm.pid");
            let pid = std::fs::read_to_string(&pid_file)
                .map_err(|e| format!("{}: {e}", pid_file.display()))?;
            q.pids.push(
                pid.trim()
                    .parse()
                    .map_err(|_| format!("{}: not a pid", pid_file.display()))?,
            );
        }
        Ok(q)
    }
}

impl Drop for Qms {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = mq_with(self.bin.as_deref(), &self.home, &["endmqm", "-i", "-w", n]);
            let _ = mq_with(self.bin.as_deref(), &self.home, &["dltmqm", n]);
        }
    }
}

fn svg_chart(s: &Scenario) -> String {
    let points = s
        .runs
        .iter()
        .map(|r| (r.threads, r.round_trips_per_s))
        .collect();
    crate::chart::svg_lines(&s.name, &[("round trips/s".to_string(), points)])
}

fn size_label(size: usize) -> String {
    if size >= 1024 {
        format!("{}KB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// `ferrymq-bench report KIND`: the report and its options.
#[derive(clap::Subcommand, Debug)]
pub enum ReportCmd {
    /// Standalone sweep (queue managers x message sizes): the seeds' tables, charts and JSON
    #[command(
        after_help = "Examples:\n  ferrymq-bench report standalone --quick\n  ferrymq-bench report standalone --qms 1,10 --sizes 2048,20480 --out standalone-report"
    )]
    Standalone(StandaloneArgs),
    /// HA against standalone, replication distance, failover time
    #[command(
        after_help = "Examples:\n  ferrymq-bench report ha --quick\n  ferrymq-bench report ha --rtts 0,1,2,5,10 --failover-messages 0,500000 --out ha-report"
    )]
    Ha(crate::report_ha::HaArgs),
    /// DR against no DR, HA+DR against HA, DR link latency, DR lag
    #[command(
        after_help = "Examples:\n  ferrymq-bench report dr --quick\n  ferrymq-bench report dr --rtts 10,20,50,100 --steps dr1,distance --out dr-report"
    )]
    Dr(crate::report_dr::DrArgs),
    /// Message channel throughput between two queue managers: BATCHSZ, sizes, round trips
    #[command(
        after_help = "Examples:\n  ferrymq-bench report channels --quick\n  ferrymq-bench report channels --batch-sizes 1,50 --rtts 10 --duration-s 10 --rounds 3 --out channels-report"
    )]
    Channels(crate::report_channels::ChannelsArgs),
    /// Publish/subscribe fan-out: 1 publisher to 1..1000 subscribers against plain put/get
    #[command(
        after_help = "Examples:\n  ferrymq-bench report pubsub --quick\n  ferrymq-bench report pubsub --subscribers 1,10,100,1000 --deliveries 50000 --size 2048 --out pubsub-report"
    )]
    Pubsub(crate::report_pubsub::PubsubArgs),
    /// Managed file transfer: the seed's 1000 MB matrix (file sizes, chunk sizes, one or ten
    /// transfers, bindings or client agents) against cp+sync
    #[command(
        after_help = "Examples:\n  ferrymq-bench report mft --quick\n  ferrymq-bench report mft --sizes 100 --chunks 256 --transfers multiple --modes bindings\n  ferrymq-bench report mft --out mft-report   # the whole matrix: 48 rows of 1000 MB"
    )]
    Mft(crate::report_mft::MftArgs),
    /// Many client connections: time to connect them, memory and descriptors per connection,
    /// idle CPU, a request/responder workload beside them, memory across connect/close cycles
    #[command(
        after_help = "Examples:\n  ferrymq-bench report connections --quick\n  ferrymq-bench report connections --counts 1000,5000,20000,60000 --drivers 4 --out connections-report"
    )]
    Connections(crate::report_connections::ConnectionsArgs),
}

/// `ferrymq-bench report standalone`'s options.
#[derive(clap::Args, Debug)]
pub struct StandaloneArgs {
    /// Short runs and fewer points (minutes instead of hours)
    #[arg(long)]
    pub quick: bool,
    /// Queue manager counts, e.g. 1,10
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub qms: Option<String>,
    /// Message sizes in bytes, e.g. 256,2048,20480,204800
    #[arg(long, value_name = "BYTES,BYTES...", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    /// Directory to write the report to (default docs/results/DATE-standalone[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// The security section (TLS and authorization cost, connection rate): yes, no, or only it
    #[arg(long, value_enum, value_name = "WHEN", default_value = "yes")]
    pub security: SecurityWhen,
    /// Requester counts, e.g. 1,8,32 (the sweep's steps, and the security section's)
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub requesters: Option<String>,
    /// Length of each measured window, in seconds (connection-rate windows included)
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// Warm-up before each measured window, in seconds
    #[arg(long, value_name = "S")]
    pub warmup_s: Option<f64>,
    /// A `ferrymq` binary to measure beside this build (e.g. one built from an older commit):
    /// every requester step runs on both, and the round-trip goals show both values
    #[arg(long, value_name = "PATH")]
    pub baseline_bin: Option<PathBuf>,
}

/// Whether `report standalone` runs its security section.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityWhen {
    Yes,
    No,
    Only,
}

/// `report KIND [options]` (the arguments after `ferrymq-bench report`).
pub fn main(argv: &[String]) -> Result<(), String> {
    match argv.first().map(String::as_str) {
        Some("standalone") => {}
        Some("ha") => return crate::report_ha::main(&argv[1..]),
        Some("dr") => return crate::report_dr::main(&argv[1..]),
        Some("channels") => return crate::report_channels::main(&argv[1..]),
        Some("pubsub") => return crate::report_pubsub::main(&argv[1..]),
        Some("mft") => return crate::report_mft::main(&argv[1..]),
        Some("connections") => return crate::report_connections::main(&argv[1..]),
        Some(other) => {
            return Err(format!(
                "report '{other}' is not available yet; reports: standalone, ha, dr, channels, pubsub, mft, connections"
            ))
        }
        None => return Err("usage: ferrymq-bench report standalone [--quick] [--qms 1,10] [--sizes 256,2048,20480,204800] [--requesters 1,8,32] [--duration-s S] [--warmup-s S] [--security yes|no|only] [--out DIR]".into()),
    }
    let a: StandaloneArgs = crate::cli::parse_args("ferrymq-bench report standalone", &argv[1..])?;
    let quick = a.quick;
    let out_dir = a
        .out
        .unwrap_or_else(|| crate::run_info::default_out("standalone", quick));
    let mut plan = if quick { Plan::quick() } else { Plan::full() };
    let mut sec_plan = if quick {
        SecurityPlan::quick()
    } else {
        SecurityPlan::full()
    };
    let list = |flag: &str, v: &Option<String>| -> Result<Option<Vec<usize>>, String> {
        match v {
            None => Ok(None),
            Some(v) => v
                .split(',')
                .map(|v| {
                    v.parse()
                        .map_err(|_| format!("{flag}: '{v}' is not a number"))
                })
                .collect::<Result<Vec<usize>, String>>()
                .map(Some),
        }
    };
    if let Some(q) = list("--qms", &a.qms)? {
        plan.qm_counts = q;
    }
    if let Some(s) = list("--sizes", &a.sizes)? {
        plan.sizes = s.clone();
        sec_plan.sizes = s;
    }
    if let Some(r) = list("--requesters", &a.requesters)? {
        plan.requesters = r.clone();
        sec_plan.requesters = r;
    }
    let seconds = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v).map_err(|_| format!("{flag} {v}: not a number of seconds"))
    };
    if let Some(d) = a.duration_s {
        plan.duration = seconds("--duration-s", d)?;
        sec_plan.duration = plan.duration;
        sec_plan.conn_duration = plan.duration;
    }
    if let Some(w) = a.warmup_s {
        plan.warmup = seconds("--warmup-s", w)?;
        sec_plan.warmup = plan.warmup;
        sec_plan.conn_warmup = plan.warmup;
    }
    let command = std::iter::once("ferrymq-bench report")
        .chain(argv.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let home = std::env::temp_dir().join(format!("ferrymq-report-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let r = (|| {
        let sw = if a.security == SecurityWhen::Only {
            Sweep {
                scenarios: Vec::new(),
                probes: Vec::new(),
                wake: None,
                load: report_rtt::load_average(),
                command: command.clone(),
            }
        } else {
            sweep(
                &plan,
                &home,
                &out_dir,
                quick,
                a.baseline_bin.as_deref(),
                &command,
            )?
        };
        if a.security != SecurityWhen::No {
            let log = |l: &str| eprintln!("{l}");
            let sec = report_security::run(&sec_plan, &home, &command, &log)?;
            write_report(&out_dir, &sw, Some(&sec), quick, a.baseline_bin.as_deref())?;
        }
        Ok::<_, String>(sw.scenarios)
    })();
    let _ = std::fs::remove_dir_all(&home);
    let scenarios = r?;
    eprintln!(
        "report: done in {:.0} s; written to {}",
        started.elapsed().as_secs_f64(),
        out_dir.display()
    );
    let _ = scenarios;
    Ok(())
}

fn sweep(
    plan: &Plan,
    home: &Path,
    out_dir: &Path,
    quick: bool,
    baseline: Option<&Path>,
    command: &str,
) -> Result<Sweep, String> {
    let mut sw = Sweep {
        scenarios: Vec::new(),
        probes: Vec::new(),
        wake: None,
        load: report_rtt::load_average(),
        command: command.to_string(),
    };
    let total = plan.qm_counts.len() * plan.sizes.len() * plan.persistence.len();
    let mut progress =
        crate::progress::Progress::new("report standalone", "scenarios", Some(total as u64));
    let mut n = 0;
    for &nqm in &plan.qm_counts {
        let qms = Qms::start(home, nqm)?;
        // The baseline's queue managers, in their own home, stay up beside this build's.
        let base = match baseline {
            Some(bin) => {
                let h = home.join("baseline");
                std::fs::create_dir_all(&h).map_err(|e| format!("{}: {e}", h.display()))?;
                let names: Vec<String> = (0..nqm).map(|i| format!("BASE{i}")).collect();
                Some(Qms::start_bin(
                    &h,
                    &names,
                    16384,
                    &[],
                    &|_| Ok(()),
                    Some(bin.to_path_buf()),
                )?)
            }
            None => None,
        };
        for &size in &plan.sizes {
            for &persistent in &plan.persistence {
                n += 1;
                let name = format!(
                    "{} QM, {} {}",
                    nqm,
                    size_label(size),
                    if persistent {
                        "persistent"
                    } else {
                        "non-persistent"
                    }
                );
                progress.println(&format!("report: scenario {n}/{total}: {name}"));
                let mut s = Scenario {
                    name,
                    size,
                    persistent,
                    queue_managers: nqm,
                    runs: Vec::new(),
                    baseline_runs: Vec::new(),
                    other_runs: Vec::new(),
                    other_baseline_runs: Vec::new(),
                };
                let mut best = 0.0f64;
                let mut flat = 0;
                for (step, &req) in plan.requesters.iter().enumerate() {
                    let counts = report_rtt::responder_counts(req);
                    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
                    for (k, &responders) in counts.iter().enumerate() {
                        let a = rr_args(plan, &qms, req, responders * nqm, size, persistent);
                        let line = |who: &str, r: &RunResult| {
                            format!(
                            "report:   {req:>4} requesters, {:>3} responders{who}: {:>9.0} RT/s  QM CPU {:>5.1}%  client CPU {:>5.1}%  p50 {:.2} ms",
                            r.responders,
                            r.round_trips_per_s,
                            r.server_cpu_pct.unwrap_or(0.0),
                            r.client_cpu_pct,
                            r.latency_ms_p50
                        )
                        };
                        // With a baseline, both run each step, in alternating order, so neither
                        // always has the machine's first or second turn.
                        let b = base.as_ref().map(|b| on_qms(&a, b));
                        let base_first = (step + k) % 2 == 1;
                        if let (Some(b), true) = (&b, base_first) {
                            let r = cph::run(b)?;
                            progress.println(&line(" (baseline)", &r));
                            theirs.push(r);
                        }
                        let r = cph::run(&a)?;
                        progress.println(&line("", &r));
                        mine.push(r);
                        if let (Some(b), false) = (&b, base_first) {
                            let r = cph::run(b)?;
                            progress.println(&line(" (baseline)", &r));
                            theirs.push(r);
                        }
                    }
                    if let Some(r) = report_rtt::keep_best(theirs, &mut s.other_baseline_runs) {
                        s.baseline_runs.push(r);
                    }
                    let Some(r) = report_rtt::keep_best(mine, &mut s.other_runs) else {
                        continue;
                    };
                    let rate = r.round_trips_per_s;
                    s.runs.push(r);
                    if base.is_some() {
                        // Every step runs: the goals are read at given requester counts.
                        continue;
                    }
                    // The rate has stopped rising once two steps in a row add less than 5%.
                    if rate > best * 1.05 {
                        best = rate;
                        flat = 0;
                    } else {
                        flat += 1;
                        if flat >= 2 {
                            break;
                        }
                    }
                }
                if nqm == 1 && size == 2048 {
                    // The probe runs with the responder count of this build's step at the
                    // goals' requester count.
                    let responders = s
                        .runs
                        .iter()
                        .find(|r| r.threads == report_rtt::GOAL_REQUESTERS)
                        .map_or(report_rtt::RESPONDERS, |r| r.responders / nqm);
                    sw.probes
                        .extend(probe(plan, &qms, base.as_ref(), persistent, responders)?);
                    if !persistent {
                        sw.wake = Some(wake_runs(plan, home, base.as_ref(), &mut progress)?);
                    }
                }
                sw.scenarios.push(s);
                sw.load = format!(
                    "{} → {}",
                    sw.load.split(' ').next().unwrap_or(""),
                    report_rtt::load_average()
                );
                write_report(out_dir, &sw, None, quick, baseline)?;
                progress.inc(1);
            }
        }
    }
    progress.finish();
    Ok(sw)
}

/// The reports' request/responder run on the queue managers `q`: `requesters` and `responders`
/// in all, the plan's window, 10 queue pairs per queue manager, clients over TCP.
fn rr_args(
    plan: &Plan,
    q: &Qms,
    requesters: usize,
    responders: usize,
    size: usize,
    persistent: bool,
) -> Args {
    Args {
        module: cph::Module::Rr,
        qms: q.names.clone(),
        conns: q.ports.iter().map(|p| format!("127.0.0.1({p})")).collect(),
        requesters,
        responders,
        size,
        persistent,
        syncpoint: None,
        duration: plan.duration,
        warmup: plan.warmup,
        queues: 10,
        request_prefix: "REQUEST".into(),
        reply_prefix: "REPLY".into(),
        rate: 0,
        json: false,
        live: false,
        server_pids: q.pids.clone(),
        setup: true,
        client_threads: 1,
        security: Default::default(),
    }
}

/// The single-requester non-persistent 2 KB run with the CPUs' wake-up latency bounded: this
/// build on a queue manager of its own started with `TuningParameters:CpuWakeLatencyUs=0` (it
/// makes the kernel request while messages flow), the baseline (which has no such key) on its
/// queue manager with the same kernel request held by this program for its run, first. The queue
/// manager with the key is ended afterwards, and its request with it.
fn wake_runs(
    plan: &Plan,
    home: &Path,
    base: Option<&Qms>,
    progress: &mut crate::progress::Progress,
) -> Result<report_rtt::WakeRuns, String> {
    let names = ["WAKE0".to_string()];
    let mine = Qms::start_prepared(home, &names, 16384, &[], &|name| {
        mq_with(
            None,
            home,
            &[
                "setmqini",
                "-m",
                name,
                "-s",
                "TuningParameters",
                "-k",
                "CpuWakeLatencyUs",
                "-v",
                "0",
            ],
        )
        .map(|_| ())
    })?;
    let refused = report_rtt::wake_request_refused(home, &names[0]);
    let a = rr_args(plan, &mine, 1, report_rtt::RESPONDERS, 2048, false);
    let line = |who: &str, r: &RunResult| {
        format!(
            "report:   1 requester, CPU wake-up latency bounded{who}: p50 {:.3} ms, QM {:.1} µs/RT",
            r.latency_ms_p50,
            r.server_cpu_us_per_rt.unwrap_or(0.0)
        )
    };
    // Without the request held (no permission) the baseline's run would measure nothing of it:
    // none is made, and the report shows "-".
    let held = base.and_then(|_| report_rtt::hold_cpu_wake_latency(0).ok());
    let base = match base.zip(held) {
        Some((b, held)) => {
            let r = cph::run(&on_qms(&a, b))?;
            drop(held);
            progress.println(&line(" (baseline, held by the report)", &r));
            Some(r)
        }
        None => None,
    };
    let r = cph::run(&a)?;
    progress.println(&line(" (TuningParameters:CpuWakeLatencyUs=0)", &r));
    let w = report_rtt::WakeRuns {
        now: Some(r),
        base,
        refused,
    };
    drop(mine);
    Ok(w)
}

/// `a` aimed at the queue managers `q` instead.
fn on_qms(a: &Args, q: &Qms) -> Args {
    Args {
        qms: q.names.clone(),
        conns: q.ports.iter().map(|p| format!("127.0.0.1({p})")).collect(),
        server_pids: q.pids.clone(),
        ..a.clone()
    }
}

/// The round-trip probes at the goal's requester count: one window on this build's queue
/// manager, one on the baseline's.
fn probe(
    plan: &Plan,
    qms: &Qms,
    base: Option<&Qms>,
    persistent: bool,
    responders: usize,
) -> Result<Vec<report_rtt::Probe>, String> {
    let mut out = Vec::new();
    let targets = std::iter::once(("this build", qms)).chain(base.map(|b| ("baseline", b)));
    for (label, q) in targets {
        // The first queue manager's (the probes run where there is one).
        let mut a = rr_args(
            plan,
            q,
            report_rtt::GOAL_REQUESTERS,
            responders,
            2048,
            persistent,
        );
        a.qms.truncate(1);
        a.conns.truncate(1);
        a.server_pids.truncate(1);
        // The probe counts inside the measured window, a little short of both its ends.
        let margin = (plan.duration / 10).max(Duration::from_millis(100));
        let window = plan.duration.saturating_sub(margin * 2);
        let t = report_rtt::start_probe(q.pids[0], plan.warmup + margin, window);
        let r = cph::run(&a)?;
        if let Ok(Some((p, took))) = t.join() {
            let mut p = report_rtt::per_round_trip(p, took, &r);
            p.label = label.to_string();
            eprintln!(
                "report:   probe {label}, {}: {:.0} RT/s, user {:.1} µs/RT, kernel {:.1} µs/RT, {:.2} switches/RT, {} syscalls/RT",
                if persistent { "persistent" } else { "non-persistent" },
                p.round_trips_per_s,
                p.user_us,
                p.sys_us,
                p.voluntary_switches + p.involuntary_switches,
                p.syscalls.map_or("-".into(), |s| format!("{s:.2}"))
            );
            out.push(p);
        }
    }
    Ok(out)
}

fn write_report(
    out_dir: &Path,
    sw: &Sweep,
    security: Option<&SecurityResults>,
    quick: bool,
    baseline: Option<&Path>,
) -> Result<(), String> {
    let scenarios = &sw.scenarios;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# FerryMQ standalone Request/Responder report{}\n",
        if quick { " (quick)" } else { "" }
    );
    let _ = writeln!(
        md,
        "Produced by `{}` with ferrymq {} on {} CPU cores (client and queue managers share them). \
         Workload (the ferrymq-bench crate's docs, as the seed reports count it): requesters put a request under syncpoint and commit, then get the reply by CorrelId; \
         responders get under syncpoint, put the reply and commit: {} per queue manager, and from {} requesters on also {} and {} (the fastest run of each step is kept, for both persistences and the baseline alike; the tables name the count). Requesters connect over TCP (SHARECNV 1). \
         CPU is percent of one core. Latency is the median round trip at that load; the 1-requester row is the single-requester latency. \
         Machine CPU stolen is the share of the machine's CPU time the hypervisor gave to other guests during the run (from /proc/stat): a rate measured with much of it is the host's as much as ours.\n",
        if sw.command.is_empty() {
            format!(
                "ferrymq-bench report standalone{}",
                if quick { " --quick" } else { "" }
            )
        } else {
            sw.command.clone()
        },
        env!("CARGO_PKG_VERSION"),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        report_rtt::RESPONDERS,
        report_rtt::GOAL_REQUESTERS,
        report_rtt::MORE_RESPONDERS[0],
        report_rtt::MORE_RESPONDERS[1],
    );
    if !scenarios.is_empty() {
        let _ = writeln!(md, "## Summary (the seeds' layout)\n");
        let _ = writeln!(md, "| Scenario | Max Rate (RT/s) | QM CPU% | Client CPU% | Clients | Responders | Latency p50 at 1 requester (ms) | QM CPU µs/RT |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
    }
    for s in scenarios {
        let Some(best) = s
            .runs
            .iter()
            .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s))
        else {
            continue;
        };
        let single = s
            .runs
            .iter()
            .find(|r| r.threads == 1)
            .map(|r| format!("{:.3}", r.latency_ms_p50))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.1} | {:.1} | {} | {} | {} | {:.1} |",
            s.name,
            best.round_trips_per_s,
            best.server_cpu_pct.unwrap_or(0.0),
            best.client_cpu_pct,
            best.threads,
            best.responders,
            single,
            best.server_cpu_us_per_rt.unwrap_or(0.0)
        );
    }
    for (i, s) in scenarios.iter().enumerate() {
        let file = format!("chart-{i}.svg");
        std::fs::write(out_dir.join(&file), svg_chart(s)).map_err(|e| e.to_string())?;
        let _ = writeln!(md, "\n## {}\n\n![{}]({file})\n", s.name, s.name);
        let _ = writeln!(md, "| Requesters | Responders | Rate (RT/s) | QM CPU% | Client CPU% | p50 (ms) | p99 (ms) | QM CPU µs/RT | Client CPU µs/RT | Machine CPU stolen (%) |");
        let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let mut rows: Vec<(&RunResult, bool)> = s.runs.iter().map(|r| (r, true)).collect();
        rows.extend(s.other_runs.iter().map(|r| (r, false)));
        rows.sort_by_key(|(r, _)| (r.threads, r.responders));
        for (r, kept) in rows {
            let _ = writeln!(
                md,
                "| {} | {}{} | {:.0} | {:.1} | {:.1} | {:.3} | {:.3} | {:.1} | {:.1} | {:.0} |",
                r.threads,
                r.responders,
                if kept { "" } else { " (not kept)" },
                r.round_trips_per_s,
                r.server_cpu_pct.unwrap_or(0.0),
                r.client_cpu_pct,
                r.latency_ms_p50,
                r.latency_ms_p99,
                r.server_cpu_us_per_rt.unwrap_or(0.0),
                r.client_cpu_us_per_rt,
                r.machine_steal_pct
            );
        }
    }
    let pairs: Vec<report_rtt::Pair> = scenarios
        .iter()
        .map(|s| report_rtt::Pair {
            size: s.size,
            persistent: s.persistent,
            queue_managers: s.queue_managers,
            runs: &s.runs,
            baseline: &s.baseline_runs,
        })
        .collect();
    md.push_str(&report_rtt::markdown(
        &pairs,
        &sw.probes,
        sw.wake.as_ref(),
        baseline,
        &sw.load,
    ));
    if !sw.probes.is_empty() {
        let json = serde_json::to_string_pretty(&sw.probes).map_err(|e| e.to_string())?;
        std::fs::write(out_dir.join("probes.json"), json).map_err(|e| e.to_string())?;
    }
    if let Some(sec) = security {
        md.push_str(&report_security::markdown(sec));
        let json = serde_json::to_string_pretty(sec).map_err(|e| e.to_string())?;
        std::fs::write(out_dir.join("security.json"), json).map_err(|e| e.to_string())?;
    }
    std::fs::write(out_dir.join("README.md"), md).map_err(|e| e.to_string())?;
    let json = serde_json::to_string_pretty(scenarios).map_err(|e| e.to_string())?;
    std::fs::write(out_dir.join("runs.json"), json).map_err(|e| e.to_string())
}
