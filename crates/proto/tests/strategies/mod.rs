//! Proptest strategies for arbitrary requests and responses, shared by the test files.
// Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use ferrymq_proto::{encode_request, encode_response, Hello, Request, Response};
use ferrymq_types::options::{gmo, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue, Reason};
use proptest::collection::vec;
use proptest::prelude::*;

/// Unicode text, mostly short, sometimes long enough to need several bytes of length.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "\\PC{0,24}",
        1 => "\\PC{200,400}",
        1 => Just(String::new()),
    ]
}

/// Message bodies: mostly small, sometimes large-ish so multi-kilobyte frames are exercised.
pub fn body() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        8 => vec(any::<u8>(), 0..64),
        2 => vec(any::<u8>(), 1000..70_000),
    ]
    .prop_map(Bytes::from)
}

fn id() -> impl Strategy<Value = [u8; 24]> {
    any::<[u8; 24]>()
}

fn persistence() -> impl Strategy<Value = Persistence> {
    prop_oneof![
        Just(Persistence::NotPersistent),
        Just(Persistence::Persistent),
        Just(Persistence::AsQueueDef)
    ]
}

pub fn descriptor() -> impl Strategy<Value = MessageDescriptor> {
    (
        (
            id(),
            id(),
            persistence(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
        ),
        (text(), text(), text(), any::<u32>(), any::<u64>()),
        (
            text(),
            text(),
            text(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
        ),
        group_fields(),
    )
        .prop_map(
            |(
                (msg_id, correl_id, persistence, priority, expiry, msg_type),
                (format, reply_to_q, reply_to_qmgr, backout_count, put_time_ms),
                (user_id, appl_identity, put_appl_name, encoding, ccsid, feedback, report),
                group,
            )| MessageDescriptor {
                msg_id,
                correl_id,
                persistence,
                priority,
                expiry,
                msg_type,
                format,
                reply_to_q,
                reply_to_qmgr,
                backout_count,
                put_time_ms,
                user_id,
                appl_identity,
                put_appl_name,
                encoding,
                ccsid,
                feedback,
                report,
                group_id: group.0,
                msg_seq_number: group.1,
                offset: group.2,
                msg_flags: group.3,
                original_length: group.4,
            },
        )
}

/// Group and segment fields: mostly the defaults (encoded without them), sometimes any values.
fn group_fields() -> impl Strategy<Value = ([u8; 24], i32, i32, i32, i32)> {
    prop_oneof![
        2 => Just(([0u8; 24], 1, 0, 0, -1)),
        1 => (id(), any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>()),
    ]
}

fn property_value() -> impl Strategy<Value = PropertyValue> {
    prop_oneof![
        text().prop_map(PropertyValue::String),
        any::<i64>().prop_map(PropertyValue::Int),
        // NaN never equals itself, so it cannot take part in an equality round trip.
        any::<f64>()
            .prop_filter("not NaN", |f| !f.is_nan())
            .prop_map(PropertyValue::Float),
        any::<bool>().prop_map(PropertyValue::Bool),
        vec(any::<u8>(), 0..64).prop_map(PropertyValue::Bytes),
    ]
}

pub fn properties() -> impl Strategy<Value = Properties> {
    vec(("\\PC{1,16}", property_value()), 0..6).prop_map(Properties)
}

fn syncpoint() -> impl Strategy<Value = Syncpoint> {
    prop_oneof![
        Just(Syncpoint::No),
        Just(Syncpoint::Yes),
        Just(Syncpoint::IfPersistent)
    ]
}

pub fn put_options() -> impl Strategy<Value = PutOptions> {
    // IfPersistent is get-only; the codec refuses it for puts.
    (
        prop_oneof![Just(Syncpoint::No), Just(Syncpoint::Yes)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(0u32),
            Just(ferrymq_types::options::pmo::SET_ALL_CONTEXT)
        ],
        any::<u32>(),
    )
        .prop_map(
            |(syncpoint, new_msg_id, new_correl_id, logical_order, context, context_hobj)| {
                PutOptions {
                    syncpoint,
                    new_msg_id,
                    new_correl_id,
                    logical_order,
                    context,
                    context_hobj,
                    pubsub: if logical_order {
                        ferrymq_types::options::pmo::RETAIN
                    } else {
                        0
                    },
                    // Only the resolved "asynchronous" travels.
                    response: if new_correl_id {
                        ferrymq_types::options::pmo::ASYNC_RESPONSE
                    } else {
                        0
                    },
                }
            },
        )
}

fn plain_get_options() -> impl Strategy<Value = GetOptions> {
    let wait = prop_oneof![
        Just(Wait::NoWait),
        any::<u64>().prop_map(Wait::Ms),
        Just(Wait::Unlimited)
    ];
    let browse = prop_oneof![Just(Browse::No), Just(Browse::First), Just(Browse::Next)];
    (
        syncpoint(),
        wait,
        browse,
        any::<bool>(),
        any::<u32>(),
        proptest::option::of(id()),
        proptest::option::of(id()),
    )
        .prop_map(
            |(
                syncpoint,
                wait,
                browse,
                accept_truncated,
                max_len,
                match_msg_id,
                match_correl_id,
            )| GetOptions {
                syncpoint,
                wait,
                browse,
                accept_truncated,
                max_len,
                match_msg_id,
                match_correl_id,
                ..GetOptions::default()
            },
        )
}

/// Get options, sometimes with group match fields and group options.
pub fn get_options() -> impl Strategy<Value = GetOptions> {
    let group = prop_oneof![
        2 => Just(None),
        1 => (
            proptest::option::of(id()),
            proptest::option::of(any::<i32>()),
            proptest::option::of(any::<i32>()),
            0u32..16,
        )
            .prop_map(Some),
    ];
    (plain_get_options(), group).prop_map(|(o, g)| match g {
        None => o,
        Some((gid, seq, offset, bits)) => GetOptions {
            match_group_id: gid,
            match_msg_seq_number: seq,
            match_offset: offset,
            // Any combination of the four MQGMO group options.
            group_options: [
                gmo::LOGICAL_ORDER,
                gmo::ALL_MSGS_AVAILABLE,
                gmo::ALL_SEGMENTS_AVAILABLE,
                gmo::COMPLETE_MSG,
            ]
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .fold(0, |acc, (_, b)| acc | b),
            ..o
        },
    })
}

pub fn reason() -> impl Strategy<Value = Reason> {
    proptest::sample::select(Reason::ALL)
}

pub fn hello() -> impl Strategy<Value = Hello> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        text(),
        text(),
    )
        .prop_map(
            |(
                version_min,
                version_max,
                max_msg_len,
                heartbeat_ms,
                sharecnv,
                client_name,
                channel,
            )| {
                Hello {
                    version_min,
                    version_max,
                    max_msg_len,
                    heartbeat_ms,
                    sharecnv,
                    client_name,
                    channel,
                }
            },
        )
}

