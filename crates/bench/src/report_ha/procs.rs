//! The processes `report ha` starts and watches: ports, liveness, SIGKILL, latency relays, HA
//! groups of three instances, and reading their `dspmq -o ha` output and error logs.

use super::*;

/// Ports in LISTEN state in a /proc/net/tcp{,6} table.
pub(super) fn listening_ports(table: &str) -> Vec<u16> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(3) != Some(&"0A") {
                return None;
            }
            u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

pub(super) fn is_listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|p| {
        std::fs::read_to_string(p)
            .map(|t| listening_ports(&t).contains(&port))
            .unwrap_or(false)
    })
}

/// Waits until something listens on `port`; `check` may give up early with an error.
pub(crate) fn wait_listening(
    port: u16,
    timeout: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<bool, String> {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if is_listening(port) {
            return Ok(true);
        }
        check()?;
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(false)
}

/// `count` distinct free loopback ports.
pub(crate) fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let mut v: Vec<u16> = Vec::new();
    let mut tries = 0;
    while v.len() < count {
        let p = free_port()?;
        if !v.contains(&p) {
            v.push(p);
        }
        tries += 1;
        if tries > count * 20 {
            return Err("cannot find enough free TCP ports".into());
        }
    }
    Ok(v)
}

/// A process of ours still running (not gone, not a zombie)?
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(st) => st
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
    }
}

/// SIGKILLs `pid` (with the `kill` command: this crate has no unsafe code for kill(2)).
pub(crate) fn kill9(pid: u32) -> Result<(), String> {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("kill -9 {pid}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("kill -9 {pid} failed ({st})"))
    }
}

/// Pids of every process the report started and has not stopped yet (instances, standalone
/// queue managers, relays), for the interrupt handler.
pub(super) static LIVE: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

pub(crate) fn register(pid: u32) {
    if let Ok(mut l) = LIVE.lock() {
        l.push(pid);
    }
}

pub(crate) fn unregister(pid: u32) {
    if let Ok(mut l) = LIVE.lock() {
        l.retain(|p| *p != pid);
    }
}

/// On SIGINT or SIGTERM: kill every process the report started, delete its private home and
/// exit, so an interrupted report leaves nothing running (instances run in their own process
/// groups and would not see a terminal's Ctrl-C).
pub(crate) fn stop_on_interrupt(home: PathBuf) {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        let interrupted = rt.block_on(async {
            let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            else {
                return false;
            };
            tokio::select! {
                r = tokio::signal::ctrl_c() => r.is_ok(),
                _ = term.recv() => true,
            }
        });
        if !interrupted {
            return;
        }
        eprintln!("report: interrupted; stopping everything it started");
        let pids: Vec<u32> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
        for pid in pids {
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("ferrymq"))
                .unwrap_or(false);
            if ours && alive(pid) {
                let _ = kill9(pid);
            }
        }
        let _ = std::fs::remove_dir_all(&home);
        std::process::exit(130);
    });
}

/// After `endmqm -i`: waits up to `END_GRACE` for the queue manager processes `pids` to end,
/// then SIGKILLs those still running (only `ferrymq run-qmgr` processes: a pid reused by
/// something else is left alone) and says so on stderr.
pub(crate) fn end_or_kill(label: &str, pids: &[u32]) {
    let t = Instant::now();
    while pids.iter().any(|p| alive(*p)) && t.elapsed() < END_GRACE {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut killed = Vec::new();
    for &pid in pids {
        let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains("run-qmgr"))
            .unwrap_or(false);
        if alive(pid) && ours && kill9(pid).is_ok() {
            killed.push(pid.to_string());
        }
    }
    if !killed.is_empty() {
        eprintln!(
            "report: {label}: endmqm -i did not end pid(s) {} within {} s; killed them",
            killed.join(", "),
            END_GRACE.as_secs()
        );
    }
}

