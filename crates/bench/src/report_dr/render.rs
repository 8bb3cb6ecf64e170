//! Writing `report dr` out: the markdown tables and header, the charts and runs.json.

use std::fmt::Write as _;

use super::*;

pub(super) fn distance_label(rtt: Option<f64>) -> String {
    match rtt {
        None => "direct (no relay)".into(),
        Some(0.0) => "via relay, 0 ms added".into(),
        Some(r) => format!("via relay, {r} ms RTT"),
    }
}

fn distance_target(rtt: Option<f64>) -> Option<f64> {
    let r = rtt?;
    TARGET_DISTANCE
        .iter()
        .find(|(at, _)| *at == r)
        .map(|(_, t)| *t)
}

/// The DR status columns of a run: DRSTATUS (each distinct value), the largest LAGBYTES,
/// LAGSECS and MAXLAG over the primaries; `-` where nothing was read.
pub(super) fn lag_cells(lags: &[DrLag]) -> [String; 4] {
    let mut status: Vec<&str> = lags
        .iter()
        .map(|l| l.status.as_deref().unwrap_or("?"))
        .collect();
    status.sort_unstable();
    status.dedup();
    let max_u = |f: fn(&DrLag) -> Option<u64>| {
        lags.iter()
            .filter_map(f)
            .max()
            .map_or("-".into(), |v| v.to_string())
    };
    let secs = lags
        .iter()
        .filter_map(|l| l.lag_secs)
        .max_by(f64::total_cmp);
    [
        if status.is_empty() {
            "-".into()
        } else {
            status.join("/")
        },
        max_u(|l| l.lag_bytes),
        fmt_opt(secs, 3),
        max_u(|l| l.max_lag),
    ]
}

pub(super) fn comparison_md(c: &Comparison) -> String {
    let (b, d) = (&c.base_label, &c.dr_label);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Requesters | {b} (RT/s) | {d} (RT/s) | {d} % of {b} | {b} CPU% ({} proc.) | {d} CPU% primary side | {d} CPU% secondary | {b} CPU µs/RT | {d} CPU µs/RT (both sites) | Client CPU% ({b} / {d}) | p50 ms ({b} / {d}) | DRSTATUS after | peak LAGBYTES | peak LAGSECS | MAXLAG | windows RT/s ({b} / {d}) |",
        c.base_processes
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"
    );
    for r in &c.rows {
        let (s, h) = (&r.base.run, &r.dr.run);
        let [status, _, _, max] = lag_cells(&r.dr.lag);
        let [_, bytes, secs, _] = lag_cells(&r.dr.peak);
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {}% | {} | {} | {} | {} | {} | {:.1} / {:.1} | {:.2} / {:.2} | {status} | {bytes} | {secs} | {max} | {} |",
            r.requesters,
            s.round_trips_per_s,
            h.round_trips_per_s,
            fmt_opt(pct(h.round_trips_per_s, s.round_trips_per_s), 1),
            fmt_opt(s.server_cpu_pct, 1),
            fmt_opt(r.dr.primary_cpu_pct, 1),
            fmt_opt(r.dr.secondary_cpu_pct, 1),
            fmt_opt(s.server_cpu_us_per_rt, 1),
            fmt_opt(h.server_cpu_us_per_rt, 1),
            s.client_cpu_pct,
            h.client_cpu_pct,
            s.latency_ms_p50,
            h.latency_ms_p50,
            windows_cell(&r.windows)
        );
    }
    md
}

