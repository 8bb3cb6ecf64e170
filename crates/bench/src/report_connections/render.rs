//! The connections report's README.md (tables), its charts and runs.json.

use std::fmt::Write as _;
use std::path::Path;

use super::{Results, Row};

/// One row as the report prints it while it runs.
pub fn line(r: &Row) -> String {
    format!(
        "{:>6} of {:>6} connected in {:>6.2} s ({:>7.0}/s), QM CPU {:>5.1}% connecting, {:>5.2}% idle with puts; {:>6.0} B RSS and {:.2} fds per connection; request/responder {}/s beside them, {}/s without (before, then after each close) ({:.0}%)",
        r.connected,
        r.requested,
        r.connect_s,
        r.connects_per_s,
        r.qm_cpu_connecting_pct,
        r.qm_cpu_idle_pct,
        r.rss_per_conn_bytes,
        r.fds_per_conn,
        rates(&r.rr_with_per_s, &r.rr_with_steal_pct),
        rates(&r.rr_without_per_s, &r.rr_without_steal_pct),
        ratio_pct(r)
    )
}

/// Rates as the report lists them, each with the share of the machine's CPU time stolen by the
/// hypervisor while it was measured: "38210 (2% stolen), 32180 (0% stolen)".
fn rates(v: &[f64], steal: &[f64]) -> String {
    v.iter()
        .enumerate()
        .map(|(i, x)| match steal.get(i) {
            Some(s) => format!("{x:.0} ({s:.0}% stolen)"),
            None => format!("{x:.0}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// A request/responder measurement during which the hypervisor took more than this share of the
/// machine's CPU time timed the host's other guests more than the queue manager: shown, but left
/// out of the ratio while each side has a measurement under it.
const STEAL_MAX_PCT: f64 = 10.0;

/// The rates of one side measured with under [`STEAL_MAX_PCT`] stolen.
fn quiet(v: &[f64], steal: &[f64]) -> Vec<f64> {
    v.iter()
        .enumerate()
        .filter(|(i, _)| steal.get(*i).is_none_or(|s| *s < STEAL_MAX_PCT))
        .map(|(_, x)| *x)
        .collect()
}

/// The rates the ratio counts, (beside, without): those measured with under [`STEAL_MAX_PCT`]
/// of the machine stolen, unless a side has none such, when every one counts.
fn counted_rates(r: &Row) -> (Vec<f64>, Vec<f64>) {
    let with = quiet(&r.rr_with_per_s, &r.rr_with_steal_pct);
    let without = quiet(&r.rr_without_per_s, &r.rr_without_steal_pct);
    if with.is_empty() || without.is_empty() {
        (r.rr_with_per_s.clone(), r.rr_without_per_s.clone())
    } else {
        (with, without)
    }
}

/// The mean rate beside the connections as a percentage of the mean rate without them (before
/// they were made and after each close), over the measurements [`counted_rates`] keeps.
fn ratio_pct(r: &Row) -> f64 {
    let (with, without) = counted_rates(r);
    let without = mean(&without);
    if without > 0.0 {
        mean(&with) / without * 100.0
    } else {
        0.0
    }
}

pub fn markdown(r: &Results) -> String {
    let mut md = r.info.title_md(
        "FerryMQ connections report",
        "the queue manager, the connection drivers and the request/responder workload",
    );
    let _ = writeln!(
        md,
        "\nN client connections, made by {} lean driver processes (the wire protocol only: \
         Hello, Connect, Open of one queue), each from its own source address on 127.0.0.0/8; \
         each connection puts one 64 B message every {} s. Counts are capped at the open-file \
         limit ({} here) less {} for the queue manager's own files. Heartbeats: {}. Idle CPU with \
         puts is the queue manager's over a window with only the held connections and their \
         puts, beside the same window just before they were made. Idle CPU with heartbeats only \
         (at the largest count; not in `--quick`): once the request/responder runs are done, as \
         many connections are made again and put for one put interval; then the drivers stop \
         putting, and half a heartbeat interval later the queue manager's CPU is taken over one whole interval, \
         which holds every connection's first heartbeat and none of its second (their last \
         puts were spread over one put interval, under half the heartbeat interval): the \
         steady cost of idle connections. RSS and descriptors per connection are the queue manager's growth from \
         before the connections to after. Each count runs on a queue manager of its own, \
         started for it, so that no count reuses memory an earlier count's connections freed (the \
         connect/close cycles then run on the last count's). The request/responder rate ({} requesters, {} B \
         non-persistent) is measured without the connections, beside them, and without them again \
         once they are closed, on that count's queue manager in the same run; at the largest count \
         the connections are then made again and the pair repeated (`--rr-pairs`, 3 by default), \
         so that beside and without alternate. Beside/without is the mean rate beside them \
         against the mean rate without them. Beside each rate, the share of the machine's CPU \
         time the hypervisor gave to other guests while it was measured (steal, from \
         /proc/stat): on a shared host that is what moves these rates most, so a measurement \
         with more than 10% stolen is left out of the means while each side keeps one without.\n",
        r.drivers,
        r.put_interval_s,
        r.open_files_limit,
        super::FDS_SPARE,
        r.heartbeat_note,
        r.rr_requesters,
        r.rr_size
    );
    md.push_str(&goals(r));
    let _ = writeln!(md, "## Connections\n");
    let _ = writeln!(
        md,
        "| Connections | Connected | Errors | Time to all connected (s) | Connections/s | QM CPU connecting (%) | QM CPU idle without them (%) | QM CPU idle with puts (%) | QM CPU heartbeats only (%) | QM RSS per connection (B) | QM fds per connection | RR/s without (before; after each close) | RR/s beside (each time) | Beside/without (means) |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for x in &r.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {:.0} | {:.1} | {:.2} | {:.2} | {} | {:.0} | {:.2} | {} | {} | {:.0}% |",
            x.requested,
            x.connected,
            x.errors,
            x.connect_s,
            x.connects_per_s,
            x.qm_cpu_connecting_pct,
            x.qm_cpu_idle_without_pct,
            x.qm_cpu_idle_pct,
            x.heartbeats
                .as_ref()
                .map_or("—".to_string(), |h| format!("{:.3}", h.qm_cpu_pct)),
            x.rss_per_conn_bytes,
            x.fds_per_conn,
            rates(&x.rr_without_per_s, &x.rr_without_steal_pct),
            rates(&x.rr_with_per_s, &x.rr_with_steal_pct),
            ratio_pct(x)
        );
    }
    if let Some(e) = r.rows.iter().find_map(|x| x.first_error.as_ref()) {
        let _ = writeln!(md, "\nFirst connection error: `{e}`");
    }
    if let Some(c) = &r.cycles {
        let _ = writeln!(
            md,
            "\n## Memory across connect/close cycles\n\n{} connections opened and closed ten \
             times; the queue manager's RSS and descriptors once each cycle's connections are \
             gone (before the first: {:.1} MB, {} descriptors).\n",
            c.connections,
            c.rss_start_bytes as f64 / 1e6,
            c.fds_start
        );
        let _ = writeln!(md, "| Cycle | RSS (MB) | Descriptors |");
        let _ = writeln!(md, "|---|---|---|");
        for (i, (rss, fds)) in c.rss_after_bytes.iter().zip(&c.fds_after).enumerate() {
            let _ = writeln!(md, "| {} | {:.1} | {} |", i + 1, *rss as f64 / 1e6, fds);
        }
    }
    let _ = writeln!(
        md,
        "\nCharts: `connect-rate.svg` (connections per second by N), `memory-per-connection.svg` \
         (queue manager RSS per connection by N), `cycles.svg` (RSS after each cycle). Raw \
         numbers: `runs.json`."
    );
    md
}

/// Connections per second that bring 60,000 connections in under ten seconds.
const GOAL_CONNECTS_PER_S: f64 = 6000.0;
/// Queue manager RSS per idle connection.
const GOAL_RSS_PER_CONN_BYTES: f64 = 8192.0;
/// Queue manager CPU while 20,000 connections idle, percent of one core.
const GOAL_IDLE_CPU_PCT_PER_20K: f64 = 1.0;
/// Request/responder rate beside the connections, percent of the rate without them.
const GOAL_RR_BESIDE_PCT: f64 = 90.0;
/// RSS after the last connect/close cycle may exceed that after the first by this fraction
/// (allocator noise) and still count as no growth.
const GOAL_CYCLE_GROWTH: f64 = 0.05;

/// The goals, judged on the largest count measured (and on the cycles).
fn goals(r: &Results) -> String {
    let mut md = String::from("\n## Goals (at the largest count measured)\n\n");
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let Some(x) = r.rows.iter().max_by_key(|x| x.connected) else {
        md.push_str("No row was measured.\n\n");
        return md;
    };
    let _ = writeln!(
        md,
        "- {} connections at {:.0}/s (goal ≥ {GOAL_CONNECTS_PER_S:.0}/s, 60,000 in under 10 s): {}",
        x.connected,
        x.connects_per_s,
        verdict(x.connects_per_s >= GOAL_CONNECTS_PER_S)
    );
    let _ = writeln!(
        md,
        "- queue manager RSS per idle connection {:.0} B (goal ≤ {GOAL_RSS_PER_CONN_BYTES:.0} B): {}",
        x.rss_per_conn_bytes,
        verdict(x.rss_per_conn_bytes <= GOAL_RSS_PER_CONN_BYTES)
    );
    // Below 20,000 connections, what `n` connections add is scaled to 20,000 and the queue
    // manager's own idle CPU (measured just before, without them) is counted once.
    let measured = |n: usize| n >= 20_000 || n == 0;
    let per_20k = |pct: f64, n: usize| {
        if measured(n) {
            pct
        } else {
            let added = (pct - x.qm_cpu_idle_without_pct).max(0.0);
            x.qm_cpu_idle_without_pct + added * 20_000.0 / n as f64
        }
    };
    let projected = |n: usize| if measured(n) { "" } else { " projected" };
    match &x.heartbeats {
        Some(h) => {
            let _ = writeln!(
                md,
                "- idle CPU, heartbeats only (every {:.0} s, the default): {:.3}% of a core with {} connections over one interval ({} heartbeats answered in it; {:.2}% without the connections), {:.3}% for 20,000{} (goal < {GOAL_IDLE_CPU_PCT_PER_20K:.0}%): {}",
                h.heartbeat_s,
                h.qm_cpu_pct,
                h.connections,
                h.answered,
                x.qm_cpu_idle_without_pct,
                per_20k(h.qm_cpu_pct, h.connections),
                projected(h.connections),
                verdict(
                    per_20k(h.qm_cpu_pct, h.connections) < GOAL_IDLE_CPU_PCT_PER_20K
                        && h.answered as f64 >= 0.9 * h.connections as f64
                )
            );
        }
        None => {
            let _ = writeln!(
                md,
                "- idle CPU, heartbeats only (goal < {GOAL_IDLE_CPU_PCT_PER_20K:.0}% of a core for 20,000): not measured in this run (`--quick` or `--skip-heartbeats`; the phase takes a put interval and one and a half heartbeat intervals)"
            );
        }
    }
    let _ = writeln!(
        md,
        "- idle CPU with the seed's puts (one per connection every {} s, {:.0} puts/s): {:.2}% of a core with {} connections ({:.2}% without them), {:.2}% for 20,000{}; {:.0} µs of queue manager CPU per put (information: the puts are a workload, not idling)",
        r.put_interval_s,
        puts_per_s(r, x),
        x.qm_cpu_idle_pct,
        x.connected,
        x.qm_cpu_idle_without_pct,
        per_20k(x.qm_cpu_idle_pct, x.connected),
        projected(x.connected),
        per_put_us(r, x)
    );
    let (with, without) = counted_rates(x);
    let ratio = ratio_pct(x);
    let _ = writeln!(
        md,
        "- request/responder beside them {ratio:.0}% of the rate without them (goal ≥ {GOAL_RR_BESIDE_PCT:.0}%): {} (means of {} of {} measurements beside them and {} of {} without; {})",
        verdict(ratio >= GOAL_RR_BESIDE_PCT),
        with.len(),
        x.rr_with_per_s.len(),
        without.len(),
        x.rr_without_per_s.len(),
        if with.len() + without.len() == x.rr_with_per_s.len() + x.rr_without_per_s.len() {
            "every one counted".to_string()
        } else {
            format!("those with more than {STEAL_MAX_PCT:.0}% of the machine stolen are left out")
        }
    );
    if let Some(c) = &r.cycles {
        if let (Some(first), Some(last)) = (c.rss_after_bytes.first(), c.rss_after_bytes.last()) {
            let growth = *last as f64 / (*first).max(1) as f64 - 1.0;
            let _ = writeln!(
                md,
                "- RSS after cycle {} {:.1} MB, after cycle 1 {:.1} MB ({:+.1}%; goal: no growth, within {:.0}%): {}",
                c.rss_after_bytes.len(),
                *last as f64 / 1e6,
                *first as f64 / 1e6,
                growth * 100.0,
                GOAL_CYCLE_GROWTH * 100.0,
                verdict(growth <= GOAL_CYCLE_GROWTH)
            );
        }
    }
    md.push('\n');
    md
}

/// The puts per second the held connections make.
fn puts_per_s(r: &Results, x: &Row) -> f64 {
    x.connected as f64 / r.put_interval_s.max(1) as f64
}

/// The queue manager's CPU per put while the connections idle with their puts, beyond its own
/// idle CPU without them.
fn per_put_us(r: &Results, x: &Row) -> f64 {
    let added = (x.qm_cpu_idle_pct - x.qm_cpu_idle_without_pct).max(0.0) / 100.0;
    let puts = puts_per_s(r, x);
    if puts > 0.0 {
        added / puts * 1e6
    } else {
        0.0
    }
}

pub fn write(dir: &Path, r: &Results) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let put = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    put("README.md", markdown(r))?;
    put(
        "runs.json",
        serde_json::to_string_pretty(r).map_err(|e| e.to_string())?,
    )?;
    let by_n = |f: &dyn Fn(&Row) -> f64| -> Vec<(usize, f64)> {
        r.rows.iter().map(|x| (x.requested, f(x))).collect()
    };
    put(
        "connect-rate.svg",
        crate::chart::svg_lines(
            "Connections per second by N",
            &[("connections/s".into(), by_n(&|x| x.connects_per_s))],
        ),
    )?;
    put(
        "memory-per-connection.svg",
        crate::chart::svg_lines(
            "Queue manager RSS per connection (bytes) by N",
            &[("bytes".into(), by_n(&|x| x.rss_per_conn_bytes))],
        ),
    )?;
    if let Some(c) = &r.cycles {
        let points = c
            .rss_after_bytes
            .iter()
            .enumerate()
            .map(|(i, b)| (i + 1, *b as f64 / 1e6))
            .collect();
        put(
            "cycles.svg",
            crate::chart::svg_lines(
                "Queue manager RSS (MB) after each connect/close cycle",
                &[("RSS MB".into(), points)],
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report_connections::HeartbeatPhase;
    use crate::run_info::RunInfo;
    use std::time::Duration;

    fn row(connected: usize, idle: f64, idle_without: f64, rr: (f64, f64, f64)) -> Row {
        Row {
            requested: connected,
            connected,
            errors: 0,
            first_error: None,
            connect_s: connected as f64 / 10_000.0,
            connects_per_s: 10_000.0,
            qm_cpu_connecting_pct: 50.0,
            qm_cpu_idle_pct: idle,
            qm_cpu_idle_without_pct: idle_without,
            idle_s: 20.0,
            rss_before_bytes: 0,
            rss_after_bytes: 0,
            rss_per_conn_bytes: 7000.0,
            fds_before: 20,
            fds_after: 20 + connected,
            fds_per_conn: 1.0,
            rr_without_per_s: vec![rr.0, rr.2],
            rr_with_per_s: vec![rr.1],
            rr_without_steal_pct: vec![1.0, 0.0],
            rr_with_steal_pct: vec![30.0],
            heartbeats: None,
        }
    }

    fn beats(connections: usize, qm_cpu_pct: f64, answered: u64) -> Option<HeartbeatPhase> {
        Some(HeartbeatPhase {
            connections,
            heartbeat_s: 300.0,
            quiet_before_s: 150.0,
            window_s: 300.0,
            qm_cpu_pct,
            answered,
        })
    }

    fn results(rows: Vec<Row>) -> Results {
        Results {
            info: RunInfo::now("test", true, Duration::ZERO, Duration::ZERO, 2048),
            open_files_limit: 20_000,
            drivers: 4,
            put_interval_s: 100,
            heartbeat_note: String::new(),
            rr_requesters: 8,
            rr_size: 2048,
            rows,
            cycles: None,
        }
    }

    #[test]
    fn beside_is_judged_against_the_mean_of_the_rates_without() {
        let r = row(19_900, 0.3, 0.0, (10_000.0, 8_800.0, 9_000.0));
        // 8,800 against a mean of 9,500 is 92.6%: a pass, though it is 88% of the first.
        assert!((ratio_pct(&r) - 92.63).abs() < 0.01, "{}", ratio_pct(&r));
        let g = goals(&results(vec![r.clone()]));
        assert!(
            g.contains("93% of the rate without them (goal ≥ 90%): PASS"),
            "{g}"
        );
        // More pairs at the largest count: the means, every measurement shown.
        let mut more = r;
        more.rr_with_per_s.push(7_000.0);
        more.rr_with_steal_pct.push(41.0);
        more.rr_without_per_s.push(9_500.0);
        more.rr_without_steal_pct.push(2.0);
        // Both beside measurements lost over 10% of the machine: every measurement counts, 7,900
        // against 9,500.
        assert!(
            (ratio_pct(&more) - 83.16).abs() < 0.01,
            "{}",
            ratio_pct(&more)
        );
        let g = goals(&results(vec![more.clone()]));
        assert!(
            g.contains("83% of the rate without them (goal ≥ 90%): FAIL"),
            "{g}"
        );
        let md = markdown(&results(vec![more.clone()]));
        assert!(
            md.contains("| 10000 (1% stolen), 9000 (0% stolen), 9500 (2% stolen) | 8800 (30% stolen), 7000 (41% stolen) | 83% |"),
            "{md}"
        );
        assert!(
            line(&more).contains("8800 (30% stolen), 7000 (41% stolen)/s beside them"),
            "{}",
            line(&more)
        );
        // With a quiet measurement each way, the stolen ones are left out: 9,000 against the
        // mean of 10,000, 9,000 and 9,500.
        more.rr_with_per_s.push(9_000.0);
        more.rr_with_steal_pct.push(3.0);
        assert!(
            (ratio_pct(&more) - 94.74).abs() < 0.01,
            "{}",
            ratio_pct(&more)
        );
        let g = goals(&results(vec![more.clone()]));
        assert!(
            g.contains("95% of the rate without them (goal ≥ 90%): PASS (means of 1 of 3 measurements beside them and 3 of 3 without; those with more than 10% of the machine stolen are left out)"),
            "{g}"
        );
    }

    #[test]
    fn idle_cpu_is_judged_on_heartbeats_only_and_projected_below_20000_connections() {
        // 5,000 connections heartbeating add 0.10% over the queue manager's own 0.05%: 0.45%
        // for 20,000. Their puts (50/s) add 0.35%: 1.45% for 20,000, 70 µs a put, shown but
        // not judged.
        let mut x = row(5_000, 0.4, 0.05, (1.0, 1.0, 1.0));
        x.heartbeats = beats(5_000, 0.15, 5_000);
        let g = goals(&results(vec![row(1_000, 0.1, 0.0, (1.0, 1.0, 1.0)), x]));
        assert!(
            g.contains("0.450% for 20,000 projected (goal < 1%): PASS"),
            "{g}"
        );
        assert!(g.contains("50 puts/s"), "{g}");
        assert!(g.contains("1.45% for 20,000 projected; 70 µs"), "{g}");
        // At 20,000 or more the measured figure is the verdict.
        let mut x = row(20_000, 0.6, 0.1, (1.0, 1.0, 1.0));
        x.heartbeats = beats(20_000, 1.2, 20_000);
        let g = goals(&results(vec![x.clone()]));
        assert!(g.contains("1.200% for 20,000 (goal < 1%): FAIL"), "{g}");
        // A window in which the heartbeats did not flow proves nothing.
        x.heartbeats = beats(20_000, 0.2, 1_000);
        let g = goals(&results(vec![x.clone()]));
        assert!(g.contains("0.200% for 20,000 (goal < 1%): FAIL"), "{g}");
        // The phase is judged on the connections made for it, not the row's: 10,000 of them
        // adding 0.2% over the queue manager's own 0.1% is 0.5% for 20,000.
        x.heartbeats = beats(10_000, 0.3, 10_000);
        let g = goals(&results(vec![x.clone()]));
        assert!(
            g.contains("with 10000 connections over one interval (10000 heartbeats answered in it; 0.10% without the connections), 0.500% for 20,000 projected (goal < 1%): PASS"),
            "{g}"
        );
        x.heartbeats = None;
        let g = goals(&results(vec![x]));
        assert!(
            g.contains("heartbeats only (goal < 1% of a core for 20,000): not measured"),
            "{g}"
        );
    }
}
