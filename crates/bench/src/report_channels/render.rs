//! Writing `report channels` out: the goals, one table and one chart per sweep, and runs.json.

use std::fmt::Write as _;
use std::path::Path;

use super::flow::FlowRun;
use super::pair::{QM1, QM2};
use super::*;
use crate::report_ha::measure::{fmt_opt, pct};

/// `2 KB`, `200 KB`, `1 MB`, `512 B`.
pub(crate) fn size_label(size: usize) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MB", size >> 20)
    } else if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KB", size >> 10)
    } else {
        format!("{size} B")
    }
}

fn persistence_label(persistent: bool) -> &'static str {
    if persistent {
        "persistent"
    } else {
        "non-persistent"
    }
}

fn link_label(rtt_ms: Option<f64>) -> String {
    match rtt_ms {
        None => "loopback".into(),
        Some(r) => format!("relay, {r} ms RTT"),
    }
}

/// `2 KB persistent, BATCHSZ 50, loopback`.
pub(crate) fn point_label(p: Point) -> String {
    format!(
        "{} {}, BATCHSZ {}, {}",
        size_label(p.size),
        persistence_label(p.persistent),
        p.batch,
        link_label(p.rtt_ms)
    )
}

/// One goal: a ratio in percent against its target.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Goal {
    pub what: String,
    /// Numerator and denominator rates (messages per second), when both were measured.
    pub rates: Option<(f64, f64)>,
    pub target_pct: f64,
}

impl Goal {
    pub(crate) fn pct(&self) -> Option<f64> {
        self.rates.and_then(|(a, b)| pct(a, b))
    }

    /// `pass: ...`, `FAIL: ...` or `not measured: ...`, one line.
    pub(crate) fn line(&self) -> String {
        match (self.rates, self.pct()) {
            (Some((a, b)), Some(p)) => format!(
                "{}: {} — {p:.1}% ({a:.0} / {b:.0} msg/s), goal >= {:.0}%",
                if p >= self.target_pct {
                    "pass"
                } else {
                    "**FAIL**"
                },
                self.what,
                self.target_pct
            ),
            _ => format!(
                "not measured: {} (goal >= {:.0}%)",
                self.what, self.target_pct
            ),
        }
    }
}

/// The report's two goals, from the median windows.
pub(crate) fn goals(rep: &Report) -> [Goal; 2] {
    let loopback = rep.at(Point {
        size: REFERENCE_SIZE_BYTES,
        persistent: true,
        batch: REFERENCE_BATCH,
        rtt_ms: None,
    });
    let distant = rep.at(Point {
        size: REFERENCE_SIZE_BYTES,
        persistent: true,
        batch: REFERENCE_BATCH,
        rtt_ms: Some(GOAL_DISTANCE_RTT_MS),
    });
    let baseline = rep.baseline.median();
    let both = |a: Option<&FlowRun>, b: Option<&FlowRun>| Some((a?.msgs_per_s, b?.msgs_per_s));
    [
        Goal {
            what: format!(
                "channel 2 KB persistent on loopback (BATCHSZ {REFERENCE_BATCH}) against QM1's local put+get"
            ),
            rates: both(loopback, baseline),
            target_pct: GOAL_LOOPBACK_PCT,
        },
        Goal {
            what: format!(
                "channel 2 KB persistent with {GOAL_DISTANCE_RTT_MS} ms RTT against loopback (BATCHSZ {REFERENCE_BATCH})"
            ),
            rates: both(distant, loopback),
            target_pct: GOAL_DISTANCE_PCT,
        },
    ]
}

