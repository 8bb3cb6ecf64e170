//! One measured flow: putters put to a queue on one queue manager, getters get from a queue
//! (on the same queue manager for the baseline, on the other one across the channel), and the
//! rate is the messages got per second over the window, with every measured process's CPU.
//!
//! The putters take a credit before each put and the getters give one back after each get, so
//! at most `window_msgs` messages are between them: the transmission queue and the target queue
//! never fill, whichever side is slower, and the queue managers never hold more than a bounded
//! number of bytes. The window holds several batches of the channel's BATCHSZ. After the
//! measured window the putters stop and the getters drain what is on the way, so the next flow
//! starts with empty queues.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::{ConnectOptions, Connection};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::cpu;

/// Messages in flight wanted: at least this many, and four batches and one per putter...
const IN_FLIGHT_MSGS_MIN: usize = 400;
/// ...but no more bytes than this, unless two batches and one per putter need more...
const IN_FLIGHT_BYTES_MAX: usize = 64 << 20;
/// ...and never more messages than this (the queues' MAXDEPTH is above it).
pub(crate) const IN_FLIGHT_MSGS_MAX: usize = 4000;
/// How long a getter waits for a message before checking whether it should stop.
const GET_WAIT_MS: u64 = 500;
/// How long the getters may take to drain the messages in flight after the window.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a client may take to end after it is told to.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What one flow puts and for how long.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub size: usize,
    pub persistent: bool,
    /// The channel's BATCHSZ (0 for the baseline, which has no channel).
    pub batch: u32,
    /// Putters, and as many getters.
    pub clients: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

impl Spec {
    /// Messages allowed in flight: enough for the sender to always find full batches while
    /// the receiver commits, yet few enough that the getters drain them quickly after the window
    /// even at the slowest rates (see the constants above).
    pub(crate) fn window_msgs(&self) -> usize {
        let clients = self.clients.max(1);
        let batch = self.batch as usize;
        let want = (4 * batch + clients).max(IN_FLIGHT_MSGS_MIN);
        let bytes_cap = (IN_FLIGHT_BYTES_MAX / self.size.max(1)).max(2 * batch + clients);
        want.min(bytes_cap).min(IN_FLIGHT_MSGS_MAX)
    }
}

/// Where a flow's clients connect and which queue each side uses.
#[derive(Debug, Clone)]
pub(crate) struct Ends {
    pub put_qm: String,
    pub put_conn: String,
    pub put_queue: String,
    pub get_qm: String,
    pub get_conn: String,
    pub get_queue: String,
}

/// A process whose CPU the flow measures.
#[derive(Debug, Clone)]
pub(crate) struct Proc {
    pub label: &'static str,
    pub pid: u32,
}

/// The CPU one process used over the window.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProcCpu {
    pub label: String,
    /// Percent of one core.
    pub cpu_pct: f64,
    /// CPU microseconds per message got.
    pub cpu_us_per_msg: f64,
}

/// What one flow measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FlowRun {
    pub msg_size: usize,
    pub persistent: bool,
    /// Messages got in the window.
    pub msgs: u64,
    pub msgs_per_s: f64,
    /// Payload megabytes (10^6 bytes) got per second.
    pub mb_per_s: f64,
    /// Each measured process (queue managers, relay), in the order given.
    pub procs: Vec<ProcCpu>,
    /// The bench's own clients (putters and getters together).
    pub client_cpu_pct: f64,
    pub client_cpu_us_per_msg: f64,
    pub window_msgs: usize,
    /// Messages still not got when the drain after the window gave up.
    pub undrained: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub duration_s: f64,
    pub warmup_s: f64,
}

impl FlowRun {
    /// The CPU of the process labelled `label`.
    pub(crate) fn cpu(&self, label: &str) -> Option<&ProcCpu> {
        self.procs.iter().find(|p| p.label == label)
    }

