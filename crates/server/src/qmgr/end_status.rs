//! `qm.end`: the record of how the last run of the queue manager ended, written in place so
//! that recording it needs no new disk space.

use super::*;

/// `qm.end`: how the last run of the queue manager ended, for `endmqm -w` (which is not the
/// process's parent and cannot see its exit status). The record is written in place over bytes
/// written at start-up, so that recording the end needs no new disk space: an end whose final
/// checkpoint failed on a full disk can still say so. `RUNNING` until then, so a process that
/// died without recording anything is told apart from one that ended.
pub struct EndStatus(Option<File>);

/// Size of the `qm.end` record.
const END_STATUS_BYTES: usize = 1024;

impl EndStatus {
    pub(super) fn begin(paths: &QmPaths) -> EndStatus {
        let path = paths.end_status();
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok();
        let s = EndStatus(f);
        if !s.write(&format!("RUNNING {}", std::process::id())) {
            // No space even for this: leave no stale record of an earlier run.
            crate::qm_log!(
                crate::errlog::ids::END_STATUS_UNWRITTEN,
                "cannot write {}; endmqm -w will not know how this run ends",
                path.display()
            );
            let _ = std::fs::remove_file(&path);
            return EndStatus(None);
        }
        s
    }

    fn write(&self, text: &str) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(f) = &self.0 else { return false };
        let mut rec = vec![b' '; END_STATUS_BYTES];
        let mut n = text.len().min(END_STATUS_BYTES - 1);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        rec[..n].copy_from_slice(&text.as_bytes()[..n]);
        rec[END_STATUS_BYTES - 1] = b'\n';
        f.write_all_at(&rec, 0).is_ok() && f.sync_data().is_ok()
    }

    pub(super) fn record(&self, r: &Result<(), String>) {
        let text = match r {
            Ok(()) => "ENDED".to_string(),
            Err(e) => format!("FAILED {e}"),
        };
        if self.0.is_some() && !self.write(&text) {
            crate::qm_log!(
                crate::errlog::ids::END_STATUS_UNWRITTEN,
                "cannot record how this run ended in qm.end"
            );
        }
    }

    /// Reads `qm.end`: `Some(Ok(()))` for a clean end, `Some(Err(why))` for an end that failed,
    /// `None` when nothing says how the last run ended (it died, or could not record it).
    pub fn read(paths: &QmPaths) -> Option<Result<(), String>> {
        let text = std::fs::read_to_string(paths.end_status()).ok()?;
        let text = text.trim_end();
        if text == "ENDED" {
            Some(Ok(()))
        } else {
            text.strip_prefix("FAILED ")
                .map(|why| Err(why.trim().to_string()))
        }
    }
}
