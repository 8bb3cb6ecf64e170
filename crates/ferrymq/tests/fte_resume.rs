//! Managed file transfers that outlive faults: the receiving agent, the sending agent, the
//! queue manager, or the destination queue manager of two joined by channels, is killed
//! (SIGKILL) in the middle of a file, comes back, and the transfer resumes from the receiver's
//! last checkpoint by itself, arrives whole with the right checksum, sends again at most one
//! checkpoint's worth of what had been received (and the window in flight), and leaves no
//! `.part`; a source changed during the outage fails the transfer and leaves nothing behind.

mod fte_support;
mod support;

use std::path::{Path, PathBuf};

use fte_support::{
    agents_checkpointing, data, dir, kill_agent, part_of, resumes_and_resent, spawn_transfer,
    wait_until,
};
use support::{mqsc, Home, Qm};

const CHUNK: usize = 64 * 1024;
/// Many chunks, and not a multiple of the chunk size.
const SIZE: usize = 24 * 1024 * 1024 + 12_345;
/// A checkpoint every 3 frames: acknowledged data beyond the checkpoint is sent again.
const INTERVAL: usize = 3;
/// One checkpoint's worth: agentFrameSize (2) × agentCheckpointInterval chunks.
const CHECKPOINT_BYTES: u64 = (2 * INTERVAL * CHUNK) as u64;
/// The window in flight: agentWindowSize (2) × agentFrameSize (2) chunks.
const WINDOW_BYTES: u64 = (2 * 2 * CHUNK) as u64;
/// Sent again at most per resume: what the receiver had beyond its last checkpoint, and what
/// was in flight and lost.
const RESENT_MAX_BYTES: u64 = CHECKPOINT_BYTES + WINDOW_BYTES;

struct Files {
    _work: tempfile::TempDir,
    src: PathBuf,
    dst: PathBuf,
    body: Vec<u8>,
}

fn files() -> Files {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("big.bin");
    let body = data(SIZE, 3);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("big.bin");
    Files {
        _work: work,
        src,
        dst,
        body,
    }
}

fn args<'a>(qm: &'a str, f: &'a Files, wait: bool) -> Vec<&'a str> {
    let mut v = Vec::new();
    if wait {
        v.extend_from_slice(&["-w", "150"]);
    }
    v.extend_from_slice(&[
        "-sa",
        "SRC",
        "-sm",
        qm,
        "-da",
        "DST",
        "-dm",
        qm,
        "-df",
        f.dst.to_str().unwrap(),
        f.src.to_str().unwrap(),
    ]);
    v
}

/// Waits until a quarter of the file is at the destination (the transfer is under way).
fn wait_mid(dst: &Path) {
    let part = part_of(dst);
    wait_until("a quarter of the file at the destination", 60, || {
        std::fs::metadata(&part).is_ok_and(|m| m.len() >= SIZE as u64 / 4)
    });
    assert!(!dst.exists(), "the transfer ended before the fault");
}

/// The file arrived whole, nothing is left beside it, and the transfer resumed and re-sent at
/// most one checkpoint's worth per resume.
fn check_arrived(f: &Files, result: &str) {
    assert!(result.contains("transfer complete"), "{result}");
    assert!(
        std::fs::read(&f.dst).unwrap() == f.body,
        "the destination differs from the source"
    );
    assert!(!part_of(&f.dst).exists());
    let names: Vec<_> = std::fs::read_dir(f.dst.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let (resumes, resent) = resumes_and_resent(result);
    eprintln!("result: {result}");
    assert!(resumes >= 1, "{result}");
    assert!(resent <= resumes * RESENT_MAX_BYTES, "{result}");
}

fn output(child: std::process::Child) -> String {
    let o = child.wait_with_output().unwrap();
    let t = fte_support::text(&o);
    assert!(o.status.success(), "{t}");
    t
}

#[test]
fn the_receiving_agent_killed_mid_file_resumes_from_its_checkpoint() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FRQ1", &[]);
    let _a = agents_checkpointing(&home, "FRQ1", &["SRC", "DST"], CHUNK, INTERVAL);
    let f = files();
    let child = spawn_transfer(&home, &args("FRQ1", &f, true));
    wait_mid(&f.dst);
    kill_agent(&home, "DST");
    home.ok(&["fteStartAgent", "DST"]);
    check_arrived(&f, &output(child));
}

