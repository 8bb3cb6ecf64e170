//! Publish/subscribe against the real binary: wildcard subscriptions, durable subscriptions
//! across a disconnect and a kill -9, non-durable ones ending with their connection, retained
//! publications, selectors, and a publication under syncpoint that is backed out.

mod support;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ObjectHandle, Subscription, SubscriptionOptions};
use ferrymq_types::options::{close, open, pmo, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue, Reason};
use support::{Home, Qm};

fn md(persistence: Persistence) -> MessageDescriptor {
    MessageDescriptor {
        persistence,
        ..Default::default()
    }
}

fn publish(c: &Connection, topic: &str, body: &str, props: &Properties, opts: &PutOptions) {
    c.put1_topic(
        "",
        topic,
        &md(Persistence::NotPersistent),
        props,
        Bytes::from(body.to_string()),
        opts,
    )
    .unwrap_or_else(|e| panic!("publish on '{topic}': {e}"));
}

/// Every publication waiting on a subscription's queue, in order (none waited for).
fn drain(c: &Connection, q: &ObjectHandle) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        match c.get(q, &GetOptions::any()) {
            Ok(m) => out.push(String::from_utf8_lossy(&m.body).into_owned()),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return out,
            Err(e) => panic!("get from '{}': {e}", q.name),
        }
    }
}

fn managed(c: &Connection, topic: &str) -> Subscription {
    c.subscribe(&SubscriptionOptions::topic(topic))
        .unwrap_or_else(|e| panic!("subscribe to '{topic}': {e}"))
}

#[test]
fn wildcard_subscriptions_receive_the_publications_of_their_levels() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSWILD", &[]);
    let c = qm.connect();
    let patterns = [
        "sport/#",
        "sport/+",
        "sport/+/player1",
        "#",
        "+/tennis/#",
        "a//b",
        "a/+/b",
    ];
    let subs: Vec<Subscription> = patterns.iter().map(|p| managed(&c, p)).collect();
    let topics = [
        "sport",
        "sport/tennis",
        "sport/tennis/player1",
        "sport/golf/player1",
        "news/tennis",
        "a//b",
        "a/x/b",
    ];
    for t in topics {
        publish(&c, t, t, &Properties::default(), &PutOptions::default());
    }
    let got: Vec<Vec<String>> = subs
        .iter()
        .map(|s| drain(&c, s.queue.as_ref().expect("a managed queue")))
        .collect();
    let want: Vec<Vec<&str>> = vec![
        vec![
            "sport",
            "sport/tennis",
            "sport/tennis/player1",
            "sport/golf/player1",
        ],
        vec!["sport/tennis"],
        vec!["sport/tennis/player1", "sport/golf/player1"],
        topics.to_vec(),
        vec!["sport/tennis", "sport/tennis/player1", "news/tennis"],
        vec!["a//b"],
        vec!["a//b", "a/x/b"],
    ];
    for ((p, got), want) in patterns.iter().zip(&got).zip(&want) {
        assert_eq!(got, want, "subscription '{p}'");
    }
    // Each copy says which topic it was published on.
    let m = {
        c.put1_topic(
            "",
            "sport/tennis",
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from_static(b"x"),
            &PutOptions::default(),
        )
        .unwrap();
        c.get(subs[1].queue.as_ref().unwrap(), &GetOptions::any())
            .unwrap()
    };
    assert_eq!(
        m.props.get("MQTopicString"),
        Some(&PropertyValue::String("sport/tennis".into()))
    );
}

#[test]
fn character_wildcard_subscriptions_match_characters_across_levels() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSCHAR", &[]);
    let c = qm.connect();
    let chars = |topic: &str| {
        c.subscribe(&SubscriptionOptions {
            char_wildcards: true,
            ..SubscriptionOptions::topic(topic)
        })
        .unwrap()
    };
    let (foot, one) = (chars("sport/foot*"), chars("a/b?"));
    let p = qm.connect();
    for t in [
        "sport/football",
        "sport/football/scores",
        "sport/rugby",
        "a/bc",
        "a/b",
        "a/bcd",
    ] {
        publish(&p, t, t, &Properties::default(), &PutOptions::default());
    }
    assert_eq!(
        drain(&c, foot.queue.as_ref().unwrap()),
        vec!["sport/football", "sport/football/scores"]
    );
    assert_eq!(drain(&c, one.queue.as_ref().unwrap()), vec!["a/bc"]);
}

