//! Message channels between two queue managers on this machine, through the real binary: a put
//! to a remote queue on QM1 travels over a sender/receiver channel pair and lands on QM2's queue
//! with its descriptor; a message for a queue QM2 does not have goes to QM2's dead-letter queue
//! with the reason; a stopped channel keeps its messages on the transmission queue; a sender
//! whose receiver is down retries and delivers once it is back.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::dlh::DeadLetterHeader;
use ferrymq_types::options::{open, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue};
use support::chan::depth;
use support::{mqsc, Home, Qm};

const WAIT: Duration = Duration::from_secs(30);

/// QM1 sends to QM2 over channel QM1.TO.QM2: QM2 has the receiver and the queue ORDERS.IN; QM1
/// the transmission queue QM2, the remote queue ORDERS and the sender (retrying every second).
fn pair<'h>(home: &'h Home) -> (Qm<'h>, Qm<'h>) {
    let qm2 = Qm::start(home, "QM2", &[]);
    mqsc(
        home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR) TRPTYPE(TCP)\n",
    );
    let qm1 = Qm::start(home, "QM1", &[]);
    sender_to(home, &qm1, qm2.port);
    (qm1, qm2)
}

fn sender_to(home: &Home, qm1: &Qm, port: u16) {
    mqsc(
        home,
        &qm1.name,
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE QREMOTE(NOWHERE) RNAME(NO.SUCH.QUEUE) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) TRPTYPE(TCP) CONNAME('127.0.0.1({port})') XMITQ(QM2) BATCHSZ(10) SHORTTMR(1)\n\
             START CHANNEL(QM1.TO.QM2)\n"
        ),
    );
}

fn get_wait(c: &Connection, q: &str) -> ferrymq_client::Message {
    let h = c.open(q, open::INPUT_SHARED).expect("open for input");
    let m = c
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(WAIT.as_millis() as u64),
                ..GetOptions::any()
            },
        )
        .unwrap_or_else(|e| panic!("no message arrived on {q} within {WAIT:?}: {e}"));
    c.close(&h, 0).unwrap();
    m
}

fn put_to(c: &Connection, q: &str, body: &str) -> MessageDescriptor {
    let h = c.open(q, open::OUTPUT).expect("open the remote queue");
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    c.put_commit(
        &h,
        &md,
        &Properties::default(),
        Bytes::from(body.to_string()),
    )
    .expect("put");
    c.close(&h, 0).unwrap();
    md
}

/// Polls DISPLAY CHSTATUS until the channel shows `status` (bounded).
fn wait_status(home: &Home, qm: &str, channel: &str, status: &str) -> String {
    let t = Instant::now();
    loop {
        let text = mqsc(home, qm, &format!("DISPLAY CHSTATUS({channel})\n"));
        if text.contains(&format!("STATUS({status})")) {
            return text;
        }
        assert!(
            t.elapsed() < WAIT,
            "channel {channel} on {qm} did not reach {status}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_remote_put_travels_over_the_channel_pair_with_its_descriptor() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home);
    let c1 = qm1.connect_bindings();
    let h = c1.open("ORDERS", open::OUTPUT).unwrap();
    let mut md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        priority: 7,
        correl_id: [5; 24],
        reply_to_q: "ORDER.REPLIES".into(),
        reply_to_qmgr: "QM1".into(),
        ..Default::default()
    };
    let props = Properties(vec![(
        "region".into(),
        PropertyValue::String("north".into()),
    )]);
    c1.put_md(
        &h,
        &mut md,
        &props,
        Bytes::from_static(b"one order"),
        &PutOptions::default(),
    )
    .unwrap();
    let put = md;
    let c2 = qm2.connect_bindings();
    let got = get_wait(&c2, "ORDERS.IN");
    assert_eq!(&got.body[..], b"one order");
    assert_eq!(got.md.msg_id, put.msg_id, "the MsgId travels unchanged");
    assert_eq!(got.md.correl_id, [5; 24]);
    assert_eq!(got.md.priority, 7);
    assert_eq!(got.md.persistence, Persistence::Persistent);
    assert_eq!(got.md.format, "MQSTR");
    assert_eq!(got.md.reply_to_q, "ORDER.REPLIES");
    assert_eq!(got.md.reply_to_qmgr, "QM1");
    assert!(!got.md.user_id.is_empty(), "the identity context is QM1's");
    assert!(got.md.put_time_ms > 0, "the put time is QM1's");
    assert_eq!(got.props, props);
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        0,
        "the transmission queue is emptied"
    );
    let s1 = wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
    assert!(
        s1.contains("CHLTYPE(SDR)") && s1.contains("MSGS(1)"),
        "{s1}"
    );
    let s2 = wait_status(&home, "QM2", "QM1.TO.QM2", "RUNNING");
    assert!(
        s2.contains("CHLTYPE(RCVR)") && s2.contains("MSGS(1)"),
        "{s2}"
    );
}

