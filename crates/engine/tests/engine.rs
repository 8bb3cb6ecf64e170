//! Behaviour of the queue engine through its public verbs, with an in-memory log.

use bytes::Bytes;
use ferrymq_engine::{Engine, GetOutcome, Got, Image, MemoryLog};
use ferrymq_types::options::{close, open, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, QueueDef, Reason};

mod common;

use common::{cfg, SharedLog};

fn engine() -> (Engine, SharedLog) {
    let log = SharedLog::default();
    let mut e = Engine::new(cfg(), Box::new(log.clone()));
    e.install_defaults().unwrap();
    e.define_queue(QueueDef::local("Q1"), false).unwrap();
    (e, log)
}

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

fn put(e: &mut Engine, c: u64, h: u32, body: &str, persistent: bool, sync: bool) -> [u8; 24] {
    let opts = PutOptions {
        syncpoint: if sync { Syncpoint::Yes } else { Syncpoint::No },
        ..Default::default()
    };
    e.put(
        c,
        h,
        &opts,
        md(persistent),
        Properties::default(),
        Bytes::from(body.to_string()),
        1000,
    )
    .unwrap()
    .msg_id
}

fn get(e: &mut Engine, c: u64, h: u32, opts: GetOptions) -> Result<Got, MqError> {
    match e.get(c, h, &opts, 1, 1000)? {
        GetOutcome::Got(g, _) => Ok(g),
        GetOutcome::Waiting(_) => panic!("unexpected wait"),
    }
}

fn body(g: &Got) -> String {
    String::from_utf8(g.body.to_vec()).unwrap()
}

fn open_io(e: &mut Engine, c: u64, q: &str) -> u32 {
    e.open(
        c,
        q,
        "",
        open::INPUT_SHARED | open::OUTPUT | open::BROWSE | open::INQUIRE,
        "",
    )
    .unwrap()
    .0
}

#[test]
fn messages_come_out_in_the_order_they_went_in() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    for i in 0..5 {
        put(&mut e, c, h, &format!("m{i}"), false, false);
    }
    for i in 0..5 {
        assert_eq!(
            body(&get(&mut e, c, h, GetOptions::any()).unwrap()),
            format!("m{i}")
        );
    }
    assert_eq!(
        get(&mut e, c, h, GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
}

#[test]
fn uncommitted_puts_are_invisible_until_commit_and_vanish_on_backout() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    let c2 = e.connect("u", "other");
    let h2 = open_io(&mut e, c2, "Q1");
    put(&mut e, c, h, "a", true, true);
    assert_eq!(
        get(&mut e, c2, h2, GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
    e.commit(c, 0).unwrap();
    assert_eq!(body(&get(&mut e, c2, h2, GetOptions::any()).unwrap()), "a");
    put(&mut e, c, h, "b", true, true);
    e.backout(c, 0).unwrap();
    assert_eq!(
        get(&mut e, c2, h2, GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
}

#[test]
fn backed_out_get_returns_the_message_with_its_backout_count() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "x", true, false);
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    let g = get(&mut e, c, h, opts.clone()).unwrap();
    assert_eq!(g.md.backout_count, 0);
    assert_eq!(
        e.queue_status("Q1").unwrap().cur_depth,
        1,
        "a message in a unit of work still counts in CURDEPTH"
    );
    e.backout(c, 0).unwrap();
    let g = get(&mut e, c, h, opts).unwrap();
    assert_eq!(g.md.backout_count, 1);
    e.commit(c, 0).unwrap();
    assert_eq!(e.queue_status("Q1").unwrap().cur_depth, 0);
}

#[test]
fn poison_message_moves_to_the_backout_queue_at_the_threshold() {
    let (mut e, _) = engine();
    let mut q = QueueDef::local("IN");
    q.backout_threshold = 2;
    q.backout_queue = "IN.BO".into();
    e.define_queue(q, false).unwrap();
    e.define_queue(QueueDef::local("IN.BO"), false).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "IN");
    put(&mut e, c, h, "poison", true, false);
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    for _ in 0..2 {
        get(&mut e, c, h, opts.clone()).unwrap();
        e.backout(c, 0).unwrap();
    }
    assert_eq!(e.queue_status("IN").unwrap().cur_depth, 0);
    let hb = open_io(&mut e, c, "IN.BO");
    let g = get(&mut e, c, hb, GetOptions::any()).unwrap();
    assert_eq!(body(&g), "poison");
    assert_eq!(g.md.backout_count, 2);
}

#[test]
fn get_by_correl_id_picks_only_the_matching_reply() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    for i in 0..50u8 {
        let m = MessageDescriptor {
            correl_id: [i; 24],
            ..md(false)
        };
        e.put(
            c,
            h,
            &PutOptions::default(),
            m,
            Properties::default(),
            Bytes::from(vec![i]),
            0,
        )
        .unwrap();
    }
    let opts = GetOptions {
        match_correl_id: Some([33; 24]),
        ..GetOptions::any()
    };
    assert_eq!(get(&mut e, c, h, opts.clone()).unwrap().body[0], 33);
    assert_eq!(
        get(&mut e, c, h, opts).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
    assert_eq!(e.queue_status("Q1").unwrap().cur_depth, 49);
}

#[test]
fn a_waiting_get_receives_the_next_matching_message() {
    let (mut e, _) = engine();
    let getter = e.connect("u", "getter");
    let hg = open_io(&mut e, getter, "Q1");
    let opts = GetOptions {
        wait: Wait::Ms(5000),
        match_correl_id: Some([7; 24]),
        ..GetOptions::any()
    };
    assert!(matches!(
        e.get(getter, hg, &opts, 99, 0).unwrap(),
        GetOutcome::Waiting(_)
    ));
    let putter = e.connect("u", "putter");
    let hp = open_io(&mut e, putter, "Q1");
    put(&mut e, putter, hp, "not for you", false, false);
    assert!(e.take_deliveries().is_empty());
    let m = MessageDescriptor {
        correl_id: [7; 24],
        ..md(false)
    };
    e.put(
        putter,
        hp,
        &PutOptions::default(),
        m,
        Properties::default(),
        Bytes::from_static(b"yours"),
        0,
    )
    .unwrap();
    let d = e.take_deliveries();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].conn, d[0].token), (getter, 99));
    assert_eq!(&d[0].result.as_ref().unwrap().body[..], b"yours");
    assert_eq!(
        e.queue_status("Q1").unwrap().cur_depth,
        1,
        "the other message stays"
    );
}

