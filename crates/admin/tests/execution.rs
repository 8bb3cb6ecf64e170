//! Executing commands against a queue manager: defaults, LIKE, REPLACE, ALTER, DISPLAY in all its
//! forms, status displays, and the commands delegated to the server.

mod common;

use bytes::Bytes;
use common::{get, names, Qm, NOW_MS};
use ferrymq_types::options::{open, PutOptions, Syncpoint};
use ferrymq_types::{DynamicKind, MessageDescriptor, MsgDeliverySequence, Properties, QueueKind};

#[test]
fn new_queues_take_the_attributes_of_the_default_local_queue() {
    let mut qm = Qm::new();
    qm.ok("ALTER QLOCAL(SYSTEM.DEFAULT.LOCAL.QUEUE) MAXDEPTH(123) DESCR('site default') NOSHARE");
    qm.ok("DEFINE QLOCAL(NEW.Q)");
    let row = qm.one("DIS QL(NEW.Q) ALL");
    assert_eq!(get(&row, "MAXDEPTH").unwrap(), "123");
    assert_eq!(get(&row, "DESCR").unwrap(), "site default");
    assert_eq!(get(&row, "SHARE").unwrap(), "NOSHARE");
    assert_eq!(get(&row, "DEFTYPE").unwrap(), "PREDEFINED");
}

#[test]
fn without_a_default_object_the_built_in_defaults_apply() {
    let mut qm = Qm::new();
    qm.ok("ALTER QLOCAL(SYSTEM.DEFAULT.LOCAL.QUEUE) MAXDEPTH(123)");
    qm.ok("DELETE QLOCAL(SYSTEM.DEFAULT.LOCAL.QUEUE)");
    qm.ok("DEFINE QLOCAL(NEW.Q)");
    assert_eq!(qm.attr("DIS QL(NEW.Q) MAXDEPTH", "MAXDEPTH"), "5000");
    qm.ok("DEFINE QALIAS(AL) TARGET(NEW.Q)");
    assert_eq!(qm.attr("DIS QA(AL) TARGET", "TARGET"), "NEW.Q");
}

#[test]
fn like_copies_an_existing_object_and_the_command_overrides_it() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(A) MAXDEPTH(42) DESCR('model answer') TRIGGER DEFPRTY(3)");
    qm.ok("DEF QL(B) LIKE(A) DEFPRTY(7)");
    let b = qm.one("DIS QL(B) ALL");
    assert_eq!(get(&b, "MAXDEPTH").unwrap(), "42");
    assert_eq!(get(&b, "DESCR").unwrap(), "model answer");
    assert_eq!(get(&b, "TRIGGER").unwrap(), "TRIGGER");
    assert_eq!(get(&b, "DEFPRTY").unwrap(), "7");
    qm.ok("DEF CHL(APP.SVRCONN) CHLTYPE(SVRCONN) SHARECNV(3)");
    qm.ok("DEF CHL(APP2.SVRCONN) CHLTYPE(SVRCONN) LIKE(APP.SVRCONN)");
    assert_eq!(qm.attr("DIS CHL(APP2.SVRCONN) SHARECNV", "SHARECNV"), "3");
}

#[test]
fn replace_changes_attributes_and_keeps_the_messages() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(Q) MAXDEPTH(100) DESCR('before')");
    qm.connect_and_put("Q", 3);
    qm.ok("DEF QL(Q) MAXDEPTH(10) REPLACE");
    let row = qm.one("DIS QL(Q) MAXDEPTH CURDEPTH DESCR");
    assert_eq!(get(&row, "MAXDEPTH").unwrap(), "10");
    assert_eq!(get(&row, "CURDEPTH").unwrap(), "3");
    // REPLACE redefines from the defaults: DESCR goes back to the default's.
    assert_eq!(get(&row, "DESCR").unwrap(), "");
}

#[test]
fn defining_an_existing_object_with_the_same_attributes_is_informational() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(Q) MAXDEPTH(100)");
    let r = qm.ok("DEF QL(Q) MAXDEPTH(100) NOREPLACE");
    assert_eq!(r.msg_id, "FMQ8151I");
    assert!(r.text.contains("QLOCAL(Q) already exists"), "{}", r.text);
    let r = qm.ok("define channel(SYSTEM.ADMIN.SVRCONN) chltype(SVRCONN)");
    assert_eq!(r.msg_id, "FMQ8151I");
    qm.ok("DEF QL(C) LIKE(Q)");
    assert_eq!(qm.ok("DEF QL(C) LIKE(Q)").msg_id, "FMQ8151I");
}