#[test]
fn a_message_for_a_queue_the_receiver_lacks_goes_to_its_dead_letter_queue_with_the_reason() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home);
    let c1 = qm1.connect_bindings();
    put_to(&c1, "NOWHERE", "lost parcel");
    put_to(&c1, "ORDERS", "after it");
    let c2 = qm2.connect_bindings();
    let dead = get_wait(&c2, "SYSTEM.DEAD.LETTER.QUEUE");
    assert_eq!(dead.md.format, "MQDEAD");
    let (dlh, data) = DeadLetterHeader::parse(&dead.body).expect("a dead-letter header");
    assert_eq!(dlh.reason, 2085, "MQRC_UNKNOWN_OBJECT_NAME");
    assert_eq!(dlh.dest_q_name, "NO.SUCH.QUEUE");
    assert_eq!(dlh.dest_q_mgr_name, "QM2");
    assert_eq!(dlh.format, "MQSTR");
    assert_eq!(data, b"lost parcel");
    // The channel carried on with the next message.
    assert_eq!(&get_wait(&c2, "ORDERS.IN").body[..], b"after it");
}

#[test]
fn a_stopped_channel_keeps_its_messages_and_a_sender_retries_until_the_receiver_returns() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home);
    wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "QM1.TO.QM2", "STOPPED");
    let c1 = qm1.connect_bindings();
    for i in 0..3 {
        put_to(&c1, "ORDERS", &format!("kept {i}"));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        3,
        "a stopped channel moves nothing"
    );
    assert_eq!(depth(&home, "QM2", "ORDERS.IN"), 0);
    // It stays stopped when its queue manager restarts.
    drop(c1);
    qm1.end();
    qm1.restart();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(depth(&home, "QM1", "QM2"), 3, "still stopped after strmqm");
    let c1 = qm1.connect_bindings();

    // The receiver's queue manager goes away; the sender, started, retries.
    qm2.end();
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "QM1.TO.QM2", "RETRYING");
    put_to(&c1, "ORDERS", "kept 3");
    assert_eq!(depth(&home, "QM1", "QM2"), 4);
    qm2.restart();
    let c2 = qm2.connect_bindings();
    for i in 0..4 {
        assert_eq!(get_wait(&c2, "ORDERS.IN").body, format!("kept {i}"));
    }
    wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
    assert_eq!(depth(&home, "QM1", "QM2"), 0);
}

#[test]
fn a_channel_the_receiver_does_not_define_is_refused_and_retried() {
    let home = Home::new();
    let qm2 = Qm::start(&home, "QM2", &[]);
    mqsc(&home, "QM2", "DEFINE QLOCAL(ORDERS.IN)\n");
    let qm1 = Qm::start(&home, "QM1", &[]);
    sender_to(&home, &qm1, qm2.port);
    wait_status(&home, "QM1", "QM1.TO.QM2", "RETRYING");
    let log = support::error_log(&qm1.dir());
    assert!(
        log.contains("2540") || log.contains("UNKNOWN_CHANNEL_NAME"),
        "{log}"
    );
    mqsc(&home, "QM2", "DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)\n");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", "now it goes");
    let c2 = qm2.connect_bindings();
    assert_eq!(&get_wait(&c2, "ORDERS.IN").body[..], b"now it goes");
}

