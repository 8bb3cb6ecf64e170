//! Frame boundaries and the refusals: what the decoder and the parsers reject, and that they reject
//! it with the right error.

mod strategies;

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_proto::{
    encode_request, encode_response, kind, parse_request, parse_response, FrameDecoder, Hello,
    ProtoError, RawFrame, Request, Response, FLAG_LATER, FLAG_MORE, HEADER_LEN,
    PRE_HANDSHAKE_FRAME_MAX_BYTES,
};
use ferrymq_types::options::PutOptions;
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use strategies::*;

fn put(body: &'static [u8]) -> Request {
    Request::Put {
        hobj: 4,
        opts: PutOptions::default(),
        md: MessageDescriptor::default(),
        props: Properties::default(),
        body: Bytes::from_static(body),
    }
}

fn decode_all(d: &mut FrameDecoder, buf: &mut BytesMut) -> Vec<RawFrame> {
    let mut frames = Vec::new();
    while let Some(f) = d.decode(buf).unwrap() {
        frames.push(f);
    }
    frames
}

/// A frame with an arbitrary header and body, bypassing the encoders.
fn raw(kind: u8, flags: u8, conv: u16, body: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u32_le(8 + body.len() as u32);
    b.put_u8(kind);
    b.put_u8(flags);
    b.put_u16_le(conv);
    b.put_u32_le(1);
    b.put_slice(body);
    b
}

#[test]
fn several_frames_in_one_buffer_decode_in_order() {
    // Pipelining: a put and its commit coalesced into one write, then a heartbeat.
    let mut buf = BytesMut::new();
    encode_request(1, 10, &put(b"payload"), &mut buf);
    encode_request(1, 11, &Request::Commit, &mut buf);
    encode_request(0, 12, &Request::Heartbeat, &mut buf);
    let frames = decode_all(
        &mut FrameDecoder::new(PRE_HANDSHAKE_FRAME_MAX_BYTES),
        &mut buf,
    );
    assert!(buf.is_empty());
    let got: Vec<(u32, Request)> = frames
        .iter()
        .map(|f| (f.req, parse_request(f).unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            (10, put(b"payload")),
            (11, Request::Commit),
            (12, Request::Heartbeat)
        ]
    );
}

#[test]
fn a_frame_split_at_every_byte_decodes_only_once_complete() {
    let mut whole = BytesMut::new();
    encode_request(2, 7, &put(b"split me"), &mut whole);
    encode_response(
        2,
        7,
        &Response::PutOk {
            msg_id: [3; 24],
            correl_id: [0; 24],
            group: None,
        },
        &mut whole,
    );
    let first_len = put(b"split me").encoded_len();
    for cut in 0..=whole.len() {
        let mut d = FrameDecoder::new(1024);
        let mut buf = BytesMut::from(&whole[..cut]);
        let early = decode_all(&mut d, &mut buf);
        assert_eq!(
            early.len(),
            usize::from(cut >= first_len) + usize::from(cut == whole.len()),
            "cut at {cut}"
        );
        buf.extend_from_slice(&whole[cut..]);
        let mut frames = early;
        frames.extend(decode_all(&mut d, &mut buf));
        assert!(buf.is_empty(), "cut at {cut}");
        assert_eq!(frames.len(), 2, "cut at {cut}");
        assert_eq!(parse_request(&frames[0]).unwrap(), put(b"split me"));
        assert!(matches!(
            parse_response(&frames[1]).unwrap(),
            Response::PutOk { .. }
        ));
    }
}

#[test]
fn an_oversized_length_is_refused_from_the_four_length_bytes_alone() {
    let mut buf = BytesMut::from(&(PRE_HANDSHAKE_FRAME_MAX_BYTES + 1).to_le_bytes()[..]);
    let err = FrameDecoder::new(PRE_HANDSHAKE_FRAME_MAX_BYTES)
        .decode(&mut buf)
        .unwrap_err();
    assert_eq!(
        err,
        ProtoError::FrameTooLarge {
            len: PRE_HANDSHAKE_FRAME_MAX_BYTES + 1,
            max: PRE_HANDSHAKE_FRAME_MAX_BYTES
        }
    );
    assert_eq!(err.reason(), Reason::MSG_TOO_BIG_FOR_CHANNEL);
}

#[test]
fn a_frame_exactly_at_the_limit_is_accepted() {
    let mut buf = raw(kind::ADMIN_REPLY, 0, 1, &[0u8; 92]);
    assert!(FrameDecoder::new(100).decode(&mut buf).unwrap().is_some());
}

