//! The receiving side's writes, checkpoints and acknowledgements, off the thread that takes
//! chunks: the receiver hands each chunk and each frame (and, every checkpoint interval, the
//! file to sync and the offset to record) over, in order. A writer thread writes the chunks
//! in order, a hasher thread feeds them to their file's checksum (so one waits for the disk
//! while the other hashes), and everything else goes on to the checkpointer thread once the
//! chunks before it are written and hashed, so that syncs and commits do not hold up the
//! writes. The checkpointer takes whatever has queued up as one batch: it syncs
//! each file whose checkpoint it will record, replaces the checkpoints of every transfer in the
//! batch (and removes those of files that ended) in one unit of work, commits it, and only then
//! sends the frames' acknowledgements and hands ended files to the finishers. A transfer with
//! several checkpoints in one batch has only its last one synced and recorded (each replaces
//! the one before), and one whose file ended in the batch records none.
//!
//! So an acknowledgement never runs ahead of the checkpoint before it: the sender's window
//! (what it may have in flight beyond the acknowledged data) still bounds what a resume sends
//! again, and the disk and the log see one sync each per batch instead of one per frame.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::limits::{FTE_CHECKPOINT_BATCH_MAX, FTE_RECEIVING_TRANSFERS_MAX};
use ferrymq_types::options::{open, PutOptions};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue};

use crate::receiver::{Finish, Sink};
use crate::state::Checkpoint;
use crate::{prop, Result};

/// Where a transfer's answers go, and under which epoch.
#[derive(Debug, Clone)]
pub(crate) struct ReplyTo {
    pub q: String,
    pub qm: String,
    pub epoch: i64,
}

/// The work the receiver hands over, done in the order given.
pub(crate) enum Job {
    /// A chunk, written at `offset` and fed to the file's checksum (chunks come in order).
    Write {
        sink: Arc<Sink>,
        offset: u64,
        body: Bytes,
    },
    /// A frame (or a file's end): acknowledge `acked` chunks after recording `checkpoint`, if
    /// any (the file is synced first).
    Frame {
        tid: MsgId,
        reply: ReplyTo,
        index: i64,
        acked: u64,
        offset: Option<u64>,
        checkpoint: Option<(Arc<Sink>, Checkpoint)>,
    },
    /// A file's data all arrived: its transfer's checkpoint goes (`surely` when one may be on
    /// the queue from before this process), then the file is finished.
    Ended {
        tid: MsgId,
        surely: bool,
        finish: Option<Finish>,
    },
    /// Answered once everything before it is done.
    Flush(SyncSender<()>),
}

/// Starts the checkpointer thread; the queue to it is bounded (the receiver waits when the
/// disk or the queue manager falls behind).
pub(crate) fn start(
    c: &Connection,
    state_q: &str,
    finishers: SyncSender<Finish>,
) -> Result<SyncSender<Job>> {
    let cc = crate::receiver::mq(c.share())?;
    let state =
        crate::receiver::mq(cc.open(state_q, open::INPUT_SHARED | open::OUTPUT | open::BROWSE))?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(FTE_CHECKPOINT_BATCH_MAX);
    let (ck_tx, ck_rx) = std::sync::mpsc::sync_channel::<Job>(FTE_CHECKPOINT_BATCH_MAX);
    std::thread::Builder::new()
        .name("fte-checkpointer".into())
        .spawn(move || run(cc, state, ck_rx, finishers))
        .map_err(|e| crate::FteError(format!("thread: {e}")))?;
    let (hash_tx, hash_rx) = std::sync::mpsc::sync_channel::<Job>(HASH_QUEUE);
    std::thread::Builder::new()
        .name("fte-hasher".into())
        .spawn(move || hash(hash_rx, ck_tx))
        .map_err(|e| crate::FteError(format!("thread: {e}")))?;
    std::thread::Builder::new()
        .name("fte-writer".into())
        .spawn(move || write(rx, hash_tx))
        .map_err(|e| crate::FteError(format!("thread: {e}")))?;
    Ok(tx)
}

/// The writer: writes the chunks in order and hands them, and every other job in between, on
/// to the hasher. A direct write waits for the disk; meanwhile the hasher works on the chunks
/// before it.
fn write(rx: Receiver<Job>, hash: SyncSender<Job>) {
    let mut aligned = Aligned::default();
    while let Ok(j) = rx.recv() {
        if let Job::Write { sink, offset, body } = &j {
            // (Not held while writing: the hasher takes it to hash this file's earlier chunks.)
            let written = || sink.written.lock().unwrap_or_else(|e| e.into_inner());
            if written().error.is_some() {
                continue;
            }
            if let Err(e) = write_at(sink, &mut aligned, body, *offset) {
                written().error = Some(e.to_string());
                continue;
            }
        }
        if hash.send(j).is_err() {
            return;
        }
    }
}

