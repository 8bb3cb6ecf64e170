//! A full disk, for real: the queue manager's home is on a small tmpfs, and a ballast file fills it
//! while persistent messages are put. The queue manager must stay up, say truthfully why
//! persistent work is refused (checkpoints failing, no space), resume by itself once the ballast is
//! deleted, and lose no acknowledged message. `endmqm -w` must report a final checkpoint that
//! failed and leave no debris, and the next start must accept persistent work at once although
//! its recovered log is full. Mounting needs root: CI runs as root; elsewhere these tests say
//! loudly that they did not run.
//!
//! Also here: a warning of the storage crate reaches the error log (no root needed).

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
use support::{alive, free_port, Home, Qm};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("run id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// A tmpfs of `mb` MiB mounted on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// None (after saying so loudly) when not root; a failed mount as root is a test failure.
    fn mount(mb: u32) -> Option<Tmpfs> {
        if !is_root() {
            eprintln!(
                "\n*** SKIPPED: this test mounts a tmpfs to make a real full disk and needs root ***\n"
            );
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("fmqfs")
            .tempdir_in("/tmp")
            .unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(st.success(), "mount -t tmpfs failed (running as root)");
        Some(Tmpfs { dir })
    }

    fn home(&self) -> Home {
        Home {
            dir: tempfile::Builder::new()
                .prefix("fmq")
                .tempdir_in(self.dir.path())
                .unwrap(),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// A file that fills its filesystem; deleting it gives the space back.
struct Ballast(PathBuf);

impl Ballast {
    fn fill(dir: &Path) -> Ballast {
        let path = dir.join("ballast");
        let mut f = std::fs::File::create(&path).unwrap();
        for chunk in [1 << 20, 4096, 512] {
            let buf = vec![0x55u8; chunk];
            loop {
                match f.write_all(&buf) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(28) => break,
                    Err(e) => panic!("filling the disk: {e}"),
                }
            }
        }
        Ballast(path)
    }

    /// Fills the last page of `file` too (tmpfs allocates whole pages), so that appending to it
    /// fails: blank lines until ENOSPC.
    fn fill_last_page_of(file: &Path) {
        let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
        for _ in 0..8192 {
            match f.write(b"\n") {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => return,
                Err(e) => panic!("filling {}: {e}", file.display()),
            }
        }
        panic!("{} never filled up", file.display());
    }

    fn free(self) {
        std::fs::remove_file(&self.0).unwrap();
    }
}

fn persistent() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

fn body(n: usize) -> Bytes {
    let mut b = format!("M{n:08}-").into_bytes();
    b.resize(2048, b'x');
    Bytes::from(b)
}

fn key(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..9]).into_owned()
}

/// Puts message `n` persistently: outside syncpoint for odd `n`, under syncpoint and committed
/// for even `n`.
fn put(c: &Connection, h: &ferrymq_client::ObjectHandle, n: usize) -> Result<(), MqError> {
    if n % 2 == 1 {
        c.put(
            h,
            &persistent(),
            &Properties::default(),
            body(n),
            &PutOptions::default(),
        )
        .map(|_| ())
    } else {
        c.put_commit(h, &persistent(), &Properties::default(), body(n))
            .map(|_| ())
    }
}

/// What the application was told.
#[derive(Default)]
struct Ledger {
    /// Acknowledged: must be on the queue exactly once.
    acked: Vec<String>,
    /// Refused with a definite reason: must never appear.
    refused: Vec<String>,
}

/// Whether `e` is the refusal of a persistent put or commit because the recovery log is full
/// while checkpoints fail for want of space, said as such.
fn assert_truthful_full_disk(e: &MqError) {
    assert!(
        e.reason == Reason::RESOURCE_PROBLEM || e.reason == Reason::BACKED_OUT,
        "unexpected reason {e}"
    );
    let m = &e.message;
    assert!(
        m.contains("recovery log is full") && m.contains("checkpoints are failing"),
        "the reason does not say that checkpoints are failing: {m}"
    );
    assert!(
        m.contains("No space left on device") && m.contains("the disk is full"),
        "the reason does not say the disk is full: {m}"
    );
    assert!(
        !m.contains("checkpoint is running"),
        "the reason claims a checkpoint is running: {m}"
    );
}

/// Creates (small log: 2 x 1 MiB) and starts a queue manager in `home` with `ini` settings.
fn start_qm<'h>(home: &'h Home, name: &str, ini: &[(&str, &str, &str)]) -> Qm<'h> {
    let port = free_port();
    home.ok(&[
        "crtmqm",
        "-p",
        &port.to_string(),
        "-lp",
        "2",
        "-lf",
        "256",
        "--insecure",
        name,
    ]);
    for (s, k, v) in ini {
        home.ok(&["setmqini", "-m", name, "-s", s, "-k", k, "-v", v]);
    }
    home.ok(&["strmqm", name]);
    Qm {
        home,
        name: name.to_string(),
        port,
    }
}

