//! The engine against a reference model. Generated sequences of puts (priorities, persistence,
//! expiry, CorrelIds, in and out of syncpoint), gets (any message, by MsgId, by CorrelId),
//! commits, backouts, the clock moving on, checkpoints and crash-restarts (newest checkpoint image
//! plus the log after it) run on the engine and on a model a few dozen lines long that says what
//! MQ promises: the highest priority first and arrival order within it, a unit of work's puts
//! invisible until commit and its gets back in place (backout count raised) on backout, expired
//! messages never delivered and their Expiry shown as the time left, and after a restart exactly
//! the committed persistent messages. Every get's outcome is compared, and both sides are drained
//! at the end.

use bytes::Bytes;
use ferrymq_engine::{Engine, GetOutcome, Image};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, QueueDef, Reason};
use proptest::prelude::*;

mod common;

use common::{cfg, SharedLog};

const QUEUES: [&str; 2] = ["Q1", "Q2"];
const CONNS: usize = 2;
/// The clock starts here (ms since the epoch); it only moves forward.
const T0: u64 = 1_700_000_000_000;

#[derive(Clone, Debug)]
enum Sel {
    Any,
    /// The MsgId of the n-th put so far (modulo how many there were): often one already gone.
    MsgId(usize),
    CorrelId(u8),
}

#[derive(Clone, Debug)]
enum Op {
    Put {
        conn: usize,
        queue: usize,
        /// None: MQPRI_PRIORITY_AS_Q_DEF.
        priority: Option<i32>,
        /// None: MQPER_PERSISTENCE_AS_Q_DEF.
        persistent: Option<bool>,
        /// Tenths of a second.
        expiry: Option<i32>,
        correl: Option<u8>,
        sync: bool,
    },
    Get {
        conn: usize,
        queue: usize,
        sel: Sel,
        sync: bool,
    },
    Commit(usize),
    Backout(usize),
    Tick(u64),
    Checkpoint,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let put = (
        0..CONNS,
        0..QUEUES.len(),
        prop::option::weighted(0.8, 0..10i32),
        prop::option::weighted(0.8, any::<bool>()),
        prop::option::weighted(0.25, 1..40i32),
        prop::option::weighted(0.4, 0..3u8),
        any::<bool>(),
    )
        .prop_map(
            |(conn, queue, priority, persistent, expiry, correl, sync)| Op::Put {
                conn,
                queue,
                priority,
                persistent,
                expiry,
                correl,
                sync,
            },
        );
    let sel = prop_oneof![
        4 => Just(Sel::Any),
        1 => (0..64usize).prop_map(Sel::MsgId),
        1 => (0..3u8).prop_map(Sel::CorrelId),
    ];
    let get =
        (0..CONNS, 0..QUEUES.len(), sel, any::<bool>()).prop_map(|(conn, queue, sel, sync)| {
            Op::Get {
                conn,
                queue,
                sel,
                sync,
            }
        });
    prop_oneof![
        8 => put,
        7 => get,
        2 => (0..CONNS).prop_map(Op::Commit),
        2 => (0..CONNS).prop_map(Op::Backout),
        2 => (0..3000u64).prop_map(Op::Tick),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Restart),
    ]
}

fn msg_id(n: u64) -> MsgId {
    let mut id = [0u8; 24];
    id[..4].copy_from_slice(b"MODL");
    id[4..12].copy_from_slice(&n.to_be_bytes());
    id
}

fn correl_id(k: u8) -> MsgId {
    [k + 1; 24]
}

/// A message as the model keeps it.
#[derive(Clone, Debug)]
struct M {
    n: u64,
    priority: i32,
    persistent: bool,
    expires_at: Option<u64>,
    correl: Option<u8>,
    backouts: u32,
    /// False once a restart may have reset the backout count (it is not hardened, as in MQ's
    /// HARDENBO(NO)): it is not compared from then on.
    backouts_known: bool,
}

impl M {
    fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|t| now >= t)
    }
    fn matches(&self, sel: &Sel, ids: &[u64]) -> bool {
        match sel {
            Sel::Any => true,
            Sel::MsgId(i) => ids.is_empty() || self.n == ids[i % ids.len()],
            Sel::CorrelId(k) => self.correl == Some(*k),
        }
    }
}

#[derive(Default, Clone)]
struct Uow {
    puts: Vec<(usize, M)>,
    gets: Vec<(usize, M)>,
}

#[derive(Default)]
struct Model {
    queues: [Vec<M>; 2],
    uows: [Uow; CONNS],
}

