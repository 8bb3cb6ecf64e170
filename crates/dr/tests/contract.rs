//! The stream source's contract, held by one function over both sources: the same engine records,
//! written through a standalone queue manager's ring and through an HA group's Raft log, read
//! back through `StreamSource::next` exactly, in order, resumable from any position the stream
//! reached, waiting past the end, in chunks of about `CHUNK_BYTES`.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferrymq_dr::wire::CHUNK_BYTES;
use ferrymq_dr::{RaftSource, RingSource, StreamSource};
use ferrymq_engine::batch::{push_record, split, RECORD_HEAD_BYTES};
use ferrymq_log::lsn::{self, LsnSender};
use ferrymq_log::{Durability, LogConfig, RecoveryLog};
use ferrymq_replication::openraft::storage::RaftLogStorageExt;
use ferrymq_replication::openraft::{CommittedLeaderId, EntryPayload};
use ferrymq_replication::{AppRecord, Entry, LogId, LogStorage, KIND_ENGINE_BATCH};
use tokio::sync::watch;

/// An engine record: kind and payload.
type Record = (u8, Bytes);

/// Where records are written: a log the queue manager writes, and the source reading it back.
trait Medium {
    /// Writes `group` in one go (the ring: one log record each, then a sync; Raft: one committed
    /// entry holding the batch) and returns the stream position after it.
    fn write(&mut self, group: &[Record]) -> impl Future<Output = u64>;
    fn source(&self) -> Box<dyn StreamSource>;
}

fn log_cfg(dir: &Path) -> LogConfig {
    LogConfig {
        dir: dir.to_path_buf(),
        primary_files: 2,
        file_pages: 2048,
        durability: Durability::OsBuffered,
        direct_writes: false,
    }
}

struct Ring {
    ring: Arc<RecoveryLog>,
    durable: lsn::LsnWatch,
    _tmp: tempfile::TempDir,
}

impl Ring {
    fn open() -> Ring {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = log_cfg(tmp.path());
        RecoveryLog::create(&cfg).unwrap();
        let (tx, durable): (LsnSender, _) = lsn::channel(0);
        let (ring, _) = RecoveryLog::open(&cfg, Box::new(move |l| tx.advance(l))).unwrap();
        Ring {
            ring: Arc::new(ring),
            durable,
            _tmp: tmp,
        }
    }
}

impl Medium for Ring {
    async fn write(&mut self, group: &[Record]) -> u64 {
        let mut end = 0;
        for (kind, payload) in group {
            end = self.ring.append(*kind, payload).unwrap();
        }
        self.ring.wait_durable(end).unwrap();
        end
    }

    fn source(&self) -> Box<dyn StreamSource> {
        Box::new(RingSource::new(
            self.ring.clone(),
            self.durable.clone(),
            Arc::new(AtomicU64::new(u64::MAX)),
        ))
    }
}

struct Raft {
    log: LogStorage,
    applied: watch::Sender<Option<LogId>>,
    next: u64,
    _tmp: tempfile::TempDir,
}

impl Raft {
    async fn open() -> Raft {
        let tmp = tempfile::tempdir().unwrap();
        let (log, _) = LogStorage::open(&log_cfg(tmp.path())).unwrap();
        let mut raft = Raft {
            log,
            applied: watch::channel(None).0,
            next: 0,
            _tmp: tmp,
        };
        // A group's log starts with its membership, which carries no engine records.
        raft.append(EntryPayload::Blank).await;
        raft
    }

    async fn append(&mut self, payload: EntryPayload<ferrymq_replication::TypeConfig>) -> u64 {
        let id = LogId::new(CommittedLeaderId::new(1, 1), self.next);
        self.next += 1;
        self.log
            .blocking_append([Entry {
                log_id: id,
                payload,
            }])
            .await
            .unwrap();
        self.applied.send_replace(Some(id));
        id.index
    }
}

impl Medium for Raft {
    async fn write(&mut self, group: &[Record]) -> u64 {
        if self.next.is_multiple_of(5) {
            // Now and then an entry of another kind (a group control record): no records.
            self.append(EntryPayload::Normal(AppRecord {
                kind: KIND_ENGINE_BATCH + 1,
                payload: b"PREFER QM1".to_vec(),
            }))
            .await;
        }
        let mut batch = BytesMut::new();
        for (kind, payload) in group {
            push_record(&mut batch, *kind, &[payload]);
        }
        self.append(EntryPayload::Normal(AppRecord {
            kind: KIND_ENGINE_BATCH,
            payload: batch.to_vec(),
        }))
        .await
    }

