//! The synchronous wrapper, used from plain threads.

mod support;

use bytes::Bytes;
use ferrymq_client::{blocking, open, GetOptions, PutOptions, Reason};
use ferrymq_proto::kind;
use ferrymq_types::{MessageDescriptor, Properties};
use support::{Config, FakeServer};

#[test]
fn the_blocking_client_works_from_std_threads() {
    // The fake server runs on a runtime of its own; the client uses the library's shared one.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeServer::start(Config::default()));
    let opts = server.client_options();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let c = blocking::Connection::connect(opts).unwrap();
        assert_eq!(c.qmgr_name(), "QM1");
        let q = c.open("Q1", open::OUTPUT | open::INPUT_SHARED).unwrap();
        let (md, props) = (MessageDescriptor::default(), Properties::default());
        c.put(
            &q,
            &md,
            &props,
            Bytes::from_static(b"one"),
            &PutOptions::default(),
        )
        .unwrap();
        c.put_commit(&q, &md, &props, Bytes::from_static(b"two"))
            .unwrap();
        // A second thread with a shared conversation.
        let other = c.share().unwrap();
        let t = std::thread::spawn(move || {
            let q = other.open("Q1", open::INPUT_SHARED).unwrap();
            let m = other.get(&q, &GetOptions::any()).unwrap();
            other.disconnect().unwrap();
            m.body
        });
        assert_eq!(t.join().unwrap(), Bytes::from_static(b"one"));
        assert_eq!(
            c.get(&q, &GetOptions::any()).unwrap().body,
            Bytes::from_static(b"two")
        );
        assert_eq!(
            c.get(&q, &GetOptions::any()).unwrap_err().reason,
            Reason::NO_MSG_AVAILABLE
        );
        c.commit().unwrap();
        assert_eq!(c.admin("PING").unwrap(), "OK PING");
        c.disconnect().unwrap();
        done_tx.send(()).unwrap();
    });
    // Bounded: a hang fails the test instead of stalling the suite.
    let finished = done_rx.recv_timeout(support::TEST_TIMEOUT);
    worker.join().expect("blocking client thread panicked");
    finished.expect("blocking client did not finish in time");
    drop(server);
}

#[test]
fn the_blocking_consumer_works_from_a_std_thread() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeServer::start(Config::default()));
    for body in [&b"one"[..], b"two", b"three"] {
        server.enqueue("Q1", body);
    }
    let opts = server.client_options();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let c = blocking::Connection::connect(opts).unwrap();
        let q = c.open("Q1", open::INPUT_SHARED).unwrap();
        let mut k = c.consume(&q, &GetOptions::any(), 2).unwrap();
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(k.next().unwrap().body);
        }
        assert_eq!(got, [&b"one"[..], b"two", b"three"]);
        let e = k
            .next_timeout(std::time::Duration::from_millis(50))
            .unwrap_err();
        assert_eq!(e.reason, Reason::NO_MSG_AVAILABLE);
        k.cancel().unwrap();
        c.disconnect().unwrap();
        done_tx.send(()).unwrap();
    });
    let finished = done_rx.recv_timeout(support::TEST_TIMEOUT);
    worker.join().expect("blocking consumer thread panicked");
    finished.expect("blocking consumer did not finish in time");
    assert_eq!(server.count(kind::CANCEL_CONSUMER), 1);
    drop(server);
}
