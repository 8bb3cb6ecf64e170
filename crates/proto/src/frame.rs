//! Framing: the 12-byte header every frame starts with, and the incremental decoder that cuts frames
//! off a receive buffer without copying their bodies.
//!
//! Header, little endian: `len: u32` (bytes after this field: 8 + body), `kind: u8`, `flags: u8`,
//! `conv: u16` (conversation on a shared socket, 0 = the connection itself), `req: u32` (request id
//! chosen by the client and echoed by the response).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ferrymq_types::limits::{FRAME_OVERHEAD_MAX_BYTES, FRAME_OWN_BUFFER_MIN_BYTES};

use crate::error::ProtoError;

/// Bytes of the frame header.
pub const HEADER_LEN: usize = 12;
/// Flag bit 0: more segments of this message follow. Reserved for segmenting messages larger than a
/// frame; nothing sends it yet, and `parse_*` refuse it until reassembly exists.
pub const FLAG_MORE: u8 = 0x01;
/// Flag bit 1, on a request (protocol version 3 on): its answer may wait until the answer to a
/// later request of the same write leaves, and go in the same write. A client sets it on every
/// request of a call but the last when it waits for all of the call's answers anyway (put,
/// commit and get in one call): the server then writes the call's answers once, when the last
/// is ready, instead of once for the first ones and again for the last.
pub const FLAG_LATER: u8 = 0x02;
/// Header bytes counted by `len` (everything after the length field itself).
const LEN_COUNTED_HEADER: u32 = (HEADER_LEN - 4) as u32;

/// The largest frame `len` to accept once `max_msg_len` has been negotiated: the body plus room for
/// the descriptor, properties and names that travel with it.
pub const fn frame_limit_for(max_msg_len: u32) -> u32 {
    max_msg_len.saturating_add(FRAME_OVERHEAD_MAX_BYTES)
}

/// One frame as it came off the wire, body not yet interpreted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    pub kind: u8,
    pub flags: u8,
    pub conv: u16,
    pub req: u32,
    /// A zero-copy slice of the receive buffer.
    pub body: Bytes,
}

/// Cuts complete frames off the front of a receive buffer. It keeps no partial state between calls:
/// bytes stay in the caller's buffer until a whole frame is there, so the caller's read loop is just
/// "read more, decode until `None`". After an error the stream is out of step and must be closed.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame_bytes: u32,
    /// The last frame cut off was over [`FRAME_OWN_BUFFER_MIN_BYTES`] (see [`Self::read_room`]).
    after_large: bool,
}

impl FrameDecoder {
    /// A decoder refusing frames whose `len` exceeds `max_frame_bytes`. Start a connection with
    /// [`crate::PRE_HANDSHAKE_FRAME_MAX_BYTES`] so an unauthenticated peer cannot make us allocate.
    pub fn new(max_frame_bytes: u32) -> Self {
        FrameDecoder {
            max_frame_bytes,
            after_large: false,
        }
    }

    /// Raises or lowers the limit, e.g. to [`frame_limit_for`] the negotiated `max_msg_len`.
    pub fn set_max_frame_bytes(&mut self, n: u32) {
        self.max_frame_bytes = n;
    }

    pub fn max_frame_bytes(&self) -> u32 {
        self.max_frame_bytes
    }

    /// How much room a reader should make in `buf` before its next read: [`read_room`], except
    /// that after a large frame, with nothing of the next one read yet, only
    /// [`AFTER_LARGE_READ_BYTES`]. Large frames tend to follow each other (a file's chunks, a
    /// channel's batch), and a large frame's first read is copied into the frame's own buffer
    /// once its header says how large it is: a small first read keeps that copy small. It costs
    /// no extra read: the rest of a large frame takes one read either way.
    pub fn read_room(&self, buf: &BytesMut, chunk: usize) -> usize {
        if self.after_large && buf.is_empty() {
            chunk.min(AFTER_LARGE_READ_BYTES)
        } else {
            read_room(buf, chunk)
        }
    }

