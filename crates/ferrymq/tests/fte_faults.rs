//! Fault injection: one 200 MB file between agents on two queue managers joined by a
//! sender/receiver channel (through a relay, limited to 100 Mbit/s, so that the link itself can
//! be cut and the faults fall inside the transfer), while the sending agent, the receiving
//! agent, each queue manager (SIGKILL, then started again) and the channel (the relay killed and
//! started again) are faulted at random moments — every kind at least twice. The transfer
//! completes by itself, the destination is byte for byte the source, and nothing but the file
//! is left in the destination directory.
//!
//! Bytes sent again, measured at each resume by the sending agent (from the resume offset up
//! to the furthest the receiver had acknowledged or held, or the sender had put and lost on the
//! way; its log gives each resume, the transfer's result their sum), are bounded by what the
//! design can lose: the chunks in flight, at most agentWindowSize × agentFrameSize (a queue
//! manager or the link going down loses them: chunks are non-persistent), plus, when the
//! receiving agent dies, what it had written since its last checkpoint, less than
//! agentFrameSize × agentCheckpointInterval chunks. "One checkpoint's worth per fault" alone
//! cannot hold whenever the window is not empty — with MQ's defaults (window 10 × frame 5
//! chunks, a checkpoint every frame) the window is ten checkpoints' worth — so each resume is
//! held to window + one checkpoint, and the whole transfer to that per fault.
//!
//! The faults come from a seeded random generator; the seed is printed, and
//! `FTE_FAULTS_SEED=N` replays a run.

mod fte_support;
mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use fte_support::{agents_checkpointing, kill_agent, part_of, resumes_and_resent, wait_until};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use support::{mqsc, Home, Qm, Relay};

const CHUNK: usize = 256 * 1024;
/// 200 MB, not a multiple of the chunk size.
const SIZE: u64 = 200 * 1000 * 1000 + 4321;
/// A checkpoint every 4 frames.
const INTERVAL: usize = 4;
/// One checkpoint's worth: agentFrameSize (2) × agentCheckpointInterval chunks (2 MiB).
const CHECKPOINT_BYTES: u64 = (2 * INTERVAL * CHUNK) as u64;
/// The window in flight: agentWindowSize 2 × agentFrameSize 2 chunks (1 MiB), what a queue
/// manager or the link going down loses.
const WINDOW_BYTES: u64 = (2 * 2 * CHUNK) as u64;
/// The most one resume may send again: the window in flight and what a receiving agent killed
/// had written since its last checkpoint.
const RESUME_BYTES_MAX: u64 = WINDOW_BYTES + CHECKPOINT_BYTES;
/// The link between the queue managers, in megabits per second: slow enough that ten faults,
/// each some time to inject and recover from, fall inside one transfer.
const LINK_MBPS: u32 = 100;
/// Each kind of fault this many times.
const EACH: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    SendingAgent,
    ReceivingAgent,
    SourceQm,
    DestinationQm,
    Channel,
}

/// The test data's byte at `i` (`seed` varies it).
fn byte_at(i: u64, seed: u8) -> u8 {
    (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed ^ (i >> 32) as u8
}

fn write_source(path: &Path, seed: u8) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < SIZE {
        let n = ((SIZE - at) as usize).min(buf.len());
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = byte_at(at + k as u64, seed);
        }
        w.write_all(&buf[..n]).unwrap();
        at += n as u64;
    }
    w.flush().unwrap();
}

/// Compares the destination with the source's generator, streaming.
fn same_as_source(path: &Path, seed: u8) -> bool {
    let mut f = std::fs::File::open(path).unwrap();
    if f.metadata().unwrap().len() != SIZE {
        return false;
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return at == SIZE;
        }
        if buf[..n]
            .iter()
            .enumerate()
            .any(|(k, b)| *b != byte_at(at + k as u64, seed))
        {
            return false;
        }
        at += n as u64;
    }
}

fn part_len(dst: &Path) -> u64 {
    std::fs::metadata(part_of(dst)).map_or(0, |m| m.len())
}