/// The notable lines of one queue manager log (see `notable`), at most 12, each cut to 300
/// characters and prefixed with `prefix`, plus a count of the ones left out.
pub(crate) fn log_lines(prefix: &str, log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().filter(|l| notable(l)).collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(12)
        .map(|l| {
            let l: String = l.chars().take(300).collect();
            format!("{prefix}: {}", l.trim())
        })
        .collect();
    if lines.len() > 12 {
        out.push(format!(
            "{prefix}: ... and {} more such lines",
            lines.len() - 12
        ));
    }
    out
}

/// The instance that reports itself active in `dspmq -o ha` output: its own row
/// (`LOCAL(YES)`) with `ROLE(Active)`.
pub(super) fn local_active(dspmq: &str) -> Option<String> {
    dspmq
        .lines()
        .find(|l| l.contains("LOCAL(YES)") && l.contains("ROLE(Active)"))
        .and_then(|l| field(l, "INSTANCE"))
}

/// The value of `NAME(value)` in an MQSC-style line.
pub(crate) fn field(line: &str, name: &str) -> Option<String> {
    let key = format!("{name}(");
    let mut from = 0;
    while let Some(at) = line[from..].find(&key) {
        let start = from + at;
        // A whole word: not the tail of a longer name (CURDEPTH inside XCURDEPTH).
        if start == 0 || !line.as_bytes()[start - 1].is_ascii_alphanumeric() {
            let rest = &line[start + key.len()..];
            return rest.find(')').map(|end| rest[..end].trim().to_string());
        }
        from = start + key.len();
    }
    None
}

/// CURDEPTH from MQSC DISPLAY output.
pub(super) fn parse_curdepth(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| field(l, "CURDEPTH"))
        .and_then(|v| v.parse().ok())
}

