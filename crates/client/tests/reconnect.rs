//! Automatic reconnect (MQCNO_RECONNECT) across a connection name list of two fake queue
//! managers, the first of which dies.

mod support;

use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::{open, Connection, GetOptions, PutOptions, Reason, Syncpoint, Wait};
use ferrymq_proto::kind;
use ferrymq_types::{MessageDescriptor, Properties};
use support::{bounded, eventually, reconnecting_options, Config, FakeServer};

fn md() -> MessageDescriptor {
    MessageDescriptor::default()
}

fn none() -> Properties {
    Properties::default()
}

fn sync_put() -> PutOptions {
    PutOptions {
        syncpoint: Syncpoint::Yes,
        ..PutOptions::default()
    }
}

/// Two servers of the same queue manager; the second gives different object handles so that the
/// client's mapping is exercised.
async fn pair() -> (FakeServer, FakeServer) {
    let a = FakeServer::start(Config::default()).await;
    let b = FakeServer::start(Config {
        first_hobj: 100,
        ..Config::default()
    })
    .await;
    (a, b)
}

#[tokio::test]
async fn the_client_moves_to_the_next_address_keeps_its_handles_and_reports_the_lost_unit_of_work()
{
    bounded(async {
        let (a, b) = pair().await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_secs(5)))
            .await
            .unwrap();
        let other = c.share().await.unwrap();
        let q = c
            .open("Q1", open::OUTPUT | open::INPUT_SHARED | open::INQUIRE)
            .await
            .unwrap();
        let oq = other.open("Q2", open::OUTPUT).await.unwrap();
        assert_eq!(q.hobj, 1);
        c.put(&q, &md(), &none(), Bytes::from_static(b"lost"), &sync_put())
            .await
            .unwrap();

        a.kill().await;

        // A syncpoint call after the break belongs to the lost unit of work.
        let e = c
            .put(
                &q,
                &md(),
                &none(),
                Bytes::from_static(b"also lost"),
                &sync_put(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.reason, Reason::BACKED_OUT, "{e}");
        assert_eq!(c.reconnects(), 1);
        let e = c.commit().await.unwrap_err();
        assert_eq!(e.reason, Reason::BACKED_OUT, "{e}");
        assert!(
            e.message
                .contains("connection to the queue manager was lost"),
            "{e}"
        );

        // The flag is cleared: the same handle (hobj 1 here, 100 on the new server) works on.
        c.put(&q, &md(), &none(), Bytes::from_static(b"new"), &sync_put())
            .await
            .unwrap();
        c.commit().await.unwrap();
        assert_eq!(b.depth("Q1"), 1);
        assert_eq!(
            c.inquire(&q, &["CURDEPTH"]).await.unwrap(),
            vec![("CURDEPTH".to_string(), "1".to_string())]
        );
        assert_eq!(
            c.get(&q, &GetOptions::any()).await.unwrap().body,
            Bytes::from_static(b"new")
        );

        // The shared conversation reconnected too, onto the same new socket.
        other
            .put(
                &oq,
                &md(),
                &none(),
                Bytes::from_static(b"o"),
                &PutOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(other.reconnects(), 1);
        assert_eq!(b.depth("Q2"), 1);
        assert_eq!(b.sockets_accepted(), 1);
        assert_eq!(b.count(kind::CONNECT), 2);
    })
    .await
}

#[tokio::test]
async fn a_backout_after_the_break_succeeds_and_clears_the_lost_unit_of_work() {
    bounded(async {
        let (a, b) = pair().await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_secs(5)))
            .await
            .unwrap();
        let q = c.open("Q1", open::OUTPUT).await.unwrap();
        c.put(&q, &md(), &none(), Bytes::from_static(b"x"), &sync_put())
            .await
            .unwrap();
        a.kill().await;
        c.backout().await.unwrap();
        c.put_commit(&q, &md(), &none(), Bytes::from_static(b"y"))
            .await
            .unwrap();
        assert_eq!(b.depth("Q1"), 1);
        // No unit of work was open at the next break: nothing to report.
        c.put(
            &q,
            &md(),
            &none(),
            Bytes::from_static(b"z"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(
            b.count(kind::BACKOUT),
            0,
            "the lost unit of work needs no backout on the wire"
        );
    })
    .await
}

#[tokio::test]
async fn a_waiting_get_in_flight_at_the_break_is_reissued_on_the_new_socket() {
    bounded(async {
        let (a, b) = pair().await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_secs(5)))
            .await
            .unwrap();
        let q = c.open("Q1", open::INPUT_SHARED).await.unwrap();
        let waiting = tokio::spawn({
            let c = c.clone();
            async move {
                let opts = GetOptions {
                    wait: Wait::Ms(10_000),
                    ..GetOptions::any()
                };
                c.get(&q, &opts).await
            }
        });
        eventually("the get waits on the first server", || {
            a.count(kind::GET) == 1
        })
        .await;
        a.kill().await;
        eventually("the get was reissued on the second server", || {
            b.count(kind::GET) == 1
        })
        .await;
        b.enqueue("Q1", b"arrived");
        assert_eq!(
            waiting.await.unwrap().unwrap().body,
            Bytes::from_static(b"arrived")
        );
        assert_eq!(c.reconnects(), 1);
    })
    .await
}

