//! The error type shared by every storage component of this crate, and the
//! helper that attaches "which file / which operation" context to I/O errors
//! (a bare `No such file or directory` is useless to an operator).

use std::io;

/// Everything that can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system I/O call failed; `context` names the file and the
    /// operation.
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// The record would overwrite log space that recovery still needs.
    #[error(
        "recovery log is full: the record needs {needed} bytes but only {free} bytes are free; \
         take a checkpoint to release log space, or create the log with more or larger files"
    )]
    Full { needed: u64, free: u64 },
    /// The payload exceeds the largest record the log accepts.
    #[error(
        "record payload of {len} bytes exceeds the maximum of {max} bytes; \
         store large data outside the log or create a larger log"
    )]
    RecordTooLarge { len: usize, max: usize },
    /// Stored data failed verification in a way that is not a torn tail: the
    /// queue manager must not start on it. Restore from a backup or replica.
    #[error("storage is damaged: {0}")]
    Damaged(String),
    /// The caller asked for something the storage cannot do (bad LSN,
    /// geometry mismatch, log already exists, ...). A programming or
    /// configuration error, not damage.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The log has been shut down.
    #[error("the recovery log is closed; reopen it to continue")]
    Closed,
}

impl LogError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        LogError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Attaches context lazily so the happy path does not format strings.
pub(crate) trait IoContext<T> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T, LogError>;
}

impl<T> IoContext<T> for Result<T, io::Error> {
    fn ctx<F: FnOnce() -> String>(self, f: F) -> Result<T, LogError> {
        self.map_err(|e| LogError::io(f(), e))
    }
}
