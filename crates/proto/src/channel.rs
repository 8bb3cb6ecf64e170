//! The frames of a message channel between two queue managers (sender MCA to receiver MCA), on
//! the receiving queue manager's listener port. The sender's first frame is a channel `Hello`
//! (not a client's), which the listener hands to the receiver: the socket then carries only these
//! frames, all on conversation 0.
//!
//! A batch: `Msg` frames (each a transmission-queue message: descriptor, properties, transmission
//! header and data), then `EndBatch` naming the batch's LUWID and last sequence number; the
//! receiver answers `Confirm` once the batch's puts and its synchronisation state are durable.

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_types::codec::{Codec, DecodeError, PutExt, Reader};
use ferrymq_types::{MessageDescriptor, Properties};

use crate::error::ProtoError;
use crate::frame::{add_to_frame_len, begin_frame, finish_frame, RawFrame};

/// Frame kinds: requests (sender to receiver) 0x20..=0x2F, responses 0xA0..=0xAF.
pub mod kind {
    pub const HELLO: u8 = 0x20;
    pub const MSG: u8 = 0x21;
    pub const END_BATCH: u8 = 0x22;
    pub const HEARTBEAT: u8 = 0x23;
    pub const PING: u8 = 0x24;
    pub const REQUEST: u8 = 0x25;
    pub const HELLO_OK: u8 = 0xA0;
    pub const CONFIRM: u8 = 0xA1;
    pub const REFUSED: u8 = 0xA2;
    pub const HEARTBEAT_OK: u8 = 0xA3;
    pub const PING_OK: u8 = 0xA4;
    pub const REQUEST_OK: u8 = 0xA5;
}

/// First bytes of a channel `Hello`, so a client port that is not FerryMQ refuses at once.
pub const MAGIC: [u8; 4] = *b"FMQC";

/// The batch in doubt a sender reports at channel start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InDoubt {
    pub luwid: u64,
    pub seq: u64,
}

// Not boxed: a frame is built and encoded, or parsed and taken apart, at once; most are `Msg`.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ChannelFrame {
    /// The sender binds the socket to the receiver's channel definition of the same name.
    Hello {
        channel: String,
        sender_qmgr: String,
        batch_size: u32,
        max_msg_len: u32,
        /// The sender's next message sequence number less one.
        seq: u64,
        indoubt: Option<InDoubt>,
        /// NPMSPEED(FAST): non-persistent messages travel outside the batch's units of work.
        fast_np: bool,
        /// HBINT in seconds (0: no heartbeats). Absent from the frames of senders that predate
        /// heartbeats, which read as 0.
        hb_int_s: u32,
    },
    /// The receiver's answer: the negotiated limits and the last batch it committed.
    HelloOk {
        receiver_qmgr: String,
        batch_size: u32,
        max_msg_len: u32,
        luwid: u64,
        seq: u64,
        /// Both ends have NPMSPEED(FAST).
        fast_np: bool,
        /// The heartbeat interval both ends use, in seconds (0: none).
        hb_int_s: u32,
    },
    Msg {
        seq: u64,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
    },
    EndBatch {
        luwid: u64,
        seq: u64,
    },
    Confirm {
        luwid: u64,
        seq: u64,
    },
    /// The sender is idle (or checks, before a batch's end, that the receiver is still there);
    /// the receiver answers `HeartbeatOk` at once.
    Heartbeat,
    HeartbeatOk,
    /// PING CHANNEL: instead of a Hello, a socket's first frame; the receiving queue manager
    /// answers `PingOk` with the same data if it has a receiving channel of that name, and
    /// closes. No messages move.
    Ping {
        channel: String,
        data: Bytes,
    },
    PingOk {
        data: Bytes,
    },
    /// A requester (RQSTR) asks the server (SVR) channel of the same name to start: the
    /// server, which has a CONNAME, answers `RequestOk`, closes, and calls back as the sender.
    Request {
        channel: String,
        requester_qmgr: String,
    },
    RequestOk,
    /// The channel cannot run (or stopped) for `reason` (an MQRC), explained in `message`.
    Refused {
        reason: u32,
        message: String,
        /// The channel stops rather than retry (a message the receiver can neither put nor
        /// dead-letter). Absent from older receivers' frames: false.
        stop: bool,
    },
}

