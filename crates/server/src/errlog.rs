//! The queue manager's one error-log path. A queue manager started by `strmqm` has its stderr
//! redirected to `errors/qm.log`, usually on the same filesystem as its log and message store:
//! when that disk is full, writing a line fails. `eprintln!` panics then, killing whichever thread
//! was reporting (the checkpointer did, and persistence stayed stopped). Everything the queue
//! manager process reports goes through [`write_line`] instead — its own messages (the
//! [`qm_log!`](crate::qm_log) macro) and, through the `tracing` subscriber [`install`] sets up,
//! the warnings of the storage and replication crates. It never panics and never blocks on
//! anything but the write itself: a line that cannot be written is counted, and the next line that
//! can be says how many were lost and why.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Lines that could not be written since the last one that could, and the last reason.
static LOST: AtomicU64 = AtomicU64::new(0);
static LOST_WHY: Mutex<String> = Mutex::new(String::new());

/// Writes one line (a newline is added) to the error log. Never panics; a failed write is
/// counted and reported by the next line that gets through.
pub fn write_line(line: &str) {
    let mut out = String::with_capacity(line.len() + 96);
    let lost = LOST.load(Ordering::Acquire);
    if lost > 0 {
        let why = LOST_WHY.lock().clone();
        out.push_str(&format!(
            "ferrymq: {lost} earlier error-log line(s) could not be written ({why})\n"
        ));
    }
    out.push_str(line);
    if !line.ends_with('\n') {
        out.push('\n');
    }
    let mut err = std::io::stderr().lock();
    match err.write_all(out.as_bytes()).and_then(|_| err.flush()) {
        Ok(()) => {
            if lost > 0 {
                LOST.fetch_sub(lost, Ordering::AcqRel);
            }
        }
        Err(e) => {
            LOST.fetch_add(1, Ordering::AcqRel);
            *LOST_WHY.lock() = e.to_string();
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
/// `debug` or `ferrymq_log=trace`), by default warnings and errors from everything plus the
/// informational events of FerryMQ's own crates. Installing twice is harmless.
pub fn install() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("FERRYMQ_LOG")
        .ok()
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| {
            EnvFilter::new("warn,ferrymq_log=info,ferrymq_server=info,ferrymq_replication=info")
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(true)
        .with_writer(EventWriter::default)
        .try_init();
}