pub(super) fn distance_md(rows: &[DistanceRow], requesters: &[usize]) -> String {
    let mut md = String::new();
    let direct = rows
        .iter()
        .find(|r| r.rtt_ms.is_none())
        .and_then(DistanceRow::best)
        .map(|b| b.run.round_trips_per_s);
    let _ = writeln!(
        md,
        "| DR link | Best rate (RT/s) | Requesters at best | % of direct DR | Target | Met | Primary CPU% | Secondary CPU% | Client CPU% | p50 at best (ms) | DRSTATUS after | peak LAGBYTES | peak LAGSECS |"
    );
    let _ = writeln!(
        md,
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|"
    );
    for row in rows {
        let Some(b) = row.best() else { continue };
        let p = direct.and_then(|d| pct(b.run.round_trips_per_s, d));
        let target = distance_target(row.rtt_ms);
        let [status, ..] = lag_cells(&b.lag);
        let [_, bytes, secs, _] = lag_cells(&b.peak);
        let _ = writeln!(
            md,
            "| {} | {:.0} | {} | {}% | {} | {} | {} | {} | {:.1} | {:.2} | {status} | {bytes} | {secs} |",
            distance_label(row.rtt_ms),
            b.run.round_trips_per_s,
            b.run.threads,
            fmt_opt(p, 1),
            target.map_or("-".into(), |t| format!(">= {t:.0}%")),
            match (target, p) {
                (Some(t), Some(p)) => met(p >= t),
                _ => "-",
            },
            fmt_opt(b.primary_cpu_pct, 1),
            fmt_opt(b.secondary_cpu_pct, 1),
            b.run.client_cpu_pct,
            b.run.latency_ms_p50
        );
    }
    let _ = writeln!(md, "\nRate (RT/s) by requester count:\n");
    let _ = write!(md, "| DR link |");
    for r in requesters {
        let _ = write!(md, " {r} |");
    }
    let _ = write!(md, "\n|---|");
    for _ in requesters {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    for row in rows {
        let _ = write!(md, "| {} |", distance_label(row.rtt_ms));
        for req in requesters {
            match row.runs.iter().find(|r| r.run.threads == *req) {
                Some(r) => {
                    let _ = write!(md, " {:.0} |", r.run.round_trips_per_s);
                }
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    md
}

/// The targets table at the top of the report.
pub(super) fn targets_md(rep: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "| Check | Target | Result | Met |");
    let _ = writeln!(md, "|---|---:|---:|---|");
    for c in [&rep.dr1, &rep.dr2, &rep.hadr].into_iter().flatten() {
        let (Some(b), Some(d)) = c.best() else {
            continue;
        };
        let p = pct(d.round_trips_per_s, b.round_trips_per_s);
        // HA+DR has no target: it is reported as a share of HA.
        let target = (c.base_label != "HA").then_some(TARGET_DR_PCT);
        let _ = writeln!(
            md,
            "| {}: best {} rate vs best {} rate ({:.0} vs {:.0} RT/s) | {} | {}% | {} |",
            c.name,
            c.dr_label,
            c.base_label,
            d.round_trips_per_s,
            b.round_trips_per_s,
            target.map_or("-".into(), |t| format!(">= {t:.0}%")),
            fmt_opt(p, 1),
            match (target, p) {
                (Some(t), Some(p)) => met(p >= t),
                _ => "-",
            }
        );
        // Informative: the target is the rate above.
        let best_row = c.rows.iter().max_by(|a, b| {
            a.dr.run
                .round_trips_per_s
                .total_cmp(&b.dr.run.round_trips_per_s)
        });
        if let Some(p) = best_row.and_then(CompareRow::primary_per_core_pct) {
            let _ = writeln!(
                md,
                "| {}: per core, primary side only, at the best {} row (recovery site on its own hosts) | - | {p:.1}% | - |",
                c.name, c.dr_label
            );
        }
    }
    let direct = rep
        .distance
        .iter()
        .find(|r| r.rtt_ms.is_none())
        .and_then(DistanceRow::best)
        .map(|b| b.run.round_trips_per_s);
    for (rtt, target) in TARGET_DISTANCE {
        let row = rep
            .distance
            .iter()
            .find(|r| r.rtt_ms == Some(rtt))
            .and_then(DistanceRow::best);
        if let (Some(b), Some(d)) = (row, direct) {
            let p = pct(b.run.round_trips_per_s, d);
            let _ = writeln!(
                md,
                "| Distance: {rtt} ms RTT on the DR link vs direct DR | >= {target:.0}% | {}% | {} |",
                fmt_opt(p, 1),
                p.map_or("-", |p| met(p >= target))
            );
        }
    }
    md
}

pub(super) fn render(rep: &Report) -> String {
    let mut md = rep.info.header_md(
        "FerryMQ DR benchmark report",
        "the client, every queue manager, DR secondary and HA instance",
    );
    let _ = writeln!(
        md,
        "- Requesters swept: {} (DR1, DR2, HA+DR), {} (distance); a sweep stops once two steps in a row add less than 5%",
        join_list(&rep.requesters),
        join_list(&rep.distance_requesters)
    );
    let _ = writeln!(
        md,
        "- Windows per side at each requester count (DR1, DR2, HA+DR): {}, run alternately (reference, DR, reference, DR, ...); \
         a row shows each side's median window, and the last column every window's rate",
        rep.repeats
    );
    let _ = writeln!(
        md,
        "- DR primaries' maximum lag (crtmqm -drlag): {}",
        rep.max_lag
            .map_or("the queue manager's default".into(), |m| format!(
                "{m} bytes"
            ))
    );
    let _ = writeln!(
        md,
        "\nWorkload (as `ferrymq-bench report ha`): {QUEUE_PAIRS} queue pairs REQUEST0..9/REPLY0..9 per queue manager; requesters put a \
         request under syncpoint and commit, then get the reply by CorrelId; responders (as many as requesters, 10 to 128 per queue \
         manager; beyond 256 requesters half of them, up to 300) get under syncpoint, put the reply and commit. Clients connect over TCP (SHARECNV 1). Every queue manager, secondary \
         and instance has 3 primary log files of {LOG_PAGES} pages. A DR pair is a primary and a secondary of the same name, each \
         with its own FERRYMQ_HOME on this machine; the secondary listens for the DR stream and refuses applications. Before a DR \
         sweep the primaries must show DRSTATUS(Normal); during each DR run's window the primaries' `dspmq -o dr` line is \
         sampled every second (peak LAGBYTES/LAGSECS: the largest seen on any primary), and read again after the run \
         (DRSTATUS after). CPU is percent of one core; a DR \
         run's QM CPU covers the primaries and their secondaries, each side also shown alone.\n"
    );
    let _ = writeln!(md, "## Targets\n\n{}", targets_md(rep));
    if let Some(c) = &rep.dr1 {
        let _ = writeln!(
            md,
            "## DR1: one DR primary (with its secondary) vs one queue manager without DR\n\n![DR1](dr1.svg)\n\n{}",
            comparison_md(c)
        );
    }
    if let Some(c) = &rep.dr2 {
        let _ = writeln!(
            md,
            "## DR2: {n} DR primaries (each with its secondary, {p} processes) vs {n} queue managers without DR\n\n\
             The most this {}-core machine reasonably holds: every process shares the same cores with the client.\n\n\
             ![DR2](dr2.svg)\n\n{}",
            rep.info.cores,
            comparison_md(c),
            n = c.queue_managers,
            p = c.dr_processes,
        );
    }
    if let Some(c) = &rep.hadr {
        let _ = writeln!(
            md,
            "## HA+DR: one HA group whose instances are DR primaries vs one HA group\n\n\
             Both groups have 3 instances; the DR group's instances are all created as DR primaries naming one standalone \
             secondary (the active instance ships). HA+DR is reported as a share of HA; there is no target.\n\n\
             ![HA+DR](hadr.svg)\n\n{}",
            comparison_md(c)
        );
    }
    if !rep.distance.is_empty() {
        let _ = writeln!(
            md,
            "## Distance: latency on the DR link\n\n\
             A `ferrymq relay` in front of the secondary's DR port delays each direction by half the round trip; the primary's \
             `-drr` names the relay, so only the DR link crosses it (clients connect to the primary directly). The direct row has \
             no relay; the 0 ms row shows the cost of the relay itself. Each row is a fresh set of {} DR pair(s) (the DR2 shape, \
             as the seed measures distance; each queue manager has its own lag bound, so at most MAXLAG per round trip each); \
             the best rate over the requester sweep is compared with the direct row's best.\n\n![Distance](distance.svg)\n\n{}",
            rep.distance_qms,
            distance_md(&rep.distance, &distance_requesters(rep))
        );
    }
    if !rep.errors.is_empty() {
        let _ = writeln!(md, "## Problems\n");
        for e in &rep.errors {
            let _ = writeln!(md, "- {}", e.trim().replace('\n', " / "));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Notable lines in the queue managers' logs\n");
    if rep.log_findings.is_empty() {
        let _ = writeln!(md, "None (no errors, warnings or restarts logged).");
    } else {
        let _ = writeln!(md, "```");
        for l in &rep.log_findings {
            let _ = writeln!(md, "{l}");
        }
        let _ = writeln!(md, "```");
    }
    md
}

/// The distance columns: the requester counts asked for and any others measured.
fn distance_requesters(rep: &Report) -> Vec<usize> {
    let mut v: Vec<usize> = rep
        .distance_requesters
        .iter()
        .copied()
        .chain(
            rep.distance
                .iter()
                .flat_map(|r| r.runs.iter().map(|x| x.run.threads)),
        )
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

pub(super) fn comparison_svg(c: &Comparison) -> String {
    let pts = |f: &dyn Fn(&CompareRow) -> &DrRun| -> Vec<(usize, f64)> {
        c.rows
            .iter()
            .map(|r| (r.requesters, f(r).run.round_trips_per_s))
            .collect()
    };
    crate::chart::svg_lines(
        &format!("{}: 2 KB persistent Request/Responder", c.name),
        &[
            (
                format!("{} ({} QM)", c.base_label, c.queue_managers),
                pts(&|r| &r.base),
            ),
            (
                format!("{} ({} QM)", c.dr_label, c.queue_managers),
                pts(&|r| &r.dr),
            ),
        ],
    )
}

pub(super) fn write_report(out: &Path, rep: &Report) -> Result<(), String> {
    let w = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    for (file, c) in [
        ("dr1.svg", &rep.dr1),
        ("dr2.svg", &rep.dr2),
        ("hadr.svg", &rep.hadr),
    ] {
        if let Some(c) = c {
            w(file, comparison_svg(c))?;
        }
    }
    if !rep.distance.is_empty() {
        let series: Vec<(String, Vec<(usize, f64)>)> = rep
            .distance
            .iter()
            .map(|r| {
                (
                    distance_label(r.rtt_ms),
                    r.runs
                        .iter()
                        .map(|x| (x.run.threads, x.run.round_trips_per_s))
                        .collect(),
                )
            })
            .collect();
        w(
            "distance.svg",
            crate::chart::svg_lines(
                "DR pair with latency on the DR link, 2 KB persistent",
                &series,
            ),
        )?;
    }
    w("README.md", render(rep))?;
    w(
        "runs.json",
        serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?,
    )
}
