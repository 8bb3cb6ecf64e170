//! The security section of `ferrymq-bench report standalone`: what TLS, password authentication
//! and object authorities cost, measured side by side with plain TCP, in the same run, on one
//! queue manager (PERFSEC) made for it.
//!
//! - Request/Responder round trips per second and CPU per round trip in three modes: plain TCP
//!   (channel BENCH.SVRCONN, no user asserted, so the connections run as the queue manager's own
//!   user, an administrator), TLS (channel BENCH.TLS, SSLCIPH(ANY_TLS12_OR_HIGHER)
//!   SSLCAUTH(REQUIRED), development certificates made by `mkdevcerts` in the report's temporary
//!   home) and an authorized user (BENCH.SVRCONN as a user of the queue manager's user store who
//!   is no administrator, authenticated by password with CONNAUTH CHCKCLNT(OPTIONAL) ADOPTCTX(YES)
//!   and allowed only what AUTHRECs grant on the queue pairs). TLS and the authorized user are
//!   given as a ratio to plain, next to their goals, and by CPU per round trip (both sides),
//!   which other work on a shared machine disturbs less than the rate. The modes run in turn for
//!   several rounds, each round starting with the next mode, so the drift of a shared machine
//!   and the order touch them alike; each mode's best round counts.
//! - Connection rate (connects, each followed by its disconnect, per second) with one and with
//!   several connectors: plain, TLS and with a password (one argon2id verification, then
//!   reconnects let in by the queue manager's remembered verification).
//!
//! The channels, user and authorities are the bench's own: nothing depends on
//! SYSTEM.DEF.SVRCONN being open.

mod connrate;
mod render;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::cph::{self, Args, ConnSecurity, RunResult};
use crate::qm::{mq, mq_input};
use crate::report::Qms;

pub(crate) use render::markdown;

/// The queue manager the security rows run on.
const QM: &str = "PERFSEC";
/// A channel without TLS; plain and authorized-user connections name it.
const PLAIN_CHANNEL: &str = "BENCH.SVRCONN";
/// A channel that requires TLS and a client certificate (MQ's default SSLCAUTH).
const TLS_CHANNEL: &str = "BENCH.TLS";
/// The user store's user of the authorized-user mode, and its group.
const APP_USER: &str = "benchapp";
const APP_GROUP: &str = "benchapps";
/// Queue pairs, as in the standalone rows.
const QUEUES: usize = 10;

/// Goal: TLS costs under this share of the plain rate at 2 KB.
pub(crate) const TLS_COST_GOAL_PCT: f64 = 25.0;
/// The message size the TLS goal is stated at.
pub(crate) const TLS_GOAL_SIZE_BYTES: usize = 2048;
/// Goal: an authorized user (password at connect, AUTHRECs) costs under this share of the rate
/// of the administrator.
pub(crate) const AUTH_COST_GOAL_PCT: f64 = 3.0;

/// How the client connections of a measurement identify themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mode {
    /// Plain TCP, the queue manager's own user (an administrator).
    Plain,
    /// TLS with a client certificate, the same user as plain.
    Tls,
    /// Plain TCP as a user of the user store with its password, authorized by AUTHRECs.
    Auth,
}

impl Mode {
    pub(crate) const ALL: [Mode; 3] = [Mode::Plain, Mode::Tls, Mode::Auth];

    /// The order of round `round`: each round starts with the next mode.
    pub(crate) fn in_round(round: usize) -> [Mode; 3] {
        let mut m = Mode::ALL;
        m.rotate_left(round % Mode::ALL.len());
        m
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Mode::Plain => "plain TCP, admin",
            Mode::Tls => "TLS, admin",
            Mode::Auth => "plain TCP, authorized user with password",
        }
    }
}

/// What the security section measures and for how long.
#[derive(Debug, Clone)]
pub(crate) struct SecurityPlan {
    pub sizes: Vec<usize>,
    pub requesters: Vec<usize>,
    /// Each mode runs this many times, in turn with the others.
    pub rounds: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Connectors of the connection-rate runs (1: sequential).
    pub connectors: Vec<usize>,
    pub conn_warmup: Duration,
    pub conn_duration: Duration,
}

