//! Message groups and segments over real TCP (and bindings) against the real binary: puts in
//! logical order (the queue manager assigns GroupId, MsgSeqNumber and Offset), explicit group
//! fields and their MQ reason codes, gets in logical order, only complete groups
//! (MQGMO_ALL_MSGS_AVAILABLE), reassembly of segments (MQGMO_COMPLETE_MSG), matching on the group
//! fields, and persistent groups across a kill -9.

mod support;

use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::descriptor::{msg_flags, status, ID_NONE};
use ferrymq_types::options::{gmo, open, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use support::{Home, Qm};

const IO: u32 = open::INPUT_SHARED | open::OUTPUT | open::BROWSE;

fn mqsc(c: &Connection, cmd: &str) {
    c.admin(&format!("MQSC {cmd}"))
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
}

fn logical() -> PutOptions {
    PutOptions {
        logical_order: true,
        ..PutOptions::default()
    }
}

fn flagged(flags: i32) -> MessageDescriptor {
    MessageDescriptor {
        msg_flags: flags,
        ..MessageDescriptor::default()
    }
}

fn put(
    c: &Connection,
    h: &ObjectHandle,
    md: &MessageDescriptor,
    body: &str,
    opts: &PutOptions,
) -> Result<(), Reason> {
    c.put(
        h,
        md,
        &Properties::default(),
        Bytes::from(body.to_string()),
        opts,
    )
    .map(|_| ())
    .map_err(|e| e.reason)
}

fn get(
    c: &Connection,
    h: &ObjectHandle,
    opts: GetOptions,
) -> Result<ferrymq_client::Message, Reason> {
    c.get(
        h,
        &GetOptions {
            max_len: u32::MAX,
            ..opts
        },
    )
    .map_err(|e| e.reason)
}

fn with(group_options: u32) -> GetOptions {
    GetOptions {
        group_options,
        ..GetOptions::default()
    }
}

fn text(m: &ferrymq_client::Message) -> String {
    String::from_utf8(m.body.to_vec()).unwrap()
}

const IN: i32 = msg_flags::MSG_IN_GROUP;
const LAST: i32 = msg_flags::LAST_MSG_IN_GROUP;

/// Puts a three-message group in logical order and checks what a get in logical order returns.
fn logical_order_round_trip(c: &Connection) {
    mqsc(c, "DEFINE QLOCAL(G.LOGICAL)");
    let h = c.open("G.LOGICAL", IO).unwrap();
    put(c, &h, &flagged(0), "alone", &PutOptions::default()).unwrap();
    // The queue manager tells the putter what it assigned, as MQPUT's descriptor does.
    let mut assigned = Vec::new();
    for (flags, body) in [(IN, "a1"), (IN, "a2"), (LAST, "a3")] {
        let mut md = flagged(flags);
        c.put_md(
            &h,
            &mut md,
            &Properties::default(),
            Bytes::from(body),
            &logical(),
        )
        .unwrap();
        assigned.push((md.group_id, md.msg_seq_number, md.offset));
    }
    assert_ne!(assigned[0].0, ID_NONE);
    assert_eq!(
        assigned,
        vec![
            (assigned[0].0, 1, 0),
            (assigned[0].0, 2, 0),
            (assigned[0].0, 3, 0)
        ]
    );
    for (flags, body) in [(IN, "b1"), (LAST, "b2")] {
        put(c, &h, &flagged(flags), body, &logical()).unwrap();
    }
    let lo = with(gmo::LOGICAL_ORDER);
    let m = get(c, &h, lo.clone()).unwrap();
    assert_eq!(text(&m), "alone");
    assert_eq!(m.md.group_status(), status::NOT_IN_GROUP);
    assert_eq!(m.md.group_id, ID_NONE);
    let mut groups = Vec::new();
    let first = get(c, &h, lo.clone()).unwrap();
    assert_eq!(text(&first), "a1");
    groups.push(first.md.group_id);
    // The rest of the group must be got outside a unit of work too, as a1 was.
    let in_uow = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..lo.clone()
    };
    assert_eq!(get(c, &h, in_uow).unwrap_err(), Reason::INCONSISTENT_UOW);
    for (want, seq, st) in [
        ("a2", 2, status::MSG_IN_GROUP),
        ("a3", 3, status::LAST_MSG_IN_GROUP),
        ("b1", 1, status::MSG_IN_GROUP),
        ("b2", 2, status::LAST_MSG_IN_GROUP),
    ] {
        let m = get(c, &h, lo.clone()).unwrap();
        assert_eq!(text(&m), want);
        assert_eq!(m.md.msg_seq_number, seq, "{want}");
        assert_eq!(m.md.group_status(), st, "{want}");
        assert_eq!(m.md.segment_status(), status::NOT_A_SEGMENT);
        assert_ne!(m.md.group_id, ID_NONE, "{want}");
        groups.push(m.md.group_id);
    }
    assert!(groups[..3].iter().all(|g| *g == assigned[0].0));
    assert_eq!(groups[3], groups[4]);
    assert_ne!(groups[0], groups[3], "each group has a GroupId of its own");
    assert_eq!(get(c, &h, lo).unwrap_err(), Reason::NO_MSG_AVAILABLE);
    c.close(&h, 0).unwrap();
}

