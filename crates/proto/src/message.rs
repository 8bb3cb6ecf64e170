//! Requests (client → server) and responses (server → client): their frame kinds, their encoding
//! into frames and their parsing out of [`RawFrame`]s.
//!
//! Layouts use the types crate's codec: integers little endian, strings `str16`, bodies `bytes32`,
//! lists a `u16` count then the items, descriptor/properties/options by their `Codec` impls. Admin
//! command and reply text use a `u32` length instead (see [`Request::Admin`]).

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_types::codec::{Codec, DecodeError, PutExt, Reader};
use ferrymq_types::options::{GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, MsgId, Properties, Reason};

use crate::error::ProtoError;
use crate::frame::{
    add_to_frame_len, begin_frame, finish_frame, RawFrame, FLAG_LATER, FLAG_MORE, HEADER_LEN,
};
use crate::handshake::{check_magic, Hello, MAGIC};
use crate::size;

/// Frame kinds. Requests have the top bit clear, responses set, so a trace reads at a glance.
pub mod kind {
    pub const HELLO: u8 = 0x01;
    pub const CONNECT: u8 = 0x02;
    pub const DISCONNECT: u8 = 0x03;
    pub const OPEN: u8 = 0x04;
    pub const CLOSE: u8 = 0x05;
    pub const PUT: u8 = 0x06;
    pub const PUT1: u8 = 0x07;
    pub const GET: u8 = 0x08;
    pub const COMMIT: u8 = 0x09;
    pub const BACKOUT: u8 = 0x0A;
    pub const INQUIRE: u8 = 0x0B;
    pub const HEARTBEAT: u8 = 0x0C;
    pub const REGISTER_CONSUMER: u8 = 0x0D;
    pub const CANCEL_CONSUMER: u8 = 0x0E;
    pub const ADMIN: u8 = 0x0F;
    pub const CREDIT: u8 = 0x10;
    pub const SET: u8 = 0x11;
    // Publish/subscribe: requests 0x30..=0x3F, responses 0xB0..=0xBF.
    pub const OPEN_TOPIC: u8 = 0x30;
    pub const PUT1_TOPIC: u8 = 0x31;
    pub const SUBSCRIBE: u8 = 0x32;
    pub const SUB_REQUEST: u8 = 0x33;
    /// MQSTAT (protocol version 2).
    pub const STAT: u8 = 0x12;

    pub const HELLO_OK: u8 = 0x81;
    pub const STATUS: u8 = 0x82;
    pub const OPENED: u8 = 0x83;
    pub const PUT_OK: u8 = 0x84;
    pub const MESSAGE: u8 = 0x85;
    pub const INQUIRE_REPLY: u8 = 0x86;
    pub const ADMIN_REPLY: u8 = 0x87;
    pub const HEARTBEAT_ACK: u8 = 0x88;
    pub const SUBSCRIBED: u8 = 0xB0;
}

