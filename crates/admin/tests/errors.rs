//! Every way a command can fail: the response says so, carries the MQ reason, names the object,
//! and changes nothing.

mod common;

use common::Qm;
use ferrymq_types::options::open;
use ferrymq_types::Reason;

#[test]
fn commands_on_a_missing_object_fail_naming_it() {
    let mut qm = Qm::new();
    for cmd in [
        "ALTER QLOCAL(NOPE) MAXDEPTH(1)",
        "ALTER QALIAS(NOPE) TARGET(X)",
        "DELETE QLOCAL(NOPE)",
        "DELETE QMODEL(NOPE)",
        "DISPLAY QLOCAL(NOPE)",
        "DISPLAY QUEUE(NOPE)",
        "CLEAR QLOCAL(NOPE)",
        "DISPLAY QSTATUS(NOPE)",
        "ALTER CHANNEL(NOPE) CHLTYPE(SVRCONN)",
        "DELETE CHANNEL(NOPE)",
        "DISPLAY CHANNEL(NOPE)",
        "DELETE LISTENER(NOPE)",
        "DISPLAY AUTHINFO(NOPE)",
        "START LISTENER(NOPE)",
        "STOP LISTENER(NOPE)",
        "DISPLAY LSSTATUS(NOPE)",
        "DISPLAY CHSTATUS(NOPE)",
        "DEFINE QLOCAL(NEW) LIKE(NOPE)",
        "DEFINE CHANNEL(NEW) CHLTYPE(SVRCONN) LIKE(NOPE)",
    ] {
        let r = qm.fails(cmd, Reason::UNKNOWN_OBJECT_NAME);
        assert_eq!(r.msg_id, "FMQ8147E", "{cmd}");
        assert!(r.text.contains("NOPE"), "{cmd}: {}", r.text);
        assert!(r.text.starts_with("FMQ8147E: "), "{}", r.text);
    }
    qm.fails("DISPLAY CONN(ABCDEF)", Reason::UNKNOWN_OBJECT_NAME);
    assert!(qm.engine.queue_def("NEW").is_none());
}

#[test]
fn syntax_errors_fail_with_a_pointer_at_the_token() {
    let mut qm = Qm::new();
    for (cmd, token) in [
        ("DEFINE QLOCAL(Q) WIBBLE(3)", "WIBBLE"),
        ("DEFINE QLOCAL(Q) MAXDEPTH(1000000000)", "1000000000"),
        ("DEFINE QLOCAL(Q) DEFPSIST(SOMETIMES)", "SOMETIMES"),
        ("DEFINE QALIAS(Q) MAXDEPTH(5)", "MAXDEPTH"),
    ] {
        let r = qm.run(cmd);
        assert!(!r.ok, "{cmd}");
        assert_eq!(r.msg_id, "FMQ8405E");
        assert_eq!(r.reason, Reason::COMMAND_FAILED);
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines[1], cmd);
        let col = cmd.find(token).unwrap();
        assert_eq!(lines[2], format!("{}^", " ".repeat(col)), "{cmd}");
    }
    let long = format!("DEFINE QLOCAL({}) MAXDEPTH(1)", "Q".repeat(49));
    let r = qm.run(&long);
    assert!(!r.ok && r.text.contains("longer than 48"), "{}", r.text);
    assert!(qm.engine.queue_def("Q").is_none());
}

#[test]
fn deleting_a_queue_that_is_open_fails_as_in_use() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(BUSY)");
    let c = qm.engine.connect("bob", "app");
    qm.engine
        .open(c, "BUSY", "", open::INPUT_SHARED, "")
        .unwrap();
    let r = qm.fails("DELETE QLOCAL(BUSY)", Reason::OBJECT_IN_USE);
    assert_eq!(r.msg_id, "FMQ8148E");
    assert!(r.text.contains("BUSY"), "{}", r.text);
    qm.fails("DELETE QLOCAL(BUSY) PURGE", Reason::OBJECT_IN_USE);
    qm.fails("CLEAR QLOCAL(BUSY)", Reason::OBJECT_IN_USE);
    assert!(qm.engine.queue_def("BUSY").is_some());
}

