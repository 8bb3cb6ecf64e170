//! Publish/subscribe in the engine alone: a publication's copies are one record (all or none;
//! a Publish record with the body once, or, in logs written before it, a Commit with the body
//! in every copy), replay rebuilds durable subscriptions and their publications, and a delivery
//! rule that cannot be met delivers nothing.

use bytes::Bytes;
use ferrymq_engine::pubsub::SubRequest;
use ferrymq_engine::records::{kind, Record};
use ferrymq_engine::{Engine, GetOutcome};
use ferrymq_types::options::{open, sub, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, ObjectKind, Persistence, Properties, QueueDef, Reason};

mod common;

use common::{cfg, SharedLog};

fn engine() -> (Engine, SharedLog) {
    let log = SharedLog::default();
    let mut e = Engine::new(cfg(), Box::new(log.clone()));
    e.install_defaults().unwrap();
    let mut q = QueueDef::local("Q1");
    q.max_depth = 1;
    e.define_queue(q, false).unwrap();
    (e, log)
}

fn persistent() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

fn subscribe(e: &mut Engine, c: u64, name: &str, dest: &str) -> String {
    let managed = dest.is_empty();
    e.subscribe(
        c,
        &SubRequest {
            topic: "t/#".into(),
            name: name.into(),
            options: sub::CREATE | sub::DURABLE | if managed { sub::MANAGED } else { 0 },
            dest: dest.into(),
            ..Default::default()
        },
        1000,
    )
    .unwrap()
    .queue
}

fn depth(e: &Engine, q: &str) -> u32 {
    e.queue_status(q).unwrap().cur_depth
}

#[test]
fn a_publication_is_one_record_with_its_body_once_and_replays_to_every_durable_subscription() {
    let (mut e, log) = engine();
    let c = e.connect("app", "test");
    let queues = [
        subscribe(&mut e, c, "S1", ""),
        subscribe(&mut e, c, "S2", ""),
        subscribe(&mut e, c, "S3", "Q1"),
    ];
    let before = log.0.lock().unwrap().records.len();
    e.put1_topic(
        c,
        "",
        "t/x",
        &PutOptions::default(),
        persistent(),
        Properties::default(),
        Bytes::from_static(b"news of the day"),
        2000,
    )
    .unwrap();
    let recs = log.0.lock().unwrap().records[before..].to_vec();
    assert_eq!(recs.len(), 1, "one record for the whole publication");
    let (k, payload) = &recs[0];
    assert_eq!(*k, kind::PUBLISH);
    let bodies = payload
        .windows(b"news of the day".len())
        .filter(|w| *w == b"news of the day")
        .count();
    assert_eq!(
        bodies, 1,
        "the body is logged once, not once per subscriber"
    );
    let Record::Commit { puts, gets } = Record::decode(*k, Bytes::from(payload.clone())).unwrap()
    else {
        panic!("not a commit");
    };
    assert!(gets.is_empty());
    let mut to: Vec<&str> = puts.iter().map(|p| p.queue.as_str()).collect();
    to.sort();
    let mut want: Vec<&str> = queues.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(to, want);

    // Replaying the log (as restart, an HA replica or a DR site does) rebuilds the
    // subscriptions, their queues and the copies.
    let mut r = Engine::new(cfg(), Box::new(SharedLog::default()));
    for (k, p) in log.0.lock().unwrap().records.iter() {
        r.replay(*k, Bytes::from(p.clone())).unwrap();
    }
    for q in &queues {
        assert_eq!(depth(&r, q), 1, "{q}");
    }
    assert!(r.object(ObjectKind::Sub, "S2").is_some());
    let c2 = r.connect("app", "test");
    r.put1_topic(
        c2,
        "",
        "t/y",
        &PutOptions::default(),
        persistent(),
        Properties::default(),
        Bytes::new(),
        3000,
    )
    .unwrap_err(); // Q1 (MAXDEPTH 1) is full and S3 is durable: PMSGDLV(ALLDUR) refuses.
    assert_eq!(
        depth(&r, &queues[0]),
        1,
        "nothing delivered when the rule fails"
    );
}

