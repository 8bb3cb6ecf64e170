//! MQCMIT and MQBACK. A commit writes one log record holding every persistent put and get of the
//! unit of work, then makes the puts visible; a backout restores the gets (counting a backout on
//! each) and drops the puts. Messages backed out BOTHRESH times move to the BOQNAME queue (or the
//! dead-letter queue) unless the queue manager is set to leave them (`EngineConfig::
//! backout_requeue`). A commit also puts the reports its messages ask for (COA, COD), in its
//! record.

use std::sync::Arc;

use bytes::BytesMut;
use ferrymq_types::options::report;
use ferrymq_types::{mqerr, MqError, Reason};

use crate::conn::{ConnId, Uow};
use crate::message::{Entry, Lsn, Message};
use crate::queue::Key;
use crate::records::{kind, GetRec, Record};
use crate::report::Event;
use crate::Engine;

impl Engine {
    /// Commits the connection's unit of work (MQCMIT). Returns the LSN the reply must wait for.
    pub fn commit(&mut self, conn: ConnId, now_ms: u64) -> Result<Lsn, MqError> {
        self.commit_with(conn, now_ms, None)
    }

    /// Commits, in a `CHANNEL_COMMIT` record carrying `sync` when one is given (written even
    /// when the unit of work holds nothing persistent: the channel's state must move).
    pub(crate) fn commit_with(
        &mut self,
        conn: ConnId,
        now_ms: u64,
        sync: Option<&crate::channel::SyncUpdate>,
    ) -> Result<Lsn, MqError> {
        let uow = std::mem::take(&mut self.conn_mut(conn)?.uow);
        if uow.is_empty() && sync.is_none() {
            return Ok(0);
        }
        // Reports the unit of work's messages ask for (confirm on arrival of its puts, on
        // delivery of its gets) are put by its commit, in the same record.
        let mut reports = Vec::new();
        for (_, _, e) in &uow.puts {
            reports.extend(self.report_for(&e.msg, Event::Arrived, now_ms));
        }
        for (_, _, e) in &uow.gets {
            reports.extend(self.report_for(&e.msg, Event::Delivered, now_ms));
        }
        let puts: Vec<(&str, &Message)> = uow
            .puts
            .iter()
            .filter(|(_, _, e)| e.msg.persistent)
            .map(|(q, _, e)| (q.as_str(), &*e.msg))
            .chain(
                reports
                    .iter()
                    .filter(|g| g.msg.persistent)
                    .map(|g| (g.queue.as_str(), &g.msg)),
            )
            .collect();
        let gets = self.persistent_gets(&uow);
        // The gets were answered without waiting for the messages' put records: the commit waits.
        let mut lsn = uow
            .gets
            .iter()
            .map(|(_, _, e)| e.msg.put_lsn())
            .max()
            .unwrap_or(0);
        if !puts.is_empty() || !gets.is_empty() || sync.is_some() {
            // The bodies go to the log from the messages, not through a copy of the record.
            let mut buf = BytesMut::with_capacity(puts.len() * 256 + gets.len() * 32 + 64);
            let k = match sync {
                Some(u) => {
                    crate::channel::encode_sync(u, &mut buf);
                    kind::CHANNEL_COMMIT
                }
                None => kind::COMMIT,
            };
            let mut ends = crate::records::CommitEnds::new();
            Record::encode_commit_heads(&puts, &gets, &mut buf, &mut ends);
            let appended = self
                .log
                .append(k, &crate::records::commit_parts(&puts, &buf, &ends));
            match appended {
                Ok(l) => lsn = lsn.max(l),
                Err(e) => {
                    self.forget(reports);
                    self.conn_mut(conn)?.uow = uow;
                    self.backout(conn, now_ms)?;
                    return Err(mqerr!(BACKED_OUT, "the unit of work was backed out because its commit could not be logged: {e}"));
                }
            }
        }
        for (queue, _, _) in &uow.gets {
            if let Some(q) = self.queues.get_mut(queue) {
                q.locked = q.locked.saturating_sub(1);
                q.stats.gets += 1;
            }
        }
        for (queue, _, entry) in uow.puts {
            let Some(q) = self.queues.get_mut(&queue) else {
                continue;
            };
            let key = q.key_for(entry.msg.priority, entry.msg.seq);
            q.uncommitted_puts = q.uncommitted_puts.saturating_sub(1);
            q.stats.puts += 1;
            if entry.msg.persistent {
                // The message is durable once the commit record is; later gets wait for that.
                entry.msg.set_put_lsn(lsn);
            }
            q.insert(key, entry);
            self.arrived(&queue, key, now_ms);
        }
        self.place(reports, lsn, now_ms);
        Ok(lsn)
    }