#[test]
fn deleting_a_queue_with_messages_needs_purge() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(FULL)");
    qm.connect_and_put("FULL", 2);
    let r = qm.fails("DELETE QLOCAL(FULL)", Reason::Q_NOT_EMPTY);
    assert_eq!(r.msg_id, "FMQ8143E");
    qm.fails("DELETE QLOCAL(FULL) NOPURGE", Reason::Q_NOT_EMPTY);
    assert_eq!(qm.engine.queue_status("FULL").unwrap().cur_depth, 2);
    qm.ok("DELETE QLOCAL(FULL) PURGE");
}

#[test]
fn naming_the_wrong_queue_type_fails() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(LOCAL.Q)");
    qm.ok("DEF QA(ALIAS.Q) TARGET(LOCAL.Q)");
    let r = qm.fails("DELETE QALIAS(LOCAL.Q)", Reason::OBJECT_TYPE_ERROR);
    assert!(r.text.contains("QLOCAL"), "{}", r.text);
    qm.fails(
        "ALTER QLOCAL(ALIAS.Q) MAXDEPTH(5)",
        Reason::OBJECT_TYPE_ERROR,
    );
    qm.fails("DELETE QLOCAL(ALIAS.Q)", Reason::OBJECT_TYPE_ERROR);
    qm.fails(
        "DEFINE QLOCAL(NEW) LIKE(ALIAS.Q)",
        Reason::OBJECT_TYPE_ERROR,
    );
    qm.fails("CLEAR QLOCAL(ALIAS.Q)", Reason::Q_TYPE_ERROR);
    qm.fails("DISPLAY QLOCAL(ALIAS.Q)", Reason::UNKNOWN_OBJECT_NAME);
    qm.fails("DISPLAY QSTATUS(ALIAS.Q)", Reason::UNKNOWN_OBJECT_NAME);
    // Queues share one name space: a local queue cannot take an alias's name, even with REPLACE.
    qm.fails("DEFINE QLOCAL(ALIAS.Q)", Reason::OBJECT_ALREADY_EXISTS);
    qm.fails(
        "DEFINE QLOCAL(ALIAS.Q) REPLACE",
        Reason::OBJECT_ALREADY_EXISTS,
    );
    assert!(qm.engine.queue_def("LOCAL.Q").is_some());
    assert!(qm.engine.queue_def("ALIAS.Q").is_some());
    let r = qm.fails(
        "ALTER CHANNEL(SYSTEM.DEF.SVRCONN) CHLTYPE(SDR)",
        Reason::OBJECT_TYPE_ERROR,
    );
    assert!(r.text.contains("CHLTYPE(SVRCONN)"), "{}", r.text);
    qm.fails(
        "DEFINE CHANNEL(SYSTEM.DEF.SVRCONN) CHLTYPE(RCVR) REPLACE",
        Reason::OBJECT_TYPE_ERROR,
    );
    qm.fails(
        "ALTER AUTHINFO(SYSTEM.DEFAULT.AUTHINFO.IDPWOS) OCSPURL('http://x')",
        Reason::OBJECT_TYPE_ERROR,
    );
}

#[test]
fn defining_over_a_different_object_without_replace_fails_and_changes_nothing() {
    let mut qm = Qm::new();
    qm.ok("DEF QL(Q) MAXDEPTH(100)");
    let r = qm.fails("DEF QL(Q) MAXDEPTH(200)", Reason::OBJECT_ALREADY_EXISTS);
    assert_eq!(r.msg_id, "FMQ8150E");
    assert!(r.text.contains("REPLACE"), "{}", r.text);
    qm.fails(
        "DEF QL(Q) MAXDEPTH(200) NOREPLACE",
        Reason::OBJECT_ALREADY_EXISTS,
    );
    assert_eq!(qm.engine.queue_def("Q").unwrap().max_depth, 100);
    qm.fails(
        "DEF CHL(SYSTEM.DEF.SVRCONN) CHLTYPE(SVRCONN) SHARECNV(2)",
        Reason::OBJECT_ALREADY_EXISTS,
    );
    qm.fails(
        "DEF LSTR(SYSTEM.DEFAULT.LISTENER.TCP) PORT(99)",
        Reason::OBJECT_ALREADY_EXISTS,
    );
}

#[test]
fn a_server_refusal_is_a_failure_with_its_reason() {
    let mut qm = Qm::new();
    qm.ops.fail_start = true;
    let r = qm.fails(
        "START LISTENER(SYSTEM.DEFAULT.LISTENER.TCP)",
        Reason::RESOURCE_PROBLEM,
    );
    assert!(r.text.contains("port in use"), "{}", r.text);
}
