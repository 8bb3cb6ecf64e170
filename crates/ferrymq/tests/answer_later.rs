//! The request flag LATER (protocol version 3), over real TCP against the real binary: the answer
//! to a request sent with it waits until the answer to a later request leaves, and goes in the
//! same write; without the flag it leaves at once. What a pipelined put, commit and get of a
//! reply saves: one write (and one wake-up of the client) per round trip.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_proto::{
    encode_request, kind, parse_response, FrameDecoder, Hello, Request, Response, FLAG_LATER,
    PROTOCOL_VERSION_ANSWER_LATER,
};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use support::{Home, Qm};

const QUEUE: &str = "LATER.Q";
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// A raw client socket after Hello, Connect and one Open for output and input.
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
        s.set_nodelay(true).unwrap();
        let mut c = Raw {
            s,
            buf: BytesMut::new(),
            dec: FrameDecoder::new(1 << 20),
            hobj: 0,
            next_req: 1,
        };
        c.write(&[(0, Request::Hello(Hello::new("later-test")), false)]);
        match c.next(Duration::from_secs(30)) {
            Some(Response::HelloOk { version, .. }) => assert!(
                version >= PROTOCOL_VERSION_ANSWER_LATER,
                "the queue manager negotiated version {version}"
            ),
            other => panic!("hello: {other:?}"),
        }
        let connect = Request::Connect {
            qmgr: String::new(),
            user: String::new(),
            password: String::new(),
            app_name: "later-test".into(),
        };
        c.write(&[(1, connect, false)]);
        assert!(matches!(
            c.next(Duration::from_secs(30)),
            Some(Response::Status { reason, .. }) if reason == Reason::NONE
        ));
        let open = Request::Open {
            name: QUEUE.into(),
            qmgr: String::new(),
            options: open::OUTPUT | open::INPUT_SHARED,
            dynamic_name: String::new(),
        };
        c.write(&[(1, open, false)]);
        match c.next(Duration::from_secs(30)) {
            Some(Response::Opened { hobj, .. }) => c.hobj = hobj,
            other => panic!("open: {other:?}"),
        }
        c
    }

    /// Writes the requests in one write, each with LATER when its flag says so.
    fn write(&mut self, reqs: &[(u16, Request, bool)]) {
        let mut b = BytesMut::new();
        for (conv, r, later) in reqs {
            let start = b.len();
            encode_request(*conv, self.next_req, r, &mut b);
            if *later {
                b[start + 5] |= FLAG_LATER;
            }
            self.next_req += 1;
        }
        self.s.write_all(&b).unwrap();
    }

    fn put(&self, correl: u8) -> Request {
        Request::Put {
            hobj: self.hobj,
            opts: PutOptions {
                syncpoint: Syncpoint::Yes,
                ..Default::default()
            },
            md: MessageDescriptor {
                correl_id: [correl; 24],
                ..Default::default()
            },
            props: Properties::default(),
            body: Bytes::from_static(b"later"),
        }
    }

    fn get(&self, correl: u8, wait_ms: u64) -> Request {
        Request::Get {
            hobj: self.hobj,
            opts: GetOptions {
                wait: Wait::Ms(wait_ms),
                match_correl_id: Some([correl; 24]),
                ..GetOptions::any()
            },
        }
    }

    /// Expects the next answer (within 10 s) to be a `PutOk`.
    fn put_ok(&mut self) {
        let r = self.next(ANSWER_WITHIN);
        assert!(matches!(r, Some(Response::PutOk { .. })), "a put: {r:?}");
    }

    /// Expects the next answer (within 10 s) to be a `Status` with `want`.
    fn status(&mut self, want: Reason) {
        let r = self.next(ANSWER_WITHIN);
        assert!(
            matches!(&r, Some(Response::Status { reason, .. }) if *reason == want),
            "want {want:?}: {r:?}"
        );
    }

    /// Expects the next answer (within 10 s) to be a message with CorrelId `correl`; its body.
    fn message(&mut self, correl: u8) -> Bytes {
        match self.next(ANSWER_WITHIN) {
            Some(Response::Message { md, body, .. }) => {
                assert_eq!(md.correl_id, [correl; 24]);
                body
            }
            other => panic!("message {correl}: {other:?}"),
        }
    }

    /// The next response within `within`, or None if none came.
    fn next(&mut self, within: Duration) -> Option<Response> {
        let end = Instant::now() + within;
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).unwrap() {
                assert_ne!(f.kind, kind::HEARTBEAT, "a heartbeat in a short test");
                return Some(parse_response(&f).unwrap());
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.s.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) => panic!("the queue manager closed the socket"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    }
}

