//! Recovery never recomputes what the running queue manager decided differently: whatever queue
//! attributes change between puts, gets, checkpoints and the crash (MSGDLVSQ, DEFPRTY, DEFPSIST,
//! MAXDEPTH, BOTHRESH, BOQNAME, ...), the newest checkpoint image plus the log after it rebuilds
//! exactly the persistent messages the live engine holds, in the same delivery order, and replay
//! never meets a logged get that matches nothing.

use bytes::Bytes;
use ferrymq_engine::{Engine, GetOutcome, Image, MemoryLog};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{
    MessageDescriptor, MsgDeliverySequence, Persistence, Properties, QueueDef, Reason,
};
use proptest::prelude::*;

mod common;

use common::{cfg, SharedLog};

#[derive(Clone, Debug)]
enum Op {
    /// priority None = MQPRI_PRIORITY_AS_Q_DEF; persistence None = as queue definition.
    Put {
        conn: usize,
        priority: Option<i32>,
        persistent: Option<bool>,
        sync: bool,
    },
    Get {
        conn: usize,
        sync: bool,
    },
    Browse {
        conn: usize,
    },
    Commit {
        conn: usize,
    },
    Backout {
        conn: usize,
    },
    Alter {
        fifo: bool,
        def_priority: i32,
        def_persistent: bool,
        max_depth: u32,
        backout_threshold: u32,
        to_boq: bool,
        get_inhibited: bool,
        descr: u8,
    },
    Checkpoint,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..2usize, prop::option::of(0..10i32), prop::option::of(any::<bool>()), any::<bool>())
            .prop_map(|(conn, priority, persistent, sync)| Op::Put { conn, priority, persistent, sync }),
        4 => (0..2usize, any::<bool>()).prop_map(|(conn, sync)| Op::Get { conn, sync }),
        1 => (0..2usize).prop_map(|conn| Op::Browse { conn }),
        2 => (0..2usize).prop_map(|conn| Op::Commit { conn }),
        1 => (0..2usize).prop_map(|conn| Op::Backout { conn }),
        2 => (any::<bool>(), 0..10i32, any::<bool>(), 5..200u32, 0..3u32, any::<bool>(), prop::bool::weighted(0.1), any::<u8>())
            .prop_map(|(fifo, def_priority, def_persistent, max_depth, backout_threshold, to_boq, get_inhibited, descr)| Op::Alter {
                fifo, def_priority, def_persistent, max_depth, backout_threshold, to_boq, get_inhibited, descr,
            }),
        1 => Just(Op::Checkpoint),
    ]
}

struct World {
    e: Engine,
    log: SharedLog,
    conns: Vec<(u64, u32)>,
    /// The newest checkpoint: its image and how many log records it covers.
    ckpt: (Image, usize),
    n: u64,
}

impl World {
    fn new() -> World {
        let log = SharedLog::default();
        let mut e = Engine::new(cfg(), Box::new(log.clone()));
        e.install_defaults().unwrap();
        e.define_queue(QueueDef::local("Q1"), false).unwrap();
        e.define_queue(QueueDef::local("BOQ"), false).unwrap();
        let conns = (0..2)
            .map(|i| {
                let c = e.connect("u", &format!("app{i}"));
                let h = e
                    .open(
                        c,
                        "Q1",
                        "",
                        open::INPUT_SHARED | open::OUTPUT | open::BROWSE,
                        "",
                    )
                    .unwrap()
                    .0;
                (c, h)
            })
            .collect();
        let ckpt = (e.checkpoint_image(0), log.0.lock().unwrap().records.len());
        World {
            e,
            log,
            conns,
            ckpt,
            n: 0,
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Put {
                conn,
                priority,
                persistent,
                sync,
            } => {
                let (c, h) = self.conns[conn];
                let md = MessageDescriptor {
                    priority: priority.unwrap_or(-1),
                    persistence: match persistent {
                        None => Persistence::AsQueueDef,
                        Some(true) => Persistence::Persistent,
                        Some(false) => Persistence::NotPersistent,
                    },
                    ..Default::default()
                };
                let opts = PutOptions {
                    syncpoint: if sync { Syncpoint::Yes } else { Syncpoint::No },
                    ..Default::default()
                };
                self.n += 1;
                let body = Bytes::from(format!("m{}", self.n));
                match self
                    .e
                    .put(c, h, &opts, md, Properties::default(), body, 1000)
                {
                    Ok(_) => {}
                    Err(err) => assert!(
                        err.reason == Reason::Q_FULL
                            || err.reason == Reason::SYNCPOINT_LIMIT_REACHED,
                        "{err}"
                    ),
                }
            }
            Op::Get { conn, sync } => {
                let (c, h) = self.conns[conn];
                let opts = GetOptions {
                    syncpoint: if sync { Syncpoint::Yes } else { Syncpoint::No },
                    ..GetOptions::any()
                };
                match self.e.get(c, h, &opts, 1, 1000) {
                    Ok(GetOutcome::Got(..)) => {}
                    Ok(GetOutcome::Waiting(_)) => panic!("no wait was asked for"),
                    Err(err) => assert!(
                        err.reason == Reason::NO_MSG_AVAILABLE
                            || err.reason == Reason::GET_INHIBITED
                            || err.reason == Reason::SYNCPOINT_LIMIT_REACHED,
                        "{err}"
                    ),
                }
            }
            Op::Browse { conn } => {
                let (c, h) = self.conns[conn];
                let opts = GetOptions {
                    browse: ferrymq_types::options::Browse::Next,
                    ..GetOptions::any()
                };
                let _ = self.e.get(c, h, &opts, 1, 1000);
            }
            Op::Commit { conn } => {
                self.e.commit(self.conns[conn].0, 1000).unwrap();
            }
            Op::Backout { conn } => {
                self.e.backout(self.conns[conn].0, 1000).unwrap();
            }
            Op::Alter {
                fifo,
                def_priority,
                def_persistent,
                max_depth,
                backout_threshold,
                to_boq,
                get_inhibited,
                descr,
            } => {
                let mut d = self.e.queue_def("Q1").unwrap().clone();
                d.msg_delivery_sequence = if fifo {
                    MsgDeliverySequence::Fifo
                } else {
                    MsgDeliverySequence::Priority
                };
                d.def_priority = def_priority;
                d.def_persistent = def_persistent;
                d.max_depth = max_depth;
                d.backout_threshold = backout_threshold;
                d.backout_queue = if to_boq { "BOQ".into() } else { String::new() };
                d.get_inhibited = get_inhibited;
                d.description = format!("descr {descr}");
                self.e.alter_queue(d).unwrap();
            }
            Op::Checkpoint => {
                self.ckpt = (
                    self.e.checkpoint_image(1000),
                    self.log.0.lock().unwrap().records.len(),
                );
            }
        }
    }

