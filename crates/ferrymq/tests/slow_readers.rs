//! Clients that never read their replies: raw TCP sockets that shake hands, connect, open a queue
//! and then pipeline gets and browses of large messages without ever reading. The queue manager
//! must stop reading their requests (back pressure), close them within a bounded time (backing out
//! their units of work), keep its memory bounded, and keep serving well-behaved clients at their
//! usual rate.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_proto::{encode_request, parse_response, FrameDecoder, Hello, Request, Response};
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Properties};
use support::{Home, Qm};

const BIG_Q: &str = "BIG";
const TAKE_Q: &str = "TAKE";
const TAKE_MSGS: usize = 20;
const BAD_CLIENTS: usize = 50;
const GOOD_CLIENTS: usize = 10;
/// The queue manager's resident memory must stay under this while 50 clients each try to make it
/// queue gigabytes of replies. With the defaults each socket holds its 1 MiB pause bound, the
/// reply that crossed it and what its writer is writing (2-3 MiB with 1 MiB messages), so 50 of
/// them ~150 MiB, plus the allocator's slack. (Without back pressure it passed 10 GB.)
const RSS_BOUND_KIB: u64 = 256 * 1024;
/// A socket that does not read must be closed within this time of its first request.
const CLOSE_BOUND: Duration = Duration::from_secs(20);

/// CPU seconds (user + system) the process has used.
fn cpu_s(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = s
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Reads exactly `n` responses (the handshake's and the open's; nothing after).
fn read_n(s: &mut TcpStream, n: usize) -> Vec<Response> {
    let mut dec = FrameDecoder::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        let k = s.read(&mut chunk).expect("read a handshake reply");
        assert!(k > 0, "closed during the handshake");
        buf.extend_from_slice(&chunk[..k]);
        while let Ok(Some(f)) = dec.decode(&mut buf) {
            out.push(parse_response(&f).unwrap());
        }
    }
    out
}

/// One silent client's socket: handshake, connect, open; returns the socket and handle.
fn open_silent(port: u16, queue: &str) -> (TcpStream, u32) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = BytesMut::new();
    let mut hello = Hello::new("silent");
    // Ask for the queue manager's one-second heartbeat interval (the larger of the two wins).
    hello.heartbeat_ms = 1000;
    encode_request(0, 0, &Request::Hello(hello), &mut b);
    encode_request(
        1,
        1,
        &Request::Connect {
            qmgr: String::new(),
            user: String::new(),
            password: String::new(),
            app_name: "silent".into(),
        },
        &mut b,
    );
    encode_request(
        1,
        2,
        &Request::Open {
            name: queue.into(),
            qmgr: String::new(),
            options: open::BROWSE | open::INPUT_SHARED,
            dynamic_name: String::new(),
        },
        &mut b,
    );
    s.write_all(&b).unwrap();
    let r = read_n(&mut s, 3);
    assert!(matches!(r[0], Response::HelloOk { .. }), "{:?}", r[0]);
    let Response::Opened { hobj, .. } = r[2] else {
        panic!("open: {:?}", r[2])
    };
    (s, hobj)
}

/// Pipelines requests on `s` without ever reading, until the server closes the socket (a write
/// fails) or `stop` is set: `Ok(how long after the first request the server closed it)`, or
/// `Err(how long it had been open)` when stopped.
fn flood(
    mut s: TcpStream,
    hobj: u32,
    browse: bool,
    stop: &AtomicBool,
) -> Result<Duration, Duration> {
    let opts = if browse {
        GetOptions {
            browse: Browse::First,
            ..GetOptions::any()
        }
    } else {
        GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        }
    };
    let mut batch = BytesMut::new();
    for i in 0..256u32 {
        encode_request(
            1,
            10 + i,
            &Request::Get {
                hobj,
                opts: opts.clone(),
            },
            &mut batch,
        );
    }
    s.set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let t = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        match s.write(&batch) {
            Ok(0) => return Ok(t.elapsed()),
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return Ok(t.elapsed()),
        }
    }
    Err(t.elapsed())
}

