//! `ferrymq-bench report connections [--quick] [--counts 1000,5000,20000,60000] [--drivers N]
//! [--out DIR]`: the seed's connection test. N client connections (capped at what the open-file
//! limit lets one process hold), from several source addresses on 127.0.0.0/8 so that the
//! ephemeral port range is no limit (fresh ones at each step, so that no step waits behind
//! the TIME_WAIT sockets of the one before), each connecting, opening a queue and putting one message
//! every 100 s, made by lean driver processes (`driver`). For each N: the time until all are
//! connected and the connections per second, the queue manager's RSS and descriptors per
//! connection, its CPU while connecting and while they idle with their puts, and the rate of a
//! request/responder workload beside them against the same workload without them, in the same
//! run; each N on a queue manager started for it. At the largest N (unless `--quick` or
//! `--skip-heartbeats`), as many connections again put for one interval, then stop putting, and
//! the queue manager's CPU is measured over one whole heartbeat interval of connections that only
//! answer heartbeats (the default interval, 300 s: the phase takes one put interval and one and a
//! half heartbeat intervals, 550 s). Then, on the last N's queue manager, its
//! memory across ten cycles of connecting and closing. Writes README.md (tables), SVG charts and
//! runs.json to DIR.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cph::{self, Args};
use crate::report::Qms;
use crate::run_info::RunInfo;

pub mod driver;
mod render;

/// The queue each connection opens and puts to.
const QUEUE: &str = "CONN.Q";
/// Descriptors left to the queue manager's own files and the measuring workload when the
/// connection counts are capped at the open-file limit.
const FDS_SPARE: u64 = 100;
/// How long the closed connections may take to leave the queue manager.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// `ferrymq-bench report connections`'s options.
#[derive(clap::Args, Debug)]
pub struct ConnectionsArgs {
    /// Short windows, smaller counts (1,000 and 5,000), fewer cycles' connections
    #[arg(long)]
    pub quick: bool,
    /// Connection counts, e.g. 1000,5000,20000,60000 (each capped at the open-file limit)
    #[arg(long, value_name = "N,N...", allow_hyphen_values = true)]
    pub counts: Option<String>,
    /// Driver processes (each from its own source address 127.0.0.2, .3, ...)
    #[arg(long, value_name = "N", default_value = "4")]
    pub drivers: usize,
    /// Seconds between the puts of each connection
    #[arg(long, value_name = "S", default_value = "100")]
    pub put_interval_s: u64,
    /// Leave out the heartbeat phase (a put interval and one and a half heartbeat intervals,
    /// 550 s by default)
    #[arg(long)]
    pub skip_heartbeats: bool,
    /// At the largest count: times the request/responder rate is measured beside the
    /// connections, each followed by a measurement without them (the connections are closed,
    /// then made again for the next)
    #[arg(long, value_name = "N")]
    pub rr_pairs: Option<usize>,
    /// Directory to write the report to (default docs/results/DATE-connections[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// Internal: run as one connection driver process
    #[arg(long, hide = true)]
    pub driver: bool,
    #[arg(long, hide = true)]
    pub qm: Option<String>,
    #[arg(long, hide = true)]
    pub port: Option<u16>,
    #[arg(long, hide = true)]
    pub count: Option<usize>,
    #[arg(long, hide = true)]
    pub source: Option<std::net::IpAddr>,
}

