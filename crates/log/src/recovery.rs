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
//! Whatever the class, recovery then looks for a record that verifies and
//! carries its own position as LSN further on in the *same* sync window. The
//! writer syncs batch after batch, so such a record means either a power loss
//! landed the last, unsynced batch's pages out of order (nothing after `P`
//! was acknowledged) or the bytes at `P` were damaged after a sync that also
//! covered the records after them (which may have been acknowledged). The two
//! cannot be told apart, so `DamagePolicy` decides: skip the damaged span and
//! keep the records after it (the queue manager's log: the worst case brings
//! back unacknowledged records, exactly as an unsynced batch that reached the
//! disk whole does), or end the log at `P` (the Raft log, which must have no
//! holes). Either way the span, its LSN range, and the intact records it
//! cost are reported.
//!
//! Past the last kept record, recovery probes the *next* window: the writer
//! never has unsynced bytes in two sync windows at once (see
//! `Geometry::sync_window`), so a valid record there can only exist if the
//! bytes at the tail were once valid: mid-log damage, `LogError::Damaged`.

use bytes::Bytes;

use crate::circular::{LogRecord, TailProblem};
use crate::error::LogError;
use crate::record::{encode_into, Header, HEADER_LEN};
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

/// Kind of the filler record recovery writes over a damaged span it skipped
/// (so the ring reads as one chain of valid records again). Reserved to this
/// crate: `append` refuses it, and neither recovery nor `read_from` returns it.
pub(crate) const FILLER_KIND: u8 = 0xFF;

/// What recovery does with a damaged record that valid records follow in the
/// same (last) sync window. See `docs/internals/log.md`, "Recovery".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamagePolicy {
    /// The log ends at the first damaged record; intact records after it in
    /// the same window are dropped (and counted in the report). For a log
    /// that must have no holes (the Raft log: a replica fetches what it
    /// lacks from the leader).
    TruncateAtDamage,
    /// The damaged span is skipped (overwritten by a filler record) and the
    /// intact records after it are kept: they may have been acknowledged,
    /// since a sync that covered them covered the damaged record too.
    SkipDamagedRecords,
}

/// Why a span of the log was not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Damaged bytes with valid records after them in the same window: the
    /// span was skipped and the records after it kept.
    Skipped,
    /// The end of the log: a record not completely written (zeros where its
    /// end should be).
    TornTail,
    /// The end of the log: a record that fails its checksum or length check
    /// though it was written completely, or (`TruncateAtDamage`) damage with
    /// intact records after it that were dropped.
    CorruptTail,
}

/// One span `[from, to)` of the log that recovery did not replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscardedSpan {
    pub from: Lsn,
    pub to: Lsn,
    pub kind: SpanKind,
    /// Damaged records known to be in the span: 1 when the first one's header
    /// still gives its length, 0 when the span's own bytes cannot say (a
    /// zeroed or unreadable header).
    pub damaged_records: u64,
    /// Records in the span that verify but were dropped after the damage
    /// (only with `TruncateAtDamage`).
    pub intact_records: u64,
    /// The span's bytes held data before this lap of the ring (a torn record
    /// there need not end in zeros).
    pub reused_slots: bool,
}

impl DiscardedSpan {
    pub fn bytes(&self) -> u64 {
        self.to - self.from
    }

    /// Could this span hold a record whose sync completed (so an application
    /// may have been told it was durable)? A torn tail cannot; neither can a
    /// record at the end that fails its CRC where the ring held an earlier
    /// lap's bytes (an interrupted write leaves them behind). Everything else
    /// can.
    pub fn may_hold_acknowledged(&self) -> bool {
        match self.kind {
            SpanKind::Skipped => true,
            SpanKind::TornTail => self.intact_records > 0,
            SpanKind::CorruptTail => self.intact_records > 0 || !self.reused_slots,
        }
    }
}

/// Result of the recovery scan.
pub(crate) struct ScanOutcome {
    pub records: Vec<LogRecord>,
    pub tail: Lsn,
    /// Every span not replayed, in LSN order (the last may be the tail).
    pub spans: Vec<DiscardedSpan>,
    /// The first filler record replayed past (damage skipped by an earlier recovery).
    pub first_filler: Option<Lsn>,
    pub problem: Option<TailProblem>,
    /// `[tail, scrub_end)` may hold bytes that were written but never
    /// acknowledged (the in-flight sync window). They must be zeroed before
    /// new appends, or a later recovery could mistake them for records that
    /// follow the new tail.
    pub scrub_end: Lsn,
}

