//! The sending side of a transfer: expands the request's sources (directories, recursively with
//! `recursive`, and `*`/`?` wildcards in the last name), then for each file sends a start
//! message, its chunks (non-persistent, at most window × frame unacknowledged) and an end message
//! with the file's checksum to the destination agent's data queue, and waits for the receiver's
//! result. Sources are deleted (disposition `delete`) only after their file arrived whole.
//! With no answer for FTE_STALL_MS, or when the agent started again with the transfer on its state
//! queue, it resumes: a new epoch, each unfinished file started again with the resume flag, and
//! sent from the offset the receiver answers. It also publishes the transfer log's events and
//! stops when fteCancelTransfer asks.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;

use ferrymq_types::limits::{
    FTE_FILES_PER_TRANSFER_MAX, FTE_FILE_NAME_LEN_MAX, FTE_PROGRESS_INTERVAL_MS, FTE_STALL_MS,
};
use ferrymq_types::options::{open, pmo, GetOptions, PutOptions, Wait};
use ferrymq_types::{
    MessageDescriptor, MqError, MsgId, Persistence, Properties, PropertyValue, Reason,
};

use crate::checksum::Hasher;
use crate::props::AgentProps;
use crate::request::{Disposition, Exist, Item, Mode, TransferRequest};
use crate::sandbox::Sandbox;
use crate::state::Outbound;
use crate::text::{Converter, Encoding, Eol};
use crate::translog::{self, Event};
use crate::{err, prop, queues, FteError, Result};

/// One file to send: where it is, and where it goes.
#[derive(Debug, Clone)]
struct FileJob {
    src: PathBuf,
    /// Destination directory (`-dd`) and the name under it, or a destination file (`-df`).
    dir: Option<String>,
    path: String,
    item: usize,
}

/// Whether a name from a request may be joined under a destination directory: relative, and
/// without `..`.
pub fn safe_relative(name: &str) -> bool {
    let p = Path::new(name);
    !name.is_empty()
        && name.len() <= FTE_FILE_NAME_LEN_MAX
        && p.components().all(|c| matches!(c, Component::Normal(_)))
}

