//! The processes `report dr` starts: standalone queue managers with and without DR, DR
//! secondaries (optionally behind a latency relay on the DR link), and reading a primary's
//! `dspmq -o dr` line.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How often a run's DR lag is sampled.
const LAG_SAMPLE: Duration = Duration::from_millis(1000);

/// What `dspmq -o dr` says of one DR primary.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub(super) struct DrLag {
    pub(super) qm: String,
    /// DRSTATUS: Normal, Connecting, FullCopy or Disconnected.
    pub(super) status: Option<String>,
    pub(super) lag_bytes: Option<u64>,
    pub(super) lag_secs: Option<f64>,
    pub(super) max_lag: Option<u64>,
    /// The status line as printed, or why there is none.
    pub(super) line: String,
}

impl DrLag {
    pub(super) fn is_normal(&self) -> bool {
        self.status
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("normal"))
    }
}

/// The DR line of `dspmq -o dr` output for queue manager `qm`: the line with DRSTATUS (the
/// Primary's, should there be several), its fields parsed.
pub(super) fn parse_dr(qm: &str, text: &str) -> Option<DrLag> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| field(l, "DRSTATUS").is_some())
        .collect();
    let line = lines
        .iter()
        .find(|l| field(l, "DRROLE").is_some_and(|r| r.eq_ignore_ascii_case("primary")))
        .or(lines.first())?;
    Some(DrLag {
        qm: field(line, "QMNAME").unwrap_or_else(|| qm.to_string()),
        status: field(line, "DRSTATUS"),
        lag_bytes: field(line, "LAGBYTES").and_then(|v| v.parse().ok()),
        lag_secs: field(line, "LAGSECS").and_then(|v| v.parse().ok()),
        max_lag: field(line, "MAXLAG").and_then(|v| v.parse().ok()),
        line: line.trim().to_string(),
    })
}

/// `dspmq -o dr -m qm` with FERRYMQ_HOME=`home`, parsed.
pub(super) fn dr_status(home: &Path, qm: &str) -> Result<DrLag, String> {
    let out = mq(home, &["dspmq", "-o", "dr", "-m", qm])?;
    parse_dr(qm, &out)
        .ok_or_else(|| format!("{qm}: no DRSTATUS in dspmq -o dr output: {}", out.trim()))
}

/// `host(port)` of a DR address.
pub(super) fn dr_addr(port: u16) -> String {
    format!("{DR_HOST}({port})")
}

/// The `crtmqm` arguments of a DR primary shipping to `port` on this machine.
pub(super) fn primary_args(port: u16, max_lag: Option<u64>) -> Vec<String> {
    let mut a = vec![
        "-dr".to_string(),
        "primary".into(),
        "-drr".into(),
        dr_addr(port),
    ];
    if let Some(m) = max_lag {
        a.extend(["-drlag".to_string(), m.to_string()]);
    }
    a
}

/// The `crtmqm` arguments of a DR secondary listening for its stream on `port`.
pub(super) fn secondary_args(port: u16) -> Vec<String> {
    vec![
        "-dr".into(),
        "secondary".into(),
        "-drl".into(),
        dr_addr(port),
    ]
}

/// Ends the queue managers of `qms` (`endmqm -i`, then `dltmqm`, by dropping it), kills any
/// that are still running after the grace period by pid, and forgets their pids.
fn stop(qms: Option<Qms>) {
    if let Some(q) = qms {
        let pids = q.pids.clone();
        let label = q.names.join(",");
        drop(q);
        end_or_kill(&label, &pids);
        pids.iter().for_each(|p| unregister(*p));
    }
}

/// Starts queue managers with `Qms::start_named` and registers their pids for the interrupt
/// handler.
fn start_qms(home: &Path, names: &[String], extra: &[Vec<String>]) -> Result<Qms, String> {
    std::fs::create_dir_all(home).map_err(|e| format!("{}: {e}", home.display()))?;
    let q = Qms::start_named(home, names, LOG_PAGES, extra)?;
    q.pids.iter().for_each(|p| register(*p));
    Ok(q)
}