impl SecurityPlan {
    pub(crate) fn full() -> SecurityPlan {
        SecurityPlan {
            sizes: vec![256, 2048, 20_480],
            requesters: vec![1, 8, 32],
            rounds: 3,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(8),
            connectors: vec![1, 4, 16],
            conn_warmup: Duration::from_secs(1),
            conn_duration: Duration::from_secs(5),
        }
    }

    pub(crate) fn quick() -> SecurityPlan {
        SecurityPlan {
            sizes: vec![2048],
            requesters: vec![8],
            rounds: 2,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(3),
            connectors: vec![1, 4],
            conn_warmup: Duration::from_millis(500),
            conn_duration: Duration::from_secs(3),
        }
    }
}

/// One Request/Responder run of one mode.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ModeRun {
    pub mode: Mode,
    pub round: usize,
    pub result: RunResult,
}

/// The runs of every mode at one message size and requester count.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RateRow {
    pub size: usize,
    pub requesters: usize,
    pub runs: Vec<ModeRun>,
}

impl RateRow {
    /// The mode's best round (the highest rate).
    pub(crate) fn best(&self, mode: Mode) -> Option<&RunResult> {
        self.runs
            .iter()
            .filter(|r| r.mode == mode)
            .map(|r| &r.result)
            .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s))
    }
}

/// Everything the security section measured, and how.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SecurityResults {
    /// The command line the report was produced with.
    pub command: String,
    pub version: String,
    pub rounds: usize,
    pub responders: usize,
    pub rates: Vec<RateRow>,
    pub connections: Vec<connrate::ConnRate>,
}

/// How much slower `rate` is than `plain`, in percent of `plain` (negative: faster).
pub(crate) fn cost_pct(plain: f64, rate: f64) -> Option<f64> {
    (plain > 0.0).then(|| (1.0 - rate / plain) * 100.0)
}

/// How much more CPU (queue manager and client together) a round trip of `r` takes than one of
/// `plain`, in percent; None without the queue manager's CPU.
pub(crate) fn cpu_cost_pct(plain: &RunResult, r: &RunResult) -> Option<f64> {
    let total = |r: &RunResult| r.server_cpu_us_per_rt.map(|s| s + r.client_cpu_us_per_rt);
    let (p, x) = (total(plain)?, total(r)?);
    (p > 0.0).then(|| (x / p - 1.0) * 100.0)
}

/// The goal cell: `< 25%: pass` or `< 25%: FAIL`.
pub(crate) fn goal_cell(cost_pct: Option<f64>, goal_pct: f64) -> String {
    match cost_pct {
        Some(c) if c < goal_pct => format!("< {goal_pct}%: pass"),
        Some(_) => format!("< {goal_pct}%: FAIL"),
        None => format!("< {goal_pct}%: no plain rate"),
    }
}

/// The queue manager of the security rows, with what its clients need to reach it.
struct SecureQm {
    qms: Qms,
    certs: PathBuf,
    password: String,
}

impl SecureQm {
    fn port(&self) -> u16 {
        self.qms.ports[0]
    }

    fn pid(&self) -> u32 {
        self.qms.pids[0]
    }

    /// The connection settings of `mode`.
    fn security(&self, mode: Mode) -> ConnSecurity {
        let plain = ConnSecurity {
            channel: Some(PLAIN_CHANNEL.into()),
            ..Default::default()
        };
        match mode {
            Mode::Plain => plain,
            Mode::Tls => ConnSecurity {
                channel: Some(TLS_CHANNEL.into()),
                tls: Some(ferrymq_client::TlsOptions {
                    ca_file: self.certs.join("ca.pem"),
                    cert_file: Some(self.certs.join(format!("{APP_USER}.pem"))),
                    key_file: Some(self.certs.join(format!("{APP_USER}.key"))),
                    cipher: None,
                    server_name: None,
                }),
                ..Default::default()
            },
            Mode::Auth => ConnSecurity {
                user: APP_USER.into(),
                password: self.password.clone(),
                ..plain
            },
        }
    }
}

/// A password for the throwaway user, different in every run.
fn throwaway_password() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("Bench-{:016x}", h.finish())
}