/// The hasher: feeds the written chunks to their file's checksum, in order, and hands every
/// other job on to the checkpointer once the chunks before it are written and hashed, so that
/// its syncs and commits do not hold up the writes, and a file's end reaches the finishers
/// with its whole checksum.
fn hash(rx: Receiver<Job>, ck: SyncSender<Job>) {
    while let Ok(j) = rx.recv() {
        match j {
            Job::Write { sink, body, .. } => {
                let mut w = sink.written.lock().unwrap_or_else(|e| e.into_inner());
                if w.error.is_none() {
                    if let Some(h) = w.hasher.as_mut() {
                        h.update(&body);
                    }
                }
            }
            other => {
                if ck.send(other).is_err() {
                    return;
                }
            }
        }
    }
}

/// Jobs between the writer and the hasher: a few chunks, so that each works while the other
/// waits, without holding many chunks in memory.
const HASH_QUEUE: usize = 8;

/// The alignment direct I/O needs of the buffer, the offset and the length (the page size,
/// which covers devices of 512-byte and of 4 KiB blocks).
const DIRECT_ALIGN: usize = 4096;

/// The writer's buffer for direct writes of chunks that are not aligned in memory: a chunk's
/// aligned part is copied here (a copy within the process, of a buffer that stays hot) and goes
/// to the disk from it. A chunk whose whole blocks the client received at an aligned address (it
/// places a large frame so that it ends on one, see `ferrymq_proto::FRAME_END_ALIGN`) goes to
/// the disk from where it is.
#[derive(Default)]
struct Aligned(Vec<u8>);

impl Aligned {
    fn holding<'a>(&'a mut self, data: &'a [u8]) -> &'a [u8] {
        if (data.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN) {
            return data;
        }
        if self.0.len() < data.len() + DIRECT_ALIGN {
            self.0 = vec![0; data.len() + DIRECT_ALIGN];
        }
        let at = self.0.as_ptr().align_offset(DIRECT_ALIGN);
        let buf = &mut self.0[at..at + data.len()];
        buf.copy_from_slice(data);
        buf
    }
}

/// Writes `body` at `offset` of the sink's file: the whole aligned blocks from an aligned
/// offset directly when the file has a direct handle, the rest (a file's last bytes, text mode's
/// odd lengths) through the page cache. The ranges never overlap, and the file's sync at each
/// checkpoint and at its end covers both.
fn write_at(sink: &Sink, aligned: &mut Aligned, body: &[u8], offset: u64) -> std::io::Result<()> {
    let whole = body.len() / DIRECT_ALIGN * DIRECT_ALIGN;
    let direct = match &sink.direct {
        Some(d) if whole > 0 && offset.is_multiple_of(DIRECT_ALIGN as u64) => d,
        _ => return sink.file.write_all_at(body, offset),
    };
    match direct.write_all_at(aligned.holding(&body[..whole]), offset) {
        Ok(()) => sink
            .file
            .write_all_at(&body[whole..], offset + whole as u64),
        // A file system that opened the file for direct I/O but refuses this write: through the
        // page cache.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => sink.file.write_all_at(body, offset),
        Err(e) => Err(e),
    }
}

/// Removes the transfer's checkpoint after every job handed over before, and waits for it.
pub(crate) fn remove(tx: &SyncSender<Job>, tid: MsgId) {
    let job = Job::Ended {
        tid,
        surely: true,
        finish: None,
    };
    if tx.send(job).is_ok() {
        flush(tx);
    }
}

/// Waits until every job handed over before is done.
pub(crate) fn flush(tx: &SyncSender<Job>) {
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
    if tx.send(Job::Flush(done_tx)).is_ok() {
        let _ = done_rx.recv();
    }
}

fn run(c: Connection, state: ObjectHandle, rx: Receiver<Job>, finishers: SyncSender<Finish>) {
    // Transfers whose checkpoint this process recorded and has not removed yet.
    let mut recorded: HashSet<MsgId> = HashSet::new();
    let mut replies: HashMap<(String, String), ObjectHandle> = HashMap::new();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < FTE_CHECKPOINT_BATCH_MAX {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        do_batch(&c, &state, batch, &mut recorded, &mut replies, &finishers);
    }
}

