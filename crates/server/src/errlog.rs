//! The queue manager's error log: one path for everything the queue manager process reports, in a
//! form operators and log shippers can read. Each entry is one line with an ISO-8601 UTC timestamp,
//! a severity, a message id `FMQnnnnX` (number and severity letter, as MQ's `AMQnnnnX`) from the
//! catalogue in [`ids`], and a sentence — or, with `QMErrorLog:Format=json` in qm.ini, one JSON
//! object per line with the same fields. The log is `errors/FMQERR01.LOG`, rotated by size
//! (`QMErrorLog:ErrorLogSize`) into `FMQERR02.LOG` and `FMQERR03.LOG`, as MQ keeps
//! `AMQERR01..03.LOG`. What the process prints outside this path (a panic's message) goes to its
//! stderr, which `strmqm` points at `errors/console.log`.
//!
//! The log usually shares a filesystem with the recovery log and message store: when that disk is
//! full, a write fails. `eprintln!` would panic then and kill whichever thread was reporting (the
//! checkpointer did once, and persistence stayed stopped). Nothing here panics or blocks on anything
//! but the write itself: an entry that cannot be written is held in memory (the most recent
//! [`HELD_BYTES`] of them), and the next entry that can be written brings them along, after an
//! entry saying why they are late and how many older ones were dropped. The storage and
//! replication crates' `tracing` events reach the same path through the subscriber [`install`]
//! sets up (id `FMQ9001`, severity from the event's level).

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// At most this many bytes of entries that could not be written are held for later.
pub const HELD_BYTES: usize = 64 << 10;

/// The error log's files in `errors/`, newest first.
pub const FILES: [&str; 3] = ferrymq_types::objects::ERROR_LOG_FILES;
/// The queue manager process's stderr (set by `strmqm`): what did not go through the error log.
pub const CONSOLE: &str = ferrymq_types::objects::CONSOLE_LOG;
/// `QMErrorLog:ErrorLogSize` by default: each file is rotated at 2 MiB.
pub const DEFAULT_FILE_BYTES: u64 = 2 << 20;
/// The smallest `QMErrorLog:ErrorLogSize` accepted.
pub const MIN_FILE_BYTES: u64 = 4 << 10;

/// How serious an entry is; its letter ends the message id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Something happened as it should (started, ended, took over).
    Info,
    /// Something unusual that the queue manager handles; worth a look.
    Warning,
    /// Something failed; the queue manager carries on, maybe with less (an action is needed).
    Error,
    /// The queue manager (or this instance) cannot carry on.
    Severe,
}

impl Severity {
    pub fn letter(self) -> char {
        match self {
            Severity::Info => 'I',
            Severity::Warning => 'W',
            Severity::Error => 'E',
            Severity::Severe => 'S',
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Severity::Info => "INFO",
            Severity::Warning => "WARNING",
            Severity::Error => "ERROR",
            Severity::Severe => "SEVERE",
        }
    }
}

/// One message of the catalogue: its number, severity and what it means (for operators).
#[derive(Clone, Copy, Debug)]
pub struct MsgId {
    pub num: u16,
    pub sev: Severity,
    pub what: &'static str,
}

impl MsgId {
    /// `FMQnnnnX`, e.g. `FMQ1001I`.
    pub fn code(&self) -> String {
        format!("FMQ{:04}{}", self.num, self.sev.letter())
    }
}

macro_rules! catalogue {
    ($($name:ident = $num:literal $sev:ident $what:literal;)*) => {
        $(
            #[doc = $what]
            pub const $name: MsgId = MsgId { num: $num, sev: Severity::$sev, what: $what };
        )*
        /// Every message id, in number order.
        pub const ALL: &[MsgId] = &[$($name),*];
    };
}