/// A request from client to server. The response echoes the request's `conv` and `req`.
// The descriptor makes the message-carrying variants large; boxing it would add an allocation to
// every put and get (the hot path) to shrink the rare small variants, and values are short-lived.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// First frame on a socket, on conversation 0.
    Hello(Hello),
    /// Opens a conversation; sent on a new conversation id chosen by the client (1..=sharecnv).
    Connect {
        qmgr: String,
        user: String,
        password: String,
        app_name: String,
    },
    Disconnect,
    /// `options` are MQOO_* bits (`ferrymq_types::options::open`).
    Open {
        name: String,
        qmgr: String,
        options: u32,
        dynamic_name: String,
    },
    Close {
        hobj: u32,
        options: u32,
    },
    Put {
        hobj: u32,
        opts: PutOptions,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
    },
    Put1 {
        name: String,
        qmgr: String,
        opts: PutOptions,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
    },
    /// The reply may come much later (a waiting get), pushed by the server when a message arrives.
    Get {
        hobj: u32,
        opts: GetOptions,
    },
    Commit,
    Backout,
    Inquire {
        hobj: u32,
        selectors: Vec<String>,
    },
    /// MQSET: `(keyword, value)` pairs as MQSC writes them (GET, PUT, TRIGGER, TRIGTYPE,
    /// TRIGDPTH, TRIGMPRI, TRIGDATA); answered with `Status`.
    Set {
        hobj: u32,
        attrs: Vec<(String, String)>,
    },
    /// Either side may send one; the peer answers `HeartbeatAck`.
    Heartbeat,
    /// Asynchronous consume (MQCB): registers (or replaces) the consumer of `hobj`; the server
    /// answers `Status`, then pushes `Message` responses carrying this request's `req`, one per
    /// credit granted with `Credit`, until `CancelConsumer`.
    RegisterConsumer {
        hobj: u32,
        opts: GetOptions,
    },
    /// Ends the consumer of `hobj`; no delivery follows the `Status` answer.
    CancelConsumer {
        hobj: u32,
    },
    /// Allows the server to push `n` more messages to the consumer of `hobj` (flow control). Has
    /// no answer.
    Credit {
        hobj: u32,
        n: u32,
    },
    /// Administrative command text (e.g. `SHUTDOWN IMMEDIATE`, later MQSC). Encoded with a `u32`
    /// length, unlike other strings, because a script may exceed 64 KiB.
    Admin {
        command: String,
    },
    /// MQOPEN of a topic for publishing: topic object `object` (may be empty) and the rest of
    /// the topic string. Answered with `Opened`, whose name is the full topic string; puts
    /// through the handle are publications.
    OpenTopic {
        object: String,
        topic: String,
        options: u32,
    },
    /// MQPUT1 to a topic; answered with `PutOk`.
    Put1Topic {
        object: String,
        topic: String,
        opts: PutOptions,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
    },
    /// MQSUB; answered with `Subscribed`.
    Subscribe(Box<SubscribeRequest>),
    /// MQSUBRQ: send the retained publications matching subscription `hsub` again; answered
    /// with `Status`.
    /// MQSTAT of `stat_type` (MQSTAT_TYPE_ASYNC_ERROR): the status of the conversation's
    /// asynchronous puts since the last MQSTAT, which it resets. Answered with `InquireReply`
    /// (PUTSUCCESS, PUTWARNING, PUTFAILURE, COMPCODE, REASON, OBJNAME).
    Stat {
        stat_type: u32,
    },
    SubRequest {
        hsub: u32,
    },
}

/// What MQSUB's descriptor (MQSD) carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscribeRequest {
    /// MQSO_* options (`ferrymq_types::options::sub`).
    pub options: u32,
    pub object: String,
    pub topic: String,
    pub name: String,
    /// The queue publications go to (empty with MQSO_MANAGED).
    pub dest: String,
    pub dest_qmgr: String,
    pub selector: String,
    /// Tenths of a second; -1 unlimited.
    pub expiry: i32,
    pub user_data: String,
    /// SubCorrelId, with MQSO_SET_CORREL_ID: sent last, and only when given, so a request
    /// without it is what it was before the field existed.
    pub correl_id: Option<[u8; 24]>,
}

/// The group fields a put in logical order was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutGroup {
    pub group_id: MsgId,
    pub msg_seq_number: i32,
    pub offset: i32,
}

/// A response from server to client.
// The descriptor makes the message-carrying variants large; boxing it would add an allocation to
// every put and get (the hot path) to shrink the rare small variants, and values are short-lived.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// Answer to `Hello` with the negotiated parameters, on conversation 0.
    HelloOk {
        version: u16,
        max_msg_len: u32,
        heartbeat_ms: u32,
        sharecnv: u16,
        qmgr_name: String,
        server_id: String,
    },
    /// Success (`Reason::NONE`) of a call that returns no data, or any failure.
    Status {
        reason: Reason,
        message: String,
    },
    /// `name` is the resolved queue name (e.g. the generated name of a dynamic queue).
    Opened {
        hobj: u32,
        name: String,
        /// The object's DEFPRESP is ASYNC: a put asking MQPMO_RESPONSE_AS_Q_DEF (or
        /// _AS_TOPIC_DEF) is not answered. Sent (as a trailing byte) only when set, and only on
        /// protocol version 2, whose clients read it.
        async_default: bool,
    },
    /// `group`: the GroupId, MsgSeqNumber and Offset the queue manager gave a put in logical
    /// order (MQPMO_LOGICAL_ORDER), encoded after the identifiers only when present.
    PutOk {
        msg_id: MsgId,
        correl_id: MsgId,
        group: Option<PutGroup>,
    },
    /// A got (or browsed, or consumed) message. `reason` is `NONE`, or `TRUNCATED_MSG_ACCEPTED`
    /// when only the first `body.len()` of `data_len` bytes were returned.
    Message {
        reason: Reason,
        data_len: u32,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
    },
    InquireReply {
        attrs: Vec<(String, String)>,
    },
    /// Output of an admin command; `text` has a `u32` length like the command's.
    AdminReply {
        text: String,
        reason: Reason,
    },
    HeartbeatAck,
    /// Answer to `Subscribe`: the subscription handle, the handle of the managed queue opened
    /// for input (0 when the subscriber named its queue) and the queue's name.
    Subscribed {
        hsub: u32,
        hobj: u32,
        queue: String,
    },
}