#[test]
fn a_cancelled_wait_is_not_delivered_to() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    let opts = GetOptions {
        wait: Wait::Ms(10),
        ..GetOptions::any()
    };
    let GetOutcome::Waiting(w) = e.get(c, h, &opts, 5, 0).unwrap() else {
        panic!("should wait")
    };
    assert_eq!(e.cancel_wait(w), Some((c, 5)));
    put(&mut e, c, h, "later", false, false);
    assert!(e.take_deliveries().is_empty());
    assert_eq!(e.queue_status("Q1").unwrap().cur_depth, 1);
}

#[test]
fn queue_limits_give_mq_reason_codes() {
    let (mut e, _) = engine();
    let mut q = QueueDef::local("SMALL");
    q.max_depth = 2;
    q.max_msg_len = 10;
    e.define_queue(q, false).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "SMALL");
    let big = e.put(
        c,
        h,
        &PutOptions::default(),
        md(false),
        Properties::default(),
        Bytes::from(vec![0u8; 11]),
        0,
    );
    assert_eq!(big.unwrap_err().reason, Reason::MSG_TOO_BIG_FOR_Q);
    put(&mut e, c, h, "1", false, false);
    put(&mut e, c, h, "2", false, true);
    let full = e.put(
        c,
        h,
        &PutOptions::default(),
        md(false),
        Properties::default(),
        Bytes::from_static(b"3"),
        0,
    );
    let err = full.unwrap_err();
    assert_eq!(err.reason, Reason::Q_FULL);
    assert!(
        err.message.contains("SMALL"),
        "the error names the queue: {err}"
    );
    assert_eq!(
        e.open(c, "NOPE", "", open::OUTPUT, "").unwrap_err().reason,
        Reason::UNKNOWN_OBJECT_NAME
    );
}

#[test]
fn inhibited_queues_refuse_puts_and_gets() {
    let (mut e, _) = engine();
    let mut q = QueueDef::local("INH");
    q.put_inhibited = true;
    q.get_inhibited = true;
    e.define_queue(q, false).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "INH");
    let r = e.put(
        c,
        h,
        &PutOptions::default(),
        md(false),
        Properties::default(),
        Bytes::new(),
        0,
    );
    assert_eq!(r.unwrap_err().reason, Reason::PUT_INHIBITED);
    assert_eq!(
        get(&mut e, c, h, GetOptions::any()).unwrap_err().reason,
        Reason::GET_INHIBITED
    );
}

#[test]
fn expired_messages_are_never_delivered() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    let m = MessageDescriptor {
        expiry: 10,
        ..md(true)
    }; // one second
    e.put(
        c,
        h,
        &PutOptions::default(),
        m,
        Properties::default(),
        Bytes::from_static(b"old"),
        1000,
    )
    .unwrap();
    let r = e.get(c, h, &GetOptions::any(), 1, 2001);
    assert_eq!(r.unwrap_err().reason, Reason::NO_MSG_AVAILABLE);
}

#[test]
fn the_expiry_scan_discards_expired_messages_a_bounded_number_at_a_time() {
    let (mut e, _) = engine();
    e.define_queue(QueueDef::local("Q2"), false).unwrap();
    let c = e.connect("u", "app");
    let put_expiring = |e: &mut Engine, h: u32, i: u32, tenths: i32| {
        let m = MessageDescriptor {
            expiry: tenths,
            ..md(i.is_multiple_of(2))
        };
        e.put(
            c,
            h,
            &PutOptions::default(),
            m,
            Properties::default(),
            Bytes::from(format!("m{i}")),
            1000,
        )
        .unwrap();
    };
    // Q1 and Q2 hold 10 messages each; every other one expires at 2000 ms (10 tenths after the
    // put at 1000 ms), the others never.
    for q in ["Q1", "Q2"] {
        let h = open_io(&mut e, c, q);
        for i in 0..10 {
            put_expiring(&mut e, h, i, if i.is_multiple_of(2) { 10 } else { -1 });
        }
    }
    let depth = |e: &Engine, q: &str| e.queue_status(q).unwrap().cur_depth;
    let all = |_: &str| true;
    let mut cursor = ferrymq_engine::expiry::ExpiryCursor::default();
    // Before the expiry time nothing goes, and a pass of budget 7 covers 7 messages.
    let p = e.scan_expired(&mut cursor, 1999, 7, &all);
    assert_eq!((p.examined, p.discarded, p.wrapped), (7, 0, false));
    // Resumed at the cursor: 13 messages are left to look at, 4 calls of 4 take them all.
    let mut passes = Vec::new();
    loop {
        let p = e.scan_expired(&mut cursor, 2000, 4, &all);
        passes.push(p);
        if p.wrapped {
            break;
        }
        assert!(passes.len() < 10, "the scan never ends: {passes:?}");
    }
    let examined: usize = passes.iter().map(|p| p.examined).sum();
    let discarded: usize = passes.iter().map(|p| p.discarded).sum();
    assert!(passes.iter().all(|p| p.examined <= 4), "{passes:?}");
    assert_eq!(examined, 13, "{passes:?}");
    // The expiring messages the first call looked at before their time (m0, m2, m4 and m6 on
    // Q1) are behind the cursor: the next pass from the start takes them.
    let p = e.scan_expired(&mut cursor, 2000, 100, &all);
    assert!(p.wrapped);
    assert_eq!(discarded + p.discarded, 10, "{passes:?} then {p:?}");
    assert_eq!((depth(&e, "Q1"), depth(&e, "Q2")), (5, 5));
    // A selection limits the scan to the queues it accepts.
    let h = open_io(&mut e, c, "Q1");
    put_expiring(&mut e, h, 20, 10);
    let h2 = open_io(&mut e, c, "Q2");
    put_expiring(&mut e, h2, 22, 10);
    let p = e.scan_expired(&mut Default::default(), 5000, 100, &|q: &str| q == "Q2");
    assert_eq!((p.discarded, depth(&e, "Q1"), depth(&e, "Q2")), (1, 6, 5));
}

