//! `ferrymq-bench report dr [--quick] [--out DIR] [--rtts 10,20,50,100] [--requesters 1,4,16,64,256]
//! [--distance-requesters 64,256] [--steps dr1,dr2,hadr,distance] [--dr2-qms N] [--max-lag BYTES]
//! [--repeats N]`:
//! the disaster recovery benchmark report. In a private $FERRYMQ_HOME it creates queue managers
//! without DR, DR primaries each shipping its recovery log to a DR secondary (another process
//! with its own home, same queue manager name), and HA groups, all on this machine, and measures
//! 2 KB persistent Request/Responder (the `report ha` workload, same queue pairs, responders and
//! cph arguments):
//!
//! 1. DR1: one DR primary (with its secondary) against one queue manager without DR, measured in
//!    turn at each requester count while both are running — `--repeats` windows each (3 in full
//!    mode, 1 with `--quick`), alternately, and each side's median window is its row, so one
//!    slow spell of this shared machine does not decide a comparison (likewise DR2 and HA+DR);
//! 2. DR2 (full mode only): N DR primaries, each with its own secondary, against N queue
//!    managers without DR (N = 2 by default, `--dr2-qms`);
//! 3. HA+DR: one HA group of three instances against the same group shape whose instances are all
//!    DR primaries shipping to one standalone secondary, reported as % of HA;
//! 4. distance: in the DR2 shape (`--dr2-qms` DR pairs, as the seed measures distance on DR2),
//!    each link direct, and with a `ferrymq relay` on each DR link only adding 0 ms and each
//!    `--rtts` round trip, reported as % of the direct row. The lag bound is per queue manager,
//!    so it allows at most `MaxLagBytes` per round trip for each of them.
//!
//! After every DR run it reads the primaries' `dspmq -o dr` line (DRSTATUS, LAGBYTES, LAGSECS,
//! MAXLAG), and the CPU it reports for a DR run covers the primaries and the secondaries (cph
//! measures every process it is given), each side also shown alone. It writes README.md
//! (tables), one SVG chart per sweep and runs.json (every raw run) to DIR. Every queue manager,
//! instance and relay it starts is stopped again by pid (also when a step fails, and on Ctrl-C)
//! and the private home is deleted at the end.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cph::RunResult;
use crate::qm::mq;
use crate::report::Qms;
use crate::report_ha::measure::{fmt_opt, median_by, met, pct, rr_args_timed, run_logged, Flat};
use crate::report_ha::procs::{
    alive, end_or_kill, field, free_ports, log_lines, register, unregister, wait_listening,
    HaGroup, Relay,
};
use crate::report_ha::render::{join_list, windows_cell};
use crate::report_ha::{
    parse_list, parse_rtts, shell_word, ACTIVE_TIMEOUT, INSTANCES, LOG_PAGES, MSG_SIZE, QUEUE_PAIRS,
};

mod measure;
mod render;
mod sites;

use measure::*;
use render::*;
use sites::*;

/// The host in every DR address (`-drr`, `-drl`). The relays listen on 127.0.0.1 only, and
/// `localhost` may resolve to ::1 first, so the report names the address itself.
const DR_HOST: &str = "127.0.0.1";
/// How long a DR primary may take to reach DRSTATUS(Normal) before the first run.
const NORMAL_TIMEOUT: Duration = Duration::from_secs(30);
const DR_POLL: Duration = Duration::from_millis(100);
/// Targets the report is checked against: DR against no DR (DR1, DR2), and each (round trip in
/// ms, % of the direct DR rate) of the distance step.
const TARGET_DR_PCT: f64 = 90.0;
const TARGET_DISTANCE: [(f64, f64); 1] = [(100.0, 80.0)];

