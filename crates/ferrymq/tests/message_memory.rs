//! The memory a queue manager's messages hold is bounded (qm.ini
//! `TuningParameters:MaxMessageMemory`, half of the machine's memory by default). Without it one
//! client putting large messages to a few queues with room (MAXDEPTH 5000 × 4 MiB is 20 GB a
//! queue) took the process past the machine's memory, and the kernel killed it. Here, on the
//! real binary: puts of every kind (non-persistent, persistent, under syncpoint, a persistent
//! publication, over a second connection) are refused at the limit with MQRC_STORAGE_NOT_AVAILABLE and a
//! reason, the queue manager keeps serving, getting messages makes room again, and messages
//! held past a limit lowered across a restart are all loaded (the limit refuses new work; it
//! never drops what is already there). A publication's copies share one body, counted once.
//! The error log says what was refused (FMQ1016W).

mod support;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
use support::{mqsc, Home, Qm};

const MIB: usize = 1 << 20;
const LIMIT: usize = 16 * MIB;

fn md(persistent: bool) -> MessageDescriptor {
    MessageDescriptor {
        persistence: if persistent {
            Persistence::Persistent
        } else {
            Persistence::NotPersistent
        },
        ..Default::default()
    }
}

fn put(c: &Connection, h: &ObjectHandle, persistent: bool, n: u8) -> Result<(), MqError> {
    c.put(
        h,
        &md(persistent),
        &Properties::default(),
        Bytes::from(vec![n; MIB]),
        &PutOptions::default(),
    )
    .map(|_| ())
}

fn get(c: &Connection, h: &ObjectHandle) -> Result<Bytes, MqError> {
    c.get(
        h,
        &GetOptions {
            max_len: u32::MAX,
            ..Default::default()
        },
    )
    .map(|m| m.body)
}

fn assert_refused_for_memory(r: Result<(), MqError>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.reason, Reason::STORAGE_NOT_AVAILABLE, "{what}: {e}");
    assert!(
        e.message.contains("MaxMessageMemory") && e.message.contains(&LIMIT.to_string()),
        "{what}: the reason names the limit: {e}"
    );
}

fn depth(home: &Home, qm: &str, q: &str) -> usize {
    let out = mqsc(home, qm, &format!("DISPLAY QSTATUS({q}) CURDEPTH\n"));
    let at = out.find("CURDEPTH(").expect("CURDEPTH") + "CURDEPTH(".len();
    out[at..].split(')').next().unwrap().trim().parse().unwrap()
}