#[test]
fn a_get_returns_the_expiry_left_in_tenths_rounded_up() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    for body in ["a", "b"] {
        let m = MessageDescriptor {
            expiry: 100, // ten seconds
            ..md(false)
        };
        e.put(
            c,
            h,
            &PutOptions::default(),
            m,
            Properties::default(),
            Bytes::from(body),
            1000,
        )
        .unwrap();
    }
    let at = |e: &mut Engine, now: u64| match e.get(c, h, &GetOptions::any(), 1, now).unwrap() {
        GetOutcome::Got(g, _) => g.md.expiry,
        GetOutcome::Waiting(_) => panic!("unexpected wait"),
    };
    assert_eq!(at(&mut e, 3450), 76, "7.55 s left");
    assert_eq!(at(&mut e, 10_999), 1, "1 ms left still shows as 1");
}

#[test]
fn too_long_message_fails_or_truncates_as_asked() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "0123456789", false, false);
    let small = GetOptions {
        max_len: 4,
        ..GetOptions::any()
    };
    assert_eq!(
        get(&mut e, c, h, small.clone()).unwrap_err().reason,
        Reason::TRUNCATED_MSG_FAILED
    );
    let g = get(
        &mut e,
        c,
        h,
        GetOptions {
            accept_truncated: true,
            ..small
        },
    )
    .unwrap();
    assert_eq!(
        (body(&g).as_str(), g.data_len, g.reason),
        ("0123", 10, Reason::TRUNCATED_MSG_ACCEPTED)
    );
}

#[test]
fn browse_walks_the_queue_without_removing() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    for s in ["a", "b", "c"] {
        put(&mut e, c, h, s, false, false);
    }
    let first = GetOptions {
        browse: Browse::First,
        ..GetOptions::any()
    };
    let next = GetOptions {
        browse: Browse::Next,
        ..GetOptions::any()
    };
    let seen: Vec<String> = std::iter::once(get(&mut e, c, h, first).unwrap())
        .chain(std::iter::from_fn(|| get(&mut e, c, h, next.clone()).ok()))
        .map(|g| body(&g))
        .collect();
    assert_eq!(seen, ["a", "b", "c"]);
    assert_eq!(e.queue_status("Q1").unwrap().cur_depth, 3);
}

#[test]
fn temporary_dynamic_queue_disappears_on_close() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let (h, name, _) = e
        .open(
            c,
            "SYSTEM.DEFAULT.MODEL.QUEUE",
            "",
            open::INPUT_EXCLUSIVE | open::OUTPUT,
            "REPLY.*",
        )
        .unwrap();
    assert!(name.starts_with("REPLY."), "{name}");
    assert!(e.queue_def(&name).is_some());
    let r = e.put(
        c,
        h,
        &PutOptions::default(),
        md(true),
        Properties::default(),
        Bytes::new(),
        0,
    );
    assert_eq!(r.unwrap_err().reason, Reason::PERSISTENT_NOT_ALLOWED);
    e.close(c, h, close::NONE, 0).unwrap();
    assert!(e.queue_def(&name).is_none());
}

