//! The handshake: the client's `Hello` (first frame on a socket) and the negotiation of the
//! connection's parameters that the server answers with `HelloOk`.

use bytes::{BufMut, BytesMut};
use ferrymq_types::codec::{DecodeError, PutExt, Reader};
use ferrymq_types::limits::{HEARTBEAT_DEFAULT_MS, MSG_LEN_MAX_BYTES, SHARECNV_DEFAULT};

use crate::error::ProtoError;

/// Newest protocol version this build speaks. Version 2 adds asynchronous put response: the
/// put flag asking for no answer, MQSTAT, and the DEFPRESP byte of `Opened`. Version 3 adds the
/// request flag `LATER` ([`crate::FLAG_LATER`]).
pub const PROTOCOL_VERSION: u16 = 3;
/// The first version with asynchronous put response.
pub const PROTOCOL_VERSION_ASYNC_PUT: u16 = 2;
/// The first version whose servers take the request flag `LATER`.
pub const PROTOCOL_VERSION_ANSWER_LATER: u16 = 3;
/// Oldest protocol version this build still speaks.
pub const PROTOCOL_VERSION_MIN: u16 = 1;
/// First bytes of `Hello` and `HelloOk` bodies, so that a FerryMQ peer connected to the wrong port
/// (or something else connected to ours) fails at once with a clear error.
pub const MAGIC: [u8; 4] = *b"FMQ1";
/// Before the handshake completes the peer may send only small frames.
pub const PRE_HANDSHAKE_FRAME_MAX_BYTES: u32 = 64 * 1024;

/// What the client proposes for its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub version_min: u16,
    pub version_max: u16,
    /// Largest message the client wants to exchange; 0 = no preference (take the server's).
    pub max_msg_len: u32,
    /// Heartbeat interval the client wants; 0 = none (the server may still ask for one).
    pub heartbeat_ms: u32,
    /// Conversations the client wants to share the socket (SHARECNV); 0 is taken as 1.
    pub sharecnv: u16,
    /// Shown by the server in its connection displays and logs.
    pub client_name: String,
    /// The server-connection channel the socket runs as (MQ's MQCD ChannelName). Empty means the
    /// queue manager's default, SYSTEM.DEF.SVRCONN. A trailing field, written only when not
    /// empty, so that a Hello from a client that predates it still decodes, and a client that
    /// names no channel still speaks to a server that predates it.
    pub channel: String,
}

impl Hello {
    /// The proposal of this build with the default limits.
    pub fn new(client_name: impl Into<String>) -> Hello {
        Hello {
            version_min: PROTOCOL_VERSION_MIN,
            version_max: PROTOCOL_VERSION,
            max_msg_len: MSG_LEN_MAX_BYTES,
            heartbeat_ms: HEARTBEAT_DEFAULT_MS,
            sharecnv: SHARECNV_DEFAULT,
            client_name: client_name.into(),
            channel: String::new(),
        }
    }

