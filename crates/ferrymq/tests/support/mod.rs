//! Test support: a private `$FERRYMQ_HOME` per test, the real `ferrymq` binary run as a separate
//! process, queue managers created and started with it, and helpers to kill them with SIGKILL.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, Reconnect, Transport};

pub mod chan;
pub mod dr;
pub mod ha;
pub mod netns;
pub mod workload;

pub const BIN: &str = env!("CARGO_BIN_EXE_ferrymq");

/// The `ferrymq-bench` binary (the measurement harness, its own package): beside [`BIN`], as
/// `cargo build -p ferrymq -p ferrymq-bench` (or `cargo test --workspace`) leaves it. Cargo gives
/// a test the path of its own package's binaries only, so this one is found by place.
pub fn bench_bin() -> PathBuf {
    let p = Path::new(BIN).with_file_name("ferrymq-bench");
    assert!(
        p.exists(),
        "{} is missing: build it first with cargo build -p ferrymq-bench",
        p.display()
    );
    p
}

/// Runs `ferrymq-bench ARGS` with `home` as `$FERRYMQ_HOME`.
pub fn run_bench(home: &Home, args: &[&str]) -> Output {
    Command::new(bench_bin())
        .args(args)
        .env("FERRYMQ_HOME", home.path())
        .output()
        .expect("run ferrymq-bench")
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                != Some("Z")
        }
    }
}

