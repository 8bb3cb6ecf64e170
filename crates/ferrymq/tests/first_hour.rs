//! What a new user meets in the first hour (issue 18): queue manager names that must never reach
//! another queue manager's files, `get | head -1`, Ctrl-C during the demo, misspelt qm.ini keys,
//! and flags that mean what MQ means by them. Black-box, against the real binary.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use ferrymq_client::open;
use support::{Home, Qm, BIN};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

fn depth(qm: &Qm) -> u64 {
    let c = qm.connect();
    let h = c.open(Q, open::INQUIRE).unwrap();
    let d = c.inquire(&h, &["CURDEPTH"]).unwrap();
    c.close(&h, 0).unwrap();
    c.disconnect().unwrap();
    d[0].1.parse().unwrap()
}

fn put_lines(home: &Home, qm: &str, lines: &[String]) {
    let out = home.run_with_input(&["put", qm, Q, "--persistent"], &(lines.join("\n") + "\n"));
    assert!(
        out.status.success(),
        "put to {qm}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn dspmq(home: &Home) -> String {
    home.ok(&["dspmq"])
}

#[test]
fn a_queue_manager_name_never_reaches_another_queue_managers_files() {
    let home = Home::new();
    let site = Qm::start(&home, "SITE", &[]);
    let msgs: Vec<String> = (0..5).map(|i| format!("payment-{i}")).collect();
    put_lines(&home, "SITE", &msgs);
    site.end();

    // A name with '/' is MQ-valid; it gets a directory of its own ('/' becomes '&').
    let nested = Qm::start(&home, "SITE/log", &[]);
    assert!(home.path().join("qmgrs/SITE&log/qm.ini").exists());
    let other = Qm::start(&home, "SITE/QMA", &[]);
    put_lines(&home, "SITE/QMA", &["kept".to_string()]);
    // Bindings mode (put above), dspmq and endmqm find them by name.
    let shown = dspmq(&home);
    for n in ["SITE", "SITE/log", "SITE/QMA"] {
        assert!(
            shown.contains(&format!("QMNAME({n}) ")),
            "{n} missing:\n{shown}"
        );
    }
    assert!(
        shown.contains("QMNAME(SITE/log) STATUS(Running)"),
        "{shown}"
    );
    nested.end();
    other.end();

    // Deleting SITE/log deletes exactly its own directory, not SITE's recovery log.
    home.ok(&["dltmqm", "SITE/log"]);
    assert!(!home.path().join("qmgrs/SITE&log").exists());
    assert!(
        home.path().join("qmgrs/SITE/log").is_dir(),
        "SITE's log was deleted"
    );
    site.restart();
    let got = home.ok(&["get", "SITE", Q]);
    assert_eq!(got.lines().collect::<Vec<_>>(), msgs, "SITE lost messages");
    site.end();

    // Deleting SITE leaves SITE/QMA alone.
    home.ok(&["dltmqm", "SITE"]);
    let shown = dspmq(&home);
    assert!(!shown.contains("QMNAME(SITE) "), "{shown}");
    assert!(shown.contains("QMNAME(SITE/QMA) "), "{shown}");
    other.restart();
    assert_eq!(home.ok(&["get", "SITE/QMA", Q]).trim(), "kept");
    other.end();

    // A leading '.' is not a hidden directory, and cannot become '.' or '..'.
    let dotted = Qm::create(&home, ".QM", &[]);
    assert!(home.path().join("qmgrs/!QM/qm.ini").exists());
    assert!(dspmq(&home).contains("QMNAME(.QM) "));
    drop(dotted);

    // Bad names: refused with MQ's "queue manager name error" (72), nothing touched.
    let long = "Q".repeat(49);
    for bad in ["..", ".", "", "a b", "a&b", "a\\b", long.as_str()] {
        for cmd in [
            vec!["crtmqm", bad],
            vec!["dltmqm", bad],
            vec!["strmqm", bad],
            vec!["endmqm", bad],
        ] {
            let out = home.run(&cmd);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(72), "{cmd:?}: {err}");
            assert!(err.contains("queue manager name"), "{cmd:?}: {err}");
        }
        let out = home.run(&[
            "setmqini",
            "-m",
            bad,
            "-s",
            "Log",
            "-k",
            "Durability",
            "-v",
            "os",
        ]);
        assert_eq!(out.status.code(), Some(72), "setmqini -m {bad:?}");
    }
    assert!(home.path().join("qmgrs/SITE&QMA/qm.ini").exists());
    assert_eq!(
        std::fs::read_dir(home.path().join("qmgrs"))
            .unwrap()
            .count(),
        1,
        "only SITE/QMA is left"
    );
}