impl ChannelFrame {
    pub fn kind(&self) -> u8 {
        match self {
            ChannelFrame::Hello { .. } => kind::HELLO,
            ChannelFrame::Msg { .. } => kind::MSG,
            ChannelFrame::EndBatch { .. } => kind::END_BATCH,
            ChannelFrame::HelloOk { .. } => kind::HELLO_OK,
            ChannelFrame::Confirm { .. } => kind::CONFIRM,
            ChannelFrame::Refused { .. } => kind::REFUSED,
            ChannelFrame::Heartbeat => kind::HEARTBEAT,
            ChannelFrame::HeartbeatOk => kind::HEARTBEAT_OK,
            ChannelFrame::Ping { .. } => kind::PING,
            ChannelFrame::PingOk { .. } => kind::PING_OK,
            ChannelFrame::Request { .. } => kind::REQUEST,
            ChannelFrame::RequestOk => kind::REQUEST_OK,
        }
    }

    /// Appends the frame to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        self.encode_inner(out, false);
    }

    /// Appends the frame to `out`, except the body of a message: that body is returned, and
    /// must be written right after what was appended (the frame's length counts it), from its
    /// own buffer instead of copied into `out`.
    pub fn encode_split(&self, out: &mut BytesMut) -> Option<Bytes> {
        self.encode_inner(out, true)
    }

    fn encode_inner(&self, out: &mut BytesMut, split: bool) -> Option<Bytes> {
        let mut tail = None;
        let start = begin_frame(out, self.kind(), 0, 0);
        match self {
            ChannelFrame::Hello {
                channel,
                sender_qmgr,
                batch_size,
                max_msg_len,
                seq,
                indoubt,
                fast_np,
                hb_int_s,
            } => {
                out.put_slice(&MAGIC);
                out.put_str16(channel);
                out.put_str16(sender_qmgr);
                out.put_u32_le(*batch_size);
                out.put_u32_le(*max_msg_len);
                out.put_u64_le(*seq);
                match indoubt {
                    None => out.put_u8(0),
                    Some(d) => {
                        out.put_u8(1);
                        out.put_u64_le(d.luwid);
                        out.put_u64_le(d.seq);
                    }
                }
                out.put_u8(u8::from(*fast_np));
                out.put_u32_le(*hb_int_s);
            }
            ChannelFrame::HelloOk {
                receiver_qmgr,
                batch_size,
                max_msg_len,
                luwid,
                seq,
                fast_np,
                hb_int_s,
            } => {
                out.put_str16(receiver_qmgr);
                out.put_u32_le(*batch_size);
                out.put_u32_le(*max_msg_len);
                out.put_u64_le(*luwid);
                out.put_u64_le(*seq);
                out.put_u8(u8::from(*fast_np));
                out.put_u32_le(*hb_int_s);
            }
            ChannelFrame::Msg {
                seq,
                md,
                props,
                body,
            } => {
                out.put_u64_le(*seq);
                md.encode(out);
                props.encode(out);
                if split {
                    out.put_u32_le(body.len() as u32);
                    tail = Some(body.clone());
                } else {
                    out.put_bytes32(body);
                }
            }
            ChannelFrame::EndBatch { luwid, seq } | ChannelFrame::Confirm { luwid, seq } => {
                out.put_u64_le(*luwid);
                out.put_u64_le(*seq);
            }
            ChannelFrame::Refused {
                reason,
                message,
                stop,
            } => {
                out.put_u32_le(*reason);
                out.put_str16(message);
                out.put_u8(u8::from(*stop));
            }
            ChannelFrame::Heartbeat | ChannelFrame::HeartbeatOk => {}
            ChannelFrame::Ping { channel, data } => {
                out.put_slice(&MAGIC);
                out.put_str16(channel);
                out.put_bytes32(data);
            }
            ChannelFrame::PingOk { data } => out.put_bytes32(data),
            ChannelFrame::Request {
                channel,
                requester_qmgr,
            } => {
                out.put_slice(&MAGIC);
                out.put_str16(channel);
                out.put_str16(requester_qmgr);
            }
            ChannelFrame::RequestOk => {}
        }
        finish_frame(out, start);
        if let Some(b) = &tail {
            add_to_frame_len(out, start, b.len());
        }
        tail
    }

    /// Interprets a frame of a message channel; every byte must be used.
    pub fn parse(f: &RawFrame) -> Result<ChannelFrame, ProtoError> {
        let mut r = Reader::new(f.body.clone());
        let frame = decode(f.kind, &mut r).map_err(ProtoError::body("channel frame"))?;
        r.finish("channel frame")
            .map_err(ProtoError::body("channel frame"))?;
        Ok(frame)
    }
}

