//! MQI and MQSC behaviours MQ programs and scripts rely on (issue 19, defects 3 to 7), checked
//! against the real binary: alias queues' defaults, dynamic queue names across restarts and HA
//! failover, the remaining Expiry a get returns, a caller's MsgId kept by default, and listener
//! and channel START/STOP with IGNSTATE and PORT(0).

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::descriptor::EXPIRY_UNLIMITED;
use ferrymq_types::options::{close, open, Browse, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use support::ha::HaGroup;
use support::{Home, Qm};

/// Runs MQSC through `runmqsc` in bindings mode; returns (exit code, stdout).
fn runmqsc(home: &Home, qm: &str, script: &str) -> (i32, String) {
    let out = home.run_with_input(&["runmqsc", qm], script);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn mqsc_ok(home: &Home, qm: &str, script: &str) -> String {
    let (code, text) = runmqsc(home, qm, script);
    assert_eq!(code, 0, "runmqsc failed:\n{script}\n---\n{text}");
    text
}

fn put(c: &Connection, h: &ferrymq_client::ObjectHandle, md: &MessageDescriptor, body: &str) {
    c.put(
        h,
        md,
        &Properties::default(),
        Bytes::from(body.to_string()),
        &PutOptions::default(),
    )
    .unwrap();
}

// Defect 3: DEFPRTY and DEFPSIST come from the alias, the first definition in the name
// resolution path, not from the target queue.
#[test]
fn an_alias_supplies_its_own_default_priority_and_persistence() {
    let home = Home::new();
    let qm = Qm::start(&home, "FID3", &[]);
    mqsc_ok(
        &home,
        "FID3",
        "DEFINE QLOCAL(F.TARGET) DEFPRTY(1) DEFPSIST(NO)\n\
         DEFINE QALIAS(F.ALIAS) TARGET(F.TARGET) DEFPRTY(7) DEFPSIST(YES) DEFREADA(YES)\n",
    );
    let c = qm.connect();
    let a = c.open("F.ALIAS", open::OUTPUT | open::INQUIRE).unwrap();
    put(&c, &a, &MessageDescriptor::default(), "through the alias");
    c.put1(
        "F.ALIAS",
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"put1 through the alias"),
        &PutOptions::default(),
    )
    .unwrap();
    let t = c.open("F.TARGET", open::OUTPUT).unwrap();
    put(&c, &t, &MessageDescriptor::default(), "direct");
    // MQINQ through the alias shows the alias's attributes (DEFREADA is stored, not acted on).
    let inq = c.inquire(&a, &["DEFPRTY", "DEFPSIST", "DEFREADA"]).unwrap();
    assert_eq!(
        inq,
        vec![
            ("DEFPRTY".to_string(), "7".to_string()),
            ("DEFPSIST".to_string(), "YES".to_string()),
            ("DEFREADA".to_string(), "YES".to_string()),
        ]
    );
    drop(c);

    // The alias's DEFPSIST(YES) made its messages persistent: they survive a restart, the
    // target's non-persistent one does not.
    qm.end();
    qm.restart();
    let c = qm.connect();
    let h = c.open("F.TARGET", open::INPUT_SHARED).unwrap();
    let mut got = Vec::new();
    while let Ok(m) = c.get(&h, &GetOptions::any()) {
        got.push((
            String::from_utf8(m.body.to_vec()).unwrap(),
            m.md.priority,
            m.md.persistence,
        ));
    }
    assert_eq!(
        got,
        vec![
            ("through the alias".to_string(), 7, Persistence::Persistent),
            (
                "put1 through the alias".to_string(),
                7,
                Persistence::Persistent
            ),
        ],
        "the alias's DEFPRTY(7) DEFPSIST(YES) apply; the direct put (DEFPSIST(NO)) is gone"
    );
}

/// Opens the PERMDYN model `model` `n` times; returns the created names (each queue kept).
fn permanent_dynamic_queues(c: &Connection, model: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let h = c
                .open_dynamic(model, "F.PERM.*", open::OUTPUT)
                .unwrap_or_else(|e| panic!("open of model {model}: {e}"));
            let name = h.name.clone();
            c.close(&h, close::NONE).unwrap();
            name
        })
        .collect()
}

