//! Shared helpers for the replication tests: a recording state machine and a cluster of
//! replicas on loopback TCP, each in its own temporary directory.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_log::Durability;
use ferrymq_replication::{
    AppRecord, Apply, Capture, LogId, Replica, ReplicaConfig, ReplicationError,
};
use parking_lot::Mutex;
use tokio::net::TcpListener;

/// A state machine that remembers every record applied, in order; its checkpoint is the whole
/// list as JSON with the Raft metadata beside it, in `checkpoint.json` of the replica directory.
#[derive(Default)]
pub struct Recorder {
    pub applied: Mutex<Vec<(u64, AppRecord)>>,
    dir: Mutex<Option<PathBuf>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Checkpoint {
    meta: Vec<u8>,
    applied: Vec<(u64, AppRecord)>,
}

impl Recorder {
    pub fn payloads(&self) -> Vec<Vec<u8>> {
        self.applied
            .lock()
            .iter()
            .map(|(_, r)| r.payload.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.applied.lock().len()
    }

    fn file(&self) -> PathBuf {
        self.dir
            .lock()
            .clone()
            .expect("opened")
            .join("checkpoint.json")
    }

    fn read(&self) -> std::io::Result<Option<Checkpoint>> {
        match std::fs::read(self.file()) {
            Ok(b) => Ok(Some(serde_json::from_slice(&b)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn write_checkpoint(file: &Path, c: &Checkpoint) -> std::io::Result<()> {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(c)?)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, file)
}

impl Apply for Recorder {
    fn open(&self, dir: &Path) -> std::io::Result<Option<Vec<u8>>> {
        *self.dir.lock() = Some(dir.to_path_buf());
        Ok(self.read()?.map(|c| {
            *self.applied.lock() = c.applied;
            c.meta
        }))
    }

    fn apply(&self, log_id: &LogId, rec: &AppRecord) {
        self.applied.lock().push((log_id.index, rec.clone()));
    }

    fn capture(&self) -> Capture {
        let applied = self.applied.lock().clone();
        let file = self.file();
        Capture {
            at: None,
            write: Box::new(move |meta| {
                write_checkpoint(
                    &file,
                    &Checkpoint {
                        meta: meta.to_vec(),
                        applied,
                    },
                )
            }),
        }
    }

    fn export(&self) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .read()?
            .map(|c| (c.meta, serde_json::to_vec(&c.applied).unwrap())))
    }

    fn import(&self, meta: &[u8], data: &[u8]) -> std::io::Result<()> {
        let applied: Vec<(u64, AppRecord)> = serde_json::from_slice(data)?;
        write_checkpoint(
            &self.file(),
            &Checkpoint {
                meta: meta.to_vec(),
                applied: applied.clone(),
            },
        )?;
        *self.applied.lock() = applied;
        Ok(())
    }
}

pub fn record(i: usize) -> AppRecord {
    AppRecord {
        kind: 1,
        payload: format!("write-{i}").into_bytes(),
    }
}

pub fn payloads(range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(|i| record(i).payload).collect()
}

/// Polls `f` every 20 ms until it holds or `limit` passes.
pub async fn eventually<F: FnMut() -> bool>(limit: Duration, mut f: F) -> bool {
    let end = tokio::time::Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Bounds a whole test so a hang fails instead of blocking CI.
pub async fn bounded<F: Future<Output = ()>>(limit: Duration, f: F) {
    tokio::time::timeout(limit, f)
        .await
        .expect("test exceeded its time limit");
}

/// One member of a test cluster: the replica (None while stopped), its state machine, and what
/// it takes to restart it.
pub struct Member {
    pub id: u64,
    pub dir: PathBuf,
    pub addr: String,
    pub replica: Option<Replica>,
    pub sm: Arc<Recorder>,
}

pub struct Cluster {
    _tmp: tempfile::TempDir,
    tweak: fn(&mut ReplicaConfig),
    pub members: Vec<Member>,
}

fn config(id: u64, dir: PathBuf, tweak: fn(&mut ReplicaConfig)) -> ReplicaConfig {
    let mut cfg = ReplicaConfig::new(id, dir);
    // Small ring: 2 × 256 KiB is plenty for these tests and quick to preallocate.
    cfg.log_files = 2;
    cfg.log_file_pages = 64;
    cfg.durability = Durability::Fsync;
    tweak(&mut cfg);
    cfg
}

impl Cluster {
    /// Starts `n` replicas (ids 1..=n) and initializes the group through replica 1.
    pub async fn start(n: u64) -> Cluster {
        Cluster::start_with(n, |_| {}).await
    }

    /// Like [`start`](Self::start), with every replica's configuration adjusted by `tweak`
    /// (also on restart).
    pub async fn start_with(n: u64, tweak: fn(&mut ReplicaConfig)) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let mut members = Vec::new();
        for id in 1..=n {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let dir = tmp.path().join(format!("replica-{id}"));
            let sm = Arc::new(Recorder::default());
            let replica = Replica::start(config(id, dir.clone(), tweak), listener, sm.clone())
                .await
                .unwrap();
            members.push(Member {
                id,
                dir,
                addr,
                replica: Some(replica),
                sm,
            });
        }
        let all: BTreeMap<u64, String> = members.iter().map(|m| (m.id, m.addr.clone())).collect();
        members[0]
            .replica
            .as_ref()
            .unwrap()
            .initialize(all)
            .await
            .unwrap();
        Cluster {
            _tmp: tmp,
            tweak,
            members,
        }
    }

    pub fn running(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.replica.is_some())
    }

    /// Index (into `members`) of the running replica that leads, once exactly one claims to.
    pub async fn wait_leader(&self, limit: Duration) -> Option<usize> {
        let mut found = None;
        eventually(limit, || {
            let leaders: Vec<usize> = (0..self.members.len())
                .filter(|&i| {
                    self.members[i]
                        .replica
                        .as_ref()
                        .is_some_and(|r| r.is_leader())
                })
                .collect();
            found = (leaders.len() == 1).then(|| leaders[0]);
            found.is_some()
        })
        .await;
        found
    }

    /// Writes through the current leader, following `NotLeader` answers (which are certain
    /// not to have written anything) until one accepts.
    pub async fn write(&self, rec: AppRecord) -> u64 {
        for _ in 0..100 {
            let Some(i) = self.wait_leader(Duration::from_secs(10)).await else {
                panic!("no leader");
            };
            match self.members[i]
                .replica
                .as_ref()
                .unwrap()
                .write(rec.clone())
                .await
            {
                Ok(id) => return id.index,
                Err(ReplicationError::NotLeader { .. }) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("write failed: {e}"),
            }
        }
        panic!("no replica accepted the write");
    }

    /// Stops member `i` (its directory is kept).
    pub async fn stop(&mut self, i: usize) {
        let replica = self.members[i].replica.take().expect("already stopped");
        replica.shutdown().await.unwrap();
    }

    /// Restarts member `i` from its directory on its old address, with a fresh (empty) state
    /// machine, as a restarted process would have.
    pub async fn restart(&mut self, i: usize) {
        let tweak = self.tweak;
        let m = &mut self.members[i];
        let listener = TcpListener::bind(&m.addr).await.unwrap();
        m.sm = Arc::new(Recorder::default());
        let replica = Replica::start(config(m.id, m.dir.clone(), tweak), listener, m.sm.clone())
            .await
            .unwrap();
        m.replica = Some(replica);
    }

    pub async fn shutdown(mut self) {
        for i in 0..self.members.len() {
            if self.members[i].replica.is_some() {
                self.stop(i).await;
            }
        }
    }
}
