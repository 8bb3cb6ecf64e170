//! Writing `report ha` out: the markdown tables and header, the charts and runs.json.

use super::*;

/// `1, 2, 3`.
pub(crate) fn join_list<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn comparison_md(c: &Comparison) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Requesters | Standalone (RT/s) | HA (RT/s) | HA % of standalone | Standalone QM CPU% | HA CPU% ({} instances) | HA active instance CPU% | HA per core (active) % of standalone | Standalone QM CPU µs/RT | HA CPU µs/RT | Client CPU% (standalone / HA) | p50 ms (standalone / HA) | windows RT/s (standalone / HA) |",
        c.ha_processes
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &c.rows {
        let (s, h) = (&r.standalone, &r.ha);
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {}% | {} | {} | {} | {}% | {} | {} | {:.1} / {:.1} | {:.2} / {:.2} | {} |",
            r.requesters,
            s.round_trips_per_s,
            h.round_trips_per_s,
            fmt_opt(pct(h.round_trips_per_s, s.round_trips_per_s), 1),
            fmt_opt(s.server_cpu_pct, 1),
            fmt_opt(h.server_cpu_pct, 1),
            fmt_opt(r.ha_active_cpu_pct, 1),
            fmt_opt(r.per_core_pct(), 1),
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

/// Each side's window rates, as `1000, 1100 / 950, 990`.
pub(crate) fn windows_cell(w: &[(f64, f64)]) -> String {
    let side = |f: &dyn Fn(&(f64, f64)) -> f64| {
        w.iter()
            .map(|x| format!("{:.0}", f(x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("{} / {}", side(&|x| x.0), side(&|x| x.1))
}

/// Best rates of a comparison: (standalone best, HA best).
pub(super) fn comparison_best(c: &Comparison) -> (Option<&RunResult>, Option<&RunResult>) {
    let sb = c
        .rows
        .iter()
        .map(|r| &r.standalone)
        .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s));
    let hb = c
        .rows
        .iter()
        .map(|r| &r.ha)
        .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s));
    (sb, hb)
}

pub(super) fn distance_label(rtt: Option<f64>) -> String {
    match rtt {
        None => "direct (no relays)".into(),
        Some(0.0) => "via relays, 0 ms added".into(),
        Some(r) => format!("via relays, {r} ms RTT"),
    }
}

pub(super) fn distance_target(rtt: Option<f64>) -> Option<f64> {
    let r = rtt?;
    TARGET_DISTANCE
        .iter()
        .find(|(at, _)| *at == r)
        .map(|(_, t)| *t)
}

pub(super) fn distance_md(rows: &[DistanceRow], requesters: &[usize]) -> String {
    let mut md = String::new();
    let direct = rows
        .iter()
        .find(|r| r.rtt_ms.is_none())
        .and_then(|r| best(&r.runs))
        .map(|b| b.round_trips_per_s);
    let _ = writeln!(
        md,
        "| Replication links | Best rate (RT/s) | Requesters at best | % of direct | Target | Met | HA CPU% (3 instances) | p50 at best (ms) |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---|---:|---:|");
    for row in rows {
        let Some(b) = best(&row.runs) else { continue };
        let p = direct.and_then(|d| pct(b.round_trips_per_s, d));
        let target = distance_target(row.rtt_ms);
        let _ = writeln!(
            md,
            "| {} | {:.0} | {} | {}% | {} | {} | {} | {:.2} |",
            distance_label(row.rtt_ms),
            b.round_trips_per_s,
            b.threads,
            fmt_opt(p, 1),
            target.map_or("-".into(), |t| format!(">= {t:.0}%")),
            match (target, p) {
                (Some(t), Some(p)) => met(p >= t),
                _ => "-",
            },
            fmt_opt(b.server_cpu_pct, 1),
            b.latency_ms_p50
        );
    }
    // Every run, one column per requester count.
    let _ = writeln!(md, "\nRate (RT/s) by requester count:\n");
    let _ = write!(md, "| Replication links |");
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
            match row.runs.iter().find(|r| r.threads == *req) {
                Some(r) => {
                    let _ = write!(md, " {:.0} |", r.round_trips_per_s);
                }
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    md
}

pub(super) fn failover_md(rows: &[FailoverResult]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| Messages loaded | Load time (s) | Killed (SIGKILL) | New active | Kill -> marker got (ms) | Target | Met | Kill -> new active listening (ms) | Activation after election (ms, error log) | Depth after failover | Depth correct | Client reconnects |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---|---|---:|---:|---|---:|---:|---:|---|---:|"
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {:.1} | instance {} (pid {}) | {} | {} | < {:.0} | {} | {} | {} | {} | {} | {} |",
            r.messages,
            r.load_s,
            r.killed_instance,
            r.killed_pid,
            r.new_active
                .as_deref()
                .map_or("-".into(), |a| format!("instance {a}")),
            fmt_opt(r.kill_to_get_ms, 0),
            TARGET_FAILOVER_MS,
            r.kill_to_get_ms
                .map_or("-", |t| met(t < TARGET_FAILOVER_MS)),
            fmt_opt(r.kill_to_listening_ms, 0),
            fmt_opt(r.activation_ms_after_election.map(|v| v as f64), 0),
            fmt_opt(r.depth_after.map(|v| v as f64), 0),
            r.depth_after.map_or("-", |d| met(d == r.messages)),
            r.reconnects
        );
    }
    for r in rows {
        if let Some(e) = &r.error {
            let _ = writeln!(md, "\nFailover with {} messages failed: {e}", r.messages);
        }
    }
    md
}