/// Creates and closes `n` temporary dynamic queues from MQ's default model; returns their names.
fn temporary_dynamic_queues(c: &Connection, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let h = c
                .open_dynamic("SYSTEM.DEFAULT.MODEL.QUEUE", "", open::INPUT_EXCLUSIVE)
                .unwrap();
            let name = h.name.clone();
            c.close(&h, close::NONE).unwrap();
            name
        })
        .collect()
}

// Defect 4: generated dynamic queue names do not repeat after a restart.
#[test]
fn dynamic_queue_names_are_unique_across_restarts() {
    let home = Home::new();
    let qm = Qm::start(&home, "FID4", &[]);
    mqsc_ok(
        &home,
        "FID4",
        "DEFINE QMODEL(F.PERM.MODEL) DEFTYPE(PERMDYN)\n",
    );
    let mut seen = BTreeSet::new();
    for round in 0..3 {
        let c = qm.connect();
        for name in permanent_dynamic_queues(&c, "F.PERM.MODEL", 3)
            .into_iter()
            .chain(temporary_dynamic_queues(&c, 3))
        {
            assert!(
                name.starts_with("F.PERM.") || name.starts_with("AMQ."),
                "{name}"
            );
            assert!(
                seen.insert(name.clone()),
                "round {round}: the name {name} was generated before"
            );
        }
        drop(c);
        if round < 2 {
            qm.end();
            qm.restart();
        }
    }
    // Every permanent one still exists.
    let (_, shown) = runmqsc(&home, "FID4", "DISPLAY QLOCAL(F.PERM.*)\n");
    let kept = seen.iter().filter(|n| n.starts_with("F.PERM.")).count();
    assert_eq!(kept, 9);
    for n in seen.iter().filter(|n| n.starts_with("F.PERM.")) {
        assert!(shown.contains(&format!("QUEUE({n})")), "{n}:\n{shown}");
    }
}

