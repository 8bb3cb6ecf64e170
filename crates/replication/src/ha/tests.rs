//! The batching and commit policy under a clock moved by hand.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use openraft::CommittedLeaderId;
use parking_lot::Mutex;

use super::*;
use crate::clock::ManualClock;
use crate::{AppRecord, LogId};

fn id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn proposals() -> (Arc<Proposals>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    (Proposals::new(clock.clone()), clock)
}

/// Logs one record of `len` bytes (the framing is the caller's: here, raw bytes).
fn log(p: &Proposals, len: usize) -> u64 {
    p.push(|b| b.extend(std::iter::repeat_n(7u8, len)))
}

/// Proposes every sealed batch; returns them (last record number, bytes).
async fn propose_all(p: &Proposals) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    p.seal();
    loop {
        let next = tokio::time::timeout(Duration::from_millis(20), p.next_batch()).await;
        match next {
            Ok((last, b)) => out.push((last, b.len())),
            Err(_) => return out,
        }
    }
}

/// Collects the events of a subscriber.
fn subscribe(p: &Proposals) -> Arc<Mutex<Vec<Committed>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    p.subscribe(Box::new(move |evs| s.lock().extend_from_slice(evs)));
    seen
}

#[tokio::test]
async fn out_of_order_commits_advance_the_durable_position_only_contiguously() {
    let (p, _) = proposals();
    let durable = p.durable_watch();
    let mut lasts = Vec::new();
    for _ in 0..3 {
        log(&p, 10);
        log(&p, 10);
        lasts.push(p.next_batch().await.0);
    }
    assert_eq!(lasts, vec![2, 4, 6]);
    p.committed(6, id(12));
    p.committed(4, id(11));
    assert_eq!(durable.get(), 0, "the first batch is not committed yet");
    p.committed(2, id(10));
    assert_eq!(
        durable.get(),
        6,
        "the whole run is durable once its gap closes"
    );
    assert_eq!(p.wait_log_id(4), Some(id(11)));
}

#[tokio::test]
async fn the_in_flight_limit_follows_commit_latency_within_its_bounds() {
    let (p, clock) = proposals();
    assert_eq!(
        p.adaptive_in_flight(),
        MIN_IN_FLIGHT,
        "no commit measured yet"
    );
    // Commits taking 20 ms: the moving average approaches 20 ms, so about 20 in flight.
    for _ in 0..80 {
        let seq = log(&p, 1);
        let (last, _) = p.next_batch().await;
        assert_eq!(last, seq);
        clock.advance(Duration::from_millis(20));
        p.committed(last, id(seq));
    }
    let limit = p.adaptive_in_flight();
    assert!((18..=20).contains(&limit), "20 ms commits gave {limit}");
    // A slow link: capped at the maximum.
    for _ in 0..80 {
        let seq = log(&p, 1);
        p.next_batch().await;
        clock.advance(Duration::from_secs(1));
        p.committed(seq, id(seq));
    }
    assert_eq!(p.adaptive_in_flight(), MAX_IN_FLIGHT);
    // Instant commits: back to the minimum.
    for _ in 0..80 {
        let seq = log(&p, 1);
        p.next_batch().await;
        p.committed(seq, id(seq));
    }
    assert_eq!(p.adaptive_in_flight(), MIN_IN_FLIGHT);
}

/// Asks `log_id_of(seq)` on a thread of its own: its answer, once it comes.
fn ask_log_id(p: &Arc<Proposals>, seq: u64) -> std::sync::mpsc::Receiver<Option<LogId>> {
    let p = p.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(p.log_id_of(seq));
    });
    rx
}

#[test]
fn a_lost_group_wakes_whoever_waits_for_a_log_id_with_none() {
    let (p, _) = proposals();
    let seq = log(&p, 5);
    let answer = ask_log_id(&p, seq);
    assert!(
        answer.recv_timeout(Duration::from_millis(50)).is_err(),
        "answered before the batch was committed or lost"
    );
    assert!(p.snapshot_waiting(), "a snapshot waits for the batch");
    p.set_lost();
    assert_eq!(answer.recv_timeout(Duration::from_secs(10)), Ok(None));
    assert!(p.is_lost());
    assert!(!p.snapshot_waiting());
}

#[test]
fn the_activation_point_is_answered_by_log_id_of_without_a_commit() {
    let (p, _) = proposals();
    assert!(!p.is_active());
    log(&p, 5);
    log(&p, 5);
    let seq = p.activate(id(40));
    assert_eq!(seq, 2);
    assert!(p.is_active());
    assert_eq!(
        ask_log_id(&p, seq).recv_timeout(Duration::from_secs(10)),
        Ok(Some(id(40)))
    );
    // The record logged next starts a new batch: the activation sealed the open one.
    log(&p, 5);
    assert_eq!(p.seal(), 3);
}

