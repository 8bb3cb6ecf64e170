//! Message channels' synchronisation state, kept as engine state so it lives in the recovery log
//! (and so survives a restart, an HA failover and a DR takeover exactly as the queues do).
//!
//! Per channel name: the sequence number and logical unit of work id (LUWID) of the last batch
//! committed, and, on a sending end, the batch in doubt: sent, its end announced, not yet
//! confirmed. Three records:
//!
//! - `CHANNEL_INDOUBT`: the sender's batch `luwid` is in doubt; the transmission-queue messages it
//!   took (their gets). Written before the sender asks the receiver to commit, and durable
//!   before it asks. The log is redo-only, so the gets themselves are not logged yet: after a
//!   crash the messages are back on the transmission queue, and the channel resolves the batch
//!   before it sends anything (compare LUWIDs with the receiver), removing them or resending them.
//! - `CHANNEL_COMMIT`: a unit of work's commit (the `COMMIT` layout) behind a synchronisation
//!   trailer: at the receiver, the batch's puts and the channel's new (seq, LUWID) in one record,
//!   so a crash keeps both or neither; at the sender, the batch's gets and the end of its doubt.
//! - `CHANNEL_BACKOUT`: the sender's batch in doubt is backed out (its messages will be sent
//!   again) — the receiver never committed it — or a RESET CHANNEL sets the sequence number.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};
use ferrymq_types::codec::{DecodeError, PutExt, Reader};
use ferrymq_types::{mqerr, MqError};

use crate::conn::ConnId;
use crate::message::Lsn;
use crate::records::{kind, GetRec, Record};
use crate::Engine;

/// A sender's batch in doubt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InDoubt {
    pub luwid: u64,
    /// The sequence number of the batch's last message.
    pub seq: u64,
    /// The persistent transmission-queue messages the batch took.
    pub gets: Vec<GetRec>,
}

/// One channel's synchronisation state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelSync {
    /// The sequence number of the last message of the last committed batch.
    pub seq: u64,
    /// The last committed batch's LUWID (0: none yet).
    pub luwid: u64,
    pub indoubt: Option<InDoubt>,
    /// Stopped by STOP CHANNEL: it does not restart with the queue manager.
    pub stopped: bool,
}

/// The synchronisation update a channel commit carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncUpdate {
    pub channel: String,
    pub seq: u64,
    pub luwid: u64,
}

/// The channels' synchronisation state, by channel name.
pub type ChannelSyncs = BTreeMap<String, ChannelSync>;

fn put_gets(out: &mut BytesMut, gets: &[GetRec]) {
    out.put_u32_le(gets.len() as u32);
    for g in gets {
        out.put_str16(&g.queue);
        out.put_u64_le(g.seq);
        out.put_u8(g.rank);
    }
}

fn read_gets(r: &mut Reader) -> Result<Vec<GetRec>, DecodeError> {
    let n = r.u32("in-doubt get count")?;
    let mut gets = Vec::new();
    for _ in 0..n {
        gets.push(GetRec {
            queue: r.str16("queue")?,
            seq: r.u64("seq")?,
            rank: r.u8("rank")?,
        });
    }
    Ok(gets)
}

pub(crate) fn encode_indoubt(channel: &str, d: &InDoubt, out: &mut BytesMut) {
    out.put_str16(channel);
    out.put_u64_le(d.luwid);
    out.put_u64_le(d.seq);
    put_gets(out, &d.gets);
}

pub(crate) fn decode_indoubt(r: &mut Reader) -> Result<(String, InDoubt), DecodeError> {
    let channel = r.str16("channel")?;
    let luwid = r.u64("luwid")?;
    let seq = r.u64("channel seq")?;
    let gets = read_gets(r)?;
    Ok((channel, InDoubt { luwid, seq, gets }))
}

pub(crate) fn encode_sync(u: &SyncUpdate, out: &mut BytesMut) {
    out.put_str16(&u.channel);
    out.put_u64_le(u.seq);
    out.put_u64_le(u.luwid);
}

