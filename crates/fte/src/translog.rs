//! The transfer log: started / progress / completed / failed / cancelled events, published by the
//! sending agent under `SYSTEM.FTE/Log/<agent>/<transfer id>` on the coordination queue manager
//! (persistent, so the durable subscription fteSetupCoordination defines keeps them on
//! SYSTEM.FTE.LOG even when nobody else subscribed), as XML in the body (MQ's element names) and
//! JSON in the `fteJson` property. An agent on another queue manager than the coordination one
//! puts its events (over the channels) on that queue manager's stream queue SYSTEM.FTE, with the
//! topic below SYSTEM.FTE in the `MQTopicString` property, and the coordination queue manager's
//! queued publish interface publishes them there: subscribers on the coordination queue manager
//! see every agent's events, wherever the agent runs. Reading them back: `ferrymq fte log` and
//! `ferrymq fte status`.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue, Reason};
use quick_xml::escape::escape;
use serde_json::{json, Value};

use crate::props::AgentProps;
use crate::Result;

/// The queue the coordination queue manager keeps the log on.
pub const LOG_QUEUE: &str = "SYSTEM.FTE.LOG";
/// The coordination queue manager's stream queue: what is put there is published under
/// SYSTEM.FTE.
pub const STREAM_QUEUE: &str = "SYSTEM.FTE";
/// The property that names the topic (below the stream's) of a message put on a stream queue.
const STREAM_TOPIC_PROP: &str = "MQTopicString";
const JSON_PROP: &str = "fteJson";

/// One event of a transfer.
#[derive(Debug, Clone, Default)]
pub struct Event {
    /// started, progress, completed, failed or cancelled.
    pub kind: &'static str,
    pub tid: String,
    pub source_agent: String,
    pub source_qmgr: String,
    pub dest_agent: String,
    pub dest_qmgr: String,
    pub job: Option<String>,
    pub files: usize,
    pub bytes: u64,
    pub total_bytes: u64,
    /// 0 success, 1 failure (completed/failed only).
    pub result_code: i32,
    pub text: String,
    pub resumes: u64,
    pub resent_bytes: u64,
    pub duration_ms: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Event {
    pub fn to_json(&self, time_ms: u64) -> Value {
        json!({
            "event": self.kind,
            "transferId": self.tid,
            "timeMs": time_ms,
            "sourceAgent": self.source_agent,
            "sourceQMgr": self.source_qmgr,
            "destinationAgent": self.dest_agent,
            "destinationQMgr": self.dest_qmgr,
            "job": self.job,
            "files": self.files,
            "bytes": self.bytes,
            "totalBytes": self.total_bytes,
            "resultCode": self.result_code,
            "text": self.text,
            "resumes": self.resumes,
            "resentBytes": self.resent_bytes,
            "durationMs": self.duration_ms,
        })
    }

    pub fn to_xml(&self, time_ms: u64) -> String {
        let e = |s: &str| escape(s).into_owned();
        let mut x = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<transaction version=\"6.00\" ID=\"{}\" \
             agentRole=\"sourceAgent\"><action time=\"{time_ms}\">{}</action>\
             <sourceAgent agent=\"{}\" QMgr=\"{}\"/><destinationAgent agent=\"{}\" QMgr=\"{}\"/>",
            e(&self.tid),
            self.kind,
            e(&self.source_agent),
            e(&self.source_qmgr),
            e(&self.dest_agent),
            e(&self.dest_qmgr)
        );
        if matches!(self.kind, "completed" | "failed" | "cancelled") {
            x.push_str(&format!(
                "<status resultCode=\"{}\"><supplement>{}</supplement></status>",
                self.result_code,
                e(&self.text)
            ));
        }
        x.push_str(&format!(
            "<transferSet files=\"{}\" bytesSent=\"{}\" totalBytes=\"{}\"/>",
            self.files, self.bytes, self.total_bytes
        ));
        if let Some(j) = &self.job {
            x.push_str(&format!("<job><name>{}</name></job>", e(j)));
        }
        x.push_str("</transaction>\n");
        x
    }
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// Publishes an event. The log never stops a transfer: a failure is reported once.
pub fn publish(c: &Connection, p: &AgentProps, ev: &Event) {
    let t = now_ms();
    let mut props = Properties::default();
    props.set(JSON_PROP, PropertyValue::String(ev.to_json(t).to_string()));
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        format: "MQSTR".into(),
        ..Default::default()
    };
    let body = Bytes::from(ev.to_xml(t));
    let below = format!("Log/{}/{}", p.agent_name, ev.tid);
    let r = if p.coordination_qmgr.is_empty() || p.coordination_qmgr == p.agent_qmgr {
        let topic = format!("SYSTEM.FTE/{below}");
        c.put1_topic("", &topic, &md, &props, body, &PutOptions::default())
            .map(|_| ())
    } else {
        props.set(STREAM_TOPIC_PROP, PropertyValue::String(below));
        c.open_qmgr(STREAM_QUEUE, &p.coordination_qmgr, open::OUTPUT)
            .and_then(|h| {
                c.put(&h, &md, &props, body, &PutOptions::default())?;
                c.close(&h, 0)
            })
    };
    if let Err(e) = r {
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!(
                "fte agent {}: the transfer log could not be published: {e}",
                p.agent_name
            );
        }
    }
}

