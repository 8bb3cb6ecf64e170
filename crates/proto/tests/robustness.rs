//! Hostile input: garbage and mutated frames must produce errors, never panics, and whatever does
//! parse must re-encode to something that parses to the same value (no lossy corners).

mod strategies;

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_proto::{
    encode_request, encode_response, kind, parse_request, parse_response, FrameDecoder, RawFrame,
};
use proptest::collection::vec;
use proptest::prelude::*;
use strategies::*;

/// Small, so that garbage lengths are often refused and often accepted.
const SMALL_MAX: u32 = 4096;
/// Room for every generated frame, so mutations reach the parsers and not just the size check.
const LARGE_MAX: u32 = 1 << 20;

/// Feeds `bytes` to a decoder in chunks of `chunk` bytes, parsing every frame both ways; stops at
/// the first framing error as a connection would. Returns the number of frames seen.
fn feed(bytes: &[u8], chunk: usize, max: u32) -> usize {
    let mut d = FrameDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut frames = 0;
    for piece in bytes.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(f)) => {
                    frames += 1;
                    check_parses_are_stable(&f);
                }
                Ok(None) => break,
                Err(_) => return frames,
            }
        }
    }
    frames
}

/// If a frame parses, encoding the value and parsing again gives the same bytes and value.
fn check_parses_are_stable(f: &RawFrame) {
    if let Ok(r) = parse_request(f) {
        let mut once = BytesMut::new();
        encode_request(f.conv, f.req, &r, &mut once);
        let g = FrameDecoder::new(u32::MAX)
            .decode(&mut once.clone())
            .unwrap()
            .unwrap();
        let again = parse_request(&g).expect("a re-encoded request parses");
        let mut twice = BytesMut::new();
        encode_request(f.conv, f.req, &again, &mut twice);
        assert_eq!(once, twice);
        // NaN float properties are the one value unequal to itself; the bytes above still agree.
        assert!(again == r || format!("{again:?}") == format!("{r:?}"));
    }
    if let Ok(r) = parse_response(f) {
        let mut once = BytesMut::new();
        encode_response(f.conv, f.req, &r, &mut once);
        let g = FrameDecoder::new(u32::MAX)
            .decode(&mut once.clone())
            .unwrap()
            .unwrap();
        let again = parse_response(&g).expect("a re-encoded response parses");
        let mut twice = BytesMut::new();
        encode_response(f.conv, f.req, &again, &mut twice);
        assert_eq!(once, twice);
        assert!(again == r || format!("{again:?}") == format!("{r:?}"));
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Truncate { at: usize },
    Insert { at: usize, byte: u8 },
    Remove { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Remove { at }),
    ]
}

fn mutate(bytes: &mut Vec<u8>, ms: &[Mutation]) {
    for m in ms {
        if bytes.is_empty() {
            return;
        }
        let n = bytes.len();
        match *m {
            Mutation::Flip { at, mask } => bytes[at % n] ^= mask,
            Mutation::Truncate { at } => bytes.truncate(at % n),
            Mutation::Insert { at, byte } => bytes.insert(at % (n + 1), byte),
            Mutation::Remove { at } => {
                bytes.remove(at % n);
            }
        }
    }
}

/// One to three valid frames back to back.
fn small_frames() -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![
            request().prop_map(|r| request_frame(1, 7, &r)),
            response().prop_map(|r| response_frame(1, 7, &r)),
        ],
        1..4,
    )
    .prop_map(|frames| frames.iter().flat_map(|f| f.iter().copied()).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn random_garbage_never_panics(bytes in vec(any::<u8>(), 0..4096), chunk in 1usize..600) {
        feed(&bytes, chunk, SMALL_MAX);
    }

    #[test]
    fn garbage_bodies_behind_a_valid_header_never_panic(
        k in prop_oneof![1u8..=0x0f, 0x81u8..=0x88, any::<u8>()],
        conv in prop_oneof![Just(0u16), any::<u16>()],
        body in vec(any::<u8>(), 0..512),
    ) {
        let f = RawFrame { kind: k, flags: 0, conv, req: 3, body: Bytes::from(body) };
        check_parses_are_stable(&f);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        frames in small_frames(), ms in vec(mutation(), 1..6), chunk in 1usize..5000
    ) {
        let mut bytes = frames;
        mutate(&mut bytes, &ms);
        feed(&bytes, chunk, LARGE_MAX);
    }

    #[test]
    fn valid_frames_fed_in_any_chunking_all_come_out(frames in small_frames(), chunk in 1usize..300) {
        let mut count = 0;
        let mut d = FrameDecoder::new(u32::MAX);
        let mut buf = BytesMut::new();
        for piece in frames.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(f) = d.decode(&mut buf).unwrap() {
                prop_assert!(parse_request(&f).is_ok() || parse_response(&f).is_ok());
                count += 1;
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert!(count >= 1);
    }
}

#[test]
fn a_huge_list_count_with_no_items_fails_without_allocating_for_it() {
    let mut body = BytesMut::new();
    body.put_u32_le(1);
    body.put_u16_le(u16::MAX);
    let f = RawFrame {
        kind: kind::INQUIRE,
        flags: 0,
        conv: 1,
        req: 1,
        body: body.freeze(),
    };
    assert!(parse_request(&f).is_err());
    let mut body = BytesMut::new();
    body.put_u16_le(u16::MAX);
    let f = RawFrame {
        kind: kind::INQUIRE_REPLY,
        flags: 0,
        conv: 1,
        req: 1,
        body: body.freeze(),
    };
    assert!(parse_response(&f).is_err());
}

#[test]
fn a_huge_body_length_claim_inside_a_small_frame_is_a_body_error() {
    let mut body = BytesMut::new();
    body.put_u32_le(u32::MAX);
    let f = RawFrame {
        kind: kind::ADMIN,
        flags: 0,
        conv: 1,
        req: 1,
        body: body.freeze(),
    };
    assert!(parse_request(&f).is_err());
}

#[test]
fn seeded_random_streams_of_mixed_frames_and_noise_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut total_frames = 0;
    for _ in 0..2000 {
        let mut bytes = Vec::new();
        for _ in 0..rng.gen_range(1..6) {
            if rng.gen_bool(0.7) {
                // A plausible header with a random kind and a short random body.
                let body_len = rng.gen_range(0..64u32);
                bytes.put_u32_le(8 + body_len);
                bytes.put_u8(if rng.gen_bool(0.5) {
                    rng.gen_range(1..=0x0f)
                } else {
                    rng.gen_range(0x81..=0x88)
                });
                bytes.put_u8(0);
                bytes.put_u16_le(rng.gen_range(0..3));
                bytes.put_u32_le(rng.gen());
                bytes.extend((0..body_len).map(|_| rng.gen::<u8>()));
            } else {
                bytes.extend((0..rng.gen_range(0..16)).map(|_| rng.gen::<u8>()));
            }
        }
        total_frames += feed(&bytes, rng.gen_range(1..64), SMALL_MAX);
    }
    // The plausible headers must actually reach the parsers, or this test tests nothing.
    assert!(total_frames > 1000, "only {total_frames} frames decoded");
}