/// The catalogue of error-log messages. Numbers by area: 1xxx the queue manager's life and
/// configuration, 2xxx recovery and checkpoints, 3xxx listeners and connections, 4xxx high
/// availability, 5xxx disaster recovery, 9xxx the error log itself and library events.
pub mod ids {
    use super::{MsgId, Severity};
    catalogue! {
        QM_RUNNING = 1001 Info "The queue manager is running and accepting connections.";
        QM_ENDED = 1002 Info "The queue manager ended; its final checkpoint is named.";
        QM_ENDING = 1003 Info "A controlled end waits for applications to disconnect.";
        QM_FAILED = 1004 Severe "The queue manager process stops because of the error named.";
        INI_UNKNOWN_KEY = 1005 Warning "qm.ini holds a stanza or key FerryMQ does not know; it is ignored (setmqini lists the valid ones).";
        END_STATUS_UNWRITTEN = 1006 Error "How this run ends cannot be recorded in qm.end; endmqm -w will not know.";
        ERROR_LOG_CONFIG = 1007 Warning "A QMErrorLog setting in qm.ini is not valid; the default is used.";
        ADMIN_NOT_CONFIRMED = 1008 Warning "An MQSC command was answered 'not confirmed': its log record was not durable (HA: committed) within the bound; whether it takes effect is not known.";
        QMID_NOT_RECORDED = 1009 Warning "The queue manager's identifier (QMID) could not be logged at start; a later start tries again.";
        AUTOCONFIG_APPLIED = 1010 Info "An MQSC file of the AutoConfig directory was applied at start: commands run and failed.";
        AUTOCONFIG_FAILED = 1011 Error "A command of an AutoConfig MQSC file failed (file and line named); the queue manager runs on.";
        EXPIRY_SCAN = 1012 Info "The expiry scan discarded expired messages (how many, of how many examined).";
        QPUBSUB_FAILED = 1014 Error "The queued publish interface could not publish from a stream queue (SYSTEM.BROKER.DEFAULT.STREAM, SYSTEM.FTE): the stream, the error and what happens next are named.";
        WAKE_LATENCY_UNAVAILABLE = 1015 Warning "TuningParameters:CpuWakeLatencyUs is set but the kernel's CPU latency request (/dev/cpu_dma_latency) could not be made; the queue manager runs without it.";
        MESSAGE_MEMORY_FULL = 1016 Warning "Puts were refused with MQRC_STORAGE_NOT_AVAILABLE (2071) because the queue manager's messages hold TuningParameters:MaxMessageMemory (the bytes held, the limit and how many were refused are named; logged at most once a minute), or a start loaded more than it.";
        OPEN_FILES_LOW = 1013 Warning "The process's open-file limit (RLIMIT_NOFILE, raised at start to its hard limit) is below what Channels:MaxChannels needs; connections past it are refused. Raise the hard limit (ulimit -Hn, LimitNOFILE) or lower MaxChannels.";
                RECOVERED = 2001 Info "Restart recovery finished: checkpoint, messages loaded, log records replayed.";
        RECOVERY_LOSS = 2002 Error "Restart recovery discarded data that may have been acknowledged; each item follows. strmqm exits with status 3.";
        RECOVERY_NOTE = 2003 Info "Restart recovery cut a torn log tail; nothing acknowledged was lost.";
        STARTUP_CHECKPOINT = 2004 Info "A checkpoint was taken at start-up to make room in a nearly full recovery log.";
        STARTUP_CHECKPOINT_FAILED = 2005 Error "The start-up checkpoint failed; the checkpointer retries.";
        CHECKPOINT_FAILED = 2006 Error "A checkpoint failed (often a full disk); retried with back-off. Persistent work stops once the recovery log is full.";
        CHECKPOINT_RESUMED = 2007 Info "A checkpoint succeeded after failures; the recovery log has room again.";
        LOG_TRACE = 2008 Info "Log-writer statistics (FERRYMQ_TRACE).";
        LISTENER_STARTED = 3001 Info "A TCP listener started.";
        LISTENER_FAILED = 3002 Error "A TCP listener could not start (address in use, no permission, ...).";
        ACCEPT_FAILED = 3003 Warning "Accepting a connection failed (often: out of file descriptors); the listener backs off and accepts again, refusing the excess (logged once per burst).";
        MAX_CHANNELS = 3004 Warning "Connections were refused with MQRC_CHANNEL_NOT_AVAILABLE (2537): Channels:MaxChannels or MaxActiveChannels reached (logged at most once a second, with how many).";
        METRICS_STARTED = 3005 Info "Prometheus metrics are served at the address named.";
        METRICS_ACCEPT_FAILED = 3006 Warning "Accepting a metrics connection failed.";
        NOT_AUTHORIZED = 3008 Warning "A connection, open, MQPUT1 or MQSC command was refused with MQRC_NOT_AUTHORIZED: the user and its groups, the operation, the object and the authorities missing are named.";
        REMOTE_ADMIN_REFUSED = 3007 Warning "MQSC from a client (TCP) connection was refused: qm.ini Channels:RemoteAdmin is off, or (RemoteAdmin=authenticated) the conversation is not on SYSTEM.ADMIN.SVRCONN or did not authenticate with a password (logged once per connection).";
        CHANNEL_REFUSED = 3009 Warning "A client connection named a channel that is not a defined SVRCONN channel; it was refused (channel and address named).";
        CHLAUTH_REFUSED = 3010 Warning "A channel authentication record refused a connection, or would have with WARN(YES) (rule, address and user named).";
        CONNAUTH_FAILED = 3011 Warning "Connection authentication failed: user, address and why are named (never the password).";
        USER_STORE = 3012 Error "The queue manager's user store could not be read; the users loaded before stay in force.";
        TLS_REPOSITORY_LOADED = 3013 Info "The TLS key repository (qm.ini SSL stanza) was loaded; its certificate is named.";
        TLS_REPOSITORY_FAILED = 3014 Error "The TLS key repository cannot be used (file and problem named); TLS connections are refused, or the one loaded before stays in force.";
        TLS_SOCKET_REFUSED = 3015 Warning "A TLS connection was closed before its handshake finished: no key repository, a failed or slow handshake, or a certificate that does not verify.";
        CHANNEL_TLS_REFUSED = 3016 Warning "A channel refused a connection by its SSLCIPH, SSLCAUTH or SSLPEER (channel, rule and DN named).";
        LINK_TLS_ON = 3017 Info "The links between the queue manager's instances (HA replication, DR) are mutual TLS: the certificate presented and the peer DN filter are named.";
        LINK_TLS_REFUSED = 3018 Warning "A link between the queue manager's instances was refused: the peer's address and the rule (not TLS, no certificate, untrusted certificate, DN mismatch, refused by the peer, handshake timeout) are named; logged at most once a minute per peer and rule while the link retries.";
        CHANNEL_STARTED = 3019 Info "A message channel started, or its sending end bound to the receiver (address and transmission queue named).";
        CHANNEL_RETRYING = 3020 Warning "A sender channel failed and retries (the retry, its interval and the reason named).";
        CHANNEL_ENDED = 3021 Info "A message channel instance ended (stopped, or the reason it failed).";
        CHANNEL_RESOLVED = 3022 Info "A sender channel resolved its batch in doubt (committed or backed out, and why).";
        HA_PREFERRED = 4001 Info "The preferred instance of the HA group changed.";
        HA_PREFERRED_UNRECORDED = 4002 Error "The preferred instance cannot be recorded in qm.ini.";
        HA_UNKNOWN_CONTROL = 4003 Warning "An HA control record of an unknown kind was ignored (a newer version wrote it?).";
        HA_UNKNOWN_ENTRY = 4004 Warning "A replicated entry of an unknown kind was ignored.";
        HA_APPLY_FAILED = 4005 Error "A replicated entry could not be applied; this instance restarts to recover.";
        HA_RESTART = 4006 Warning "This instance restarts as a replica (it lost leadership or could not apply).";
        HA_RESTART_FAILED = 4007 Severe "This instance cannot restart; it exits.";
        HA_ACTIVE = 4008 Info "This instance is now the active instance of the HA group.";
        HA_NOT_YET_ACTIVE = 4009 Warning "This instance leads its term but cannot take over yet; the reason is named.";
        HA_WARNING = 4010 Warning "A warning from the HA group (a replica's state, a peer's address).";
        HA_REPLICA_STARTED = 4011 Info "This instance started as a replica.";
        HA_INSTANCE_ENDED = 4012 Info "This instance ended.";
        HA_FAST_ELECTION = 4013 Info "The active instance's connection ended: what a probe of its replication address found, and the election this instance called at once when nothing listens there.";
        DR_BOUND_RECORDED = 5001 Info "The DR secondary recorded the primary's lag bound in qm.ini (makedrprimary keeps it).";
        DR_BOUND_UNRECORDED = 5002 Error "The DR secondary cannot record the primary's lag bound in qm.ini.";
        DR_RECEIVER_FAILED = 5003 Error "The DR secondary's receiver failed.";
        DR_WAITING = 5004 Info "The DR secondary waits for the primary's stream.";
        DR_STREAM_ERROR = 5005 Warning "A DR stream from the primary broke; the primary reconnects.";
        DR_PRIMARY_CONNECTED = 5006 Info "The DR primary connected; the position this site holds is named.";
        DR_COPY_STARTED = 5007 Info "A full copy from the DR primary started.";
        DR_COPY_RESUMED = 5008 Info "A broken full copy resumes where it stopped.";
        DR_COPY_INSTALLED = 5009 Info "A full copy is complete and installed; this site holds the stream named.";
        DR_STREAM_ID_UNRECORDED = 5010 Error "This queue manager's DR stream id cannot be recorded.";
        DR_SHIP_ERROR = 5011 Warning "Shipping to the DR secondary failed; it is retried.";
        DR_SHIP_RESUMED = 5012 Info "The DR secondary holds the stream to a position; what follows it is sent.";
        DR_SHIP_COPY = 5013 Info "A full copy is sent to the DR secondary (the reason is named).";
        DR_HANDED_OVER = 5014 Info "A DR primary ending in an orderly way waited for its secondary to acknowledge the whole stream; whether it did, or what it lacked when the wait ended, is named.";
        LOG_HELD = 9000 Warning "The error log could not be written for a while; the entries held back follow.";
        LIBRARY_EVENT = 9001 Info "An event of one of FerryMQ's libraries (storage, replication); its level sets the severity.";
    }
}

