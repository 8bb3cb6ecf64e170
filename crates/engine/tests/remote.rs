//! Name resolution to other queue managers: a put through a remote queue definition, a queue
//! manager alias, a transmission queue named like the queue manager or the default transmission
//! queue lands on the transmission queue with a transmission header naming the destination and
//! carrying the original descriptor; what cannot be resolved fails with MQ's reasons.

#[allow(dead_code)] // this test uses the configuration only
mod common;

use bytes::Bytes;
use ferrymq_engine::{Engine, GetOutcome, MemoryLog};
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::xqh::TransmissionHeader;
use ferrymq_types::{MessageDescriptor, Persistence, Properties, QueueDef, QueueKind, Reason};

use common::cfg;

fn xmitq(name: &str) -> QueueDef {
    QueueDef {
        is_xmitq: true,
        ..QueueDef::local(name)
    }
}

fn remote(name: &str, rname: &str, rqmname: &str, xmitq: &str) -> QueueDef {
    QueueDef {
        kind: QueueKind::Remote {
            rname: rname.into(),
            rqmname: rqmname.into(),
            xmitq: xmitq.into(),
        },
        ..QueueDef::local(name)
    }
}

fn engine() -> Engine {
    let mut e = Engine::new(cfg(), Box::new(MemoryLog::default()));
    e.install_defaults().unwrap();
    for d in [
        QueueDef::local("LOCAL.Q"),
        xmitq("QM2"),
        xmitq("TO.QM3"),
        remote("ORDERS", "ORDERS.IN", "QM2", ""),
        remote("PRICES", "PRICES.IN", "QM3", "TO.QM3"),
        remote("QM3.ALIAS", "", "QM3", "TO.QM3"),
        remote("BACK.HOME", "LOCAL.Q", "QM1", ""),
    ] {
        e.define_queue(d, false).unwrap();
    }
    e
}

fn put_via(e: &mut Engine, name: &str, qmgr: &str, body: &str) -> Result<[u8; 24], Reason> {
    let c = e.connect("alice", "orders-app");
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        reply_to_q: "REPLIES".into(),
        ..Default::default()
    };
    e.put1(
        c,
        name,
        qmgr,
        &PutOptions::default(),
        md,
        Properties::default(),
        Bytes::from(body.to_string()),
        1_000,
    )
    .map(|d| d.msg_id)
    .map_err(|e| e.reason)
}

/// Gets the next message of `q` and reads its transmission header.
fn take(e: &mut Engine, q: &str) -> (MessageDescriptor, TransmissionHeader, Vec<u8>) {
    let c = e.connect("u", "t");
    let (h, _, _) = e.open(c, q, "", open::INPUT_SHARED, "").unwrap();
    let got = match e.get(c, h, &GetOptions::any(), 1, 2_000).unwrap() {
        GetOutcome::Got(g, _) => g,
        GetOutcome::Waiting(_) => panic!("no message on {q}"),
    };
    let (xqh, data) = TransmissionHeader::parse(&got.body).expect("a transmission header");
    (got.md, xqh.clone(), data.to_vec())
}

#[test]
fn a_put_to_a_remote_queue_lands_on_its_transmission_queue_with_the_destination() {
    let mut e = engine();
    let id = put_via(&mut e, "ORDERS", "", "order 1").unwrap();
    let (outer, xqh, data) = take(&mut e, "QM2");
    assert_eq!(
        (xqh.remote_q.as_str(), xqh.remote_qmgr.as_str()),
        ("ORDERS.IN", "QM2")
    );
    assert_eq!(data, b"order 1");
    assert_eq!(outer.format, "MQXMIT");
    // The header carries the message's own descriptor: its identifiers, format and context.
    assert_eq!(xqh.md.msg_id, id);
    assert_eq!(outer.msg_id, id);
    assert_eq!(xqh.md.format, "MQSTR");
    assert_eq!(xqh.md.reply_to_q, "REPLIES");
    assert_eq!(xqh.md.user_id, "alice");
    assert_eq!(xqh.md.persistence, Persistence::Persistent);
}