/// Sends SIGKILL to `pid` (a process this test started) and waits until it is gone.
pub fn kill9_pid(pid: u32) {
    let st = Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(st.success(), "kill -9 {pid}");
    let t = Instant::now();
    while alive(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "pid {pid} survived SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A private FERRYMQ_HOME, short enough for Unix socket paths, removed when dropped.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::Builder::new()
            .prefix("fmq")
            .tempdir_in("/tmp")
            .expect("temp dir");
        Home { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `ferrymq ARGS` with this home.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .env("FERRYMQ_HOME", self.path())
            .output()
            .expect("run ferrymq")
    }

    /// Runs `ferrymq ARGS` with stdin.
    pub fn run_with_input(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .args(args)
            .env("FERRYMQ_HOME", self.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn ferrymq");
        // A command that fails at once (its queue manager is down) may close its input before
        // reading it: its exit status and output say what happened.
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        child.wait_with_output().unwrap()
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "ferrymq {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// Runs `script` with `runmqsc` on queue manager `qm`; asserts that it succeeded and returns
/// what it printed.
pub fn mqsc(home: &Home, qm: &str, script: &str) -> String {
    let out = home.run_with_input(&["runmqsc", qm], script);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "runmqsc {qm} failed:\n{script}\n---\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A free loopback port outside the kernel's ephemeral range where possible (see
/// [`free_port_outside_ephemeral`]), else one the kernel picks.
pub fn free_port() -> u16 {
    free_port_outside_ephemeral()
        .or_else(|| ferrymq_bench::qm::bind_probe(0))
        .expect("a free loopback port")
}

/// A loopback port below the kernel's ephemeral range (the harness's own choice of ports).
pub use ferrymq_bench::qm::free_port_outside_ephemeral;

/// A queue manager's whole error log (rotated files, current file, console output).
pub use ferrymq_bench::qm::error_log;

/// A queue manager created in a `Home`, ended and deleted on drop.
pub struct Qm<'h> {
    pub home: &'h Home,
    pub name: String,
    pub port: u16,
}

impl<'h> Qm<'h> {
    /// Creates (with extra crtmqm flags) and starts a queue manager on a free port.
    pub fn start(home: &'h Home, name: &str, crtmqm_flags: &[&str]) -> Qm<'h> {
        let qm = Qm::create(home, name, crtmqm_flags);
        qm.restart();
        qm
    }

    /// Like [`Qm::start`], with MQSC over TCP allowed (qm.ini `Channels:RemoteAdmin=yes`; off
    /// by default), for tests that administer through client connections or `runmqsc -c`.
    pub fn start_remote_admin(home: &'h Home, name: &str, crtmqm_flags: &[&str]) -> Qm<'h> {
        let qm = Qm::create(home, name, crtmqm_flags);
        qm.set_ini("Channels", "RemoteAdmin", "yes");
        qm.restart();
        qm
    }

    /// Like [`Qm::start`], keeping the security defaults of a new queue manager (back-stop
    /// CHLAUTH rules, passwords required, remote administration over SYSTEM.ADMIN.SVRCONN), which
    /// the other constructors leave out (`crtmqm --insecure`) so that tests connect as before.
    pub fn start_secure(home: &'h Home, name: &str, crtmqm_flags: &[&str]) -> Qm<'h> {
        let qm = Qm::create_with(home, name, crtmqm_flags, true);
        qm.restart();
        qm
    }

    /// Creates a queue manager on a free port without starting it (`restart` starts it), without
    /// the security defaults (`crtmqm --insecure`) unless the flags ask for `--dev`.
    pub fn create(home: &'h Home, name: &str, crtmqm_flags: &[&str]) -> Qm<'h> {
        let secure = crtmqm_flags.contains(&"--dev");
        Qm::create_with(home, name, crtmqm_flags, secure)
    }

    fn create_with(home: &'h Home, name: &str, crtmqm_flags: &[&str], secure: bool) -> Qm<'h> {
        let port = free_port();
        let p = port.to_string();
        let mut args = vec!["crtmqm", "-p", &p];
        if !secure {
            args.push("--insecure");
        }
        args.extend_from_slice(crtmqm_flags);
        args.push(name);
        home.ok(&args);
        Qm {
            home,
            name: name.to_string(),
            port,
        }
    }

    /// Sets a qm.ini key (`setmqini`); takes effect at the next start.
    pub fn set_ini(&self, stanza: &str, key: &str, value: &str) {
        self.home.ok(&[
            "setmqini", "-m", &self.name, "-s", stanza, "-k", key, "-v", value,
        ]);
    }

    /// The checkpoint manifests in the message store, by name.
    pub fn manifests(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir().join("store"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".ckpt"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Waits (up to 20 s) until a checkpoint newer than any in `before` has been written.
    pub fn wait_for_checkpoint_after(&self, before: &[String]) {
        let t = Instant::now();
        while self.manifests().iter().all(|m| before.contains(m)) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no checkpoint was taken within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn dir(&self) -> PathBuf {
        self.home
            .path()
            .join("qmgrs")
            .join(ferrymq_types::objects::qmgr_dir_name(&self.name).unwrap())
    }

    pub fn conname(&self) -> String {
        format!("127.0.0.1({})", self.port)
    }

    /// A client-mode (TCP) connection.
    pub fn connect(&self) -> Connection {
        Connection::connect(ConnectOptions::client(&self.name, &self.conname()).unwrap())
            .expect("connect over TCP")
    }

    /// A client-mode connection that reconnects by itself for up to `secs` seconds.
    pub fn connect_reconnecting(&self, secs: u64) -> Connection {
        let mut o = ConnectOptions::client(&self.name, &self.conname()).unwrap();
        o.reconnect = Reconnect::Enabled {
            timeout: Duration::from_secs(secs),
        };
        Connection::connect(o).expect("connect over TCP")
    }

    /// A bindings-mode (Unix socket) connection.
    pub fn connect_bindings(&self) -> Connection {
        let mut o = ConnectOptions::bindings(&self.name);
        o.transport = Transport::Bindings {
            home: Some(self.home.path().to_path_buf()),
        };
        Connection::connect(o).expect("connect in bindings mode")
    }

    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir().join("qm.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Kills the queue manager process with SIGKILL and waits until it is gone.
    pub fn kill9(&self) {
        kill9_pid(self.pid().expect("queue manager pid"));
    }

    pub fn restart(&self) {
        self.home.ok(&["strmqm", &self.name]);
    }

    pub fn end(&self) {
        self.home.ok(&["endmqm", "-i", "-w", &self.name]);
    }
}

impl Drop for Qm<'_> {
    fn drop(&mut self) {
        let _ = self.home.run(&["endmqm", "-i", "-w", &self.name]);
        let _ = self.home.run(&["dltmqm", &self.name]);
    }
}

/// A `ferrymq relay` process (killed when dropped) adding `rtt_ms` of round trip between
/// 127.0.0.1:`listen` and 127.0.0.1:`target`.
pub struct Relay(std::process::Child);

impl Relay {
    /// The relay's process: SIGSTOP makes a half-open link (nothing forwarded, nothing closed).
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn relay(listen: u16, target: u16, rtt_ms: u32) -> Relay {
    relay_limited(listen, target, rtt_ms, None)
}

/// A relay as [`relay`], with each direction limited to `mbps` megabits per second if set.
pub fn relay_limited(listen: u16, target: u16, rtt_ms: u32, mbps: Option<u32>) -> Relay {
    let mut args = vec![
        "relay".to_string(),
        "--listen".into(),
        format!("127.0.0.1:{listen}"),
        "--target".into(),
        format!("127.0.0.1:{target}"),
        "--rtt-ms".into(),
        rtt_ms.to_string(),
        "--seconds".into(),
        "300".into(),
    ];
    if let Some(m) = mbps {
        args.extend(["--mbps".into(), m.to_string()]);
    }
    let child = Command::new(BIN).args(&args).spawn().expect("start relay");
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(10), "relay did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    Relay(child)
}
