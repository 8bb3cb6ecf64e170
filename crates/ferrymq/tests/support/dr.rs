//! Shared by the disaster recovery tests: named, self-checking 2 KB message bodies, reading
//! `dspmq -o dr` fields, and the pricing of lost work in log bytes with the engine's own record
//! encoding.
#![allow(dead_code)]

use bytes::BytesMut;
use ferrymq_engine::records::{GetRec, PutRec, Record};
use ferrymq_types::{MessageDescriptor, Persistence};

pub const BODY: usize = 2048;

/// Framing of one record in a standalone queue manager's ring (the log's record header).
pub const RING_FRAMING: usize = ferrymq_log::RECORD_HEADER_LEN;
/// Framing of one record in an HA group's replicated batches (`kind: u8 | len: u32`), the unit
/// the HA lag meter counts.
pub const HA_FRAMING: usize = 5;

/// Message `n` of producer `id`: its name, then filler derived from both, 2 KB in all, so a
/// corrupted or mixed-up body is recognised.
pub fn body(id: usize, n: u64) -> String {
    let head = format!("P{id}-{n:08}|");
    let fill = (b'a' + ((id as u64 * 7 + n) % 26) as u8) as char;
    let mut s = head;
    while s.len() < BODY {
        s.push(fill);
    }
    s
}

/// The name of a body (`P{id}-{n}`), after checking that the rest is exactly what `body` made.
pub fn check_body(b: &str) -> String {
    let (name, _) = b
        .split_once('|')
        .unwrap_or_else(|| panic!("corrupted body {b:.40}"));
    let (id, n) = name[1..].split_once('-').expect("body name");
    let expect = body(id.parse().unwrap(), n.parse().unwrap());
    assert_eq!(b, expect, "body of {name} corrupted");
    name.to_string()
}

pub fn persistent() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

/// The value of `NAME(value)` in a status line.
pub fn field(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!("{name}("))? + name.len() + 1;
    let end = line[start..].find(')')? + start;
    Some(line[start..end].to_string())
}

/// A numeric field of a status line (panics with the line if it is missing).
pub fn num(line: &str, name: &str) -> u64 {
    field(line, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {name} in {line}"))
}

/// Log bytes of the record a lost put_commit on `put_q` would have written (one COMMIT holding
/// the put), and of the one a lost get-and-commit on `get_q` would have written, computed with
/// the engine's own encoding from a message that did arrive, plus `framing` per record.
pub fn record_sizes(
    sample: &ferrymq_client::Message,
    put_q: &str,
    get_q: &str,
    framing: usize,
) -> (u64, u64) {
    let put = PutRec {
        queue: put_q.into(),
        seq: 1,
        md: sample.md.clone(),
        props: sample.props.clone(),
        expires_at_ms: None,
        body: sample.body.clone(),
    };
    let get = GetRec {
        queue: get_q.into(),
        seq: 1,
        rank: 0,
    };
    let size = |r: Record| {
        let mut b = BytesMut::new();
        r.encode_small(&mut b);
        (b.len() + framing) as u64
    };
    (
        size(Record::Commit {
            puts: vec![put],
            gets: vec![],
        }),
        size(Record::Commit {
            puts: vec![],
            gets: vec![get],
        }),
    )
}