impl Model {
    /// What a get selects: the highest priority, then the earliest put, among the matching
    /// messages that have not expired.
    fn pick(&self, q: usize, sel: &Sel, ids: &[u64], now: u64) -> Option<usize> {
        self.queues[q]
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.expired(now) && m.matches(sel, ids))
            .min_by_key(|(_, m)| (9 - m.priority, m.n))
            .map(|(i, _)| i)
    }

    fn commit(&mut self, c: usize) {
        let u = std::mem::take(&mut self.uows[c]);
        for (q, m) in u.puts {
            self.queues[q].push(m);
        }
    }

    fn backout(&mut self, c: usize) {
        let u = std::mem::take(&mut self.uows[c]);
        for (q, mut m) in u.gets {
            m.backouts += 1;
            self.queues[q].push(m);
        }
    }

    /// A crash and restart: units of work end without commit (their gets stay on the queue, as
    /// they were never logged), non-persistent messages are gone.
    fn restart(&mut self) {
        for c in 0..CONNS {
            let u = std::mem::take(&mut self.uows[c]);
            for (q, m) in u.gets {
                self.queues[q].push(m);
            }
        }
        for q in &mut self.queues {
            q.retain(|m| m.persistent);
            for m in q.iter_mut() {
                m.backouts_known = false;
            }
        }
    }
}

struct World {
    e: Engine,
    log: SharedLog,
    /// (connection, handle per queue)
    conns: Vec<(u64, [u32; 2])>,
    ckpt: (Image, usize),
    model: Model,
    now: u64,
    n: u64,
    /// Every put's number, in order (for gets by MsgId).
    ids: Vec<u64>,
}

fn connect_all(e: &mut Engine) -> Vec<(u64, [u32; 2])> {
    (0..CONNS)
        .map(|i| {
            let c = e.connect("u", &format!("app{i}"));
            let mut hs = [0u32; 2];
            for (k, q) in QUEUES.iter().enumerate() {
                hs[k] = e
                    .open(c, q, "", open::INPUT_SHARED | open::OUTPUT, "")
                    .unwrap()
                    .0;
            }
            (c, hs)
        })
        .collect()
}

impl World {
    fn new() -> World {
        let log = SharedLog::default();
        let mut e = Engine::new(cfg(), Box::new(log.clone()));
        e.install_defaults().unwrap();
        for q in QUEUES {
            e.define_queue(QueueDef::local(q), false).unwrap();
        }
        let conns = connect_all(&mut e);
        let ckpt = (e.checkpoint_image(T0), log.0.lock().unwrap().records.len());
        World {
            e,
            log,
            conns,
            ckpt,
            model: Model::default(),
            now: T0,
            n: 0,
            ids: Vec::new(),
        }
    }

