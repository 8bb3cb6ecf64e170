//! Tests of `report dr`'s option parsing, status parsing and rendering (no processes).

use super::*;
use crate::report_ha::tests::{run, v};

const LINE: &str = "QMNAME(DRQM0) DRROLE(Primary) DRSTATUS(Normal) PARTNER(localhost(5001)) \
                    POSITION(123456) ACKED(120000) LAGBYTES(3456) LAGSECS(0.002) MAXLAG(4194304) \
                    RESYNC(Difference)";

fn lag(status: &str, bytes: u64, secs: f64) -> DrLag {
    DrLag {
        qm: "DRQM0".into(),
        status: Some(status.into()),
        lag_bytes: Some(bytes),
        lag_secs: Some(secs),
        max_lag: Some(4_194_304),
        line: String::new(),
    }
}

fn dr_run(threads: usize, rate: f64, secondary: Option<f64>, lags: Vec<DrLag>) -> DrRun {
    DrRun {
        run: run(threads, rate, 60.0),
        primary_cpu_pct: Some(50.0),
        secondary_cpu_pct: secondary,
        peak: lags.clone(),
        lag: lags,
    }
}

#[test]
fn options_parse_with_quick_defaults_and_lists() {
    let o = Opts::parse(&v("--quick --out /tmp/x --rtts 10,100 --max-lag 1048576")).unwrap();
    assert!(o.quick);
    assert_eq!(o.out, PathBuf::from("/tmp/x"));
    assert_eq!(o.rtts, vec![10.0, 100.0]);
    assert_eq!(o.max_lag, Some(1_048_576));
    assert!(!o.step("dr2"), "DR2 is for the full mode only");
    assert!(o.step("dr1") && o.step("hadr") && o.step("distance"));
    assert_eq!(
        o.command,
        "ferrymq-bench report dr --quick --out /tmp/x --rtts 10,100 --max-lag 1048576"
    );
    assert_eq!(
        o.distance_rows(),
        vec![None, Some(0.0), Some(10.0), Some(100.0)]
    );

    let o = Opts::parse(&v("--steps distance,dr2 --dr2-qms 3 --rtts 0,50")).unwrap();
    assert!(!o.quick);
    assert_eq!(o.steps, vec!["distance", "dr2"]);
    assert_eq!(o.dr2_qms, 3);
    assert!(o.out.starts_with("docs/results") && o.out.to_string_lossy().ends_with("-dr"));
    assert_eq!(o.distance_rows(), vec![None, Some(0.0), Some(50.0)]);
    let o = Opts::parse(&[]).unwrap();
    assert_eq!(o.steps.len(), 4);
    assert_eq!(o.requesters, vec![1, 4, 16, 64, 256]);
    assert_eq!(o.distance_requesters, vec![64, 256]);
    assert_eq!(o.rtts, vec![10.0, 20.0, 50.0, 100.0]);
    assert_eq!((o.dr2_qms, o.max_lag), (2, None));
    assert_eq!(o.repeats, 3);
    assert_eq!(Opts::parse(&v("--quick")).unwrap().repeats, 1);
    assert_eq!(Opts::parse(&v("--repeats 5")).unwrap().repeats, 5);
}

#[test]
fn a_row_is_each_sides_median_window() {
    let runs: Vec<DrRun> = [900.0, 1200.0, 1000.0]
        .iter()
        .map(|r| dr_run(4, *r, None, Vec::new()))
        .collect();
    assert_eq!(median_run(runs).run.round_trips_per_s, 1000.0);
    let md = comparison_md(&comparison("DR2", "no DR", "DR"));
    assert!(
        md.contains("| 2100, 2000, 1900 / 1600, 1700, 1800 |"),
        "{md}"
    );
}

#[test]
fn bad_options_are_refused_with_the_reason() {
    for (args, want) in [
        ("--rtts 1,x", "'x' is not a valid number"),
        ("--requesters 0,4", "at least 1"),
        ("--steps ha1", "'ha1' is not one of"),
        ("--dr2-qms 0", "not a number from 1 to 10"),
        ("--max-lag lots", "--max-lag: 'lots' is not a number from 1"),
        ("--repeats 0", "--repeats: '0' is not a number from 1 to 9"),
        ("--out", "a value is required"),
        (
            "--failover-messages 1",
            "unexpected argument '--failover-messages'",
        ),
    ] {
        let e = Opts::parse(&v(args)).unwrap_err();
        assert!(e.contains(want), "{args}: {e}");
    }
}