#[test]
fn each_queue_type_maps_to_its_engine_kind() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(L) MSGDLVSQ(FIFO) USAGE(XMITQ) GET(DISABLED) BOTHRESH(3) BOQNAME(BO.Q)");
    qm.ok("DEF QA(A) TARGQ(L) PUT(DISABLED)");
    qm.ok("DEF QM(M) DEFTYPE(PERMDYN)");
    qm.ok("DEF QR(R) RNAME(THEIR.Q) RQMNAME(QM2) XMITQ(L)");
    let e = &qm.engine;
    let l = e.queue_def("L").unwrap();
    assert_eq!(l.kind, QueueKind::Local);
    assert_eq!(l.msg_delivery_sequence, MsgDeliverySequence::Fifo);
    assert!(l.is_xmitq && l.get_inhibited && l.backout_threshold == 3);
    assert_eq!(l.backout_queue, "BO.Q");
    assert_eq!(
        e.queue_def("A").unwrap().kind,
        QueueKind::Alias { target: "L".into() }
    );
    assert!(e.queue_def("A").unwrap().put_inhibited);
    assert_eq!(
        e.queue_def("M").unwrap().kind,
        QueueKind::Model {
            def_type: DynamicKind::Permanent
        }
    );
    assert_eq!(
        e.queue_def("R").unwrap().kind,
        QueueKind::Remote {
            rname: "THEIR.Q".into(),
            rqmname: "QM2".into(),
            xmitq: "L".into()
        }
    );
}

#[test]
fn alter_changes_only_the_named_attributes() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(Q) MAXDEPTH(100) DESCR('kept') CLUSTER(C1)");
    qm.ok("ALT QL(Q) MAXDEPTH(200)");
    let row = qm.one("DIS QL(Q) ALL");
    assert_eq!(get(&row, "MAXDEPTH").unwrap(), "200");
    assert_eq!(get(&row, "DESCR").unwrap(), "kept");
    assert_eq!(get(&row, "CLUSTER").unwrap(), "C1");
    qm.ok("ALT QMGR DESCR('Main QM') DEADQ(MY.DLQ) MAXUMSGS(500) CONNAUTH(' ')");
    let a = qm.engine.attrs();
    assert_eq!(a.description, "Main QM");
    assert_eq!(a.dead_letter_queue, "MY.DLQ");
    assert_eq!(a.max_uncommitted_msgs, 500);
    assert_eq!(a.other.get("CONNAUTH").map(String::as_str), Some(""));
    qm.ok("ALT LSTR(SYSTEM.DEFAULT.LISTENER.TCP) PORT(1515)");
    assert_eq!(
        qm.attr("DIS LSTR(SYSTEM.DEFAULT.LISTENER.TCP) ALL", "CONTROL"),
        "MANUAL"
    );
}

#[test]
fn display_shows_name_and_type_by_default_then_what_is_asked_or_all() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(Q1) DESCR('a queue')");
    let r = qm.ok("DIS QL(Q1)");
    assert_eq!(r.msg_id, "FMQ8409I");
    assert_eq!(
        r.text,
        format!(
            "FMQ8409I: Attributes of queue Q1:\n   {:<40}TYPE(QLOCAL)",
            "QUEUE(Q1)"
        )
    );
    let row = qm.one("DIS QL(Q1) DESCR CURDEPTH");
    let keys: Vec<&str> = row.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["QUEUE", "TYPE", "DESCR", "CURDEPTH"]);
    let r = qm.ok("DIS QL(Q1) DESCR");
    assert!(r.text.contains("DESCR(a queue)"), "{}", r.text);
    let all = qm.one("DIS QL(Q1) ALL");
    for k in [
        "MAXDEPTH", "IPPROCS", "OPPROCS", "INDXTYPE", "PROPCTL", "SHARE",
    ] {
        assert!(get(&all, k).is_some(), "{k} missing from ALL");
    }
    // QMGR shows everything by default, as MQ does.
    assert!(qm.one("DIS QMGR").len() > 10);
}

#[test]
fn display_queue_covers_every_type_and_type_narrows_it() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(APP.L)");
    qm.ok("DEF QA(APP.A) TARGET(APP.L)");
    qm.ok("DEF QR(APP.R) RNAME(X)");
    let r = qm.ok("DIS Q(APP.*)");
    assert_eq!(names(&r), ["APP.A", "APP.L", "APP.R"]);
    assert_eq!(get(&r.rows[0], "TYPE").unwrap(), "QALIAS");
    assert_eq!(names(&qm.ok("DIS Q(APP.*) TYPE(QALIAS)")), ["APP.A"]);
    assert_eq!(names(&qm.ok("DIS QA(*)")), ["APP.A"]);
    assert_eq!(names(&qm.ok("DIS Q(APP.*) TYPE(ALL)")).len(), 3);
}

