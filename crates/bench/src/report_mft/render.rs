//! The mft report's README.md (the seed's Tables 1–6 layout, its times beside ours, the
//! `cp`+`sync` baselines and the goals), one chart per file size, and runs.json.

use std::fmt::Write as _;
use std::path::Path;

use super::measure::{Baseline, Row, QM_CLIENT, QM_DST, QM_SRC};
use super::{Goal, Mode, Results, MULTIPLE_TRANSFERS};

/// The seed's transfer times for 1000 MB, seconds: (file MB, mode, multiple, chunk KiB, time).
pub(crate) const SEED_TIMES: [(u64, Mode, bool, usize, f64); 48] = {
    use Mode::{Bindings as B, Client as C};
    [
        (1, B, false, 64, 134.09),
        (1, B, false, 128, 70.51),
        (1, B, false, 256, 53.91),
        (1, B, false, 512, 53.0),
        (1, B, true, 64, 25.43),
        (1, B, true, 128, 22.28),
        (1, B, true, 256, 23.29),
        (1, B, true, 512, 21.37),
        (1, C, false, 64, 156.71),
        (1, C, false, 128, 92.65),
        (1, C, false, 256, 59.81),
        (1, C, false, 512, 50.85),
        (1, C, true, 64, 44.28),
        (1, C, true, 128, 36.89),
        (1, C, true, 256, 31.61),
        (1, C, true, 512, 30.77),
        (10, B, false, 64, 47.09),
        (10, B, false, 128, 48.91),
        (10, B, false, 256, 43.54),
        (10, B, false, 512, 46.38),
        (10, B, true, 64, 20.23),
        (10, B, true, 128, 18.21),
        (10, B, true, 256, 18.28),
        (10, B, true, 512, 19.04),
        (10, C, false, 64, 73.2),
        (10, C, false, 128, 47.31),
        (10, C, false, 256, 48.54),
        (10, C, false, 512, 45.3),
        (10, C, true, 64, 39.61),
        (10, C, true, 128, 34.52),
        (10, C, true, 256, 30.07),
        (10, C, true, 512, 29.22),
        (100, B, false, 64, 48.63),
        (100, B, false, 128, 47.43),
        (100, B, false, 256, 45.1),
        (100, B, false, 512, 46.76),
        (100, B, true, 64, 20.31),
        (100, B, true, 128, 16.57),
        (100, B, true, 256, 16.52),
        (100, B, true, 512, 19.23),
        (100, C, false, 64, 75.93),
        (100, C, false, 128, 49.18),
        (100, C, false, 256, 47.9),
        (100, C, false, 512, 45.3),
        (100, C, true, 64, 38.21),
        (100, C, true, 128, 34.68),
        (100, C, true, 256, 31.23),
        (100, C, true, 512, 29.8),
    ]
};

/// The seed's best: 1000 MB in 16.52 s (100 MB files, bindings, ten transfers, 256 KiB).
pub(crate) const SEED_BEST_S: f64 = 16.52;

/// The seed's time for 1000 MB in this row's configuration, if it measured one.
pub(crate) fn seed_time(r: &Row) -> Option<f64> {
    SEED_TIMES
        .iter()
        .find(|(s, m, mul, c, _)| {
            *s == r.size_mb && *m == r.mode && *mul == r.multiple && *c == r.chunk_kib
        })
        .map(|x| x.4)
}

fn single(m: bool) -> &'static str {
    if m {
        "Multiple"
    } else {
        "Single"
    }
}

/// One row as the report prints it while running.
pub fn row_line(r: &Row) -> String {
    format!(
        "{} × {} MB, {:<8} {:<8} {:>3} KiB: {:>7.2} s {:>7.1} MB/s ({:.0}% of cp+sync); CPU s: sender {:.2}, receiver {:.2}, QM {:.2}",
        r.files,
        r.size_mb,
        r.mode.label(),
        single(r.multiple),
        r.chunk_kib,
        r.seconds,
        r.mb_per_s,
        r.pct_of_cp,
        r.sender_cpu_s,
        r.receiver_cpu_s,
        r.qm_cpu_s()
    )
}

