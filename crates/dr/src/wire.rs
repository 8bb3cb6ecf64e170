//! The DR stream's frames, between a primary (which connects) and a secondary (which listens):
//! `len u32 | type u8 | body`, little endian, written and read with the project's codec.
//!
//! ```text
//! primary                                  secondary
//!   Hello{qmgr, stream, maxlag}  ->
//!                                <-  Position{state, copy} | Refuse{why}
//!   [Reset{stream, pos}          ->  (full copy: its records are staged apart from the state;
//!    | ResumeCopy{stream, pos, skip}  or the staged copy goes on after its first `skip` records;
//!                                     the last chunk, marked, installs it as a checkpoint)]
//!   Records{end, mark, records}  ->  apply + log; once durable:
//!                                <-  Ack{pos}
//! ```

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ferrymq_engine::dr::DrState;
use ferrymq_types::codec::{DecodeError, PutExt, Reader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Frames larger than this are refused from the header alone: a chunk holds at most one
/// record over 1 MiB, and a record holds at most one 100 MB message.
pub const MAX_FRAME: usize = 128 * 1024 * 1024;
/// A chunk of records is closed at about this many bytes.
pub const CHUNK_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// `max_lag`: the primary's lag bound, which the secondary keeps for when it is promoted
    /// (absent from a primary that predates it).
    Hello {
        qmgr: String,
        stream: u64,
        max_lag: Option<u64>,
    },
    /// The secondary's state, and the full copy it has staged so far, if any.
    Position(DrState, Option<CopyProgress>),
    Refuse(String),
    /// A full copy interrupted by a broken link goes on: the secondary's staged copy of `stream`
    /// at `pos` keeps its first `skip` records and the records that follow continue it.
    ResumeCopy {
        stream: u64,
        pos: u64,
        skip: u64,
    },
    /// A full copy starts; it leaves the secondary at `pos` of `stream`.
    Reset {
        stream: u64,
        pos: u64,
    },
    /// Engine records (framed by `ferrymq_engine::batch`) ending the stream at `end`. With
    /// `mark` the secondary then records that it holds the stream up to `end` (not set for the
    /// chunks of a full copy before its last).
    Records {
        end: u64,
        mark: bool,
        records: Bytes,
    },
    Ack(u64),
}

mod tag {
    pub const HELLO: u8 = 1;
    pub const POSITION: u8 = 2;
    pub const REFUSE: u8 = 3;
    pub const RESET: u8 = 4;
    pub const RECORDS: u8 = 5;
    pub const ACK: u8 = 6;
    pub const RESUME_COPY: u8 = 7;
}

/// How much of a full copy a secondary has staged: the copy (stream and position it leaves the
/// secondary at) and how many of its records have arrived in whole frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyProgress {
    pub stream: u64,
    pub pos: u64,
    pub records: u64,
}