#[test]
fn a_subscription_with_a_sub_correl_id_gets_it_as_every_publications_correl_id() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSCORREL", &[]);
    let c = qm.connect();
    let mut id = [0u8; 24];
    id[..7].copy_from_slice(b"ORDERS!");
    let tagged = c
        .subscribe(&SubscriptionOptions {
            correl_id: Some(id),
            ..SubscriptionOptions::topic("orders/#")
        })
        .unwrap();
    let plain = managed(&c, "orders/#");
    publish(
        &c,
        "orders/1",
        "one",
        &Properties::default(),
        &PutOptions::default(),
    );
    let m = c
        .get(tagged.queue.as_ref().unwrap(), &GetOptions::any())
        .unwrap();
    assert_eq!((&m.body[..], m.md.correl_id), (&b"one"[..], id));
    let m = c
        .get(plain.queue.as_ref().unwrap(), &GetOptions::any())
        .unwrap();
    assert_ne!(
        m.md.correl_id, id,
        "only the subscription that asked gets it"
    );
}

#[test]
fn a_durable_subscription_keeps_publications_across_a_disconnect_and_a_kill_9() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSDUR", &[]);
    let durable = |resume: bool| SubscriptionOptions {
        topic: "prices/#".into(),
        name: Some("PRICES.SUB".into()),
        durable: true,
        resume,
        create: !resume,
        ..Default::default()
    };
    let c = qm.connect();
    let s = c.subscribe(&durable(false)).unwrap();
    assert!(s.queue_name.starts_with("SYSTEM.MANAGED.DURABLE."));
    // The same name cannot be made twice, nor used by two handles at once.
    let twice = c.subscribe(&durable(false)).unwrap_err();
    assert_eq!(twice.reason, Reason::SUB_ALREADY_EXISTS);
    let busy = qm.connect().subscribe(&durable(true)).unwrap_err();
    assert_eq!(busy.reason, Reason::SUBSCRIPTION_IN_USE);
    c.disconnect().unwrap();

    // Published while nobody is connected to the subscription.
    let p = qm.connect();
    let h = p.open_topic("", "prices/fruit", open::OUTPUT).unwrap();
    assert_eq!(h.name, "prices/fruit");
    for i in 0..5 {
        p.put(
            &h,
            &md(Persistence::Persistent),
            &Properties::default(),
            Bytes::from(format!("persistent {i}")),
            &PutOptions::default(),
        )
        .unwrap();
    }
    p.put(
        &h,
        &md(Persistence::NotPersistent),
        &Properties::default(),
        Bytes::from_static(b"not persistent"),
        &PutOptions::default(),
    )
    .unwrap();
    drop(p);
    qm.kill9();
    qm.restart();

    let c = qm.connect();
    let s = c.subscribe(&durable(true)).unwrap();
    let got = drain(&c, s.queue.as_ref().unwrap());
    let want: Vec<String> = (0..5).map(|i| format!("persistent {i}")).collect();
    assert_eq!(
        got, want,
        "persistent publications survive; the other does not"
    );
    // Still subscribed after the restart; removed on request, with its queue.
    publish(
        &c,
        "prices/veg",
        "after restart",
        &Properties::default(),
        &PutOptions::default(),
    );
    assert_eq!(drain(&c, s.queue.as_ref().unwrap()), vec!["after restart"]);
    c.close_subscription(&s, close::REMOVE_SUB).unwrap();
    let gone = c.subscribe(&durable(true)).unwrap_err();
    assert_eq!(gone.reason, Reason::NO_SUBSCRIPTION);
    let q = c.open(&s.queue_name, open::INQUIRE).unwrap_err();
    assert_eq!(q.reason, Reason::UNKNOWN_OBJECT_NAME);
}