#[test]
fn a_200_mb_transfer_survives_ten_random_faults_of_agents_queue_managers_and_the_channel() {
    let seed: u64 = std::env::var("FTE_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("fault seed: {seed} (FTE_FAULTS_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);

    let home = Home::new();
    let qm1 = Qm::start(&home, "FFA", &[]);
    let qm2 = Qm::start(&home, "FFB", &[]);
    // FFA's sender channel reaches FFB through a relay; FFB's answers go straight back.
    let relay_port = support::free_port();
    let mut relay: Option<Relay> = Some(support::relay_limited(
        relay_port,
        qm2.port,
        0,
        Some(LINK_MBPS),
    ));
    for (from, to, port) in [("FFA", "FFB", relay_port), ("FFB", "FFA", qm1.port)] {
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
    let _s = agents_checkpointing(&home, "FFA", &["SRC"], CHUNK, INTERVAL);
    let _d = agents_checkpointing(&home, "FFB", &["DST"], CHUNK, INTERVAL);

    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("big.bin");
    let data_seed = rng.gen::<u8>();
    write_source(&src, data_seed);
    let inbox = fte_support::dir(work.path(), "in");
    let dst = inbox.join("big.bin");

    // Submitted and left to run: the queue managers it went through are killed on the way.
    home.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC",
        "-sm",
        "FFA",
        "-da",
        "DST",
        "-dm",
        "FFB",
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);

    let mut faults: Vec<Fault> = [
        Fault::SendingAgent,
        Fault::ReceivingAgent,
        Fault::SourceQm,
        Fault::DestinationQm,
        Fault::Channel,
    ]
    .iter()
    .flat_map(|f| std::iter::repeat_n(*f, EACH))
    .collect();
    faults.shuffle(&mut rng);
    // Spread over the first half of the file: each after a random amount of new progress
    // (which also proves the transfer moved on after the fault before), then a random pause.
    let spread = SIZE / 2 / faults.len() as u64;
    let mut done = Vec::new();
    for (n, fault) in faults.iter().enumerate() {
        let from = part_len(&dst);
        let more = rng.gen_range(spread / 10..=spread);
        let pause = rng.gen_range(0..300);
        wait_until(
            &format!("progress before fault {n} ({fault:?}; seed {seed})"),
            60,
            || part_len(&dst) >= from + more || fte_support::result_line(&home, "SRC").is_some(),
        );
        std::thread::sleep(Duration::from_millis(pause));
        if let Some(r) = fte_support::result_line(&home, "SRC") {
            panic!(
                "the transfer ended after {done:?}, before fault {n} ({fault:?}; seed {seed}): {r}"
            );
        }
        eprintln!(
            "fault {n}: {fault:?} at {} bytes at the destination",
            part_len(&dst)
        );
        match fault {
            Fault::SendingAgent => {
                kill_agent(&home, "SRC");
                home.ok(&["fteStartAgent", "SRC"]);
            }
            Fault::ReceivingAgent => {
                kill_agent(&home, "DST");
                home.ok(&["fteStartAgent", "DST"]);
            }
            Fault::SourceQm => {
                qm1.kill9();
                qm1.restart();
            }
            Fault::DestinationQm => {
                qm2.kill9();
                qm2.restart();
            }
            Fault::Channel => {
                drop(relay.take());
                std::thread::sleep(Duration::from_millis(rng.gen_range(0..500)));
                relay = Some(support::relay_limited(
                    relay_port,
                    qm2.port,
                    0,
                    Some(LINK_MBPS),
                ));
            }
        }
        done.push(*fault);
    }

    let result = fte_support::wait_result(
        &home,
        "SRC",
        &format!("the transfer's result in the sending agent's log (seed {seed})"),
        150,
    );
    eprintln!("result: {result}");
    assert!(
        result.contains("transfer complete"),
        "seed {seed}: {result}"
    );
    assert!(
        same_as_source(&dst, data_seed),
        "seed {seed}: the destination differs from the source"
    );
    let names: Vec<PathBuf> = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(names, vec![dst.clone()], "seed {seed}: {result}");
    let (resumes, resent) = resumes_and_resent(&result);
    // Each start of the sending agent resumes the transfer (other faults may share a resume);
    // the count lasts across those starts.
    let restarts = faults.iter().filter(|f| **f == Fault::SendingAgent).count() as u64;
    assert!(resumes >= restarts, "seed {seed}: {result}");
    // Each resume, as the sending agent logged it (its log lasts across its restarts).
    let log = fte_support::agent_log(&home, "SRC");
    let each: Vec<u64> = log
        .lines()
        .filter_map(|l| l.split(": ").last()?.strip_suffix(" bytes sent again"))
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(each.iter().sum::<u64>(), resent, "seed {seed}: {log}");
    assert!(
        each.iter().all(|b| *b <= RESUME_BYTES_MAX),
        "seed {seed}: a resume sent again more than the window and a checkpoint's worth \
         ({RESUME_BYTES_MAX} bytes): {each:?}"
    );
    assert!(
        resent <= faults.len() as u64 * RESUME_BYTES_MAX,
        "seed {seed}: more than the window and a checkpoint's worth ({RESUME_BYTES_MAX} bytes) \
         re-sent per fault ({} faults): {result}",
        faults.len()
    );
    eprintln!(
        "seed {seed}: {} faults, {resumes} resumes, {resent} bytes sent again ({} per fault; \
         a checkpoint's worth is {CHECKPOINT_BYTES}, the window {WINDOW_BYTES}): {each:?}",
        faults.len(),
        resent / faults.len() as u64
    );
}