// Defect 4 in an HA group: the instance that takes over does not generate the names the old
// active one did.
#[test]
fn dynamic_queue_names_are_unique_across_an_ha_failover() {
    let g = HaGroup::start("FIDHA", &[]);
    let first = g.wait_active(Duration::from_secs(30));
    mqsc_ok(
        &g.homes[first],
        "FIDHA",
        "DEFINE QMODEL(F.PERM.MODEL) DEFTYPE(PERMDYN)\n",
    );
    // The group's identity and the model's creation time, as the first active instance has
    // them: the instance taking over shows the same (they travel in the replicated log).
    let identity = |i: usize| {
        let text = mqsc_ok(
            &g.homes[i],
            "FIDHA",
            "DISPLAY QMGR QMID CRDATE CRTIME\nDISPLAY QMODEL(F.PERM.MODEL) CRDATE CRTIME\n",
        );
        text.lines()
            .flat_map(|l| l.split_whitespace())
            .filter(|w| {
                ["QMID(", "CRDATE(", "CRTIME("]
                    .iter()
                    .any(|k| w.starts_with(k))
            })
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let id_before = identity(first);
    assert!(
        id_before.len() == 5 && id_before[0].starts_with("QMID(FIDHA_"),
        "{id_before:?}"
    );
    let c = g.connect();
    let before = permanent_dynamic_queues(&c, "F.PERM.MODEL", 3);
    drop(c);
    g.kill9(first);
    let t = Instant::now();
    let second = loop {
        if let Some(i) = g.active().filter(|&i| i != first) {
            break i;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no other instance became active; logs:\n{}",
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(identity(second), id_before, "after failover");
    let c = g.connect();
    let after = permanent_dynamic_queues(&c, "F.PERM.MODEL", 3);
    let all: BTreeSet<&String> = before.iter().chain(after.iter()).collect();
    assert_eq!(
        all.len(),
        6,
        "names repeat after failover to instance {second}: {before:?} then {after:?}"
    );
}

// Defect 5: the Expiry a get returns is the time left, in tenths of a second.
#[test]
fn a_get_returns_the_remaining_expiry() {
    let home = Home::new();
    let qm = Qm::start(&home, "FID5", &[]);
    mqsc_ok(&home, "FID5", "DEFINE QLOCAL(F.EXP)\n");
    let c = qm.connect();
    let h = c
        .open("F.EXP", open::OUTPUT | open::INPUT_SHARED | open::BROWSE)
        .unwrap();
    const PUT_EXPIRY: i32 = 36_000; // one hour
    let started = Instant::now();
    put(
        &c,
        &h,
        &MessageDescriptor {
            expiry: PUT_EXPIRY,
            ..Default::default()
        },
        "expires",
    );
    put(&c, &h, &MessageDescriptor::default(), "never expires");
    // Let at least 0.3 s pass on the queue (a wait for time itself, not for a condition).
    while started.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let browsed = c
        .get(
            &h,
            &GetOptions {
                browse: Browse::First,
                ..GetOptions::any()
            },
        )
        .unwrap();
    let got = c.get(&h, &GetOptions::any()).unwrap();
    let elapsed_tenths = (started.elapsed().as_millis() / 100) as i32 + 1;
    for (what, e) in [("browse", browsed.md.expiry), ("get", got.md.expiry)] {
        assert!(
            e <= PUT_EXPIRY - 3 && e >= PUT_EXPIRY - elapsed_tenths,
            "{what}: Expiry {e} is not what is left of {PUT_EXPIRY} after at least 0.3 s and at most {elapsed_tenths} tenths"
        );
    }
    let never = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(never.md.expiry, EXPIRY_UNLIMITED);
}

// Defect 6: MQ's default put options do not include MQPMO_NEW_MSG_ID: the caller's MsgId is
// kept; it is replaced only when asked for (or generated when it is all zeros).
#[test]
fn a_callers_msg_id_is_kept_unless_a_new_one_is_asked_for() {
    let home = Home::new();
    let qm = Qm::start(&home, "FID6", &[]);
    mqsc_ok(&home, "FID6", "DEFINE QLOCAL(F.IDS)\n");
    let c = qm.connect();
    let h = c.open("F.IDS", open::OUTPUT | open::INPUT_SHARED).unwrap();
    let mine = MessageDescriptor {
        msg_id: [7; 24],
        ..Default::default()
    };
    let (put_id, _) = c
        .put(
            &h,
            &mine,
            &Properties::default(),
            Bytes::from_static(b"kept"),
            &PutOptions::default(),
        )
        .unwrap();
    assert_eq!(
        put_id, [7; 24],
        "MQPUT with default options keeps the MsgId"
    );
    let (put1_id, _) = c
        .put1(
            "F.IDS",
            &mine,
            &Properties::default(),
            Bytes::from_static(b"kept by put1"),
            &PutOptions::default(),
        )
        .unwrap();
    assert_eq!(put1_id, [7; 24], "MQPUT1 with default options keeps it too");
    let (new_id, _) = c
        .put(
            &h,
            &mine,
            &Properties::default(),
            Bytes::from_static(b"renamed"),
            &PutOptions {
                new_msg_id: true,
                ..PutOptions::default()
            },
        )
        .unwrap();
    assert_ne!(new_id, [7; 24], "MQPMO_NEW_MSG_ID replaces it");
    let (generated, _) = c
        .put(
            &h,
            &MessageDescriptor::default(),
            &Properties::default(),
            Bytes::from_static(b"generated"),
            &PutOptions::default(),
        )
        .unwrap();
    assert_ne!(generated, [0; 24], "an all-zero MsgId is generated");
    let ids: Vec<[u8; 24]> = (0..4)
        .map(|_| c.get(&h, &GetOptions::any()).unwrap().md.msg_id)
        .collect();
    assert_eq!(ids, vec![[7; 24], [7; 24], new_id, generated]);
}

fn reason_of(text: &str) -> &str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Reason: "))
        .unwrap_or("")
}

// Defect 7: START/STOP LISTENER report MQ's reasons for "already in that state", IGNSTATE(YES)
// accepts that state, and PORT(0) means the queue manager's port, not a random one.
#[test]
fn listener_start_stop_follow_mq_and_port_0_is_the_queue_managers_port() {
    let home = Home::new();
    let qm = Qm::start(&home, "FID7", &[]);
    mqsc_ok(
        &home,
        "FID7",
        "DEFINE LISTENER(F.L0) TRPTYPE(TCP) PORT(0) CONTROL(MANUAL)\n",
    );
    mqsc_ok(&home, "FID7", "START LISTENER(F.L0)\n");
    let shown = mqsc_ok(&home, "FID7", "DISPLAY LSSTATUS(F.L0) PORT\n");
    assert!(
        shown.contains(&format!("PORT({})", qm.port)),
        "PORT(0) listens on the queue manager's port {}:\n{shown}",
        qm.port
    );

    let (code, text) = runmqsc(&home, "FID7", "START LISTENER(F.L0)\n");
    assert_ne!(code, 0, "{text}");
    assert_eq!(reason_of(&text), "MQRCCF_LISTENER_STARTED (3233)", "{text}");
    mqsc_ok(&home, "FID7", "START LISTENER(F.L0) IGNSTATE(YES)\n");

    mqsc_ok(&home, "FID7", "STOP LISTENER(F.L0)\n");
    let (code, text) = runmqsc(&home, "FID7", "STOP LISTENER(F.L0)\n");
    assert_ne!(code, 0, "{text}");
    assert_eq!(reason_of(&text), "MQRCCF_LISTENER_STOPPED (3234)", "{text}");
    mqsc_ok(&home, "FID7", "STOP LISTENER(F.L0) IGNSTATE(YES)\n");
    let (code, text) = runmqsc(&home, "FID7", "STOP LSTR(F.L0) IGNSTATE(MAYBE)\n");
    assert_ne!(code, 0, "{text}");

    // The queue manager's own listener still serves clients.
    let c = qm.connect();
    c.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::OUTPUT).unwrap();
}

// Defect 7: START/STOP CHANNEL accept IGNSTATE(YES) and say what they did.
#[test]
fn channel_start_and_stop_accept_ignstate() {
    let home = Home::new();
    let qm = Qm::start(&home, "FID8", &[]);
    mqsc_ok(
        &home,
        "FID8",
        "DEFINE CHANNEL(F.APP.SVRCONN) CHLTYPE(SVRCONN)\n",
    );
    mqsc_ok(&home, "FID8", "START CHANNEL(F.APP.SVRCONN)\n");
    mqsc_ok(
        &home,
        "FID8",
        "START CHANNEL(F.APP.SVRCONN) IGNSTATE(YES)\n",
    );
    mqsc_ok(&home, "FID8", "STOP CHANNEL(F.APP.SVRCONN) IGNSTATE(YES)\n");
    let (code, text) = runmqsc(&home, "FID8", "STOP CHANNEL(F.APP.SVRCONN)\n");
    assert_ne!(code, 0, "{text}");
    assert_eq!(
        reason_of(&text),
        "MQRCCF_CHANNEL_NOT_ACTIVE (4064)",
        "{text}"
    );
    let (code, text) = runmqsc(&home, "FID8", "START CHANNEL(F.NOT.THERE)\n");
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("F.NOT.THERE"), "{text}");
    // Clients still connect.
    let c = qm.connect();
    c.open("SYSTEM.DEFAULT.LOCAL.QUEUE", open::OUTPUT).unwrap();
}