fn decode(k: u8, r: &mut Reader) -> Result<ChannelFrame, DecodeError> {
    Ok(match k {
        kind::HELLO => {
            if r.fixed::<4>("channel magic")? != MAGIC {
                return Err(DecodeError::invalid(
                    "channel magic",
                    "not a FerryMQ message channel",
                ));
            }
            ChannelFrame::Hello {
                channel: r.str16("channel")?,
                sender_qmgr: r.str16("sender qmgr")?,
                batch_size: r.u32("batch size")?,
                max_msg_len: r.u32("max msg len")?,
                seq: r.u64("seq")?,
                indoubt: match r.u8("in-doubt flag")? {
                    0 => None,
                    1 => Some(InDoubt {
                        luwid: r.u64("luwid")?,
                        seq: r.u64("seq")?,
                    }),
                    v => return Err(DecodeError::invalid("in-doubt flag", format!("{v}"))),
                },
                fast_np: r.bool("fast np")?,
                hb_int_s: optional_u32(r, "heartbeat interval")?,
            }
        }
        kind::HELLO_OK => ChannelFrame::HelloOk {
            receiver_qmgr: r.str16("receiver qmgr")?,
            batch_size: r.u32("batch size")?,
            max_msg_len: r.u32("max msg len")?,
            luwid: r.u64("luwid")?,
            seq: r.u64("seq")?,
            fast_np: r.bool("fast np")?,
            hb_int_s: optional_u32(r, "heartbeat interval")?,
        },
        kind::MSG => ChannelFrame::Msg {
            seq: r.u64("seq")?,
            md: MessageDescriptor::decode(r)?,
            props: Properties::decode(r)?,
            body: r.bytes32("message body")?,
        },
        kind::END_BATCH => ChannelFrame::EndBatch {
            luwid: r.u64("luwid")?,
            seq: r.u64("seq")?,
        },
        kind::CONFIRM => ChannelFrame::Confirm {
            luwid: r.u64("luwid")?,
            seq: r.u64("seq")?,
        },
        kind::HEARTBEAT => ChannelFrame::Heartbeat,
        kind::PING => {
            if r.fixed::<4>("channel magic")? != MAGIC {
                return Err(DecodeError::invalid(
                    "channel magic",
                    "not a FerryMQ message channel",
                ));
            }
            ChannelFrame::Ping {
                channel: r.str16("channel")?,
                data: r.bytes32("ping data")?,
            }
        }
        kind::REQUEST => {
            if r.fixed::<4>("channel magic")? != MAGIC {
                return Err(DecodeError::invalid(
                    "channel magic",
                    "not a FerryMQ message channel",
                ));
            }
            ChannelFrame::Request {
                channel: r.str16("channel")?,
                requester_qmgr: r.str16("requester qmgr")?,
            }
        }
        kind::REQUEST_OK => ChannelFrame::RequestOk,
        kind::PING_OK => ChannelFrame::PingOk {
            data: r.bytes32("ping data")?,
        },
        kind::HEARTBEAT_OK => ChannelFrame::HeartbeatOk,
        kind::REFUSED => ChannelFrame::Refused {
            reason: r.u32("reason")?,
            message: r.str16("message")?,
            stop: r.remaining() > 0 && r.bool("stop")?,
        },
        other => {
            return Err(DecodeError::invalid(
                "frame kind",
                format!("0x{other:02x} is not a message channel frame"),
            ))
        }
    })
}

