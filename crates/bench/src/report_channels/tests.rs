//! Tests of `report channels`' options, matrix, MQSC, status parsing and rendering (no
//! processes).

use super::flow::{FlowRun, ProcCpu, Spec};
use super::pair::{alter_mqsc, chstatus, qm1_mqsc, qm2_mqsc};
use super::render::{goals, markdown, point_label, size_label};
use super::*;
use crate::report_ha::tests::v;

fn run(rate: f64, qm1_cpu: f64, relay: bool) -> FlowRun {
    let mut procs = vec![
        ProcCpu {
            label: "QM1".into(),
            cpu_pct: qm1_cpu,
            cpu_us_per_msg: qm1_cpu / 100.0 / rate * 1e6,
        },
        ProcCpu {
            label: "QM2".into(),
            cpu_pct: 40.0,
            cpu_us_per_msg: 40.0 / 100.0 / rate * 1e6,
        },
    ];
    if relay {
        procs.push(ProcCpu {
            label: "relay".into(),
            cpu_pct: 7.5,
            cpu_us_per_msg: 1.0,
        });
    }
    FlowRun {
        msg_size: 2048,
        persistent: true,
        msgs: (rate * 2.0) as u64,
        msgs_per_s: rate,
        mb_per_s: rate * 2048.0 / 1e6,
        procs,
        client_cpu_pct: 30.0,
        client_cpu_us_per_msg: 30.0 / 100.0 / rate * 1e6,
        window_msgs: 4000,
        undrained: 0,
        errors: 0,
        first_error: None,
        duration_s: 2.0,
        warmup_s: 1.0,
    }
}

fn report(o: &Opts) -> Report {
    Report {
        info: crate::run_info::RunInfo::now(&o.command, o.quick, o.warmup, o.duration, 2048),
        rounds: o.rounds,
        putters: o.clients,
        getters: o.clients,
        sizes: o.sizes.clone(),
        batches: o.batches.clone(),
        rtts: o.rtts.clone(),
        baseline: Measured {
            point: Point {
                size: 2048,
                persistent: true,
                batch: 0,
                rtt_ms: None,
            },
            windows: Vec::new(),
        },
        points: o
            .points()
            .into_iter()
            .map(|point| Measured {
                point,
                windows: Vec::new(),
            })
            .collect(),
        log_findings: Vec::new(),
        errors: Vec::new(),
    }
}

#[test]
fn options_parse_with_defaults_quick_and_lists() {
    let o = Opts::parse(&[]).unwrap();
    assert!(!o.quick);
    assert_eq!(o.batches, vec![1, 10, 50, 200]);
    assert_eq!(o.sizes, vec![2048, 20_480, 204_800, 1_048_576]);
    assert_eq!(o.rtts, vec![0.0, 1.0, 10.0, 50.0]);
    assert_eq!((o.rounds, o.clients), (2, 16));
    assert!(o.out.ends_with(o.out.file_name().unwrap()));
    assert!(
        o.out.to_string_lossy().ends_with("-channels"),
        "{:?}",
        o.out
    );

    let q = Opts::parse(&v("--quick --out /tmp/x --duration-s 0.5 --warmup-s 0 --rounds 3 --batch-sizes 5,50 --rtts 10 --clients 2 --sizes 2048")).unwrap();
    assert!(q.quick);
    assert_eq!(q.out, PathBuf::from("/tmp/x"));
    assert_eq!(q.duration, Duration::from_millis(500));
    assert_eq!(q.warmup, Duration::ZERO);
    assert_eq!((q.rounds, q.clients), (3, 2));
    assert_eq!(q.batches, vec![5, 50]);
    assert_eq!(q.sizes, vec![2048]);
    assert!(q
        .command
        .starts_with("ferrymq-bench report channels --quick"));

    for bad in [
        "--rounds 0",
        "--rounds 10",
        "--rounds 1,2",
        "--batch-sizes 0",
        "--batch-sizes 10000",
        "--sizes 0",
        "--sizes 9999999",
        "--clients 0",
        "--rtts -1",
        "--duration-s 0",
        "--no-such-option",
    ] {
        assert!(Opts::parse(&v(bad)).is_err(), "{bad} is refused");
    }
}