#[test]
fn persistent_publications_to_several_durable_subscriptions_survive_a_kill_9_exactly() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSMANY", &[]);
    let names = ["MANY.1", "MANY.2", "MANY.3", "MANY.4"];
    let opts = |name: &str| SubscriptionOptions {
        name: Some(name.into()),
        durable: true,
        resume: true,
        create: true,
        ..SubscriptionOptions::topic("many/#")
    };
    let c = qm.connect();
    for n in names {
        c.subscribe(&opts(n)).unwrap();
    }
    c.disconnect().unwrap();
    let p = qm.connect();
    let h = p.open_topic("", "many/x", open::OUTPUT).unwrap();
    for i in 0..50 {
        let persistence = if i % 5 == 4 {
            Persistence::NotPersistent
        } else {
            Persistence::Persistent
        };
        p.put(
            &h,
            &md(persistence),
            &Properties::default(),
            Bytes::from(format!("{i}")),
            &PutOptions::default(),
        )
        .unwrap();
    }
    drop(p);
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    let want: Vec<String> = (0..50)
        .filter(|i| i % 5 != 4)
        .map(|i| format!("{i}"))
        .collect();
    for n in names {
        let s = c.subscribe(&opts(n)).unwrap();
        assert_eq!(drain(&c, s.queue.as_ref().unwrap()), want, "{n}");
    }
    // And once more: what was got stays got.
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    for n in names {
        let s = c.subscribe(&opts(n)).unwrap();
        assert!(drain(&c, s.queue.as_ref().unwrap()).is_empty(), "{n}");
    }
}

#[test]
fn a_non_durable_subscription_ends_with_its_connection() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSNDUR", &[]);
    let warn = PutOptions {
        pubsub: pmo::WARN_IF_NO_SUBS_MATCHED,
        ..PutOptions::default()
    };
    let p = qm.connect();
    let sub = qm.connect();
    let s = managed(&sub, "alerts/#");
    assert!(s.queue_name.starts_with("SYSTEM.MANAGED.NDURABLE."));
    publish(&p, "alerts/disk", "one", &Properties::default(), &warn);
    assert_eq!(drain(&sub, s.queue.as_ref().unwrap()), vec!["one"]);
    sub.disconnect().unwrap();

    // Nobody matches now: not an error, unless the publisher asks to be warned.
    publish(
        &p,
        "alerts/disk",
        "two",
        &Properties::default(),
        &PutOptions::default(),
    );
    let e = p
        .put1_topic(
            "",
            "alerts/disk",
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from_static(b"three"),
            &warn,
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::NO_SUBS_MATCHED);
    let q = p.open(&s.queue_name, open::INQUIRE).unwrap_err();
    assert_eq!(
        q.reason,
        Reason::UNKNOWN_OBJECT_NAME,
        "the managed queue went"
    );
    let status = mqsc(&home, "PSNDUR", "DISPLAY PUBSUB\n");
    assert!(status.contains("SUBCOUNT(0)"), "{status}");

    // A connection that drops without disconnecting loses its subscriptions as well.
    {
        let sub = qm.connect();
        managed(&sub, "alerts/#");
        drop(sub);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match p.put1_topic(
            "",
            "alerts/cpu",
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from_static(b"four"),
            &warn,
        ) {
            Err(e) if e.reason == Reason::NO_SUBS_MATCHED => break,
            Ok(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            other => panic!("the dropped connection's subscription is still there: {other:?}"),
        }
    }
}

#[test]
fn a_retained_publication_reaches_each_new_subscriber_once() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSRET", &[]);
    let c = qm.connect();
    let retain = PutOptions {
        pubsub: pmo::RETAIN,
        ..PutOptions::default()
    };
    publish(
        &c,
        "weather/london",
        "rain",
        &Properties::default(),
        &retain,
    );
    publish(&c, "weather/london", "sun", &Properties::default(), &retain);
    publish(
        &c,
        "weather/paris",
        "not kept",
        &Properties::default(),
        &PutOptions::default(),
    );
    let s = managed(&c, "weather/#");
    let q = s.queue.as_ref().unwrap();
    let m = c.get(q, &GetOptions::any()).unwrap();
    assert_eq!(&m.body[..], b"sun", "the latest retained publication only");
    assert_eq!(
        m.props.get("MQIsRetained"),
        Some(&PropertyValue::Bool(true))
    );
    assert_eq!(drain(&c, q), Vec::<String>::new(), "delivered once");
    // Asked for again (MQSUBRQ).
    c.sub_request(&s).unwrap();
    assert_eq!(drain(&c, q), vec!["sun"]);
    // A second subscriber gets it too; one asking for new publications only does not.
    let s2 = managed(&c, "weather/london");
    assert_eq!(drain(&c, s2.queue.as_ref().unwrap()), vec!["sun"]);
    let s3 = c
        .subscribe(&SubscriptionOptions {
            new_publications_only: true,
            ..SubscriptionOptions::topic("weather/london")
        })
        .unwrap();
    assert_eq!(drain(&c, s3.queue.as_ref().unwrap()), Vec::<String>::new());
    let none = managed(&c, "weather/rome");
    let e = c.sub_request(&none).unwrap_err();
    assert_eq!(e.reason, Reason::NO_RETAINED_MSG);
}