pub fn goal_line(g: &Goal) -> String {
    let floor = if g.floor_pct > 0.0 {
        format!(
            "; the relay floor, the same hops with no queue manager: {:.0}%",
            g.floor_pct
        )
    } else {
        String::new()
    };
    format!(
        "goal: {} × {} MB, {MULTIPLE_TRANSFERS} transfers at once, bindings, {} KiB chunks: {:.0}% of cp+sync (goal ≥ {:.0}%{floor}): {}",
        g.files,
        g.size_mb,
        g.chunk_kib,
        g.pct_of_cp,
        g.goal_pct,
        if g.pass { "PASS" } else { "FAIL" }
    )
}

fn qm_cell(r: &Row) -> String {
    if r.qm_cpu.len() == 1 {
        format!("{:.2}", r.qm_cpu_s())
    } else {
        let parts: Vec<String> = r.qm_cpu.iter().map(|p| format!("{:.2}", p.cpu_s)).collect();
        format!("{:.2} ({})", r.qm_cpu_s(), parts.join(" + "))
    }
}

fn seed_cells(r: &Row) -> String {
    match seed_time(r) {
        Some(t) => format!("{t:.2} | {:.1}", 1000.0 / t),
        None => "– | –".into(),
    }
}

/// Tables 1–3: one file size, in blocks of mode × single/multiple, a row per chunk size.
pub(crate) fn size_table(md: &mut String, rows: &[&Row]) {
    let _ = writeln!(
        md,
        "| Bindings/Client | Single/Multiple | ChunkSize | Transfer Time (s) | MB/s | % of cp+sync | Sender CPU (s) | Receiver CPU (s) | Server CPU (s) | Seed time (s) | Seed MB/s |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for mode in [Mode::Bindings, Mode::Client] {
        for mul in [false, true] {
            for r in rows.iter().filter(|r| r.mode == mode && r.multiple == mul) {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {:.2} | {:.1} | {:.0}% | {:.2} | {:.2} | {} | {} |",
                    mode.label(),
                    single(mul),
                    r.chunk_kib * 1024,
                    r.seconds,
                    r.mb_per_s,
                    r.pct_of_cp,
                    r.sender_cpu_s,
                    r.receiver_cpu_s,
                    qm_cell(r),
                    seed_cells(r)
                );
            }
        }
    }
}

