//! `ferrymq-bench report ha [--quick] [--out DIR] [--rtts 0,1,2,5,10] [--failover-messages 0,500000]
//! [--requesters 1,2,4,...] [--distance-requesters 16,64,256]
//! [--steps ha1,ha2,distance,failover,kills] [--repeats N] [--kills N]`:
//! the HA benchmark report. In a private $FERRYMQ_HOME it creates standalone queue managers and
//! groups of three HA instances (each instance its own home directory, client port and
//! replication address, all on this machine) and measures:
//!
//! 1. HA1: one HA group against one standalone queue manager, 2 KB persistent Request/Responder
//!    (the `report standalone` workload), requesters swept upward until the rate stops rising;
//!    `--repeats` windows per side at each count (3 in full mode, 1 with `--quick`), run
//!    alternately, each side's median window making the row (likewise HA2);
//! 2. HA2 (full mode only): two HA groups (six instance processes) against two standalone queue
//!    managers;
//! 3. distance: one HA group with `ferrymq relay` processes in front of every instance's
//!    replication port adding 0, 1, 2, 5, 10 ms of round trip, against a group without relays;
//! 4. failover: N persistent messages loaded, a marker put, the active instance killed with
//!    SIGKILL, and the time until an already connected client gets the marker from the new active
//!    instance, with the loaded queue's depth checked afterwards;
//! 5. kills: one group under a persistent put load, its active instance killed `--kills` times
//!    (20; 3 with `--quick`), each time the time until a client connected before the kill puts
//!    again (median < 1 s, max < 1.5 s).
//!
//! It writes README.md (tables), one SVG chart per sweep and runs.json (every raw run) to DIR.
//! Every queue manager, instance and relay it starts is stopped again (also when a step fails)
//! and the private home is deleted at the end.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

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

pub(crate) mod kills;
pub(crate) mod measure;
pub(crate) mod procs;
pub(crate) mod render;

use kills::*;
use measure::*;
use procs::*;
use render::*;

/// The HA queue manager's name in a one-group step.
const QM: &str = "HAQM";
pub(crate) const INSTANCES: [&str; 3] = ["a", "b", "c"];
pub(crate) const MSG_SIZE: usize = 2048;
/// Queue pairs per queue manager, as `report standalone`.
pub(crate) const QUEUE_PAIRS: usize = 10;

/// Responders per queue manager for a run with `requesters`: as many as requesters, between 10
/// and 128; beyond 256 requesters, half of them, up to the seeds' 300. Each responder waits for
/// one commit per request, so with a fixed 10 the responders, not the queue manager, set the rate
/// once commits take milliseconds (replication latency): the seeds' reports ran 300. On loopback
/// more than 128 cost more CPU than they add (each is a connection); the larger requester counts
/// are swept for replication over distance, where a commit takes the link's round trip and 128
/// responders capped the rate (10 ms: 4.8k round trips/s from 256 to 1024 requesters). Standalone
/// and HA runs use the same count.
pub(crate) fn responders_for(requesters: usize) -> usize {
    requesters
        .clamp(QUEUE_PAIRS, 128)
        .max((requesters / 2).min(SEED_RESPONDERS))
}
/// Responder threads in the seeds' Request/Responder runs.
const SEED_RESPONDERS: usize = 300;
/// Log geometry of every queue manager and instance: 3 primary files of this many pages.
pub(crate) const LOG_PAGES: u32 = 4096;
/// Failover load: concurrent putters, each committing every this many messages.
const LOAD_PUTTERS: usize = 8;
const LOAD_COMMIT_EVERY: u64 = 50;
const LOAD_QUEUE: &str = "HA.LOAD";
const MARKER_QUEUE: &str = "HA.MARKER";
/// How long an HA group may take to elect and activate an instance.
pub(crate) const ACTIVE_TIMEOUT: Duration = Duration::from_secs(30);
const ACTIVE_POLL: Duration = Duration::from_millis(100);
/// An active instance must stay active (no new activation in its log) this long to count.
const ACTIVE_STABLE: Duration = Duration::from_secs(1);
/// How long instances get to end after `endmqm -i` before they are killed.
const END_GRACE: Duration = Duration::from_secs(3);
/// Targets the report is checked against.
const TARGET_HA1_PCT: f64 = 85.0;
const TARGET_DISTANCE: [(f64, f64); 2] = [(1.0, 60.0), (10.0, 20.0)];
const TARGET_FAILOVER_MS: f64 = 2000.0;

