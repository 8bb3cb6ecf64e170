//! Orchestration of one `cph` run: connect, set up queues, start the workers, warm up, measure a
//! steady window (rate, both sides' CPU, latency), stop, and report.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrymq_client::{ConnectOptions, Connection};
use serde::Serialize;

use super::args::{Args, Module};
use super::workers::{self, Shared, Simple};
use crate::cpu;

/// What one run measured. `--json` prints it as one object.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub module: String,
    /// Round trips per second (requests answered) for rr/requester; messages per second otherwise.
    pub round_trips_per_s: f64,
    pub round_trips: u64,
    /// The queue manager processes' CPU over the window, percent of one core (as `top`).
    pub server_cpu_pct: Option<f64>,
    /// The same for each measured process, in the order of the pids given.
    pub server_cpu_pct_each: Vec<f64>,
    /// This process's CPU over the window, percent of one core.
    pub client_cpu_pct: f64,
    /// CPU microseconds per round trip, server side and client side.
    pub server_cpu_us_per_rt: Option<f64>,
    pub client_cpu_us_per_rt: f64,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
    pub latency_ms_max: f64,
    /// The share of the machine's CPU time the hypervisor gave to other guests over the window
    /// (steal, from /proc/stat; 0 where there is none to read). A rate measured with much of it
    /// timed the host's other guests as much as FerryMQ.
    pub machine_steal_pct: f64,
    pub threads: usize,
    pub responders: usize,
    pub msg_size: usize,
    pub persistent: bool,
    pub queue_managers: usize,
    pub queues_per_qm: usize,
    /// `bindings`, `tcp` or `tls`.
    pub transport: String,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub errors: u64,
    /// Puts that found the queue full and waited to try again (not errors: the sender backs off).
    pub queue_full_waits: u64,
    pub first_error: Option<String>,
    pub version: String,
}

impl RunResult {
    pub fn print_summary(&self) {
        println!(
            "{} {}: {} requesters, {} responders, {} B {} over {} on {} queue manager(s), {:.1} s after {:.1} s warm-up",
            self.module,
            self.version,
            self.threads,
            self.responders,
            self.msg_size,
            if self.persistent { "persistent" } else { "non-persistent" },
            self.transport,
            self.queue_managers,
            self.duration_s,
            self.warmup_s
        );
        println!(
            "  rate          {:>10.0} round trips/s ({} in the window)",
            self.round_trips_per_s, self.round_trips
        );
        match (self.server_cpu_pct, self.server_cpu_us_per_rt) {
            (Some(p), Some(us)) => {
                println!("  server CPU    {p:>10.1} % of a core, {us:.1} us per round trip")
            }
            _ => println!("  server CPU    unknown (no queue manager pid: give --server-pid)"),
        }
        println!(
            "  client CPU    {:>10.1} % of a core, {:.1} us per round trip",
            self.client_cpu_pct, self.client_cpu_us_per_rt
        );
        println!(
            "  machine       {:>10.1} % of its CPU time stolen by the hypervisor",
            self.machine_steal_pct
        );
        println!(
            "  latency       p50 {:.3} ms   p99 {:.3} ms   max {:.3} ms",
            self.latency_ms_p50, self.latency_ms_p99, self.latency_ms_max
        );
        if self.queue_full_waits > 0 {
            println!(
                "  queue full    {:>10} puts found the queue full (MQRC_Q_FULL 2053) and waited 1 ms: the receivers fell behind, or none is running",
                self.queue_full_waits
            );
        }
        if self.errors > 0 {
            println!(
                "  errors        {} (first: {})",
                self.errors,
                self.first_error.as_deref().unwrap_or("?")
            );
        }
    }
}

fn connect_options(a: &Args, qm: usize) -> Result<ConnectOptions, String> {
    let mut o = match a.conns.get(qm) {
        Some(c) => {
            let mut o = ConnectOptions::client(&a.qms[qm], c).map_err(|e| e.to_string())?;
            a.security.apply(&mut o);
            o
        }
        None => ConnectOptions::bindings(&a.qms[qm]),
    };
    o.app_name = "ferrymq cph".into();
    // One conversation per socket, as the reports configure SHARECNV(1).
    o.sharecnv = 1;
    Ok(o)
}

