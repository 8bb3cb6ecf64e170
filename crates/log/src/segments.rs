//! The message store: append-only segment files (`seg-00000001.dat`, ...)
//! holding persistent messages that outlive a checkpoint, so the recovery
//! log ring can be reused. Records are opaque, framed like log records but
//! with a caller-chosen `id` in place of the LSN:
//! `[payload_len u32][crc32c u32][id u64][kind u8][payload]`.
//!
//! A segment that existed before `open` is never appended to again: its tail
//! may be torn, and appending after torn bytes would hide the new records
//! from a scan. Each `open` therefore creates a new, empty current segment;
//! unreferenced old ones are removed by `remove_unreferenced`. Creating it
//! eagerly also means the highest existing number is always the highest ever
//! used (the current segment is never removed), so a number is never reused
//! and a stale location can never silently point at a different record.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{IoContext, LogError};
use crate::fsutil::sync_dir;
use crate::record::{encode_into, Header, HEADER_LEN};

/// How far past a damaged record `scan_report` looks for the next one that verifies.
const RESYNC_SEARCH_BYTES: usize = 16 << 20;

/// Size past which `append` rolls to a new segment.
pub const DEFAULT_SEGMENT_BYTES_MAX: u64 = 256 << 20;

const OFFSET_BITS: u32 = 40;
const MAX_SEGMENT: u32 = (1 << (64 - OFFSET_BITS)) - 1;
const MAX_OFFSET: u64 = (1 << OFFSET_BITS) - 1;

/// Where a record lives in the store. `len` is the payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreLoc {
    pub segment: u32,
    pub offset: u64,
    pub len: u32,
}

impl StoreLoc {
    /// Packs segment (top 24 bits) and offset (low 40 bits) into a u64; the
    /// payload length is not included and must be kept alongside. Never 0,
    /// because segment numbers start at 1, so 0 can mean "not stored".
    pub fn pack(&self) -> u64 {
        (u64::from(self.segment) << OFFSET_BITS) | self.offset
    }

    /// Inverse of [`pack`](Self::pack); `None` for 0 or a zero segment.
    pub fn unpack(packed: u64, len: u32) -> Option<StoreLoc> {
        let segment = (packed >> OFFSET_BITS) as u32;
        if segment == 0 {
            return None;
        }
        Some(StoreLoc {
            segment,
            offset: packed & MAX_OFFSET,
            len,
        })
    }
}

fn segment_name(n: u32) -> String {
    format!("seg-{n:08}.dat")
}

fn parse_segment_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".dat")?;
    if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n > 0)
}

/// What [`SegmentStore::scan_report`] found in one segment.
#[derive(Debug, Default)]
pub struct SegmentScan {
    /// Every record that verifies: location, id, kind, payload.
    pub records: Vec<(StoreLoc, u64, u8, Bytes)>,
    /// Damaged spans `(offset, bytes)` with valid records after them.
    pub damaged: Vec<(u64, u64)>,
    /// Bytes at the end after the last valid record (a torn or damaged tail).
    pub tail_ignored: u64,
}

/// The record at `off` of `raw` if it is complete and verifies: its header
/// and end offset.
fn verify_at(raw: &[u8], off: usize) -> Option<(Header, usize)> {
    if off + HEADER_LEN > raw.len() {
        return None;
    }
    let hdr: &[u8; HEADER_LEN] = raw[off..off + HEADER_LEN].try_into().ok()?;
    let h = Header::decode(hdr);
    let end = off.checked_add(HEADER_LEN + h.len as usize)?;
    (end <= raw.len() && h.verifies(&raw[off + HEADER_LEN..end])).then_some((h, end))
}

/// Append-only segment files in one directory.
pub struct SegmentStore {
    dir: PathBuf,
    segment_bytes_max: u64,
    /// Segment files that exist.
    segments: BTreeSet<u32>,
    current: u32,
    /// Bytes in the current segment.
    current_len: u64,
    /// Open handles; shared with readers, which only need `&self`.
    files: Mutex<HashMap<u32, Arc<File>>>,
    /// Segments written since the last sync.
    dirty: BTreeSet<u32>,
    /// A segment was created since the last sync: the directory needs one.
    dir_dirty: bool,
    scratch: Vec<u8>,
}