#[test]
fn where_filters_on_any_displayed_attribute() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(F.ONE) DESCR('payments in') MAXDEPTH(10)");
    qm.ok("DEF QL(F.TWO) DESCR('payments out') MAXDEPTH(20)");
    qm.ok("DEF QL(F.THREE) DESCR('audit') MAXDEPTH(30)");
    qm.connect_and_put("F.TWO", 2);
    assert_eq!(names(&qm.ok("DIS QL(F.*) WHERE(CURDEPTH GT 0)")), ["F.TWO"]);
    assert_eq!(
        names(&qm.ok("DIS QL(F.*) WHERE(MAXDEPTH GE 20)")),
        ["F.THREE", "F.TWO"]
    );
    assert_eq!(
        names(&qm.ok("DIS QL(F.*) WHERE(MAXDEPTH LT 20)")),
        ["F.ONE"]
    );
    assert_eq!(
        names(&qm.ok("DIS QL(F.*) WHERE(DESCR LK 'payments*')")),
        ["F.ONE", "F.TWO"]
    );
    assert_eq!(
        names(&qm.ok("DIS QL(F.*) WHERE(DESCR NL 'payments*')")),
        ["F.THREE"]
    );
    assert_eq!(
        names(&qm.ok("DIS QL(F.*) WHERE(DESCR EQ 'audit')")),
        ["F.THREE"]
    );
    assert_eq!(
        names(&qm.ok("DIS QL(F.*) WHERE(DESCR NE 'audit')")).len(),
        2
    );
    // The tested attribute is shown.
    let r = qm.ok("DIS QL(F.ONE) WHERE(MAXDEPTH EQ 10)");
    assert_eq!(get(&r.rows[0], "MAXDEPTH").unwrap(), "10");
    let r = qm.ok("DIS QL(F.*) WHERE(MAXDEPTH GT 1000)");
    assert_eq!(r.msg_id, "FMQ8420I");
    assert!(r.rows.is_empty());
}

#[test]
fn a_generic_name_matching_nothing_succeeds_with_a_message() {
    let mut qm = Qm::new();
    let r = qm.ok("DIS QL(NOTHING.HERE.*)");
    assert_eq!(r.msg_id, "FMQ8420I");
    assert!(r.text.contains("No objects matched"), "{}", r.text);
    assert_eq!(qm.ok("DIS CHL(NONE*)").msg_id, "FMQ8420I");
}

#[test]
fn qstatus_shows_depth_handles_ages_and_last_put_and_get() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(S.Q)");
    let c = qm.connect_and_put("S.Q", 2);
    let (h, _, _) = qm
        .engine
        .open(
            c,
            "S.Q",
            "",
            open::INPUT_SHARED | open::OUTPUT | open::INQUIRE,
            "",
        )
        .unwrap();
    let sp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    qm.engine
        .put(
            c,
            h,
            &sp,
            MessageDescriptor::default(),
            Properties::default(),
            Bytes::new(),
            NOW_MS,
        )
        .unwrap();
    let row = qm.one("DIS QSTATUS(S.Q) ALL");
    assert_eq!(get(&row, "TYPE").unwrap(), "QUEUE");
    assert_eq!(get(&row, "CURDEPTH").unwrap(), "2");
    assert_eq!(get(&row, "IPPROCS").unwrap(), "1");
    assert_eq!(get(&row, "OPPROCS").unwrap(), "1");
    assert_eq!(get(&row, "UNCOM").unwrap(), "1");
    assert_eq!(get(&row, "MSGAGE").unwrap(), "90");
    assert_eq!(get(&row, "LPUTDATE").unwrap(), "2024-05-06");
    assert_eq!(get(&row, "LPUTTIME").unwrap(), "07.08.09");
    assert_eq!(get(&row, "LGETDATE").unwrap(), "");
    let r = qm.ok("DIS QS(S.Q) ALL");
    assert!(r.text.contains("LGETTIME( )"), "{}", r.text);

    let row = qm.one("DIS QSTATUS(S.Q) TYPE(HANDLE) ALL");
    assert_eq!(get(&row, "TYPE").unwrap(), "HANDLE");
    assert_eq!(get(&row, "CONN").unwrap(), format!("{c:016X}"));
    assert_eq!(get(&row, "APPLTAG").unwrap(), "app1");
    assert_eq!(get(&row, "USERID").unwrap(), "alice");
    assert_eq!(get(&row, "INPUT").unwrap(), "SHARED");
    assert_eq!(get(&row, "OUTPUT").unwrap(), "YES");
    assert_eq!(get(&row, "BROWSE").unwrap(), "NO");
    assert_eq!(get(&row, "INQUIRE").unwrap(), "YES");

    // DISPLAY CONN: the connection, and its handles with TYPE(HANDLE) or ALL.
    let conn = format!("{c:X}");
    let row = qm.one(&format!("DIS CONN({conn})"));
    assert_eq!(get(&row, "UOWSTATE").unwrap(), "ACTIVE");
    assert_eq!(get(&row, "APPLTAG").unwrap(), "app1");
    let r = qm.ok(&format!("DIS CONN({conn}) ALL"));
    assert_eq!(r.rows.len(), 2);
    assert_eq!(get(&r.rows[1], "OBJNAME").unwrap(), "S.Q");
    let r = qm.ok("DIS CONN(*) TYPE(HANDLE)");
    assert_eq!(r.rows.len(), 1);
    assert_eq!(get(&r.rows[0], "TYPE").unwrap(), "HANDLE");
    // An exclusive opener shows as EXCL.
    qm.ok("DEF QL(X.Q)");
    qm.engine
        .open(c, "X.Q", "", open::INPUT_EXCLUSIVE, "")
        .unwrap();
    assert_eq!(qm.attr("DIS QS(X.Q) TYPE(HANDLE) INPUT", "INPUT"), "EXCL");
}