/// How the error log is written (qm.ini's `QMErrorLog` stanza).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `ErrorLogSize`: a file is rotated before it would grow past this.
    pub file_bytes: u64,
    /// `Format=json`: one JSON object per line.
    pub json: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            file_bytes: DEFAULT_FILE_BYTES,
            json: false,
        }
    }
}

/// Where entries go once [`open`] has named the directory; before, to stderr.
struct Sink {
    dir: Option<PathBuf>,
    file: Option<File>,
    size: u64,
    settings: Settings,
    qmgr: String,
}

/// Entries that could not be written yet.
struct Held {
    lines: VecDeque<String>,
    bytes: usize,
    /// Held entries given up to stay within `HELD_BYTES`.
    dropped: u64,
    /// Why the last write failed.
    why: String,
}

struct State {
    sink: Sink,
    held: Held,
}

static STATE: Mutex<State> = Mutex::new(State {
    sink: Sink {
        dir: None,
        file: None,
        size: 0,
        settings: Settings {
            file_bytes: DEFAULT_FILE_BYTES,
            json: false,
        },
        qmgr: String::new(),
    },
    held: Held {
        lines: VecDeque::new(),
        bytes: 0,
        dropped: 0,
        why: String::new(),
    },
});

/// From now on, entries go to `errors_dir/FMQERR01.LOG` (rotated as `settings` say), naming the
/// queue manager `qmgr` in JSON entries. Calling it again changes the settings.
pub fn open(errors_dir: &Path, qmgr: &str, settings: Settings) {
    let mut st = STATE.lock();
    st.sink.dir = Some(errors_dir.to_path_buf());
    st.sink.file = None;
    st.sink.settings = settings;
    st.sink.qmgr = qmgr.to_string();
}

