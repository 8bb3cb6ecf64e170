//! What `report dr` measures and keeps: the result types and the steps (DR1/DR2, HA+DR, one
//! distance row).

use super::*;

/// One Request/Responder run against DR primaries (or, as the reference of a comparison,
/// against queue managers without DR), with what it cost each side and the DR status after it.
#[derive(Serialize)]
pub(super) struct DrRun {
    pub(super) run: RunResult,
    /// CPU of the primary side alone (the queue managers, or every HA instance), percent of
    /// one core.
    pub(super) primary_cpu_pct: Option<f64>,
    /// CPU of the DR secondaries alone; None without DR.
    pub(super) secondary_cpu_pct: Option<f64>,
    /// `dspmq -o dr` of each primary, read right after the run.
    pub(super) lag: Vec<DrLag>,
    /// Per primary, the largest LAGBYTES and LAGSECS seen while the window ran (sampled every
    /// `LAG_SAMPLE` through `dspmq -o dr`).
    pub(super) peak: Vec<DrLag>,
}

#[derive(Serialize)]
pub(super) struct CompareRow {
    pub(super) requesters: usize,
    /// Without DR (standalone queue managers, or the plain HA group): the median window.
    pub(super) base: DrRun,
    /// The DR side's median window.
    pub(super) dr: DrRun,
    /// Round trips/s of every window (reference, DR), in the order they ran.
    pub(super) windows: Vec<(f64, f64)>,
}

impl CompareRow {
    /// Round trips per CPU-second of the DR side's primaries, as a percentage of the reference
    /// side's: the per-core comparison of BENCHMARK.md, with the recovery sites left out as if
    /// they ran on their own hosts (here they share the cores, which the rate above pays for).
    pub(super) fn primary_per_core_pct(&self) -> Option<f64> {
        let b = self.base.run.round_trips_per_s / self.base.primary_cpu_pct?;
        let d = self.dr.run.round_trips_per_s / self.dr.primary_cpu_pct?;
        pct(d, b)
    }
}

#[derive(Serialize)]
pub(super) struct Comparison {
    /// DR1, DR2 or HA+DR.
    pub(super) name: String,
    /// What the reference side is called (`no DR`, `HA`) and the DR side (`DR`, `HA+DR`).
    pub(super) base_label: String,
    pub(super) dr_label: String,
    pub(super) queue_managers: usize,
    /// Processes measured on each side (the DR side's include its secondaries).
    pub(super) base_processes: usize,
    pub(super) dr_processes: usize,
    pub(super) secondaries: usize,
    pub(super) rows: Vec<CompareRow>,
}

impl Comparison {
    /// The best rate of each side: (reference, DR).
    pub(super) fn best(&self) -> (Option<&RunResult>, Option<&RunResult>) {
        let pick = |f: &dyn Fn(&CompareRow) -> &RunResult| {
            self.rows
                .iter()
                .map(f)
                .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s))
        };
        (pick(&|r| &r.base.run), pick(&|r| &r.dr.run))
    }
}

#[derive(Serialize)]
pub(super) struct DistanceRow {
    /// None: no relay (direct DR link).
    pub(super) rtt_ms: Option<f64>,
    pub(super) runs: Vec<DrRun>,
}

impl DistanceRow {
    pub(super) fn best(&self) -> Option<&DrRun> {
        self.runs
            .iter()
            .max_by(|a, b| a.run.round_trips_per_s.total_cmp(&b.run.round_trips_per_s))
    }
}

#[derive(Serialize)]
pub(super) struct Report {
    #[serde(flatten)]
    pub(super) info: crate::run_info::RunInfo,
    /// `crtmqm -drlag` given to every primary, if any.
    pub(super) max_lag: Option<u64>,
    pub(super) requesters: Vec<usize>,
    pub(super) distance_requesters: Vec<usize>,
    /// Windows per side at each requester count (DR1, DR2, HA+DR).
    pub(super) repeats: usize,
    /// DR pairs per distance row (the DR2 shape).
    pub(super) distance_qms: usize,
    pub(super) dr1: Option<Comparison>,
    pub(super) dr2: Option<Comparison>,
    pub(super) hadr: Option<Comparison>,
    pub(super) distance: Vec<DistanceRow>,
    /// Notable lines from the queue managers' logs.
    pub(super) log_findings: Vec<String>,
    pub(super) errors: Vec<String>,
}

pub(super) fn median_run(runs: Vec<DrRun>) -> DrRun {
    median_by(runs, |r| r.run.round_trips_per_s)
}

/// Measures `base` and `dr` in turn at each requester count (both running all along) until
/// the rate stops rising. A failure after the first row is recorded in the report and the rows
/// so far kept.
fn sweep(
    o: &Opts,
    c: &mut Comparison,
    base: &Target,
    dr: &Target,
    rep: &mut Report,
) -> Result<(), String> {
    let mut flat = Flat::new(2);
    let result = (|| {
        for &req in &o.requesters {
            // Alternate the sides, so that a slow spell of this shared machine falls on both.
            let (mut bs, mut ds) = (Vec::new(), Vec::new());
            for _ in 0..o.repeats.max(1) {
                bs.push(base.run(o, req)?);
                ds.push(dr.run(o, req)?);
            }
            let windows = bs
                .iter()
                .zip(&ds)
                .map(|(b, d)| (b.run.round_trips_per_s, d.run.round_trips_per_s))
                .collect();
            let (b, d) = (median_run(bs), median_run(ds));
            let stop = flat.step(&[b.run.round_trips_per_s, d.run.round_trips_per_s]);
            c.rows.push(CompareRow {
                requesters: req,
                base: b,
                dr: d,
                windows,
            });
            if stop {
                break;
            }
        }
        Ok::<(), String>(())
    })();
    match result {
        Err(e) if !c.rows.is_empty() => {
            rep.errors.push(format!("{}: {e}", c.name));
            Ok(())
        }
        other => other,
    }
}