#[test]
fn disconnect_backs_out_the_unit_of_work() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "kept", true, false);
    get(
        &mut e,
        c,
        h,
        GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        },
    )
    .unwrap();
    put(&mut e, c, h, "dropped", true, true);
    e.disconnect(c, 0);
    let c2 = e.connect("u", "app");
    let h2 = open_io(&mut e, c2, "Q1");
    assert_eq!(
        body(&get(&mut e, c2, h2, GetOptions::any()).unwrap()),
        "kept"
    );
    assert_eq!(
        get(&mut e, c2, h2, GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
}

#[test]
fn a_commit_that_cannot_be_logged_is_backed_out() {
    let (mut e, log) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "p", true, true);
    log.0.lock().unwrap().fail_with = Some(Reason::RESOURCE_PROBLEM);
    assert_eq!(e.commit(c, 0).unwrap_err().reason, Reason::BACKED_OUT);
    log.0.lock().unwrap().fail_with = None;
    assert_eq!(
        get(&mut e, c, h, GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE
    );
}

/// Each queue's persistent messages as (seq, body, backout count).
type State = Vec<(String, Vec<(u64, Vec<u8>, u32)>)>;

/// The persistent content of an engine, for comparing two of them.
fn persistent_state(e: &Engine) -> State {
    let img = e.checkpoint_image(0);
    let mut out: State = img
        .queues
        .iter()
        .map(|q| {
            let mut msgs: Vec<_> = img
                .messages
                .iter()
                .filter(|m| *m.queue == *q.name)
                .map(|m| (m.msg.seq, m.msg.body.to_vec(), m.backout_count))
                .collect();
            msgs.sort();
            (q.name.clone(), msgs)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn replaying_the_log_rebuilds_the_persistent_state() {
    let (mut e, log) = engine();
    e.define_queue(QueueDef::local("Q2"), false).unwrap();
    let c = e.connect("u", "app");
    let h1 = open_io(&mut e, c, "Q1");
    let h2 = open_io(&mut e, c, "Q2");
    for i in 0..20 {
        put(&mut e, c, h1, &format!("p{i}"), true, i % 2 == 0);
        put(&mut e, c, h2, &format!("np{i}"), false, false);
        if i % 3 == 0 {
            e.commit(c, 0).unwrap();
        }
    }
    e.commit(c, 0).unwrap();
    for _ in 0..5 {
        get(
            &mut e,
            c,
            h1,
            GetOptions {
                syncpoint: Syncpoint::Yes,
                ..GetOptions::any()
            },
        )
        .unwrap();
    }
    e.commit(c, 0).unwrap();
    get(&mut e, c, h1, GetOptions::any()).unwrap();
    // In flight at the "crash": must not survive.
    put(&mut e, c, h1, "uncommitted", true, true);
    get(
        &mut e,
        c,
        h1,
        GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        },
    )
    .unwrap();

    let records = log.0.lock().unwrap().records.clone();
    let mut r = Engine::restore(cfg(), Box::new(MemoryLog::default()), Image::default())
        .expect("the image restores");
    for (k, p) in records {
        r.replay(k, Bytes::from(p)).unwrap();
    }
    e.disconnect(c, 0); // backs out the in-flight work in the original too
                        // Backout counts are not hardened in the log (as MQ's HARDENBO(NO)): compare without them.
    let strip = |s: State| {
        s.into_iter()
            .map(|(n, m)| (n, m.into_iter().map(|(a, b, _)| (a, b)).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
    };
    let expect = persistent_state(&e);
    assert_eq!(strip(persistent_state(&r)), strip(expect.clone()));
    let q1 = &expect.iter().find(|(n, _)| n == "Q1").unwrap().1;
    assert_eq!(q1.len(), 14, "20 put, 6 got");
    assert!(
        expect.iter().find(|(n, _)| n == "Q2").unwrap().1.is_empty(),
        "non-persistent messages are not logged"
    );
}

#[test]
fn a_checkpoint_image_plus_later_records_equals_the_live_state() {
    let (mut e, log) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    for i in 0..10 {
        put(&mut e, c, h, &format!("a{i}"), true, false);
    }
    // A get in flight while the image is taken: the image must still hold the message.
    get(
        &mut e,
        c,
        h,
        GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        },
    )
    .unwrap();
    let image = e.checkpoint_image(0);
    let mark = log.0.lock().unwrap().records.len();
    e.commit(c, 0).unwrap();
    for i in 0..5 {
        put(&mut e, c, h, &format!("b{i}"), true, false);
    }
    let later: Vec<_> = log.0.lock().unwrap().records[mark..].to_vec();
    let mut r =
        Engine::restore(cfg(), Box::new(MemoryLog::default()), image).expect("the image restores");
    for (k, p) in later {
        r.replay(k, Bytes::from(p)).unwrap();
    }
    assert_eq!(persistent_state(&r), persistent_state(&e));
}

#[test]
fn an_image_with_two_messages_of_one_sequence_number_is_refused_as_damaged() {
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "first", true, false);
    put(&mut e, c, h, "second", true, false);
    let mut image = e.checkpoint_image(0);
    assert_eq!(image.messages.len(), 2);
    // Damage that a checksum cannot see: the first message listed twice.
    image.messages[1].msg = image.messages[0].msg.clone();
    let Err(err) = Engine::restore(cfg(), Box::new(MemoryLog::default()), image) else {
        panic!("a damaged image is refused");
    };
    assert_eq!(err.reason, ferrymq_types::Reason::OBJECT_DAMAGED);
    assert!(err.message.contains("Q1"), "{}", err.message);
}

#[test]
fn a_consumer_receives_one_message_per_credit_and_no_more() {
    let (mut e, _) = engine();
    let c = e.connect("u", "consumer");
    let h = open_io(&mut e, c, "Q1");
    for i in 0..5 {
        put(&mut e, c, h, &format!("m{i}"), false, false);
    }
    e.register_consumer(c, h, &GetOptions::any(), 77).unwrap();
    assert!(e.take_deliveries().is_empty(), "no credit, no push");
    e.add_credit(c, h, 2, 0);
    let d = e.take_deliveries();
    assert_eq!(
        d.iter()
            .map(|d| (d.token, body(d.result.as_ref().unwrap())))
            .collect::<Vec<_>>(),
        [(77, "m0".into()), (77, "m1".into())]
    );
    e.add_credit(c, h, 10, 0);
    assert_eq!(e.take_deliveries().len(), 3, "the rest, then it waits");
    // Arrivals are pushed while credit lasts.
    let p = e.connect("u", "producer");
    let hp = open_io(&mut e, p, "Q1");
    for i in 0..3 {
        put(&mut e, p, hp, &format!("late{i}"), false, false);
    }
    let d = e.take_deliveries();
    assert_eq!(d.len(), 3);
    assert_eq!(body(d[2].result.as_ref().unwrap()), "late2");
    assert_eq!(e.queue_status("Q1").unwrap().cur_depth, 0);
}

#[test]
fn a_consumer_under_syncpoint_is_never_ahead_so_a_commit_never_takes_unseen_messages() {
    let (mut e, _) = engine();
    let c = e.connect("u", "consumer");
    let h = open_io(&mut e, c, "Q1");
    for i in 0..3 {
        put(&mut e, c, h, &format!("m{i}"), false, false);
    }
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    e.register_consumer(c, h, &opts, 5).unwrap();
    e.add_credit(c, h, 10, 0);
    let d = e.take_deliveries();
    assert_eq!(d.len(), 1, "one message at a time under syncpoint");
    assert_eq!(body(d[0].result.as_ref().unwrap()), "m0");
    e.commit(c, 0).unwrap();
    assert_eq!(
        e.queue_status("Q1").unwrap().cur_depth,
        2,
        "only m0 was committed"
    );
    // A backout returns the delivered message, which comes again with its count raised.
    e.add_credit(c, h, 1, 0);
    assert_eq!(e.take_deliveries().len(), 1);
    e.backout(c, 0).unwrap();
    e.add_credit(c, h, 1, 0);
    let d = e.take_deliveries();
    let got = d[0].result.as_ref().unwrap();
    assert_eq!((body(got).as_str(), got.md.backout_count), ("m1", 1));
}

/// A connection that ends without MQDISC backs out its unit of work; the messages that come
/// back must not be taken again by the connection's own waiting consumer, whose unit of work
/// ends with it.
#[test]
fn a_dropped_connection_does_not_hand_its_backed_out_messages_to_its_own_consumer() {
    let (mut e, _) = engine();
    let c = e.connect("u", "consumer");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "only", true, false);
    let opts = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    e.register_consumer(c, h, &opts, 5).unwrap();
    e.add_credit(c, h, 1, 0);
    assert_eq!(e.take_deliveries().len(), 1);
    // The application asks for the next message: the queue is empty, the consumer waits.
    e.add_credit(c, h, 1, 0);
    assert!(e.take_deliveries().is_empty());
    e.disconnect(c, 0);
    let other = e.connect("u", "other");
    let h2 = open_io(&mut e, other, "Q1");
    let got =
        get(&mut e, other, h2, GetOptions::any()).expect("the backed-out message is on the queue");
    assert_eq!((body(&got).as_str(), got.md.backout_count), ("only", 1));
}

#[test]
fn a_persistent_message_pushed_to_a_consumer_is_logged_as_got_before_the_push() {
    let (mut e, log) = engine();
    let c = e.connect("u", "consumer");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "p", true, false);
    let before = log.0.lock().unwrap().records.len();
    e.register_consumer(c, h, &GetOptions::any(), 5).unwrap();
    e.add_credit(c, h, 1, 0);
    let d = e.take_deliveries();
    assert_eq!(d.len(), 1);
    assert_eq!(
        log.0.lock().unwrap().records.len(),
        before + 1,
        "the removal is logged"
    );
    assert_eq!(
        d[0].wait_lsn,
        before as u64 + 1,
        "the push waits for that record to be durable"
    );
}

#[test]
fn a_consumer_on_a_handle_not_open_for_input_is_refused() {
    let (mut e, _) = engine();
    let c = e.connect("u", "consumer");
    let (h, _, _) = e.open(c, "Q1", "", open::OUTPUT, "").unwrap();
    assert_eq!(
        e.register_consumer(c, h, &GetOptions::any(), 1)
            .unwrap_err()
            .reason,
        Reason::NOT_OPEN_FOR_INPUT
    );
}

#[test]
fn waits_run_out_at_their_deadline_and_answered_waits_leave_no_deadline_behind() {
    let (mut e, _) = engine();
    let a = e.connect("u", "a");
    let b = e.connect("u", "b");
    let ha = open_io(&mut e, a, "Q1");
    let hb = open_io(&mut e, b, "Q1");
    let wait = |ms| GetOptions {
        wait: Wait::Ms(ms),
        ..GetOptions::any()
    };
    assert!(matches!(
        e.get(a, ha, &wait(100), 1, 1_000).unwrap(),
        GetOutcome::Waiting(_)
    ));
    assert!(matches!(
        e.get(b, hb, &wait(500), 2, 1_000).unwrap(),
        GetOutcome::Waiting(_)
    ));
    assert_eq!(e.next_wait_deadline(), Some(1_100));
    // A message from a third connection answers the longest-waiting get (a's); only b's deadline
    // remains.
    let p = e.connect("u", "p");
    let hp = open_io(&mut e, p, "Q1");
    put(&mut e, p, hp, "m", false, false);
    let d = e.take_deliveries();
    assert_eq!(
        d.iter().map(|d| (d.conn, d.token)).collect::<Vec<_>>(),
        vec![(a, 1)]
    );
    assert!(e.expire_waits(1_099).is_empty());
    assert_eq!(e.next_wait_deadline(), Some(1_500));
    assert_eq!(e.expire_waits(1_500), vec![(b, 2)]);
    assert_eq!(e.next_wait_deadline(), None);
    assert!(e.expire_waits(10_000).is_empty(), "each wait runs out once");
}

#[test]
fn an_explicit_disconnect_commits_the_unit_of_work_as_mqdisc_does() {
    let (mut e, log) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    put(&mut e, c, h, "kept-by-mqdisc", true, true);
    let before = log.0.lock().unwrap().records.len();
    let lsn = e.disconnect_normally(c, 0).unwrap();
    assert_eq!(
        lsn,
        before as u64 + 1,
        "the reply waits for the commit record"
    );
    let c2 = e.connect("u", "app");
    let h2 = open_io(&mut e, c2, "Q1");
    assert_eq!(
        body(&get(&mut e, c2, h2, GetOptions::any()).unwrap()),
        "kept-by-mqdisc"
    );
}

#[test]
fn a_message_over_the_queue_managers_maxmsgl_gets_msg_too_big_for_q_mgr() {
    let (mut e, _) = engine();
    let mut q = QueueDef::local("BIG.OK");
    q.max_msg_len = 1_000;
    e.define_queue(q, false).unwrap();
    let mut attrs = e.attrs().clone();
    attrs.max_msg_len = 10;
    e.set_qmgr_attrs(attrs).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "BIG.OK");
    let err = e
        .put(
            c,
            h,
            &PutOptions::default(),
            md(false),
            Properties::default(),
            Bytes::from(vec![0u8; 11]),
            0,
        )
        .unwrap_err();
    assert_eq!(err.reason, Reason::MSG_TOO_BIG_FOR_Q_MGR);
    assert!(err.message.contains("MAXMSGL"), "{err}");
    e.put(
        c,
        h,
        &PutOptions::default(),
        md(false),
        Properties::default(),
        Bytes::from(vec![0u8; 10]),
        0,
    )
    .unwrap();
}