#[test]
fn puts_in_logical_order_get_a_unique_group_id_and_sequence_numbers() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP1", &[]);
    logical_order_round_trip(&qm.connect());
    let b = qm.connect_bindings();
    mqsc(&b, "DELETE QLOCAL(G.LOGICAL)");
    logical_order_round_trip(&b);
}

#[test]
fn group_puts_are_checked_with_mqs_reason_codes() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP2", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(G.CHECK)");
    let h = c.open("G.CHECK", IO).unwrap();
    let persistent = |flags| MessageDescriptor {
        persistence: Persistence::Persistent,
        ..flagged(flags)
    };
    let np = |flags| MessageDescriptor {
        persistence: Persistence::NotPersistent,
        ..flagged(flags)
    };

    // A group under way in logical order: a message outside it is refused, by either kind of put.
    put(&c, &h, &np(IN), "1", &logical()).unwrap();
    assert_eq!(
        put(&c, &h, &np(0), "x", &logical()),
        Err(Reason::INCOMPLETE_GROUP)
    );
    assert_eq!(
        put(&c, &h, &np(IN), "x", &PutOptions::default()),
        Err(Reason::INCOMPLETE_GROUP)
    );
    // Every message of a group has the same persistence and the same syncpoint option.
    assert_eq!(
        put(&c, &h, &persistent(IN), "x", &logical()),
        Err(Reason::INCONSISTENT_PERSISTENCE)
    );
    let in_uow = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..logical()
    };
    assert_eq!(
        put(&c, &h, &np(IN), "x", &in_uow),
        Err(Reason::INCONSISTENT_UOW)
    );
    put(&c, &h, &np(LAST), "2", &logical()).unwrap();

    // A logical message under way in segments: a message that is not a segment is refused.
    put(&c, &h, &np(msg_flags::SEGMENT), "s1", &logical()).unwrap();
    assert_eq!(
        put(&c, &h, &np(0), "x", &logical()),
        Err(Reason::INCOMPLETE_MSG)
    );
    put(&c, &h, &np(msg_flags::LAST_SEGMENT), "s2", &logical()).unwrap();

    // Explicit fields without MQPMO_LOGICAL_ORDER.
    let explicit = |seq, offset, flags| MessageDescriptor {
        group_id: [4; 24],
        msg_seq_number: seq,
        offset,
        ..flagged(flags)
    };
    let plain = PutOptions::default();
    assert_eq!(
        put(&c, &h, &explicit(0, 0, IN), "x", &plain),
        Err(Reason::MSG_SEQ_NUMBER_ERROR)
    );
    assert_eq!(
        put(&c, &h, &explicit(2, 0, 0), "x", &plain),
        Err(Reason::MSG_SEQ_NUMBER_ERROR)
    );
    assert_eq!(
        put(&c, &h, &explicit(1, 5, IN), "x", &plain),
        Err(Reason::OFFSET_ERROR)
    );
    assert_eq!(
        put(&c, &h, &explicit(1, -1, msg_flags::SEGMENT), "x", &plain),
        Err(Reason::OFFSET_ERROR)
    );
    assert_eq!(
        put(&c, &h, &explicit(1, 0, 0x400), "x", &plain),
        Err(Reason::MSG_FLAGS_ERROR)
    );
    put(&c, &h, &explicit(7, 0, IN), "x", &plain).unwrap();
    // MQPUT1 has no handle to continue a group with.
    let e = c
        .put1(
            "G.CHECK",
            &np(IN),
            &Properties::default(),
            Bytes::from_static(b"x"),
            &logical(),
        )
        .unwrap_err();
    assert_eq!(e.reason, Reason::OPTIONS_ERROR);
}

