//! Feeds arbitrary bytes to everything that decodes what another HA instance sends or what the
//! Raft log holds: peer RPC frames (requests and responses), Raft log records and their replay,
//! replicated batches of engine records applied to an engine, and the state image a leader sends
//! to a replica behind its log. Nothing may panic; what decodes must re-encode to bytes that
//! decode to the same bytes again.
#![no_main]

use bytes::{Bytes, BytesMut};
use ferrymq_engine::batch::{push_record, records};
use ferrymq_engine::records::{GetRec, PutRec, Record};
use ferrymq_engine::{Engine, EngineConfig, MemoryLog};
use ferrymq_replication::{reencode_peer_frame, reencode_record, replay_records, PeerFrame};
use ferrymq_server::storage::decode_export;
use ferrymq_types::QueueDef;
use ferrymq_types::{MessageDescriptor, MsgDeliverySequence, Properties};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 6 {
        0 => peer(rest, PeerFrame::Request),
        1 => peer(rest, PeerFrame::Response),
        2 => {
            let Some((&k, payload)) = rest.split_first() else {
                return;
            };
            raft_record(200 + k % 5, payload);
        }
        3 => {
            // A Raft log as the ring returns it: each record `kind | len u32 | payload`, the
            // kind folded into the five Raft kinds.
            let recs: Vec<(u8, &[u8])> = records(rest)
                .map_while(Result::ok)
                .map(|(k, p)| (200 + k % 5, p))
                .collect();
            let _ = replay_records(recs);
        }
        4 => match rest.split_first() {
            // Records of the engine's own shapes with fuzzed fields, so replay goes deep.
            Some((&b, ops)) if b & 1 == 1 => batch(&shaped_batch(ops)),
            _ => batch(rest),
        },
        _ => {
            if let Ok(image) = decode_export(rest) {
                let _ = Engine::restore(config(), Box::new(MemoryLog::default()), image);
            }
        }
    }
});

fn config() -> EngineConfig {
    EngineConfig {
        qmgr_name: "QM".into(),
        max_handles: 16,
        instance_id: 1,
        backout_requeue: true,
        message_memory_max: 0,
    }
}

fn peer(body: &[u8], side: PeerFrame) {
    if let Ok(once) = reencode_peer_frame(body, side) {
        let twice = reencode_peer_frame(&once, side).expect("a re-encoded peer frame decodes");
        assert_eq!(once, twice);
    }
}

fn raft_record(kind: u8, payload: &[u8]) {
    if let Ok(once) = reencode_record(kind, payload) {
        let twice = reencode_record(kind, &once).expect("a re-encoded Raft record decodes");
        assert_eq!(once, twice);
    }
}

/// A replicated batch applied as a replica applies it: records split, each replayed on the
/// engine, up to the first that fails (a replica restarts there).
fn batch(payload: &[u8]) {
    let mut engine = Engine::new(config(), Box::new(MemoryLog::default()));
    engine
        .define_queue(QueueDef::local("Q"), false)
        .expect("a queue is defined");
    for r in records(payload) {
        let Ok((kind, rec)) = r else {
            return;
        };
        if engine.replay(kind, Bytes::copy_from_slice(rec)).is_err() {
            return;
        }
    }
    // The state it leaves can be captured as a checkpoint and restored.
    let image = engine.checkpoint_image(0);
    Engine::restore(config(), Box::new(MemoryLog::default()), image)
        .expect("a running engine's own checkpoint image restores");
}

/// A little-endian number from up to `n` bytes of `b`.
fn take(b: &mut &[u8], n: usize) -> u64 {
    let (head, rest) = b.split_at(n.min(b.len()));
    *b = rest;
    head.iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// A sequence number: small ones (which collide) and extreme ones.
fn seq(b: &mut &[u8]) -> u64 {
    match take(b, 1) % 4 {
        0 => u64::MAX - take(b, 1),
        _ => take(b, 1),
    }
}

fn queue(b: &mut &[u8]) -> String {
    ["Q", "R", "S"][(take(b, 1) % 3) as usize].to_string()
}

fn put(b: &mut &[u8]) -> PutRec {
    PutRec {
        queue: queue(b),
        seq: seq(b),
        md: MessageDescriptor {
            priority: take(b, 1) as i8 as i32,
            ..Default::default()
        },
        props: Properties::default(),
        expires_at_ms: None,
        body: Bytes::from(vec![7u8; take(b, 1) as usize % 8]),
    }
}

fn get(b: &mut &[u8]) -> GetRec {
    GetRec {
        queue: queue(b),
        seq: seq(b),
        rank: take(b, 1) as u8,
    }
}

/// A batch of well-formed engine records whose fields come from the fuzzer.
fn shaped_batch(mut b: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    while let Some((&op, rest)) = b.split_first() {
        b = rest;
        let rec = match op % 8 {
            0 => Record::Put(put(&mut b)),
            1 => Record::Get(get(&mut b)),
            2 => {
                let (np, ng) = (take(&mut b, 1) % 4, take(&mut b, 1) % 4);
                Record::Commit {
                    puts: (0..np).map(|_| put(&mut b)).collect(),
                    gets: (0..ng).map(|_| get(&mut b)).collect(),
                }
            }
            3 => {
                let mut d = QueueDef::local(queue(&mut b));
                d.msg_delivery_sequence = if take(&mut b, 1) & 1 == 0 {
                    MsgDeliverySequence::Priority
                } else {
                    MsgDeliverySequence::Fifo
                };
                d.max_depth = take(&mut b, 1) as u32;
                Record::DefineQueue(d)
            }
            4 => Record::DeleteQueue(queue(&mut b)),
            5 => Record::ClearQueue(queue(&mut b)),
            6 => Record::DrReset,
            _ => Record::DrStream(take(&mut b, 1)),
        };
        let mut payload = BytesMut::new();
        let kind = rec.encode_small(&mut payload);
        push_record(&mut out, kind, &[&payload]);
    }
    out.to_vec()
}