/// The notable lines of every queue manager log in `qms`.
fn qms_findings(tag: &str, role: &str, qms: &Qms) -> Vec<String> {
    qms.names
        .iter()
        .flat_map(|n| {
            let text = crate::qm::error_log(&qms.home.join("qmgrs").join(n));
            log_lines(&format!("[{tag}] {n} ({role})"), &text)
        })
        .collect()
}

/// DR secondaries, one per queue manager name, all in one home of their own, each listening for
/// its DR stream; with an RTT, a relay in front of each DR port adds that round trip.
/// Dropping it stops the relays and the secondaries.
pub(super) struct Secondaries {
    tag: String,
    qms: Option<Qms>,
    /// Where each secondary listens for its DR stream.
    pub(super) dr_ports: Vec<u16>,
    /// Where its primary sends the stream: the relay's port, else the DR port itself.
    pub(super) targets: Vec<u16>,
    relays: Vec<Relay>,
}

impl Secondaries {
    pub(super) fn start(
        home: &Path,
        tag: &str,
        names: &[String],
        rtt_ms: Option<f64>,
    ) -> Result<Secondaries, String> {
        let dr_ports = free_ports(names.len())?;
        let extra: Vec<Vec<String>> = dr_ports.iter().map(|p| secondary_args(*p)).collect();
        let qms = start_qms(home, names, &extra)?;
        let pids = qms.pids.clone();
        let mut s = Secondaries {
            tag: tag.to_string(),
            qms: Some(qms),
            targets: dr_ports.clone(),
            dr_ports,
            relays: Vec::new(),
        };
        for (i, (&port, &pid)) in s.dr_ports.iter().zip(&pids).enumerate() {
            let name = &names[i];
            let up = wait_listening(port, Duration::from_secs(10), || {
                if alive(pid) {
                    Ok(())
                } else {
                    Err(format!(
                        "DR secondary {name} (pid {pid}) ended; see its log in {}",
                        home.display()
                    ))
                }
            })?;
            if !up {
                return Err(format!(
                    "DR secondary {name} does not listen for its DR stream on {} (crtmqm -drl)",
                    dr_addr(port)
                ));
            }
        }
        if let Some(rtt) = rtt_ms {
            let listen = free_ports(names.len())?;
            for (i, &l) in listen.iter().enumerate() {
                let log = home.join(format!("relay-{}.log", names[i]));
                s.relays.push(Relay::start(l, s.dr_ports[i], rtt, &log)?);
            }
            s.targets = listen;
        }
        Ok(s)
    }

    /// The `crtmqm` arguments that make a queue manager (or every instance of an HA group) the
    /// DR primary of secondary `i`.
    pub(super) fn primary_args(&self, i: usize, max_lag: Option<u64>) -> Vec<String> {
        primary_args(self.targets[i], max_lag)
    }

    pub(super) fn pids(&self) -> Vec<u32> {
        self.qms
            .as_ref()
            .map(|q| q.pids.clone())
            .unwrap_or_default()
    }

    pub(super) fn findings(&self) -> Vec<String> {
        self.qms
            .as_ref()
            .map(|q| qms_findings(&self.tag, "DR secondary", q))
            .unwrap_or_default()
    }
}

impl Drop for Secondaries {
    fn drop(&mut self) {
        self.relays.clear();
        stop(self.qms.take());
    }
}

/// Standalone queue managers of one step: without DR, or DR primaries each shipping to its own
/// secondary. Dropping it stops the primaries, then the secondaries, and deletes its directory.
pub(super) struct Site {
    root: PathBuf,
    tag: String,
    primaries: Option<Qms>,
    secondaries: Option<Secondaries>,
}

impl Site {
    /// `names` without DR, in `root` as their FERRYMQ_HOME.
    pub(super) fn plain(root: &Path, names: &[String]) -> Result<Site, String> {
        Ok(Site {
            root: root.to_path_buf(),
            tag: tag_of(root),
            primaries: Some(start_qms(root, names, &[])?),
            secondaries: None,
        })
    }

