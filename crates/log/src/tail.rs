//! The recent tail of the log kept in memory, for a reader that follows the durable end (the DR
//! shipper). The writer hands each batch it writes to the cache as one shared buffer, so the
//! reader gets the records as slices of memory the writer already filled: no read system call,
//! no copy out of the page cache and no checksum pass. Off (limit 0) unless a reader asks for it;
//! a read the cache cannot serve falls back to the files.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::circular::LogRecord;
use crate::record::{Header, HEADER_LEN};
use crate::Lsn;

#[derive(Default)]
pub(crate) struct TailCache {
    /// Bytes kept at most (0: the cache is off).
    limit: usize,
    /// Written batches in LSN order, each `(start LSN, whole framed records)`, contiguous.
    chunks: VecDeque<(Lsn, Bytes)>,
    bytes: usize,
    /// Buffers of dropped batches nobody else held, for the writer's next batches: a fresh
    /// buffer per write cost an allocation of its size and a copy each time it grew.
    spare: Vec<Vec<u8>>,
}

/// Spare buffers kept at most.
const SPARE_MAX: usize = 4;

impl TailCache {
    pub(crate) fn enabled(&self) -> bool {
        self.limit > 0
    }

    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        self.trim();
    }

    /// Keeps the batch written at `start`. A batch that does not follow the last one (there is
    /// none after a restart) starts the cache afresh.
    pub(crate) fn push(&mut self, start: Lsn, batch: Bytes) {
        if !self.enabled() || batch.is_empty() {
            return;
        }
        if self
            .chunks
            .back()
            .is_some_and(|(s, b)| s + b.len() as u64 != start)
        {
            self.chunks.clear();
            self.bytes = 0;
        }
        self.bytes += batch.len();
        self.chunks.push_back((start, batch));
        self.trim();
    }

    fn trim(&mut self) {
        while self.bytes > self.limit {
            match self.chunks.pop_front() {
                Some((_, b)) => {
                    self.bytes -= b.len();
                    if self.spare.len() < SPARE_MAX {
                        if let Ok(mut m) = b.try_into_mut() {
                            // Emptied first, so taking the buffer back copies nothing.
                            m.clear();
                            self.spare.push(Vec::from(m));
                        }
                    }
                }
                None => break,
            }
        }
    }

    /// An empty buffer for the writer's next batch, of at least `capacity` if one is spare.
    pub(crate) fn buffer(&mut self, capacity: usize) -> Vec<u8> {
        match self.spare.iter().position(|v| v.capacity() >= capacity) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(capacity),
        }
    }

    /// The records from `from` (a record boundary) up to `durable`, at most `max_bytes` of
    /// payload but at least one record; None when `from` is not in the cache, or the bytes
    /// there do not frame a record at `from` (the caller then reads the files).
    pub(crate) fn read(&self, from: Lsn, durable: Lsn, max_bytes: usize) -> Option<Vec<LogRecord>> {
        let first = self.chunks.iter().position(|(s, b)| {
            let end = s + b.len() as u64;
            *s <= from && from < end
        })?;
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut pos = from;
        for (start, chunk) in self.chunks.iter().skip(first) {
            if *start > pos {
                return None;
            }
            let mut off = (pos - start) as usize;
            while off + HEADER_LEN <= chunk.len() && pos < durable {
                let hb: [u8; HEADER_LEN] = chunk[off..off + HEADER_LEN].try_into().ok()?;
                let h = Header::decode(&hb);
                let end = off + h.record_len() as usize;
                if h.tag != pos || end > chunk.len() || pos + h.record_len() > durable {
                    return if out.is_empty() { None } else { Some(out) };
                }
                if !out.is_empty() && total + h.len as usize > max_bytes {
                    return Some(out);
                }
                total += h.len as usize;
                out.push(LogRecord {
                    lsn: pos,
                    kind: h.kind,
                    payload: chunk.slice(off + HEADER_LEN..end),
                });
                pos += h.record_len();
                off = end;
            }
            if pos >= durable {
                break;
            }
        }
        if out.is_empty() {
            None
        } else {
            Some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::encode_into;

    /// Frames `payloads` as records starting at `start`; returns the batch and its end.
    fn batch(start: Lsn, payloads: &[&[u8]]) -> (Bytes, Lsn) {
        let mut buf = Vec::new();
        let mut pos = start;
        for p in payloads {
            encode_into(&mut buf, pos, 3, &[p], p.len() as u32);
            pos = start + buf.len() as u64;
        }
        (Bytes::from(buf), pos)
    }

    #[test]
    fn reads_across_batches_up_to_durable_and_max_bytes() {
        let mut c = TailCache::default();
        c.set_limit(1 << 20);
        let (a, end_a) = batch(100, &[b"one", b"two"]);
        let (b, end_b) = batch(end_a, &[b"three", b"four"]);
        c.push(100, a);
        c.push(end_a, b);
        let all = c.read(100, end_b, 1 << 20).unwrap();
        let bodies: Vec<&[u8]> = all.iter().map(|r| &r.payload[..]).collect();
        assert_eq!(bodies, vec![&b"one"[..], b"two", b"three", b"four"]);
        assert_eq!(all.last().unwrap().end_lsn(), end_b);
        // Only what is durable.
        let some = c.read(100, end_a, 1 << 20).unwrap();
        assert_eq!(some.len(), 2);
        // At least one record, then no more than max_bytes.
        assert_eq!(c.read(100, end_b, 1).unwrap().len(), 1);
        assert_eq!(c.read(100, end_b, 6).unwrap().len(), 2);
        // From the middle, at a record boundary.
        let second = all[1].lsn;
        assert_eq!(c.read(second, end_b, 1 << 20).unwrap().len(), 3);
    }

    #[test]
    fn misses_fall_back_to_the_files() {
        let mut c = TailCache::default();
        let (a, end_a) = batch(0, &[b"x"]);
        c.push(0, a.clone());
        assert!(c.read(0, end_a, 100).is_none(), "off by default");
        c.set_limit(1 << 20);
        c.push(0, a);
        assert!(c.read(end_a, end_a + 10, 100).is_none(), "beyond the cache");
        assert!(c.read(1, end_a, 100).is_none(), "not a record boundary");
        // A gap (the writer restarted elsewhere) starts afresh.
        let (b, end_b) = batch(end_a + 50, &[b"y"]);
        c.push(end_a + 50, b);
        assert!(c.read(0, end_a, 100).is_none());
        assert_eq!(c.read(end_a + 50, end_b, 100).unwrap().len(), 1);
    }

    #[test]
    fn a_dropped_batch_nobody_holds_is_reused_for_the_next() {
        let mut c = TailCache::default();
        c.set_limit(150);
        let (a, end_a) = batch(0, &[&[7u8; 100]]);
        let (b, _) = batch(end_a, &[&[8u8; 100]]);
        let ptr = a.as_ptr();
        c.push(0, a);
        c.push(end_a, b);
        let v = c.buffer(10);
        assert_eq!(v.as_ptr(), ptr, "the first batch's memory came back");
        assert!(v.is_empty());
        // One still held elsewhere is not taken back.
        let (d, end_d) = batch(500, &[&[9u8; 100]]);
        let held = d.clone();
        c.push(500, d);
        let (e, _) = batch(end_d, &[&[1u8; 100]]);
        c.push(end_d, e);
        assert!(
            c.spare.is_empty(),
            "a batch still held elsewhere is not reused"
        );
        drop(held);
    }

    #[test]
    fn keeps_no_more_than_the_limit() {
        let mut c = TailCache::default();
        let (a, end_a) = batch(0, &[&[7u8; 100]]);
        let (b, end_b) = batch(end_a, &[&[8u8; 100]]);
        c.set_limit(150);
        c.push(0, a);
        c.push(end_a, b);
        assert!(
            c.read(0, end_b, 1000).is_none(),
            "the oldest batch was dropped"
        );
        assert_eq!(c.read(end_a, end_b, 1000).unwrap()[0].payload[0], 8);
    }
}