    /// One line for the progress output.
    pub(crate) fn summary(&self) -> String {
        let mut s = format!("{:>8.0} msg/s {:>7.1} MB/s", self.msgs_per_s, self.mb_per_s);
        for p in &self.procs {
            s.push_str(&format!(
                "  {} CPU {:.1}% ({:.1} µs/msg)",
                p.label, p.cpu_pct, p.cpu_us_per_msg
            ));
        }
        s.push_str(&format!("  client CPU {:.1}%", self.client_cpu_pct));
        if self.errors > 0 {
            s.push_str(&format!(
                "  {} errors, first: {}",
                self.errors,
                self.first_error.as_deref().unwrap_or("?")
            ));
        }
        s
    }
}

/// CPU microseconds per message for `pct` percent of a core over `wall` seconds and `n` messages.
pub(crate) fn us_per_msg(pct: f64, wall: f64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        pct / 100.0 * wall / n as f64 * 1e6
    }
}

struct Shared {
    stop_putters: AtomicBool,
    stop_getters: AtomicBool,
    /// Messages put (committed), and got (committed).
    put: AtomicU64,
    got: AtomicU64,
    credits: Semaphore,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, what: &str, e: MqError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| format!("{what}: {e}"));
    }
}

fn options(qm: &str, conn: &str) -> Result<ConnectOptions, String> {
    let mut o = ConnectOptions::client(qm, conn).map_err(|e| e.to_string())?;
    o.app_name = "ferrymq chanbench".into();
    // One conversation per socket, as the other reports.
    o.sharecnv = 1;
    Ok(o)
}

/// Puts until told to stop, each message after taking a credit: persistent messages each under
/// syncpoint with their commit (one write), non-persistent ones outside syncpoint.
async fn putter(c: Connection, queue: String, spec: Spec, sh: Arc<Shared>) {
    let run = async {
        let h = c.open(&queue, open::OUTPUT).await?;
        let body = Bytes::from(vec![b'C'; spec.size]);
        let md = MessageDescriptor {
            persistence: if spec.persistent {
                Persistence::Persistent
            } else {
                Persistence::NotPersistent
            },
            ..Default::default()
        };
        let props = Properties::default();
        let plain = PutOptions {
            syncpoint: Syncpoint::No,
            new_msg_id: true,
            ..Default::default()
        };
        while !sh.stop_putters.load(Ordering::Relaxed) {
            // The semaphore is closed when the putters stop.
            let Ok(credit) = sh.credits.acquire().await else {
                break;
            };
            credit.forget();
            let r = if spec.persistent {
                c.put_commit(&h, &md, &props, body.clone()).await
            } else {
                c.put(&h, &md, &props, body.clone(), &plain).await
            };
            match r {
                Ok(_) => {
                    sh.put.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    sh.credits.add_permits(1);
                    return Err(e);
                }
            }
        }
        Ok::<(), MqError>(())
    };
    if let Err(e) = run.await {
        sh.fail("putter", e);
    }
    let _ = c.disconnect().await;
}

/// Gets until told to stop (persistent messages under syncpoint, each with its commit), giving a
/// credit back for each.
async fn getter(c: Connection, queue: String, persistent: bool, sh: Arc<Shared>) {
    let run = async {
        let h = c.open(&queue, open::INPUT_SHARED).await?;
        let opts = GetOptions {
            wait: Wait::Ms(GET_WAIT_MS),
            syncpoint: if persistent {
                Syncpoint::Yes
            } else {
                Syncpoint::No
            },
            ..GetOptions::any()
        };
        while !sh.stop_getters.load(Ordering::Relaxed) {
            match c.get(&h, &opts).await {
                Ok(_) => {
                    if persistent {
                        c.commit().await?;
                    }
                    sh.got.fetch_add(1, Ordering::Relaxed);
                    sh.credits.add_permits(1);
                }
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {}
                Err(e) => return Err(e),
            }
        }
        Ok::<(), MqError>(())
    };
    if let Err(e) = run.await {
        sh.fail("getter", e);
    }
    let _ = c.disconnect().await;
}

/// Runs one flow between `ends`, measuring the CPU of `procs` and of this process over the
/// window.
pub(crate) fn measure(spec: &Spec, ends: &Ends, procs: &[Proc]) -> Result<FlowRun, String> {
    // One client thread, as `cph` uses: the clients' CPU is measured alongside the servers'.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(measure_async(spec, ends, procs))
}

