//! The physical ring: geometry (how a logical LSN maps to a file and offset)
//! and the preallocated `S0000000.LOG`... files themselves. Everything here is
//! position arithmetic and positioned I/O; record semantics live elsewhere.
//! Spans may cross the end of a file and the end of the ring, so every read
//! and write is split at those boundaries here, once.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError};
use crate::fsutil::write_zeros;
use crate::Lsn;

pub(crate) const PAGE: u64 = 4096;

/// Largest span the writer leaves unsynced at once (see [`Geometry::sync_window`]).
const MAX_SYNC_WINDOW: u64 = 1 << 20;

/// Sizes of the ring, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub files: u32,
    pub file_pages: u32,
    pub file_bytes: u64,
    pub capacity: u64,
    /// The writer syncs before it crosses a multiple of this (in LSN space),
    /// so unsynced bytes never span two windows. After a power loss, pages can
    /// reach the disk out of order only within the one window that was being
    /// written; recovery relies on this to tell a torn tail (valid records may
    /// follow within the same window) from mid-log damage (valid records
    /// follow in a later window).
    pub sync_window: u64,
}

impl Geometry {
    pub(crate) fn new(files: u32, file_pages: u32) -> Result<Geometry, LogError> {
        if files == 0 || file_pages == 0 {
            return Err(LogError::Invalid(format!(
                "log geometry primary_files={files}, file_pages={file_pages}: both must be at least 1"
            )));
        }
        if files > 9_999_999 {
            return Err(LogError::Invalid(format!(
                "primary_files={files} exceeds the 9999999 that the S0000000.LOG naming allows"
            )));
        }
        let file_bytes = u64::from(file_pages) * PAGE;
        let capacity = file_bytes * u64::from(files);
        Ok(Geometry {
            files,
            file_pages,
            file_bytes,
            capacity,
            sync_window: file_bytes.min(MAX_SYNC_WINDOW),
        })
    }

    /// Largest payload accepted: half the ring (so a checkpoint can always
    /// make room for one more record) and what the u32 length field holds.
    pub(crate) fn max_payload(&self) -> usize {
        (self.capacity / 2).min(u64::from(u32::MAX)) as usize
    }

    /// (file index, offset in file) of logical position `pos`.
    pub(crate) fn locate(&self, pos: Lsn) -> (usize, u64) {
        let phys = pos % self.capacity;
        ((phys / self.file_bytes) as usize, phys % self.file_bytes)
    }
}

pub(crate) fn file_name(index: u32) -> String {
    format!("S{index:07}.LOG")
}

/// The open ring files. Positioned I/O only (`read_at`/`write_at`), so one
/// instance is shared by the writer thread and readers without a lock.
pub(crate) struct RingFiles {
    geo: Geometry,
    files: Vec<File>,
    paths: Vec<PathBuf>,
}

impl RingFiles {
    /// Creates (or overwrites, after an interrupted create) and fully
    /// preallocates every ring file.
    pub(crate) fn create(dir: &Path, geo: Geometry) -> Result<(), LogError> {
        for i in 0..geo.files {
            let path = dir.join(file_name(i));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .ctx(|| format!("creating log file {}", path.display()))?;
            write_zeros(&f, &path, 0, geo.file_bytes)?;
            // sync_all, not sync_data: the size and block allocation are
            // metadata and must be durable before the log is used.
            f.sync_all()
                .ctx(|| format!("syncing new log file {}", path.display()))?;
        }
        Ok(())
    }