    /// Backs out the connection's unit of work (MQBACK).
    pub fn backout(&mut self, conn: ConnId, now_ms: u64) -> Result<Lsn, MqError> {
        let uow: Uow = std::mem::take(&mut self.conn_mut(conn)?.uow);
        for (queue, _, _) in &uow.puts {
            if let Some(q) = self.queues.get_mut(queue) {
                q.uncommitted_puts = q.uncommitted_puts.saturating_sub(1);
            }
        }
        let mut lsn = 0;
        for (queue, _, mut entry) in uow.gets.into_iter().rev() {
            let Some(q) = self.queues.get_mut(&queue) else {
                continue;
            };
            // Under the definition now (an ALTER of MSGDLVSQ may have re-keyed the queue).
            let key = q.key_for(entry.msg.priority, entry.msg.seq);
            q.locked = q.locked.saturating_sub(1);
            entry.backout_count += 1;
            let threshold = q.def.backout_threshold;
            let boq = q.def.backout_queue.clone();
            if self.cfg.backout_requeue && threshold > 0 && entry.backout_count >= threshold {
                match self.requeue_poison(&queue, key, &entry, &boq, now_ms) {
                    Ok(l) => {
                        lsn = lsn.max(l);
                        continue;
                    }
                    Err(_) => {
                        // Neither the backout queue nor the dead-letter queue can take it: it goes
                        // back where it was, as MQ leaves it when it cannot be moved.
                    }
                }
            }
            let q = self.queues.get_mut(&queue).expect("exists");
            q.insert(key, entry);
            self.arrived(&queue, key, now_ms);
        }
        Ok(lsn)
    }

    /// Moves a message that reached BOTHRESH to the backout queue (BOQNAME) as it is; failing
    /// that, to the dead-letter queue behind a dead-letter header (reason: why the backout queue
    /// could not take it, or MQRC_BACKOUT_THRESHOLD_REACHED when the queue names none), or
    /// discards it if its Report says MQRO_DISCARD_MSG; with an exception report if it asks for
    /// one. Logged as one commit record.
    fn requeue_poison(
        &mut self,
        from: &str,
        key: Key,
        entry: &Entry,
        boq: &str,
        now_ms: u64,
    ) -> Result<Lsn, MqError> {
        let get = GetRec {
            queue: from.to_string(),
            seq: key.seq(),
            rank: key.rank(),
        };
        let gets: Vec<GetRec> = entry.msg.persistent.then_some(get).into_iter().collect();
        let md = entry.msg.md();
        let mut reason = Reason::BACKOUT_THRESHOLD_REACHED.code() as i32;
        let mut dest = from.to_string();
        if !boq.is_empty() {
            match self.can_take(boq, "", &md, entry.msg.body.len()) {
                Ok(target) => {
                    let seq = self.alloc_seq();
                    let moved = entry.msg.renumbered(seq, 0);
                    let lsn = self.log_event(&[(target.as_str(), &moved)], &gets)?;
                    if moved.persistent {
                        moved.set_put_lsn(lsn.unwrap_or(0));
                    }
                    let moved = Arc::new(moved);
                    let q = self.queues.get_mut(&target).expect("checked");
                    let nkey = q.key_for(moved.priority, seq);
                    q.insert(
                        nkey,
                        Entry {
                            msg: moved,
                            backout_count: entry.backout_count,
                        },
                    );
                    q.stats.puts += 1;
                    self.arrived(&target, nkey, now_ms);
                    return Ok(lsn.unwrap_or(0));
                }
                Err(e) => {
                    reason = e.reason.code() as i32;
                    dest = boq.to_string();
                }
            }
        }
        let mut generated = Vec::new();
        if md.report & report::DISCARD_MSG == 0 {
            let qmgr = self.cfg.qmgr_name.clone();
            match self.dead_letter(
                &md,
                entry.msg.props().clone(),
                &entry.msg.body,
                reason,
                (&dest, &qmgr),
                entry.msg.expires_at_ms(),
                now_ms,
            ) {
                Some(g) => generated.push(g),
                None => {
                    return Err(mqerr!(
                        UNKNOWN_OBJECT_NAME,
                        "no backout or dead-letter queue can take the message from '{from}'"
                    ))
                }
            }
        }
        generated.extend(self.report_for(&entry.msg, Event::Undeliverable(reason), now_ms));
        let puts: Vec<(&str, &Message)> = generated
            .iter()
            .map(|g| (g.queue.as_str(), &g.msg))
            .collect();
        let lsn = match self.log_event(&puts, &gets) {
            Ok(l) => l.unwrap_or(0),
            Err(e) => {
                self.forget(generated);
                return Err(e);
            }
        };
        self.place(generated, lsn, now_ms);
        Ok(lsn)
    }
}

impl Engine {
    /// The persistent messages a unit of work has got, as its commit record (or a channel's batch
    /// in doubt) lists them: each at the rank it has under the queue's definition now, since an
    /// ALTER of MSGDLVSQ after the get re-keyed the queue and replay finds the message at that rank.
    pub(crate) fn persistent_gets(&self, uow: &Uow) -> Vec<GetRec> {
        uow.gets
            .iter()
            .filter(|(_, _, e)| e.msg.persistent)
            .map(|(q, k, e)| GetRec {
                queue: q.clone(),
                seq: k.seq(),
                rank: self
                    .queues
                    .get(q)
                    .map_or(k.rank(), |q| q.key_for(e.msg.priority, k.seq()).rank()),
            })
            .collect()
    }
}