/// The error log once it holds `needle` (waits up to 20 s).
fn wait_for_log(qm: &Qm, needle: &str) -> String {
    let t = std::time::Instant::now();
    loop {
        let log = support::error_log(&qm.dir());
        if log.contains(needle) {
            return log;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "no {needle:?} in the error log:\n{log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn puts_past_the_message_memory_limit_are_refused_and_room_returns_as_messages_are_got() {
    let home = Home::new();
    let qm = Qm::create(&home, "QMMEMCAP", &[]);
    qm.set_ini("TuningParameters", "MaxMessageMemory", &LIMIT.to_string());
    qm.restart();
    mqsc(
        &home,
        "QMMEMCAP",
        "DEFINE QLOCAL(MEM.A) MAXDEPTH(100000)\n\
         DEFINE QLOCAL(MEM.B) MAXDEPTH(100000)\n\
         DEFINE QLOCAL(MEM.SUBQ) MAXDEPTH(100000)\n\
         DEFINE SUB(MEM.SUB) TOPICSTR('mem/t') DEST(MEM.SUBQ)\n",
    );
    let c = qm.connect();
    let a = c.open("MEM.A", open::OUTPUT | open::INPUT_SHARED).unwrap();
    let b = c.open("MEM.B", open::OUTPUT | open::INPUT_SHARED).unwrap();

    // Two queues with room for 100,000 each: the queue manager's limit is what stops them.
    let mut held = 0usize;
    let refused = loop {
        let h = if held.is_multiple_of(2) { &a } else { &b };
        match put(&c, h, false, held as u8) {
            Ok(()) => held += 1,
            Err(e) => break e,
        }
        assert!(
            held <= LIMIT / MIB,
            "{held} MiB put past a {LIMIT}-byte limit"
        );
    };
    assert_eq!(refused.reason, Reason::STORAGE_NOT_AVAILABLE, "{refused}");
    assert!(held >= 12, "only {held} MiB went in under a 16 MiB limit");

    // Every other way in is refused too, and says why.
    assert_refused_for_memory(put(&c, &a, true, 0), "a persistent put");
    let sync = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..PutOptions::default()
    };
    assert_refused_for_memory(
        c.put(
            &a,
            &md(true),
            &Properties::default(),
            Bytes::from(vec![1; MIB]),
            &sync,
        )
        .map(|_| ()),
        "a put under syncpoint",
    );
    // A persistent publication must reach its durable subscription (PMSGDLV ALLDUR), so it
    // fails whole; a non-persistent one goes to those that can take it (NPMSGDLV ALLAVAIL),
    // here none, as MQ does.
    let publish = |c: &Connection, persistent: bool, n: u8| {
        c.put1_topic(
            "",
            "mem/t",
            &md(persistent),
            &Properties::default(),
            Bytes::from(vec![n; MIB]),
            &PutOptions::default(),
        )
        .map(|_| ())
    };
    assert_refused_for_memory(publish(&c, true, 2), "a persistent publication");
    publish(&c, false, 2).expect("a non-persistent publication, delivered to none");
    let other = qm.connect();
    assert_refused_for_memory(
        other
            .put1(
                "MEM.B",
                &md(false),
                &Properties::default(),
                Bytes::from(vec![3; MIB]),
                &PutOptions::default(),
            )
            .map(|_| ()),
        "another connection's put",
    );
    assert_eq!(depth(&home, "QMMEMCAP", "MEM.SUBQ"), 0, "no copy was left");
    // The administrator is told too, within the error log's look interval (5 s).
    let log = wait_for_log(&qm, "FMQ1016W");
    assert!(
        log.contains("refused with MQRC_STORAGE_NOT_AVAILABLE")
            && log.contains(&format!("MaxMessageMemory={LIMIT}")),
        "{log}"
    );
    let before = depth(&home, "QMMEMCAP", "MEM.A") + depth(&home, "QMMEMCAP", "MEM.B");
    assert_eq!(before, held, "refused puts left nothing");

    // Getting two messages makes room for one publication and one put, whole.
    assert_eq!(get(&c, &a).unwrap().len(), MIB);
    assert_eq!(get(&c, &b).unwrap().len(), MIB);
    publish(&c, true, 4).expect("a publication once messages were got");
    assert_eq!(depth(&home, "QMMEMCAP", "MEM.SUBQ"), 1);
    put(&c, &a, true, 5).expect("a persistent put once messages were got");

    // Emptied (got, and cleared), the queues take as much again: nothing stays counted after it
    // is gone.
    for h in [&a, &b] {
        while get(&c, h).is_ok() {}
    }
    mqsc(&home, "QMMEMCAP", "CLEAR QLOCAL(MEM.SUBQ)\n");
    let mut again = 0usize;
    while put(&c, &a, true, again as u8).is_ok() {
        again += 1;
        assert!(again <= LIMIT / MIB);
    }
    assert!(
        again + 1 >= held,
        "after CLEAR only {again} MiB went in, against {held} at first"
    );
    drop((a, b));
    c.disconnect().unwrap();
    drop(other);

    // A lower limit at the next start: every persistent message is loaded all the same, new
    // puts are refused until enough are got, and each message comes back whole.
    qm.end();
    qm.set_ini(
        "TuningParameters",
        "MaxMessageMemory",
        &(4 * MIB).to_string(),
    );
    qm.restart();
    assert_eq!(depth(&home, "QMMEMCAP", "MEM.A"), again);
    wait_for_log(&qm, "the messages loaded at start hold");
    let c = qm.connect();
    let a = c.open("MEM.A", open::OUTPUT | open::INPUT_SHARED).unwrap();
    let e = put(&c, &a, false, 0).expect_err("over the lowered limit");
    assert_eq!(e.reason, Reason::STORAGE_NOT_AVAILABLE, "{e}");
    for n in 0..again {
        let body = get(&c, &a).unwrap();
        assert!(
            body.len() == MIB && body.iter().all(|&x| x == n as u8),
            "message {n} came back changed"
        );
    }
    put(&c, &a, false, 9).expect("a put once the queue is empty");
    assert_eq!(get(&c, &a).unwrap().len(), MIB);

    // A publication's copies share its body, and it is counted once: eight subscriptions take
    // three 1 MiB publications under the 4 MiB limit (counted per copy, not even one would fit).
    let mut script = String::new();
    for i in 1..=8 {
        script.push_str(&format!(
            "DEFINE QLOCAL(MEM.F{i})\nDEFINE SUB(MEM.F{i}) TOPICSTR('mem/fan') DEST(MEM.F{i})\n"
        ));
    }
    mqsc(&home, "QMMEMCAP", &script);
    let mut published = 0;
    while c
        .put1_topic(
            "",
            "mem/fan",
            &md(true),
            &Properties::default(),
            Bytes::from(vec![7; MIB]),
            &PutOptions::default(),
        )
        .is_ok()
    {
        published += 1;
        assert!(
            published <= 4,
            "{published} MiB of publications under a 4 MiB limit"
        );
    }
    assert_eq!(
        published, 3,
        "1 MiB publications to eight subscriptions under 4 MiB"
    );
    for i in 1..=8 {
        assert_eq!(depth(&home, "QMMEMCAP", &format!("MEM.F{i}")), 3);
    }
}

#[test]
fn message_properties_count_against_the_limit_like_bodies() {
    let home = Home::new();
    let qm = Qm::create(&home, "QMMEMPROPS", &[]);
    qm.set_ini(
        "TuningParameters",
        "MaxMessageMemory",
        &(4 * MIB).to_string(),
    );
    qm.restart();
    mqsc(
        &home,
        "QMMEMPROPS",
        "DEFINE QLOCAL(MEM.P) MAXDEPTH(100000)\n",
    );
    let c = qm.connect();
    let h = c.open("MEM.P", open::OUTPUT | open::INPUT_SHARED).unwrap();
    // A ten-byte body with four 60,000-byte string properties: about 240 KB a message.
    let mut props = Properties::default();
    for i in 0..4 {
        props.set(
            format!("big{i}"),
            ferrymq_types::PropertyValue::String("p".repeat(60_000)),
        );
    }
    let mut n = 0;
    let refused = loop {
        match c.put(
            &h,
            &md(false),
            &props,
            Bytes::from_static(b"0123456789"),
            &PutOptions::default(),
        ) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(
            n <= 20,
            "{n} messages of 240 KB of properties under a 4 MiB limit"
        );
    };
    assert_eq!(refused.reason, Reason::STORAGE_NOT_AVAILABLE, "{refused}");
    assert!(n >= 14, "only {n} messages of 240 KB went in under 4 MiB");
    // Each got message gives its share back.
    for _ in 0..n {
        get(&c, &h).unwrap();
    }
    for _ in 0..n {
        c.put(
            &h,
            &md(false),
            &props,
            Bytes::from_static(b"0123456789"),
            &PutOptions::default(),
        )
        .expect("as many again once they were got");
    }
}

/// A client speaking the wire protocol by hand, to leave a put half-sent.
struct Raw {
    s: std::net::TcpStream,
    dec: ferrymq_proto::FrameDecoder,
    buf: bytes::BytesMut,
    hobj: u32,
}

impl Raw {
    /// Connected, with `queue` open for output.
    fn open(port: u16, queue: &str) -> Raw {
        use ferrymq_proto::{encode_request, Hello, Request, Response};
        use std::io::Write;
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let mut raw = Raw {
            s,
            dec: ferrymq_proto::FrameDecoder::new(1 << 20),
            buf: bytes::BytesMut::new(),
            hobj: 0,
        };
        let mut b = bytes::BytesMut::new();
        encode_request(0, 0, &Request::Hello(Hello::new("memin")), &mut b);
        encode_request(
            1,
            1,
            &Request::Connect {
                qmgr: String::new(),
                user: String::new(),
                password: String::new(),
                app_name: "memin".into(),
            },
            &mut b,
        );
        encode_request(
            1,
            2,
            &Request::Open {
                name: queue.into(),
                qmgr: String::new(),
                options: open::OUTPUT,
                dynamic_name: String::new(),
            },
            &mut b,
        );
        raw.s.write_all(&b).unwrap();
        for _ in 0..2 {
            raw.next();
        }
        match raw.next() {
            (_, Response::Opened { hobj, .. }) => raw.hobj = hobj,
            other => panic!("open: {other:?}"),
        }
        raw
    }

    /// The next frame from the queue manager, with its conversation; panics at end of stream.
    fn next(&mut self) -> (u16, ferrymq_proto::Response) {
        use std::io::Read;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).unwrap() {
                return (f.conv, ferrymq_proto::parse_response(&f).unwrap());
            }
            let k = self.s.read(&mut chunk).expect("read");
            assert!(k > 0, "the queue manager closed the socket");
            self.buf.extend_from_slice(&chunk[..k]);
        }
    }

    /// A put of `len` bytes of `fill`, as one frame.
    fn put_frame(&self, len: usize, fill: u8) -> Vec<u8> {
        let mut b = bytes::BytesMut::new();
        ferrymq_proto::encode_request(
            1,
            10,
            &ferrymq_proto::Request::Put {
                hobj: self.hobj,
                opts: PutOptions::default(),
                md: md(false),
                props: Properties::default(),
                body: Bytes::from(vec![fill; len]),
            },
            &mut b,
        );
        b.to_vec()
    }

    fn send(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(&mut self.s, bytes).unwrap();
    }
}

