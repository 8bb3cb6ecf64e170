//! What `report ha` measures and keeps: the result types, the Request/Responder runs (HA1/HA2
//! comparisons and the distance sweep) and the failover timing.

use super::*;

#[derive(Serialize)]
pub(super) struct CompareRow {
    pub(super) requesters: usize,
    pub(super) standalone: RunResult,
    pub(super) ha: RunResult,
    /// CPU of the active instances alone (percent of one core): what one host of a group whose
    /// instances have their own hosts, as the appliances do, would spend.
    pub(super) ha_active_cpu_pct: Option<f64>,
    /// Round trips/s of every window (standalone, HA), in the order they ran; `standalone` and
    /// `ha` are each side's median window.
    pub(super) windows: Vec<(f64, f64)>,
}

impl CompareRow {
    /// Round trips per CPU-second of the active instances, as a percentage of the standalone
    /// queue managers' round trips per CPU-second: the per-core comparison of BENCHMARK.md.
    pub(super) fn per_core_pct(&self) -> Option<f64> {
        let s = self.standalone.round_trips_per_s / self.standalone.server_cpu_pct?;
        let h = self.ha.round_trips_per_s / self.ha_active_cpu_pct?;
        pct(h, s)
    }
}

#[derive(Serialize)]
pub(super) struct Comparison {
    pub(super) name: String,
    pub(super) queue_managers: usize,
    pub(super) ha_processes: usize,
    pub(super) rows: Vec<CompareRow>,
}

#[derive(Serialize)]
pub(super) struct DistanceRow {
    /// None: no relays (direct replication links).
    pub(super) rtt_ms: Option<f64>,
    pub(super) runs: Vec<RunResult>,
}

#[derive(Serialize)]
pub(super) struct FailoverResult {
    pub(super) messages: u64,
    pub(super) load_s: f64,
    pub(super) killed_instance: String,
    pub(super) killed_pid: u32,
    pub(super) new_active: Option<String>,
    pub(super) kill_to_get_ms: Option<f64>,
    /// From the kill until another instance listens on its client port (polled every 2 ms).
    pub(super) kill_to_listening_ms: Option<f64>,
    pub(super) activation_ms_after_election: Option<u64>,
    pub(super) depth_after: Option<u64>,
    pub(super) marker_depth_after: Option<u64>,
    pub(super) reconnects: u64,
    pub(super) error: Option<String>,
}

#[derive(Serialize)]
pub(super) struct Report {
    #[serde(flatten)]
    pub(super) info: crate::run_info::RunInfo,
    pub(super) failover_messages: Vec<u64>,
    /// Windows per side at each requester count (HA1, HA2).
    pub(super) repeats: usize,
    pub(super) ha1: Option<Comparison>,
    pub(super) ha2: Option<Comparison>,
    pub(super) distance: Vec<DistanceRow>,
    pub(super) failover: Vec<FailoverResult>,
    pub(super) kills: Option<KillsResult>,
    /// Notable lines from the instances' logs.
    pub(super) log_findings: Vec<String>,
    pub(super) errors: Vec<String>,
}

/// The run with the median rate (the lower of the two middle ones for an even count: never the
/// flattering one).
pub(crate) fn median_by<T>(mut runs: Vec<T>, rate: impl Fn(&T) -> f64) -> T {
    runs.sort_by(|a, b| rate(a).total_cmp(&rate(b)));
    let mid = (runs.len() - 1) / 2;
    runs.swap_remove(mid)
}

pub(super) fn best(runs: &[RunResult]) -> Option<&RunResult> {
    runs.iter()
        .max_by(|a, b| a.round_trips_per_s.total_cmp(&b.round_trips_per_s))
}

pub(crate) fn pct(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b * 100.0)
}

pub(crate) fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