/// Every window's rate, e.g. `2210 / 2305`.
fn windows_cell(m: &Measured) -> String {
    m.windows
        .iter()
        .map(|w| format!("{:.0}", w.msgs_per_s))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The CPU cells of one process: percent of a core and µs per message, `-` without it.
fn cpu_cells(r: &FlowRun, label: &str) -> String {
    match r.cpu(label) {
        Some(c) => format!("{:.1} | {:.1}", c.cpu_pct, c.cpu_us_per_msg),
        None => "- | -".into(),
    }
}

const CPU_HEAD: &str =
    "QM1 CPU% | QM1 CPU µs/msg | QM2 CPU% | QM2 CPU µs/msg | client CPU% | client CPU µs/msg";

/// The rate cells: messages and megabytes per second.
fn rate_cells(r: &FlowRun) -> String {
    format!("{:.0} | {:.2}", r.msgs_per_s, r.mb_per_s)
}

/// The cells of [`CPU_HEAD`].
fn cpu_row(r: &FlowRun) -> String {
    format!(
        "{} | {} | {:.1} | {:.1}",
        cpu_cells(r, QM1),
        cpu_cells(r, QM2),
        r.client_cpu_pct,
        r.client_cpu_us_per_msg
    )
}

/// The measured points satisfying `keep`, in the report's order.
fn rows(rep: &Report, keep: impl Fn(&Point) -> bool) -> Vec<(&Measured, &FlowRun)> {
    rep.points
        .iter()
        .filter(|m| keep(&m.point))
        .filter_map(|m| Some((m, m.median()?)))
        .collect()
}

fn batch_md(rep: &Report) -> String {
    let mut md = String::new();
    let base = rep.baseline.median().map(|b| b.msgs_per_s);
    let _ = writeln!(
        md,
        "| BATCHSZ | Persistence | msg/s | MB/s | % of local put+get | {CPU_HEAD} | windows msg/s |"
    );
    let _ = writeln!(
        md,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let mut v = rows(rep, |p| {
        p.size == REFERENCE_SIZE_BYTES && p.rtt_ms.is_none() && rep.batches.contains(&p.batch)
    });
    v.sort_by_key(|(m, _)| (!m.point.persistent, m.point.batch));
    for (m, r) in v {
        let vs = if m.point.persistent {
            fmt_opt(base.and_then(|b| pct(r.msgs_per_s, b)), 1) + "%"
        } else {
            "-".into()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {vs} | {} | {} |",
            m.point.batch,
            persistence_label(m.point.persistent),
            rate_cells(r),
            cpu_row(r),
            windows_cell(m)
        );
    }
    md
}

fn size_md(rep: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Size | Persistence | msg/s | MB/s | {CPU_HEAD} | windows msg/s |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut v = rows(rep, |p| {
        p.batch == REFERENCE_BATCH && p.rtt_ms.is_none() && rep.sizes.contains(&p.size)
    });
    v.sort_by_key(|(m, _)| (!m.point.persistent, m.point.size));
    for (m, r) in v {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            size_label(m.point.size),
            persistence_label(m.point.persistent),
            rate_cells(r),
            cpu_row(r),
            windows_cell(m)
        );
    }
    md
}

fn distance_md(rep: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Channel link | Persistence | msg/s | MB/s | % of loopback | {CPU_HEAD} | relay CPU% | windows msg/s |"
    );
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let mut v = rows(rep, |p| {
        p.size == REFERENCE_SIZE_BYTES && p.batch == REFERENCE_BATCH
    });
    v.sort_by(|(a, _), (b, _)| {
        (!a.point.persistent).cmp(&!b.point.persistent).then(
            a.point
                .rtt_ms
                .map_or(-1.0, |r| r)
                .total_cmp(&b.point.rtt_ms.map_or(-1.0, |r| r)),
        )
    });
    for (m, r) in v {
        let loopback = rep
            .at(Point {
                rtt_ms: None,
                ..m.point
            })
            .map(|l| l.msgs_per_s);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {}% | {} | {} | {} |",
            link_label(m.point.rtt_ms),
            persistence_label(m.point.persistent),
            rate_cells(r),
            fmt_opt(loopback.and_then(|l| pct(r.msgs_per_s, l)), 1),
            cpu_row(r),
            fmt_opt(r.cpu("relay").map(|c| c.cpu_pct), 1),
            windows_cell(m)
        );
    }
    md
}

/// A step chart of one sweep: `y` of each persistence at each step of `x`.
fn sweep_svg(
    rep: &Report,
    title: &str,
    x_label: &str,
    y_label: &str,
    x: &[(String, Point)],
    y: impl Fn(&FlowRun) -> f64,
) -> String {
    let labels: Vec<String> = x.iter().map(|(l, _)| l.clone()).collect();
    let series: Vec<(String, Vec<Option<f64>>)> = [true, false]
        .iter()
        .map(|&persistent| {
            let pts = x
                .iter()
                .map(|(_, p)| rep.at(Point { persistent, ..*p }).map(&y))
                .collect();
            (persistence_label(persistent).to_string(), pts)
        })
        .collect();
    crate::chart::svg_steps(title, x_label, y_label, &labels, &series)
}

fn charts(rep: &Report) -> Vec<(&'static str, String)> {
    let reference = Point {
        size: REFERENCE_SIZE_BYTES,
        persistent: true,
        batch: REFERENCE_BATCH,
        rtt_ms: None,
    };
    let batches: Vec<(String, Point)> = rep
        .batches
        .iter()
        .map(|&batch| (batch.to_string(), Point { batch, ..reference }))
        .collect();
    let sizes: Vec<(String, Point)> = rep
        .sizes
        .iter()
        .map(|&size| (size_label(size), Point { size, ..reference }))
        .collect();
    let links: Vec<(String, Point)> = std::iter::once(None)
        .chain(rep.rtts.iter().map(|r| Some(*r)))
        .map(|rtt_ms| {
            (
                match rtt_ms {
                    None => "loopback".to_string(),
                    Some(r) => format!("{r} ms"),
                },
                Point {
                    rtt_ms,
                    ..reference
                },
            )
        })
        .collect();
    vec![
        (
            "batch.svg",
            sweep_svg(
                rep,
                "Channel QM1.QM2, 2 KB messages, loopback: messages/s by BATCHSZ",
                "BATCHSZ",
                "messages/s",
                &batches,
                |r| r.msgs_per_s,
            ),
        ),
        (
            "size.svg",
            sweep_svg(
                rep,
                "Channel QM1.QM2, BATCHSZ 50, loopback: MB/s by message size",
                "message size",
                "MB/s",
                &sizes,
                |r| r.mb_per_s,
            ),
        ),
        (
            "distance.svg",
            sweep_svg(
                rep,
                "Channel QM1.QM2, 2 KB, BATCHSZ 50: messages/s by round trip on the channel",
                "round trip added on the channel",
                "messages/s",
                &links,
                |r| r.msgs_per_s,
            ),
        ),
    ]
}