/// Writes one entry (`text` may hold several lines; each becomes an entry with the same id). Never
/// panics; an entry that cannot be written is held and written before the next one that can be.
pub fn log(id: MsgId, text: &str) {
    log_at(id.code(), id.sev, text);
}

fn log_at(code: String, sev: Severity, text: &str) {
    let now = chrono::Utc::now();
    let mut st = STATE.lock();
    let mut out = String::new();
    for line in text.trim_end_matches('\n').lines() {
        out.push_str(&format_entry(&st.sink, now, &code, sev, line));
    }
    let mut all = String::new();
    if !st.held.lines.is_empty() || st.held.dropped > 0 {
        let held = &st.held;
        let head = format!(
            "{} entr{} could not be written ({}); they follow{}",
            held.lines.len(),
            if held.lines.len() == 1 { "y" } else { "ies" },
            held.why,
            if held.dropped > 0 {
                format!(" ({} older ones were dropped)", held.dropped)
            } else {
                String::new()
            }
        );
        all.push_str(&format_entry(
            &st.sink,
            now,
            &ids::LOG_HELD.code(),
            ids::LOG_HELD.sev,
            &head,
        ));
        for l in &st.held.lines {
            all.push_str(l);
        }
    }
    all.push_str(&out);
    let r = match st.sink.dir.clone() {
        None => {
            let mut err = std::io::stderr().lock();
            err.write_all(all.as_bytes()).and_then(|_| err.flush())
        }
        Some(dir) => write_file(&mut st.sink, &dir, all.as_bytes()),
    };
    let held = &mut st.held;
    match r {
        Ok(()) => {
            held.lines.clear();
            held.bytes = 0;
            held.dropped = 0;
        }
        Err(e) => {
            held.why = e.to_string();
            held.bytes += out.len();
            held.lines.push_back(out);
            trim_held(held);
        }
    }
}