    /// `names` as DR primaries in `root/primary`, their secondaries (same names) in
    /// `root/secondary`, with a relay adding `rtt_ms` on each DR link if given.
    pub(super) fn dr(
        root: &Path,
        names: &[String],
        rtt_ms: Option<f64>,
        max_lag: Option<u64>,
    ) -> Result<Site, String> {
        let tag = tag_of(root);
        let mut site = Site {
            root: root.to_path_buf(),
            secondaries: Some(Secondaries::start(
                &root.join("secondary"),
                &tag,
                names,
                rtt_ms,
            )?),
            tag,
            primaries: None,
        };
        let extra: Vec<Vec<String>> = match &site.secondaries {
            Some(s) => (0..names.len())
                .map(|i| s.primary_args(i, max_lag))
                .collect(),
            None => Vec::new(),
        };
        site.primaries = Some(start_qms(&root.join("primary"), names, &extra)?);
        Ok(site)
    }

    /// What cph runs against: the primaries, with the secondaries' processes measured too.
    pub(super) fn target(&self, label: &str) -> Target {
        let (names, ports, mut pids, home) = match &self.primaries {
            Some(q) => (
                q.names.clone(),
                q.ports.clone(),
                q.pids.clone(),
                q.home.clone(),
            ),
            None => Default::default(),
        };
        let primary_pids = pids.len();
        let secondaries = self.secondaries.as_ref();
        pids.extend(secondaries.map(Secondaries::pids).unwrap_or_default());
        Target {
            label: label.to_string(),
            conns: ports.iter().map(|p| format!("127.0.0.1({p})")).collect(),
            primary_pids,
            pids,
            status: match secondaries {
                Some(_) => names
                    .iter()
                    .map(|n| (n.clone(), vec![home.clone()]))
                    .collect(),
                None => Vec::new(),
            },
            qms: names,
        }
    }