/// The targets table at the top of the report.
pub(super) fn targets_md(rep: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "| Check | Target | Result | Met |");
    let _ = writeln!(md, "|---|---:|---:|---|");
    for c in [&rep.ha1, &rep.ha2].into_iter().flatten() {
        if let (Some(s), Some(h)) = comparison_best(c) {
            let p = pct(h.round_trips_per_s, s.round_trips_per_s);
            let _ = writeln!(
                md,
                "| {}: best HA rate vs best standalone rate ({:.0} vs {:.0} RT/s) | >= {TARGET_HA1_PCT:.0}% | {}% | {} |",
                c.name,
                h.round_trips_per_s,
                s.round_trips_per_s,
                fmt_opt(p, 1),
                p.map_or("-", |p| met(p >= TARGET_HA1_PCT))
            );
        }
        // Per core (BENCHMARK.md): the best HA row's rate per CPU of its active instances against
        // the best standalone row's rate per CPU. Informative: the target is the rate above.
        let best_row = c
            .rows
            .iter()
            .max_by(|a, b| a.ha.round_trips_per_s.total_cmp(&b.ha.round_trips_per_s));
        if let Some(p) = best_row.and_then(CompareRow::per_core_pct) {
            let _ = writeln!(
                md,
                "| {}: per core, active instance(s) only, at the best HA row (instances on their own hosts) | - | {p:.1}% | - |",
                c.name
            );
        }
    }
    let direct = rep
        .distance
        .iter()
        .find(|r| r.rtt_ms.is_none())
        .and_then(|r| best(&r.runs))
        .map(|b| b.round_trips_per_s);
    for (rtt, target) in TARGET_DISTANCE {
        let row = rep
            .distance
            .iter()
            .find(|r| r.rtt_ms == Some(rtt))
            .and_then(|r| best(&r.runs));
        if let (Some(b), Some(d)) = (row, direct) {
            let p = pct(b.round_trips_per_s, d);
            let _ = writeln!(
                md,
                "| Distance: {rtt} ms RTT on the replication links vs direct | >= {target:.0}% | {}% | {} |",
                fmt_opt(p, 1),
                p.map_or("-", |p| met(p >= target))
            );
        }
    }
    for f in &rep.failover {
        let _ = writeln!(
            md,
            "| Failover with {} messages: kill -> marker got | < {TARGET_FAILOVER_MS:.0} ms | {} ms | {} |",
            f.messages,
            fmt_opt(f.kill_to_get_ms, 0),
            match (f.kill_to_get_ms, f.depth_after) {
                (Some(t), Some(d)) => met(t < TARGET_FAILOVER_MS && d == f.messages),
                _ => met(false),
            }
        );
    }
    if let Some(k) = &rep.kills {
        let _ = writeln!(
            md,
            "| Kills: {} kills of the active instance under load, kill -> put by a client connected before | median < {TARGET_KILLS_MEDIAN_MS:.0} ms, max < {TARGET_KILLS_MAX_MS:.0} ms | median {} ms, max {} ms | {} |",
            k.kills,
            fmt_opt(k.median_ms(), 0),
            fmt_opt(k.max_ms(), 0),
            met(k.met())
        );
    }
    md
}