/// Puts message `seq` of group `gid` with explicit fields.
fn put_member(c: &Connection, h: &ObjectHandle, gid: u8, seq: i32, last: bool, body: &str) {
    let md = MessageDescriptor {
        group_id: [gid; 24],
        msg_seq_number: seq,
        persistence: Persistence::Persistent,
        ..flagged(if last { LAST } else { IN })
    };
    put(c, h, &md, body, &PutOptions::default()).unwrap();
}

#[test]
fn only_complete_groups_are_returned_with_all_msgs_available() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP3", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(G.ALL)");
    let h = c.open("G.ALL", IO).unwrap();
    // Group 1 is missing its last message; group 2 arrives out of order but whole.
    put_member(&c, &h, 1, 1, false, "g1m1");
    put_member(&c, &h, 1, 2, false, "g1m2");
    put_member(&c, &h, 2, 2, true, "g2m2");
    put_member(&c, &h, 2, 1, false, "g2m1");
    let all = with(gmo::LOGICAL_ORDER | gmo::ALL_MSGS_AVAILABLE);
    for want in ["g2m1", "g2m2"] {
        assert_eq!(text(&get(&c, &h, all.clone()).unwrap()), want);
    }
    assert_eq!(
        get(&c, &h, all.clone()).unwrap_err(),
        Reason::NO_MSG_AVAILABLE
    );

    // A getter waiting for a complete group receives the first message of group 1 once its
    // last message arrives (a message that is not what it takes).
    let waiter = {
        let qm_conn = qm.connect();
        std::thread::spawn(move || {
            let h = qm_conn.open("G.ALL", open::INPUT_SHARED).unwrap();
            let m = get(
                &qm_conn,
                &h,
                GetOptions {
                    wait: Wait::Ms(30_000),
                    ..all_clone()
                },
            )
            .unwrap();
            (text(&m), m.md.msg_seq_number)
        })
    };
    // Give the waiter time to be waiting; if it is not yet, it finds the complete group at once.
    std::thread::sleep(Duration::from_millis(200));
    put_member(&c, &h, 1, 3, true, "g1m3");
    assert_eq!(waiter.join().unwrap(), ("g1m1".to_string(), 1));
}

fn all_clone() -> GetOptions {
    with(gmo::LOGICAL_ORDER | gmo::ALL_MSGS_AVAILABLE)
}