impl Request {
    /// The frame kind this request is sent as.
    pub fn kind(&self) -> u8 {
        match self {
            Request::Hello(_) => kind::HELLO,
            Request::Connect { .. } => kind::CONNECT,
            Request::Disconnect => kind::DISCONNECT,
            Request::Open { .. } => kind::OPEN,
            Request::Close { .. } => kind::CLOSE,
            Request::Put { .. } => kind::PUT,
            Request::Put1 { .. } => kind::PUT1,
            Request::Get { .. } => kind::GET,
            Request::Commit => kind::COMMIT,
            Request::Backout => kind::BACKOUT,
            Request::Inquire { .. } => kind::INQUIRE,
            Request::Set { .. } => kind::SET,
            Request::Heartbeat => kind::HEARTBEAT,
            Request::RegisterConsumer { .. } => kind::REGISTER_CONSUMER,
            Request::CancelConsumer { .. } => kind::CANCEL_CONSUMER,
            Request::Credit { .. } => kind::CREDIT,
            Request::Admin { .. } => kind::ADMIN,
            Request::OpenTopic { .. } => kind::OPEN_TOPIC,
            Request::Put1Topic { .. } => kind::PUT1_TOPIC,
            Request::Subscribe(_) => kind::SUBSCRIBE,
            Request::SubRequest { .. } => kind::SUB_REQUEST,
            Request::Stat { .. } => kind::STAT,
        }
    }

    /// Name of the request, for logs and errors.
    pub fn name(&self) -> &'static str {
        request_name(self.kind()).unwrap_or("request")
    }

    /// Bytes of the whole encoded frame, header included: lets a sender check the negotiated
    /// frame limit (and fail with MSG_TOO_BIG_FOR_CHANNEL) before encoding anything.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    fn body_len(&self) -> usize {
        use size::*;
        match self {
            Request::Hello(h) => h.encoded_len(),
            Request::Connect {
                qmgr,
                user,
                password,
                app_name,
            } => str16(qmgr) + str16(user) + str16(password) + str16(app_name),
            Request::Disconnect | Request::Commit | Request::Backout | Request::Heartbeat => 0,
            Request::Open {
                name,
                qmgr,
                options: _,
                dynamic_name,
            } => str16(name) + str16(qmgr) + 4 + str16(dynamic_name),
            Request::Close { .. } => 8,
            Request::Put {
                hobj: _,
                opts,
                md,
                props,
                body,
            } => 4 + put_options(opts) + descriptor(md) + properties(props) + bytes32(body),
            Request::Put1 {
                name,
                qmgr,
                opts,
                md,
                props,
                body,
            } => {
                str16(name)
                    + str16(qmgr)
                    + put_options(opts)
                    + descriptor(md)
                    + properties(props)
                    + bytes32(body)
            }
            Request::Get { hobj: _, opts } | Request::RegisterConsumer { hobj: _, opts } => {
                4 + get_options(opts)
            }
            Request::Inquire { hobj: _, selectors } => {
                4 + 2 + selectors.iter().map(|s| str16(s)).sum::<usize>()
            }
            Request::Set { hobj: _, attrs } => {
                4 + 2
                    + attrs
                        .iter()
                        .map(|(k, v)| str16(k) + str16(v))
                        .sum::<usize>()
            }
            Request::CancelConsumer { .. } => 4,
            Request::Credit { .. } => 8,
            Request::Admin { command } => bytes32(command.as_bytes()),
            Request::OpenTopic { object, topic, .. } => str16(object) + str16(topic) + 4,
            Request::Put1Topic {
                object,
                topic,
                opts,
                md,
                props,
                body,
            } => {
                str16(object)
                    + str16(topic)
                    + put_options(opts)
                    + descriptor(md)
                    + properties(props)
                    + bytes32(body)
            }
            Request::Subscribe(s) => {
                4 + str16(&s.object)
                    + str16(&s.topic)
                    + str16(&s.name)
                    + str16(&s.dest)
                    + str16(&s.dest_qmgr)
                    + str16(&s.selector)
                    + 4
                    + str16(&s.user_data)
                    + s.correl_id.map_or(0, |c| c.len())
            }
            Request::SubRequest { .. } => 4,
            Request::Stat { .. } => 4,
        }
    }
}

