//! The MQ-style lifecycle commands against the real binary.

mod support;

use support::{free_port, Home, Qm};

#[test]
fn create_start_display_end_delete() {
    let home = Home::new();
    let port = free_port().to_string();
    let out = home.ok(&[
        "crtmqm", "-p", &port, "-lp", "2", "-lf", "256", "-h", "100", "QMA",
    ]);
    assert!(out.contains("QMA"), "{out}");
    assert!(home
        .ok(&["dspmq"])
        .contains("QMNAME(QMA) STATUS(Ended normally)"));
    home.ok(&["strmqm", "QMA"]);
    let shown = home.ok(&["dspmq"]);
    assert!(shown.contains("QMNAME(QMA) STATUS(Running)"), "{shown}");
    assert!(shown.contains(&format!("PORT({port})")), "{shown}");
    // A second start is refused with MQ's "already running" status.
    assert_eq!(home.run(&["strmqm", "QMA"]).status.code(), Some(5));
    // Deleting a running queue manager is refused.
    assert_eq!(home.run(&["dltmqm", "QMA"]).status.code(), Some(5));
    home.ok(&["endmqm", "-w", "QMA"]);
    assert!(home.ok(&["dspmq"]).contains("STATUS(Ended normally)"));
    home.ok(&["dltmqm", "QMA"]);
    assert_eq!(home.ok(&["dspmq"]).trim(), "");
}

#[test]
fn commands_on_missing_or_duplicate_queue_managers_fail_with_mq_statuses() {
    let home = Home::new();
    assert_eq!(home.run(&["strmqm", "NOPE"]).status.code(), Some(16));
    assert_eq!(home.run(&["endmqm", "NOPE"]).status.code(), Some(16));
    assert_eq!(home.run(&["dltmqm", "NOPE"]).status.code(), Some(16));
    home.ok(&["crtmqm", "-p", "0", "DUP"]);
    assert_eq!(
        home.run(&["crtmqm", "-p", "0", "DUP"]).status.code(),
        Some(8)
    );
    assert_eq!(
        home.run(&["endmqm", "DUP"]).status.code(),
        Some(40),
        "not running"
    );
}

#[test]
fn flags_mq_accepts_but_ferrymq_ignores_are_noted_and_unknown_flags_refused() {
    let home = Home::new();
    let out = home.run(&["crtmqm", "-p", "0", "-ls", "2", "-q", "QN"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-ls 2 accepted but not used"), "{err}");
    assert!(err.contains("-q accepted but not used"), "{err}");
    let out = home.run(&["crtmqm", "-bogus", "QX"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown flag '-bogus'"));
    let out = home.run(&["crtmqm", "-ll", "QY"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("only circular logging"));
}

#[test]
fn setmqini_refuses_values_that_would_stop_the_queue_manager() {
    let home = Home::new();
    home.ok(&["crtmqm", "-p", "0", "QI"]);
    home.ok(&[
        "setmqini",
        "-m",
        "QI",
        "-s",
        "TuningParameters",
        "-k",
        "DefaultQBufferSize",
        "-v",
        "10485760",
    ]);
    assert!(home
        .ok(&["dspmqini", "-m", "QI"])
        .contains("DefaultQBufferSize=10485760"));
    // A misspelt one is refused with the valid keys of its stanza.
    let out = home.run(&[
        "setmqini",
        "-m",
        "QI",
        "-s",
        "TuningParameters",
        "-k",
        "DefaultQBuferSize",
        "-v",
        "1",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("DefaultQBufferSize"));
    let out = home.run(&[
        "setmqini",
        "-m",
        "QI",
        "-s",
        "QueueManager",
        "-k",
        "Port",
        "-v",
        "notaport",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Port=notaport"));
}

#[test]
fn several_queue_managers_run_side_by_side() {
    let home = Home::new();
    let a = Qm::start(&home, "QM_A", &[]);
    let b = Qm::start(&home, "QM_B", &[]);
    let shown = home.ok(&["dspmq"]);
    assert!(
        shown.contains("QMNAME(QM_A) STATUS(Running)")
            && shown.contains("QMNAME(QM_B) STATUS(Running)"),
        "{shown}"
    );
    assert_ne!(a.pid(), b.pid());
}

#[test]
fn sample_programs_put_browse_and_get_lines() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMS", &[]);
    let out = home.run_with_input(
        &["put", "QMS", "SYSTEM.DEFAULT.LOCAL.QUEUE", "--persistent"],
        "one\ntwo\nthree\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let browsed = home.ok(&["browse", "QMS", "SYSTEM.DEFAULT.LOCAL.QUEUE", "--md"]);
    assert!(
        browsed.contains("Persistence(1)") && browsed.contains("two"),
        "{browsed}"
    );
    // Client mode over TCP gets the same messages.
    let got = home.ok(&[
        "get",
        "QMS",
        "SYSTEM.DEFAULT.LOCAL.QUEUE",
        "--conn",
        &qm.conname(),
    ]);
    assert_eq!(got, "one\ntwo\nthree\n");
    // An empty queue: nothing printed, and the exit status says "no message" (3).
    let out = home.run(&["get", "QMS", "SYSTEM.DEFAULT.LOCAL.QUEUE"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn persistent_messages_survive_a_controlled_restart_and_non_persistent_do_not() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMR", &[]);
    home.run_with_input(
        &["put", "QMR", "SYSTEM.DEFAULT.LOCAL.QUEUE", "--persistent"],
        "kept\n",
    );
    home.run_with_input(&["put", "QMR", "SYSTEM.DEFAULT.LOCAL.QUEUE"], "lost\n");
    qm.end();
    qm.restart();
    assert_eq!(
        home.ok(&["get", "QMR", "SYSTEM.DEFAULT.LOCAL.QUEUE"]),
        "kept\n"
    );
}

/// The queue manager's threads named `ferrymq-io`, from /proc.
fn io_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "ferrymq-io")
        .count()
}

#[test]
fn io_threads_are_two_by_default_and_as_many_as_qm_ini_says() {
    let home = Home::new();
    let qm = Qm::start(&home, "QIO", &[]);
    assert_eq!(io_threads(qm.pid().unwrap()), 2);
    home.ok(&["endmqm", "-w", "QIO"]);
    qm.set_ini("TuningParameters", "IoThreads", "1");
    qm.restart();
    assert_eq!(io_threads(qm.pid().unwrap()), 1);
    // One thread serves client and bindings connections alike.
    let (a, b) = (qm.connect(), qm.connect_bindings());
    let q = "SYSTEM.DEFAULT.LOCAL.QUEUE";
    support::chan::put_to(&a, q, b"one thread");
    assert_eq!(support::chan::get_wait(&b, q), b"one thread");
    drop((a, b));
    // A value out of range is refused when set, and says why.
    home.ok(&["endmqm", "-w", "QIO"]);
    let out = home.run(&[
        "setmqini",
        "-m",
        "QIO",
        "-s",
        "TuningParameters",
        "-k",
        "IoThreads",
        "-v",
        "0",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("IoThreads=0"), "{text}");
}