#[test]
fn the_sending_agent_killed_mid_file_resumes_the_transfer_when_it_starts_again() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FRQ2", &[]);
    let _a = agents_checkpointing(&home, "FRQ2", &["SRC", "DST"], CHUNK, INTERVAL);
    let f = files();
    let child = spawn_transfer(&home, &args("FRQ2", &f, true));
    wait_mid(&f.dst);
    kill_agent(&home, "SRC");
    home.ok(&["fteStartAgent", "SRC"]);
    check_arrived(&f, &output(child));
}

#[test]
fn a_transfer_that_names_sha256_resumes_with_sha256_after_both_agents_are_killed() {
    // BLAKE3 is the default; a transfer that asked for SHA-256 keeps it across a resume from
    // the receiver's checkpoint (both sides hash the resumed file again from its first byte).
    let home = Home::new();
    let _qm = Qm::start(&home, "FRQ7", &[]);
    let _a = agents_checkpointing(&home, "FRQ7", &["SRC", "DST"], CHUNK, INTERVAL);
    let f = files();
    let mut a = vec!["-cs", "SHA-256"];
    a.extend(args("FRQ7", &f, true));
    let child = spawn_transfer(&home, &a);
    wait_mid(&f.dst);
    kill_agent(&home, "DST");
    kill_agent(&home, "SRC");
    home.ok(&["fteStartAgent", "DST"]);
    home.ok(&["fteStartAgent", "SRC"]);
    check_arrived(&f, &output(child));
}

#[test]
fn the_queue_manager_killed_mid_file_and_restarted_the_agents_reconnect_and_resume() {
    let home = Home::new();
    let qm = Qm::start(&home, "FRQ3", &[]);
    let _a = agents_checkpointing(&home, "FRQ3", &["SRC", "DST"], CHUNK, INTERVAL);
    let f = files();
    let out = home.ok(&[&["fteCreateTransfer"][..], &args("FRQ3", &f, false)]
        .concat()
        .to_vec());
    assert!(!out.is_empty());
    wait_mid(&f.dst);
    qm.kill9();
    qm.restart();
    let result = fte_support::wait_result(
        &home,
        "SRC",
        "the transfer's result in the sending agent's log",
        150,
    );
    check_arrived(&f, &result);
}

#[test]
fn a_source_changed_while_the_receiver_was_down_fails_the_transfer_and_leaves_nothing() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FRQ4", &[]);
    let _a = agents_checkpointing(&home, "FRQ4", &["SRC", "DST"], CHUNK, INTERVAL);
    let f = files();
    let child = spawn_transfer(&home, &args("FRQ4", &f, true));
    wait_mid(&f.dst);
    kill_agent(&home, "DST");
    {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&f.src)
            .unwrap();
        w.write_all(b"more").unwrap();
    }
    home.ok(&["fteStartAgent", "DST"]);
    let o = child.wait_with_output().unwrap();
    let t = fte_support::text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("source file changed"), "{t}");
    let part = part_of(&f.dst);
    wait_until("the .part removed", 30, || !part.exists());
    assert!(!f.dst.exists());
}

#[test]
fn the_destination_queue_manager_killed_across_channels_the_transfer_resumes_when_it_is_back() {
    let home = Home::new();
    let qm1 = Qm::start(&home, "FRB1", &[]);
    let qm2 = Qm::start(&home, "FRB2", &[]);
    for (from, to, port) in [("FRB1", "FRB2", qm2.port), ("FRB2", "FRB1", qm1.port)] {
        mqsc(
            &home,
            from,
            &format!(
                "DEFINE QLOCAL({to}) USAGE(XMITQ)\n\
                 DEFINE CHANNEL({to}.TO.{from}) CHLTYPE(RCVR) TRPTYPE(TCP)\n\
                 DEFINE CHANNEL({from}.TO.{to}) CHLTYPE(SDR) TRPTYPE(TCP) \
                 CONNAME('127.0.0.1({port})') XMITQ({to}) SHORTTMR(1)\n\
                 START CHANNEL({from}.TO.{to})\n"
            ),
        );
    }
    let _s = agents_checkpointing(&home, "FRB1", &["SRC"], CHUNK, INTERVAL);
    let _d = agents_checkpointing(&home, "FRB2", &["DST"], CHUNK, INTERVAL);
    let f = files();
    let child = spawn_transfer(
        &home,
        &[
            "-w",
            "150",
            "-sa",
            "SRC",
            "-sm",
            "FRB1",
            "-da",
            "DST",
            "-dm",
            "FRB2",
            "-df",
            f.dst.to_str().unwrap(),
            f.src.to_str().unwrap(),
        ],
    );
    wait_mid(&f.dst);
    qm2.kill9();
    // Its channels start again with it, the receiving agent reconnects by itself.
    qm2.restart();
    check_arrived(&f, &output(child));
}