#[test]
fn a_link_cut_mid_batch_puts_the_channel_in_retrying_and_it_resumes_by_itself() {
    let home = Home::new();
    let qm2 = Qm::start(&home, "QM2", &[]);
    mqsc(
        &home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)\n",
    );
    let qm1 = Qm::start(&home, "QM1", &[]);
    let port = support::free_port();
    let relay = support::relay(port, qm2.port, 10);
    sender_to(&home, &qm1, port);
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "QM1.TO.QM2", "STOPPED");
    let c1 = qm1.connect_bindings();
    const N: usize = 400;
    for i in 0..N {
        put_to(&c1, "ORDERS", &i.to_string());
    }
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    // Cut the link while batches are flowing: some have arrived, most have not.
    let t = Instant::now();
    while depth(&home, "QM2", "ORDERS.IN") == 0 {
        assert!(t.elapsed() < WAIT, "nothing arrived through the relay");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(relay);
    let before = depth(&home, "QM2", "ORDERS.IN") as usize;
    assert!(
        before < N,
        "everything arrived before the cut: the test proves nothing"
    );
    wait_status(&home, "QM1", "QM1.TO.QM2", "RETRYING");
    let _relay = support::relay(port, qm2.port, 10);
    let t = Instant::now();
    while depth(&home, "QM1", "QM2") != 0 {
        assert!(t.elapsed() < WAIT, "the channel did not resume by itself");
        std::thread::sleep(Duration::from_millis(20));
    }
    let c2 = qm2.connect_bindings();
    let h = c2.open("ORDERS.IN", open::INPUT_EXCLUSIVE).unwrap();
    let mut got = Vec::new();
    while let Ok(m) = c2.get(&h, &GetOptions::any()) {
        got.push(String::from_utf8(m.body.to_vec()).unwrap());
    }
    let want: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert_eq!(got, want, "every message once, in order");
    wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
}

#[test]
fn a_request_and_its_reply_cross_the_two_queue_managers_through_a_reply_to_alias() {
    let home = Home::new();
    let qm1 = Qm::start(&home, "QM1", &[]);
    let qm2 = Qm::start(&home, "QM2", &[]);
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(REPLIES)\n\
             DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(REQUESTS) RNAME(REQUESTS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE QREMOTE(MY.REPLIES) RNAME(REPLIES) RQMNAME(QM1)\n\
             DEFINE CHANNEL(QM2.TO.QM1) CHLTYPE(RCVR)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1({})') XMITQ(QM2) SHORTTMR(1)\n\
             START CHANNEL(QM1.TO.QM2)\n",
            qm2.port
        ),
    );
    mqsc(
        &home,
        "QM2",
        &format!(
            "DEFINE QLOCAL(REQUESTS.IN)\n\
             DEFINE QLOCAL(QM1) USAGE(XMITQ)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)\n\
             DEFINE CHANNEL(QM2.TO.QM1) CHLTYPE(SDR) CONNAME('127.0.0.1({})') XMITQ(QM1) SHORTTMR(1)\n\
             START CHANNEL(QM2.TO.QM1)\n",
            qm1.port
        ),
    );
    // The requester names its reply-to alias; QM1 resolves it at put.
    let c1 = qm1.connect_bindings();
    let h = c1.open("REQUESTS", open::OUTPUT).unwrap();
    let mut request = MessageDescriptor {
        persistence: Persistence::Persistent,
        msg_type: 1,
        format: "MQSTR".into(),
        reply_to_q: "MY.REPLIES".into(),
        ..Default::default()
    };
    c1.put_md(
        &h,
        &mut request,
        &Properties::default(),
        Bytes::from_static(b"price of 7 apples?"),
        &PutOptions::default(),
    )
    .unwrap();

    // The server on QM2 answers where the request says, with the request's MsgId as CorrelId.
    let c2 = qm2.connect_bindings();
    let req = get_wait(&c2, "REQUESTS.IN");
    assert_eq!(req.md.reply_to_q, "REPLIES");
    assert_eq!(req.md.reply_to_qmgr, "QM1");
    let out = c2
        .open_qmgr(&req.md.reply_to_q, &req.md.reply_to_qmgr, open::OUTPUT)
        .expect("the reply-to queue resolves through the transmission queue QM1");
    let reply = MessageDescriptor {
        persistence: Persistence::Persistent,
        msg_type: 2,
        format: "MQSTR".into(),
        correl_id: req.md.msg_id,
        ..Default::default()
    };
    c2.put_commit(
        &out,
        &reply,
        &Properties::default(),
        Bytes::from_static(b"14"),
    )
    .unwrap();

    let got = get_wait(&c1, "REPLIES");
    assert_eq!(&got.body[..], b"14");
    assert_eq!(got.md.correl_id, request.msg_id, "the reply correlates");
}

fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn channel_status_and_metrics_show_what_the_channel_moved() {
    let home = Home::new();
    let qm2 = Qm::start(&home, "QM2", &[]);
    mqsc(
        &home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)\n",
    );
    let qm1 = Qm::create(&home, "QM1", &[]);
    let metrics = support::free_port();
    qm1.set_ini("Metrics", "Port", &metrics.to_string());
    qm1.restart();
    sender_to(&home, &qm1, qm2.port);
    let c1 = qm1.connect_bindings();
    for i in 0..3 {
        put_to(&c1, "ORDERS", &format!("m{i}"));
    }
    let c2 = qm2.connect_bindings();
    for _ in 0..3 {
        get_wait(&c2, "ORDERS.IN");
    }
    // The sender counts a batch once it is confirmed, just after the receiver committed it.
    let t = Instant::now();
    let text = loop {
        let text = wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
        if text.contains("MSGS(3)") || t.elapsed() > WAIT {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for want in [
        "CHLTYPE(SDR)",
        "XMITQ(QM2)",
        "INDOUBT(NO)",
        "MSGS(3)",
        "LSTSEQNO(3)",
        &format!("CONNAME(127.0.0.1({}))", qm2.port),
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    assert!(!text.contains("BYTSSENT(0)"), "{text}");
    let rcvr = wait_status(&home, "QM2", "QM1.TO.QM2", "RUNNING");
    assert!(
        rcvr.contains("CHLTYPE(RCVR)") && rcvr.contains("LSTSEQNO(3)"),
        "{rcvr}"
    );
    let m = scrape(metrics);
    for want in [
        "ferrymq_channel_messages_total{qmgr=\"QM1\",channel=\"QM1.TO.QM2\",type=\"SDR\"} 3",
        "ferrymq_channel_state{qmgr=\"QM1\",channel=\"QM1.TO.QM2\",type=\"SDR\"} 3",
        "ferrymq_channel_xmitq_depth{qmgr=\"QM1\",channel=\"QM1.TO.QM2\"} 0",
    ] {
        assert!(m.contains(want), "{want} missing:\n{m}");
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn a_batch_left_in_doubt_by_a_crash_is_resolved_by_hand_and_sent_again_once() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home);
    wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
    // The receiver freezes: the sender sends a batch, logs it in doubt and waits for the
    // confirmation that never comes; then both queue managers die.
    let pid2 = qm2.pid().unwrap();
    signal(pid2, "-STOP");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", "in doubt");
    drop(c1);
    wait_status(&home, "QM1", "QM1.TO.QM2", "RUNNING");
    let t = Instant::now();
    while !mqsc(&home, "QM1", "DISPLAY CHSTATUS(QM1.TO.QM2)\n").contains("INDOUBT(YES)") {
        assert!(t.elapsed() < WAIT, "the batch never went in doubt");
        std::thread::sleep(Duration::from_millis(20));
    }
    qm1.kill9();
    support::kill9_pid(pid2);
    // QM1 restarts alone: its channel restarts, cannot reach QM2, and keeps the doubt.
    qm1.restart();
    let text = wait_status(&home, "QM1", "QM1.TO.QM2", "RETRYING");
    assert!(text.contains("INDOUBT(YES)"), "{text}");
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "QM1.TO.QM2", "STOPPED");
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        1,
        "the message in doubt is still held"
    );
    let out = mqsc(
        &home,
        "QM1",
        "RESOLVE CHANNEL(QM1.TO.QM2) ACTION(BACKOUT)\nRESOLVE CHANNEL(QM1.TO.QM2) ACTION(COMMIT)\n",
    );
    assert!(out.contains("was backed out"), "{out}");
    assert!(out.contains("no batch in doubt"), "{out}");
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        1,
        "backed out: it stays to be sent again"
    );
    qm2.restart();
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    let c2 = qm2.connect_bindings();
    assert_eq!(&get_wait(&c2, "ORDERS.IN").body[..], b"in doubt");
    let t = Instant::now();
    while depth(&home, "QM1", "QM2") != 0 {
        assert!(t.elapsed() < WAIT, "the transmission queue did not empty");
        std::thread::sleep(Duration::from_millis(20));
    }
    let h = c2.open("ORDERS.IN", open::INPUT_SHARED).unwrap();
    assert!(c2.get(&h, &GetOptions::any()).is_err(), "sent once only");
    // RESOLVE is for the sending end.
    let out = home.run_with_input(
        &["runmqsc", "QM2"],
        "RESOLVE CHANNEL(QM1.TO.QM2) ACTION(COMMIT)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("RCVR channel"), "{text}");
}