impl Response {
    /// The frame kind this response is sent as.
    pub fn kind(&self) -> u8 {
        match self {
            Response::HelloOk { .. } => kind::HELLO_OK,
            Response::Status { .. } => kind::STATUS,
            Response::Opened { .. } => kind::OPENED,
            Response::PutOk { .. } => kind::PUT_OK,
            Response::Message { .. } => kind::MESSAGE,
            Response::InquireReply { .. } => kind::INQUIRE_REPLY,
            Response::AdminReply { .. } => kind::ADMIN_REPLY,
            Response::HeartbeatAck => kind::HEARTBEAT_ACK,
            Response::Subscribed { .. } => kind::SUBSCRIBED,
        }
    }

    /// Name of the response, for logs and errors.
    pub fn name(&self) -> &'static str {
        response_name(self.kind()).unwrap_or("response")
    }

    /// Bytes of the whole encoded frame, header included.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    fn body_len(&self) -> usize {
        use size::*;
        match self {
            Response::HelloOk {
                qmgr_name,
                server_id,
                ..
            } => MAGIC.len() + 2 + 4 + 4 + 2 + str16(qmgr_name) + str16(server_id),
            Response::Status { reason: _, message } => 4 + str16(message),
            Response::Opened {
                hobj: _,
                name,
                async_default,
            } => 4 + str16(name) + usize::from(*async_default),
            Response::PutOk { group, .. } => 24 + 24 + if group.is_some() { 32 } else { 0 },
            Response::Message {
                reason: _,
                data_len: _,
                md,
                props,
                body,
            } => 4 + 4 + descriptor(md) + properties(props) + bytes32(body),
            Response::InquireReply { attrs } => {
                2 + attrs
                    .iter()
                    .map(|(k, v)| str16(k) + str16(v))
                    .sum::<usize>()
            }
            Response::AdminReply { text, reason: _ } => bytes32(text.as_bytes()) + 4,
            Response::HeartbeatAck => 0,
            Response::Subscribed { queue, .. } => 8 + str16(queue),
        }
    }
}

fn request_name(k: u8) -> Option<&'static str> {
    Some(match k {
        kind::HELLO => "Hello",
        kind::CONNECT => "Connect",
        kind::DISCONNECT => "Disconnect",
        kind::OPEN => "Open",
        kind::CLOSE => "Close",
        kind::PUT => "Put",
        kind::PUT1 => "Put1",
        kind::GET => "Get",
        kind::COMMIT => "Commit",
        kind::BACKOUT => "Backout",
        kind::INQUIRE => "Inquire",
        kind::SET => "Set",
        kind::HEARTBEAT => "Heartbeat",
        kind::REGISTER_CONSUMER => "RegisterConsumer",
        kind::CANCEL_CONSUMER => "CancelConsumer",
        kind::CREDIT => "Credit",
        kind::ADMIN => "Admin",
        kind::OPEN_TOPIC => "OpenTopic",
        kind::PUT1_TOPIC => "Put1Topic",
        kind::SUBSCRIBE => "Subscribe",
        kind::SUB_REQUEST => "SubRequest",
        kind::STAT => "Stat",
        _ => return None,
    })
}

fn response_name(k: u8) -> Option<&'static str> {
    Some(match k {
        kind::HELLO_OK => "HelloOk",
        kind::STATUS => "Status",
        kind::OPENED => "Opened",
        kind::PUT_OK => "PutOk",
        kind::MESSAGE => "Message",
        kind::INQUIRE_REPLY => "InquireReply",
        kind::ADMIN_REPLY => "AdminReply",
        kind::HEARTBEAT_ACK => "HeartbeatAck",
        kind::SUBSCRIBED => "Subscribed",
        _ => return None,
    })
}

/// Writes a list's `u16` count. Longer lists cannot be described, so only the first `u16::MAX`
/// items are sent (callers bound selectors and attributes far below that); returns that count.
fn put_count(out: &mut BytesMut, n: usize) -> usize {
    debug_assert!(
        n <= u16::MAX as usize,
        "list of {n} items does not fit a u16 count"
    );
    let n = n.min(u16::MAX as usize);
    out.put_u16_le(n as u16);
    n
}

fn put_text32(out: &mut BytesMut, s: &str) {
    out.put_bytes32(s.as_bytes());
}

fn text32(r: &mut Reader, what: &'static str) -> Result<String, DecodeError> {
    let b = r.bytes32(what)?;
    String::from_utf8(b.to_vec()).map_err(|_| DecodeError::invalid(what, "not UTF-8"))
}

fn reason(r: &mut Reader, what: &'static str) -> Result<Reason, DecodeError> {
    Ok(Reason::from_code(r.u32(what)?))
}