/// One connection count's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub requested: usize,
    pub connected: usize,
    pub errors: u64,
    pub first_error: Option<String>,
    pub connect_s: f64,
    pub connects_per_s: f64,
    /// The queue manager's CPU while the connections were being made, percent of one core.
    pub qm_cpu_connecting_pct: f64,
    /// The queue manager's CPU while they were held idle (no workload), over `idle_s`.
    pub qm_cpu_idle_pct: f64,
    /// The queue manager's CPU over as long a window just before the connections were made.
    pub qm_cpu_idle_without_pct: f64,
    pub idle_s: f64,
    pub rss_before_bytes: u64,
    pub rss_after_bytes: u64,
    pub rss_per_conn_bytes: f64,
    pub fds_before: usize,
    pub fds_after: usize,
    pub fds_per_conn: f64,
    /// Request/responder round trips per second without the connections: before they are
    /// made, and again each time they are closed.
    pub rr_without_per_s: Vec<f64>,
    /// The same beside them, each time they are held: once, and at the largest count as many
    /// times as `--rr-pairs` asks (the connections made again between). The mean beside them is
    /// compared with the mean without, so drift in the machine's load over the step (on a shared
    /// host, bursts of CPU taken by other guests last seconds) counts against neither.
    pub rr_with_per_s: Vec<f64>,
    /// The machine's CPU time stolen by the hypervisor over each of those measurements
    /// (percent; same order): a measurement with much of it timed the host's other guests.
    pub rr_without_steal_pct: Vec<f64>,
    pub rr_with_steal_pct: Vec<f64>,
    /// The connections with nothing but heartbeats (measured at the largest count only).
    pub heartbeats: Option<HeartbeatPhase>,
}

/// The held connections once their puts stopped: nothing but the queue manager's heartbeats
/// (sent after an interval without a word from the client) and the drivers' answers.
///
/// The puts had spread the connections' last words over one put interval, so their first
/// heartbeats fall in the interval after `heartbeat − put` seconds of quiet and the next ones a
/// heartbeat interval later. The window starts half a heartbeat interval after the puts stopped
/// and lasts one whole interval: it holds every connection's first heartbeat and none of its
/// second (the put interval being under half the heartbeat interval), so the CPU over it is the
/// steady cost of heartbeating every connection once per interval.
#[derive(Debug, Clone, Serialize)]
pub struct HeartbeatPhase {
    /// The connections made for the phase.
    pub connections: usize,
    pub heartbeat_s: f64,
    /// From the drivers' going quiet to the window's start.
    pub quiet_before_s: f64,
    pub window_s: f64,
    /// The queue manager's CPU over the window, percent of one core.
    pub qm_cpu_pct: f64,
    /// Heartbeats the drivers answered in the window (one per connection expected).
    pub answered: u64,
}

/// The queue manager's memory after each cycle of connecting and closing.
#[derive(Debug, Clone, Serialize)]
pub struct Cycles {
    pub connections: usize,
    pub rss_start_bytes: u64,
    /// RSS once each cycle's connections were closed and gone.
    pub rss_after_bytes: Vec<u64>,
    pub fds_start: usize,
    pub fds_after: Vec<usize>,
}

#[derive(Debug, Serialize)]
pub struct Results {
    #[serde(flatten)]
    pub info: RunInfo,
    pub open_files_limit: u64,
    pub drivers: usize,
    pub put_interval_s: u64,
    pub heartbeat_note: String,
    pub rr_requesters: usize,
    pub rr_size: usize,
    pub rows: Vec<Row>,
    pub cycles: Option<Cycles>,
}

struct Opts {
    quick: bool,
    out: PathBuf,
    counts: Vec<usize>,
    drivers: usize,
    put_interval: Duration,
    idle: Duration,
    /// The queue manager's heartbeat interval, and whether to measure a phase of it.
    heartbeat: Duration,
    heartbeat_phase: bool,
    rr_duration: Duration,
    rr_warmup: Duration,
    /// Beside/without pairs of request/responder measurements at the largest count.
    rr_pairs: usize,
    cycle_conns: usize,
    command: String,
}

