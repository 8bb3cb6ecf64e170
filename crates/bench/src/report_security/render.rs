//! The security section of the standalone report, as markdown: the cost table with its goals,
//! every round, and the connection rates.

use std::fmt::Write as _;

use super::{
    cost_pct, cpu_cost_pct, goal_cell, Mode, SecurityResults, AUTH_COST_GOAL_PCT,
    TLS_COST_GOAL_PCT, TLS_GOAL_SIZE_BYTES,
};

fn ratio(plain: f64, rate: f64) -> String {
    if plain > 0.0 {
        format!("{:.3}", rate / plain)
    } else {
        "-".into()
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

/// The goal a mode is held to at `size`, if any.
fn goal(mode: Mode, size: usize) -> Option<f64> {
    match mode {
        Mode::Plain => None,
        Mode::Tls => (size == TLS_GOAL_SIZE_BYTES).then_some(TLS_COST_GOAL_PCT),
        Mode::Auth => Some(AUTH_COST_GOAL_PCT),
    }
}

/// The markdown of the security section.
pub(crate) fn markdown(s: &SecurityResults) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## Security: TLS, authorization and connection rate\n\n\
         Produced by `{}` with {}, on one queue manager (PERFSEC, 10 queue pairs, MAXDEPTH 5000), \
         non-persistent, {} responders, the modes in turn (each round starting with the next mode) for {} round(s) \
         of the window given in each run, each mode's best round counted. Modes: **plain** = channel BENCH.SVRCONN, no user asserted \
         (the queue manager's own user, an administrator); **TLS** = channel BENCH.TLS with \
         SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED), a development CA's certificates, the same user; \
         **authorized user** = BENCH.SVRCONN as a user-store user who is no administrator, its password \
         checked at connect (CONNAUTH CHCKCLNT(OPTIONAL) ADOPTCTX(YES)), allowed by AUTHRECs only \
         CONNECT and PUT/GET on the queue pairs. Cost = share of the plain rate lost; goals: TLS under \
         {TLS_COST_GOAL_PCT}% at {} B, authorized user under {AUTH_COST_GOAL_PCT}%. CPU cost = extra CPU \
         (queue manager and client together) per round trip against plain: on a machine shared with \
         other work the rate follows the CPU the processes get, so read both.\n",
        s.command,
        s.version,
        s.responders,
        s.rounds,
        TLS_GOAL_SIZE_BYTES
    );
    let _ = writeln!(
        md,
        "| Size (B) | Requesters | Mode | Rate (RT/s) | Ratio to plain | Cost | Goal | CPU cost | QM CPU% | Client CPU% | QM CPU µs/RT | Client CPU µs/RT | p50 (ms) |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
    );
    for row in &s.rates {
        let plain_run = row.best(Mode::Plain);
        let plain = plain_run.map_or(0.0, |r| r.round_trips_per_s);
        let pct = |c: Option<f64>| opt(c, 1) + if c.is_some() { "%" } else { "" };
        for mode in Mode::ALL {
            let Some(r) = row.best(mode) else { continue };
            let (cost, goal_s, cpu_cost) = if mode == Mode::Plain {
                ("-".to_string(), "-".to_string(), "-".to_string())
            } else {
                let c = cost_pct(plain, r.round_trips_per_s);
                (
                    pct(c),
                    goal(mode, row.size).map_or_else(|| "-".into(), |g| goal_cell(c, g)),
                    pct(plain_run.and_then(|p| cpu_cost_pct(p, r))),
                )
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {:.1} | {} | {:.1} | {:.3} |",
                row.size,
                row.requesters,
                mode.label(),
                r.round_trips_per_s,
                ratio(plain, r.round_trips_per_s),
                cost,
                goal_s,
                cpu_cost,
                opt(r.server_cpu_pct, 1),
                r.client_cpu_pct,
                opt(r.server_cpu_us_per_rt, 1),
                r.client_cpu_us_per_rt,
                r.latency_ms_p50
            );
        }
    }
    let _ = writeln!(md, "\nEvery round (window in seconds, errors):\n");
    let _ = writeln!(
        md,
        "| Size (B) | Requesters | Round | Mode | Rate (RT/s) | QM CPU% | Client CPU% | Window (s) | Errors |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---|---:|---:|---:|---:|---:|");
    for row in &s.rates {
        for r in &row.runs {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.0} | {} | {:.1} | {:.1} | {} |",
                row.size,
                row.requesters,
                r.round + 1,
                r.mode.label(),
                r.result.round_trips_per_s,
                opt(r.result.server_cpu_pct, 1),
                r.result.client_cpu_pct,
                r.result.duration_s,
                r.result.errors
            );
        }
    }
    if !s.connections.is_empty() {
        let _ = writeln!(
            md,
            "\n### Connection rate\n\n\
             Each connector connects (TCP, TLS where asked, the channel, the user and password where asked), \
             disconnects and starts again; one connector is sequential. Latency is one connect plus its disconnect. \
             With a password, a user's first connect costs one argon2id verification on the queue manager; \
             its reconnects within five minutes are let in by the remembered verification (a keyed digest), which is what this row mostly measures.\n"
        );
        let _ = writeln!(
            md,
            "| Mode | Connectors | Connects/s | Ratio to plain | QM CPU% | Client CPU% | QM CPU ms/connect | Client CPU ms/connect | p50 (ms) | p99 (ms) | Window (s) | Errors |"
        );
        let _ = writeln!(
            md,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for r in &s.connections {
            let plain = s
                .connections
                .iter()
                .find(|p| p.mode == Mode::Plain && p.connectors == r.connectors)
                .map_or(0.0, |p| p.connects_per_s);
            let _ = writeln!(
                md,
                "| {} | {} | {:.1} | {} | {} | {:.1} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {} |",
                r.mode.label(),
                r.connectors,
                r.connects_per_s,
                ratio(plain, r.connects_per_s),
                opt(r.server_cpu_pct, 1),
                r.client_cpu_pct,
                opt(r.server_cpu_ms_per_connect, 2),
                r.client_cpu_ms_per_connect,
                r.latency_ms_p50,
                r.latency_ms_p99,
                r.duration_s,
                r.errors
            );
        }
    }
    md
}