/// First position in `[from, to]` holding a record that verifies at its own
/// position (and ends by `limit`).
fn next_valid(
    rd: &mut RingReader<'_>,
    from: Lsn,
    to: Lsn,
    limit: Lsn,
    max_payload: usize,
) -> Result<Option<LogRecord>, LogError> {
    let mut hb = [0u8; HEADER_LEN];
    let mut q = from;
    while q <= to && q + HEADER_LEN as u64 <= limit {
        rd.read(q, &mut hb)?;
        // Cheap pre-check before reading and checksumming a payload.
        if Header::decode(&hb).tag == q {
            if let Found::Valid(r) = read_record_at(rd, q, limit, max_payload)? {
                return Ok(Some(r));
            }
        }
        q += 1;
    }
    Ok(None)
}

/// Scans from `checkpoint` to the tail; see the module docs for the rules.
pub(crate) fn scan(
    files: &RingFiles,
    checkpoint: Lsn,
    policy: DamagePolicy,
) -> Result<ScanOutcome, LogError> {
    let geo = files.geometry();
    let limit = checkpoint + geo.capacity;
    let max_payload = geo.max_payload();
    let w = geo.sync_window;
    let mut rd = RingReader::new(files, READ_CHUNK);
    let mut records = Vec::new();
    let mut spans: Vec<DiscardedSpan> = Vec::new();
    let mut first_filler = None;
    let mut pos = checkpoint;
    let (tail, problem, suspect_end) = loop {
        // (problem, the damaged record's own length if its header gives one,
        // end of the bytes that may be torn)
        let (problem, known_len, suspect_end) = loop {
            if pos + HEADER_LEN as u64 > limit {
                // The ring is full up to the checkpoint: nothing can follow.
                break (None, None, pos);
            }
            let hdr_end = pos + HEADER_LEN as u64;
            match read_record_at(&mut rd, pos, limit, max_payload)? {
                Found::Valid(r) => {
                    pos = r.end_lsn();
                    if r.kind != FILLER_KIND {
                        records.push(r);
                    } else if first_filler.is_none() {
                        first_filler = Some(r.lsn);
                    }
                }
                Found::Zero => break (None, None, hdr_end),
                // Slots at LSN >= capacity hold bytes of the previous lap, so
                // a foreign header there (even partly, when it straddles the
                // ring end) is the normal end; before that the ring was zero,
                // so it is a header cut short.
                Found::Foreign if hdr_end > geo.capacity => break (None, None, hdr_end),
                Found::Foreign => break (Some(TailProblem::Torn { at: pos }), None, hdr_end),
                Found::Implausible => {
                    break (Some(TailProblem::Corrupt { at: pos }), None, hdr_end)
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
                    break (Some(p), Some(len), pos + len);
                }
            }
        };
        if pos + HEADER_LEN as u64 > limit {
            break (pos, None, suspect_end);
        }
        // Does a valid record follow in the same sync window? Then the bytes
        // at `pos` are not simply the unwritten end of the log.
        // (A record at the boundary itself is in the next window: the probe
        // below refuses that as mid-log damage.)
        let boundary = suspect_end.div_ceil(w) * w;
        let Some(next) = next_valid(
            &mut rd,
            pos + HEADER_LEN as u64,
            boundary - 1,
            limit,
            max_payload,
        )?
        else {
            if let Some(p) = problem {
                let (kind, to) = match p {
                    TailProblem::Torn { .. } => (SpanKind::TornTail, suspect_end),
                    TailProblem::Corrupt { .. } => (SpanKind::CorruptTail, suspect_end),
                };
                spans.push(DiscardedSpan {
                    from: pos,
                    to,
                    kind,
                    damaged_records: u64::from(known_len.is_some()),
                    intact_records: 0,
                    reused_slots: to > geo.capacity,
                });
            }
            break (pos, problem, suspect_end);
        };
        let damaged_records = u64::from(known_len.is_some_and(|l| pos + l == next.lsn));
        match policy {
            DamagePolicy::SkipDamagedRecords => {
                spans.push(DiscardedSpan {
                    from: pos,
                    to: next.lsn,
                    kind: SpanKind::Skipped,
                    damaged_records,
                    intact_records: 0,
                    reused_slots: next.lsn > geo.capacity,
                });
                pos = next.lsn;
            }
            DamagePolicy::TruncateAtDamage => {
                // Count what is dropped: every record that verifies from
                // `next` to the end of the window.
                let mut intact = 0u64;
                let mut end = next.end_lsn();
                let mut cur = Some(next);
                while let Some(r) = cur {
                    intact += 1;
                    end = r.end_lsn();
                    cur = if end >= boundary {
                        None
                    } else {
                        next_valid(&mut rd, end, boundary - 1, limit, max_payload)?
                    };
                }
                spans.push(DiscardedSpan {
                    from: pos,
                    to: end,
                    kind: SpanKind::CorruptTail,
                    damaged_records,
                    intact_records: intact,
                    reused_slots: end > geo.capacity,
                });
                let p = problem.unwrap_or(TailProblem::Corrupt { at: pos });
                // The probe below still starts at the damage's window: valid
                // records in a later one mean the damage was synced data.
                break (pos, Some(p), suspect_end);
            }
        }
    };
    let boundary = suspect_end.div_ceil(w) * w;
    let probe_end = (boundary + PROBE_BYTES).min(limit.saturating_sub(HEADER_LEN as u64));
    if tail < limit {
        if let Some(r) = next_valid(&mut rd, boundary, probe_end, limit, max_payload)? {
            let q = r.lsn;
            let what = match problem {
                Some(TailProblem::Torn { .. }) => "is incomplete",
                Some(TailProblem::Corrupt { .. }) => "fails its checksum",
                None => "is missing",
            };
            return Err(LogError::Damaged(format!(
                "the recovery log record at LSN {tail} {what}, but a valid record follows at LSN {q} \
                 in a later sync window: the records in between were committed and truncating here would lose them. \
                 Do not start on this log; inspect it with `ferrymq dmplog`, restore it from a backup or rebuild from a replica"
            )));
        }
    }
    for s in &spans {
        tracing::warn!(
            from = s.from,
            to = s.to,
            kind = ?s.kind,
            bytes = s.bytes(),
            damaged_records = s.damaged_records,
            intact_records = s.intact_records,
            "recovery log: span not replayed"
        );
    }
    Ok(ScanOutcome {
        records,
        tail,
        spans,
        first_filler,
        problem,
        scrub_end: boundary.min(limit).max(tail),
    })
}

