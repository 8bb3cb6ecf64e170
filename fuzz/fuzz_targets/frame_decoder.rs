//! Feeds arbitrary bytes to the frame decoder and the parsers (requests, responses, message
//! channels' frames), as a hostile peer would: nothing may panic, and any value that parses must
//! re-encode to a frame that parses to the same value.
#![no_main]

use bytes::BytesMut;
use ferrymq_proto::{
    encode_request, encode_response, parse_request, parse_response, FrameDecoder, RawFrame,
};
use libfuzzer_sys::fuzz_target;

/// Small, so that random lengths are often within the limit and frames reach the parsers.
const MAX_FRAME_BYTES: u32 = 4096;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size, so frames split across reads are exercised too.
    let (chunk, data) = match data.split_first() {
        Some((c, rest)) => (usize::from(*c).max(1), rest),
        None => return,
    };
    let mut decoder = FrameDecoder::new(MAX_FRAME_BYTES);
    let mut buf = BytesMut::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => check(&frame),
                Ok(None) => break,
                // A connection closes on the first framing error; so does this run.
                Err(_) => return,
            }
        }
    }
});

fn reparse(bytes: &mut BytesMut) -> RawFrame {
    FrameDecoder::new(u32::MAX)
        .decode(bytes)
        .expect("re-encoded frame decodes")
        .expect("re-encoded frame is complete")
}

fn check(frame: &RawFrame) {
    // Message channels' frames (the receiving end of a channel parses these).
    if let Ok(f) = ferrymq_proto::channel::ChannelFrame::parse(frame) {
        let mut once = BytesMut::new();
        f.encode(&mut once);
        let again = ferrymq_proto::channel::ChannelFrame::parse(&reparse(&mut once.clone()))
            .expect("re-encoded channel frame parses");
        assert!(
            again == f || format!("{again:?}") == format!("{f:?}"),
            "{f:?} became {again:?}"
        );
    }
    if let Ok(req) = parse_request(frame) {
        let mut once = BytesMut::new();
        encode_request(frame.conv, frame.req, &req, &mut once);
        assert_eq!(once.len(), req.encoded_len());
        let again = parse_request(&reparse(&mut once.clone())).expect("re-encoded request parses");
        // NaN float properties are unequal to themselves; their Debug text and bytes still agree.
        assert!(
            again == req || format!("{again:?}") == format!("{req:?}"),
            "{req:?} became {again:?}"
        );
        let mut twice = BytesMut::new();
        encode_request(frame.conv, frame.req, &again, &mut twice);
        assert_eq!(once, twice);
    }
    if let Ok(resp) = parse_response(frame) {
        let mut once = BytesMut::new();
        encode_response(frame.conv, frame.req, &resp, &mut once);
        assert_eq!(once.len(), resp.encoded_len());
        let again =
            parse_response(&reparse(&mut once.clone())).expect("re-encoded response parses");
        assert!(
            again == resp || format!("{again:?}") == format!("{resp:?}"),
            "{resp:?} became {again:?}"
        );
        let mut twice = BytesMut::new();
        encode_response(frame.conv, frame.req, &again, &mut twice);
        assert_eq!(once, twice);
    }
}