/// Ten normal clients doing put + get round trips on their own queues for `secs`; round trips/s.
fn good_rate(qm: &Qm, secs: f64) -> f64 {
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let conns: Vec<_> = (0..GOOD_CLIENTS).map(|_| qm.connect()).collect();
    std::thread::scope(|sc| {
        for (i, c) in conns.iter().enumerate() {
            let count = count.clone();
            sc.spawn(move || {
                let h = c
                    .open(&format!("GOOD{i}"), open::INPUT_SHARED | open::OUTPUT)
                    .unwrap();
                let body = Bytes::from(vec![b'g'; 256]);
                while Instant::now() < deadline {
                    c.put(
                        &h,
                        &MessageDescriptor::default(),
                        &Properties::default(),
                        body.clone(),
                        &PutOptions::default(),
                    )
                    .unwrap();
                    let got = c.get(&h, &GetOptions::any()).unwrap();
                    assert_eq!(got.body.len(), 256);
                    count.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    count.load(Ordering::Relaxed) as f64 / secs
}

#[test]
fn clients_that_never_read_are_paused_then_closed_and_others_keep_their_rate() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QMSLOW", &[]);
    // A one-second heartbeat interval, so a client that does not read is found within seconds.
    home.ok(&["endmqm", "-w", "QMSLOW"]);
    home.ok(&[
        "setmqini",
        "-m",
        "QMSLOW",
        "-s",
        "Channels",
        "-k",
        "HeartbeatMs",
        "-v",
        "1000",
    ]);
    qm.restart();
    let pid = qm.pid().expect("queue manager pid");
    let c = qm.connect();
    let mut mqsc = format!(
        "DEFINE QLOCAL({BIG_Q}) MAXMSGL(4194304)\nDEFINE QLOCAL({TAKE_Q}) MAXMSGL(4194304)\n"
    );
    for i in 0..GOOD_CLIENTS {
        mqsc.push_str(&format!("DEFINE QLOCAL(GOOD{i})\n"));
    }
    for line in mqsc.lines() {
        c.admin(&format!("MQSC {line}")).unwrap();
    }
    let put = |q: &str, n: usize, size: usize| {
        let h = c.open(q, open::OUTPUT).unwrap();
        for _ in 0..n {
            c.put(
                &h,
                &MessageDescriptor::default(),
                &Properties::default(),
                Bytes::from(vec![b'B'; size]),
                &PutOptions::default(),
            )
            .unwrap();
        }
    };
    put(BIG_Q, 1, 1 << 20);
    put(TAKE_Q, TAKE_MSGS, 256 << 10);

    let cpu0 = cpu_s(pid);
    let alone = good_rate(&qm, 3.0);
    let cpu_alone = cpu_s(pid) - cpu0;
    let rss_before = rss_kib(pid);

    // 50 silent clients: 40 browse the 1 MiB message, 10 take 256 KiB messages under syncpoint.
    let stop = Arc::new(AtomicBool::new(false));
    // Per socket: how long after its first request the server closed it.
    let closes: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let still_open: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let peak = Arc::new(AtomicU64::new(0));
    let port = qm.port;
    let silent: Vec<_> = (0..BAD_CLIENTS)
        .map(|k| {
            let browse = k % 5 != 0;
            let (s, hobj) = open_silent(port, if browse { BIG_Q } else { TAKE_Q });
            (s, hobj, browse)
        })
        .collect();
    let rate_under_attack = std::thread::scope(|sc| {
        for (s, hobj, browse) in silent {
            let (stop, closes, still_open) = (stop.clone(), closes.clone(), still_open.clone());
            sc.spawn(move || match flood(s, hobj, browse, &stop) {
                Ok(d) => closes.lock().unwrap().push(d),
                Err(d) => still_open.lock().unwrap().push(d),
            });
        }
        {
            let (stop, peak) = (stop.clone(), peak.clone());
            sc.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let r = rss_kib(pid);
                    peak.fetch_max(r, Ordering::Relaxed);
                    if r > RSS_BOUND_KIB {
                        // Stop at once rather than let the queue manager eat the machine.
                        stop.store(true, Ordering::Relaxed);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        let c0 = cpu_s(pid);
        let r = good_rate(&qm, 4.0);
        eprintln!(
            "queue manager CPU: {cpu_alone:.2} s in the 3 s window alone, {:.2} s in the 4 s window beside the silent clients",
            cpu_s(pid) - c0
        );
        // Wait (bounded) for the server to close every silent socket.
        let t = Instant::now();
        while closes.lock().unwrap().len() < BAD_CLIENTS
            && t.elapsed() < CLOSE_BOUND
            && !stop.load(Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        r
    });
    // The machine is shared and noisy: the reference is the mean of a window before and one after.
    let alone_after = good_rate(&qm, 3.0);
    let alone = (alone + alone_after) / 2.0;
    let peak = peak.load(Ordering::Relaxed);
    let closes = closes.lock().unwrap().clone();
    let still_open = still_open.lock().unwrap().clone();
    eprintln!(
        "good clients: {alone:.0} round trips/s alone (mean of before and after, after {alone_after:.0}), {rate_under_attack:.0} beside {BAD_CLIENTS} silent clients; \
         queue manager RSS {rss_before} KiB before, peak {peak} KiB; {} silent sockets closed by the server, slowest after {:?}; \
         {} open when the test stopped, the oldest for {:?}",
        closes.len(),
        closes.iter().max(),
        still_open.len(),
        still_open.iter().max()
    );
    assert!(
        peak <= RSS_BOUND_KIB,
        "queue manager RSS reached {peak} KiB (bound {RSS_BOUND_KIB} KiB)"
    );
    assert!(
        closes.len() == BAD_CLIENTS,
        "only {} silent sockets were closed within {CLOSE_BOUND:?}",
        closes.len()
    );
    for c in closes.iter().chain(&still_open) {
        assert!(
            *c < CLOSE_BOUND,
            "a silent socket was open for {c:?} (bound {CLOSE_BOUND:?})"
        );
    }
    // Generous: two shared cores, and the 50 silent clients' own work is real. Before back
    // pressure the good clients could not even connect.
    assert!(
        rate_under_attack >= 0.3 * alone,
        "good clients fell from {alone:.0} to {rate_under_attack:.0} round trips/s"
    );

    // Every unit of work of a closed taker was backed out: all its messages are back.
    let h = c.open(TAKE_Q, open::INPUT_SHARED).unwrap();
    let t = Instant::now();
    let mut n = 0;
    while n < TAKE_MSGS && t.elapsed() < Duration::from_secs(20) {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                assert_eq!(m.body.len(), 256 << 10);
                n += 1;
            }
            // A taker still being closed may hold some for a moment.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    assert_eq!(
        n, TAKE_MSGS,
        "messages taken under syncpoint were not all backed out"
    );
    assert!(support::alive(pid), "the queue manager died");
}