fn trim_held(held: &mut Held) {
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

fn write_file(sink: &mut Sink, dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if sink.file.is_none() {
        let path = dir.join(FILES[0]);
        let f = File::options().create(true).append(true).open(&path)?;
        sink.size = f.metadata().map(|m| m.len()).unwrap_or(0);
        sink.file = Some(f);
    }
    if sink.size > 0 && sink.size + bytes.len() as u64 > sink.settings.file_bytes {
        // Rotate: 02 -> 03, 01 -> 02, a new 01. A failed rename (it needs no space) leaves the
        // current file in use, over its size, rather than losing the entry.
        let mut ok = true;
        for i in (1..FILES.len()).rev() {
            let from = dir.join(FILES[i - 1]);
            if from.exists() {
                ok &= std::fs::rename(&from, dir.join(FILES[i])).is_ok();
            }
        }
        if ok {
            let f = File::options()
                .create(true)
                .append(true)
                .open(dir.join(FILES[0]))?;
            sink.file = Some(f);
            sink.size = 0;
        }
    }
    let f = sink.file.as_mut().expect("opened above");
    match f.write_all(bytes) {
        Ok(()) => {
            sink.size += bytes.len() as u64;
            Ok(())
        }
        Err(e) => {
            // What a partial write left is counted; the entry is held and written again whole.
            sink.size = f.metadata().map(|m| m.len()).unwrap_or(sink.size);
            Err(e)
        }
    }
}

fn format_entry(
    sink: &Sink,
    now: chrono::DateTime<chrono::Utc>,
    code: &str,
    sev: Severity,
    text: &str,
) -> String {
    let ts = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    if sink.settings.json {
        let mut v = serde_json::json!({
            "time": ts,
            "severity": sev.word(),
            "id": code,
            "pid": std::process::id(),
            "message": text,
        });
        if !sink.qmgr.is_empty() {
            v["qmgr"] = serde_json::Value::String(sink.qmgr.clone());
        }
        format!("{v}\n")
    } else {
        format!("{ts} {:<7} {code} {text}\n", sev.word())
    }
}

/// One entry read back from the error log (text or JSON line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub time: String,
    pub severity: String,
    pub id: String,
    pub message: String,
}

/// Reads one line of the error log back; None for a line that is not an entry (a panic's output).
pub fn parse_entry(line: &str) -> Option<Entry> {
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        return Some(Entry {
            time: s("time")?,
            severity: s("severity")?,
            id: s("id")?,
            message: s("message")?,
        });
    }
    let mut it = line.splitn(3, ' ');
    let time = it.next()?.to_string();
    let severity = it.next()?.to_string();
    let rest = it.next()?.trim_start();
    let (id, message) = rest.split_once(' ').unwrap_or((rest, ""));
    if !(time.ends_with('Z') && id.starts_with("FMQ") && id.len() == 8) {
        return None;
    }
    Some(Entry {
        time,
        severity,
        id: id.to_string(),
        message: message.to_string(),
    })
}

