//! Prometheus metrics over HTTP: with qm.ini `Metrics: Port=N` (and optionally `Address=`,
//! default 127.0.0.1) a queue manager answers `GET /metrics` in the Prometheus text format with
//! its local queues' depths and counters, its HA instance's view of the group, and its disaster
//! recovery link: role, state and — on a primary — the lag in bytes and seconds against the
//! bound, the same figures `dspmq -o ha` and `dspmq -o dr` show. HTTP is hyper's; the text is
//! built here from the queue manager's own state on each scrape (nothing is sampled in between).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::config::DrRole;
use crate::qmgr::Shared;
use crate::storage::now_ms;

/// A scraper that sends no complete request head in this long is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The exposition format's content type (text format 0.0.4).
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds the metrics listener (qm.ini `Metrics:`) and serves it until the runtime ends.
pub async fn start(shared: Arc<Shared>) -> Result<(), String> {
    let Some(addr) = shared.cfg.metrics.clone() else {
        return Ok(());
    };
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen for metrics on {addr}: {e}"))?;
    crate::qm_log!(
        crate::errlog::ids::METRICS_STARTED,
        "Prometheus metrics on http://{addr}/metrics"
    );
    tokio::spawn(async move {
        loop {
            let (sock, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors or similar: the queue manager carries on regardless.
                    crate::qm_log!(
                        crate::errlog::ids::METRICS_ACCEPT_FAILED,
                        "accepting a metrics connection failed: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let r = respond(&shared, &req);
                    async move { Ok::<_, Infallible>(r) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(sock), svc)
                    .await;
            });
        }
    });
    Ok(())
}

fn respond(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, CONTENT_TYPE, render(shared)),
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: metrics are at /metrics\n".to_string(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET is served\n".to_string(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(ctype),
    );
    r
}

/// A label value, escaped as the text format requires.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Collects samples family by family (`# HELP`, `# TYPE`, then its samples).
struct Out {
    text: String,
    qmgr: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample with the `qmgr` label and `labels` (name, value) after it.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let _ = write!(self.text, "{name}{{qmgr=\"{}\"", self.qmgr);
        for (k, v) in labels {
            let _ = write!(self.text, ",{k}=\"{}\"", esc(v));
        }
        let _ = writeln!(self.text, "}} {value}");
    }
}

/// The metrics text of a running queue manager.
pub fn render(shared: &Shared) -> String {
    let mut o = Out {
        text: String::new(),
        qmgr: esc(&shared.cfg.name),
    };
    o.family("ferrymq_up", "gauge", "1 while the queue manager serves.");
    o.sample("ferrymq_up", &[], 1.0);
    o.family(
        "ferrymq_uptime_seconds",
        "gauge",
        "Seconds since the queue manager started.",
    );
    let up = now_ms().saturating_sub(shared.started_ms) as f64 / 1000.0;
    o.sample("ferrymq_uptime_seconds", &[], up);
    o.family(
        "ferrymq_log_durable_position",
        "gauge",
        "Position up to which replies may be released (durable, and on a DR primary within the lag bound).",
    );
    o.sample(
        "ferrymq_log_durable_position",
        &[],
        shared.durable.get() as f64,
    );
    let sec = &shared.security;
    for (name, help, v) in [
        (
            "ferrymq_auth_failures_total",
            "Failed connection authentications (wrong, missing or throttled passwords) since start.",
            &sec.auth_failures,
        ),
        (
            "ferrymq_auth_throttled_total",
            "Authentications refused without a password check because their address failed too often.",
            &sec.auth_throttled,
        ),
        (
            "ferrymq_auth_cache_hits_total",
            "Connections authenticated by a password verified within the last five minutes (no argon2 check).",
            &sec.auth_cache_hits,
        ),
        (
            "ferrymq_chlauth_refusals_total",
            "Connections refused by a channel authentication record since start.",
            &sec.chlauth_refusals,
        ),
    ] {
        o.family(name, "counter", help);
        o.sample(
            name,
            &[],
            v.load(std::sync::atomic::Ordering::Relaxed) as f64,
        );
    }
    queues(shared, &mut o);
    channels(shared, &mut o);
    if let Some(h) = &shared.ha {
        ha(h, &mut o);
    }
    if let Some(d) = &shared.dr {
        dr(shared, d, &mut o);
    }
    o.text
}

