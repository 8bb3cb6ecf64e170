//! Why bytes from a peer were refused. Every protocol error ends the connection (the byte stream can
//! no longer be trusted to be in step), so each carries the MQ reason the other side is told.

use ferrymq_types::codec::DecodeError;
use ferrymq_types::Reason;

/// A violation of the native protocol by the peer (or a handshake that cannot succeed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The length field announces a frame larger than this connection allows; detected from the
    /// first four bytes so that a hostile peer cannot make us buffer the body first.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes for this connection")]
    FrameTooLarge { len: u32, max: u32 },
    #[error("bad frame header: {0}")]
    BadHeader(String),
    #[error("unknown frame kind 0x{0:02x}")]
    UnknownKind(u8),
    #[error("malformed {kind} frame body: {source}")]
    Body {
        kind: &'static str,
        #[source]
        source: DecodeError,
    },
    #[error("handshake does not start with the FerryMQ magic bytes (not a FerryMQ peer?)")]
    BadMagic,
    #[error(
        "no common protocol version: we speak {ours_min}..={ours_max}, the peer speaks {theirs_min}..={theirs_max}"
    )]
    VersionMismatch {
        ours_min: u16,
        ours_max: u16,
        theirs_min: u16,
        theirs_max: u16,
    },
}

impl ProtoError {
    /// The MQ reason reported for this error to the application or the peer.
    pub fn reason(&self) -> Reason {
        match self {
            ProtoError::FrameTooLarge { .. } => Reason::MSG_TOO_BIG_FOR_CHANNEL,
            ProtoError::BadHeader(_)
            | ProtoError::UnknownKind(_)
            | ProtoError::Body { .. }
            | ProtoError::BadMagic
            | ProtoError::VersionMismatch { .. } => Reason::HEADER_ERROR,
        }
    }

    pub(crate) fn body(kind: &'static str) -> impl FnOnce(DecodeError) -> ProtoError {
        move |source| ProtoError::Body { kind, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_frames_map_to_msg_too_big_for_channel_and_the_rest_to_protocol_error() {
        assert_eq!(
            ProtoError::FrameTooLarge { len: 9, max: 8 }.reason(),
            Reason::MSG_TOO_BIG_FOR_CHANNEL
        );
        assert_eq!(ProtoError::UnknownKind(0x7f).reason(), Reason::HEADER_ERROR);
        assert_eq!(ProtoError::BadMagic.reason(), Reason::HEADER_ERROR);
    }

    #[test]
    fn messages_name_what_was_wrong() {
        let e = ProtoError::FrameTooLarge {
            len: 70_000,
            max: 65_536,
        };
        assert_eq!(
            e.to_string(),
            "frame of 70000 bytes exceeds the limit of 65536 bytes for this connection"
        );
        assert_eq!(
            ProtoError::UnknownKind(0x42).to_string(),
            "unknown frame kind 0x42"
        );
        let e = ProtoError::Body {
            kind: "Put",
            source: DecodeError::Truncated { what: "body" },
        };
        assert_eq!(
            e.to_string(),
            "malformed Put frame body: truncated input while reading body"
        );
        let e = ProtoError::VersionMismatch {
            ours_min: 1,
            ours_max: 1,
            theirs_min: 2,
            theirs_max: 3,
        };
        assert!(
            e.to_string().contains("1..=1") && e.to_string().contains("2..=3"),
            "{e}"
        );
    }
}
