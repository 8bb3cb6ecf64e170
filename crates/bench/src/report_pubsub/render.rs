//! The pubsub report's README.md (tables and the goal), its chart and runs.json.

use std::fmt::Write as _;
use std::path::Path;

use super::measure::{Plain, Row};
use super::{Results, GOAL_GETS};

fn persistence(p: bool) -> &'static str {
    if p {
        "persistent"
    } else {
        "non-persistent"
    }
}

fn publisher(async_put: bool) -> &'static str {
    if async_put {
        "async puts"
    } else {
        "waits for replies"
    }
}

/// One row as `ferrymq-bench fanout` prints it.
pub fn line(p: &Plain, r: &Row) -> String {
    format!(
        "{:<15} {:<17} {:>5} subscribers: {:>8.0} pubs/s {:>8.0} deliv/s {:>7.1} µs CPU/delivery, {:.2}x a plain get ({:.1} µs); marginal {:.1} µs ({:.2}x); publish {:.1} µs/pub, get {:.1} µs; plain put {:.1} µs, publication to nobody {:.1} µs",
        persistence(r.persistent),
        publisher(r.async_put),
        r.subscribers,
        r.publications_per_s,
        r.deliveries_per_s,
        r.cpu_us_per_delivery,
        r.ratio_to_get,
        p.get_cpu_us,
        r.marginal_cpu_us,
        r.marginal_ratio_to_get,
        r.publish_cpu_us,
        r.get_cpu_us,
        p.put_cpu_us,
        p.publish_alone_cpu_us,
    )
}

fn verdict(r: &Row) -> &'static str {
    if r.ratio_to_get < GOAL_GETS {
        "PASS"
    } else {
        "FAIL"
    }
}

