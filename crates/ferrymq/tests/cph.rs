//! The performance harness (`ferrymq-bench`, a binary of its own beside `ferrymq`) works end to
//! end against a real queue manager: it sets up the queue pairs, runs requesters and responders,
//! and reports what the reports count; over TLS and as an authenticated user on a channel of its
//! choice too, and the standalone report's security section measures those side by side with
//! plain TCP; the channels report moves messages across a sender/receiver channel pair, directly
//! and through a delaying relay; the mft report has agents transfer files in both topologies and
//! checks every file. (Their numbers are judged in benchmark runs, not here.)

mod support;

use support::{bench_bin, run_bench, Home, Qm};

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
        "report mft",
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

/// Runs `ferrymq-bench cph rr` briefly on queue manager `qm` through `extra` options, with
/// `password` in FERRYMQ_PASSWORD; its exit and its JSON (when it succeeded).
fn cph_rr_with(home: &Home, qm: &Qm, extra: &[&str], password: &str) -> (bool, String) {
    let conn = qm.conname();
    let mut args = vec![
        "cph",
        "rr",
        "--qm",
        &qm.name,
        "--conn",
        &conn,
        "--requesters",
        "2",
        "--responders",
        "2",
        "--queues",
        "2",
        "--size",
        "2048",
        "--duration-s",
        "1",
        "--warmup-s",
        "0.3",
        "--no-setup",
        "--quiet",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(bench_bin())
        .args(&args)
        .env("FERRYMQ_HOME", home.path())
        .env("FERRYMQ_PASSWORD", password)
        .output()
        .expect("run ferrymq-bench");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn cph_rr_runs_over_tls_on_its_own_channel_as_a_user_with_a_password() {
    let home = Home::new();
    let qm = Qm::create(&home, "QCPHS", &[]);
    let certs = home.path().join("certs");
    let d = certs.to_str().unwrap();
    home.ok(&["mkdevcerts", "--dir", d, "-m", "QCPHS", "--client", "app"]);
    qm.restart();
    let out = home.run_with_input(
        &[
            "setmqusr",
            "-m",
            "QCPHS",
            "-u",
            "app",
            "-g",
            "apps",
            "--password-stdin",
        ],
        "S3cret-pw\n",
    );
    assert!(out.status.success(), "{out:?}");
    // The channel takes TLS only, and every client must give a password: a run that connects
    // at all spoke TLS on this channel and authenticated as the user.
    let script = "DEFINE CHANNEL(BENCH.TLS) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED)\n\
         DEFINE AUTHINFO(B.IDPW) AUTHTYPE(IDPWOS) CHCKCLNT(REQUIRED) ADOPTCTX(YES) FAILDLAY(0)\n\
         ALTER QMGR CONNAUTH(B.IDPW)\n\
         REFRESH SECURITY TYPE(CONNAUTH)\n\
         SET AUTHREC OBJTYPE(QMGR) GROUP('apps') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE('RE*') OBJTYPE(QUEUE) GROUP('apps') AUTHADD(PUT,GET)\n\
         DEFINE QLOCAL(REQUEST0)\nDEFINE QLOCAL(REQUEST1)\nDEFINE QLOCAL(REPLY0)\nDEFINE QLOCAL(REPLY1)\n";
    let out = home.run_with_input(&["runmqsc", "QCPHS"], script);
    assert!(out.status.success(), "{out:?}");
    let (ca, cert, key) = (
        certs.join("ca.pem"),
        certs.join("app.pem"),
        certs.join("app.key"),
    );
    let tls = [
        "--channel",
        "BENCH.TLS",
        "--user",
        "app",
        "--tls-ca",
        ca.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    let (ok, out) = cph_rr_with(&home, &qm, &tls, "S3cret-pw");
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).expect("JSON");
    assert_eq!(v["transport"].as_str(), Some("tls"), "{v}");
    assert!(v["round_trips"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["errors"].as_u64(), Some(0), "{v}");

    // The same run with a wrong password, or without TLS, is refused and says so.
    let (ok, out) = cph_rr_with(&home, &qm, &tls, "wrong-pw");
    assert!(!ok && out.contains("2035"), "{out}");
    let (ok, out) = cph_rr_with(&home, &qm, &tls[..4], "S3cret-pw");
    assert!(!ok && out.contains("SSLCIPH"), "{out}");
}

#[test]
fn the_standalone_reports_security_section_sets_tls_and_an_authorized_user_against_plain() {
    let home = Home::new();
    let out_dir = home.path().join("report");
    let out = run_bench(
        &home,
        &[
            "report",
            "standalone",
            "--quick",
            "--security",
            "only",
            "--sizes",
            "2048",
            "--requesters",
            "2",
            "--duration-s",
            "0.6",
            "--warmup-s",
            "0.2",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let md = std::fs::read_to_string(out_dir.join("README.md")).unwrap();
    for want in [
        "## Security: TLS, authorization and connection rate",
        "ferrymq-bench report standalone --quick --security only",
        "| 2048 | 2 | TLS, admin |",
        "| 2048 | 2 | plain TCP, authorized user with password |",
        "< 25%: ",
        "< 3%: ",
        "### Connection rate",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("security.json")).unwrap())
            .unwrap();
    let runs = v["rates"][0]["runs"].as_array().unwrap();
    for mode in ["plain", "tls", "auth"] {
        let of_mode: Vec<_> = runs.iter().filter(|r| r["mode"] == mode).collect();
        assert_eq!(of_mode.len(), 2, "two rounds of {mode}: {v}");
        for r in of_mode {
            assert!(r["result"]["round_trips"].as_u64().unwrap() > 0, "{r}");
            assert_eq!(r["result"]["errors"].as_u64(), Some(0), "{r}");
        }
        let tls = runs.iter().find(|r| r["mode"] == mode).unwrap()["result"]["transport"].clone();
        assert_eq!(
            tls.as_str(),
            Some(if mode == "tls" { "tls" } else { "tcp" })
        );
        let conns: Vec<_> = v["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["mode"] == mode)
            .collect();
        assert_eq!(
            conns.len(),
            2,
            "sequential and parallel connectors of {mode}: {v}"
        );
        for c in conns {
            assert!(c["connects"].as_u64().unwrap() > 0, "{c}");
            assert_eq!(c["errors"].as_u64(), Some(0), "{c}");
        }
    }
}

#[test]
fn the_channels_report_moves_messages_across_a_channel_pair_and_states_its_goals() {
    let home = Home::new();
    let out_dir = home.path().join("report");
    let out = run_bench(
        &home,
        &[
            "report",
            "channels",
            "--quick",
            "--duration-s",
            "1",
            "--warmup-s",
            "0.5",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(out_dir.join("README.md")).unwrap();
    for want in [
        "ferrymq-bench report channels --quick",
        "## Baseline: local put+get on QM1",
        "| 2 KB | persistent |",
        "channel 2 KB persistent on loopback (BATCHSZ 50) against QM1's local put+get",
        "channel 2 KB persistent with 10 ms RTT against loopback (BATCHSZ 50)",
        "| relay, 10 ms RTT | persistent |",
        "| 200 KB | non-persistent |",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    // Both goals were measured: each line says pass or FAIL, none "not measured".
    let goal_lines = md
        .lines()
        .filter(|l| l.starts_with("- pass: ") || l.starts_with("- **FAIL**: "))
        .count();
    assert_eq!(goal_lines, 2, "{md}");
    assert!(!md.contains("## Problems"), "{md}");
    for chart in ["batch.svg", "size.svg", "distance.svg"] {
        let svg = std::fs::read_to_string(out_dir.join(chart)).unwrap();
        assert!(svg.contains("<circle"), "{chart} has points: {svg}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("runs.json")).unwrap()).unwrap();
    let base = &v["baseline"]["windows"][0];
    assert!(base["msgs"].as_u64().unwrap() > 0, "{base}");
    let points = v["points"].as_array().unwrap();
    assert!(points.len() >= 6, "{v}");
    for p in points {
        let w = &p["windows"][0];
        assert!(w["msgs"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(w["errors"].as_u64(), Some(0), "{p}");
        assert_eq!(w["undrained"].as_u64(), Some(0), "{p}");
        let labels: Vec<&str> = w["procs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["label"].as_str().unwrap())
            .collect();
        let relayed = !p["point"]["rtt_ms"].is_null();
        let want: &[&str] = if relayed {
            &["QM1", "QM2", "relay"]
        } else {
            &["QM1", "QM2"]
        };
        assert_eq!(labels, want, "{p}");
    }
}

#[test]
fn the_mft_report_transfers_every_file_in_both_topologies_and_checks_it() {
    let home = Home::new();
    let out_dir = home.path().join("report");
    let out = run_bench(
        &home,
        &[
            "report",
            "mft",
            "--total-mb",
            "4",
            "--sizes",
            "1,2",
            "--chunks",
            "64",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let md = std::fs::read_to_string(out_dir.join("README.md")).unwrap();
    for want in [
        "ferrymq-bench report mft --total-mb 4",
        "## Baseline: cp + sync",
        "## Table 1: 1 MB files (4 files)",
        "## Table 2: 2 MB files (2 files)",
        "## Table 3: 1 MB scenario comparison",
        "| Bindings | Single | 65536 |",
        "| Client | Multiple | 65536 |",
        "1000 MB in 16.52 s",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    assert_eq!(md.matches("% of cp+sync (goal ≥ ").count(), 2, "{md}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("runs.json")).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "{v}");
    for r in rows {
        assert_eq!(r["bytes"].as_u64(), Some(4 << 20), "{r}");
        assert!(r["seconds"].as_f64().unwrap() > 0.0, "{r}");
        let qms = r["qm_cpu"].as_array().unwrap().len();
        assert_eq!(qms, if r["mode"] == "bindings" { 2 } else { 1 }, "{r}");
    }
    for svg in ["mft-1mb.svg", "mft-2mb.svg"] {
        let t = std::fs::read_to_string(out_dir.join(svg)).unwrap();
        assert!(
            t.contains("cp + sync") && t.contains("<circle"),
            "{svg}: {t}"
        );
    }
    // Its files, queue managers and agents are gone.
    let files = v["files_dir"].as_str().unwrap();
    assert!(!std::path::Path::new(files).exists(), "{files} is left");
    let report_home = format!("FERRYMQ_HOME={}", files.trim_end_matches("/files"));
    let ours = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("environ")).ok())
        .filter(|env| {
            env.split(|b| *b == 0)
                .any(|kv| kv == report_home.as_bytes())
        })
        .count();
    assert_eq!(ours, 0, "processes of the report are still running");
}

#[test]
fn a_sender_that_fills_its_queue_says_so_instead_of_a_silent_zero_rate() {
    let home = Home::new();
    let _qm = Qm::start(&home, "QFULL", &[]);
    let made = home.run_with_input(
        &["runmqsc", "QFULL"],
        "DEFINE QLOCAL(REQUEST0) MAXDEPTH(5)\n",
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stdout)
    );
    let args = [
        "cph",
        "sender",
        "--qm",
        "QFULL",
        "--queues",
        "1",
        "--duration-s",
        "0.5",
        "--warmup-s",
        "0.2",
        "--quiet",
    ];
    let mut json = args.to_vec();
    json.push("--json");
    let out = run_bench(&home, &json);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // Five puts fit; every later one finds the queue full and backs off (not an error).
    assert!(v["queue_full_waits"].as_u64().unwrap() > 10, "{v}");
    assert_eq!(v["errors"].as_u64(), Some(0), "{v}");
    let out = run_bench(&home, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("found the queue full (MQRC_Q_FULL 2053)"),
        "{text}"
    );
    let shown = home.run_with_input(&["runmqsc", "QFULL"], "DIS QL(REQUEST0) CURDEPTH\n");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("CURDEPTH(5)"));
}
