//! `ferrymq-bench report channels [--quick] [--out DIR] [--duration-s S] [--warmup-s S]
//! [--rounds N] [--sizes ...] [--batch-sizes ...] [--rtts ...] [--clients N]`: message channel
//! throughput. In a private $FERRYMQ_HOME it creates two queue managers on this machine, QM1 with
//! a transmission queue (QM2), a remote queue definition (BENCH.REMOTE, resolving to BENCH.TARGET
//! on QM2) and a sender channel QM1.QM2, and QM2 with the receiver channel of the same name and
//! the target queue. Putters on QM1 put to the remote queue; getters on QM2 get from the target
//! queue; the rate is the messages got per second, end to end, with each queue manager's CPU per
//! message over the same window (and the relay's, where there is one).
//!
//! The matrix: 2 KB messages at every `--batch-sizes` (BATCHSZ), every `--sizes` at BATCHSZ 50,
//! and 2 KB at BATCHSZ 50 through a `ferrymq relay` adding each `--rtts` round trip on the
//! channel; each persistent and non-persistent (NPMSPEED(FAST)). The baseline is measured in the
//! same run on QM1 alone: the same putters and getters on one local queue, 2 KB persistent. Two
//! goals are checked: the channel's 2 KB persistent rate on loopback against that baseline, and
//! its rate over a 10 ms round trip against loopback (both at BATCHSZ 50).
//!
//! At most a bounded number of messages is in flight between the putters and the getters (the
//! putters wait for credit the getters return), so no queue fills whatever the slower side, and
//! every point starts with empty queues: its putters stop after the window and its getters drain
//! what is still on the way. Each round measures the baseline and every point once; a row shows
//! the median round. It writes README.md (tables, goals), one SVG chart per sweep and runs.json
//! (every window) to DIR.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::report_ha::measure::median_by;
use crate::report_ha::{parse_list, parse_rtts, shell_word};

mod flow;
mod pair;
mod render;
#[cfg(test)]
mod tests;

use flow::FlowRun;

/// The BATCHSZ the size and distance sweeps and both goals are measured at.
const REFERENCE_BATCH: u32 = 50;
/// The message size of the batch and distance sweeps, the baseline and both goals.
const REFERENCE_SIZE_BYTES: usize = 2048;
/// Goal: the channel's 2 KB persistent rate on loopback, in percent of the local put+get rate.
const GOAL_LOOPBACK_PCT: f64 = 60.0;
/// Goal: the channel's rate with this round trip added, in percent of its loopback rate.
const GOAL_DISTANCE_RTT_MS: f64 = 10.0;
const GOAL_DISTANCE_PCT: f64 = 50.0;
/// MQ's BATCHSZ range.
const BATCH_MAX: u32 = 9999;
/// Largest message size the report accepts (the queue managers' default MAXMSGL is 4 MB).
const SIZE_MAX_BYTES: usize = 4 << 20;
/// Putters (and getters) unless `--clients` says otherwise: enough applications at once that
/// neither the local queue nor the channel waits on any one application's round trips, as a
/// transmission queue serving many applications does.
const CLIENTS_DEFAULT: usize = 16;
/// Most putters (and getters).
const CLIENTS_MAX: usize = 64;
/// Most rounds.
const ROUNDS_MAX: usize = 9;

/// One whole number for `flag` in `lo..=hi`.
fn number_in(flag: &str, text: &str, lo: usize, hi: usize) -> Result<usize, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("{flag}: '{text}' is not a number from {lo} to {hi}"))
}

/// `ferrymq-bench report channels`'s options.
#[derive(clap::Args, Debug)]
pub struct ChannelsArgs {
    /// A short smoke run: a few points, short windows, one round
    #[arg(long)]
    pub quick: bool,
    /// Directory to write the report to (default docs/results/DATE-channels[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// Length of each measured window, in seconds
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// Warm-up before each measured window, in seconds
    #[arg(long, value_name = "S")]
    pub warmup_s: Option<f64>,
    /// Rounds: each measures the baseline and every point once; a row is the median round
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub rounds: Option<String>,
    /// Message sizes of the size sweep (at BATCHSZ 50), bytes
    #[arg(long, value_name = "BYTES,BYTES...", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    /// BATCHSZ values of the batch sweep (2 KB messages)
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub batch_sizes: Option<String>,
    /// Round trips (ms) added on the channel by a relay (2 KB, BATCHSZ 50)
    #[arg(long, value_name = "MS,MS...", allow_hyphen_values = true)]
    pub rtts: Option<String>,
    /// Putters on QM1 and getters on QM2 (as many of each; the baseline uses the same)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub clients: Option<String>,
}

/// One channel measurement: a message size and persistence over the channel configured with
/// `batch`, directly (`rtt_ms` None) or through a relay adding `rtt_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Point {
    pub size: usize,
    pub persistent: bool,
    pub batch: u32,
    pub rtt_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