#[tokio::test]
async fn another_call_in_flight_at_the_break_is_interrupted() {
    bounded(async {
        let (a, b) = pair().await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_secs(5)))
            .await
            .unwrap();
        let stalled = tokio::spawn({
            let c = c.clone();
            async move { c.admin("STALL").await }
        });
        eventually("the admin call reached the first server", || {
            a.count(kind::ADMIN) == 1
        })
        .await;
        a.kill().await;
        let e = stalled.await.unwrap().unwrap_err();
        assert_eq!(e.reason, Reason::CALL_INTERRUPTED, "{e}");
        assert_eq!(b.count(kind::ADMIN), 0, "not sent again");
        assert_eq!(c.admin("PING").await.unwrap(), "OK PING");
    })
    .await
}

#[tokio::test]
async fn when_no_address_answers_in_time_calls_fail_with_reconnect_failed() {
    bounded(async {
        let (a, b) = pair().await;
        let c = Connection::connect(reconnecting_options(&[&a, &b], Duration::from_millis(300)))
            .await
            .unwrap();
        c.admin("PING").await.unwrap();
        a.kill().await;
        b.kill().await;
        let t = std::time::Instant::now();
        let e = c.admin("PING").await.unwrap_err();
        assert_eq!(e.reason, Reason::RECONNECT_FAILED, "{e}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        // And for good: the conversation is gone.
        assert_eq!(
            c.admin("PING").await.unwrap_err().reason,
            Reason::RECONNECT_FAILED
        );
        assert_eq!(
            c.commit().await.unwrap_err().reason,
            Reason::RECONNECT_FAILED
        );
    })
    .await
}

#[tokio::test]
async fn a_reconnect_skips_addresses_of_another_queue_manager() {
    bounded(async {
        let (a, b) = pair().await;
        let stranger = FakeServer::start(Config {
            qmgr: "QM2".into(),
            ..Config::default()
        })
        .await;
        // No name in the options: the first queue manager reached (QM1) is the one to stay with.
        let mut o = reconnecting_options(&[&a, &stranger, &b], Duration::from_secs(5));
        o.qmgr = String::new();
        let c = Connection::connect(o).await.unwrap();
        assert_eq!(c.qmgr_name(), "QM1");
        let q = c.open("Q1", open::OUTPUT).await.unwrap();
        a.kill().await;
        c.put(
            &q,
            &md(),
            &none(),
            Bytes::from_static(b"x"),
            &PutOptions::default(),
        )
        .await
        .ok();
        c.put(
            &q,
            &md(),
            &none(),
            Bytes::from_static(b"y"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(stranger.count(kind::CONNECT), 0);
        assert!(b.depth("Q1") >= 1);
        assert_eq!(c.reconnects(), 1);
    })
    .await
}

/// An HA group's next active instance starts listening about a second after the old one dies;
/// a client must be back within a few tens of milliseconds of that, not at the next step of a
/// doubling back-off (the old schedule retried at 0.05, 0.15, 0.35, 0.75, 1.55, 3.15 s after the
/// break, so a server listening from 1.6 s was reached only at 3.15 s).
#[tokio::test]
async fn a_server_that_starts_listening_during_the_reconnect_is_reached_within_tens_of_ms() {
    bounded(async {
        let a = FakeServer::start(Config::default()).await;
        // A port nobody listens on yet: the "replica" that becomes active later.
        let later_port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut o = reconnecting_options(&[&a], Duration::from_secs(20));
        o.transport = ferrymq_client::Transport::Client {
            conn_names: ferrymq_client::parse_conn_name(&format!(
                "{}, 127.0.0.1({later_port})",
                a.conn_name()
            ))
            .unwrap(),
        };
        let c = Connection::connect(o).await.unwrap();
        let q = c.open("Q1", open::OUTPUT).await.unwrap();
        a.kill().await;
        let killed = std::time::Instant::now();
        let starter = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1600)).await;
            let b = FakeServer::start_on(Config::default(), later_port).await;
            (b, std::time::Instant::now())
        });
        // Written before the client saw the break, the put is interrupted (answered once the
        // client has reconnected); otherwise it waits for the reconnect and is sent there.
        let put = c
            .put(
                &q,
                &md(),
                &none(),
                Bytes::from_static(b"after"),
                &PutOptions::default(),
            )
            .await;
        let done = std::time::Instant::now();
        let (b, listening) = starter.await.unwrap();
        let after_listening = done.saturating_duration_since(listening);
        assert!(
            after_listening < Duration::from_millis(250),
            "the put completed {after_listening:?} after the server started listening \
             ({:?} after the break)",
            done - killed
        );
        assert_eq!(c.reconnects(), 1);
        match put {
            Ok(_) => assert_eq!(b.depth("Q1"), 1),
            Err(e) => assert_eq!(e.reason, Reason::CALL_INTERRUPTED, "{e}"),
        }
    })
    .await;
}