/// MQSET changes InhibitGet, InhibitPut and the trigger attributes of an open queue, as durably
/// as an ALTER (a kill -9 right after the call keeps it), with MQ's reasons for a queue not
/// opened for set, an attribute MQSET cannot change and a value out of range.
#[test]
fn mqset_changes_inhibits_and_trigger_attributes_durably() {
    use ferrymq_types::Reason;
    let home = Home::new();
    let qm = Qm::start(&home, "QSET1", &[]);
    mqsc_ok(
        &home,
        "QSET1",
        "DEFINE QLOCAL(S.Q)\nDEFINE QALIAS(S.A) TARGET(S.Q)\n",
    );
    let c = qm.connect();
    let plain = c.open("S.Q", open::OUTPUT).unwrap();
    assert_eq!(
        c.set(&plain, &[("PUT", "DISABLED")]).unwrap_err().reason,
        Reason::NOT_OPEN_FOR_SET
    );
    let h = c.open("S.Q", open::SET | open::OUTPUT).unwrap();
    for (attrs, reason) in [
        (vec![("MAXDEPTH", "5")], Reason::SELECTOR_ERROR),
        (vec![("GET", "MAYBE")], Reason::INHIBIT_VALUE_ERROR),
        (vec![("TRIGTYPE", "SOMETIMES")], Reason::TRIGGER_TYPE_ERROR),
        (vec![("TRIGDPTH", "0")], Reason::TRIGGER_DEPTH_ERROR),
        (vec![("TRIGMPRI", "10")], Reason::TRIGGER_MSG_PRIORITY_ERR),
        (vec![("TRIGGER", "OFTEN")], Reason::TRIGGER_CONTROL_ERROR),
        // Nothing changes when one attribute of the call is wrong.
        (
            vec![("PUT", "DISABLED"), ("TRIGMPRI", "12")],
            Reason::TRIGGER_MSG_PRIORITY_ERR,
        ),
    ] {
        assert_eq!(c.set(&h, &attrs).unwrap_err().reason, reason, "{attrs:?}");
    }
    put(&c, &h, &MessageDescriptor::default(), "still allowed");
    c.set(
        &h,
        &[
            ("PUT", "DISABLED"),
            ("GET", "DISABLED"),
            ("TRIGGER", "TRIGGER"),
            ("TRIGTYPE", "DEPTH"),
            ("TRIGDPTH", "7"),
            ("TRIGMPRI", "3"),
            ("TRIGDATA", "Start Me"),
        ],
    )
    .unwrap();
    let e = c
        .put(
            &h,
            &MessageDescriptor::default(),
            &Properties::default(),
            Bytes::from_static(b"x"),
            &PutOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::PUT_INHIBITED);
    // An alias's own inhibits are set through it; it has no trigger attributes.
    let a = c.open("S.A", open::SET).unwrap();
    c.set(&a, &[("PUT", "DISABLED")]).unwrap();
    assert_eq!(
        c.set(&a, &[("TRIGDPTH", "2")]).unwrap_err().reason,
        Reason::SELECTOR_NOT_FOR_TYPE
    );
    qm.kill9();
    qm.restart();
    let shown = mqsc_ok(
        &home,
        "QSET1",
        "DISPLAY QLOCAL(S.Q) ALL\nDISPLAY QALIAS(S.A) PUT\n",
    );
    for want in [
        "PUT(DISABLED)",
        "GET(DISABLED)",
        "TRIGTYPE(DEPTH)",
        "TRIGDPTH(7)",
        "TRIGMPRI(3)",
        "TRIGDATA(Start Me)",
    ] {
        assert!(shown.contains(want), "{want} missing from:\n{shown}");
    }
    assert!(
        shown.contains(" TRIGGER ") || shown.contains(" TRIGGER\n") || shown.contains("  TRIGGER"),
        "TRIGGER missing from:\n{shown}"
    );
    assert_eq!(shown.matches("PUT(DISABLED)").count(), 2, "{shown}");
}