#[test]
fn server_status_displays_come_from_server_ops() {
    let mut qm = Qm::new();
    let r = qm.ok("DIS CHSTATUS(*)");
    assert_eq!(r.rows.len(), 2);
    assert_eq!(r.msg_id, "FMQ8417I");
    let row = qm.one("DIS CHS(APP.*) CONNAME");
    assert_eq!(row.len(), 2, "{row:?}");
    assert_eq!(get(&row, "CONNAME").unwrap(), "10.0.0.2(40000)");
    let row = qm.one("DIS QMSTATUS");
    assert_eq!(get(&row, "STATUS").unwrap(), "RUNNING");
    assert_eq!(qm.attr("DIS QMSTATUS CONNS", "CONNS"), "3");
    qm.ok("START LISTENER(SYSTEM.DEFAULT.LISTENER.TCP)");
    let row = qm.one("DIS LSSTATUS(*)");
    assert_eq!(get(&row, "STATUS").unwrap(), "RUNNING");
    assert_eq!(qm.ok("DIS CHS(*) WHERE(CURSHCNV GT 1)").rows.len(), 1);
}

#[test]
fn listener_security_ping_and_end_reach_the_server_or_answer_directly() {
    let mut qm = Qm::new();
    qm.ok("DEF LISTENER(L2) TRPTYPE(TCP) PORT(1515) CONTROL(MANUAL)");
    let r = qm.ok("START LISTENER(L2)");
    assert!(r.text.contains("listening on port 1515"), "{}", r.text);
    assert_eq!(qm.ops.started, [("L2".into(), "1515".into())]);
    qm.ok("STOP LISTENER(L2)");
    assert_eq!(qm.ops.stopped, ["L2"]);
    qm.ok("REFRESH SECURITY");
    assert_eq!(qm.ops.refreshed, ["AUTHSERV"]);
    assert!(qm.ok("PING QMGR").text.contains("QM1"));
    assert_eq!(qm.ok("END").msg_id, "FMQ8000I");
}

#[test]
fn start_and_stop_channel_answer_for_what_ferrymq_runs() {
    let mut qm = Qm::new();
    qm.ok("DEF CHL(APP.SVRCONN) CHLTYPE(SVRCONN)");
    qm.ok("DEF CHL(IDLE.SVRCONN) CHLTYPE(SVRCONN)");
    qm.ok("DEF CHL(TO.QM2) CHLTYPE(SDR) CONNAME('qm2(1414)') XMITQ(QM2)");
    assert_eq!(qm.ok("START CHANNEL(APP.SVRCONN)").msg_id, "FMQ8018I");
    qm.fails(
        "START CHANNEL(TO.QM2)",
        ferrymq_types::Reason::COMMAND_FAILED,
    );
    qm.fails(
        "START CHANNEL(NOPE)",
        ferrymq_types::Reason::UNKNOWN_OBJECT_NAME,
    );
    // Instances running (the test server reports one on APP.SVRCONN): not stoppable yet.
    let r = qm.fails(
        "STOP CHANNEL(APP.SVRCONN)",
        ferrymq_types::Reason::COMMAND_FAILED,
    );
    assert!(r.text.contains("1 running instance"), "{}", r.text);
    let r = qm.fails(
        "STOP CHL(IDLE.SVRCONN)",
        ferrymq_types::Reason::CHANNEL_NOT_ACTIVE,
    );
    assert!(r.text.contains("IGNSTATE(YES)"), "{}", r.text);
    assert_eq!(
        qm.ok("STOP CHL(IDLE.SVRCONN) IGNSTATE(YES)").msg_id,
        "FMQ8019I"
    );
}

