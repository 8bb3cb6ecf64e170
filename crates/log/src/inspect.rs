//! Offline inspection and salvage of a recovery log (`ferrymq dmplog`): every
//! readable record from the checkpoint on, with the damaged spans between
//! them, read without recovering (nothing is zeroed or truncated); and
//! `salvage`, which overwrites each damaged span that readable records follow
//! with a filler record so that recovery keeps those records.

use std::path::Path;

use crate::control;
use crate::error::LogError;
use crate::record::{Header, HEADER_LEN};
use crate::recovery::{read_record_at, write_filler, Found, RingReader, FILLER_KIND};
use crate::ring::{Geometry, RingFiles};
use crate::Lsn;

/// What lies at one place of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpStatus {
    /// A record that verifies (`kind` 255 is a filler recovery wrote over damage).
    Ok,
    /// A header that claims this LSN but whose payload fails its checksum.
    BadCrc,
    /// Bytes that are no record (damaged header, zeros, an earlier lap's bytes)
    /// with readable records after them.
    Unreadable,
}

/// One line of a log dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpEntry {
    pub lsn: Lsn,
    /// Bytes from `lsn` to the next entry (header included).
    pub len: u64,
    /// The header's kind byte, when the header claims this LSN.
    pub kind: Option<u8>,
    /// The header's CRC field, when the header claims this LSN.
    pub crc: Option<u32>,
    pub status: DumpStatus,
}

/// A whole log as `dmplog` shows it.
#[derive(Debug, Clone)]
pub struct LogDump {
    pub checkpoint_lsn: Lsn,
    pub capacity: u64,
    pub sync_window: u64,
    pub entries: Vec<DumpEntry>,
    /// Where the readable log ends (after the last readable record).
    pub end_lsn: Lsn,
}

impl LogDump {
    /// Entries that are damage (bad CRC or unreadable bytes).
    pub fn damaged(&self) -> impl Iterator<Item = &DumpEntry> {
        self.entries.iter().filter(|e| e.status != DumpStatus::Ok)
    }
}

fn open_ring(dir: &Path) -> Result<(RingFiles, Geometry, Lsn), LogError> {
    let ctl = control::read(dir)?;
    let geo = Geometry::new(ctl.primary_files, ctl.file_pages)?;
    // Direct reads where the filesystem allows them: a dump taken while the
    // queue manager runs then puts no page of the ring in the page cache under
    // its direct writes.
    let files = RingFiles::open(dir, geo, true)?;
    Ok((files, geo, ctl.checkpoint_lsn))
}

/// Lists every readable record of the log in `dir` from its checkpoint on,
/// and the damage between them. Looks for readable records past damage
/// anywhere up to a full ring from the checkpoint.
pub fn dump(dir: &Path) -> Result<LogDump, LogError> {
    let (files, geo, checkpoint) = open_ring(dir)?;
    let limit = checkpoint + geo.capacity;
    let max_payload = geo.max_payload();
    let mut rd = RingReader::new(&files, 1 << 20);
    let mut entries = Vec::new();
    let mut pos = checkpoint;
    let mut end = checkpoint;
    while pos + HEADER_LEN as u64 <= limit {
        let mut hb = [0u8; HEADER_LEN];
        rd.read(pos, &mut hb)?;
        let h = Header::decode(&hb);
        let found = read_record_at(&mut rd, pos, limit, max_payload)?;
        if let Found::Valid(r) = &found {
            let len = r.end_lsn() - pos;
            entries.push(DumpEntry {
                lsn: pos,
                len,
                kind: Some(r.kind),
                crc: Some(h.crc),
                status: DumpStatus::Ok,
            });
            pos += len;
            end = pos;
            continue;
        }
        // Damage or the end: is there anything readable further on?
        let Some(next) = next_valid_anywhere(&mut rd, pos + 1, limit, max_payload)? else {
            if let Found::BadCrc { .. } = found {
                entries.push(DumpEntry {
                    lsn: pos,
                    len: h.record_len(),
                    kind: Some(h.kind),
                    crc: Some(h.crc),
                    status: DumpStatus::BadCrc,
                });
            }
            break;
        };
        let claims = h.tag == pos;
        entries.push(DumpEntry {
            lsn: pos,
            len: next - pos,
            kind: claims.then_some(h.kind),
            crc: claims.then_some(h.crc),
            status: if matches!(found, Found::BadCrc { .. }) {
                DumpStatus::BadCrc
            } else {
                DumpStatus::Unreadable
            },
        });
        pos = next;
    }
    Ok(LogDump {
        checkpoint_lsn: checkpoint,
        capacity: geo.capacity,
        sync_window: geo.sync_window,
        entries,
        end_lsn: end,
    })
}

fn next_valid_anywhere(
    rd: &mut RingReader<'_>,
    from: Lsn,
    limit: Lsn,
    max_payload: usize,
) -> Result<Option<Lsn>, LogError> {
    let mut hb = [0u8; HEADER_LEN];
    let mut q = from;
    while q + HEADER_LEN as u64 <= limit {
        rd.read(q, &mut hb)?;
        if Header::decode(&hb).tag == q {
            if let Found::Valid(_) = read_record_at(rd, q, limit, max_payload)? {
                return Ok(Some(q));
            }
        }
        q += 1;
    }
    Ok(None)
}

/// Overwrites every damaged span of the log in `dir` that readable records
/// follow (anywhere, not only in the last sync window) with a filler record,
/// so that the next recovery keeps those records; returns the spans
/// `[from, to)` it overwrote. The damaged records themselves are lost. The
/// queue manager must not be running.
pub fn salvage(dir: &Path) -> Result<Vec<(Lsn, Lsn)>, LogError> {
    let d = dump(dir)?;
    let (files, _, checkpoint) = open_ring(dir)?;
    let mut done = Vec::new();
    for e in d.damaged() {
        let to = e.lsn + e.len;
        if to > d.end_lsn || e.len < HEADER_LEN as u64 {
            continue; // the tail: recovery cuts it
        }
        write_filler(&files, e.lsn, to, checkpoint..d.end_lsn)?;
        done.push((e.lsn, to));
    }
    Ok(done)
}

/// The reserved kind of filler records, for dumps.
pub const FILLER: u8 = FILLER_KIND;
