//! An HA group of three queue manager instances for tests: each instance has its own
//! `$FERRYMQ_HOME` (as if on its own host), its own client port and replication port, all on
//! loopback; each is a real `ferrymq` process started with `strmqm`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, Reconnect};

use super::{free_port, Home};

pub const NAMES: [&str; 3] = ["a", "b", "c"];

pub struct HaGroup {
    pub name: String,
    pub homes: Vec<Home>,
    pub ports: Vec<u16>,
    pub repl_ports: Vec<u16>,
}

impl HaGroup {
    /// Creates and starts three instances (`extra` crtmqm flags on each), and waits for one to
    /// become active.
    pub fn start(name: &str, extra: &[&str]) -> HaGroup {
        let g = HaGroup::create(name, extra, |_| "127.0.0.1".to_string());
        for i in 0..3 {
            g.start_instance(i);
        }
        g.wait_active(Duration::from_secs(30));
        g
    }

    /// Creates three instances without starting them; `host(i)` is the replication host of
    /// instance `i`. Each allows MQSC over TCP (qm.ini `Channels:RemoteAdmin=yes`), unless
    /// `extra` holds `--secure` or `--dev`: then each keeps a new queue manager's security defaults.
    pub fn create(name: &str, extra: &[&str], host: impl Fn(usize) -> String) -> HaGroup {
        let homes: Vec<Home> = (0..3).map(|_| Home::new()).collect();
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let repl_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let list = (0..3)
            .map(|i| format!("{}={}({})", NAMES[i], host(i), repl_ports[i]))
            .collect::<Vec<_>>()
            .join(",");
        for i in 0..3 {
            let p = ports[i].to_string();
            let mut args = vec!["crtmqm", "-p", &p, "-ha", &list, "-hi", NAMES[i]];
            // Without the security defaults unless asked for (see `Qm::create`; `--secure` is
            // this helper's flag, not crtmqm's).
            let secure = extra.contains(&"--dev") || extra.contains(&"--secure");
            if !secure {
                args.push("--insecure");
            }
            args.extend(extra.iter().copied().filter(|a| *a != "--secure"));
            args.push(name);
            homes[i].ok(&args);
            if secure {
                continue;
            }
            // The tests administer the group through the connection list (only the active
            // instance listens), so MQSC over TCP must be allowed.
            homes[i].ok(&[
                "setmqini",
                "-m",
                name,
                "-s",
                "Channels",
                "-k",
                "RemoteAdmin",
                "-v",
                "yes",
            ]);
        }
        HaGroup {
            name: name.to_string(),
            homes,
            ports,
            repl_ports,
        }
    }

    pub fn start_instance(&self, i: usize) {
        self.homes[i].ok(&["strmqm", &self.name]);
    }

    pub fn dir(&self, i: usize) -> PathBuf {
        self.homes[i].path().join("qmgrs").join(&self.name)
    }

    pub fn conname(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("127.0.0.1({p})"))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn options(&self) -> ConnectOptions {
        ConnectOptions::client(&self.name, &self.conname()).unwrap()
    }

    /// A client connection through the whole list.
    pub fn connect(&self) -> Connection {
        Connection::connect(self.options()).expect("connect to the HA group")
    }

    /// A connection that reconnects by itself (to whichever instance is active) for `secs`.
    pub fn connect_reconnecting(&self, secs: u64) -> Connection {
        let mut o = self.options();
        o.reconnect = Reconnect::Enabled {
            timeout: Duration::from_secs(secs),
        };
        Connection::connect(o).expect("connect to the HA group")
    }

    pub fn pid(&self, i: usize) -> Option<u32> {
        std::fs::read_to_string(self.dir(i).join("qm.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub fn running(&self, i: usize) -> bool {
        self.pid(i).is_some_and(super::alive)
    }

    /// `dspmq -o ha` as instance `i` sees the group (None if it does not answer).
    pub fn status(&self, i: usize) -> Option<String> {
        let out = self.homes[i].run(&["dspmq", "-o", "ha", "-m", &self.name]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The instance that says it is the active one, asking each running instance about itself.
    pub fn active(&self) -> Option<usize> {
        (0..3).find(|&i| {
            self.running(i)
                && self.status(i).is_some_and(|s| {
                    s.lines()
                        .any(|l| l.contains("LOCAL(YES)") && l.contains("ROLE(Active)"))
                })
        })
    }

    pub fn wait_active(&self, limit: Duration) -> usize {
        let t = Instant::now();
        loop {
            if let Some(i) = self.active() {
                return i;
            }
            assert!(
                t.elapsed() < limit,
                "no instance became active within {limit:?}; logs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills instance `i` with SIGKILL and waits until it is gone.
    pub fn kill9(&self, i: usize) {
        let pid = self.pid(i).expect("instance pid");
        super::kill9_pid(pid);
    }

    /// Every instance's error log, for failure messages.
    pub fn logs(&self) -> String {
        (0..3)
            .map(|i| {
                format!(
                    "--- instance {} ---\n{}",
                    NAMES[i],
                    super::error_log(&self.dir(i))
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for HaGroup {
    fn drop(&mut self) {
        for i in 0..3 {
            if let Some(pid) = self.pid(i).filter(|p| super::alive(*p)) {
                super::kill9_pid(pid);
            }
        }
    }
}
