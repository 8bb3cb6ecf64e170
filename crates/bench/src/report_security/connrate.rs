//! Connection rate: how many client connections a queue manager takes in and lets go per second.
//! Each connector connects (TCP, TLS when asked, the Hello naming the channel, the Connect with
//! its user and password), disconnects, and starts again at once; the rate is counted over a
//! window after a warm-up, with both sides' CPU and the connect latency.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrymq_client::{ConnectOptions, Connection};
use hdrhistogram::Histogram;
use serde::Serialize;

use super::Mode;
use crate::cpu;

/// What one connection-rate run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConnRate {
    pub mode: Mode,
    pub connectors: usize,
    /// Connects (each followed by its disconnect) completed in the window.
    pub connects: u64,
    pub connects_per_s: f64,
    /// The queue manager's CPU over the window, percent of one core.
    pub server_cpu_pct: Option<f64>,
    pub client_cpu_pct: f64,
    /// CPU milliseconds per connect and disconnect, server side and client side.
    pub server_cpu_ms_per_connect: Option<f64>,
    pub client_cpu_ms_per_connect: f64,
    /// From the start of the connect to the end of the disconnect.
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub duration_s: f64,
    pub warmup_s: f64,
}

struct Shared {
    stop: AtomicBool,
    measuring: AtomicBool,
    done: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// Microseconds, recorded inside the window.
    hist: Mutex<Histogram<u64>>,
}

/// A failed connect is retried after this pause, so that a refusing queue manager is not spun on.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

async fn connector(opts: ConnectOptions, sh: Arc<Shared>) {
    while !sh.stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let r = match Connection::connect(opts.clone()).await {
            Ok(c) => c.disconnect().await,
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {
                sh.done.fetch_add(1, Ordering::Relaxed);
                if sh.measuring.load(Ordering::Relaxed) {
                    let us = started.elapsed().as_micros().max(1) as u64;
                    let _ = sh.hist.lock().unwrap().record(us);
                }
            }
            Err(e) => {
                sh.errors.fetch_add(1, Ordering::Relaxed);
                sh.first_error
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| e.to_string());
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Runs `connectors` connectors with `opts` against the queue manager whose process is
/// `server_pid`: a warm-up of `warmup`, then a window of `duration`.
pub(crate) fn measure(
    mode: Mode,
    opts: &ConnectOptions,
    connectors: usize,
    warmup: Duration,
    duration: Duration,
    server_pid: u32,
) -> Result<ConnRate, String> {
    // One client thread, as `cph` uses: the client's CPU is measured alongside the server's.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let sh = Arc::new(Shared {
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(false),
        done: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
        hist: Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")),
    });
    let me = std::process::id();
    rt.block_on(async {
        let tasks: Vec<_> = (0..connectors.max(1))
            .map(|_| tokio::spawn(connector(opts.clone(), sh.clone())))
            .collect();
        tokio::time::sleep(warmup).await;
        let s0 = cpu::mark(server_pid);
        let c0 = cpu::mark(me).ok_or("cannot read this process's CPU time")?;
        let n0 = sh.done.load(Ordering::Relaxed);
        sh.measuring.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        tokio::time::sleep(duration).await;
        sh.measuring.store(false, Ordering::Relaxed);
        let n = sh.done.load(Ordering::Relaxed) - n0;
        let wall = t0.elapsed().as_secs_f64();
        let c1 = cpu::mark(me).ok_or("cannot read this process's CPU time")?;
        let s1 = cpu::mark(server_pid);
        sh.stop.store(true, Ordering::Relaxed);
        for t in tasks {
            // A connect in progress ends within the client's connect timeout.
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
        let server_cpu_pct = match (s0, s1) {
            (Some(a), Some(b)) => Some(cpu::pct(a, b)),
            _ => None,
        };
        let client_cpu_pct = cpu::pct(c0, c1);
        let per_connect_ms = |pct: f64| {
            if n > 0 {
                pct / 100.0 * wall / n as f64 * 1e3
            } else {
                0.0
            }
        };
        let h = sh.hist.lock().unwrap().clone();
        let ms = |us: u64| us as f64 / 1000.0;
        Ok(ConnRate {
            mode,
            connectors: connectors.max(1),
            connects: n,
            connects_per_s: n as f64 / wall,
            server_cpu_pct,
            client_cpu_pct,
            server_cpu_ms_per_connect: server_cpu_pct.map(per_connect_ms),
            client_cpu_ms_per_connect: per_connect_ms(client_cpu_pct),
            latency_ms_p50: ms(h.value_at_quantile(0.5)),
            latency_ms_p99: ms(h.value_at_quantile(0.99)),
            errors: sh.errors.load(Ordering::Relaxed),
            first_error: sh.first_error.lock().unwrap().clone(),
            duration_s: wall,
            warmup_s: warmup.as_secs_f64(),
        })
    })
}
