//! What an agent keeps on its state queue (persistent messages) so that a transfer outlives the
//! agent's process and its queue manager's restart: for each transfer it sends, one *outbound*
//! record (the request, whom to answer, how many files are finished); for each transfer it
//! receives, one *checkpoint* (the file and the offset synced so far, and the source file's
//! identity to notice a source changed meanwhile). Each record is replaced in one unit of work.

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ObjectHandle;
use ferrymq_types::options::{Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, MsgId, Persistence, Properties, PropertyValue};

use crate::checksum::{self, Method};
use crate::prop;

/// The correlation id of a transfer's outbound record: the transfer id with its first byte
/// inverted, so that an agent sending to itself keeps its checkpoint and its record apart.
pub fn outbound_key(tid: MsgId) -> MsgId {
    let mut k = tid;
    k[0] ^= 0xff;
    k
}

/// The sending side's record of one transfer.
#[derive(Debug, Clone, Default)]
pub struct Outbound {
    pub tid: MsgId,
    pub request_xml: String,
    pub reply_q: String,
    pub reply_qm: String,
    pub request_msg_id: MsgId,
    /// Files finished (with a result), counted from the first.
    pub done: usize,
    /// The failures among them, one a line.
    pub failed: String,
    pub resent: u64,
    pub resumes: u64,
    /// The checksum method of the request's items that name none: the default of the agent
    /// that recorded the transfer, so that a resume hashes as the transfer began (a record
    /// without it is from before BLAKE3 was the default: [`checksum::LEGACY_DEFAULT`]).
    pub checksum_default: Method,
}

/// A transfer id as text.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A transfer id from its text.
pub fn unhex(s: &str) -> MsgId {
    let mut id = [0u8; 24];
    for (i, out) in id.iter_mut().enumerate() {
        if let Some(h) = s.get(2 * i..2 * i + 2) {
            *out = u8::from_str_radix(h, 16).unwrap_or(0);
        }
    }
    id
}

