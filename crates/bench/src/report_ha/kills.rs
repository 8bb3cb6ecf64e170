//! The repeated-kill failover benchmark (step `kills`): one HA group under a persistent put load;
//! a client connected (with automatic reconnect) before each kill; the active instance killed
//! with SIGKILL `--kills` times (20; 3 with `--quick`), each time restarted once the next one is
//! active. Measured per kill: from just before `kill -9` runs until that client's first put
//! succeeds on the new active instance (what applications see), and until another instance
//! listens on its client port (what the election and activation take).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ferrymq_types::Reason;

use super::*;

/// Putters of the background load (each puts and commits one 2 KB persistent message at a time).
pub(super) const KILL_LOAD_PUTTERS: usize = 4;
const KILL_LOAD_QUEUE: &str = "HA.KILL.LOAD";
const PROBE_QUEUE: &str = "HA.KILL.PROBE";
/// How long to wait, before a kill, for the restarted instance to be in sync again.
const RESYNC_WAIT: Duration = Duration::from_secs(15);
pub(super) const TARGET_KILLS_MEDIAN_MS: f64 = 1000.0;
pub(super) const TARGET_KILLS_MAX_MS: f64 = 1500.0;

#[derive(Serialize)]
pub(super) struct KillRound {
    pub(super) killed_instance: String,
    /// Kill -> first successful put by the client connected before the kill.
    pub(super) kill_to_put_ms: Option<f64>,
    /// Kill -> another instance listening on its client port (polled every 2 ms).
    pub(super) kill_to_listening_ms: Option<f64>,
    /// Puts interrupted by the break (written before the client saw it) before the one that
    /// succeeded.
    pub(super) interrupted_puts: u32,
    /// Whether every instance was in sync when this kill was made.
    pub(super) all_in_sync_before: bool,
    pub(super) error: Option<String>,
}

#[derive(Serialize)]
pub(super) struct KillsResult {
    pub(super) kills: usize,
    pub(super) rounds: Vec<KillRound>,
    /// Persistent puts the background load completed during the whole step.
    pub(super) load_puts: u64,
    pub(super) elapsed_s: f64,
    /// Why the step stopped before `kills` kills (the kills made so far are kept).
    pub(super) error: Option<String>,
}

impl KillsResult {
    fn times(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|r| r.kill_to_put_ms)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The median kill -> put time (the mean of the two middle ones for an even count).
    pub(super) fn median_ms(&self) -> Option<f64> {
        let v = self.times();
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }

    pub(super) fn max_ms(&self) -> Option<f64> {
        self.times().last().copied()
    }

    /// Every kill measured, and the median and maximum within the targets.
    pub(super) fn met(&self) -> bool {
        self.error.is_none()
            && self.rounds.len() == self.kills
            && self.rounds.iter().all(|r| r.kill_to_put_ms.is_some())
            && self.median_ms().is_some_and(|m| m < TARGET_KILLS_MEDIAN_MS)
            && self.max_ms().is_some_and(|m| m < TARGET_KILLS_MAX_MS)
    }
}

/// Runs the step in a fresh group under `home`; the instances' whole error logs are kept in
/// `out/logs/kills-<instance>.log` (each takeover's timeline is there).
pub(super) fn kills(
    home: &Path,
    kills: usize,
    out: &Path,
    rep: &mut Report,
) -> Result<KillsResult, String> {
    let mut g = HaGroup::start(home, QM, None, &[])?;
    let r = kills_inner(&mut g, kills);
    rep.log_findings.extend(g.findings());
    let logs = out.join("logs");
    if std::fs::create_dir_all(&logs).is_ok() {
        for (i, name) in INSTANCES.iter().enumerate() {
            let _ = std::fs::write(logs.join(format!("kills-{name}.log")), g.log(i));
        }
    }
    r
}

fn in_sync_count(g: &HaGroup, active: usize) -> usize {
    mq(&g.inst_home(active), &["dspmq", "-o", "ha", "-m", &g.qm])
        .map(|s| s.matches("INSYNC(YES)").count())
        .unwrap_or(0)
}