/// Whether a job of the same transfer later in the batch makes this checkpoint useless: a later
/// checkpoint replaces it, a file's end removes it.
fn superseded(batch: &[Job], at: usize, tid: MsgId) -> bool {
    batch[at + 1..].iter().any(|j| match j {
        Job::Frame {
            tid: t, checkpoint, ..
        } => *t == tid && checkpoint.is_some(),
        Job::Ended { tid: t, .. } => *t == tid,
        Job::Write { .. } | Job::Flush(_) => false,
    })
}

fn do_batch(
    c: &Connection,
    state: &ObjectHandle,
    batch: Vec<Job>,
    recorded: &mut HashSet<MsgId>,
    replies: &mut HashMap<(String, String), ObjectHandle>,
    finishers: &SyncSender<Finish>,
) {
    // 1. The files of the checkpoints to record are synced first: a checkpoint never names
    //    data that is not on the disk (nor a file whose write failed).
    let mut writes: Vec<(MsgId, Option<Checkpoint>)> = Vec::new();
    for (i, j) in batch.iter().enumerate() {
        match j {
            Job::Frame {
                tid,
                checkpoint: Some((sink, k)),
                ..
            } if !superseded(&batch, i, *tid) => {
                let failed = sink
                    .written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .error
                    .is_some();
                if failed {
                    continue;
                }
                if let Err(e) = sink.file.sync_data() {
                    eprintln!("fte: a checkpoint's file could not be synced: {e}");
                    continue;
                }
                writes.push((*tid, Some(*k)));
            }
            Job::Ended { tid, surely, .. } if recorded.contains(tid) || *surely => {
                writes.push((*tid, None));
            }
            _ => {}
        }
    }
    // 2. One unit of work for every checkpoint of the batch.
    if !writes.is_empty() {
        let r = (|| {
            for (tid, k) in &writes {
                match k {
                    Some(k) => k.replace_in_uow(c, state, *tid)?,
                    None => crate::state::remove_in_uow(c, state, *tid)?,
                }
            }
            c.commit()
        })();
        match r {
            Ok(()) => {
                for (tid, k) in &writes {
                    if k.is_some() {
                        recorded.insert(*tid);
                    } else {
                        recorded.remove(tid);
                    }
                }
            }
            Err(e) => {
                let _ = c.backout();
                if crate::sender::lost(&e) {
                    crate::agent::reconnect();
                }
                eprintln!("fte: checkpoints could not be recorded: {e}");
            }
        }
    }
    // 3. The acknowledgements (the last of each transfer), ended files, flushes.
    let mut acks: Vec<(MsgId, ReplyTo, i64, u64, Option<u64>)> = Vec::new();
    for j in batch {
        match j {
            Job::Frame {
                tid,
                reply,
                index,
                acked,
                offset,
                ..
            } => match acks.iter_mut().find(|a| a.0 == tid) {
                Some(a) if reply.epoch >= a.1.epoch => *a = (tid, reply, index, acked, offset),
                Some(_) => {}
                None => acks.push((tid, reply, index, acked, offset)),
            },
            Job::Ended { finish, .. } => {
                if let Some(f) = finish {
                    if finishers.send(f).is_err() {
                        eprintln!("fte: the file finishers ended");
                        std::process::exit(1);
                    }
                }
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
            Job::Write { .. } => {}
        }
    }
    for (tid, reply, index, acked, offset) in acks {
        ack(c, replies, tid, &reply, index, acked, offset);
    }
}

fn ack(
    c: &Connection,
    replies: &mut HashMap<(String, String), ObjectHandle>,
    tid: MsgId,
    to: &ReplyTo,
    index: i64,
    acked: u64,
    offset: Option<u64>,
) {
    let md = MessageDescriptor {
        correl_id: tid,
        persistence: Persistence::NotPersistent,
        ..Default::default()
    };
    let mut props = Properties::default();
    props.set(prop::KIND, PropertyValue::String("ack".into()));
    props.set(prop::INDEX, PropertyValue::Int(index));
    props.set(prop::OK, PropertyValue::Bool(true));
    props.set(prop::EPOCH, PropertyValue::Int(to.epoch));
    if let Some(o) = offset {
        props.set(prop::OFFSET, PropertyValue::Int(o as i64));
    }
    props.set(prop::ACKED, PropertyValue::Int(acked as i64));
    let key = (to.q.clone(), to.qm.clone());
    if !replies.contains_key(&key) && replies.len() >= FTE_RECEIVING_TRANSFERS_MAX {
        for (_, h) in replies.drain() {
            let _ = c.close(&h, 0);
        }
    }
    let r = (|| -> std::result::Result<(), ferrymq_types::MqError> {
        let h = match replies.get(&key) {
            Some(h) => h.clone(),
            None => {
                let h = c.open_qmgr(&to.q, &to.qm, open::OUTPUT)?;
                replies.insert(key.clone(), h.clone());
                h
            }
        };
        c.put(
            &h,
            &md,
            &props,
            Bytes::from(acked.to_string()),
            &PutOptions::default(),
        )
        .map(|_| ())
    })();
    if let Err(e) = r {
        // Opened again at the next acknowledgement (the queue manager may have restarted).
        if let Some(h) = replies.remove(&key) {
            let _ = c.close(&h, 0);
        }
        if crate::sender::lost(&e) {
            crate::agent::reconnect();
        }
        eprintln!("fte: an acknowledgement to {} could not be put: {e}", to.q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tid: u8, k: Option<u64>) -> Job {
        let f = Arc::new(Sink {
            file: tempfile::tempfile().expect("temp file"),
            direct: None,
            written: std::sync::Mutex::new(crate::receiver::Written {
                hasher: None,
                error: None,
            }),
        });
        Job::Frame {
            tid: [tid; 24],
            reply: ReplyTo {
                q: "R".into(),
                qm: String::new(),
                epoch: 0,
            },
            index: 0,
            acked: 5,
            offset: Some(0),
            checkpoint: k.map(|o| {
                (
                    f,
                    Checkpoint {
                        index: 0,
                        offset: o,
                        ident: (0, 0),
                    },
                )
            }),
        }
    }

    #[test]
    fn only_the_last_checkpoint_of_a_transfer_in_a_batch_is_recorded_and_none_before_its_end() {
        let batch = vec![
            frame(1, Some(10)),
            frame(2, Some(10)),
            frame(1, None),
            frame(1, Some(20)),
            frame(2, None),
            Job::Ended {
                tid: [3; 24],
                surely: false,
                finish: None,
            },
            frame(3, Some(5)),
            Job::Ended {
                tid: [3; 24],
                surely: false,
                finish: None,
            },
        ];
        // Transfer 1: replaced by its later checkpoint; transfer 2: a frame without one does
        // not replace it; transfer 3: its file ended after it.
        assert!(superseded(&batch, 0, [1; 24]));
        assert!(!superseded(&batch, 1, [2; 24]));
        assert!(!superseded(&batch, 3, [1; 24]));
        assert!(superseded(&batch, 6, [3; 24]));
    }

    #[test]
    fn direct_blocks_and_page_cache_tails_make_one_whole_file() {
        // On the checkout's disk, not a tmpfs /tmp (which refuses direct I/O).
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("temp dir");
        let path = dir.path().join("f.part");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let sink = Sink {
            file,
            direct: crate::receiver::open_direct(&path),
            written: std::sync::Mutex::new(crate::receiver::Written {
                hasher: None,
                error: None,
            }),
        };
        if sink.direct.is_none() {
            eprintln!("this file system refuses direct I/O: only the page-cache path is tested");
        }
        let bytes = |n: usize, seed: u8| -> Vec<u8> {
            (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
        };
        let mut want = vec![0u8; 49_152];
        let mut aligned = Aligned::default();
        // A chunk of whole blocks and a tail; an odd chunk after it (text mode's lengths); a
        // chunk at an aligned offset again, past a gap; a last, short chunk.
        for (offset, len, seed) in [
            (0, 8192 + 100, 1),
            (8292, 8000, 2),
            (20_480, 12_288, 3),
            (32_768, 7_232, 4),
        ] {
            let body = bytes(len, seed);
            write_at(&sink, &mut aligned, &body, offset as u64).unwrap();
            want[offset..offset + len].copy_from_slice(&body);
        }
        // A chunk already aligned in memory is written from where it is, not copied.
        let body = bytes(8192, 5);
        let mut placing = Aligned::default();
        let block = placing.holding(&body);
        let mut other = Aligned::default();
        assert_eq!(other.holding(block).as_ptr(), block.as_ptr());
        assert!(other.0.is_empty(), "an aligned chunk is not copied");
        write_at(&sink, &mut other, block, 40_960).unwrap();
        want[40_960..40_960 + 8192].copy_from_slice(&body);
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }
}