/// The persistent messages of an image as (queue, seq, body), in a fixed order.
fn image_messages(i: &Image) -> Vec<(String, u64, Bytes)> {
    let mut v: Vec<(String, u64, Bytes)> = i
        .messages
        .iter()
        .map(|m| (m.queue.to_string(), m.msg.seq, m.msg.body.clone()))
        .collect();
    v.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
    v
}

#[test]
fn a_dr_full_copy_applied_after_a_reset_rebuilds_the_same_state_and_order() {
    let (mut src, _) = engine();
    let c = src.connect("u", "app");
    let h = open_io(&mut src, c, "Q1");
    for i in 0..300 {
        put(&mut src, c, h, &format!("m{i:04}"), true, false);
    }
    put(&mut src, c, h, "not persistent", false, false);
    // A message taken by an unfinished unit of work is still on the queue as far as the log
    // knows, so the copy holds it.
    let got = get(
        &mut src,
        c,
        h,
        GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        },
    )
    .unwrap();
    assert_eq!(body(&got), "m0000");

    let (mut dst, dst_log) = engine();
    dst.define_queue(QueueDef::local("ONLY.ON.SECONDARY"), false)
        .unwrap();
    dst.log_dr_stream(5).unwrap();
    dst.dr_reset().unwrap();
    assert_eq!(dst.dr_state(), Default::default());
    for (k, p) in src.checkpoint_image(1000).copy_records() {
        dst.apply_shipped(k, p).unwrap();
    }
    let (a, b) = (src.checkpoint_image(1000), dst.checkpoint_image(1000));
    assert_eq!(a.queues, b.queues);
    assert_eq!(image_messages(&a), image_messages(&b));
    assert_eq!(b.messages.len(), 300);

    // What the secondary logged rebuilds it after a restart, too.
    let mut again = Engine::new(cfg(), Box::new(MemoryLog::default()));
    for (k, p) in dst_log.0.lock().unwrap().records.clone() {
        again.replay(k, Bytes::from(p)).unwrap();
    }
    assert_eq!(
        image_messages(&again.checkpoint_image(1000)),
        image_messages(&b)
    );
    assert!(again
        .checkpoint_image(1000)
        .queues
        .iter()
        .all(|q| q.name != "ONLY.ON.SECONDARY"));

    // Delivery order on the copy is the original one.
    let c2 = dst.connect("u", "app");
    let h2 = open_io(&mut dst, c2, "Q1");
    let first = get(&mut dst, c2, h2, GetOptions::any()).unwrap();
    assert_eq!(body(&first), "m0000");
    let second = get(&mut dst, c2, h2, GetOptions::any()).unwrap();
    assert_eq!(body(&second), "m0001");
}

