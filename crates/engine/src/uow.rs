//! MQCMIT and MQBACK. A commit writes one log record holding every persistent put and get of the
//! unit of work, then makes the puts visible; a backout restores the gets (counting a backout on
//! each) and drops the puts. Messages backed out BOTHRESH times move to the BOQNAME queue.

use std::sync::Arc;

use bytes::BytesMut;
use ferrymq_types::{mqerr, MqError, PropertyValue, Reason};

use crate::conn::{ConnId, Uow};
use crate::message::{Entry, Lsn, Message};
use crate::queue::Key;
use crate::records::{kind, GetRec, Record};
use crate::Engine;

impl Engine {
    /// Commits the connection's unit of work (MQCMIT). Returns the LSN the reply must wait for.
    pub fn commit(&mut self, conn: ConnId, now_ms: u64) -> Result<Lsn, MqError> {
        let uow = std::mem::take(&mut self.conn_mut(conn)?.uow);
        if uow.is_empty() {
            return Ok(0);
        }
        let puts: Vec<(&str, &Message)> = uow
            .puts
            .iter()
            .filter(|(_, _, e)| e.msg.persistent)
            .map(|(q, _, e)| (q.as_str(), &*e.msg))
            .collect();
        // The rank each get's message has under the queue's definition now: an ALTER of
        // MSGDLVSQ since the get re-keyed the queue, and replay finds the message at that rank.
        let gets: Vec<GetRec> = uow
            .gets
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
            .collect();
        // Replies to the gets already waited for the messages' own put records.
        let mut lsn = uow
            .gets
            .iter()
            .map(|(_, _, e)| e.msg.put_lsn())
            .max()
            .unwrap_or(0);
        if !puts.is_empty() || !gets.is_empty() {
            let mut buf = BytesMut::with_capacity(
                puts.iter().map(|(_, m)| m.body.len() + 256).sum::<usize>() + 64,
            );
            Record::encode_commit(&puts, &gets, &mut buf);
            match self.log.append(kind::COMMIT, &[&buf]) {
                Ok(l) => lsn = lsn.max(l),
                Err(e) => {
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
            if threshold > 0 && entry.backout_count >= threshold {
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

    /// Moves a message that reached BOTHRESH to the backout queue, or failing that to the
    /// dead-letter queue with the reason recorded as a property. Logged as one commit record.
    fn requeue_poison(
        &mut self,
        from: &str,
        key: Key,
        entry: &Entry,
        boq: &str,
        now_ms: u64,
    ) -> Result<Lsn, MqError> {
        let dlq = self.attrs.dead_letter_queue.clone();
        let targets: Vec<(&str, bool)> = [(boq, false), (dlq.as_str(), true)]
            .into_iter()
            .filter(|(t, _)| !t.is_empty())
            .collect();
        for (target, is_dlq) in targets {
            let ok = self.queues.get(target).is_some_and(|q| {
                q.def.holds_messages()
                    && !q.def.put_inhibited
                    && !q.is_full()
                    && entry.msg.body.len() as u64 <= q.def.max_msg_len as u64
            });
            if !ok {
                continue;
            }
            let seq = self.alloc_seq();
            let mut moved = entry.msg.renumbered(seq, 0);
            if is_dlq {
                moved.props_mut().set(
                    "FMQ.DLQ.Reason",
                    PropertyValue::Int(Reason::BACKOUT_THRESHOLD_REACHED.code() as i64),
                );
                moved.props_mut().set(
                    "FMQ.DLQ.SourceQueue",
                    PropertyValue::String(from.to_string()),
                );
            }
            let mut lsn = 0;
            if moved.persistent {
                let mut buf = BytesMut::with_capacity(moved.body.len() + 256);
                Record::encode_commit(
                    &[(target, &moved)],
                    &[GetRec {
                        queue: from.to_string(),
                        seq: key.seq(),
                        rank: key.rank(),
                    }],
                    &mut buf,
                );
                lsn = self.log.append(kind::COMMIT, &[&buf])?;
                moved.set_put_lsn(lsn);
            }
            let moved = Arc::new(moved);
            let q = self.queues.get_mut(target).expect("checked");
            let nkey = q.key_for(moved.priority, seq);
            q.insert(
                nkey,
                Entry {
                    msg: moved,
                    backout_count: entry.backout_count,
                },
            );
            q.stats.puts += 1;
            self.arrived(target, nkey, now_ms);
            return Ok(lsn);
        }
        Err(mqerr!(
            UNKNOWN_OBJECT_NAME,
            "no backout or dead-letter queue can take the message from '{from}'"
        ))
    }
}
