//! The client against a fake queue manager over real loopback sockets: handshake, verbs, limits,
//! pipelining, shared conversations, broken sockets and heartbeats.

mod support;

use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::{
    open, ConnectOptions, Connection, GetOptions, MqError, PutOptions, Reason, Syncpoint,
    Transport, Wait,
};
use ferrymq_proto::kind;
use ferrymq_types::{MessageDescriptor, Properties};
use support::{bounded, eventually, Config, FakeServer};

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

fn wait_get(ms: u64) -> GetOptions {
    GetOptions {
        wait: Wait::Ms(ms),
        ..GetOptions::any()
    }
}

async fn connect(s: &FakeServer) -> Connection {
    Connection::connect(s.client_options()).await.unwrap()
}

#[tokio::test]
async fn the_handshake_takes_the_servers_smaller_max_msg_len_and_names_the_qmgr() {
    bounded(async {
        let s = FakeServer::start(Config {
            max_msg_len: 1000,
            qmgr: "QMX".into(),
            ..Config::default()
        })
        .await;
        let c = connect(&s).await;
        assert_eq!(c.max_msg_len(), 1000);
        assert_eq!(c.qmgr_name(), "QMX");
        assert_eq!(s.count(kind::CONNECT), 1);
        c.disconnect().await.unwrap();
        eventually("disconnect reached the server", || {
            s.count(kind::DISCONNECT) == 1
        })
        .await;
    })
    .await
}

#[tokio::test]
async fn a_message_over_the_negotiated_maximum_is_refused_before_sending() {
    bounded(async {
        let s = FakeServer::start(Config {
            max_msg_len: 1000,
            ..Config::default()
        })
        .await;
        let c = connect(&s).await;
        let q = c.open("Q1", open::OUTPUT).await.unwrap();
        let e = c
            .put(
                &q,
                &md(),
                &none(),
                Bytes::from(vec![0u8; 1001]),
                &PutOptions::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.reason, Reason::MSG_TOO_BIG_FOR_CHANNEL, "{e}");
        assert!(e.message.contains("1000"), "{e}");
        let e = c
            .put1(
                "Q1",
                &md(),
                &none(),
                Bytes::from(vec![0u8; 5000]),
                &PutOptions::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.reason, Reason::MSG_TOO_BIG_FOR_CHANNEL);
        // Nothing reached the server, and the connection still works.
        assert_eq!(s.count(kind::PUT) + s.count(kind::PUT1), 0);
        c.put(
            &q,
            &md(),
            &none(),
            Bytes::from(vec![0u8; 1000]),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(s.depth("Q1"), 1);
    })
    .await
}

#[tokio::test]
async fn put_commit_reaches_the_server_as_two_frames_in_one_read() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = c
            .open("Q1", open::OUTPUT | open::INPUT_SHARED)
            .await
            .unwrap();
        let (msg_id, _) = c
            .put_commit(&q, &md(), &none(), Bytes::from_static(b"hello"))
            .await
            .unwrap();
        assert!(
            s.read_batches().contains(&vec![kind::PUT, kind::COMMIT]),
            "reads: {:?}",
            s.read_batches()
        );
        assert_eq!(s.depth("Q1"), 1, "committed");
        let m = c.get(&q, &GetOptions::any()).await.unwrap();
        assert_eq!((m.body.as_ref(), m.md.msg_id), (&b"hello"[..], msg_id));
    })
    .await
}

