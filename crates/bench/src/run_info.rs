//! What every benchmark report records about its run (`report ha`, `report dr`): the command, the
//! build, the machine, the measurement windows, and the private `$FERRYMQ_HOME` it works in. One
//! struct, flattened into each report's runs.json, and one markdown header.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::qm::ferrymq_bin;

#[derive(Serialize, Debug, Clone)]
pub struct RunInfo {
    pub command: String,
    pub version: String,
    pub date: String,
    pub cores: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub quick: bool,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub elapsed_s: f64,
    pub msg_size: usize,
}

impl RunInfo {
    /// The run starting now.
    pub fn now(
        command: &str,
        quick: bool,
        warmup: Duration,
        duration: Duration,
        msg_size: usize,
    ) -> RunInfo {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        RunInfo {
            command: command.to_string(),
            version: version(),
            date: utc_string(now),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            cpu_model: cpu_model(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into()),
            quick,
            warmup_s: warmup.as_secs_f64(),
            duration_s: duration.as_secs_f64(),
            elapsed_s: 0.0,
            msg_size,
        }
    }

    /// The report's title and opening lines; `sharing` names what shares the machine's cores.
    pub fn header_md(&self, title: &str, sharing: &str) -> String {
        let mut md = self.title_md(title, sharing);
        let _ = writeln!(
            md,
            "- Each run: {:.0} s warm-up, then a {:.0} s measured window; {} B persistent messages",
            self.warmup_s, self.duration_s, self.msg_size
        );
        md
    }

    /// The title and the lines every report opens with (command, version, date, machine);
    /// `sharing` names what shares the machine's cores.
    pub fn title_md(&self, title: &str, sharing: &str) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "# {title}{}\n",
            if self.quick { " (quick)" } else { "" }
        );
        let _ = writeln!(md, "- Command: `{}`", self.command);
        let _ = writeln!(md, "- ferrymq: {}", self.version);
        let _ = writeln!(
            md,
            "- Date: {}; the report took {:.0} s",
            self.date, self.elapsed_s
        );
        let _ = writeln!(
            md,
            "- Machine: {} CPU cores ({}), Linux {}; {sharing} share them",
            self.cores, self.cpu_model, self.kernel
        );
        md
    }
}

/// A private `$FERRYMQ_HOME` for one run of report `kind`, removed on Ctrl-C with every process
/// the report registered.
pub fn private_home(kind: &str) -> Result<PathBuf, String> {
    let home = std::env::temp_dir().join(format!("ferrymq-report-{kind}-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    crate::report_ha::procs::stop_on_interrupt(home.clone());
    Ok(home)
}

/// Where a report goes unless `--out` says otherwise: `docs/results/DATE-KIND[-quick]` under the
/// current directory (run from the repository's root, the results sit beside the code that made
/// them). The folder is the report command's output alone; nobody edits it by hand, and a second
/// run on the same day replaces it.
pub fn default_out(kind: &str, quick: bool) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    dated_out(kind, quick, secs)
}

fn dated_out(kind: &str, quick: bool, secs: u64) -> PathBuf {
    let (y, m, d) = ferrymq_types::time::civil_from_days((secs / 86_400) as i64);
    let quick = if quick { "-quick" } else { "" };
    PathBuf::from("docs/results").join(format!("{y:04}-{m:02}-{d:02}-{kind}{quick}"))
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the Unix epoch.
pub fn utc_string(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = ferrymq_types::time::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The package version and, when the binary sits in a git work tree, `git describe`.
pub fn version() -> String {
    let pkg = env!("CARGO_PKG_VERSION");
    let describe = ferrymq_bin()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .and_then(|dir| {
            Command::new("git")
                .args(["describe", "--always", "--dirty", "--tags"])
                .current_dir(dir)
                .stderr(Stdio::null())
                .output()
                .ok()
        })
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    match describe {
        Some(d) => format!("{pkg} (git describe: {d})"),
        None => pkg.to_string(),
    }
}

pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_go_to_a_dated_folder_under_docs_results() {
        // 2026-11-27 is day 20,784 after the epoch.
        let secs = 20_784 * 86_400 + 3_600;
        assert_eq!(
            dated_out("ha", true, secs),
            PathBuf::from("docs/results/2026-11-27-ha-quick")
        );
        assert_eq!(
            dated_out("standalone", false, secs),
            PathBuf::from("docs/results/2026-11-27-standalone")
        );
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_string(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_string(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