/// Appends `r` as one frame on conversation `conv` with request id `req`. Appending lets several
/// frames (a put and its commit) go out in one write.
pub fn encode_request(conv: u16, req: u32, r: &Request, out: &mut BytesMut) {
    encode_request_inner(conv, req, r, out, false);
}

/// Appends `r` as one frame, except the body of a put: that body is returned, and must be
/// written right after what was appended (the frame's length counts it), so that it goes out
/// from its own buffer instead of being copied into the frame's. The bytes on the wire are those
/// of [`encode_request`].
pub fn encode_request_split(conv: u16, req: u32, r: &Request, out: &mut BytesMut) -> Option<Bytes> {
    encode_request_inner(conv, req, r, out, true)
}

/// Writes a put's body, or only its length when the body is sent after the frame (`split`).
fn put_body(out: &mut BytesMut, body: &Bytes, split: bool) {
    if split {
        out.put_u32_le(body.len() as u32);
    } else {
        out.put_bytes32(body);
    }
}

fn encode_request_inner(
    conv: u16,
    req: u32,
    r: &Request,
    out: &mut BytesMut,
    split: bool,
) -> Option<Bytes> {
    let tail = match r {
        Request::Put { body, .. }
        | Request::Put1 { body, .. }
        | Request::Put1Topic { body, .. }
            if split =>
        {
            Some(body.clone())
        }
        _ => None,
    };
    let split = tail.is_some();
    out.reserve(r.encoded_len() - tail.as_ref().map_or(0, |b| b.len()));
    let start = begin_frame(out, r.kind(), conv, req);
    match r {
        Request::Hello(h) => h.encode(out),
        Request::Connect {
            qmgr,
            user,
            password,
            app_name,
        } => {
            out.put_str16(qmgr);
            out.put_str16(user);
            out.put_str16(password);
            out.put_str16(app_name);
        }
        Request::Disconnect | Request::Commit | Request::Backout | Request::Heartbeat => {}
        Request::Open {
            name,
            qmgr,
            options,
            dynamic_name,
        } => {
            out.put_str16(name);
            out.put_str16(qmgr);
            out.put_u32_le(*options);
            out.put_str16(dynamic_name);
        }
        Request::Close { hobj, options } => {
            out.put_u32_le(*hobj);
            out.put_u32_le(*options);
        }
        Request::Put {
            hobj,
            opts,
            md,
            props,
            body,
        } => {
            out.put_u32_le(*hobj);
            opts.encode(out);
            md.encode(out);
            props.encode(out);
            put_body(out, body, split);
        }
        Request::Put1 {
            name,
            qmgr,
            opts,
            md,
            props,
            body,
        } => {
            out.put_str16(name);
            out.put_str16(qmgr);
            opts.encode(out);
            md.encode(out);
            props.encode(out);
            put_body(out, body, split);
        }
        Request::Get { hobj, opts } | Request::RegisterConsumer { hobj, opts } => {
            out.put_u32_le(*hobj);
            opts.encode(out);
        }
        Request::Inquire { hobj, selectors } => {
            out.put_u32_le(*hobj);
            let n = put_count(out, selectors.len());
            for s in &selectors[..n] {
                out.put_str16(s);
            }
        }
        Request::Set { hobj, attrs } => {
            out.put_u32_le(*hobj);
            let n = put_count(out, attrs.len());
            for (k, v) in &attrs[..n] {
                out.put_str16(k);
                out.put_str16(v);
            }
        }
        Request::CancelConsumer { hobj } => out.put_u32_le(*hobj),
        Request::Credit { hobj, n } => {
            out.put_u32_le(*hobj);
            out.put_u32_le(*n);
        }
        Request::Admin { command } => put_text32(out, command),
        Request::OpenTopic {
            object,
            topic,
            options,
        } => {
            out.put_str16(object);
            out.put_str16(topic);
            out.put_u32_le(*options);
        }
        Request::Put1Topic {
            object,
            topic,
            opts,
            md,
            props,
            body,
        } => {
            out.put_str16(object);
            out.put_str16(topic);
            opts.encode(out);
            md.encode(out);
            props.encode(out);
            put_body(out, body, split);
        }
        Request::Subscribe(s) => {
            out.put_u32_le(s.options);
            out.put_str16(&s.object);
            out.put_str16(&s.topic);
            out.put_str16(&s.name);
            out.put_str16(&s.dest);
            out.put_str16(&s.dest_qmgr);
            out.put_str16(&s.selector);
            out.put_i32_le(s.expiry);
            out.put_str16(&s.user_data);
            if let Some(c) = &s.correl_id {
                out.put_slice(c);
            }
        }
        Request::SubRequest { hsub } => out.put_u32_le(*hsub),
        Request::Stat { stat_type } => out.put_u32_le(*stat_type),
    }
    finish_frame(out, start);
    if let Some(b) = &tail {
        add_to_frame_len(out, start, b.len());
    }
    tail
}

