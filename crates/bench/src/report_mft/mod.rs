//! `ferrymq-bench report mft [--quick] [--out DIR] [--total-mb N] [--sizes 1,10,100]
//! [--chunks 64,128,256,512] [--transfers single,multiple] [--modes bindings,client]`: managed
//! file transfer, in the layout of the seed's file transfer tables. For each file size it writes
//! `--total-mb` of random data as files of that size (1000 MB as 1000×1 MB, 100×10 MB, 10×100 MB
//! by default), copies them with `cp` and `sync` as the baseline of the disk, measures the relay
//! floor (`floor`: the same files through the same sockets with no queue manager), then has agents
//! (`ferrymq fte agent` processes) transfer them: in bindings mode (each agent beside its own
//! queue manager, the two joined by a sender/receiver channel pair) and in client mode (both
//! agents on one queue manager over TCP), at each agentChunkSize, as one transfer of all the
//! files and as ten transfers submitted at once. Each row records the transfer time, MB/s, and
//! the CPU seconds of the sending agent, the receiving agent and the queue manager(s), from
//! /proc. Every destination file's SHA-256 is checked against its source's: a wrong file fails
//! the run. It writes README.md (tables, goals, the seed's times beside ours), one SVG chart per
//! file size and runs.json to DIR.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::run_info::RunInfo;

mod files;
mod floor;
mod measure;
mod render;
#[cfg(test)]
mod tests;

pub use measure::{Baseline, Row};

/// Bytes in one MB of the report (a file of "1 MB" has this many bytes).
pub const MB_BYTES: u64 = 1 << 20;
/// The seed's file sizes (MB), chunk sizes (KiB) and total per run (MB).
const SIZES_MB: [u64; 3] = [1, 10, 100];
const CHUNKS_KIB: [usize; 4] = [64, 128, 256, 512];
const TOTAL_MB: u64 = 1000;
/// Transfers submitted at once in a "multiple" row (the files split evenly among them).
pub const MULTIPLE_TRANSFERS: usize = 10;
/// The agents' default agentChunkSize, KiB: the goals are read at it when it ran.
pub const DEFAULT_CHUNK_KIB: usize = 256;
/// Goals: ten concurrent transfers in bindings mode, in percent of `cp`+`sync` on the same files.
pub const GOAL_LARGE_PCT: f64 = 60.0;
pub const GOAL_SMALL_PCT: f64 = 30.0;
/// Bounds of the options.
const TOTAL_MB_MAX: u64 = 100_000;
const SIZE_MB_MAX: u64 = 10_000;
const FILES_MAX: u64 = 10_000;
/// The agents' largest chunk (FTE_CHUNK_SIZE_MAX_BYTES), KiB.
const CHUNK_KIB_MAX: u64 = (ferrymq_types::limits::FTE_CHUNK_SIZE_MAX_BYTES / 1024) as u64;

/// `ferrymq-bench report mft`'s options.
#[derive(clap::Args, Debug)]
pub struct MftArgs {
    /// A short run (under 3 minutes): the goals' rows only, 1000 MB as 1000×1 MB and as
    /// 10×100 MB, 256 KiB chunks, ten transfers at once, bindings and client mode
    #[arg(long)]
    pub quick: bool,
    /// Directory to write the report to (default docs/results/DATE-mft[-quick])
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// MB of files per row (default 1000, as the seed)
    #[arg(long, value_name = "MB", allow_hyphen_values = true)]
    pub total_mb: Option<String>,
    /// File sizes, MB (default 1,10,100)
    #[arg(long, value_name = "MB,MB...", allow_hyphen_values = true)]
    pub sizes: Option<String>,
    /// agentChunkSize values, KiB (default 64,128,256,512)
    #[arg(long, value_name = "KIB,KIB...", allow_hyphen_values = true)]
    pub chunks: Option<String>,
    /// single (one transfer of all the files), multiple (ten at once), or both (default)
    #[arg(long, value_name = "single,multiple", allow_hyphen_values = true)]
    pub transfers: Option<String>,
    /// bindings (two queue managers joined by a channel), client (one queue manager), or both
    #[arg(long, value_name = "bindings,client", allow_hyphen_values = true)]
    pub modes: Option<String>,
}