/// `ferrymq-bench report dr`'s options (read as text, checked by [`Opts::parse`]).
#[derive(clap::Args, Debug)]
pub struct DrArgs {
    /// Short runs and fewer points
    #[arg(long)]
    pub quick: bool,
    /// Directory to write the report to (default docs/results/DATE-dr[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// Round trips (ms) added on the DR link, one distance row each (default 10,20,50,100)
    #[arg(long, value_name = "MS,MS...", allow_hyphen_values = true)]
    pub rtts: Option<String>,
    /// Requester counts of the DR1/DR2/HA+DR sweeps
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub requesters: Option<String>,
    /// Requester counts of the distance step (default 64,256)
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub distance_requesters: Option<String>,
    /// Steps to run, of dr1,dr2,hadr,distance (default all; --quick without dr2)
    #[arg(long, value_name = "STEP,STEP...", allow_hyphen_values = true)]
    pub steps: Option<String>,
    /// Queue managers per side in DR2, 1-10 (default 2)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub dr2_qms: Option<String>,
    /// crtmqm -drlag of every DR primary (default: the queue manager's)
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    pub max_lag: Option<String>,
    /// Windows per side at each requester count, 1-9 (default 3; --quick 1)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub repeats: Option<String>,
}

const STEPS: [&str; 4] = ["dr1", "dr2", "hadr", "distance"];

#[derive(Debug, Clone, PartialEq)]
struct Opts {
    quick: bool,
    out: PathBuf,
    /// Round trips (ms) added on the DR link, one distance row each (a 0 ms row is always added).
    rtts: Vec<f64>,
    requesters: Vec<usize>,
    distance_requesters: Vec<usize>,
    steps: Vec<String>,
    /// Queue managers per side in DR2.
    dr2_qms: usize,
    /// `crtmqm -drlag` of every DR primary; None: the queue manager's default.
    max_lag: Option<u64>,
    /// Windows per side at each requester count in DR1, DR2 and HA+DR, run alternately; a
    /// row shows each side's median window.
    repeats: usize,
    warmup: Duration,
    duration: Duration,
    /// The command line as given, for the report header.
    command: String,
}

/// Parses one number for `flag` that must lie in `lo..=hi`.
fn in_range<T: FromStr + PartialOrd + Copy + std::fmt::Display>(
    flag: &str,
    text: &str,
    lo: T,
    hi: T,
) -> Result<T, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("{flag}: '{text}' is not a number from {lo} to {hi}"))
}