#[test]
fn the_dr_status_line_is_read() {
    let l = parse_dr("DRQM0", LINE).unwrap();
    assert_eq!(l.qm, "DRQM0");
    assert!(l.is_normal());
    assert_eq!(l.status.as_deref(), Some("Normal"));
    assert_eq!(l.lag_bytes, Some(3456));
    assert_eq!(l.lag_secs, Some(0.002));
    assert_eq!(l.max_lag, Some(4_194_304));
    assert_eq!(l.line, LINE);

    // The primary's line wins over a secondary's, in an indented layout without QMNAME.
    let two = "QMNAME(Q)\n  DRROLE(Secondary) DRSTATUS(Connecting)\n  DRROLE(Primary) DRSTATUS(FullCopy) LAGBYTES(9)\n";
    let l = parse_dr("Q", two).unwrap();
    assert_eq!(l.qm, "Q");
    assert_eq!(l.status.as_deref(), Some("FullCopy"));
    assert!(!l.is_normal());
    assert_eq!((l.lag_bytes, l.lag_secs, l.max_lag), (Some(9), None, None));
    assert_eq!(parse_dr("Q", "QMNAME(Q) STATUS(Running)"), None);
}

#[test]
fn dr_arguments_follow_the_contract() {
    assert_eq!(
        primary_args(5001, None),
        v("-dr primary -drr 127.0.0.1(5001)")
    );
    assert_eq!(
        primary_args(5001, Some(4096)),
        v("-dr primary -drr 127.0.0.1(5001) -drlag 4096")
    );
    assert_eq!(
        secondary_args(45999),
        v("-dr secondary -drl 127.0.0.1(45999)")
    );
}

#[test]
fn cpu_is_split_into_primary_and_secondary_sides() {
    assert_eq!(split_cpu(&[10.0, 20.0, 5.0], 2, 3), (Some(30.0), Some(5.0)));
    assert_eq!(split_cpu(&[10.0], 1, 1), (Some(10.0), Some(0.0)));
    assert_eq!(split_cpu(&[], 1, 2), (None, None), "cph could not measure");
    assert_eq!(split_cpu(&[1.0, 2.0], 1, 3), (None, None));
}

#[test]
fn the_peak_keeps_the_largest_lag_of_each_primary() {
    let mut peak = Vec::new();
    fold_peak(&mut peak, vec![lag("Normal", 10, 0.5)]);
    fold_peak(&mut peak, vec![lag("Normal", 3000, 0.1)]);
    fold_peak(&mut peak, vec![lag("Normal", 20, 0.2)]);
    assert_eq!(peak.len(), 1);
    assert_eq!(
        (peak[0].lag_bytes, peak[0].lag_secs),
        (Some(3000), Some(0.5))
    );
}

#[test]
fn lag_cells_show_the_worst_primary() {
    let cells = lag_cells(&[lag("Normal", 10, 0.5), lag("Normal", 3000, 0.001)]);
    assert_eq!(
        cells,
        ["Normal", "3000", "0.500", "4194304"].map(String::from)
    );
    let cells = lag_cells(&[lag("Normal", 1, 0.0), lag("Disconnected", 2, 0.0)]);
    assert_eq!(cells[0], "Disconnected/Normal");
    assert_eq!(lag_cells(&[]), ["-", "-", "-", "-"].map(String::from));
}

fn comparison(name: &str, base: &str, dr: &str) -> Comparison {
    Comparison {
        name: name.into(),
        base_label: base.into(),
        dr_label: dr.into(),
        queue_managers: 1,
        base_processes: 1,
        dr_processes: 2,
        secondaries: 1,
        rows: vec![
            CompareRow {
                requesters: 4,
                base: dr_run(4, 1000.0, None, Vec::new()),
                dr: dr_run(4, 950.0, Some(12.5), vec![lag("Normal", 3456, 0.002)]),
                windows: vec![(1000.0, 950.0)],
            },
            CompareRow {
                requesters: 16,
                base: dr_run(16, 2000.0, None, Vec::new()),
                dr: dr_run(16, 1700.0, None, Vec::new()),
                windows: vec![(2100.0, 1600.0), (2000.0, 1700.0), (1900.0, 1800.0)],
            },
        ],
    }
}