/// How the agents reach their queue managers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Bindings,
    Client,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Bindings => "Bindings",
            Mode::Client => "Client",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Opts {
    pub quick: bool,
    pub out: PathBuf,
    pub total_mb: u64,
    pub sizes_mb: Vec<u64>,
    pub chunks_kib: Vec<usize>,
    /// false: one transfer of all the files; true: ten at once.
    pub multiple: Vec<bool>,
    pub modes: Vec<Mode>,
    pub command: String,
}

/// Whole numbers from `lo` to `hi`, comma-separated, each once in the order given.
fn numbers(flag: &str, text: &str, lo: u64, hi: u64) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for w in text.split(',') {
        let n = w
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (lo..=hi).contains(n))
            .ok_or_else(|| format!("{flag}: '{}' is not a number from {lo} to {hi}", w.trim()))?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

fn words(flag: &str, v: &str, allowed: &[&str]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for w in v.split(',').map(|w| w.trim().to_ascii_lowercase()) {
        if !allowed.contains(&w.as_str()) {
            return Err(format!(
                "{flag}: '{w}' is not one of {}",
                allowed.join(", ")
            ));
        }
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

impl Opts {
    pub fn parse(argv: &[String]) -> Result<Opts, String> {
        let a: MftArgs = crate::cli::parse_args("ferrymq-bench report mft", argv)?;
        let total_mb = match &a.total_mb {
            Some(t) => t
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=TOTAL_MB_MAX).contains(n))
                .ok_or_else(|| {
                    format!("--total-mb: '{t}' is not a number from 1 to {TOTAL_MB_MAX}")
                })?,
            None => TOTAL_MB,
        };
        let sizes_mb: Vec<u64> = match &a.sizes {
            Some(s) => numbers("--sizes", s, 1, SIZE_MB_MAX)?,
            None if a.quick => vec![1, 100],
            None => SIZES_MB.to_vec(),
        };
        for &s in &sizes_mb {
            if s > total_mb {
                return Err(format!(
                    "--sizes: a {s} MB file is more than --total-mb {total_mb}"
                ));
            }
            if total_mb / s > FILES_MAX {
                return Err(format!(
                    "--sizes: {total_mb} MB of {s} MB files is more than {FILES_MAX} files"
                ));
            }
        }
        let chunks_kib = match &a.chunks {
            Some(s) => numbers("--chunks", s, 1, CHUNK_KIB_MAX)?
                .into_iter()
                .map(|n| n as usize)
                .collect(),
            None if a.quick => vec![DEFAULT_CHUNK_KIB],
            None => CHUNKS_KIB.to_vec(),
        };
        let multiple = match &a.transfers {
            Some(s) => words("--transfers", s, &["single", "multiple"])?
                .iter()
                .map(|w| w == "multiple")
                .collect(),
            None if a.quick => vec![true],
            None => vec![false, true],
        };
        let modes = match &a.modes {
            Some(s) => words("--modes", s, &["bindings", "client"])?
                .iter()
                .map(|w| {
                    if w == "bindings" {
                        Mode::Bindings
                    } else {
                        Mode::Client
                    }
                })
                .collect(),
            None => vec![Mode::Bindings, Mode::Client],
        };
        Ok(Opts {
            quick: a.quick,
            out: a
                .out
                .unwrap_or_else(|| crate::run_info::default_out("mft", a.quick)),
            total_mb,
            sizes_mb,
            chunks_kib,
            multiple,
            modes,
            command: std::iter::once("ferrymq-bench report mft")
                .chain(argv.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        })
    }

    /// Files of `size_mb` in a row.
    pub fn files(&self, size_mb: u64) -> u64 {
        (self.total_mb / size_mb).max(1)
    }

    /// Rows the run measures.
    pub fn rows(&self) -> usize {
        self.sizes_mb.len() * self.modes.len() * self.chunks_kib.len() * self.multiple.len()
    }
}

/// One goal: ten concurrent transfers in bindings mode against `cp`+`sync` of the same files.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    pub size_mb: u64,
    pub files: u64,
    pub chunk_kib: usize,
    pub goal_pct: f64,
    pub pct_of_cp: f64,
    pub pass: bool,
    /// The relay floor of the same files in percent of `cp`+`sync` (0 if it did not run): what
    /// the sockets a bindings-mode transfer crosses carry with no queue manager at all.
    pub floor_pct: f64,
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    #[serde(flatten)]
    pub info: RunInfo,
    pub total_mb: u64,
    pub mb_bytes: u64,
    /// Where the files were written (source, destinations and the baseline's copy).
    pub files_dir: String,
    pub filesystem: String,
    /// /proc/loadavg when the run started (other work on the machine shows here).
    pub load_at_start: String,
    pub baselines: Vec<Baseline>,
    pub rows: Vec<Row>,
    pub goals: Vec<Goal>,
}

