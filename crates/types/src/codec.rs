//! The small binary codec shared by the wire protocol and the recovery log: little-endian integers,
//! length-prefixed strings and byte strings, with every read bounds-checked so that hostile or torn
//! input yields a `DecodeError`, never a panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::limits::STRING_LEN_MAX_BYTES;

/// Why a buffer could not be decoded. `what` names the field being read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated input while reading {what}")]
    Truncated { what: &'static str },
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
}

impl DecodeError {
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> DecodeError {
        DecodeError::Invalid {
            what,
            detail: detail.into(),
        }
    }
}

/// Appends encoded values to a `BytesMut`.
pub trait PutExt: BufMut {
    fn put_str16(&mut self, s: &str) {
        debug_assert!(
            s.len() <= STRING_LEN_MAX_BYTES,
            "string longer than the codec allows"
        );
        let len = s.len().min(STRING_LEN_MAX_BYTES);
        self.put_u16_le(len as u16);
        self.put_slice(&s.as_bytes()[..len]);
    }
    fn put_bytes32(&mut self, b: &[u8]) {
        self.put_u32_le(b.len() as u32);
        self.put_slice(b);
    }
    fn put_bool(&mut self, v: bool) {
        self.put_u8(v as u8);
    }
}

impl PutExt for BytesMut {}
impl PutExt for Vec<u8> {}

/// A bounds-checked reader over a `Bytes` buffer; byte strings are returned as zero-copy slices.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

macro_rules! get_int {
    ($fn:ident, $ty:ty, $get:ident) => {
        pub fn $fn(&mut self, what: &'static str) -> Result<$ty, DecodeError> {
            self.need(std::mem::size_of::<$ty>(), what)?;
            Ok(self.buf.$get())
        }
    };
}

impl Reader {
    pub fn new(buf: Bytes) -> Reader {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated { what })
        } else {
            Ok(())
        }
    }

    get_int!(u8, u8, get_u8);
    get_int!(u16, u16, get_u16_le);
    get_int!(u32, u32, get_u32_le);
    get_int!(u64, u64, get_u64_le);
    get_int!(i32, i32, get_i32_le);
    get_int!(i64, i64, get_i64_le);
    get_int!(f64, f64, get_f64_le);

    pub fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(DecodeError::invalid(what, format!("boolean byte {v}"))),
        }
    }

    pub fn str16(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let len = self.u16(what)? as usize;
        self.need(len, what)?;
        let b = self.buf.split_to(len);
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::invalid(what, "not UTF-8"))
    }

    pub fn bytes32(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u32(what)? as usize;
        self.need(len, what)?;
        Ok(self.buf.split_to(len))
    }

    pub fn fixed<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        self.need(N, what)?;
        let mut out = [0u8; N];
        self.buf.copy_to_slice(&mut out);
        Ok(out)
    }

    /// The rest of the buffer, zero-copy.
    pub fn rest(&mut self) -> Bytes {
        self.buf.split_off(0)
    }

    /// Fails unless every byte was consumed: trailing garbage is a protocol error, not ignorable.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::invalid(
                what,
                format!("{} trailing bytes", self.buf.len()),
            ))
        }
    }
}

/// Encoding and decoding of one value with the codec above.
pub trait Codec: Sized {
    fn encode(&self, out: &mut BytesMut);
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;

    fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::new();
        self.encode(&mut b);
        b.freeze()
    }
    fn from_bytes(b: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b);
        let v = Self::decode(&mut r)?;
        r.finish("value")?;
        Ok(v)
    }
}
