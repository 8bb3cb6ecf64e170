//! The simulated world: three nodes on one switch, their disks, the seeded random source
//! everything draws from, the event trace, and the fault schedule.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::Image;
use ferrymq_replication::openraft::{BasicNode, Raft};
use ferrymq_replication::NodeId;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;
use tokio::time::Instant;

use crate::disk::Disk;
use crate::ledger::Ledger;
use crate::net::{Links, SimNetwork, Switch};
use crate::node::{monitor, Life, Qm, SimStateMachine};
use crate::{SimConfig, NODES};

/// The event trace: every line hashed (FNV-1a), the last ones kept.
#[derive(Default)]
pub struct Trace {
    pub hash: u64,
    pub events: u64,
    pub tail: std::collections::VecDeque<String>,
}

/// Lines of trace kept for a failure report.
pub const TRACE_TAIL: usize = 60;

/// What every part of the world shares.
pub struct Shared {
    pub cfg: SimConfig,
    pub rng: Mutex<StdRng>,
    pub trace: Mutex<Trace>,
    pub violations: Mutex<Vec<String>>,
    pub ledger: Mutex<Ledger>,
    pub t0: Instant,
}

impl Shared {
    pub fn new(cfg: SimConfig) -> Arc<Shared> {
        Arc::new(Shared {
            rng: Mutex::new(rand::SeedableRng::seed_from_u64(cfg.seed)),
            trace: Default::default(),
            violations: Default::default(),
            ledger: Default::default(),
            t0: Instant::now(),
            cfg,
        })
    }

    pub fn now_ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    pub fn trace(&self, what: impl AsRef<str>) {
        let line = format!(
            "{:>7.3}s {}",
            self.t0.elapsed().as_secs_f64(),
            what.as_ref()
        );
        let mut t = self.trace.lock();
        let mut h = if t.events == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            t.hash
        };
        for b in line.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        t.hash = h;
        t.events += 1;
        if self.cfg.print_trace {
            eprintln!("{line}");
        }
        t.tail.push_back(line);
        if t.tail.len() > TRACE_TAIL {
            t.tail.pop_front();
        }
    }

    pub fn violation(&self, what: impl Into<String>) {
        let what = what.into();
        self.trace(format!("VIOLATION {what}"));
        self.violations.lock().push(what);
    }

    pub fn chance(&self, percent: u32) -> bool {
        self.rng.lock().gen_range(0..100) < percent
    }

    pub fn between(&self, lo: u64, hi: u64) -> u64 {
        self.rng.lock().gen_range(lo..=hi)
    }
}

pub struct World {
    pub shared: Arc<Shared>,
    pub switch: Arc<Switch>,
    disks: Vec<Arc<Disk>>,
    lives: Mutex<[Option<Arc<Life>>; NODES]>,
    next_life: Mutex<u64>,
    /// The engine state every node starts from (its queue manager as created).
    image: Image,
    /// Nodes whose start is under way (a start takes simulated time).
    starting: Mutex<[bool; NODES]>,
    /// Since when each node has been cut off from every other node (down, or no peer up with
    /// links both ways): such a node cannot have a majority's acknowledgement.
    alone_since: Mutex<[Option<Instant>; NODES]>,
}

impl World {
    pub fn new(shared: Arc<Shared>, image: Image) -> Arc<World> {
        Arc::new(World {
            switch: Arc::new(Switch::new(shared.clone())),
            shared,
            disks: (0..NODES).map(|_| Disk::new()).collect(),
            lives: Mutex::new([None, None, None]),
            next_life: Mutex::new(1),
            image,
            starting: Mutex::new([false; NODES]),
            alone_since: Mutex::new([None; NODES]),
        })
    }

    pub fn life(&self, node: NodeId) -> Option<Arc<Life>> {
        self.lives.lock()[node as usize - 1].clone()
    }

    pub fn lives(&self) -> Vec<Arc<Life>> {
        self.lives.lock().iter().flatten().cloned().collect()
    }

