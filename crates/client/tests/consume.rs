//! Asynchronous consume (MQCB) against the fake queue manager: flow control, pipelined
//! registration, server-side ends, cancel, timeouts, breaks and reconnects.

mod support;

use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::{
    open, Browse, Connection, Consumer, GetOptions, ObjectHandle, PutOptions, Reason, Syncpoint,
};
use ferrymq_proto::kind;
use ferrymq_types::{MessageDescriptor, Properties};
use support::{bounded, eventually, reconnecting_options, Config, FakeServer};

const SHORT: Duration = Duration::from_millis(100);

async fn connect(s: &FakeServer) -> Connection {
    Connection::connect(s.client_options()).await.unwrap()
}

async fn open_q(c: &Connection) -> ObjectHandle {
    c.open("Q1", open::OUTPUT | open::INPUT_SHARED)
        .await
        .unwrap()
}

async fn put(c: &Connection, q: &ObjectHandle, body: String) {
    c.put(
        q,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from(body),
        &PutOptions::default(),
    )
    .await
    .unwrap();
}

fn syncpoint() -> GetOptions {
    GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    }
}

async fn body(k: &mut Consumer) -> String {
    let m = k.next().await.unwrap();
    String::from_utf8(m.body.to_vec()).unwrap()
}

#[test]
fn a_consumer_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Consumer>();
    assert_send::<ferrymq_client::blocking::Consumer>();
}

#[tokio::test]
async fn messages_arrive_in_order_never_more_than_the_window_ahead_with_credit_batched() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        for i in 0..100 {
            put(&c, &q, format!("m{i}")).await;
        }
        let window = 10;
        let mut k = c.consume(&q, &GetOptions::any(), window).await.unwrap();
        // The queue manager reads ahead up to the window, and no further.
        eventually("the window was filled", || s.pushed() == 10).await;
        tokio::time::sleep(SHORT).await;
        assert_eq!(s.pushed(), 10);
        for taken in 1..=100u64 {
            assert_eq!(body(&mut k).await, format!("m{}", taken - 1));
            assert!(
                s.pushed() <= taken + u64::from(window),
                "{} pushed with {taken} taken",
                s.pushed()
            );
            assert!(s.granted() <= taken + u64::from(window));
        }
        assert_eq!(s.depth("Q1"), 0);
        // One credit with the registration, then one per half window taken.
        let credits = s.count(kind::CREDIT);
        assert!((2..=21).contains(&credits), "{credits} Credit frames");
        // Messages put while the consumer waits are pushed to it.
        let other = c.share().await.unwrap();
        let oq = other.open("Q1", open::OUTPUT).await.unwrap();
        for i in 0..3 {
            put(&other, &oq, format!("late{i}")).await;
        }
        for i in 0..3 {
            assert_eq!(body(&mut k).await, format!("late{i}"));
        }
        k.cancel().await.unwrap();
        assert_eq!(s.consumers(), 0);
    })
    .await
}

#[tokio::test]
async fn the_registration_and_the_first_credit_go_out_in_one_write() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let k = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        assert!(
            s.read_batches()
                .contains(&vec![kind::REGISTER_CONSUMER, kind::CREDIT]),
            "reads: {:?}",
            s.read_batches()
        );
        assert_eq!(s.granted(), 5);
        drop(k);
    })
    .await
}

#[tokio::test]
async fn a_refused_registration_is_reported_and_the_handle_stays_usable() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let browse = GetOptions {
            browse: Browse::First,
            ..GetOptions::any()
        };
        let e = c.consume(&q, &browse, 5).await.unwrap_err();
        assert_eq!(e.reason, Reason::OPTIONS_ERROR);
        assert_eq!(s.consumers(), 0);
        s.enqueue("Q1", b"after");
        let mut k = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        assert_eq!(body(&mut k).await, "after");
        // A handle that is not open is refused before anything is sent.
        let bogus = ObjectHandle {
            hobj: 999,
            name: "Q1".into(),
        };
        let e = c.consume(&bogus, &GetOptions::any(), 5).await.unwrap_err();
        assert_eq!(e.reason, Reason::HOBJ_ERROR);
        assert_eq!(s.count(kind::REGISTER_CONSUMER), 2);
    })
    .await
}