#[test]
fn a_shipped_chunk_skips_messages_it_puts_and_removes_yet_ends_in_the_same_state() {
    // Request/reply-like traffic on the primary: messages put and got within the stream, under
    // syncpoint and outside it, some left on their queues, and a queue cleared in between.
    let (mut src, src_log) = engine();
    src.define_queue(QueueDef::local("Q2"), false).unwrap();
    let c = src.connect("u", "app");
    let h1 = open_io(&mut src, c, "Q1");
    let h2 = open_io(&mut src, c, "Q2");
    for i in 0..40 {
        put(&mut src, c, h1, &format!("a{i:03}"), true, i % 2 == 0);
        src.commit(c, 0).unwrap();
        if i % 3 != 0 {
            let sync = i % 4 == 0;
            let g = get(
                &mut src,
                c,
                h1,
                GetOptions {
                    syncpoint: if sync { Syncpoint::Yes } else { Syncpoint::No },
                    ..GetOptions::any()
                },
            )
            .unwrap();
            put(
                &mut src,
                c,
                h2,
                &format!("reply to {}", body(&g)),
                true,
                sync,
            );
            src.commit(c, 0).unwrap();
        }
    }
    for _ in 0..5 {
        get(&mut src, c, h2, GetOptions::any()).unwrap();
    }
    let records = src_log.0.lock().unwrap().records.clone();
    let shipped = || records.iter().map(|(k, p)| (*k, Bytes::from(p.clone())));

    // One record at a time (nothing can cancel) against the whole stream as one chunk.
    let (mut one, one_log) = engine();
    for (k, p) in shipped() {
        one.apply_shipped(k, p).unwrap();
    }
    let (mut chunk, chunk_log) = engine();
    chunk
        .apply_shipped_chunk(shipped().collect())
        .unwrap()
        .expect("records were logged");
    let (a, b) = (one.checkpoint_image(0), chunk.checkpoint_image(0));
    assert!(!a.messages.is_empty(), "some messages stay on their queues");
    assert_eq!(image_messages(&a), image_messages(&b));
    assert_eq!(image_messages(&a), image_messages(&src.checkpoint_image(0)));
    // Both logged every record, in order, so either restarts into this state.
    assert_eq!(
        one_log.0.lock().unwrap().records,
        chunk_log.0.lock().unwrap().records
    );
    // New messages on the secondary (after a promotion) do not reuse a skipped put's number.
    let newest = |e: &mut Engine| {
        let c = e.connect("u", "app");
        let h = open_io(e, c, "Q1");
        put(e, c, h, "after", true, false);
        image_messages(&e.checkpoint_image(0))
            .iter()
            .map(|m| m.1)
            .max()
    };
    assert_eq!(
        newest(&mut chunk),
        newest(&mut src),
        "the secondary numbers on from where the primary was"
    );
}