struct Opts {
    quick: bool,
    out: PathBuf,
    warmup: Duration,
    duration: Duration,
    rounds: usize,
    sizes: Vec<usize>,
    batches: Vec<u32>,
    rtts: Vec<f64>,
    clients: usize,
    /// The command line as given, for the report header.
    command: String,
}

impl Opts {
    fn parse(argv: &[String]) -> Result<Opts, String> {
        let a: ChannelsArgs = crate::cli::parse_args("ferrymq-bench report channels", argv)?;
        let quick = a.quick;
        let mut o = Opts {
            quick,
            out: crate::run_info::default_out("channels", quick),
            warmup: Duration::from_secs(if quick { 1 } else { 2 }),
            duration: Duration::from_secs(if quick { 2 } else { 5 }),
            rounds: if quick { 1 } else { 2 },
            sizes: if quick {
                vec![REFERENCE_SIZE_BYTES, 204_800]
            } else {
                vec![REFERENCE_SIZE_BYTES, 20_480, 204_800, 1_048_576]
            },
            batches: if quick {
                vec![10, REFERENCE_BATCH]
            } else {
                vec![1, 10, REFERENCE_BATCH, 200]
            },
            rtts: if quick {
                vec![GOAL_DISTANCE_RTT_MS]
            } else {
                vec![0.0, 1.0, GOAL_DISTANCE_RTT_MS, 50.0]
            },
            clients: CLIENTS_DEFAULT,
            command: std::iter::once("ferrymq-bench report channels".to_string())
                .chain(argv.iter().map(|a| shell_word(a)))
                .collect::<Vec<_>>()
                .join(" "),
        };
        if let Some(v) = a.out {
            o.out = v;
        }
        let seconds = |flag: &str, v: f64| {
            Duration::try_from_secs_f64(v)
                .ok()
                .filter(|d| !d.is_zero() || flag == "--warmup-s")
                .ok_or_else(|| format!("{flag} {v}: not a positive number of seconds"))
        };
        if let Some(d) = a.duration_s {
            o.duration = seconds("--duration-s", d)?;
        }
        if let Some(w) = a.warmup_s {
            o.warmup = seconds("--warmup-s", w)?;
        }
        if let Some(v) = &a.rounds {
            o.rounds = number_in("--rounds", v, 1, ROUNDS_MAX)?;
        }
        if let Some(v) = &a.sizes {
            o.sizes = parse_list("--sizes", v)?;
            if let Some(bad) = o.sizes.iter().find(|s| !(1..=SIZE_MAX_BYTES).contains(*s)) {
                return Err(format!(
                    "--sizes: {bad} is not a size from 1 to {SIZE_MAX_BYTES} bytes"
                ));
            }
        }
        if let Some(v) = &a.batch_sizes {
            o.batches = parse_list("--batch-sizes", v)?;
            if let Some(bad) = o.batches.iter().find(|b| !(1..=BATCH_MAX).contains(*b)) {
                return Err(format!(
                    "--batch-sizes: {bad} is not a BATCHSZ from 1 to {BATCH_MAX}"
                ));
            }
        }
        if let Some(v) = &a.rtts {
            o.rtts = parse_rtts(v)?;
        }
        if let Some(v) = &a.clients {
            o.clients = number_in("--clients", v, 1, CLIENTS_MAX)?;
        }
        Ok(o)
    }

    /// Every point of the matrix, once each, ordered so that the channel is reconfigured as
    /// rarely as possible: direct points by BATCHSZ, then each round trip through its relay.
    fn points(&self) -> Vec<Point> {
        let mut v: Vec<Point> = Vec::new();
        let mut add = |p: Point| {
            if !v.contains(&p) {
                v.push(p);
            }
        };
        for &persistent in &[true, false] {
            for &batch in &self.batches {
                add(Point {
                    size: REFERENCE_SIZE_BYTES,
                    persistent,
                    batch,
                    rtt_ms: None,
                });
            }
            for &size in &self.sizes {
                add(Point {
                    size,
                    persistent,
                    batch: REFERENCE_BATCH,
                    rtt_ms: None,
                });
            }
            // The loopback row the distance rows are compared with.
            add(Point {
                size: REFERENCE_SIZE_BYTES,
                persistent,
                batch: REFERENCE_BATCH,
                rtt_ms: None,
            });
            for &rtt in &self.rtts {
                add(Point {
                    size: REFERENCE_SIZE_BYTES,
                    persistent,
                    batch: REFERENCE_BATCH,
                    rtt_ms: Some(rtt),
                });
            }
        }
        // Stable: persistence and size keep their order within one channel configuration.
        v.sort_by(|a, b| {
            let key = |p: &Point| (p.rtt_ms.map_or(-1.0, |r| r), p.batch);
            let (ka, kb) = (key(a), key(b));
            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
        });
        v
    }
}

/// The windows of one point (or of the baseline), one per round.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Measured {
    pub point: Point,
    pub windows: Vec<FlowRun>,
}

