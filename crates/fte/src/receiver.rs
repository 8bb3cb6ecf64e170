//! The receiving side: reads the agent's data queue, writes each file to a `.part` beside its
//! destination by offset, acknowledges every frame of chunks, and every checkpoint interval
//! syncs the `.part` and records the progress as one persistent message per transfer on the
//! agent's state queue (the previous one is removed in the same unit of work). At the end it
//! checks the checksum, syncs the file, renames it into place and syncs the directory.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{Message, ObjectHandle};
use ferrymq_types::limits::{FTE_CHUNK_SIZE_MAX_BYTES, FTE_RECEIVING_TRANSFERS_MAX};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue, Reason};

use crate::checksum::{self, Method};
use crate::props::AgentProps;
use crate::sender::safe_relative;
use crate::{prop, queues, Result};

struct Incoming {
    final_path: PathBuf,
    part: PathBuf,
    file: File,
    method: Method,
}

struct Transfer {
    reply_q: String,
    reply_qm: String,
    frame: u64,
    checkpoint: u64,
    chunks: u64,
    files: HashMap<i64, Incoming>,
    /// Files refused at their start: their chunks are dropped.
    refused: Vec<i64>,
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

pub fn run(c: Connection, p: &AgentProps) -> Result<()> {
    let data = c.open(&queues::data(&p.agent_name), open::INPUT_EXCLUSIVE)?;
    let state = c.open(
        &queues::state(&p.agent_name),
        open::INPUT_SHARED | open::OUTPUT,
    )?;
    let mut transfers: HashMap<MsgId, Transfer> = HashMap::new();
    let g = GetOptions {
        wait: Wait::Ms(500),
        max_len: (FTE_CHUNK_SIZE_MAX_BYTES + 64 * 1024) as u32,
        ..Default::default()
    };
    loop {
        let m = match c.get(&data, &g) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => continue,
            Err(e) => return Err(e.into()),
        };
        let tid = m.md.correl_id;
        match str_prop(&m, prop::KIND) {
            "start" => {
                if !transfers.contains_key(&tid) && transfers.len() >= FTE_RECEIVING_TRANSFERS_MAX {
                    continue;
                }
                let t = transfers.entry(tid).or_insert_with(|| Transfer {
                    reply_q: str_prop(&m, prop::REPLY_Q).to_string(),
                    reply_qm: str_prop(&m, prop::REPLY_QM).to_string(),
                    frame: int_prop(&m, prop::FRAME).max(1) as u64,
                    checkpoint: int_prop(&m, prop::CHECKPOINT).max(1) as u64,
                    chunks: 0,
                    files: HashMap::new(),
                    refused: Vec::new(),
                });
                let index = int_prop(&m, prop::INDEX);
                match start_file(&m) {
                    Ok(inc) => {
                        t.files.insert(index, inc);
                    }
                    Err(why) => {
                        t.refused.push(index);
                        answer(&c, tid, t, "result", index, false, &why);
                    }
                }
            }
            "chunk" => {
                let Some(t) = transfers.get_mut(&tid) else {
                    continue;
                };
                let index = int_prop(&m, prop::INDEX);
                if let Some(inc) = t.files.get(&index) {
                    let off = int_prop(&m, prop::OFFSET).max(0) as u64;
                    if let Err(e) = inc.file.write_all_at(&m.body, off) {
                        let why = format!("{}: {e}", inc.part.display());
                        let inc = t.files.remove(&index);
                        if let Some(inc) = inc {
                            let _ = std::fs::remove_file(&inc.part);
                        }
                        t.refused.push(index);
                        answer(&c, tid, t, "result", index, false, &why);
                    }
                }
                t.chunks += 1;
                if t.chunks % (t.frame * t.checkpoint) == 0 {
                    if let Some(inc) = t.files.get(&index) {
                        let _ = inc.file.sync_data();
                        let off = int_prop(&m, prop::OFFSET).max(0) as u64 + m.body.len() as u64;
                        checkpoint(&c, &state, tid, index, off);
                    }
                }
                if t.chunks % t.frame == 0 {
                    let n = t.chunks.to_string();
                    answer(&c, tid, t, "ack", index, true, &n);
                }
            }
            "end" => {
                let Some(t) = transfers.get_mut(&tid) else {
                    continue;
                };
                let index = int_prop(&m, prop::INDEX);
                let n = t.chunks.to_string();
                answer(&c, tid, t, "ack", index, true, &n);
                if let Some(inc) = t.files.remove(&index) {
                    let digest = str_prop(&m, prop::DIGEST).to_string();
                    let (ok, why) = finish(inc, &digest);
                    clear_checkpoint(&c, &state, tid);
                    answer(&c, tid, t, "result", index, ok, &why);
                }
                // A transfer is forgotten once it has no file under way; a later file's start
                // makes a new entry.
                if t.files.is_empty() {
                    transfers.remove(&tid);
                }
            }
            _ => {}
        }
    }
}