#[test]
fn the_full_matrix_covers_every_sweep_once_and_groups_channel_configurations() {
    let o = Opts::parse(&[]).unwrap();
    let pts = o.points();
    // 2 KB x 4 batches, 3 more sizes at 50, 4 round trips: each persistent and not.
    assert_eq!(pts.len(), 2 * (4 + 3 + 4), "{pts:?}");
    for (i, p) in pts.iter().enumerate() {
        assert!(!pts[..i].contains(p), "{p:?} twice");
    }
    // The channel is reconfigured only when its (round trip, BATCHSZ) changes: each
    // configuration's points are together.
    let configs: Vec<(Option<u64>, u32)> = pts
        .iter()
        .map(|p| (p.rtt_ms.map(|r| r as u64), p.batch))
        .collect();
    let mut changes = configs.clone();
    changes.dedup();
    let mut distinct = changes.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(changes.len(), distinct.len(), "{configs:?}");
    assert_eq!(pts[0].rtt_ms, None, "the direct points come first");
    assert!(pts.contains(&Point {
        size: 1_048_576,
        persistent: false,
        batch: 50,
        rtt_ms: None
    }));
    assert!(pts.contains(&Point {
        size: 2048,
        persistent: true,
        batch: 50,
        rtt_ms: Some(10.0)
    }));
    // Quick still has both goals' points.
    let q = Opts::parse(&v("--quick")).unwrap().points();
    for rtt_ms in [None, Some(GOAL_DISTANCE_RTT_MS)] {
        assert!(q.contains(&Point {
            size: 2048,
            persistent: true,
            batch: REFERENCE_BATCH,
            rtt_ms
        }));
    }
}

#[test]
fn the_window_holds_batches_but_is_bounded_in_bytes_and_messages() {
    let spec = |size: usize, batch: u32| Spec {
        size,
        persistent: true,
        batch,
        clients: 4,
        warmup: Duration::ZERO,
        duration: Duration::ZERO,
    };
    assert_eq!(spec(2048, 0).window_msgs(), 400, "the baseline");
    assert_eq!(spec(2048, 50).window_msgs(), 400);
    assert_eq!(spec(2048, 200).window_msgs(), 804, "four batches");
    assert_eq!(spec(1 << 20, 0).window_msgs(), 64, "64 MB");
    assert_eq!(spec(1 << 20, 50).window_msgs(), 104, "two batches");
    assert_eq!(spec(2048, 9999).window_msgs(), flow::IN_FLIGHT_MSGS_MAX);
    assert_eq!(flow::us_per_msg(50.0, 2.0, 1000), 1000.0);
    assert_eq!(flow::us_per_msg(50.0, 2.0, 0), 0.0);
}

#[test]
fn the_mqsc_defines_the_pair_as_mq_does() {
    let q1 = qm1_mqsc(1415, 50);
    for want in [
        "DEFINE QLOCAL(QM2) USAGE(XMITQ)",
        "DEFINE QREMOTE(BENCH.REMOTE) RNAME(BENCH.TARGET) RQMNAME(QM2) XMITQ(QM2)",
        "DEFINE CHANNEL(QM1.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1(1415)') XMITQ(QM2) BATCHSZ(50) NPMSPEED(FAST)",
        "DEFINE QLOCAL(BENCH.LOCAL)",
    ] {
        assert!(q1.contains(want), "missing {want} in {q1}");
    }
    let q2 = qm2_mqsc();
    assert!(
        q2.contains("DEFINE CHANNEL(QM1.QM2) CHLTYPE(RCVR) BATCHSZ(9999)"),
        "the sender's BATCHSZ decides: {q2}"
    );
    assert!(q2.contains("DEFINE QLOCAL(BENCH.TARGET)"), "{q2}");
    assert_eq!(
        alter_mqsc(2000, 200),
        "ALTER CHANNEL(QM1.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1(2000)') BATCHSZ(200)\n"
    );
}

#[test]
fn the_channel_status_is_read_from_display_chstatus() {
    let out = "AMQ8417I: Display Channel Status details.\n   CHANNEL(QM1.QM2)    CHLTYPE(SDR)\n   CONNAME(127.0.0.1(1415))  CURRENT\n   RQMNAME(QM2)   STATUS(Running)\n   SUBSTATE(MQGET)  XMITQ(QM2)\n";
    assert_eq!(chstatus(out).as_deref(), Some("RUNNING"));
    assert_eq!(
        chstatus("CHANNEL(QM1.QM2) CHSTATUS(X) STATUS(STOPPED)").as_deref(),
        Some("STOPPED")
    );
    assert_eq!(chstatus("AMQ8420I: Channel Status not found."), None);
}

