//! Message-channel helpers shared by the channel tests: the receiving and sending halves of a
//! SDR/RCVR pair QM1 → QM2 (channel QM1.TO.QM2, transmission queue QM2, remote queue ORDERS for
//! ORDERS.IN on QM2), a persistent put and a waiting get.

use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{open, GetOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};

use super::{mqsc, Home};

/// How long a get waits for a message to cross the channel.
pub const ARRIVAL_WAIT: Duration = Duration::from_secs(30);

/// On QM2: the queue ORDERS.IN and the RCVR channel QM1.TO.QM2 with the attributes `rcvr`.
pub fn define_receiver(home: &Home, rcvr: &str) {
    mqsc(
        home,
        "QM2",
        &format!("DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR) {rcvr}\n"),
    );
}

/// On QM1: the transmission queue QM2, the remote queue ORDERS and the SDR channel QM1.TO.QM2
/// to `port` with the attributes `sdr`, started.
pub fn define_sender(home: &Home, port: u16, sdr: &str) {
    mqsc(
        home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1({port})') XMITQ(QM2) SHORTTMR(1) {sdr}\n\
             START CHANNEL(QM1.TO.QM2)\n"
        ),
    );
}

/// Puts `body` persistently to `q` and commits.
pub fn put_to(c: &Connection, q: &str, body: &[u8]) {
    let h = c.open(q, open::OUTPUT).expect("open the remote queue");
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    c.put_commit(&h, &md, &Properties::default(), Bytes::from(body.to_vec()))
        .expect("put");
    c.close(&h, 0).unwrap();
}

/// The body of the next message on `q`, waiting up to [`ARRIVAL_WAIT`] for it.
pub fn get_wait(c: &Connection, q: &str) -> Vec<u8> {
    let h = c.open(q, open::INPUT_SHARED).expect("open for input");
    let m = c
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(ARRIVAL_WAIT.as_millis() as u64),
                ..GetOptions::any()
            },
        )
        .unwrap_or_else(|e| panic!("no message arrived on {q} within {ARRIVAL_WAIT:?}: {e}"));
    c.close(&h, 0).unwrap();
    m.body.to_vec()
}

/// CURDEPTH of local queue `q` on `qm`, by runmqsc.
pub fn depth(home: &Home, qm: &str, q: &str) -> u64 {
    let text = mqsc(home, qm, &format!("DISPLAY QLOCAL({q}) CURDEPTH\n"));
    let at = text.find("CURDEPTH(").expect("CURDEPTH shown") + "CURDEPTH(".len();
    text[at..]
        .split(')')
        .next()
        .and_then(|d| d.trim().parse().ok())
        .unwrap_or_else(|| panic!("CURDEPTH in {text}"))
}

/// Gets every message on `q` (no wait), in order; their bodies.
pub fn drain(c: &Connection, q: &str) -> Vec<Vec<u8>> {
    let h = c.open(q, open::INPUT_EXCLUSIVE).unwrap();
    let mut got = Vec::new();
    while let Ok(m) = c.get(&h, &GetOptions::any()) {
        got.push(m.body.to_vec());
    }
    c.close(&h, 0).unwrap();
    got
}

/// Polls until `q` on `qm` holds at least `n` messages (bounded: 60 s).
pub fn wait_depth(home: &Home, qm: &str, q: &str, n: u64) {
    let t = std::time::Instant::now();
    loop {
        let d = depth(home, qm, q);
        if d >= n {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{qm}: {q} has {d} messages, not {n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
