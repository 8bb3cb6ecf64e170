//! Small filesystem helpers shared by the log, the segment store and the
//! checkpoint manifests: directory fsync (needed so that a created or renamed
//! file's name survives power loss, not just its contents) and zero filling.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{IoContext, LogError};

/// Zero-fill chunk: large enough to be efficient, small enough not to matter.
pub(crate) const ZERO_CHUNK: usize = 1 << 20;

/// Makes directory entries (creates, renames, deletes) in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx(|| format!("syncing directory {}", dir.display()))
}

/// Writes zeros over `[from, to)` of `file`, in chunks. Writing real zeros
/// (rather than `set_len`, which leaves a hole) allocates the blocks, so later
/// fdatasync calls never have to update file metadata.
pub(crate) fn write_zeros(file: &File, path: &Path, from: u64, to: u64) -> Result<(), LogError> {
    let zeros = vec![0u8; ZERO_CHUNK.min((to.saturating_sub(from)) as usize)];
    let mut pos = from;
    while pos < to {
        let n = ((to - pos) as usize).min(zeros.len());
        file.write_all_at(&zeros[..n], pos)
            .ctx(|| format!("zero-filling {} at offset {pos}", path.display()))?;
        pos += n as u64;
    }
    Ok(())
}
