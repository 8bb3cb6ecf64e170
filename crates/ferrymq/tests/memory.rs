//! Memory follows the bytes stored: a queued small message must not keep the 64 KiB read buffer it
//! arrived in alive. (The full measurement, 1,000,000 messages of several sizes before and after a
//! restart, is `ferrymq-bench memory`; this is its fast regression guard.)

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_proto::{encode_request, parse_response, FrameDecoder, Hello, Request, Response};
use ferrymq_types::options::{open, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use support::{Home, Qm};

const MESSAGES: usize = 100_000;
const SIZE: usize = 64;
/// Puts written per round trip: a few frames per read, as from a client that waits for its
/// replies now and then.
const PER_WRITE: usize = 8;

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Raw {
    s: TcpStream,
    dec: FrameDecoder,
    buf: BytesMut,
}

impl Raw {
    fn read(&mut self, n: usize) -> Vec<Response> {
        let mut out = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            while out.len() < n {
                match self.dec.decode(&mut self.buf).unwrap() {
                    Some(f) => out.push(parse_response(&f).unwrap()),
                    None => break,
                }
            }
            if out.len() == n {
                return out;
            }
            let k = self.s.read(&mut chunk).expect("read replies");
            assert!(k > 0, "the queue manager closed the socket");
            self.buf.extend_from_slice(&chunk[..k]);
        }
    }
}

#[test]
fn small_queued_messages_cost_about_their_size() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QMMEM", &[]);
    let pid = qm.pid().expect("queue manager pid");
    let c = qm.connect();
    c.admin("MQSC DEFINE QLOCAL(SMALL) MAXDEPTH(999999999)")
        .unwrap();

    let s = TcpStream::connect(("127.0.0.1", qm.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut raw = Raw {
        s,
        dec: FrameDecoder::new(1 << 20),
        buf: BytesMut::new(),
    };
    let mut b = BytesMut::new();
    encode_request(0, 0, &Request::Hello(Hello::new("mem")), &mut b);
    encode_request(
        1,
        1,
        &Request::Connect {
            qmgr: String::new(),
            user: String::new(),
            password: String::new(),
            app_name: "mem".into(),
        },
        &mut b,
    );
    encode_request(
        1,
        2,
        &Request::Open {
            name: "SMALL".into(),
            qmgr: String::new(),
            options: open::OUTPUT,
            dynamic_name: String::new(),
        },
        &mut b,
    );
    raw.s.write_all(&b).unwrap();
    let r = raw.read(3);
    let Response::Opened { hobj, .. } = r[2] else {
        panic!("open: {:?}", r[2])
    };

    // Let the queue manager settle, then measure what 100,000 queued 64-byte messages add.
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_kib(pid);
    let md = MessageDescriptor {
        persistence: Persistence::NotPersistent,
        ..Default::default()
    };
    let t = Instant::now();
    let mut req = 10u32;
    for _ in 0..MESSAGES / PER_WRITE {
        let mut b = BytesMut::new();
        for _ in 0..PER_WRITE {
            req += 1;
            encode_request(
                1,
                req,
                &Request::Put {
                    hobj,
                    opts: PutOptions::default(),
                    md: md.clone(),
                    props: Properties::default(),
                    body: Bytes::from(vec![b'x'; SIZE]),
                },
                &mut b,
            );
        }
        raw.s.write_all(&b).unwrap();
        for r in raw.read(PER_WRITE) {
            assert!(matches!(r, Response::PutOk { .. }), "{r:?}");
        }
    }
    let after = rss_kib(pid);
    let growth = (after.saturating_sub(before)) * 1024;
    let per_msg = growth as f64 / MESSAGES as f64;
    let bound = (3 * SIZE + 400) as f64;
    eprintln!(
        "{MESSAGES} x {SIZE} B non-persistent put in {:.1} s: RSS {before} KiB -> {after} KiB, {per_msg:.0} B per queued message (bound {bound:.0})",
        t.elapsed().as_secs_f64()
    );
    assert!(
        per_msg <= bound,
        "each queued {SIZE}-byte message costs {per_msg:.0} bytes of RSS (bound {bound:.0})"
    );
    // And they are all there.
    let h = c.open("SMALL", open::INQUIRE).unwrap();
    let d = c.inquire(&h, &["CURDEPTH"]).unwrap();
    assert_eq!(d[0].1.trim(), MESSAGES.to_string());
}
