//! FerryMQ's managed file transfer, with MQ's names (MQ FTE / MFT): this crate owns the agent (a
//! process bound to one queue manager that sends and receives files), the transfer protocol
//! between agents (start, chunk, end, acknowledgement and result messages on the agents'
//! SYSTEM.FTE.* queues, a window of unacknowledged chunks, checkpoints as one persistent message
//! per transfer on the receiver's state queue, resume by epochs), the sender's persistent record
//! of each transfer, the request model and MQ's XML request format (`<request><managedTransfer>…`),
//! checksums (BLAKE3 by default, SHA-256 on request, MD5 for compatibility), text conversion, the
//! transfer log, resource monitors and the logic of the fte* commands. The `ferrymq` binary only reads their command lines.

pub mod agent;
mod checkpointer;
pub mod checksum;
pub mod commands;
pub mod credentials;
pub mod monitor;
mod monitor_queue;
pub mod props;
mod receiver;
pub mod request;
pub mod sandbox;
mod sender;
pub mod state;
pub mod text;
pub mod translog;

/// The agent's queues, on its queue manager (MQ's names).
pub mod queues {
    pub fn command(agent: &str) -> String {
        format!("SYSTEM.FTE.COMMAND.{agent}")
    }
    pub fn data(agent: &str) -> String {
        format!("SYSTEM.FTE.DATA.{agent}")
    }
    pub fn reply(agent: &str) -> String {
        format!("SYSTEM.FTE.REPLY.{agent}")
    }
    pub fn state(agent: &str) -> String {
        format!("SYSTEM.FTE.STATE.{agent}")
    }
    pub fn event(agent: &str) -> String {
        format!("SYSTEM.FTE.EVENT.{agent}")
    }
    /// All five, in the order fteCreateAgent defines them.
    pub fn all(agent: &str) -> [String; 5] {
        [
            command(agent),
            data(agent),
            reply(agent),
            state(agent),
            event(agent),
        ]
    }
}

/// Message property names of the protocol between agents.
pub(crate) mod prop {
    pub const KIND: &str = "fteKind";
    pub const INDEX: &str = "fteIndex";
    pub const OFFSET: &str = "fteOffset";
    pub const SIZE: &str = "fteSize";
    pub const PATH: &str = "ftePath";
    pub const DIR: &str = "fteDir";
    pub const EXIST: &str = "fteExist";
    pub const METHOD: &str = "fteChecksumMethod";
    /// On an outbound record: the method its request's items that name none use.
    pub const METHOD_DEFAULT: &str = "fteChecksumDefault";
    pub const DIGEST: &str = "fteChecksum";
    pub const ACKED: &str = "fteAcked";
    pub const OK: &str = "fteOk";
    pub const REPLY_Q: &str = "fteReplyQ";
    pub const REPLY_QM: &str = "fteReplyQMgr";
    pub const FRAME: &str = "fteFrame";
    pub const CHECKPOINT: &str = "fteCheckpoint";
    pub const MTIME: &str = "fteMtime";
    /// The source file's identity on its machine, so that a receiver on the same machine can
    /// refuse to write onto it: the kernel's boot id, and the file's device and inode numbers.
    pub const SRC_BOOT: &str = "fteSourceBoot";
    pub const SRC_DEV: &str = "fteSourceDev";
    pub const SRC_INO: &str = "fteSourceIno";
    pub const EPOCH: &str = "fteEpoch";
    pub const RESUME: &str = "fteResume";
    pub const RECEIVED: &str = "fteReceived";
    pub const TID: &str = "fteTransferId";
    pub const REQUEST_ID: &str = "fteRequestId";
    pub const DONE: &str = "fteDone";
    pub const FAILED: &str = "fteFailed";
    pub const RESENT: &str = "fteResent";
    pub const RESUMES: &str = "fteResumes";
}

/// This machine's boot id (`/proc/sys/kernel/random/boot_id`): with a device and an inode
/// number it names one file on one machine, for as long as the machine runs. Empty where the
/// kernel does not say.
pub(crate) fn boot_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}

/// A file's device and inode numbers (links followed), if it exists.
pub(crate) fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// An error a user sees: what failed and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FteError(pub String);

impl std::fmt::Display for FteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FteError {}

impl From<ferrymq_types::MqError> for FteError {
    fn from(e: ferrymq_types::MqError) -> Self {
        FteError(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, FteError>;

pub(crate) fn err<T>(m: impl Into<String>) -> Result<T> {
    Err(FteError(m.into()))
}