    /// Takes one complete frame off the front of `buf` (zero-copy), or returns `Ok(None)` when more
    /// bytes are needed. A too-large or malformed header is reported as soon as its bytes are there,
    /// before the body arrives; nothing is consumed on error.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<RawFrame>, ProtoError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if len < LEN_COUNTED_HEADER {
            return Err(ProtoError::BadHeader(format!(
                "length field {len} is shorter than the {LEN_COUNTED_HEADER} header bytes it must count"
            )));
        }
        if len > self.max_frame_bytes {
            return Err(ProtoError::FrameTooLarge {
                len,
                max: self.max_frame_bytes,
            });
        }
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let flags = buf[5];
        if flags & !(FLAG_MORE | FLAG_LATER) != 0 {
            return Err(ProtoError::BadHeader(format!(
                "reserved flag bits set: 0x{flags:02x}"
            )));
        }
        // `len` is bounded by `max_frame_bytes` (a u32), so this cannot overflow a usize.
        let total = 4 + len as usize;
        if buf.len() < total {
            if total > FRAME_OWN_BUFFER_MIN_BYTES && buf.capacity() < total {
                // A large frame the buffer has no room for gets an allocation of exactly its
                // size, which it leaves whole when cut off: its message's body can then be
                // queued as it is (it is most of that allocation) instead of being copied, and
                // no later frame lands in it. The bytes of it already read are copied over, as
                // growing the buffer would. (A buffer with room is kept: moving it again after
                // every read of a reader that reserves more would copy the frame many times.)
                *buf = own_buffer(total, buf);
            } else {
                // One allocation for the rest of the frame instead of growing by read-sized steps.
                buf.reserve(total - buf.len());
            }
            return Ok(None);
        }
        let mut frame = buf.split_to(total);
        self.after_large = total > FRAME_OWN_BUFFER_MIN_BYTES;
        if self.after_large && buf.is_empty() {
            // Nothing of the next frame is here yet: its first read goes into a small buffer of
            // its own (see `read_room`), not into what is left of this one's.
            *buf = BytesMut::new();
        }
        frame.advance(4);
        let kind = frame.get_u8();
        let flags = frame.get_u8();
        let conv = frame.get_u16_le();
        let req = frame.get_u32_le();
        Ok(Some(RawFrame {
            kind,
            flags,
            conv,
            req,
            body: frame.freeze(),
        }))
    }
}

/// The first read after a large frame (see [`FrameDecoder::read_room`]).
pub const AFTER_LARGE_READ_BYTES: usize = 4096;

/// A large frame's buffer ends on a multiple of this many bytes, so a body at the end of the
/// frame whose length is a multiple of it (a file's chunk) starts on one too: it can be written
/// to a file opened for direct I/O as it is, without being copied into an aligned buffer first.
pub const FRAME_END_ALIGN: usize = 4096;

/// An allocation for a large frame of `total` bytes holding `have` (its bytes already read):
/// exactly the frame's size, placed so that the frame ends on a multiple of [`FRAME_END_ALIGN`].
fn own_buffer(total: usize, have: &[u8]) -> BytesMut {
    let mut own = BytesMut::with_capacity(total + FRAME_END_ALIGN);
    let end = own.as_ptr() as usize + total;
    let pad = (FRAME_END_ALIGN - end % FRAME_END_ALIGN) % FRAME_END_ALIGN;
    // Capacity past the frame's end is cut off (nothing read later lands after the frame), and
    // the padding before its start skipped.
    drop(own.split_off(pad + total));
    own.resize(pad, 0);
    own.advance(pad);
    own.extend_from_slice(have);
    own
}

/// How much room a reader should make in `buf` before its next read: `chunk`, but no more than
/// the frame at the front of `buf` still lacks, so that a frame [`FrameDecoder::decode`] gave a
/// buffer of its own is neither moved again nor followed by other frames in it.
pub fn read_room(buf: &BytesMut, chunk: usize) -> usize {
    if buf.len() >= 4 {
        let total = 4 + u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if total > buf.len() {
            return chunk.min(total - buf.len());
        }
    }
    chunk
}