/// A socket that has only said Hello has no conversation yet, so nobody has been authenticated
/// on it: a frame larger than the handshake's 64 KiB is refused from its header, with the
/// reason, instead of taking its length from MaxMessageMemory while it arrives. Once a
/// conversation has connected, the negotiated length applies (a Connect and what follows it
/// may still come in one write).
#[test]
fn a_large_frame_before_any_conversation_connected_is_refused_from_its_header() {
    use ferrymq_proto::{encode_request, Hello, Request, Response};
    use std::io::{Read, Write};
    let home = Home::new();
    let qm = Qm::start(&home, "QMEARLY", &[]);
    mqsc(
        &home,
        "QMEARLY",
        "ALTER QMGR MAXMSGL(104857600)\n\
         ALTER CHANNEL(SYSTEM.DEF.SVRCONN) CHLTYPE(SVRCONN) MAXMSGL(104857600)\n\
         DEFINE QLOCAL(EARLY.Q) MAXMSGL(104857600)\n",
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", qm.port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut b = bytes::BytesMut::new();
    encode_request(0, 0, &Request::Hello(Hello::new("early")), &mut b);
    s.write_all(&b).unwrap();
    // The first megabyte of a 50 MB put, with no Connect before it.
    let big = Raw {
        s: s.try_clone().unwrap(),
        dec: ferrymq_proto::FrameDecoder::new(1 << 20),
        buf: bytes::BytesMut::new(),
        hobj: 1,
    }
    .put_frame(50 * MIB, b'x');
    let _ = s.write_all(&big[..MIB]);
    let mut dec = ferrymq_proto::FrameDecoder::new(1 << 20);
    let mut got = bytes::BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut answers = Vec::new();
    loop {
        while let Some(f) = dec.decode(&mut got).unwrap() {
            answers.push(ferrymq_proto::parse_response(&f).unwrap());
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => got.extend_from_slice(&chunk[..k]),
        }
    }
    assert!(
        matches!(answers.first(), Some(Response::HelloOk { max_msg_len, .. }) if *max_msg_len == 104_857_600),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|r| matches!(r, Response::Status { reason, message }
            if *reason == Reason::MSG_TOO_BIG_FOR_CHANNEL && message.contains("Connect first"))),
        "the socket is closed with the reason: {answers:?}"
    );
    assert_eq!(depth(&home, "QMEARLY", "EARLY.Q"), 0);

    // Connected (Hello, Connect and Open in one write, as Raw sends them), a 5 MB put goes.
    let mut c = Raw::open(qm.port, "EARLY.Q");
    let f = c.put_frame(5 * MIB, b'y');
    c.send(&f);
    assert!(matches!(c.next().1, Response::PutOk { .. }));
    assert_eq!(depth(&home, "QMEARLY", "EARLY.Q"), 1);
}