pub(crate) fn met(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements.

pub(super) fn rr_args(
    o: &Opts,
    qms: Vec<String>,
    conns: Vec<String>,
    pids: Vec<u32>,
    requesters: usize,
) -> Args {
    rr_args_timed(o.warmup, o.duration, qms, conns, pids, requesters)
}

/// The cph arguments of one 2 KB persistent Request/Responder run against `qms` (client mode,
/// one connection name (list) per queue manager) with `responders_for` responders per queue
/// manager; `pids` are the server processes whose CPU is measured (all of them, summed, when
/// there are more than queue managers).
pub(crate) fn rr_args_timed(
    warmup: Duration,
    duration: Duration,
    qms: Vec<String>,
    conns: Vec<String>,
    pids: Vec<u32>,
    requesters: usize,
) -> Args {
    let nqm = qms.len();
    Args {
        module: cph::Module::Rr,
        qms,
        conns,
        requesters,
        responders: responders_for(requesters) * nqm,
        size: MSG_SIZE,
        persistent: true,
        syncpoint: None,
        duration,
        warmup,
        queues: QUEUE_PAIRS,
        request_prefix: "REQUEST".into(),
        reply_prefix: "REPLY".into(),
        rate: 0,
        json: false,
        live: false,
        server_pids: pids,
        setup: true,
        client_threads: 1,
        security: Default::default(),
    }
}

pub(crate) fn run_logged(label: &str, a: &Args) -> Result<RunResult, String> {
    let r = cph::run(a).map_err(|e| format!("{label}, {} requesters: {e}", a.requesters))?;
    eprintln!(
        "report:   {label:<24} {:>4} requesters: {:>8.0} RT/s  QM CPU {:>5.1}%  client CPU {:>5.1}%  p50 {:.2} ms{}",
        a.requesters,
        r.round_trips_per_s,
        r.server_cpu_pct.unwrap_or(0.0),
        r.client_cpu_pct,
        r.latency_ms_p50,
        if r.errors > 0 {
            format!(
                "  {} errors: {}",
                r.errors,
                r.first_error.as_deref().unwrap_or("?")
            )
        } else {
            String::new()
        }
    );
    Ok(r)
}

/// Tracks a sweep: stops once two steps in a row add less than 5% to every series' best.
pub(crate) struct Flat {
    pub(super) best: Vec<f64>,
    pub(super) flat: usize,
}

impl Flat {
    pub(crate) fn new(series: usize) -> Flat {
        Flat {
            best: vec![0.0; series],
            flat: 0,
        }
    }

    /// Records one step's rates; true when the sweep should stop.
    pub(crate) fn step(&mut self, rates: &[f64]) -> bool {
        let mut rose = false;
        for (b, r) in self.best.iter_mut().zip(rates) {
            if *r > *b * 1.05 {
                rose = true;
            }
            *b = b.max(*r);
        }
        if rose {
            self.flat = 0;
        } else {
            self.flat += 1;
        }
        self.flat >= 2
    }
}

/// HA1/HA2: `nqm` HA groups against `nqm` standalone queue managers, both alive for the whole
/// sweep and measured at each requester count in turn.
pub(super) fn compare(
    o: &Opts,
    home: &Path,
    nqm: usize,
    rep: &mut Report,
) -> Result<Comparison, String> {
    let name = format!("HA{nqm}");
    let std_home = home.join(format!("std{nqm}"));
    std::fs::create_dir_all(&std_home).map_err(|e| e.to_string())?;
    eprintln!("report: {name}: starting {nqm} standalone queue manager(s) and {nqm} HA group(s)");
    let std = Qms::start_with(&std_home, nqm, LOG_PAGES)?;
    let std_pids = std.pids.clone();
    std_pids.iter().for_each(|p| register(*p));
    let mut groups = Vec::new();
    for g in 0..nqm {
        let qm = if nqm == 1 {
            QM.to_string()
        } else {
            format!("{QM}{g}")
        };
        groups.push(HaGroup::start(
            &home.join(format!("ha{nqm}-{g}")),
            &qm,
            None,
            &[],
        )?);
    }
    // Index, in the pids handed to cph, of each group's active instance.
    let mut active_pos = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let a = g.wait_active(ACTIVE_TIMEOUT, None)?;
        active_pos.push(gi * INSTANCES.len() + a);
        eprintln!("report:   {}: instance {} is active", g.qm, INSTANCES[a]);
    }
    let mut c = Comparison {
        name,
        queue_managers: nqm,
        ha_processes: nqm * INSTANCES.len(),
        rows: Vec::new(),
    };
    let mut flat = Flat::new(2);
    let result = (|| {
        for &req in &o.requesters {
            let s_args = rr_args(
                o,
                std.names.clone(),
                std.ports
                    .iter()
                    .map(|p| format!("127.0.0.1({p})"))
                    .collect(),
                std.pids.clone(),
                req,
            );
            let h_args = rr_args(
                o,
                groups.iter().map(|g| g.qm.clone()).collect(),
                groups.iter().map(HaGroup::conn_list).collect(),
                groups.iter().flat_map(|g| g.pids.clone()).collect(),
                req,
            );
            // Alternate the sides, so that a slow spell of this shared machine falls on both.
            let (mut ss, mut hs) = (Vec::new(), Vec::new());
            for _ in 0..o.repeats.max(1) {
                ss.push(run_logged("standalone", &s_args)?);
                hs.push(run_logged("HA", &h_args)?);
            }
            let windows = ss
                .iter()
                .zip(&hs)
                .map(|(s, h)| (s.round_trips_per_s, h.round_trips_per_s))
                .collect();
            let s = median_by(ss, |r| r.round_trips_per_s);
            let h = median_by(hs, |r| r.round_trips_per_s);
            let stop = flat.step(&[s.round_trips_per_s, h.round_trips_per_s]);
            let each = &h.server_cpu_pct_each;
            let ha_active_cpu_pct = (each.len() == groups.len() * INSTANCES.len())
                .then(|| active_pos.iter().map(|&i| each[i]).sum::<f64>());
            c.rows.push(CompareRow {
                requesters: req,
                standalone: s,
                ha: h,
                ha_active_cpu_pct,
                windows,
            });
            if stop {
                break;
            }
        }
        Ok::<(), String>(())
    })();
    for g in &groups {
        rep.log_findings.extend(g.findings());
    }
    drop(groups);
    drop(std);
    std_pids.iter().for_each(|p| unregister(*p));
    match result {
        Ok(()) => Ok(c),
        Err(e) if !c.rows.is_empty() => {
            rep.errors.push(format!("{}: {e}", c.name));
            Ok(c)
        }
        Err(e) => Err(e),
    }
}