/// Defines the queue pairs on queue manager `qm`. An identical existing definition is accepted; a
/// different one is left alone. A queue manager that refuses MQSC over TCP (qm.ini
/// `Channels:RemoteAdmin` off, its default) is set up through its bindings socket when it runs
/// on this machine; otherwise the run stops with the reason rather than use queues that may not
/// exist.
async fn setup_queues(a: &Args, qm: usize) -> Result<(), String> {
    let define_all = |c: Connection| async move {
        for j in 0..a.queues {
            for prefix in [&a.request_prefix, &a.reply_prefix] {
                let r = c
                    .admin(&format!("MQSC DEFINE QLOCAL({prefix}{j}) MAXDEPTH(5000)"))
                    .await;
                if let Err(e) = r.as_ref() {
                    if e.reason == ferrymq_types::Reason::NOT_AUTHORIZED {
                        let _ = c.disconnect().await;
                        return Err(e.message.lines().next().unwrap_or_default().to_string());
                    }
                }
            }
        }
        let _ = c.disconnect().await;
        Ok(())
    };
    let c = Connection::connect(connect_options(a, qm)?)
        .await
        .map_err(|e| format!("{}: {e}", a.qms[qm]))?;
    let refused = match define_all(c).await {
        Ok(()) => return Ok(()),
        Err(why) => why,
    };
    let mut local = ConnectOptions::bindings(&a.qms[qm]);
    local.app_name = "ferrymq cph".into();
    match Connection::connect(local).await {
        Ok(c) => define_all(c)
            .await
            .map_err(|e| format!("{}: cannot define the queues: {e}", a.qms[qm])),
        Err(e) => Err(format!(
            "{}: cannot define the queues over TCP ({refused}) nor through a local bindings connection ({e}); define them beforehand and pass --no-setup",
            a.qms[qm]
        )),
    }
}

fn server_pid(a: &Args, qm: usize) -> Option<u32> {
    if let Some(p) = a.server_pids.get(qm) {
        return Some(*p);
    }
    let home = ferrymq_client::ferrymq_home();
    let dir = ferrymq_types::objects::qmgr_dir_name(&a.qms[qm]).ok()?;
    let pid = std::fs::read_to_string(home.join("qmgrs").join(dir).join("qm.pid")).ok()?;
    pid.trim().parse().ok()
}

fn server_marks(pids: &[u32]) -> Option<Vec<cpu::Mark>> {
    pids.iter().map(|p| cpu::mark(*p)).collect()
}

pub fn run(a: &Args) -> Result<RunResult, String> {
    let rt = if a.client_threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(a.client_threads)
            .enable_all()
            .build()
    }
    .map_err(|e| e.to_string())?;
    rt.block_on(run_async(a))
}