/// The MQSC that sets PERFSEC up: the queue pairs, the bench's channels, the password check
/// (optional, so that plain and TLS connections, which give none, run as before) and the
/// authorized user's authorities (connect, and put and get on the queue pairs only).
fn setup_mqsc() -> String {
    let mut s = format!(
        "DEFINE CHANNEL({PLAIN_CHANNEL}) CHLTYPE(SVRCONN)\n\
         DEFINE CHANNEL({TLS_CHANNEL}) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED)\n\
         DEFINE AUTHINFO(BENCH.IDPW) AUTHTYPE(IDPWOS) CHCKCLNT(OPTIONAL) ADOPTCTX(YES) FAILDLAY(0)\n\
         ALTER QMGR CONNAUTH(BENCH.IDPW)\n\
         REFRESH SECURITY TYPE(CONNAUTH)\n\
         SET AUTHREC OBJTYPE(QMGR) GROUP('{APP_GROUP}') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE('REQUEST*') OBJTYPE(QUEUE) GROUP('{APP_GROUP}') AUTHADD(PUT,GET)\n\
         SET AUTHREC PROFILE('REPLY*') OBJTYPE(QUEUE) GROUP('{APP_GROUP}') AUTHADD(PUT,GET)\n"
    );
    for i in 0..QUEUES {
        s.push_str(&format!(
            "DEFINE QLOCAL(REQUEST{i}) MAXDEPTH(5000)\nDEFINE QLOCAL(REPLY{i}) MAXDEPTH(5000)\n"
        ));
    }
    s
}

/// Creates and starts PERFSEC in `home`: development certificates in `<home>/certs` named in its
/// qm.ini, the authorized user in its user store, then the objects of [`setup_mqsc`].
fn start_qm(home: &Path) -> Result<SecureQm, String> {
    let certs = home.join("certs");
    let password = throwaway_password();
    let certs_s = certs.display().to_string();
    let prepare = |name: &str| -> Result<(), String> {
        mq(
            home,
            &[
                "mkdevcerts",
                "--dir",
                &certs_s,
                "-m",
                name,
                "--client",
                APP_USER,
            ],
        )?;
        mq_input(
            home,
            &[
                "setmqusr",
                "-m",
                name,
                "-u",
                APP_USER,
                "-g",
                APP_GROUP,
                "--password-stdin",
            ],
            &format!("{password}\n"),
        )?;
        Ok(())
    };
    let qms = Qms::start_prepared(home, &[QM.to_string()], 16384, &[], &prepare)?;
    mq_input(home, &["runmqsc", QM], &setup_mqsc())?;
    Ok(SecureQm {
        qms,
        certs,
        password,
    })
}