/// The distance rows: a group without relays, then one behind relays per round trip.
pub(super) fn distance(o: &Opts, home: &Path, rep: &mut Report, out: &Path) -> Result<(), String> {
    let rows: Vec<Option<f64>> = std::iter::once(None)
        .chain(o.rtts.iter().map(|r| Some(*r)))
        .collect();
    for (k, rtt) in rows.into_iter().enumerate() {
        let dir = match rtt {
            None => format!("dist{k}-direct"),
            Some(r) => format!("dist{k}-{r}ms"),
        };
        let g = HaGroup::start(&home.join(dir), QM, rtt, &[])?;
        eprintln!("report: distance: {}", g.label());
        let a = g.wait_active(ACTIVE_TIMEOUT, None)?;
        eprintln!("report:   instance {} is active", INSTANCES[a]);
        let mut row = DistanceRow {
            rtt_ms: rtt,
            runs: Vec::new(),
        };
        let label = match rtt {
            None => "HA direct".to_string(),
            Some(r) => format!("HA +{r} ms RTT"),
        };
        let mut flat = Flat::new(1);
        let mut failed = None;
        for &req in &o.distance_requesters {
            match run_logged(
                &label,
                &rr_args(
                    o,
                    vec![g.qm.clone()],
                    vec![g.conn_list()],
                    g.pids.clone(),
                    req,
                ),
            ) {
                Ok(r) => {
                    let stop = flat.step(&[r.round_trips_per_s]);
                    row.runs.push(r);
                    if stop {
                        break;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        rep.log_findings.extend(g.findings());
        drop(g);
        if !row.runs.is_empty() {
            rep.distance.push(row);
        }
        write_report(out, rep)?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(())
}

pub(super) fn client_options(qm: &str, conns: &str, app: &str) -> Result<ConnectOptions, String> {
    let mut c = ConnectOptions::client(qm, conns).map_err(|e| e.to_string())?;
    c.app_name = app.into();
    c.sharecnv = 1;
    Ok(c)
}

pub(super) fn persistent_md() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

/// Puts `n` persistent 2 KB messages on the load queue with several putters, each committing
/// every 50; returns the seconds it took.
pub(super) async fn load(qm: &str, conns: &str, n: u64) -> Result<f64, String> {
    let t = Instant::now();
    let putters = (LOAD_PUTTERS as u64).min(n);
    let mut set = tokio::task::JoinSet::new();
    for p in 0..putters {
        let count = n / putters + u64::from(p < n % putters);
        let opts = client_options(qm, conns, "ferrymq report ha loader")?;
        set.spawn(async move {
            let c = Connection::connect(opts).await?;
            let h = c.open(LOAD_QUEUE, open::OUTPUT).await?;
            let md = persistent_md();
            let props = Properties::default();
            let body = Bytes::from(vec![b'L'; MSG_SIZE]);
            let po = PutOptions {
                syncpoint: Syncpoint::Yes,
                ..PutOptions::default()
            };
            for i in 1..=count {
                if i % LOAD_COMMIT_EVERY == 0 || i == count {
                    c.put_commit(&h, &md, &props, body.clone()).await?;
                } else {
                    c.put(&h, &md, &props, body.clone(), &po).await?;
                }
            }
            c.disconnect().await
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| format!("loader task: {e}"))?
            .map_err(|e| format!("loader: {e}"))?;
    }
    Ok(t.elapsed().as_secs_f64())
}

pub(super) async fn depth(c: &Connection, queue: &str) -> Result<u64, String> {
    let text = c
        .admin(&format!("MQSC DISPLAY QLOCAL({queue}) CURDEPTH"))
        .await
        .map_err(|e| format!("DISPLAY QLOCAL({queue}): {e}"))?;
    parse_curdepth(&text).ok_or_else(|| format!("no CURDEPTH in: {text}"))
}

/// One failover measurement with `n` messages loaded.
pub(super) fn failover(home: &Path, n: u64, rep: &mut Report) -> Result<FailoverResult, String> {
    let g = HaGroup::start(home, QM, None, &[])?;
    let active = g.wait_active(ACTIVE_TIMEOUT, None)?;
    let killed_pid = g.pids[active];
    eprintln!(
        "report: failover with {n} messages: instance {} (pid {killed_pid}) is active",
        INSTANCES[active]
    );
    let mut r = FailoverResult {
        messages: n,
        load_s: 0.0,
        killed_instance: INSTANCES[active].to_string(),
        killed_pid,
        new_active: None,
        kill_to_get_ms: None,
        kill_to_listening_ms: None,
        activation_ms_after_election: None,
        depth_after: None,
        marker_depth_after: None,
        reconnects: 0,
        error: None,
    };
    let e = failover_inner(&g, active, n, &mut r);
    rep.log_findings.extend(g.findings());
    if let Err(e) = e {
        r.error = Some(e);
    }
    Ok(r)
}

pub(super) fn failover_inner(
    g: &HaGroup,
    active: usize,
    n: u64,
    r: &mut FailoverResult,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let conns = g.conn_list();
    let marker_body = format!("failover marker {n} {}", std::process::id());
    let (getter, h) = rt.block_on(async {
        let admin = Connection::connect(client_options(&g.qm, &conns, "ferrymq report ha")?)
            .await
            .map_err(|e| e.to_string())?;
        for q in [
            format!("DEFINE QLOCAL({LOAD_QUEUE}) MAXDEPTH(999999999)"),
            format!("DEFINE QLOCAL({MARKER_QUEUE})"),
        ] {
            admin
                .admin(&format!("MQSC {q}"))
                .await
                .map_err(|e| format!("{q}: {e}"))?;
        }
        r.load_s = load(&g.qm, &conns, n).await?;
        eprintln!(
            "report:   loaded {n} messages in {:.1} s ({:.0} msg/s)",
            r.load_s,
            n as f64 / r.load_s.max(1e-9)
        );
        let loaded = depth(&admin, LOAD_QUEUE).await?;
        if loaded != n {
            return Err(format!(
                "{LOAD_QUEUE} holds {loaded} messages after loading {n}"
            ));
        }
        let mh = admin
            .open(MARKER_QUEUE, open::OUTPUT)
            .await
            .map_err(|e| e.to_string())?;
        admin
            .put_commit(
                &mh,
                &persistent_md(),
                &Properties::default(),
                Bytes::from(marker_body.clone()),
            )
            .await
            .map_err(|e| format!("marker put: {e}"))?;
        let _ = admin.disconnect().await;
        let mut opts = client_options(&g.qm, &conns, "ferrymq report ha failover")?;
        opts.reconnect = Reconnect::Enabled {
            timeout: Duration::from_secs(60),
        };
        let getter = Connection::connect(opts).await.map_err(|e| e.to_string())?;
        let h = getter
            .open(MARKER_QUEUE, open::INPUT_SHARED)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((getter, h))
    })?;
    // Timed from just before the kill command runs, so the figure is an upper bound.
    let t0 = Instant::now();
    kill9(g.pids[active])?;
    let others: Vec<u16> = (0..INSTANCES.len())
        .filter(|i| *i != active)
        .map(|i| g.client_ports[i])
        .collect();
    let watcher = watch_listening(others, t0);
    let got = rt.block_on(getter.get(
        &h,
        &GetOptions {
            wait: Wait::Ms(30_000),
            ..GetOptions::any()
        },
    ));
    let elapsed = t0.elapsed().as_secs_f64() * 1000.0;
    r.kill_to_listening_ms = watcher.join().ok().flatten();
    let m = got.map_err(|e| format!("get of the marker after the kill: {e}"))?;
    if m.body.as_ref() != marker_body.as_bytes() {
        return Err(format!(
            "the message got after the kill is not the marker: {:?}",
            String::from_utf8_lossy(&m.body)
        ));
    }
    r.kill_to_get_ms = Some(elapsed);
    r.reconnects = getter.reconnects();
    let now = g.wait_active(Duration::from_secs(10), Some(active))?;
    r.new_active = Some(INSTANCES[now].to_string());
    r.activation_ms_after_election = parse_activation_ms(&g.log(now));
    r.depth_after = Some(rt.block_on(depth(&getter, LOAD_QUEUE))?);
    r.marker_depth_after = Some(rt.block_on(depth(&getter, MARKER_QUEUE))?);
    let _ = rt.block_on(getter.disconnect());
    eprintln!(
        "report:   kill -> get {elapsed:.0} ms (new active listening after {} ms); instance {} active ({} ms after its election); {} messages on {LOAD_QUEUE} after failover",
        fmt_opt(r.kill_to_listening_ms, 0),
        INSTANCES[now],
        fmt_opt(r.activation_ms_after_election.map(|v| v as f64), 0),
        fmt_opt(r.depth_after.map(|v| v as f64), 0)
    );
    if r.depth_after != Some(n) {
        return Err(format!(
            "{LOAD_QUEUE} holds {} messages after failover, expected {n}",
            fmt_opt(r.depth_after.map(|v| v as f64), 0)
        ));
    }
    Ok(())
}

/// Watches `ports` from `t0` on (up to 30 s): the milliseconds until one of them accepts
/// connections (the new active instance listens), or `None`.
pub(super) fn watch_listening(
    ports: Vec<u16>,
    t0: Instant,
) -> std::thread::JoinHandle<Option<f64>> {
    std::thread::spawn(move || {
        while t0.elapsed() < Duration::from_secs(30) {
            if ports.iter().any(|p| is_listening(*p)) {
                return Some(t0.elapsed().as_secs_f64() * 1000.0);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        None
    })
}