/// Puts `body` with CorrelId `correl` through another client's connection.
fn put_correl(other: &Connection, h: &ObjectHandle, correl: u8, body: Bytes) {
    let md = MessageDescriptor {
        correl_id: [correl; 24],
        ..Default::default()
    };
    other
        .put(h, &md, &Properties::default(), body, &PutOptions::default())
        .unwrap();
}

#[test]
fn an_answer_sent_later_leaves_with_the_next_one_and_without_the_flag_at_once() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMLATER", &[]);
    support::mqsc(&home, "QMLATER", &format!("DEFINE QLOCAL({QUEUE})\n"));
    let mut c = Raw::open(qm.port);
    let other = qm.connect();
    let h = other.open(QUEUE, open::OUTPUT).unwrap();
    let reply = |correl: u8| put_correl(&other, &h, correl, Bytes::from_static(b"reply"));

    // Without the flag: the put and the commit are answered at once, while the get waits.
    let (put, get) = (c.put(1), c.get(2, 20_000));
    c.write(&[
        (1, put, false),
        (1, Request::Commit, false),
        (1, get, false),
    ]);
    c.put_ok();
    c.status(Reason::NONE);
    reply(2);
    c.message(2);

    // With it on the put and the commit: nothing comes while the get waits, then all three
    // answers, in order, once the reply is put.
    let (put, get) = (c.put(3), c.get(4, 20_000));
    c.write(&[(1, put, true), (1, Request::Commit, true), (1, get, false)]);
    let early = c.next(Duration::from_millis(700));
    assert!(early.is_none(), "answered before the get: {early:?}");
    reply(4);
    c.put_ok();
    c.status(Reason::NONE);
    c.message(4);

    // A get whose wait runs out releases them too, with its own answer.
    let (put, get) = (c.put(5), c.get(6, 500));
    let sent = Instant::now();
    c.write(&[(1, put, true), (1, get, false)]);
    c.put_ok();
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(400),
        "the put was answered {waited:?} after it was sent, before the get's wait ran out"
    );
    c.status(Reason::NO_MSG_AVAILABLE);

    // The messages put under the flag were committed like any other: the two the client put
    // (correl 1 was committed, 3 too; 5's unit of work is still open) and nothing lost.
    let (get1, get3) = (c.get(1, 0), c.get(3, 0));
    c.write(&[(1, get1, true), (1, get3, false)]);
    c.message(1);
    c.message(3);
}

/// Answers sent later that fill the socket's queue past the pause bound leave at once: the queue
/// manager stops reading the socket there, so the request that would release them is not read
/// until they have left (waiting for it would leave both sides waiting on each other).
#[test]
fn answers_sent_later_that_fill_the_queue_leave_without_a_release() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMLATER2", &[]);
    support::mqsc(&home, "QMLATER2", &format!("DEFINE QLOCAL({QUEUE})\n"));
    let mut c = Raw::open(qm.port);
    let other = qm.connect();
    let h = other.open(QUEUE, open::OUTPUT).unwrap();
    // Three 600 KB messages: their answers pass the 1 MiB pause bound.
    for n in 0..3u8 {
        put_correl(&other, &h, 10 + n, Bytes::from(vec![n; 600 * 1024]));
    }
    let mut reqs: Vec<_> = (0..3u8).map(|n| (1, c.get(10 + n, 0), true)).collect();
    reqs.push((1, Request::Commit, false));
    c.write(&reqs);
    for n in 0..3u8 {
        assert_eq!(c.message(10 + n), vec![n; 600 * 1024]);
    }
    c.status(Reason::NONE);
}