fn restart(g: &mut HaGroup, i: usize) -> Result<(), String> {
    unregister(g.pids[i]);
    // The killed process left its qm.pid behind, and strmqm can return before the new process
    // has written its own: wait for a pid other than the killed one.
    let file = g.qm_dir(i).join("qm.pid");
    let old = g.pids[i];
    mq(&g.inst_home(i), &["strmqm", &g.qm])?;
    let t = Instant::now();
    let pid: u32 = loop {
        let read = std::fs::read_to_string(&file);
        match read.as_deref().map(|s| s.trim().parse::<u32>()) {
            Ok(Ok(pid)) if pid > 0 && pid != old => break pid,
            _ if t.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(format!("instance {}: qm.pid: {e}", INSTANCES[i])),
            Ok(_) => return Err(format!("instance {}: bad qm.pid", INSTANCES[i])),
        }
    };
    register(pid);
    g.pids[i] = pid;
    Ok(())
}

fn kills_inner(g: &mut HaGroup, kills: usize) -> Result<KillsResult, String> {
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let conns = g.conn_list();
    let qm = g.qm.clone();
    let reconnecting = |app: &str| -> Result<ConnectOptions, String> {
        let mut o = client_options(&qm, &conns, app)?;
        o.reconnect = Reconnect::Enabled {
            timeout: Duration::from_secs(60),
        };
        Ok(o)
    };
    g.wait_active(ACTIVE_TIMEOUT, None)?;
    let (prober, h) = rt.block_on(async {
        let admin = Connection::connect(client_options(&qm, &conns, "ferrymq report ha")?)
            .await
            .map_err(|e| e.to_string())?;
        for q in [KILL_LOAD_QUEUE, PROBE_QUEUE] {
            admin
                .admin(&format!("MQSC DEFINE QLOCAL({q}) MAXDEPTH(999999999)"))
                .await
                .map_err(|e| format!("DEFINE QLOCAL({q}): {e}"))?;
        }
        let _ = admin.disconnect().await;
        let prober = Connection::connect(reconnecting("ferrymq report ha kill probe")?)
            .await
            .map_err(|e| e.to_string())?;
        let h = prober
            .open(PROBE_QUEUE, open::OUTPUT)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((prober, h))
    })?;
    // The background load: each putter reconnects by itself; failures across a kill (backed
    // out, interrupted) are expected and only slow it down briefly.
    let stop = Arc::new(AtomicBool::new(false));
    let load_puts = Arc::new(AtomicU64::new(0));
    let mut loaders = Vec::new();
    for _ in 0..KILL_LOAD_PUTTERS {
        let opts = reconnecting("ferrymq report ha kill load")?;
        let (stop, done) = (stop.clone(), load_puts.clone());
        loaders.push(rt.spawn(async move {
            while !stop.load(Ordering::Acquire) {
                let Ok(c) = Connection::connect(opts.clone()).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let Ok(h) = c.open(KILL_LOAD_QUEUE, open::OUTPUT).await else {
                    continue;
                };
                let body = Bytes::from(vec![b'K'; MSG_SIZE]);
                while !stop.load(Ordering::Acquire) {
                    match c
                        .put_commit(&h, &persistent_md(), &Properties::default(), body.clone())
                        .await
                    {
                        Ok(_) => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.reason == Reason::RECONNECT_FAILED => break,
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            }
        }));
    }
    let mut rounds = Vec::new();
    let mut error = None;
    for round in 0..kills {
        match kill_once(g, &rt, &prober, &h, round) {
            Ok(r) => rounds.push(r),
            Err(e) => {
                error = Some(format!("kill {}: {e}", round + 1));
                break;
            }
        }
    }
    stop.store(true, Ordering::Release);
    for l in loaders {
        let _ = rt.block_on(l);
    }
    let _ = rt.block_on(prober.disconnect());
    Ok(KillsResult {
        kills,
        rounds,
        load_puts: load_puts.load(Ordering::Relaxed),
        elapsed_s: started.elapsed().as_secs_f64(),
        error,
    })
}

fn kill_once(
    g: &mut HaGroup,
    rt: &tokio::runtime::Runtime,
    prober: &Connection,
    h: &ferrymq_client::ObjectHandle,
    round: usize,
) -> Result<KillRound, String> {
    let active = g.wait_active(ACTIVE_TIMEOUT, None)?;
    let t = Instant::now();
    let mut all_in_sync_before = false;
    while t.elapsed() < RESYNC_WAIT {
        if in_sync_count(g, active) == INSTANCES.len() {
            all_in_sync_before = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let po = PutOptions {
        syncpoint: Syncpoint::No,
        ..PutOptions::default()
    };
    let body = Bytes::from(vec![b'P'; MSG_SIZE]);
    let put = || {
        rt.block_on(prober.put(
            h,
            &persistent_md(),
            &Properties::default(),
            body.clone(),
            &po,
        ))
    };
    put().map_err(|e| format!("the probe put before the kill: {e}"))?;
    let others: Vec<u16> = (0..INSTANCES.len())
        .filter(|i| *i != active)
        .map(|i| g.client_ports[i])
        .collect();
    let mut r = KillRound {
        killed_instance: INSTANCES[active].to_string(),
        kill_to_put_ms: None,
        kill_to_listening_ms: None,
        interrupted_puts: 0,
        all_in_sync_before,
        error: None,
    };
    // Timed from just before the kill command runs, so the figures are upper bounds.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let t0 = Instant::now();
    kill9(g.pids[active])?;
    let watcher = watch_listening(others, t0);
    loop {
        match put() {
            Ok(_) => {
                r.kill_to_put_ms = Some(t0.elapsed().as_secs_f64() * 1000.0);
                break;
            }
            // Written before the client saw the break: its outcome is unknown; put again.
            Err(e) if e.reason == Reason::CALL_INTERRUPTED && t0.elapsed().as_secs() < 30 => {
                r.interrupted_puts += 1;
            }
            Err(e) => {
                r.error = Some(format!("put after the kill: {e}"));
                break;
            }
        }
    }
    r.kill_to_listening_ms = watcher.join().ok().flatten();
    // The time of the kill, to read the instances' logs (kept in logs/) against.
    let at = crate::run_info::utc_string(wall.as_secs());
    eprintln!(
        "report:   kill {} at {}.{:03}: instance {} killed; new active listening after {} ms; the connected client's put after {} ms{}",
        round + 1,
        at.trim_end_matches(" UTC"),
        wall.subsec_millis(),
        INSTANCES[active],
        fmt_opt(r.kill_to_listening_ms, 0),
        fmt_opt(r.kill_to_put_ms, 0),
        if all_in_sync_before {
            ""
        } else {
            " (not every instance was in sync before the kill)"
        }
    );
    g.wait_active(ACTIVE_TIMEOUT, Some(active))?;
    restart(g, active)?;
    if let Some(e) = &r.error {
        return Err(e.clone());
    }
    Ok(r)
}

pub(super) fn kills_md(k: &KillsResult) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} kills in {:.0} s; {} persistent puts by the load meanwhile. Kill -> put: median {} ms (target < {TARGET_KILLS_MEDIAN_MS:.0}), \
         max {} ms (target < {TARGET_KILLS_MAX_MS:.0}): {}.\n",
        k.rounds.len(),
        k.elapsed_s,
        k.load_puts,
        fmt_opt(k.median_ms(), 0),
        fmt_opt(k.max_ms(), 0),
        met(k.met())
    );
    let _ = writeln!(
        md,
        "| Kill | Killed (SIGKILL) | Kill -> new active listening (ms) | Kill -> put (ms) | Put - listening (ms) | Interrupted puts | All in sync before |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---|");
    for (i, r) in k.rounds.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | instance {} | {} | {} | {} | {} | {} |",
            i + 1,
            r.killed_instance,
            fmt_opt(r.kill_to_listening_ms, 0),
            fmt_opt(r.kill_to_put_ms, 0),
            fmt_opt(
                r.kill_to_put_ms
                    .zip(r.kill_to_listening_ms)
                    .map(|(p, l)| p - l),
                0
            ),
            r.interrupted_puts,
            if r.all_in_sync_before { "yes" } else { "no" }
        );
    }
    if let Some(e) = &k.error {
        let _ = writeln!(md, "\nStopped early: {e}");
    }
    md
}