impl Opts {
    fn parse(argv: &[String]) -> Result<Opts, String> {
        let quick = argv.iter().any(|a| a == "--quick");
        let mut o = Opts {
            quick,
            out: crate::run_info::default_out("dr", quick),
            rtts: vec![10.0, 20.0, 50.0, 100.0],
            requesters: if quick {
                vec![4, 16, 64, 256]
            } else {
                vec![1, 4, 16, 64, 256]
            },
            distance_requesters: vec![64, 256],
            steps: STEPS
                .iter()
                .filter(|s| !quick || **s != "dr2")
                .map(|s| s.to_string())
                .collect(),
            dr2_qms: 2,
            max_lag: None,
            repeats: if quick { 1 } else { 3 },
            warmup: Duration::from_secs(if quick { 1 } else { 2 }),
            duration: Duration::from_secs(if quick { 3 } else { 8 }),
            command: std::iter::once("ferrymq-bench report dr".to_string())
                .chain(argv.iter().map(|a| shell_word(a)))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let a: DrArgs = crate::cli::parse_args("ferrymq-bench report dr", argv)?;
        if let Some(v) = a.out {
            o.out = v;
        }
        if let Some(v) = &a.rtts {
            o.rtts = parse_rtts(v)?;
        }
        if let Some(v) = &a.requesters {
            o.requesters = parse_list("--requesters", v)?;
        }
        if let Some(v) = &a.distance_requesters {
            o.distance_requesters = parse_list("--distance-requesters", v)?;
        }
        if let Some(v) = &a.dr2_qms {
            o.dr2_qms = in_range("--dr2-qms", v, 1, 10)?;
        }
        if let Some(v) = &a.max_lag {
            o.max_lag = Some(in_range("--max-lag", v, 1, u64::MAX)?);
        }
        if let Some(v) = &a.repeats {
            o.repeats = in_range("--repeats", v, 1, 9)?;
        }
        if let Some(value) = &a.steps {
            o.steps = value.split(',').map(|s| s.trim().to_string()).collect();
            if let Some(bad) = o.steps.iter().find(|s| !STEPS.contains(&s.as_str())) {
                return Err(format!(
                    "--steps: '{bad}' is not one of {}",
                    STEPS.join(",")
                ));
            }
        }
        if o.requesters.contains(&0) || o.distance_requesters.contains(&0) {
            return Err("requester counts must be at least 1".into());
        }
        Ok(o)
    }

    fn step(&self, name: &str) -> bool {
        self.steps.iter().any(|s| s == name)
    }

    /// The distance rows: direct (None), through a relay adding 0 ms, then each `--rtts`.
    fn distance_rows(&self) -> Vec<Option<f64>> {
        let mut rows = vec![None, Some(0.0)];
        for r in &self.rtts {
            if !rows.contains(&Some(*r)) {
                rows.push(Some(*r));
            }
        }
        rows
    }
}

pub fn main(argv: &[String]) -> Result<(), String> {
    let o = Opts::parse(argv)?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let home = crate::run_info::private_home("dr")?;
    let started = Instant::now();
    let mut rep = Report {
        info: crate::run_info::RunInfo::now(&o.command, o.quick, o.warmup, o.duration, MSG_SIZE),
        max_lag: o.max_lag,
        requesters: o.requesters.clone(),
        distance_requesters: o.distance_requesters.clone(),
        repeats: o.repeats,
        distance_qms: o.dr2_qms,
        dr1: None,
        dr2: None,
        hadr: None,
        distance: Vec::new(),
        log_findings: Vec::new(),
        errors: Vec::new(),
    };
    eprintln!(
        "report: DR report into {} (private FERRYMQ_HOME {})",
        o.out.display(),
        home.display()
    );
    let result = steps(&o, &home, &mut rep, started);
    rep.info.elapsed_s = started.elapsed().as_secs_f64();
    if let Err(e) = result {
        rep.errors.push(e);
    }
    let written = write_report(&o.out, &rep);
    let _ = std::fs::remove_dir_all(&home);
    written?;
    eprintln!(
        "report: done in {:.0} s; written to {}",
        rep.info.elapsed_s,
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

/// Runs the selected steps; a failed step is recorded and the next one still runs. The report
/// is rewritten after every step, so an interrupted run keeps what it measured.
fn steps(o: &Opts, home: &Path, rep: &mut Report, started: Instant) -> Result<(), String> {
    let checkpoint = |rep: &mut Report| {
        rep.info.elapsed_s = started.elapsed().as_secs_f64();
        write_report(&o.out, rep)
    };
    for (step, nqm) in [("dr1", 1), ("dr2", o.dr2_qms)] {
        if o.step(step) {
            match compare_standalone(o, home, nqm, step, rep) {
                Ok(c) if step == "dr1" => rep.dr1 = Some(c),
                Ok(c) => rep.dr2 = Some(c),
                Err(e) => rep.errors.push(format!("{}: {e}", step.to_uppercase())),
            }
            checkpoint(rep)?;
        }
    }
    if o.step("hadr") {
        match compare_ha(o, home, rep) {
            Ok(c) => rep.hadr = Some(c),
            Err(e) => rep.errors.push(format!("HA+DR: {e}")),
        }
        checkpoint(rep)?;
    }
    if o.step("distance") {
        for (k, rtt) in o.distance_rows().into_iter().enumerate() {
            let result = distance_row(o, home, k, rtt, rep);
            if let Err(e) = result {
                rep.errors
                    .push(format!("distance, {}: {e}", distance_label(rtt)));
            }
            checkpoint(rep)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