/// DR1/DR2: `nqm` DR primaries (each with its own secondary) against `nqm` queue managers
/// without DR.
pub(super) fn compare_standalone(
    o: &Opts,
    home: &Path,
    nqm: usize,
    step: &str,
    rep: &mut Report,
) -> Result<Comparison, String> {
    let name = step.to_uppercase();
    eprintln!(
        "report: {name}: starting {nqm} queue manager(s) without DR and {nqm} DR primary/secondary pair(s)"
    );
    let plain_names: Vec<String> = (0..nqm).map(|i| format!("PERF{i}")).collect();
    let dr_names: Vec<String> = (0..nqm).map(|i| format!("DRQM{i}")).collect();
    let plain = Site::plain(&home.join(format!("{step}-nodr")), &plain_names)?;
    let dr = Site::dr(&home.join(format!("{step}-dr")), &dr_names, None, o.max_lag)?;
    let (base_t, dr_t) = (plain.target("no DR"), dr.target("DR"));
    let mut c = Comparison {
        name,
        base_label: "no DR".into(),
        dr_label: "DR".into(),
        queue_managers: nqm,
        base_processes: nqm,
        dr_processes: 2 * nqm,
        secondaries: nqm,
        rows: Vec::new(),
    };
    let result = dr_t
        .wait_normal(NORMAL_TIMEOUT)
        .and_then(|()| sweep(o, &mut c, &base_t, &dr_t, rep));
    rep.log_findings.extend(plain.findings());
    rep.log_findings.extend(dr.findings());
    result.map(|()| c)
}

/// HA+DR: one HA group against an HA group of the same shape whose instances are all DR
/// primaries shipping to one standalone secondary.
pub(super) fn compare_ha(o: &Opts, home: &Path, rep: &mut Report) -> Result<Comparison, String> {
    eprintln!("report: HA+DR: starting an HA group, a DR secondary and an HA group shipping to it");
    let plain = HaGroup::start(&home.join("hadr-ha"), "HAQM", None, &[])?;
    let names = ["HADRQM".to_string()];
    let sec = Secondaries::start(&home.join("hadr-secondary"), "hadr-secondary", &names, None)?;
    let group = HaGroup::start(
        &home.join("hadr-dr"),
        &names[0],
        None,
        &sec.primary_args(0, o.max_lag),
    )?;
    let mut c = Comparison {
        name: "HA+DR".into(),
        base_label: "HA".into(),
        dr_label: "HA+DR".into(),
        queue_managers: 1,
        base_processes: INSTANCES.len(),
        dr_processes: INSTANCES.len() + 1,
        secondaries: 1,
        rows: Vec::new(),
    };
    let result = (|| {
        let a = plain.wait_active(ACTIVE_TIMEOUT, None)?;
        eprintln!(
            "report:   {}: instance {} is active",
            plain.qm, INSTANCES[a]
        );
        let base_t = Target::ha("HA", &plain, a, None);
        let a = group.wait_active(ACTIVE_TIMEOUT, None)?;
        eprintln!(
            "report:   {}: instance {} is active",
            group.qm, INSTANCES[a]
        );
        let dr_t = Target::ha("HA+DR", &group, a, Some(&sec));
        dr_t.wait_normal(NORMAL_TIMEOUT)?;
        sweep(o, &mut c, &base_t, &dr_t, rep)
    })();
    rep.log_findings.extend(plain.findings());
    rep.log_findings.extend(group.findings());
    rep.log_findings.extend(sec.findings());
    // The DR group ends before its secondary, so its shippers see no lost partner.
    drop(group);
    drop(sec);
    drop(plain);
    result.map(|()| c)
}

/// One distance row: fresh DR pairs in the DR2 shape (`--dr2-qms` of them, as the seed measures
/// distance on DR2), each link direct (`rtt_ms` None) or through a relay adding `rtt_ms`, swept
/// over the distance requester counts. The row is kept in the report even
/// when a later run fails.
pub(super) fn distance_row(
    o: &Opts,
    home: &Path,
    k: usize,
    rtt_ms: Option<f64>,
    rep: &mut Report,
) -> Result<(), String> {
    let dir = match rtt_ms {
        None => format!("dist{k}-direct"),
        Some(r) => format!("dist{k}-{r}ms"),
    };
    let nqm = o.dr2_qms;
    eprintln!(
        "report: distance: {nqm} DR pair(s), {}",
        distance_label(rtt_ms)
    );
    let names: Vec<String> = (0..nqm).map(|i| format!("DRQM{i}")).collect();
    let site = Site::dr(&home.join(dir), &names, rtt_ms, o.max_lag)?;
    let label = match rtt_ms {
        None => "DR direct".to_string(),
        Some(r) => format!("DR +{r} ms RTT"),
    };
    let t = site.target(&label);
    let mut row = DistanceRow {
        rtt_ms,
        runs: Vec::new(),
    };
    let result = t.wait_normal(NORMAL_TIMEOUT).and_then(|()| {
        let mut flat = Flat::new(1);
        for &req in &o.distance_requesters {
            let r = t.run(o, req)?;
            let stop = flat.step(&[r.run.round_trips_per_s]);
            row.runs.push(r);
            if stop {
                break;
            }
        }
        Ok(())
    });
    rep.log_findings.extend(site.findings());
    drop(site);
    if !row.runs.is_empty() {
        rep.distance.push(row);
    }
    result
}
