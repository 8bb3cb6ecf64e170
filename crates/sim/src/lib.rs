//! FerryMQ's deterministic simulator of a replicated (HA) queue manager group. It owns running
//! three nodes — each the real openraft `Raft` with FerryMQ's Raft configuration, its log on a
//! simulated disk whose writes are durable only once a simulated fsync completes, and a queue
//! manager like the server's: the real `ferrymq_engine::Engine`, its records batched into Raft
//! entries by the production replication policy (`ferrymq_replication::ha`), replies released
//! only once the production durable position passes them —
//! with simulated applications against them, inside one single-threaded tokio runtime whose clock
//! only moves when every task waits, while a fault schedule drawn from a seed crashes nodes, cuts
//! and delays links. A shadow ledger of every acknowledged operation is checked against what the
//! healed group holds at the end. See `docs/internals/sim.md` for what is and is not covered.

mod client;
mod disk;
pub mod ledger;
mod net;
mod node;
mod replication;
mod world;

use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::{Engine, EngineConfig, MemoryLog};
use ferrymq_types::QueueDef;
use tokio::time::Instant;

pub use ledger::Stats;
pub use world::TRACE_TAIL;

/// Nodes in the simulated group.
pub const NODES: usize = 3;
/// The queue the clients use.
pub const QUEUE: &str = "SIM.Q";

/// One simulation run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// Test only, deliberately wrong: a batch counts as committed (and its replies go out) once
    /// the leader's Raft has taken it, not once a majority has it. The checks must catch it.
    pub ack_before_commit: bool,
    /// Simulated time with clients and faults (then everything is healed and checked).
    pub duration: Duration,
    pub clients: u64,
    /// Whether faults are injected at all.
    pub faults: bool,
    /// Prints every event of the trace to stderr as it happens.
    pub print_trace: bool,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            ack_before_commit: false,
            duration: Duration::from_secs(5),
            clients: 4,
            faults: true,
            print_trace: false,
        }
    }

    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run -p ferrymq-sim -- --seed {}{}",
            self.seed,
            if self.ack_before_commit {
                " --ack-before-commit"
            } else {
                ""
            }
        )
    }
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub seed: u64,
    /// Broken invariants (empty: the run passed).
    pub violations: Vec<String>,
    /// Hash of the whole event trace: the same seed must give the same hash.
    pub trace_hash: u64,
    pub events: u64,
    /// The last events.
    pub tail: Vec<String>,
    pub stats: Stats,
    /// Simulated time the run took, healing and checks included.
    pub simulated: Duration,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// A failure report: the violations, the replay command and the trace's tail.
    pub fn report(&self, cfg: &SimConfig) -> String {
        let mut s = format!(
            "seed {} FAILED: {}\nreplay: {}\nlast {} of {} events:\n",
            self.seed,
            self.violations.join("; "),
            cfg.replay_command(),
            self.tail.len(),
            self.events
        );
        for l in &self.tail {
            s.push_str("  ");
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

std::thread_local! {
    static PANICS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Records panics on this thread (a panic inside a simulated task ends only that task; the run
/// reports it as a violation).
fn watch_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.borrow_mut().push(info.to_string()));
            prev(info);
        }));
    });
    PANICS.with(|p| p.borrow_mut().clear());
}

/// The engine state every node starts from: a queue manager as created, with the clients' queue.
fn initial_image() -> ferrymq_engine::Image {
    let cfg = EngineConfig {
        qmgr_name: "SIMQM".into(),
        max_handles: 16,
        instance_id: 0,
        backout_requeue: false,
        message_memory_max: 0,
    };
    let mut e = Engine::new(cfg, Box::<MemoryLog>::default());
    e.install_defaults_at(client::T0_MS, 1)
        .expect("defaults install");
    e.define_queue(QueueDef::local(QUEUE), false)
        .expect("queue defines");
    e.checkpoint_image(client::T0_MS)
}

/// Runs one simulation on this thread (its own runtime, paused clock).
pub fn run(cfg: &SimConfig) -> Outcome {
    watch_panics();
    // openraft's election timeouts come from this thread's generator.
    ferrymq_replication::runtime::seed_thread_rng(cfg.seed ^ 0x6f70_656e_7261_6674);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let mut out = rt.block_on(simulate(cfg.clone()));
    // Whatever is still running (old lives shutting down) ends with the runtime.
    drop(rt);
    PANICS.with(|p| {
        for m in p.borrow_mut().drain(..) {
            out.violations.push(format!("panic: {m}"));
        }
    });
    out
}

async fn simulate(cfg: SimConfig) -> Outcome {
    let shared = world::Shared::new(cfg.clone());
    let world = world::World::new(shared.clone(), initial_image());
    for node in 1..=NODES as u64 {
        world.start(node).await;
    }
    tokio::spawn(world.clone().watch_quorum());
    let until = Instant::now() + cfg.duration;
    if cfg.faults {
        tokio::spawn(world.clone().faults(until));
    }
    let clients: Vec<_> = (1..=cfg.clients)
        .map(|c| tokio::spawn(client::client(world.clone(), c, until)))
        .collect();
    for c in clients {
        let _ = c.await;
    }
    // Faults end with the clients; the last ones may still be being undone.
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    world.heal().await;
    finish(&world).await;
    let t = shared.trace.lock();
    let violations = shared.violations.lock().clone();
    let stats = shared.ledger.lock().stats;
    Outcome {
        seed: cfg.seed,
        violations,
        trace_hash: t.hash,
        events: t.events,
        tail: t.tail.iter().cloned().collect(),
        stats,
        simulated: shared.t0.elapsed(),
    }
}

/// After healing: an active instance must appear; once every node has applied what it
/// committed, each node's queue must hold the same messages, and the checks run on them.
async fn finish(world: &Arc<world::World>) {
    let sh = &world.shared;
    let deadline = Instant::now() + Duration::from_secs(20);
    let leader = loop {
        if let Some(l) = world.active() {
            break l;
        }
        if Instant::now() > deadline {
            sh.violation("no active instance 20 s after every fault was healed");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Everything the leader logged committed, and applied everywhere.
    let deadline = Instant::now() + Duration::from_secs(10);
    while leader.qm.durable.get() < leader.qm.logged() {
        if Instant::now() > deadline || !leader.qm.is_serving() {
            sh.violation("the active instance's last batches never committed after healing");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let target = leader.metrics().last_log_index;
    loop {
        let behind: Vec<u64> = world
            .lives()
            .iter()
            .filter(|l| l.metrics().last_applied.map(|a| a.index) < target)
            .map(|l| l.node)
            .collect();
        if behind.is_empty() && world.lives().len() == NODES {
            break;
        }
        if Instant::now() > deadline {
            sh.violation(format!(
                "nodes {behind:?} never applied the log up to index {target:?} after healing"
            ));
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Replicas first: the leader's drain logs records its replicator would send them.
    let now = sh.now_ms();
    let others: Vec<_> = world
        .lives()
        .into_iter()
        .filter(|l| l.node != leader.node)
        .map(|l| (l.node, client::drain(&l, now)))
        .collect();
    let drained = client::drain(&leader, now);
    for (node, other) in others {
        if other != drained {
            sh.violation(format!(
                "node {node} holds {} messages, the active node {} holds {}",
                other.len(),
                leader.node,
                drained.len()
            ));
        }
    }
    sh.trace(format!(
        "drained {} messages from node {}",
        drained.len(),
        leader.node
    ));
    let mut ledger = sh.ledger.lock();
    ledger.stats.drained = drained.len() as u64;
    for v in ledger.check(&drained) {
        sh.violation(v);
    }
}
