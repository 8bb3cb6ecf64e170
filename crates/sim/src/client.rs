//! Simulated applications: each one a loop of persistent MQPUTs (with and without syncpoint)
//! and MQGETs under syncpoint ended by MQCMIT or MQBACK, against whichever node is active,
//! moving to another node after an error or a timeout. Every reply waits, as the server's do,
//! for the durable watermark to pass the operation's log position.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrymq_engine::{ConnId, Engine, GetOutcome, Lsn};
use ferrymq_replication::NodeId;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use tokio::time::Instant;

use crate::ledger::PutFate;
use crate::node::Life;
use crate::world::World;
use crate::{NODES, QUEUE};

/// How long a client waits for a reply before giving up on the node.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long after being cut off a node may still release a reply (its batch's last
/// acknowledgement may be on its way, delayed up to 60 ms, when the cut happens).
const ALONE_GRACE: Duration = Duration::from_millis(200);
/// The clock the engine is told (ms since the epoch) at the simulation's start.
pub const T0_MS: u64 = 1_700_000_000_000;

/// The connection went away (the node crashed or gave up the role) or the reply never came.
#[derive(Debug, Clone, Copy)]
struct Broken;

fn body(id: u64) -> Bytes {
    Bytes::from(format!("m{id}"))
}

/// The message id a body carries (`None`: no put's body).
pub fn parse_body(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok()?.strip_prefix('m')?.parse().ok()
}

/// One application connection to a node life.
struct Session {
    world: Arc<World>,
    life: Arc<Life>,
    conn: ConnId,
    hobj: u32,
}

impl Session {
    fn open(world: &Arc<World>, life: Arc<Life>, client: u64) -> Result<Session, Broken> {
        let (conn, hobj) = {
            if !life.qm.is_serving() {
                return Err(Broken);
            }
            let mut e = life.qm.engine.lock();
            let conn = e.connect("sim", &format!("client{client}"));
            let hobj = e
                .open(conn, QUEUE, "", open::INPUT_SHARED | open::OUTPUT, "")
                .map_err(|_| Broken)?
                .0;
            (conn, hobj)
        };
        Ok(Session {
            world: world.clone(),
            life,
            conn,
            hobj,
        })
    }

    fn now(&self) -> u64 {
        T0_MS + self.world.shared.now_ms()
    }

    /// Runs `f` on the engine, if this life still serves.
    fn engine<T>(&self, f: impl FnOnce(&mut Engine, u64) -> T) -> Result<T, Broken> {
        if !self.life.qm.is_serving() {
            return Err(Broken);
        }
        let now = self.now();
        Ok(f(&mut self.life.qm.engine.lock(), now))
    }

    /// Waits until the reply for log position `lsn` may go out.
    async fn reply(&self, lsn: Lsn) -> Result<(), Broken> {
        let qm = &self.life.qm;
        let deadline = Instant::now() + REPLY_TIMEOUT;
        // Whether this reply waits for a commit (many replies depend only on what is already
        // durable, e.g. a backout that logs nothing).
        let waits = qm.durable.get() < lsn;
        loop {
            if !qm.is_serving() || qm.props.is_lost() {
                return Err(Broken);
            }
            if qm.durable.get() >= lsn {
                break;
            }
            tokio::select! {
                biased;
                r = qm.durable.wait(lsn) => r.map_err(|_| Broken)?,
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                _ = tokio::time::sleep_until(deadline) => return Err(Broken),
            }
        }
        let term = qm.own_term.load(Ordering::Acquire);
        let sh = &self.world.shared;
        // A reply that waited for its batch was released by a majority's acknowledgement, which a
        // node cut off from every other cannot have had for longer than a message takes to arrive.
        let alone = self.world.alone_for(self.life.node);
        if waits && alone > ALONE_GRACE {
            sh.violation(format!(
                "node {} acknowledged after being cut off from every other node for {} ms",
                self.life.node,
                alone.as_millis()
            ));
        }
        let clash = sh.ledger.lock().acked_in(term, self.life.node);
        if let Some(v) = clash {
            sh.violation(v);
        }
        Ok(())
    }

    fn close(self) {
        let conn = self.conn;
        let _ = self.engine(|e, now| e.disconnect(conn, now));
    }

