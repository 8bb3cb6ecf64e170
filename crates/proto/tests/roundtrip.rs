//! Every request and response survives encode → frame decode → parse unchanged, and the size an
//! encoder reserves is exactly what it writes.

mod strategies;

use bytes::{Bytes, BytesMut};
use ferrymq_proto::{
    encode_request, encode_request_split, encode_response, encode_response_split, kind,
    parse_request, parse_response, FrameDecoder, Hello, Request, Response,
};
use ferrymq_types::options::{GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Properties, PropertyValue, Reason};
use proptest::prelude::*;
use strategies::*;

/// Large enough for every generated frame, as after negotiating the maximum message length.
const MAX: u32 = 16 * 1024 * 1024;

fn decode_one(mut buf: BytesMut) -> ferrymq_proto::RawFrame {
    let f = FrameDecoder::new(MAX)
        .decode(&mut buf)
        .unwrap()
        .expect("a complete frame");
    assert!(buf.is_empty(), "{} bytes left after the frame", buf.len());
    f
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_request_round_trips(r in request(), conv in any::<u16>(), req in any::<u32>()) {
        let buf = request_frame(conv, req, &r);
        prop_assert_eq!(buf.len(), r.encoded_len(), "reserved size differs from written size");
        let f = decode_one(buf);
        prop_assert_eq!(f.kind, r.kind());
        prop_assert_eq!(f.conv, conv_for_request(&r, conv));
        prop_assert_eq!(f.req, req);
        prop_assert_eq!(parse_request(&f).unwrap(), r);
    }

    #[test]
    fn every_response_round_trips(r in response(), conv in any::<u16>(), req in any::<u32>()) {
        let buf = response_frame(conv, req, &r);
        prop_assert_eq!(buf.len(), r.encoded_len(), "reserved size differs from written size");
        let f = decode_one(buf);
        prop_assert_eq!(f.kind, r.kind());
        prop_assert_eq!(f.conv, conv_for_response(&r, conv));
        prop_assert_eq!(f.req, req);
        prop_assert_eq!(parse_response(&f).unwrap(), r);
    }

    #[test]
    fn a_split_response_and_its_body_are_the_same_bytes_as_the_whole_frame(
        r in response(), conv in any::<u16>(), req in any::<u32>()
    ) {
        let conv = conv_for_response(&r, conv);
        let mut head = BytesMut::new();
        let tail = encode_response_split(conv, req, &r, &mut head);
        prop_assert_eq!(tail.is_some(), matches!(r, Response::Message { .. }));
        head.extend_from_slice(&tail.unwrap_or_default());
        prop_assert_eq!(&head[..], &response_frame(conv, req, &r)[..]);
    }

    #[test]
    fn a_split_request_and_its_body_are_the_same_bytes_as_the_whole_frame(
        r in request(), conv in any::<u16>(), req in any::<u32>()
    ) {
        let conv = conv_for_request(&r, conv);
        let mut head = BytesMut::new();
        let tail = encode_request_split(conv, req, &r, &mut head);
        prop_assert_eq!(
            tail.is_some(),
            matches!(r, Request::Put { .. } | Request::Put1 { .. } | Request::Put1Topic { .. })
        );
        head.extend_from_slice(&tail.unwrap_or_default());
        prop_assert_eq!(&head[..], &request_frame(conv, req, &r)[..]);
    }

    #[test]
    fn encoding_appends_without_disturbing_what_is_already_in_the_buffer(
        prefix in proptest::collection::vec(any::<u8>(), 0..32), r in request()
    ) {
        let mut out = BytesMut::from(&prefix[..]);
        encode_request(conv_for_request(&r, 1), 2, &r, &mut out);
        prop_assert_eq!(&out[..prefix.len()], &prefix[..]);
        prop_assert_eq!(&out[prefix.len()..], &request_frame(1, 2, &r)[..]);
    }

    #[test]
    fn responses_append_after_earlier_frames_for_coalesced_writes(first in response(), second in response()) {
        let mut out = BytesMut::new();
        encode_response(conv_for_response(&first, 4), 1, &first, &mut out);
        encode_response(conv_for_response(&second, 4), 2, &second, &mut out);
        prop_assert_eq!(out.len(), first.encoded_len() + second.encoded_len());
        let mut d = FrameDecoder::new(MAX);
        prop_assert_eq!(parse_response(&d.decode(&mut out).unwrap().unwrap()).unwrap(), first);
        prop_assert_eq!(parse_response(&d.decode(&mut out).unwrap().unwrap()).unwrap(), second);
        prop_assert!(out.is_empty());
    }
}