    /// Starts a new life of `node` on its disk.
    pub async fn start(self: &Arc<World>, node: NodeId) {
        {
            let mut s = self.starting.lock();
            if s[node as usize - 1] || self.life(node).is_some() {
                return;
            }
            s[node as usize - 1] = true;
        }
        let life = {
            let mut n = self.next_life.lock();
            *n += 1;
            *n
        };
        let alive = Arc::new(AtomicBool::new(true));
        let log = self.disks[node as usize - 1].open(life, alive.clone(), self.shared.clone());
        let qm = Qm::new(
            node,
            life,
            self.image.clone(),
            alive.clone(),
            self.shared.clone(),
        );
        let net = SimNetwork {
            me: node,
            switch: self.switch.clone(),
            alive: alive.clone(),
        };
        let cfg = Arc::new(
            ferrymq_replication::fast_failover_config()
                .validate()
                .expect("valid Raft config"),
        );
        let raft = Raft::new(node, cfg, net, log, SimStateMachine::new(qm.clone()))
            .await
            .expect("Raft starts");
        let fresh = {
            let d = self.disks[node as usize - 1].durable();
            d.vote.is_none() && d.entries.is_empty()
        };
        let l = Arc::new(Life {
            node,
            life,
            alive: alive.clone(),
            raft: raft.clone(),
            qm,
        });
        self.lives.lock()[node as usize - 1] = Some(l.clone());
        self.switch.up.lock()[node as usize - 1] = Some((raft.clone(), alive));
        self.starting.lock()[node as usize - 1] = false;
        self.shared
            .trace(format!("node {node} starts (life {life})"));
        if fresh && node == 1 {
            let members: BTreeMap<NodeId, BasicNode> = (1..=NODES as u64)
                .map(|i| (i, BasicNode::new(format!("n{i}"))))
                .collect();
            let _ = raft.initialize(members).await;
        }
        tokio::spawn(monitor(self.clone(), l));
    }

    /// The node's power goes: its life ends at once, its disk keeps what was synced (and, now
    /// and then, a prefix of what was not).
    pub fn crash(&self, node: NodeId, why: &str) {
        let Some(life) = self.lives.lock()[node as usize - 1].take() else {
            return;
        };
        life.alive.store(false, Ordering::Release);
        life.qm.active.store(false, Ordering::Release);
        self.switch.up.lock()[node as usize - 1] = None;
        let keep = if self.shared.chance(30) {
            self.shared.between(0, 8) as usize
        } else {
            0
        };
        let (kept, pending) = self.disks[node as usize - 1].crash(keep);
        self.shared.trace(format!(
            "node {node} crashes ({why}); {kept} of {pending} unsynced writes survive"
        ));
        let raft = life.raft.clone();
        tokio::spawn(async move {
            let _ = raft.shutdown().await;
        });
    }