/// `ferrymq-bench report ha`'s options (read as text, checked by [`Opts::parse`]).
#[derive(clap::Args, Debug)]
pub struct HaArgs {
    /// Short runs and fewer points
    #[arg(long)]
    pub quick: bool,
    /// Directory to write the report to (default docs/results/DATE-ha[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// Round trips (ms) added on the replication links, one distance row each
    #[arg(
        long,
        value_name = "MS,MS...",
        default_value = "0,1,2,5,10",
        allow_hyphen_values = true
    )]
    pub rtts: Option<String>,
    /// Messages queued before each failover (default 0,500000; --quick 0,20000)
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub failover_messages: Option<String>,
    /// Requester counts of the HA1/HA2 sweeps
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub requesters: Option<String>,
    /// Requester counts of the distance step
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub distance_requesters: Option<String>,
    /// Steps to run, of ha1,ha2,distance,failover,kills (default all; --quick without ha2)
    #[arg(long, value_name = "STEP,STEP...", allow_hyphen_values = true)]
    pub steps: Option<String>,
    /// Windows per side at each requester count, 1-9 (default 3; --quick 1)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub repeats: Option<String>,
    /// Kills of the active instance in the kills step, 1-1000 (default 20; --quick 3)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub kills: Option<String>,
}

const STEPS: [&str; 5] = ["ha1", "ha2", "distance", "failover", "kills"];

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
    /// Kills of the active instance in the `kills` step.
    kills: usize,
    /// Windows per side at each requester count in HA1 and HA2, run alternately; a row shows
    /// each side's median window.
    repeats: usize,
    warmup: Duration,
    duration: Duration,
    /// The command line as given, for the report header.
    command: String,
}

/// Parses a comma-separated list for `flag`; empty entries and an empty list are errors.
pub(crate) fn parse_list<T: FromStr>(flag: &str, text: &str) -> Result<Vec<T>, String> {
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

pub(crate) fn parse_rtts(text: &str) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = parse_list("--rtts", text)?;
    if let Some(bad) = v.iter().find(|r| !(0.0..=60_000.0).contains(*r)) {
        return Err(format!(
            "--rtts: {bad} is not a round trip in ms between 0 and 60000"
        ));
    }
    Ok(v)
}

/// Quotes an argument for the header's command line when a shell would need it.
pub(crate) fn shell_word(s: &str) -> String {
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
            out: crate::run_info::default_out("ha", quick),
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
            kills: if quick { 3 } else { 20 },
            warmup: Duration::from_secs(if quick { 1 } else { 2 }),
            repeats: if quick { 1 } else { 3 },
            duration: Duration::from_secs(if quick { 3 } else { 8 }),
            command: std::iter::once("ferrymq-bench report ha".to_string())
                .chain(argv.iter().map(|a| shell_word(a)))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let a: HaArgs = crate::cli::parse_args("ferrymq-bench report ha", argv)?;
        if let Some(v) = a.out {
            o.out = v;
        }
        if let Some(v) = &a.rtts {
            o.rtts = parse_rtts(v)?;
        }
        if let Some(v) = &a.failover_messages {
            o.failover_messages = parse_list("--failover-messages", v)?;
        }
        if let Some(v) = &a.requesters {
            o.requesters = parse_list("--requesters", v)?;
        }
        if let Some(v) = &a.distance_requesters {
            o.distance_requesters = parse_list("--distance-requesters", v)?;
        }
        if let Some(value) = &a.kills {
            o.kills = value
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| format!("--kills: '{value}' is not a number from 1 to 1000"))?
        }
        if let Some(value) = &a.repeats {
            o.repeats = value
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=9).contains(n))
                .ok_or_else(|| format!("--repeats: '{value}' is not a number from 1 to 9"))?
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
}