async fn measure_async(spec: &Spec, ends: &Ends, procs: &[Proc]) -> Result<FlowRun, String> {
    let window_msgs = spec.window_msgs();
    let sh = Arc::new(Shared {
        stop_putters: AtomicBool::new(false),
        stop_getters: AtomicBool::new(false),
        put: AtomicU64::new(0),
        got: AtomicU64::new(0),
        credits: Semaphore::new(window_msgs),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
    });
    let clients = spec.clients.max(1);
    let mut getters = Vec::new();
    for _ in 0..clients {
        let c = Connection::connect(options(&ends.get_qm, &ends.get_conn)?)
            .await
            .map_err(|e| format!("{}: {e}", ends.get_qm))?;
        getters.push(tokio::spawn(getter(
            c,
            ends.get_queue.clone(),
            spec.persistent,
            sh.clone(),
        )));
    }
    let mut putters = Vec::new();
    for _ in 0..clients {
        let c = Connection::connect(options(&ends.put_qm, &ends.put_conn)?)
            .await
            .map_err(|e| format!("{}: {e}", ends.put_qm))?;
        putters.push(tokio::spawn(putter(
            c,
            ends.put_queue.clone(),
            spec.clone(),
            sh.clone(),
        )));
    }
    tokio::time::sleep(spec.warmup).await;
    let me = std::process::id();
    let p0: Option<Vec<cpu::Mark>> = procs.iter().map(|p| cpu::mark(p.pid)).collect();
    let c0 = cpu::mark(me).ok_or("cannot read this process's CPU time")?;
    let n0 = sh.got.load(Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(spec.duration).await;
    let n = sh.got.load(Ordering::Relaxed) - n0;
    let wall = t0.elapsed().as_secs_f64();
    let c1 = cpu::mark(me).ok_or("cannot read this process's CPU time")?;
    let p1: Option<Vec<cpu::Mark>> = procs.iter().map(|p| cpu::mark(p.pid)).collect();

    // Stop putting, let the getters take what is on the way, then stop them.
    sh.stop_putters.store(true, Ordering::Relaxed);
    sh.credits.close();
    for t in putters {
        let _ = tokio::time::timeout(STOP_TIMEOUT, t).await;
    }
    let drain_from = Instant::now();
    while sh.got.load(Ordering::Relaxed) < sh.put.load(Ordering::Relaxed)
        && drain_from.elapsed() < DRAIN_TIMEOUT
        && sh.errors.load(Ordering::Relaxed) == 0
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let undrained = sh
        .put
        .load(Ordering::Relaxed)
        .saturating_sub(sh.got.load(Ordering::Relaxed));
    sh.stop_getters.store(true, Ordering::Relaxed);
    for t in getters {
        let _ = tokio::time::timeout(STOP_TIMEOUT, t).await;
    }

    let procs_cpu = match (p0, p1) {
        (Some(a), Some(b)) => procs
            .iter()
            .zip(a.iter().zip(b.iter()))
            .map(|(p, (x, y))| {
                let pct = cpu::pct(*x, *y);
                ProcCpu {
                    label: p.label.to_string(),
                    cpu_pct: pct,
                    cpu_us_per_msg: us_per_msg(pct, wall, n),
                }
            })
            .collect(),
        _ => return Err("a measured process ended during the window".into()),
    };
    let client_cpu_pct = cpu::pct(c0, c1);
    let first_error = sh
        .first_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(FlowRun {
        msg_size: spec.size,
        persistent: spec.persistent,
        msgs: n,
        msgs_per_s: n as f64 / wall,
        mb_per_s: n as f64 * spec.size as f64 / wall / 1e6,
        procs: procs_cpu,
        client_cpu_pct,
        client_cpu_us_per_msg: us_per_msg(client_cpu_pct, wall, n),
        window_msgs,
        undrained,
        errors: sh.errors.load(Ordering::Relaxed),
        first_error,
        duration_s: wall,
        warmup_s: spec.warmup.as_secs_f64(),
    })
}
