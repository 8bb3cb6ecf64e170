//! Checkpoint manifests: round trip, incomplete temporary files, fallback to
//! an older manifest when the newest is damaged, and pruning.

use std::path::Path;

use ferrymq_log::checkpoint::remove_older_than;
use ferrymq_log::{CheckpointReader, CheckpointWriter, Lsn};

fn write(dir: &Path, lsn: Lsn, chunks: &[&[u8]]) -> std::path::PathBuf {
    let mut w = CheckpointWriter::create(dir, lsn).unwrap();
    for c in chunks {
        w.write_chunk(c).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn written_manifest_is_read_back_as_latest() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(CheckpointReader::latest(tmp.path()).unwrap().is_none());
    write(tmp.path(), 100, &[b"one", b"", b"three"]);
    let path = write(tmp.path(), 2000, &[b"alpha", &[9u8; 70_000]]);
    assert_eq!(
        path.file_name().unwrap(),
        "checkpoint-00000000000000002000.ckpt"
    );
    let (lsn, chunks) = CheckpointReader::latest(tmp.path()).unwrap().unwrap();
    assert_eq!(lsn, 2000);
    assert_eq!(chunks.len(), 2);
    assert_eq!(&chunks[0][..], b"alpha");
    assert_eq!(&chunks[1][..], &[9u8; 70_000][..]);
}

#[test]
fn incomplete_tmp_manifest_is_ignored_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), 10, &[b"good"]);
    let mut w = CheckpointWriter::create(tmp.path(), 20).unwrap();
    w.write_chunk(b"never finished").unwrap();
    std::mem::forget(w); // simulate a crash: no finish, no cleanup
    let tmp_file = tmp.path().join("checkpoint-00000000000000000020.ckpt.tmp");
    assert!(tmp_file.exists());
    let (lsn, chunks) = CheckpointReader::latest(tmp.path()).unwrap().unwrap();
    assert_eq!(lsn, 10);
    assert_eq!(&chunks[0][..], b"good");
    assert!(!tmp_file.exists());
}

#[test]
fn damaged_newest_manifest_falls_back_to_the_previous_one() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), 10, &[b"older"]);
    let newest = write(tmp.path(), 20, &[b"newer", b"state"]);
    let mut raw = std::fs::read(&newest).unwrap();
    raw[10] ^= 0xff; // inside the first chunk's bytes
    std::fs::write(&newest, &raw).unwrap();
    let (lsn, chunks) = CheckpointReader::latest(tmp.path()).unwrap().unwrap();
    assert_eq!(lsn, 10);
    assert_eq!(&chunks[0][..], b"older");
    // A manifest cut short (no footer) is also skipped.
    let newest = write(tmp.path(), 30, &[b"x"]);
    let raw = std::fs::read(&newest).unwrap();
    std::fs::write(&newest, &raw[..raw.len() - 5]).unwrap();
    assert_eq!(CheckpointReader::latest(tmp.path()).unwrap().unwrap().0, 10);
}

#[test]
fn remove_older_than_keeps_the_newest_two() {
    let tmp = tempfile::tempdir().unwrap();
    for lsn in [1, 2, 3, 4, 5] {
        write(tmp.path(), lsn, &[b"s"]);
    }
    assert_eq!(remove_older_than(tmp.path(), 3).unwrap(), 2);
    assert_eq!(remove_older_than(tmp.path(), 100).unwrap(), 1);
    let mut left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            "checkpoint-00000000000000000004.ckpt",
            "checkpoint-00000000000000000005.ckpt"
        ]
    );
}
