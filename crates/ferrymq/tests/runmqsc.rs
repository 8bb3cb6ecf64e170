//! `runmqsc` against the real binary: the seed report's queue manager configuration (Appendix B)
//! run verbatim, the objects usable by clients and durable across restarts, and the error paths
//! and exit statuses administrators rely on.

mod support;

use bytes::Bytes;
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use support::{free_port, Home, Qm};

/// The MQSC lines of the seed's Appendix B, with `$QMport` given and the loop expanded for
/// j = 0..=10 as its `<=` bound runs (the fixture is shared with the MQSC crate's own test).
fn appendix_b(port: u16) -> String {
    include_str!("../../mqsc/tests/fixtures/appendix_b.mqsc").replace("$QMport", &port.to_string())
}

#[test]
fn the_seed_appendix_b_configuration_runs_verbatim_and_its_objects_work() {
    let home = Home::new();
    // Appendix B's own commands, as written.
    home.ok(&[
        "crtmqm", "-lp", "64", "-lf", "16384", "-h", "5000", "-fs", "16", "PERF0",
    ]);
    home.ok(&[
        "setmqini",
        "-m",
        "PERF0",
        "-s",
        "TuningParameters",
        "-k",
        "DefaultPQBufferSize",
        "-v",
        "10485760",
    ]);
    home.ok(&[
        "setmqini",
        "-m",
        "PERF0",
        "-s",
        "TuningParameters",
        "-k",
        "DefaultQBufferSize",
        "-v",
        "10485760",
    ]);
    let ini = home.ok(&["dspmqini", "-m", "PERF0"]);
    for expect in [
        "LogPrimaryFiles=64",
        "LogFilePages=16384",
        "MaxHandles=5000",
        "DefaultQFileSize=16",
        "DefaultPQBufferSize=10485760",
    ] {
        assert!(ini.contains(expect), "missing {expect} in:\n{ini}");
    }
    // No listener from qm.ini (port 1414 may be taken on a shared machine): the script's
    // LISTENER(L1) is the only way in over TCP, as in the report.
    home.ok(&[
        "setmqini",
        "-m",
        "PERF0",
        "-s",
        "QueueManager",
        "-k",
        "Port",
        "-v",
        "0",
    ]);
    home.ok(&["strmqm", "PERF0"]);
    let qm = Qm {
        home: &home,
        name: "PERF0".into(),
        port: free_port(),
    };
    let out = home.run_with_input(&["runmqsc", "PERF0"], &appendix_b(qm.port));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "runmqsc output:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("38 MQSC commands read"), "{text}");

    let shown = home.run_with_input(
        &["runmqsc", "PERF0"],
        "DIS QL(REQUEST*) MAXDEPTH\nDIS QMGR MAXMSGL CHLAUTH\nDIS LSSTATUS(L1)\n",
    );
    let shown = String::from_utf8_lossy(&shown.stdout);
    for expect in [
        "QUEUE(REQUEST10)",
        "MAXDEPTH(5000)",
        "MAXMSGL(104857600)",
        "CHLAUTH(DISABLED)",
        &format!("PORT({})", qm.port),
        "STATUS(RUNNING)",
    ] {
        assert!(shown.contains(expect), "missing {expect} in:\n{shown}");
    }

    // Clients reach the queues through L1, and a 100 MB message is accepted.
    let c = qm.connect();
    let h = c
        .open("REQUEST3", open::OUTPUT | open::INPUT_SHARED)
        .unwrap();
    let big = Bytes::from(vec![5u8; 104_857_600]);
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        big,
        &PutOptions::default(),
    )
    .unwrap();
    assert_eq!(
        c.get(&h, &GetOptions::any()).unwrap().body.len(),
        104_857_600
    );
    let pm = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    c.put(
        &h,
        &pm,
        &Properties::default(),
        Bytes::from_static(b"durable"),
        &PutOptions::default(),
    )
    .unwrap();
    drop(c);

    // Definitions are in the recovery log: after SIGKILL and restart they are all there, and
    // L1 (CONTROL(QMGR)) starts with the queue manager.
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    let h = c.open("REQUEST3", open::INPUT_SHARED).unwrap();
    assert_eq!(&c.get(&h, &GetOptions::any()).unwrap().body[..], b"durable");
    let again = home.run_with_input(
        &["runmqsc", "PERF0"],
        "DIS Q(REPLY10) MAXDEPTH\nDIS QMGR MAXMSGL\n",
    );
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.contains("QUEUE(REPLY10)") && again.contains("MAXMSGL(104857600)"),
        "{again}"
    );
}

