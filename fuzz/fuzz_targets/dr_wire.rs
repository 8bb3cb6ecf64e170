//! Feeds arbitrary bytes to the DR stream's frame decoder (`ferrymq_dr::wire::decode_frame`, the
//! code the async reader runs) and chunk splitter, as a hostile or broken peer site would: nothing
//! may panic, and every frame that decodes must re-encode to bytes that decode to the same frame.
#![no_main]

use bytes::{Bytes, BytesMut};
use ferrymq_dr::wire::{decode_frame, Frame};
use ferrymq_engine::batch::{push_record, split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A stream of frames, read as the other site reads them: up to the first error, or up to an
    // incomplete frame (the reader would wait for more).
    let mut buf = Bytes::copy_from_slice(data);
    while let Ok(Some((frame, used))) = decode_frame(&buf) {
        assert!(used > 4 && used <= buf.len(), "{used} of {}", buf.len());
        check(&frame);
        buf = buf.slice(used..);
    }
    // The same bytes as a chunk of records, split as the secondary splits them.
    check_records(Bytes::copy_from_slice(data));
});

fn check(frame: &Frame) {
    let once = frame.encode().freeze();
    let (again, used) = decode_frame(&once)
        .expect("a re-encoded frame decodes")
        .expect("a re-encoded frame is whole");
    assert_eq!(used, once.len());
    assert_eq!(&again, frame);
    assert_eq!(again.encode().freeze(), once);
    if let Frame::Records { records, .. } = frame {
        check_records(records.clone());
    }
}

/// A chunk that splits into records is exactly those records, framed again.
fn check_records(chunk: Bytes) {
    if let Ok(recs) = split(&chunk) {
        let mut out = BytesMut::new();
        for (kind, payload) in &recs {
            push_record(&mut out, *kind, &[payload]);
        }
        assert_eq!(out.freeze(), chunk);
    }
}
