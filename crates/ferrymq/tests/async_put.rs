//! Asynchronous put response against the real binary: puts the client does not wait for are
//! applied in order before the conversation's next request, their failures are counted for
//! MQSTAT, a failed one under syncpoint makes MQCMIT back out, and DEFPRESP(ASYNC) on a queue
//! or topic makes the puts that ask for the object's default unanswered.

mod support;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::options::{open, pmo, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use support::{Home, Qm};

fn mqsc(c: &Connection, cmd: &str) {
    c.admin(&format!("MQSC {cmd}"))
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
}

fn unanswered() -> PutOptions {
    PutOptions {
        response: pmo::ASYNC_RESPONSE,
        ..PutOptions::default()
    }
}

fn put(c: &Connection, h: &ObjectHandle, body: &str, opts: &PutOptions) {
    c.put(
        h,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from(body.to_string()),
        opts,
    )
    .unwrap_or_else(|e| panic!("put '{body}' to '{}': {e}", h.name));
}

fn drain(c: &Connection, h: &ObjectHandle) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        match c.get(h, &GetOptions::any()) {
            Ok(m) => out.push(String::from_utf8_lossy(&m.body).into_owned()),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return out,
            Err(e) => panic!("get from '{}': {e}", h.name),
        }
    }
}

#[test]
fn async_puts_are_applied_in_order_before_the_next_request_and_counted_by_mqstat() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP1", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(AP.Q)");
    let h = c.open("AP.Q", open::OUTPUT | open::INPUT_SHARED).unwrap();
    let (first_id, _) = c
        .put(
            &h,
            &MessageDescriptor::default(),
            &Properties::default(),
            Bytes::from_static(b"m0"),
            &unanswered(),
        )
        .unwrap();
    assert_ne!(
        first_id, [0u8; 24],
        "the client gives an unanswered put its MsgId"
    );
    for i in 1..500 {
        put(&c, &h, &format!("m{i}"), &unanswered());
    }
    // The get goes out after the puts on the same conversation and sees every one, in order.
    let first = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(first.md.msg_id, first_id);
    let mut got = vec![String::from_utf8_lossy(&first.body).into_owned()];
    got.extend(drain(&c, &h));
    let want: Vec<String> = (0..500).map(|i| format!("m{i}")).collect();
    assert_eq!(got, want);
    let st = c.stat().unwrap();
    assert_eq!(
        (st.put_success_count, st.put_failure_count, st.comp_code),
        (500, 0, 0)
    );
    assert_eq!(st.reason, Reason::NONE);
    // MQSTAT starts a new period.
    assert_eq!(c.stat().unwrap().put_success_count, 0);
    // A put that asks to wait is answered and not counted.
    put(
        &c,
        &h,
        "sync",
        &PutOptions {
            response: pmo::SYNC_RESPONSE,
            ..PutOptions::default()
        },
    );
    assert_eq!(c.stat().unwrap().put_success_count, 0);
}

#[test]
fn failed_async_puts_show_in_mqstat_with_the_first_failures_reason_and_object() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP2", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(AP.SMALL) MAXDEPTH(2)");
    mqsc(&c, "DEFINE QALIAS(AP.NOWHERE) TARGET(AP.MISSING)");
    let h = c.open("AP.SMALL", open::OUTPUT).unwrap();
    for i in 0..5 {
        // Returns at once with success, whatever becomes of the put.
        put(&c, &h, &format!("m{i}"), &unanswered());
    }
    // An MQPUT1 through an alias whose target does not exist fails too.
    c.put1(
        "AP.NOWHERE",
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"lost"),
        &unanswered(),
    )
    .unwrap();
    let st = c.stat().unwrap();
    assert_eq!(st.put_success_count, 2, "{st:?}");
    assert_eq!(st.put_failure_count, 4, "{st:?}");
    assert_eq!(st.comp_code, 2, "MQCC_FAILED: {st:?}");
    assert_eq!(st.reason, Reason::Q_FULL, "the first failure: {st:?}");
    assert_eq!(st.object_name, "AP.SMALL");
    let st = c.stat().unwrap();
    assert_eq!(
        (st.put_failure_count, st.comp_code),
        (0, 0),
        "reset: {st:?}"
    );
    // Failures of the alias alone name it.
    c.put1(
        "AP.NOWHERE",
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"lost"),
        &unanswered(),
    )
    .unwrap();
    let st = c.stat().unwrap();
    assert_eq!(st.put_failure_count, 1, "{st:?}");
    assert_eq!(st.reason, Reason::UNKNOWN_ALIAS_BASE_Q, "{st:?}");
    assert_eq!(st.object_name, "AP.NOWHERE");
}

