//! FerryMQ's native wire protocol: this crate owns the protocol — frames and their header, the
//! handshake and its negotiation, every request and response and their encoding, and the checks of
//! limits (frame size, flags, versions) applied to what a peer sends — and does no I/O, so that the
//! server, the client, the simulator and the fuzzers share one codec and cannot drift apart.
//! Callers feed received bytes to a [`FrameDecoder`], turn each [`RawFrame`] into a [`Request`] or
//! [`Response`] with [`parse_request`] / [`parse_response`], and append outgoing frames to a buffer
//! with [`encode_request`] / [`encode_response`] (several frames may share one write).

pub mod channel;
mod control;
mod error;
mod frame;
mod handshake;
mod message;
mod size;

pub use control::ControlCommand;
pub use error::ProtoError;
pub use frame::{
    frame_limit_for, read_room, FrameDecoder, RawFrame, AFTER_LARGE_READ_BYTES, FLAG_LATER,
    FLAG_MORE, FRAME_END_ALIGN, HEADER_LEN,
};
pub use handshake::{
    negotiate, Hello, MAGIC, PRE_HANDSHAKE_FRAME_MAX_BYTES, PROTOCOL_VERSION,
    PROTOCOL_VERSION_ANSWER_LATER, PROTOCOL_VERSION_ASYNC_PUT, PROTOCOL_VERSION_MIN,
};
pub use message::{
    encode_request, encode_request_split, encode_response, encode_response_split, kind,
    parse_request, parse_response, PutGroup, Request, Response, SubscribeRequest,
};