#[test]
fn labels_name_sizes_and_points() {
    assert_eq!(size_label(2048), "2 KB");
    assert_eq!(size_label(204_800), "200 KB");
    assert_eq!(size_label(1_048_576), "1 MB");
    assert_eq!(size_label(1000), "1000 B");
    assert_eq!(
        point_label(Point {
            size: 2048,
            persistent: false,
            batch: 10,
            rtt_ms: Some(1.0)
        }),
        "2 KB non-persistent, BATCHSZ 10, relay, 1 ms RTT"
    );
}

#[test]
fn the_goals_compare_median_rounds_and_say_pass_or_fail() {
    let o = Opts::parse(&v("--quick --rounds 3")).unwrap();
    let mut rep = report(&o);
    // Nothing measured yet: both goals say so.
    for g in goals(&rep) {
        assert!(g.line().starts_with("not measured"), "{}", g.line());
    }
    rep.baseline.windows = vec![run(1000.0, 90.0, false), run(990.0, 90.0, false)];
    let set = |rep: &mut Report, rtt_ms: Option<f64>, rates: &[f64]| {
        let m = rep
            .points
            .iter_mut()
            .find(|m| {
                m.point
                    == Point {
                        size: 2048,
                        persistent: true,
                        batch: 50,
                        rtt_ms,
                    }
            })
            .unwrap();
        m.windows = rates
            .iter()
            .map(|r| run(*r, 50.0, rtt_ms.is_some()))
            .collect();
    };
    // Loopback: median of 5000, 700, 800 is 800 (80% of the lower-middle baseline 990).
    set(&mut rep, None, &[5000.0, 700.0, 800.0]);
    // 10 ms: 300 of 800 is 37.5%.
    set(&mut rep, Some(10.0), &[300.0, 310.0, 290.0]);
    let [g1, g2] = goals(&rep);
    assert_eq!(g1.rates, Some((800.0, 990.0)));
    assert!(g1.line().starts_with("pass:"), "{}", g1.line());
    assert!(g1.line().contains(">= 60%"), "{}", g1.line());
    assert_eq!(g2.rates, Some((300.0, 800.0)));
    assert!(g2.line().starts_with("**FAIL**:"), "{}", g2.line());

    let md = markdown(&rep);
    for want in [
        "# FerryMQ message channel report (quick)",
        "## Goals",
        "- pass: channel 2 KB persistent on loopback (BATCHSZ 50) against QM1's local put+get — 80.8%",
        "- **FAIL**: channel 2 KB persistent with 10 ms RTT against loopback (BATCHSZ 50) — 37.5%",
        "## Baseline: local put+get on QM1",
        "| 2 KB | persistent | 990 |",
        "## Batch size (2 KB, loopback)",
        "| 50 | persistent | 800 | 1.64 | 80.8% |",
        "| relay, 10 ms RTT | persistent | 300 | 0.61 | 37.5% |",
        "| 7.5 | 300 / 310 / 290 |",
        "![messages/s by round trip](distance.svg)",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    assert!(!md.contains("## Problems"), "{md}");
    rep.errors
        .push("2 KB persistent, BATCHSZ 10, loopback, round 1: boom".into());
    assert!(markdown(&rep).contains("## Problems\n\n- 2 KB persistent"));
}

#[test]
fn the_report_folder_has_its_charts_and_raw_runs() {
    let o = Opts::parse(&v("--quick")).unwrap();
    let mut rep = report(&o);
    rep.baseline.windows = vec![run(1000.0, 90.0, false)];
    rep.points[0].windows = vec![run(800.0, 50.0, false)];
    let dir = std::env::temp_dir().join(format!("ferrymq-chanreport-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    render::write_report(&dir, &rep).unwrap();
    for f in [
        "README.md",
        "batch.svg",
        "size.svg",
        "distance.svg",
        "runs.json",
    ] {
        assert!(dir.join(f).exists(), "{f} written");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("runs.json")).unwrap()).unwrap();
    assert_eq!(json["baseline"]["windows"][0]["msgs_per_s"], 1000.0);
    assert!(json["command"].as_str().unwrap().contains("--quick"));
    let _ = std::fs::remove_dir_all(&dir);
}
