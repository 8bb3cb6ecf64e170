//! File checksums: BLAKE3 by default (as strong as SHA-256 and several times cheaper per byte,
//! which matters because both agents hash every byte they move); SHA-256 where a request asks for
//! it, and for transfers recorded before BLAKE3 was the default ([`LEGACY_DEFAULT`]); MD5 where a
//! request asks for it (MQ's agents' default).

use md5::Digest as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    Md5,
    Sha256,
    #[default]
    Blake3,
    None,
}

/// The method a request that names none meant when its transfer was recorded by an agent from
/// before BLAKE3 was the default: such a transfer resumes with it.
pub const LEGACY_DEFAULT: Method = Method::Sha256;

impl Method {
    /// MQ's spellings (`MD5`, `SHA-256`, `none`) and `BLAKE3`, case-insensitive.
    pub fn parse(s: &str) -> Option<Method> {
        match s.to_ascii_uppercase().as_str() {
            "MD5" => Some(Method::Md5),
            "SHA-256" | "SHA256" => Some(Method::Sha256),
            "BLAKE3" => Some(Method::Blake3),
            "NONE" => Some(Method::None),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Method::Md5 => "MD5",
            Method::Sha256 => "SHA-256",
            Method::Blake3 => "BLAKE3",
            Method::None => "none",
        }
    }
}

/// A running checksum.
pub enum Hasher {
    Md5(md5::Md5),
    Sha256(sha2::Sha256),
    Blake3(Box<blake3::Hasher>),
    None,
}

impl std::fmt::Debug for Hasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher")
    }
}

impl Hasher {
    pub fn new(m: Method) -> Hasher {
        match m {
            Method::Md5 => Hasher::Md5(md5::Md5::new()),
            Method::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Method::Blake3 => Hasher::Blake3(Box::new(blake3::Hasher::new())),
            Method::None => Hasher::None,
        }
    }
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Blake3(h) => {
                h.update(data);
            }
            Hasher::None => {}
        }
    }
    /// The digest in lower-case hex ("" for none).
    pub fn hex(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Md5(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
            Hasher::None => Vec::new(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The checksum of a whole file, read in bounded pieces.
pub fn of_file(path: &std::path::Path, m: Method) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Hasher::new(m);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests_of_abc() {
        let mut h = Hasher::new(Method::Md5);
        h.update(b"abc");
        assert_eq!(h.hex(), "900150983cd24fb0d6963f7d28e17f72");
        let mut h = Hasher::new(Method::Sha256);
        h.update(b"ab");
        h.update(b"c");
        assert_eq!(
            h.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut h = Hasher::new(Method::Blake3);
        h.update(b"ab");
        h.update(b"c");
        assert_eq!(
            h.hex(),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(Method::parse("sha-256"), Some(Method::Sha256));
        assert_eq!(Method::parse("blake3"), Some(Method::Blake3));
        assert_eq!(Method::parse("crc"), None);
        assert_eq!(Method::default(), Method::Blake3);
        for m in [Method::Md5, Method::Sha256, Method::Blake3, Method::None] {
            assert_eq!(Method::parse(m.name()), Some(m));
        }
    }
}