#[test]
fn a_log_written_before_publish_records_replays_its_commit_per_publication() {
    // Before `kind::PUBLISH`, a publication was a Commit record with one full put per copy:
    // such a log, as an older queue manager wrote it, must replay to the same queues.
    let (mut e, log) = engine();
    let c = e.connect("app", "test");
    let queues = [
        subscribe(&mut e, c, "S1", ""),
        subscribe(&mut e, c, "S2", ""),
    ];
    let mut records = log.0.lock().unwrap().records.clone();
    let next_seq = 1_000_000;
    let puts: Vec<ferrymq_engine::records::PutRec> = queues
        .iter()
        .enumerate()
        .map(|(i, q)| ferrymq_engine::records::PutRec {
            queue: q.clone(),
            seq: next_seq + i as u64,
            md: persistent(),
            props: Properties::default(),
            expires_at_ms: None,
            body: Bytes::from_static(b"old news"),
        })
        .collect();
    let mut b = bytes::BytesMut::new();
    let k = Record::Commit {
        puts,
        gets: Vec::new(),
    }
    .encode_small(&mut b);
    assert_eq!(k, kind::COMMIT);
    records.push((k, b.to_vec()));

    let mut r = Engine::new(cfg(), Box::new(SharedLog::default()));
    for (k, p) in &records {
        r.replay(*k, Bytes::from(p.clone())).unwrap();
    }
    let c2 = r.connect("app", "test");
    for q in &queues {
        assert_eq!(depth(&r, q), 1, "{q}");
        let h = r.open(c2, q, "", open::INPUT_SHARED, "").unwrap().0;
        let GetOutcome::Got(g, _) = r.get(c2, h, &GetOptions::any(), 1, 2000).unwrap() else {
            panic!("no publication on {q}");
        };
        assert_eq!(&g.body[..], b"old news");
    }
}

#[test]
fn a_publication_the_log_refuses_reaches_no_subscriber() {
    let (mut e, log) = engine();
    let c = e.connect("app", "test");
    let q1 = subscribe(&mut e, c, "S1", "");
    let q2 = subscribe(&mut e, c, "S2", "");
    log.0.lock().unwrap().fail_with = Some(Reason::RESOURCE_PROBLEM);
    let err = e
        .put1_topic(
            c,
            "",
            "t/x",
            &PutOptions::default(),
            persistent(),
            Properties::default(),
            Bytes::from_static(b"lost"),
            2000,
        )
        .unwrap_err();
    assert_eq!(err.reason, Reason::RESOURCE_PROBLEM);
    log.0.lock().unwrap().fail_with = None;
    assert_eq!((depth(&e, &q1), depth(&e, &q2)), (0, 0));
    // The queues take the next publication as usual (nothing was left counted as in flight).
    e.put1_topic(
        c,
        "",
        "t/x",
        &PutOptions::default(),
        persistent(),
        Properties::default(),
        Bytes::from_static(b"ok"),
        2000,
    )
    .unwrap();
    let h = e.open(c, &q1, "", open::INPUT_SHARED, "").unwrap().0;
    let GetOutcome::Got(g, _) = e.get(c, h, &GetOptions::any(), 1, 2000).unwrap() else {
        panic!("no publication");
    };
    assert_eq!(&g.body[..], b"ok");
}

#[test]
fn a_subscription_to_a_remote_queue_sends_its_copies_through_the_transmission_queue() {
    use ferrymq_types::xqh::TransmissionHeader;
    use ferrymq_types::QueueKind;
    let (mut e, _log) = engine();
    let mut xq = QueueDef::local("QM2.XMIT");
    xq.is_xmitq = true;
    e.define_queue(xq, false).unwrap();
    e.define_queue(
        QueueDef::new(
            "TO.QM2",
            QueueKind::Remote {
                rname: "FEED.IN".into(),
                rqmname: "QM2".into(),
                xmitq: "QM2.XMIT".into(),
            },
        ),
        false,
    )
    .unwrap();
    let c = e.connect("app", "test");
    subscribe(&mut e, c, "FEED", "TO.QM2");
    e.put1_topic(
        c,
        "",
        "t/remote",
        &PutOptions::default(),
        persistent(),
        Properties::default(),
        Bytes::from_static(b"far away"),
        2000,
    )
    .unwrap();
    let h = e.open(c, "QM2.XMIT", "", open::INPUT_SHARED, "").unwrap().0;
    let GetOutcome::Got(g, _) = e.get(c, h, &GetOptions::any(), 1, 2000).unwrap() else {
        panic!("nothing on the transmission queue");
    };
    let (xqh, data) = TransmissionHeader::parse(&g.body).expect("a transmission header");
    assert_eq!(
        (xqh.remote_q.as_str(), xqh.remote_qmgr.as_str()),
        ("FEED.IN", "QM2")
    );
    assert_eq!(data, b"far away");
}