pub(crate) fn decode_sync(r: &mut Reader) -> Result<SyncUpdate, DecodeError> {
    Ok(SyncUpdate {
        channel: r.str16("channel")?,
        seq: r.u64("channel seq")?,
        luwid: r.u64("luwid")?,
    })
}

/// The checkpoint encoding of every channel's state.
pub fn encode_syncs(s: &ChannelSyncs, out: &mut BytesMut) {
    out.put_u32_le(s.len() as u32);
    for (name, c) in s {
        out.put_str16(name);
        out.put_u64_le(c.seq);
        out.put_u64_le(c.luwid);
        out.put_u8(u8::from(c.stopped));
        match &c.indoubt {
            None => out.put_u8(0),
            Some(d) => {
                out.put_u8(1);
                out.put_u64_le(d.luwid);
                out.put_u64_le(d.seq);
                put_gets(out, &d.gets);
            }
        }
    }
}

pub fn decode_syncs(r: &mut Reader) -> Result<ChannelSyncs, DecodeError> {
    let n = r.u32("channel count")?;
    let mut s = ChannelSyncs::new();
    for _ in 0..n {
        let name = r.str16("channel")?;
        let seq = r.u64("channel seq")?;
        let luwid = r.u64("luwid")?;
        let stopped = r.bool("stopped")?;
        let indoubt = match r.u8("in-doubt flag")? {
            0 => None,
            1 => Some(InDoubt {
                luwid: r.u64("luwid")?,
                seq: r.u64("channel seq")?,
                gets: read_gets(r)?,
            }),
            v => return Err(DecodeError::invalid("in-doubt flag", format!("{v}"))),
        };
        s.insert(
            name,
            ChannelSync {
                seq,
                luwid,
                indoubt,
                stopped,
            },
        );
    }
    Ok(s)
}

fn held(d: &InDoubt, queue: &str, seq: u64) -> bool {
    d.gets.iter().any(|g| g.queue == queue && g.seq == seq)
}

impl Engine {
    /// A channel's synchronisation state (default: never ran).
    pub fn channel_sync(&self, name: &str) -> ChannelSync {
        self.channels.get(name).cloned().unwrap_or_default()
    }

    /// Every channel's synchronisation state.
    pub fn channel_syncs(&self) -> &ChannelSyncs {
        &self.channels
    }

    /// The persistent messages the connection's unit of work has got so far, as a batch's
    /// in-doubt record lists them.
    pub fn uow_gets(&self, conn: ConnId) -> Vec<GetRec> {
        self.conns
            .get(&conn)
            .map_or_else(Vec::new, |c| self.persistent_gets(&c.uow))
    }

    /// Logs a sender's batch as in doubt (`CHANNEL_INDOUBT`).
    pub fn channel_indoubt(&mut self, channel: &str, d: InDoubt) -> Result<Lsn, MqError> {
        let mut out = BytesMut::new();
        encode_indoubt(channel, &d, &mut out);
        let lsn = self.log.append(kind::CHANNEL_INDOUBT, &[&out])?;
        self.channels
            .entry(channel.to_string())
            .or_default()
            .indoubt = Some(d);
        Ok(lsn)
    }

    /// Commits the connection's unit of work with the channel's new synchronisation state, in
    /// one `CHANNEL_COMMIT` record (also when the unit of work holds nothing persistent).
    pub fn channel_commit(
        &mut self,
        conn: ConnId,
        sync: SyncUpdate,
        now_ms: u64,
    ) -> Result<Lsn, MqError> {
        let lsn = self.commit_with(conn, now_ms, Some(&sync))?;
        self.apply_sync(sync);
        Ok(lsn)
    }