pub fn main(argv: &[String]) -> Result<(), String> {
    let o = Opts::parse(argv)?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let home = crate::run_info::private_home("ha")?;
    let started = Instant::now();
    let mut rep = Report {
        info: crate::run_info::RunInfo::now(&o.command, o.quick, o.warmup, o.duration, MSG_SIZE),
        failover_messages: if o.step("failover") {
            o.failover_messages.clone()
        } else {
            Vec::new()
        },
        repeats: o.repeats,
        ha1: None,
        ha2: None,
        distance: Vec::new(),
        failover: Vec::new(),
        kills: None,
        log_findings: Vec::new(),
        errors: Vec::new(),
    };
    eprintln!(
        "report: HA report into {} (private FERRYMQ_HOME {})",
        o.out.display(),
        home.display()
    );
    let result = steps(&o, &home, &mut rep, started);
    rep.info.elapsed_s = started.elapsed().as_secs_f64();
    if let Err(e) = result {
        rep.errors.push(e);
    }
    let written = write_report_with(&o.out, &rep, &o.requesters, &o.distance_requesters);
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

/// Runs the selected steps; a failed step is recorded and the next one still runs.
fn steps(o: &Opts, home: &Path, rep: &mut Report, started: Instant) -> Result<(), String> {
    let checkpoint = |rep: &mut Report| {
        rep.info.elapsed_s = started.elapsed().as_secs_f64();
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
    if o.step("kills") {
        match kills(
            &home.join(format!("kills-{}", o.kills)),
            o.kills,
            &o.out,
            rep,
        ) {
            Ok(k) => {
                if let Some(e) = &k.error {
                    rep.errors.push(format!("kills: {e}"));
                }
                if !k.met() {
                    rep.errors.push(format!(
                        "kills: kill -> put median {} ms, max {} ms over {} kills: targets are < {TARGET_KILLS_MEDIAN_MS:.0} and < {TARGET_KILLS_MAX_MS:.0} ms",
                        fmt_opt(k.median_ms(), 0),
                        fmt_opt(k.max_ms(), 0),
                        k.rounds.len()
                    ));
                }
                rep.kills = Some(k);
            }
            Err(e) => rep.errors.push(format!("kills: {e}")),
        }
        checkpoint(rep)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// A made-up run result for the rendering tests.
    pub(crate) fn run(threads: usize, rate: f64, cpu: f64) -> RunResult {
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
            machine_steal_pct: 0.0,
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
            queue_full_waits: 0,
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
            "ferrymq-bench report ha --quick --out /tmp/x --rtts 0,1,2.5,10"
        );

        let o = Opts::parse(&v("--failover-messages 0,500000 --steps failover")).unwrap();
        assert!(!o.quick);
        assert_eq!(o.failover_messages, vec![0, 500_000]);
        assert_eq!(o.steps, vec!["failover"]);
        assert!(o.out.starts_with("docs/results") && o.out.to_string_lossy().ends_with("-ha"));
        assert_eq!(Opts::parse(&[]).unwrap().steps.len(), 5);
        assert!(Opts::parse(&[]).unwrap().step("kills"));
        assert_eq!(Opts::parse(&[]).unwrap().repeats, 3);
        assert_eq!(Opts::parse(&v("--quick")).unwrap().repeats, 1);
        assert_eq!(Opts::parse(&v("--repeats 5")).unwrap().repeats, 5);
    }

    #[test]
    fn the_median_window_is_the_lower_middle_one() {
        assert_eq!(median_by(vec![900.0, 1200.0, 1000.0], |x: &f64| *x), 1000.0);
        assert_eq!(median_by(vec![700.0], |x: &f64| *x), 700.0);
        assert_eq!(
            median_by(vec![800.0, 1100.0, 900.0, 1000.0], |x: &f64| *x),
            900.0
        );
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for (args, want) in [
            ("--rtts 1,x", "'x' is not a valid number"),
            ("--rtts -1", "between 0 and 60000"),
            ("--rtts 1,,2", "'' is not a valid number"),
            ("--requesters 0,4", "at least 1"),
            ("--steps ha3", "'ha3' is not one of"),
            ("--out", "a value is required"),
            ("--bogus 1", "unexpected argument '--bogus'"),
            ("--repeats 0", "--repeats: '0' is not a number from 1 to 9"),
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
                    windows: vec![(1000.0, 900.0)],
                },
                CompareRow {
                    requesters: 32,
                    standalone: run(32, 2000.0, 90.0),
                    ha: run(32, 1600.0, 150.0),
                    ha_active_cpu_pct: None,
                    windows: vec![(2100.0, 1500.0), (2000.0, 1600.0), (1900.0, 1700.0)],
                },
            ],
        };
        let t = comparison_md(&c);
        assert!(t.contains("| 2100, 2000, 1900 / 1500, 1600, 1700 |"), "{t}");
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
    }

    #[test]
    fn responders_follow_requesters_then_half_of_them_up_to_the_seeds_300() {
        let got: Vec<usize> = [1, 8, 64, 128, 256, 512, 1024, 4096]
            .iter()
            .map(|&r| responders_for(r))
            .collect();
        assert_eq!(got, [10, 10, 64, 128, 128, 256, 300, 300]);
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
