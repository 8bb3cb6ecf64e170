//! Damages a small valid recovery log with the fuzzer's bytes (overwrites anywhere in the ring or
//! the control file, shortened ring files) and recovers it, as a queue manager restarting on a
//! damaged disk would. Recovery must return a clean error or records that are really in the ring:
//! each one's header, checksum and payload verified here independently against the damaged bytes,
//! in LSN order, within the ring. A log that recovered must take an append and recover again with
//! the same records.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use ferrymq_log::{DamagePolicy, Durability, LogConfig, LogRecord, RecoveryLog};
use libfuzzer_sys::fuzz_target;

const PAGE: usize = 4096;
const HEADER_LEN: usize = ferrymq_log::RECORD_HEADER_LEN;

/// A valid log, as its files' bytes, and the records a recovery of it returns.
struct Template {
    files: u32,
    pages: u32,
    control: Vec<u8>,
    ring: Vec<u8>,
    records: Vec<LogRecord>,
}

/// (ring files, pages per file, payload bytes written): a log in its first lap, and logs whose
/// writes went round the ring (its slots hold the previous lap's records).
const SHAPES: [(u32, u32, usize); 3] = [(2, 1, 3_000), (2, 1, 20_000), (1, 2, 12_000)];

fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("a temporary directory")
}

fn config(dir: &Path, files: u32, pages: u32) -> LogConfig {
    LogConfig {
        dir: dir.to_path_buf(),
        primary_files: files,
        file_pages: pages,
        durability: Durability::OsBuffered,
        // Only `fsync` durability writes directly; say so anyway.
        direct_writes: false,
    }
}

fn ring_file(dir: &Path, i: u32) -> std::path::PathBuf {
    dir.join(format!("S{i:07}.LOG"))
}

fn build((files, pages, bytes): (u32, u32, usize)) -> Template {
    let tmp = scratch();
    let cfg = config(tmp.path(), files, pages);
    RecoveryLog::create(&cfg).expect("create");
    let (log, _) = RecoveryLog::open(&cfg, Box::new(|_| {})).expect("open");
    let mut starts = Vec::new();
    let mut written = 0;
    let mut i = 0usize;
    while written < bytes {
        let len = (i * 37) % 300;
        let payload: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        starts.push(log.end_lsn());
        let end = log
            .append((i % 9 + 1) as u8, &payload)
            .expect("append to the template log");
        written += len;
        i += 1;
        // Keep about a quarter of the ring between the checkpoint and the end.
        if log.used_bytes() > log.capacity() / 2 {
            log.wait_durable(end).expect("durable");
            let keep = log.capacity() / 4;
            let ckpt = starts
                .iter()
                .copied()
                .find(|&s| end - s <= keep)
                .expect("a recent record");
            log.set_checkpoint(ckpt.max(log.checkpoint_lsn()))
                .expect("checkpoint");
        }
    }
    log.close().expect("close");
    let control = std::fs::read(tmp.path().join("control")).expect("control file");
    let mut ring = Vec::new();
    for f in 0..files {
        ring.extend(std::fs::read(ring_file(tmp.path(), f)).expect("ring file"));
    }
    let (log, rec) = RecoveryLog::open(&cfg, Box::new(|_| {})).expect("reopen");
    log.close().expect("close");
    assert!(rec.tail_problem.is_none() && !rec.records.is_empty());
    Template {
        files,
        pages,
        control,
        ring,
        records: rec.records,
    }
}

fn templates() -> &'static [Template] {
    static T: OnceLock<Vec<Template>> = OnceLock::new();
    T.get_or_init(|| SHAPES.iter().map(|&s| build(s)).collect())
}