    /// Opens every ring file. A missing file is damage; a short one (e.g.
    /// truncated by hand or a filesystem repair) is extended with zeros, which
    /// recovery then sees as a torn tail if it cut into live records.
    pub(crate) fn open(dir: &Path, geo: Geometry) -> Result<RingFiles, LogError> {
        let mut files = Vec::with_capacity(geo.files as usize);
        let mut paths = Vec::with_capacity(geo.files as usize);
        for i in 0..geo.files {
            let path = dir.join(file_name(i));
            let f = match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(LogError::Damaged(format!(
                        "log file {} is missing; the log cannot be recovered without it",
                        path.display()
                    )))
                }
                Err(e) => {
                    return Err(LogError::io(
                        format!("opening log file {}", path.display()),
                        e,
                    ))
                }
            };
            let len = f
                .metadata()
                .ctx(|| format!("reading size of log file {}", path.display()))?
                .len();
            if len < geo.file_bytes {
                tracing::warn!(
                    file = %path.display(),
                    len,
                    expected = geo.file_bytes,
                    "log file is shorter than its preallocated size; extending it with zeros"
                );
                write_zeros(&f, &path, len, geo.file_bytes)?;
                f.sync_all()
                    .ctx(|| format!("syncing extended log file {}", path.display()))?;
            }
            files.push(f);
            paths.push(path);
        }
        Ok(RingFiles { geo, files, paths })
    }

    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Writes `data` at logical position `pos`, splitting at file and ring
    /// ends; marks each file index written in `touched`.
    pub(crate) fn write_span(
        &self,
        pos: Lsn,
        data: &[u8],
        touched: &mut [bool],
    ) -> Result<(), LogError> {
        let mut done = 0usize;
        while done < data.len() {
            let p = pos + done as u64;
            let (fi, off) = self.geo.locate(p);
            let n = ((self.geo.file_bytes - off) as usize).min(data.len() - done);
            self.files[fi]
                .write_all_at(&data[done..done + n], off)
                .ctx(|| {
                    format!(
                        "writing {n} bytes at LSN {p} to {}",
                        self.paths[fi].display()
                    )
                })?;
            touched[fi] = true;
            done += n;
        }
        Ok(())
    }

    /// Reads `out.len()` bytes starting at logical position `pos`.
    pub(crate) fn read_span(&self, pos: Lsn, out: &mut [u8]) -> Result<(), LogError> {
        let mut done = 0usize;
        while done < out.len() {
            let p = pos + done as u64;
            let (fi, off) = self.geo.locate(p);
            let n = ((self.geo.file_bytes - off) as usize).min(out.len() - done);
            self.files[fi]
                .read_exact_at(&mut out[done..done + n], off)
                .ctx(|| {
                    format!(
                        "reading {n} bytes at LSN {p} from {}",
                        self.paths[fi].display()
                    )
                })?;
            done += n;
        }
        Ok(())
    }

    /// fdatasync of one ring file. Files are preallocated, so this never has
    /// to write metadata.
    pub(crate) fn sync(&self, index: usize) -> Result<(), LogError> {
        self.files[index]
            .sync_data()
            .ctx(|| format!("syncing log file {}", self.paths[index].display()))
    }

    pub(crate) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Overwrites `[from, to)` with zeros and syncs the files touched.
    pub(crate) fn zero_range(&self, from: Lsn, to: Lsn) -> Result<(), LogError> {
        let mut touched = vec![false; self.files.len()];
        let zeros =
            vec![0u8; (to.saturating_sub(from)).min(crate::fsutil::ZERO_CHUNK as u64) as usize];
        let mut pos = from;
        while pos < to {
            let n = ((to - pos) as usize).min(zeros.len());
            self.write_span(pos, &zeros[..n], &mut touched)?;
            pos += n as u64;
        }
        for (i, t) in touched.iter().enumerate() {
            if *t {
                self.sync(i)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_wraps_files_and_ring() {
        let g = Geometry::new(2, 2).unwrap();
        assert_eq!(g.capacity, 16384);
        assert_eq!(g.locate(0), (0, 0));
        assert_eq!(g.locate(8191), (0, 8191));
        assert_eq!(g.locate(8192), (1, 0));
        assert_eq!(g.locate(16384 + 5), (0, 5));
        assert_eq!(g.max_payload(), 8192);
        assert_eq!(g.sync_window, 8192);
        assert!(Geometry::new(0, 1).is_err());
    }
}
