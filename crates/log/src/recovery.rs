//! Reading the ring back: a buffered positional reader, record verification
//! at a given LSN, and the recovery scan that finds the tail of the log and
//! decides whether a bad record there is a torn/corrupt tail (truncate it) or
//! damage in the middle of committed data (refuse to open).
//!
//! How the tail is classified, given the bytes at the first position `P`
//! that does not hold a valid record:
//! * all-zero header, or (once the header's slots were used by a previous
//!   lap) a header whose LSN is not `P` — nothing was written here in this
//!   lap: a clean end, no problem;
//! * a header that claims LSN `P` but fails its CRC: `Torn` if it ends in a
//!   run of zeros (the unwritten rest of a preallocated file), else `Corrupt`;
//! * in the first lap, a non-zero header that does not claim `P`: a header
//!   only partly written, `Torn`.
//!
//! Whatever the class, recovery then probes past `P` for a record that
//! verifies and carries its own position as LSN. Because the writer never
//! has unsynced bytes in two sync windows at once (see
//! `Geometry::sync_window`), such a record in the *same* window may be an
//! unacknowledged write that reached the disk out of order during a power
//! loss — tail, ignored — while one in a *later* window can only exist if
//! the bytes at `P` were once valid: mid-log damage, `LogError::Damaged`.

use bytes::Bytes;

use crate::circular::{LogRecord, TailProblem};
use crate::error::LogError;
use crate::record::{Header, HEADER_LEN};
use crate::ring::RingFiles;
use crate::Lsn;

/// How far past the suspect window recovery looks for surviving records.
const PROBE_BYTES: u64 = 1 << 20;
/// Read-ahead of the buffered reader.
const READ_CHUNK: usize = 1 << 20;
/// A CRC-failing record whose last bytes are this many zeros is classed as
/// torn (never fully written) rather than corrupt.
const TORN_ZERO_RUN: usize = 8;

/// Buffered positional reader over the ring: recovery reads many small
/// headers, and one pread per header would dominate start-up time.
pub(crate) struct RingReader<'a> {
    files: &'a RingFiles,
    chunk: usize,
    buf: Vec<u8>,
    start: Lsn,
}