/// Writes a formatted entry with a catalogue id to the queue manager's error log, never panicking
/// (see [`log`]): `qm_log!(ids::QM_RUNNING, "queue manager '{}' running", name)`.
#[macro_export]
macro_rules! qm_log {
    ($id:expr, $($arg:tt)*) => {
        $crate::errlog::log($id, &format!($($arg)*))
    };
}

/// A `tracing` writer that hands each formatted event to the error log whole.
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
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        let text = text.trim();
        // The subscriber writes "LEVEL target: message" (no time: the entry has its own).
        let (level, rest) = text.split_once(' ').unwrap_or(("INFO", text));
        let sev = match level {
            "ERROR" => Severity::Error,
            "WARN" => Severity::Warning,
            _ => Severity::Info,
        };
        let id = ids::LIBRARY_EVENT;
        log_at(
            format!("FMQ{:04}{}", id.num, sev.letter()),
            sev,
            rest.trim_start(),
        );
    }
}

/// Routes `tracing` events of this process (the log, replication and server crates' warnings:
/// a log file extended with zeros, a damaged manifest skipped, the log writer failing, ...) to the
/// error log. The level is `FERRYMQ_LOG` (an `EnvFilter` directive such as `debug` or
/// `ferrymq_log=trace`), by default warnings and errors (only errors from openraft) plus the
/// informational events of FerryMQ's own crates. Installing twice is harmless.
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
        .without_time()
        .with_writer(EventWriter::default)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_numbers_are_unique_and_codes_well_formed() {
        let mut nums: Vec<u16> = ids::ALL.iter().map(|m| m.num).collect();
        nums.sort_unstable();
        let n = nums.len();
        nums.dedup();
        assert_eq!(nums.len(), n, "a message number is used twice");
        for m in ids::ALL {
            let c = m.code();
            assert_eq!(c.len(), 8, "{c}");
            assert!(c.starts_with("FMQ"));
            assert!(!m.what.is_empty());
        }
        assert_eq!(ids::QM_RUNNING.code(), "FMQ1001I");
        assert_eq!(ids::RECOVERY_LOSS.code(), "FMQ2002E");
    }

    #[test]
    fn entries_read_back_in_both_formats() {
        let now = chrono::Utc::now();
        let mut sink = Sink {
            dir: None,
            file: None,
            size: 0,
            settings: Settings::default(),
            qmgr: "QM1".into(),
        };
        for json in [false, true] {
            sink.settings.json = json;
            let line = format_entry(
                &sink,
                now,
                "FMQ2006E",
                Severity::Error,
                "checkpoint failed: \"disk\" full",
            );
            assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
            let e = parse_entry(line.trim_end()).expect(&line);
            assert_eq!(e.id, "FMQ2006E");
            assert_eq!(e.severity, "ERROR");
            assert_eq!(e.message, "checkpoint failed: \"disk\" full");
            assert!(e.time.ends_with('Z') && e.time.contains('T'), "{}", e.time);
        }
        assert_eq!(parse_entry("thread 'main' panicked at src/x.rs:1:1:"), None);
    }

    #[test]
    fn files_rotate_by_size_and_keep_three() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = Sink {
            dir: Some(dir.path().to_path_buf()),
            file: None,
            size: 0,
            settings: Settings {
                file_bytes: 1000,
                json: false,
            },
            qmgr: String::new(),
        };
        let line = [b'x'; 99];
        for i in 0..50u8 {
            let mut l = line.to_vec();
            l[0] = b'a' + (i % 26);
            l.push(b'\n');
            write_file(&mut sink, dir.path(), &l).unwrap();
        }
        for f in FILES {
            let len = std::fs::metadata(dir.path().join(f)).unwrap().len();
            assert!(len > 0 && len <= 1000, "{f}: {len}");
        }
        assert!(!dir.path().join("FMQERR04.LOG").exists());
        // The newest entry is last in the current file; read_all ends with it.
        let all: String = FILES
            .iter()
            .rev()
            .map(|f| std::fs::read_to_string(dir.path().join(f)).unwrap())
            .collect();
        assert_eq!(all.len(), 3000);
        assert!(all.ends_with(&format!("{}{}\n", (b'a' + 49 % 26) as char, "x".repeat(98))));
    }
}