#[test]
fn selectors_filter_publications_on_their_properties() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSSEL", &[]);
    let c = qm.connect();
    let s = c
        .subscribe(&SubscriptionOptions {
            selector: Some("colour IN ('red', 'pink') AND size > 5 OR urgent = TRUE".into()),
            ..SubscriptionOptions::topic("shop/#")
        })
        .unwrap();
    let bad = c
        .subscribe(&SubscriptionOptions {
            selector: Some("colour = ".into()),
            ..SubscriptionOptions::topic("shop/#")
        })
        .unwrap_err();
    assert_eq!(bad.reason, Reason::SELECTOR_SYNTAX_ERROR);
    type Case<'a> = (&'a str, Option<&'a str>, Option<i64>, Option<bool>);
    let cases: &[Case] = &[
        ("red big", Some("red"), Some(10), None),
        ("red small", Some("red"), Some(3), None),
        ("blue big", Some("blue"), Some(10), None),
        ("pink big", Some("pink"), Some(6), None),
        ("no properties", None, None, None),
        ("urgent", None, None, Some(true)),
    ];
    for (body, colour, size, urgent) in cases {
        let mut p = Properties::default();
        if let Some(v) = colour {
            p.set("colour", PropertyValue::String(v.to_string()));
        }
        if let Some(v) = size {
            p.set("size", PropertyValue::Int(*v));
        }
        if let Some(v) = urgent {
            p.set("urgent", PropertyValue::Bool(*v));
        }
        publish(&c, "shop/items", body, &p, &PutOptions::default());
    }
    assert_eq!(
        drain(&c, s.queue.as_ref().unwrap()),
        vec!["red big", "pink big", "urgent"]
    );
}

#[test]
fn a_publication_under_syncpoint_reaches_every_subscriber_at_commit_and_none_at_backout() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSUOW", &[]);
    let sub = qm.connect();
    let a = managed(&sub, "orders/#");
    let b = sub
        .subscribe(&SubscriptionOptions {
            name: Some("ORDERS.DURABLE".into()),
            durable: true,
            ..SubscriptionOptions::topic("orders/+")
        })
        .unwrap();
    let p = qm.connect();
    let h = p.open_topic("", "orders/new", open::OUTPUT).unwrap();
    let in_uow = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..PutOptions::default()
    };
    let put = |body: &str| {
        p.put(
            &h,
            &md(Persistence::Persistent),
            &Properties::default(),
            Bytes::from(body.to_string()),
            &in_uow,
        )
        .unwrap()
    };
    put("backed out");
    let nothing_yet = sub.get(
        b.queue.as_ref().unwrap(),
        &GetOptions {
            wait: Wait::NoWait,
            ..GetOptions::any()
        },
    );
    assert_eq!(nothing_yet.unwrap_err().reason, Reason::NO_MSG_AVAILABLE);
    p.backout().unwrap();
    assert!(drain(&sub, a.queue.as_ref().unwrap()).is_empty());
    assert!(drain(&sub, b.queue.as_ref().unwrap()).is_empty());
    put("committed");
    p.commit().unwrap();
    assert_eq!(drain(&sub, a.queue.as_ref().unwrap()), vec!["committed"]);
    assert_eq!(drain(&sub, b.queue.as_ref().unwrap()), vec!["committed"]);
}

fn mqsc(home: &Home, qm: &str, script: &str) -> String {
    let out = home.run_with_input(&["runmqsc", qm], script);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "runmqsc:\n{script}\n---\n{text}"
    );
    text
}

