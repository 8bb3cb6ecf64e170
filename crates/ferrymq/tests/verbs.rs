//! Every MQI verb and its errors, over real TCP against the real binary: open/close, put/put1,
//! get with wait (server-pushed), get by MsgId and CorrelId, browse, units of work spanning
//! queues, inquire, alias and model queues, BOTHRESH/BOQNAME, inhibits, expiry, truncation.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{close, open, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue, Reason};
use support::{Home, Qm};

fn mqsc(c: &Connection, cmd: &str) {
    c.admin(&format!("MQSC {cmd}"))
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
}

fn md() -> MessageDescriptor {
    MessageDescriptor::default()
}

fn put(c: &Connection, h: &ferrymq_client::ObjectHandle, body: &str) -> [u8; 24] {
    c.put(
        h,
        &md(),
        &Properties::default(),
        Bytes::from(body.to_string()),
        &PutOptions::default(),
    )
    .unwrap()
    .0
}

fn text(m: &ferrymq_client::Message) -> String {
    String::from_utf8(m.body.to_vec()).unwrap()
}

const IO: u32 = open::INPUT_SHARED | open::OUTPUT | open::BROWSE | open::INQUIRE;

#[test]
fn put1_and_get_by_msg_id_and_correl_id() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV1", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.Q)");
    let m1 = MessageDescriptor {
        correl_id: [1; 24],
        ..md()
    };
    let (id_a, _) = c
        .put1(
            "V.Q",
            &m1,
            &Properties::default(),
            Bytes::from_static(b"a"),
            &PutOptions::default(),
        )
        .unwrap();
    let (id_b, _) = c
        .put1(
            "V.Q",
            &m1,
            &Properties::default(),
            Bytes::from_static(b"b"),
            &PutOptions::default(),
        )
        .unwrap();
    let m2 = MessageDescriptor {
        correl_id: [2; 24],
        ..md()
    };
    c.put1(
        "V.Q",
        &m2,
        &Properties::default(),
        Bytes::from_static(b"c"),
        &PutOptions::default(),
    )
    .unwrap();
    assert_ne!(id_a, id_b, "every put gets a fresh MsgId");
    let h = c.open("V.Q", IO).unwrap();
    let by_id = GetOptions {
        match_msg_id: Some(id_b),
        ..GetOptions::any()
    };
    assert_eq!(text(&c.get(&h, &by_id).unwrap()), "b");
    assert_eq!(
        c.get(&h, &by_id).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
    let by_correl = GetOptions {
        match_correl_id: Some([2; 24]),
        ..GetOptions::any()
    };
    let m = c.get(&h, &by_correl).unwrap();
    assert_eq!((text(&m), m.md.correl_id), ("c".to_string(), [2; 24]));
    assert_eq!(text(&c.get(&h, &GetOptions::any()).unwrap()), "a");
}