#[test]
fn segments_are_returned_in_order_or_reassembled_whole() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP4", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(G.SEG)");
    let h = c.open("G.SEG", IO).unwrap();
    let seg = msg_flags::SEGMENT;
    let last = msg_flags::LAST_SEGMENT;
    for (flags, body) in [(seg, "hello "), (seg, "segmented "), (last, "world")] {
        put(&c, &h, &flagged(flags), body, &logical()).unwrap();
    }
    // Browsed one by one: offsets follow the lengths, the last segment is flagged.
    let b = |browse| {
        get(
            &c,
            &h,
            GetOptions {
                browse,
                ..GetOptions::default()
            },
        )
        .unwrap()
    };
    let mut seen = vec![b(Browse::First)];
    seen.push(b(Browse::Next));
    seen.push(b(Browse::Next));
    let offsets: Vec<(i32, u8)> = seen
        .iter()
        .map(|m| (m.md.offset, m.md.segment_status()))
        .collect();
    assert_eq!(
        offsets,
        vec![
            (0, status::SEGMENT),
            (6, status::SEGMENT),
            (16, status::LAST_SEGMENT)
        ]
    );
    assert!(seen.iter().all(|m| m.md.group_id == seen[0].md.group_id));

    let m = get(&c, &h, with(gmo::COMPLETE_MSG)).unwrap();
    assert_eq!(text(&m), "hello segmented world");
    assert_eq!(m.md.segment_status(), status::NOT_A_SEGMENT);
    assert_eq!(m.md.offset, 0);
    assert_eq!(
        get(&c, &h, GetOptions::default()).unwrap_err(),
        Reason::NO_MSG_AVAILABLE,
        "all three segments went with the whole message"
    );

    // An unfinished logical message is not returned whole, nor under ALL_SEGMENTS_AVAILABLE.
    put(&c, &h, &flagged(seg), "part", &logical()).unwrap();
    assert_eq!(
        get(&c, &h, with(gmo::COMPLETE_MSG)).unwrap_err(),
        Reason::NO_MSG_AVAILABLE
    );
    assert_eq!(
        get(&c, &h, with(gmo::ALL_SEGMENTS_AVAILABLE)).unwrap_err(),
        Reason::NO_MSG_AVAILABLE
    );
    put(&c, &h, &flagged(last), "s", &logical()).unwrap();
    let lo = with(gmo::LOGICAL_ORDER | gmo::ALL_SEGMENTS_AVAILABLE);
    let first = get(&c, &h, lo.clone()).unwrap();
    assert_eq!(
        (text(&first), first.md.segment_status()),
        ("part".into(), status::SEGMENT)
    );
    let second = get(&c, &h, lo).unwrap();
    assert_eq!(
        (text(&second), second.md.segment_status(), second.md.offset),
        ("s".into(), status::LAST_SEGMENT, 4)
    );
}

#[test]
fn gets_match_on_group_id_sequence_number_and_offset() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP5", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(G.MATCH)");
    let h = c.open("G.MATCH", IO).unwrap();
    put_member(&c, &h, 1, 1, false, "g1m1");
    put_member(&c, &h, 2, 1, false, "g2m1");
    put_member(&c, &h, 2, 2, true, "g2m2");
    put_member(&c, &h, 1, 2, true, "g1m2");
    let m = get(
        &c,
        &h,
        GetOptions {
            match_group_id: Some([1; 24]),
            match_msg_seq_number: Some(2),
            ..GetOptions::default()
        },
    )
    .unwrap();
    assert_eq!(text(&m), "g1m2");
    let m = get(
        &c,
        &h,
        GetOptions {
            match_group_id: Some([2; 24]),
            ..GetOptions::default()
        },
    )
    .unwrap();
    assert_eq!(text(&m), "g2m1");
    assert_eq!(
        get(
            &c,
            &h,
            GetOptions {
                match_group_id: Some([2; 24]),
                match_offset: Some(3),
                ..GetOptions::default()
            },
        )
        .unwrap_err(),
        Reason::NO_MSG_AVAILABLE
    );
}