pub(super) fn render(rep: &Report, requesters: &[usize], distance_requesters: &[usize]) -> String {
    let mut md = rep.info.header_md(
        "FerryMQ HA benchmark report",
        "the client, the standalone queue managers and every HA instance",
    );
    let _ = writeln!(
        md,
        "- Requesters swept: {} (HA1/HA2), {} (distance); a sweep stops once two steps in a row add less than 5%",
        join_list(requesters),
        join_list(distance_requesters)
    );
    let _ = writeln!(
        md,
        "- Windows per side at each requester count (HA1/HA2): {}, run alternately (standalone, HA, standalone, HA, ...); \
         a row shows each side's median window, and the last column every window's rate",
        rep.repeats
    );
    let _ = writeln!(
        md,
        "- Failover message counts: {}",
        join_list(&rep.failover_messages)
    );
    let _ = writeln!(
        md,
        "\nWorkload (as `ferrymq-bench report standalone`): {QUEUE_PAIRS} queue pairs REQUEST0..9/REPLY0..9 per queue manager; requesters put a \
         request under syncpoint and commit, then get the reply by CorrelId; responders (as many as requesters, 10 to 128 per queue manager; beyond 256 requesters half of them, up to 300) \
         get under syncpoint, put the reply and commit. Clients connect over TCP (SHARECNV 1); HA clients use the group's connection name list \
         (only the active instance listens). Every queue manager and instance has 3 primary log files of {LOG_PAGES} pages. \
         An HA group is 3 instances of one queue manager on this machine, each with its own FERRYMQ_HOME, client port and \
         replication address. CPU is percent of one core; the HA figure is the sum over the group's 3 instance processes.\n"
    );
    let _ = writeln!(md, "## Targets\n\n{}", targets_md(rep));
    if let Some(c) = &rep.ha1 {
        let _ = writeln!(
            md,
            "## HA1: one HA group vs one standalone queue manager\n\n![HA1](ha1.svg)\n\n{}",
            comparison_md(c)
        );
    }
    if let Some(c) = &rep.ha2 {
        let _ = writeln!(
            md,
            "## HA2: {} HA groups ({} instance processes) vs {} standalone queue managers\n\n\
             The most this {}-core machine reasonably holds: every process shares the same cores with the client.\n\n\
             ![HA2](ha2.svg)\n\n{}",
            c.queue_managers,
            c.ha_processes,
            c.queue_managers,
            rep.info.cores,
            comparison_md(c)
        );
    }
    if !rep.distance.is_empty() {
        let _ = writeln!(
            md,
            "## Distance: latency on the replication links\n\n\
             A `ferrymq relay` in front of each instance's replication port delays each direction by half the round trip; the \
             group's instance list names the relay ports and each instance binds its real port (qm.ini NativeHA:LocalAddress), \
             so every replication round trip between two instances crosses one relay each way. The direct row has no relays; \
             the 0 ms row shows the cost of the relays themselves. Each row is a fresh group; the best rate over the requester \
             sweep is compared with the direct row's best.\n\n![Distance](distance.svg)\n\n{}",
            distance_md(&rep.distance, distance_requesters)
        );
    }
    if !rep.failover.is_empty() {
        let _ = writeln!(
            md,
            "## Failover\n\n\
             For each message count a fresh group is created and N persistent {} B messages are put on {LOAD_QUEUE} by {LOAD_PUTTERS} \
             concurrent putters (under syncpoint, committing every {LOAD_COMMIT_EVERY}); a persistent marker message is put on \
             {MARKER_QUEUE}; a client connected with the group's connection list and automatic reconnect opens {MARKER_QUEUE}; the \
             active instance is killed with SIGKILL and the client issues MQGET (wait 30 s). The time is measured from just before \
             `kill -9` runs until the get returns the marker from the new active instance; afterwards DISPLAY QLOCAL({LOAD_QUEUE}) \
             CURDEPTH must show N. \"New active listening\" is when another instance's client port is first seen listening \
             (/proc/net/tcp polled every 2 ms); the client retries the connection list every 25 ms for the first 5 s of a break, so it adds at most that to the get time. \
             \"Activation after election\" is what the new active instance logs (error log: \"is now the active \
             instance ... N ms after its election\"); the election itself is not in the log.\n\n{}",
            rep.info.msg_size,
            failover_md(&rep.failover)
        );
    }
    if let Some(k) = &rep.kills {
        let _ = writeln!(
            md,
            "## Kills: failover as applications see it\n\n\
             One group, {KILL_LOAD_PUTTERS} putters putting and committing persistent {} B messages throughout (reconnecting by themselves). \
             Before each kill a probe client (connected once, with the group's connection list and automatic reconnect) puts one \
             persistent message; the active instance is killed with SIGKILL and the probe client puts again (outside syncpoint, \
             again after an interrupted put whose outcome is unknown) until a put succeeds. The time is from just before `kill -9` runs \
             until that put returns. The killed instance is restarted once another is active, and the next kill waits until every \
             instance is in sync (up to 15 s).\n\n{}",
            rep.info.msg_size,
            kills_md(k)
        );
    }
    if !rep.errors.is_empty() {
        let _ = writeln!(md, "## Problems\n");
        for e in &rep.errors {
            let _ = writeln!(md, "- {}", e.replace('\n', " / "));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Notable lines in the instances' logs\n");
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

pub(super) fn comparison_svg(c: &Comparison) -> String {
    let pts = |f: &dyn Fn(&CompareRow) -> &RunResult| -> Vec<(usize, f64)> {
        c.rows
            .iter()
            .map(|r| (r.requesters, f(r).round_trips_per_s))
            .collect()
    };
    crate::chart::svg_lines(
        &format!("{}: 2 KB persistent Request/Responder", c.name),
        &[
            (
                format!("standalone ({} QM)", c.queue_managers),
                pts(&|r| &r.standalone),
            ),
            (
                format!("HA ({} group(s) of 3)", c.queue_managers),
                pts(&|r| &r.ha),
            ),
        ],
    )
}

pub(super) fn write_report(out: &Path, rep: &Report) -> Result<(), String> {
    write_report_with(out, rep, &[], &[])
}

pub(super) fn write_report_with(
    out: &Path,
    rep: &Report,
    requesters: &[usize],
    distance_requesters: &[usize],
) -> Result<(), String> {
    let w = |name: &str, text: String| {
        std::fs::write(out.join(name), text).map_err(|e| format!("{}: {e}", out.display()))
    };
    if let Some(c) = &rep.ha1 {
        w("ha1.svg", comparison_svg(c))?;
    }
    if let Some(c) = &rep.ha2 {
        w("ha2.svg", comparison_svg(c))?;
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
                        .map(|x| (x.threads, x.round_trips_per_s))
                        .collect(),
                )
            })
            .collect();
        w(
            "distance.svg",
            crate::chart::svg_lines(
                "HA1 with latency on the replication links, 2 KB persistent",
                &series,
            ),
        )?;
    }
    let mut dreq: Vec<usize> = distance_requesters.to_vec();
    if dreq.is_empty() {
        dreq = rep
            .distance
            .iter()
            .flat_map(|r| r.runs.iter().map(|x| x.threads))
            .collect();
        dreq.sort_unstable();
        dreq.dedup();
    }
    let mut req: Vec<usize> = requesters.to_vec();
    if req.is_empty() {
        req = [&rep.ha1, &rep.ha2]
            .into_iter()
            .flatten()
            .flat_map(|c| c.rows.iter().map(|r| r.requesters))
            .collect();
        req.sort_unstable();
        req.dedup();
    }
    w("README.md", render(rep, &req, &dreq))?;
    w(
        "runs.json",
        serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?,
    )
}