#[test]
fn a_waiting_get_is_answered_when_a_matching_message_arrives() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV2", &[]);
    let getter = qm.connect();
    mqsc(&getter, "DEFINE QLOCAL(V.REPLY)");
    let h = getter.open("V.REPLY", open::INPUT_SHARED).unwrap();
    let waiter = std::thread::spawn(move || {
        let opts = GetOptions {
            wait: Wait::Ms(10_000),
            match_correl_id: Some([9; 24]),
            ..GetOptions::any()
        };
        let t = Instant::now();
        let r = getter.get(&h, &opts);
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let putter = qm.connect();
    let ph = putter.open("V.REPLY", open::OUTPUT).unwrap();
    put(&putter, &ph, "not this one");
    let m = MessageDescriptor {
        correl_id: [9; 24],
        ..md()
    };
    putter
        .put(
            &ph,
            &m,
            &Properties::default(),
            Bytes::from_static(b"reply"),
            &PutOptions::default(),
        )
        .unwrap();
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(&r.unwrap().body[..], b"reply");
    assert!(
        waited < Duration::from_secs(5),
        "delivered when it arrived, not at the end of the wait ({waited:?})"
    );
}

#[test]
fn a_wait_that_runs_out_returns_no_msg_available_after_the_interval() {
    let home = Home::new();
    let qm = Qm::start(&home, "QV3", &[]);
    let c = qm.connect();
    let h = c
        .open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::INPUT_SHARED)
        .unwrap();
    let t = Instant::now();
    let e = c
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(400),
                ..GetOptions::any()
            },
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);
    assert!(
        t.elapsed() >= Duration::from_millis(380),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_unit_of_work_spans_queues_and_backs_out_as_one() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV4", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.IN)");
    mqsc(&c, "DEFINE QLOCAL(V.OUT)");
    let hin = c.open("V.IN", IO).unwrap();
    let hout = c.open("V.OUT", IO).unwrap();
    put(&c, &hin, "order-1");
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    let psp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    let m = c.get(&hin, &sp).unwrap();
    c.put(&hout, &md(), &Properties::default(), m.body.clone(), &psp)
        .unwrap();
    let other = qm.connect();
    let oin = other.open("V.IN", IO).unwrap();
    let oout = other.open("V.OUT", IO).unwrap();
    assert_eq!(
        other.get(&oout, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE,
        "uncommitted put invisible"
    );
    assert_eq!(
        other.get(&oin, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE,
        "uncommitted get holds the message"
    );
    c.backout().unwrap();
    assert_eq!(
        other.get(&oout, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
    let back = other.get(&oin, &GetOptions::any()).unwrap();
    assert_eq!(
        (text(&back), back.md.backout_count),
        ("order-1".to_string(), 1)
    );
    // Now the same, committed.
    put(&c, &hin, "order-2");
    let m = c.get(&hin, &sp).unwrap();
    c.put(&hout, &md(), &Properties::default(), m.body.clone(), &psp)
        .unwrap();
    c.commit().unwrap();
    assert_eq!(
        text(&other.get(&oout, &GetOptions::any()).unwrap()),
        "order-2"
    );
    assert_eq!(
        other.get(&oin, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
}

#[test]
fn browse_first_and_next_read_without_removing_and_inquire_reports_depth() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV5", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.B)");
    let h = c.open("V.B", IO).unwrap();
    for s in ["x", "y", "z"] {
        put(&c, &h, s);
    }
    let first = c
        .get(
            &h,
            &GetOptions {
                browse: Browse::First,
                ..GetOptions::any()
            },
        )
        .unwrap();
    let next = GetOptions {
        browse: Browse::Next,
        ..GetOptions::any()
    };
    let mut seen = vec![text(&first)];
    while let Ok(m) = c.get(&h, &next) {
        seen.push(text(&m));
    }
    assert_eq!(seen, ["x", "y", "z"]);
    let attrs = c.inquire(&h, &["CURDEPTH", "MAXDEPTH", "IPPROCS"]).unwrap();
    assert_eq!(
        attrs,
        vec![
            ("CURDEPTH".into(), "3".into()),
            ("MAXDEPTH".into(), "5000".into()),
            ("IPPROCS".into(), "1".into())
        ]
    );
    assert_eq!(
        c.inquire(&h, &["NOSUCHATTR"]).unwrap_err().reason,
        Reason::SELECTOR_ERROR
    );
    let no_inq = c.open("V.B", open::OUTPUT).unwrap();
    assert_eq!(
        c.inquire(&no_inq, &["CURDEPTH"]).unwrap_err().reason,
        Reason::NOT_OPEN_FOR_INQUIRE
    );
}

#[test]
fn priority_order_properties_and_persistence_as_queue_default() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV6", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.P) DEFPSIST(YES) DEFPRTY(3)");
    mqsc(&c, "DEFINE QLOCAL(V.F) MSGDLVSQ(FIFO)");
    let h = c.open("V.P", IO).unwrap();
    let mut props = Properties::default();
    props.set("order", PropertyValue::Int(42));
    c.put(
        &h,
        &md(),
        &props,
        Bytes::from_static(b"default"),
        &PutOptions::default(),
    )
    .unwrap();
    let urgent = MessageDescriptor {
        priority: 9,
        ..md()
    };
    c.put(
        &h,
        &urgent,
        &Properties::default(),
        Bytes::from_static(b"urgent"),
        &PutOptions::default(),
    )
    .unwrap();
    let m = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(text(&m), "urgent");
    let m = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(
        (text(&m), m.md.priority, m.md.persistence),
        ("default".to_string(), 3, Persistence::Persistent)
    );
    assert_eq!(m.props.get("order"), Some(&PropertyValue::Int(42)));
    let f = c.open("V.F", IO).unwrap();
    c.put(
        &f,
        &md(),
        &Properties::default(),
        Bytes::from_static(b"low"),
        &PutOptions::default(),
    )
    .unwrap();
    c.put(
        &f,
        &urgent,
        &Properties::default(),
        Bytes::from_static(b"high"),
        &PutOptions::default(),
    )
    .unwrap();
    assert_eq!(
        text(&c.get(&f, &GetOptions::any()).unwrap()),
        "low",
        "MSGDLVSQ(FIFO) ignores priority"
    );
}

#[test]
fn alias_queues_resolve_to_their_target_and_honour_their_own_inhibits() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV7", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.BASE)");
    mqsc(&c, "DEFINE QALIAS(V.ALIAS) TARGET(V.BASE)");
    mqsc(&c, "DEFINE QALIAS(V.RO) TARGET(V.BASE) PUT(DISABLED)");
    mqsc(&c, "DEFINE QALIAS(V.DANGLING) TARGET(V.NOWHERE)");
    let a = c.open("V.ALIAS", open::OUTPUT).unwrap();
    put(&c, &a, "via alias");
    let b = c.open("V.BASE", open::INPUT_SHARED).unwrap();
    assert_eq!(text(&c.get(&b, &GetOptions::any()).unwrap()), "via alias");
    let ro = c.open("V.RO", open::OUTPUT).unwrap();
    let e = c
        .put(
            &ro,
            &md(),
            &Properties::default(),
            Bytes::new(),
            &PutOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::PUT_INHIBITED);
    assert_eq!(
        c.open("V.DANGLING", open::OUTPUT).unwrap_err().reason,
        Reason::UNKNOWN_ALIAS_BASE_Q
    );
}

