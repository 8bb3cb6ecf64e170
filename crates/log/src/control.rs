//! The log's control file (`dir/control`): ring geometry and the checkpoint
//! LSN where recovery starts. It is small and always rewritten whole and
//! atomically (write tmp, fsync, rename, fsync dir), so a crash leaves either
//! the old or the new version, never a mix.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError};
use crate::fsutil::sync_dir;
use crate::Lsn;

const MAGIC: [u8; 8] = *b"FMQLOGCT";
const VERSION: u32 = 1;
/// magic + version + capacity + files + pages + checkpoint + crc
const ENCODED_LEN: usize = 8 + 4 + 8 + 4 + 4 + 8 + 4;

pub(crate) const FILE_NAME: &str = "control";
const TMP_NAME: &str = "control.tmp";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Control {
    pub capacity: u64,
    pub primary_files: u32,
    pub file_pages: u32,
    pub checkpoint_lsn: Lsn,
}

impl Control {
    fn encode(&self) -> [u8; ENCODED_LEN] {
        let mut b = [0u8; ENCODED_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..20].copy_from_slice(&self.capacity.to_le_bytes());
        b[20..24].copy_from_slice(&self.primary_files.to_le_bytes());
        b[24..28].copy_from_slice(&self.file_pages.to_le_bytes());
        b[28..36].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&b[..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8], path: &Path) -> Result<Control, LogError> {
        let bad =
            |what: &str| LogError::Damaged(format!("control file {}: {what}", path.display()));
        if b.len() != ENCODED_LEN {
            return Err(bad(&format!(
                "size {} bytes, expected {ENCODED_LEN}",
                b.len()
            )));
        }
        if b[0..8] != MAGIC {
            return Err(bad("not a FerryMQ log control file (bad magic)"));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        if u32_at(36) != crc32c::crc32c(&b[..36]) {
            return Err(bad("checksum mismatch"));
        }
        let version = u32_at(8);
        if version != VERSION {
            return Err(bad(&format!(
                "format version {version} is not supported by this build (supports {VERSION})"
            )));
        }
        Ok(Control {
            capacity: u64_at(12),
            primary_files: u32_at(20),
            file_pages: u32_at(24),
            checkpoint_lsn: u64_at(28),
        })
    }
}

pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

pub(crate) fn exists(dir: &Path) -> bool {
    path(dir).exists()
}

pub(crate) fn read(dir: &Path) -> Result<Control, LogError> {
    let p = path(dir);
    let bytes = fs::read(&p).ctx(|| {
        format!(
            "reading log control file {} (does the log exist? create it first)",
            p.display()
        )
    })?;
    Control::decode(&bytes, &p)
}

/// Atomically replaces the control file.
pub(crate) fn write(dir: &Path, c: &Control) -> Result<(), LogError> {
    let tmp = dir.join(TMP_NAME);
    let fin = path(dir);
    let r = write_tmp(&tmp, c)
        .and_then(|()| {
            fs::rename(&tmp, &fin)
                .ctx(|| format!("renaming {} to {}", tmp.display(), fin.display()))
        })
        .and_then(|()| sync_dir(dir));
    if r.is_err() {
        // A failed write (a full disk) leaves the old control file in force and no debris.
        let _ = fs::remove_file(&tmp);
    }
    r
}

fn write_tmp(tmp: &Path, c: &Control) -> Result<(), LogError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .ctx(|| format!("creating {}", tmp.display()))?;
    f.write_all(&c.encode())
        .ctx(|| format!("writing {}", tmp.display()))?;
    f.sync_all().ctx(|| format!("syncing {}", tmp.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_round_trips_and_detects_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let c = Control {
            capacity: 16384,
            primary_files: 2,
            file_pages: 2,
            checkpoint_lsn: 12345,
        };
        write(dir.path(), &c).unwrap();
        assert_eq!(read(dir.path()).unwrap(), c);
        let mut raw = fs::read(path(dir.path())).unwrap();
        raw[30] ^= 1;
        fs::write(path(dir.path()), &raw).unwrap();
        assert!(matches!(read(dir.path()), Err(LogError::Damaged(_))));
    }
}
