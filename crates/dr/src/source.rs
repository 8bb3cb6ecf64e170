//! What a DR primary ships: one trait, [`StreamSource`], over the two logs a queue manager's
//! records are durable in. The shipper asks where the stream can resume from and where it ends,
//! keeps the log from releasing what the secondary still lacks, and reads chunk after chunk;
//! which log it reads is the source's business.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ferrymq_engine::batch::{push_record, RECORD_HEAD_BYTES};
use ferrymq_log::lsn::LsnWatch;
use ferrymq_log::RecoveryLog;
use ferrymq_replication::openraft::{EntryPayload, RaftLogReader};
use ferrymq_replication::{Entry, LogId, LogStorage, KIND_ENGINE_BATCH};
use tokio::sync::watch;

use crate::wire::CHUNK_BYTES;

/// A chunk of the stream: the position it ends at, and its engine records, framed by
/// `ferrymq_engine::batch` (`kind | len | payload`).
pub type Chunk = (u64, Bytes);

/// The future of [`StreamSource::next`].
pub type NextChunk<'a> = Pin<Box<dyn Future<Output = Result<Chunk, String>> + Send + 'a>>;

/// What a source's positions count, so that a distance between two of them can be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes of log: positions are LSNs.
    Bytes,
    /// Raft entries: positions are Raft indexes.
    Entries,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Entries => "entries",
        }
    }
}

/// The log a DR primary ships from. Positions are the source's own (see [`Unit`]); each one the
/// stream reaches is a point it can resume from.
///
/// The contract (`tests/contract.rs` holds both sources to it): from [`start`](Self::start),
/// `next` yields every engine record the log holds, once and in order, in chunks whose end
/// positions increase strictly, the last one being [`end`](Self::end); from any position a chunk
/// ended at it yields exactly the records after it; past the end it waits until more is durable;
/// a chunk holds about [`CHUNK_BYTES`] at most (it goes over by no more than one log record or
/// Raft entry).
pub trait StreamSource: Send {
    /// What positions count.
    fn unit(&self) -> Unit;

    /// The oldest position the log can still resume from.
    fn start(&self) -> u64;

    /// The durable (committed) end of the stream.
    fn end(&self) -> u64;

    /// Keeps the log from releasing anything after `pos` (within the log's own limits).
    fn retain(&self, pos: u64);

    /// The next chunk after `after`, waiting until there is one. Dropping the future before it
    /// is ready loses nothing: the same call later reads the same chunk.
    fn next(&mut self, after: u64) -> NextChunk<'_>;
}

/// A standalone queue manager's ring: positions are LSNs.
pub struct RingSource {
    ring: Arc<RecoveryLog>,
    /// The ring's own durable LSN (not what a lag gate releases).
    durable: LsnWatch,
    /// Where the ring's checkpoints must not release past (`u64::MAX`: anywhere).
    retain: Arc<AtomicU64>,
}

impl RingSource {
    pub fn new(ring: Arc<RecoveryLog>, durable: LsnWatch, retain: Arc<AtomicU64>) -> RingSource {
        RingSource {
            ring,
            durable,
            retain,
        }
    }

    async fn read(&self, after: u64) -> Result<Chunk, String> {
        if self.ring.durable_lsn() <= after {
            self.durable
                .wait(after + 1)
                .await
                .map_err(|_| "the log was closed".to_string())?;
        }
        let recs = match self.ring.read_cached(after, CHUNK_BYTES) {
            Some(r) => r,
            None => {
                let ring = self.ring.clone();
                tokio::task::spawn_blocking(move || ring.read_from(after, CHUNK_BYTES))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?
            }
        };
        let size = recs
            .iter()
            .map(|r| RECORD_HEAD_BYTES + r.payload.len())
            .sum();
        let mut out = BytesMut::with_capacity(size);
        let mut end = after;
        for r in recs {
            push_record(&mut out, r.kind, &[&r.payload]);
            end = r.end_lsn();
        }
        Ok((end, out.freeze()))
    }
}

impl StreamSource for RingSource {
    fn unit(&self) -> Unit {
        Unit::Bytes
    }

    fn start(&self) -> u64 {
        self.ring.checkpoint_lsn()
    }

    fn end(&self) -> u64 {
        // The ring itself, not the watch: after a restart the watch starts at 0 until the first
        // new write, and the secondary's position must not look beyond the end.
        self.ring.durable_lsn()
    }

    fn retain(&self, pos: u64) {
        self.retain.store(pos, Ordering::Release);
    }

    fn next(&mut self, after: u64) -> NextChunk<'_> {
        Box::pin(self.read(after))
    }
}

/// Entries read from the Raft log at once.
const RAFT_ENTRIES_PER_CHUNK: u64 = 256;

/// An HA group's committed Raft entries: positions are Raft indexes. Only entries holding an
/// engine batch ([`KIND_ENGINE_BATCH`]) carry records; the others move the position only.
pub struct RaftSource {
    log: LogStorage,
    /// The index the group has applied (committed and applied to this instance's engine).
    applied: watch::Receiver<Option<LogId>>,
}

impl RaftSource {
    pub fn new(log: LogStorage, applied: watch::Receiver<Option<LogId>>) -> RaftSource {
        RaftSource { log, applied }
    }

    async fn read(&mut self, after: u64) -> Result<Chunk, String> {
        let top = loop {
            let a = self.applied.borrow_and_update().map_or(0, |l| l.index);
            if a > after {
                break a;
            }
            self.applied
                .changed()
                .await
                .map_err(|_| "the replica stopped".to_string())?;
        };
        let hi = top.min(after + RAFT_ENTRIES_PER_CHUNK);
        let entries = self
            .log
            .try_get_log_entries(after + 1..=hi)
            .await
            .map_err(|e| e.to_string())?;
        if entries.first().map(|e| e.log_id.index) != Some(after + 1) {
            return Err(format!(
                "the Raft log no longer holds the entries after {after}"
            ));
        }
        // The engine batches of the entries, up to about a chunk (at least one entry).
        fn batch(e: &Entry) -> Option<&[u8]> {
            match &e.payload {
                EntryPayload::Normal(rec) if rec.kind == KIND_ENGINE_BATCH => Some(&rec.payload),
                _ => None,
            }
        }
        let mut take = 0;
        let mut size = 0;
        for e in &entries {
            size += batch(e).map_or(0, |p| p.len());
            take += 1;
            if size >= CHUNK_BYTES {
                break;
            }
        }
        let mut out = BytesMut::with_capacity(size);
        for e in &entries[..take] {
            if let Some(p) = batch(e) {
                out.extend_from_slice(p);
            }
        }
        Ok((entries[take - 1].log_id.index, out.freeze()))
    }
}

impl StreamSource for RaftSource {
    fn unit(&self) -> Unit {
        Unit::Entries
    }

    fn start(&self) -> u64 {
        self.log.last_purged().map_or(0, |l| l.index)
    }

    fn end(&self) -> u64 {
        self.applied.borrow().map_or(0, |l| l.index)
    }

    fn retain(&self, pos: u64) {
        self.log.retain_from(pos);
    }

    fn next(&mut self, after: u64) -> NextChunk<'_> {
        Box::pin(self.read(after))
    }
}