#[test]
fn a_put_to_a_remote_queue_waits_on_its_transmission_queue_behind_a_transmission_header() {
    let home = Home::new();
    let qm = Qm::start(&home, "XQ1", &[]);
    mqsc_ok(
        &home,
        "XQ1",
        "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
         DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2)\n",
    );
    let c = qm.connect();
    let h = c.open("ORDERS", open::OUTPUT).unwrap();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    put(&c, &h, &md, "order 1");
    c.close(&h, 0).unwrap();
    // Held across a crash like any persistent message.
    drop(c);
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    let x = c.open("QM2", open::INPUT_SHARED).unwrap();
    let got = c.get(&x, &GetOptions::any()).unwrap();
    assert_eq!(got.md.format, "MQXMIT");
    let (xqh, data) =
        ferrymq_types::xqh::TransmissionHeader::parse(&got.body).expect("a transmission header");
    assert_eq!(
        (xqh.remote_q.as_str(), xqh.remote_qmgr.as_str()),
        ("ORDERS.IN", "QM2")
    );
    assert_eq!((xqh.md.format.as_str(), data), ("MQSTR", &b"order 1"[..]));
    assert_eq!(xqh.md.msg_id, got.md.msg_id);
    // With no transmission queue for a queue manager, the put says so.
    let err = c
        .open_qmgr("ANY.Q", "QM9", open::OUTPUT)
        .expect_err("no route to QM9");
    assert_eq!(err.reason, ferrymq_types::Reason::UNKNOWN_REMOTE_Q_MGR);
}