fn connect(qm: &Qm) -> Connection {
    Connection::connect(ConnectOptions::client(&qm.name, &qm.conname()).unwrap()).unwrap()
}

/// Puts until persistent work is refused (the log filled while checkpoints fail); returns that
/// refusal. Every call's outcome goes into the ledger.
fn put_until_refused(
    c: &Connection,
    h: &ferrymq_client::ObjectHandle,
    next: &mut usize,
    ledger: &mut Ledger,
) -> MqError {
    let t = Instant::now();
    loop {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "persistent puts were never refused with the disk full ({} acknowledged)",
            ledger.acked.len()
        );
        let n = *next;
        *next += 1;
        match put(c, h, n) {
            Ok(()) => ledger.acked.push(key(&body(n))),
            Err(e) => {
                ledger.refused.push(key(&body(n)));
                return e;
            }
        }
    }
}

/// Drains the queue and holds it to the ledger: every acknowledged message exactly once, nothing
/// refused.
fn drain_and_check(qm: &Qm, ledger: &Ledger) {
    let c = connect(qm);
    let h = c.open(Q, open::INPUT_EXCLUSIVE).unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => *seen.entry(key(&m.body)).or_default() += 1,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => panic!("draining: {e}"),
        }
    }
    for (k, n) in &seen {
        assert_eq!(*n, 1, "{k} found {n} times");
    }
    for r in &ledger.refused {
        assert!(!seen.contains_key(r), "{r} was refused but is on the queue");
    }
    let lost: Vec<_> = ledger
        .acked
        .iter()
        .filter(|a| !seen.contains_key(*a))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    assert_eq!(seen.len(), ledger.acked.len(), "messages nobody put");
}