#[test]
fn mqcmit_after_a_failed_async_put_under_syncpoint_backs_out() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP3", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(AP.OK)");
    mqsc(&c, "DEFINE QLOCAL(AP.FULL) MAXDEPTH(1)");
    let ok = c.open("AP.OK", open::OUTPUT | open::INPUT_SHARED).unwrap();
    let full = c.open("AP.FULL", open::OUTPUT).unwrap();
    put(&c, &full, "filler", &PutOptions::default());
    let in_uow = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..unanswered()
    };
    put(&c, &ok, "a", &in_uow);
    put(&c, &full, "refused", &in_uow);
    put(&c, &ok, "b", &in_uow);
    let err = c.commit().unwrap_err();
    assert_eq!(err.reason, Reason::BACKED_OUT, "{err}");
    assert!(drain(&c, &ok).is_empty(), "the unit of work was backed out");
    // The next unit of work is a new one.
    put(&c, &ok, "c", &in_uow);
    c.commit().unwrap();
    assert_eq!(drain(&c, &ok), vec!["c".to_string()]);
    let st = c.stat().unwrap();
    assert_eq!((st.put_success_count, st.put_failure_count), (3, 1));
    assert_eq!(st.reason, Reason::Q_FULL);
}

#[test]
fn defpresp_async_on_a_queue_or_topic_makes_puts_as_the_default_unanswered() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP4", &[]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(AP.ASYNC) DEFPRESP(ASYNC)");
    mqsc(&c, "DEFINE QLOCAL(AP.SYNC)");
    mqsc(
        &c,
        "DEFINE TOPIC(AP.T) TOPICSTR('ap/async') DEFPRESP(ASYNC)",
    );
    let shown = c.admin("MQSC DISPLAY QLOCAL(AP.ASYNC) DEFPRESP").unwrap();
    assert!(shown.contains("DEFPRESP(ASYNC)"), "{shown}");
    let a = c.open("AP.ASYNC", open::OUTPUT).unwrap();
    let s = c.open("AP.SYNC", open::OUTPUT).unwrap();
    // Below the topic object: ASPARENT resolves to its ASYNC.
    let t = c.open_topic("", "ap/async/below", open::OUTPUT).unwrap();
    let as_def = PutOptions::default();
    assert_eq!(as_def.response, pmo::RESPONSE_AS_Q_DEF);
    for i in 0..3 {
        put(&c, &a, &format!("a{i}"), &as_def);
        put(&c, &s, &format!("s{i}"), &as_def);
        put(&c, &t, &format!("t{i}"), &as_def);
    }
    let st = c.stat().unwrap();
    assert_eq!(
        st.put_success_count, 6,
        "3 to the queue, 3 to the topic: {st:?}"
    );
    // MQPMO_SYNC_RESPONSE overrides the queue's default.
    put(
        &c,
        &a,
        "sync",
        &PutOptions {
            response: pmo::SYNC_RESPONSE,
            ..PutOptions::default()
        },
    );
    assert_eq!(c.stat().unwrap().put_success_count, 0);
    let depth = c.admin("MQSC DISPLAY QLOCAL(AP.ASYNC) CURDEPTH").unwrap();
    assert!(depth.contains("CURDEPTH(4)"), "{depth}");
}

/// VmHWM (peak resident set) of a process, in KiB.
fn peak_rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_flood_of_async_puts_is_held_back_by_tcp_not_buffered_by_either_side() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP5", &[]);
    let admin = qm.connect();
    // Every put fails (PUT(DISABLED)), so the queue holds nothing: whatever memory grows is
    // buffering.
    mqsc(&admin, "DEFINE QLOCAL(AP.SHUT) PUT(DISABLED)");
    // A link slower than the client puts: without back pressure the puts would pile up.
    let port = support::free_port();
    let _relay = support::relay_limited(port, qm.port, 0, Some(200));
    let c = Connection::connect(
        ferrymq_client::ConnectOptions::client("QAP5", &format!("127.0.0.1({port})")).unwrap(),
    )
    .unwrap();
    let h = c.open("AP.SHUT", open::OUTPUT).unwrap();
    let qm_pid = qm.pid().expect("the queue manager runs").to_string();
    let (qm_before, me_before) = (peak_rss_kib(&qm_pid), peak_rss_kib("self"));
    let body = Bytes::from(vec![b'f'; 64 * 1024]);
    let n = 1000u64; // 64 MiB in all
    for _ in 0..n {
        c.put(
            &h,
            &MessageDescriptor::default(),
            &Properties::default(),
            body.clone(),
            &unanswered(),
        )
        .unwrap();
    }
    let me_growth = peak_rss_kib("self").saturating_sub(me_before);
    let st = c.stat().unwrap();
    assert_eq!(st.put_failure_count, n, "{st:?}");
    assert_eq!(st.reason, Reason::PUT_INHIBITED);
    let qm_growth = peak_rss_kib(&qm_pid).saturating_sub(qm_before);
    assert!(
        qm_growth < 24 * 1024,
        "the queue manager's peak RSS grew by {qm_growth} KiB for 64 MiB of puts"
    );
    assert!(
        me_growth < 24 * 1024,
        "the client's peak RSS grew by {me_growth} KiB for 64 MiB of puts"
    );
}