/// From an instance's error log: the last "is now the active instance ... N ms after its election".
pub(super) fn parse_activation_ms(log: &str) -> Option<u64> {
    log.lines()
        .rev()
        .find(|l| l.contains("is now the active instance"))
        .and_then(|l| {
            let head = l.split(" ms after its election").next()?;
            head.rsplit(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
}

/// How many times an instance's log says it became the active instance.
pub(super) fn activations(log: &str) -> usize {
    log.matches("is now the active instance").count()
}

/// Lines of a queue manager log worth a reader's attention.
pub(super) fn notable(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "error",
        "panic",
        "warn",
        "fail",
        "restarting",
        "cannot",
        "lost",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// A `ferrymq relay` child process in front of one replication port.
pub(crate) struct Relay {
    pub(super) child: Child,
    pub(super) listen: u16,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(self.child.id());
    }
}

impl Relay {
    /// The relay's process, for its CPU time.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn start(
        listen: u16,
        target: u16,
        rtt_ms: f64,
        log: &Path,
    ) -> Result<Relay, String> {
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new(ferrymq_bin()?)
            .args([
                "relay",
                "--listen",
                &format!("127.0.0.1:{listen}"),
                "--target",
                &format!("127.0.0.1:{target}"),
                "--rtt-ms",
                &rtt_ms.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot start ferrymq relay: {e}"))?;
        register(child.id());
        let mut r = Relay { child, listen };
        let up = wait_listening(listen, Duration::from_secs(10), || {
            match r.child.try_wait() {
                Ok(Some(st)) => Err(format!(
                    "ferrymq relay on port {listen} ended ({st}): {}",
                    std::fs::read_to_string(log).unwrap_or_default().trim()
                )),
                _ => Ok(()),
            }
        })?;
        if !up {
            return Err(format!(
                "ferrymq relay did not listen on port {} within 10 s",
                r.listen
            ));
        }
        Ok(r)
    }
}

/// Three instances of one HA queue manager on this machine, optionally with relays on the
/// replication links. Dropping it ends every instance and relay and deletes its directories.
pub(crate) struct HaGroup {
    pub(super) root: PathBuf,
    pub(crate) qm: String,
    pub(super) client_ports: Vec<u16>,
    /// Where each instance binds its replication listener.
    pub(super) repl_ports: Vec<u16>,
    pub(super) rtt_ms: Option<f64>,
    /// Instances created so far (for cleanup after a partial start).
    pub(super) created: usize,
    pub(crate) pids: Vec<u32>,
    pub(super) relays: Vec<Relay>,
}

impl HaGroup {
    pub(crate) fn inst_home(&self, i: usize) -> PathBuf {
        self.root.join(INSTANCES[i])
    }

    pub(super) fn qm_dir(&self, i: usize) -> PathBuf {
        self.inst_home(i).join("qmgrs").join(&self.qm)
    }

    /// The client connection name list of the group.
    pub(crate) fn conn_list(&self) -> String {
        self.client_ports
            .iter()
            .map(|p| format!("127.0.0.1({p})"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Creates and starts the group. With `rtt_ms`, the instances' addresses in the group list
    /// are relay ports; each instance binds its real port (qm.ini NativeHA:LocalAddress) and a
    /// relay in front of it adds `rtt_ms` to every round trip into it. `extra` is added to every
    /// instance's `crtmqm` (e.g. `-dr primary -drr ...` for a group that is also a DR primary).
    pub(crate) fn start(
        root: &Path,
        qm: &str,
        rtt_ms: Option<f64>,
        extra: &[String],
    ) -> Result<HaGroup, String> {
        let n = INSTANCES.len();
        let ports = free_ports(if rtt_ms.is_some() { 3 * n } else { 2 * n })?;
        let mut g = HaGroup {
            root: root.to_path_buf(),
            qm: qm.to_string(),
            client_ports: ports[..n].to_vec(),
            repl_ports: ports[n..2 * n].to_vec(),
            rtt_ms,
            created: 0,
            pids: Vec::new(),
            relays: Vec::new(),
        };
        let listed: Vec<u16> = if rtt_ms.is_some() {
            ports[2 * n..].to_vec()
        } else {
            g.repl_ports.clone()
        };
        let list = INSTANCES
            .iter()
            .zip(&listed)
            .map(|(name, p)| format!("{name}=127.0.0.1({p})"))
            .collect::<Vec<_>>()
            .join(",");
        if let Some(rtt) = rtt_ms {
            std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
            for (i, name) in INSTANCES.iter().enumerate() {
                let log = root.join(format!("relay-{name}.log"));
                g.relays
                    .push(Relay::start(listed[i], g.repl_ports[i], rtt, &log)?);
            }
        }
        for (i, name) in INSTANCES.iter().enumerate() {
            let home = g.inst_home(i);
            std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
            let port = g.client_ports[i].to_string();
            let pages = LOG_PAGES.to_string();
            let mut args = vec![
                "crtmqm",
                "-p",
                &port,
                "-lp",
                "3",
                "-lf",
                &pages,
                "-ha",
                &list,
                "-hi",
                name,
                // The measuring clients connect without credentials: no security defaults.
                "--insecure",
            ];
            args.extend(extra.iter().map(String::as_str));
            args.push(qm);
            mq(&home, &args)?;
            g.created += 1;
            // The measurements administer the group through its connection list.
            mq(
                &home,
                &[
                    "setmqini",
                    "-m",
                    qm,
                    "-s",
                    "Channels",
                    "-k",
                    "RemoteAdmin",
                    "-v",
                    "yes",
                ],
            )?;
            if rtt_ms.is_some() {
                mq(
                    &home,
                    &[
                        "setmqini",
                        "-m",
                        qm,
                        "-s",
                        "NativeHA",
                        "-k",
                        "LocalAddress",
                        "-v",
                        &format!("127.0.0.1:{}", g.repl_ports[i]),
                    ],
                )?;
            }
        }
        let hint = "the distance step needs qm.ini NativeHA:LocalAddress (the address an instance \
                    binds for replication, overriding its entry in Instances); this ferrymq build \
                    does not seem to honour it";
        for (i, name) in INSTANCES.iter().enumerate() {
            let home = g.inst_home(i);
            mq(&home, &["strmqm", qm]).map_err(|e| match rtt_ms {
                Some(_) => format!("{e}\n{hint}"),
                None => e,
            })?;
            let pid = std::fs::read_to_string(g.qm_dir(i).join("qm.pid"))
                .map_err(|e| format!("instance {name}: qm.pid: {e}"))?;
            let pid: u32 = pid
                .trim()
                .parse()
                .map_err(|_| format!("instance {name}: bad qm.pid"))?;
            register(pid);
            g.pids.push(pid);
        }
        for (i, name) in INSTANCES.iter().enumerate() {
            let pid = g.pids[i];
            let up = wait_listening(g.repl_ports[i], Duration::from_secs(10), || {
                if alive(pid) {
                    Ok(())
                } else {
                    Err(format!("instance {name} (pid {pid}) ended; see its log"))
                }
            })?;
            if !up {
                let mut m = format!(
                    "instance {} of {qm} does not listen for replication on 127.0.0.1:{}",
                    INSTANCES[i], g.repl_ports[i]
                );
                if rtt_ms.is_some() {
                    let _ = write!(m, " (its NativeHA:LocalAddress)\n{hint}");
                }
                return Err(m);
            }
        }
        Ok(g)
    }

    /// Polls `dspmq -o ha` on the instances (all but `skip`) every 100 ms until one says it is
    /// the active instance and listens on its client port, and is still so a second later
    /// without having been activated again (an instance may restart right after its first
    /// activation); returns its index.
    pub(crate) fn wait_active(
        &self,
        timeout: Duration,
        skip: Option<usize>,
    ) -> Result<usize, String> {
        let t = Instant::now();
        let mut last = String::new();
        // The instance seen active, when, and how many activations its log held then.
        let mut seen: Option<(usize, Instant, usize)> = None;
        loop {
            let mut now_active = None;
            for i in (0..self.created).filter(|i| Some(*i) != skip) {
                match mq(&self.inst_home(i), &["dspmq", "-o", "ha", "-m", &self.qm]) {
                    Ok(out) => {
                        let k = local_active(&out)
                            .and_then(|name| INSTANCES.iter().position(|n| *n == name));
                        last = out;
                        if let Some(k) = k.filter(|k| is_listening(self.client_ports[*k])) {
                            now_active = Some(k);
                            break;
                        }
                    }
                    Err(e) => last = e,
                }
            }
            match (now_active, seen) {
                (Some(k), Some((s, since, n))) if k == s && activations(&self.log(k)) == n => {
                    if since.elapsed() >= ACTIVE_STABLE {
                        return Ok(k);
                    }
                }
                (Some(k), _) => seen = Some((k, Instant::now(), activations(&self.log(k)))),
                (None, _) => seen = None,
            }
            if t.elapsed() > timeout {
                return Err(format!(
                    "no instance of {} became (and stayed) active within {} s; last status:\n{}\n{}",
                    self.qm,
                    timeout.as_secs(),
                    last.trim(),
                    self.findings().join("\n")
                ));
            }
            std::thread::sleep(ACTIVE_POLL);
        }
    }

    pub(super) fn log(&self, i: usize) -> String {
        crate::qm::error_log(&self.qm_dir(i))
    }

    /// Notable lines of the instances' logs (errors, warnings, restarts), at most 12 per instance.
    pub(crate) fn findings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, name) in INSTANCES.iter().enumerate().take(self.created) {
            let prefix = format!("[{}] {} instance {name}", self.tag(), self.qm);
            out.extend(log_lines(&prefix, &self.log(i)));
        }
        out
    }

    /// The group's directory name, which says which step it belongs to.
    pub(super) fn tag(&self) -> String {
        self.root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub(super) fn label(&self) -> String {
        match self.rtt_ms {
            None => format!("{} (direct replication links)", self.qm),
            Some(r) => format!("{} (relays adding {r} ms round trip)", self.qm),
        }
    }
}

impl Drop for HaGroup {
    fn drop(&mut self) {
        for i in 0..self.created {
            let _ = mq(&self.inst_home(i), &["endmqm", "-i", &self.qm]);
        }
        end_or_kill(&self.qm, &self.pids);
        for i in 0..self.created {
            let _ = mq(&self.inst_home(i), &["dltmqm", &self.qm]);
        }
        for &pid in &self.pids {
            unregister(pid);
        }
        self.relays.clear();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
