//! The queue manager configuration script of the MQ Appliance performance report (port 1414, its
//! queue loop expanded for j = 0..=10) must run cleanly on a new FerryMQ queue manager.

mod common;

use common::Qm;
use ferrymq_mqsc::{parse, split_commands, Tally};

/// The seed's Appendix B MQSC lines, its `for j <= $QMqueues` loop expanded for j = 0..=10 (shared
/// with the black-box test in crates/ferrymq/tests/runmqsc.rs).
fn seed_script() -> String {
    include_str!("fixtures/appendix_b.mqsc").replace("$QMport", "1414")
}

#[test]
fn the_performance_report_script_runs_with_every_command_succeeding() {
    let script = seed_script();
    let cmds = split_commands(&script);
    assert_eq!(cmds.len(), 16 + 22 + 1);
    assert_eq!(cmds[0].line, 1);
    assert_eq!(cmds.last().unwrap().text, "end");

    let mut qm = Qm::new();
    let mut tally = Tally::default();
    for c in &cmds {
        tally.read += 1;
        let cmd = parse(&c.text)
            .unwrap_or_else(|e| panic!("line {}: {e}\n{}", c.line, e.pointer(&c.text)));
        // END too goes to the queue manager here, which answers it like any other command.
        let r = ferrymq_admin::execute(&cmd, &mut qm.engine, &mut qm.ops, common::NOW_MS);
        assert!(r.ok, "line {}: {}\n{}", c.line, c.text, r.text);
    }
    assert_eq!(tally.read, cmds.len());
    assert_eq!(tally.exit_code(), 0);

    // The side effects the script is for.
    assert_eq!(qm.ops.started, [("L1".to_string(), "1414".to_string())]);
    assert_eq!(qm.ops.refreshed, ["CONNAUTH"]);
    assert_eq!(
        qm.attr("DISPLAY QLOCAL(REQUEST7) MAXDEPTH", "MAXDEPTH"),
        "5000"
    );
    assert_eq!(
        qm.attr(
            "DISPLAY QLOCAL(SYSTEM.DEFAULT.LOCAL.QUEUE) MAXMSGL",
            "MAXMSGL"
        ),
        "104857600"
    );
    assert_eq!(
        qm.attr("DISPLAY QMODEL(SYSTEM.JMS.TEMPQ.MODEL) MAXMSGL", "MAXMSGL"),
        "104857600"
    );
    let qmgr = qm.one("DISPLAY QMGR");
    assert_eq!(common::get(&qmgr, "MAXMSGL").unwrap(), "104857600");
    assert_eq!(common::get(&qmgr, "CHLAUTH").unwrap(), "DISABLED");
    assert_eq!(qm.engine.attrs().max_msg_len, 104_857_600);
    let chl = qm.one("DISPLAY CHANNEL(SYSTEM.DEF.SVRCONN) ALL");
    assert_eq!(common::get(&chl, "SHARECNV").unwrap(), "1");
    assert_eq!(
        qm.attr(
            "DIS AUTHINFO(SYSTEM.DEFAULT.AUTHINFO.IDPWOS) CHCKCLNT",
            "CHCKCLNT"
        ),
        "OPTIONAL"
    );
    // Queues defined later copy the altered default local queue.
    assert_eq!(qm.attr("DIS QL(REPLY10) MAXMSGL", "MAXMSGL"), "104857600");
    let all = qm.ok("DIS QL(RE*)");
    assert_eq!(all.rows.len(), 24, "REQUEST, REPLY and 0..=10 of each");
}

#[test]
fn the_script_flags_what_ferrymq_stores_without_acting_on() {
    let mut qm = Qm::new();
    let r = qm.ok("alter qmgr chlauth(disabled)");
    assert!(r.text.contains("FMQ8890W: CHLAUTH stored"), "{}", r.text);
    let r = qm.ok("alter qmgr maxmsgl(104857600)");
    assert!(!r.text.contains("FMQ8890W"), "{}", r.text);
    let r = qm.ok("define channel(SYSTEM.ADMIN.SVRCONN) chltype(SVRCONN)");
    assert_eq!(r.msg_id, "FMQ8151I", "{}", r.text);
}