/// Appends `r` as one frame; `conv` and `req` echo the request being answered.
pub fn encode_response(conv: u16, req: u32, r: &Response, out: &mut BytesMut) {
    encode_response_inner(conv, req, r, out, false);
}

/// Appends `r` as one frame, except the body of a message: that body is returned, and must be
/// written right after what was appended (the frame's length counts it). The body is then
/// written from its own buffer instead of being copied into the frame's.
pub fn encode_response_split(
    conv: u16,
    req: u32,
    r: &Response,
    out: &mut BytesMut,
) -> Option<Bytes> {
    encode_response_inner(conv, req, r, out, true)
}

fn encode_response_inner(
    conv: u16,
    req: u32,
    r: &Response,
    out: &mut BytesMut,
    split: bool,
) -> Option<Bytes> {
    let mut tail = None;
    if split {
        if let Response::Message { body, .. } = r {
            tail = Some(body.clone());
        }
    }
    out.reserve(r.encoded_len() - tail.as_ref().map_or(0, |b| b.len()));
    let start = begin_frame(out, r.kind(), conv, req);
    match r {
        Response::HelloOk {
            version,
            max_msg_len,
            heartbeat_ms,
            sharecnv,
            qmgr_name,
            server_id,
        } => {
            out.put_slice(&MAGIC);
            out.put_u16_le(*version);
            out.put_u32_le(*max_msg_len);
            out.put_u32_le(*heartbeat_ms);
            out.put_u16_le(*sharecnv);
            out.put_str16(qmgr_name);
            out.put_str16(server_id);
        }
        Response::Status { reason, message } => {
            out.put_u32_le(reason.code());
            out.put_str16(message);
        }
        Response::Opened {
            hobj,
            name,
            async_default,
        } => {
            out.put_u32_le(*hobj);
            out.put_str16(name);
            if *async_default {
                out.put_u8(1);
            }
        }
        Response::PutOk {
            msg_id,
            correl_id,
            group,
        } => {
            out.put_slice(msg_id);
            out.put_slice(correl_id);
            if let Some(g) = group {
                out.put_slice(&g.group_id);
                out.put_i32_le(g.msg_seq_number);
                out.put_i32_le(g.offset);
            }
        }
        Response::Message {
            reason,
            data_len,
            md,
            props,
            body,
        } => {
            out.put_u32_le(reason.code());
            out.put_u32_le(*data_len);
            md.encode(out);
            props.encode(out);
            if tail.is_some() {
                out.put_u32_le(body.len() as u32);
            } else {
                out.put_bytes32(body);
            }
        }
        Response::InquireReply { attrs } => {
            let n = put_count(out, attrs.len());
            for (k, v) in &attrs[..n] {
                out.put_str16(k);
                out.put_str16(v);
            }
        }
        Response::AdminReply { text, reason } => {
            put_text32(out, text);
            out.put_u32_le(reason.code());
        }
        Response::HeartbeatAck => {}
        Response::Subscribed { hsub, hobj, queue } => {
            out.put_u32_le(*hsub);
            out.put_u32_le(*hobj);
            out.put_str16(queue);
        }
    }
    finish_frame(out, start);
    if let Some(b) = &tail {
        add_to_frame_len(out, start, b.len());
    }
    tail
}

/// Refuses segmented frames: `MORE` is reserved and a peer setting it now is not speaking our
/// version of the protocol. (The decoder already refused every other flag bit.) `LATER` is a
/// request's hint to the server's writer, allowed on requests only.
fn check_unsegmented(f: &RawFrame, allowed: u8) -> Result<(), ProtoError> {
    if f.flags & FLAG_MORE != 0 {
        return Err(ProtoError::BadHeader(
            "segmented frames (MORE flag) are not supported".into(),
        ));
    }
    if f.flags & !allowed != 0 {
        return Err(ProtoError::BadHeader(format!(
            "reserved flag bits set: 0x{:02x}",
            f.flags
        )));
    }
    Ok(())
}

/// The handshake belongs to the connection, not to a conversation.
fn check_conv_zero(f: &RawFrame, name: &str) -> Result<(), ProtoError> {
    if f.conv != 0 {
        return Err(ProtoError::BadHeader(format!(
            "{name} on conversation {} instead of 0",
            f.conv
        )));
    }
    Ok(())
}

