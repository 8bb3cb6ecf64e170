//! The MQI behaviours around a message's journey that MQ programs rely on, against the real
//! binary: the identity and origin context the queue manager fills in (and when a program may set
//! or pass it), report messages (COA, COD, expiration, exception) and their ids, their atomicity
//! with their event across a SIGKILL, the dead-letter header on what the queue manager
//! dead-letters, the BackoutRequeue switch, and the `browse`, `req` and `runmqdlq` commands.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::dlh::DeadLetterHeader;
use ferrymq_client::{ConnectOptions, Message, ObjectHandle};
use ferrymq_types::descriptor::msg_type;
use ferrymq_types::options::{
    feedback, open, pmo, report, GetOptions, PutOptions, Syncpoint, Wait,
};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
use support::{Home, Qm};

const DLQ: &str = "SYSTEM.DEAD.LETTER.QUEUE";

fn mqsc(home: &Home, qm: &str, script: &str) {
    let out = home.run_with_input(&["runmqsc", qm], script);
    assert_eq!(
        out.status.code(),
        Some(0),
        "runmqsc failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn put_md(c: &Connection, q: &str, md: &MessageDescriptor, body: &str, opts: &PutOptions) {
    let h = c.open(q, open::OUTPUT).unwrap();
    c.put(
        &h,
        md,
        &Properties::default(),
        Bytes::from(body.to_string()),
        opts,
    )
    .unwrap();
    c.close(&h, 0).unwrap();
}

/// Gets one message, waiting up to 10 s for it.
fn get_one(c: &Connection, q: &str) -> Message {
    try_get(c, q, Duration::from_secs(10)).unwrap_or_else(|e| panic!("no message on {q}: {e}"))
}

fn try_get(c: &Connection, q: &str, wait: Duration) -> Result<Message, MqError> {
    let h = c.open(q, open::INPUT_SHARED).unwrap();
    let r = c.get(
        &h,
        &GetOptions {
            wait: Wait::Ms(wait.as_millis() as u64),
            ..GetOptions::any()
        },
    );
    c.close(&h, 0).unwrap();
    r
}

fn depth(c: &Connection, q: &str) -> u32 {
    let h = c.open(q, open::INQUIRE).unwrap();
    let a = c.inquire(&h, &["CURDEPTH"]).unwrap();
    c.close(&h, 0).unwrap();
    a[0].1.parse().unwrap()
}

/// A client connection asserting `user`, which is first given every authority on the queue
/// manager and its queues (these tests are about the context a user's messages carry).
fn client_as(qm: &Qm<'_>, user: &str, app: &str) -> Connection {
    mqsc(
        qm.home,
        &qm.name,
        &format!(
            "SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('{user}') AUTHADD(ALL)\n\
             SET AUTHREC PROFILE('**') OBJTYPE(QUEUE) PRINCIPAL('{user}') AUTHADD(ALL)\n"
        ),
    );
    let mut o = ConnectOptions::client(&qm.name, &qm.conname()).unwrap();
    o.user = user.to_string();
    o.app_name = app.to_string();
    Connection::connect(o).unwrap()
}

/// The name of the user this process runs as, as the queue manager finds it.
fn os_user() -> String {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
        })
        .unwrap_or_else(|| uid.to_string())
}

fn forged() -> MessageDescriptor {
    MessageDescriptor {
        user_id: "mallory".into(),
        appl_identity: "forged-id".into(),
        put_appl_name: "forged-app".into(),
        put_time_ms: 12_345,
        format: "MQSTR".into(),
        ..Default::default()
    }
}

