//! The latency-injecting relay, as a separate process between a client and an echo server: every
//! round trip takes at least the configured time, bytes arrive in order, and a bulk transfer is not
//! slowed down chunk by chunk (the delay is a pipe's length, not a per-chunk wait).

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn echo_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().take(4) {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

fn start_relay(target: u16, rtt_ms: u32) -> (support::Relay, u16) {
    let port = support::free_port();
    (support::relay(port, target, rtt_ms), port)
}

#[test]
fn every_round_trip_takes_at_least_the_injected_latency() {
    let (_relay, port) = start_relay(echo_server(), 20);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut rtts = Vec::new();
    let mut buf = [0u8; 8];
    for i in 0..20u64 {
        let t = Instant::now();
        s.write_all(&i.to_le_bytes()).unwrap();
        s.read_exact(&mut buf).unwrap();
        rtts.push(t.elapsed());
        assert_eq!(u64::from_le_bytes(buf), i);
    }
    rtts.sort();
    assert!(
        rtts[0] >= Duration::from_millis(20),
        "fastest round trip {:?} beat the 20 ms injected",
        rtts[0]
    );
    assert!(
        rtts[10] < Duration::from_millis(200),
        "median {:?} is far above 20 ms",
        rtts[10]
    );
}

#[test]
fn bulk_data_arrives_in_order_without_per_chunk_delay() {
    let (_relay, port) = start_relay(echo_server(), 20);
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut r = s.try_clone().unwrap();
    let total = 20 * 1024 * 1024;
    let data: Vec<u8> = (0..total).map(|i| (i % 253) as u8).collect();
    let sent = data.clone();
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut s = s;
        s.write_all(&sent).unwrap();
    });
    let mut got = vec![0u8; total];
    r.read_exact(&mut got).unwrap();
    let elapsed = t.elapsed();
    writer.join().unwrap();
    assert!(got == data, "bytes were reordered or altered");
    // Over 300 chunks each way: a relay that waited 10 ms per chunk would need many seconds.
    assert!(
        elapsed < Duration::from_secs(4),
        "20 MB took {elapsed:?} through a 20 ms relay"
    );
}
