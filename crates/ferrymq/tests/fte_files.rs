//! What a transfer promises about the files at both ends, against the real binary: a file is
//! never sent onto itself, a source is deleted only while its path names the file that was
//! sent, a source written to while it is sent fails rather than arrive torn, and one transfer at
//! a time writes a destination (exists policy error holding to the rename). Transfers are held
//! still mid-file by stopping their receiving agent.

mod fte_support;
mod support;

use std::path::Path;

use fte_support::{agents, data, dir, text, transfer};
use support::{Home, Qm};

#[test]
fn a_file_is_never_transferred_onto_itself_and_delete_removes_only_the_file_sent() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM13", &[]);
    let _a = agents(&home, "FTQM13", &["SRC13", "DST13"], 4096);
    let work = tempfile::tempdir().unwrap();
    let files = dir(work.path(), "files");
    let only = files.join("only.dat");
    std::fs::write(&only, data(10_000, 3)).unwrap();
    let base = |src: &Path, dst: &Path| {
        vec![
            "-sa".to_string(),
            "SRC13".into(),
            "-da".into(),
            "DST13".into(),
            "-de".into(),
            "overwrite".into(),
            "-sd".into(),
            "delete".into(),
            "-df".into(),
            dst.to_str().unwrap().into(),
            src.to_str().unwrap().into(),
        ]
    };
    let run = |args: Vec<String>| {
        let v: Vec<&str> = args.iter().map(String::as_str).collect();
        transfer(&home, &v)
    };
    // Onto itself, by the same path and by another spelling of it, and onto its own `.part`:
    // refused before anything is written, the only copy kept whole and nothing left behind.
    let spelled = files.join(".").join("only.dat");
    let part_of = files.join("copy");
    for dst in [only.as_path(), spelled.as_path()] {
        let out = run(base(&only, dst));
        assert!(
            !out.status.success() && text(&out).contains("is the source file itself"),
            "{}",
            text(&out)
        );
        assert_eq!(std::fs::read(&only).unwrap(), data(10_000, 3));
    }
    std::fs::rename(&only, files.join("copy.part")).unwrap();
    let out = run(base(&files.join("copy.part"), &part_of));
    assert!(
        !out.status.success() && text(&out).contains("is the source file itself"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read(files.join("copy.part")).unwrap(),
        data(10_000, 3)
    );
    let mut left: Vec<_> = std::fs::read_dir(&files)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["copy.part"], "nothing written beside the source");

    // The source path names another file by the time the transfer ends (replaced while the
    // receiving agent was stopped mid-file): the file sent arrives, the new one is not deleted.
    let src = files.join("big.dat");
    std::fs::write(&src, data(4_000_000, 5)).unwrap();
    let dst = dir(work.path(), "in").join("big.dat");
    let mut args = base(&src, &dst);
    args.splice(0..0, ["-w".to_string(), "60".into()]);
    let child =
        fte_support::spawn_transfer(&home, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let stopped = fte_support::stop_receiver_mid_file(&home, "DST13", &dst);
    std::fs::write(files.join("newer.tmp"), b"written later").unwrap();
    std::fs::rename(files.join("newer.tmp"), &src).unwrap();
    stopped.resume();
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success() && text(&out).contains("arrived, but not deleted"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&dst).unwrap(), data(4_000_000, 5));
    assert_eq!(std::fs::read(&src).unwrap(), b"written later");
}

#[test]
fn a_source_written_to_while_it_is_sent_fails_instead_of_arriving_torn() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM15", &[]);
    let _a = agents(&home, "FTQM15", &["SRC15", "DST15"], 4096);
    let work = tempfile::tempdir().unwrap();
    let src = dir(work.path(), "out").join("log.dat");
    std::fs::write(&src, data(4_000_000, 4)).unwrap();
    let dst = dir(work.path(), "in").join("log.dat");
    let part = dst.with_extension("dat.part");
    let child = fte_support::spawn_transfer(
        &home,
        &[
            "-w",
            "60",
            "-sa",
            "SRC15",
            "-da",
            "DST15",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    let stopped = fte_support::stop_receiver_mid_file(&home, "DST15", &dst);
    // Rewritten in place near its start (the part most likely sent already) and near its end.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&src).unwrap();
        f.write_all_at(b"REWRITTEN", 10).unwrap();
        f.write_all_at(b"REWRITTEN", 3_999_000).unwrap();
    }
    stopped.resume();
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success() && text(&out).contains("written to while it was being sent"),
        "{}",
        text(&out)
    );
    assert!(!dst.exists(), "no torn destination");
    let t0 = std::time::Instant::now();
    while part.exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "the .part stayed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn one_transfer_at_a_time_writes_a_destination_and_error_policy_never_replaces_a_file() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM14", &[]);
    let _a = agents(&home, "FTQM14", &["SRC14", "DST14", "DST14B"], 4096);
    let work = tempfile::tempdir().unwrap();
    let src = dir(work.path(), "out");
    std::fs::write(src.join("a.dat"), data(4_000_000, 1)).unwrap();
    std::fs::write(src.join("b.dat"), data(300_000, 2)).unwrap();
    let inbox = dir(work.path(), "in");
    let dst = inbox.join("x.dat");
    let part = inbox.join("x.dat.part");
    let args = |file: &str, agent: &str, exist: &str| -> Vec<String> {
        [
            "-w", "60", "-sa", "SRC14", "-da", agent, "-de", exist, "-df",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            dst.to_str().unwrap().to_string(),
            src.join(file).to_str().unwrap().to_string(),
        ])
        .collect()
    };
    let spawn = |v: Vec<String>| {
        let a: Vec<&str> = v.iter().map(String::as_str).collect();
        fte_support::spawn_transfer(&home, &a)
    };
    // A is under way (its receiver stopped mid-file, holding the `.part`).
    let a = spawn(args("a.dat", "DST14", "error"));
    let stopped = fte_support::stop_receiver_mid_file(&home, "DST14", &dst);
    // B, to the same file through another agent process, is refused while A holds it ...
    let b = spawn(args("b.dat", "DST14B", "overwrite"))
        .wait_with_output()
        .unwrap();
    // ... and another program writes the destination before A ends.
    std::fs::write(&dst, b"written by someone else").unwrap();
    stopped.resume();
    assert!(
        !b.status.success() && text(&b).contains("is being written by another transfer"),
        "{}",
        text(&b)
    );
    // A's policy is error: the file there now stays, A fails and leaves nothing behind.
    let a = a.wait_with_output().unwrap();
    assert!(
        !a.status.success() && text(&a).contains("exists now"),
        "{}",
        text(&a)
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"written by someone else");
    assert!(!part.exists(), "A's .part is gone");
    // Once nobody writes it, the destination takes transfers again, one after the other.
    for (file, seed, len) in [("b.dat", 2, 300_000), ("a.dat", 1, 4_000_000)] {
        let out = spawn(args(file, "DST14B", "overwrite"))
            .wait_with_output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(std::fs::read(&dst).unwrap(), data(len, seed));
    }
    assert!(!part.exists());
}
