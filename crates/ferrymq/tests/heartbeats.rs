//! Heartbeats on client sockets, over real TCP against the real binary: the queue manager probes a
//! silent socket once a heartbeat interval has passed since it last heard from it (never sooner),
//! keeps a client that answers, and closes one that misses three intervals, backing out its unit
//! of work.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_proto::{
    encode_request, encode_response, kind, parse_response, FrameDecoder, Hello, Request, Response,
};
use ferrymq_types::options::{open, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use support::{Home, Qm};

const QUEUE: &str = "HB.Q";
const INTERVAL: Duration = Duration::from_millis(1000);

/// A raw client socket: handshake (asking for the queue manager's interval), Connect, Open for
/// output; what is left of its read buffer and its handle.
struct Raw {
    s: TcpStream,
    buf: BytesMut,
    dec: FrameDecoder,
    hobj: u32,
    next_req: u32,
}

impl Raw {
    fn open(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut c = Raw {
            s,
            buf: BytesMut::new(),
            dec: FrameDecoder::new(1 << 20),
            hobj: 0,
            next_req: 1,
        };
        let mut hello = Hello::new("hb-test");
        hello.heartbeat_ms = INTERVAL.as_millis() as u32;
        c.send(0, &Request::Hello(hello));
        assert!(
            matches!(c.next(), Some(Response::HelloOk { heartbeat_ms, .. }) if heartbeat_ms == 1000)
        );
        c.send(
            1,
            &Request::Connect {
                qmgr: String::new(),
                user: String::new(),
                password: String::new(),
                app_name: "hb-test".into(),
            },
        );
        assert!(
            matches!(c.next(), Some(Response::Status { reason, .. }) if reason == Reason::NONE)
        );
        c.send(
            1,
            &Request::Open {
                name: QUEUE.into(),
                qmgr: String::new(),
                options: open::OUTPUT,
                dynamic_name: String::new(),
            },
        );
        match c.next() {
            Some(Response::Opened { hobj, .. }) => c.hobj = hobj,
            other => panic!("open: {other:?}"),
        }
        c
    }

    fn send(&mut self, conv: u16, r: &Request) {
        let mut b = BytesMut::new();
        encode_request(conv, self.next_req, r, &mut b);
        self.next_req += 1;
        self.s.write_all(&b).unwrap();
    }

    /// A put under syncpoint, answered.
    fn put(&mut self) {
        let put = Request::Put {
            hobj: self.hobj,
            opts: PutOptions {
                syncpoint: Syncpoint::Yes,
                ..Default::default()
            },
            md: MessageDescriptor::default(),
            props: Properties::default(),
            body: Bytes::from_static(b"heartbeat test"),
        };
        self.send(1, &put);
        let r = self.next();
        assert!(matches!(r, Some(Response::PutOk { .. })), "put: {r:?}");
    }

    /// The next response (none is expected to be a heartbeat), or None when the socket closed.
    fn next(&mut self) -> Option<Response> {
        match self.frame()? {
            Frame::Heartbeat(_) => panic!("a heartbeat before a reply"),
            Frame::Response(r) => Some(*r),
        }
    }

    /// The next frame, or None once the queue manager closed the socket.
    fn frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).unwrap() {
                if f.kind == kind::HEARTBEAT {
                    return Some(Frame::Heartbeat(f.req));
                }
                return Some(Frame::Response(Box::new(parse_response(&f).unwrap())));
            }
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

enum Frame {
    Heartbeat(u32),
    Response(Box<Response>),
}

fn depth(qm: &Qm) -> u64 {
    let out = support::mqsc(
        qm.home,
        &qm.name,
        &format!("DISPLAY QLOCAL({QUEUE}) CURDEPTH\n"),
    );
    out.split("CURDEPTH(")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no CURDEPTH in {out}"))
}

#[test]
fn silent_sockets_are_probed_after_an_interval_kept_when_they_answer_closed_after_three() {
    let home = Home::new();
    let qm = Qm::create(&home, "QMHB", &[]);
    qm.set_ini("Channels", "HeartbeatMs", "1000");
    qm.restart();
    support::mqsc(&home, "QMHB", &format!("DEFINE QLOCAL({QUEUE})\n"));

    // One client answers every heartbeat, one never does; each has a put in a unit of work.
    let mut good = Raw::open(qm.port);
    let mut bad = Raw::open(qm.port);
    good.put();
    bad.put();
    let mut last_sent_good = Instant::now();
    let last_sent_bad = Instant::now();

    let bad_thread = std::thread::spawn(move || {
        // Heartbeats arrive one interval apart at the least; then the socket is closed.
        let mut beats = Vec::new();
        let mut error = None;
        while let Some(f) = bad.frame() {
            match f {
                Frame::Heartbeat(_) => beats.push(last_sent_bad.elapsed()),
                Frame::Response(r) => error = Some(*r),
            }
        }
        (beats, error, last_sent_bad.elapsed())
    });

    // The answering client is probed, never sooner than an interval after it was last heard
    // from, and kept for five intervals and more.
    let started = Instant::now();
    let mut beats = 0;
    while started.elapsed() < 5 * INTERVAL {
        match good.frame() {
            Some(Frame::Heartbeat(req)) => {
                let since = last_sent_good.elapsed();
                assert!(
                    since >= INTERVAL,
                    "a heartbeat {since:?} after the client was last heard from (interval {INTERVAL:?})"
                );
                beats += 1;
                let mut b = BytesMut::new();
                encode_response(0, req, &Response::HeartbeatAck, &mut b);
                good.s.write_all(&b).unwrap();
                last_sent_good = Instant::now();
            }
            Some(Frame::Response(r)) => panic!("unexpected {r:?}"),
            None => panic!("the queue manager closed a client that answers its heartbeats"),
        }
    }
    assert!(beats >= 3, "{beats} heartbeats in five intervals");
    // Still served, its unit of work intact.
    good.put();

    let (bad_beats, error, closed_after) = bad_thread.join().unwrap();
    assert!(
        bad_beats.len() >= 2,
        "the silent client was probed {} times before being closed",
        bad_beats.len()
    );
    for (i, at) in bad_beats.iter().enumerate() {
        assert!(
            *at >= INTERVAL * (i as u32 + 1),
            "probe {} of the silent client came {at:?} after it was last heard from",
            i + 1
        );
    }
    assert!(
        closed_after >= 3 * INTERVAL && closed_after < 30 * INTERVAL,
        "the silent client was closed {closed_after:?} after it was last heard from"
    );
    assert!(
        matches!(&error, Some(Response::Status { reason, message }) if *reason == Reason::CONNECTION_BROKEN && message.contains("heartbeat")),
        "{error:?}"
    );
    // The silent client's put was backed out; the answering client's two are committed.
    good.send(1, &Request::Commit);
    assert!(matches!(good.next(), Some(Response::Status { reason, .. }) if reason == Reason::NONE));
    assert_eq!(depth(&qm), 2);
}