impl<'a> RingReader<'a> {
    pub(crate) fn new(files: &'a RingFiles, chunk: usize) -> RingReader<'a> {
        let cap = files.geometry().capacity;
        let chunk = (chunk as u64).clamp(HEADER_LEN as u64, cap.max(HEADER_LEN as u64)) as usize;
        RingReader {
            files,
            chunk,
            buf: Vec::new(),
            start: 0,
        }
    }

    pub(crate) fn read(&mut self, pos: Lsn, out: &mut [u8]) -> Result<(), LogError> {
        let end = pos + out.len() as u64;
        if pos >= self.start && end <= self.start + self.buf.len() as u64 {
            let o = (pos - self.start) as usize;
            out.copy_from_slice(&self.buf[o..o + out.len()]);
            return Ok(());
        }
        if out.len() >= self.chunk {
            return self.files.read_span(pos, out);
        }
        self.buf.resize(self.chunk, 0);
        self.files.read_span(pos, &mut self.buf)?;
        self.start = pos;
        out.copy_from_slice(&self.buf[..out.len()]);
        Ok(())
    }
}

/// What lies at a position that is expected to start a record.
pub(crate) enum Found {
    Valid(LogRecord),
    /// All-zero header: never written.
    Zero,
    /// Header does not carry this position as its LSN.
    Foreign,
    /// Header claims this LSN but its length cannot be right.
    Implausible,
    /// Header claims this LSN, CRC fails; carries the record length and the
    /// number of zero bytes at its end.
    BadCrc {
        len: u64,
        trailing_zeros: usize,
    },
}

/// Reads and verifies the record at `pos`, which must end at or before
/// `limit`.
pub(crate) fn read_record_at(
    rd: &mut RingReader<'_>,
    pos: Lsn,
    limit: Lsn,
    max_payload: usize,
) -> Result<Found, LogError> {
    let mut hb = [0u8; HEADER_LEN];
    rd.read(pos, &mut hb)?;
    if hb.iter().all(|&b| b == 0) {
        return Ok(Found::Zero);
    }
    let h = Header::decode(&hb);
    if h.tag != pos {
        return Ok(Found::Foreign);
    }
    if h.len as usize > max_payload || pos + h.record_len() > limit {
        return Ok(Found::Implausible);
    }
    let mut payload = vec![0u8; h.len as usize];
    rd.read(pos + HEADER_LEN as u64, &mut payload)?;
    if h.verifies(&payload) {
        return Ok(Found::Valid(LogRecord {
            lsn: pos,
            kind: h.kind,
            payload: Bytes::from(payload),
        }));
    }
    let mut trailing_zeros = payload.iter().rev().take_while(|&&b| b == 0).count();
    if trailing_zeros == payload.len() {
        trailing_zeros += hb.iter().rev().take_while(|&&b| b == 0).count();
    }
    Ok(Found::BadCrc {
        len: h.record_len(),
        trailing_zeros,
    })
}

/// Result of the recovery scan.
pub(crate) struct ScanOutcome {
    pub records: Vec<LogRecord>,
    pub tail: Lsn,
    pub discarded: u64,
    pub problem: Option<TailProblem>,
    /// `[tail, scrub_end)` may hold bytes that were written but never
    /// acknowledged (the in-flight sync window). They must be zeroed before
    /// new appends, or a later recovery could mistake them for records that
    /// follow the new tail.
    pub scrub_end: Lsn,
}

/// Scans from `checkpoint` to the tail; see the module docs for the rules.
pub(crate) fn scan(files: &RingFiles, checkpoint: Lsn) -> Result<ScanOutcome, LogError> {
    let geo = files.geometry();
    let limit = checkpoint + geo.capacity;
    let max_payload = geo.max_payload();
    let mut rd = RingReader::new(files, READ_CHUNK);
    let mut records = Vec::new();
    let mut pos = checkpoint;
    // (problem, bytes of the bad record, end of the bytes that may be torn)
    let (problem, discarded, suspect_end) = loop {
        if pos + HEADER_LEN as u64 > limit {
            // The ring is full up to the checkpoint: nothing can follow.
            break (None, 0, pos);
        }
        let hdr_end = pos + HEADER_LEN as u64;
        match read_record_at(&mut rd, pos, limit, max_payload)? {
            Found::Valid(r) => {
                pos = r.lsn + HEADER_LEN as u64 + r.payload.len() as u64;
                records.push(r);
            }
            Found::Zero => break (None, 0, hdr_end),
            // Slots at LSN >= capacity hold bytes of the previous lap, so a
            // foreign header there (even partly, when it straddles the ring
            // end) is the normal end; before that the ring was zero, so it
            // is a header cut short.
            Found::Foreign if hdr_end > geo.capacity => break (None, 0, hdr_end),
            Found::Foreign => {
                break (
                    Some(TailProblem::Torn { at: pos }),
                    HEADER_LEN as u64,
                    hdr_end,
                )
            }
            Found::Implausible => {
                break (
                    Some(TailProblem::Corrupt { at: pos }),
                    HEADER_LEN as u64,
                    hdr_end,
                )
            }
            Found::BadCrc {
                len,
                trailing_zeros,
            } => {
                let p = if trailing_zeros >= TORN_ZERO_RUN {
                    TailProblem::Torn { at: pos }
                } else {
                    TailProblem::Corrupt { at: pos }
                };
                break (Some(p), len, pos + len);
            }
        }
    };
    let tail = pos;
    let w = geo.sync_window;
    let boundary = suspect_end.div_ceil(w) * w;
    let probe_end = (boundary + PROBE_BYTES).min(limit.saturating_sub(HEADER_LEN as u64));
    let mut q = boundary;
    let mut hb = [0u8; HEADER_LEN];
    while q <= probe_end && tail < limit {
        rd.read(q, &mut hb)?;
        // Cheap pre-check before reading and checksumming a payload.
        if Header::decode(&hb).tag == q {
            if let Found::Valid(_) = read_record_at(&mut rd, q, limit, max_payload)? {
                let what = match problem {
                    Some(TailProblem::Torn { .. }) => "is incomplete",
                    Some(TailProblem::Corrupt { .. }) => "fails its checksum",
                    None => "is missing",
                };
                return Err(LogError::Damaged(format!(
                    "the recovery log record at LSN {tail} {what}, but a valid record follows at LSN {q}: \
                     the records in between were committed and truncating here would lose them. \
                     Do not start on this log; restore it from a backup or rebuild from a replica"
                )));
            }
        }
        q += 1;
    }
    if let Some(p) = problem {
        tracing::warn!(
            problem = ?p,
            discarded_bytes = discarded,
            records = records.len(),
            "recovery log ends with a damaged record; treating it as the tail"
        );
    }
    Ok(ScanOutcome {
        records,
        tail,
        discarded,
        problem,
        scrub_end: boundary.min(limit).max(tail),
    })
}