/// Tables 4–6: one file size, in blocks of chunk size, a row per scenario.
pub(crate) fn scenario_table(md: &mut String, rows: &[&Row]) {
    let _ = writeln!(
        md,
        "| ChunkSize | Scenario | Transfer Time (s) | MB/s | Sender CPU (s) | Receiver CPU (s) | Server CPU (s) | Seed time (s) | Seed MB/s |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut chunks: Vec<usize> = rows.iter().map(|r| r.chunk_kib).collect();
    chunks.sort_unstable();
    chunks.dedup();
    for c in chunks {
        for mode in [Mode::Bindings, Mode::Client] {
            for mul in [false, true] {
                for r in rows
                    .iter()
                    .filter(|r| r.chunk_kib == c && r.mode == mode && r.multiple == mul)
                {
                    let _ = writeln!(
                        md,
                        "| {} | {} / {} Transfer | {:.2} | {:.1} | {:.2} | {:.2} | {} | {} |",
                        c * 1024,
                        mode.label(),
                        single(mul),
                        r.seconds,
                        r.mb_per_s,
                        r.sender_cpu_s,
                        r.receiver_cpu_s,
                        qm_cell(r),
                        seed_cells(r)
                    );
                }
            }
        }
    }
}

fn sizes(r: &Results) -> Vec<u64> {
    let mut s: Vec<u64> = r.rows.iter().map(|x| x.size_mb).collect();
    s.sort_unstable();
    s.dedup();
    s
}

fn baseline_of(r: &Results, size: u64) -> Option<&Baseline> {
    r.baselines.iter().find(|b| b.size_mb == size)
}

fn list<T: std::fmt::Display>(v: impl Iterator<Item = T>) -> String {
    v.map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

pub fn markdown(r: &Results) -> String {
    let i = &r.info;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# FerryMQ managed file transfer report{}\n",
        if i.quick { " (quick)" } else { "" }
    );
    let _ = writeln!(md, "- Command: `{}`", i.command);
    let _ = writeln!(md, "- ferrymq: {}", i.version);
    let _ = writeln!(
        md,
        "- Date: {}; the report took {:.0} s",
        i.date, i.elapsed_s
    );
    let _ = writeln!(
        md,
        "- Machine: {} CPU cores ({}), Linux {}; the agents, the queue managers and `cp` share them \
         (load average {} when the run started)",
        i.cores, i.cpu_model, i.kernel, r.load_at_start
    );
    let mut chunks: Vec<usize> = r.rows.iter().map(|x| x.chunk_kib).collect();
    chunks.sort_unstable();
    chunks.dedup();
    let mut modes: Vec<&str> = Vec::new();
    let mut muls: Vec<&str> = Vec::new();
    for x in &r.rows {
        if !modes.contains(&x.mode.label()) {
            modes.push(x.mode.label());
        }
        if !muls.contains(&single(x.multiple)) {
            muls.push(single(x.multiple));
        }
    }
    let _ = writeln!(
        md,
        "- What ran: {} MB per row (1 MB = {} bytes) as files of {} MB; agentChunkSize {} KiB; {}; {} ({} rows)",
        r.total_mb,
        r.mb_bytes,
        list(sizes(r).iter()),
        list(chunks.iter()),
        list(muls.iter()),
        list(modes.iter()),
        r.rows.len()
    );
    let _ = writeln!(
        md,
        "- Files: random data written under `{}` on {}, synced before each measurement and removed at the end; \
         the destinations and the `cp` copy are on the same file system",
        r.files_dir, r.filesystem
    );
    let _ = writeln!(
        md,
        "\nEach row sends every file from the sending agent to the receiving agent (`ferrymq fte agent` \
         processes, other settings at their defaults: agentWindowSize 10, agentFrameSize 5, \
         agentCheckpointInterval 1), binary mode with the agents' default end-to-end checksum (BLAKE3). *Single*: one \
         `fteCreateTransfer -w` of all the files; *Multiple*: the files split into {MULTIPLE_TRANSFERS} \
         transfers submitted at once (fewer when there are fewer files). *Bindings*: each agent \
         beside its own queue manager ({QM_SRC} and {QM_DST}, joined by a sender/receiver channel \
         pair each way); *Client*: both agents connected over TCP to one queue manager ({QM_CLIENT}). \
         The coordination queue manager (the transfer log) is the sending agent's. Transfer time runs \
         from the first submission to the last outcome; CPU is seconds of each process over that \
         time, from /proc (Server CPU: the queue manager(s), {QM_SRC} + {QM_DST} in bindings mode). \
         After each row every destination file's SHA-256 is checked against its source's (a wrong \
         or missing file fails the run). The baseline is `cp -r` of the same files to the same disk \
         followed by `sync`, timed together, in the same run (the fastest of two runs before and two after \
         that file size's rows, each pair just after an unrecorded run). The seed's columns are its times for \
         1000 MB in the same configuration (its files were sent in text mode, on other hardware): \
         compare by ratio, not by absolute figure.\n"
    );
    let _ = writeln!(md, "## Goals\n");
    let best = r
        .rows
        .iter()
        .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
    if let Some(b) = best {
        let _ = writeln!(
            md,
            "- Best row: {} × {} MB, {} / {}, {} KiB: {:.1} MB/s ({:.2} s per 1000 MB); the seed's best: \
             1000 MB in {SEED_BEST_S} s ≈ {:.1} MB/s (100 MB files, bindings, ten transfers, 262144-byte chunks)",
            b.files,
            b.size_mb,
            b.mode.label(),
            single(b.multiple),
            b.chunk_kib,
            b.mb_per_s,
            1000.0 / b.mb_per_s,
            1000.0 / SEED_BEST_S
        );
    }
    if r.goals.is_empty() {
        let _ = writeln!(
            md,
            "- No goal row ran (the goals read ten transfers at once in bindings mode)."
        );
    }
    for g in &r.goals {
        let _ = writeln!(md, "- {}", goal_line(g));
    }
    if r.goals
        .iter()
        .any(|g| g.size_mb > 1 && (g.size_mb != 100 || g.files != 10))
    {
        let _ = writeln!(
            md,
            "- The large-file goal is stated for 10 × 100 MB; this run's largest files stand in for it."
        );
    }
    let _ = writeln!(md, "\n## Baseline: cp + sync\n");
    let _ = writeln!(
        md,
        "Measured twice before and twice after each file size's rows, each pair just after an \
         unrecorded copy; the fastest run is the baseline (the same copy can take twice as long by \
         the state of the disk underneath, so one run can flatter the transfers).\n"
    );
    let _ = writeln!(
        md,
        "The relay floor, measured after each pair (the fastest run counts), moves the same files \
         through the hops a bindings-mode transfer crosses, with no queue manager and no agent: \
         read from the source file, a Unix socket (agent to its queue manager), loopback TCP (the \
         channel), a Unix socket (queue manager to the receiving agent), written to the \
         destination, then `sync`; ten streams of four threads passing bare bytes in {} KiB \
         reads. It is the most those sockets carry on this machine: a transfer does a queue \
         manager's and an agent's work at each hop besides (framing, queueing, checksums, \
         acknowledgements and checkpoints).\n",
        super::DEFAULT_CHUNK_KIB
    );
    let _ = writeln!(
        md,
        "| File size (MB) | Files | MB | Runs (s) | Time (s) | MB/s | Relay floor runs (s) | Relay floor MB/s | Relay floor % of cp+sync |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---|---:|---:|---|---:|---:|");
    let mut baselines: Vec<&Baseline> = r.baselines.iter().collect();
    baselines.sort_by_key(|b| b.size_mb);
    for b in baselines {
        let runs: Vec<String> = b.runs_s.iter().map(|s| format!("{s:.2}")).collect();
        let floor: Vec<String> = b.floor_runs_s.iter().map(|s| format!("{s:.2}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.2} | {:.1} | {} | {:.1} | {:.0}% |",
            b.size_mb,
            b.files,
            b.bytes / r.mb_bytes,
            runs.join(", "),
            b.seconds,
            b.mb_per_s,
            floor.join(", "),
            b.floor_mb_per_s,
            b.floor_pct()
        );
    }
    for (k, size) in sizes(r).iter().enumerate() {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.size_mb == *size).collect();
        let files = rows.first().map_or(0, |x| x.files);
        let _ = writeln!(
            md,
            "\n## Table {}: {size} MB files ({files} files)\n",
            k + 1
        );
        if let Some(b) = baseline_of(r, *size) {
            let _ = writeln!(
                md,
                "cp + sync of the same files: {:.2} s, {:.1} MB/s.\n",
                b.seconds, b.mb_per_s
            );
        }
        size_table(&mut md, &rows);
        let _ = writeln!(md, "\n![{size} MB files](mft-{size}mb.svg)");
    }
    let n = sizes(r).len();
    for (k, size) in sizes(r).iter().enumerate() {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.size_mb == *size).collect();
        let _ = writeln!(
            md,
            "\n## Table {}: {size} MB scenario comparison\n",
            n + k + 1
        );
        scenario_table(&mut md, &rows);
    }
    md
}