#[test]
fn delete_and_clear_do_what_they_say() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(D.Q)");
    qm.connect_and_put("D.Q", 4);
    qm.ok("CLEAR QLOCAL(D.Q)");
    assert_eq!(qm.attr("DIS QL(D.Q) CURDEPTH", "CURDEPTH"), "0");
    qm.connect_and_put("D.Q", 1);
    qm.ok("DELETE QLOCAL(D.Q) PURGE");
    assert!(qm.engine.queue_def("D.Q").is_none());
    qm.ok("DEF CHL(TO.QM2) CHLTYPE(SDR) CONNAME('qm2.example.com(1414)') XMITQ(QM2)");
    assert_eq!(
        qm.attr("DIS CHL(TO.QM2) CONNAME", "CONNAME"),
        "qm2.example.com(1414)"
    );
    assert_eq!(names(&qm.ok("DIS CHL(*) TYPE(SDR)")), ["TO.QM2"]);
    qm.ok("DELETE CHANNEL(TO.QM2)");
    qm.ok("DEF AUTHINFO(LDAP.AI) AUTHTYPE(IDPWLDAP) CONNAME('ldap(389)') CHCKCLNT(REQUIRED)");
    qm.ok("DELETE AUTHINFO(LDAP.AI)");
    assert_eq!(
        qm.engine.objects().count(),
        6,
        "only the default objects remain (two channels, a listener, an authinfo, two topics)"
    );
}

#[test]
fn attributes_not_acted_on_are_stored_displayed_and_flagged() {
    let mut qm = Qm::new();
    let r = qm.ok("DEF QL(W.Q) MAXDEPTH(9) INDXTYPE(CORRELID) NOSHARE");
    assert!(
        r.text
            .contains("FMQ8890W: INDXTYPE, SHARE stored; FerryMQ does not act on them yet."),
        "{}",
        r.text
    );
    assert!(!r.text.contains("MAXDEPTH stored"));
    let def = qm.engine.queue_def("W.Q").unwrap();
    assert_eq!(
        def.other.get("INDXTYPE").map(String::as_str),
        Some("CORRELID")
    );
    let r = qm.ok("DIS QL(W.Q) INDXTYPE SHARE");
    assert!(r.text.contains("INDXTYPE(CORRELID)"), "{}", r.text);
    assert!(
        r.text.split_whitespace().any(|w| w == "NOSHARE"),
        "{}",
        r.text
    );
    let r = qm.ok("ALT QL(W.Q) MAXDEPTH(10)");
    assert!(!r.text.contains("FMQ8890W"), "{}", r.text);
}

/// A command that logs a record carries where it ends, so the queue manager can hold the answer
/// until it is durable; one that logs nothing carries 0.
#[test]
fn changes_carry_the_position_of_their_log_record() {
    let mut qm = Qm::new();
    let d = qm.ok("DEFINE QLOCAL(POS.Q)");
    assert!(d.lsn > 0, "{d:?}");
    let a = qm.ok("ALTER QLOCAL(POS.Q) MAXDEPTH(10)");
    assert!(a.lsn > d.lsn, "{a:?}");
    let c = qm.ok("CLEAR QLOCAL(POS.Q)");
    assert!(c.lsn > a.lsn, "{c:?}");
    let q = qm.ok("ALTER QMGR DESCR('x')");
    assert!(q.lsn > c.lsn, "{q:?}");
    let x = qm.ok("DELETE QLOCAL(POS.Q)");
    assert!(x.lsn > q.lsn, "{x:?}");
    assert_eq!(qm.ok("DISPLAY QMGR").lsn, 0);
    assert_eq!(qm.run("DEFINE QLOCAL(SYSTEM.DEFAULT.LOCAL.QUEUE)").lsn, 0);
    assert_eq!(qm.engine.admin_lsn(), x.lsn);
}
