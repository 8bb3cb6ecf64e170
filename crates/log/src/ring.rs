//! The physical ring: geometry (how a logical LSN maps to a file and offset)
//! and the preallocated `S0000000.LOG`... files themselves. Everything here is
//! position arithmetic and positioned I/O; record semantics live elsewhere.
//! Spans may cross the end of a file and the end of the ring, so every read
//! and write is split at those boundaries here, once.
//!
//! With direct writes (the default under `fsync` durability, where the
//! filesystem allows it) the ring is written through a second handle per file
//! opened `O_DIRECT | O_DSYNC`: each write is on stable storage when it
//! returns, with no page-cache copy, no writeback pass and no separate
//! `fdatasync`. Such writes cover whole [`DIRECT_ALIGN`] blocks, so a span is
//! written with the bytes before it in its first block (kept from the last
//! write, or read back) and zeros after it in its last block — unless the
//! bytes there are live (records after a span rewritten mid-log, or the
//! oldest records of the ring one lap back), which are then read and written
//! back unchanged. Rewriting live bytes with the same bytes cannot damage
//! them even if the write is torn. Reads then bypass the
//! page cache too, so no cached page can go stale under a direct write. A
//! filesystem that refuses `O_DIRECT` (tmpfs before Linux 6.6) keeps buffered writes
//! and `fdatasync`; so does `Log:DirectWrites=no`.

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::{IoContext, LogError};
use crate::fsutil::write_zeros;
use crate::Lsn;

pub(crate) const PAGE: u64 = 4096;

/// Offset, length and memory alignment of direct writes and reads: a
/// filesystem block, which covers the logical sector of every common device.
pub(crate) const DIRECT_ALIGN: u64 = 4096;

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
    /// The direct handles, when the ring is written directly.
    direct: Option<Direct>,
}

/// How the ring's bytes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// `O_DIRECT | O_DSYNC`: each write is durable when it returns.
    Direct,
    /// Through the page cache; `fdatasync` makes the bytes durable.
    Buffered,
}

impl WriteMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteMode::Direct => "direct",
            WriteMode::Buffered => "buffered",
        }
    }
}

struct Direct {
    /// One `O_RDWR | O_DIRECT | O_DSYNC` handle per ring file.
    files: Vec<File>,
    /// Cleared for good if the filesystem refuses a direct write or read
    /// after all (`EINVAL`); the ring is then written and read as buffered.
    on: AtomicBool,
    /// Serialises direct writes (only the writer thread writes once the log
    /// is open) and keeps their buffer.
    w: Mutex<DirectWrite>,
}

#[derive(Default)]
struct DirectWrite {
    /// The bytes of the block holding the end of the last direct write, from
    /// the block's start up to that end, and the LSN of the block's start.
    tail_lsn: Lsn,
    tail: Vec<u8>,
    /// Reused, over-allocated so that an aligned window fits.
    scratch: Vec<u8>,
}

/// An `align`-aligned window of `len` bytes in `v` (grown as needed).
fn aligned(v: &mut Vec<u8>, len: usize) -> &mut [u8] {
    let a = DIRECT_ALIGN as usize;
    if v.len() < len + a {
        *v = vec![0u8; len + a];
    }
    let skip = v.as_ptr().align_offset(a);
    &mut v[skip..skip + len]
}

fn floor(x: u64) -> u64 {
    x - x % DIRECT_ALIGN
}