#[test]
fn model_queues_create_temporary_and_permanent_dynamic_queues() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV8", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QMODEL(V.PERM.MODEL) DEFTYPE(PERMDYN)");
    let t = c
        .open_dynamic(
            "SYSTEM.DEFAULT.MODEL.QUEUE",
            "V.TEMP.*",
            open::INPUT_EXCLUSIVE | open::OUTPUT,
        )
        .unwrap();
    assert!(t.name.starts_with("V.TEMP."), "{}", t.name);
    put(&c, &t, "temp");
    let p = c
        .open_dynamic(
            "V.PERM.MODEL",
            "V.PERM.*",
            open::INPUT_SHARED | open::OUTPUT,
        )
        .unwrap();
    let pm = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..md()
    };
    c.put(
        &p,
        &pm,
        &Properties::default(),
        Bytes::from_static(b"kept"),
        &PutOptions::default(),
    )
    .unwrap();
    let perm_name = p.name.clone();
    let temp_name = t.name.clone();
    c.close(&t, close::NONE).unwrap();
    c.close(&p, close::NONE).unwrap();
    assert_eq!(
        c.open(&temp_name, open::OUTPUT).unwrap_err().reason,
        Reason::UNKNOWN_OBJECT_NAME,
        "temporary queue deleted on close"
    );
    drop(c);
    qm.end();
    qm.restart();
    let c = qm.connect();
    let p = c.open(&perm_name, open::INPUT_SHARED).unwrap();
    assert_eq!(
        text(&c.get(&p, &GetOptions::any()).unwrap()),
        "kept",
        "permanent dynamic queue and its message survive restart"
    );
    c.close(&p, close::DELETE_PURGE).unwrap();
    assert_eq!(
        c.open(&perm_name, open::OUTPUT).unwrap_err().reason,
        Reason::UNKNOWN_OBJECT_NAME
    );
}