/// `report connections [options]`.
pub fn main(argv: &[String]) -> Result<(), String> {
    let a: ConnectionsArgs = crate::cli::parse_args("ferrymq-bench report connections", argv)?;
    let limit = raise_open_files();
    if a.driver {
        return driver::run(driver::Plan {
            qm: a.qm.ok_or("--driver needs --qm")?,
            port: a.port.ok_or("--driver needs --port")?,
            queue: QUEUE.into(),
            count: a.count.ok_or("--driver needs --count")?,
            source: a.source.ok_or("--driver needs --source")?,
            put_interval: Duration::from_secs(a.put_interval_s.max(1)),
        });
    }
    let heartbeat = Duration::from_millis(ferrymq_types::limits::HEARTBEAT_DEFAULT_MS as u64);
    let heartbeat_phase = !a.quick && !a.skip_heartbeats;
    if heartbeat_phase && Duration::from_secs(a.put_interval_s) >= heartbeat / 2 {
        return Err(format!(
            "the heartbeat phase needs puts more often than every half heartbeat interval ({} s); \
             give a shorter --put-interval-s or --skip-heartbeats",
            heartbeat.as_secs() / 2
        ));
    }
    let cap = limit.saturating_sub(FDS_SPARE) as usize;
    let counts: Vec<usize> = match &a.counts {
        Some(v) => v
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .map_err(|_| format!("--counts: '{n}' is not a number"))
            })
            .collect::<Result<_, _>>()?,
        None if a.quick => vec![1000, 5000],
        None => vec![1000, 5000, 20_000, 60_000],
    };
    let mut capped: Vec<usize> = counts.iter().map(|&n| n.min(cap)).collect();
    capped.dedup();
    let o = Opts {
        quick: a.quick,
        out: a
            .out
            .unwrap_or_else(|| crate::run_info::default_out("connections", a.quick)),
        counts: capped,
        drivers: a.drivers.clamp(1, 64),
        put_interval: Duration::from_secs(a.put_interval_s.max(1)),
        idle: Duration::from_secs(if a.quick { 5 } else { 20 }),
        heartbeat,
        heartbeat_phase,
        rr_duration: Duration::from_secs(if a.quick { 3 } else { 8 }),
        rr_warmup: Duration::from_secs(1),
        rr_pairs: a
            .rr_pairs
            .unwrap_or(if a.quick { 1 } else { 3 })
            .clamp(1, 20),
        cycle_conns: if a.quick { 1000 } else { 5000 }.min(cap),
        command: std::iter::once("ferrymq-bench report connections")
            .chain(argv.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
    };
    let home = crate::run_info::private_home("connections")?;
    let started = Instant::now();
    let r = run(&o, &home, limit);
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

/// Raises this process's soft open-file limit to the hard one (the drivers inherit it) and
/// returns it.
pub fn raise_open_files() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let hard = now.maximum.unwrap_or(1 << 20);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: now.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(hard)
}