fn ceil(x: u64) -> u64 {
    x.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN
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
    /// `direct`: write (and read) the ring directly where the filesystem
    /// allows it (see the module documentation).
    pub(crate) fn open(dir: &Path, geo: Geometry, direct: bool) -> Result<RingFiles, LogError> {
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
        let direct = if direct { Direct::open(&paths) } else { None };
        Ok(RingFiles {
            geo,
            files,
            paths,
            direct,
        })
    }

    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// How the ring is written now.
    pub(crate) fn write_mode(&self) -> WriteMode {
        match &self.direct {
            Some(d) if d.on.load(Ordering::Acquire) => WriteMode::Direct,
            _ => WriteMode::Buffered,
        }
    }

    fn direct(&self) -> Option<&Direct> {
        self.direct
            .as_ref()
            .filter(|d| d.on.load(Ordering::Acquire))
    }

    /// Turns direct I/O off for good after the filesystem refused it.
    fn direct_refused(&self, d: &Direct, what: &str, e: &std::io::Error) {
        if d.on.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                error = %e,
                "the filesystem refused a direct {what} of the recovery log; \
                 writing it through the page cache with fdatasync from now on"
            );
        }
    }

    /// Writes `data` at logical position `pos`, splitting at file and ring
    /// ends. Returns how many writes were made durable on their own (direct
    /// writes); each file written through the page cache instead is marked in
    /// `touched`, for the caller to sync. `live` are the LSNs whose bytes the
    /// ring still needs (from the checkpoint to the end of the log): no byte
    /// of theirs outside `[pos, pos + data.len())` is overwritten with
    /// anything but itself.
    pub(crate) fn write_span(
        &self,
        pos: Lsn,
        data: &[u8],
        touched: &mut [bool],
        live: Range<Lsn>,
    ) -> Result<u64, LogError> {
        if let Some(d) = self.direct() {
            let mut w = d.w.lock();
            match self.write_direct(d, &mut w, pos, data, live) {
                Ok(n) => return Ok(n),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // Nothing of the refused piece was written; everything is
                    // written again, buffered (the pieces before it were
                    // durable already and get the same bytes).
                    self.direct_refused(d, "write", &e);
                }
                Err(e) => {
                    return Err(LogError::io(
                        format!(
                            "writing {} bytes at LSN {pos} to the log in {}",
                            data.len(),
                            self.paths[0]
                                .parent()
                                .map_or_else(String::new, |p| p.display().to_string())
                        ),
                        e,
                    ))
                }
            }
        }
        self.write_buffered(pos, data, touched)?;
        Ok(0)
    }

    /// One `O_DIRECT | O_DSYNC` write per file piece, over whole blocks.
    fn write_direct(
        &self,
        d: &Direct,
        w: &mut DirectWrite,
        pos: Lsn,
        data: &[u8],
        live: Range<Lsn>,
    ) -> std::io::Result<u64> {
        let mut done = 0usize;
        let mut writes = 0;
        while done < data.len() {
            let p = pos + done as u64;
            let (fi, off) = self.geo.locate(p);
            let n = ((self.geo.file_bytes - off) as usize).min(data.len() - done);
            let end = p + n as u64;
            // The block-aligned window [start, stop) in LSNs; file ends are
            // block multiples, so it stays inside this file.
            let (start, stop) = (floor(p), ceil(end));
            let pre = (p - start) as usize;
            let len = (stop - start) as usize;
            let DirectWrite {
                tail_lsn,
                tail,
                scratch,
            } = w;
            let buf = aligned(scratch, len);
            if pre > 0 {
                if *tail_lsn == start && tail.len() == pre {
                    buf[..pre].copy_from_slice(tail);
                } else {
                    // The span's first block as it is on disk (pre < one block).
                    self.read_direct_into(d, start, &mut buf[..DIRECT_ALIGN as usize])?;
                }
            }
            buf[pre..pre + n].copy_from_slice(&data[done..done + n]);
            let post = (stop - end) as usize;
            if post > 0 {
                // The bytes after the span in its last block hold the LSNs
                // after it in this lap, or those one lap earlier: zeros,
                // unless either are still live.
                if end < live.end || stop > live.start + self.geo.capacity {
                    let mut keep = vec![0u8; DIRECT_ALIGN as usize];
                    let b = floor(end);
                    self.read_direct_into(d, b, &mut keep)?;
                    let from = (end - b) as usize;
                    buf[pre + n..].copy_from_slice(&keep[from..]);
                } else {
                    buf[pre + n..].fill(0);
                }
            }
            d.files[fi].write_all_at(buf, off - pre as u64)?;
            writes += 1;
            let last = floor(end);
            *tail_lsn = last;
            tail.clear();
            tail.extend_from_slice(&buf[(last - start) as usize..pre + n]);
            done += n;
        }
        Ok(writes)
    }

    /// Reads whole blocks from `start` (block-aligned) into `out` (a multiple
    /// of the block), bypassing the page cache.
    fn read_direct_into(&self, d: &Direct, start: Lsn, out: &mut [u8]) -> std::io::Result<()> {
        let mut scratch = Vec::new();
        let buf = aligned(&mut scratch, out.len());
        let mut done = 0usize;
        while done < out.len() {
            let p = start + done as u64;
            let (fi, off) = self.geo.locate(p);
            let n = ((self.geo.file_bytes - off) as usize).min(out.len() - done);
            d.files[fi].read_exact_at(&mut buf[done..done + n], off)?;
            done += n;
        }
        out.copy_from_slice(buf);
        Ok(())
    }

    fn write_buffered(&self, pos: Lsn, data: &[u8], touched: &mut [bool]) -> Result<(), LogError> {
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
        if let Some(d) = self.direct() {
            let (start, stop) = (floor(pos), ceil(pos + out.len() as u64));
            let mut whole = vec![0u8; (stop - start) as usize];
            match self.read_direct_into(d, start, &mut whole) {
                Ok(()) => {
                    let from = (pos - start) as usize;
                    out.copy_from_slice(&whole[from..from + out.len()]);
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    self.direct_refused(d, "read", &e);
                }
                Err(e) => {
                    return Err(LogError::io(
                        format!("reading {} bytes at LSN {pos} of the log", out.len()),
                        e,
                    ))
                }
            }
        }
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
    /// `live` as for [`write_span`](Self::write_span).
    pub(crate) fn zero_range(&self, from: Lsn, to: Lsn, live: Range<Lsn>) -> Result<(), LogError> {
        let mut touched = vec![false; self.files.len()];
        let zeros =
            vec![0u8; (to.saturating_sub(from)).min(crate::fsutil::ZERO_CHUNK as u64) as usize];
        let mut pos = from;
        while pos < to {
            let n = ((to - pos) as usize).min(zeros.len());
            self.write_span(pos, &zeros[..n], &mut touched, live.clone())?;
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

impl Direct {
    /// The direct handles, or `None` where the filesystem refuses `O_DIRECT`.
    fn open(paths: &[PathBuf]) -> Option<Direct> {
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            match OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
                .open(p)
            {
                Ok(f) => files.push(f),
                Err(e) => {
                    tracing::info!(
                        file = %p.display(),
                        error = %e,
                        "the recovery log cannot be opened for direct I/O here; \
                         it is written through the page cache with fdatasync"
                    );
                    return None;
                }
            }
        }
        Some(Direct {
            files,
            on: AtomicBool::new(true),
            w: Mutex::new(DirectWrite::default()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a file in `dir` can be opened for direct I/O at all.
    fn direct_io_allowed(dir: &Path) -> bool {
        let p = dir.join("probe");
        std::fs::write(&p, [0u8; 4096]).unwrap();
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&p)
            .is_ok()
    }

    /// Random appends at the end (the ring often filled to the last byte, so
    /// a block's padding would land on the oldest live records), rewrites of
    /// spans inside the live range (fillers), and a moving checkpoint: after
    /// every write each live byte, read back through the page cache and
    /// through the ring, is what a byte-exact model says.
    fn writes_keep_every_live_byte(direct: bool) {
        let dir = tempfile::tempdir().unwrap();
        let geo = Geometry::new(2, 2).unwrap();
        let cap = geo.capacity;
        RingFiles::create(dir.path(), geo).unwrap();
        let files = RingFiles::open(dir.path(), geo, direct).unwrap();
        let want = if direct && direct_io_allowed(dir.path()) {
            WriteMode::Direct
        } else {
            WriteMode::Buffered
        };
        assert_eq!(files.write_mode(), want);
        let mut model = vec![0u8; cap as usize];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n.max(1)
        };
        // A few laps in, at an unaligned position.
        let mut end: Lsn = 3 * cap + 1_234;
        let mut ckpt: Lsn = end - 700;
        let mut touched = vec![false; 2];
        let mut full_writes = 0;
        for i in 0..600u64 {
            let (pos, n) = if i % 5 == 2 && end > ckpt + 1 {
                let a = ckpt + rnd(end - ckpt - 1);
                (a, 1 + rnd((end - a).min(5_000)))
            } else {
                let room = cap - (end - ckpt);
                if room == 0 {
                    ckpt += 1 + rnd(3_000);
                    continue;
                }
                // Half the appends fill the ring to its last byte.
                let n = if rnd(2) == 0 {
                    room
                } else {
                    1 + rnd(room.min(6_000))
                };
                (end, n)
            };
            let data: Vec<u8> = (0..n).map(|k| (i as u8) ^ (k as u8) ^ 0x5A).collect();
            touched.fill(false);
            files
                .write_span(pos, &data, &mut touched, ckpt..end)
                .unwrap();
            for (k, b) in data.iter().enumerate() {
                model[((pos + k as u64) % cap) as usize] = *b;
            }
            if pos == end {
                end += n;
            }
            if end - ckpt == cap {
                full_writes += 1;
            }
            let mut disk = std::fs::read(dir.path().join(file_name(0))).unwrap();
            disk.extend(std::fs::read(dir.path().join(file_name(1))).unwrap());
            let mut ring = vec![0u8; (end - ckpt) as usize];
            files.read_span(ckpt, &mut ring).unwrap();
            for lsn in ckpt..end {
                let at = (lsn % cap) as usize;
                assert_eq!(
                    disk[at], model[at],
                    "write {i}: the file's byte at LSN {lsn}"
                );
                assert_eq!(
                    ring[(lsn - ckpt) as usize],
                    model[at],
                    "write {i}: LSN {lsn} read back"
                );
            }
            if rnd(3) == 0 {
                ckpt += rnd(end - ckpt + 1);
            }
        }
        assert!(
            full_writes > 50,
            "only {full_writes} writes filled the ring"
        );
    }

    #[test]
    fn direct_writes_keep_every_live_byte_and_write_each_span_exactly() {
        writes_keep_every_live_byte(true);
    }

    #[test]
    fn buffered_writes_keep_every_live_byte_and_write_each_span_exactly() {
        writes_keep_every_live_byte(false);
    }

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