#[test]
fn get_into_a_closed_pipe_removes_only_what_it_wrote() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMPIPE", &[]);
    let msgs: Vec<String> = (0..500).map(|i| format!("m{i:04}")).collect();
    put_lines(&home, "QMPIPE", &msgs);
    assert_eq!(depth(&qm), 500);

    // A real shell pipeline: head exits after one line and closes the pipe.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"{ "$0" get QMPIPE SYSTEM.DEFAULT.LOCAL.QUEUE; echo "get-exit=$?" >&2; } | head -1"#)
        .arg(BIN)
        .env("FERRYMQ_HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "m0000\n");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("get-exit=0"), "{stderr}");
    // The command says how many it handed over (written to the pipe before head closed it) ...
    let written: u64 = stderr
        .split("get: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {stderr}"));
    // A message is committed once the pipe's reader has read it: head read exactly one.
    assert_eq!(written, 1, "{stderr}");
    // ... and exactly those left the queue; the next one is the first it did not write.
    assert_eq!(depth(&qm), 500 - written, "{stderr}");
    let c = qm.connect();
    let h = c.open(Q, open::INPUT_AS_Q_DEF).unwrap();
    let m = c.get(&h, &ferrymq_client::GetOptions::any()).unwrap();
    assert_eq!(&m.body[..], msgs[written as usize].as_bytes());
    c.close(&h, 0).unwrap();
    c.disconnect().unwrap();

    // Browse into a closed pipe ends quietly too and removes nothing.
    let before = depth(&qm);
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"{ "$0" browse QMPIPE SYSTEM.DEFAULT.LOCAL.QUEUE; echo "browse-exit=$?" >&2; } | head -1"#)
        .arg(BIN)
        .env("FERRYMQ_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("browse-exit=0"), "{stderr}");
    assert_eq!(depth(&qm), before);
}