fn queues(shared: &Shared, o: &mut Out) {
    // Read under the core lock, written after it: a scrape holds up no application for longer
    // than the copy takes.
    let mut rows: Vec<(String, [f64; 6])> = {
        let core = shared.core.lock();
        core.engine
            .local_queues()
            .map(|q| {
                (
                    q.def.name.clone(),
                    [
                        q.depth() as f64,
                        q.def.max_depth as f64,
                        q.stats.puts as f64,
                        q.stats.gets as f64,
                        q.stats.open_input as f64,
                        q.stats.open_output as f64,
                    ],
                )
            })
            .collect()
    };
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let families = [
        (
            "ferrymq_queue_depth",
            "gauge",
            "Messages on the queue (CURDEPTH).",
        ),
        ("ferrymq_queue_max_depth", "gauge", "MAXDEPTH of the queue."),
        (
            "ferrymq_queue_puts_total",
            "counter",
            "Messages put to the queue since the queue manager started.",
        ),
        (
            "ferrymq_queue_gets_total",
            "counter",
            "Messages got from the queue since the queue manager started.",
        ),
        (
            "ferrymq_queue_open_input",
            "gauge",
            "Handles open for input (IPPROCS).",
        ),
        (
            "ferrymq_queue_open_output",
            "gauge",
            "Handles open for output (OPPROCS).",
        ),
    ];
    for (i, (name, kind, help)) in families.iter().enumerate() {
        o.family(name, kind, help);
        for (q, v) in &rows {
            o.sample(name, &[("queue", q)], v[i]);
        }
    }
}

/// Message channels: state, messages, batches and bytes of each running (or stopped) instance,
/// and its transmission queue's depth, as DISPLAY CHSTATUS shows them.
fn channels(shared: &Shared, o: &mut Out) {
    let mut rows = shared.channels.snapshot();
    rows.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let now = now_ms();
    let depths: Vec<(f64, f64)> = {
        let core = shared.core.lock();
        rows.iter()
            .map(|(_, _, st)| {
                core.engine.queue_status(&st.xmitq).map_or((0.0, 0.0), |q| {
                    let age = q
                        .oldest_put_ms
                        .map_or(0.0, |t| now.saturating_sub(t) as f64 / 1000.0);
                    (q.cur_depth as f64, age)
                })
            })
            .collect()
    };
    type Get = fn(&crate::channels::ChannelStatus) -> f64;
    let families: [(&str, &str, &str, Get); 6] = [
        (
            "ferrymq_channel_state",
            "gauge",
            "The channel's state as MQ numbers it (MQCHS_*: 1 BINDING, 2 STARTING, 3 RUNNING, 5 RETRYING, 6 STOPPED).",
            |s| s.state.code() as f64,
        ),
        (
            "ferrymq_channel_messages_total",
            "counter",
            "Messages the channel instance moved (MSGS).",
            |s| s.msgs as f64,
        ),
        (
            "ferrymq_channel_batches_total",
            "counter",
            "Batches the channel instance completed (BATCHES).",
            |s| s.batches as f64,
        ),
        (
            "ferrymq_channel_bytes_sent_total",
            "counter",
            "Bytes the channel instance sent (BYTSSENT).",
            |s| s.bytes_sent as f64,
        ),
        (
            "ferrymq_channel_bytes_received_total",
            "counter",
            "Bytes the channel instance received (BYTSRCVD).",
            |s| s.bytes_rcvd as f64,
        ),
        (
            "ferrymq_channel_indoubt",
            "gauge",
            "1 while the channel's batch is in doubt (INDOUBT).",
            |s| if s.indoubt { 1.0 } else { 0.0 },
        ),
    ];
    for (name, kind, help, get) in families {
        o.family(name, kind, help);
        for (ch, t, st) in &rows {
            o.sample(name, &[("channel", ch), ("type", t)], get(st));
        }
    }
    o.family(
        "ferrymq_channel_xmitq_depth",
        "gauge",
        "Messages waiting on a sender channel's transmission queue.",
    );
    for ((ch, t, _), (d, _)) in rows.iter().zip(&depths) {
        if *t == "SDR" {
            o.sample("ferrymq_channel_xmitq_depth", &[("channel", ch)], *d);
        }
    }
    o.family(
        "ferrymq_channel_xmitq_oldest_age_seconds",
        "gauge",
        "Age of the oldest message on a sender channel's transmission queue (0: empty).",
    );
    for ((ch, t, _), (_, age)) in rows.iter().zip(&depths) {
        if *t == "SDR" {
            o.sample(
                "ferrymq_channel_xmitq_oldest_age_seconds",
                &[("channel", ch)],
                *age,
            );
        }
    }
}

fn ha(h: &crate::ha::HaHandle, o: &mut Out) {
    o.family(
        "ferrymq_ha_active",
        "gauge",
        "1 on the group's active instance, 0 on a replica.",
    );
    let local = h.cfg.local.clone();
    o.sample(
        "ferrymq_ha_active",
        &[("instance", &local)],
        if h.is_active() { 1.0 } else { 0.0 },
    );
    let rows = h.status_rows();
    // Each family reads one `dspmq -o ha` field of every instance's row; a row without a value
    // (UNKNOWN, BACKLOG SNAPSHOT) has no sample.
    let families = [
        (
            "ferrymq_ha_instance_reachable",
            "1 while this instance is in contact with the instance (REACHABLE).",
            "REACHABLE",
        ),
        (
            "ferrymq_ha_instance_in_sync",
            "1 when the instance is reachable and lacks no entry appended more than a second ago (INSYNC), as this instance sees it.",
            "INSYNC",
        ),
        (
            "ferrymq_ha_instance_lag_entries",
            "Entries of replicated log the instance lacks (LAGENTRIES), as this instance sees it.",
            "LAGENTRIES",
        ),
        (
            "ferrymq_ha_instance_backlog_bytes",
            "Bytes of replicated log the instance lacks, as this instance sees it.",
            "BACKLOG",
        ),
        (
            "ferrymq_ha_instance_behind_seconds",
            "How long ago the first entry the instance lacks was appended (BEHIND), as this instance sees it.",
            "BEHIND",
        ),
    ];
    fn field<'a>(row: &'a [(String, String)], k: &str) -> Option<&'a str> {
        row.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
    for (name, help, key) in families {
        o.family(name, "gauge", help);
        for row in &rows {
            let value = field(row, key).and_then(|v| match v {
                "YES" => Some(1.0),
                "NO" => Some(0.0),
                v => v.parse().ok(),
            });
            if let (Some(inst), Some(v)) = (field(row, "INSTANCE"), value) {
                o.sample(name, &[("instance", inst)], v);
            }
        }
    }
}