    async fn think(&self) {
        let ms = self.world.shared.between(0, 20);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    fn put(&self, id: u64, sync: bool) -> Result<Result<Lsn, Reason>, Broken> {
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let opts = PutOptions {
            syncpoint: if sync { Syncpoint::Yes } else { Syncpoint::No },
            ..Default::default()
        };
        let (conn, hobj) = (self.conn, self.hobj);
        self.engine(|e, now| {
            e.put(conn, hobj, &opts, md, Properties::default(), body(id), now)
                .map(|d| d.wait_lsn)
                .map_err(|e| e.reason)
        })
    }

    fn get(&self) -> Result<Option<(Option<u64>, Lsn)>, Broken> {
        let opts = GetOptions {
            syncpoint: Syncpoint::Yes,
            max_len: u32::MAX,
            ..Default::default()
        };
        let (conn, hobj) = (self.conn, self.hobj);
        let r = self.engine(|e, now| e.get(conn, hobj, &opts, 0, now))?;
        match r {
            Ok(GetOutcome::Got(g, lsn)) => Ok(Some((parse_body(&g.body), lsn))),
            Ok(GetOutcome::Waiting(_)) => Ok(None),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => Ok(None),
            Err(e) => {
                self.world
                    .shared
                    .violation(format!("a get failed unexpectedly: {e}"));
                Ok(None)
            }
        }
    }

    fn end_uow(&self, commit: bool) -> Result<Result<Lsn, Reason>, Broken> {
        let conn = self.conn;
        self.engine(|e, now| {
            if commit {
                e.commit(conn, now)
            } else {
                e.backout(conn, now)
            }
            .map_err(|e| e.reason)
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Put,
    PutSyncpoint,
    GetCommit,
    GetBackout,
}

/// One client: operations until `until`, then it stops.
pub async fn client(world: Arc<World>, client: u64, until: Instant) {
    let sh = world.shared.clone();
    let mut n = 0;
    let mut prefer: Option<NodeId> = None;
    while Instant::now() < until {
        let node = prefer.unwrap_or_else(|| sh.between(1, NODES as u64));
        let Some(life) = world.life(node).filter(|l| l.qm.is_serving()) else {
            prefer = None;
            tokio::time::sleep(Duration::from_millis(sh.between(10, 100))).await;
            continue;
        };
        let Ok(s) = Session::open(&world, life, client) else {
            continue;
        };
        let op = match sh.between(0, 9) {
            0..=2 => Op::Put,
            3..=5 => Op::PutSyncpoint,
            6..=8 => Op::GetCommit,
            _ => Op::GetBackout,
        };
        n += 1;
        let id = client * 1_000_000 + n;
        let r = run_op(&s, op, id).await;
        sh.trace(format!(
            "client {client} {op:?} #{id} on node {node}: {}",
            if r.is_ok() { "ok" } else { "broken" }
        ));
        s.think().await;
        if r.is_ok() {
            prefer = Some(node);
            s.close();
        } else {
            prefer = None;
        }
    }
}

async fn run_op(s: &Session, op: Op, id: u64) -> Result<(), Broken> {
    let sh = &s.world.shared;
    match op {
        Op::Put | Op::PutSyncpoint => {
            let sync = matches!(op, Op::PutSyncpoint);
            let lsn = match s.put(id, sync)? {
                Ok(lsn) => lsn,
                Err(_) => {
                    sh.ledger.lock().put(id, PutFate::NotDone);
                    return Ok(());
                }
            };
            let lsn = if sync {
                s.think().await;
                match s.end_uow(true) {
                    Ok(Ok(lsn)) => lsn,
                    Ok(Err(_)) | Err(_) => {
                        // Never committed: the unit of work died with the engine.
                        sh.ledger.lock().put(id, PutFate::NotDone);
                        return Err(Broken);
                    }
                }
            } else {
                lsn
            };
            match s.reply(lsn).await {
                Ok(()) => {
                    sh.ledger.lock().put(id, PutFate::Acked);
                    Ok(())
                }
                Err(b) => {
                    sh.ledger.lock().put(id, PutFate::Unknown);
                    Err(b)
                }
            }
        }
        Op::GetCommit | Op::GetBackout => {
            let Some((got, lsn)) = s.get()? else {
                return Ok(());
            };
            let Some(got) = got else {
                sh.violation("a get returned a message nobody put");
                return Ok(());
            };
            s.reply(lsn).await?;
            sh.ledger.lock().seen.insert(got);
            s.think().await;
            let commit = matches!(op, Op::GetCommit);
            let lsn = match s.end_uow(commit)? {
                Ok(lsn) => lsn,
                Err(_) => return Ok(()),
            };
            let r = s.reply(lsn).await;
            let mut l = sh.ledger.lock();
            match (commit, r) {
                (true, Ok(())) => {
                    *l.acked_gets.entry(got).or_default() += 1;
                    l.stats.gets_acked += 1;
                }
                (true, Err(_)) => {
                    l.unknown_gets.insert(got);
                    l.stats.gets_unknown += 1;
                }
                (false, _) => l.stats.gets_backed_out += 1,
            }
            drop(l);
            r
        }
    }
}

/// Takes every message off the queue of `life`'s engine (no syncpoint, no replication: the run
/// is over), returning their ids in order.
pub fn drain(life: &Life, now_ms: u64) -> Vec<Option<u64>> {
    let mut e = life.qm.engine.lock();
    let conn = e.connect("sim", "drain");
    let Ok((hobj, _, _)) = e.open(conn, QUEUE, "", open::INPUT_SHARED, "") else {
        return Vec::new();
    };
    let opts = GetOptions {
        syncpoint: Syncpoint::No,
        max_len: u32::MAX,
        ..Default::default()
    };
    let mut out = Vec::new();
    while let Ok(GetOutcome::Got(g, _)) = e.get(conn, hobj, &opts, 0, T0_MS + now_ms) {
        out.push(parse_body(&g.body));
    }
    e.disconnect(conn, T0_MS + now_ms);
    out
}
