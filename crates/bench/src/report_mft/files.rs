//! The files of `report mft`: random source files of one size in ten group directories (a
//! "multiple" row gives each transfer one group), their SHA-256 recorded as they are written, the
//! check of a destination against them, and the `cp`+`sync` baseline of the same files.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::MULTIPLE_TRANSFERS;

/// Bytes written or read per call.
const BUF_BYTES: usize = 1 << 20;

/// The source files of one file size.
pub(crate) struct SourceSet {
    pub dir: PathBuf,
    /// Each file's path relative to `dir` (`gK/fNNNNN.bin`) and SHA-256.
    pub files: Vec<(String, [u8; 32])>,
    pub file_bytes: u64,
}

impl SourceSet {
    pub fn total_bytes(&self) -> u64 {
        self.file_bytes * self.files.len() as u64
    }

    /// The group directories in use (fewer than ten when there are fewer files).
    pub fn groups(&self) -> Vec<PathBuf> {
        (0..self.files.len().min(MULTIPLE_TRANSFERS))
            .map(|g| self.dir.join(group_name(g)))
            .collect()
    }
}

fn group_name(g: usize) -> String {
    format!("g{g}")
}

/// A fast pseudo-random byte stream (splitmix64): incompressible data, cheap to make.
struct Random(u64);

impl Random {
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            c.copy_from_slice(&z.to_le_bytes()[..c.len()]);
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Writes `count` random files of `file_bytes` each under `dir` (in group directories g0..g9,
/// file `i` in group `i % 10`), then syncs the file system so that no row pays for writing them.
pub(crate) fn write_sources(
    dir: &Path,
    count: u64,
    file_bytes: u64,
    seed: u64,
) -> Result<SourceSet, String> {
    let mut rnd = Random(seed);
    let mut buf = vec![0u8; BUF_BYTES];
    let mut files = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let rel = format!("{}/f{i:05}.bin", group_name(i % MULTIPLE_TRANSFERS));
        let path = dir.join(&rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(io(p))?;
        }
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).map_err(io(&path))?);
        let mut h = Sha256::new();
        let mut left = file_bytes;
        while left > 0 {
            let n = left.min(BUF_BYTES as u64) as usize;
            rnd.fill(&mut buf[..n]);
            h.update(&buf[..n]);
            f.write_all(&buf[..n]).map_err(io(&path))?;
            left -= n as u64;
        }
        f.flush().map_err(io(&path))?;
        files.push((rel, h.finalize().into()));
    }
    sync()?;
    Ok(SourceSet {
        dir: dir.to_path_buf(),
        files,
        file_bytes,
    })
}

pub(crate) fn sha256_of(path: &Path) -> Result<[u8; 32], String> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; BUF_BYTES];
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            return Ok(h.finalize().into());
        }
        h.update(&buf[..n]);
    }
}

/// Checks that `dest` holds exactly the source files, flat (by file name), each with its
/// source's SHA-256 and nothing else (no `.part` left).
pub(crate) fn verify_flat(src: &SourceSet, dest: &Path) -> Result<(), String> {
    let mut names: Vec<String> = std::fs::read_dir(dest)
        .map_err(io(dest))?
        .map(|e| {
            e.map(|e| e.file_name().to_string_lossy().into_owned())
                .map_err(io(dest))
        })
        .collect::<Result<_, _>>()?;
    names.sort();
    let mut want: Vec<String> = src
        .files
        .iter()
        .map(|(rel, _)| rel.rsplit('/').next().unwrap_or(rel).to_string())
        .collect();
    want.sort();
    if names != want {
        let extra: Vec<&String> = names.iter().filter(|n| !want.contains(n)).take(5).collect();
        let missing: Vec<&String> = want.iter().filter(|n| !names.contains(n)).take(5).collect();
        return Err(format!(
            "{}: {} file(s) where {} were sent; missing {missing:?}, unexpected {extra:?}",
            dest.display(),
            names.len(),
            want.len()
        ));
    }
    for (rel, sum) in &src.files {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let p = dest.join(name);
        if std::fs::metadata(&p).map_err(io(&p))?.len() != src.file_bytes {
            return Err(format!(
                "{}: WRONG FILE: not {} bytes long",
                p.display(),
                src.file_bytes
            ));
        }
        if &sha256_of(&p)? != sum {
            return Err(format!(
                "{}: WRONG FILE: its SHA-256 differs from its source's ({})",
                p.display(),
                src.dir.join(rel).display()
            ));
        }
    }
    Ok(())
}

/// `sync`: every dirty page of every file system on disk.
pub(crate) fn sync() -> Result<(), String> {
    let st = Command::new("sync")
        .status()
        .map_err(|e| format!("sync: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("sync failed ({st})"))
    }
}

/// The baseline: `cp -r` of the source tree to `dest` followed by `sync`, timed together, then
/// the copy removed (and synced away, outside the time). Returns the seconds.
pub(crate) fn cp_sync(src: &SourceSet, dest: &Path) -> Result<f64, String> {
    let _ = std::fs::remove_dir_all(dest);
    let t = Instant::now();
    let st = Command::new("cp")
        .arg("-r")
        .arg(&src.dir)
        .arg(dest)
        .status()
        .map_err(|e| format!("cp: {e}"))?;
    if !st.success() {
        return Err(format!(
            "cp -r {} {} failed ({st})",
            src.dir.display(),
            dest.display()
        ));
    }
    sync()?;
    let s = t.elapsed().as_secs_f64();
    // The copy must be whole too: one file per group checked (cp is not what is measured).
    for (rel, sum) in src.files.iter().take(MULTIPLE_TRANSFERS) {
        if &sha256_of(&dest.join(rel))? != sum {
            return Err(format!(
                "cp: {} differs from its source",
                dest.join(rel).display()
            ));
        }
    }
    std::fs::remove_dir_all(dest).map_err(io(dest))?;
    sync()?;
    Ok(s)
}
