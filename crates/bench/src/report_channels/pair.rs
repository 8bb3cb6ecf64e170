//! The two queue managers of `report channels` and the channel between them: creating them with
//! their objects, configuring the sender channel for a point (BATCHSZ, and CONNAME pointing at
//! QM2's listener or at a relay in front of it), starting it and waiting for it to run, and the
//! flows of a point and of the baseline.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::flow::{self, Ends, FlowRun, Proc, Spec, IN_FLIGHT_MSGS_MAX};
use super::Point;
use crate::qm::{error_log, mq_input};
use crate::report::Qms;
use crate::report_ha::procs::{field, free_ports, log_lines, Relay};

pub(crate) const QM1: &str = "QM1";
pub(crate) const QM2: &str = "QM2";
/// The sender and receiver channel.
pub(crate) const CHANNEL: &str = "QM1.QM2";
/// QM1's transmission queue, named like the queue manager it leads to.
const XMITQ: &str = QM2;
/// QM1's remote queue definition, resolving to [`TARGET_Q`] on QM2.
pub(crate) const REMOTE_Q: &str = "BENCH.REMOTE";
/// The queue the getters on QM2 get from.
pub(crate) const TARGET_Q: &str = "BENCH.TARGET";
/// The baseline's local queue on QM1.
pub(crate) const LOCAL_Q: &str = "BENCH.LOCAL";
/// Log file pages of each queue manager (three primary files), as `report standalone`.
const LOG_PAGES: u32 = 16384;
/// Every queue's MAXDEPTH: above the most messages a flow lets be in flight.
const QUEUE_DEPTH: usize = 2 * IN_FLIGHT_MSGS_MAX;
/// How long the channel may take to stop or to reach RUNNING.
const CHANNEL_TIMEOUT: Duration = Duration::from_secs(30);
const CHANNEL_POLL: Duration = Duration::from_millis(100);

/// The MQSC that sets QM1 up: the transmission queue, the remote queue, the sender channel (not
/// started; `port` is QM2's listener) and the baseline's queue.
pub(crate) fn qm1_mqsc(port: u16, batch: u32) -> String {
    format!(
        "DEFINE QLOCAL({XMITQ}) USAGE(XMITQ) MAXDEPTH({QUEUE_DEPTH})\n\
         DEFINE QREMOTE({REMOTE_Q}) RNAME({TARGET_Q}) RQMNAME({QM2}) XMITQ({XMITQ})\n\
         DEFINE CHANNEL({CHANNEL}) CHLTYPE(SDR) CONNAME('127.0.0.1({port})') XMITQ({XMITQ}) BATCHSZ({batch}) NPMSPEED(FAST)\n\
         DEFINE QLOCAL({LOCAL_Q}) MAXDEPTH({QUEUE_DEPTH})\n"
    )
}

/// The MQSC that sets QM2 up: the receiver channel and the target queue. A channel runs with
/// the lower of its two ends' BATCHSZ, as in MQ: the receiver's is the largest, so the sender's
/// decides.
pub(crate) fn qm2_mqsc() -> String {
    format!(
        "DEFINE CHANNEL({CHANNEL}) CHLTYPE(RCVR) BATCHSZ({})\n\
         DEFINE QLOCAL({TARGET_Q}) MAXDEPTH({QUEUE_DEPTH})\n",
        super::BATCH_MAX
    )
}

/// The MQSC that points the sender channel at `port` with `batch`, stopped before and started
/// after by the caller (a channel takes its attributes when it starts).
pub(crate) fn alter_mqsc(port: u16, batch: u32) -> String {
    format!("ALTER CHANNEL({CHANNEL}) CHLTYPE(SDR) CONNAME('127.0.0.1({port})') BATCHSZ({batch})\n")
}

/// The channel's STATUS in `DISPLAY CHSTATUS` output, upper case; None when it shows none.
pub(crate) fn chstatus(display: &str) -> Option<String> {
    display
        .lines()
        .find_map(|l| field(l, "STATUS"))
        .map(|s| s.to_ascii_uppercase())
}

/// How the sender channel is configured right now, as far as the report knows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ChannelState {
    batch: u32,
    rtt_ms: Option<f64>,
}

/// The pair of queue managers, the relay of the current point, and the channel's state.
pub(crate) struct Pair {
    home: PathBuf,
    qms: Qms,
    relay: Option<Relay>,
    /// None: unknown (not started yet, or a point failed); the next point restarts it.
    state: Option<ChannelState>,
    /// Relays started so far (each writes its own log file).
    relay_logs: usize,
}

impl Pair {
    /// Creates and starts QM1 and QM2 in `home`, with their objects.
    pub(crate) fn start(home: &Path) -> Result<Pair, String> {
        let qms = Qms::start_named(home, &[QM1.to_string(), QM2.to_string()], LOG_PAGES, &[])?;
        mq_input(home, &["runmqsc", QM1], &qm1_mqsc(qms.ports[1], 50))?;
        mq_input(home, &["runmqsc", QM2], &qm2_mqsc())?;
        Ok(Pair {
            home: home.to_path_buf(),
            qms,
            relay: None,
            state: None,
            relay_logs: 0,
        })
    }

    fn conn(&self, i: usize) -> String {
        format!("127.0.0.1({})", self.qms.ports[i])
    }

    fn runmqsc(&self, qm: &str, script: &str) -> Result<String, String> {
        mq_input(&self.home, &["runmqsc", qm], script)
    }