/// MB/s against chunk size for one file size: a line per scenario, and `cp`+`sync`.
pub fn chart(r: &Results, size: u64) -> String {
    let rows: Vec<&Row> = r.rows.iter().filter(|x| x.size_mb == size).collect();
    let mut chunks: Vec<usize> = rows.iter().map(|x| x.chunk_kib).collect();
    chunks.sort_unstable();
    chunks.dedup();
    let x: Vec<String> = chunks.iter().map(|c| (c * 1024).to_string()).collect();
    let mut series = Vec::new();
    for mode in [Mode::Bindings, Mode::Client] {
        for mul in [false, true] {
            let pts: Vec<Option<f64>> = chunks
                .iter()
                .map(|c| {
                    rows.iter()
                        .find(|x| x.mode == mode && x.multiple == mul && x.chunk_kib == *c)
                        .map(|x| x.mb_per_s)
                })
                .collect();
            if pts.iter().any(Option::is_some) {
                series.push((format!("{} / {}", mode.label(), single(mul)), pts));
            }
        }
    }
    if let Some(b) = baseline_of(r, size) {
        series.push((
            "cp + sync".to_string(),
            vec![Some(b.mb_per_s); chunks.len()],
        ));
        if b.floor_mb_per_s > 0.0 {
            series.push((
                "relay floor (no queue manager)".to_string(),
                vec![Some(b.floor_mb_per_s); chunks.len()],
            ));
        }
    }
    crate::chart::svg_steps(
        &format!("{size} MB files: transfer rate by chunk size"),
        "agentChunkSize (bytes)",
        "MB/s",
        &x,
        &series,
    )
}

pub fn write(out: &Path, r: &Results) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let w = |name: &str, text: String| {
        std::fs::write(out.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    w("README.md", markdown(r))?;
    for size in sizes(r) {
        w(&format!("mft-{size}mb.svg"), chart(r, size))?;
    }
    w(
        "runs.json",
        serde_json::to_string_pretty(r).map_err(|e| e.to_string())?,
    )
}