impl SegmentStore {
    /// Opens (creating if missing) the store in `dir` with the default
    /// segment size limit.
    pub fn open(dir: &Path) -> Result<SegmentStore, LogError> {
        Self::open_with_limit(dir, DEFAULT_SEGMENT_BYTES_MAX)
    }

    /// Opens the store in `dir` for reading only (inspection tools): no new
    /// current segment is created, so nothing in `dir` changes; appends fail.
    pub fn open_existing(dir: &Path) -> Result<SegmentStore, LogError> {
        Self::open_inner(dir, DEFAULT_SEGMENT_BYTES_MAX, false)
    }

    /// Like [`open`](Self::open) with an explicit roll-over size.
    pub fn open_with_limit(dir: &Path, segment_bytes_max: u64) -> Result<SegmentStore, LogError> {
        Self::open_inner(dir, segment_bytes_max, true)
    }

    fn open_inner(
        dir: &Path,
        segment_bytes_max: u64,
        writable: bool,
    ) -> Result<SegmentStore, LogError> {
        if segment_bytes_max == 0 || segment_bytes_max > MAX_OFFSET / 2 {
            return Err(LogError::Invalid(format!(
                "segment_bytes_max {segment_bytes_max} must be between 1 and {}",
                MAX_OFFSET / 2
            )));
        }
        if writable {
            fs::create_dir_all(dir)
                .ctx(|| format!("creating store directory {}", dir.display()))?;
        }
        let mut segments = BTreeSet::new();
        for entry in
            fs::read_dir(dir).ctx(|| format!("listing store directory {}", dir.display()))?
        {
            let entry = entry.ctx(|| format!("listing store directory {}", dir.display()))?;
            if let Some(n) = entry.file_name().to_str().and_then(parse_segment_name) {
                segments.insert(n);
            }
        }
        let current = segments.last().map_or(1, |&n| n + 1);
        if current > MAX_SEGMENT {
            return Err(LogError::Invalid(format!(
                "segment numbers in {} are exhausted (highest is {})",
                dir.display(),
                current - 1
            )));
        }
        let mut store = SegmentStore {
            dir: dir.to_path_buf(),
            segment_bytes_max,
            segments,
            current,
            current_len: 0,
            files: Mutex::new(HashMap::new()),
            dirty: BTreeSet::new(),
            dir_dirty: false,
            scratch: Vec::new(),
        };
        if writable {
            store.create_segment(current)?;
        }
        Ok(store)
    }

    /// Creates segment `n` (which must not exist) and makes it current.
    fn create_segment(&mut self, n: u32) -> Result<(), LogError> {
        let path = self.path(n);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .ctx(|| format!("creating segment {}", path.display()))?;
        self.files.lock().insert(n, Arc::new(f));
        self.segments.insert(n);
        self.current = n;
        self.current_len = 0;
        // The new name must be durable before records in it are relied on.
        self.dir_dirty = true;
        Ok(())
    }

    fn path(&self, n: u32) -> PathBuf {
        self.dir.join(segment_name(n))
    }

    fn file(&self, n: u32) -> Result<Arc<File>, LogError> {
        let mut files = self.files.lock();
        if let Some(f) = files.get(&n) {
            return Ok(Arc::clone(f));
        }
        let path = self.path(n);
        let f = match File::open(&path) {
            Ok(f) => Arc::new(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(LogError::Damaged(format!(
                    "message store segment {} does not exist",
                    path.display()
                )))
            }
            Err(e) => {
                return Err(LogError::io(
                    format!("opening segment {}", path.display()),
                    e,
                ))
            }
        };
        files.insert(n, Arc::clone(&f));
        Ok(f)
    }