#[tokio::test]
async fn a_consumer_ended_by_the_queue_manager_reports_why() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let mut k = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        s.end_consumers(Reason::Q_DELETED);
        assert_eq!(k.next().await.unwrap_err().reason, Reason::Q_DELETED);
        // For good, without asking the queue manager again.
        assert_eq!(k.next().await.unwrap_err().reason, Reason::Q_DELETED);
        k.cancel().await.unwrap();
        assert_eq!(s.count(kind::CANCEL_CONSUMER), 0);
        assert_eq!(c.admin("PING").await.unwrap(), "OK PING");
    })
    .await
}

#[tokio::test]
async fn truncation_is_accepted_or_ends_the_consumer_as_options_say() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        s.enqueue("Q1", b"too long");
        let short = GetOptions {
            max_len: 3,
            ..GetOptions::any()
        };
        let mut k = c.consume(&q, &short, 5).await.unwrap();
        assert_eq!(
            k.next().await.unwrap_err().reason,
            Reason::TRUNCATED_MSG_FAILED
        );
        assert_eq!(s.depth("Q1"), 1, "the message stays on the queue");
        drop(k);
        let accept = GetOptions {
            accept_truncated: true,
            ..short
        };
        let mut k = c.consume(&q, &accept, 5).await.unwrap();
        let m = k.next().await.unwrap();
        assert!(m.truncated);
        assert_eq!((m.body.as_ref(), m.data_len), (&b"too"[..], 8));
        assert_eq!(s.depth("Q1"), 0);
    })
    .await
}

#[tokio::test]
async fn next_timeout_gives_up_with_no_msg_available_and_the_consumer_goes_on() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let mut k = c.consume(&q, &GetOptions::any(), 1).await.unwrap();
        let e = k.next_timeout(SHORT).await.unwrap_err();
        assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);
        s.enqueue("Q1", b"later");
        let m = k.next_timeout(Duration::from_secs(5)).await.unwrap();
        assert_eq!(m.body.as_ref(), b"later");
    })
    .await
}

#[tokio::test]
async fn a_syncpoint_consumer_reads_nothing_ahead_and_late_frames_are_discarded() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        for i in 0..5 {
            put(&c, &q, format!("m{i}")).await;
        }
        let mut k = c.consume(&q, &syncpoint(), 5).await.unwrap();
        assert_eq!(body(&mut k).await, "m0");
        // Under syncpoint nothing is read ahead: the next credit goes with the next `next`.
        assert_eq!(s.granted(), 1);
        assert_eq!(
            k.next_timeout(SHORT).await.map(|m| m.body).unwrap(),
            &b"m1"[..]
        );
        assert_eq!(s.granted(), 2);
        assert_eq!(s.pushed(), 2);
        k.cancel().await.unwrap();
        assert_eq!(s.count(kind::CANCEL_CONSUMER), 1);
        assert_eq!(s.consumers(), 0);
        // A delivery for the cancelled consumer after the cancel's answer: discarded.
        s.push_to_ended_consumers(b"late");
        assert_eq!(c.admin("PING").await.unwrap(), "OK PING");
        // The pushed messages were in the unit of work; the backout returns them.
        c.backout().await.unwrap();
        assert_eq!(s.depth("Q1"), 5);
        let mut k = c.consume(&q, &GetOptions::any(), 2).await.unwrap();
        for i in 0..5 {
            assert_eq!(body(&mut k).await, format!("m{i}"));
        }
        let e = k.next_timeout(SHORT).await.unwrap_err();
        assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);
    })
    .await
}

#[tokio::test]
async fn dropping_a_consumer_cancels_it_without_waiting() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let k = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        assert_eq!(s.consumers(), 1);
        drop(k);
        eventually("the consumer was cancelled", || {
            s.count(kind::CANCEL_CONSUMER) == 1 && s.consumers() == 0
        })
        .await;
        assert_eq!(c.admin("PING").await.unwrap(), "OK PING");
    })
    .await
}

