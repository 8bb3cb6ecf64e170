//! The receiving side: reads the agent's data queue and has each file written to a `.part`
//! beside its destination by offset, every frame of chunks acknowledged, and every checkpoint
//! interval the `.part` synced and the progress recorded as one persistent message per transfer
//! on the agent's state queue (the previous one is removed in the same unit of work) — all three
//! by the checkpointer thread, in order. At the end it checks the checksum (computed as the
//! chunks were written), syncs the file, renames it into place and syncs the directory (on one
//! of a few finisher threads, so that one file's syncs do not stall the others' chunks). It takes
//! chunks only in order and of the sender's current epoch; to a resume it answers the offset to
//! go on from (its own if it kept running, else its checkpoint) or, if the source's identity
//! changed, a failure.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{Message, ObjectHandle};
use ferrymq_types::limits::{
    FTE_CHUNK_SIZE_MAX_BYTES, FTE_FINISHERS, FTE_RECEIVE_AHEAD_MSGS, FTE_RECEIVING_TRANSFERS_MAX,
};
use ferrymq_types::options::{open, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue, Reason};

use crate::checkpointer::{self, Job, ReplyTo};
use crate::checksum::{Hasher, Method};
use crate::props::AgentProps;
use crate::sandbox::Sandbox;
use crate::sender::safe_relative;
use crate::state::Checkpoint;
use crate::{prop, queues, Result};

/// A `.part` being written: the checkpointer writes its chunks, in order, and feeds them to
/// its checksum.
pub(crate) struct Sink {
    pub(crate) file: File,
    /// The same file opened for direct I/O (`O_DIRECT`) where the file system allows it: whole
    /// aligned blocks of a chunk go to the disk from the writer's buffer, not through the page
    /// cache (half the receiving agent's CPU was the page-cache copy). `None`: buffered only.
    pub(crate) direct: Option<File>,
    pub(crate) written: Mutex<Written>,
}

/// Opens `path` for direct writes, or `None` where the file system refuses them (tmpfs).
pub(crate) fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

pub(crate) struct Written {
    /// The checksum of the data written so far (taken when the file is finished).
    pub(crate) hasher: Option<Hasher>,
    /// The first write that failed: the file fails when it ends, and is not checkpointed.
    pub(crate) error: Option<String>,
}

pub(crate) struct Incoming {
    final_path: PathBuf,
    part: PathBuf,
    file: Arc<Sink>,
    method: Method,
    /// The offset the next chunk must have: everything before it was written.
    next: u64,
    /// The source's size and modification time as the sender saw them at the start.
    ident: (i64, i64),
    /// The request's exists policy is overwrite: the finished file may replace one there.
    replace: bool,
}

impl Incoming {
    /// The checkpoint of file `index` where its data stands now, with the file to sync first.
    fn checkpoint(&self, index: i64) -> (Arc<Sink>, Checkpoint) {
        let k = Checkpoint {
            index,
            offset: self.next,
            ident: self.ident,
        };
        (self.file.clone(), k)
    }
}

struct Transfer {
    reply_q: String,
    reply_qm: String,
    frame: u64,
    checkpoint: u64,
    /// Messages of an older epoch (sent before the sender's latest resume) are dropped.
    epoch: i64,
    /// Chunks taken in this epoch.
    chunks: u64,
    files: HashMap<i64, Incoming>,
    /// Files refused at their start: their chunks are dropped.
    refused: Vec<i64>,
    /// The sender's reply queue, opened at the first answer and kept until the transfer is
    /// forgotten (an answer per frame would otherwise cost an open and a close each).
    reply: Option<ObjectHandle>,
    /// Whether the state queue may hold a checkpoint of this transfer that this process did not
    /// record (the transfer resumed, perhaps after this agent restarted): the end of the next
    /// file then removes it even if the checkpointer recorded none.
    checkpointed: bool,
}

fn str_prop<'a>(m: &'a Message, n: &str) -> &'a str {
    match m.props.get(n) {
        Some(PropertyValue::String(s)) => s,
        _ => "",
    }
}

fn int_prop(m: &Message, n: &str) -> i64 {
    match m.props.get(n) {
        Some(PropertyValue::Int(v)) => *v,
        _ => -1,
    }
}

pub(crate) fn mq<T>(r: std::result::Result<T, ferrymq_types::MqError>) -> Result<T> {
    match r {
        Ok(v) => Ok(v),
        Err(e) if crate::sender::lost(&e) => crate::agent::reconnect(),
        Err(e) => Err(e.into()),
    }
}