#[test]
fn a_length_shorter_than_the_header_is_refused() {
    for len in 0u32..8 {
        let mut buf = BytesMut::from(&len.to_le_bytes()[..]);
        let err = FrameDecoder::new(1024).decode(&mut buf).unwrap_err();
        assert!(matches!(err, ProtoError::BadHeader(_)), "len {len}: {err}");
    }
}

#[test]
fn reserved_flag_bits_are_refused_by_the_decoder() {
    // Bit 0 is MORE, bit 1 LATER.
    for bit in 2..8 {
        let mut buf = raw(kind::COMMIT, 1 << bit, 1, b"");
        let err = FrameDecoder::new(1024).decode(&mut buf).unwrap_err();
        let ProtoError::BadHeader(m) = &err else {
            panic!("bit {bit}: {err}")
        };
        assert!(m.contains("flag"), "bit {bit}: {err}");
    }
}

#[test]
fn the_more_flag_is_refused_by_the_parsers_until_segmentation_exists() {
    let mut buf = raw(kind::COMMIT, FLAG_MORE, 1, b"");
    let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
    assert!(matches!(parse_request(&f), Err(ProtoError::BadHeader(_))));
}

#[test]
fn the_later_flag_is_taken_on_requests_and_refused_on_responses() {
    let mut buf = raw(kind::COMMIT, FLAG_LATER, 1, b"");
    let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
    assert_eq!(parse_request(&f), Ok(Request::Commit));
    let f = RawFrame {
        kind: kind::HEARTBEAT_ACK,
        flags: FLAG_LATER,
        conv: 0,
        req: 1,
        body: Bytes::new(),
    };
    assert!(matches!(parse_response(&f), Err(ProtoError::BadHeader(_))));
}

#[test]
fn unknown_kinds_are_refused_and_requests_are_not_responses() {
    let f = |kind| RawFrame {
        kind,
        flags: 0,
        conv: 1,
        req: 1,
        body: Bytes::new(),
    };
    for k in [0x00, 0x2f, 0x80, 0x89, 0xff] {
        assert_eq!(parse_request(&f(k)), Err(ProtoError::UnknownKind(k)));
        assert_eq!(parse_response(&f(k)), Err(ProtoError::UnknownKind(k)));
    }
    assert_eq!(
        parse_response(&f(kind::COMMIT)),
        Err(ProtoError::UnknownKind(kind::COMMIT))
    );
    assert_eq!(
        parse_request(&f(kind::HEARTBEAT_ACK)),
        Err(ProtoError::UnknownKind(kind::HEARTBEAT_ACK))
    );
    assert_eq!(ProtoError::UnknownKind(0).reason(), Reason::HEADER_ERROR);
}

/// The frame of `r` with its body cut to `keep` bytes (length field adjusted to match).
fn truncated(r: &Request, keep: usize) -> RawFrame {
    let mut buf = request_frame(1, 1, r);
    buf.truncate(HEADER_LEN + keep);
    let len = (buf.len() - 4) as u32;
    buf[..4].copy_from_slice(&len.to_le_bytes());
    FrameDecoder::new(1 << 20)
        .decode(&mut buf)
        .unwrap()
        .unwrap()
}

#[test]
fn a_truncated_body_is_a_body_error_naming_the_request() {
    let samples = [
        put(b"0123456789"),
        Request::Open {
            name: "Q".into(),
            qmgr: "QM".into(),
            options: 8,
            dynamic_name: String::new(),
        },
        Request::Inquire {
            hobj: 1,
            selectors: vec!["A".into(), "B".into()],
        },
        Request::Admin {
            command: "PING QMGR".into(),
        },
    ];
    for r in &samples {
        let body_len = r.encoded_len() - HEADER_LEN;
        for keep in 0..body_len {
            match parse_request(&truncated(r, keep)) {
                Err(ProtoError::Body { kind, .. }) => assert_eq!(kind, r.name()),
                other => panic!("{} cut to {keep}: {other:?}", r.name()),
            }
        }
    }
}

#[test]
fn a_truncated_hello_is_bad_magic_or_a_body_error() {
    let r = Request::Hello(Hello::new("client"));
    for keep in 0..r.encoded_len() - HEADER_LEN {
        let err = parse_request(&truncated(&r, keep)).unwrap_err();
        let expected = if keep < 4 { "BadMagic" } else { "Body" };
        assert!(
            format!("{err:?}").starts_with(expected),
            "cut to {keep}: {err:?}"
        );
    }
}