fn sample_md() -> MessageDescriptor {
    MessageDescriptor {
        format: "MQSTR".into(),
        reply_to_q: "REPLY.Q".into(),
        ..Default::default()
    }
}

fn sample_props() -> Properties {
    let mut p = Properties::default();
    p.set("colour", PropertyValue::String("vermelho".into()));
    p.set("n", PropertyValue::Int(-3));
    p.set("f", PropertyValue::Float(1.5));
    p.set("b", PropertyValue::Bool(true));
    p.set("raw", PropertyValue::Bytes(vec![0, 1, 2]));
    p
}

/// One value of every request variant, so coverage of each kind does not depend on chance.
fn one_of_each_request() -> Vec<Request> {
    let body = Bytes::from_static(b"hello, queue");
    vec![
        Request::Hello(Hello::new("app ✓")),
        Request::Connect {
            qmgr: "QM1".into(),
            user: "ana".into(),
            password: "s3cret".into(),
            app_name: "app".into(),
        },
        Request::Disconnect,
        Request::Open {
            name: "Q1".into(),
            qmgr: String::new(),
            options: 0x10,
            dynamic_name: "AMQ.*".into(),
        },
        Request::Close {
            hobj: 7,
            options: 1,
        },
        Request::Put {
            hobj: 7,
            opts: PutOptions::default(),
            md: sample_md(),
            props: sample_props(),
            body: body.clone(),
        },
        Request::Put1 {
            name: "Q1".into(),
            qmgr: "QM1".into(),
            opts: PutOptions::default(),
            md: sample_md(),
            props: Properties::default(),
            body,
        },
        Request::Get {
            hobj: 7,
            opts: GetOptions::any(),
        },
        Request::Commit,
        Request::Backout,
        Request::Inquire {
            hobj: 7,
            selectors: vec!["CURDEPTH".into(), "MAXDEPTH".into()],
        },
        Request::Heartbeat,
        Request::RegisterConsumer {
            hobj: 7,
            opts: GetOptions::any(),
        },
        Request::CancelConsumer { hobj: 7 },
        Request::Credit { hobj: 7, n: 64 },
        Request::OpenTopic {
            object: "DEV.BASE.TOPIC".into(),
            topic: "price/fruit".into(),
            options: 0x10,
        },
        Request::Put1Topic {
            object: String::new(),
            topic: "a/b".into(),
            opts: PutOptions {
                pubsub: ferrymq_types::options::pmo::RETAIN,
                ..PutOptions::default()
            },
            md: MessageDescriptor::default(),
            props: Properties::default(),
            body: Bytes::from_static(b"pub"),
        },
        Request::Subscribe(Box::new(ferrymq_proto::SubscribeRequest {
            options: 0x2a,
            object: "T".into(),
            topic: "a/#".into(),
            name: "S1".into(),
            dest: String::new(),
            dest_qmgr: String::new(),
            selector: "colour = 'red'".into(),
            expiry: -1,
            user_data: "ud".into(),
            correl_id: None,
        })),
        Request::Subscribe(Box::new(ferrymq_proto::SubscribeRequest {
            options: 0x40_0002,
            topic: "a/#".into(),
            expiry: -1,
            correl_id: Some([7; 24]),
            ..Default::default()
        })),
        Request::SubRequest { hsub: 9 },
        Request::Set {
            hobj: 2,
            attrs: vec![("PUT".into(), "DISABLED".into())],
        },
        Request::Stat { stat_type: 0 },
        Request::Admin {
            command: "x".repeat(100_000),
        },
    ]
}

