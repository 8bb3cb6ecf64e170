//! The README's command sequences, run as written (issue 18): the "Using it", high-availability
//! and disaster-recovery blocks are read from README.md itself and run by `bash -euo pipefail`,
//! with only their homes and ports substituted (and, in the DR block, its "the main site is lost"
//! comment turned into a SIGKILL of the main site once it has shipped everything). A README edit
//! that breaks a sequence breaks this test; lines it leaves out are named and must be present.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{free_port_outside_ephemeral, BIN};

/// The ```sh block of README.md containing `marker`.
fn block(marker: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in readme.lines() {
        match (&mut cur, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => cur = Some(String::new()),
            (Some(_), l) if l.starts_with("```") => blocks.push(cur.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    let found: Vec<String> = blocks.into_iter().filter(|b| b.contains(marker)).collect();
    assert_eq!(found.len(), 1, "one README sh block holds «{marker}»");
    found.into_iter().next().unwrap()
}

/// `text` with `from` replaced by `to`; `from` must be there.
fn subst(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the README block no longer holds «{from}»:\n{text}"
    );
    text.replace(from, to)
}

/// The line holding `what` removed (a line this test cannot run, such as the build itself).
fn drop_line(text: &str, what: &str) -> String {
    assert!(
        text.contains(what),
        "the README block no longer holds «{what}»"
    );
    text.lines()
        .filter(|l| !l.contains(what))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn bin_dir() -> PathBuf {
    Path::new(BIN).parent().unwrap().to_path_buf()
}

fn bash(script: &str, home: Option<&Path>) -> Output {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.arg("-euo").arg("pipefail").arg("-c").arg(script);
    c.env("PATH", path);
    match home {
        Some(h) => c.env("FERRYMQ_HOME", h),
        None => c.env_remove("FERRYMQ_HOME"),
    };
    c.output().expect("bash")
}

fn assert_ok(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Queue managers a sequence left running are ended (by `endmqm -i -w`) and their homes removed.
struct Homes {
    dir: tempfile::TempDir,
    qms: Vec<(PathBuf, &'static str)>,
}

impl Homes {
    fn new() -> Homes {
        Homes {
            dir: tempfile::Builder::new()
                .prefix("fmqr")
                .tempdir_in("/tmp")
                .unwrap(),
            qms: Vec::new(),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Homes {
    fn drop(&mut self) {
        // The processes these homes ran, read before their files go: an HA instance that was
        // between roles when `endmqm` asked (a replica restarting after a role change) could
        // otherwise outlive the test, its home deleted under it.
        let pids: Vec<(u32, PathBuf)> = self
            .qms
            .iter()
            .filter_map(|(home, qm)| {
                let pid =
                    std::fs::read_to_string(home.join("qmgrs").join(qm).join("qm.pid")).ok()?;
                Some((pid.trim().parse().ok()?, home.clone()))
            })
            .collect();
        for (home, qm) in &self.qms {
            let _ = Command::new(BIN)
                .args(["endmqm", "-i", "-w", qm])
                .env("FERRYMQ_HOME", home)
                .output();
        }
        let ours = |pid: u32, home: &Path| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|&b| b == 0)
                    .any(|v| v == format!("FERRYMQ_HOME={}", home.display()).as_bytes())
            })
        };
        let t = Instant::now();
        while pids.iter().any(|(pid, home)| ours(*pid, home))
            && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        for (pid, home) in &pids {
            if ours(*pid, home) {
                eprintln!(
                    "queue manager process {pid} of {} outlived endmqm: killed",
                    home.display()
                );
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

fn ports(n: usize) -> Vec<u16> {
    let mut v: Vec<u16> = Vec::new();
    while v.len() < n {
        let p = free_port_outside_ephemeral().expect("a free port");
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

#[test]
fn using_it_runs_as_written() {
    let homes = Homes::new();
    let [port] = ports(1)[..] else { unreachable!() };
    let mut script = block("ferrymq crtmqm -p 1414 --dev QM1");
    script = drop_line(&script, "cargo build --release");
    script = drop_line(&script, "export PATH=$PWD/target/release:$PATH");
    script = subst(&script, "1414", &port.to_string());
    let home = homes.path().join("home");
    let mut homes = homes;
    homes.qms.push((home.clone(), "QM1"));
    let out = assert_ok("the README's 'Using it' block", &bash(&script, Some(&home)));
    // What it shows: the three messages browsed, one taken by `head -1`, the rest over TCP, the
    // queue defined, the queue manager listed, its log dumped.
    for want in ["hello", "world", "again", "QUEUE(ORDERS)", "QMNAME(QM1)"] {
        assert!(out.contains(want), "«{want}» missing from:\n{out}");
    }
    // Each body twice: once browsed, once got (hello by `get | head -1`, the rest over TCP).
    let lines: Vec<&str> = out.lines().collect();
    for body in ["hello", "world", "again"] {
        let n = lines.iter().filter(|l| **l == body).count();
        assert_eq!(n, 2, "{body} is browsed once and got once:\n{out}");
    }
}

#[test]
fn the_ha_sequence_runs_as_written() {
    let mut homes = Homes::new();
    // Client ports base+1..base+3 (the README's 141$i) and three replication ports.
    let base = loop {
        let p = ports(1)[0];
        if p > 3 && (p - 3..p).all(|q| ferrymq_bench::qm::bind_probe(q).is_some()) {
            break p - 4;
        }
    };
    let repl = ports(3);
    let root = homes.path().to_path_buf();
    let mut script = block("-ha \"$L\" -hi $n --dev QMHA");
    script = drop_line(&script, "ferrymq-bench report ha --quick");
    script = subst(&script, "/tmp/ha/", &format!("{}/", root.display()));
    script = subst(&script, "141$i", &format!("$(({base}+i))"));
    for (i, p) in [4001, 4002, 4003].iter().enumerate() {
        script = subst(&script, &p.to_string(), &repl[i].to_string());
    }
    for i in 1..=3u16 {
        script = subst(&script, &format!("141{i}"), &(base + i).to_string());
    }
    for n in ["a", "b", "c"] {
        homes.qms.push((root.join(n), "QMHA"));
    }
    let out = assert_ok("the README's HA block", &bash(&script, None));
    assert!(
        out.contains("INSTANCE(a)"),
        "dspmq -o ha shows the group:\n{out}"
    );
    // sethapreferred moved the active role to c, and the three messages are there.
    let t = Instant::now();
    loop {
        let s = Command::new(BIN)
            .args(["dspmq", "-m", "QMHA"])
            .env("FERRYMQ_HOME", root.join("c"))
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&s.stdout).into_owned();
        if s.contains("STATUS(Running)") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "c never became active: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let conn = format!("127.0.0.1({})", base + 3);
    let got = Command::new(BIN)
        .args([
            "get",
            "QMHA",
            "DEV.QUEUE.1",
            "--conn",
            &conn,
            "--channel",
            "DEV.APP.SVRCONN",
            "--user",
            "app",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&got.stdout), "1\n2\n3\n", "{got:?}");
    // The group has the security defaults: the back-stop rule refuses SYSTEM.DEF.SVRCONN (exit
    // 4: not authorised).
    let refused = Command::new(BIN)
        .args(["get", "QMHA", "DEV.QUEUE.1", "--conn", &conn])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
}

#[test]
fn the_dr_sequence_runs_as_written() {
    let mut homes = Homes::new();
    let root = homes.path().to_path_buf();
    let p = ports(4);
    let mut script = block("-dr secondary -drl");
    script = subst(&script, "/tmp/dr/", &format!("{}/", root.display()));
    for (from, to) in [1421, 1422, 4100, 4101].iter().zip(&p) {
        script = subst(&script, &from.to_string(), &to.to_string());
    }
    // The main site is lost once it has shipped what it holds (an operator's sequence has time
    // pass between the lines; `makedrprimary` refuses a secondary without a complete copy).
    let main_pid = root.join("main/qmgrs/QMDR/qm.pid");
    script = subst(
        &script,
        "# the main site is lost (or, for a planned switchover, ended with endmqm: it first hands the\n\
         # recovery site everything, so nothing acknowledged is lost):\n",
        &format!(
            "for i in $(seq 300); do FERRYMQ_HOME={main} ferrymq dspmq -o dr -m QMDR | grep -q 'LAGBYTES(0)' && break; sleep 0.1; done\n\
             pid=$(cat {pid}); kill -9 $pid; while kill -0 $pid 2>/dev/null; do sleep 0.05; done\n",
            main = root.join("main").display(),
            pid = main_pid.display()
        ),
    );
    homes.qms.push((root.join("main"), "QMDR"));
    homes.qms.push((root.join("rec"), "QMDR"));
    let out = assert_ok("the README's DR block", &bash(&script, None));
    assert!(
        out.contains("DRROLE(Primary)") || out.contains("ROLE(Primary)"),
        "{out}"
    );
    // The new primary (the recovery site) resynchronises the old main as its secondary.
    let t = Instant::now();
    loop {
        let s = Command::new(BIN)
            .args(["dspmq", "-o", "dr", "-m", "QMDR"])
            .env("FERRYMQ_HOME", root.join("rec"))
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&s.stdout).into_owned();
        if s.contains("DRSTATUS(Normal)") && s.contains("LAGBYTES(0)") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the new primary never reached the old main: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The recovery site, now the primary, has the security defaults of a new queue manager: the
    // back-stop rule refuses a client on SYSTEM.DEF.SVRCONN (exit 4: not authorised).
    let refused = Command::new(BIN)
        .args([
            "get",
            "QMDR",
            "SYSTEM.DEFAULT.LOCAL.QUEUE",
            "--conn",
            &format!("127.0.0.1({})", p[1]),
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
}
