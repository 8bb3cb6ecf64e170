//! The sending side of a transfer: expands the request's sources (directories, recursively with
//! `recursive`, and `*`/`?` wildcards in the last name), then for each file sends a start
//! message, its chunks (non-persistent, at most window × frame unacknowledged) and an end message
//! with the file's checksum to the destination agent's data queue, and waits for the receiver's
//! result. Sources are deleted (disposition `delete`) only after their file arrived whole.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::limits::{FTE_ACK_WAIT_MS, FTE_FILES_PER_TRANSFER_MAX, FTE_FILE_NAME_LEN_MAX};
use ferrymq_types::options::{open, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue, Reason};

use crate::checksum::Hasher;
use crate::props::AgentProps;
use crate::request::{Disposition, Exist, Item, TransferRequest};
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

fn wildcard_match(pat: &[u8], s: &[u8]) -> bool {
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
fn expand(it: &Item) -> Result<Vec<(PathBuf, String)>> {
    let src = Path::new(&it.source);
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

fn jobs(req: &TransferRequest) -> Result<Vec<FileJob>> {
    let mut v = Vec::new();
    for (i, it) in req.items.iter().enumerate() {
        let files = expand(it)?;
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
    if req_md.reply_to_q.is_empty() {
        return;
    }
    let md = MessageDescriptor {
        correl_id: req_md.msg_id,
        persistence: Persistence::NotPersistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    let mut props = Properties::default();
    props.set(prop::OK, PropertyValue::Bool(ok));
    let put = || -> std::result::Result<(), ferrymq_types::MqError> {
        let h = c.open_qmgr(&req_md.reply_to_q, &req_md.reply_to_qmgr, open::OUTPUT)?;
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
        eprintln!(
            "fte: the reply to {} could not be put: {e}",
            req_md.reply_to_q
        );
    }
}

struct Link<'a> {
    c: &'a Connection,
    data: ObjectHandle,
    acks: ObjectHandle,
    tid: MsgId,
    acked: u64,
    sent: u64,
    results: Vec<Option<(bool, String)>>,
}

impl Link<'_> {
    fn put(&mut self, props: Properties, body: Bytes) -> Result<()> {
        let md = MessageDescriptor {
            correl_id: self.tid,
            persistence: Persistence::NotPersistent,
            ..Default::default()
        };
        self.c
            .put(&self.data, &md, &props, body, &PutOptions::default())?;
        Ok(())
    }

    /// Takes one acknowledgement or result from the receiver, waiting up to FTE_ACK_WAIT_MS.
    fn pump(&mut self) -> Result<()> {
        let g = GetOptions {
            wait: Wait::Ms(FTE_ACK_WAIT_MS),
            match_correl_id: Some(self.tid),
            max_len: u32::MAX,
            ..Default::default()
        };
        let m = match self.c.get(&self.acks, &g) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                return err(format!(
                    "the destination agent did not answer for {} s",
                    FTE_ACK_WAIT_MS / 1000
                ))
            }
            Err(e) => return Err(e.into()),
        };
        let int = |n: &str| match m.props.get(n) {
            Some(PropertyValue::Int(v)) => *v,
            _ => -1,
        };
        match m.props.get(prop::KIND) {
            Some(PropertyValue::String(k)) if k == "ack" => {
                self.acked = self.acked.max(int(prop::ACKED).max(0) as u64);
            }
            Some(PropertyValue::String(k)) if k == "result" => {
                let i = int(prop::INDEX);
                let ok = matches!(m.props.get(prop::OK), Some(PropertyValue::Bool(true)));
                let why = String::from_utf8_lossy(&m.body).into_owned();
                if i >= 0 && (i as usize) < self.results.len() {
                    self.results[i as usize] = Some((ok, why));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Sends a whole transfer and answers the requester. Errors end up in the answer.
pub fn run(c: &Connection, p: &AgentProps, req: &TransferRequest, req_md: &MessageDescriptor) {
    let (ok, text) = match send(c, p, req) {
        Ok((ok, text)) => (ok, text),
        Err(e) => (false, format!("transfer failed: {e}")),
    };
    eprintln!("fte agent {}: {text}", p.agent_name);
    reply(c, req_md, ok, &text);
}

fn send(c: &Connection, p: &AgentProps, req: &TransferRequest) -> Result<(bool, String)> {
    let files = jobs(req)?;
    let dest_qm = if req.dest_qmgr.is_empty() || req.dest_qmgr == p.agent_qmgr {
        String::new()
    } else {
        req.dest_qmgr.clone()
    };
    let data = c.open_qmgr(&queues::data(&req.dest_agent), &dest_qm, open::OUTPUT)?;
    let acks = c.open(&queues::reply(&p.agent_name), open::INPUT_SHARED)?;
    let mut tid = [0u8; 24];
    rand::Rng::fill(&mut rand::thread_rng(), &mut tid[..]);
    let mut l = Link {
        c,
        data,
        acks,
        tid,
        acked: 0,
        sent: 0,
        results: vec![None; files.len()],
    };
    let window = p.outstanding_chunks_max() as u64;
    let mut bytes = 0u64;
    for (i, f) in files.iter().enumerate() {
        let it = &req.items[f.item];
        let mut file = std::fs::File::open(&f.src)
            .map_err(|e| FteError(format!("{}: {e}", f.src.display())))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
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
        props.set(prop::SIZE, PropertyValue::Int(size as i64));
        props.set(prop::REPLY_Q, s(&queues::reply(&p.agent_name)));
        props.set(prop::REPLY_QM, s(&p.agent_qmgr));
        props.set(prop::FRAME, PropertyValue::Int(p.agent_frame_size as i64));
        props.set(
            prop::CHECKPOINT,
            PropertyValue::Int(p.agent_checkpoint_interval as i64),
        );
        l.put(props, Bytes::new())?;
        let mut h = Hasher::new(it.checksum);
        let mut offset = 0u64;
        let mut buf = vec![0u8; p.agent_chunk_size];
        loop {
            let n = read_full(&mut file, &mut buf)
                .map_err(|e| FteError(format!("{}: {e}", f.src.display())))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            while l.sent - l.acked >= window {
                l.pump()?;
            }
            let mut props = Properties::default();
            props.set(prop::KIND, s("chunk"));
            props.set(prop::INDEX, PropertyValue::Int(i as i64));
            props.set(prop::OFFSET, PropertyValue::Int(offset as i64));
            l.put(props, Bytes::copy_from_slice(&buf[..n]))?;
            l.sent += 1;
            offset += n as u64;
            bytes += n as u64;
        }
        let mut props = Properties::default();
        props.set(prop::KIND, s("end"));
        props.set(prop::INDEX, PropertyValue::Int(i as i64));
        props.set(prop::SIZE, PropertyValue::Int(offset as i64));
        props.set(prop::DIGEST, s(&h.hex()));
        l.put(props, Bytes::new())?;
    }
    while l.results.iter().any(|r| r.is_none()) {
        l.pump()?;
    }
    let mut failed = Vec::new();
    for (f, r) in files.iter().zip(&l.results) {
        match r {
            Some((true, _)) if req.items[f.item].disposition == Disposition::Delete => {
                if let Err(e) = std::fs::remove_file(&f.src) {
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
    if failed.is_empty() {
        Ok((
            true,
            format!("transfer complete: {} files, {bytes} bytes", files.len()),
        ))
    } else {
        Ok((
            false,
            format!(
                "transfer failed: {} of {} files: {}",
                failed.len(),
                files.len(),
                failed.join("; ")
            ),
        ))
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
    fn names_that_would_escape_the_destination_are_refused() {
        assert!(safe_relative("a/b.txt"));
        assert!(!safe_relative("../etc/passwd"));
        assert!(!safe_relative("/etc/passwd"));
        assert!(!safe_relative("a/../../b"));
        assert!(wildcard_match(b"*.txt", b"a.txt"));
        assert!(!wildcard_match(b"?.txt", b"ab.txt"));
    }
}
