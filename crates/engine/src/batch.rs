//! The framing of engine records laid end to end — an HA batch proposed to Raft, a DR chunk
//! shipped to the other site: `kind u8 | len u32 LE | payload` each, nothing between them.

use bytes::{BufMut, Bytes};
use ferrymq_types::codec::DecodeError;

/// Bytes of framing before each record's payload: kind and length.
pub const RECORD_HEAD_BYTES: usize = 1 + 4;

/// Appends one record made of `parts` concatenated.
pub fn push_record(out: &mut impl BufMut, kind: u8, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.put_u8(kind);
    out.put_u32_le(len as u32);
    for p in parts {
        out.put_slice(p);
    }
}

/// The records of `bytes` in order, each as its kind and payload; a truncated record is an
/// error, after which nothing more is yielded.
pub fn records(bytes: &[u8]) -> impl Iterator<Item = Result<(u8, &[u8]), DecodeError>> {
    let mut p = bytes;
    std::iter::from_fn(move || {
        if p.is_empty() {
            return None;
        }
        let Some(&[kind, l0, l1, l2, l3]) = p.first_chunk::<RECORD_HEAD_BYTES>() else {
            p = &[];
            return Some(Err(DecodeError::Truncated {
                what: "record header",
            }));
        };
        let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
        let rest = &p[RECORD_HEAD_BYTES..];
        if rest.len() < len {
            p = &[];
            return Some(Err(DecodeError::Truncated { what: "record" }));
        }
        let (rec, tail) = rest.split_at(len);
        p = tail;
        Some(Ok((kind, rec)))
    })
}

/// All the records of `bytes`, sharing its memory; the first truncated record fails the whole.
pub fn split(bytes: &Bytes) -> Result<Vec<(u8, Bytes)>, DecodeError> {
    records(bytes)
        .map(|r| r.map(|(kind, payload)| (kind, bytes.slice_ref(payload))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn records_round_trip_and_truncation_is_refused() {
        let mut out = BytesMut::new();
        push_record(&mut out, 3, &[b"com", b"mit"]);
        push_record(&mut out, 1, &[]);
        push_record(&mut out, 7, &[&[9u8; 300]]);
        let mut v = Vec::new();
        push_record(&mut v, 3, &[b"commit"]);
        assert_eq!(&out[..v.len()], &v[..]);
        let b = out.freeze();
        assert_eq!(b.len(), 3 * RECORD_HEAD_BYTES + 6 + 300);
        let recs = split(&b).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!((recs[0].0, &recs[0].1[..]), (3, &b"commit"[..]));
        assert_eq!((recs[1].0, &recs[1].1[..]), (1, &b""[..]));
        assert_eq!((recs[2].0, &recs[2].1[..]), (7, &[9u8; 300][..]));
        assert_eq!(records(&[]).count(), 0);
        // Cut anywhere inside a record: the whole records before it, then one error, then nothing.
        for cut in 1..b.len() {
            if [RECORD_HEAD_BYTES + 6, 2 * RECORD_HEAD_BYTES + 6].contains(&cut) {
                continue;
            }
            let got: Vec<_> = records(&b[..cut]).collect();
            assert!(got.last().unwrap().is_err(), "cut at {cut}");
            assert!(got[..got.len() - 1].iter().all(|r| r.is_ok()));
            assert!(split(&b.slice(..cut)).is_err(), "cut at {cut}");
        }
        assert!(split(&Bytes::from_static(&[3, 9, 0, 0, 0, 1])).is_err());
    }
}
