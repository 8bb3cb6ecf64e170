//! The Raft log storage on the recovery log, and the snapshot-persisting state machine:
//! openraft's own storage test suite, then what must survive a reopen.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::Recorder;
use ferrymq_log::{Durability, LogConfig};
use ferrymq_replication::openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use ferrymq_replication::openraft::testing::{StoreBuilder, Suite};
use ferrymq_replication::openraft::{
    CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder, StorageError,
};
use ferrymq_replication::{
    AppRecord, Entry, LogId, LogStorage, NodeId, StateMachine, TypeConfig, Vote,
};

fn log_cfg(dir: &Path, pages: u32) -> LogConfig {
    LogConfig {
        dir: dir.join("log"),
        primary_files: 2,
        file_pages: pages,
        durability: Durability::Fsync,
        direct_writes: true,
    }
}

fn open(dir: &Path) -> LogStorage {
    LogStorage::open(&log_cfg(dir, 16)).unwrap().0
}

fn id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64, size: usize) -> Entry {
    Entry {
        log_id: id(term, index),
        payload: EntryPayload::Normal(AppRecord {
            kind: 3,
            payload: vec![index as u8; size],
        }),
    }
}

async fn all(s: &mut LogStorage) -> Vec<Entry> {
    s.try_get_log_entries(..).await.unwrap()
}

struct Builder;

impl StoreBuilder<TypeConfig, LogStorage, StateMachine, tempfile::TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStorage, StateMachine), StorageError<NodeId>> {
        let tmp = tempfile::tempdir().unwrap();
        let log = open(tmp.path());
        let sm = StateMachine::open(tmp.path(), Arc::new(Recorder::default())).unwrap();
        Ok((tmp, log, sm))
    }
}

#[test]
fn passes_openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}

#[tokio::test]
async fn entries_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = open(tmp.path());
    let written: Vec<Entry> = (0..20).map(|i| entry(1, i, 100)).collect();
    s.blocking_append(written.clone()).await.unwrap();
    assert_eq!(all(&mut s).await, written);
    s.close().unwrap();

    let (mut s, rec) = LogStorage::open(&log_cfg(tmp.path(), 16)).unwrap();
    assert_eq!(rec.entries, 20);
    assert_eq!(all(&mut s).await, written);
    let state = s.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(id(1, 19)));
    assert_eq!(state.last_purged_log_id, None);
    assert_eq!(
        s.try_get_log_entries(5..8).await.unwrap(),
        written[5..8].to_vec()
    );
}

#[tokio::test]
async fn a_truncate_marker_drops_later_entries_after_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = open(tmp.path());
    s.blocking_append((0..10).map(|i| entry(1, i, 10)))
        .await
        .unwrap();
    // A new leader's log conflicts from index 6: truncate, then append its entries.
    s.truncate(id(1, 6)).await.unwrap();
    s.blocking_append((6..8).map(|i| entry(2, i, 10)))
        .await
        .unwrap();
    s.close().unwrap();

    let mut s = open(tmp.path());
    let got: Vec<LogId> = all(&mut s).await.iter().map(|e| e.log_id).collect();
    let want: Vec<LogId> = (0..6)
        .map(|i| id(1, i))
        .chain((6..8).map(|i| id(2, i)))
        .collect();
    assert_eq!(got, want);

    // A truncation with nothing appended after it holds too.
    s.truncate(id(1, 3)).await.unwrap();
    s.close().unwrap();
    let mut s = open(tmp.path());
    assert_eq!(s.entry_indexes(), vec![0, 1, 2]);
    assert_eq!(s.get_log_state().await.unwrap().last_log_id, Some(id(1, 2)));
}

#[tokio::test]
async fn votes_survive_reopen_and_the_latest_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = open(tmp.path());
    assert_eq!(s.read_vote().await.unwrap(), None);
    s.save_vote(&Vote::new(1, 2)).await.unwrap();
    s.save_vote(&Vote::new_committed(3, 1)).await.unwrap();
    s.save_committed(Some(id(3, 0))).await.unwrap();
    s.close().unwrap();

    let mut s = open(tmp.path());
    assert_eq!(
        s.read_vote().await.unwrap(),
        Some(Vote::new_committed(3, 1))
    );
    assert_eq!(s.read_committed().await.unwrap(), Some(id(3, 0)));
}

/// Appends `n` entries of 2000 bytes from index `from`; returns the next index.
async fn append_big(s: &mut LogStorage, from: u64, n: u64) -> u64 {
    s.blocking_append((from..from + n).map(|i| entry(1, i, 2000)))
        .await
        .unwrap();
    from + n
}

#[tokio::test]
async fn purge_moves_the_checkpoint_and_frees_ring_space() {
    let tmp = tempfile::tempdir().unwrap();
    // 2 × 16 pages = 128 KiB of ring; each entry below takes about 2 KiB.
    let mut s = open(tmp.path());
    s.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
    let mut next = append_big(&mut s, 0, 40).await;
    let used = s.used_bytes().unwrap();
    let ckpt = s.checkpoint_lsn().unwrap();
    assert!(used > 80_000, "{used} bytes used");

    s.purge(id(1, 29)).await.unwrap();
    assert!(
        s.checkpoint_lsn().unwrap() > ckpt,
        "checkpoint did not move"
    );
    assert!(s.used_bytes().unwrap() < used / 2, "purge freed no space");
    assert_eq!(s.entry_indexes(), (30..40).collect::<Vec<_>>());

    // Several laps of the ring: only possible because purges release space.
    for _ in 0..10 {
        next = append_big(&mut s, next, 30).await;
        let last = next - 1;
        s.purge(id(1, last - 5)).await.unwrap();
    }
    assert!(next * 2000 > 3 * 128 * 1024, "did not lap the ring");
    s.close().unwrap();

    let mut s = open(tmp.path());
    let state = s.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(id(1, next - 6)));
    assert_eq!(state.last_log_id, Some(id(1, next - 1)));
    assert_eq!(s.entry_indexes(), (next - 5..next).collect::<Vec<_>>());
    // The vote was written long before the checkpoint; purge re-logged it.
    assert_eq!(
        s.read_vote().await.unwrap(),
        Some(Vote::new_committed(1, 1))
    );

    // Purging everything leaves the purge point as the last log id.
    s.purge(id(1, next - 1)).await.unwrap();
    s.close().unwrap();
    let mut s = open(tmp.path());
    let state = s.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(id(1, next - 1)));
    assert!(s.entry_indexes().is_empty());
    append_big(&mut s, next, 1).await;
    assert_eq!(s.entry_indexes(), vec![next]);
}

#[tokio::test]
async fn a_built_snapshot_is_installed_again_on_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let app = Arc::new(Recorder::default());
    let mut sm = StateMachine::open(tmp.path(), app.clone()).unwrap();
    sm.apply((1..=5).map(|i| entry(1, i, 4))).await.unwrap();
    let snap = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snap.meta.last_log_id, Some(id(1, 5)));
    drop(sm);

    let again = Arc::new(Recorder::default());
    let mut sm = StateMachine::open(tmp.path(), again.clone()).unwrap();
    assert_eq!(again.payloads(), app.payloads());
    assert_eq!(sm.applied_state().await.unwrap().0, Some(id(1, 5)));
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snap.meta);
}