#[test]
fn the_sending_agent_killed_between_files_of_a_directory_sends_only_the_files_not_finished() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FRQ5", &[]);
    let _a = agents_checkpointing(&home, "FRQ5", &["SRC", "DST"], CHUNK, INTERVAL);
    let work = tempfile::tempdir().unwrap();
    let tree = dir(work.path(), "tree");
    const FILES: usize = 8;
    let bodies: Vec<Vec<u8>> = (0..FILES).map(|i| data(3 << 20, i as u8)).collect();
    for (i, b) in bodies.iter().enumerate() {
        std::fs::write(tree.join(format!("f{i}.bin")), b).unwrap();
    }
    let inbox = dir(work.path(), "in");
    let child = spawn_transfer(
        &home,
        &[
            "-w",
            "150",
            "-sa",
            "SRC",
            "-da",
            "DST",
            "-r",
            "-dd",
            inbox.to_str().unwrap(),
            tree.to_str().unwrap(),
        ],
    );
    let done = |i: usize| inbox.join(format!("tree/f{i}.bin")).exists();
    wait_until("two files arrived", 60, || done(0) && done(1));
    assert!(!done(FILES - 1), "the transfer ended before the fault");
    kill_agent(&home, "SRC");
    home.ok(&["fteStartAgent", "SRC"]);
    // Files already there are not sent again: with the default exists policy (error) a second
    // copy would fail the transfer.
    let result = output(child);
    assert!(result.contains("transfer complete"), "{result}");
    for (i, b) in bodies.iter().enumerate() {
        assert!(
            std::fs::read(inbox.join(format!("tree/f{i}.bin"))).unwrap() == *b,
            "f{i} differs"
        );
    }
    let names = std::fs::read_dir(inbox.join("tree")).unwrap().count();
    assert_eq!(names, FILES, "{result}");
    let (resumes, resent) = resumes_and_resent(&result);
    assert!(resumes >= 1, "{result}");
    assert!(resent <= resumes * RESENT_MAX_BYTES, "{result}");
}

#[test]
fn a_receiver_writing_with_direct_io_resumes_from_its_checkpoint_too() {
    // `directWrites=true` writes a chunk's whole blocks with O_DIRECT and its tail through the
    // page cache (page-cache writes are the default). The files are on the checkout's disk, not
    // a tmpfs /tmp that refuses direct I/O (where the agent falls back to the page cache).
    let home = Home::new();
    let _qm = Qm::start(&home, "FRQ7", &[]);
    let _a = agents_checkpointing(&home, "FRQ7", &["SRC", "DST"], CHUNK, INTERVAL);
    home.ok(&["fteStopAgent", "DST"]);
    let props = home.path().join("mqft/agents/DST/agent.properties");
    let mut p = std::fs::read_to_string(&props).unwrap();
    p.push_str("directWrites=true\n");
    std::fs::write(&props, p).unwrap();
    home.ok(&["fteStartAgent", "DST"]);
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = work.path().join("big.bin");
    let body = data(SIZE, 7);
    std::fs::write(&src, &body).unwrap();
    let f = Files {
        dst: dir(work.path(), "in").join("big.bin"),
        _work: work,
        src,
        body,
    };
    let child = spawn_transfer(&home, &args("FRQ7", &f, true));
    wait_mid(&f.dst);
    kill_agent(&home, "DST");
    home.ok(&["fteStartAgent", "DST"]);
    check_arrived(&f, &output(child));
}