impl Frame {
    pub fn encode(&self) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_u32_le(0);
        match self {
            Frame::Hello {
                qmgr,
                stream,
                max_lag,
            } => {
                b.put_u8(tag::HELLO);
                b.put_str16(qmgr);
                b.put_u64_le(*stream);
                if let Some(m) = max_lag {
                    b.put_u64_le(*m);
                }
            }
            Frame::Position(st, copy) => {
                b.put_u8(tag::POSITION);
                st.encode(&mut b);
                if let Some(c) = copy {
                    b.put_u8(1);
                    b.put_u64_le(c.stream);
                    b.put_u64_le(c.pos);
                    b.put_u64_le(c.records);
                }
            }
            Frame::ResumeCopy { stream, pos, skip } => {
                b.put_u8(tag::RESUME_COPY);
                b.put_u64_le(*stream);
                b.put_u64_le(*pos);
                b.put_u64_le(*skip);
            }
            Frame::Refuse(why) => {
                b.put_u8(tag::REFUSE);
                b.put_str16(why);
            }
            Frame::Reset { stream, pos } => {
                b.put_u8(tag::RESET);
                b.put_u64_le(*stream);
                b.put_u64_le(*pos);
            }
            Frame::Records { end, mark, records } => {
                b.put_u8(tag::RECORDS);
                b.put_u64_le(*end);
                b.put_u8(u8::from(*mark));
                b.put_bytes32(records);
            }
            Frame::Ack(pos) => {
                b.put_u8(tag::ACK);
                b.put_u64_le(*pos);
            }
        }
        let len = (b.len() - 4) as u32;
        b[..4].copy_from_slice(&len.to_le_bytes());
        b
    }

    pub fn decode(body: Bytes) -> Result<Frame, DecodeError> {
        let mut r = Reader::new(body);
        let f = match r.u8("DR frame type")? {
            tag::HELLO => Frame::Hello {
                qmgr: r.str16("queue manager")?,
                stream: r.u64("stream")?,
                max_lag: if r.remaining() > 0 {
                    Some(r.u64("lag bound")?)
                } else {
                    None
                },
            },
            tag::POSITION => {
                // The DR state's own encoding ends with an optional mark; the copy progress
                // follows it, flagged.
                let st = DrState::decode_prefix(&mut r)?;
                let copy = if r.remaining() > 0 && r.u8("copy flag")? == 1 {
                    Some(CopyProgress {
                        stream: r.u64("copy stream")?,
                        pos: r.u64("copy position")?,
                        records: r.u64("copy records")?,
                    })
                } else {
                    None
                };
                Frame::Position(st, copy)
            }
            tag::RESUME_COPY => Frame::ResumeCopy {
                stream: r.u64("stream")?,
                pos: r.u64("position")?,
                skip: r.u64("records to skip")?,
            },
            tag::REFUSE => Frame::Refuse(r.str16("reason")?),
            tag::RESET => Frame::Reset {
                stream: r.u64("stream")?,
                pos: r.u64("position")?,
            },
            tag::RECORDS => Frame::Records {
                end: r.u64("end")?,
                mark: r.u8("mark")? != 0,
                records: r.bytes32("records")?,
            },
            tag::ACK => Frame::Ack(r.u64("position")?),
            t => return Err(DecodeError::invalid("DR frame type", format!("{t}"))),
        };
        r.finish("DR frame")?;
        Ok(f)
    }
}

/// Writes one frame and flushes it: a TLS stream may hold the last records until flushed (on
/// plain TCP a flush does nothing).
pub async fn write(w: &mut (impl AsyncWrite + Unpin), f: &Frame) -> std::io::Result<()> {
    w.write_all(&f.encode()).await?;
    w.flush().await
}

/// Writes a `Records` frame without copying the records into it: the frame's head and the
/// records leave in one vectored write (a chunk is up to a MiB, shipped hundreds of times a
/// second; [`Frame::encode`] would copy every byte once more).
pub async fn write_records(
    w: &mut (impl AsyncWrite + Unpin),
    end: u64,
    mark: bool,
    records: Bytes,
) -> std::io::Result<()> {
    let mut head = BytesMut::with_capacity(RECORDS_HEAD);
    head.put_u32_le((RECORDS_HEAD - 4 + records.len()) as u32);
    head.put_u8(tag::RECORDS);
    head.put_u64_le(end);
    head.put_u8(u8::from(mark));
    head.put_u32_le(records.len() as u32);
    debug_assert_eq!(head.len(), RECORDS_HEAD);
    w.write_all_buf(&mut head.freeze().chain(records)).await?;
    w.flush().await
}

/// Bytes of a `Records` frame before its records: length, type, end, mark, records' length.
const RECORDS_HEAD: usize = 4 + 1 + 8 + 1 + 4;

/// Bytes of a frame's length prefix.
const LEN_BYTES: usize = 4;

/// The whole length (prefix included) of the frame that `buf` starts with, once its length prefix
/// is there; a length outside `1..=MAX_FRAME` is refused from the prefix alone.
fn frame_bytes(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    let Some(head) = buf.first_chunk::<LEN_BYTES>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*head) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(DecodeError::invalid(
            "DR frame length",
            format!("{len} bytes refused (1..={MAX_FRAME})"),
        ));
    }
    Ok(Some(LEN_BYTES + len))
}