#[test]
fn large_messages_still_arriving_count_against_the_limit() {
    // Before, the bytes of a large put were held by the socket reading them and counted by
    // nothing until the put: a few hundred connections each half-way through a 100 MB message
    // took the process past any limit. Now what arrives is counted from its header, and may
    // take the messages at most one largest frame (about 101 MiB) past the limit: under a
    // 64 MiB limit, five 30 MiB puts half-sent fill that, and a sixth waits.
    const BODY: usize = 30 * MIB;
    const CAP: usize = 64 * MIB;
    let home = Home::new();
    let qm = Qm::create(&home, "QMMEMIN", &[]);
    qm.set_ini("TuningParameters", "MaxMessageMemory", &CAP.to_string());
    qm.restart();
    mqsc(
        &home,
        "QMMEMIN",
        "ALTER QMGR MAXMSGL(104857600)\n\
         ALTER CHANNEL(SYSTEM.DEF.SVRCONN) CHLTYPE(SVRCONN) MAXMSGL(104857600)\n\
         DEFINE QLOCAL(MEM.IN) MAXDEPTH(1000) MAXMSGL(104857600)\n",
    );
    let ms = std::time::Duration::from_millis;
    let put_ok = |r: &ferrymq_proto::Response| matches!(r, ferrymq_proto::Response::PutOk { .. });
    let refused = |r: &ferrymq_proto::Response| {
        matches!(r, ferrymq_proto::Response::Status { reason, message }
            if *reason == Reason::STORAGE_NOT_AVAILABLE && message.contains("MaxMessageMemory"))
    };
    // Each connection's put carries its own letter.
    let start_put = |fill: u8| {
        let c = Raw::open(qm.port, "MEM.IN");
        let f = c.put_frame(BODY, fill);
        (c, f)
    };

    let mut half_sent: Vec<(Raw, Vec<u8>)> = Vec::new();
    for fill in b'a'..=b'e' {
        let (mut c, f) = start_put(fill);
        c.send(&f[..MIB]);
        half_sent.push((c, f));
        std::thread::sleep(ms(50));
    }
    // F's first megabyte finds no room, and the rest of it, sent, is not read or answered.
    let (mut f_conn, f_frame) = start_put(b'f');
    f_conn.send(&f_frame[..MIB]);
    let mut socket = f_conn.s.try_clone().unwrap();
    let rest = f_frame[MIB..].to_vec();
    let f_writer = std::thread::spawn(move || std::io::Write::write_all(&mut socket, &rest));
    std::thread::sleep(ms(1500));
    f_conn.s.set_read_timeout(Some(ms(300))).unwrap();
    let answer = f_conn.s.peek(&mut [0u8; 1]);
    if answer.is_ok() {
        f_conn.s.set_read_timeout(Some(ms(30_000))).unwrap();
        panic!(
            "F was answered while five arrivals held the room: {:?}",
            f_conn.next()
        );
    }
    assert!(
        answer.as_ref().is_err_and(|e| matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "F was answered while five arrivals held the room: {answer:?}"
    );
    f_conn.s.set_read_timeout(Some(ms(30_000))).unwrap();

    // A goes away half-way: its room comes back, and F is read. Its put is then refused like
    // any other past the limit (the four arrivals still count), and its connection stays.
    let t = std::time::Instant::now();
    drop(half_sent.remove(0));
    let (conv, r) = f_conn.next();
    assert!(conv == 1 && refused(&r), "F once A's room came back: {r:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "F waited {:?} more: A's room did not come back when its socket went",
        t.elapsed()
    );
    f_writer.join().unwrap().expect("F's rest was read");

    // G takes the last room; H finds none, waits, and is told why and closed.
    let (mut g_conn, g_frame) = start_put(b'g');
    g_conn.send(&g_frame[..MIB]);
    std::thread::sleep(ms(100));
    let (mut h_conn, h_frame) = start_put(b'h');
    let t = std::time::Instant::now();
    h_conn.send(&h_frame[..MIB]);
    let (conv, r) = h_conn.next();
    assert!(conv == 0 && refused(&r), "H's farewell: {r:?}");
    assert!(
        t.elapsed() >= std::time::Duration::from_secs(3),
        "H was closed after {:?}, without waiting for room",
        t.elapsed()
    );
    drop((h_conn, h_frame));

    // C, D and E go away half-way; B and G then finish, and both fit under the limit.
    let (mut b_conn, b_frame) = half_sent.remove(0);
    drop(half_sent);
    std::thread::sleep(ms(200));
    for (c, f) in [(&mut b_conn, &b_frame), (&mut g_conn, &g_frame)] {
        c.send(&f[MIB..]);
        let (_, r) = c.next();
        assert!(put_ok(&r), "{r:?}");
    }
    assert_eq!(
        depth(&home, "QMMEMIN", "MEM.IN"),
        2,
        "B and G, nothing else"
    );
    // F's connection, refused before, puts again once the messages were got.
    let c = qm.connect();
    let h = c.open("MEM.IN", open::INPUT_SHARED).unwrap();
    let mut fills: Vec<u8> = (0..2)
        .map(|_| {
            let body = get(&c, &h).unwrap();
            assert!(body.len() == BODY && body.iter().all(|&x| x == body[0]));
            body[0]
        })
        .collect();
    fills.sort();
    assert_eq!(fills, vec![b'b', b'g'], "each message whole");
    f_conn.send(&f_frame);
    let (_, r) = f_conn.next();
    assert!(put_ok(&r), "F's put once there was room: {r:?}");
    assert_eq!(get(&c, &h).unwrap(), Bytes::from(vec![b'f'; BODY]));
    wait_for_log(&qm, "FMQ1016W");
}