/// A field added at the end of a frame after its first release: absent (0) in frames of an
/// older peer.
fn optional_u32(r: &mut Reader, what: &'static str) -> Result<u32, DecodeError> {
    if r.remaining() == 0 {
        Ok(0)
    } else {
        r.u32(what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FrameDecoder;

    #[test]
    fn every_channel_frame_round_trips() {
        let frames = vec![
            ChannelFrame::Hello {
                channel: "QM1.QM2".into(),
                sender_qmgr: "QM1".into(),
                batch_size: 50,
                max_msg_len: 4 << 20,
                seq: 9,
                indoubt: Some(InDoubt { luwid: 3, seq: 9 }),
                fast_np: true,
                hb_int_s: 300,
            },
            ChannelFrame::HelloOk {
                receiver_qmgr: "QM2".into(),
                batch_size: 50,
                max_msg_len: 1 << 20,
                luwid: 3,
                seq: 9,
                fast_np: false,
                hb_int_s: 1,
            },
            ChannelFrame::Msg {
                seq: 10,
                md: MessageDescriptor::default(),
                props: Properties::default(),
                body: Bytes::from_static(b"XQH ..."),
            },
            ChannelFrame::EndBatch { luwid: 4, seq: 10 },
            ChannelFrame::Confirm { luwid: 4, seq: 10 },
            ChannelFrame::Heartbeat,
            ChannelFrame::HeartbeatOk,
            ChannelFrame::Ping {
                channel: "QM1.QM2".into(),
                data: Bytes::from_static(b"0123456789abcdef"),
            },
            ChannelFrame::PingOk {
                data: Bytes::from_static(b"0123456789abcdef"),
            },
            ChannelFrame::Request {
                channel: "QM1.QM2".into(),
                requester_qmgr: "QM2".into(),
            },
            ChannelFrame::RequestOk,
            ChannelFrame::Refused {
                reason: 2540,
                message: "no such channel".into(),
                stop: true,
            },
        ];
        let mut buf = BytesMut::new();
        for f in &frames {
            f.encode(&mut buf);
        }
        let mut dec = FrameDecoder::new(1 << 24);
        for f in &frames {
            let raw = dec.decode(&mut buf).unwrap().unwrap();
            assert_eq!(&ChannelFrame::parse(&raw).unwrap(), f);
        }
        assert!(buf.is_empty());
        // Split: the head and the body written after it are the same bytes as the whole frame;
        // only a message has a body apart.
        for f in &frames {
            let mut whole = BytesMut::new();
            f.encode(&mut whole);
            let mut head = BytesMut::new();
            let tail = f.encode_split(&mut head);
            assert_eq!(tail.is_some(), matches!(f, ChannelFrame::Msg { .. }));
            head.extend_from_slice(&tail.unwrap_or_default());
            assert_eq!(head, whole);
        }
    }

    #[test]
    fn a_hello_from_a_sender_that_predates_heartbeats_reads_as_no_heartbeats() {
        let hello = ChannelFrame::Hello {
            channel: "QM1.QM2".into(),
            sender_qmgr: "QM1".into(),
            batch_size: 50,
            max_msg_len: 1 << 20,
            seq: 0,
            indoubt: None,
            fast_np: true,
            hb_int_s: 300,
        };
        let mut buf = BytesMut::new();
        hello.encode(&mut buf);
        let mut raw = FrameDecoder::new(1 << 24)
            .decode(&mut buf)
            .unwrap()
            .unwrap();
        // The same frame without its last field, as an older sender writes it.
        raw.body = raw.body.slice(..raw.body.len() - 4);
        let ChannelFrame::Hello { hb_int_s, .. } = ChannelFrame::parse(&raw).unwrap() else {
            panic!("not a Hello");
        };
        assert_eq!(hb_int_s, 0);
    }
}