/// The goals this run can read: the 1 MB files and the largest size run (the seed's 100 MB, or
/// a partial run's largest), ten transfers at once in bindings mode, at the default chunk size
/// when it ran (else the best chunk measured).
pub fn goals(rows: &[Row], baselines: &[Baseline]) -> Vec<Goal> {
    let mut sizes: Vec<u64> = rows.iter().map(|r| r.size_mb).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut wanted = Vec::new();
    if sizes.contains(&1) {
        wanted.push((1, GOAL_SMALL_PCT));
    }
    if let Some(&big) = sizes.iter().rev().find(|&&s| s > 1) {
        wanted.push((big, GOAL_LARGE_PCT));
    }
    let mut out = Vec::new();
    for (size, goal) in wanted {
        let Some(base) = baselines.iter().find(|b| b.size_mb == size) else {
            continue;
        };
        let cands: Vec<&Row> = rows
            .iter()
            .filter(|r| r.size_mb == size && r.multiple && r.mode == Mode::Bindings)
            .collect();
        let pick = cands
            .iter()
            .find(|r| r.chunk_kib == DEFAULT_CHUNK_KIB)
            .or_else(|| {
                cands
                    .iter()
                    .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s))
            });
        if let Some(r) = pick {
            let pct = r.mb_per_s / base.mb_per_s * 100.0;
            out.push(Goal {
                size_mb: size,
                files: r.files,
                chunk_kib: r.chunk_kib,
                goal_pct: goal,
                pct_of_cp: pct,
                pass: pct >= goal,
                floor_pct: base.floor_pct(),
            });
        }
    }
    out
}

/// `report mft [options]`.
pub fn main(argv: &[String]) -> Result<(), String> {
    let o = Opts::parse(argv)?;
    let home = crate::run_info::private_home("mft")?;
    let started = Instant::now();
    eprintln!(
        "report: mft: {} row(s): {} MB per row, file sizes {:?} MB, chunks {:?} KiB, {}, {}; files under {}",
        o.rows(),
        o.total_mb,
        o.sizes_mb,
        o.chunks_kib,
        o.multiple
            .iter()
            .map(|m| if *m { "multiple" } else { "single" })
            .collect::<Vec<_>>()
            .join("+"),
        o.modes
            .iter()
            .map(|m| m.label())
            .collect::<Vec<_>>()
            .join("+"),
        home.display()
    );
    let r = measure::run(&o, &home, &mut |so_far| {
        let mut partial = so_far.clone();
        partial.info.elapsed_s = started.elapsed().as_secs_f64();
        render::write(&o.out, &partial)
    });
    let _ = std::fs::remove_dir_all(&home);
    let mut r = r?;
    r.info.elapsed_s = started.elapsed().as_secs_f64();
    render::write(&o.out, &r)?;
    for g in &r.goals {
        eprintln!("report: {}", render::goal_line(g));
    }
    eprintln!(
        "report: done in {:.0} s; written to {}",
        r.info.elapsed_s,
        o.out.display()
    );
    Ok(())
}
