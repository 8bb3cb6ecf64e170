//! Checkpoint manifests: one file per checkpoint holding opaque caller bytes
//! (the engine's snapshot of what is stored where) plus the checkpoint LSN,
//! `checkpoint-<lsn as 20 digits>.ckpt`.
//!
//! Layout: a sequence of chunks `[len u32][crc32c u32][bytes]`, then a footer
//! chunk whose length field has the top bit set (so it can never be mistaken
//! for a data chunk) holding magic, LSN and the number of data chunks. The
//! file is written under a `.tmp` name, fsynced, renamed and the directory
//! fsynced, so a manifest with a verifying footer is complete; anything else
//! is the remains of an interrupted checkpoint and is skipped.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::error::{IoContext, LogError};
use crate::fsutil::sync_dir;
use crate::Lsn;

const MAGIC: [u8; 8] = *b"FMQCKPT1";
const FOOTER_FLAG: u32 = 1 << 31;
const FOOTER_LEN: usize = 8 + 8 + 8;
/// Largest data chunk (the top bit of the length marks the footer).
pub const MAX_CHUNK: usize = (FOOTER_FLAG - 1) as usize;

const PREFIX: &str = "checkpoint-";
const SUFFIX: &str = ".ckpt";
const TMP_SUFFIX: &str = ".ckpt.tmp";

fn file_name(lsn: Lsn) -> String {
    format!("{PREFIX}{lsn:020}{SUFFIX}")
}

/// LSN of a complete manifest's file name.
fn parse_name(name: &str) -> Option<Lsn> {
    let digits = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn is_tmp_name(name: &str) -> bool {
    name.starts_with(PREFIX) && name.ends_with(TMP_SUFFIX)
}

/// Complete manifests in `dir` by name, newest first.
fn list(dir: &Path) -> Result<Vec<(Lsn, PathBuf)>, LogError> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(LogError::io(format!("listing {}", dir.display()), e)),
    };
    for entry in rd {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        if let Some(lsn) = entry.file_name().to_str().and_then(parse_name) {
            out.push((lsn, entry.path()));
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    Ok(out)
}

/// Writes one manifest; nothing is visible under the final name until
/// [`finish`](Self::finish) succeeds. Dropping it unfinished removes the
/// temporary file.
pub struct CheckpointWriter {
    dir: PathBuf,
    lsn: Lsn,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    chunks: u64,
    /// Renamed to its final name: nothing to clean up.
    done: bool,
}

impl CheckpointWriter {
    /// Starts the manifest for checkpoint `lsn` in `dir` (created if missing).
    pub fn create(dir: &Path, lsn: Lsn) -> Result<CheckpointWriter, LogError> {
        fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join(format!("{PREFIX}{lsn:020}{TMP_SUFFIX}"));
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .ctx(|| format!("creating checkpoint manifest {}", tmp.display()))?;
        Ok(CheckpointWriter {
            dir: dir.to_path_buf(),
            lsn,
            tmp,
            out: Some(BufWriter::with_capacity(1 << 20, f)),
            chunks: 0,
            done: false,
        })
    }

    fn put(&mut self, len_field: u32, bytes: &[u8]) -> Result<(), LogError> {
        let out = self.out.as_mut().ok_or(LogError::Closed)?;
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&len_field.to_le_bytes());
        head[4..].copy_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
        out.write_all(&head)
            .and_then(|_| out.write_all(bytes))
            .ctx(|| format!("writing checkpoint manifest {}", self.tmp.display()))
    }

    /// Appends one chunk of caller bytes.
    pub fn write_chunk(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        if bytes.len() > MAX_CHUNK {
            return Err(LogError::RecordTooLarge {
                len: bytes.len(),
                max: MAX_CHUNK,
            });
        }
        self.put(bytes.len() as u32, bytes)?;
        self.chunks += 1;
        Ok(())
    }

    /// Writes the footer, makes the file durable under its final name and
    /// returns that path.
    pub fn finish(mut self) -> Result<PathBuf, LogError> {
        let mut footer = [0u8; FOOTER_LEN];
        footer[..8].copy_from_slice(&MAGIC);
        footer[8..16].copy_from_slice(&self.lsn.to_le_bytes());
        footer[16..].copy_from_slice(&self.chunks.to_le_bytes());
        self.put(FOOTER_FLAG | FOOTER_LEN as u32, &footer)?;
        let out = self.out.take().ok_or(LogError::Closed)?;
        let f = out.into_inner().map_err(|e| {
            LogError::io(format!("flushing {}", self.tmp.display()), e.into_error())
        })?;
        f.sync_all()
            .ctx(|| format!("syncing {}", self.tmp.display()))?;
        let fin = self.dir.join(file_name(self.lsn));
        fs::rename(&self.tmp, &fin)
            .ctx(|| format!("renaming {} to {}", self.tmp.display(), fin.display()))?;
        self.done = true;
        sync_dir(&self.dir)?;
        Ok(fin)
    }
}