#[test]
fn trailing_garbage_after_a_body_is_refused() {
    // A Hello's channel is an optional trailing field; with it present, anything after it is
    // garbage.
    let hello = Request::Hello(Hello {
        channel: "APP.SVRCONN".into(),
        ..Hello::new("c")
    });
    for r in [put(b"x"), Request::Commit, hello] {
        let mut f = FrameDecoder::new(1024)
            .decode(&mut request_frame(0, 1, &r))
            .unwrap()
            .unwrap();
        let mut body = BytesMut::from(&f.body[..]);
        body.put_u8(0);
        f.body = body.freeze();
        match parse_request(&f) {
            Err(ProtoError::Body { source, .. }) => {
                assert!(source.to_string().contains("trailing"), "{source}")
            }
            other => panic!("{}: {other:?}", r.name()),
        }
    }
    let mut buf = raw(kind::HEARTBEAT_ACK, 0, 1, b"zz");
    let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
    assert!(matches!(
        parse_response(&f),
        Err(ProtoError::Body {
            kind: "HeartbeatAck",
            ..
        })
    ));
}

#[test]
fn a_hello_without_the_magic_is_refused_as_foreign() {
    let mut buf = request_frame(0, 0, &Request::Hello(Hello::new("c")));
    buf[HEADER_LEN] = b'G'; // e.g. an HTTP client: "GET /"
    let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
    assert_eq!(parse_request(&f), Err(ProtoError::BadMagic));

    let ok = Response::HelloOk {
        version: 1,
        max_msg_len: 1,
        heartbeat_ms: 0,
        sharecnv: 1,
        qmgr_name: "QM".into(),
        server_id: "s".into(),
    };
    let mut buf = response_frame(0, 0, &ok);
    buf[HEADER_LEN + 3] = b'2';
    let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
    assert_eq!(parse_response(&f), Err(ProtoError::BadMagic));
}

#[test]
fn the_handshake_is_refused_on_a_conversation_other_than_zero() {
    let mut buf = BytesMut::new();
    encode_request(3, 0, &Request::Hello(Hello::new("c")), &mut buf);
    let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
    let Err(ProtoError::BadHeader(m)) = parse_request(&f) else {
        panic!("Hello on conversation 3 must be refused")
    };
    assert!(m.contains("conversation 3"), "{m}");
}

#[test]
fn a_message_whose_length_disagrees_with_its_reason_is_refused() {
    let message = |reason, data_len| Response::Message {
        reason,
        data_len,
        md: MessageDescriptor::default(),
        props: Properties::default(),
        body: Bytes::from_static(b"12345"),
    };
    let parse = |r: &Response| {
        parse_response(
            &FrameDecoder::new(4096)
                .decode(&mut response_frame(1, 1, r))
                .unwrap()
                .unwrap(),
        )
    };
    assert!(parse(&message(Reason::NONE, 5)).is_ok());
    assert!(parse(&message(Reason::TRUNCATED_MSG_ACCEPTED, 9)).is_ok());
    for bad in [
        message(Reason::NONE, 9),
        message(Reason::TRUNCATED_MSG_ACCEPTED, 4),
        message(Reason::Q_FULL, 5),
    ] {
        let body_error = matches!(
            parse(&bad),
            Err(ProtoError::Body {
                kind: "Message",
                ..
            })
        );
        assert!(body_error, "{bad:?}");
    }
}

#[test]
fn an_unknown_reason_number_from_a_newer_peer_reads_as_unexpected_error() {
    let mut body = BytesMut::new();
    body.put_u32_le(999_999);
    body.put_u16_le(0);
    let f = RawFrame {
        kind: kind::STATUS,
        flags: 0,
        conv: 1,
        req: 1,
        body: body.freeze(),
    };
    assert_eq!(
        parse_response(&f),
        Ok(Response::Status {
            reason: Reason::UNEXPECTED_ERROR,
            message: String::new()
        })
    );
}

#[test]
fn a_string_that_is_not_utf8_is_a_body_error() {
    let mut body = BytesMut::new();
    body.put_u32_le(2);
    body.put_slice(&[0xc3, 0x28]);
    let f = RawFrame {
        kind: kind::ADMIN,
        flags: 0,
        conv: 1,
        req: 1,
        body: body.freeze(),
    };
    assert!(matches!(
        parse_request(&f),
        Err(ProtoError::Body { kind: "Admin", .. })
    ));
}