#[test]
fn define_sub_takes_destcorl_and_wschema_and_display_sub_shows_them() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSDCORL", &[]);
    let out = mqsc(
        &home,
        "PSDCORL",
        "DEFINE QLOCAL(CORL.Q)\n\
         DEFINE SUB('corl sub') TOPICSTR('feed/foot*') WSCHEMA(CHAR) DEST(CORL.Q) DESTCORL(0A0b0C)\n\
         DISPLAY SUB('corl sub') ALL\n\
         DEFINE SUB('plain sub') TOPICSTR('feed/#') DEST(CORL.Q)\n\
         DISPLAY SUB('plain sub') ALL\n",
    );
    let padded = format!("0A0B0C{}", "0".repeat(42));
    assert!(out.contains(&format!("DESTCORL({padded})")), "{out}");
    assert!(out.contains("WSCHEMA(CHAR)"), "{out}");
    assert!(out.contains("WSCHEMA(TOPIC)"), "{out}");
    assert!(
        out.contains("DESTCORL( )"),
        "no DESTCORL shows empty: {out}"
    );
    let bad = home.run_with_input(
        &["runmqsc", "PSDCORL"],
        "DEFINE SUB('bad') TOPICSTR('x') DEST(CORL.Q) DESTCORL(XYZ)\n",
    );
    assert_ne!(bad.status.code(), Some(0), "DESTCORL(XYZ) is not hex");
    let c = qm.connect();
    // '*' in WSCHEMA(CHAR) reaches across levels; the copy carries the DESTCORL.
    publish(
        &c,
        "feed/football/scores",
        "goal",
        &Properties::default(),
        &PutOptions::default(),
    );
    let q = c.open("CORL.Q", open::INPUT_SHARED).unwrap();
    let first = c.get(&q, &GetOptions::any()).unwrap();
    let second = c.get(&q, &GetOptions::any()).unwrap();
    let mut ids = [first.md.correl_id, second.md.correl_id];
    ids.sort();
    let mut want = [0u8; 24];
    want[..3].copy_from_slice(&[0x0A, 0x0B, 0x0C]);
    assert!(ids.contains(&want), "one copy carries DESTCORL: {ids:?}");
    // dmpmqcfg writes them back as DEFINE SUB takes them.
    let dump = home.ok(&["dmpmqcfg", "-m", "PSDCORL"]);
    assert!(
        dump.contains("WSCHEMA(CHAR)") && dump.contains(&format!("DESTCORL({padded})")),
        "{dump}"
    );
}

#[test]
fn display_tpstatus_shows_resolved_attributes_and_each_publishers_count_and_last_time() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSTPST", &[]);
    mqsc(
        &home,
        "PSTPST",
        "DEFINE TOPIC(TP.TOPIC) TOPICSTR('tp') DEFPRESP(ASYNC) DEFPSIST(YES) DEFPRTY(7)\n",
    );
    let c = qm.connect();
    let publisher = c.open_topic("", "tp/news", open::OUTPUT).unwrap();
    let idle = c.open_topic("", "tp/news", open::OUTPUT).unwrap();
    for i in 0..3 {
        c.put(
            &publisher,
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from(format!("n{i}")),
            &PutOptions::default(),
        )
        .unwrap();
    }
    // The topic's attributes resolved up the tree (ASPARENT from TP.TOPIC, then the base).
    let topic = mqsc(&home, "PSTPST", "DISPLAY TPSTATUS('tp/news')\n");
    for want in [
        "ADMIN(TP.TOPIC)",
        "DEFPRESP(ASYNC)",
        "DEFPSIST(YES)",
        "DEFPRTY(7)",
        "DURSUB(YES)",
        "PUB(ENABLED)",
        "SUB(ENABLED)",
        "PUBCOUNT(2)",
        "SUBCOUNT(0)",
    ] {
        assert!(topic.contains(want), "no '{want}' in:\n{topic}");
    }
    // A row per publisher handle: how many it published and when it last did.
    let pubs = mqsc(&home, "PSTPST", "DISPLAY TPSTATUS('tp/news') TYPE(PUB)\n");
    assert_eq!(pubs.matches("ACTCONN(").count(), 2, "{pubs}");
    assert!(pubs.contains("NUMPUBS(3)"), "{pubs}");
    assert!(pubs.contains("NUMPUBS(0)"), "{pubs}");
    assert_eq!(
        pubs.matches("LPUBDATE( )").count(),
        1,
        "the idle one: {pubs}"
    );
    assert_eq!(
        pubs.matches("LPUBDATE(20").count(),
        1,
        "the publisher's: {pubs}"
    );
    assert_eq!(pubs.matches("LPUBTIME(").count(), 2, "{pubs}");
    c.close(&idle, 0).unwrap();
    c.close(&publisher, 0).unwrap();
}