fn str_of(p: &Properties, n: &str) -> String {
    match p.get(n) {
        Some(PropertyValue::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn int_of(p: &Properties, n: &str) -> i64 {
    match p.get(n) {
        Some(PropertyValue::Int(v)) => *v,
        _ => 0,
    }
}

/// Replaces the message correlated `key` on `q` by one with `props` and `body`, atomically.
fn replace(
    c: &Connection,
    q: &ObjectHandle,
    key: MsgId,
    props: &Properties,
    body: Bytes,
) -> Result<(), MqError> {
    let r = (|| {
        remove_in_uow(c, q, key)?;
        let md = MessageDescriptor {
            correl_id: key,
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let po = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..PutOptions::default()
        };
        c.put(q, &md, props, body, &po)?;
        c.commit()
    })();
    if r.is_err() {
        let _ = c.backout();
    }
    r
}

/// Removes the records correlated `key` in the caller's unit of work.
pub(crate) fn remove_in_uow(c: &Connection, q: &ObjectHandle, key: MsgId) -> Result<(), MqError> {
    let g = GetOptions {
        syncpoint: Syncpoint::Yes,
        match_correl_id: Some(key),
        max_len: u32::MAX,
        ..Default::default()
    };
    loop {
        match c.get(q, &g) {
            Ok(_) => {}
            Err(e) if e.reason == ferrymq_types::Reason::NO_MSG_AVAILABLE => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Removes the records correlated `key` (outside any unit of work).
pub fn remove(c: &Connection, q: &ObjectHandle, key: MsgId) -> Result<(), MqError> {
    let g = GetOptions {
        match_correl_id: Some(key),
        max_len: u32::MAX,
        ..Default::default()
    };
    loop {
        match c.get(q, &g) {
            Ok(_) => {}
            Err(e) if e.reason == ferrymq_types::Reason::NO_MSG_AVAILABLE => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// An outbound record's default checksum method ([`checksum::LEGACY_DEFAULT`] when it names
/// none, as records written before BLAKE3 was the default).
fn checksum_default_of(p: &Properties) -> Method {
    Method::parse(&str_of(p, prop::METHOD_DEFAULT)).unwrap_or(checksum::LEGACY_DEFAULT)
}

impl Outbound {
    fn props(&self) -> Properties {
        let mut p = Properties::default();
        p.set(prop::KIND, PropertyValue::String("outbound".into()));
        p.set(prop::TID, PropertyValue::String(hex(&self.tid)));
        p.set(prop::REPLY_Q, PropertyValue::String(self.reply_q.clone()));
        p.set(prop::REPLY_QM, PropertyValue::String(self.reply_qm.clone()));
        p.set(
            prop::REQUEST_ID,
            PropertyValue::String(hex(&self.request_msg_id)),
        );
        p.set(prop::DONE, PropertyValue::Int(self.done as i64));
        p.set(prop::FAILED, PropertyValue::String(self.failed.clone()));
        p.set(prop::RESENT, PropertyValue::Int(self.resent as i64));
        p.set(prop::RESUMES, PropertyValue::Int(self.resumes as i64));
        p.set(
            prop::METHOD_DEFAULT,
            PropertyValue::String(self.checksum_default.name().into()),
        );
        p
    }

    /// Writes (or replaces) the record. With `in_uow` the caller commits (the agent takes the
    /// request off its command queue in the same unit of work).
    pub fn write(&self, c: &Connection, q: &ObjectHandle, in_uow: bool) -> Result<(), MqError> {
        let body = Bytes::from(self.request_xml.clone());
        if !in_uow {
            return replace(c, q, outbound_key(self.tid), &self.props(), body);
        }
        let md = MessageDescriptor {
            correl_id: outbound_key(self.tid),
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let po = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..PutOptions::default()
        };
        c.put(q, &md, &self.props(), body, &po).map(|_| ())
    }

    /// All outbound records on the agent's state queue (browsed, left in place).
    pub fn list(c: &Connection, q: &ObjectHandle) -> Result<Vec<Outbound>, MqError> {
        let mut v = Vec::new();
        let mut g = GetOptions {
            browse: Browse::First,
            wait: Wait::NoWait,
            max_len: u32::MAX,
            ..Default::default()
        };
        loop {
            let m = match c.get(q, &g) {
                Ok(m) => m,
                Err(e) if e.reason == ferrymq_types::Reason::NO_MSG_AVAILABLE => break,
                Err(e) => return Err(e),
            };
            g.browse = Browse::Next;
            if str_of(&m.props, prop::KIND) != "outbound" {
                continue;
            }
            v.push(Outbound {
                tid: unhex(&str_of(&m.props, prop::TID)),
                request_xml: String::from_utf8_lossy(&m.body).into_owned(),
                reply_q: str_of(&m.props, prop::REPLY_Q),
                reply_qm: str_of(&m.props, prop::REPLY_QM),
                request_msg_id: unhex(&str_of(&m.props, prop::REQUEST_ID)),
                done: int_of(&m.props, prop::DONE).max(0) as usize,
                failed: str_of(&m.props, prop::FAILED),
                resent: int_of(&m.props, prop::RESENT).max(0) as u64,
                resumes: int_of(&m.props, prop::RESUMES).max(0) as u64,
                checksum_default: checksum_default_of(&m.props),
            });
        }
        Ok(v)
    }
}

/// The receiving side's checkpoint of one transfer: the file under way and its synced offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    pub index: i64,
    pub offset: u64,
    /// The source file's size and modification time (ns) when the transfer began.
    pub ident: (i64, i64),
}

impl Checkpoint {
    fn props(&self) -> Properties {
        let mut p = Properties::default();
        p.set(prop::KIND, PropertyValue::String("checkpoint".into()));
        p.set(prop::INDEX, PropertyValue::Int(self.index));
        p.set(prop::OFFSET, PropertyValue::Int(self.offset as i64));
        p.set(prop::SIZE, PropertyValue::Int(self.ident.0));
        p.set(prop::MTIME, PropertyValue::Int(self.ident.1));
        p
    }

    pub fn write(&self, c: &Connection, q: &ObjectHandle, tid: MsgId) -> Result<(), MqError> {
        replace(c, q, tid, &self.props(), Bytes::new())
    }

    /// Replaces the transfer's checkpoint in the caller's unit of work (the caller commits).
    pub(crate) fn replace_in_uow(
        &self,
        c: &Connection,
        q: &ObjectHandle,
        tid: MsgId,
    ) -> Result<(), MqError> {
        remove_in_uow(c, q, tid)?;
        let md = MessageDescriptor {
            correl_id: tid,
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let po = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..PutOptions::default()
        };
        c.put(q, &md, &self.props(), Bytes::new(), &po).map(|_| ())
    }

    /// The transfer's checkpoint, if one was recorded (browsed, left in place).
    pub fn read(c: &Connection, q: &ObjectHandle, tid: MsgId) -> Option<Checkpoint> {
        let g = GetOptions {
            browse: Browse::First,
            match_correl_id: Some(tid),
            max_len: u32::MAX,
            ..Default::default()
        };
        let m = c.get(q, &g).ok()?;
        Some(Checkpoint {
            index: int_of(&m.props, prop::INDEX),
            offset: int_of(&m.props, prop::OFFSET).max(0) as u64,
            ident: (int_of(&m.props, prop::SIZE), int_of(&m.props, prop::MTIME)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outbound_record_keeps_its_default_checksum_and_an_old_one_means_sha256() {
        // A record written now names its default, which comes back when it is read.
        let rec = Outbound::default();
        assert_eq!(rec.checksum_default, Method::Blake3);
        assert_eq!(checksum_default_of(&rec.props()), Method::Blake3);
        let sha = Outbound {
            checksum_default: Method::Sha256,
            ..Outbound::default()
        };
        assert_eq!(checksum_default_of(&sha.props()), Method::Sha256);
        // A record from before BLAKE3 was the default names none: its transfer hashed with
        // SHA-256 and resumes with it.
        let mut old = rec.props();
        old.0.retain(|(n, _)| n != prop::METHOD_DEFAULT);
        assert_eq!(checksum_default_of(&old), Method::Sha256);
    }
}