    pub(crate) fn encoded_len(&self) -> usize {
        let channel = if self.channel.is_empty() {
            0
        } else {
            crate::size::str16(&self.channel)
        };
        MAGIC.len() + 2 + 2 + 4 + 4 + 2 + crate::size::str16(&self.client_name) + channel
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_slice(&MAGIC);
        out.put_u16_le(self.version_min);
        out.put_u16_le(self.version_max);
        out.put_u32_le(self.max_msg_len);
        out.put_u32_le(self.heartbeat_ms);
        out.put_u16_le(self.sharecnv);
        out.put_str16(&self.client_name);
        if !self.channel.is_empty() {
            out.put_str16(&self.channel);
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Hello, ProtoError> {
        check_magic(r)?;
        let body = ProtoError::body("Hello");
        let decode = |r: &mut Reader| -> Result<Hello, DecodeError> {
            Ok(Hello {
                version_min: r.u16("version_min")?,
                version_max: r.u16("version_max")?,
                max_msg_len: r.u32("max_msg_len")?,
                heartbeat_ms: r.u32("heartbeat_ms")?,
                sharecnv: r.u16("sharecnv")?,
                client_name: r.str16("client_name")?,
                channel: if r.remaining() > 0 {
                    r.str16("channel")?
                } else {
                    String::new()
                },
            })
        };
        decode(r).map_err(body)
    }
}

/// Reads and checks the magic bytes. A body too short to hold them is as foreign as a wrong one.
pub(crate) fn check_magic(r: &mut Reader) -> Result<(), ProtoError> {
    match r.fixed::<4>("magic") {
        Ok(m) if m == MAGIC => Ok(()),
        _ => Err(ProtoError::BadMagic),
    }
}

/// The server's side of the handshake: agrees on `(version, max_msg_len, heartbeat_ms, sharecnv)`.
///
/// The version is the highest both sides speak. Message length and conversation sharing are the
/// smaller of both proposals, since each side must be able to hold what the other sends; a client
/// `max_msg_len` of 0 means "no preference", as MQ's MAXMSGL 0 does, and sharecnv is at least 1
/// because the connection always carries one conversation. The heartbeat is the larger of both
/// (the less eager side sets the pace), so it is 0 (disabled) only when both sides disable it.
pub fn negotiate(
    client: &Hello,
    server_max_msg_len: u32,
    server_heartbeat_ms: u32,
    server_sharecnv: u16,
) -> Result<(u16, u32, u32, u16), ProtoError> {
    let low = client.version_min.max(PROTOCOL_VERSION_MIN);
    let high = client.version_max.min(PROTOCOL_VERSION);
    if low > high {
        return Err(ProtoError::VersionMismatch {
            ours_min: PROTOCOL_VERSION_MIN,
            ours_max: PROTOCOL_VERSION,
            theirs_min: client.version_min,
            theirs_max: client.version_max,
        });
    }
    let client_max = if client.max_msg_len == 0 {
        u32::MAX
    } else {
        client.max_msg_len
    };
    let max_msg_len = client_max.min(server_max_msg_len).min(MSG_LEN_MAX_BYTES);
    let heartbeat_ms = client.heartbeat_ms.max(server_heartbeat_ms);
    let sharecnv = client.sharecnv.min(server_sharecnv).max(1);
    Ok((high, max_msg_len, heartbeat_ms, sharecnv))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(
        version_min: u16,
        version_max: u16,
        max_msg_len: u32,
        heartbeat_ms: u32,
        sharecnv: u16,
    ) -> Hello {
        Hello {
            version_min,
            version_max,
            max_msg_len,
            heartbeat_ms,
            sharecnv,
            client_name: "t".into(),
            channel: String::new(),
        }
    }

    #[test]
    fn negotiation_takes_the_smaller_lengths_and_sharecnv() {
        assert_eq!(
            negotiate(&hello(1, 1, 1000, 0, 5), 4000, 0, 10).unwrap(),
            (1, 1000, 0, 5)
        );
        assert_eq!(
            negotiate(&hello(1, 1, 9000, 0, 50), 4000, 0, 10).unwrap(),
            (1, 4000, 0, 10)
        );
    }

    #[test]
    fn negotiation_takes_the_larger_heartbeat_so_zero_only_when_both_disable_it() {
        assert_eq!(negotiate(&hello(1, 1, 1, 0, 1), 1, 300, 1).unwrap().2, 300);
        assert_eq!(
            negotiate(&hello(1, 1, 1, 700, 1), 1, 300, 1).unwrap().2,
            700
        );
        assert_eq!(negotiate(&hello(1, 1, 1, 0, 1), 1, 0, 1).unwrap().2, 0);
    }

    #[test]
    fn sharecnv_is_at_least_one() {
        assert_eq!(negotiate(&hello(1, 1, 1, 0, 0), 1, 0, 10).unwrap().3, 1);
        assert_eq!(negotiate(&hello(1, 1, 1, 0, 4), 1, 0, 0).unwrap().3, 1);
    }

    #[test]
    fn a_client_max_msg_len_of_zero_takes_the_servers() {
        assert_eq!(
            negotiate(&hello(1, 1, 0, 0, 1), 4096, 0, 1).unwrap().1,
            4096
        );
    }

    #[test]
    fn max_msg_len_never_exceeds_the_system_ceiling() {
        assert_eq!(
            negotiate(&hello(1, 1, u32::MAX, 0, 1), u32::MAX, 0, 1)
                .unwrap()
                .1,
            MSG_LEN_MAX_BYTES
        );
    }

    #[test]
    fn the_highest_common_version_is_chosen() {
        // A newer client that still speaks ours gets ours.
        assert_eq!(
            negotiate(&hello(1, 7, 1, 0, 1), 1, 0, 1).unwrap().0,
            PROTOCOL_VERSION
        );
    }

    #[test]
    fn disjoint_versions_are_refused_naming_both_ranges() {
        let err = negotiate(
            &hello(PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 3, 1, 0, 1),
            1,
            0,
            1,
        )
        .unwrap_err();
        assert_eq!(
            err,
            ProtoError::VersionMismatch {
                ours_min: PROTOCOL_VERSION_MIN,
                ours_max: PROTOCOL_VERSION,
                theirs_min: PROTOCOL_VERSION + 1,
                theirs_max: PROTOCOL_VERSION + 3,
            }
        );
        // An inverted client range overlaps nothing.
        assert!(negotiate(&hello(1, 0, 1, 0, 1), 1, 0, 1).is_err());
    }

    #[test]
    fn the_default_proposal_negotiates_with_default_server_limits() {
        let (v, len, hb, cnv) =
            negotiate(&Hello::new("app"), 4_194_304, HEARTBEAT_DEFAULT_MS, 10).unwrap();
        assert_eq!(
            (v, len, hb, cnv),
            (
                PROTOCOL_VERSION,
                4_194_304,
                HEARTBEAT_DEFAULT_MS,
                SHARECNV_DEFAULT
            )
        );
    }

    fn roundtrip(h: &Hello) -> (usize, Hello) {
        let req = crate::Request::Hello(h.clone());
        let mut out = BytesMut::new();
        crate::encode_request(0, 0, &req, &mut out);
        let len = out.len();
        let f = crate::FrameDecoder::new(u32::MAX)
            .decode(&mut out)
            .unwrap()
            .unwrap();
        match crate::parse_request(&f).unwrap() {
            crate::Request::Hello(back) => (len, back),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_channel_name_travels_in_hello() {
        let mut h = Hello::new("app");
        h.channel = "APP.SVRCONN".into();
        assert_eq!(roundtrip(&h).1, h);
    }

    #[test]
    fn a_hello_without_a_channel_is_the_same_bytes_as_before_the_field_existed() {
        // The field is trailing and omitted when empty: an older client's Hello decodes (to the
        // default channel), and an older server still decodes this one.
        let h = Hello::new("app");
        let (len, back) = roundtrip(&h);
        assert_eq!(back, h);
        assert_eq!(
            len,
            crate::frame::HEADER_LEN + MAGIC.len() + 14 + 2 + "app".len()
        );
    }
}
