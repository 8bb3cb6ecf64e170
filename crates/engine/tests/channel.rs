//! A message channel's synchronisation state through the recovery log: a sender's batch in
//! doubt survives a crash (its messages back on the transmission queue), is resolved after the
//! restart, and the state travels in checkpoint images and DR full copies.

mod common;

use bytes::Bytes;
use ferrymq_engine::channel::{InDoubt, SyncUpdate};
use ferrymq_engine::{Engine, GetOutcome, MemoryLog};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, QueueDef};

use common::{cfg, SharedLog};

fn replayed(log: &SharedLog) -> Engine {
    let mut e = Engine::new(cfg(), Box::new(MemoryLog::default()));
    for (kind, payload) in log.0.lock().unwrap().records.clone() {
        e.replay(kind, Bytes::from(payload)).unwrap();
    }
    e
}

fn depth(e: &Engine, q: &str) -> u32 {
    e.queue_status(q).unwrap().cur_depth
}

#[test]
fn a_batch_in_doubt_survives_a_crash_and_is_resolved_after_it() {
    let log = SharedLog::default();
    let mut e = Engine::new(cfg(), Box::new(log.clone()));
    e.define_queue(
        QueueDef {
            is_xmitq: true,
            ..QueueDef::local("XQ")
        },
        false,
    )
    .unwrap();
    let c = e.connect("mqm", "app");
    for i in 0..3 {
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let body = Bytes::from(format!("m{i}"));
        e.put1(
            c,
            "XQ",
            "",
            &PutOptions::default(),
            md,
            Properties::default(),
            body,
            1,
        )
        .unwrap();
    }
    // The channel's first batch commits with its state; the second goes in doubt.
    let mca = e.connect("", "QM1.TO.QM2");
    let (h, _, _) = e.open(mca, "XQ", "", open::INPUT_EXCLUSIVE, "").unwrap();
    let sp = GetOptions {
        syncpoint: Syncpoint::Yes,
        ..GetOptions::any()
    };
    let take = |e: &mut Engine| match e.get(mca, h, &sp, 0, 2).unwrap() {
        GetOutcome::Got(g, _) => g,
        GetOutcome::Waiting(_) => panic!("empty"),
    };
    take(&mut e);
    let sync = SyncUpdate {
        channel: "QM1.TO.QM2".into(),
        seq: 1,
        luwid: 1,
    };
    e.channel_commit(mca, sync, 3).unwrap();
    take(&mut e);
    take(&mut e);
    let gets = e.uow_gets(mca);
    assert_eq!(gets.len(), 2);
    e.channel_indoubt(
        "QM1.TO.QM2",
        InDoubt {
            luwid: 2,
            seq: 3,
            gets,
        },
    )
    .unwrap();

    // Crash: the replayed state has the doubt, and the two messages back on the queue.
    let mut r = replayed(&log);
    let s = r.channel_sync("QM1.TO.QM2");
    assert_eq!((s.seq, s.luwid), (1, 1));
    assert_eq!(
        s.indoubt.as_ref().map(|d| (d.luwid, d.seq, d.gets.len())),
        Some((2, 3, 2))
    );
    assert_eq!(depth(&r, "XQ"), 2);

    // The image of that state (a checkpoint, an HA snapshot) and a DR full copy keep it.
    let image = r.checkpoint_image(10);
    let copy = image.copy_records();
    let restored = Engine::restore(cfg(), Box::new(MemoryLog::default()), image).unwrap();
    assert_eq!(restored.channel_sync("QM1.TO.QM2"), s);
    let mut dr = Engine::new(cfg(), Box::new(MemoryLog::default()));
    for (k, p) in copy {
        dr.replay(k, p).unwrap();
    }
    assert_eq!(dr.channel_sync("QM1.TO.QM2"), s);
    assert_eq!(depth(&dr, "XQ"), 2);

    // The receiver had it: committed, the messages leave; the resolution replays too.
    let log2 = SharedLog::default();
    let mut r2 = Engine::restore(cfg(), Box::new(log2.clone()), r.checkpoint_image(10)).unwrap();
    r2.channel_resolve("QM1.TO.QM2", true).unwrap();
    assert_eq!(depth(&r2, "XQ"), 0);
    let s2 = r2.channel_sync("QM1.TO.QM2");
    assert_eq!((s2.seq, s2.luwid, s2.indoubt.is_none()), (3, 2, true));
    let mut again = Engine::restore(
        cfg(),
        Box::new(MemoryLog::default()),
        r.checkpoint_image(10),
    )
    .unwrap();
    for (kind, payload) in log2.0.lock().unwrap().records.clone() {
        again.replay(kind, Bytes::from(payload)).unwrap();
    }
    assert_eq!(again.channel_sync("QM1.TO.QM2"), s2);
    assert_eq!(depth(&again, "XQ"), 0);

    // Or it did not: backed out, the messages stay to be sent again.
    r.channel_resolve("QM1.TO.QM2", false).unwrap();
    assert_eq!(depth(&r, "XQ"), 2);
    assert!(r.channel_sync("QM1.TO.QM2").indoubt.is_none());
    assert_eq!(r.channel_sync("QM1.TO.QM2").luwid, 1);
}