#[test]
fn syntax_errors_point_at_the_token_and_set_exit_status_10() {
    let home = Home::new();
    let _qm = Qm::start(&home, "QM1", &[]);
    let script =
        "DEFINE QLOCAL(GOOD)\nDEFINE QLOCAL(BAD) MAXDEPHT(5)\nDEFINE QLOCAL(WORSE) MAXDEPTH(-3)\n";
    let out = home.run_with_input(&["runmqsc", "QM1"], script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(10), "{text}");
    assert!(
        text.contains("MAXDEPHT"),
        "the bad attribute is named:\n{text}"
    );
    assert!(text.contains('^'), "a pointer marks the token:\n{text}");
    assert!(text.contains("3 MQSC commands read"), "{text}");
    let shown = home.run_with_input(&["runmqsc", "QM1"], "DIS Q(GOOD)\nDIS Q(BAD)\n");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("QUEUE(GOOD)"), "{shown}");
    assert!(
        shown.contains("QUEUE(BAD) is not defined"),
        "a command with a syntax error changes nothing:\n{shown}"
    );
}

#[test]
fn a_script_where_nothing_works_exits_20_and_failures_name_the_object() {
    let home = Home::new();
    let _qm = Qm::start(&home, "QM2", &[]);
    let out = home.run_with_input(
        &["runmqsc", "QM2"],
        "ALTER QLOCAL(NOT.THERE) MAXDEPTH(10)\nDELETE QLOCAL(ALSO.MISSING)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(20), "{text}");
    assert!(
        text.contains("NOT.THERE") && text.contains("ALSO.MISSING"),
        "{text}"
    );
}

#[test]
fn deleting_a_queue_in_use_fails_and_verify_mode_changes_nothing() {
    let home = Home::new();
    let qm = Qm::start(&home, "QM3", &[]);
    home.run_with_input(&["runmqsc", "QM3"], "DEFINE QLOCAL(BUSY)\n");
    let c = qm.connect();
    let _h = c.open("BUSY", open::INPUT_SHARED).unwrap();
    let out = home.run_with_input(&["runmqsc", "QM3"], "DELETE QLOCAL(BUSY)\n");
    assert_eq!(out.status.code(), Some(20));
    assert!(String::from_utf8_lossy(&out.stdout).contains("BUSY"));
    let out = home.run_with_input(&["runmqsc", "-v", "QM3"], "DEFINE QLOCAL(ONLY.VERIFIED)\n");
    assert_eq!(out.status.code(), Some(0));
    let shown = home.run_with_input(&["runmqsc", "QM3"], "DIS Q(ONLY.*)\n");
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("QUEUE(ONLY.VERIFIED)"));
}

#[test]
fn runmqsc_in_client_mode_administers_over_tcp() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QM4", &[]);
    let out = home.run_with_input(
        &["runmqsc", "-c", "--conn", &qm.conname(), "-e", "QM4"],
        "DEFINE QLOCAL(REMOTE.ADMIN)\nDIS QSTATUS(REMOTE.ADMIN)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("CURDEPTH(0)"), "{text}");
    assert!(
        !text.contains("1 : DEFINE"),
        "-e suppresses the echo:\n{text}"
    );
}