#[test]
fn a_queue_manager_made_before_publish_subscribe_gets_its_system_queues_when_needed() {
    // No SYSTEM.DURABLE.MODEL.QUEUE, SYSTEM.NDURABLE.MODEL.QUEUE or SYSTEM.RETAINED.PUB.QUEUE,
    // and no SYSTEM.BASE.TOPIC attributes: the defaults apply and the queues are defined (and
    // logged) the first time they are needed.
    let log = SharedLog::default();
    let mut e = Engine::new(cfg(), Box::new(log.clone()));
    let c = e.connect("app", "test");
    let q = subscribe(&mut e, c, "OLD.SUB", "");
    assert!(e.queue_def("SYSTEM.DURABLE.MODEL.QUEUE").is_some());
    let retain = PutOptions {
        pubsub: ferrymq_types::options::pmo::RETAIN,
        ..PutOptions::default()
    };
    e.put1_topic(
        c,
        "",
        "t/old",
        &retain,
        persistent(),
        Properties::default(),
        Bytes::from_static(b"kept"),
        2000,
    )
    .unwrap();
    assert_eq!(depth(&e, "SYSTEM.RETAINED.PUB.QUEUE"), 1);
    assert_eq!(depth(&e, &q), 1);
    let mut r = Engine::new(cfg(), Box::new(SharedLog::default()));
    for (k, p) in log.0.lock().unwrap().records.iter() {
        r.replay(*k, Bytes::from(p.clone())).unwrap();
    }
    assert_eq!(depth(&r, "SYSTEM.RETAINED.PUB.QUEUE"), 1);
    assert_eq!(depth(&r, &q), 1);
}

#[test]
fn mqso_alter_changes_a_durable_subscriptions_user_data_and_expiry_but_not_its_topic() {
    let (mut e, log) = engine();
    let c = e.connect("app", "test");
    subscribe(&mut e, c, "ALT", "");
    e.disconnect(c, 1500);
    let c = e.connect("app", "test");
    let alter = |topic: &str, user_data: &str| SubRequest {
        topic: topic.into(),
        name: "ALT".into(),
        options: sub::ALTER | sub::DURABLE | sub::MANAGED,
        user_data: user_data.into(),
        expiry: 6000,
        ..Default::default()
    };
    let moved = e.subscribe(c, &alter("other/#", "x"), 2000).unwrap_err();
    assert_eq!(moved.reason, Reason::OPTIONS_ERROR, "{moved}");
    e.subscribe(c, &alter("t/#", "new data"), 2000).unwrap();
    let find = |e: &mut Engine| {
        e.subscriptions()
            .into_iter()
            .find(|s| s.sub.name == "ALT")
            .unwrap()
            .sub
    };
    let s = find(&mut e);
    assert_eq!((s.user_data.as_str(), s.expiry), ("new data", 6000));
    // The new attributes are the subscription's definition in the log: replay keeps them.
    let mut back = Engine::new(cfg(), Box::new(SharedLog::default()));
    for (k, p) in log.0.lock().unwrap().records.iter() {
        back.replay(*k, Bytes::from(p.clone())).unwrap();
    }
    let s = find(&mut back);
    assert_eq!((s.user_data.as_str(), s.expiry), ("new data", 6000));
}

#[test]
fn character_wildcards_match_across_levels_and_survive_replay() {
    let (mut e, log) = engine();
    let c = e.connect("app", "test");
    let mut made = Vec::new();
    for (name, pattern) in [("FOOT", "sport/foot*"), ("ONE", "a/b?")] {
        let q = e
            .subscribe(
                c,
                &SubRequest {
                    topic: pattern.into(),
                    name: name.into(),
                    options: sub::CREATE | sub::DURABLE | sub::MANAGED | sub::WILDCARD_CHAR,
                    ..Default::default()
                },
                1000,
            )
            .unwrap()
            .queue;
        made.push(q);
    }
    let both = e
        .subscribe(
            c,
            &SubRequest {
                topic: "x".into(),
                name: "BOTH".into(),
                options: sub::CREATE | sub::DURABLE | sub::WILDCARD_CHAR | sub::WILDCARD_TOPIC,
                dest: "Q1".into(),
                ..Default::default()
            },
            1000,
        )
        .unwrap_err();
    assert_eq!(both.reason, Reason::OPTIONS_ERROR);
    for topic in [
        "sport/football",
        "sport/football/scores",
        "sport/rugby",
        "a/bc",
        "a/b",
        "a/bcd",
    ] {
        e.put1_topic(
            c,
            "",
            topic,
            &PutOptions::default(),
            persistent(),
            Properties::default(),
            Bytes::from(topic.to_string()),
            2000,
        )
        .unwrap();
    }
    assert_eq!((depth(&e, &made[0]), depth(&e, &made[1])), (2, 1));
    // The subscriptions' kind of wildcard is part of their object: replay keeps it.
    let mut r = Engine::new(cfg(), Box::new(SharedLog::default()));
    for (k, p) in log.0.lock().unwrap().records.iter() {
        r.replay(*k, Bytes::from(p.clone())).unwrap();
    }
    let c2 = r.connect("app", "test");
    r.put1_topic(
        c2,
        "",
        "sport/footgolf",
        &PutOptions::default(),
        persistent(),
        Properties::default(),
        Bytes::new(),
        3000,
    )
    .unwrap();
    assert_eq!((depth(&r, &made[0]), depth(&r, &made[1])), (3, 1));
}
