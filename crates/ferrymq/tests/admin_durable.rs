//! MQSC changes are answered only once their log record is durable: in an HA group, committed
//! by a majority (a DEFINE on an active instance whose replicas are dead does not report
//! success, and a definition made with a majority up survives failover to each other instance);
//! standalone, on disk before `runmqsc` returns (a SIGKILL right after it keeps the queue).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::ha::{HaGroup, NAMES};
use support::{Home, Qm, BIN};

/// A `runmqsc` session kept open: commands are written to it one line at a time and its
/// output is read line by line, so a command can be sent at a chosen moment (after a kill).
struct Session {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Session {
    fn start(home: &Home, args: &[&str]) -> Session {
        let mut child = Command::new(BIN)
            .args(args)
            .env("FERRYMQ_HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn runmqsc");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx2.send(format!("stderr: {l}"));
            }
        });
        Session {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (bounded) for an output line containing `what`.
    fn expect(&mut self, what: &str, limit: Duration) {
        let t = Instant::now();
        while !self.seen.iter().any(|l| l.contains(what)) {
            let left = limit.saturating_sub(t.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!(
                    "runmqsc printed no line with '{what}' within {limit:?}:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Closes its input and waits (bounded) for it to end; returns its exit code and output.
    fn finish(mut self, limit: Duration) -> (Option<i32>, String) {
        drop(self.child.stdin.take());
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "runmqsc did not end within {limit:?}:\n{}",
                    self.seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The reader threads end with the pipes.
        let drain = Instant::now();
        while drain.elapsed() < Duration::from_secs(5) {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => self.seen.push(l),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        (status.code(), self.seen.join("\n"))
    }
}

/// Runs one MQSC script through `runmqsc -c` against the group's connection list (only the
/// active instance listens), bounded in time; returns the exit code and output.
fn runmqsc_c(g: &HaGroup, script: &str) -> (Option<i32>, String) {
    let conn = g.conname();
    let mut s = Session::start(&g.homes[0], &["runmqsc", "-c", "--conn", &conn, &g.name]);
    for l in script.lines() {
        s.send(l);
    }
    s.finish(Duration::from_secs(60))
}

#[test]
fn ha_define_without_a_majority_is_not_reported_done_and_a_committed_one_survives_failovers() {
    let g = HaGroup::start("QHAADM", &[]);
    let first = g.wait_active(Duration::from_secs(30));
    let conn = g.conname();

    // A session connected to the active instance before its replicas die, so that the DEFINE
    // reaches it at once after the kills (before it notices it has lost its majority).
    let mut s = Session::start(&g.homes[0], &["runmqsc", "-c", "--conn", &conn, &g.name]);
    s.send("PING QMGR");
    s.expect("is running", Duration::from_secs(30));
    for i in (0..3).filter(|&i| i != first) {
        g.kill9(i);
    }
    s.send("DEFINE QLOCAL(NO.MAJORITY)");
    let (code, out) = s.finish(Duration::from_secs(60));
    assert!(
        !out.contains("QLOCAL(NO.MAJORITY) defined"),
        "DEFINE was reported done with both replicas dead:\n{out}\n{}",
        g.logs()
    );
    assert_ne!(code, Some(0), "runmqsc succeeded:\n{out}");
    assert!(
        out.contains("DEFINE QLOCAL(NO.MAJORITY) not confirmed") && out.contains("Reason: MQRC_"),
        "no reason given:\n{out}"
    );
    eprintln!("with both replicas dead, runmqsc ended with {code:?}:\n{out}");

    // A majority again: a definition is committed and survives failover to each other instance.
    for i in (0..3).filter(|&i| i != first) {
        g.start_instance(i);
    }
    let active = g.wait_active(Duration::from_secs(60));
    let (code, out) = runmqsc_c(&g, "DEFINE QLOCAL(COMMITTED.Q) MAXDEPTH(777)");
    assert_eq!(code, Some(0), "{out}\n{}", g.logs());
    assert!(out.contains("QLOCAL(COMMITTED.Q) defined"), "{out}");

    let mut served = std::collections::BTreeSet::new();
    let mut current = active;
    let mut killed: Option<usize> = None;
    for round in 0..8 {
        if served.len() == 2 {
            break;
        }
        // The instance killed last time comes back first, so that a majority survives this kill.
        if let Some(k) = killed {
            g.start_instance(k);
            wait_in_sync(&g, current, k);
        }
        g.kill9(current);
        killed = Some(current);
        let t = Instant::now();
        let next = loop {
            if let Some(n) = g.active().filter(|&n| n != current) {
                break n;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "no new active instance after killing {}:\n{}",
                NAMES[current],
                g.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let (code, out) = runmqsc_c(&g, "DISPLAY QLOCAL(COMMITTED.Q) MAXDEPTH");
        assert_eq!(
            code,
            Some(0),
            "round {round}: DISPLAY on instance {} failed:\n{out}\n{}",
            NAMES[next],
            g.logs()
        );
        assert!(
            out.contains("QUEUE(COMMITTED.Q)") && out.contains("MAXDEPTH(777)"),
            "round {round}: instance {} lost the definition:\n{out}",
            NAMES[next]
        );
        if next != active {
            served.insert(next);
        }
        current = next;
    }
    // Elections pick the winner; an instance the kills never made active is moved there by a
    // switch-over (after the last killed instance is back), and must show the definition too.
    if let Some(k) = killed {
        if !g.running(k) {
            g.start_instance(k);
            wait_in_sync(&g, current, k);
        }
    }
    let missing: Vec<usize> = (0..3)
        .filter(|t| *t != active && !served.contains(t))
        .collect();
    for target in missing {
        g.homes[target].ok(&["sethapreferred", "-m", &g.name]);
        let t = Instant::now();
        while g.active() != Some(target) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{} never became active after sethapreferred:\n{}",
                NAMES[target],
                g.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let (code, out) = runmqsc_c(&g, "DISPLAY QLOCAL(COMMITTED.Q) MAXDEPTH");
        assert_eq!(code, Some(0), "DISPLAY on {}:\n{out}", NAMES[target]);
        assert!(
            out.contains("QUEUE(COMMITTED.Q)") && out.contains("MAXDEPTH(777)"),
            "instance {} lost the definition:\n{out}",
            NAMES[target]
        );
        served.insert(target);
    }
    assert_eq!(served.len(), 2, "served: {served:?}");
}

/// Waits until the active instance `active` sees instance `i` in sync.
fn wait_in_sync(g: &HaGroup, active: usize, i: usize) {
    let t = Instant::now();
    loop {
        let ok = g.status(active).is_some_and(|s| {
            s.lines().any(|l| {
                l.contains(&format!("INSTANCE({})", NAMES[i])) && l.contains("INSYNC(YES)")
            })
        });
        if ok {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "instance {} never came back in sync:\n{:?}\n{}",
            NAMES[i],
            g.status(active),
            g.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn standalone_define_survives_a_sigkill_right_after_runmqsc_returns() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSADM", &[]);
    const CYCLES: usize = 6;
    for n in 0..CYCLES {
        let out = home.run_with_input(
            &["runmqsc", "QSADM"],
            &format!("DEFINE QLOCAL(CYCLE.{n})\n"),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "cycle {n}: {text}");
        qm.kill9();
        qm.restart();
        let shown = home.run_with_input(&["runmqsc", "QSADM"], "DISPLAY QLOCAL(CYCLE.*)\n");
        let shown = String::from_utf8_lossy(&shown.stdout);
        for m in 0..=n {
            assert!(
                shown.contains(&format!("QUEUE(CYCLE.{m})")),
                "cycle {n}: QLOCAL(CYCLE.{m}) was lost by a SIGKILL after its DEFINE returned:\n{shown}"
            );
        }
    }
}