#[test]
fn mqsc_defines_displays_and_deletes_subscriptions_to_named_queues() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSMQSC", &[]);
    mqsc(
        &home,
        "PSMQSC",
        "DEFINE QLOCAL(AUDIT.Q)\n\
         DEFINE TOPIC(ORDERS.TOPIC) TOPICSTR('orders')\n\
         DEFINE SUB('audit sub') TOPICOBJ(ORDERS.TOPIC) TOPICSTR('#') DEST(AUDIT.Q) SELECTOR('amount > 100')\n",
    );
    let c = qm.connect();
    // An application's subscription to a queue it names (not managed).
    let own = c
        .subscribe(&SubscriptionOptions {
            queue: Some("AUDIT.Q".into()),
            name: Some("APP.SUB".into()),
            ..SubscriptionOptions::topic("orders/big")
        })
        .unwrap();
    assert_eq!(own.queue, None);
    assert_eq!(own.queue_name, "AUDIT.Q");
    for amount in [50, 500] {
        let mut p = Properties::default();
        p.set("amount", PropertyValue::Int(amount));
        publish(
            &c,
            "orders/big",
            &format!("amount {amount}"),
            &p,
            &PutOptions::default(),
        );
    }
    let q = c.open("AUDIT.Q", open::INPUT_SHARED).unwrap();
    let mut got = drain(&c, &q);
    got.sort();
    assert_eq!(
        got,
        vec!["amount 50", "amount 500", "amount 500"],
        "the administrative subscription (selector) and the application's (none)"
    );
    let shown = mqsc(
        &home,
        "PSMQSC",
        "DISPLAY SUB('audit*') ALL\nDISPLAY SBSTATUS(APP.SUB)\nDISPLAY TPSTATUS('orders/big')\nDISPLAY PUBSUB\n",
    );
    for want in [
        "SUB(audit sub)",
        "TOPICSTR(orders/#)",
        "DEST(AUDIT.Q)",
        "SUBTYPE(ADMIN)",
        "DURABLE(YES)",
        "SELECTOR(amount > 100)",
        "SUB(APP.SUB)",
        "ACTCONN(",
        "SUBCOUNT(2)",
        "ADMIN(ORDERS.TOPIC)",
        "STATUS(ACTIVE)",
        "NDURSUBS(1)",
    ] {
        assert!(shown.contains(want), "no '{want}' in:\n{shown}");
    }
    // SBSTATUS counts the copies the subscription received and dates the last one.
    let sbstatus = &shown[shown.find("SUB(APP.SUB)").unwrap()..];
    assert!(sbstatus.contains("NUMMSGS(2)"), "{shown}");
    let date = sbstatus
        .split("LMSGDATE(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or("");
    assert!(
        date.len() == 10 && date.starts_with("20"),
        "LMSGDATE '{date}' in:\n{shown}"
    );
    // TYPE(SUB): a row per subscription the topic reaches; TYPE(PUB): per open publisher.
    let publisher = c.open_topic("", "orders/big", open::OUTPUT).unwrap();
    let subs = mqsc(
        &home,
        "PSMQSC",
        "DISPLAY TPSTATUS('orders/big') TYPE(SUB)\n",
    );
    assert_eq!(subs.matches("SUBID(").count(), 2, "{subs}");
    assert!(
        subs.contains("SUBTYPE(ADMIN)") && subs.contains("SUBTYPE(API)"),
        "{subs}"
    );
    // The administrative subscription's selector took one of the two publications.
    assert!(
        subs.contains("NUMMSGS(1)") && subs.contains("NUMMSGS(2)"),
        "{subs}"
    );
    let pubs = mqsc(
        &home,
        "PSMQSC",
        "DISPLAY TPSTATUS('orders/big') TYPE(PUB)\n",
    );
    assert_eq!(pubs.matches("ACTCONN(").count(), 1, "{pubs}");
    assert!(!pubs.contains("SUBID("), "{pubs}");
    c.close(&publisher, 0).unwrap();
    let dump = home.ok(&["dmpmqcfg", "-m", "PSMQSC"]);
    assert!(
        dump.contains("DEFINE SUB('audit sub')") && dump.contains("TOPICSTR('orders/#')"),
        "{dump}"
    );
    assert!(
        !dump.contains("APP.SUB"),
        "an application's subscription is not dumped"
    );
    mqsc(&home, "PSMQSC", "DELETE SUB('audit sub')\n");
    c.close_subscription(&own, 0).unwrap();
    let warn = PutOptions {
        pubsub: pmo::WARN_IF_NO_SUBS_MATCHED,
        ..PutOptions::default()
    };
    let e = c
        .put1_topic(
            "ORDERS.TOPIC",
            "big",
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from_static(b"nobody"),
            &warn,
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::NO_SUBS_MATCHED);
    let out = home.run_with_input(&["runmqsc", "PSMQSC"], "DISPLAY SUB('audit sub')\n");
    assert!(String::from_utf8_lossy(&out.stdout).contains("not defined"));
    // Topic attributes inherit: PUB(DISABLED) on a node inhibits publications below it.
    mqsc(&home, "PSMQSC", "ALTER TOPIC(ORDERS.TOPIC) PUB(DISABLED)\n");
    let e = c
        .put1_topic(
            "",
            "orders/small",
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from_static(b"x"),
            &PutOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::PUT_INHIBITED);
}

