//! The connections report's README.md (tables), its charts and runs.json.

use std::fmt::Write as _;
use std::path::Path;

use super::{Results, Row};

/// One row as the report prints it while it runs.
pub fn line(r: &Row) -> String {
    format!(
        "{:>6} of {:>6} connected in {:>6.2} s ({:>7.0}/s), QM CPU {:>5.1}% connecting, {:>5.2}% idle; {:>6.0} B RSS and {:.2} fds per connection; request/responder {:.0}/s beside them, {:.0}/s without ({:.0}%)",
        r.connected,
        r.requested,
        r.connect_s,
        r.connects_per_s,
        r.qm_cpu_connecting_pct,
        r.qm_cpu_idle_pct,
        r.rss_per_conn_bytes,
        r.fds_per_conn,
        r.rr_with_per_s,
        r.rr_without_per_s,
        ratio_pct(r)
    )
}

fn ratio_pct(r: &Row) -> f64 {
    if r.rr_without_per_s > 0.0 {
        r.rr_with_per_s / r.rr_without_per_s * 100.0
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
         limit ({} here) less {} for the queue manager's own files. Heartbeats: {}. Idle CPU is \
         the queue manager's over a window with only the held connections (their puts \
         included); RSS and descriptors per connection are the queue manager's growth from \
         before the connections to after. The request/responder rate ({} requesters, {} B \
         non-persistent) is measured without the connections and then beside them, on the same \
         queue manager in the same run.\n",
        r.drivers,
        r.put_interval_s,
        r.open_files_limit,
        super::FDS_SPARE,
        r.heartbeat_note,
        r.rr_requesters,
        r.rr_size
    );
    let _ = writeln!(md, "## Connections\n");
    let _ = writeln!(
        md,
        "| Connections | Connected | Errors | Time to all connected (s) | Connections/s | QM CPU connecting (%) | QM CPU idle (%) | QM RSS per connection (B) | QM fds per connection | RR/s without | RR/s beside | Beside/without |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for x in &r.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {:.0} | {:.1} | {:.2} | {:.0} | {:.2} | {:.0} | {:.0} | {:.0}% |",
            x.requested,
            x.connected,
            x.errors,
            x.connect_s,
            x.connects_per_s,
            x.qm_cpu_connecting_pct,
            x.qm_cpu_idle_pct,
            x.rss_per_conn_bytes,
            x.fds_per_conn,
            x.rr_without_per_s,
            x.rr_with_per_s,
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