fn dr(shared: &Shared, d: &crate::dr::DrHandle, o: &mut Out) {
    let role = match d.cfg.role {
        DrRole::Primary => "primary",
        DrRole::Secondary => "secondary",
    };
    let link = d.link_name();
    o.family(
        "ferrymq_dr_info",
        "gauge",
        "Disaster recovery role and link state (DRSTATUS), as labels.",
    );
    o.sample("ferrymq_dr_info", &[("role", role), ("status", link)], 1.0);
    o.family(
        "ferrymq_dr_connected",
        "gauge",
        "1 while the DR link is up and in step (DRSTATUS Normal).",
    );
    let up = if link == "Normal" { 1.0 } else { 0.0 };
    o.sample("ferrymq_dr_connected", &[], up);
    let acked = d.acked.load(Ordering::Acquire);
    match d.cfg.role {
        DrRole::Primary => {
            let lag = shared.dr_lag(d);
            let end = lag.end;
            let samples = [
                (
                    "ferrymq_dr_lag_bytes",
                    "gauge",
                    "Acknowledged work the recovery site has not acknowledged, in bytes of log: what losing the main site would lose (LAGBYTES; at most MAXLAG while the bound holds).",
                    lag.at_risk as f64,
                ),
                (
                    "ferrymq_dr_held_bytes",
                    "gauge",
                    "Durable log the recovery site has not acknowledged whose replies are held by the bound (HELDBYTES).",
                    lag.held as f64,
                ),
                (
                    "ferrymq_dr_lag_seconds",
                    "gauge",
                    "Age of the oldest work the recovery site has not acknowledged (LAGSECS).",
                    d.lag_secs(lag.total()),
                ),
                (
                    "ferrymq_dr_max_lag_bytes",
                    "gauge",
                    "The lag bound: past it, replies to puts and commits wait (MAXLAG).",
                    d.max_lag.load(Ordering::Acquire) as f64,
                ),
                (
                    "ferrymq_dr_position",
                    "gauge",
                    "End of the durable log stream (POSITION).",
                    end as f64,
                ),
                (
                    "ferrymq_dr_acked_position",
                    "gauge",
                    "Stream position the recovery site has acknowledged (ACKED).",
                    acked as f64,
                ),
                (
                    "ferrymq_dr_sent_bytes_total",
                    "counter",
                    "Log bytes shipped since the queue manager started (SENTBYTES).",
                    d.bytes.load(Ordering::Relaxed) as f64,
                ),
            ];
            for (name, kind, help, v) in samples {
                o.family(name, kind, help);
                o.sample(name, &[], v);
            }
        }
        DrRole::Secondary => {
            o.family(
                "ferrymq_dr_position",
                "gauge",
                "Stream position this recovery site holds (POSITION).",
            );
            o.sample("ferrymq_dr_position", &[], acked as f64);
            o.family(
                "ferrymq_dr_max_lag_bytes",
                "gauge",
                "The primary's lag bound, as it last said (MAXLAG); kept by makedrprimary.",
            );
            o.sample(
                "ferrymq_dr_max_lag_bytes",
                &[],
                d.max_lag.load(Ordering::Acquire) as f64,
            );
            o.family(
                "ferrymq_dr_received_bytes_total",
                "counter",
                "Log bytes received since the queue manager started (RECEIVEDBYTES).",
            );
            o.sample(
                "ferrymq_dr_received_bytes_total",
                &[],
                d.bytes.load(Ordering::Relaxed) as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(esc("x\ny"), "x\\ny");
        let mut o = Out {
            text: String::new(),
            qmgr: esc("QM1"),
        };
        o.family("ferrymq_queue_depth", "gauge", "Messages on the queue.");
        o.sample("ferrymq_queue_depth", &[("queue", "Q.\"1\"")], 3.0);
        assert_eq!(
            o.text,
            "# HELP ferrymq_queue_depth Messages on the queue.\n# TYPE ferrymq_queue_depth gauge\n\
             ferrymq_queue_depth{qmgr=\"QM1\",queue=\"Q.\\\"1\\\"\"} 3\n"
        );
    }
}
