//! Tests of `report mft`'s options, goals, tables and files (no agents or queue managers).

use super::measure::{channel_mqsc, ProcCpu};
use super::render::{markdown, scenario_table, seed_time, size_table, SEED_TIMES};
use super::*;

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn row(size_mb: u64, mode: Mode, multiple: bool, chunk_kib: usize, mb_per_s: f64) -> Row {
    let files = 1000 / size_mb;
    Row {
        size_mb,
        files,
        bytes: 1000 * MB_BYTES,
        mode,
        multiple,
        transfers: if multiple { 10 } else { 1 },
        chunk_kib,
        seconds: 1000.0 / mb_per_s,
        mb_per_s,
        sender_cpu_s: 1.5,
        receiver_cpu_s: 2.5,
        qm_cpu: match mode {
            Mode::Bindings => vec![
                ProcCpu {
                    label: "MFTA".into(),
                    cpu_s: 1.0,
                },
                ProcCpu {
                    label: "MFTB".into(),
                    cpu_s: 2.0,
                },
            ],
            Mode::Client => vec![ProcCpu {
                label: "MFTC".into(),
                cpu_s: 4.0,
            }],
        },
        pct_of_cp: mb_per_s / 200.0 * 100.0,
    }
}

fn base(size_mb: u64, mb_per_s: f64) -> Baseline {
    let mut b = Baseline::new(size_mb, 1000 / size_mb, 1000 * MB_BYTES);
    b.add(2000.0 / mb_per_s);
    b.add(1000.0 / mb_per_s);
    // The relay floor at three quarters of cp+sync (the faster of two runs).
    b.add_floor(1000.0 / (mb_per_s * 0.5));
    b.add_floor(1000.0 / (mb_per_s * 0.75));
    b
}

#[test]
fn options_default_to_the_seeds_matrix_and_quick_to_a_short_subset() {
    let o = Opts::parse(&args(&[])).unwrap();
    assert_eq!(o.total_mb, 1000);
    assert_eq!(o.sizes_mb, vec![1, 10, 100]);
    assert_eq!(o.chunks_kib, vec![64, 128, 256, 512]);
    assert_eq!(o.multiple, vec![false, true]);
    assert_eq!(o.modes, vec![Mode::Bindings, Mode::Client]);
    assert_eq!(o.rows(), 48);
    assert_eq!((o.files(1), o.files(10), o.files(100)), (1000, 100, 10));
    assert!(o.out.to_string_lossy().ends_with("-mft"));

    let q = Opts::parse(&args(&["--quick"])).unwrap();
    assert_eq!((q.total_mb, q.sizes_mb.clone()), (1000, vec![1, 100]));
    assert_eq!(q.chunks_kib, vec![256]);
    assert_eq!(q.multiple, vec![true]);
    assert_eq!(q.rows(), 4);
    assert_eq!((q.files(1), q.files(100)), (1000, 10));
    assert!(q.out.to_string_lossy().ends_with("-mft-quick"));

    let p = Opts::parse(&args(&[
        "--sizes",
        "100,1",
        "--chunks",
        "512,64",
        "--transfers",
        "multiple",
        "--modes",
        "client",
        "--total-mb",
        "500",
        "--out",
        "x",
    ]))
    .unwrap();
    assert_eq!(p.sizes_mb, vec![100, 1]);
    assert_eq!(p.chunks_kib, vec![512, 64]);
    assert_eq!(
        (p.multiple.clone(), p.modes.clone()),
        (vec![true], vec![Mode::Client])
    );
    assert_eq!(p.files(100), 5);
    assert!(p.command.ends_with("--out x"), "{}", p.command);

    for bad in [
        &["--sizes", "0"][..],
        &["--chunks", "8192"],
        &["--transfers", "some"],
        &["--modes", "tcp"],
        &["--total-mb", "10", "--sizes", "100"],
        &["--total-mb", "20000", "--sizes", "1"],
    ] {
        assert!(
            Opts::parse(&args(bad)).is_err(),
            "{bad:?} should be refused"
        );
    }
}

#[test]
fn the_faster_cp_run_is_the_baseline() {
    let b = base(1, 100.0);
    assert_eq!(b.runs_s, vec![20.0, 10.0]);
    assert!((b.mb_per_s - 100.0).abs() < 1e-9 && (b.seconds - 10.0).abs() < 1e-9);
}