#[tokio::test]
async fn a_later_consume_replaces_the_earlier_and_a_close_ends_it() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let mut first = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        let mut second = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        assert_eq!(first.next().await.unwrap_err().reason, Reason::HOBJ_ERROR);
        // The replaced consumer must not cancel its successor.
        drop(first);
        s.enqueue("Q1", b"for the second");
        assert_eq!(body(&mut second).await, "for the second");
        assert_eq!(s.count(kind::CANCEL_CONSUMER), 0);
        c.close(&q, 0).await.unwrap();
        assert_eq!(second.next().await.unwrap_err().reason, Reason::HOBJ_ERROR);
        drop(second);
        assert_eq!(c.admin("PING").await.unwrap(), "OK PING");
        assert_eq!(s.count(kind::CANCEL_CONSUMER), 0);
    })
    .await
}

#[tokio::test]
async fn syncpoint_deliveries_join_the_unit_of_work() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        s.enqueue("Q1", b"once");
        let mut k = c.consume(&q, &syncpoint(), 1).await.unwrap();
        assert_eq!(body(&mut k).await, "once");
        c.backout().await.unwrap();
        // Backed out to the queue, and delivered again.
        assert_eq!(body(&mut k).await, "once");
        c.commit().await.unwrap();
        k.cancel().await.unwrap();
        assert_eq!(s.depth("Q1"), 0);
    })
    .await
}

#[tokio::test]
async fn a_broken_connection_surfaces_from_next() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = open_q(&c).await;
        let mut k = c.consume(&q, &GetOptions::any(), 5).await.unwrap();
        s.kill().await;
        assert_eq!(
            k.next().await.unwrap_err().reason,
            Reason::CONNECTION_BROKEN
        );
        assert_eq!(
            k.next().await.unwrap_err().reason,
            Reason::CONNECTION_BROKEN
        );
        k.cancel().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_consumer_registers_again_after_a_reconnect() {
    bounded(async {
        let a = FakeServer::start(Config::default()).await;
        let b = FakeServer::start(Config {
            first_hobj: 100,
            ..Config::default()
        })
        .await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_secs(5)))
            .await
            .unwrap();
        let q = open_q(&c).await;
        a.enqueue("Q1", b"on a");
        let mut k = c.consume(&q, &GetOptions::any(), 4).await.unwrap();
        assert_eq!(body(&mut k).await, "on a");
        a.kill().await;
        b.enqueue("Q1", b"on b");
        assert_eq!(body(&mut k).await, "on b");
        assert_eq!(c.reconnects(), 1);
        assert_eq!(b.count(kind::REGISTER_CONSUMER), 1);
        assert_eq!(b.granted(), 4, "a fresh window");
        k.cancel().await.unwrap();
        assert_eq!(b.consumers(), 0);
    })
    .await
}

#[tokio::test]
async fn after_a_reconnect_that_lost_the_unit_of_work_next_reports_backed_out_until_it_ends() {
    bounded(async {
        let a = FakeServer::start(Config::default()).await;
        let b = FakeServer::start(Config::default()).await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_secs(5)))
            .await
            .unwrap();
        let q = open_q(&c).await;
        a.enqueue("Q1", b"on a");
        let mut k = c.consume(&q, &syncpoint(), 4).await.unwrap();
        assert_eq!(body(&mut k).await, "on a");
        a.kill().await;
        b.enqueue("Q1", b"on b");
        assert_eq!(k.next().await.unwrap_err().reason, Reason::BACKED_OUT);
        assert_eq!(b.pushed(), 0, "nothing joined the new unit of work");
        assert_eq!(c.commit().await.unwrap_err().reason, Reason::BACKED_OUT);
        assert_eq!(body(&mut k).await, "on b");
        c.commit().await.unwrap();
        assert_eq!(b.depth("Q1"), 0);
    })
    .await
}