#[test]
fn persistent_groups_survive_kill9_and_an_incomplete_group_is_held_back() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP6", &[]);
    {
        let c = qm.connect();
        mqsc(&c, "DEFINE QLOCAL(G.DUR)");
        let h = c.open("G.DUR", IO).unwrap();
        put_member(&c, &h, 1, 1, false, "g1m1");
        put_member(&c, &h, 2, 1, false, "g2m1");
        put_member(&c, &h, 1, 2, false, "g1m2");
        put_member(&c, &h, 2, 2, false, "g2m2");
        put_member(&c, &h, 1, 3, true, "g1m3");
        // Group 2's last message is never put: the queue manager dies between its messages.
    }
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    let h = c.open("G.DUR", IO).unwrap();
    let all = with(gmo::LOGICAL_ORDER | gmo::ALL_MSGS_AVAILABLE);
    for (i, want) in ["g1m1", "g1m2", "g1m3"].iter().enumerate() {
        let m = get(&c, &h, all.clone()).unwrap();
        assert_eq!(text(&m), *want);
        assert_eq!(m.md.group_id, [1; 24]);
        assert_eq!(m.md.msg_seq_number, i as i32 + 1);
    }
    assert_eq!(
        get(&c, &h, all.clone()).unwrap_err(),
        Reason::NO_MSG_AVAILABLE,
        "group 2 is incomplete"
    );
    // Its two messages are still there, with their group fields.
    let m = get(&c, &h, GetOptions::default()).unwrap();
    assert_eq!(
        (text(&m), m.md.group_id, m.md.msg_seq_number),
        ("g2m1".into(), [2; 24], 1)
    );
    assert_eq!(m.md.group_status(), status::MSG_IN_GROUP);
    // An orderly end writes a checkpoint; the message comes back from the message store whole.
    drop(c);
    qm.end();
    qm.restart();
    let c = qm.connect();
    let h = c.open("G.DUR", IO).unwrap();
    let m = get(&c, &h, GetOptions::default()).unwrap();
    assert_eq!(
        (text(&m), m.md.group_id, m.md.msg_seq_number),
        ("g2m2".into(), [2; 24], 2)
    );
}

// Asynchronous consume under syncpoint: a callback consumer commits or backs out inside its
// callback; a client killed in the middle of a unit of work loses and duplicates nothing.

fn put_persistent(c: &Connection, h: &ObjectHandle, bodies: impl Iterator<Item = String>) {
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..MessageDescriptor::default()
    };
    for b in bodies {
        put(c, h, &md, &b, &PutOptions::default()).unwrap();
    }
}

fn syncpoint_gets() -> GetOptions {
    GetOptions {
        syncpoint: Syncpoint::Yes,
        max_len: u32::MAX,
        ..GetOptions::default()
    }
}

#[test]
fn a_callback_consumer_backs_out_and_commits_inside_its_callback() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP7", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(CB.Q)");
    let h = c.open("CB.Q", IO | open::INQUIRE).unwrap();
    put_persistent(&c, &h, (0..3).map(|i| format!("m{i}")));
    let consumer_conn = qm.connect();
    let ch = consumer_conn.open("CB.Q", open::INPUT_SHARED).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let k = consumer_conn
        .consume_with(&ch, &syncpoint_gets(), 10, move |conn, m| {
            let body = text(&m);
            let count = m.md.backout_count;
            tx.send((body.clone(), count)).unwrap();
            // The first delivery of m0 is backed out: it comes back with its count raised.
            if body == "m0" && count == 0 {
                conn.backout().unwrap();
            } else {
                conn.commit().unwrap();
            }
            if body == "m2" {
                ferrymq_client::Flow::Stop
            } else {
                ferrymq_client::Flow::Continue
            }
        })
        .unwrap();
    k.wait().unwrap();
    let seen: Vec<(String, u32)> = rx.try_iter().collect();
    assert_eq!(
        seen,
        vec![
            ("m0".into(), 0),
            ("m0".into(), 1),
            ("m1".into(), 0),
            ("m2".into(), 0)
        ]
    );
    let depth = c.inquire(&h, &["CURDEPTH"]).unwrap();
    assert_eq!(depth[0].1, "0", "everything was committed once");
}

/// The child side of the kill -9 test: consumes under syncpoint with a callback, writing a ledger
/// of each unit of work before and after its commit. Runs only when spawned by the test below.
#[test]
#[ignore = "run as a child process by a_client_killed_mid_unit_of_work_loses_and_duplicates_nothing"]
fn callback_consumer_child() {
    use std::io::Write;
    let (Ok(conname), Ok(ledger)) = (
        std::env::var("GROUPS_CHILD_CONNAME"),
        std::env::var("GROUPS_CHILD_LEDGER"),
    ) else {
        return;
    };
    let opts = ferrymq_client::ConnectOptions::client("QGRP8", &conname).unwrap();
    let c = Connection::connect(opts).unwrap();
    let h = c.open("CB.LEDGER", open::INPUT_SHARED).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ledger)
        .unwrap();
    let mut batch: Vec<String> = Vec::new();
    let mut units = 0u32;
    let k = c
        .consume_with(&h, &syncpoint_gets(), 10, move |conn, m| {
            if m.md.backout_count > 0 {
                writeln!(file, "again {} {}", text(&m), m.md.backout_count).unwrap();
            }
            batch.push(text(&m));
            if batch.len() == 5 {
                units += 1;
                if units.is_multiple_of(4) {
                    // Now and then a unit of work is backed out: its messages come back.
                    conn.backout().unwrap();
                } else {
                    writeln!(file, "begin {}", batch.join(" ")).unwrap();
                    file.sync_data().unwrap();
                    conn.commit().unwrap();
                    writeln!(file, "end").unwrap();
                    file.sync_data().unwrap();
                }
                batch.clear();
            }
            ferrymq_client::Flow::Continue
        })
        .unwrap();
    k.wait().unwrap();
}