/// Interprets a frame from a client. Bodies are zero-copy slices of the frame; every byte of the
/// frame must be consumed, since trailing bytes mean the peer and we disagree on the layout.
pub fn parse_request(f: &RawFrame) -> Result<Request, ProtoError> {
    check_unsegmented(f, FLAG_LATER)?;
    let name = request_name(f.kind).ok_or(ProtoError::UnknownKind(f.kind))?;
    let mut r = Reader::new(f.body.clone());
    let req = if f.kind == kind::HELLO {
        check_conv_zero(f, name)?;
        Request::Hello(Hello::decode(&mut r)?)
    } else {
        decode_request(f.kind, &mut r).map_err(ProtoError::body(name))?
    };
    r.finish("frame body").map_err(ProtoError::body(name))?;
    Ok(req)
}

fn decode_request(k: u8, r: &mut Reader) -> Result<Request, DecodeError> {
    Ok(match k {
        kind::CONNECT => Request::Connect {
            qmgr: r.str16("qmgr")?,
            user: r.str16("user")?,
            password: r.str16("password")?,
            app_name: r.str16("app_name")?,
        },
        kind::DISCONNECT => Request::Disconnect,
        kind::OPEN => Request::Open {
            name: r.str16("name")?,
            qmgr: r.str16("qmgr")?,
            options: r.u32("open options")?,
            dynamic_name: r.str16("dynamic_name")?,
        },
        kind::CLOSE => Request::Close {
            hobj: r.u32("hobj")?,
            options: r.u32("close options")?,
        },
        kind::PUT => Request::Put {
            hobj: r.u32("hobj")?,
            opts: PutOptions::decode(r)?,
            md: MessageDescriptor::decode(r)?,
            props: Properties::decode(r)?,
            body: r.bytes32("message body")?,
        },
        kind::PUT1 => Request::Put1 {
            name: r.str16("name")?,
            qmgr: r.str16("qmgr")?,
            opts: PutOptions::decode(r)?,
            md: MessageDescriptor::decode(r)?,
            props: Properties::decode(r)?,
            body: r.bytes32("message body")?,
        },
        kind::GET => Request::Get {
            hobj: r.u32("hobj")?,
            opts: GetOptions::decode(r)?,
        },
        kind::COMMIT => Request::Commit,
        kind::BACKOUT => Request::Backout,
        kind::INQUIRE => {
            let hobj = r.u32("hobj")?;
            let n = r.u16("selector count")?;
            // No preallocation from the count: a hostile count must not cost memory before the
            // bytes backing it have been seen.
            let mut selectors = Vec::new();
            for _ in 0..n {
                selectors.push(r.str16("selector")?);
            }
            Request::Inquire { hobj, selectors }
        }
        kind::SET => {
            let hobj = r.u32("hobj")?;
            let n = r.u16("attribute count")?;
            let mut attrs = Vec::new();
            for _ in 0..n {
                attrs.push((r.str16("attribute")?, r.str16("attribute value")?));
            }
            Request::Set { hobj, attrs }
        }
        kind::HEARTBEAT => Request::Heartbeat,
        kind::REGISTER_CONSUMER => Request::RegisterConsumer {
            hobj: r.u32("hobj")?,
            opts: GetOptions::decode(r)?,
        },
        kind::CANCEL_CONSUMER => Request::CancelConsumer {
            hobj: r.u32("hobj")?,
        },
        kind::CREDIT => Request::Credit {
            hobj: r.u32("hobj")?,
            n: r.u32("credit")?,
        },
        kind::ADMIN => Request::Admin {
            command: text32(r, "admin command")?,
        },
        kind::OPEN_TOPIC => Request::OpenTopic {
            object: r.str16("topic object")?,
            topic: r.str16("topic string")?,
            options: r.u32("open options")?,
        },
        kind::PUT1_TOPIC => Request::Put1Topic {
            object: r.str16("topic object")?,
            topic: r.str16("topic string")?,
            opts: PutOptions::decode(r)?,
            md: MessageDescriptor::decode(r)?,
            props: Properties::decode(r)?,
            body: r.bytes32("message body")?,
        },
        kind::SUBSCRIBE => Request::Subscribe(Box::new(SubscribeRequest {
            options: r.u32("subscription options")?,
            object: r.str16("topic object")?,
            topic: r.str16("topic string")?,
            name: r.str16("subscription name")?,
            dest: r.str16("destination queue")?,
            dest_qmgr: r.str16("destination queue manager")?,
            selector: r.str16("selector")?,
            expiry: r.i32("subscription expiry")?,
            user_data: r.str16("subscription user data")?,
            correl_id: if r.remaining() > 0 {
                Some(r.fixed::<24>("subscription correl_id")?)
            } else {
                None
            },
        })),
        kind::STAT => Request::Stat {
            stat_type: r.u32("stat type")?,
        },
        kind::SUB_REQUEST => Request::SubRequest {
            hsub: r.u32("hsub")?,
        },
        other => {
            return Err(DecodeError::invalid(
                "frame kind",
                format!("0x{other:02x} is not a request"),
            ))
        }
    })
}

