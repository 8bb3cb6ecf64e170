//! Queue manager lifecycle with MQ's command names: crtmqm, strmqm, endmqm, dltmqm, dspmq, setmqini,
//! dspmqini. Exit statuses follow MQ's where MQ defines one (5 running, 8 already exists, 16 does
//! not exist, 40 not available, 72 queue manager name error); strmqm exits 3 when the queue
//! manager started but recovery discarded something that may have been acknowledged; anything else
//! that fails exits 1.

use ferrymq_proto::ControlCommand;
use std::fs::File;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrymq_server::{errlog, ferrymq_home, storage, Ini, QmConfig, QmPaths};
use ferrymq_types::limits;
use ferrymq_types::objects::{qmgr_name_from_dir, validate_qmgr_name};

use crate::cli;

/// A failure with the exit status to end the process with.
#[derive(Debug)]
pub struct Fail {
    pub code: i32,
    pub message: String,
}

pub type Res = Result<(), Fail>;

pub(crate) fn fail(code: i32, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

pub(crate) fn other(message: impl Into<String>) -> Fail {
    fail(1, message)
}

pub const EXIT_RUNNING: i32 = 5;
pub const EXIT_EXISTS: i32 = 8;
pub const EXIT_NO_QMGR: i32 = 16;
pub const EXIT_NOT_AVAILABLE: i32 = 40;
/// The name is not a valid queue manager name (MQ's "queue manager name error").
pub const EXIT_BAD_NAME: i32 = 72;
/// strmqm: the queue manager is running, but recovery discarded log records or stored messages
/// that may have been acknowledged (the error log lists them).
pub const EXIT_RECOVERY_LOSS: i32 = storage::RECOVERY_LOSS_EXIT;

fn one_name(cmd: &str, name: &str) -> Result<String, Fail> {
    validate_qmgr_name(name).map_err(|e| fail(EXIT_BAD_NAME, format!("{cmd}: {e}")))?;
    Ok(name.to_string())
}

/// The files of queue manager `name`: every command maps a name to its directory through this
/// (or [`QmPaths::new`] directly in crtmqm); an invalid name exits 72.
pub(crate) fn paths_of(cmd: &str, name: &str) -> Result<QmPaths, Fail> {
    QmPaths::new(&ferrymq_home(), name).map_err(|e| fail(EXIT_BAD_NAME, format!("{cmd}: {e}")))
}

pub(crate) fn existing(cmd: &str, name: &str) -> Result<QmPaths, Fail> {
    let paths = paths_of(cmd, name)?;
    if !paths.ini().exists() {
        return Err(fail(
            EXIT_NO_QMGR,
            format!(
                "{cmd}: queue manager '{name}' does not exist (looked in {})",
                paths.dir.display()
            ),
        ));
    }
    Ok(paths)
}

/// Whether a queue manager process holds the lock now.
pub fn is_running(paths: &QmPaths) -> bool {
    match File::open(paths.lock_file()) {
        Ok(f) => matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

pub fn crtmqm(p: &cli::Crtmqm) -> Res {
    let name = one_name("crtmqm", &p.name)?;
    let paths = paths_of("crtmqm", &name)?;
    if paths.ini().exists() {
        return Err(fail(
            EXIT_EXISTS,
            format!("crtmqm: queue manager '{name}' already exists"),
        ));
    }
    let plan = crate::initial::Plan::from_flags(p)?;
    let lp: u32 = p.lp.unwrap_or(limits::LOG_PRIMARY_FILES_DEFAULT);
    let lf: u32 = p.lf.unwrap_or(limits::LOG_FILE_PAGES_DEFAULT);
    if !(2..=254).contains(&lp) {
        return Err(other(format!(
            "crtmqm: -lp {lp}: the number of log files must be 2..254"
        )));
    }
    if !(64..=65535).contains(&lf) {
        return Err(other(format!(
            "crtmqm: -lf {lf}: log file pages must be 64..65535 (4 KiB each)"
        )));
    }
    let port: u16 = p.p.unwrap_or(1414);
    let handles: u32 = p.h.unwrap_or(limits::HANDLES_PER_CONN_DEFAULT);
    let mut ini = Ini::default();
    ini.set("QueueManager", "Name", &name);
    ini.set("QueueManager", "Port", &port.to_string());
    ini.set("QueueManager", "MaxHandles", &handles.to_string());
    if let Some(c) = &p.c {
        ini.set("QueueManager", "Description", c);
    }
    ini.set("Log", "LogType", "CIRCULAR");
    ini.set("Log", "LogPrimaryFiles", &lp.to_string());
    ini.set("Log", "LogFilePages", &lf.to_string());
    ini.set("Log", "Durability", "fsync");
    match (&p.ha, &p.hi) {
        (None, None) => {}
        (Some(list), Some(local)) => {
            let instances = ferrymq_server::config::HaConfig::parse_instances(list)
                .map_err(|e| other(format!("crtmqm: -ha {list}: {e}")))?;
            if !instances.iter().any(|(n, _)| n == local.as_str()) {
                return Err(other(format!(
                    "crtmqm: -hi {local} is not one of the instances named by -ha"
                )));
            }
            ini.set("NativeHA", "LocalName", local);
            ini.set("NativeHA", "Instances", list);
            if let Some(range) = ferrymq_server::config::ephemeral_port_range() {
                for (name, addr) in &instances {
                    if let Some(w) = ferrymq_server::config::ephemeral_port_warning(addr, range) {
                        eprintln!("crtmqm: warning: instance {name}: {w}");
                    }
                }
            }
        }
        _ => {
            return Err(other(
                "crtmqm: an HA instance needs both -ha name=host(port),... (every instance of the group, in the same order everywhere) and -hi name (this instance)",
            ))
        }
    }
    crate::dr_cmds::dr_flags(p, &mut ini).map_err(|e| other(format!("crtmqm: {e}")))?;
    if let Some(fs) = &p.fs {
        // MQ's default queue file size; kept for dspmqini, as FerryMQ's message store grows by segments.
        ini.set("TuningParameters", "DefaultQFileSize", fs);
    }
    std::fs::create_dir_all(paths.dir.join("errors")).map_err(|e| {
        other(format!(
            "crtmqm: cannot create {}: {e}",
            paths.dir.display()
        ))
    })?;
    plan.set_ini(&mut ini);
    ini.save(&paths.ini()).map_err(other)?;
    if let Err(e) = ferrymq_server::create_storage_with(&paths, &plan.script())
        .and_then(|()| plan.finish(&paths))
    {
        let _ = std::fs::remove_dir_all(&paths.dir);
        return Err(other(format!("crtmqm: {e}")));
    }
    println!("FerryMQ queue manager '{name}' created (port {port}, log {lp} x {lf} pages).");
    println!("Directory: {}", paths.dir.display());
    println!("{}", plan.describe());
    Ok(())
}

pub fn strmqm(p: &cli::Strmqm) -> Res {
    let name = one_name("strmqm", &p.name)?;
    let paths = existing("strmqm", &name)?;
    if is_running(&paths) && !predecessor_gone(&paths) {
        return Err(fail(
            EXIT_RUNNING,
            format!("strmqm: queue manager '{name}' is already running"),
        ));
    }
    // Keys FerryMQ does not know are ignored by the queue manager; say so (it says so in its
    // error log too).
    if let Ok(ini) = Ini::load(&paths.ini()) {
        for e in ferrymq_server::config::unknown_keys(&ini) {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "strmqm: warning: qm.ini: {e}; it is ignored"
            );
        }
    }
    let log = paths.error_log();
    let console = paths.console_log();
    std::fs::create_dir_all(paths.errors_dir()).map_err(|e| other(e.to_string()))?;
    // The process's own stdout and stderr: whatever does not go through its error log (a panic).
    let out = File::options()
        .create(true)
        .append(true)
        .open(&console)
        .map_err(|e| other(format!("strmqm: {}: {e}", console.display())))?;
    let err = out.try_clone().map_err(|e| other(e.to_string()))?;
    // Where this start's entries begin: measured before the child can write (its recovery report
    // or its failure may come before this process gets to look).
    let log_start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let console_start = std::fs::metadata(&console).map(|m| m.len()).unwrap_or(0);
    let exe = std::env::current_exe().map_err(|e| other(e.to_string()))?;
    let mut child = Command::new(exe)
        .arg("run-qmgr")
        .arg(&name)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            other(format!(
                "strmqm: cannot start the queue manager process: {e}"
            ))
        })?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| other(e.to_string()))? {
            let mut tail = log_since(&paths, log_start);
            tail.push_str(&read_tail(&console, console_start));
            return Err(other(format!(
                "strmqm: queue manager '{name}' failed to start ({status}):\n{tail}"
            )));
        }
        if paths.pid_file().exists() && UnixStream::connect(paths.socket()).is_ok() {
            println!(
                "FerryMQ queue manager '{name}' started (pid {}).",
                child.id()
            );
            // Recovery wrote what it discarded to the error log before the socket opened.
            let tail = log_since(&paths, log_start);
            let entries = |id: errlog::MsgId| -> Vec<String> {
                let code = id.code();
                tail.lines()
                    .filter_map(errlog::parse_entry)
                    .filter(|e| e.id == code)
                    .map(|e| e.message)
                    .collect()
            };
            // An open-file limit too low for MaxChannels: said at once, not only in the log.
            for w in entries(errlog::ids::OPEN_FILES_LOW)
                .into_iter()
                .chain(entries(errlog::ids::WAKE_LATENCY_UNAVAILABLE))
            {
                eprintln!("strmqm: warning: {w}");
            }
            let note = entries(errlog::ids::RECOVERY_NOTE);
            if !note.is_empty() {
                // A torn tail only: reported, not a failure.
                eprintln!("strmqm: {}", note.join("\n"));
            }
            let loss = entries(errlog::ids::RECOVERY_LOSS);
            if !loss.is_empty() {
                return Err(fail(
                    EXIT_RECOVERY_LOSS,
                    format!(
                        "strmqm: WARNING: queue manager '{name}' is running, but {} (details in {}):\n{}",
                        loss[0].trim_end_matches(':'),
                        log.display(),
                        loss[1..].join("\n")
                    ),
                ));
            }
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(300) {
            return Err(other(format!(
                "strmqm: queue manager '{name}' did not start within 300 s; see {}",
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lock is held, but is its holder the process recorded in qm.pid dying (killed, its threads
/// still tearing down)? Then wait up to 30 s for the lock instead of refusing to start.
fn predecessor_gone(paths: &QmPaths) -> bool {
    let pid = std::fs::read_to_string(paths.pid_file()).unwrap_or_default();
    let pid = pid.trim();
    if pid.is_empty() {
        return false;
    }
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let dying = match &state {
        None => true,
        Some(st) => {
            st.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                == Some("Z")
        }
    };
    if !dying {
        return false;
    }
    let started = Instant::now();
    while is_running(paths) {
        if started.elapsed() > Duration::from_secs(30) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The error log's entries since the current file was `from` bytes long (reading the rotated
/// file too if the log was rotated meanwhile).
fn log_since(paths: &QmPaths, from: u64) -> String {
    let cur = paths.error_log();
    let len = std::fs::metadata(&cur).map(|m| m.len()).unwrap_or(0);
    if len >= from {
        return read_tail(&cur, from);
    }
    let mut s = read_tail(&paths.errors_dir().join(errlog::FILES[1]), from);
    s.push_str(&read_tail(&cur, 0));
    s
}

fn read_tail(path: &Path, from: u64) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        use std::io::Seek;
        let _ = f.seek(std::io::SeekFrom::Start(from));
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// Sends one administrative command over the bindings socket and returns the reply text.
pub fn admin_command(
    paths: &QmPaths,
    name: &str,
    command: &ControlCommand,
) -> Result<String, String> {
    let mut opts = ferrymq_client::ConnectOptions::bindings(name);
    opts.transport = ferrymq_client::Transport::Bindings {
        home: paths
            .dir
            .parent()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf),
    };
    opts.app_name = "endmqm".into();
    let c = ferrymq_client::blocking::Connection::connect(opts).map_err(|e| e.to_string())?;
    c.admin(&command.to_text()).map_err(|e| e.to_string())
}

pub fn endmqm(p: &cli::Endmqm) -> Res {
    let name = one_name("endmqm", &p.name)?;
    let paths = existing("endmqm", &name)?;
    if !is_running(&paths) {
        return Err(fail(
            EXIT_NOT_AVAILABLE,
            format!("endmqm: queue manager '{name}' is not running"),
        ));
    }
    let immediate = p.i || p.p;
    let cmd = ControlCommand::Shutdown { immediate };
    if let Err(e) = admin_command(&paths, &name, &cmd) {
        // The process holds the lock but does not answer: end it with SIGTERM, which it handles as
        // an immediate end.
        let pid = std::fs::read_to_string(paths.pid_file()).unwrap_or_default();
        let pid = pid.trim();
        if pid.is_empty() {
            return Err(other(format!("endmqm: {e}, and no pid file to signal")));
        }
        eprintln!("endmqm: {e}; sending SIGTERM to pid {pid}");
        Command::new("kill")
            .arg("-TERM")
            .arg(pid)
            .status()
            .map_err(|e| other(e.to_string()))?;
    }
    println!(
        "FerryMQ queue manager '{name}' {} end requested.",
        if immediate { "immediate" } else { "controlled" }
    );
    if p.w {
        let started = Instant::now();
        while is_running(&paths) {
            if started.elapsed() > Duration::from_secs(600) {
                return Err(other(format!(
                    "endmqm: queue manager '{name}' still running after 600 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The process is not our child: it left how it ended in qm.end before releasing its lock.
        match ferrymq_server::qmgr::EndStatus::read(&paths) {
            Some(Ok(())) => println!("FerryMQ queue manager '{name}' ended."),
            Some(Err(why)) => {
                return Err(other(format!(
                    "endmqm: queue manager '{name}' ended, but {why}"
                )))
            }
            None => {
                return Err(other(format!(
                    "endmqm: queue manager '{name}' ended without recording that it ended cleanly (it was killed, crashed, or could not write {}); see {}",
                    paths.end_status().display(),
                    paths.error_log().display()
                )))
            }
        }
    }
    Ok(())
}

pub fn dltmqm(p: &cli::Dltmqm) -> Res {
    let name = one_name("dltmqm", &p.name)?;
    let paths = existing("dltmqm", &name)?;
    if is_running(&paths) {
        return Err(fail(
            EXIT_RUNNING,
            format!("dltmqm: queue manager '{name}' is running; end it first (endmqm -w {name})"),
        ));
    }
    // Exactly this queue manager's directory: its name maps to one component under qmgrs/ (no
    // '/', never '.' or '..'), and remove_dir_all removes symbolic links without following them.
    debug_assert_eq!(
        paths.dir.parent(),
        Some(QmPaths::root(&ferrymq_home()).as_path())
    );
    std::fs::remove_dir_all(&paths.dir).map_err(|e| {
        other(format!(
            "dltmqm: cannot remove {}: {e}",
            paths.dir.display()
        ))
    })?;
    println!("FerryMQ queue manager '{name}' deleted.");
    Ok(())
}

/// The queue managers under `$FERRYMQ_HOME` (directories with a qm.ini whose name some valid
/// queue manager name maps to), sorted.
pub(crate) fn qmgr_names() -> Vec<String> {
    let root = QmPaths::root(&ferrymq_home());
    let mut names: Vec<String> = match std::fs::read_dir(&root) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("qm.ini").exists())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|d| qmgr_name_from_dir(&d))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

pub fn dspmq(p: &cli::Dspmq) -> Res {
    if p.w.is_some() && !p.o.as_deref().is_some_and(|o| o.eq_ignore_ascii_case("dr")) {
        return Err(other(
            "dspmq: -w waits for DR resynchronisation: use it with -o dr -m QMNAME",
        ));
    }
    if let Some(o) = &p.o {
        if o.eq_ignore_ascii_case("dr") {
            return match p.w {
                Some(secs) => crate::dr_cmds::dspmq_dr_wait(p.m.as_deref(), secs),
                None => crate::dr_cmds::dspmq_dr(p.m.as_deref()),
            };
        }
        if !o.eq_ignore_ascii_case("ha") && !o.eq_ignore_ascii_case("nativeha") {
            return Err(other(format!(
                "dspmq: -o {o}: '-o ha' and '-o dr' are known"
            )));
        }
        let m =
            p.m.as_deref()
                .ok_or_else(|| other("dspmq: -o ha needs -m QMNAME"))?;
        let paths = existing("dspmq", m)?;
        if !is_running(&paths) {
            return Err(fail(
                EXIT_NOT_AVAILABLE,
                format!("dspmq: this instance of queue manager '{m}' is not running"),
            ));
        }
        let text = admin_command(&paths, m, &ControlCommand::HaStatus)
            .map_err(|e| other(format!("dspmq: {e}")))?;
        println!("QMNAME({m})");
        for line in text.lines() {
            println!("  {line}");
        }
        return Ok(());
    }
    let mut names = qmgr_names();
    if let Some(m) = &p.m {
        if !names.iter().any(|n| n == m) {
            return Err(fail(
                EXIT_NO_QMGR,
                format!("dspmq: queue manager '{m}' does not exist"),
            ));
        }
        names.retain(|n| n == m);
    }
    for name in names {
        let paths = paths_of("dspmq", &name)?;
        let cfg = Ini::load(&paths.ini()).and_then(|i| QmConfig::from_ini(&i));
        let ha = cfg.as_ref().is_ok_and(|c| c.ha.is_some());
        let port = cfg
            .map(|c| c.port.to_string())
            .unwrap_or_else(|_| "?".into());
        let (status, pid) = if is_running(&paths) {
            (
                if ha {
                    ha_instance_status(&paths, &name)
                } else {
                    "Running"
                },
                std::fs::read_to_string(paths.pid_file())
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            )
        } else if paths.pid_file().exists() {
            ("Ended unexpectedly", String::new())
        } else {
            ("Ended normally", String::new())
        };
        println!("QMNAME({name}) STATUS({status}) PID({pid}) PORT({port})");
    }
    Ok(())
}

/// What plain `dspmq` says of a running HA instance, with MQ's words for a Native HA
/// instance: `Running` for the active one, `Replica` for a replica, `Starting` for one elected
/// and taking over.
fn ha_instance_status(paths: &QmPaths, name: &str) -> &'static str {
    let Ok(text) = admin_command(paths, name, &ControlCommand::HaStatus) else {
        return "Status not available";
    };
    let role = text
        .lines()
        .find(|l| l.contains("LOCAL(YES)"))
        .and_then(|l| l.split("ROLE(").nth(1))
        .and_then(|r| r.split(')').next())
        .unwrap_or("");
    match role {
        "Active" => "Running",
        "Starting" => "Starting",
        _ => "Replica",
    }
}

/// `sethapreferred -m QM [-i INSTANCE]` / `clearhapreferred -m QM`: records, through the HA
/// group's replicated log, which instance should be active whenever it is in sync (by default
/// the instance this command runs beside). The active instance hands over by itself.
/// `instance`: `Some` for sethapreferred (`-i`, if given), `None` for clearhapreferred.
pub fn hapreferred(m: &str, instance: Option<Option<String>>) -> Res {
    let set = instance.is_some();
    let cmd = if set {
        "sethapreferred"
    } else {
        "clearhapreferred"
    };
    let paths = existing(cmd, m)?;
    let cfg = Ini::load(&paths.ini())
        .and_then(|i| QmConfig::from_ini(&i))
        .map_err(other)?;
    let Some(ha) = cfg.ha else {
        return Err(other(format!(
            "{cmd}: queue manager '{m}' is not an HA instance (crtmqm -ha)"
        )));
    };
    if !is_running(&paths) {
        return Err(fail(
            EXIT_NOT_AVAILABLE,
            format!("{cmd}: this instance of queue manager '{m}' is not running"),
        ));
    }
    let command = ControlCommand::HaPrefer(set.then(|| instance.flatten().unwrap_or(ha.local)));
    let text = admin_command(&paths, m, &command).map_err(|e| other(format!("{cmd}: {e}")))?;
    println!("{text}");
    Ok(())
}

pub fn setmqini(p: &cli::Setmqini) -> Res {
    // clap requires -m, -s and -k, and -v unless -d.
    let (m, s, k) = (
        p.m.clone().unwrap_or_default(),
        p.s.clone().unwrap_or_default(),
        p.k.clone().unwrap_or_default(),
    );
    let paths = existing("setmqini", &m)?;
    // A misspelt stanza or key would be kept and silently ignored: refuse it, or with -f keep it
    // with a warning (a key for a later version, say).
    if let Err(e) = ferrymq_server::config::check_key(&s, &k) {
        if !p.f && !p.d {
            return Err(other(format!(
                "setmqini: {e}\n(-f sets it anyway; FerryMQ does not use it)"
            )));
        }
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "setmqini: warning: {e}; FerryMQ does not use it"
        );
    } else if ferrymq_server::config::is_kept_not_used(&s, &k) && !p.d {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "setmqini: note: {s}:{k} is MQ's; FerryMQ keeps it but does not act on it"
        );
    }
    if p.d {
        let mut ini = Ini::load(&paths.ini()).map_err(other)?;
        for (st, kv) in ini.stanzas.iter_mut() {
            if st.eq_ignore_ascii_case(&s) {
                kv.retain(|(key, _)| !key.eq_ignore_ascii_case(&k));
            }
        }
        ini.save(&paths.ini()).map_err(other)?;
    } else {
        let v = p.v.clone().unwrap_or_default();
        set_ini_keys("setmqini", &paths, &[(&s, &k, &v)])?;
    }
    if is_running(&paths) {
        println!("setmqini: {s}:{k} set; it takes effect when queue manager '{m}' restarts.");
    }
    Ok(())
}

/// Sets qm.ini keys together (setmqini, mkdevcerts): refused, with nothing written, when the
/// result would stop the queue manager from starting.
pub(crate) fn set_ini_keys(cmd: &str, paths: &QmPaths, keys: &[(&str, &str, &str)]) -> Res {
    let mut ini = Ini::load(&paths.ini()).map_err(other)?;
    for (s, k, v) in keys {
        ini.set(s, k, v);
    }
    QmConfig::from_ini(&ini).map_err(|e| other(format!("{cmd}: {e}")))?;
    ini.save(&paths.ini()).map_err(other)
}

pub fn dspmqini(p: &cli::Dspmqini) -> Res {
    let m =
        p.m.clone()
            .or_else(|| p.name.clone())
            .ok_or_else(|| other("dspmqini: -m QMNAME is required"))?;
    let paths = existing("dspmqini", &m)?;
    print!("{}", Ini::load(&paths.ini()).map_err(other)?);
    Ok(())
}

/// Runs the queue manager in the foreground (what `strmqm` starts in the background).
pub fn run_qmgr(name: &str) -> Res {
    let name = one_name("run-qmgr", name)?;
    let paths = existing("run-qmgr", &name)?;
    ferrymq_server::run(&paths).map_err(|e| other(format!("ferrymq: queue manager '{name}': {e}")))
}