#[test]
fn goals_read_ten_bindings_transfers_at_the_default_chunk_against_cp() {
    let rows = vec![
        row(1, Mode::Bindings, true, 128, 90.0),
        row(1, Mode::Bindings, true, 256, 50.0),
        row(1, Mode::Client, true, 256, 150.0),
        row(100, Mode::Bindings, false, 256, 190.0),
        row(100, Mode::Bindings, true, 512, 130.0),
    ];
    let bases = vec![base(1, 100.0), base(100, 200.0)];
    let g = goals(&rows, &bases);
    assert_eq!(g.len(), 2, "{g:?}");
    // 1 MB files: the 256 KiB row, not the faster 128 KiB one nor the client row.
    assert_eq!((g[0].size_mb, g[0].chunk_kib), (1, 256));
    assert!((g[0].pct_of_cp - 50.0).abs() < 1e-9 && g[0].pass);
    assert_eq!(g[0].goal_pct, GOAL_SMALL_PCT);
    // 100 MB files: no 256 KiB multiple row, so the best multiple one; 65% ≥ 60%.
    assert_eq!((g[1].size_mb, g[1].chunk_kib), (100, 512));
    assert!((g[1].pct_of_cp - 65.0).abs() < 1e-9 && g[1].pass);
    let slow = vec![row(100, Mode::Bindings, true, 256, 100.0)];
    let g = goals(&slow, &bases);
    assert_eq!(g.len(), 1);
    assert!(!g[0].pass, "50% of cp is under the 60% goal");
    assert!(goals(&[row(10, Mode::Client, true, 256, 1.0)], &[base(10, 1.0)]).is_empty());
}

#[test]
fn tables_follow_the_seeds_layout_with_its_times_beside_ours() {
    assert!(SEED_TIMES.iter().all(|x| x.4 > 0.0));
    let r = row(100, Mode::Bindings, true, 256, 120.0);
    assert_eq!(seed_time(&r), Some(16.52));
    assert_eq!(seed_time(&row(20, Mode::Bindings, true, 256, 1.0)), None);

    let rows = [
        row(100, Mode::Client, true, 256, 80.0),
        row(100, Mode::Bindings, false, 256, 100.0),
        row(100, Mode::Bindings, true, 64, 110.0),
        row(100, Mode::Bindings, true, 256, 120.0),
    ];
    let refs: Vec<&Row> = rows.iter().collect();
    let mut t = String::new();
    size_table(&mut t, &refs);
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[0].starts_with("| Bindings/Client | Single/Multiple | ChunkSize | Transfer Time (s)")
    );
    assert_eq!(lines.len(), 2 + 4);
    // Blocks: bindings single, bindings multiple (by chunk), client single, client multiple.
    assert!(
        lines[2].starts_with("| Bindings | Single | 262144 | 10.00 | 100.0 | 50% |"),
        "{t}"
    );
    assert!(
        lines[3].starts_with("| Bindings | Multiple | 65536 |"),
        "{t}"
    );
    assert!(
        lines[4].contains(
            "| 262144 | 8.33 | 120.0 | 60% | 1.50 | 2.50 | 3.00 (1.00 + 2.00) | 16.52 | 60.5 |"
        ),
        "{t}"
    );
    assert!(
        lines[5].starts_with("| Client | Multiple | 262144 |")
            && lines[5].contains("| 4.00 | 31.23 |"),
        "{t}"
    );

    let mut s = String::new();
    scenario_table(&mut s, &refs);
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].starts_with("| ChunkSize | Scenario | Transfer Time (s)"));
    assert!(
        lines[2].starts_with("| 65536 | Bindings / Multiple Transfer |"),
        "{s}"
    );
    assert!(
        lines[3].starts_with("| 262144 | Bindings / Single Transfer |"),
        "{s}"
    );
    assert!(
        lines[5].starts_with("| 262144 | Client / Multiple Transfer |"),
        "{s}"
    );
}