    /// Crash now, restart after `after`.
    pub fn crash_restart(self: &Arc<World>, node: NodeId, why: &str, after: Duration) {
        self.crash(node, why);
        let w = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            w.start(node).await;
        });
    }

    /// A life that stopped leading restarts itself (as the server's instance re-executes).
    pub fn restart_deposed(self: Arc<World>, node: NodeId, life: u64) {
        if self.life(node).is_some_and(|l| l.life == life) {
            let after = Duration::from_millis(self.shared.between(5, 50));
            self.crash_restart(node, "restart after losing the role", after);
        }
    }

    /// Nodes up (and not about to restart).
    fn up_count(&self) -> usize {
        self.lives.lock().iter().flatten().count()
    }

    /// The fault schedule: until `until`, one fault after another, each undone after a while.
    /// Mostly a minority is affected; now and then a majority.
    pub async fn faults(self: Arc<World>, until: Instant) {
        let sh = self.shared.clone();
        tokio::time::sleep(Duration::from_millis(sh.between(100, 600))).await;
        while Instant::now() < until {
            let node = sh.between(1, NODES as u64);
            let leader = self
                .lives()
                .into_iter()
                .find(|l| l.qm.is_serving())
                .map(|l| l.node);
            // Half the time, the fault hits the active instance.
            let node = match leader {
                Some(l) if sh.chance(50) => l,
                _ => node,
            };
            let span = Duration::from_millis(sh.between(50, 2_000));
            let majority = sh.chance(10);
            match sh.between(0, 9) {
                0..=3 => {
                    let down = NODES - self.up_count();
                    if down == 0 || majority {
                        self.crash_restart(node, "fault", span);
                    }
                }
                4..=5 => {
                    // Cut one node off both ways (with `majority`: two).
                    let other = node % NODES as u64 + 1;
                    self.isolate(node, true);
                    if majority {
                        self.isolate(other, true);
                    }
                    sh.trace(format!(
                        "partition: node {node} isolated{}",
                        if majority {
                            format!(" and node {other}")
                        } else {
                            String::new()
                        }
                    ));
                    let w = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(span).await;
                        w.isolate(node, false);
                        w.isolate(other, false);
                        w.shared.trace(format!("partition of node {node} healed"));
                    });
                }
                6..=7 => {
                    let to = (node + sh.between(0, 1)) % NODES as u64 + 1;
                    self.switch.links.lock().cut[node as usize - 1][to as usize - 1] = true;
                    sh.trace(format!("one-way cut {node}->{to}"));
                    let w = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(span).await;
                        w.switch.links.lock().cut[node as usize - 1][to as usize - 1] = false;
                        w.shared.trace(format!("one-way cut {node}->{to} healed"));
                    });
                }
                8 => {
                    let (lo, hi) = (sh.between(100, 5_000), sh.between(5_000, 60_000));
                    self.switch.links.lock().delay_us = (lo, hi);
                    sh.trace(format!("delays {lo}..{hi} us"));
                    let w = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(span).await;
                        w.switch.links.lock().delay_us = Links::default().delay_us;
                        w.shared.trace("delays back to normal");
                    });
                }
                _ => {
                    let p = sh.between(10, 300) as u32;
                    self.switch.links.lock().drop_permille = p;
                    sh.trace(format!("loss {p} per mille"));
                    let w = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(span).await;
                        w.switch.links.lock().drop_permille = 0;
                        w.shared.trace("loss back to none");
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(sh.between(50, 700))).await;
        }
    }

    fn isolate(&self, node: NodeId, cut: bool) {
        let mut l = self.switch.links.lock();
        let i = node as usize - 1;
        for j in 0..NODES {
            if j != i {
                l.cut[i][j] = cut;
                l.cut[j][i] = cut;
            }
        }
    }

    /// Ends every fault: links whole, every node up.
    pub async fn heal(self: &Arc<World>) {
        *self.switch.links.lock() = Links::default();
        self.shared.trace("all faults healed");
        for node in 1..=NODES as u64 {
            self.start(node).await;
        }
    }

    /// Follows which nodes are cut off from every other (see [`World::alone_for`]); runs until
    /// the runtime ends.
    pub async fn watch_quorum(self: Arc<World>) {
        loop {
            self.refresh_alone();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn refresh_alone(&self) {
        let up: Vec<bool> = self.lives.lock().iter().map(|l| l.is_some()).collect();
        let cut = self.switch.links.lock().cut;
        let now = Instant::now();
        let mut alone = self.alone_since.lock();
        for i in 0..NODES {
            let paired = up[i] && (0..NODES).any(|j| j != i && up[j] && !cut[i][j] && !cut[j][i]);
            if paired {
                alone[i] = None;
            } else if alone[i].is_none() {
                alone[i] = Some(now);
            }
        }
    }

    /// How long `node` has been cut off from every other node (zero: it is not now), give or
    /// take the watcher's 5 ms.
    pub fn alone_for(&self, node: NodeId) -> Duration {
        self.refresh_alone();
        self.alone_since.lock()[node as usize - 1].map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// The serving (active) node, if there is one.
    pub fn active(&self) -> Option<Arc<Life>> {
        self.lives().into_iter().find(|l| l.qm.is_serving())
    }
}
