//! A message channel into a DR pair, through the real binary: QM1 sends persistent messages to
//! DRQM, whose primary is ended (`endmqm -i`) while batches flow; the recovery site takes over
//! (`makedrprimary`, `strmqm`) and the sender, whose CONNAME lists both sites, binds to it by
//! itself. A primary that ends in an orderly way hands its secondary the whole stream first, so
//! every message arrives exactly once, in order: the channel's synchronisation state crossed
//! with the queues it describes. (A SIGKILL of the main site may take up to the DR bound of
//! acknowledged work: `dr_disaster` proves that bound.)

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_types::options::{open, GetOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use support::{free_port, mqsc, Home, Qm};

const WAIT: Duration = Duration::from_secs(30);

fn depth(home: &Home, qm: &str, q: &str) -> u32 {
    let text = mqsc(home, qm, &format!("DISPLAY QLOCAL({q}) CURDEPTH\n"));
    let at = text.find("CURDEPTH(").expect("CURDEPTH shown") + "CURDEPTH(".len();
    text[at..]
        .split(')')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < WAIT, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_dr_takeover_mid_flow_delivers_every_persistent_message_once_to_the_new_primary() {
    let (main, rec) = (Home::new(), Home::new());
    let dr_port = free_port();
    let secondary = Qm::start(
        &rec,
        "DRQM",
        &["-dr", "secondary", "-drl", &format!("127.0.0.1({dr_port})")],
    );
    let primary = Qm::start(
        &main,
        "DRQM",
        &["-dr", "primary", "-drr", &format!("127.0.0.1({dr_port})")],
    );
    wait_until("first DR contact", || {
        main.ok(&["dspmq", "-o", "dr", "-m", "DRQM"])
            .contains("DRSTATUS(Normal)")
    });
    mqsc(
        &main,
        "DRQM",
        "DEFINE QLOCAL(ORDERS.IN)\nDEFINE CHANNEL(QM1.TO.DRQM) CHLTYPE(RCVR)\n",
    );
    let qm1 = Qm::start(&main, "QM1", &[]);
    // The main site is 10 ms away, so batches are still flowing when it goes.
    let p1 = free_port();
    let _wan = support::relay(p1, primary.port, 10);
    let p2 = secondary.port;
    mqsc(
        &main,
        "QM1",
        &format!(
            "DEFINE QLOCAL(DRQM) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(DRQM) XMITQ(DRQM)\n\
             DEFINE CHANNEL(QM1.TO.DRQM) CHLTYPE(SDR) CONNAME('127.0.0.1({p1}),127.0.0.1({p2})') XMITQ(DRQM) BATCHSZ(10) SHORTTMR(1)\n"
        ),
    );
    const N: usize = 400;
    let c1 = qm1.connect_bindings();
    let h = c1.open("ORDERS", open::OUTPUT).unwrap();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    for i in 0..N {
        c1.put_commit(&h, &md, &Properties::default(), Bytes::from(i.to_string()))
            .unwrap();
    }
    mqsc(&main, "QM1", "START CHANNEL(QM1.TO.DRQM)\n");
    // Batches are flowing into the primary: the main site's queue manager dies.
    wait_until("the first batches' arrival", || {
        depth(&main, "DRQM", "ORDERS.IN") > 0
    });
    primary.end();
    let before = depth(&main, "QM1", "DRQM") as usize;
    assert!(
        before > 0,
        "everything had gone before the kill: the test proves nothing"
    );
    rec.ok(&["makedrprimary", "-m", "DRQM"]);
    rec.ok(&["strmqm", "DRQM"]);
    // The sender finds the new primary by itself, second in its CONNAME.
    wait_until("the transmission queue's emptying", || {
        depth(&main, "QM1", "DRQM") == 0
    });
    let c2 = secondary.connect_bindings();
    let h = c2.open("ORDERS.IN", open::INPUT_EXCLUSIVE).unwrap();
    let mut got = Vec::new();
    while let Ok(m) = c2.get(&h, &GetOptions::any()) {
        got.push(String::from_utf8(m.body.to_vec()).unwrap());
    }
    let want: Vec<String> = (0..N).map(|i| i.to_string()).collect();
    assert_eq!(got, want, "every message once, in order");
}