pub fn markdown(r: &Results) -> String {
    let mut md = r.info.title_md(
        "FerryMQ publish/subscribe fan-out report",
        "the queue manager, the publisher and the subscribers",
    );
    let _ = writeln!(
        md,
        "\nOne publisher on a bindings connection publishes {} B messages to a topic with N \
         subscribers (managed subscriptions on bindings connections, 100 per connection: \
         non-durable for non-persistent publications, durable for persistent ones); about {} \
         copies per row, published first and then got by every subscriber. CPU is the queue \
         manager's over the row (publishing and getting), per copy delivered. The baseline, in the \
         same run on the same queue manager (after one unrecorded warm-up baseline), just before \
         each row: as many messages put on one local queue, then got, \
         and as many publications to a topic nobody subscribes to (the publication's own cost). \
         Goal: a delivery costs less than {GOAL_GETS}× a plain get, the delivery's CPU counting \
         its share of the publication (at 1 subscriber, the whole publication: a put). The \
         marginal cost per subscriber leaves the publication's own cost out: the row's CPU less \
         that of as many publications to nobody, per delivery. It is shown beside the goal, \
         not in its place.\n\n\
         Each row is measured twice, by publisher. **Waits for replies**: the publisher (and the \
         baseline's putter, and its publications to nobody) puts with MQPMO_SYNC_RESPONSE and \
         waits for each put's reply before the next put, as the goal was set; the goal is judged \
         on these rows. **Async puts**: the same loops put with MQPMO_ASYNC_RESPONSE (no reply \
         is sent; each loop ends with one MQSTAT, which is answered once every put before it \
         was carried out and must count them all as done, inside the measured interval); the \
         baseline is measured the same way, so both sides of the ratio are like for like. The \
         subscribers' gets are the same in both.\n",
        r.info.msg_size,
        r.rows.first().map_or(0, |x| x.deliveries),
    );
    let _ = writeln!(
        md,
        "Build: {} (this ferrymq-bench and the ferrymq binary beside it, which it runs). CPU is \
         read from /proc in clock ticks (10 ms), so a row of {} copies resolves {:.1} µs per copy.\n",
        if cfg!(debug_assertions) {
            "debug profile"
        } else {
            "release profile"
        },
        r.rows.first().map_or(0, |x| x.deliveries),
        r.rows
            .first()
            .map_or(0.0, |x| 10_000.0 / x.deliveries.max(1) as f64),
    );
    let _ = writeln!(
        md,
        "The machine's 1-minute load average was {:.2} when the run started and {:.2} when it \
         ended. Most of the queue manager's CPU per request is the request's round trip and \
         thread switches (see docs/internals/pubsub.md), which other work on the machine \
         inflates: compare rows of one run, and runs on a quiet machine.\n",
        r.load_average_1m.0, r.load_average_1m.1
    );
    let _ = writeln!(
        md,
        "## Baseline: plain put and get, measured before each row\n"
    );
    let _ = writeln!(
        md,
        "| Persistence | Putter | Before the row of | Messages | Put CPU µs/msg | Get CPU µs/msg | Put+get msgs/s | Publication to no subscriber CPU µs |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|");
    for p in &r.plain {
        let _ = writeln!(
            md,
            "| {} | {} | {} subscribers | {} | {:.1} | {:.1} | {:.0} | {:.1} |",
            persistence(p.persistent),
            publisher(p.async_put),
            p.row_subscribers,
            p.messages,
            p.put_cpu_us,
            p.get_cpu_us,
            p.msgs_per_s,
            p.publish_alone_cpu_us
        );
    }
    let _ = writeln!(md, "\n## Fan-out\n\n![fan-out](fanout.svg)\n");
    let _ = writeln!(
        md,
        "| Persistence | Publisher | Subscribers | Publications | Publications/s | Deliveries/s | CPU µs/delivery | × plain put+get | × plain get | Goal (< {GOAL_GETS}× get) | Publishing CPU µs/publication | Getting CPU µs/copy | Marginal CPU µs/subscriber | Marginal × plain get |"
    );
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
    );
    for x in &r.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:.1} | {:.2} | {:.2} | {} | {:.1} | {:.1} | {:.1} | {:.2} |",
            persistence(x.persistent),
            publisher(x.async_put),
            x.subscribers,
            x.publications,
            x.publications_per_s,
            x.deliveries_per_s,
            x.cpu_us_per_delivery,
            x.ratio_to_put_get,
            x.ratio_to_get,
            verdict(x),
            x.publish_cpu_us,
            x.get_cpu_us,
            x.marginal_cpu_us,
            x.marginal_ratio_to_get
        );
    }
    for (async_put, what) in [
        (
            false,
            "the goal, judged on the rows whose publisher waits for each reply",
        ),
        (
            true,
            "shown beside it: the rows whose publisher and baseline put asynchronously",
        ),
    ] {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.async_put == async_put).collect();
        if rows.is_empty() {
            continue;
        }
        let pass = rows.iter().filter(|x| verdict(x) == "PASS").count();
        let _ = writeln!(
            md,
            "\n{}: {pass} of {} rows PASS (CPU per delivery under {GOAL_GETS}× the plain get of the same persistence measured just before the row, by the same kind of putter).",
            capitalized(what),
            rows.len()
        );
    }
    md
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

pub fn chart(r: &Results) -> String {
    let mut series = Vec::new();
    for p in [false, true] {
        for a in [false, true] {
            let pts: Vec<(usize, f64)> = r
                .rows
                .iter()
                .filter(|x| x.persistent == p && x.async_put == a)
                .map(|x| (x.subscribers, x.cpu_us_per_delivery))
                .collect();
            if pts.is_empty() {
                continue;
            }
            series.push((
                format!("{} ({}) µs/delivery", persistence(p), publisher(a)),
                pts,
            ));
        }
        let marginal = r
            .rows
            .iter()
            .filter(|x| x.persistent == p && !x.async_put)
            .map(|x| (x.subscribers, x.marginal_cpu_us))
            .collect();
        series.push((
            format!("{} marginal µs/subscriber", persistence(p)),
            marginal,
        ));
        // Each row's goal is twice the plain get measured just before it.
        let goal: Vec<(usize, f64)> = r
            .plain
            .iter()
            .filter(|x| x.persistent == p && !x.async_put)
            .map(|x| (x.row_subscribers, GOAL_GETS * x.get_cpu_us))
            .collect();
        if !goal.is_empty() {
            series.push((format!("goal {}: {GOAL_GETS}× get", persistence(p)), goal));
        }
    }
    crate::chart::svg_lines("Queue manager CPU per delivery by subscribers", &series)
}

pub fn write(out: &Path, r: &Results) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let w = |name: &str, text: String| {
        std::fs::write(out.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    w("README.md", markdown(r))?;
    w("fanout.svg", chart(r))?;
    w(
        "runs.json",
        serde_json::to_string_pretty(r).map_err(|e| e.to_string())?,
    )
}