fn run(o: &Opts, home: &Path, limit: u64) -> Result<Results, String> {
    let mut r = Results {
        info: RunInfo::now(&o.command, o.quick, o.rr_warmup, o.rr_duration, 2048),
        open_files_limit: limit,
        drivers: o.drivers,
        put_interval_s: o.put_interval.as_secs(),
        heartbeat_note: "the queue manager's default heartbeat (Channels:HeartbeatMs, MQ's 300 s)"
            .into(),
        rr_requesters: 8,
        rr_size: 2048,
        rows: Vec::new(),
        cycles: None,
    };
    // Each count on a queue manager of its own: memory an earlier count's connections freed
    // would otherwise be reused by the next count's, and its RSS per connection measured low.
    let fresh = || -> Result<(Qms, String, u16, u32), String> {
        let qms = Qms::start_with(home, 1, 16384)?;
        let (name, port, pid) = (qms.names[0].clone(), qms.ports[0], qms.pids[0]);
        crate::qm::mq_input(
            home,
            &["runmqsc", &name],
            &format!("DEFINE QLOCAL({QUEUE}) MAXDEPTH(999999999)\n"),
        )?;
        Ok((qms, name, port, pid))
    };
    let rr = |name: &str, port: u16, pid: u32, d: Duration| -> Result<(f64, f64), String> {
        let a = Args {
            module: cph::Module::Rr,
            qms: vec![name.to_string()],
            conns: vec![format!("127.0.0.1({port})")],
            requesters: r.rr_requesters,
            responders: 10,
            size: r.rr_size,
            persistent: false,
            syncpoint: None,
            duration: d,
            warmup: o.rr_warmup,
            queues: 10,
            request_prefix: "REQUEST".into(),
            reply_prefix: "REPLY".into(),
            rate: 0,
            json: false,
            live: false,
            server_pids: vec![pid],
            setup: true,
            client_threads: 1,
            security: Default::default(),
        };
        let run = cph::run(&a)?;
        Ok((run.round_trips_per_s, run.machine_steal_pct))
    };
    // The last count's queue manager stays for the cycles: they measure growth from a
    // queue manager that has already held many connections, not its first warming up.
    let mut last = None;
    for &n in &o.counts {
        eprintln!("report: {n} connections");
        drop(last.take());
        let (qms, name, port, pid) = fresh()?;
        let rr = |d: Duration| rr(&name, port, pid, d);
        let rr_without = rr(o.rr_duration)?;
        let b0 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
        std::thread::sleep(o.idle);
        let b1 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
        let (rss0, fds0) = (rss_bytes(pid), fd_count(pid));
        let c0 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
        let t0 = Instant::now();
        let mut drivers = Drivers::start(o, &name, port, n)?;
        let (connected, errors, first_error) = drivers.wait_connected()?;
        let connect_s = t0.elapsed().as_secs_f64();
        let c1 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
        // Idle: nothing but the held connections (a put each every interval).
        std::thread::sleep(Duration::from_secs(1));
        let i0 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
        std::thread::sleep(o.idle);
        let i1 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
        let (rss1, fds1) = (rss_bytes(pid), fd_count(pid));
        let mut rr_with = vec![rr(o.rr_duration)?];
        drivers.close()?;
        wait_fds(pid, fds0)?;
        let mut rr_without = vec![rr_without, rr(o.rr_duration)?];
        // More pairs at the largest count, where the goal is judged: the mean of several
        // measurements each way, taken in turn, is what the machine's bursts disturb least.
        let pairs = if Some(&n) == o.counts.last() {
            o.rr_pairs
        } else {
            1
        };
        for i in 1..pairs {
            eprintln!(
                "report:   request/responder beside and without them, {}/{pairs}",
                i + 1
            );
            let mut again = Drivers::start(o, &name, port, n)?;
            again.wait_connected()?;
            std::thread::sleep(Duration::from_secs(1));
            rr_with.push(rr(o.rr_duration)?);
            again.close()?;
            wait_fds(pid, fds0)?;
            rr_without.push(rr(o.rr_duration)?);
        }
        // After the request/responder runs, so that the three stay close together in time: as
        // many connections again, their puts for one interval (which spreads their last words
        // over it, as idle clients' are), then heartbeats only.
        let heartbeats = if o.heartbeat_phase && Some(&n) == o.counts.last() {
            let mut drivers = Drivers::start(o, &name, port, n)?;
            let (connections, _, _) = drivers.wait_connected()?;
            eprintln!(
                "report:   connected again; their puts for {} s, then heartbeats only",
                o.put_interval.as_secs()
            );
            std::thread::sleep(o.put_interval);
            let h = heartbeat_phase(o, &mut drivers, pid, connections)?;
            drivers.close()?;
            wait_fds(pid, fds0)?;
            Some(h)
        } else {
            None
        };
        let per = |a: f64| {
            if connected == 0 {
                0.0
            } else {
                a / connected as f64
            }
        };
        let row = Row {
            requested: n,
            connected,
            errors,
            first_error,
            connect_s,
            connects_per_s: connected as f64 / connect_s.max(1e-9),
            qm_cpu_connecting_pct: crate::cpu::pct(c0, c1),
            qm_cpu_idle_pct: crate::cpu::pct(i0, i1),
            qm_cpu_idle_without_pct: crate::cpu::pct(b0, b1),
            idle_s: o.idle.as_secs_f64(),
            rss_before_bytes: rss0,
            rss_after_bytes: rss1,
            rss_per_conn_bytes: per(rss1 as f64 - rss0 as f64),
            fds_before: fds0,
            fds_after: fds1,
            fds_per_conn: per(fds1 as f64 - fds0 as f64),
            rr_without_per_s: rr_without.iter().map(|x| x.0).collect(),
            rr_with_per_s: rr_with.iter().map(|x| x.0).collect(),
            rr_without_steal_pct: rr_without.iter().map(|x| x.1).collect(),
            rr_with_steal_pct: rr_with.iter().map(|x| x.1).collect(),
            heartbeats,
        };
        eprintln!("report:   {}", render::line(&row));
        r.rows.push(row);
        last = Some((qms, name, port, pid));
    }
    if o.cycle_conns > 0 {
        let n = o.cycle_conns;
        let (qms, name, port, pid) = match last.take() {
            Some(q) => q,
            None => fresh()?,
        };
        eprintln!("report: 10 cycles of {n} connections opened and closed");
        let mut c = Cycles {
            connections: n,
            rss_start_bytes: rss_bytes(pid),
            rss_after_bytes: Vec::new(),
            fds_start: fd_count(pid),
            fds_after: Vec::new(),
        };
        for i in 0..10 {
            let mut d = Drivers::start(o, &name, port, n)?;
            d.wait_connected()?;
            d.close()?;
            wait_fds(pid, c.fds_start)?;
            c.rss_after_bytes.push(rss_bytes(pid));
            c.fds_after.push(fd_count(pid));
            eprintln!(
                "report:   cycle {}: RSS {:.1} MB, {} descriptors",
                i + 1,
                *c.rss_after_bytes.last().unwrap() as f64 / 1e6,
                c.fds_after.last().unwrap()
            );
        }
        r.cycles = Some(c);
        drop(qms);
    }
    Ok(r)
}