fn report() -> Report {
    Report {
        info: crate::run_info::RunInfo {
            command: "ferrymq-bench report dr --quick".into(),
            version: "test".into(),
            date: crate::run_info::utc_string(0),
            cores: 2,
            cpu_model: "test CPU".into(),
            kernel: "6.1".into(),
            quick: true,
            warmup_s: 1.0,
            duration_s: 3.0,
            elapsed_s: 60.0,
            msg_size: MSG_SIZE,
        },
        max_lag: None,
        requesters: vec![4, 16],
        distance_requesters: vec![64, 256],
        repeats: 3,
        distance_qms: 2,
        dr1: Some(comparison("DR1", "no DR", "DR")),
        dr2: None,
        hadr: Some(comparison("HA+DR", "HA", "HA+DR")),
        distance: vec![
            DistanceRow {
                rtt_ms: None,
                runs: vec![dr_run(64, 1000.0, Some(10.0), vec![lag("Normal", 0, 0.0)])],
            },
            DistanceRow {
                rtt_ms: Some(0.0),
                runs: vec![dr_run(64, 990.0, Some(10.0), Vec::new())],
            },
            DistanceRow {
                rtt_ms: Some(100.0),
                runs: vec![
                    dr_run(64, 700.0, Some(9.0), Vec::new()),
                    dr_run(256, 850.0, Some(9.0), vec![lag("Normal", 70_000, 0.1)]),
                ],
            },
        ],
        log_findings: Vec::new(),
        errors: vec!["DR2: broke\nhere".into()],
    }
}

#[test]
fn tables_show_percentages_and_dr_status() {
    let c = comparison("DR1", "no DR", "DR");
    let t = comparison_md(&c);
    assert!(
        t.contains("| 4 | 1000 | 950 | 95.0% | 60.0 | 50.0 | 12.5 |"),
        "{t}"
    );
    assert!(t.contains("| Normal | 3456 | 0.002 | 4194304 |"), "{t}");
    assert!(t.contains("| 16 | 2000 | 1700 | 85.0% |"), "{t}");
    assert!(t.contains("| - | - | - | - |"), "no status read: {t}");

    let rep = report();
    let d = distance_md(&rep.distance, &[64, 256]);
    assert!(
        d.contains("| via relay, 100 ms RTT | 850 | 256 | 85.0% | >= 80% | yes |"),
        "{d}"
    );
    assert!(
        d.contains("| via relay, 0 ms added | 990 | 64 | 99.0% | - | - |"),
        "{d}"
    );
    assert!(d.contains("| direct (no relay) | 1000 | - |"), "{d}");

    let mut rep = rep;
    if let Some(c) = rep.dr1.as_mut() {
        // The best DR row: 1700 RT/s on 42.5% of a core against 2000 on 50%.
        c.rows[1].dr.primary_cpu_pct = Some(42.5);
    }
    let targets = targets_md(&rep);
    assert!(
        targets.contains("| DR1: per core, primary side only, at the best DR row (recovery site on its own hosts) | - | 100.0% | - |"),
        "{targets}"
    );
    assert!(
        targets.contains("| DR1: best DR rate vs best no DR rate (1700 vs 2000 RT/s) | >= 90% | 85.0% | **no** |"),
        "{targets}"
    );
    assert!(
        targets.contains(
            "| HA+DR: best HA+DR rate vs best HA rate (1700 vs 2000 RT/s) | - | 85.0% | - |"
        ),
        "{targets}"
    );
    assert!(
        targets.contains(
            "| Distance: 100 ms RTT on the DR link vs direct DR | >= 80% | 85.0% | yes |"
        ),
        "{targets}"
    );

    let md = render(&rep);
    assert!(
        md.starts_with("# FerryMQ DR benchmark report (quick)"),
        "{md}"
    );
    for want in [
        "## DR1:",
        "## HA+DR:",
        "## Distance:",
        "![DR1](dr1.svg)",
        "- DR2: broke / here",
    ] {
        assert!(md.contains(want), "{want}: {md}");
    }
    assert!(!md.contains("## DR2:"), "{md}");
}

#[test]
fn the_report_is_written_with_charts_and_json() {
    let dir = std::env::temp_dir().join(format!("ferrymq-report-dr-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_report(&dir, &report()).unwrap();
    for f in [
        "README.md",
        "runs.json",
        "dr1.svg",
        "hadr.svg",
        "distance.svg",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    assert!(!dir.join("dr2.svg").exists());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("runs.json")).unwrap()).unwrap();
    assert_eq!(json["dr1"]["rows"][0]["dr"]["lag"][0]["lag_bytes"], 3456);
    std::fs::remove_dir_all(&dir).unwrap();
}