pub fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        hello().prop_map(Request::Hello),
        (text(), text(), text(), text()).prop_map(|(qmgr, user, password, app_name)| {
            Request::Connect {
                qmgr,
                user,
                password,
                app_name,
            }
        }),
        Just(Request::Disconnect),
        (text(), text(), any::<u32>(), text()).prop_map(|(name, qmgr, options, dynamic_name)| {
            Request::Open {
                name,
                qmgr,
                options,
                dynamic_name,
            }
        }),
        (any::<u32>(), any::<u32>()).prop_map(|(hobj, options)| Request::Close { hobj, options }),
        (
            any::<u32>(),
            put_options(),
            descriptor(),
            properties(),
            body()
        )
            .prop_map(|(hobj, opts, md, props, body)| Request::Put {
                hobj,
                opts,
                md,
                props,
                body
            }),
        (
            text(),
            text(),
            put_options(),
            descriptor(),
            properties(),
            body()
        )
            .prop_map(|(name, qmgr, opts, md, props, body)| Request::Put1 {
                name,
                qmgr,
                opts,
                md,
                props,
                body
            }),
        (any::<u32>(), get_options()).prop_map(|(hobj, opts)| Request::Get { hobj, opts }),
        Just(Request::Commit),
        Just(Request::Backout),
        (any::<u32>(), vec(text(), 0..8))
            .prop_map(|(hobj, selectors)| Request::Inquire { hobj, selectors }),
        (any::<u32>(), vec((text(), text()), 0..8))
            .prop_map(|(hobj, attrs)| Request::Set { hobj, attrs }),
        Just(Request::Heartbeat),
        (any::<u32>(), get_options())
            .prop_map(|(hobj, opts)| Request::RegisterConsumer { hobj, opts }),
        any::<u32>().prop_map(|hobj| Request::CancelConsumer { hobj }),
        (any::<u32>(), any::<u32>()).prop_map(|(hobj, n)| Request::Credit { hobj, n }),
        (text(), text(), any::<u32>()).prop_map(|(object, topic, options)| Request::OpenTopic {
            object,
            topic,
            options
        }),
        (
            text(),
            text(),
            put_options(),
            descriptor(),
            properties(),
            body()
        )
            .prop_map(
                |(object, topic, opts, md, props, body)| Request::Put1Topic {
                    object,
                    topic,
                    opts,
                    md,
                    props,
                    body
                }
            ),
        (any::<u32>(), text(), text(), text(), any::<i32>()).prop_map(
            |(options, topic, name, selector, expiry)| Request::Subscribe(Box::new(
                ferrymq_proto::SubscribeRequest {
                    options,
                    topic,
                    name,
                    selector,
                    expiry,
                    ..Default::default()
                }
            ))
        ),
        any::<u32>().prop_map(|hsub| Request::SubRequest { hsub }),
        any::<u32>().prop_map(|stat_type| Request::Stat { stat_type }),
        prop_oneof![text(), "\\PC{20000,40000}"].prop_map(|command| Request::Admin { command }),
    ]
}

