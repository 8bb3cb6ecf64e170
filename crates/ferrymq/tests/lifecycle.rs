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

/// Whether a file in `dir` can be opened for direct I/O at all.
fn direct_io_allowed(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join("direct-probe");
    std::fs::write(&p, [0u8; 4096]).unwrap();
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&p)
        .is_ok();
    std::fs::remove_file(&p).unwrap();
    ok
}

/// How many of the process's open recovery-log ring files (`log/S*.LOG`) carry `O_DIRECT`, and
/// how many do not.
fn ring_handles(pid: u32) -> (usize, usize) {
    let (mut direct, mut buffered) = (0, 0);
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        if !(t.contains("/log/S") && t.ends_with(".LOG")) {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| i64::from_str_radix(f.trim(), 8).ok())
            .unwrap_or(0);
        if flags & i64::from(libc::O_DIRECT) != 0 {
            direct += 1;
        } else {
            buffered += 1;
        }
    }
    (direct, buffered)
}

/// Under the default `fsync` durability the recovery log is written with `O_DIRECT | O_DSYNC`
/// where the filesystem allows it, and through the page cache with `Log:DirectWrites=no`; the
/// error log's start-up line says which, and a persistent message put before a SIGKILL is there
/// after the restart either way.
#[test]
fn the_recovery_log_is_written_directly_unless_qm_ini_says_no_and_survives_kill_9_either_way() {
    let home = Home::new();
    let qm = Qm::start(&home, "QDIO", &[]);
    let direct = direct_io_allowed(&qm.dir());
    let q = "SYSTEM.DEFAULT.LOCAL.QUEUE";
    let errors = || std::fs::read_to_string(qm.dir().join("errors/FMQERR01.LOG")).unwrap();
    let last_start = |text: &str| {
        text.lines()
            .rfind(|l| l.contains("recovered in"))
            .unwrap_or_default()
            .to_string()
    };
    for (setting, want) in [(None, direct), (Some("no"), false), (Some("yes"), direct)] {
        if let Some(v) = setting {
            qm.set_ini("Log", "DirectWrites", v);
            qm.restart();
        }
        let line = last_start(&errors());
        let (direct_fds, _) = ring_handles(qm.pid().unwrap());
        if want {
            assert!(
                line.contains("log writes direct (O_DIRECT|O_DSYNC)"),
                "{line}"
            );
            assert!(direct_fds > 0, "no ring file is open with O_DIRECT");
        } else {
            assert!(
                line.contains("log writes buffered with fdatasync"),
                "{line}"
            );
            assert_eq!(direct_fds, 0, "a ring file is open with O_DIRECT");
        }
        let body = format!("before the kill, DirectWrites={setting:?}");
        let c = qm.connect();
        support::chan::put_to(&c, q, body.as_bytes());
        drop(c);
        qm.kill9();
        qm.restart();
        let c = qm.connect();
        assert_eq!(support::chan::get_wait(&c, q), body.as_bytes());
        drop(c);
        home.ok(&["endmqm", "-w", "QDIO"]);
    }
}