/// Tells the drivers (holding `connections`) to stop putting, waits half a heartbeat interval
/// and measures the queue manager's CPU and the heartbeats answered over one whole interval (see
/// [`HeartbeatPhase`]; `main` checked that the puts came often enough for it).
fn heartbeat_phase(
    o: &Opts,
    d: &mut Drivers,
    pid: u32,
    connections: usize,
) -> Result<HeartbeatPhase, String> {
    let (before, window) = (o.heartbeat / 2, o.heartbeat);
    eprintln!(
        "report:   puts stopped; heartbeats only, measured from {} s to {} s from now",
        before.as_secs(),
        (before + window).as_secs()
    );
    d.quiet()?;
    std::thread::sleep(before);
    let h0 = d.heartbeats()?;
    let c0 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
    std::thread::sleep(window);
    let c1 = crate::cpu::mark(pid).ok_or("cannot read the queue manager's CPU")?;
    let h1 = d.heartbeats()?;
    let p = HeartbeatPhase {
        connections,
        heartbeat_s: o.heartbeat.as_secs_f64(),
        quiet_before_s: before.as_secs_f64(),
        window_s: window.as_secs_f64(),
        qm_cpu_pct: crate::cpu::pct(c0, c1),
        answered: h1.saturating_sub(h0),
    };
    eprintln!(
        "report:   heartbeats only: QM CPU {:.3}% over {:.0} s, {} heartbeats answered",
        p.qm_cpu_pct, p.window_s, p.answered
    );
    Ok(p)
}

