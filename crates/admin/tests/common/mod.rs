//! Shared test fixtures: a fresh queue manager with MQ's default objects, a recording
//! `ServerOps`, and helpers to run commands and read DISPLAY rows.
#![allow(dead_code)]

use bytes::Bytes;
use ferrymq_admin::{execute_text, Response, ServerOps};
use ferrymq_engine::{ConnId, Engine, EngineConfig, MemoryLog};
use ferrymq_types::options::PutOptions;
use ferrymq_types::{MessageDescriptor, MqError, ObjectDef, Properties, Reason};

/// 2024-05-06 07:08:09 UTC.
pub const NOW_MS: u64 = 1_714_979_289_000;

pub fn engine() -> Engine {
    let mut e = Engine::new(
        EngineConfig {
            qmgr_name: "QM1".into(),
            max_handles: 256,
            instance_id: 7,
            backout_requeue: true,
            message_memory_max: 0,
        },
        Box::new(MemoryLog::default()),
    );
    e.install_defaults().expect("default objects install");
    e
}

/// Records what the commands asked of the server, and answers status displays.
#[derive(Default)]
pub struct TestOps {
    pub started: Vec<(String, String)>,
    pub stopped: Vec<String>,
    pub refreshed: Vec<String>,
    pub fail_start: bool,
}

impl ServerOps for TestOps {
    fn start_listener(&mut self, def: &ObjectDef) -> Result<String, MqError> {
        if self.fail_start {
            return Err(MqError::new(Reason::RESOURCE_PROBLEM, "port in use (test)"));
        }
        let port = def.attrs.get("PORT").cloned().unwrap_or_default();
        self.started.push((def.name.clone(), port.clone()));
        Ok(format!("listening on port {port}"))
    }
    fn stop_listener(&mut self, name: &str) -> Result<String, MqError> {
        self.stopped.push(name.to_string());
        Ok("stopped".into())
    }
    fn listener_status(&self) -> Vec<Vec<(String, String)>> {
        self.started
            .iter()
            .map(|(n, p)| {
                vec![
                    ("LISTENER".into(), n.clone()),
                    ("STATUS".into(), "RUNNING".into()),
                    ("PORT".into(), p.clone()),
                ]
            })
            .collect()
    }
    fn channel_status(&self) -> Vec<Vec<(String, String)>> {
        vec![
            vec![
                ("CHANNEL".into(), "SYSTEM.DEF.SVRCONN".into()),
                ("CHLTYPE".into(), "SVRCONN".into()),
                ("CONNAME".into(), "127.0.0.1(50000)".into()),
                ("STATUS".into(), "RUNNING".into()),
                ("CURSHCNV".into(), "2".into()),
            ],
            vec![
                ("CHANNEL".into(), "APP.SVRCONN".into()),
                ("CHLTYPE".into(), "SVRCONN".into()),
                ("CONNAME".into(), "10.0.0.2(40000)".into()),
                ("STATUS".into(), "RUNNING".into()),
                ("CURSHCNV".into(), "1".into()),
            ],
        ]
    }
    fn qmgr_status(&self) -> Vec<(String, String)> {
        vec![
            ("QMNAME".into(), "QM1".into()),
            ("STATUS".into(), "RUNNING".into()),
            ("CONNS".into(), "3".into()),
        ]
    }
    fn refresh_security(&mut self, type_: &str) -> Result<String, MqError> {
        self.refreshed.push(type_.to_string());
        Ok(format!("security refreshed, TYPE({type_})"))
    }
}

pub struct Qm {
    pub engine: Engine,
    pub ops: TestOps,
}

impl Qm {
    pub fn new() -> Qm {
        Qm {
            engine: engine(),
            ops: TestOps::default(),
        }
    }

    pub fn run(&mut self, cmd: &str) -> Response {
        execute_text(cmd, &mut self.engine, &mut self.ops, NOW_MS)
    }

    /// Runs a command that must succeed.
    pub fn ok(&mut self, cmd: &str) -> Response {
        let r = self.run(cmd);
        assert!(r.ok, "{cmd} failed:\n{}", r.text);
        r
    }

    /// Runs a command that must fail, with this reason.
    pub fn fails(&mut self, cmd: &str, reason: Reason) -> Response {
        let r = self.run(cmd);
        assert!(!r.ok, "{cmd} succeeded:\n{}", r.text);
        assert_eq!(r.reason, reason, "{cmd}:\n{}", r.text);
        assert!(r.text.contains(reason.mq_name()), "{}", r.text);
        r
    }

    /// The single object a DISPLAY shows, as attribute pairs.
    pub fn one(&mut self, cmd: &str) -> Vec<(String, String)> {
        let r = self.ok(cmd);
        assert_eq!(r.rows.len(), 1, "{cmd}:\n{}", r.text);
        r.rows.into_iter().next().unwrap()
    }

    /// One attribute of the single object a DISPLAY shows.
    pub fn attr(&mut self, cmd: &str, name: &str) -> String {
        let row = self.one(cmd);
        get(&row, name).unwrap_or_else(|| panic!("{cmd}: no {name} in {row:?}"))
    }

    pub fn connect_and_put(&mut self, queue: &str, n: usize) -> ConnId {
        let c = self.engine.connect("alice", "app1");
        for _ in 0..n {
            self.engine
                .put1(
                    c,
                    queue,
                    "",
                    &PutOptions::default(),
                    MessageDescriptor::default(),
                    Properties::default(),
                    Bytes::from_static(b"hello"),
                    NOW_MS - 90_000,
                )
                .expect("put");
        }
        c
    }
}

pub fn get(row: &[(String, String)], name: &str) -> Option<String> {
    row.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// The names in a DISPLAY's rows (the first field of each).
pub fn names(r: &Response) -> Vec<String> {
    r.rows.iter().map(|row| row[0].1.clone()).collect()
}