/// The events kept on the coordination queue manager's log queue, oldest first (browsed).
pub fn read(c: &Connection) -> Result<Vec<(Value, String)>> {
    let h = c.open(LOG_QUEUE, open::BROWSE)?;
    let mut g = GetOptions {
        browse: Browse::First,
        wait: Wait::NoWait,
        max_len: u32::MAX,
        ..Default::default()
    };
    let mut v = Vec::new();
    loop {
        let m = match c.get(&h, &g) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => return Err(e.into()),
        };
        g.browse = Browse::Next;
        let json = match m.props.get(JSON_PROP) {
            Some(PropertyValue::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        v.push((json, String::from_utf8_lossy(&m.body).into_owned()));
    }
    let _ = c.close(&h, 0);
    Ok(v)
}

/// One line of `ferrymq fte log` for an event.
pub fn line(j: &Value) -> String {
    let s = |k: &str| j[k].as_str().unwrap_or("").to_string();
    let n = |k: &str| j[k].as_u64().unwrap_or(0);
    let mut l = format!(
        "{} {:<9} {} {} -> {} files {} bytes {}/{}",
        n("timeMs"),
        s("event"),
        s("transferId"),
        s("sourceAgent"),
        s("destinationAgent"),
        n("files"),
        n("bytes"),
        n("totalBytes")
    );
    if let Some(job) = j["job"].as_str() {
        l.push_str(&format!(" job {job}"));
    }
    if !s("text").is_empty() {
        l.push_str(&format!(" rc {}: {}", j["resultCode"], s("text")));
    }
    l
}

/// `ferrymq fte status`: the transfers started and not ended, with the bytes of their latest
/// event, the rate since they started and the time left at that rate, and a progress bar.
pub fn status(events: &[Value], now: u64) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut last: std::collections::HashMap<String, (&Value, u64)> = Default::default();
    for j in events {
        let id = j["transferId"].as_str().unwrap_or("").to_string();
        let t = j["timeMs"].as_u64().unwrap_or(0);
        match j["event"].as_str().unwrap_or("") {
            "started" => {
                order.push(id.clone());
                last.insert(id, (j, t));
            }
            "progress" => {
                if let Some(e) = last.get_mut(&id) {
                    e.0 = j;
                }
            }
            _ => {
                last.remove(&id);
            }
        }
    }
    let mut out = String::new();
    for id in order {
        let Some((j, started)) = last.get(&id) else {
            continue;
        };
        let bytes = j["bytes"].as_u64().unwrap_or(0);
        let total = j["totalBytes"].as_u64().unwrap_or(0).max(1);
        let secs = (now.saturating_sub(*started) as f64 / 1000.0).max(0.001);
        let rate = bytes as f64 / secs;
        let eta = if rate > 0.0 {
            format!("{:.0} s", (total.saturating_sub(bytes)) as f64 / rate)
        } else {
            "?".into()
        };
        let filled = ((bytes.min(total) * 30) / total) as usize;
        out.push_str(&format!(
            "{id} {} -> {} [{}{}] {bytes}/{total} bytes {:.1} MB/s ETA {eta}\n",
            j["sourceAgent"].as_str().unwrap_or(""),
            j["destinationAgent"].as_str().unwrap_or(""),
            "#".repeat(filled),
            "-".repeat(30 - filled),
            rate / 1e6
        ));
    }
    if out.is_empty() {
        out.push_str("no transfer in progress\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_only_transfers_not_ended_with_their_latest_progress() {
        let ev = |kind: &'static str, tid: &str, bytes| Event {
            kind,
            tid: tid.into(),
            bytes,
            total_bytes: 1000,
            ..Default::default()
        };
        let events = vec![
            ev("started", "A", 0).to_json(0),
            ev("started", "B", 0).to_json(0),
            ev("progress", "A", 500).to_json(1000),
            ev("completed", "B", 1000).to_json(1000),
        ];
        let s = status(&events, 1000);
        assert!(
            s.contains("A ") && s.contains("500/1000") && !s.contains("B "),
            "{s}"
        );
        assert!(s.contains("ETA 1 s"), "{s}");
        let x = ev("failed", "C", 1).to_xml(5);
        assert!(x.contains("<action time=\"5\">failed</action>"), "{x}");
    }
}