#[test]
fn ctrl_c_during_the_demo_ends_its_queue_manager_and_removes_its_directory() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::Builder::new()
        .prefix("fmqdemo")
        .tempdir_in("/tmp")
        .unwrap();
    let mut demo = Command::new(BIN)
        .args(["demo", "--seconds", "120", "--requesters", "1"])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = demo.id();
    // Read its output until the workload runs (the queue manager is then listening).
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = demo.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut home = None;
    let mut port = None;
    let t = Instant::now();
    while port.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(60).saturating_sub(t.elapsed()))
            .expect("the demo's workload did not start within 60 s");
        if let Some(h) = line.strip_prefix("demo: FERRYMQ_HOME=") {
            home = Some(std::path::PathBuf::from(h));
        }
        if let Some(rest) = line.split("over TCP port ").nth(1) {
            port = rest.split(',').next().and_then(|p| p.parse::<u16>().ok());
        }
    }
    let (home, port) = (home.expect("FERRYMQ_HOME line"), port.unwrap());
    assert!(home.starts_with(tmp.path()), "{}", home.display());
    let qm_pid: u32 = std::fs::read_to_string(home.join("qmgrs/DEMO/qm.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(support::alive(qm_pid));
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    let st = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t = Instant::now();
    let status = loop {
        if let Some(st) = demo.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = demo.kill();
            let _ = demo.wait();
            if support::alive(qm_pid) {
                support::kill9_pid(qm_pid);
            }
            panic!("the demo did not end within 60 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    reader.join().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    let qm_alive = support::alive(qm_pid);
    if qm_alive {
        support::kill9_pid(qm_pid);
    }
    assert!(!qm_alive, "the demo's queue manager is still running");
    assert_eq!(status.code(), Some(130), "{status}; output: {rest:?}");
    assert!(!home.exists(), "{} is left on disk", home.display());
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what} within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn setmqini_refuses_misspelt_keys_and_strmqm_warns_about_them() {
    let home = Home::new();
    let qm = Qm::create(&home, "QMINI", &[]);
    for (s, k, named, valid) in [
        ("Metric", "Port", "'Metric'", "Metrics"),
        ("Metrics", "Prot", "'Prot'", "Port, Address"),
    ] {
        let out = home.run(&["setmqini", "-m", "QMINI", "-s", s, "-k", k, "-v", "9464"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{s}:{k} accepted: {err}");
        assert!(err.contains(named) && err.contains(valid), "{err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("set"));
    }
    let ini = std::fs::read_to_string(qm.dir().join("qm.ini")).unwrap();
    assert!(!ini.contains("Prot") && !ini.contains("Metric:"), "{ini}");
    // Case does not matter, as in qm.ini lookups.
    qm.set_ini("metrics", "port", "0");
    // -f keeps an unknown key, with a warning; strmqm then warns about it, as does the error log.
    let out = home.run(&[
        "setmqini", "-m", "QMINI", "-s", "Metrics", "-k", "Prot", "-v", "9464", "-f",
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
    let out = home.run(&["strmqm", "QMINI"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning") && err.contains("'Prot'"), "{err}");
    let log = support::error_log(&qm.dir());
    assert!(log.contains("'Prot'"), "{log}");
    qm.end();
}

#[test]
fn crtmqm_x_is_max_uncommitted_relay_takes_host_port_and_help_points_at_real_files() {
    let home = Home::new();
    let help = home.ok(&["help"]);
    assert!(!help.contains("BENCHMARK.md"), "{help}");
    // The measurement harness (its own binary) points at where its workload is described.
    let out = support::run_bench(&home, &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(help.contains("docs/internals/wire.md"), "{help}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(std::fs::read_to_string(root.join("docs/internals/wire.md"))
        .unwrap()
        .contains("## The hot path and what it costs"));
    let port = support::free_port().to_string();
    let out = home.run(&["crtmqm", "-p", &port, "-x", "500", "QMX"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("MAXUMSGS") && !err.contains("dead-letter"),
        "{err}"
    );
    home.ok(&["dltmqm", "QMX"]);

    // relay --listen/--target in host(port) form, like every other address.
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tport = target.local_addr().unwrap().port();
    let lport = support::free_port();
    let mut relay = Command::new(BIN)
        .args([
            "relay",
            "--listen",
            &format!("127.0.0.1({lport})"),
            "--target",
            &format!("127.0.0.1({tport})"),
            "--rtt-ms",
            "0",
            "--seconds",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut connected = None;
    wait_until("the relay accepts", 20, || {
        if let Some(st) = relay.try_wait().unwrap() {
            panic!("relay exited: {st}");
        }
        connected = std::net::TcpStream::connect(("127.0.0.1", lport)).ok();
        connected.is_some()
    });
    use std::io::{Read, Write};
    let mut c = connected.unwrap();
    c.write_all(b"ping").unwrap();
    let (mut s, _) = target.accept().unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    let _ = relay.kill();
    let _ = relay.wait();
}

#[test]
fn the_listener_binds_to_the_address_qm_ini_names() {
    let home = Home::new();
    let qm = Qm::create(&home, "QBIND", &[]);
    qm.set_ini("QueueManager", "IPAddress", "127.0.0.2");
    qm.restart();
    assert!(
        std::net::TcpStream::connect(("127.0.0.2", qm.port)).is_ok(),
        "nothing listens on 127.0.0.2({})",
        qm.port
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", qm.port)).is_err(),
        "the listener is bound to more than 127.0.0.2"
    );
    let out = home.run(&[
        "browse",
        "QBIND",
        Q,
        "--conn",
        &format!("127.0.0.2({})", qm.port),
    ]);
    // An empty queue (exit 3), reached over TCP on the named address.
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}