    fn sp(sync: bool) -> Syncpoint {
        if sync {
            Syncpoint::Yes
        } else {
            Syncpoint::No
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            &Op::Put {
                conn,
                queue,
                priority,
                persistent,
                expiry,
                correl,
                sync,
            } => {
                self.n += 1;
                let n = self.n;
                let md = MessageDescriptor {
                    msg_id: msg_id(n),
                    correl_id: correl.map_or([0; 24], correl_id),
                    priority: priority.unwrap_or(-1),
                    persistence: match persistent {
                        None => Persistence::AsQueueDef,
                        Some(true) => Persistence::Persistent,
                        Some(false) => Persistence::NotPersistent,
                    },
                    expiry: expiry.unwrap_or(-1),
                    ..Default::default()
                };
                let opts = PutOptions {
                    syncpoint: Self::sp(sync),
                    ..Default::default()
                };
                let (c, hs) = self.conns[conn];
                let body = Bytes::from(format!("m{n}"));
                self.e
                    .put(
                        c,
                        hs[queue],
                        &opts,
                        md,
                        Properties::default(),
                        body,
                        self.now,
                    )
                    .map_err(|e| TestCaseError::fail(format!("put m{n}: {e}")))?;
                self.ids.push(n);
                let m = M {
                    n,
                    // The queues' DEFPRTY(0) and DEFPSIST(NO).
                    priority: priority.unwrap_or(0),
                    persistent: persistent.unwrap_or(false),
                    expires_at: expiry.map(|t| self.now + t as u64 * 100),
                    correl,
                    backouts: 0,
                    backouts_known: true,
                };
                if sync {
                    self.model.uows[conn].puts.push((queue, m));
                } else {
                    self.model.queues[queue].push(m);
                }
            }
            Op::Get {
                conn,
                queue,
                sel,
                sync,
            } => {
                let (conn, queue) = (*conn, *queue);
                let (c, hs) = self.conns[conn];
                let mut opts = GetOptions {
                    syncpoint: Self::sp(*sync),
                    ..GetOptions::any()
                };
                match sel {
                    Sel::Any => {}
                    Sel::MsgId(i) if !self.ids.is_empty() => {
                        opts.match_msg_id = Some(msg_id(self.ids[i % self.ids.len()]))
                    }
                    Sel::MsgId(_) => opts.match_msg_id = Some(msg_id(u64::MAX)),
                    Sel::CorrelId(k) => opts.match_correl_id = Some(correl_id(*k)),
                }
                let ids = if self.ids.is_empty() {
                    vec![u64::MAX]
                } else {
                    self.ids.clone()
                };
                let want = self.model.pick(queue, sel, &ids, self.now);
                let got = self.e.get(c, hs[queue], &opts, 1, self.now);
                match (want, got) {
                    (None, Err(e)) if e.reason == Reason::NO_MSG_AVAILABLE => {}
                    (Some(i), Ok(GetOutcome::Got(g, _))) => {
                        let m = self.model.queues[queue].remove(i);
                        let body = String::from_utf8_lossy(&g.body).into_owned();
                        prop_assert_eq!(
                            &body,
                            &format!("m{}", m.n),
                            "{:?} on {}",
                            sel,
                            QUEUES[queue]
                        );
                        prop_assert_eq!(g.md.priority, m.priority, "priority of {}", body);
                        prop_assert_eq!(
                            g.md.persistence == Persistence::Persistent,
                            m.persistent,
                            "persistence of {}",
                            body
                        );
                        prop_assert_eq!(g.md.msg_id, msg_id(m.n));
                        if m.backouts_known {
                            prop_assert_eq!(
                                g.md.backout_count,
                                m.backouts,
                                "BackoutCount of {}",
                                body
                            );
                        }
                        // Expiry is the time left, in tenths, rounded up; never 0 when unexpired.
                        let want_expiry = match m.expires_at {
                            Some(t) => (t - self.now).div_ceil(100) as i32,
                            None => -1,
                        };
                        prop_assert_eq!(g.md.expiry, want_expiry, "Expiry of {}", body);
                        if *sync {
                            self.model.uows[conn].gets.push((queue, m));
                        }
                    }
                    (want, got) => {
                        return Err(TestCaseError::fail(format!(
                            "get {sel:?} on {}: the model expects {:?}, the engine gave {:?}",
                            QUEUES[queue],
                            want.map(|i| self.model.queues[queue][i].n),
                            got.map(|o| match o {
                                GetOutcome::Got(g, _) =>
                                    String::from_utf8_lossy(&g.body).into_owned(),
                                GetOutcome::Waiting(_) => "a wait".into(),
                            })
                        )))
                    }
                }
            }
            Op::Commit(conn) => {
                self.e
                    .commit(self.conns[*conn].0, self.now)
                    .map_err(|e| TestCaseError::fail(format!("commit: {e}")))?;
                self.model.commit(*conn);
            }
            Op::Backout(conn) => {
                self.e
                    .backout(self.conns[*conn].0, self.now)
                    .map_err(|e| TestCaseError::fail(format!("backout: {e}")))?;
                self.model.backout(*conn);
            }
            Op::Tick(ms) => self.now += ms,
            Op::Checkpoint => {
                self.ckpt = (
                    self.e.checkpoint_image(self.now),
                    self.log.0.lock().unwrap().records.len(),
                );
            }
            Op::Restart => {
                let records = self.log.0.lock().unwrap().records[self.ckpt.1..].to_vec();
                // The restarted engine goes on writing to the same log after what it replayed,
                // as a queue manager does; the next restart replays from the same checkpoint.
                let mut e = Engine::restore(cfg(), Box::new(self.log.clone()), self.ckpt.0.clone())
                    .expect("the image restores");
                for (k, p) in records {
                    e.replay(k, Bytes::from(p))
                        .map_err(|err| TestCaseError::fail(format!("replay: {err}")))?;
                }
                self.conns = connect_all(&mut e);
                self.e = e;
                self.model.restart();
            }
        }
        Ok(())
    }

    /// Ends the units of work (backout) and takes every message left, checking each against the
    /// model's order.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for c in 0..CONNS {
            self.apply(&Op::Backout(c))?;
        }
        for q in 0..QUEUES.len() {
            loop {
                let before = self.model.queues[q]
                    .iter()
                    .filter(|m| !m.expired(self.now))
                    .count();
                self.apply(&Op::Get {
                    conn: 0,
                    queue: q,
                    sel: Sel::Any,
                    sync: false,
                })?;
                if before == 0 {
                    break;
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_behaves_as_the_model_says(ops in prop::collection::vec(op(), 1..60)) {
        let mut w = World::new();
        for op in &ops {
            w.apply(op)?;
        }
        w.drain()?;
        // And once more after a crash at the end: what survives is what the model kept.
        w.apply(&Op::Restart)?;
        w.drain()?;
    }
}

/// The restored engine logs after what it replayed, and a second restart from the same
/// checkpoint replays both runs' records: a message put after the first restart and one got after
/// it are each seen once.
#[test]
fn two_restarts_from_one_checkpoint_replay_both_runs() {
    let mut w = World::new();
    let put = |queue, n: u8| Op::Put {
        conn: 0,
        queue,
        priority: Some(n as i32 % 10),
        persistent: Some(true),
        expiry: None,
        correl: None,
        sync: false,
    };
    for op in [put(0, 1), put(0, 2), Op::Checkpoint, put(0, 3), Op::Restart] {
        w.apply(&op).unwrap();
    }
    w.apply(&Op::Get {
        conn: 1,
        queue: 0,
        sel: Sel::Any,
        sync: false,
    })
    .unwrap();
    w.apply(&put(1, 4)).unwrap();
    w.apply(&Op::Restart).unwrap();
    let depth = |w: &World, q: usize| w.model.queues[q].len();
    assert_eq!((depth(&w, 0), depth(&w, 1)), (2, 1));
    w.drain().unwrap();
}