#[test]
fn a_message_larger_than_the_channel_carries_goes_to_the_senders_dead_letter_queue() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home);
    mqsc(
        &home,
        "QM1",
        "STOP CHANNEL(QM1.TO.QM2)\nALTER CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) MAXMSGL(2000)\n",
    );
    wait_status(&home, "QM1", "QM1.TO.QM2", "STOPPED");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", &"x".repeat(5000));
    put_to(&c1, "ORDERS", "small");
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    let c2 = qm2.connect_bindings();
    assert_eq!(&get_wait(&c2, "ORDERS.IN").body[..], b"small");
    let dead = get_wait(&c1, "SYSTEM.DEAD.LETTER.QUEUE");
    let (dlh, rest) = DeadLetterHeader::parse(&dead.body).expect("a dead-letter header");
    assert_eq!(dlh.reason, 2218, "MQRC_MSG_TOO_BIG_FOR_CHANNEL");
    assert_eq!(
        (dlh.dest_q_name.as_str(), dlh.dest_q_mgr_name.as_str()),
        ("ORDERS.IN", "QM2")
    );
    let (xqh, data) = ferrymq_types::xqh::TransmissionHeader::parse(rest).expect("its XQH");
    assert_eq!(xqh.remote_q, "ORDERS.IN");
    assert_eq!(data.len(), 5000);
    assert_eq!(depth(&home, "QM1", "QM2"), 0);
}

/// QM1 sends to QM2 over QM1.TO.QM2 with `extra` attributes on the sender; both queue managers
/// serve metrics on the returned ports.
fn pair_with<'h>(home: &'h Home, extra: &str) -> (Qm<'h>, Qm<'h>, u16, u16) {
    let qm2 = Qm::create(home, "QM2", &[]);
    let m2 = support::free_port();
    qm2.set_ini("Metrics", "Port", &m2.to_string());
    qm2.restart();
    mqsc(
        home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR)\n",
    );
    let qm1 = Qm::create(home, "QM1", &[]);
    let m1 = support::free_port();
    qm1.set_ini("Metrics", "Port", &m1.to_string());
    qm1.restart();
    let port = qm2.port;
    mqsc(
        home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1({port})') XMITQ(QM2) SHORTTMR(1) {extra}\n\
             START CHANNEL(QM1.TO.QM2)\n"
        ),
    );
    wait_status(home, "QM1", "QM1.TO.QM2", "RUNNING");
    (qm1, qm2, m1, m2)
}