/// No temporary file of an interrupted manifest or control file write is left behind.
fn assert_no_debris(qm: &Qm) {
    let debris: Vec<String> = ["store", "log"]
        .iter()
        .flat_map(|d| std::fs::read_dir(qm.dir().join(d)).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(debris.is_empty(), "debris left behind: {debris:?}");
}

/// The newest checkpoint manifest's name in the store.
fn newest_manifest(qm: &Qm) -> Option<String> {
    std::fs::read_dir(qm.dir().join("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("checkpoint-") && n.ends_with(".ckpt"))
        .max()
}

fn error_log(qm: &Qm) -> String {
    support::error_log(&qm.dir())
}

#[test]
fn a_full_disk_stops_persistence_truthfully_and_it_resumes_by_itself_when_space_returns() {
    let Some(fs) = Tmpfs::mount(24) else { return };
    let home = fs.home();
    // Frequent checkpoints, so one is running or due whenever the disk fills.
    let qm = start_qm(&home, "QDISK", &[("Log", "CheckpointIntervalMs", "200")]);
    let pid = qm.pid().expect("pid");
    let c = connect(&qm);
    let h = c.open(Q, open::OUTPUT).unwrap();
    let mut ledger = Ledger::default();
    let mut next = 0;
    for _ in 0..100 {
        put(&c, &h, next).expect("put before the disk is full");
        ledger.acked.push(key(&body(next)));
        next += 1;
    }

    let ballast = Ballast::fill(home.path());
    // Not a byte more fits in the error log either.
    Ballast::fill_last_page_of(&qm.dir().join("errors").join("FMQERR01.LOG"));
    let e = put_until_refused(&c, &h, &mut next, &mut ledger);
    assert_truthful_full_disk(&e);
    // Still refused the same way a while later, and the process is alive throughout.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        assert!(alive(pid), "the queue manager died with the disk full");
        let n = next;
        next += 1;
        match put(&c, &h, n) {
            Ok(()) => ledger.acked.push(key(&body(n))),
            Err(e) => {
                assert_truthful_full_disk(&e);
                ledger.refused.push(key(&body(n)));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(alive(pid), "the queue manager died with the disk full");
    // Administration meets the same full log: each change is either answered once durable or
    // refused with the reason (and not made) once the log has no room even for its small record.
    const DEFINES: usize = 200;
    let script: String = (0..DEFINES)
        .map(|n| format!("DEFINE QLOCAL(DURING.FULL.{n})\n"))
        .collect();
    let define = home.run_with_input(&["runmqsc", "-e", &qm.name], &script);
    let define_out = String::from_utf8_lossy(&define.stdout).into_owned();
    let defined: Vec<usize> = (0..DEFINES)
        .filter(|n| define_out.contains(&format!("QLOCAL(DURING.FULL.{n}) defined.")))
        .collect();
    assert!(
        defined.len() < DEFINES
            && define_out.contains("failed: the recovery log is full")
            && define_out.contains("Reason: MQRC_RESOURCE_PROBLEM (2102)"),
        "no DEFINE was refused for a full log, or without a reason:\n{define_out}"
    );
    eprintln!(
        "with the disk full, {} DEFINEs were answered done before the log refused them",
        defined.len()
    );

    // Space returns: persistent puts and commits work again by themselves, without a restart.
    ballast.free();
    let freed = Instant::now();
    let mut resumed = None;
    while freed.elapsed() < Duration::from_secs(20) {
        let n = next;
        next += 1;
        match put(&c, &h, n) {
            Ok(()) => {
                ledger.acked.push(key(&body(n)));
                resumed = Some(freed.elapsed());
                break;
            }
            Err(e) => {
                assert_truthful_full_disk(&e);
                ledger.refused.push(key(&body(n)));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed = resumed.expect("persistent puts did not resume within 20 s of freeing space");
    eprintln!(
        "persistence resumed {} ms after the ballast was deleted",
        resumed.as_millis()
    );
    for _ in 0..200 {
        let n = next;
        next += 1;
        put(&c, &h, n).expect("persistent put or commit after space returned");
        ledger.acked.push(key(&body(n)));
    }
    assert!(alive(pid), "the queue manager died");
    assert_eq!(qm.pid(), Some(pid), "the queue manager was restarted");
    let log = error_log(&qm);
    assert!(
        log.contains("checkpoint succeeded after"),
        "the error log does not say persistence resumed:\n{log}"
    );
    // What could not be written while the disk was full comes late, and says so.
    assert!(
        log.contains("FMQ9000W")
            && log.contains("could not be written (No space left on device")
            && log.contains("checkpoint failed (1 in a row)")
            && log.contains("No space left on device (os error 28); retrying"),
        "the error log says nothing about the failed checkpoints:\n{log}"
    );
    assert!(!log.contains("panicked"), "a thread panicked:\n{log}");
    eprintln!("error log:\n{}", log.trim_start_matches('\n'));
    drop(c);

    // Every acknowledged message is there, after a clean end and restart as well.
    home.ok(&["endmqm", "-w", &qm.name]);
    qm.restart();
    drain_and_check(&qm, &ledger);
    let shown = home.run_with_input(&["runmqsc", &qm.name], "DISPLAY QLOCAL(DURING.FULL.*)\n");
    let shown = String::from_utf8_lossy(&shown.stdout);
    let held: Vec<usize> = (0..DEFINES)
        .filter(|n| shown.contains(&format!("QUEUE(DURING.FULL.{n})")))
        .collect();
    assert_eq!(
        held, defined,
        "the queues defined with the disk full are not those answered done:\n{shown}"
    );
}

#[test]
fn endmqm_reports_a_failed_final_checkpoint_and_the_next_start_takes_work_at_once() {
    let Some(fs) = Tmpfs::mount(24) else { return };
    let home = fs.home();
    let qm = start_qm(&home, "QEND", &[]);
    let c = connect(&qm);
    let h = c.open(Q, open::OUTPUT).unwrap();
    let mut ledger = Ledger::default();
    let mut next = 0;
    for _ in 0..50 {
        put(&c, &h, next).expect("put before the disk is full");
        ledger.acked.push(key(&body(next)));
        next += 1;
    }
    let ballast = Ballast::fill(home.path());
    // Fill the log while checkpoints fail: the run ends with a full log.
    let e = put_until_refused(&c, &h, &mut next, &mut ledger);
    assert_truthful_full_disk(&e);
    drop(c);

    let out = home.run(&["endmqm", "-w", &qm.name]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "endmqm -w succeeded although the final checkpoint could not be written:\n{stdout}{stderr}"
    );
    assert!(
        stderr.contains("final checkpoint failed") && stderr.contains("No space left on device"),
        "endmqm does not say the final checkpoint failed and why:\n{stdout}{stderr}"
    );
    assert!(
        !stdout.contains("ended."),
        "endmqm reports a clean end:\n{stdout}"
    );
    assert_no_debris(&qm);

    // Space returns; the restarted queue manager takes persistent work at once, although the
    // log it recovered is full.
    ballast.free();
    qm.restart();
    let c = connect(&qm);
    let h = c.open(Q, open::OUTPUT).unwrap();
    for _ in 0..4 {
        let n = next;
        next += 1;
        put(&c, &h, n).expect("the first persistent puts and commits after the restart");
        ledger.acked.push(key(&body(n)));
    }
    drop(c);
    let log = error_log(&qm);
    eprintln!("error log:\n{log}");
    assert!(
        log.contains("start-up checkpoint"),
        "no start-up checkpoint in the error log:\n{log}"
    );
    drain_and_check(&qm, &ledger);
    let out = home.ok(&["endmqm", "-w", &qm.name]);
    assert!(out.contains("ended."), "{out}");
}

/// Every message is already in the store when the disk fills, so the final checkpoint fails
/// writing its manifest (it used to leave an empty `.ckpt.tmp`).
#[test]
fn a_final_checkpoint_that_cannot_write_its_manifest_is_reported_and_leaves_no_debris() {
    let Some(fs) = Tmpfs::mount(24) else { return };
    let home = fs.home();
    let qm = start_qm(&home, "QMAN", &[("Log", "CheckpointIntervalMs", "200")]);
    let before = newest_manifest(&qm);
    let c = connect(&qm);
    let h = c.open(Q, open::OUTPUT).unwrap();
    let mut ledger = Ledger::default();
    for n in 0..50 {
        put(&c, &h, n).expect("put");
        ledger.acked.push(key(&body(n)));
    }
    drop(c);
    // Wait for the periodic checkpoint to store them.
    let t = Instant::now();
    while newest_manifest(&qm) == before {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no checkpoint within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ballast = Ballast::fill(home.path());
    let out = home.run(&["endmqm", "-w", &qm.name]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("final checkpoint failed")
            && stderr.contains("No space left on device")
            && stderr.contains(".ckpt.tmp"),
        "endmqm -w does not report the failed final checkpoint (writing its manifest):\n{stdout}{stderr}"
    );
    eprintln!("endmqm -w said: {stderr}");
    assert_no_debris(&qm);
    ballast.free();
    qm.restart();
    drain_and_check(&qm, &ledger);
    let out = home.ok(&["endmqm", "-w", &qm.name]);
    assert!(out.contains("ended."), "{out}");
}

#[test]
fn storage_warnings_reach_the_error_log() {
    let home = Home::new();
    let qm = Qm::start(&home, "QWARN", &["-lp", "2", "-lf", "64"]);
    qm.end();
    let file = qm.dir().join("log").join("S0000001.LOG");
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(4096).unwrap();
    drop(f);
    qm.restart();
    let log = error_log(&qm);
    assert!(
        log.contains("shorter than its preallocated size; extending it with zeros")
            && log.contains("S0000001.LOG"),
        "the log crate's warning is not in the error log:\n{log}"
    );
    qm.end();
}