/// Interprets a frame from a server, with the same rules as [`parse_request`].
pub fn parse_response(f: &RawFrame) -> Result<Response, ProtoError> {
    check_unsegmented(f, 0)?;
    let name = response_name(f.kind).ok_or(ProtoError::UnknownKind(f.kind))?;
    let mut r = Reader::new(f.body.clone());
    if f.kind == kind::HELLO_OK {
        check_conv_zero(f, name)?;
        check_magic(&mut r)?;
    }
    let resp = decode_response(f.kind, &mut r).map_err(ProtoError::body(name))?;
    r.finish("frame body").map_err(ProtoError::body(name))?;
    Ok(resp)
}

fn decode_response(k: u8, r: &mut Reader) -> Result<Response, DecodeError> {
    Ok(match k {
        kind::HELLO_OK => Response::HelloOk {
            version: r.u16("version")?,
            max_msg_len: r.u32("max_msg_len")?,
            heartbeat_ms: r.u32("heartbeat_ms")?,
            sharecnv: r.u16("sharecnv")?,
            qmgr_name: r.str16("qmgr_name")?,
            server_id: r.str16("server_id")?,
        },
        kind::STATUS => Response::Status {
            reason: reason(r, "reason")?,
            message: r.str16("message")?,
        },
        kind::OPENED => Response::Opened {
            hobj: r.u32("hobj")?,
            name: r.str16("name")?,
            async_default: r.remaining() > 0 && r.u8("async_default")? != 0,
        },
        kind::PUT_OK => Response::PutOk {
            msg_id: r.fixed::<24>("msg_id")?,
            correl_id: r.fixed::<24>("correl_id")?,
            group: if r.remaining() > 0 {
                Some(PutGroup {
                    group_id: r.fixed::<24>("group_id")?,
                    msg_seq_number: r.i32("msg_seq_number")?,
                    offset: r.i32("offset")?,
                })
            } else {
                None
            },
        },
        kind::MESSAGE => {
            let code = r.u32("message reason")?;
            let reason = Reason::from_code(code);
            if code != reason.code()
                || !matches!(reason, Reason::NONE | Reason::TRUNCATED_MSG_ACCEPTED)
            {
                return Err(DecodeError::invalid(
                    "message reason",
                    format!("{code} is neither NONE nor TRUNCATED_MSG_ACCEPTED"),
                ));
            }
            let data_len = r.u32("data_len")?;
            let md = MessageDescriptor::decode(r)?;
            let props = Properties::decode(r)?;
            let body = r.bytes32("message body")?;
            // A whole message has exactly its length; a truncated one is shorter than the original.
            let consistent = if reason == Reason::NONE {
                body.len() == data_len as usize
            } else {
                body.len() <= data_len as usize
            };
            if !consistent {
                return Err(DecodeError::invalid(
                    "data_len",
                    format!("{data_len} with a {} byte body and {reason}", body.len()),
                ));
            }
            Response::Message {
                reason,
                data_len,
                md,
                props,
                body,
            }
        }
        kind::INQUIRE_REPLY => {
            let n = r.u16("attribute count")?;
            let mut attrs = Vec::new();
            for _ in 0..n {
                attrs.push((r.str16("attribute name")?, r.str16("attribute value")?));
            }
            Response::InquireReply { attrs }
        }
        kind::ADMIN_REPLY => Response::AdminReply {
            text: text32(r, "admin reply")?,
            reason: reason(r, "reason")?,
        },
        kind::HEARTBEAT_ACK => Response::HeartbeatAck,
        kind::SUBSCRIBED => Response::Subscribed {
            hsub: r.u32("hsub")?,
            hobj: r.u32("hobj")?,
            queue: r.str16("queue")?,
        },
        other => {
            return Err(DecodeError::invalid(
                "frame kind",
                format!("0x{other:02x} is not a response"),
            ))
        }
    })
}