    pub(super) fn findings(&self) -> Vec<String> {
        let role = if self.secondaries.is_some() {
            "DR primary"
        } else {
            "no DR"
        };
        let mut out = self
            .primaries
            .as_ref()
            .map(|q| qms_findings(&self.tag, role, q))
            .unwrap_or_default();
        out.extend(
            self.secondaries
                .as_ref()
                .map(Secondaries::findings)
                .unwrap_or_default(),
        );
        out
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        stop(self.primaries.take());
        self.secondaries = None;
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A directory's name, which says which step it belongs to.
pub(super) fn tag_of(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What a run is pointed at: the queue managers, their connection names and the processes
/// whose CPU cph measures.
pub(super) struct Target {
    pub(super) label: String,
    pub(super) qms: Vec<String>,
    pub(super) conns: Vec<String>,
    /// The primaries' (or HA instances', or plain queue managers') processes, then the DR
    /// secondaries'.
    pub(super) pids: Vec<u32>,
    /// How many of `pids` are on the primary side.
    pub(super) primary_pids: usize,
    /// Per DR primary queue manager: the homes to ask `dspmq -o dr` in, best first (an HA
    /// group's active instance, then the others). Empty without DR.
    pub(super) status: Vec<(String, Vec<PathBuf>)>,
}

impl Target {
    /// An HA group, as a DR primary when `dr` holds its secondary; `active` is the instance
    /// found active, asked first for the DR status.
    pub(super) fn ha(label: &str, g: &HaGroup, active: usize, dr: Option<&Secondaries>) -> Target {
        let mut pids = g.pids.clone();
        pids.extend(dr.map(Secondaries::pids).unwrap_or_default());
        let homes = std::iter::once(active)
            .chain((0..INSTANCES.len()).filter(|i| *i != active))
            .map(|i| g.inst_home(i))
            .collect();
        Target {
            label: label.to_string(),
            qms: vec![g.qm.clone()],
            conns: vec![g.conn_list()],
            primary_pids: g.pids.len(),
            pids,
            status: match dr {
                Some(_) => vec![(g.qm.clone(), homes)],
                None => Vec::new(),
            },
        }
    }

    /// The DR status of every primary; a failure is kept as a line saying why.
    pub(super) fn lags(&self) -> Vec<DrLag> {
        lags_of(&self.status)
    }
}

/// `Target::lags` for `status` (per queue manager, the homes to ask).
fn lags_of(status: &[(String, Vec<PathBuf>)]) -> Vec<DrLag> {
    status
        .iter()
        .map(|(qm, homes)| {
            let mut why = String::from("no home to ask");
            for h in homes {
                match dr_status(h, qm) {
                    Ok(l) => return l,
                    Err(e) => why = e,
                }
            }
            DrLag {
                qm: qm.clone(),
                line: format!("dspmq -o dr failed: {}", why.trim()),
                ..DrLag::default()
            }
        })
        .collect()
}

/// Folds one sample into the peaks: per queue manager, the largest LAGBYTES and LAGSECS.
pub(super) fn fold_peak(peak: &mut Vec<DrLag>, sample: Vec<DrLag>) {
    for l in sample {
        match peak.iter_mut().find(|p| p.qm == l.qm) {
            None => peak.push(l),
            Some(p) => {
                if l.lag_bytes > p.lag_bytes {
                    p.lag_bytes = l.lag_bytes;
                    p.line = l.line;
                }
                if l.lag_secs.unwrap_or(0.0) > p.lag_secs.unwrap_or(0.0) {
                    p.lag_secs = l.lag_secs;
                }
            }
        }
    }
}

impl Target {
    /// Waits until every primary shows DRSTATUS(Normal).
    pub(super) fn wait_normal(&self, timeout: Duration) -> Result<(), String> {
        let t = Instant::now();
        loop {
            let lags = self.lags();
            let Some(not) = lags.iter().find(|l| !l.is_normal()) else {
                return Ok(());
            };
            if t.elapsed() > timeout {
                return Err(format!(
                    "DR primary {} did not reach DRSTATUS(Normal) within {} s; last status: {}",
                    not.qm,
                    timeout.as_secs(),
                    not.line
                ));
            }
            std::thread::sleep(DR_POLL);
        }
    }

    /// One Request/Responder run with `requesters`, then the primaries' DR status.
    pub(super) fn run(&self, o: &Opts, requesters: usize) -> Result<DrRun, String> {
        let args = rr_args_timed(
            o.warmup,
            o.duration,
            self.qms.clone(),
            self.conns.clone(),
            self.pids.clone(),
            requesters,
        );
        // Sample the lag while the window runs (after the warm-up), so the report shows how far
        // behind the recovery site ran under load, not only what was left at the end.
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = (!self.status.is_empty()).then(|| {
            let (status, stop, warmup) = (self.status.clone(), stop.clone(), o.warmup);
            std::thread::spawn(move || {
                let mut peak = Vec::new();
                std::thread::sleep(warmup);
                while !stop.load(Ordering::Acquire) {
                    fold_peak(&mut peak, lags_of(&status));
                    std::thread::sleep(LAG_SAMPLE);
                }
                peak
            })
        });
        let run = run_logged(&self.label, &args);
        stop.store(true, Ordering::Release);
        let peak = sampler.and_then(|t| t.join().ok()).unwrap_or_default();
        let run = run?;
        let (primary_cpu_pct, secondary_cpu_pct) =
            split_cpu(&run.server_cpu_pct_each, self.primary_pids, self.pids.len());
        let lag = self.lags();
        for l in &lag {
            eprintln!(
                "report:   {:<24} {}: DRSTATUS({}) LAGBYTES({}) LAGSECS({}) MAXLAG({}); secondary CPU {}%",
                "",
                l.qm,
                l.status.as_deref().unwrap_or("?"),
                fmt_opt(l.lag_bytes.map(|v| v as f64), 0),
                fmt_opt(l.lag_secs, 3),
                fmt_opt(l.max_lag.map(|v| v as f64), 0),
                fmt_opt(secondary_cpu_pct, 1)
            );
        }
        Ok(DrRun {
            run,
            primary_cpu_pct,
            secondary_cpu_pct: if self.status.is_empty() {
                None
            } else {
                secondary_cpu_pct
            },
            lag,
            peak,
        })
    }
}

/// Splits cph's per-process CPU into the primary side (the first `primary` processes) and the
/// secondaries (the rest); None when cph could not measure all `total` processes.
pub(super) fn split_cpu(each: &[f64], primary: usize, total: usize) -> (Option<f64>, Option<f64>) {
    if each.len() != total || total == 0 {
        return (None, None);
    }
    let (p, s) = each.split_at(primary.min(each.len()));
    (Some(p.iter().sum()), Some(s.iter().sum()))
}