impl Drop for CheckpointWriter {
    /// An unfinished manifest — abandoned, or failed anywhere before its rename (a full disk
    /// fails the flush of the buffered bytes, after `out` is taken) — leaves no `.tmp` behind.
    fn drop(&mut self) {
        drop(self.out.take());
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Finds and reads checkpoint manifests.
pub struct CheckpointReader;

impl CheckpointReader {
    /// The newest manifest in `dir` whose footer verifies: `(lsn, chunks)`.
    /// Leftover `.tmp` files (interrupted checkpoints) are deleted; a damaged
    /// manifest is skipped with a warning in favour of an older one.
    pub fn latest(dir: &Path) -> Result<Option<(Lsn, Vec<Bytes>)>, LogError> {
        remove_tmp_files(dir)?;
        for (lsn, path) in list(dir)? {
            match Self::read(&path) {
                Ok((file_lsn, chunks)) if file_lsn == lsn => return Ok(Some((lsn, chunks))),
                Ok((file_lsn, _)) => tracing::warn!(
                    manifest = %path.display(),
                    footer_lsn = file_lsn,
                    "checkpoint manifest's footer LSN does not match its name; falling back to an older one"
                ),
                Err(e) => tracing::warn!(
                    manifest = %path.display(),
                    error = %e,
                    "checkpoint manifest is damaged; falling back to an older one"
                ),
            }
        }
        Ok(None)
    }

    /// Reads and verifies one manifest file.
    pub fn read(path: &Path) -> Result<(Lsn, Vec<Bytes>), LogError> {
        let raw = Bytes::from(fs::read(path).ctx(|| format!("reading {}", path.display()))?);
        Self::decode(raw).map_err(|what| {
            LogError::Damaged(format!("checkpoint manifest {}: {what}", path.display()))
        })
    }

    /// Verifies and splits a manifest's bytes: `(lsn, chunks)`, or what is wrong with them.
    /// Pure (no I/O), so the fuzz targets reach the code [`read`](Self::read) runs.
    pub fn decode(raw: Bytes) -> Result<(Lsn, Vec<Bytes>), String> {
        let mut chunks = Vec::new();
        let mut off = 0usize;
        loop {
            if off + 8 > raw.len() {
                return Err(format!("ends at offset {off} without a footer"));
            }
            let len_field = u32::from_le_bytes(raw[off..off + 4].try_into().expect("4 bytes"));
            let crc = u32::from_le_bytes(raw[off + 4..off + 8].try_into().expect("4 bytes"));
            let len = (len_field & !FOOTER_FLAG) as usize;
            let start = off + 8;
            if start + len > raw.len() {
                return Err(format!("chunk at offset {off} is incomplete"));
            }
            let body = raw.slice(start..start + len);
            if crc32c::crc32c(&body) != crc {
                return Err(format!("chunk at offset {off} fails its checksum"));
            }
            off = start + len;
            if len_field & FOOTER_FLAG == 0 {
                chunks.push(body);
                continue;
            }
            if len != FOOTER_LEN || body[..8] != MAGIC {
                return Err("footer is malformed".to_string());
            }
            let lsn = u64::from_le_bytes(body[8..16].try_into().expect("8 bytes"));
            let count = u64::from_le_bytes(body[16..24].try_into().expect("8 bytes"));
            if count != chunks.len() as u64 {
                return Err(format!(
                    "footer says {count} chunks, found {}",
                    chunks.len()
                ));
            }
            if off != raw.len() {
                return Err(format!(
                    "{} unexpected bytes after the footer",
                    raw.len() - off
                ));
            }
            return Ok((lsn, chunks));
        }
    }
}

fn remove_tmp_files(dir: &Path) -> Result<(), LogError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(LogError::io(format!("listing {}", dir.display()), e)),
    };
    for entry in rd {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        if entry.file_name().to_str().is_some_and(is_tmp_name) {
            tracing::info!(file = %entry.path().display(), "removing incomplete checkpoint manifest");
            fs::remove_file(entry.path()).ctx(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Deletes manifests for checkpoints older than `lsn`, always keeping the
/// newest two (the second is the fallback should the newest be damaged).
/// Returns how many were deleted.
pub fn remove_older_than(dir: &Path, lsn: Lsn) -> Result<usize, LogError> {
    let mut removed = 0;
    for (old, path) in list(dir)?.into_iter().skip(2) {
        if old < lsn {
            fs::remove_file(&path).ctx(|| format!("removing {}", path.display()))?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}
