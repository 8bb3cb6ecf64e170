//! Feeds arbitrary bytes to the listener's TLS path as a client would send them on a fresh
//! socket: the first byte goes through the listener's own sniffing function, and a socket taken
//! for TLS is served by a rustls ServerConnection with the configuration a queue manager builds
//! from its key repository (a development CA's certificates, made once). Nothing may panic, and
//! the server's buffering stays bounded: what it accepts before it must process is capped, and
//! what it answers to one client's bytes is small.
#![no_main]

use std::io::Read;
use std::sync::{Arc, OnceLock};

use ferrymq_security::tls::devca::DevCa;
use ferrymq_security::tls::KeyRepoPaths;
use ferrymq_server::security::tls::{sniff, FirstByte, TlsState};
use libfuzzer_sys::fuzz_target;
use rustls::{ServerConfig, ServerConnection};

/// rustls buffers at most one 64 KiB handshake message and one 4 KiB read beyond it before it
/// refuses to read more ("message buffer full").
const UNPROCESSED_INPUT_MAX_BYTES: usize = 0xffff + 4096;
/// The server's answer to a client's first flight (its certificate chain, handshake messages, an
/// alert) fits in this.
const OUTPUT_MAX_BYTES: usize = 64 * 1024;
/// How much of the input, repeated, a client that keeps sending offers the server.
const OFFERED_MAX_BYTES: usize = 1024 * 1024;
/// The listener reads sockets in chunks of this size.
const READ_CHUNK_BYTES: usize = 4096;

/// The server configuration of a queue manager whose qm.ini SSL stanza names a development CA's
/// certificates, loaded by the queue manager's own code; made once per fuzzing process.
fn config() -> Arc<ServerConfig> {
    static CONFIG: OnceLock<Arc<ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let ca = DevCa::new("fuzz CA").expect("a development CA");
            let qm = ca.issue_qmgr("FUZZQM", &[]).expect("a certificate");
            let write = |name: &str, text: &str| {
                let p = dir.path().join(name);
                std::fs::write(&p, text).expect("written");
                p
            };
            let paths = KeyRepoPaths {
                cert_file: write("qm.pem", &qm.cert_pem),
                key_file: write("qm.key", &qm.key_pem),
                ca_file: write("ca.pem", &ca.cert_pem()),
            };
            let state = TlsState::load(
                Some(&paths),
                dir.path().join("qm.ini"),
                dir.path().to_path_buf(),
            );
            state.server_config().expect("the key repository loads")
        })
        .clone()
}

/// The input repeated up to `total` bytes: a client that keeps sending.
struct Cycle<'a> {
    data: &'a [u8],
    pos: usize,
    left: usize,
}

impl Read for Cycle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.left).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos = (self.pos + n) % self.data.len();
        self.left -= n;
        Ok(n)
    }
}

/// A server that reads without ever processing stops reading within its bound.
fn unprocessed_input_is_capped(data: &[u8]) {
    let mut conn = ServerConnection::new(config()).expect("a server connection");
    let mut input = Cycle {
        data,
        pos: 0,
        left: OFFERED_MAX_BYTES,
    };
    let mut accepted = 0usize;
    loop {
        match conn.read_tls(&mut input) {
            Ok(0) | Err(_) => break,
            Ok(n) => accepted += n,
        }
        assert!(
            accepted <= UNPROCESSED_INPUT_MAX_BYTES,
            "{accepted} bytes buffered unprocessed"
        );
    }
}

/// The listener's loop: read a chunk, process it, send what the server has to say; until the
/// handshake fails, finishes, or the client stops. What the server sends stays small.
fn served_like_the_listener(data: &[u8], repeat: bool) {
    let mut conn = ServerConnection::new(config()).expect("a server connection");
    let mut input = Cycle {
        data,
        pos: 0,
        left: if repeat {
            OFFERED_MAX_BYTES
        } else {
            data.len()
        },
    };
    let mut sent = Vec::new();
    loop {
        let mut chunk = (&mut input).take(READ_CHUNK_BYTES as u64);
        let n = match conn.read_tls(&mut chunk) {
            Ok(n) => n,
            Err(_) => break,
        };
        let processed = conn.process_new_packets();
        while conn.wants_write() {
            conn.write_tls(&mut sent).expect("writing to memory");
            assert!(sent.len() <= OUTPUT_MAX_BYTES, "{} bytes sent", sent.len());
        }
        if n == 0 || processed.is_err() || !conn.is_handshaking() {
            break;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(&first) = data.first() else {
        return;
    };
    match sniff(first) {
        // The plain protocol's path is the frame decoder's fuzz target.
        FirstByte::Plain => assert_ne!(first, 0x16),
        FirstByte::Tls => {
            unprocessed_input_is_capped(data);
            served_like_the_listener(data, false);
            served_like_the_listener(data, true);
        }
    }
});