    /// Appends a record to the current segment (rolling to a new one past
    /// the size limit). Not synced: call [`sync`](Self::sync).
    pub fn append(&mut self, id: u64, kind: u8, payload: &[u8]) -> Result<StoreLoc, LogError> {
        let max = u32::MAX as usize - HEADER_LEN;
        if payload.len() > max {
            return Err(LogError::RecordTooLarge {
                len: payload.len(),
                max,
            });
        }
        let rec_len = (HEADER_LEN + payload.len()) as u64;
        if self.current_len > 0 && self.current_len + rec_len > self.segment_bytes_max {
            if self.current == MAX_SEGMENT {
                return Err(LogError::Invalid(
                    "message store segment numbers are exhausted".into(),
                ));
            }
            self.create_segment(self.current + 1)?;
        }
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        encode_into(&mut buf, id, kind, &[payload], payload.len() as u32);
        let offset = self.current_len;
        let seg = self.current;
        let file = self.file(seg)?;
        let res = file.write_all_at(&buf, offset);
        self.scratch = buf;
        if res.is_err() {
            // A partly written record (a full disk) is cut off: the next append starts at the same
            // offset anyway, and the space goes back to the filesystem now.
            let _ = file.set_len(offset);
        }
        res.ctx(|| {
            format!(
                "writing {rec_len} bytes to {} at offset {offset}",
                self.path(seg).display()
            )
        })?;
        self.current_len += rec_len;
        self.dirty.insert(seg);
        Ok(StoreLoc {
            segment: seg,
            offset,
            len: payload.len() as u32,
        })
    }

    /// fdatasyncs every segment written since the last sync (and the
    /// directory, if a segment was created).
    pub fn sync(&mut self) -> Result<(), LogError> {
        while let Some(&seg) = self.dirty.first() {
            self.file(seg)?
                .sync_data()
                .ctx(|| format!("syncing segment {}", self.path(seg).display()))?;
            self.dirty.remove(&seg);
        }
        if self.dir_dirty {
            sync_dir(&self.dir)?;
            self.dir_dirty = false;
        }
        Ok(())
    }