fn start_file(m: &Message) -> std::result::Result<Incoming, String> {
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
    if final_path.exists() && str_prop(m, prop::EXIST) != "overwrite" {
        return Err(format!(
            "{} exists (give -de overwrite to replace it)",
            final_path.display()
        ));
    }
    if let Some(parent) = final_path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut part = final_path.clone().into_os_string();
    part.push(".part");
    let part = PathBuf::from(part);
    let file = File::create(&part).map_err(|e| format!("{}: {e}", part.display()))?;
    let method = Method::parse(str_prop(m, prop::METHOD)).unwrap_or_default();
    Ok(Incoming {
        final_path,
        part,
        file,
        method,
    })
}

fn finish(inc: Incoming, digest: &str) -> (bool, String) {
    if let Err(e) = inc.file.sync_all() {
        return (false, format!("{}: {e}", inc.part.display()));
    }
    drop(inc.file);
    let got = match checksum::of_file(&inc.part, inc.method) {
        Ok(d) => d,
        Err(e) => return (false, format!("{}: {e}", inc.part.display())),
    };
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
    if let Err(e) = std::fs::rename(&inc.part, &inc.final_path) {
        return (false, format!("{}: {e}", inc.final_path.display()));
    }
    if let Some(parent) = inc.final_path.parent() {
        if let Ok(d) = File::open(parent) {
            let _ = d.sync_all();
        }
    }
    (true, format!("{} written", inc.final_path.display()))
}

/// Replaces the transfer's checkpoint message on the state queue in one unit of work.
fn checkpoint(c: &Connection, state: &ObjectHandle, tid: MsgId, index: i64, offset: u64) {
    let r = (|| -> std::result::Result<(), ferrymq_types::MqError> {
        let g = GetOptions {
            syncpoint: Syncpoint::Yes,
            match_correl_id: Some(tid),
            max_len: u32::MAX,
            ..Default::default()
        };
        match c.get(state, &g) {
            Ok(_) => {}
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {}
            Err(e) => return Err(e),
        }
        let md = MessageDescriptor {
            correl_id: tid,
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let mut props = Properties::default();
        props.set(prop::INDEX, PropertyValue::Int(index));
        props.set(prop::OFFSET, PropertyValue::Int(offset as i64));
        let po = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..PutOptions::default()
        };
        c.put(state, &md, &props, Bytes::new(), &po)?;
        c.commit()
    })();
    if let Err(e) = r {
        let _ = c.backout();
        eprintln!("fte: a checkpoint could not be recorded: {e}");
    }
}

fn clear_checkpoint(c: &Connection, state: &ObjectHandle, tid: MsgId) {
    let g = GetOptions {
        match_correl_id: Some(tid),
        max_len: u32::MAX,
        ..Default::default()
    };
    while c.get(state, &g).is_ok() {}
}

fn answer(c: &Connection, tid: MsgId, t: &Transfer, kind: &str, index: i64, ok: bool, text: &str) {
    let md = MessageDescriptor {
        correl_id: tid,
        persistence: Persistence::NotPersistent,
        ..Default::default()
    };
    let mut props = Properties::default();
    props.set(prop::KIND, PropertyValue::String(kind.into()));
    props.set(prop::INDEX, PropertyValue::Int(index));
    props.set(prop::OK, PropertyValue::Bool(ok));
    if kind == "ack" {
        props.set(
            prop::ACKED,
            PropertyValue::Int(text.parse::<i64>().unwrap_or(0)),
        );
    }
    let r = (|| -> std::result::Result<(), ferrymq_types::MqError> {
        let h = c.open_qmgr(&t.reply_q, &t.reply_qm, open::OUTPUT)?;
        c.put(
            &h,
            &md,
            &props,
            Bytes::from(text.to_string()),
            &PutOptions::default(),
        )?;
        c.close(&h, 0)
    })();
    if let Err(e) = r {
        eprintln!("fte: an answer to {} could not be put: {e}", t.reply_q);
    }
}