#[test]
fn the_pub_and_sub_samples_publish_lines_and_print_publications() {
    let home = Home::new();
    let _qm = Qm::start(&home, "PSCLI", &[]);
    let sub = |extra: &[&str]| {
        let mut args = vec![
            "sub",
            "PSCLI",
            "cli/#",
            "--durable",
            "CLI.SUB",
            "--wait-ms",
            "0",
        ];
        args.extend_from_slice(extra);
        home.ok(&args)
    };
    assert_eq!(sub(&[]), "", "a new durable subscription has nothing yet");
    let out = home.run_with_input(&["pub", "PSCLI", "cli/news"], "one\ntwo\n");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(sub(&["--remove"]), "one\ntwo\n");
    assert_eq!(
        sub(&["--remove"]),
        "",
        "removed, then made anew and removed"
    );

    let out = home.run_with_input(&["pub", "PSCLI", "cli/r", "--retain"], "kept\n");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        home.ok(&["sub", "PSCLI", "cli/+", "--wait-ms", "0"]),
        "kept\n"
    );
}

#[test]
fn an_expired_subscription_receives_nothing() {
    let home = Home::new();
    let qm = Qm::start(&home, "PSEXP", &[]);
    let c = qm.connect();
    let short = c
        .subscribe(&SubscriptionOptions {
            expiry: Some(1),
            ..SubscriptionOptions::topic("tick/#")
        })
        .unwrap();
    let warn = PutOptions {
        pubsub: pmo::WARN_IF_NO_SUBS_MATCHED,
        ..PutOptions::default()
    };
    // A tenth of a second later the subscription matches nothing any more.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = c.put1_topic(
            "",
            "tick/1",
            &md(Persistence::NotPersistent),
            &Properties::default(),
            Bytes::from_static(b"tick"),
            &warn,
        );
        match r {
            Err(e) if e.reason == Reason::NO_SUBS_MATCHED => break,
            Ok(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => panic!("the subscription did not expire: {other:?}"),
        }
    }
    drain(&c, short.queue.as_ref().unwrap());
    publish(
        &c,
        "tick/2",
        "late",
        &Properties::default(),
        &PutOptions::default(),
    );
    assert_eq!(
        drain(&c, short.queue.as_ref().unwrap()),
        Vec::<String>::new()
    );
}

