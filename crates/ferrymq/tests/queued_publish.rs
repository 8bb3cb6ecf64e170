//! The queued publish interface against the real binary: a message put on a stream queue is
//! published under the stream's topic and its `MQTopicString` property, once, with its body and
//! properties, and a kill -9 while the queue manager works through a stream neither loses nor
//! repeats a publication.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue, Reason};
use support::{mqsc, Home, Qm};

const SETUP: &str = "DEFINE TOPIC(SYSTEM.FTE) TOPICSTR('SYSTEM.FTE')\n\
     DEFINE QLOCAL(SYSTEM.FTE) DEFPSIST(YES) MAXDEPTH(100000)\n\
     DEFINE QLOCAL(QP.LOG) MAXDEPTH(100000)\n\
     DEFINE SUB(QP.SUB) TOPICOBJ(SYSTEM.FTE) TOPICSTR('Log/#') DEST(QP.LOG)\n";

fn put_on_stream(c: &Connection, below: Option<&str>, body: &str) {
    put_on_stream_with(c, below, body, &PutOptions::default());
}

fn put_on_stream_with(c: &Connection, below: Option<&str>, body: &str, opts: &PutOptions) {
    let mut props = Properties::default();
    if let Some(t) = below {
        props.set("MQTopicString", PropertyValue::String(t.to_string()));
    }
    props.set("app", PropertyValue::String("test".into()));
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    c.put1(
        "SYSTEM.FTE",
        &md,
        &props,
        Bytes::from(body.to_string()),
        opts,
    )
    .unwrap_or_else(|e| panic!("put '{body}' on the stream: {e}"));
}

fn depth(home: &Home, qm: &str, q: &str) -> u64 {
    let out = mqsc(home, qm, &format!("DISPLAY QLOCAL({q}) CURDEPTH\n"));
    out.split("CURDEPTH(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no CURDEPTH in:\n{out}"))
}

/// Waits (bounded) until the stream queue is empty.
fn wait_drained(home: &Home, qm: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    while depth(home, qm, "SYSTEM.FTE") > 0 {
        assert!(
            Instant::now() < until,
            "the stream queue was not published from within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every message on QP.LOG: body -> (count, topic property).
fn published(c: &Connection) -> HashMap<String, (u32, String)> {
    let h = c.open("QP.LOG", open::INPUT_SHARED).unwrap();
    let mut out: HashMap<String, (u32, String)> = HashMap::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                let topic = match m.props.get("MQTopicString") {
                    Some(PropertyValue::String(t)) => t.clone(),
                    _ => String::new(),
                };
                assert_eq!(
                    m.props.get("app"),
                    Some(&PropertyValue::String("test".into())),
                    "the message's own properties travel with the publication"
                );
                let body = String::from_utf8_lossy(&m.body);
                let id = body.split('|').next().unwrap_or("").to_string();
                let e = out.entry(id).or_insert((0, topic));
                e.0 += 1;
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return out,
            Err(e) => panic!("get from QP.LOG: {e}"),
        }
    }
}

#[test]
fn a_message_on_a_stream_queue_is_published_below_the_streams_topic() {
    let home = Home::new();
    let qm = Qm::start(&home, "QPUB1", &[]);
    mqsc(&home, "QPUB1", SETUP);
    let c = qm.connect();
    put_on_stream(&c, Some("Log/agentA/t1"), "started");
    put_on_stream(&c, Some("Log/agentA/t1"), "completed");
    // Not below Log/: published, but the subscription does not match it.
    put_on_stream(&c, Some("Agents/agentA"), "status");
    wait_drained(&home, "QPUB1");
    let got = published(&c);
    assert_eq!(got.len(), 2, "{got:?}");
    for body in ["started", "completed"] {
        assert_eq!(
            got.get(body),
            Some(&(1, "SYSTEM.FTE/Log/agentA/t1".to_string())),
            "{got:?}"
        );
    }
    // A topic string no publication may have (a wildcard) cannot be published: the message goes
    // to the dead-letter queue with the reason, and the stream goes on with the next one.
    put_on_stream(&c, Some("Log/#"), "unpublishable");
    put_on_stream(&c, Some("Log/agentA/t2"), "after");
    wait_drained(&home, "QPUB1");
    let dlq = c
        .open("SYSTEM.DEAD.LETTER.QUEUE", open::INPUT_SHARED)
        .unwrap();
    let m = c.get(&dlq, &GetOptions::any()).unwrap();
    let (dlh, rest) = ferrymq_types::dlh::DeadLetterHeader::parse(&m.body).unwrap();
    assert_eq!(rest, b"unpublishable");
    assert_eq!(dlh.dest_q_name, "SYSTEM.FTE");
    assert_ne!(dlh.reason, 0);
    let got = published(&c);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got.contains_key("after"), "{got:?}");
    // The queue manager's own connections to its streams do not hold up a controlled end.
    drop(c);
    home.ok(&["endmqm", "QPUB1"]);
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let status = home.ok(&["dspmq", "-m", "QPUB1"]);
        if status.contains("Ended") {
            break;
        }
        assert!(
            Instant::now() < until,
            "a controlled end waited for the stream connections: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_kill_while_a_stream_is_published_loses_and_repeats_nothing() {
    let home = Home::new();
    let qm = Qm::start(&home, "QPUB2", &[]);
    mqsc(&home, "QPUB2", SETUP);
    // The stream queue is served from the start of the next run (or the next rescan).
    qm.kill9();
    qm.restart();
    let mut expected = Vec::new();
    for round in 0..4u32 {
        let c = qm.connect();
        // One unit of work, so that the whole round lands on the stream at once and the queue
        // manager is still publishing it (a batch at a time) when it is killed.
        let opts = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..PutOptions::default()
        };
        // Enough that publishing the round takes the queue manager tens of milliseconds.
        let filler = "x".repeat(2048);
        for i in 0..4000 {
            let id = format!("r{round}-m{i}");
            put_on_stream_with(
                &c,
                Some(&format!("Log/a/{round}")),
                &format!("{id}|{filler}"),
                &opts,
            );
            expected.push(id);
        }
        c.commit().unwrap();
        // The queue manager publishes a round in about ten milliseconds, a hundred messages
        // per unit of work: killed this long after the commit, it is between two of them or
        // inside one.
        std::thread::sleep(Duration::from_millis([0, 1, 3, 6][round as usize]));
        qm.kill9();
        qm.restart();
    }
    wait_drained(&home, "QPUB2");
    let got = published(&qm.connect());
    let missing: Vec<&String> = expected.iter().filter(|b| !got.contains_key(*b)).collect();
    assert!(missing.is_empty(), "lost: {missing:?}");
    let twice: Vec<(&String, &(u32, String))> = got.iter().filter(|(_, v)| v.0 != 1).collect();
    assert!(twice.is_empty(), "published more than once: {twice:?}");
    assert_eq!(got.len(), expected.len());
}
