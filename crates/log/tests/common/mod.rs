//! Helpers shared by the integration tests: tiny log configurations, opening
//! without a callback, and poking bytes at a logical LSN inside the ring
//! files (to simulate torn writes and corruption).
#![allow(dead_code)]

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ferrymq_log::{Durability, LogConfig, Lsn, Recovered, RecoveryLog};

pub const HEADER_LEN: u64 = 17;

/// 2 files x 2 pages = 16 KiB ring: small enough to lap quickly.
pub fn tiny(dir: &Path) -> LogConfig {
    cfg(dir, 2, 2)
}

pub fn cfg(dir: &Path, primary_files: u32, file_pages: u32) -> LogConfig {
    LogConfig {
        dir: dir.join("log"),
        primary_files,
        file_pages,
        durability: Durability::Fsync,
        direct_writes: true,
    }
}

pub fn create_open(cfg: &LogConfig) -> (RecoveryLog, Recovered) {
    RecoveryLog::create(cfg).unwrap();
    open(cfg)
}

pub fn open(cfg: &LogConfig) -> (RecoveryLog, Recovered) {
    RecoveryLog::open(cfg, Box::new(|_| {})).unwrap()
}

/// Applies `f` to each byte of `[lsn, lsn + len)` in the ring files.
pub fn patch(cfg: &LogConfig, lsn: Lsn, len: u64, mut f: impl FnMut(u64, &mut u8)) {
    let file_bytes = u64::from(cfg.file_pages) * 4096;
    let cap = file_bytes * u64::from(cfg.primary_files);
    for i in 0..len {
        let phys = (lsn + i) % cap;
        let path = cfg.dir.join(format!("S{:07}.LOG", phys / file_bytes));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, phys % file_bytes).unwrap();
        f(i, &mut b[0]);
        file.write_all_at(&b, phys % file_bytes).unwrap();
    }
}

/// Deterministic, non-zero-ending payload for record `i` of `len` bytes.
pub fn payload(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| ((i as usize * 31 + j * 7) % 251 + 1) as u8)
        .collect()
}
