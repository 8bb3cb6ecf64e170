//! The process's open-file limit: every client channel holds one descriptor, and the common soft
//! limit (1,024) is far below what one queue manager serves. At start the soft limit is raised to
//! the hard limit (as far as the kernel allows), and a limit still below what MaxChannels needs
//! is logged, so the operator learns it before the listener runs out.

use ferrymq_types::limits;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The soft and hard limits after the raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    pub soft: u64,
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard one (an unlimited hard limit: the kernel's
/// `fs.nr_open`) and returns both. A raise that fails leaves the limit as it was.
pub fn raise() -> OpenFiles {
    let now = getrlimit(Resource::Nofile);
    let hard = now.maximum.unwrap_or_else(nr_open);
    let soft = now.current.unwrap_or(hard);
    if soft < hard
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(hard),
                maximum: now.maximum,
            },
        )
        .is_ok()
    {
        return OpenFiles { soft: hard, hard };
    }
    OpenFiles { soft, hard }
}

/// The kernel's ceiling on a process's descriptors, when the hard limit is unlimited.
fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// The warning to log when `files` cannot hold `channels` client channels beside the queue
/// manager's own descriptors; `None` when it can.
pub fn shortfall(files: OpenFiles, channels: usize) -> Option<String> {
    let need = (channels as u64).saturating_add(limits::FDS_RESERVED);
    (files.soft < need).then(|| {
        format!(
            "the open-file limit is {} (hard limit {}), below the {need} descriptors Channels:MaxChannels={channels} needs: client connections past about {} are refused with MQRC_CHANNEL_NOT_AVAILABLE (2537); raise the hard limit (ulimit -Hn, systemd LimitNOFILE) or lower MaxChannels",
            files.soft,
            files.hard,
            files.soft.saturating_sub(limits::FDS_RESERVED)
        )
    })
}

/// Raises the limit and logs what is short.
pub fn raise_and_check(channels: usize) {
    if let Some(w) = shortfall(raise(), channels) {
        crate::qm_log!(crate::errlog::ids::OPEN_FILES_LOW, "{w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_below_max_channels_is_named_with_both_numbers() {
        let files = OpenFiles {
            soft: 1024,
            hard: 1024,
        };
        let w = shortfall(files, 100_000).expect("short");
        assert!(w.contains("1024") && w.contains("100000"), "{w}");
        assert_eq!(shortfall(files, 100), None);
    }

    #[test]
    fn raising_reaches_the_hard_limit() {
        let f = raise();
        assert_eq!(f.soft, f.hard);
    }
}