/// Runs the security section in `home`; `log` shows progress.
pub(crate) fn run(
    plan: &SecurityPlan,
    home: &Path,
    command: &str,
    log: &dyn Fn(&str),
) -> Result<SecurityResults, String> {
    let qm = start_qm(home)?;
    let responders = QUEUES;
    let mut out = SecurityResults {
        command: command.to_string(),
        version: format!("ferrymq {}", env!("CARGO_PKG_VERSION")),
        rounds: plan.rounds,
        responders,
        rates: Vec::new(),
        connections: Vec::new(),
    };
    let conn = format!("127.0.0.1({})", qm.port());
    for &size in &plan.sizes {
        for &requesters in &plan.requesters {
            let mut row = RateRow {
                size,
                requesters,
                runs: Vec::new(),
            };
            for round in 0..plan.rounds.max(1) {
                for mode in Mode::in_round(round) {
                    let a = Args {
                        module: cph::Module::Rr,
                        qms: vec![QM.into()],
                        conns: vec![conn.clone()],
                        requesters,
                        responders,
                        size,
                        persistent: false,
                        syncpoint: None,
                        duration: plan.duration,
                        warmup: plan.warmup,
                        queues: QUEUES,
                        request_prefix: "REQUEST".into(),
                        reply_prefix: "REPLY".into(),
                        rate: 0,
                        json: false,
                        live: false,
                        server_pids: vec![qm.pid()],
                        setup: false,
                        client_threads: 1,
                        security: qm.security(mode),
                    };
                    let r = cph::run(&a)?;
                    if r.round_trips == 0 {
                        return Err(format!(
                            "security rows: {} completed no round trip ({})",
                            mode.label(),
                            r.first_error.as_deref().unwrap_or("no error reported")
                        ));
                    }
                    log(&format!(
                        "report: security {size} B, {requesters} requesters, round {}: {:<42} {:>9.0} RT/s  QM CPU {:>5.1}%  client CPU {:>5.1}%",
                        round + 1,
                        mode.label(),
                        r.round_trips_per_s,
                        r.server_cpu_pct.unwrap_or(0.0),
                        r.client_cpu_pct
                    ));
                    row.runs.push(ModeRun {
                        mode,
                        round,
                        result: r,
                    });
                }
            }
            out.rates.push(row);
        }
    }
    for &connectors in &plan.connectors {
        for mode in Mode::ALL {
            let mut o =
                ferrymq_client::ConnectOptions::client(QM, &conn).map_err(|e| e.to_string())?;
            o.app_name = "ferrymq connrate".into();
            qm.security(mode).apply(&mut o);
            let r = connrate::measure(
                mode,
                &o,
                connectors,
                plan.conn_warmup,
                plan.conn_duration,
                qm.pid(),
            )?;
            log(&format!(
                "report: connection rate, {connectors} connectors: {:<42} {:>8.1} connects/s  QM CPU {:>5.1}%  client CPU {:>5.1}%{}",
                mode.label(),
                r.connects_per_s,
                r.server_cpu_pct.unwrap_or(0.0),
                r.client_cpu_pct,
                match &r.first_error {
                    Some(e) => format!("  {} errors, first: {e}", r.errors),
                    None => String::new(),
                }
            ));
            out.connections.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_is_the_share_of_the_plain_rate_lost_and_the_goal_says_pass_or_fail() {
        assert_eq!(cost_pct(1000.0, 800.0).map(|c| c.round()), Some(20.0));
        assert_eq!(cost_pct(0.0, 800.0), None);
        assert!(cost_pct(1000.0, 1100.0).unwrap() < 0.0);
        assert_eq!(goal_cell(Some(20.0), 25.0), "< 25%: pass");
        assert_eq!(goal_cell(Some(25.0), 25.0), "< 25%: FAIL");
        assert_eq!(goal_cell(Some(3.5), 3.0), "< 3%: FAIL");
        assert_eq!(goal_cell(None, 3.0), "< 3%: no plain rate");
    }

    #[test]
    fn each_round_starts_with_the_next_mode() {
        assert_eq!(Mode::in_round(0), Mode::ALL);
        assert_eq!(Mode::in_round(1), [Mode::Tls, Mode::Auth, Mode::Plain]);
        assert_eq!(Mode::in_round(3), Mode::ALL);
    }

    #[test]
    fn the_password_is_not_in_the_setup_script_and_each_mode_has_its_channel() {
        let s = setup_mqsc();
        assert!(s.contains("SSLCIPH(ANY_TLS12_OR_HIGHER)"), "{s}");
        assert!(s.contains("DEFINE QLOCAL(REPLY9)"), "{s}");
        assert!(!s.contains("Bench-"), "{s}");
        let pw = throwaway_password();
        assert!(pw.len() > 10);
        let q = SecureQm {
            qms: Qms {
                home: PathBuf::new(),
                names: Vec::new(),
                ports: vec![1],
                pids: vec![1],
                bin: None,
            },
            certs: PathBuf::from("/c"),
            password: pw.clone(),
        };
        assert_eq!(
            q.security(Mode::Plain).channel.as_deref(),
            Some(PLAIN_CHANNEL)
        );
        assert!(q.security(Mode::Plain).tls.is_none());
        let t = q.security(Mode::Tls);
        assert_eq!(t.channel.as_deref(), Some(TLS_CHANNEL));
        assert_eq!(t.tls.unwrap().ca_file, PathBuf::from("/c/ca.pem"));
        let a = q.security(Mode::Auth);
        assert_eq!(
            (a.user.as_str(), a.password.as_str()),
            (APP_USER, pw.as_str())
        );
        assert!(!format!("{a:?}").contains(&pw));
    }
}