#[test]
fn the_readme_numbers_the_tables_and_states_the_goals_and_the_seeds_best() {
    let rows = vec![
        row(1, Mode::Bindings, true, 256, 40.0),
        row(100, Mode::Bindings, true, 256, 130.0),
    ];
    // In the order a run measured them (`--sizes 100,1`); the table shows them by size.
    let baselines = vec![base(100, 200.0), base(1, 100.0)];
    let r = Results {
        info: crate::run_info::RunInfo::now(
            "ferrymq-bench report mft",
            false,
            Default::default(),
            Default::default(),
            0,
        ),
        total_mb: 1000,
        mb_bytes: MB_BYTES,
        files_dir: "/tmp/x/files".into(),
        filesystem: "/dev/vda (ext4) mounted on /".into(),
        load_at_start: "0.50 0.40 0.30".into(),
        goals: goals(&rows, &baselines),
        baselines,
        rows,
    };
    let md = markdown(&r);
    for want in [
        "## Table 1: 1 MB files (1000 files)",
        "## Table 2: 100 MB files (10 files)",
        "## Table 3: 1 MB scenario comparison",
        "## Table 4: 100 MB scenario comparison",
        "1000 MB in 16.52 s",
        "40% of cp+sync (goal ≥ 30%; the relay floor, the same hops with no queue manager: 75%): PASS",
        "65% of cp+sync (goal ≥ 60%; the relay floor, the same hops with no queue manager: 75%): PASS",
        "| 100 | 10 | 1000 | 10.00, 5.00 | 5.00 | 200.0 | 10.00, 6.67 | 150.0 | 75% |",
        "![100 MB files](mft-100mb.svg)",
        "/tmp/x/files",
        "(load average 0.50 0.40 0.30 when the run started)",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    let (small, big) = (
        md.find("| 1 | 1000 | 1000 |"),
        md.find("| 100 | 10 | 1000 |"),
    );
    assert!(small.is_some() && small < big, "baselines by size:\n{md}");
    let svg = render::chart(&r, 100);
    assert!(
        svg.contains("cp + sync") && svg.contains("relay floor") && svg.contains(">262144<"),
        "{svg}"
    );
}

#[test]
fn the_relay_floor_moves_every_file_whole_and_a_failed_stream_ends_with_its_reason() {
    let dir = std::env::temp_dir().join(format!("ferrymq-mft-floor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // 23 files over the ten streams (some carry three), 100 KB each, in 4 KiB reads: every
    // file crosses many reads and the streams' length prefixes keep them apart.
    let src = files::write_sources(&dir.join("src"), 23, 100_000, 11).unwrap();
    let dst = dir.join("dst");
    let secs = floor::relay(&src, &dst, 4096).unwrap();
    assert!(secs > 0.0);
    for (rel, _) in &src.files {
        let (a, b) = (
            std::fs::read(dir.join("src").join(rel)).unwrap(),
            std::fs::read(dst.join(rel)).unwrap(),
        );
        assert!(a == b, "{rel} differs after the relay");
    }
    // The checked run removes its copy.
    floor::relay_floor(&src, &dst, 65536).unwrap();
    assert!(!dst.exists());
    // A source gone: its stream fails, the others end, and the reason names it (no hang).
    std::fs::remove_file(dir.join("src").join(&src.files[14].0)).unwrap();
    let e = floor::relay(&src, &dst, 4096).unwrap_err();
    assert!(
        e.contains("relay floor") && e.contains("No such file"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_channel_pair_joins_the_queue_managers_each_way() {
    let m = channel_mqsc("MFTA", "MFTB", 5000);
    assert!(m.contains("DEFINE QLOCAL(MFTB) USAGE(XMITQ)"));
    assert!(m.contains("CHANNEL(MFTA.TO.MFTB) CHLTYPE(SDR)") && m.contains("'127.0.0.1(5000)'"));
    assert!(m.contains("CHANNEL(MFTB.TO.MFTA) CHLTYPE(RCVR)"));
    assert!(m.contains("START CHANNEL(MFTA.TO.MFTB)"));
}

#[test]
fn source_files_are_checked_by_sha256_and_a_wrong_file_fails() {
    let dir = std::env::temp_dir().join(format!("ferrymq-mft-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = files::write_sources(&dir.join("src"), 12, 3000, 7).unwrap();
    assert_eq!(src.files.len(), 12);
    assert_eq!(src.groups().len(), MULTIPLE_TRANSFERS);
    assert_eq!(
        std::fs::metadata(dir.join("src/g1/f00011.bin"))
            .unwrap()
            .len(),
        3000
    );
    let dst = dir.join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    for (rel, _) in &src.files {
        let name = rel.rsplit('/').next().unwrap();
        std::fs::copy(dir.join("src").join(rel), dst.join(name)).unwrap();
    }
    files::verify_flat(&src, &dst).unwrap();
    // One byte changed: the run must fail, naming the file.
    let victim = dst.join("f00005.bin");
    let mut b = std::fs::read(&victim).unwrap();
    b[1234] ^= 1;
    std::fs::write(&victim, &b).unwrap();
    let e = files::verify_flat(&src, &dst).unwrap_err();
    assert!(e.contains("WRONG FILE") && e.contains("f00005.bin"), "{e}");
    // A leftover .part is a stray file.
    b[1234] ^= 1;
    std::fs::write(&victim, &b).unwrap();
    std::fs::write(dst.join("f00006.bin.part"), b"x").unwrap();
    assert!(files::verify_flat(&src, &dst)
        .unwrap_err()
        .contains("unexpected"));
    std::fs::remove_dir_all(&dir).unwrap();
}