#[tokio::test]
async fn a_batch_is_sealed_at_batch_bytes_or_when_asked() {
    let (p, _) = proposals();
    let quarter = BATCH_BYTES / 4;
    for _ in 0..9 {
        log(&p, quarter);
    }
    // Four records fill a batch; two full ones, and one of the last record when sealed.
    assert_eq!(
        propose_all(&p).await,
        vec![(4, BATCH_BYTES), (8, BATCH_BYTES), (9, quarter)]
    );
    log(&p, 3);
    assert_eq!(p.seal(), 10);
    log(&p, 4);
    assert_eq!(propose_all(&p).await, vec![(10, 3), (11, 4)]);
}

#[tokio::test]
async fn commit_events_reach_subscribers_in_log_order_once_per_batch() {
    let (p, clock) = proposals();
    let seen = subscribe(&p);
    for len in [100, 200, 300] {
        log(&p, len);
        p.next_batch().await;
        clock.advance(Duration::from_millis(1));
    }
    p.committed(3, id(22));
    p.committed(1, id(20));
    p.committed(2, id(21));
    p.committed(2, id(21)); // a repeated answer changes nothing
    p.applied_elsewhere(23, 50);
    let ms = Duration::from_millis;
    assert_eq!(
        *seen.lock(),
        vec![
            Committed {
                index: 20,
                last_seq: 1,
                bytes: 100,
                latency: ms(3)
            },
            Committed {
                index: 21,
                last_seq: 2,
                bytes: 200,
                latency: ms(2)
            },
            Committed {
                index: 22,
                last_seq: 3,
                bytes: 300,
                latency: ms(1)
            },
            Committed {
                index: 23,
                last_seq: 0,
                bytes: 50,
                latency: ms(0)
            },
        ]
    );
}

#[tokio::test]
async fn without_a_subscriber_a_commit_leaves_no_event_behind() {
    let (p, _) = proposals();
    for _ in 0..3 {
        let seq = log(&p, 10);
        p.next_batch().await;
        p.committed(seq, id(seq));
        p.applied_elsewhere(100 + seq, 10);
    }
    assert_eq!(p.events_made.load(Ordering::Relaxed), 0);
    // A subscriber arriving later hears of what is committed after it, nothing before.
    let seen = subscribe(&p);
    let seq = log(&p, 10);
    p.next_batch().await;
    p.committed(seq, id(seq));
    let got: Vec<(u64, u64)> = seen.lock().iter().map(|c| (c.index, c.last_seq)).collect();
    assert_eq!(got, vec![(4, 4)]);
    assert_eq!(p.events_made.load(Ordering::Relaxed), 1);
}

#[test]
fn the_ring_stops_proposals_near_full_except_for_a_waiting_snapshot() {
    assert!(ring_admits(0, 0, false), "a ring of unknown size");
    assert!(ring_admits(84, 100, false));
    assert!(!ring_admits(85, 100, false));
    assert!(ring_admits(94, 100, true), "within the snapshot's headroom");
    assert!(!ring_admits(95, 100, true));
}

