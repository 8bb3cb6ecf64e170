//! Feeds arbitrary bytes to the engine's record decoders and the checkpoint image decoders, as a
//! damaged-but-checksummed log, store or checkpoint (or a bug in an older writer) would: nothing
//! may panic, and whatever decodes must re-encode to bytes that decode to the same value.
#![no_main]

use bytes::{Bytes, BytesMut};
use ferrymq_engine::records::{decode_stored, encode_stored, kind, Record};
use ferrymq_engine::{Manifest, Message};
use ferrymq_log::CheckpointReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            let Some((&kind_byte, payload)) = rest.split_first() else {
                return;
            };
            record(kind_byte, payload);
        }
        1 => stored(rest),
        2 => manifest(&chunks(rest)),
        _ => {
            // A checkpoint manifest file: framing and checksums, then its chunks.
            if let Ok((_, chunks)) = CheckpointReader::decode(Bytes::copy_from_slice(rest)) {
                manifest(&chunks);
            }
        }
    }
});

/// Equal, or (NaN float properties are unequal to themselves) equal in every printed digit.
fn same<T: PartialEq + std::fmt::Debug>(a: &T, b: &T) -> bool {
    a == b || format!("{a:?}") == format!("{b:?}")
}

fn record(kind_byte: u8, payload: &[u8]) {
    let Ok(rec) = Record::decode(kind_byte, Bytes::copy_from_slice(payload)) else {
        return;
    };
    let mut once = BytesMut::new();
    let k = rec.encode_small(&mut once);
    // A publication decodes into the Commit it stands for, and re-encodes as that Commit.
    let expected = if kind_byte == kind::PUBLISH {
        kind::COMMIT
    } else {
        kind_byte
    };
    assert_eq!(k, expected, "{rec:?}");
    let again = Record::decode(k, once.clone().freeze()).expect("a re-encoded record decodes");
    assert!(same(&again, &rec), "{rec:?} became {again:?}");
    let mut twice = BytesMut::new();
    again.encode_small(&mut twice);
    assert_eq!(once, twice);
}

fn stored(payload: &[u8]) {
    let Ok(p) = decode_stored(Bytes::copy_from_slice(payload)) else {
        return;
    };
    let msg = Message::new(
        p.seq,
        p.md.clone(),
        p.props.clone(),
        p.body.clone(),
        p.expires_at_ms,
        0,
    );
    let (mut head, body) = encode_stored(&p.queue, &msg);
    head.extend_from_slice(body);
    let again = decode_stored(head.freeze()).expect("a re-encoded stored message decodes");
    assert!(same(&again, &p), "{p:?} became {again:?}");
}

/// Splits bytes into chunks, each `len u16 | bytes` (a short last one takes what is left).
fn chunks(mut b: &[u8]) -> Vec<Bytes> {
    let mut out = Vec::new();
    while b.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([b[0], b[1]])).min(b.len() - 2);
        out.push(Bytes::copy_from_slice(&b[2..2 + n]));
        b = &b[2 + n..];
    }
    out
}

fn manifest(chunks: &[Bytes]) {
    let Ok(m) = Manifest::decode(chunks) else {
        return;
    };
    let once = m.encode();
    let again = Manifest::decode(&once).expect("a re-encoded manifest decodes");
    assert_eq!(format!("{again:?}"), format!("{m:?}"));
    assert_eq!(again.encode(), once);
}