#[test]
fn a_client_killed_mid_unit_of_work_loses_and_duplicates_nothing() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QGRP8", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(CB.LEDGER)");
    let h = c.open("CB.LEDGER", open::OUTPUT | open::INQUIRE).unwrap();
    let total = 400;
    put_persistent(&c, &h, (0..total).map(|i| format!("m{i}")));
    let ledger = home.path().join("ledger.txt");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "callback_consumer_child",
            "--include-ignored",
            "--nocapture",
        ])
        .env("GROUPS_CHILD_CONNAME", qm.conname())
        .env("GROUPS_CHILD_LEDGER", &ledger)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill the child once it has committed a good part of the messages, mid-stream.
    let read = || std::fs::read_to_string(&ledger).unwrap_or_default();
    let t = std::time::Instant::now();
    while read().matches("end").count() < 12 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the child committed too little in 30 s:\n{}",
            read()
        );
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        std::thread::sleep(Duration::from_millis(5));
    }
    support::kill9_pid(child.id());
    let _ = child.wait();

    // The queue manager backs out the dead client's unit of work when its socket closes; its
    // input handle goes with it.
    let t = std::time::Instant::now();
    loop {
        let ip = c.inquire(&h, &["IPPROCS"]).unwrap();
        if ip[0].1 == "0" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the dead client's handle stayed open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let text_ledger = read();
    let mut committed: Vec<String> = Vec::new();
    let mut in_doubt: Vec<String> = Vec::new();
    for line in text_ledger.lines() {
        if let Some(rest) = line.strip_prefix("begin ") {
            in_doubt = rest.split(' ').map(str::to_string).collect();
        } else if line == "end" {
            committed.append(&mut in_doubt);
        }
    }
    let g = c.open("CB.LEDGER", open::INPUT_SHARED).unwrap();
    let mut remaining: Vec<(String, u32)> = Vec::new();
    while let Ok(m) = get(&c, &g, GetOptions::default()) {
        remaining.push((text(&m), m.md.backout_count));
    }
    let left: std::collections::BTreeSet<&str> =
        remaining.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(
        left.len(),
        remaining.len(),
        "a message is on the queue twice"
    );
    let done: std::collections::BTreeSet<&str> = committed.iter().map(String::as_str).collect();
    assert_eq!(done.len(), committed.len(), "a message was committed twice");
    assert!(
        done.is_disjoint(&left),
        "a committed message is still on the queue"
    );
    // A unit of work whose commit the child began but did not record ended either way, whole.
    let doubt_left = in_doubt
        .iter()
        .filter(|b| left.contains(b.as_str()))
        .count();
    assert!(
        doubt_left == 0 || doubt_left == in_doubt.len(),
        "the unit of work in doubt was split: {in_doubt:?}"
    );
    let doubt_done = if doubt_left == 0 { in_doubt.len() } else { 0 };
    assert_eq!(
        done.len() + doubt_done + left.len(),
        total,
        "messages were lost: {} committed, {} in doubt, {} left",
        done.len(),
        in_doubt.len(),
        left.len()
    );
    // The units of work the child backed out returned their messages with the count raised.
    assert!(
        text_ledger.lines().any(|l| l.starts_with("again ")),
        "no message came back from a backed-out unit of work:\n{text_ledger}"
    );
}
