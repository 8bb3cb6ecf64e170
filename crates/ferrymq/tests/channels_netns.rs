//! A message channel across a cut network link. The receiving queue manager runs in its own
//! Linux network namespace, joined to the sending one's by a veth pair and a bridge; taking the
//! link down mid-flow cuts it as a pulled cable does: no RST, no FIN, the sockets stay open and
//! nothing arrives. The test proves that both ends notice (heartbeats and the batch's wait), the
//! sender retries until the link is back, and every persistent message whose put returned
//! arrives exactly once and in order, across two cuts.
//!
//! Needs root and iproute2 (see `support::netns`); it fails, rather than skipping itself, where
//! it cannot build the network.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::chan::{depth, drain, put_to, wait_depth};
use support::netns::{Net, IP};
use support::{mqsc, Home, Qm, BIN};

const WAIT: Duration = Duration::from_secs(60);

/// DISPLAY CHSTATUS of the channel on `qm` (a channel with no status fails the command).
fn status(home: &Home, qm: &str) -> String {
    let out = home.run_with_input(&["runmqsc", qm], "DISPLAY CHSTATUS(QM1.TO.QM2)\n");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls until `cond` holds of the channel's status on `qm` (bounded).
fn wait_until(home: &Home, qm: &str, what: &str, cond: impl Fn(&str) -> bool) {
    let t = Instant::now();
    loop {
        let text = status(home, qm);
        if cond(&text) {
            return;
        }
        assert!(t.elapsed() < WAIT, "{qm}: {what} did not happen:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_channel_across_a_cut_link_retries_and_delivers_every_persistent_message_once_in_order() {
    let net = Net::build("chan", &["r"]);
    let home = Home::new();
    // QM2, the receiving end, in the namespace.
    let qm2 = Qm::create(&home, "QM2", &[]);
    let out = Command::new(IP)
        .args(["netns", "exec", &net.ns[0], BIN, "strmqm", "QM2"])
        .env("FERRYMQ_HOME", home.path())
        .output()
        .expect("run ip netns exec ferrymq strmqm");
    assert!(
        out.status.success(),
        "strmqm QM2 in namespace {}: {}",
        net.ns[0],
        String::from_utf8_lossy(&out.stderr)
    );
    mqsc(
        &home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR) HBINT(1)\n",
    );
    // QM1, the sending end, here; its channel reaches QM2 only over the veth link.
    let qm1 = Qm::start(&home, "QM1", &[]);
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('{}({})') XMITQ(QM2) \
             HBINT(1) SHORTTMR(1) BATCHSZ(20)\n\
             START CHANNEL(QM1.TO.QM2)\n",
            net.addr(0),
            qm2.port
        ),
    );

    // The producer puts persistent messages numbered from 0 until told to stop; `acked` counts
    // the puts that returned (the ledger: message i's put returned iff i < acked).
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let producer = {
        let (stop, acked) = (stop.clone(), acked.clone());
        let c1 = qm1.connect_bindings();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                put_to(&c1, "ORDERS", format!("{i:08}").as_bytes());
                i += 1;
                acked.store(i, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };

    for cut in 1..=2u64 {
        // Mid-flow: messages are crossing when the link goes.
        wait_depth(&home, "QM2", "ORDERS.IN", 100 * cut);
        net.cut(0);
        let at = acked.load(Ordering::SeqCst);
        let cut_at = Instant::now();
        eprintln!(
            "cut {cut}: {at} put, {} arrived",
            depth(&home, "QM2", "ORDERS.IN")
        );
        wait_until(&home, "QM1", "the sender noticing the cut", |t| {
            t.contains("STATUS(RETRYING)")
        });
        eprintln!("cut {cut}: the sender retries after {:?}", cut_at.elapsed());
        wait_until(&home, "QM2", "the receiver noticing the cut", |t| {
            !t.contains("STATUS(RUNNING)")
        });
        eprintln!("cut {cut}: the receiver ended after {:?}", cut_at.elapsed());
        // Puts go on while the link is down: they wait on the transmission queue.
        let t = Instant::now();
        while acked.load(Ordering::SeqCst) < at + 50 {
            assert!(t.elapsed() < WAIT, "puts stalled while the link was down");
            std::thread::sleep(Duration::from_millis(20));
        }
        net.heal(0);
        let healed = Instant::now();
        wait_until(&home, "QM1", "the sender running again", |t| {
            t.contains("STATUS(RUNNING)")
        });
        eprintln!(
            "cut {cut}: running again {:?} after the heal",
            healed.elapsed()
        );
    }
    stop.store(true, Ordering::SeqCst);
    producer.join().expect("producer");
    let n = acked.load(Ordering::SeqCst);

    // Every acknowledged message arrives: exactly once, in order, nothing left behind.
    wait_depth(&home, "QM2", "ORDERS.IN", n);
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        0,
        "the transmission queue drained"
    );
    let c2 = qm2.connect_bindings();
    let got = drain(&c2, "ORDERS.IN");
    let want: Vec<Vec<u8>> = (0..n).map(|i| format!("{i:08}").into_bytes()).collect();
    assert_eq!(got.len() as u64, n, "{n} put, {} arrived", got.len());
    assert!(got == want, "every message once and in order");
    let log = support::error_log(&qm1.dir());
    assert!(log.contains("QM1.TO.QM2"), "{log}");
}