#[test]
fn a_failover_keeps_durable_subscriptions_their_publications_and_retained_ones() {
    use std::time::{Duration, Instant};
    let g = support::ha::HaGroup::start("PSHA", &[]);
    let first = g.wait_active(Duration::from_secs(30));
    let durable = SubscriptionOptions {
        name: Some("HA.SUB".into()),
        durable: true,
        resume: true,
        create: true,
        ..SubscriptionOptions::topic("ha/#")
    };
    // Two durable subscriptions: a persistent publication to both is logged as one Publish
    // record (the body once), which the log shipping carries like any other.
    let second = SubscriptionOptions {
        name: Some("HA.SUB2".into()),
        ..durable.clone()
    };
    let c = g.connect();
    c.subscribe(&durable).unwrap();
    c.subscribe(&second).unwrap();
    c.disconnect().unwrap();
    let p = g.connect();
    let persistent = md(Persistence::Persistent);
    for (topic, body, opts) in [
        ("ha/a", "one", PutOptions::default()),
        ("ha/b", "two", PutOptions::default()),
        (
            "ha/r",
            "kept",
            PutOptions {
                pubsub: pmo::RETAIN,
                ..PutOptions::default()
            },
        ),
    ] {
        p.put1_topic(
            "",
            topic,
            &persistent,
            &Properties::default(),
            Bytes::from(body),
            &opts,
        )
        .unwrap();
    }
    drop(p);
    g.kill9(first);
    let t = Instant::now();
    loop {
        if g.active().is_some_and(|i| i != first) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no other instance became active; logs:\n{}",
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = g.connect();
    for d in [&durable, &second] {
        let s = c.subscribe(d).unwrap();
        assert_eq!(
            drain(&c, s.queue.as_ref().unwrap()),
            vec!["one", "two", "kept"],
            "{:?}",
            d.name
        );
    }
    let late = managed(&c, "ha/r");
    assert_eq!(drain(&c, late.queue.as_ref().unwrap()), vec!["kept"]);
}

#[test]
fn a_dr_takeover_keeps_durable_subscriptions_their_publications_and_retained_ones() {
    use std::time::{Duration, Instant};
    const QM: &str = "PSDR";
    let (main, rec) = (Home::new(), Home::new());
    let link = format!("127.0.0.1({})", support::free_port());
    let recovery = Qm::start(&rec, QM, &["-dr", "secondary", "-drl", &link]);
    let primary = Qm::start(&main, QM, &["-dr", "primary", "-drr", &link]);
    // Waits until the primary has shipped everything it logged to the secondary.
    let shipped = |what: &str| {
        let t = Instant::now();
        loop {
            let s = main.ok(&["dspmq", "-o", "dr", "-m", QM]);
            if s.contains("DRSTATUS(Normal)")
                && support::dr::field(&s, "LAGBYTES").as_deref() == Some("0")
            {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "{what}: {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    shipped("the primary reaches the secondary");
    let durable = SubscriptionOptions {
        name: Some("DR.SUB".into()),
        durable: true,
        resume: true,
        create: true,
        ..SubscriptionOptions::topic("dr/#")
    };
    // Two durable subscriptions: a persistent publication to both is logged as one Publish
    // record (the body once), which the log shipping carries like any other.
    let second = SubscriptionOptions {
        name: Some("DR.SUB2".into()),
        ..durable.clone()
    };
    let c = primary.connect();
    c.subscribe(&durable).unwrap();
    c.subscribe(&second).unwrap();
    c.disconnect().unwrap();
    let p = primary.connect();
    let persistent = md(Persistence::Persistent);
    let retain = PutOptions {
        pubsub: pmo::RETAIN,
        ..PutOptions::default()
    };
    for (topic, body, opts) in [
        ("dr/a", "one", PutOptions::default()),
        ("dr/b", "two", PutOptions::default()),
        ("dr/r", "kept", retain),
    ] {
        p.put1_topic(
            "",
            topic,
            &persistent,
            &Properties::default(),
            Bytes::from(body),
            &opts,
        )
        .unwrap();
    }
    drop(p);
    shipped("the secondary holds the subscription and the publications");

    // The main site is lost; the recovery site takes over.
    primary.kill9();
    rec.ok(&["makedrprimary", "-m", QM]);
    rec.ok(&["strmqm", QM]);
    let c = recovery.connect();
    for d in [&durable, &second] {
        let s = c.subscribe(d).unwrap();
        assert_eq!(
            drain(&c, s.queue.as_ref().unwrap()),
            vec!["one", "two", "kept"],
            "{:?}: the durable subscription and its queued publications were shipped",
            d.name
        );
    }
    let late = managed(&c, "dr/r");
    let m = c
        .get(late.queue.as_ref().unwrap(), &GetOptions::any())
        .expect("the retained publication reaches a new subscriber at the recovery site");
    assert_eq!(&m.body[..], b"kept");
    assert_eq!(
        m.props.get("MQIsRetained"),
        Some(&PropertyValue::Bool(true))
    );
}