#[tokio::test]
async fn every_verb_round_trips() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = c
            .open("Q1", open::OUTPUT | open::INPUT_SHARED | open::INQUIRE)
            .await
            .unwrap();
        assert_eq!(q.name, "Q1");

        // Syncpoint puts are invisible until commit; backout drops them.
        c.put(&q, &md(), &none(), Bytes::from_static(b"a"), &sync_put())
            .await
            .unwrap();
        assert_eq!(s.depth("Q1"), 0);
        c.backout().await.unwrap();
        c.put(&q, &md(), &none(), Bytes::from_static(b"b"), &sync_put())
            .await
            .unwrap();
        c.commit().await.unwrap();
        assert_eq!(
            c.inquire(&q, &["CURDEPTH"]).await.unwrap(),
            vec![("CURDEPTH".to_string(), "1".to_string())]
        );
        c.put1(
            "Q1",
            &md(),
            &none(),
            Bytes::from_static(b"0123456789"),
            &PutOptions::default(),
        )
        .await
        .unwrap();

        assert_eq!(
            c.get(&q, &GetOptions::any()).await.unwrap().body,
            Bytes::from_static(b"b")
        );
        let small = GetOptions {
            max_len: 4,
            ..GetOptions::any()
        };
        assert_eq!(
            c.get(&q, &small).await.unwrap_err().reason,
            Reason::TRUNCATED_MSG_FAILED
        );
        let m = c
            .get(
                &q,
                &GetOptions {
                    accept_truncated: true,
                    ..small
                },
            )
            .await
            .unwrap();
        assert!(m.truncated);
        assert_eq!((m.body.as_ref(), m.data_len), (&b"0123"[..], 10));
        let e = c.get(&q, &GetOptions::any()).await.unwrap_err();
        assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);

        let d = c
            .open_dynamic("MODEL", "APP.*", open::INPUT_EXCLUSIVE)
            .await
            .unwrap();
        assert!(d.name.starts_with("APP.") && d.name.len() > 4, "{}", d.name);
        c.close(&d, ferrymq_client::close::DELETE).await.unwrap();
        assert_eq!(c.close(&d, 0).await.unwrap_err().reason, Reason::HOBJ_ERROR);
        assert_eq!(
            c.open("MISSING", open::OUTPUT).await.unwrap_err().reason,
            Reason::UNKNOWN_OBJECT_NAME
        );

        assert_eq!(c.admin("PING").await.unwrap(), "OK PING");
        assert_eq!(
            c.admin("FAIL").await.unwrap_err(),
            MqError::new(Reason::OBJECT_DAMAGED, "it failed")
        );

        let other = c.clone();
        c.disconnect().await.unwrap();
        assert_eq!(
            other.admin("PING").await.unwrap_err().reason,
            Reason::HCONN_ERROR
        );
    })
    .await
}

#[tokio::test]
async fn shared_conversations_use_one_socket_and_are_independent() {
    bounded(async {
        let s = FakeServer::start(Config {
            sharecnv: 2,
            ..Config::default()
        })
        .await;
        let a = connect(&s).await;
        let b = a.share().await.unwrap();
        assert_eq!(s.sockets_accepted(), 1);
        let convs: Vec<u16> = s
            .events()
            .iter()
            .filter(|e| e.kind == kind::CONNECT)
            .map(|e| e.conv)
            .collect();
        assert_eq!(convs, vec![1, 2]);

        let qa = a
            .open("Q1", open::OUTPUT | open::INPUT_SHARED)
            .await
            .unwrap();
        let qb = b
            .open("Q1", open::OUTPUT | open::INPUT_SHARED)
            .await
            .unwrap();
        // Handles are per conversation.
        assert_eq!(qa.hobj, qb.hobj);
        a.put(&qa, &md(), &none(), Bytes::from_static(b"a"), &sync_put())
            .await
            .unwrap();
        // B's backout and get do not see or touch A's unit of work.
        b.backout().await.unwrap();
        assert_eq!(
            b.get(&qb, &GetOptions::any()).await.unwrap_err().reason,
            Reason::NO_MSG_AVAILABLE
        );
        a.commit().await.unwrap();
        assert_eq!(
            b.get(&qb, &GetOptions::any()).await.unwrap().body,
            Bytes::from_static(b"a")
        );

        // Both calls outstanding at once on the one socket.
        let waiting = tokio::spawn({
            let b = b.clone();
            let qb = qb.clone();
            async move { b.get(&qb, &wait_get(5_000)).await }
        });
        eventually("the waiting get reached the server", || {
            s.count(kind::GET) == 3
        })
        .await;
        a.put(
            &qa,
            &md(),
            &none(),
            Bytes::from_static(b"x"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(
            waiting.await.unwrap().unwrap().body,
            Bytes::from_static(b"x")
        );

        // SHARECNV 2 is used up: a third conversation gets a socket of its own.
        let c3 = b.share().await.unwrap();
        assert_eq!(s.sockets_accepted(), 2);
        c3.admin("PING").await.unwrap();
        a.disconnect().await.unwrap();
        b.admin("PING").await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_dropped_socket_fails_the_outstanding_call_with_connection_broken() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        let q = c.open("Q1", open::INPUT_SHARED).await.unwrap();
        let waiting = tokio::spawn({
            let c = c.clone();
            async move { c.get(&q, &wait_get(10_000)).await }
        });
        eventually("the get is waiting", || s.count(kind::GET) == 1).await;
        s.kill().await;
        let e = waiting.await.unwrap().unwrap_err();
        assert_eq!(e.reason, Reason::CONNECTION_BROKEN, "{e}");
        assert_eq!(
            c.admin("PING").await.unwrap_err().reason,
            Reason::CONNECTION_BROKEN
        );
        assert_eq!(c.reconnects(), 0);
    })
    .await
}

#[tokio::test]
async fn a_heartbeat_from_the_server_is_answered() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        s.push_heartbeat();
        eventually("the client acknowledged the heartbeat", || {
            s.acks_from_client() == 1
        })
        .await;
        c.admin("PING").await.unwrap();
    })
    .await
}