/// Decodes the frame at the start of `buf` without any I/O: the frame and the bytes it took, or
/// `Ok(None)` while `buf` holds less than a whole frame. [`read`] decodes every frame with it;
/// records are shared with `buf`, not copied.
pub fn decode_frame(buf: &Bytes) -> Result<Option<(Frame, usize)>, DecodeError> {
    let Some(total) = frame_bytes(buf)? else {
        return Ok(None);
    };
    if buf.len() < total {
        return Ok(None);
    }
    Frame::decode(buf.slice(LEN_BYTES..total)).map(|f| Some((f, total)))
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub async fn read(r: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Option<Frame>> {
    let malformed = |e: DecodeError| std::io::Error::other(format!("malformed DR frame: {e}"));
    let mut len = [0u8; LEN_BYTES];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let total = frame_bytes(&len).map_err(malformed)?.ok_or_else(|| {
        malformed(DecodeError::Truncated {
            what: "DR frame length",
        })
    })?;
    // Read straight into spare capacity: zero-filling a buffer of up to a MiB first would cost
    // a pass over every shipped byte.
    let mut buf = BytesMut::with_capacity(total);
    buf.put_slice(&len);
    while buf.len() < total {
        let want = total - buf.len();
        if r.read_buf(&mut (&mut buf).limit(want)).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    match decode_frame(&buf.freeze()).map_err(malformed)? {
        Some((f, _)) => Ok(Some(f)),
        None => Err(malformed(DecodeError::Truncated { what: "DR frame" })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrymq_engine::batch::{push_record, split};
    use ferrymq_engine::records::DrMark;

    #[tokio::test]
    async fn every_frame_round_trips_and_garbage_is_an_error_not_a_panic() {
        let mut recs = BytesMut::new();
        push_record(&mut recs, 3, &[b"commit"]);
        push_record(&mut recs, 1, &[]);
        let frames = vec![
            Frame::Hello {
                qmgr: "QM1".into(),
                stream: 7,
                max_lag: Some(65536),
            },
            Frame::Hello {
                qmgr: "QM1".into(),
                stream: 7,
                max_lag: None,
            },
            Frame::Position(
                DrState {
                    stream: 0,
                    mark: Some(DrMark { stream: 7, pos: 99 }),
                    acked: None,
                },
                None,
            ),
            Frame::Position(
                DrState {
                    stream: 3,
                    mark: None,
                    acked: Some(DrMark { stream: 3, pos: 1 }),
                },
                Some(CopyProgress {
                    stream: 7,
                    pos: 500,
                    records: 42,
                }),
            ),
            Frame::ResumeCopy {
                stream: 7,
                pos: 500,
                skip: 42,
            },
            Frame::Refuse("no".into()),
            Frame::Reset { stream: 7, pos: 5 },
            Frame::Records {
                end: 1234,
                mark: true,
                records: recs.clone().freeze(),
            },
            Frame::Ack(1234),
        ];
        let mut buf = Vec::new();
        for f in &frames {
            write(&mut buf, f).await.unwrap();
        }
        let mut rd = &buf[..];
        for f in &frames {
            assert_eq!(read(&mut rd).await.unwrap().as_ref(), Some(f));
        }
        assert_eq!(read(&mut rd).await.unwrap(), None);
        let back = split(&recs.freeze()).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!((back[0].0, &back[0].1[..]), (3, &b"commit"[..]));

        // A type byte nobody knows, a truncated body, an oversized header.
        for bad in [
            vec![1, 0, 0, 0, 99],
            vec![3, 0, 0, 0, 6, 1, 0],
            vec![0xff, 0xff, 0xff, 0x7f],
        ] {
            assert!(read(&mut &bad[..]).await.is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn records_written_without_a_copy_are_the_same_frame() {
        let mut recs = BytesMut::new();
        push_record(&mut recs, 3, &[&[7u8; 3000]]);
        push_record(&mut recs, 1, &[b"get"]);
        let recs = recs.freeze();
        for mark in [false, true] {
            let f = Frame::Records {
                end: 99,
                mark,
                records: recs.clone(),
            };
            let mut buf = Vec::new();
            write_records(&mut buf, 99, mark, recs.clone())
                .await
                .unwrap();
            assert_eq!(buf, f.encode().to_vec());
            assert_eq!(read(&mut &buf[..]).await.unwrap(), Some(f));
        }
    }
}