impl Measured {
    /// The median window (the lower of the two middle ones for an even count).
    pub(crate) fn median(&self) -> Option<&FlowRun> {
        if self.windows.is_empty() {
            return None;
        }
        let refs: Vec<&FlowRun> = self.windows.iter().collect();
        Some(median_by(refs, |r| r.msgs_per_s))
    }
}

/// Everything the report measured, and how; runs.json is this.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    #[serde(flatten)]
    pub info: crate::run_info::RunInfo,
    pub rounds: usize,
    pub putters: usize,
    pub getters: usize,
    pub sizes: Vec<usize>,
    pub batches: Vec<u32>,
    pub rtts: Vec<f64>,
    pub baseline: Measured,
    pub points: Vec<Measured>,
    /// Notable lines of the queue managers' error logs.
    pub log_findings: Vec<String>,
    pub errors: Vec<String>,
}

impl Report {
    /// The median window of `p`, if it was measured.
    pub(crate) fn at(&self, p: Point) -> Option<&FlowRun> {
        self.points
            .iter()
            .find(|m| m.point == p)
            .and_then(Measured::median)
    }
}

pub fn main(argv: &[String]) -> Result<(), String> {
    let o = Opts::parse(argv)?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let home = crate::run_info::private_home("channels")?;
    let started = Instant::now();
    let baseline_point = Point {
        size: REFERENCE_SIZE_BYTES,
        persistent: true,
        batch: 0,
        rtt_ms: None,
    };
    let mut rep = Report {
        info: crate::run_info::RunInfo::now(
            &o.command,
            o.quick,
            o.warmup,
            o.duration,
            REFERENCE_SIZE_BYTES,
        ),
        rounds: o.rounds,
        putters: o.clients,
        getters: o.clients,
        sizes: o.sizes.clone(),
        batches: o.batches.clone(),
        rtts: o.rtts.clone(),
        baseline: Measured {
            point: baseline_point,
            windows: Vec::new(),
        },
        points: o
            .points()
            .into_iter()
            .map(|point| Measured {
                point,
                windows: Vec::new(),
            })
            .collect(),
        log_findings: Vec::new(),
        errors: Vec::new(),
    };
    eprintln!(
        "report: channels report into {} (private FERRYMQ_HOME {})",
        o.out.display(),
        home.display()
    );
    let result = run(&o, &home, &mut rep, started);
    rep.info.elapsed_s = started.elapsed().as_secs_f64();
    if let Err(e) = result {
        rep.errors.push(e);
    }
    let written = render::write_report(&o.out, &rep);
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
            "{} problem(s) (see Problems in {}):\n{}",
            rep.errors.len(),
            o.out.join("README.md").display(),
            rep.errors.join("\n")
        ))
    }
}

/// Creates the pair and measures every round. A point that fails is recorded and the next one
/// still runs; the report is rewritten after every round, so an interrupted run keeps what it
/// measured.
fn run(o: &Opts, home: &Path, rep: &mut Report, started: Instant) -> Result<(), String> {
    let mut pair = pair::Pair::start(home)?;
    let total = (rep.points.len() + 1) * o.rounds;
    let mut progress =
        crate::progress::Progress::new("report channels", "windows", Some(total as u64));
    let outcome = (|| {
        for round in 0..o.rounds {
            let spec = flow::Spec {
                size: REFERENCE_SIZE_BYTES,
                persistent: true,
                batch: 0,
                clients: o.clients,
                warmup: o.warmup,
                duration: o.duration,
            };
            match pair.measure_baseline(&spec) {
                Ok(r) => {
                    progress.println(&format!(
                        "report: round {}: baseline, local put+get 2 KB persistent: {}",
                        round + 1,
                        r.summary()
                    ));
                    rep.baseline.windows.push(r);
                }
                Err(e) => rep
                    .errors
                    .push(format!("baseline, round {}: {e}", round + 1)),
            }
            progress.inc(1);
            for k in 0..rep.points.len() {
                let p = rep.points[k].point;
                let spec = flow::Spec {
                    size: p.size,
                    persistent: p.persistent,
                    batch: p.batch,
                    clients: o.clients,
                    warmup: o.warmup,
                    duration: o.duration,
                };
                match pair.measure_channel(p, &spec) {
                    Ok(r) => {
                        progress.println(&format!(
                            "report: round {}: {}: {}",
                            round + 1,
                            render::point_label(p),
                            r.summary()
                        ));
                        rep.points[k].windows.push(r);
                    }
                    Err(e) => {
                        rep.errors.push(format!(
                            "{}, round {}: {e}",
                            render::point_label(p),
                            round + 1
                        ));
                        // The channel may be left in any state: the next point configures it
                        // from scratch.
                        pair.forget_channel_state();
                    }
                }
                progress.inc(1);
            }
            rep.info.elapsed_s = started.elapsed().as_secs_f64();
            render::write_report(&o.out, rep)?;
        }
        Ok::<(), String>(())
    })();
    progress.finish();
    rep.log_findings = pair.findings();
    pair.end();
    outcome
}