/// Overwrites `[from, to)` (at least a header long) with valid records of
/// the log's own filler kind — as few as the largest payload allows — and
/// syncs them.
/// `live`: from the checkpoint to the end of the log (see
/// [`RingFiles::write_span`]).
pub(crate) fn write_filler(
    files: &RingFiles,
    from: Lsn,
    to: Lsn,
    live: std::ops::Range<Lsn>,
) -> Result<(), LogError> {
    let h = HEADER_LEN as u64;
    if to < from + h {
        return Err(LogError::Invalid(format!(
            "cannot fill {} bytes at LSN {from}: less than a record header",
            to.saturating_sub(from)
        )));
    }
    let max_rec = files.geometry().max_payload() as u64 + h;
    let mut buf = Vec::with_capacity((to - from) as usize);
    let mut pos = from;
    while pos < to {
        let mut n = (to - pos).min(max_rec);
        let rest = to - pos - n;
        if rest > 0 && rest < h {
            n -= h; // leave room for a last header (max_rec is far above 2 headers)
        }
        let zeros = vec![0u8; (n - h) as usize];
        encode_into(&mut buf, pos, FILLER_KIND, &[&zeros], (n - h) as u32);
        pos += n;
    }
    let mut touched = vec![false; files.file_count()];
    files.write_span(from, &buf, &mut touched, live)?;
    for (i, t) in touched.iter().enumerate() {
        if *t {
            files.sync(i)?;
        }
    }
    Ok(())
}