/// A get waiting for a complete group is answered with the group's first message when its last
/// one arrives, not with the message that arrived.
#[test]
fn a_get_waiting_for_a_whole_group_takes_its_first_message_when_the_last_arrives() {
    use ferrymq_types::descriptor::msg_flags;
    use ferrymq_types::options::gmo;
    let (mut e, _) = engine();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    let member = |seq: i32, last: bool| MessageDescriptor {
        group_id: [6; 24],
        msg_seq_number: seq,
        msg_flags: if last {
            msg_flags::LAST_MSG_IN_GROUP
        } else {
            msg_flags::MSG_IN_GROUP
        },
        ..md(false)
    };
    let put_member = |e: &mut Engine, seq, last| {
        let body = Bytes::from(format!("m{seq}"));
        e.put(
            c,
            h,
            &PutOptions::default(),
            member(seq, last),
            Properties::default(),
            body,
            1000,
        )
        .unwrap();
    };
    put_member(&mut e, 1, false);
    put_member(&mut e, 2, false);
    let getter = e.connect("u", "getter");
    let hg = open_io(&mut e, getter, "Q1");
    let opts = GetOptions {
        group_options: gmo::LOGICAL_ORDER | gmo::ALL_MSGS_AVAILABLE,
        wait: Wait::Unlimited,
        ..GetOptions::any()
    };
    assert!(matches!(
        e.get(getter, hg, &opts, 9, 1000).unwrap(),
        GetOutcome::Waiting(_)
    ));
    put_member(&mut e, 3, true);
    let d = e.take_deliveries();
    assert_eq!(d.len(), 1);
    let got = d[0].result.as_ref().unwrap();
    assert_eq!((body(got).as_str(), got.md.msg_seq_number), ("m1", 1));
    // The rest follow in order through the same handle.
    for want in ["m2", "m3"] {
        let g = get(
            &mut e,
            getter,
            hg,
            GetOptions {
                wait: Wait::NoWait,
                ..opts.clone()
            },
        )
        .unwrap();
        assert_eq!(body(&g), want);
    }
}

/// MQGMO_COMPLETE_MSG takes every segment of a logical message or none: a unit of work without
/// room for all of them is refused before the first is taken.
#[test]
fn a_whole_message_too_big_for_the_unit_of_work_leaves_every_segment_on_the_queue() {
    use ferrymq_types::descriptor::msg_flags;
    use ferrymq_types::options::gmo;
    let (mut e, _) = engine();
    let mut attrs = e.attrs().clone();
    attrs.max_uncommitted_msgs = 2;
    e.set_qmgr_attrs(attrs).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    let logical = PutOptions {
        logical_order: true,
        ..PutOptions::default()
    };
    for flags in [
        msg_flags::SEGMENT,
        msg_flags::SEGMENT,
        msg_flags::LAST_SEGMENT,
    ] {
        let md = MessageDescriptor {
            msg_flags: flags,
            ..md(false)
        };
        e.put(
            c,
            h,
            &logical,
            md,
            Properties::default(),
            Bytes::from("ab"),
            1000,
        )
        .unwrap();
    }
    let whole = GetOptions {
        syncpoint: Syncpoint::Yes,
        group_options: gmo::COMPLETE_MSG,
        ..GetOptions::any()
    };
    let err = get(&mut e, c, h, whole).unwrap_err();
    assert_eq!(err.reason, Reason::SYNCPOINT_LIMIT_REACHED);
    assert_eq!(e.queue_status("Q1").unwrap().cur_depth, 3);
    let got = get(
        &mut e,
        c,
        h,
        GetOptions {
            group_options: gmo::COMPLETE_MSG,
            ..GetOptions::any()
        },
    )
    .unwrap();
    assert_eq!(body(&got), "ababab");
}

/// Reports are written in their event's record: each event adds exactly one record, and replaying
/// the log (which never looks at the clock) rebuilds the reports with the messages.
#[test]
fn reports_are_logged_with_their_event_and_replay_with_it() {
    use ferrymq_types::options::{feedback, report};
    let (mut e, log) = engine();
    e.define_queue(QueueDef::local("REPLY"), false).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "Q1");
    let asking = MessageDescriptor {
        report: report::COA | report::COD | report::EXPIRATION,
        reply_to_q: "REPLY".into(),
        ..md(true)
    };
    let records = |log: &SharedLog| log.0.lock().unwrap().records.len();
    let before = records(&log);
    let put_asking = |e: &mut Engine, expiry: i32| {
        let md = MessageDescriptor {
            expiry,
            ..asking.clone()
        };
        e.put(
            c,
            h,
            &PutOptions::default(),
            md,
            Properties::default(),
            Bytes::from("m"),
            1000,
        )
        .unwrap();
    };
    put_asking(&mut e, -1);
    assert_eq!(records(&log), before + 1, "the put and its COA: one record");
    get(&mut e, c, h, GetOptions::any()).unwrap();
    assert_eq!(records(&log), before + 2, "the get and its COD: one record");
    put_asking(&mut e, 1);
    // A get 200 ms later finds it expired: its removal and the report, one record.
    let expired = e.get(c, h, &GetOptions::any(), 1, 1200);
    assert!(matches!(expired, Err(ref err) if err.reason == Reason::NO_MSG_AVAILABLE));
    assert_eq!(records(&log), before + 4);
    let r = open_io(&mut e, c, "REPLY");
    let mut fbs = Vec::new();
    let live = persistent_state(&e);
    while let Ok(g) = get(
        &mut e,
        c,
        r,
        GetOptions {
            browse: if fbs.is_empty() {
                Browse::First
            } else {
                Browse::Next
            },
            ..GetOptions::any()
        },
    ) {
        fbs.push(g.md.feedback);
    }
    assert_eq!(
        fbs,
        [
            feedback::COA,
            feedback::COD,
            feedback::COA,
            feedback::EXPIRATION
        ]
    );
    let mut replayed = Engine::restore(cfg(), Box::new(MemoryLog::default()), Image::default())
        .expect("the image restores");
    for (k, p) in log.0.lock().unwrap().records.clone() {
        replayed.replay(k, Bytes::from(p)).unwrap();
    }
    assert_eq!(persistent_state(&replayed), live);
}