/// Writes a header with a placeholder length and returns where the frame starts, for
/// [`finish_frame`]. Patching the length afterwards means it is always the bytes actually written,
/// whatever the capacity estimate said.
pub(crate) fn begin_frame(out: &mut BytesMut, kind: u8, conv: u16, req: u32) -> usize {
    let start = out.len();
    out.put_u32_le(0);
    out.put_u8(kind);
    out.put_u8(0);
    out.put_u16_le(conv);
    out.put_u32_le(req);
    start
}

pub(crate) fn finish_frame(out: &mut BytesMut, start: usize) {
    let len = out.len() - start - 4;
    debug_assert!(
        len <= u32::MAX as usize,
        "frame of {len} bytes cannot be described by its header"
    );
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
}

/// Counts `extra` more bytes in the length of the frame begun at `start` (bytes the caller
/// writes after it from another buffer).
pub(crate) fn add_to_frame_len(out: &mut BytesMut, start: usize, extra: usize) {
    let len = u32::from_le_bytes([out[start], out[start + 1], out[start + 2], out[start + 3]]);
    let len = len as usize + extra;
    debug_assert!(
        len <= u32::MAX as usize,
        "frame of {len} bytes cannot be described by its header"
    );
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_bytes(kind: u8, flags: u8, conv: u16, req: u32, body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_u32_le(8 + body.len() as u32);
        b.put_u8(kind);
        b.put_u8(flags);
        b.put_u16_le(conv);
        b.put_u32_le(req);
        b.put_slice(body);
        b
    }

    #[test]
    fn a_complete_frame_is_cut_off_and_the_rest_left_in_the_buffer() {
        let mut buf = frame_bytes(0x05, 0, 3, 77, b"abc");
        buf.put_slice(b"next");
        let f = FrameDecoder::new(1024).decode(&mut buf).unwrap().unwrap();
        assert_eq!(
            f,
            RawFrame {
                kind: 0x05,
                flags: 0,
                conv: 3,
                req: 77,
                body: Bytes::from_static(b"abc")
            }
        );
        assert_eq!(&buf[..], b"next");
    }

    #[test]
    fn an_empty_body_is_a_valid_frame() {
        let mut buf = frame_bytes(0x09, 0, 1, 2, b"");
        let f = FrameDecoder::new(8).decode(&mut buf).unwrap().unwrap();
        assert!(f.body.is_empty());
        assert!(buf.is_empty());
    }

    #[test]
    fn fewer_than_four_bytes_need_more_input() {
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff][..]);
        assert_eq!(FrameDecoder::new(8).decode(&mut buf).unwrap(), None);
        assert_eq!(buf.len(), 3);
    }

    #[test]
    fn the_more_flag_passes_the_decoder() {
        let mut buf = frame_bytes(0x06, FLAG_MORE, 1, 1, b"x");
        assert_eq!(
            FrameDecoder::new(64)
                .decode(&mut buf)
                .unwrap()
                .unwrap()
                .flags,
            FLAG_MORE
        );
    }

    #[test]
    fn the_later_flag_passes_the_decoder_and_other_bits_do_not() {
        let mut buf = frame_bytes(0x06, FLAG_LATER, 1, 1, b"x");
        let f = FrameDecoder::new(64).decode(&mut buf).unwrap().unwrap();
        assert_eq!(f.flags, FLAG_LATER);
        let mut buf = frame_bytes(0x06, 0x04, 1, 1, b"x");
        assert!(matches!(
            FrameDecoder::new(64).decode(&mut buf),
            Err(ProtoError::BadHeader(_))
        ));
    }

    #[test]
    fn the_limit_can_be_raised_after_negotiation() {
        let mut d = FrameDecoder::new(16);
        let mut buf = frame_bytes(0x06, 0, 1, 1, &[0u8; 100]);
        assert!(matches!(
            d.decode(&mut buf),
            Err(ProtoError::FrameTooLarge { len: 108, max: 16 })
        ));
        d.set_max_frame_bytes(frame_limit_for(100));
        assert_eq!(d.max_frame_bytes(), 100 + FRAME_OVERHEAD_MAX_BYTES);
        assert_eq!(d.decode(&mut buf).unwrap().unwrap().body.len(), 100);
    }

    #[test]
    fn frame_limit_saturates_instead_of_wrapping() {
        assert_eq!(frame_limit_for(u32::MAX), u32::MAX);
    }

    #[test]
    fn a_pending_body_reserves_room_for_the_whole_frame() {
        let full = frame_bytes(0x06, 0, 1, 1, &[7u8; 5000]);
        let mut buf = BytesMut::from(&full[..HEADER_LEN]);
        assert_eq!(FrameDecoder::new(10_000).decode(&mut buf).unwrap(), None);
        assert!(buf.capacity() >= full.len(), "capacity {}", buf.capacity());
    }

    #[test]
    fn large_frames_end_aligned_and_a_small_frame_after_them_reads_as_usual() {
        let mut d = FrameDecoder::new(u32::MAX);
        let mut buf = BytesMut::new();
        for (i, first) in [4096usize, 700, 65_536, 13].into_iter().enumerate() {
            // A chunk-like body (a multiple of the alignment) after a few bytes of other fields.
            let mut payload = vec![9u8; 37];
            payload.extend(std::iter::repeat_n(i as u8, 256 << 10));
            let full = frame_bytes(0x06, 0, 1, i as u32, &payload);
            let mut at = 0;
            let f = loop {
                if let Some(f) = d.decode(&mut buf).unwrap() {
                    break f;
                }
                let n = if at == 0 {
                    first
                } else {
                    d.read_room(&buf, 64 * 1024)
                };
                let n = n.min(full.len() - at);
                buf.reserve(n);
                buf.extend_from_slice(&full[at..at + n]);
                at += n;
            };
            assert_eq!(at, full.len());
            assert_eq!(&f.body[..], &payload[..]);
            let chunk = f.body.slice(37..);
            assert_eq!(
                chunk.as_ptr() as usize % FRAME_END_ALIGN,
                0,
                "first read {first}"
            );
        }
        // Small frames after a large one: the small first read, then reads as before.
        assert_eq!(d.read_room(&buf, 64 * 1024), AFTER_LARGE_READ_BYTES);
        let small = frame_bytes(0x06, 0, 1, 9, &[1u8; 100]);
        buf.reserve(d.read_room(&buf, 64 * 1024));
        buf.extend_from_slice(&small[..50]);
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        buf.extend_from_slice(&small[50..]);
        assert_eq!(d.decode(&mut buf).unwrap().unwrap().req, 9);
        assert_eq!(d.read_room(&buf, 64 * 1024), 64 * 1024);
    }

    #[test]
    fn a_large_frame_is_read_into_a_buffer_of_its_own_size() {
        let body = vec![7u8; FRAME_OWN_BUFFER_MIN_BYTES + 1000];
        let full = frame_bytes(0x06, 0, 1, 1, &body);
        // The header and part of the body arrive in a read buffer too small for the frame.
        let mut buf = BytesMut::with_capacity(64 * 1024);
        buf.extend_from_slice(&full[..1000]);
        let mut d = FrameDecoder::new(u32::MAX);
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        assert_eq!(buf.capacity(), full.len());
        assert_eq!(&buf[..], &full[..1000]);
        // A reader making room for its usual chunk does not grow it.
        let mut at = 1000;
        while at < full.len() {
            let n = read_room(&buf, 64 * 1024).min(full.len() - at);
            buf.reserve(n);
            assert_eq!(buf.capacity(), full.len());
            buf.extend_from_slice(&full[at..at + n]);
            at += n;
            if at < full.len() {
                assert_eq!(d.decode(&mut buf).unwrap(), None);
            }
        }
        let f = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!(&f.body[..], &body[..]);
        assert_eq!(
            (f.body.as_ptr() as usize + f.body.len()) % FRAME_END_ALIGN,
            0,
            "a large frame ends on an aligned address"
        );
        assert!(buf.is_empty());
        // The next frame's first read is small: a large frame's bytes read before its header
        // was seen are copied into its own buffer.
        assert_eq!(d.read_room(&buf, 64 * 1024), AFTER_LARGE_READ_BYTES);
        assert_eq!(d.read_room(&buf, 512), 512);
        assert_eq!(read_room(&buf, 64 * 1024), 64 * 1024);
        assert_eq!(
            buf.capacity(),
            0,
            "nothing after the frame lands in its buffer"
        );
        // A buffer that already has room for the frame is not moved (a reader reserving more
        // than `read_room` must not have the frame copied after each read).
        let mut roomy = BytesMut::with_capacity(4 * full.len());
        roomy.extend_from_slice(&full[..1000]);
        let at = roomy.as_ptr();
        assert_eq!(d.decode(&mut roomy).unwrap(), None);
        assert_eq!(roomy.as_ptr(), at);
        // A small frame keeps the read buffer.
        let mut small = BytesMut::with_capacity(4096);
        small.extend_from_slice(&frame_bytes(0x06, 0, 1, 1, &[1u8; 2000])[..100]);
        assert_eq!(d.decode(&mut small).unwrap(), None);
        assert!(small.capacity() >= 4096);
        assert_eq!(read_room(&small, 64 * 1024), 2012 - 100);
        assert_eq!(read_room(&BytesMut::new(), 512), 512);
    }

    /// A body size: mostly small, some around the own-buffer threshold, some chunk-sized.
    fn body_len() -> impl proptest::strategy::Strategy<Value = usize> {
        use proptest::prelude::*;
        prop_oneof![
            4 => 0usize..2_000,
            2 => (FRAME_OWN_BUFFER_MIN_BYTES - 64)..(FRAME_OWN_BUFFER_MIN_BYTES + 64),
            2 => (200usize << 10)..(300 << 10),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever sizes the frames and the socket's reads have, a reader that reads what
        /// `read_room` asks for (or less, as a socket may) gets every frame back whole and in
        /// order, and nothing is left over.
        #[test]
        fn any_mix_of_frames_and_read_sizes_decodes_exactly(
            lens in proptest::collection::vec(body_len(), 1..12),
            reads in proptest::collection::vec(1usize..70_000, 1..40),
            chunk in proptest::sample::select(vec![512usize, 4096, 16 << 10, 64 << 10]),
        ) {
            let mut stream = Vec::new();
            let mut bodies = Vec::new();
            for (i, len) in lens.iter().enumerate() {
                let body: Vec<u8> = (0..*len).map(|j| (i * 31 + j) as u8).collect();
                stream.extend_from_slice(&frame_bytes(0x06, 0, 1, i as u32, &body));
                bodies.push(body);
            }
            let mut d = FrameDecoder::new(u32::MAX);
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            let (mut at, mut k) = (0usize, 0usize);
            while at < stream.len() {
                let room = d.read_room(&buf, chunk);
                proptest::prop_assert!(room > 0);
                buf.reserve(room);
                let n = room.min(reads[k % reads.len()]).min(stream.len() - at);
                k += 1;
                buf.extend_from_slice(&stream[at..at + n]);
                at += n;
                while let Some(f) = d.decode(&mut buf).unwrap() {
                    got.push(f);
                }
            }
            proptest::prop_assert!(buf.is_empty(), "{} bytes left over", buf.len());
            proptest::prop_assert_eq!(got.len(), bodies.len());
            for (i, (f, body)) in got.iter().zip(&bodies).enumerate() {
                proptest::prop_assert_eq!(f.req, i as u32);
                proptest::prop_assert_eq!(&f.body[..], &body[..]);
            }
        }
    }
}