const SOURCE_CHANGED: &str =
    "the source file changed while the transfer was interrupted (size or modification time \
     differ): not resumed";

pub fn run(c: Connection, p: &AgentProps) -> Result<()> {
    let data = mq(crate::agent::open_exclusive(
        &c,
        &queues::data(&p.agent_name),
        0,
    ))?;
    let state = mq(c.open(
        &queues::state(&p.agent_name),
        open::INPUT_SHARED | open::OUTPUT | open::BROWSE,
    ))?;
    let mut transfers: HashMap<MsgId, Transfer> = HashMap::new();
    let finishing: Finishing = Default::default();
    let finishers = start_finishers(&c, p, &finishing)?;
    let ck = checkpointer::start(&c, &queues::state(&p.agent_name), finishers)?;
    let g = GetOptions {
        wait: Wait::Ms(500),
        max_len: (FTE_CHUNK_SIZE_MAX_BYTES + 64 * 1024) as u32,
        ..Default::default()
    };
    // The queue manager pushes the data queue's messages (a bounded window ahead) instead of
    // answering a get per chunk: a round trip per chunk cost this agent and its queue manager
    // a wake-up each.
    let mut feed = mq(c.consume(&data, &g, FTE_RECEIVE_AHEAD_MSGS))?;
    loop {
        let m = match feed.next_timeout(std::time::Duration::from_millis(500)) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
            Err(e) => return mq(Err(e)),
        };
        let tid = m.md.correl_id;
        let epoch = int_prop(&m, prop::EPOCH).max(0);
        let index = int_prop(&m, prop::INDEX);
        match str_prop(&m, prop::KIND) {
            "start" => {
                if !transfers.contains_key(&tid) && transfers.len() >= FTE_RECEIVING_TRANSFERS_MAX {
                    // Room is made by forgetting a transfer with no file under way (its sender
                    // ended without its done message).
                    let idle = transfers
                        .iter()
                        .find(|(_, t)| t.files.is_empty())
                        .map(|(k, _)| *k);
                    match idle {
                        Some(k) => {
                            forget(&c, transfers.remove(&k));
                            forget_finished(&finishing, k);
                        }
                        None => continue,
                    }
                }
                let resume = matches!(m.props.get(prop::RESUME), Some(PropertyValue::Bool(true)));
                let t = transfers.entry(tid).or_insert_with(|| Transfer {
                    reply_q: str_prop(&m, prop::REPLY_Q).to_string(),
                    reply_qm: str_prop(&m, prop::REPLY_QM).to_string(),
                    frame: int_prop(&m, prop::FRAME).max(1) as u64,
                    checkpoint: int_prop(&m, prop::CHECKPOINT).max(1) as u64,
                    epoch,
                    chunks: 0,
                    files: HashMap::new(),
                    refused: Vec::new(),
                    reply: None,
                    checkpointed: false,
                });
                if epoch < t.epoch {
                    continue;
                }
                if epoch > t.epoch {
                    t.epoch = epoch;
                    t.chunks = 0;
                }
                let ident = (int_prop(&m, prop::SIZE), int_prop(&m, prop::MTIME));
                if !resume {
                    match start_file(&m, None, &p.sandbox, p.direct_writes) {
                        Ok(inc) => {
                            t.files.insert(index, inc);
                        }
                        Err(why) => {
                            t.refused.push(index);
                            answer(&c, tid, t, "result", index, false, &why, &[]);
                        }
                    }
                    continue;
                }
                if t.refused.contains(&index) {
                    continue;
                }
                if let Some((ok, why)) = finishing_result(&finishing, tid, index) {
                    answer(&c, tid, t, "result", index, ok, &why, &[]);
                    continue;
                }
                t.checkpointed = true;
                // A resume: from where this file's data stands here, if it is the same file.
                let (offset, received) = match t.files.get(&index) {
                    Some(inc) if inc.ident == ident => {
                        // The sender goes on from here and this epoch counts its checkpoint
                        // interval from here, so here is recorded as a checkpoint before the
                        // answer: otherwise a crash of this agent later in the epoch would
                        // resume from a checkpoint older than the resume, and send again what
                        // came before it as well as a checkpoint's worth after it.
                        let job = Job::Frame {
                            tid,
                            reply: reply_to(t),
                            index,
                            acked: 0,
                            offset: Some(inc.next),
                            checkpoint: Some(inc.checkpoint(index)),
                        };
                        if ck.send(job).is_err() {
                            return crate::err("the checkpointer ended");
                        }
                        checkpointer::flush(&ck);
                        (inc.next, inc.next)
                    }
                    Some(_) => {
                        drop_file(&ck, tid, t, index);
                        answer(&c, tid, t, "result", index, false, SOURCE_CHANGED, &[]);
                        continue;
                    }
                    None => {
                        checkpointer::flush(&ck);
                        let k = Checkpoint::read(&c, &state, tid).filter(|k| k.index == index);
                        match k {
                            Some(k) if k.ident != ident => {
                                let _ = start_file(&m, Some(0), &p.sandbox, p.direct_writes).map(
                                    |inc| {
                                        let _ = std::fs::remove_file(&inc.part);
                                    },
                                );
                                checkpointer::remove(&ck, tid);
                                t.refused.push(index);
                                answer(&c, tid, t, "result", index, false, SOURCE_CHANGED, &[]);
                                continue;
                            }
                            Some(k) => {
                                match start_file(&m, Some(k.offset), &p.sandbox, p.direct_writes) {
                                    Ok(inc) => {
                                        let at = inc.next;
                                        t.files.insert(index, inc);
                                        (at, at)
                                    }
                                    Err(why) => {
                                        t.refused.push(index);
                                        answer(&c, tid, t, "result", index, false, &why, &[]);
                                        continue;
                                    }
                                }
                            }
                            None => match start_file(&m, None, &p.sandbox, p.direct_writes) {
                                Ok(inc) => {
                                    t.files.insert(index, inc);
                                    (0, 0)
                                }
                                Err(why) => {
                                    t.refused.push(index);
                                    answer(&c, tid, t, "result", index, false, &why, &[]);
                                    continue;
                                }
                            },
                        }
                    }
                };
                answer(
                    &c,
                    tid,
                    t,
                    "ready",
                    index,
                    true,
                    "",
                    &[
                        (prop::OFFSET, offset as i64),
                        (prop::RECEIVED, received as i64),
                    ],
                );
            }
            "chunk" => {
                let Some(t) = transfers.get_mut(&tid) else {
                    continue;
                };
                if epoch != t.epoch {
                    continue;
                }
                let off = int_prop(&m, prop::OFFSET).max(0) as u64;
                let mut next = 0;
                if let Some(inc) = t.files.get_mut(&index) {
                    if off != inc.next {
                        // A chunk before it was lost (a queue manager restarted): nothing more
                        // is taken until the sender resumes.
                        continue;
                    }
                    // Written (and fed to the checksum) by the checkpointer, in order, while
                    // this thread takes the next chunk.
                    let job = Job::Write {
                        sink: inc.file.clone(),
                        offset: off,
                        body: m.body.clone(),
                    };
                    inc.next += m.body.len() as u64;
                    next = inc.next;
                    if ck.send(job).is_err() {
                        return crate::err("the checkpointer ended");
                    }
                }
                t.chunks += 1;
                if t.chunks % t.frame == 0 {
                    // Every checkpoint interval the file is synced and its offset recorded,
                    // and the frame acknowledged after that, by the checkpointer.
                    let checkpoint = (t.chunks % (t.frame * t.checkpoint) == 0)
                        .then(|| t.files.get(&index))
                        .flatten()
                        .map(|inc| inc.checkpoint(index));
                    let job = Job::Frame {
                        tid,
                        reply: reply_to(t),
                        index,
                        acked: t.chunks,
                        offset: Some(next),
                        checkpoint,
                    };
                    if ck.send(job).is_err() {
                        return crate::err("the checkpointer ended");
                    }
                }
            }
            "end" => {
                let Some(t) = transfers.get_mut(&tid) else {
                    continue;
                };
                if epoch != t.epoch {
                    continue;
                }
                let size = int_prop(&m, prop::SIZE).max(0) as u64;
                if t.files.get(&index).is_some_and(|inc| inc.next != size) {
                    // Chunks were lost: wait for the sender's resume.
                    continue;
                }
                let job = Job::Frame {
                    tid,
                    reply: reply_to(t),
                    index,
                    acked: t.chunks,
                    offset: None,
                    checkpoint: None,
                };
                if ck.send(job).is_err() {
                    return crate::err("the checkpointer ended");
                }
                if let Some(inc) = t.files.remove(&index) {
                    let digest = str_prop(&m, prop::DIGEST).to_string();
                    finishing
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((tid, index), None);
                    // The checkpoint goes first (the checkpointer removes it, then hands the
                    // file on): a crash before the file is in place resumes it from the start,
                    // never from an offset of a file already renamed. Syncing, checking and
                    // renaming wait for the disk: finishers do it, so that one file's syncs
                    // do not hold up every other transfer's chunks.
                    let job = Job::Ended {
                        tid,
                        surely: std::mem::take(&mut t.checkpointed),
                        finish: Some(Finish {
                            inc,
                            digest,
                            tid,
                            index,
                            epoch: t.epoch,
                            reply_q: t.reply_q.clone(),
                            reply_qm: t.reply_qm.clone(),
                        }),
                    };
                    if ck.send(job).is_err() {
                        return crate::err("the checkpointer ended");
                    }
                }
            }
            // The sender has every result: the transfer is forgotten. (Its chunk count must last
            // from one file to the next until then, as the sender's window counts across files.)
            "done" if transfers.get(&tid).is_some_and(|t| epoch >= t.epoch) => {
                forget(&c, transfers.remove(&tid));
                forget_finished(&finishing, tid);
            }
            "cancel" => {
                match transfers.get_mut(&tid) {
                    Some(t) if t.files.contains_key(&index) => {
                        drop_file(&ck, tid, t, index);
                    }
                    _ => {
                        // Not under way here (this agent restarted): its `.part` still goes.
                        // Unless another transfer is writing it now.
                        if let Ok((dest, part)) = part_path(&m) {
                            if p.sandbox.check(&dest, true).is_ok() {
                                if let Ok(Some(_held)) = lock_part(&part, false) {
                                    let _ = std::fs::remove_file(part);
                                }
                            }
                        }
                        checkpointer::remove(&ck, tid);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Forgets a transfer: its reply queue is closed.
fn forget(c: &Connection, t: Option<Transfer>) {
    if let Some(h) = t.and_then(|t| t.reply) {
        let _ = c.close(&h, 0);
    }
}

/// Where the transfer's answers go.
fn reply_to(t: &Transfer) -> ReplyTo {
    ReplyTo {
        q: t.reply_q.clone(),
        qm: t.reply_qm.clone(),
        epoch: t.epoch,
    }
}

/// Forgets a file under way: its `.part` and the transfer's checkpoint go (after whatever the
/// checkpointer still had to record).
fn drop_file(ck: &SyncSender<Job>, tid: MsgId, t: &mut Transfer, index: i64) {
    if let Some(inc) = t.files.remove(&index) {
        let _ = std::fs::remove_file(&inc.part);
    }
    t.refused.push(index);
    checkpointer::remove(ck, tid);
}

/// The destination file a start (or cancel) message names, and its `.part`.
fn part_path(m: &Message) -> std::result::Result<(PathBuf, PathBuf), String> {
    let path = str_prop(m, prop::PATH);
    let dir = str_prop(m, prop::DIR);
    let final_path = if dir.is_empty() {
        PathBuf::from(path)
    } else {
        if !safe_relative(path) {
            return Err(format!("'{path}' would leave the destination directory"));
        }
        Path::new(dir).join(path)
    };
    let mut part = final_path.clone().into_os_string();
    part.push(".part");
    Ok((final_path, PathBuf::from(part)))
}

/// Opens the file's `.part`: a new one, or with `at` the one a checkpoint left, cut to `at` (the
/// synced part; a `.part` shorter than that starts again from 0).
fn start_file(
    m: &Message,
    at: Option<u64>,
    sandbox: &Sandbox,
    direct_writes: bool,
) -> std::result::Result<Incoming, String> {
    let (final_path, part) = part_path(m)?;
    sandbox.check(&final_path, true)?;
    refuse_the_source(m, &final_path, &part)?;
    let named = str_prop(m, prop::METHOD);
    let method = if named.is_empty() {
        Method::default()
    } else {
        Method::parse(named)
            .ok_or_else(|| format!("checksum method '{named}' is not known to this agent"))?
    };
    if at.is_none() && final_path.exists() && str_prop(m, prop::EXIST) != "overwrite" {
        return Err(format!(
            "{} exists (give -de overwrite to replace it)",
            final_path.display()
        ));
    }
    if let Some(parent) = final_path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let file = match lock_part(&part, true) {
        Ok(Some(f)) => f,
        Ok(None) => {
            return Err(format!(
                "{} is being written by another transfer (or by another file of this one with \
                 the same destination)",
                part.display()
            ))
        }
        Err(e) => return Err(format!("{}: {e}", part.display())),
    };
    let had = file.metadata().map(|md| md.len()).unwrap_or(0);
    let next = match at {
        Some(o) if had >= o => o,
        _ => 0,
    };
    // Cut only now that this transfer holds it: another transfer's data is never cut.
    file.set_len(next)
        .map_err(|e| format!("{}: {e}", part.display()))?;
    // Resumed: the checksum takes in what the `.part` already holds.
    let mut hasher = Hasher::new(method);
    hash_prefix(&file, next, &mut hasher).map_err(|e| format!("{}: {e}", part.display()))?;
    let direct = if direct_writes {
        open_direct(&part)
    } else {
        None
    };
    Ok(Incoming {
        final_path,
        part,
        file: Arc::new(Sink {
            file,
            direct,
            written: Mutex::new(Written {
                hasher: Some(hasher),
                error: None,
            }),
        }),
        method,
        next,
        ident: (int_prop(m, prop::SIZE), int_prop(m, prop::MTIME)),
        replace: str_prop(m, prop::EXIST) == "overwrite",
    })
}

/// Opens a `.part` (created if `create`) and takes its lock: an exclusive `flock` held for as
/// long as the file is open, so that one transfer at a time writes it, whichever agent process
/// runs it (two transfers to one destination would otherwise write one `.part` at the same
/// offsets, and each pass its own checksum over data the other overwrote). `None`: another
/// transfer holds it. The path is looked at again once locked: a `.part` renamed into place
/// meanwhile is a finished file, never reopened as a `.part`.
fn lock_part(part: &Path, create: bool) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..8 {
        let file = std::fs::OpenOptions::new()
            .create(create)
            .write(true)
            .read(true)
            .truncate(false)
            .open(part)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => return Ok(None),
            // A file system without locks (some network and FUSE ones): written unlocked, as
            // before locks were taken, rather than not at all.
            Err(e)
                if e == rustix::io::Errno::NOLCK
                    || e == rustix::io::Errno::OPNOTSUPP
                    || e == rustix::io::Errno::INVAL => {}
            Err(e) => return Err(e.into()),
        }
        let held = file.metadata()?;
        match crate::file_id(part) {
            Some(now) if now == (held.dev(), held.ino()) => return Ok(Some(file)),
            None if !create => return Err(std::io::ErrorKind::NotFound.into()),
            _ => continue,
        }
    }
    Err(std::io::Error::other(
        "renamed or removed again and again while being opened",
    ))
}

/// Renames a finished `.part` into place. Without `replace` (the request's exists policy is
/// error) a destination that appeared since the transfer began is left as it is and the file
/// fails: `RENAME_NOREPLACE`, or on a file system without it, a look just before the rename.
fn rename_into_place(part: &Path, dest: &Path, replace: bool) -> std::io::Result<()> {
    if replace {
        return std::fs::rename(part, dest);
    }
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    let exists_now = || {
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "it exists now (another transfer or program wrote it meanwhile; give -de overwrite \
             to replace it)",
        )
    };
    match renameat_with(CWD, part, CWD, dest, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::EXIST => Err(exists_now()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            if dest.exists() {
                return Err(exists_now());
            }
            std::fs::rename(part, dest)
        }
        Err(e) => Err(e.into()),
    }
}

/// Refuses a destination (or its `.part`) that is the source file itself, as `cp` does: writing
/// the `.part` would truncate the source as it is read, renaming it over the source and then
/// deleting the source (disposition delete) would leave no copy at all. Known when both agents
/// run on one machine (the sender names the file by boot id, device and inode); elsewhere the
/// sender's own check before a delete still keeps the file.
fn refuse_the_source(
    m: &Message,
    final_path: &Path,
    part: &Path,
) -> std::result::Result<(), String> {
    let boot = str_prop(m, prop::SRC_BOOT);
    if boot.is_empty() || boot != crate::boot_id() {
        return Ok(());
    }
    let (Ok(dev), Ok(ino)) = (
        str_prop(m, prop::SRC_DEV).parse::<u64>(),
        str_prop(m, prop::SRC_INO).parse::<u64>(),
    ) else {
        return Ok(());
    };
    for path in [final_path, part] {
        if crate::file_id(path) == Some((dev, ino)) {
            return Err(format!(
                "{} is the source file itself: a file is not transferred onto itself",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Files handed to the finishers, by transfer and file index: `None` while being finished,
/// then the result given, kept until the transfer is forgotten — a resume of such a file (the
/// sender stalled meanwhile) waits for it and gets the same result, never a second `.part`.
type Finishing = std::sync::Arc<std::sync::Mutex<HashMap<(MsgId, i64), Option<(bool, String)>>>>;

fn finishing_result(f: &Finishing, tid: MsgId, index: i64) -> Option<(bool, String)> {
    loop {
        match f
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(tid, index))
        {
            None => return None,
            Some(Some(r)) => return Some(r.clone()),
            Some(None) => {}
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn forget_finished(f: &Finishing, tid: MsgId) {
    f.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(t, _), _| *t != tid);
}

/// Feeds the first `len` bytes of `file` to `h`.
fn hash_prefix(file: &File, len: u64, h: &mut Hasher) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let want = (len - at).min(buf.len() as u64) as usize;
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "shorter than its checkpoint",
            ));
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(())
}

/// A file whose data all arrived, to be synced, checked, renamed and answered.
pub(crate) struct Finish {
    inc: Incoming,
    digest: String,
    tid: MsgId,
    index: i64,
    epoch: i64,
    reply_q: String,
    reply_qm: String,
}

/// Starts `FTE_FINISHERS` threads, each with a connection of its own, that finish files; the
/// queue to them is bounded, so a slow disk slows the receiver down rather than piling up.
fn start_finishers(
    c: &Connection,
    p: &AgentProps,
    finishing: &Finishing,
) -> Result<std::sync::mpsc::SyncSender<Finish>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Finish>(FTE_FINISHERS);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let dirs: Arc<DirSyncs> = Default::default();
    for _ in 0..FTE_FINISHERS {
        let dirs = dirs.clone();
        let fc = mq(c.share())?;
        let rx = rx.clone();
        let agent = p.agent_name.clone();
        let finishing = finishing.clone();
        std::thread::Builder::new()
            .name("fte-finisher".into())
            .spawn(move || loop {
                let job = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                    Ok(j) => j,
                    Err(_) => return,
                };
                let (ok, why) = finish(job.inc, &job.digest, &dirs);
                let mut t = Transfer {
                    reply_q: job.reply_q,
                    reply_qm: job.reply_qm,
                    frame: 1,
                    checkpoint: 1,
                    epoch: job.epoch,
                    chunks: 0,
                    files: HashMap::new(),
                    refused: Vec::new(),
                    reply: None,
                    checkpointed: false,
                };
                answer(&fc, job.tid, &mut t, "result", job.index, ok, &why, &[]);
                forget(&fc, Some(t));
                finishing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((job.tid, job.index), Some((ok, why.clone())));
                if !ok {
                    eprintln!("fte agent {agent}: {why}");
                }
            })
            .map_err(|e| crate::FteError(format!("thread: {e}")))?;
    }
    Ok(tx)
}

fn finish(inc: Incoming, digest: &str, dirs: &DirSyncs) -> (bool, String) {
    if let Err(e) = inc.file.file.sync_all() {
        return (false, format!("{}: {e}", inc.part.display()));
    }
    let (hasher, error) = {
        let mut w = inc.file.written.lock().unwrap_or_else(|e| e.into_inner());
        (w.hasher.take(), w.error.take())
    };
    // The `.part` stays locked (its file open) until it is renamed or removed, below.
    let _held = inc.file;
    if let Some(e) = error {
        let _ = std::fs::remove_file(&inc.part);
        return (false, format!("{}: {e}", inc.part.display()));
    }
    let got = hasher.map(Hasher::hex).unwrap_or_default();
    if got != digest {
        let _ = std::fs::remove_file(&inc.part);
        return (
            false,
            format!(
                "{} checksum mismatch: sent {digest}, received {got}",
                inc.method.name()
            ),
        );
    }
    if let Err(e) = rename_into_place(&inc.part, &inc.final_path, inc.replace) {
        let _ = std::fs::remove_file(&inc.part);
        return (false, format!("{}: {e}", inc.final_path.display()));
    }
    if let Some(parent) = inc.final_path.parent() {
        dirs.sync(parent);
    }
    (true, format!("{} written", inc.final_path.display()))
}

/// Syncs of destination directories shared by the finishers: a sync that starts after a
/// rename makes it durable, so a finisher whose directory is being synced waits for that sync
/// to end and then for one more (started by whoever comes first), which covers every rename
/// made meanwhile: files finished together share one directory sync.
#[derive(Default)]
struct DirSyncs {
    dirs: Mutex<HashMap<PathBuf, DirSync>>,
    changed: Condvar,
}

#[derive(Default)]
struct DirSync {
    /// Syncs started and ended, numbered from 1.
    started: u64,
    ended: u64,
    running: bool,
    waiters: usize,
}

impl DirSyncs {
    fn sync(&self, dir: &Path) {
        let mut m = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(dir.to_path_buf()).or_default();
        e.waiters += 1;
        // The first sync to start from now on covers this file's rename.
        let need = e.started + 1;
        loop {
            let Some(e) = m.get_mut(dir) else { return };
            if e.ended >= need {
                e.waiters -= 1;
                if e.waiters == 0 && !e.running {
                    m.remove(dir);
                }
                return;
            }
            if e.running {
                m = self.changed.wait(m).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            e.running = true;
            e.started += 1;
            let n = e.started;
            drop(m);
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
            m = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = m.get_mut(dir) {
                e.ended = n;
                e.running = false;
            }
            self.changed.notify_all();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn answer(
    c: &Connection,
    tid: MsgId,
    t: &mut Transfer,
    kind: &str,
    index: i64,
    ok: bool,
    text: &str,
    extra: &[(&str, i64)],
) {
    let md = MessageDescriptor {
        correl_id: tid,
        persistence: Persistence::NotPersistent,
        ..Default::default()
    };
    let mut props = Properties::default();
    props.set(prop::KIND, PropertyValue::String(kind.into()));
    props.set(prop::INDEX, PropertyValue::Int(index));
    props.set(prop::OK, PropertyValue::Bool(ok));
    props.set(prop::EPOCH, PropertyValue::Int(t.epoch));
    for (n, v) in extra {
        props.set(*n, PropertyValue::Int(*v));
    }
    if kind == "ack" {
        props.set(
            prop::ACKED,
            PropertyValue::Int(text.parse::<i64>().unwrap_or(0)),
        );
    }
    let r = (|| -> std::result::Result<(), ferrymq_types::MqError> {
        if t.reply.is_none() {
            t.reply = Some(c.open_qmgr(&t.reply_q, &t.reply_qm, open::OUTPUT)?);
        }
        let Some(h) = t.reply.as_ref() else {
            return Ok(());
        };
        c.put(
            h,
            &md,
            &props,
            Bytes::from(text.to_string()),
            &PutOptions::default(),
        )
        .map(|_| ())
    })();
    if let Err(e) = r {
        // Opened again at the next answer (the queue manager may have restarted).
        if let Some(h) = t.reply.take() {
            let _ = c.close(&h, 0);
        }
        eprintln!("fte: an answer to {} could not be put: {e}", t.reply_q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finishers_syncing_one_directory_at_once_all_return_and_leave_nothing_behind() {
        let d = tempfile::tempdir().expect("temp dir");
        let dirs: Arc<DirSyncs> = Default::default();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (dirs, dir) = (dirs.clone(), d.path().to_path_buf());
                std::thread::spawn(move || {
                    for j in 0..20 {
                        let f = dir.join(format!("f{i}-{j}"));
                        std::fs::write(&f, b"x").expect("write");
                        dirs.sync(&dir);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a finisher panicked");
        }
        assert!(dirs.dirs.lock().expect("lock").is_empty());
    }

    #[test]
    fn a_resumed_part_file_feeds_its_checkpointed_prefix_to_the_checksum() {
        let d = tempfile::tempdir().expect("temp dir");
        let p = d.path().join("a.part");
        std::fs::write(&p, vec![7u8; 3_000_000]).expect("write");
        let f = File::open(&p).expect("open");
        let mut h = Hasher::new(Method::Sha256);
        hash_prefix(&f, 2_500_000, &mut h).expect("hash");
        let mut want = Hasher::new(Method::Sha256);
        want.update(&vec![7u8; 2_500_000]);
        assert_eq!(h.hex(), want.hex());
        let mut h = Hasher::new(Method::Sha256);
        assert!(hash_prefix(&f, 4_000_000, &mut h).is_err());
    }
}