/// Persistent asynchronous puts nobody waits for arrive faster than a checkpoint frees the
/// recovery log: the queue manager holds the socket (TCP slows the client) while a checkpoint
/// makes room, rather than refusing puts with 2102 because the log filled up meanwhile. 8 MB
/// of messages go through a 2 MB log; every put succeeds and every message is there.
#[test]
fn persistent_async_puts_faster_than_checkpoints_wait_for_log_room_instead_of_failing() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP6", &["-lp", "2", "-lf", "256"]);
    let c = qm.connect();
    mqsc(&c, "DEFINE QLOCAL(AP.LOGQ) MAXDEPTH(100000)");
    let h = c
        .open("AP.LOGQ", open::OUTPUT | open::INPUT_SHARED)
        .unwrap();
    let md = MessageDescriptor {
        persistence: ferrymq_types::Persistence::Persistent,
        ..MessageDescriptor::default()
    };
    let body = Bytes::from(vec![b'p'; 2048]);
    const N: u64 = 4000;
    for _ in 0..N {
        c.put(&h, &md, &Properties::default(), body.clone(), &unanswered())
            .expect("an unanswered put returns at once");
    }
    let st = c.stat().unwrap();
    assert_eq!(
        (st.put_success_count, st.put_failure_count),
        (N, 0),
        "first failure: {:?} on '{}'",
        st.reason,
        st.object_name
    );
    let mut got = 0u64;
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                assert_eq!(m.body.len(), 2048);
                got += 1;
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("get: {e}"),
        }
    }
    assert_eq!(got, N);
}

#[test]
fn async_puts_sent_before_a_reconnect_are_counted_by_mqstat_as_failed_not_as_done() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QAP7", &[]);
    mqsc(&qm.connect(), "DEFINE QLOCAL(AP.RC.Q) DEFPSIST(YES)");
    let c = qm.connect_reconnecting(60);
    let h = c
        .open("AP.RC.Q", open::OUTPUT | open::INPUT_SHARED)
        .unwrap();
    // Counted before the break: these are settled and must not be reported again.
    put(&c, &h, "before", &unanswered());
    let st = c.stat().unwrap();
    assert_eq!((st.put_success_count, st.put_failure_count), (1, 0));
    let mut sent = std::collections::HashSet::new();
    for i in 0..200 {
        let (id, _) = c
            .put(
                &h,
                &MessageDescriptor::default(),
                &Properties::default(),
                Bytes::from(format!("m{i}")),
                &unanswered(),
            )
            .unwrap();
        sent.insert(id);
    }
    // The queue manager dies with the puts in any state: not read yet, applied, logged or not.
    qm.kill9();
    qm.restart();
    // MQSTAT reconnects; the new conversation counted nothing, so the client must say that the
    // 200 puts' fate is unknown rather than report no failure.
    let st = c.stat().unwrap();
    assert_eq!(st.put_failure_count, 200, "{st:?}");
    assert_eq!(st.put_success_count, 0, "{st:?}");
    assert_eq!(
        (st.comp_code, st.reason),
        (2, Reason::CONNECTION_BROKEN),
        "{st:?}"
    );
    assert_eq!(st.object_name, "AP.RC.Q");
    assert!(c.reconnects() >= 1);
    // What did arrive is a subset of what was sent, each once, besides the one counted before.
    let mut got = std::collections::HashSet::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) if &m.body[..] == b"before" => {}
            Ok(m) => assert!(
                sent.contains(&m.md.msg_id) && got.insert(m.md.msg_id),
                "a message that was not sent, or twice: {:?}",
                m.md.msg_id
            ),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("get: {e}"),
        }
    }
    // Puts on the new conversation are counted as usual, and the unknown ones only once.
    put(&c, &h, "after", &unanswered());
    let st = c.stat().unwrap();
    assert_eq!(
        (st.put_success_count, st.put_failure_count, st.comp_code),
        (1, 0, 0),
        "{st:?}"
    );
}