/// Steps of driver processes started so far in this run: each step's drivers connect from
/// addresses no earlier step used.
static STEPS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The source address of driver `i` of step `step`: 127.A.B.C with A taken from this run's
/// process id and B from the step, so that no step (of this run or of a run just before)
/// connects from an address whose closed connections still sit in TIME_WAIT; tens of thousands
/// of those on one address pair make each new connect search the port range, and the report
/// would measure that search rather than the queue manager.
fn source_address(step: u32, i: usize) -> std::net::Ipv4Addr {
    let a = 1 + (std::process::id() % 250) as u8;
    let b = (step % 256) as u8;
    std::net::Ipv4Addr::new(127, a, b, 2 + (i % 250) as u8)
}

/// The driver processes of one step.
struct Drivers {
    children: Vec<(Child, ChildStdin, BufReader<std::process::ChildStdout>)>,
}

impl Drivers {
    fn start(o: &Opts, qm: &str, port: u16, n: usize) -> Result<Drivers, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let k = o.drivers.min(n.max(1));
        let step = STEPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut children = Vec::new();
        for i in 0..k {
            let count = n / k + usize::from(i < n % k);
            let mut child = Command::new(&exe)
                .args(["report", "connections", "--driver", "--qm", qm])
                .args(["--port", &port.to_string(), "--count", &count.to_string()])
                .args(["--source", &source_address(step, i).to_string()])
                .args(["--put-interval-s", &o.put_interval.as_secs().to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start a connection driver: {e}"))?;
            let stdin = child.stdin.take().expect("piped");
            let stdout = BufReader::new(child.stdout.take().expect("piped"));
            children.push((child, stdin, stdout));
        }
        Ok(Drivers { children })
    }

    /// Waits until every driver has made its connections: (connected, errors, first error).
    fn wait_connected(&mut self) -> Result<(usize, u64, Option<String>), String> {
        let (mut connected, mut errors, mut first) = (0usize, 0u64, None);
        for (_, _, out) in &mut self.children {
            let line = read_line(out)?;
            let mut f = line.trim_end().splitn(5, ' ');
            if f.next() != Some("connected") {
                return Err(format!("a connection driver said: {line}"));
            }
            connected += f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            errors += f.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let _secs = f.next();
            if let Some(e) = f.next().filter(|e| !e.is_empty()) {
                first.get_or_insert_with(|| e.to_string());
            }
        }
        Ok((connected, errors, first))
    }

    /// Tells every driver to stop putting; the connections stay.
    fn quiet(&mut self) -> Result<(), String> {
        for (_, stdin, _) in &mut self.children {
            writeln!(stdin, "quiet").map_err(|e| format!("a connection driver: {e}"))?;
        }
        Ok(())
    }

    /// Heartbeats the drivers have answered so far, all together.
    fn heartbeats(&mut self) -> Result<u64, String> {
        let mut n = 0;
        for (_, stdin, out) in &mut self.children {
            writeln!(stdin, "count").map_err(|e| format!("a connection driver: {e}"))?;
            let line = read_line(out)?;
            n += line
                .trim_end()
                .strip_prefix("heartbeats ")
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("a connection driver said: {line}"))?;
        }
        Ok(n)
    }

    /// Tells every driver to close its connections and waits for them to end.
    fn close(self) -> Result<(), String> {
        for (mut child, mut stdin, mut out) in self.children {
            let _ = writeln!(stdin, "close");
            drop(stdin);
            let _ = read_line(&mut out);
            let _ = child.wait();
        }
        Ok(())
    }
}

fn read_line(out: &mut BufReader<std::process::ChildStdout>) -> Result<String, String> {
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| e.to_string())?;
    Ok(line)
}

/// Waits until the queue manager holds no more descriptors than `base` (what it held before the
/// step): every closed connection has left it.
fn wait_fds(pid: u32, base: usize) -> Result<(), String> {
    let t = Instant::now();
    while fd_count(pid) > base {
        if t.elapsed() > DRAIN_TIMEOUT {
            return Err(format!(
                "the queue manager still holds {} descriptors, {} before the connections",
                fd_count(pid),
                base
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The process's resident memory (VmRSS), in bytes.
fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The process's open descriptors.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}