/// A dead-lettered message keeps the time it expires at, whatever its descriptor's put time says
/// (MQPMO_NO_CONTEXT leaves it blank).
#[test]
fn a_dead_lettered_message_keeps_its_expiry_time() {
    let (mut e, _) = engine();
    let mut q = QueueDef::local("IN");
    q.backout_threshold = 1;
    e.define_queue(q, false).unwrap();
    let c = e.connect("u", "app");
    let h = open_io(&mut e, c, "IN");
    let opts = PutOptions {
        context: ferrymq_types::options::pmo::NO_CONTEXT,
        ..Default::default()
    };
    let expiring = MessageDescriptor {
        expiry: 50, // 5 s from the put at 1000 ms
        ..md(true)
    };
    e.put(
        c,
        h,
        &opts,
        expiring,
        Properties::default(),
        Bytes::from("x"),
        1000,
    )
    .unwrap();
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    get(&mut e, c, h, sp).unwrap();
    e.backout(c, 1000).unwrap();
    let d = open_io(&mut e, c, "SYSTEM.DEAD.LETTER.QUEUE");
    let at = |e: &mut Engine, now| {
        e.get(
            c,
            d,
            &GetOptions {
                browse: Browse::First,
                ..GetOptions::any()
            },
            1,
            now,
        )
    };
    assert!(at(&mut e, 5_900).is_ok(), "not expired before 6000 ms");
    assert!(at(&mut e, 6_000).is_err(), "expired at 6000 ms");
}

#[test]
fn a_replaced_engine_never_repeats_the_objects_version_of_the_one_it_replaces() {
    // Caches of compiled definitions (authority records, CHLAUTH rules) are keyed on the objects
    // version; an HA instance restores its engine at start and swaps it for another restored one
    // when it installs a snapshot.
    let (mut a, _) = engine();
    a.install_defaults().unwrap();
    let image = a.checkpoint_image(0);
    let b = Engine::restore(cfg(), Box::new(MemoryLog::default()), image.clone()).unwrap();
    let c = Engine::restore(cfg(), Box::new(MemoryLog::default()), image).unwrap();
    assert_ne!(b.objects_version(), c.objects_version());
    assert_ne!(a.objects_version(), b.objects_version());
}

/// A get under syncpoint reveals nothing a crash could keep: it is answered without waiting for
/// the message's put record, and the unit of work's commit waits for it (and for its own record,
/// later in the log). A browse and a get outside syncpoint hand the message out for good, so they
/// wait for the put's record (and the get for its own).
#[test]
fn a_get_under_syncpoint_is_answered_at_once_and_its_commit_waits_for_the_put() {
    let (mut e, _) = engine();
    let producer = e.connect("u", "producer");
    let hp = open_io(&mut e, producer, "Q1");
    put(&mut e, producer, hp, "a", true, true);
    put(&mut e, producer, hp, "b", true, true);
    let put_lsn = e.commit(producer, 1000).unwrap();
    assert!(put_lsn > 0, "a persistent commit is logged");

    let consumer = e.connect("u", "consumer");
    let hc = open_io(&mut e, consumer, "Q1");
    let browse = GetOptions {
        browse: Browse::First,
        ..GetOptions::any()
    };
    match e.get(consumer, hc, &browse, 1, 1000).unwrap() {
        GetOutcome::Got(_, lsn) => assert_eq!(lsn, put_lsn, "a browse waits for the put"),
        GetOutcome::Waiting(_) => panic!("the message is there"),
    }
    let in_uow = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    match e.get(consumer, hc, &in_uow, 1, 1000).unwrap() {
        GetOutcome::Got(g, lsn) => {
            assert_eq!(body(&g), "a");
            assert_eq!(lsn, 0, "a get under syncpoint is answered at once");
        }
        GetOutcome::Waiting(_) => panic!("the message is there"),
    }
    let commit_lsn = e.commit(consumer, 1000).unwrap();
    assert!(
        commit_lsn > put_lsn,
        "the commit ({commit_lsn}) waits for the get's record, after the put's ({put_lsn})"
    );

    match e.get(consumer, hc, &GetOptions::any(), 1, 1000).unwrap() {
        GetOutcome::Got(g, lsn) => {
            assert_eq!(body(&g), "b");
            assert!(
                lsn > commit_lsn,
                "a get outside syncpoint waits for its own record ({lsn})"
            );
        }
        GetOutcome::Waiting(_) => panic!("the message is there"),
    }

    // A getter waiting under syncpoint is pushed the next message at once too; its unit of work
    // with nothing else in it still commits no earlier than the put.
    let waiting = GetOptions {
        wait: Wait::Ms(60_000),
        ..in_uow
    };
    assert!(matches!(
        e.get(consumer, hc, &waiting, 7, 1000).unwrap(),
        GetOutcome::Waiting(_)
    ));
    let c_put = e
        .put(
            producer,
            hp,
            &PutOptions::default(),
            md(true),
            Properties::default(),
            Bytes::from_static(b"c"),
            1000,
        )
        .unwrap()
        .wait_lsn;
    assert!(
        c_put > commit_lsn,
        "a persistent put outside syncpoint is logged"
    );
    let d = e.take_deliveries();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].wait_lsn, 0, "the push under syncpoint does not wait");
    assert!(e.commit(consumer, 1000).unwrap() > c_put);
}