#[tokio::test]
async fn client_heartbeats_keep_an_idle_connection_and_detect_a_silent_server() {
    bounded(async {
        // Answered heartbeats: a get waiting longer than several intervals is undisturbed.
        let s = FakeServer::start(Config {
            heartbeat_ms: 150,
            ..Config::default()
        })
        .await;
        let c = connect(&s).await;
        assert_eq!(c.heartbeat_ms(), 150);
        let q = c.open("Q1", open::INPUT_SHARED).await.unwrap();
        let e = c.get(&q, &wait_get(800)).await.unwrap_err();
        assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);
        assert!(s.client_heartbeats() >= 2, "{}", s.client_heartbeats());

        // A server that stops answering (but keeps the socket open) is declared gone.
        let s = FakeServer::start(Config {
            heartbeat_ms: 150,
            answer_heartbeats: false,
            ..Config::default()
        })
        .await;
        let c = connect(&s).await;
        let q = c.open("Q1", open::INPUT_SHARED).await.unwrap();
        let t = std::time::Instant::now();
        let e = c.get(&q, &wait_get(10_000)).await.unwrap_err();
        assert_eq!(e.reason, Reason::CONNECTION_BROKEN, "{e}");
        assert!(e.message.contains("heartbeat"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    })
    .await
}

#[tokio::test]
async fn bindings_mode_connects_through_the_queue_managers_unix_socket() {
    bounded(async {
        let home = tempfile::tempdir().unwrap();
        let s = FakeServer::start_unix(Config::default(), home.path()).await;
        let mut o = ConnectOptions::bindings("QM1");
        o.transport = Transport::Bindings {
            home: Some(home.path().to_path_buf()),
        };
        let c = Connection::connect(o.clone()).await.unwrap();
        let q = c.open("Q1", open::OUTPUT).await.unwrap();
        c.put(
            &q,
            &md(),
            &none(),
            Bytes::from_static(b"local"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(s.depth("Q1"), 1);

        o.qmgr = "QM2".into();
        let e = Connection::connect(o).await.unwrap_err();
        assert_eq!(e.reason, Reason::Q_MGR_NOT_AVAILABLE, "{e}");
    })
    .await
}

#[tokio::test]
async fn connect_failures_name_their_cause() {
    bounded(async {
        let s = FakeServer::start(Config::default()).await;
        let mut o = s.client_options();
        o.qmgr = "OTHER".into();
        let e = Connection::connect(o).await.unwrap_err();
        assert_eq!(e.reason, Reason::Q_MGR_NAME_ERROR, "{e}");

        let port = s.port;
        s.kill().await;
        let o = ConnectOptions::client("QM1", &format!("127.0.0.1({port})")).unwrap();
        let e = Connection::connect(o).await.unwrap_err();
        assert_eq!(e.reason, Reason::HOST_NOT_AVAILABLE, "{e}");
        assert!(e.message.contains(&port.to_string()), "{e}");
    })
    .await
}

#[test]
fn connections_and_their_futures_can_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = FakeServer::start(Config::default()).await;
        let c = connect(&s).await;
        send_sync(&c);
        let h = c.open("Q1", open::OUTPUT).await.unwrap();
        send(c.get(&h, &GetOptions::any()));
        send(c.put_commit(&h, &md(), &none(), Bytes::new()));
        send(c.share());
        send(c.clone().disconnect());
    });
}