pub(crate) fn wildcard_match(pat: &[u8], s: &[u8]) -> bool {
    match (pat.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard_match(&pat[1..], s) || (!s.is_empty() && wildcard_match(pat, &s[1..]))
        }
        (Some(b'?'), Some(_)) => wildcard_match(&pat[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => wildcard_match(&pat[1..], &s[1..]),
        _ => false,
    }
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<(PathBuf, String)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| FteError(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        let r = format!("{rel}/{name}");
        if p.is_dir() {
            walk(&p, &r, out)?;
        } else {
            out.push((p, r));
        }
        if out.len() > FTE_FILES_PER_TRANSFER_MAX {
            return err(format!(
                "more than {FTE_FILES_PER_TRANSFER_MAX} files in one transfer"
            ));
        }
    }
    Ok(())
}

/// The files an item names, each with its name relative to the destination directory.
fn expand(it: &Item, sandbox: &Sandbox) -> Result<Vec<(PathBuf, String)>> {
    let src = Path::new(&it.source);
    sandbox.check(src, false).map_err(FteError)?;
    let name = src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.contains('*') || name.contains('?') {
        let parent = src.parent().unwrap_or(Path::new("."));
        let mut out = Vec::new();
        let rd = std::fs::read_dir(parent)
            .map_err(|e| FteError(format!("{}: {e}", parent.display())))?;
        for e in rd.filter_map(|e| e.ok()) {
            let n = e.file_name().to_string_lossy().into_owned();
            if e.path().is_file() && wildcard_match(name.as_bytes(), n.as_bytes()) {
                out.push((e.path(), n));
            }
        }
        out.sort();
        if out.is_empty() {
            return err(format!("{}: no file matches", it.source));
        }
        return Ok(out);
    }
    if src.is_dir() {
        if !it.recursive {
            return err(format!("{} is a directory: transfer it with -r", it.source));
        }
        let mut out = Vec::new();
        walk(src, &name, &mut out)?;
        return Ok(out);
    }
    if !src.is_file() {
        return err(format!("{}: no such file", it.source));
    }
    Ok(vec![(src.to_path_buf(), name)])
}

fn jobs(req: &TransferRequest, sandbox: &Sandbox) -> Result<Vec<FileJob>> {
    let mut v = Vec::new();
    for (i, it) in req.items.iter().enumerate() {
        let files = expand(it, sandbox)?;
        if !it.dest_is_dir && files.len() != 1 {
            return err(format!(
                "{} names {} files: give a destination directory (-dd)",
                it.source,
                files.len()
            ));
        }
        for (src, rel) in files {
            if it.dest_is_dir && !safe_relative(&rel) {
                return err(format!(
                    "{rel}: a name must stay under the destination directory"
                ));
            }
            v.push(FileJob {
                src,
                dir: it.dest_is_dir.then(|| it.dest.clone()),
                path: if it.dest_is_dir { rel } else { it.dest.clone() },
                item: i,
            });
            if v.len() > FTE_FILES_PER_TRANSFER_MAX {
                return err(format!(
                    "more than {FTE_FILES_PER_TRANSFER_MAX} files in one transfer"
                ));
            }
        }
    }
    Ok(v)
}

fn s(v: &str) -> PropertyValue {
    PropertyValue::String(v.to_string())
}

/// The final answer to whoever asked for the transfer (fteCreateTransfer -w), if it asked.
pub fn reply(c: &Connection, req_md: &MessageDescriptor, ok: bool, text: &str) {
    reply_to(
        c,
        &req_md.reply_to_q,
        &req_md.reply_to_qmgr,
        req_md.msg_id,
        ok,
        text,
    );
}

fn reply_to(c: &Connection, q: &str, qm: &str, msg_id: MsgId, ok: bool, text: &str) {
    if q.is_empty() {
        return;
    }
    let md = MessageDescriptor {
        correl_id: msg_id,
        persistence: Persistence::NotPersistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    let mut props = Properties::default();
    props.set(prop::OK, PropertyValue::Bool(ok));
    let put = || -> std::result::Result<(), MqError> {
        let h = c.open_qmgr(q, qm, open::OUTPUT)?;
        c.put(
            &h,
            &md,
            &props,
            Bytes::from(text.to_string()),
            &PutOptions::default(),
        )?;
        c.close(&h, 0)
    };
    if let Err(e) = put() {
        eprintln!("fte: the reply to {q} could not be put: {e}");
    }
}

/// Whether an error means that the agent lost its queue manager: the agent then reconnects and
/// resumes its transfers, which do not fail.
pub fn lost(e: &MqError) -> bool {
    matches!(
        e.reason,
        Reason::CONNECTION_BROKEN
            | Reason::HCONN_ERROR
            | Reason::Q_MGR_NOT_AVAILABLE
            | Reason::Q_MGR_QUIESCING
            | Reason::Q_MGR_STOPPING
            | Reason::CONNECTION_QUIESCING
            | Reason::CONNECTION_STOPPING
    )
}

/// The transfers this agent is sending, and those of them asked to stop (fteCancelTransfer).
static RUNNING: Mutex<Option<HashMap<MsgId, bool>>> = Mutex::new(None);

fn running() -> std::sync::MutexGuard<'static, Option<HashMap<MsgId, bool>>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks a transfer this agent is sending to stop; false if there is no such transfer.
pub fn request_cancel(tid: MsgId) -> bool {
    match running().as_mut().and_then(|m| m.get_mut(&tid)) {
        Some(c) => {
            *c = true;
            true
        }
        None => false,
    }
}

fn cancelled(tid: MsgId) -> bool {
    running()
        .as_ref()
        .and_then(|m| m.get(&tid).copied())
        .unwrap_or(false)
}

/// Why a pass over the files stopped before all had their result.
enum Halt {
    /// No answer from the receiver for FTE_STALL_MS: resume from its checkpoint.
    Stall,
    /// fteCancelTransfer asked the transfer to stop.
    Cancelled,
    Fail(FteError),
}

impl From<FteError> for Halt {
    fn from(e: FteError) -> Self {
        Halt::Fail(e)
    }
}

impl From<MqError> for Halt {
    fn from(e: MqError) -> Self {
        if lost(&e) {
            crate::agent::reconnect();
        }
        Halt::Fail(e.into())
    }
}

/// Why a file written to while it was being sent fails.
const SOURCE_WRITTEN: &str = "the source file was written to while it was being sent (its size \
                              or modification time moved): not sent torn";

/// A source file's identity: its size and modification time (ns). A file whose identity changed
/// since the transfer began is not resumed.
pub fn ident_of(m: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (
        m.len() as i64,
        m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(1)
}

struct Link<'a> {
    c: &'a Connection,
    p: &'a AgentProps,
    /// The transfer log's event, kept up to date.
    ev: Event,
    last_log: Instant,
    data: ObjectHandle,
    acks: ObjectHandle,
    state: ObjectHandle,
    rec: Outbound,
    tid: MsgId,
    /// 0 for the first pass; each resume sends under a new, larger epoch, and both sides drop
    /// what belongs to an older one.
    epoch: i64,
    sent: u64,
    acked: u64,
    results: Vec<Option<(bool, String)>>,
    /// Bytes of each file the receiver acknowledged.
    confirmed: Vec<u64>,
    /// Per file, the end of the data this agent process put so far (in flight or received).
    put_high: Vec<u64>,
    /// Each file's size when the transfer (or this agent) started.
    sizes: Vec<u64>,
    idents: Vec<Option<(i64, i64)>>,
    /// Each file's device and inode numbers as this agent process opened it: a source is
    /// deleted only while its path still names that file.
    file_ids: Vec<Option<(u64, u64)>>,
    /// The receiver's answer to a resume: file, offset to send from, bytes it had received.
    ready: Option<(i64, u64, u64)>,
    /// Bytes the receiver had acknowledged and was sent again after a resume.
    resent: u64,
    resumes: u64,
    last_answer: Instant,
    /// Puts made without waiting for their answer since the last MQSTAT.
    unchecked: u64,
    /// MQSTAT after this many of them (the window).
    check_every: u64,
}

impl Link<'_> {
    /// Puts a message to the receiver without waiting for the queue manager's answer (the
    /// messages are non-persistent and outside syncpoint: an answer per chunk would only cost a
    /// round trip). What became of them is asked with MQSTAT at least once per window of them
    /// and before the transfer waits for its results ([`Link::check_puts`]).
    fn put(&mut self, mut props: Properties, body: Bytes) -> std::result::Result<(), Halt> {
        let md = MessageDescriptor {
            correl_id: self.tid,
            persistence: Persistence::NotPersistent,
            ..Default::default()
        };
        props.set(prop::EPOCH, PropertyValue::Int(self.epoch));
        let po = PutOptions {
            response: pmo::ASYNC_RESPONSE,
            ..PutOptions::default()
        };
        self.c.put(&self.data, &md, &props, body, &po)?;
        self.unchecked += 1;
        if self.unchecked >= self.check_every {
            self.check_puts()?;
        }
        Ok(())
    }

    /// MQSTAT: whether every put since the last check arrived on the data queue (or its
    /// transmission queue). A failed one fails the transfer, as a failed synchronous put would:
    /// a chunk is never lost silently.
    fn check_puts(&mut self) -> std::result::Result<(), Halt> {
        if self.unchecked == 0 {
            return Ok(());
        }
        let st = self.c.stat()?;
        self.unchecked = 0;
        if st.put_failure_count > 0 {
            return Err(MqError::new(
                st.reason,
                format!(
                    "{} of the transfer's messages could not be put to {}",
                    st.put_failure_count,
                    if st.object_name.is_empty() {
                        self.data.name.as_str()
                    } else {
                        st.object_name.as_str()
                    }
                ),
            )
            .into());
        }
        Ok(())
    }

    /// Tells the receiver that the transfer has all its results: it forgets the transfer.
    fn done(&mut self) {
        let mut props = Properties::default();
        props.set(prop::KIND, s("done"));
        let _ = self.put(props, Bytes::new());
    }

    /// Tells the receiver to forget a file: its `.part` goes.
    fn cancel(&mut self, index: usize, f: &FileJob) -> std::result::Result<(), Halt> {
        let mut props = Properties::default();
        props.set(prop::KIND, s("cancel"));
        props.set(prop::INDEX, PropertyValue::Int(index as i64));
        props.set(prop::PATH, s(&f.path));
        if let Some(d) = &f.dir {
            props.set(prop::DIR, s(d));
        }
        self.put(props, Bytes::new())
    }

    /// Takes one answer from the receiver, waiting up to FTE_STALL_MS.
    fn pump(&mut self) -> std::result::Result<(), Halt> {
        if cancelled(self.tid) {
            return Err(Halt::Cancelled);
        }
        let g = GetOptions {
            wait: Wait::Ms(FTE_STALL_MS),
            match_correl_id: Some(self.tid),
            max_len: u32::MAX,
            ..Default::default()
        };
        let m = match self.c.get(&self.acks, &g) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                // A put that failed explains the silence better than a stall.
                self.check_puts()?;
                return Err(Halt::Stall);
            }
            Err(e) => return Err(e.into()),
        };
        self.last_answer = Instant::now();
        let int = |n: &str| match m.props.get(n) {
            Some(PropertyValue::Int(v)) => *v,
            _ => -1,
        };
        let i = int(prop::INDEX);
        let epoch = match m.props.get(prop::EPOCH) {
            Some(PropertyValue::Int(v)) => *v,
            _ => 0,
        };
        match m.props.get(prop::KIND) {
            Some(PropertyValue::String(k)) if k == "ack" && epoch == self.epoch => {
                self.acked = self.acked.max(int(prop::ACKED).max(0) as u64);
                if i >= 0 && (i as usize) < self.confirmed.len() {
                    let c = &mut self.confirmed[i as usize];
                    *c = (*c).max(int(prop::OFFSET).max(0) as u64);
                }
                if self.last_log.elapsed().as_millis() as u64 >= FTE_PROGRESS_INTERVAL_MS {
                    self.last_log = Instant::now();
                    self.ev.kind = "progress";
                    self.ev.bytes = self.bytes_done();
                    self.ev.resumes = self.resumes;
                    self.ev.resent_bytes = self.resent;
                    translog::publish(self.c, self.p, &self.ev);
                }
            }
            Some(PropertyValue::String(k)) if k == "ready" && epoch == self.epoch => {
                self.ready = Some((
                    i,
                    int(prop::OFFSET).max(0) as u64,
                    int(prop::RECEIVED).max(0) as u64,
                ));
            }
            Some(PropertyValue::String(k)) if k == "result" => {
                let ok = matches!(m.props.get(prop::OK), Some(PropertyValue::Bool(true)));
                let why = String::from_utf8_lossy(&m.body).into_owned();
                if i >= 0 && (i as usize) < self.results.len() && self.results[i as usize].is_none()
                {
                    self.results[i as usize] = Some((ok, why));
                    self.record_progress()?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Bytes at the destination: whole files that arrived, and what was acknowledged of others.
    fn bytes_done(&self) -> u64 {
        self.results
            .iter()
            .zip(&self.confirmed)
            .zip(&self.sizes)
            .map(|((r, c), size)| match r {
                Some((true, _)) => *size,
                _ => *c,
            })
            .sum()
    }

    /// Records on the state queue how many files (from the first) have their result.
    fn record_progress(&mut self) -> std::result::Result<(), Halt> {
        let done = self.results.iter().take_while(|r| r.is_some()).count();
        if done <= self.rec.done {
            return Ok(());
        }
        for i in self.rec.done..done {
            if let Some((false, why)) = &self.results[i] {
                self.rec
                    .failed
                    .push_str(&format!("{i}\t{}\n", why.replace('\n', " ")));
            }
        }
        self.rec.done = done;
        self.record_counts()
    }

    /// Records on the state queue the resumes and the bytes re-sent so far, so that a sending
    /// agent started again goes on counting from them.
    fn record_counts(&mut self) -> std::result::Result<(), Halt> {
        self.rec.resent = self.resent;
        self.rec.resumes = self.resumes;
        self.rec.write(self.c, &self.state, false)?;
        Ok(())
    }

    /// Sends every file without a result yet (from the receiver's resume offset after a
    /// resume), then waits for all results.
    fn pass(
        &mut self,
        p: &AgentProps,
        req: &TransferRequest,
        files: &[FileJob],
    ) -> std::result::Result<(), Halt> {
        self.sent = 0;
        self.acked = 0;
        let resuming = self.epoch != 0;
        let window = p.outstanding_chunks_max() as u64;
        let mut buf = vec![0u8; p.agent_chunk_size];
        let mut blocks = Blocks::default();
        for (i, f) in files.iter().enumerate() {
            if self.results[i].is_some() {
                continue;
            }
            let it = &req.items[f.item];
            // Each file found under a directory or by a wildcard, and again at a resume: a
            // link inside the sandbox may lead out of it.
            if let Err(why) = p.sandbox.check(&f.src, false) {
                self.results[i] = Some((false, why));
                self.cancel(i, f)?;
                continue;
            }
            let opened = std::fs::File::open(&f.src).and_then(|fl| {
                let m = fl.metadata()?;
                Ok((fl, m))
            });
            let (mut file, meta) = match opened {
                Ok(x) => x,
                Err(e) => {
                    self.results[i] = Some((false, format!("{}: {e}", f.src.display())));
                    self.cancel(i, f)?;
                    continue;
                }
            };
            let ident = ident_of(&meta);
            match self.idents[i] {
                Some(before) if before != ident => {
                    self.results[i] = Some((
                        false,
                        "the source file changed during the transfer (size or modification \
                         time differ): not resumed"
                            .into(),
                    ));
                    self.cancel(i, f)?;
                    continue;
                }
                _ => self.idents[i] = Some(ident),
            }
            let file_id = {
                use std::os::unix::fs::MetadataExt;
                (meta.dev(), meta.ino())
            };
            self.file_ids[i] = Some(file_id);
            let mut props = Properties::default();
            props.set(prop::KIND, s("start"));
            props.set(prop::INDEX, PropertyValue::Int(i as i64));
            props.set(prop::PATH, s(&f.path));
            if let Some(d) = &f.dir {
                props.set(prop::DIR, s(d));
            }
            props.set(
                prop::EXIST,
                s(match it.exist {
                    Exist::Error => "error",
                    Exist::Overwrite => "overwrite",
                }),
            );
            props.set(prop::METHOD, s(it.checksum.name()));
            props.set(prop::SIZE, PropertyValue::Int(ident.0));
            props.set(prop::MTIME, PropertyValue::Int(ident.1));
            props.set(prop::SRC_BOOT, s(crate::boot_id()));
            props.set(prop::SRC_DEV, s(&file_id.0.to_string()));
            props.set(prop::SRC_INO, s(&file_id.1.to_string()));
            props.set(prop::REPLY_Q, s(&queues::reply(&p.agent_name)));
            props.set(prop::REPLY_QM, s(&p.agent_qmgr));
            props.set(prop::FRAME, PropertyValue::Int(p.agent_frame_size as i64));
            props.set(
                prop::CHECKPOINT,
                PropertyValue::Int(p.agent_checkpoint_interval as i64),
            );
            props.set(prop::RESUME, PropertyValue::Bool(resuming));
            self.put(props, Bytes::new())?;
            let mut offset = 0u64;
            if resuming {
                self.ready = None;
                loop {
                    if self.results[i].is_some() {
                        break;
                    }
                    if let Some((ix, off, received)) = self.ready {
                        if ix == i as i64 {
                            offset = off.min(ident.0.max(0) as u64);
                            // Sent again: what the receiver held or acknowledged, and what
                            // was put and lost on the way (a queue manager or link down).
                            let had = self.confirmed[i].max(received).max(self.put_high[i]);
                            self.resent += had.saturating_sub(offset);
                            eprintln!(
                                "fte agent {}: file {i} resumes at offset {offset}: {} bytes \
                                 sent again",
                                self.p.agent_name,
                                had.saturating_sub(offset)
                            );
                            // Counted once: a later resume counts from here.
                            self.put_high[i] = offset;
                            self.confirmed[i] = self.confirmed[i].min(offset);
                            self.record_counts()?;
                            break;
                        }
                    }
                    self.pump()?;
                }
                if self.results[i].is_some() {
                    continue;
                }
            }
            let mut conv = match text_converter(it) {
                Ok(c) => c,
                Err(e) => {
                    self.results[i] = Some((false, e.0));
                    self.cancel(i, f)?;
                    continue;
                }
            };
            let mut h = Hasher::new(it.checksum);
            // The bytes the receiver already holds (`offset` of the stream sent, converted in
            // text mode) count in the checksum: read and converted again here, not sent again.
            let mut skip = offset;
            loop {
                let rd = |e: std::io::Error| FteError(format!("{}: {e}", f.src.display()));
                // A binary chunk is read into the buffer that goes out as the message body
                // (no copy on the way); text is converted into a new one.
                let (block, n) = match conv.as_mut() {
                    None => {
                        // Read whole (read_to_end would read it in growing small pieces).
                        let mut v = blocks.take(p.agent_chunk_size);
                        let n = read_full(&mut file, &mut v).map_err(rd)?;
                        v.truncate(n);
                        (blocks.lend(v), n)
                    }
                    Some(cv) => {
                        let n = read_full(&mut file, &mut buf).map_err(rd)?;
                        let mut converted = Vec::with_capacity(n + n / 8);
                        cv.push(&buf[..n], &mut converted);
                        if n == 0 {
                            cv.finish(&mut converted);
                        }
                        (Bytes::from(converted), n)
                    }
                };
                h.update(&block);
                let k = (skip as usize).min(block.len());
                skip -= k as u64;
                let mut rest = block.slice(k..);
                while !rest.is_empty() {
                    let piece = rest.split_to(rest.len().min(p.agent_chunk_size));
                    while self.sent - self.acked >= window {
                        self.pump()?;
                    }
                    if cancelled(self.tid) {
                        return Err(Halt::Cancelled);
                    }
                    let corrupt = test_hook_corrupt(self.sent);
                    let mut props = Properties::default();
                    props.set(prop::KIND, s("chunk"));
                    props.set(prop::INDEX, PropertyValue::Int(i as i64));
                    props.set(prop::OFFSET, PropertyValue::Int(offset as i64));
                    let len = piece.len() as u64;
                    let body = if corrupt {
                        let mut b = piece.to_vec();
                        b[0] ^= 0xff;
                        Bytes::from(b)
                    } else {
                        piece
                    };
                    self.put(props, body)?;
                    self.sent += 1;
                    offset += len;
                    self.put_high[i] = self.put_high[i].max(offset);
                }
                if n == 0 {
                    break;
                }
            }
            // Read to its end: a source written meanwhile (its size or modification time moved
            // since it was opened) would arrive torn, the checksum taken over the mix. It fails.
            let now = file
                .metadata()
                .map(|m| ident_of(&m))
                .map_err(|e| FteError(format!("{}: {e}", f.src.display())))?;
            if self.idents[i] != Some(now) {
                self.results[i] = Some((false, SOURCE_WRITTEN.into()));
                self.cancel(i, f)?;
                continue;
            }
            let mut props = Properties::default();
            props.set(prop::KIND, s("end"));
            props.set(prop::INDEX, PropertyValue::Int(i as i64));
            props.set(prop::SIZE, PropertyValue::Int(offset as i64));
            props.set(prop::DIGEST, s(&h.hex()));
            self.put(props, Bytes::new())?;
        }
        self.check_puts()?;
        while self.results.iter().any(|r| r.is_none()) {
            self.pump()?;
        }
        Ok(())
    }
}

/// A test hook: with FERRYMQ_FTE_TEST_CORRUPT_CHUNK=N in the sending agent's environment, the
/// N-th chunk of each pass (from 0) leaves with its first byte inverted, after the checksum saw
/// it, as a corruption in flight would.
fn test_hook_corrupt(chunk: u64) -> bool {
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    *AT.get_or_init(|| {
        std::env::var("FERRYMQ_FTE_TEST_CORRUPT_CHUNK")
            .ok()
            .and_then(|v| v.parse().ok())
    }) == Some(chunk)
}

/// The converter of a text-mode item (none in binary mode).
fn text_converter(it: &Item) -> Result<Option<Converter>> {
    if it.mode != Mode::Text {
        return Ok(None);
    }
    Ok(Some(Converter::new(
        Encoding::parse(&it.source_encoding)?,
        Encoding::parse(&it.dest_encoding)?,
        Eol::parse(&it.dest_eol)?,
    )))
}

/// Sends a whole transfer (a new one, or one found on the state queue when the agent started:
/// `restarted`), answers the requester and removes the transfer's record. Errors end up in the
/// answer.
pub fn run(c: &Connection, p: &AgentProps, rec: Outbound, restarted: bool) {
    let state = match c.open(
        &queues::state(&p.agent_name),
        open::INPUT_SHARED | open::OUTPUT | open::BROWSE,
    ) {
        Ok(h) => h,
        Err(e) => {
            if lost(&e) {
                crate::agent::reconnect();
            }
            eprintln!("fte agent {}: state queue: {e}", p.agent_name);
            return;
        }
    };
    let (q, qm, id, key) = (
        rec.reply_q.clone(),
        rec.reply_qm.clone(),
        rec.request_msg_id,
        crate::state::outbound_key(rec.tid),
    );
    let now_running = {
        let mut r = running();
        let m = r.get_or_insert_with(HashMap::new);
        m.insert(rec.tid, false);
        m.len()
    };
    eprintln!(
        "fte agent {}: transfer {} started ({now_running} running, at most {})",
        p.agent_name,
        crate::state::hex(&rec.tid),
        p.max_source_transfers
    );
    let tid = rec.tid;
    let began = Instant::now();
    let mut ev = Event {
        tid: crate::state::hex(&rec.tid),
        source_agent: p.agent_name.clone(),
        source_qmgr: p.agent_qmgr.clone(),
        ..Default::default()
    };
    let (ok, text) =
        match TransferRequest::from_xml_with_default(&rec.request_xml, rec.checksum_default) {
            Ok(req) => {
                ev.dest_agent = req.dest_agent.clone();
                ev.dest_qmgr = req.dest_qmgr.clone();
                ev.job = req.job_name.clone();
                match send(c, p, &req, rec, state.clone(), restarted, &mut ev) {
                    Ok((ok, text)) => (ok, text),
                    Err(e) => (false, format!("transfer failed: {e}")),
                }
            }
            Err(e) => (false, format!("transfer failed: {e}")),
        };
    eprintln!("fte agent {}: {text}", p.agent_name);
    if let Some(m) = running().as_mut() {
        m.remove(&tid);
    }
    if ev.kind == "cancelled" {
        ev.result_code = 2;
    } else {
        ev.kind = if ok { "completed" } else { "failed" };
        ev.result_code = if ok { 0 } else { 1 };
    }
    ev.text = text.clone();
    ev.duration_ms = began.elapsed().as_millis() as u64;
    translog::publish(c, p, &ev);
    reply_to(c, &q, &qm, id, ok, &text);
    if let Err(e) = crate::state::remove(c, &state, key) {
        if lost(&e) {
            crate::agent::reconnect();
        }
    }
}

fn send(
    c: &Connection,
    p: &AgentProps,
    req: &TransferRequest,
    rec: Outbound,
    state: ObjectHandle,
    restarted: bool,
    ev: &mut Event,
) -> Result<(bool, String)> {
    let files = jobs(req, &p.sandbox)?;
    ev.files = files.len();
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(&f.src).map(|m| m.len()).unwrap_or(0))
        .collect();
    ev.total_bytes = sizes.iter().sum();
    ev.kind = if restarted { "progress" } else { "started" };
    if restarted {
        ev.text = "resumed after the agent restarted".into();
    }
    translog::publish(c, p, ev);
    ev.text.clear();
    let dest_qm = if req.dest_qmgr.is_empty() || req.dest_qmgr == p.agent_qmgr {
        String::new()
    } else {
        req.dest_qmgr.clone()
    };
    let halt = |h: Halt| match h {
        Halt::Fail(e) => e,
        Halt::Stall => FteError("no answer".into()),
        Halt::Cancelled => FteError("cancelled".into()),
    };
    let data = c
        .open_qmgr(&queues::data(&req.dest_agent), &dest_qm, open::OUTPUT)
        .map_err(|e| halt(e.into()))?;
    let acks = c
        .open(&queues::reply(&p.agent_name), open::INPUT_SHARED)
        .map_err(|e| halt(e.into()))?;
    let mut results = vec![None; files.len()];
    for r in results.iter_mut().take(rec.done) {
        *r = Some((true, String::new()));
    }
    for line in rec.failed.lines() {
        if let Some((i, why)) = line.split_once('\t') {
            if let Some(r) = i.parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
                *r = Some((false, why.to_string()));
            }
        }
    }
    let mut l = Link {
        c,
        p,
        ev: ev.clone(),
        last_log: Instant::now(),
        data,
        acks,
        state,
        tid: rec.tid,
        epoch: if restarted { now_ms() } else { 0 },
        sent: 0,
        acked: 0,
        results,
        confirmed: vec![0; files.len()],
        put_high: vec![0; files.len()],
        sizes,
        idents: vec![None; files.len()],
        file_ids: vec![None; files.len()],
        ready: None,
        resent: rec.resent,
        resumes: rec.resumes + u64::from(restarted),
        rec,
        last_answer: Instant::now(),
        unchecked: 0,
        check_every: (p.outstanding_chunks_max() as u64).max(1),
    };
    loop {
        match l.pass(p, req, &files) {
            Ok(()) => break,
            Err(Halt::Fail(e)) => return Err(e),
            Err(Halt::Cancelled) => {
                let mut n = 0;
                for (i, f) in files.iter().enumerate() {
                    if l.results[i].is_none() {
                        // The receiver removes the file's `.part`; the source stays.
                        let _ = l.cancel(i, f);
                        n += 1;
                    }
                }
                l.done();
                let _ = c.close(&l.data, 0);
                let _ = c.close(&l.acks, 0);
                ev.kind = "cancelled";
                ev.bytes = l.bytes_done();
                return Ok((
                    false,
                    format!(
                        "transfer cancelled: {n} of {} files not transferred",
                        files.len()
                    ),
                ));
            }
            Err(Halt::Stall) => {
                let waited = l.last_answer.elapsed().as_secs();
                if p.transfer_recovery_timeout >= 0 && waited > p.transfer_recovery_timeout as u64 {
                    return err(format!(
                        "the destination agent did not answer for {waited} s \
                         (transferRecoveryTimeout {} s)",
                        p.transfer_recovery_timeout
                    ));
                }
                l.epoch = now_ms().max(l.epoch + 1);
                l.resumes += 1;
                eprintln!(
                    "fte agent {}: no answer from {} for {} s: resuming from its checkpoint",
                    p.agent_name,
                    req.dest_agent,
                    FTE_STALL_MS / 1000
                );
            }
        }
    }
    l.done();
    ev.bytes = l.bytes_done();
    ev.resumes = l.resumes;
    ev.resent_bytes = l.resent;
    let bytes = ev.total_bytes;
    let mut failed = Vec::new();
    for ((f, r), sent) in files.iter().zip(&l.results).zip(&l.file_ids) {
        match r {
            Some((true, _)) if req.items[f.item].disposition == Disposition::Delete => {
                // Only the file that was sent: if its path names another file now (replaced
                // meanwhile, or the destination written onto it), that one stays.
                let now = crate::file_id(&f.src);
                if sent.is_some() && now.is_some() && now != *sent {
                    failed.push(format!(
                        "{}: arrived, but not deleted: the path names another file than the \
                         one sent",
                        f.src.display()
                    ));
                } else if let Err(e) = std::fs::remove_file(&f.src) {
                    failed.push(format!(
                        "{}: arrived, but not deleted: {e}",
                        f.src.display()
                    ));
                }
            }
            Some((true, _)) => {}
            Some((false, why)) => failed.push(format!("{}: {why}", f.src.display())),
            None => {}
        }
    }
    let _ = c.close(&l.data, 0);
    let _ = c.close(&l.acks, 0);
    let tail = format!("resumed {} times, {} bytes re-sent", l.resumes, l.resent);
    if failed.is_empty() {
        Ok((
            true,
            format!(
                "transfer complete: {} files, {bytes} bytes; {tail}",
                files.len()
            ),
        ))
    } else {
        Ok((
            false,
            format!(
                "transfer failed: {} of {} files: {}; {tail}",
                failed.len(),
                files.len(),
                failed.join("; ")
            ),
        ))
    }
}

/// The buffers binary chunks are read into, used again once the chunk they held has been
/// written to the socket (nothing else holds them then) instead of allocating and zeroing
/// a new one per chunk.
#[derive(Default)]
struct Blocks {
    /// Buffers lent out as chunks, oldest first; at most [`Blocks::KEPT`].
    lent: VecDeque<Bytes>,
}

impl Blocks {
    const KEPT: usize = 8;

    /// A buffer of `size` bytes: the oldest lent one that came back, else a new one.
    fn take(&mut self, size: usize) -> BytesMut {
        if let Some(at) = self.lent.iter().position(|b| b.is_unique()) {
            if let Some(Ok(mut b)) = self.lent.remove(at).map(Bytes::try_into_mut) {
                if b.capacity() >= size {
                    // Its bytes are read over; only a short last chunk leaves room to fill.
                    b.resize(size, 0);
                    return b;
                }
            }
        }
        BytesMut::zeroed(size)
    }

    /// Lends `b` out as a chunk, to be taken again once it comes back.
    fn lend(&mut self, b: BytesMut) -> Bytes {
        let b = b.freeze();
        if self.lent.len() >= Self::KEPT {
            self.lent.pop_front();
        }
        self.lent.push_back(b.clone());
        b
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let k = f.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_buffer_is_used_again_only_once_nothing_else_holds_it() {
        let mut blocks = Blocks::default();
        let mut a = blocks.take(8);
        assert_eq!(a.len(), 8);
        a.copy_from_slice(b"abcdefgh");
        a.truncate(5);
        let a = blocks.lend(a);
        let at = a.as_ptr();
        // Still held (being written): a new buffer.
        let b = blocks.take(8);
        assert_ne!(b.as_ptr(), at);
        assert_eq!(&b[..], &[0u8; 8]);
        let b = blocks.lend(b);
        drop(a);
        // Back: the same allocation, as long as asked for, what it held unchanged.
        let c = blocks.take(8);
        assert_eq!(c.as_ptr(), at);
        assert_eq!(&c[..], b"abcde\0\0\0");
        // One that came back is found behind one still held.
        let c = blocks.lend(c);
        let c_at = c.as_ptr();
        drop(c);
        assert_eq!(blocks.take(8).as_ptr(), c_at);
        drop(b);
        // At most KEPT are remembered.
        let held: Vec<Bytes> = (0..10)
            .map(|_| {
                let m = blocks.take(8);
                blocks.lend(m)
            })
            .collect();
        assert_eq!(blocks.lent.len(), Blocks::KEPT);
        drop(held);
    }

    #[test]
    fn names_that_would_escape_the_destination_are_refused() {
        assert!(safe_relative("a/b.txt"));
        assert!(!safe_relative("../etc/passwd"));
        assert!(!safe_relative("/etc/passwd"));
        assert!(!safe_relative("a/../../b"));
        assert!(wildcard_match(b"*.txt", b"a.txt"));
        assert!(!wildcard_match(b"?.txt", b"ab.txt"));
    }
}
