//! Text mode: a streaming converter of line endings and encodings, fed the source file block by
//! block, whatever the block boundaries (a multi-byte character or a CR LF pair split between two
//! blocks is held until the next one).
//!
//! The rule for line endings: the destination's convention is LF (the agents run on Unix) unless
//! the request asks for CRLF (`-dle CRLF`); CR LF and LF in the source both become the
//! destination's line ending, a lone CR is left alone. Encodings: UTF-8 (the default, CCSID 1208)
//! and ISO-8859-1 (CCSID 819); a character the destination encoding lacks becomes `?`, a byte
//! sequence that is not UTF-8 becomes U+FFFD.

use crate::{err, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Utf8,
    Latin1,
}

impl Encoding {
    /// An encoding by name or CCSID; empty is UTF-8.
    pub fn parse(s: &str) -> Result<Encoding> {
        match s.to_ascii_uppercase().as_str() {
            "" | "UTF-8" | "UTF8" | "1208" => Ok(Encoding::Utf8),
            "ISO-8859-1" | "ISO8859-1" | "LATIN1" | "LATIN-1" | "819" => Ok(Encoding::Latin1),
            _ => err(format!("encoding '{s}': UTF-8 (1208) or ISO-8859-1 (819)")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Eol {
    #[default]
    Lf,
    Crlf,
}

impl Eol {
    /// A line ending by name; empty is the destination's own, LF.
    pub fn parse(s: &str) -> Result<Eol> {
        match s.to_ascii_uppercase().as_str() {
            "" | "LF" => Ok(Eol::Lf),
            "CRLF" => Ok(Eol::Crlf),
            _ => err(format!("line ending '{s}': LF or CRLF")),
        }
    }
}

pub struct Converter {
    src: Encoding,
    dst: Encoding,
    eol: Eol,
    /// The start of a UTF-8 sequence the last block cut.
    carry: Vec<u8>,
    /// The last block ended with a CR: whether it begins a CR LF pair is not known yet.
    cr: bool,
}

impl Converter {
    pub fn new(src: Encoding, dst: Encoding, eol: Eol) -> Converter {
        Converter {
            src,
            dst,
            eol,
            carry: Vec::new(),
            cr: false,
        }
    }

    fn emit(&mut self, c: char, out: &mut Vec<u8>) {
        if self.cr {
            self.cr = false;
            if c == '\n' {
                self.newline(out);
                return;
            }
            self.encode('\r', out);
        }
        match c {
            '\r' => self.cr = true,
            '\n' => self.newline(out),
            c => self.encode(c, out),
        }
    }

    fn newline(&self, out: &mut Vec<u8>) {
        if self.eol == Eol::Crlf {
            out.push(b'\r');
        }
        out.push(b'\n');
    }

    fn encode(&self, c: char, out: &mut Vec<u8>) {
        match self.dst {
            Encoding::Utf8 => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
            Encoding::Latin1 => out.push(if (c as u32) < 256 {
                c as u32 as u8
            } else {
                b'?'
            }),
        }
    }

    /// Converts one block; what it cannot finish yet waits for the next block or `finish`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match self.src {
            Encoding::Latin1 => {
                for &b in input {
                    self.emit(b as char, out);
                }
            }
            Encoding::Utf8 => {
                let mut data = std::mem::take(&mut self.carry);
                data.extend_from_slice(input);
                let mut rest: &[u8] = &data;
                loop {
                    match std::str::from_utf8(rest) {
                        Ok(s) => {
                            for c in s.chars() {
                                self.emit(c, out);
                            }
                            break;
                        }
                        Err(e) => {
                            let (good, bad) = rest.split_at(e.valid_up_to());
                            for c in std::str::from_utf8(good).unwrap_or("").chars() {
                                self.emit(c, out);
                            }
                            match e.error_len() {
                                Some(n) => {
                                    self.emit('\u{FFFD}', out);
                                    rest = &bad[n..];
                                }
                                None => {
                                    // Cut by the block's end: wait for the rest.
                                    self.carry = bad.to_vec();
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The end of the file: what was held back goes out.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.carry.is_empty() {
            self.carry.clear();
            self.emit('\u{FFFD}', out);
        }
        if self.cr {
            self.cr = false;
            self.encode('\r', out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(input: &[u8], block: usize, src: Encoding, dst: Encoding, eol: Eol) -> Vec<u8> {
        let mut c = Converter::new(src, dst, eol);
        let mut out = Vec::new();
        for b in input.chunks(block) {
            c.push(b, &mut out);
        }
        c.finish(&mut out);
        out
    }

    #[test]
    fn every_block_size_gives_the_same_text() {
        let src = "héllo\r\nwörld 日本語\nlast\r".as_bytes();
        let want_lf = "héllo\nwörld 日本語\nlast\r".as_bytes();
        let want_crlf = "héllo\r\nwörld 日本語\r\nlast\r".as_bytes();
        for block in 1..=src.len() {
            let u = Encoding::Utf8;
            assert_eq!(convert(src, block, u, u, Eol::Lf), want_lf, "block {block}");
            assert_eq!(convert(src, block, u, u, Eol::Crlf), want_crlf);
        }
        let latin = convert(
            "é日\n".as_bytes(),
            1,
            Encoding::Utf8,
            Encoding::Latin1,
            Eol::Lf,
        );
        assert_eq!(latin, b"\xe9?\n");
        let back = convert(b"\xe9\r\n", 1, Encoding::Latin1, Encoding::Utf8, Eol::Lf);
        assert_eq!(back, "é\n".as_bytes());
    }
}