    fn source(&self) -> Box<dyn StreamSource> {
        Box::new(RaftSource::new(self.log.clone(), self.applied.subscribe()))
    }
}

/// Groups of one to four records of up to 40 KB, and now and then one of 300 KB: about 3 MiB,
/// several chunks.
fn groups() -> Vec<Vec<Record>> {
    (0..48u32)
        .map(|g| {
            if g % 9 == 4 {
                return vec![(3, Bytes::from(vec![g as u8; 300_000]))];
            }
            (0..g % 4 + 1)
                .map(|r| {
                    let len = (g * 7919 + r * 104_729) as usize % 40_000;
                    let kind = (g + r) % 9 + 1;
                    (kind as u8, Bytes::from(vec![(g * 4 + r) as u8; len]))
                })
                .collect()
        })
        .collect()
}

fn framed_bytes(group: &[Record]) -> usize {
    group.iter().map(|(_, p)| RECORD_HEAD_BYTES + p.len()).sum()
}

/// Reads from `from` until the stream reaches `end`: every chunk's end position and records.
async fn read_to(src: &mut dyn StreamSource, from: u64, end: u64) -> Vec<(u64, Vec<Record>)> {
    let mut out = Vec::new();
    let mut pos = from;
    while pos < end {
        let (at, records) = tokio::time::timeout(Duration::from_secs(30), src.next(pos))
            .await
            .unwrap_or_else(|_| panic!("no chunk after {pos} although the stream ends at {end}"))
            .unwrap();
        assert!(at > pos, "a chunk after {pos} ends at {at}");
        out.push((at, split(&records).unwrap()));
        pos = at;
    }
    assert_eq!(pos, end, "the stream went past its end");
    out
}

fn records_of(chunks: &[(u64, Vec<Record>)]) -> Vec<Record> {
    chunks.iter().flat_map(|(_, r)| r.iter().cloned()).collect()
}

async fn holds_the_contract(mut m: impl Medium) {
    let groups = groups();
    let (last, written) = groups.split_last().unwrap();
    let mut ends = Vec::new();
    for g in written {
        ends.push(m.write(g).await);
    }
    let mut src = m.source();
    let end = src.end();
    assert_eq!(
        end,
        *ends.last().unwrap(),
        "the durable end is the last write's"
    );

    // From the start: every record, in order, in chunks of about CHUNK_BYTES.
    let start = src.start();
    let chunks = read_to(&mut *src, start, end).await;
    let all: Vec<Record> = written.iter().flatten().cloned().collect();
    assert_eq!(records_of(&chunks), all);
    let over = groups.iter().map(|g| framed_bytes(g)).max().unwrap();
    for (at, records) in &chunks {
        let bytes = framed_bytes(records);
        assert!(
            bytes <= CHUNK_BYTES + over,
            "the chunk ending at {at} holds {bytes} bytes, more than a write beyond {CHUNK_BYTES}"
        );
    }
    assert!(chunks.len() >= 3, "{} chunks for 3 MiB", chunks.len());

    // From any position the stream reached: exactly what follows it.
    let mut resume: Vec<(u64, usize)> = [0, 5, 17, 30, ends.len() - 2]
        .into_iter()
        .map(|k| (ends[k], written[..=k].iter().flatten().count()))
        .collect();
    let mut seen = 0;
    for (at, records) in &chunks[..chunks.len() - 1] {
        seen += records.len();
        resume.push((*at, seen));
    }
    for (from, before) in resume {
        let suffix = read_to(&mut *src, from, end).await;
        assert_eq!(records_of(&suffix), all[before..], "resuming after {from}");
    }

    // Past the end it waits, and returns once more is durable.
    let (last_end, (at, records)) = {
        let next = src.next(end);
        tokio::pin!(next);
        tokio::select! {
            r = &mut next => panic!("a chunk past the end before anything was written: {:?}", r.map(|c| c.0)),
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
        let last_end = m.write(last).await;
        let chunk = tokio::time::timeout(Duration::from_secs(30), next)
            .await
            .expect("what was written while waiting arrives")
            .unwrap();
        (last_end, chunk)
    };
    assert!(at > end && at <= last_end, "{end} < {at} <= {last_end}");
    let mut more = split(&records).unwrap();
    more.extend(records_of(&read_to(&mut *src, at, last_end).await));
    assert_eq!(&more, last);
    assert_eq!(src.end(), last_end);
}

#[tokio::test]
async fn the_ring_holds_the_contract() {
    holds_the_contract(Ring::open()).await;
}

#[tokio::test]
async fn the_raft_log_holds_the_contract() {
    holds_the_contract(Raft::open().await).await;
}