    /// What a crash now and a restart would rebuild: the newest image plus the log after it.
    fn recover(&self) -> Engine {
        let records = self.log.0.lock().unwrap().records[self.ckpt.1..].to_vec();
        let mut r = Engine::restore(cfg(), Box::new(MemoryLog::default()), self.ckpt.0.clone())
            .expect("the image restores");
        for (k, p) in records {
            r.replay(k, Bytes::from(p))
                .unwrap_or_else(|e| panic!("replay failed: {e}"));
        }
        r
    }
}

/// Every persistent message of each queue in delivery order, as (body, priority), taken by
/// destructive gets (so the order is the one applications would see).
fn drain(e: &mut Engine) -> Vec<(String, Vec<(String, i32)>)> {
    let mut out = Vec::new();
    for q in ["Q1", "BOQ", "SYSTEM.DEAD.LETTER.QUEUE"] {
        let mut d = e.queue_def(q).unwrap().clone();
        d.get_inhibited = false;
        e.alter_queue(d).unwrap();
        let c = e.connect("u", "drain");
        let h = e.open(c, q, "", open::INPUT_SHARED, "").unwrap().0;
        let mut msgs = Vec::new();
        loop {
            match e.get(c, h, &GetOptions::any(), 1, 1000) {
                Ok(GetOutcome::Got(g, _)) => {
                    if g.md.persistence == Persistence::Persistent {
                        // A dead-lettered message: the original behind its header.
                        let body = ferrymq_types::dlh::DeadLetterHeader::parse(&g.body)
                            .map_or(&g.body[..], |(_, rest)| rest);
                        msgs.push((String::from_utf8(body.to_vec()).unwrap(), g.md.priority));
                    }
                }
                Ok(GetOutcome::Waiting(_)) => panic!("no wait was asked for"),
                Err(err) if err.reason == Reason::NO_MSG_AVAILABLE => break,
                Err(err) => panic!("drain {q}: {err}"),
            }
        }
        out.push((q.to_string(), msgs));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn recovery_after_any_attribute_change_rebuilds_the_same_queues(ops in prop::collection::vec(op(), 1..120)) {
        let mut w = World::new();
        for op in &ops {
            w.apply(op);
        }
        let mut recovered = w.recover();
        // The crash ends the units of work in flight: back them out on the live engine too, as
        // a crash does (without counting a backout that could move a message to BOQNAME).
        let mut d = w.e.queue_def("Q1").unwrap().clone();
        d.backout_threshold = 0;
        w.e.alter_queue(d).unwrap();
        for (c, _) in w.conns.clone() {
            w.e.backout(c, 1000).unwrap();
        }
        let live = drain(&mut w.e);
        let rebuilt = drain(&mut recovered);
        prop_assert_eq!(rebuilt, live);
    }
}

/// The defect as first reported: ten persistent messages, MSGDLVSQ changed while they are queued,
/// a checkpoint, all ten got and committed, a crash. Recovery must not bring any of them back.
#[test]
fn consumed_messages_stay_consumed_after_msgdlvsq_changes_under_them() {
    let mut w = World::new();
    for p in 0..10 {
        w.apply(&Op::Put {
            conn: 0,
            priority: Some(p % 10),
            persistent: Some(true),
            sync: false,
        });
    }
    let mut d = w.e.queue_def("Q1").unwrap().clone();
    d.msg_delivery_sequence = MsgDeliverySequence::Fifo;
    w.e.alter_queue(d).unwrap();
    w.apply(&Op::Checkpoint);
    for _ in 0..10 {
        w.apply(&Op::Get {
            conn: 1,
            sync: true,
        });
    }
    w.apply(&Op::Commit { conn: 1 });
    let mut r = w.recover();
    assert!(drain(&mut r).iter().all(|(_, msgs)| msgs.is_empty()));
}

/// A logged get that finds no message is reported as damage, never skipped in silence.
#[test]
fn a_logged_get_that_matches_nothing_is_an_integrity_error() {
    let mut w = World::new();
    w.apply(&Op::Put {
        conn: 0,
        priority: Some(4),
        persistent: Some(true),
        sync: false,
    });
    w.apply(&Op::Get {
        conn: 0,
        sync: false,
    });
    // Replay the get without the put before it.
    let records = w.log.0.lock().unwrap().records.clone();
    let (k, p) = records.last().unwrap().clone();
    let mut r = Engine::restore(cfg(), Box::new(MemoryLog::default()), w.ckpt.0.clone())
        .expect("the image restores");
    let err = r.replay(k, Bytes::from(p)).unwrap_err();
    assert_eq!(err.reason, Reason::OBJECT_DAMAGED);
    assert!(err.to_string().contains("matches no message"), "{err}");
}