/// Polls the sender's status until it counts `msgs` messages; returns the status text.
fn wait_msgs(home: &Home, msgs: u32) -> String {
    let t = Instant::now();
    loop {
        let text = wait_status(home, "QM1", "QM1.TO.QM2", "RUNNING");
        if text.contains(&format!("MSGS({msgs})")) {
            return text;
        }
        assert!(
            t.elapsed() < WAIT,
            "the sender never counted {msgs}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn durable_position(metrics: u16) -> u64 {
    let m = scrape(metrics);
    let line = m
        .lines()
        .find(|l| l.starts_with("ferrymq_log_durable_position"))
        .unwrap_or_else(|| panic!("no durable position in:\n{m}"));
    line.rsplit(' ')
        .next()
        .unwrap()
        .trim()
        .parse::<f64>()
        .unwrap() as u64
}

/// The durable position once it stops moving (what was appended earlier has been forced).
fn settled_position(metrics: u16) -> u64 {
    let t = Instant::now();
    let mut last = durable_position(metrics);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = durable_position(metrics);
        if now == last {
            return now;
        }
        assert!(t.elapsed() < WAIT, "the log never settled");
        last = now;
    }
}

#[test]
fn non_persistent_messages_on_a_fast_channel_write_nothing_to_either_recovery_log() {
    let home = Home::new();
    let (qm1, qm2, m1, m2) = pair_with(&home, "BATCHSZ(1) NPMSPEED(FAST)");
    let c1 = qm1.connect_bindings();
    let c2 = qm2.connect_bindings();
    // A persistent message first: the channel is past its first batch at both ends.
    put_to(&c1, "ORDERS", "first");
    get_wait(&c2, "ORDERS.IN");
    wait_msgs(&home, 1);
    let (before1, before2) = (settled_position(m1), settled_position(m2));
    let h = c1
        .open("ORDERS", open::OUTPUT)
        .expect("open the remote queue");
    let md = MessageDescriptor {
        persistence: Persistence::NotPersistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    for i in 0..5 {
        c1.put(
            &h,
            &md,
            &Properties::default(),
            Bytes::from(format!("np{i}")),
            &PutOptions::default(),
        )
        .expect("put");
    }
    c1.close(&h, 0).unwrap();
    for i in 0..5 {
        let m = get_wait(&c2, "ORDERS.IN");
        assert_eq!(m.body.as_ref(), format!("np{i}").as_bytes());
    }
    wait_msgs(&home, 6);
    assert_eq!(
        (settled_position(m1), settled_position(m2)),
        (before1, before2),
        "non-persistent messages on a FAST channel moved a recovery log (QM1, QM2)"
    );
}

#[test]
fn batchint_keeps_a_batch_open_for_messages_that_arrive_within_it() {
    let home = Home::new();
    let (qm1, qm2, _, _) = pair_with(&home, "BATCHSZ(10) BATCHINT(8000)");
    let c1 = qm1.connect_bindings();
    for i in 0..3 {
        put_to(&c1, "ORDERS", &format!("m{i}"));
        std::thread::sleep(Duration::from_millis(300));
    }
    let c2 = qm2.connect_bindings();
    for _ in 0..3 {
        get_wait(&c2, "ORDERS.IN");
    }
    let text = wait_msgs(&home, 3);
    assert!(
        text.contains("BATCHES(1)"),
        "three messages within BATCHINT were not one batch:\n{text}"
    );
}

/// Context switches of every thread of a process so far: how often it woke up.
fn wakeups(pid: u32) -> u64 {
    let mut n = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads") {
        let Ok(text) = std::fs::read_to_string(t.unwrap().path().join("status")) else {
            continue; // a thread that ended meanwhile
        };
        n += text
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

#[test]
fn an_idle_sender_does_not_wake_up_until_a_message_arrives() {
    let home = Home::new();
    let (qm1, qm2, _, _) = pair_with(&home, "BATCHSZ(10)");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", "first");
    let c2 = qm2.connect_bindings();
    get_wait(&c2, "ORDERS.IN");
    wait_msgs(&home, 1);
    // The sending queue manager, idle, against the receiving one, idle too: a sender that polls
    // its transmission queue wakes hundreds of times a second.
    let (pid1, pid2) = (qm1.pid().unwrap(), qm2.pid().unwrap());
    let (a1, a2) = (wakeups(pid1), wakeups(pid2));
    std::thread::sleep(Duration::from_secs(2));
    let (d1, d2) = (wakeups(pid1) - a1, wakeups(pid2) - a2);
    assert!(
        d1 < d2 + 100,
        "the idle sender's queue manager woke {d1} times in 2 s, the idle receiver's {d2}"
    );
    // And it still wakes for a message.
    put_to(&c1, "ORDERS", "second");
    assert_eq!(get_wait(&c2, "ORDERS.IN").body.as_ref(), b"second");
}