#[tokio::test]
async fn a_manual_clock_sleeper_wakes_only_when_the_clock_is_moved() {
    use crate::clock::Clock;
    let clock = Arc::new(ManualClock::new());
    let c2 = clock.clone();
    let t = tokio::spawn(async move { c2.sleep(Duration::from_millis(RING_RETRY_MS)).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!t.is_finished(), "slept through time that did not pass");
    clock.advance(Duration::from_millis(RING_RETRY_MS));
    tokio::time::timeout(Duration::from_secs(10), t)
        .await
        .expect("the sleeper did not wake")
        .unwrap();
}

#[test]
fn snapshots_are_requested_as_the_ring_fills_paced_by_the_clock_and_by_progress() {
    let clock = Arc::new(ManualClock::new());
    let mut pacer = SnapshotPacer::new(clock.clone());
    let (cap, ms) = (100, Duration::from_millis);
    assert!(
        !pacer.due(39, cap, Some(id(500)), None),
        "ring not full enough"
    );
    assert!(
        !pacer.due(0, 0, Some(id(500)), None),
        "a ring of unknown size"
    );
    assert!(pacer.due(40, cap, Some(id(500)), None), "the first request");
    // Not built yet: the next waits for the gap.
    assert!(!pacer.due(60, cap, Some(id(600)), None));
    clock.advance(ms(SNAPSHOT_GAP_MS));
    assert!(
        !pacer.due(60, cap, Some(id(600)), None),
        "the gap is not over"
    );
    clock.advance(ms(1));
    assert!(pacer.due(60, cap, Some(id(600)), None), "the gap is over");
    // Built, and entries applied after it: at once, without waiting for the gap...
    let built = Some(id(600));
    assert!(!pacer.due(70, cap, Some(id(600 + SNAPSHOT_AGAIN_ENTRIES - 1)), built));
    assert!(pacer.due(70, cap, Some(id(600 + SNAPSHOT_AGAIN_ENTRIES)), built));
    // ...but a full ring the newest snapshot already covers waits for its purge.
    assert!(!pacer.due(90, cap, Some(id(900)), built));
    clock.advance(ms(SNAPSHOT_GAP_MS + 1));
    assert!(pacer.due(90, cap, Some(id(900)), built));
}

/// A group whose ring usage the test sets and whose commits the test decides.
struct FakeGroup {
    usage: Mutex<(u64, u64)>,
    proposed: tokio::sync::mpsc::UnboundedSender<(AppRecord, tokio::sync::oneshot::Sender<LogId>)>,
}

impl Group for FakeGroup {
    fn ring_usage(&self) -> (u64, u64) {
        *self.usage.lock()
    }

    fn propose(
        &self,
        rec: AppRecord,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Commit>> + Send + '_>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = self.proposed.send((rec, tx));
        let commit: Commit = Box::pin(async move { rx.await.ok() });
        Box::pin(async move { Some(commit) })
    }
}

type Proposed =
    tokio::sync::mpsc::UnboundedReceiver<(AppRecord, tokio::sync::oneshot::Sender<LogId>)>;

/// Starts a replicator on a fake group with `max_in_flight` fixed and the ring `usage`.
fn replicator(
    max_in_flight: Option<usize>,
    usage: (u64, u64),
) -> (Arc<Proposals>, Arc<ManualClock>, Arc<FakeGroup>, Proposed) {
    let (p, clock) = proposals();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let group = Arc::new(FakeGroup {
        usage: Mutex::new(usage),
        proposed: tx,
    });
    tokio::spawn(replicate(Replicator {
        props: p.clone(),
        group: group.clone(),
        max_in_flight,
    }));
    (p, clock, group, rx)
}

/// The next proposal, if one comes within `wait`.
async fn proposal(
    rx: &mut Proposed,
    wait: Duration,
) -> Option<(AppRecord, tokio::sync::oneshot::Sender<LogId>)> {
    tokio::time::timeout(wait, rx.recv()).await.ok().flatten()
}

const NONE_WITHIN: Duration = Duration::from_millis(50);
const SOME_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_replicator_keeps_at_most_the_limit_in_flight_and_proposes_in_order() {
    let (p, _, _, mut rx) = replicator(Some(2), (0, 0));
    let durable = p.durable_watch();
    let mut commits = Vec::new();
    for n in 1..=2u8 {
        p.push(|b| b.push(n));
        let (rec, commit) = proposal(&mut rx, SOME_WITHIN).await.expect("proposed");
        assert_eq!((rec.kind, rec.payload), (crate::KIND_ENGINE_BATCH, vec![n]));
        commits.push(commit);
    }
    // Two in flight: the next batch gathers what is logged meanwhile.
    p.push(|b| b.push(3));
    p.push(|b| b.push(4));
    assert!(
        proposal(&mut rx, NONE_WITHIN).await.is_none(),
        "a third in flight"
    );
    commits.remove(0).send(id(1)).unwrap();
    let (rec, _) = proposal(&mut rx, SOME_WITHIN).await.expect("room again");
    assert_eq!(rec.payload, vec![3, 4]);
    tokio::time::timeout(SOME_WITHIN, durable.wait(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(durable.get(), 1, "the second batch is not committed");
}

// Two threads: the test blocks on the snapshot's answer while the commit is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ring_stops_proposals_except_the_batch_a_snapshot_waits_for() {
    let (p, clock, group, mut rx) = replicator(None, (90, 100));
    let seq = p.push(|b| b.push(1));
    for _ in 0..3 {
        clock.advance(Duration::from_millis(RING_RETRY_MS));
        assert!(
            proposal(&mut rx, NONE_WITHIN).await.is_none(),
            "proposed into a full ring"
        );
    }
    // A snapshot waits for this batch: it may use the headroom.
    let answer = ask_log_id(&p, seq);
    let mut got = None;
    for _ in 0..200 {
        clock.advance(Duration::from_millis(RING_RETRY_MS));
        got = proposal(&mut rx, NONE_WITHIN).await;
        if got.is_some() {
            break;
        }
    }
    let (_, commit) = got.expect("the snapshot's batch was not proposed");
    commit.send(id(7)).unwrap();
    assert_eq!(answer.recv_timeout(SOME_WITHIN), Ok(Some(id(7))));
    // Beyond the headroom nothing goes, snapshot or not, until the ring is freed.
    *group.usage.lock() = (96, 100);
    let seq = p.push(|b| b.push(2));
    let _answer = ask_log_id(&p, seq);
    for _ in 0..3 {
        clock.advance(Duration::from_millis(RING_RETRY_MS));
        assert!(
            proposal(&mut rx, NONE_WITHIN).await.is_none(),
            "proposed past the headroom"
        );
    }
    *group.usage.lock() = (10, 100);
    let mut got = None;
    for _ in 0..200 {
        clock.advance(Duration::from_millis(RING_RETRY_MS));
        got = proposal(&mut rx, NONE_WITHIN).await;
        if got.is_some() {
            break;
        }
    }
    assert_eq!(got.expect("a freed ring admits").0.payload, vec![2]);
}