    /// The sender's STATUS now (None: no status, e.g. never started).
    fn status(&self) -> Option<String> {
        self.runmqsc(QM1, &format!("DISPLAY CHSTATUS({CHANNEL})\n"))
            .ok()
            .and_then(|t| chstatus(&t))
    }

    /// Waits until the sender's status satisfies `done`; the last status seen on timeout.
    fn wait_status(&self, what: &str, done: impl Fn(Option<&str>) -> bool) -> Result<(), String> {
        let t = Instant::now();
        loop {
            let s = self.status();
            if done(s.as_deref()) {
                return Ok(());
            }
            if t.elapsed() > CHANNEL_TIMEOUT {
                return Err(format!(
                    "channel {CHANNEL} did not {what} within {} s (STATUS {})",
                    CHANNEL_TIMEOUT.as_secs(),
                    s.as_deref().unwrap_or("none")
                ));
            }
            std::thread::sleep(CHANNEL_POLL);
        }
    }

    /// The next point's channel may be left in any state by a failure: configure it afresh.
    pub(crate) fn forget_channel_state(&mut self) {
        self.state = None;
    }

    /// Makes the sender channel run with `batch`, directly or through a relay adding `rtt_ms`:
    /// stop it (if it may be running), drop the old relay, start the new one, alter the channel,
    /// start it and wait for RUNNING. Nothing is done when it already runs that way.
    fn configure(&mut self, batch: u32, rtt_ms: Option<f64>) -> Result<(), String> {
        let want = ChannelState { batch, rtt_ms };
        if self.state == Some(want) {
            return Ok(());
        }
        self.state = None;
        if self.status().is_some() {
            // A stopped channel answers the STOP with an error: the status is what counts.
            let _ = self.runmqsc(QM1, &format!("STOP CHANNEL({CHANNEL})\n"));
            self.wait_status("stop", |s| {
                matches!(s, None | Some("STOPPED") | Some("INACTIVE"))
            })?;
        }
        self.relay = None;
        let port = match rtt_ms {
            None => self.qms.ports[1],
            Some(rtt) => {
                let listen = free_ports(1)?[0];
                self.relay_logs += 1;
                let log = self.home.join(format!("relay-{}.log", self.relay_logs));
                self.relay = Some(Relay::start(listen, self.qms.ports[1], rtt, &log)?);
                listen
            }
        };
        self.runmqsc(QM1, &alter_mqsc(port, batch))?;
        self.runmqsc(QM1, &format!("START CHANNEL({CHANNEL})\n"))?;
        self.wait_status("reach RUNNING", |s| s == Some("RUNNING"))?;
        self.state = Some(want);
        Ok(())
    }

    fn procs(&self) -> Vec<Proc> {
        let mut v = vec![
            Proc {
                label: QM1,
                pid: self.qms.pids[0],
            },
            Proc {
                label: QM2,
                pid: self.qms.pids[1],
            },
        ];
        if let Some(r) = &self.relay {
            v.push(Proc {
                label: "relay",
                pid: r.pid(),
            });
        }
        v
    }

    /// Checks a flow's outcome: it must have moved messages without errors.
    fn checked(what: &str, r: FlowRun) -> Result<FlowRun, String> {
        if let Some(e) = &r.first_error {
            return Err(format!("{what}: {} error(s), first: {e}", r.errors));
        }
        if r.msgs == 0 {
            return Err(format!("{what}: no message arrived in the window"));
        }
        Ok(r)
    }

    /// The local put+get baseline on QM1: putters and getters on one local queue.
    pub(crate) fn measure_baseline(&mut self, spec: &Spec) -> Result<FlowRun, String> {
        let ends = Ends {
            put_qm: QM1.into(),
            put_conn: self.conn(0),
            put_queue: LOCAL_Q.into(),
            get_qm: QM1.into(),
            get_conn: self.conn(0),
            get_queue: LOCAL_Q.into(),
        };
        // The relay of a distance point would only take CPU here: the channel is idle.
        let procs = self.procs();
        Self::checked("baseline", flow::measure(spec, &ends, &procs[..1])?)
    }

    /// A point: putters on QM1 to the remote queue, getters on QM2 from the target queue, over
    /// the channel configured for it.
    pub(crate) fn measure_channel(&mut self, p: Point, spec: &Spec) -> Result<FlowRun, String> {
        self.configure(p.batch, p.rtt_ms)?;
        let ends = Ends {
            put_qm: QM1.into(),
            put_conn: self.conn(0),
            put_queue: REMOTE_Q.into(),
            get_qm: QM2.into(),
            get_conn: self.conn(1),
            get_queue: TARGET_Q.into(),
        };
        let r = flow::measure(spec, &ends, &self.procs())?;
        Self::checked(&format!("channel {CHANNEL}"), r).map_err(|e| {
            format!(
                "{e} (channel STATUS {})",
                self.status().as_deref().unwrap_or("none")
            )
        })
    }

    /// Notable lines of both queue managers' error logs.
    pub(crate) fn findings(&self) -> Vec<String> {
        let mut v = Vec::new();
        for qm in [QM1, QM2] {
            let log = error_log(&self.home.join("qmgrs").join(qm));
            v.extend(log_lines(&format!("{qm}: "), &log));
        }
        v
    }

    /// Stops the channel and the relay; the queue managers end when the pair is dropped.
    pub(crate) fn end(mut self) {
        if self.status().is_some() {
            let _ = self.runmqsc(QM1, &format!("STOP CHANNEL({CHANNEL}) MODE(FORCE)\n"));
        }
        self.relay = None;
    }
}