    /// Resolves a sender's batch in doubt by hand or at channel start. Commit: its messages
    /// leave the transmission queue (they reached the receiver). Backout: they stay and go
    /// again. Returns the LSN to wait for, or 0 when nothing was in doubt.
    pub fn channel_resolve(&mut self, channel: &str, commit: bool) -> Result<Lsn, MqError> {
        let Some(d) = self.channels.get(channel).and_then(|c| c.indoubt.clone()) else {
            return Ok(0);
        };
        if self
            .conns
            .values()
            .any(|c| c.uow.gets.iter().any(|(q, k, _)| held(&d, q, k.seq())))
        {
            return Err(mqerr!(
                COMMAND_FAILED,
                "channel {channel}'s batch in doubt is held by its running instance; stop the channel first"
            ));
        }
        if commit {
            let sync = SyncUpdate {
                channel: channel.to_string(),
                seq: d.seq,
                luwid: d.luwid,
            };
            let mut out = BytesMut::new();
            encode_sync(&sync, &mut out);
            Record::encode_commit(&[], &d.gets, &mut out);
            let lsn = self.log.append(kind::CHANNEL_COMMIT, &[&out])?;
            for g in &d.gets {
                if let Some(q) = self.queues.get_mut(&g.queue) {
                    if let Some(key) = q.key_of_seq(g.seq, g.rank) {
                        q.remove(key);
                        q.stats.gets += 1;
                    }
                }
            }
            self.apply_sync(sync);
            Ok(lsn)
        } else {
            let lsn = self.log_channel_backout(channel, None)?;
            Ok(lsn)
        }
    }

    /// Records STOP CHANNEL (`stopped`) or START CHANNEL of a sender, so a stopped channel
    /// stays stopped when the queue manager restarts.
    pub fn channel_set_stopped(&mut self, channel: &str, stopped: bool) -> Result<Lsn, MqError> {
        // A first START records the channel too, so it restarts with the queue manager.
        if self
            .channels
            .get(channel)
            .is_some_and(|c| c.stopped == stopped)
        {
            return Ok(0);
        }
        let rec = Record::ChannelStopped {
            channel: channel.to_string(),
            stopped,
        };
        let mut out = BytesMut::new();
        let k = rec.encode_small(&mut out);
        let lsn = self.log.append(k, &[&out])?;
        self.channels
            .entry(channel.to_string())
            .or_default()
            .stopped = stopped;
        Ok(lsn)
    }

    /// Sets the channel's message sequence number (RESET CHANNEL SEQNUM), ending any doubt as a
    /// backout.
    pub fn channel_reset(&mut self, channel: &str, seq: u64) -> Result<Lsn, MqError> {
        self.log_channel_backout(channel, Some(seq))
    }

    fn log_channel_backout(
        &mut self,
        channel: &str,
        reset_seq: Option<u64>,
    ) -> Result<Lsn, MqError> {
        let rec = Record::ChannelBackout {
            channel: channel.to_string(),
            reset_seq,
        };
        let mut out = BytesMut::new();
        let k = rec.encode_small(&mut out);
        let lsn = self.log.append(k, &[&out])?;
        self.apply_backout(channel, reset_seq);
        Ok(lsn)
    }

    pub(crate) fn apply_sync(&mut self, sync: SyncUpdate) {
        let c = self.channels.entry(sync.channel).or_default();
        c.seq = sync.seq;
        c.luwid = sync.luwid;
        c.indoubt = None;
    }

    pub(crate) fn apply_backout(&mut self, channel: &str, reset_seq: Option<u64>) {
        let c = self.channels.entry(channel.to_string()).or_default();
        c.indoubt = None;
        if let Some(s) = reset_seq {
            c.seq = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_states_round_trip() {
        let mut s = ChannelSyncs::new();
        s.insert(
            "QM1.QM2".into(),
            ChannelSync {
                seq: 9,
                luwid: 3,
                stopped: true,
                indoubt: Some(InDoubt {
                    luwid: 4,
                    seq: 12,
                    gets: vec![GetRec {
                        queue: "QM2".into(),
                        seq: 77,
                        rank: 2,
                    }],
                }),
            },
        );
        s.insert("B".into(), ChannelSync::default());
        let mut b = BytesMut::new();
        encode_syncs(&s, &mut b);
        let mut r = Reader::new(b.freeze());
        assert_eq!(decode_syncs(&mut r).unwrap(), s);
    }
}