#[test]
fn the_queue_manager_fills_in_context_unless_the_put_may_set_or_pass_it() {
    let home = Home::new();
    let qm = Qm::start(&home, "CTX", &[]);
    mqsc(&home, "CTX", "DEFINE QLOCAL(C.IN)\nDEFINE QLOCAL(C.OUT)\n");
    let before_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;

    // A client's asserted user and program name overwrite whatever the descriptor says.
    let c = client_as(&qm, "alice", "orders-app");
    put_md(&c, "C.IN", &forged(), "default", &PutOptions::default());
    let m = get_one(&c, "C.IN");
    assert_eq!(m.md.user_id, "alice");
    assert_eq!(m.md.put_appl_name, "orders-app");
    assert_eq!(m.md.appl_identity, "");
    assert!(m.md.put_time_ms >= before_ms, "{}", m.md.put_time_ms);

    // A bindings connection's messages carry the user its process runs as, whatever it asserts.
    let mut o = ConnectOptions::bindings(&qm.name);
    o.transport = ferrymq_client::Transport::Bindings {
        home: Some(home.path().to_path_buf()),
    };
    o.user = "notme".into();
    let b = Connection::connect(o).unwrap();
    put_md(&b, "C.IN", &forged(), "bindings", &PutOptions::default());
    let want: String = os_user().chars().take(12).collect();
    assert_eq!(get_one(&b, "C.IN").md.user_id, want);

    // Setting context needs both the open option and the put option.
    let plain = c.open("C.IN", open::OUTPUT).unwrap();
    let set_all = PutOptions {
        context: pmo::SET_ALL_CONTEXT,
        ..PutOptions::default()
    };
    let e = c
        .put(
            &plain,
            &forged(),
            &Properties::default(),
            Bytes::from("x"),
            &set_all,
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::OPTIONS_ERROR, "{e}");
    let setter = c
        .open("C.IN", open::OUTPUT | open::SET_ALL_CONTEXT)
        .unwrap();
    c.put(
        &setter,
        &forged(),
        &Properties::default(),
        Bytes::from("set"),
        &set_all,
    )
    .unwrap();
    let m = get_one(&c, "C.IN");
    assert_eq!(
        (m.md.user_id.as_str(), m.md.appl_identity.as_str()),
        ("mallory", "forged-id")
    );
    assert_eq!(
        (m.md.put_appl_name.as_str(), m.md.put_time_ms),
        ("forged-app", 12_345)
    );
    // MQPUT1 opens with what its context option needs.
    c.put1(
        "C.IN",
        &forged(),
        &Properties::default(),
        Bytes::from("put1"),
        &set_all,
    )
    .unwrap();
    assert_eq!(get_one(&c, "C.IN").md.user_id, "mallory");
    // Identity only: the origin is the queue manager's again.
    let set_id = PutOptions {
        context: pmo::SET_IDENTITY_CONTEXT,
        ..PutOptions::default()
    };
    c.put(
        &setter,
        &forged(),
        &Properties::default(),
        Bytes::from("id"),
        &set_id,
    )
    .unwrap();
    let m = get_one(&c, "C.IN");
    assert_eq!(
        (m.md.user_id.as_str(), m.md.put_appl_name.as_str()),
        ("mallory", "orders-app")
    );
    // No context: all blank.
    let none = PutOptions {
        context: pmo::NO_CONTEXT,
        ..PutOptions::default()
    };
    c.put(
        &plain,
        &forged(),
        &Properties::default(),
        Bytes::from("none"),
        &none,
    )
    .unwrap();
    let m = get_one(&c, "C.IN");
    assert_eq!(
        (m.md.user_id.as_str(), m.md.put_appl_name.as_str()),
        ("", "")
    );

    // Pass all context: a message got through a handle that saves it is forwarded with it.
    c.put(
        &setter,
        &forged(),
        &Properties::default(),
        Bytes::from("pass"),
        &set_all,
    )
    .unwrap();
    let input = c
        .open("C.IN", open::INPUT_SHARED | open::SAVE_ALL_CONTEXT)
        .unwrap();
    let got = c.get(&input, &GetOptions::any()).unwrap();
    let out = c
        .open("C.OUT", open::OUTPUT | open::PASS_ALL_CONTEXT)
        .unwrap();
    let pass = PutOptions {
        context: pmo::PASS_ALL_CONTEXT,
        context_hobj: input.hobj,
        ..PutOptions::default()
    };
    c.put(
        &out,
        &MessageDescriptor::default(),
        &Properties::default(),
        got.body,
        &pass,
    )
    .unwrap();
    let m = get_one(&c, "C.OUT");
    assert_eq!(
        (
            m.md.user_id.as_str(),
            m.md.put_appl_name.as_str(),
            m.md.put_time_ms
        ),
        ("mallory", "forged-app", 12_345)
    );
    // Passing from a handle that does not save context is refused.
    let bad = PutOptions {
        context_hobj: plain.hobj,
        ..pass
    };
    let e = c
        .put(
            &out,
            &MessageDescriptor::default(),
            &Properties::default(),
            Bytes::from("x"),
            &bad,
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::CONTEXT_HANDLE_ERROR, "{e}");
    // MQ's binding and read-ahead options are accepted.
    c.open(
        "C.IN",
        open::INPUT_SHARED | open::BIND_NOT_FIXED | open::NO_READ_AHEAD,
    )
    .unwrap();
}