#[test]
fn a_poison_message_moves_to_the_backout_queue_after_bothresh_backouts() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV9", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.POISON.BO)");
    mqsc(
        &c,
        "DEFINE QLOCAL(V.POISON) BOTHRESH(3) BOQNAME(V.POISON.BO)",
    );
    let h = c.open("V.POISON", IO).unwrap();
    let pm = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..md()
    };
    c.put(
        &h,
        &pm,
        &Properties::default(),
        Bytes::from_static(b"bad"),
        &PutOptions::default(),
    )
    .unwrap();
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    for _ in 0..3 {
        c.get(&h, &sp).unwrap();
        c.backout().unwrap();
    }
    assert_eq!(
        c.get(&h, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
    let bo = c.open("V.POISON.BO", open::INPUT_SHARED).unwrap();
    let m = c.get(&bo, &GetOptions::any()).unwrap();
    assert_eq!((text(&m), m.md.backout_count), ("bad".to_string(), 3));
}

#[test]
fn inhibited_queues_and_wrong_open_options_give_mq_reasons() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV10", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.INH) PUT(DISABLED) GET(DISABLED)");
    let h = c.open("V.INH", IO).unwrap();
    assert_eq!(
        c.put(
            &h,
            &md(),
            &Properties::default(),
            Bytes::new(),
            &PutOptions::default()
        )
        .unwrap_err()
        .reason,
        Reason::PUT_INHIBITED
    );
    assert_eq!(
        c.get(&h, &GetOptions::any()).unwrap_err().reason,
        Reason::GET_INHIBITED
    );
    mqsc(&c, "DEFINE QLOCAL(V.OK)");
    let out_only = c.open("V.OK", open::OUTPUT).unwrap();
    assert_eq!(
        c.get(&out_only, &GetOptions::any()).unwrap_err().reason,
        Reason::NOT_OPEN_FOR_INPUT
    );
    let in_only = c.open("V.OK", open::INPUT_SHARED).unwrap();
    assert_eq!(
        c.put(
            &in_only,
            &md(),
            &Properties::default(),
            Bytes::new(),
            &PutOptions::default()
        )
        .unwrap_err()
        .reason,
        Reason::NOT_OPEN_FOR_OUTPUT
    );
    let browse = GetOptions {
        browse: Browse::First,
        ..GetOptions::any()
    };
    assert_eq!(
        c.get(&in_only, &browse).unwrap_err().reason,
        Reason::NOT_OPEN_FOR_BROWSE
    );
    let excl = c.open("V.OK", open::INPUT_EXCLUSIVE);
    assert_eq!(
        excl.unwrap_err().reason,
        Reason::OBJECT_IN_USE,
        "another handle has it open for input"
    );
    let err = c.open("NO.SUCH.Q", open::OUTPUT).unwrap_err();
    assert_eq!(err.reason, Reason::UNKNOWN_OBJECT_NAME);
    assert!(err.message.contains("NO.SUCH.Q"), "{err}");
}

#[test]
fn expired_messages_are_never_delivered_and_long_ones_truncate_only_when_asked() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV11", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.E)");
    let h = c.open("V.E", IO).unwrap();
    let short = MessageDescriptor { expiry: 2, ..md() }; // 0.2 s
    c.put(
        &h,
        &short,
        &Properties::default(),
        Bytes::from_static(b"stale"),
        &PutOptions::default(),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        c.get(&h, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
    put(&c, &h, "0123456789");
    let small = GetOptions {
        max_len: 4,
        ..GetOptions::any()
    };
    assert_eq!(
        c.get(&h, &small).unwrap_err().reason,
        Reason::TRUNCATED_MSG_FAILED
    );
    let m = c
        .get(
            &h,
            &GetOptions {
                accept_truncated: true,
                ..small
            },
        )
        .unwrap();
    assert_eq!(
        (text(&m), m.data_len, m.truncated),
        ("0123".to_string(), 10, true)
    );
}

#[test]
fn bindings_mode_and_client_mode_see_the_same_queue_manager() {
    let home = Home::new();
    let qm = Qm::start(&home, "QV12", &[]);
    let local = qm.connect_bindings();
    let h = local
        .open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::OUTPUT)
        .unwrap();
    put(&local, &h, "from bindings");
    let remote = qm.connect();
    let g = remote
        .open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::INPUT_SHARED)
        .unwrap();
    assert_eq!(
        text(&remote.get(&g, &GetOptions::any()).unwrap()),
        "from bindings"
    );
}

#[test]
fn a_hundred_megabyte_message_round_trips() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV13", &["-lp", "3", "-lf", "65535"]);
    let c = qm.connect();
    mqsc(&c, "ALTER QMGR MAXMSGL(104857600)");
    mqsc(&c, "DEFINE QLOCAL(V.BIG) MAXMSGL(104857600)");
    // The channel's MAXMSGL bounds what a client connection negotiates, as in MQ.
    mqsc(
        &c,
        "ALTER CHANNEL(SYSTEM.DEF.SVRCONN) CHLTYPE(SVRCONN) MAXMSGL(104857600)",
    );
    drop(c);
    // Reconnect: the maximum message length is negotiated at connect time.
    let c = qm.connect();
    let h = c.open("V.BIG", IO).unwrap();
    let body: Vec<u8> = (0..104_857_600u32).map(|i| (i % 251) as u8).collect();
    let pm = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..md()
    };
    c.put(
        &h,
        &pm,
        &Properties::default(),
        Bytes::from(body.clone()),
        &PutOptions::default(),
    )
    .unwrap();
    let m = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(m.body.len(), body.len());
    assert!(m.body[..] == body[..], "content differs");
}

