//! `ferrymq-bench report pubsub [--quick] [--out DIR] [--subscribers 1,10,100,1000]
//! [--deliveries N] [--size BYTES]`: publish/subscribe fan-out. One publisher publishes to 1,
//! 10, 100 and 1000 subscribers, non-persistent (non-durable subscriptions) and persistent
//! (durable ones), 2 KB by default; each row counts publications and deliveries per second and
//! the queue manager's CPU per delivery (the copy's put at publish time plus the subscriber's
//! get). The baseline is measured in the same run on the same queue manager, before each row: the plain put,
//! then get, of as many messages on a local queue, and as many publications to a topic nobody
//! subscribes to. The goal: a delivery costs a subscriber less than twice a plain get. Beside
//! it (not in its place), the marginal cost of a subscriber: the row's CPU less that of its
//! publications to nobody, per delivery. It writes README.md (tables, goal), fanout.svg and
//! runs.json to DIR. Every row is measured twice: with a publisher that waits for each put's
//! reply (the goal's rows), and with one that puts with MQPMO_ASYNC_RESPONSE (and a baseline
//! that does the same).
//!
//! `ferrymq-bench fanout` prints the same rows without writing a report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::run_info::RunInfo;

pub mod measure;
mod render;

use measure::{Fanout, Plain, Row};
pub use render::line;

/// Goal: CPU per delivery under this many plain gets.
pub const GOAL_GETS: f64 = 2.0;
const SUBSCRIBERS_MAX: usize = 10_000;
const DELIVERIES_MAX: usize = 10_000_000;
const SIZE_MAX_BYTES: usize = 4 << 20;

/// `ferrymq-bench report pubsub`'s options.
#[derive(clap::Args, Debug)]
pub struct PubsubArgs {
    /// A short run: fewer deliveries per row
    #[arg(long)]
    pub quick: bool,
    /// Directory to write the report to (default docs/results/DATE-pubsub[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// Subscriber counts, e.g. 1,10,100,1000
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub subscribers: Option<String>,
    /// Copies delivered per row (and plain messages per baseline)
    #[arg(long, value_name = "N")]
    pub deliveries: Option<usize>,
    /// Message size in bytes
    #[arg(long, value_name = "BYTES")]
    pub size: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Opts {
    pub quick: bool,
    pub out: PathBuf,
    pub subscribers: Vec<usize>,
    pub deliveries: usize,
    pub size: usize,
    pub command: String,
}

impl Opts {
    pub fn parse(argv: &[String]) -> Result<Opts, String> {
        let a: PubsubArgs = crate::cli::parse_args("ferrymq-bench report pubsub", argv)?;
        let subscribers = match &a.subscribers {
            None => vec![1, 10, 100, 1000],
            Some(v) => v
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .ok()
                        .filter(|n| (1..=SUBSCRIBERS_MAX).contains(n))
                        .ok_or_else(|| {
                            format!(
                                "--subscribers: '{n}' is not a number from 1 to {SUBSCRIBERS_MAX}"
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        let deliveries = a
            .deliveries
            .unwrap_or(if a.quick { 10_000 } else { 50_000 });
        if !(1..=DELIVERIES_MAX).contains(&deliveries) {
            return Err(format!(
                "--deliveries {deliveries}: from 1 to {DELIVERIES_MAX}"
            ));
        }
        let size = a.size.unwrap_or(2048);
        if size > SIZE_MAX_BYTES {
            return Err(format!("--size {size}: at most {SIZE_MAX_BYTES} bytes"));
        }
        Ok(Opts {
            quick: a.quick,
            out: a
                .out
                .unwrap_or_else(|| crate::run_info::default_out("pubsub", a.quick)),
            subscribers,
            deliveries,
            size,
            command: std::iter::once("ferrymq-bench report pubsub")
                .chain(argv.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        })
    }
}

/// Everything a run measured.
#[derive(Debug, Serialize)]
pub struct Results {
    #[serde(flatten)]
    pub info: RunInfo,
    pub goal_gets: f64,
    /// The machine's 1-minute load average when the run started and when it ended: CPU per
    /// operation here is mostly thread switches, which other work on the machine inflates.
    pub load_average_1m: (f64, f64),
    pub plain: Vec<Plain>,
    pub rows: Vec<Row>,
}

/// The 1-minute load average (0 when /proc/loadavg cannot be read).
fn load_average_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Measures every row, calling `each` after each one.
pub fn run(o: &Opts, home: &Path, each: &mut dyn FnMut(&Plain, &Row)) -> Result<Results, String> {
    let mut r = Results {
        info: RunInfo::now(&o.command, o.quick, Duration::ZERO, Duration::ZERO, o.size),
        goal_gets: GOAL_GETS,
        load_average_1m: (load_average_1m(), 0.0),
        plain: Vec::new(),
        rows: Vec::new(),
    };
    let f = Fanout::start(home)?;
    // A warm-up, not recorded: the first baseline would otherwise pay for the new queue
    // manager's first allocations and page faults.
    f.plain(false, false, o.deliveries, o.size)?;
    // Each row has its own baseline, measured just before it: the CPU of a request moves with
    // the machine's other work, and a baseline from minutes earlier may have seen another load.
    // The rows with a publisher waiting for each reply (as the goal was set), then the same
    // with asynchronous puts (the baseline's puts too, like for like).
    for persistent in [false, true] {
        for async_put in [false, true] {
            for &subs in &o.subscribers {
                let mut plain = f.plain(persistent, async_put, o.deliveries, o.size)?;
                plain.row_subscribers = subs;
                let row = f.fanout(&plain, subs, o.deliveries, o.size)?;
                each(&plain, &row);
                r.rows.push(row);
                r.plain.push(plain);
            }
        }
    }
    r.load_average_1m.1 = load_average_1m();
    Ok(r)
}

/// `report pubsub [options]`.
pub fn main(argv: &[String]) -> Result<(), String> {
    let o = Opts::parse(argv)?;
    let home = crate::run_info::private_home("pubsub")?;
    let started = Instant::now();
    let r = run(&o, &home, &mut |p, row| {
        eprintln!("report: {}", render::line(p, row))
    });
    let _ = std::fs::remove_dir_all(&home);
    let mut r = r?;
    r.info.elapsed_s = started.elapsed().as_secs_f64();
    render::write(&o.out, &r)?;
    eprintln!(
        "report: done in {:.0} s; written to {}",
        r.info.elapsed_s,
        o.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_default_to_the_four_subscriber_counts_and_2_kb() {
        let o = Opts::parse(&args(&["--quick"])).unwrap();
        assert_eq!(o.subscribers, vec![1, 10, 100, 1000]);
        assert_eq!((o.deliveries, o.size), (10_000, 2048));
        assert!(o.out.to_string_lossy().ends_with("-pubsub-quick"));
        let o = Opts::parse(&args(&["--subscribers", "2,20", "--out", "x"])).unwrap();
        assert_eq!(o.subscribers, vec![2, 20]);
        assert_eq!(o.deliveries, 50_000);
        assert!(Opts::parse(&args(&["--subscribers", "0"])).is_err());
        assert!(Opts::parse(&args(&["--size", "99999999"])).is_err());
    }
}