fn request(report_opts: i32, reply_to: &str, persistent: bool) -> MessageDescriptor {
    MessageDescriptor {
        msg_id: *b"ORIGINAL-MSG-ID-00000001",
        correl_id: *b"ORIGINAL-CORREL-ID-00001",
        report: report_opts,
        reply_to_q: reply_to.into(),
        format: "MQSTR".into(),
        persistence: if persistent {
            Persistence::Persistent
        } else {
            Persistence::NotPersistent
        },
        ..Default::default()
    }
}

#[test]
fn coa_and_cod_reports_reach_the_reply_queue_with_mq_ids_and_survive_a_kill_with_their_event() {
    let home = Home::new();
    let qm = Qm::start(&home, "REP", &[]);
    mqsc(
        &home,
        "REP",
        "DEFINE QLOCAL(R.IN)\nDEFINE QLOCAL(R.REPLY)\n",
    );
    let c = qm.connect();

    // A put without a ReplyToQ cannot ask for reports.
    let h = c.open("R.IN", open::OUTPUT).unwrap();
    let e = c
        .put(
            &h,
            &request(report::COA, "", false),
            &Properties::default(),
            Bytes::from("x"),
            &PutOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::MISSING_REPLY_TO_Q, "{e}");

    // COA with data: a new MsgId, the original's MsgId as CorrelId, the first 100 bytes.
    let body = "x".repeat(150);
    put_md(
        &c,
        "R.IN",
        &request(report::COA_WITH_DATA, "R.REPLY", false),
        &body,
        &PutOptions::default(),
    );
    let r = get_one(&c, "R.REPLY");
    assert_eq!(r.md.msg_type, msg_type::REPORT);
    assert_eq!(r.md.feedback, feedback::COA);
    assert_eq!(&r.md.correl_id, b"ORIGINAL-MSG-ID-00000001");
    assert_ne!(&r.md.msg_id, b"ORIGINAL-MSG-ID-00000001");
    assert_eq!(r.body.len(), 100);
    assert_eq!(r.md.reply_to_qmgr, "REP");
    get_one(&c, "R.IN");

    // Pass both ids; COD only once the get commits, not when it is backed out.
    let both = report::COD | report::PASS_MSG_ID | report::PASS_CORREL_ID;
    put_md(
        &c,
        "R.IN",
        &request(both, "R.REPLY", false),
        "cod",
        &PutOptions::default(),
    );
    let input = c.open("R.IN", open::INPUT_SHARED).unwrap();
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    c.get(&input, &sp).unwrap();
    c.backout().unwrap();
    assert_eq!(depth(&c, "R.REPLY"), 0, "no COD for a backed-out get");
    c.get(&input, &sp).unwrap();
    assert_eq!(depth(&c, "R.REPLY"), 0, "no COD before the commit");
    c.commit().unwrap();
    let r = get_one(&c, "R.REPLY");
    assert_eq!(r.md.feedback, feedback::COD);
    assert_eq!(&r.md.msg_id, b"ORIGINAL-MSG-ID-00000001");
    assert_eq!(&r.md.correl_id, b"ORIGINAL-CORREL-ID-00001");
    assert!(r.body.is_empty());

    // A put under syncpoint arrives, and is confirmed, only when it commits.
    let out = c.open("R.IN", open::OUTPUT).unwrap();
    let put_sp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..PutOptions::default()
    };
    let coa = request(report::COA, "R.REPLY", true);
    for commit in [false, true] {
        c.put(
            &out,
            &coa,
            &Properties::default(),
            Bytes::from("uow"),
            &put_sp,
        )
        .unwrap();
        assert_eq!(depth(&c, "R.REPLY"), 0, "no COA before the commit");
        if commit {
            c.commit().unwrap();
        } else {
            c.backout().unwrap();
        }
    }
    let r = get_one(&c, "R.REPLY");
    assert_eq!(r.md.feedback, feedback::COA);
    assert_eq!(
        depth(&c, "R.REPLY"),
        0,
        "one COA, for the committed put only"
    );
    get_one(&c, "R.IN");

    // A reply queue that does not exist: the report goes to the dead-letter queue.
    put_md(
        &c,
        "R.IN",
        &request(report::COA, "NO.SUCH.Q", false),
        "lost",
        &PutOptions::default(),
    );
    let d = get_one(&c, DLQ);
    assert_eq!(d.md.format, "MQDEAD");
    let (h, rest) = DeadLetterHeader::parse(&d.body).expect("a dead-letter header");
    assert_eq!(h.reason, Reason::UNKNOWN_OBJECT_NAME.code() as i32);
    assert_eq!(
        (h.dest_q_name.as_str(), h.dest_q_mgr_name.as_str()),
        ("NO.SUCH.Q", "REP")
    );
    assert!(rest.is_empty());
    assert_eq!(d.md.feedback, feedback::COA);
    get_one(&c, "R.IN");

    // Persistent: a put and its COA, a get and its COD, are one record each; a SIGKILL right
    // after the calls return keeps both halves of each.
    put_md(
        &c,
        "R.IN",
        &request(report::COA, "R.REPLY", true),
        "p1",
        &PutOptions::default(),
    );
    put_md(
        &c,
        "R.IN",
        &request(report::COD, "R.REPLY", true),
        "p2",
        &PutOptions::default(),
    );
    let got = c.get(&input, &GetOptions::any()).unwrap();
    assert_eq!(&got.body[..], b"p1");
    drop(c);
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    assert_eq!(depth(&c, "R.IN"), 1, "p2 stays");
    let r = get_one(&c, "R.REPLY");
    assert_eq!(
        (r.md.feedback, r.md.persistence),
        (feedback::COA, Persistence::Persistent)
    );
    assert_eq!(depth(&c, "R.REPLY"), 0, "p1 was got without a COD request");
    let input = c.open("R.IN", open::INPUT_SHARED).unwrap();
    c.get(&input, &GetOptions::any()).unwrap();
    drop(c);
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    assert_eq!(depth(&c, "R.IN"), 0);
    assert_eq!(get_one(&c, "R.REPLY").md.feedback, feedback::COD);
}