/// A `Message` response whose reason and `data_len` agree with its body, as the parser demands.
fn message() -> impl Strategy<Value = Response> {
    (
        any::<bool>(),
        any::<u32>(),
        descriptor(),
        properties(),
        body(),
    )
        .prop_map(|(truncated, extra, md, props, body)| {
            let (reason, data_len) = if truncated {
                (
                    Reason::TRUNCATED_MSG_ACCEPTED,
                    (body.len() as u32).saturating_add(extra),
                )
            } else {
                (Reason::NONE, body.len() as u32)
            };
            Response::Message {
                reason,
                data_len,
                md,
                props,
                body,
            }
        })
}

pub fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        (
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
            any::<u16>(),
            text(),
            text()
        )
            .prop_map(
                |(version, max_msg_len, heartbeat_ms, sharecnv, qmgr_name, server_id)| {
                    Response::HelloOk {
                        version,
                        max_msg_len,
                        heartbeat_ms,
                        sharecnv,
                        qmgr_name,
                        server_id,
                    }
                }
            ),
        (reason(), text()).prop_map(|(reason, message)| Response::Status { reason, message }),
        (any::<u32>(), text(), any::<bool>()).prop_map(|(hobj, name, async_default)| {
            Response::Opened {
                hobj,
                name,
                async_default,
            }
        }),
        (
            id(),
            id(),
            proptest::option::of((id(), any::<i32>(), any::<i32>()))
        )
            .prop_map(|(msg_id, correl_id, g)| Response::PutOk {
                msg_id,
                correl_id,
                group: g.map(
                    |(group_id, msg_seq_number, offset)| ferrymq_proto::PutGroup {
                        group_id,
                        msg_seq_number,
                        offset,
                    }
                ),
            }),
        message(),
        vec((text(), text()), 0..8).prop_map(|attrs| Response::InquireReply { attrs }),
        (prop_oneof![text(), "\\PC{20000,40000}"], reason())
            .prop_map(|(text, reason)| Response::AdminReply { text, reason }),
        Just(Response::HeartbeatAck),
        (any::<u32>(), any::<u32>(), text()).prop_map(|(hsub, hobj, queue)| Response::Subscribed {
            hsub,
            hobj,
            queue
        }),
    ]
}

/// The conversation a frame may legally travel on: the handshake only on the connection itself.
pub fn conv_for_request(r: &Request, conv: u16) -> u16 {
    if matches!(r, Request::Hello(_)) {
        0
    } else {
        conv
    }
}

pub fn conv_for_response(r: &Response, conv: u16) -> u16 {
    if matches!(r, Response::HelloOk { .. }) {
        0
    } else {
        conv
    }
}

pub fn request_frame(conv: u16, req: u32, r: &Request) -> BytesMut {
    let mut out = BytesMut::new();
    encode_request(conv_for_request(r, conv), req, r, &mut out);
    out
}

pub fn response_frame(conv: u16, req: u32, r: &Response) -> BytesMut {
    let mut out = BytesMut::new();
    encode_response(conv_for_response(r, conv), req, r, &mut out);
    out
}