    /// Reads and verifies the record at `loc`: `(id, kind, payload)`.
    pub fn read(&self, loc: StoreLoc) -> Result<(u64, u8, Bytes), LogError> {
        let f = self.file(loc.segment)?;
        let mut buf = vec![0u8; HEADER_LEN + loc.len as usize];
        f.read_exact_at(&mut buf, loc.offset).ctx(|| {
            format!(
                "reading {} bytes at offset {} of segment {}",
                buf.len(),
                loc.offset,
                self.path(loc.segment).display()
            )
        })?;
        let hdr: &[u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().expect("header length");
        let h = Header::decode(hdr);
        if h.len != loc.len || !h.verifies(&buf[HEADER_LEN..]) {
            return Err(LogError::Damaged(format!(
                "message store record at offset {} of {} fails verification",
                loc.offset,
                self.path(loc.segment).display()
            )));
        }
        let payload = Bytes::from(buf).slice(HEADER_LEN..);
        Ok((h.tag, h.kind, payload))
    }

    /// Reads and verifies the record at `offset` of `segment` whose length is
    /// not known: `(location, id, kind, payload)`.
    pub fn read_at(
        &self,
        segment: u32,
        offset: u64,
    ) -> Result<(StoreLoc, u64, u8, Bytes), LogError> {
        let f = self.file(segment)?;
        let mut hdr = [0u8; HEADER_LEN];
        f.read_exact_at(&mut hdr, offset).ctx(|| {
            format!(
                "reading a record header at offset {offset} of segment {}",
                self.path(segment).display()
            )
        })?;
        let loc = StoreLoc {
            segment,
            offset,
            len: Header::decode(&hdr).len,
        };
        let (id, kind, payload) = self.read(loc)?;
        Ok((loc, id, kind, payload))
    }

    /// Every valid record of `segment`, in order, skipping damaged ones (see
    /// [`scan_report`](Self::scan_report), which also says what was skipped).
    pub fn scan(&self, segment: u32) -> Result<Vec<(StoreLoc, u64, u8, Bytes)>, LogError> {
        Ok(self.scan_report(segment)?.records)
    }

    /// Every valid record of `segment`, in order. A record that fails its
    /// checksum does not hide the ones after it: the scan resumes at the next
    /// offset where a record verifies (first where the damaged header's own
    /// length points, then byte by byte) and reports the span it skipped. A
    /// span with no valid record after it is the segment's tail (torn, or
    /// damaged at the end).
    pub fn scan_report(&self, segment: u32) -> Result<SegmentScan, LogError> {
        let f = self.file(segment)?;
        let path = self.path(segment);
        let len = f
            .metadata()
            .ctx(|| format!("reading size of segment {}", path.display()))?
            .len();
        let mut raw = vec![0u8; len as usize];
        f.read_exact_at(&mut raw, 0)
            .ctx(|| format!("reading segment {}", path.display()))?;
        // One allocation; payloads are zero-copy slices of it.
        let raw = Bytes::from(raw);
        let mut out = SegmentScan::default();
        let mut off = 0usize;
        while off < raw.len() {
            if let Some((h, end)) = verify_at(&raw, off) {
                let loc = StoreLoc {
                    segment,
                    offset: off as u64,
                    len: h.len,
                };
                out.records
                    .push((loc, h.tag, h.kind, raw.slice(off + HEADER_LEN..end)));
                off = end;
                continue;
            }
            // Where the damaged header says the next record starts, if a
            // record verifies there; else the next offset where one does.
            let claimed = (off + HEADER_LEN <= raw.len())
                .then(|| {
                    let hdr: &[u8; HEADER_LEN] = raw[off..off + HEADER_LEN]
                        .try_into()
                        .expect("header length");
                    off + HEADER_LEN + Header::decode(hdr).len as usize
                })
                .filter(|&e| e < raw.len() && verify_at(&raw, e).is_some());
            // The byte-by-byte search is bounded: each candidate may cost a checksum over the
            // length its bytes claim. (A reader that knows where a record is uses `read_at`.)
            let search_end = raw
                .len()
                .saturating_sub(HEADER_LEN - 1)
                .min(off + RESYNC_SEARCH_BYTES);
            let next = claimed
                .or_else(|| (off + HEADER_LEN..search_end).find(|&o| verify_at(&raw, o).is_some()));
            match next {
                Some(n) => {
                    out.damaged.push((off as u64, (n - off) as u64));
                    off = n;
                }
                None => {
                    out.tail_ignored = (raw.len() - off) as u64;
                    tracing::warn!(
                        segment = %path.display(),
                        offset = off,
                        ignored_bytes = raw.len() - off,
                        "message store segment ends with an incomplete or damaged record; ignoring the rest"
                    );
                    break;
                }
            }
        }
        for (o, n) in &out.damaged {
            tracing::warn!(segment = %path.display(), offset = o, bytes = n,
                "message store segment: damaged record skipped");
        }
        Ok(out)
    }

    /// Existing segment numbers, ascending.
    pub fn segments(&self) -> Vec<u32> {
        self.segments.iter().copied().collect()
    }

    /// The segment appends go to.
    pub fn current_segment(&self) -> u32 {
        self.current
    }

    /// Deletes every segment not in `keep`, except the current one; returns
    /// how many were deleted.
    pub fn remove_unreferenced(&mut self, keep: &HashSet<u32>) -> Result<usize, LogError> {
        let doomed: Vec<u32> = self
            .segments
            .iter()
            .copied()
            .filter(|n| *n != self.current && !keep.contains(n))
            .collect();
        for &n in &doomed {
            let path = self.path(n);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(LogError::io(
                        format!("removing segment {}", path.display()),
                        e,
                    ))
                }
            }
            self.segments.remove(&n);
            self.files.lock().remove(&n);
            self.dirty.remove(&n);
        }
        if !doomed.is_empty() {
            sync_dir(&self.dir)?;
        }
        Ok(doomed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_and_is_never_zero() {
        let loc = StoreLoc {
            segment: 1,
            offset: 0,
            len: 5,
        };
        assert_ne!(loc.pack(), 0);
        assert_eq!(StoreLoc::unpack(loc.pack(), 5), Some(loc));
        let big = StoreLoc {
            segment: MAX_SEGMENT,
            offset: MAX_OFFSET,
            len: 0,
        };
        assert_eq!(StoreLoc::unpack(big.pack(), 0), Some(big));
        assert_eq!(StoreLoc::unpack(0, 0), None);
    }

    #[test]
    fn segment_names_parse() {
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        assert_eq!(parse_segment_name("seg-00000000.dat"), None);
        assert_eq!(parse_segment_name("seg-1.dat"), None);
    }
}