async fn run_async(a: &Args) -> Result<RunResult, String> {
    let nqm = a.qms.len();
    if a.setup {
        for qm in 0..nqm {
            setup_queues(a, qm).await?;
        }
    }
    let pace = if a.rate > 0 {
        let per_worker = a.rate as f64 / a.requesters.max(1) as f64;
        Duration::from_secs_f64(1.0 / per_worker)
    } else {
        Duration::ZERO
    };
    let sh = Arc::new(Shared::new(pace));
    let mut tasks = Vec::new();
    let mut responder_tasks = Vec::new();
    let pair = |i: usize| (i % nqm, (i / nqm) % a.queues);

    let responders = match a.module {
        Module::Rr | Module::Responder => a.responders.max(if a.module == Module::Responder {
            a.requesters
        } else {
            0
        }),
        _ => 0,
    };
    for k in 0..responders {
        let (qm, q) = pair(k);
        let c = Connection::connect(connect_options(a, qm)?)
            .await
            .map_err(|e| e.to_string())?;
        let count = a.module == Module::Responder;
        responder_tasks.push(tokio::spawn(workers::responder(
            c,
            format!("{}{q}", a.request_prefix),
            a.persistent,
            sh.clone(),
            count,
        )));
    }
    let workers = match a.module {
        Module::Responder => 0,
        _ => a.requesters,
    };
    for i in 0..workers {
        let (qm, q) = pair(i);
        let c = Connection::connect(connect_options(a, qm)?)
            .await
            .map_err(|e| e.to_string())?;
        let (req, rep) = (
            format!("{}{q}", a.request_prefix),
            format!("{}{q}", a.reply_prefix),
        );
        let sh = sh.clone();
        let (size, p) = (a.size, a.persistent);
        let sp = a.syncpoint.unwrap_or(a.persistent);
        tasks.push(match a.module {
            Module::Rr | Module::Requester => {
                tokio::spawn(workers::requester(c, req, rep, size, p, sh))
            }
            Module::PutGet => {
                tokio::spawn(workers::simple(Simple::PutGet, c, req, size, p, sp, sh))
            }
            Module::Sender => {
                tokio::spawn(workers::simple(Simple::Sender, c, req, size, p, sp, sh))
            }
            Module::Receiver => {
                tokio::spawn(workers::simple(Simple::Receiver, c, req, size, p, sp, sh))
            }
            Module::Responder => unreachable!("no requesters in responder mode"),
        });
    }

    // An HA queue manager is several processes (its instances): when more pids are given than
    // queue managers, all of them are measured and summed.
    let pids: Vec<u32> = if a.server_pids.len() > nqm {
        a.server_pids.clone()
    } else {
        (0..nqm).filter_map(|q| server_pid(a, q)).collect()
    };
    let want = pids.len().max(nqm);
    let me = std::process::id();
    let live = |label: &str, from: u64, t: Instant| {
        if a.live {
            let n = sh.done.load(Ordering::Relaxed) - from;
            eprintln!(
                "cph: {label} {:>6.1} s  {:>10.0} /s",
                t.elapsed().as_secs_f64(),
                n as f64 / t.elapsed().as_secs_f64().max(1e-9)
            );
        }
    };
    // Warm-up.
    let t = Instant::now();
    while t.elapsed() < a.warmup {
        tokio::time::sleep(Duration::from_secs(1).min(a.warmup.saturating_sub(t.elapsed()))).await;
        live("warm-up", 0, t);
    }
    // Measurement window.
    let s0 = server_marks(&pids).filter(|m| m.len() == want);
    let c0 = cpu::mark(me).ok_or("cannot read this process's CPU time")?;
    let m0 = cpu::machine_ticks().unwrap_or_default();
    let n0 = sh.done.load(Ordering::Relaxed);
    sh.hist.lock().unwrap().reset();
    sh.measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut last = (n0, Instant::now());
    while t0.elapsed() < a.duration {
        tokio::time::sleep(Duration::from_secs(1).min(a.duration.saturating_sub(t0.elapsed())))
            .await;
        if a.live {
            let n = sh.done.load(Ordering::Relaxed);
            let dt = last.1.elapsed().as_secs_f64().max(1e-9);
            eprintln!(
                "cph: measure {:>6.1} s  {:>10.0} /s",
                t0.elapsed().as_secs_f64(),
                (n - last.0) as f64 / dt
            );
            last = (n, Instant::now());
        }
    }
    sh.measuring.store(false, Ordering::Relaxed);
    let n1 = sh.done.load(Ordering::Relaxed);
    let wall = t0.elapsed().as_secs_f64();
    let c1 = cpu::mark(me).ok_or("cannot read this process's CPU time")?;
    let m1 = cpu::machine_ticks().unwrap_or_default();
    let s1 = server_marks(&pids).filter(|m| m.len() == want);
    sh.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
    }
    sh.stop_responders.store(true, Ordering::Relaxed);
    for t in responder_tasks {
        let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
    }

    let n = n1 - n0;
    let rate = n as f64 / wall;
    let server_cpu_pct_each: Vec<f64> = match (s0, s1) {
        (Some(a0), Some(a1)) => a0
            .iter()
            .zip(a1.iter())
            .map(|(x, y)| cpu::pct(*x, *y))
            .collect(),
        _ => Vec::new(),
    };
    let server_cpu_pct =
        (!server_cpu_pct_each.is_empty()).then(|| server_cpu_pct_each.iter().sum::<f64>());
    let client_cpu_pct = cpu::pct(c0, c1);
    let per_rt = |pct: f64| {
        if n > 0 {
            pct / 100.0 * wall / n as f64 * 1e6
        } else {
            0.0
        }
    };
    let h = sh.hist.lock().unwrap().clone();
    let first_error = sh.first_error.lock().unwrap().clone();
    let ms = |us: u64| us as f64 / 1000.0;
    Ok(RunResult {
        module: format!("{:?}", a.module).to_ascii_lowercase(),
        round_trips_per_s: rate,
        round_trips: n,
        server_cpu_pct,
        server_cpu_pct_each,
        client_cpu_pct,
        server_cpu_us_per_rt: server_cpu_pct.map(per_rt),
        client_cpu_us_per_rt: per_rt(client_cpu_pct),
        latency_ms_p50: ms(h.value_at_quantile(0.5)),
        latency_ms_p99: ms(h.value_at_quantile(0.99)),
        latency_ms_max: ms(h.max()),
        machine_steal_pct: cpu::steal_pct(m0, m1),
        threads: a.requesters,
        responders,
        msg_size: a.size,
        persistent: a.persistent,
        queue_managers: nqm,
        queues_per_qm: a.queues,
        transport: if a.conns.is_empty() {
            "bindings".into()
        } else if a.security.tls.is_some() {
            "tls".into()
        } else {
            "tcp".into()
        },
        duration_s: wall,
        warmup_s: a.warmup.as_secs_f64(),
        errors: sh.errors.load(Ordering::Relaxed),
        queue_full_waits: sh.full_waits.load(Ordering::Relaxed),
        first_error,
        version: format!("ferrymq {}", env!("CARGO_PKG_VERSION")),
    })
}
