//! `ferrymq relay --listen ADDR:PORT --target ADDR:PORT --rtt-ms N [--mbps M]`: a TCP relay that
//! adds latency (and, with `--mbps`, limits each direction's bandwidth, as a WAN link does).
//! Each direction of each connection is delayed by half the round trip, keeping byte order and
//! bandwidth: every chunk read is stamped with its arrival time and written out at arrival + delay,
//! while later chunks keep arriving (the delay is a pipe's length, not a per-chunk wait). It stands in
//! for `tc netem` on kernels without it, on replication links (HA, DR) and for users rehearsing a
//! deployment over distance. One thread per direction: `std::thread::sleep` is accurate to tens of
//! microseconds, where an async timer would round sub-millisecond delays up to a millisecond.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli;
use crate::lifecycle::{Fail, Res};

/// Chunks in flight per direction before the reader waits (bounds memory, keeps TCP backpressure).
const CHUNKS_IN_FLIGHT_MAX: usize = 4096;
const CHUNK_BYTES: usize = 64 * 1024;

fn other(m: impl Into<String>) -> Fail {
    Fail {
        code: 1,
        message: m.into(),
    }
}

/// Copies `from` to `to` through a delay line of `delay`, at most `bytes_per_s` when set.
fn pipe(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    bytes_per_s: Option<f64>,
    bytes: Arc<AtomicU64>,
) {
    // A link limited in bandwidth holds little more than what is on the wire: the sender feels
    // the limit through TCP instead of filling the relay.
    let in_flight = match bytes_per_s {
        Some(rate) => ((rate * (delay.as_secs_f64() + 0.05)) as usize / CHUNK_BYTES).clamp(2, 64),
        None => CHUNKS_IN_FLIGHT_MAX,
    };
    let (tx, rx) = sync_channel::<(Instant, Vec<u8>)>(in_flight);
    let writer = std::thread::spawn(move || write_side(rx, &mut to, bytes_per_s));
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.join();
    let _ = from.shutdown(Shutdown::Read);
}

fn write_side(rx: Receiver<(Instant, Vec<u8>)>, to: &mut TcpStream, bytes_per_s: Option<f64>) {
    // With a bandwidth limit, a chunk leaves no earlier than the previous one has drained.
    let mut free_at = Instant::now();
    while let Ok((due, chunk)) = rx.recv() {
        let due = due.max(free_at);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if to.write_all(&chunk).is_err() {
            return;
        }
        if let Some(rate) = bytes_per_s {
            free_at = due + Duration::from_secs_f64(chunk.len() as f64 / rate);
        }
    }
    // The source closed: pass the end of stream on, after everything before it.
    let _ = to.shutdown(Shutdown::Write);
}

/// Relays one accepted connection in both directions.
fn relay_one(
    client: TcpStream,
    target: &str,
    delay: Duration,
    bytes_per_s: Option<f64>,
    bytes: Arc<AtomicU64>,
) -> Result<(), String> {
    let server =
        TcpStream::connect(target).map_err(|e| format!("relay: cannot reach {target}: {e}"))?;
    for s in [&client, &server] {
        let _ = s.set_nodelay(true);
    }
    let (c2, s2) = (
        client.try_clone().map_err(|e| e.to_string())?,
        server.try_clone().map_err(|e| e.to_string())?,
    );
    let b2 = bytes.clone();
    std::thread::spawn(move || pipe(c2, s2, delay, bytes_per_s, b2));
    std::thread::spawn(move || pipe(server, client, delay, bytes_per_s, bytes));
    Ok(())
}

pub fn run(p: &cli::Relay) -> Res {
    let addr = |flag: &str, v: &str| -> Result<String, Fail> {
        // host(port), as every other command takes addresses, or ADDR:PORT.
        if v.trim_end().ends_with(')') {
            ferrymq_server::config::parse_addr(v).map_err(|e| other(format!("relay: {flag} {e}")))
        } else {
            Ok(v.to_string())
        }
    };
    let listen = addr("--listen", &p.listen)?;
    let target = addr("--target", &p.target)?;
    let rtt_ms = p.rtt_ms;
    if !(0.0..=60_000.0).contains(&rtt_ms) {
        return Err(other("relay: --rtt-ms must be 0..60000"));
    }
    let seconds = p.seconds;
    let mbps = p.mbps;
    if mbps.is_some_and(|m| !(m > 0.0 && m <= 1_000_000.0)) {
        return Err(other("relay: --mbps must be above 0 and at most 1000000"));
    }
    let bytes_per_s = mbps.map(|m| m * 1_000_000.0 / 8.0);
    let delay = Duration::from_secs_f64(rtt_ms / 2000.0);
    let listener = TcpListener::bind(&listen)
        .map_err(|e| other(format!("relay: cannot listen on {listen}: {e}")))?;
    eprintln!(
        "relay: {listen} -> {target}, {rtt_ms} ms round trip added ({:.3} ms each way)",
        delay.as_secs_f64() * 1000.0
    );
    let bytes = Arc::new(AtomicU64::new(0));
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
    if deadline.is_some() {
        listener
            .set_nonblocking(true)
            .map_err(|e| other(e.to_string()))?;
    }
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            eprintln!(
                "relay: stopping after {} bytes relayed",
                bytes.load(Ordering::Relaxed)
            );
            return Ok(());
        }
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                if let Err(e) = relay_one(s, &target, delay, bytes_per_s, bytes.clone()) {
                    eprintln!("{e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => return Err(other(format!("relay: accept failed: {e}"))),
        }
    }
}