pub(crate) fn markdown(rep: &Report) -> String {
    let i = &rep.info;
    let mut md = i.title_md(
        "FerryMQ message channel report",
        "both queue managers, the relay and the bench's clients",
    );
    let _ = writeln!(
        md,
        "- Each window: {:.1} s warm-up, then {:.1} s measured; {} round(s), each measuring the baseline and every point once; a row is the median round (the lower middle one for an even count), every window's rate is listed",
        i.warmup_s, i.duration_s, rep.rounds
    );
    let _ = writeln!(
        md,
        "- Workload: {} putters on QM1 put to the remote queue BENCH.REMOTE (RNAME BENCH.TARGET, RQMNAME QM2, XMITQ QM2); {} getters on QM2 get from BENCH.TARGET. \
         Persistent messages are put and got under syncpoint, each with its commit; non-persistent ones outside syncpoint, over a channel with NPMSPEED(FAST). \
         The channel QM1.QM2 is a SDR/RCVR pair over TCP on this machine (loopback), or through `ferrymq relay` adding the round trip shown. \
         At most a bounded number of messages is in flight between putters and getters (2 KB at BATCHSZ {REFERENCE_BATCH}: {}; every window's is in runs.json), so no queue fills; the rate is the messages got per second, end to end",
        rep.putters,
        rep.getters,
        flow::Spec {
            size: REFERENCE_SIZE_BYTES,
            persistent: true,
            batch: REFERENCE_BATCH,
            clients: rep.putters,
            warmup: Duration::ZERO,
            duration: Duration::ZERO,
        }
        .window_msgs()
    );
    let _ = writeln!(
        md,
        "- Baseline: the same putters and getters on one local queue of QM1 (BENCH.LOCAL), 2 KB persistent, in the same run\n- CPU: each process's user+system time from /proc over the window, in percent of one core and in CPU microseconds per message got\n"
    );

    let _ = writeln!(md, "## Goals\n");
    for g in goals(rep) {
        let _ = writeln!(md, "- {}", g.line());
    }

    let _ = writeln!(md, "\n## Baseline: local put+get on QM1\n");
    let _ = writeln!(
        md,
        "| Size | Persistence | msg/s | MB/s | QM1 CPU% | QM1 CPU µs/msg | client CPU% | client CPU µs/msg | windows msg/s |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---|");
    if let Some(b) = rep.baseline.median() {
        let _ = writeln!(
            md,
            "| {} | persistent | {:.0} | {:.2} | {} | {:.1} | {:.1} | {} |",
            size_label(b.msg_size),
            b.msgs_per_s,
            b.mb_per_s,
            cpu_cells(b, QM1),
            b.client_cpu_pct,
            b.client_cpu_us_per_msg,
            windows_cell(&rep.baseline)
        );
    }

    let _ = writeln!(
        md,
        "\n## Batch size (2 KB, loopback)\n\n![messages/s by BATCHSZ](batch.svg)\n"
    );
    md.push_str(&batch_md(rep));
    let _ = writeln!(
        md,
        "\n## Message size (BATCHSZ {REFERENCE_BATCH}, loopback)\n\n![MB/s by message size](size.svg)\n"
    );
    md.push_str(&size_md(rep));
    let _ = writeln!(
        md,
        "\n## Round trip on the channel (2 KB, BATCHSZ {REFERENCE_BATCH})\n\n![messages/s by round trip](distance.svg)\n"
    );
    md.push_str(&distance_md(rep));

    if !rep.errors.is_empty() {
        let _ = writeln!(md, "\n## Problems\n");
        for e in &rep.errors {
            let _ = writeln!(md, "- {}", e.replace('\n', " "));
        }
    }
    if !rep.log_findings.is_empty() {
        let _ = writeln!(md, "\n## Queue manager error logs (notable lines)\n");
        for l in &rep.log_findings {
            let _ = writeln!(md, "- `{}`", l.replace('`', "'"));
        }
    }
    md
}

/// Writes README.md, the charts and runs.json into `out`.
pub(crate) fn write_report(out: &Path, rep: &Report) -> Result<(), String> {
    let w = |name: &str, text: &str| {
        std::fs::write(out.join(name), text)
            .map_err(|e| format!("{}: {e}", out.join(name).display()))
    };
    for (name, svg) in charts(rep) {
        w(name, &svg)?;
    }
    w("README.md", &markdown(rep))?;
    w(
        "runs.json",
        &serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?,
    )
}