#[test]
fn an_asynchronous_consumer_receives_pushed_messages_in_order() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV14", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.CONS)");
    let h = c.open("V.CONS", open::INPUT_SHARED).unwrap();
    let mut consumer = c.consume(&h, &GetOptions::any(), 4).unwrap();
    let p = qm.connect();
    let ph = p.open("V.CONS", open::OUTPUT).unwrap();
    let pm = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..md()
    };
    for i in 0..50 {
        p.put(
            &ph,
            &pm,
            &Properties::default(),
            Bytes::from(format!("m{i}")),
            &PutOptions::default(),
        )
        .unwrap();
    }
    for i in 0..50 {
        let m = consumer.next_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(text(&m), format!("m{i}"));
    }
    assert_eq!(
        consumer
            .next_timeout(Duration::from_millis(200))
            .unwrap_err()
            .reason,
        Reason::NO_MSG_AVAILABLE
    );
    consumer.cancel().unwrap();
    put(&p, &ph, "after cancel");
    assert_eq!(
        text(&c.get(&h, &GetOptions::any()).unwrap()),
        "after cancel",
        "a cancelled consumer takes nothing"
    );
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    // Under syncpoint a consumer takes one message at a time into the unit of work.
    put(&p, &ph, "in a unit of work");
    let mut consumer = c.consume(&h, &sp, 4).unwrap();
    assert_eq!(text(&consumer.next().unwrap()), "in a unit of work");
    c.backout().unwrap();
    let again = consumer.next().unwrap();
    assert_eq!(again.md.backout_count, 1);
    c.commit().unwrap();
    consumer.cancel().unwrap();
}

#[test]
fn put_commit_get_sends_a_request_and_waits_for_its_reply_in_one_call() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QV15", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(V.REQ)");
    mqsc(&c, "DEFINE QLOCAL(V.REP)");
    let responder = qm.connect();
    let rq = responder.open("V.REQ", open::INPUT_SHARED).unwrap();
    let rp = responder.open("V.REP", open::OUTPUT).unwrap();
    let serve = std::thread::spawn(move || {
        let m = responder
            .get(
                &rq,
                &GetOptions {
                    wait: Wait::Ms(5000),
                    syncpoint: Syncpoint::Yes,
                    ..GetOptions::any()
                },
            )
            .unwrap();
        let reply = MessageDescriptor {
            correl_id: m.md.msg_id,
            ..MessageDescriptor::default()
        };
        responder
            .put_commit(
                &rp,
                &reply,
                &Properties::default(),
                Bytes::from_static(b"pong"),
            )
            .unwrap();
    });
    let req = c.open("V.REQ", open::OUTPUT).unwrap();
    let rep = c.open("V.REP", open::INPUT_SHARED).unwrap();
    let id = ferrymq_client::unique_id();
    let request = MessageDescriptor {
        msg_id: id,
        reply_to_q: "V.REP".into(),
        ..md()
    };
    let opts = GetOptions {
        wait: Wait::Ms(5000),
        match_correl_id: Some(id),
        ..GetOptions::any()
    };
    let ((msg_id, _), reply) = c
        .put_commit_get(
            &req,
            &request,
            &Properties::default(),
            Bytes::from_static(b"ping"),
            &rep,
            &opts,
        )
        .unwrap();
    assert_eq!(msg_id, id, "the client's own MsgId is kept");
    assert_eq!(&reply.body[..], b"pong");
    assert_eq!(reply.md.correl_id, id);
    serve.join().unwrap();
}

#[test]
fn disconnect_commits_like_mqdisc_but_a_dropped_connection_backs_out() {
    let home = Home::new();
    let qm = Qm::start(&home, "QV16", &[]);
    let sp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    let c = qm.connect();
    let h = c.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::OUTPUT).unwrap();
    c.put(
        &h,
        &md(),
        &Properties::default(),
        Bytes::from_static(b"disconnected"),
        &sp,
    )
    .unwrap();
    c.disconnect().unwrap();
    let d = qm.connect();
    let h = d.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::OUTPUT).unwrap();
    d.put(
        &h,
        &md(),
        &Properties::default(),
        Bytes::from_static(b"dropped"),
        &sp,
    )
    .unwrap();
    drop(h);
    drop(d);
    let g = qm.connect();
    let gh = g
        .open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::INPUT_SHARED)
        .unwrap();
    let opts = GetOptions {
        wait: Wait::Ms(500),
        ..GetOptions::any()
    };
    assert_eq!(
        text(&g.get(&gh, &opts).unwrap()),
        "disconnected",
        "MQDISC commits"
    );
    assert_eq!(
        g.get(&gh, &opts).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE,
        "ending without MQDISC backs out"
    );
}