#[test]
fn an_expired_message_that_asks_for_it_leaves_an_expiration_report() {
    let home = Home::new();
    let qm = Qm::start(&home, "EXP", &[]);
    mqsc(
        &home,
        "EXP",
        "DEFINE QLOCAL(E.IN)\nDEFINE QLOCAL(E.REPLY)\n",
    );
    let c = qm.connect();
    let mut md = request(report::EXPIRATION_WITH_FULL_DATA, "E.REPLY", true);
    md.expiry = 1; // a tenth of a second
    put_md(&c, "E.IN", &md, "too late", &PutOptions::default());
    // The queue manager discards an expired message when a get or browse meets it: browse
    // until it has.
    let h = c.open("E.IN", open::BROWSE).unwrap();
    let t = Instant::now();
    loop {
        let browse = GetOptions {
            browse: ferrymq_types::options::Browse::First,
            ..GetOptions::any()
        };
        match c.get(&h, &browse) {
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Ok(_) => {
                assert!(t.elapsed() < Duration::from_secs(10), "never expired");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
    let r = get_one(&c, "E.REPLY");
    assert_eq!(r.md.feedback, feedback::EXPIRATION);
    assert_eq!(&r.body[..], b"too late");
    assert_eq!(&r.md.correl_id, b"ORIGINAL-MSG-ID-00000001");
    // Its removal was logged with the report: a restart brings back neither.
    drop(c);
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    assert_eq!((depth(&c, "E.IN"), depth(&c, "E.REPLY")), (0, 0));
}

/// Puts `n` messages to `q` that expire after `tenths` tenths of a second (`-1`: never); every
/// `report_every`-th asks for an expiration report to `reply_to`.
fn put_expiring(c: &Connection, q: &str, n: usize, tenths: i32, report_every: usize) {
    for i in 0..n {
        let opts = if report_every > 0 && i % report_every == 0 {
            report::EXPIRATION
        } else {
            0
        };
        let mut md = request(opts, "X.REPLY", i % 2 == 0);
        md.expiry = tenths;
        put_md(c, q, &md, &format!("m{i}"), &PutOptions::default());
    }
}

#[test]
fn the_expiry_scan_removes_expired_messages_nobody_looks_at_and_reports_them() {
    let home = Home::new();
    let qm = Qm::create(&home, "SCAN", &[]);
    qm.set_ini("QueueManager", "ExpiryInterval", "1");
    qm.restart();
    mqsc(
        &home,
        "SCAN",
        "DEFINE QLOCAL(X.IN)\nDEFINE QLOCAL(X.REPLY)\n",
    );
    let c = qm.connect();
    put_expiring(&c, "X.IN", 20, 3, 4);
    put_expiring(&c, "X.IN", 20, -1, 0);
    assert_eq!(depth(&c, "X.IN"), 40);
    // No get or browse meets them: the scan alone takes the 20 expiring ones away, and sends
    // the 5 reports they asked for.
    let t = Instant::now();
    while depth(&c, "X.IN") != 20 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the expiry scan never ran: CURDEPTH {}",
            depth(&c, "X.IN")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(depth(&c, "X.REPLY"), 5);
    // After a crash the non-persistent messages are gone; expired persistent ones that asked
    // for nothing may come back (their removal is not logged: they are still expired) and the
    // next scan takes them again; those whose report was sent were logged with it, so no report
    // is sent twice.
    drop(c);
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    let t = Instant::now();
    while depth(&c, "X.IN") != 10 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "CURDEPTH {} after the restart",
            depth(&c, "X.IN")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(depth(&c, "X.REPLY"), 5);
    let h = c.open("X.IN", open::INPUT_SHARED).unwrap();
    for _ in 0..10 {
        let m = c.get(&h, &GetOptions::any()).unwrap();
        assert_eq!(
            m.md.expiry, -1,
            "only the messages that never expire are left"
        );
    }
}

#[test]
fn refresh_qmgr_type_expiry_discards_now_on_the_queues_named_only() {
    let home = Home::new();
    let qm = Qm::create(&home, "REFX", &[]);
    qm.set_ini("QueueManager", "ExpiryInterval", "0");
    qm.restart();
    mqsc(
        &home,
        "REFX",
        "DEFINE QLOCAL(A.Q)\nDEFINE QLOCAL(B.Q)\nDEFINE QLOCAL(X.REPLY)\n",
    );
    let c = qm.connect();
    put_expiring(&c, "A.Q", 10, 1, 0);
    put_expiring(&c, "B.Q", 10, 1, 0);
    std::thread::sleep(Duration::from_millis(400));
    // Expired, but with the scan off nothing has looked.
    assert_eq!((depth(&c, "A.Q"), depth(&c, "B.Q")), (10, 10));
    let out = home.run_with_input(
        &["runmqsc", "REFX"],
        "REFRESH QMGR TYPE(EXPIRY) NAME(A.*)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("10 expired messages discarded"), "{text}");
    assert_eq!((depth(&c, "A.Q"), depth(&c, "B.Q")), (0, 10));
}

/// Gets a message under syncpoint and backs the get out.
fn get_and_back_out(c: &Connection, h: &ObjectHandle) {
    c.get(
        h,
        &GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        },
    )
    .unwrap();
    c.backout().unwrap();
}

#[test]
fn a_poison_message_is_dead_lettered_with_a_header_unless_backout_requeue_is_off() {
    let home = Home::new();
    let qm = Qm::start(&home, "BOQ", &[]);
    mqsc(
        &home,
        "BOQ",
        "DEFINE QLOCAL(B.BOQ) PUT(DISABLED)\n\
         DEFINE QLOCAL(B.IN) BOTHRESH(1) BOQNAME(B.BOQ)\n\
         DEFINE QLOCAL(B.REPLY)\n",
    );
    let c = client_as(&qm, "bob", "poison-app");
    let md = request(report::EXCEPTION, "B.REPLY", true);
    put_md(&c, "B.IN", &md, "poison", &PutOptions::default());
    let input = c.open("B.IN", open::INPUT_SHARED).unwrap();
    get_and_back_out(&c, &input);
    assert_eq!(depth(&c, "B.IN"), 0);
    // BOQNAME refuses it, so it goes to the dead-letter queue behind a header saying why.
    let d = get_one(&c, DLQ);
    let (h, rest) = DeadLetterHeader::parse(&d.body).expect("a dead-letter header");
    assert_eq!(h.reason, Reason::PUT_INHIBITED.code() as i32);
    assert_eq!(h.dest_q_name, "B.BOQ");
    assert_eq!(h.format, "MQSTR");
    assert_eq!(h.put_appl_type, 7);
    assert_eq!(rest, b"poison");
    assert_eq!(d.md.user_id, "bob");
    // The exception report says the same.
    let r = get_one(&c, "B.REPLY");
    assert_eq!(r.md.feedback, Reason::PUT_INHIBITED.code() as i32);

    // MQRO_DISCARD_MSG: discarded, the exception report still sent.
    let md2 = request(report::EXCEPTION | report::DISCARD_MSG, "B.REPLY", false);
    put_md(&c, "B.IN", &md2, "discard me", &PutOptions::default());
    get_and_back_out(&c, &input);
    assert_eq!((depth(&c, "B.IN"), depth(&c, DLQ)), (0, 0));
    assert_eq!(get_one(&c, "B.REPLY").md.msg_type, msg_type::REPORT);

    // browse prints the descriptor and the header; --body-only only the body.
    put_md(&c, "B.IN", &md, "poison again", &PutOptions::default());
    get_and_back_out(&c, &input);
    let shown = home.ok(&["browse", "BOQ", DLQ]);
    for want in [
        "Format(MQDEAD)",
        "UserIdentifier(bob)",
        "PutApplName(poison-app)",
        "DLH Reason(2051 MQRC_PUT_INHIBITED)",
        "DLH DestQName(B.BOQ)",
        "DLH Format(MQSTR)",
        "\npoison again\n",
    ] {
        assert!(shown.contains(want), "«{want}» missing from:\n{shown}");
    }
    let body_only = home.ok(&["browse", "BOQ", DLQ, "--body-only"]);
    assert!(body_only.starts_with("DLH "), "{body_only}");
    get_one(&c, DLQ);

    // BackoutRequeue=no: the message stays, its BackoutCount telling the application.
    drop(c);
    qm.end();
    qm.set_ini("QueueManager", "BackoutRequeue", "no");
    qm.restart();
    let c = qm.connect();
    put_md(&c, "B.IN", &md, "stays", &PutOptions::default());
    let input = c.open("B.IN", open::INPUT_SHARED).unwrap();
    get_and_back_out(&c, &input);
    get_and_back_out(&c, &input);
    assert_eq!(depth(&c, DLQ), 0);
    let m = c.get(&input, &GetOptions::any()).unwrap();
    assert_eq!((m.md.backout_count, &m.body[..]), (2, &b"stays"[..]));
}

#[test]
fn req_prints_the_replies_matched_by_correl_id_and_the_reports() {
    let home = Home::new();
    let qm = Qm::start(&home, "REQ", &[]);
    mqsc(
        &home,
        "REQ",
        "DEFINE QLOCAL(Q.REQ)\nDEFINE QLOCAL(Q.REPLY)\n",
    );
    let c = qm.connect();
    // Someone else's reply, which req must not take.
    let other = MessageDescriptor {
        correl_id: *b"SOMEONE-ELSES-REPLY-0001",
        ..Default::default()
    };
    put_md(&c, "Q.REPLY", &other, "not yours", &PutOptions::default());
    let responder = {
        let qm_name = qm.name.clone();
        let conname = qm.conname();
        std::thread::spawn(move || {
            let c =
                Connection::connect(ConnectOptions::client(&qm_name, &conname).unwrap()).unwrap();
            let h = c.open("Q.REQ", open::INPUT_SHARED).unwrap();
            for _ in 0..2 {
                let m = c
                    .get(
                        &h,
                        &GetOptions {
                            wait: Wait::Ms(20_000),
                            ..GetOptions::any()
                        },
                    )
                    .unwrap();
                let reply = MessageDescriptor {
                    correl_id: m.md.msg_id,
                    msg_type: msg_type::REPLY,
                    format: "MQSTR".into(),
                    ..Default::default()
                };
                let body = format!("re:{}", String::from_utf8_lossy(&m.body));
                c.put1(
                    &m.md.reply_to_q,
                    &reply,
                    &Properties::default(),
                    Bytes::from(body),
                    &PutOptions::default(),
                )
                .unwrap();
            }
        })
    };
    let out = home.run_with_input(
        &[
            "req",
            "REQ",
            "Q.REQ",
            "--reply-to",
            "Q.REPLY",
            "--report",
            "coa",
        ],
        "ping\npong\n",
    );
    responder.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(&"re:ping") && lines.contains(&"re:pong"),
        "{stdout}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("report MQFB_COA"))
            .count(),
        2,
        "{stdout}"
    );
    assert_eq!(&get_one(&c, "Q.REPLY").body[..], b"not yours");
    // No responder: exit 3 once the wait runs out.
    let out = home.run_with_input(
        &[
            "req",
            "REQ",
            "Q.REQ",
            "--reply-to",
            "Q.REPLY",
            "--wait-ms",
            "300",
        ],
        "unanswered\n",
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn runmqdlq_retries_forwards_discards_and_ignores_by_rules() {
    let home = Home::new();
    let qm = Qm::start(&home, "DLH", &[]);
    mqsc(
        &home,
        "DLH",
        "DEFINE QLOCAL(D.IN)\nDEFINE QLOCAL(D.FWD)\n\
         DEFINE QLOCAL(D.BOQ) PUT(DISABLED)\nDEFINE QLOCAL(D.POISON) BOTHRESH(1) BOQNAME(D.BOQ)\n",
    );
    let c = client_as(&qm, "carol", "dlq-test");
    // Reports for reply queues that do not exist yet (reason 2085), and a poison message whose
    // backout queue refuses puts (2051), land on the dead-letter queue.
    for (reply, body) in [
        ("LATE.REPLY", "late"),
        ("GONE.REPLY", "gone"),
        ("IGNORE.ME", "ignored"),
    ] {
        put_md(
            &c,
            "D.IN",
            &request(report::COA_WITH_FULL_DATA, reply, false),
            body,
            &PutOptions::default(),
        );
    }
    put_md(
        &c,
        "D.POISON",
        &request(0, "", true),
        "poison",
        &PutOptions::default(),
    );
    let p = c.open("D.POISON", open::INPUT_SHARED).unwrap();
    get_and_back_out(&c, &p);
    assert_eq!(depth(&c, DLQ), 4);
    mqsc(&home, "DLH", "DEFINE QLOCAL(LATE.REPLY)\n");
    let rules = "* FerryMQ DLQ rules\n\
                 INPUTQM(DLH) WAIT(NO) RETRYINT(0)\n\
                 DESTQ(LATE.*) REASON(MQRC_UNKNOWN_OBJECT_NAME) ACTION(RETRY) RETRY(2)\n\
                 REASON(2051) ACTION(FWD) FWDQ(D.FWD) HEADER(YES)\n\
                 DESTQ(GONE.REPLY) ACTION(DISCARD)\n\
                 DESTQ(IGNORE.*) ACTION(IGNORE)\n";
    let out = home.run_with_input(&["runmqdlq"], rules);
    assert!(out.status.success(), "{out:?}");
    // Retried: the report on its destination, without the header, its context passed on.
    let r = get_one(&c, "LATE.REPLY");
    assert_eq!(
        (r.md.msg_type, r.md.feedback),
        (msg_type::REPORT, feedback::COA)
    );
    assert_eq!(&r.body[..], b"late");
    assert_ne!(r.md.format, "MQDEAD");
    assert_eq!(r.md.user_id, "carol");
    // Forwarded with the header.
    let f = get_one(&c, "D.FWD");
    let (h, rest) = DeadLetterHeader::parse(&f.body).expect("header kept");
    assert_eq!(
        (h.reason, h.dest_q_name.as_str(), rest),
        (2051, "D.BOQ", &b"poison"[..])
    );
    // Discarded, and ignored (still there).
    assert_eq!(depth(&c, DLQ), 1);
    let left = get_one(&c, DLQ);
    assert_eq!(
        DeadLetterHeader::parse(&left.body).unwrap().0.dest_q_name,
        "IGNORE.ME"
    );
    // A bad rule is a usage error that names its line.
    let out = home.run_with_input(&["runmqdlq", DLQ, "DLH"], "ACTION(JUMP)\n");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 1"),
        "{out:?}"
    );
}