#[test]
fn each_way_of_naming_a_queue_manager_resolves_as_mq_does() {
    let mut e = engine();
    // XMITQ named by the definition.
    put_via(&mut e, "PRICES", "", "p").unwrap();
    assert_eq!(take(&mut e, "TO.QM3").1.remote_q, "PRICES.IN");
    // ObjectQMgrName with a transmission queue named like the queue manager.
    put_via(&mut e, "ANY.Q", "QM2", "a").unwrap();
    let x = take(&mut e, "QM2").1;
    assert_eq!(
        (x.remote_q.as_str(), x.remote_qmgr.as_str()),
        ("ANY.Q", "QM2")
    );
    // A queue manager alias: its RQMNAME and XMITQ.
    put_via(&mut e, "Z.Q", "QM3.ALIAS", "z").unwrap();
    let x = take(&mut e, "TO.QM3").1;
    assert_eq!(
        (x.remote_q.as_str(), x.remote_qmgr.as_str()),
        ("Z.Q", "QM3")
    );
    // A remote definition that names this queue manager is a local queue.
    put_via(&mut e, "BACK.HOME", "", "home").unwrap();
    let c = e.connect("u", "t");
    let (h, q, _) = e.open(c, "LOCAL.Q", "", open::INPUT_SHARED, "").unwrap();
    assert_eq!(q, "LOCAL.Q");
    match e.get(c, h, &GetOptions::any(), 1, 2_000).unwrap() {
        GetOutcome::Got(g, _) => assert_eq!(&g.body[..], b"home"),
        GetOutcome::Waiting(_) => panic!("nothing on LOCAL.Q"),
    }
    // No route, then the default transmission queue.
    assert_eq!(
        put_via(&mut e, "Q", "QM9", "x"),
        Err(Reason::UNKNOWN_REMOTE_Q_MGR)
    );
    let mut attrs = e.attrs().clone();
    attrs.other.insert("DEFXMITQ".into(), "TO.QM3".into());
    e.set_qmgr_attrs(attrs).unwrap();
    put_via(&mut e, "Q", "QM9", "x").unwrap();
    let x = take(&mut e, "TO.QM3").1;
    assert_eq!((x.remote_q.as_str(), x.remote_qmgr.as_str()), ("Q", "QM9"));
}

#[test]
fn what_cannot_be_resolved_fails_with_mqs_reasons() {
    let mut e = engine();
    e.define_queue(remote("NO.XQ", "R", "QM7", "MISSING"), false)
        .unwrap();
    e.define_queue(remote("NOT.XQ", "R", "QM7", "LOCAL.Q"), false)
        .unwrap();
    assert_eq!(
        put_via(&mut e, "NO.XQ", "", "x"),
        Err(Reason::UNKNOWN_XMIT_Q)
    );
    assert_eq!(
        put_via(&mut e, "NOT.XQ", "", "x"),
        Err(Reason::XMIT_Q_USAGE_ERROR)
    );
    assert_eq!(
        put_via(&mut e, "Q", "LOCAL.Q", "x"),
        Err(Reason::XMIT_Q_USAGE_ERROR),
        "a local queue named like the queue manager is not a transmission queue"
    );
    let mut attrs = e.attrs().clone();
    attrs.other.insert("DEFXMITQ".into(), "NOPE".into());
    e.set_qmgr_attrs(attrs).unwrap();
    assert_eq!(
        put_via(&mut e, "Q", "QM9", "x"),
        Err(Reason::UNKNOWN_DEF_XMIT_Q)
    );
    // A queue of another queue manager can be put to, not got from.
    let c = e.connect("u", "t");
    let r = e.open(c, "ORDERS", "", open::INPUT_SHARED, "");
    assert_eq!(r.unwrap_err().reason, Reason::OPTION_NOT_VALID_FOR_TYPE);
    // Inquire on a remote queue definition shows the definition itself, not its
    // transmission queue.
    let (h, _, _) = e.open(c, "ORDERS", "", open::INQUIRE, "").unwrap();
    let attrs = e
        .inquire(c, h, &["QUEUE".to_string(), "TYPE".to_string()])
        .unwrap();
    assert_eq!(
        attrs,
        [
            ("QUEUE".to_string(), "ORDERS".to_string()),
            ("TYPE".to_string(), "QREMOTE".to_string())
        ]
    );
}

#[test]
fn a_reply_to_alias_is_resolved_at_put_into_the_queue_and_queue_manager_it_names() {
    let mut e = engine();
    let c = e.connect("alice", "requester");
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        reply_to_q: "BACK.HOME".into(),
        ..Default::default()
    };
    e.put1(
        c,
        "ORDERS",
        "",
        &PutOptions::default(),
        md,
        Properties::default(),
        Bytes::from_static(b"request"),
        1_000,
    )
    .unwrap();
    let (_, xqh, _) = take(&mut e, "QM2");
    assert_eq!(
        (xqh.md.reply_to_q.as_str(), xqh.md.reply_to_qmgr.as_str()),
        ("LOCAL.Q", "QM1")
    );
    // A ReplyToQMgr given by the application is left as it is.
    let md = MessageDescriptor {
        reply_to_q: "BACK.HOME".into(),
        reply_to_qmgr: "QMX".into(),
        ..Default::default()
    };
    e.put1(
        c,
        "ORDERS",
        "",
        &PutOptions::default(),
        md,
        Properties::default(),
        Bytes::from_static(b"request"),
        1_000,
    )
    .unwrap();
    let (_, xqh, _) = take(&mut e, "QM2");
    assert_eq!(
        (xqh.md.reply_to_q.as_str(), xqh.md.reply_to_qmgr.as_str()),
        ("BACK.HOME", "QMX")
    );
}
