//! The performance harness (`ferrymq-bench`, a binary of its own beside `ferrymq`) works end to
//! end against a real queue manager: it sets up the queue pairs, runs requesters and responders,
//! and reports what the reports count. (Its numbers are judged in benchmark runs, not here.)

mod support;

use support::{run_bench, Home, Qm};

#[test]
fn cph_rr_reports_the_fields_the_report_needs() {
    let home = Home::new();
    let qm = Qm::start(&home, "QCPH", &[]);
    let conn = qm.conname();
    let out = run_bench(
        &home,
        &[
            "cph",
            "rr",
            "--qm",
            "QCPH",
            "--conn",
            &conn,
            "--requesters",
            "4",
            "--responders",
            "2",
            "--size",
            "256",
            "--persistent",
            "--duration-s",
            "1",
            "--warmup-s",
            "0.5",
            "--queues",
            "2",
            "--quiet",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    for key in [
        "round_trips_per_s",
        "server_cpu_pct",
        "client_cpu_pct",
        "latency_ms_p50",
        "latency_ms_p99",
        "threads",
        "msg_size",
        "persistent",
        "queue_managers",
        "duration_s",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert!(
        v["round_trips"].as_u64().unwrap() > 0,
        "no round trip completed: {v}"
    );
    assert_eq!(v["errors"].as_u64(), Some(0), "{v}");
    assert!(
        v["server_cpu_pct"].as_f64().is_some(),
        "the queue manager's CPU is found from its pid file: {v}"
    );
    assert_eq!(
        (
            v["threads"].as_u64(),
            v["msg_size"].as_u64(),
            v["persistent"].as_bool()
        ),
        (Some(4), Some(256), Some(true))
    );
    // Every request was answered: nothing is left on the queues once the run has stopped.
    let shown = home.run_with_input(
        &["runmqsc", "QCPH"],
        "DIS QL(REQUEST*) CURDEPTH\nDIS QL(REPLY*) CURDEPTH\n",
    );
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.matches("CURDEPTH(0)").count(), 4, "{shown}");
}

#[test]
fn the_harness_is_its_own_binary_with_help_for_cph_and_report() {
    let home = Home::new();
    for cmd in [
        "cph rr",
        "cph receiver",
        "report standalone",
        "report ha",
        "report dr",
    ] {
        let mut args: Vec<&str> = cmd.split(' ').collect();
        args.push("--help");
        let out = run_bench(&home, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(
            stdout.contains(&format!("Usage: ferrymq-bench {cmd}")),
            "{args:?}:\n{stdout}"
        );
    }
    let out = run_bench(&home, &["report", "ha", "--bogus", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("'--bogus'"),
        "{out:?}"
    );
    // The product binary no longer carries them.
    for cmd in ["cph", "report"] {
        let out = home.run(&[cmd, "--help"]);
        assert_eq!(out.status.code(), Some(1), "ferrymq {cmd}: {out:?}");
    }
}
