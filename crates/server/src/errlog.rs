//! The queue manager's one error-log path. A queue manager started by `strmqm` has its stderr
//! redirected to `errors/qm.log`, usually on the same filesystem as its log and message store:
//! when that disk is full, writing a line fails. `eprintln!` panics then, killing whichever thread
//! was reporting (the checkpointer did, and persistence stayed stopped). Everything the queue
//! manager process reports goes through [`write_line`] instead — its own messages (the
//! [`qm_log!`](crate::qm_log) macro) and, through the `tracing` subscriber [`install`] sets up,
//! the warnings of the storage and replication crates. It never panics and never blocks on
//! anything but the write itself: a line that cannot be written is held in memory (the most recent
//! [`HELD_BYTES`] of them), and the next line that can be written brings them along, saying why
//! they are late and how many older ones were dropped.

use std::collections::VecDeque;
use std::io::Write;

use parking_lot::Mutex;

/// At most this many bytes of lines that could not be written are held for later.
pub const HELD_BYTES: usize = 64 << 10;

/// Lines that could not be written yet.
struct Held {
    lines: VecDeque<String>,
    bytes: usize,
    /// Held lines given up to stay within `HELD_BYTES`.
    dropped: u64,
    /// Why the last write failed.
    why: String,
}

static HELD: Mutex<Held> = Mutex::new(Held {
    lines: VecDeque::new(),
    bytes: 0,
    dropped: 0,
    why: String::new(),
});

/// Writes one line (a newline is added) to the error log. Never panics; a line that cannot be
/// written is held and written before the next line that can be.
pub fn write_line(line: &str) {
    let line = line.trim_end_matches('\n');
    let mut held = HELD.lock();
    let mut out = String::with_capacity(line.len() + held.bytes + 160);
    if !held.lines.is_empty() || held.dropped > 0 {
        out.push_str(&format!(
            "ferrymq: the error log could not be written for a while ({}); the {} line(s) held back follow{}\n",
            held.why,
            held.lines.len(),
            if held.dropped > 0 {
                format!(" ({} older ones were dropped)", held.dropped)
            } else {
                String::new()
            }
        ));
        for l in &held.lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out.push_str(line);
    out.push('\n');
    let mut err = std::io::stderr().lock();
    match err.write_all(out.as_bytes()).and_then(|_| err.flush()) {
        Ok(()) => {
            held.lines.clear();
            held.bytes = 0;
            held.dropped = 0;
        }
        Err(e) => {
            held.why = e.to_string();
            held.bytes += line.len();
            held.lines.push_back(line.to_string());
            while held.bytes > HELD_BYTES {
                match held.lines.pop_front() {
                    Some(l) => {
                        held.bytes -= l.len();
                        held.dropped += 1;
                    }
                    None => break,
                }
            }
        }
    }
}

/// Writes a formatted line to the queue manager's error log without ever panicking
/// (see [`write_line`]).
#[macro_export]
macro_rules! qm_log {
    ($($arg:tt)*) => {
        $crate::errlog::write_line(&format!($($arg)*))
    };
}

/// A `tracing` writer that hands each formatted event to [`write_line`] whole.
#[derive(Default)]
pub struct EventWriter(Vec<u8>);

impl Write for EventWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let text = String::from_utf8_lossy(&self.0);
            write_line(text.trim_end_matches('\n'));
        }
    }
}

/// Routes `tracing` events of this process (the log, replication and server crates' warnings:
/// a log file extended with zeros, a damaged manifest skipped, the log writer failing, ...) to the
/// error log through [`write_line`]. The level is `FERRYMQ_LOG` (an `EnvFilter` directive such as
/// `debug` or `ferrymq_log=trace`), by default warnings and errors (only errors from openraft)
/// plus the informational events of FerryMQ's own crates. Installing twice is harmless.
pub fn install() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("FERRYMQ_LOG")
        .ok()
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| {
            // openraft's own warnings repeat per retried RPC while a peer is down; the HA code
            // reports what matters of those itself.
            EnvFilter::new(
                "warn,openraft=error,ferrymq_log=info,ferrymq_server=info,ferrymq_replication=info",
            )
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(true)
        .with_writer(EventWriter::default)
        .try_init();
}