/// A little-endian number from up to `n` bytes of `b`.
fn take(b: &mut &[u8], n: usize) -> usize {
    let (head, rest) = b.split_at(n.min(b.len()));
    *b = rest;
    head.iter()
        .rev()
        .fold(0usize, |acc, &x| (acc << 8) | usize::from(x))
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, mut ops)) = data.split_first() else {
        return;
    };
    let t = &templates()[usize::from(choice) % SHAPES.len()];
    let policy = if choice & 0x80 == 0 {
        DamagePolicy::SkipDamagedRecords
    } else {
        DamagePolicy::TruncateAtDamage
    };
    let file_bytes = t.pages as usize * PAGE;
    let mut ring = t.ring.clone();
    let mut control = t.control.clone();
    let mut lengths = vec![file_bytes; t.files as usize];
    let mut damaged = false;
    while let Some((&op, rest)) = ops.split_first() {
        ops = rest;
        match op % 8 {
            // Overwrite bytes of the ring (most damage lands there).
            0..=4 => {
                let at = take(&mut ops, 2) % ring.len();
                let n = take(&mut ops, 1).min(ops.len()).min(ring.len() - at);
                ring[at..at + n].copy_from_slice(&ops[..n]);
                ops = &ops[n..];
                damaged |= n > 0;
            }
            // Flip one bit of the ring.
            5 => {
                let at = take(&mut ops, 2) % ring.len();
                ring[at] ^= 1 << (op >> 5);
                damaged = true;
            }
            // Shorten a ring file (recovery extends it with zeros).
            6 => {
                let f = take(&mut ops, 1) % lengths.len();
                let len = take(&mut ops, 2) % (file_bytes + 1);
                lengths[f] = lengths[f].min(len);
                damaged = true;
            }
            // Overwrite a byte of the control file.
            _ => {
                let at = take(&mut ops, 1) % control.len();
                control[at] = take(&mut ops, 1) as u8;
                damaged = true;
            }
        }
    }
    // What the ring holds once a short file is extended again.
    for (f, &len) in lengths.iter().enumerate() {
        ring[f * file_bytes + len..(f + 1) * file_bytes].fill(0);
    }

    let tmp = scratch();
    std::fs::write(tmp.path().join("control"), &control).expect("write control");
    for f in 0..t.files {
        let start = f as usize * file_bytes;
        let len = lengths[f as usize];
        std::fs::write(ring_file(tmp.path(), f), &ring[start..start + len]).expect("write ring");
    }
    let cfg = config(tmp.path(), t.files, t.pages);
    let Ok((log, rec)) = RecoveryLog::open_with(&cfg, Box::new(|_| {}), policy) else {
        return;
    };
    let capacity = log.capacity();
    assert_eq!(capacity, ring.len() as u64);
    let mut pos = rec.checkpoint_lsn;
    for r in &rec.records {
        assert!(
            r.lsn >= pos,
            "record at {} overlaps the one before ({pos})",
            r.lsn
        );
        verify(&ring, r);
        pos = r.end_lsn();
    }
    assert!(
        rec.tail_lsn >= pos,
        "tail {} inside a record ending at {pos}",
        rec.tail_lsn
    );
    assert!(rec.tail_lsn <= rec.checkpoint_lsn + capacity);
    if !damaged {
        assert_eq!(rec.records, t.records, "an undamaged log recovers whole");
        assert!(rec.discarded.is_empty());
    }

    // The recovered log is usable: an append, then a recovery that finds the same records and
    // that one after them.
    let appended = log.append(1, b"after recovery").is_ok();
    if let Err(e) = log.close() {
        panic!("closing a recovered log: {e}");
    }
    let (log, again) = match RecoveryLog::open_with(&cfg, Box::new(|_| {}), policy) {
        Ok(x) => x,
        Err(e) => panic!("a recovered log does not recover again: {e}; first: {rec:?}"),
    };
    log.close().expect("close");
    let n = rec.records.len();
    assert_eq!(
        again.records.len(),
        n + usize::from(appended),
        "{rec:?} then {again:?}"
    );
    assert_eq!(again.records[..n], rec.records[..]);
    if appended {
        assert_eq!(&again.records[n].payload[..], b"after recovery");
        assert_eq!(again.records[n].lsn, rec.tail_lsn);
    }
    assert!(again.discarded.is_empty(), "{again:?}");
});

/// The record's bytes in the (damaged) ring, read independently of the log crate: its header
/// must carry its LSN, kind and length, and the CRC must cover exactly what recovery returned.
fn verify(ring: &[u8], r: &LogRecord) {
    let cap = ring.len() as u64;
    let at = |i: u64| ring[((r.lsn + i) % cap) as usize];
    let bytes: Vec<u8> = (0..(HEADER_LEN + r.payload.len()) as u64).map(at).collect();
    let len = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    let tag = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!(len, r.payload.len(), "record at {}", r.lsn);
    assert_eq!(tag, r.lsn, "record at {}", r.lsn);
    assert_eq!(bytes[16], r.kind, "record at {}", r.lsn);
    assert_eq!(&bytes[HEADER_LEN..], &r.payload[..], "record at {}", r.lsn);
    assert_eq!(
        crc32c::crc32c(&bytes[8..]),
        crc,
        "record at {} fails its CRC",
        r.lsn
    );
}