fn one_of_each_response() -> Vec<Response> {
    vec![
        Response::HelloOk {
            version: 1,
            max_msg_len: 4_194_304,
            heartbeat_ms: 5000,
            sharecnv: 10,
            qmgr_name: "QM1".into(),
            server_id: "ferrymq 0.1".into(),
        },
        Response::Status {
            reason: Reason::Q_FULL,
            message: "queue Q1 is full".into(),
        },
        Response::Opened {
            hobj: 3,
            name: "AMQ.5F00".into(),
            async_default: false,
        },
        Response::Opened {
            hobj: 4,
            name: "Q.ASYNC".into(),
            async_default: true,
        },
        Response::PutOk {
            msg_id: [1; 24],
            correl_id: [2; 24],
            group: None,
        },
        Response::PutOk {
            msg_id: [1; 24],
            correl_id: [2; 24],
            group: Some(ferrymq_proto::PutGroup {
                group_id: [5; 24],
                msg_seq_number: 3,
                offset: 100,
            }),
        },
        Response::Message {
            reason: Reason::TRUNCATED_MSG_ACCEPTED,
            data_len: 100,
            md: sample_md(),
            props: sample_props(),
            body: Bytes::from_static(b"first ten!"),
        },
        Response::InquireReply {
            attrs: vec![("CURDEPTH".into(), "4".into())],
        },
        Response::AdminReply {
            text: "y".repeat(100_000),
            reason: Reason::NONE,
        },
        Response::HeartbeatAck,
        Response::Subscribed {
            hsub: 3,
            hobj: 4,
            queue: "SYSTEM.MANAGED.DURABLE.0123456789ABCDEF".into(),
        },
    ]
}

#[test]
fn each_request_variant_has_its_own_kind_and_round_trips() {
    let all = one_of_each_request();
    let mut kinds: Vec<u8> = all.iter().map(Request::kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(
        kinds,
        (kind::HELLO..=kind::STAT)
            .chain(kind::OPEN_TOPIC..=kind::SUB_REQUEST)
            .collect::<Vec<_>>()
    );
    for r in all {
        let f = decode_one(request_frame(5, 9, &r));
        assert_eq!(parse_request(&f).unwrap(), r, "{}", r.name());
    }
}

#[test]
fn each_response_variant_has_its_own_kind_and_round_trips() {
    let all = one_of_each_response();
    let mut kinds: Vec<u8> = all.iter().map(Response::kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(
        kinds,
        (kind::HELLO_OK..=kind::HEARTBEAT_ACK)
            .chain([kind::SUBSCRIBED])
            .collect::<Vec<_>>()
    );
    for r in all {
        let f = decode_one(response_frame(5, 9, &r));
        assert_eq!(parse_response(&f).unwrap(), r, "{}", r.name());
    }
}

#[test]
fn admin_text_longer_than_a_str16_survives_intact() {
    let command = "DISPLAY QLOCAL(*) ".repeat(5000);
    assert!(command.len() > u16::MAX as usize);
    let r = Request::Admin {
        command: command.clone(),
    };
    let f = decode_one(request_frame(1, 1, &r));
    assert_eq!(parse_request(&f).unwrap(), Request::Admin { command });
}

#[test]
fn the_header_is_little_endian_with_len_counting_the_bytes_after_it() {
    let mut out = BytesMut::new();
    encode_request(
        0x0102,
        0x0a0b0c0d,
        &Request::CancelConsumer { hobj: 0x11223344 },
        &mut out,
    );
    assert_eq!(
        &out[..],
        &[
            12,
            0,
            0,
            0,
            kind::CANCEL_CONSUMER,
            0,
            0x02,
            0x01,
            0x0d,
            0x0c,
            0x0b,
            0x0a,
            0x44,
            0x33,
            0x22,
            0x11
        ][..]
    );
}

#[test]
fn the_hello_body_starts_with_the_magic() {
    let out = request_frame(0, 0, &Request::Hello(Hello::new("c")));
    assert_eq!(&out[12..16], b"FMQ1");
}

#[test]
fn a_parsed_put_body_shares_the_receive_buffer_instead_of_copying() {
    let r = Request::Put {
        hobj: 1,
        opts: PutOptions::default(),
        md: MessageDescriptor::default(),
        props: Properties::default(),
        body: Bytes::from(vec![42u8; 10_000]),
    };
    let f = decode_one(request_frame(1, 1, &r));
    let Request::Put { body, .. } = parse_request(&f).unwrap() else {
        panic!("not a put")
    };
    let frame = f.body.as_ptr_range();
    assert!(
        frame.contains(&body.as_ptr()),
        "body was copied out of the frame"
    );
}
