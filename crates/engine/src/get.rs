//! MQGET: finding the message a get selects (by priority and arrival, or by MsgId/CorrelId through
//! the queue's indexes), browsing, truncation, syncpoint, discarding expired messages, and handing
//! newly available messages to getters that are waiting.

use bytes::BytesMut;
use ferrymq_types::options::{open, Browse, GetOptions, Syncpoint, Wait};
use ferrymq_types::{mqerr, MqError, Reason};

use crate::conn::{ConnId, Context};
use crate::message::{Entry, Lsn};
use crate::queue::{Key, Selector};
use crate::records::{GetRec, Record};
use crate::report::Event;
use crate::waiters::Waiter;
use crate::{Delivery, Engine, GetOutcome, Got};

impl Engine {
    /// Gets or browses a message (MQGET). `token` identifies the request so that a waiting get's
    /// later [`Delivery`] can be matched to it.
    pub fn get(
        &mut self,
        conn: ConnId,
        hobj: u32,
        opts: &GetOptions,
        token: u64,
        now_ms: u64,
    ) -> Result<GetOutcome, MqError> {
        let c = self.conn_mut(conn)?;
        if c.waiting.is_some() {
            return Err(mqerr!(
                CALL_IN_PROGRESS,
                "a get is already waiting on this connection"
            ));
        }
        let h = self.handle(conn, hobj)?;
        let browsing = opts.browse != Browse::No;
        if browsing && h.options & open::BROWSE == 0 {
            return Err(mqerr!(
                NOT_OPEN_FOR_BROWSE,
                "'{}' was not opened for browse (MQOO_BROWSE)",
                h.opened_name
            ));
        }
        if !browsing && h.options & open::ANY_INPUT == 0 {
            return Err(mqerr!(
                NOT_OPEN_FOR_INPUT,
                "'{}' was not opened for input (MQOO_INPUT_*)",
                h.opened_name
            ));
        }
        if let Wait::Ms(ms) = opts.wait {
            if ms > ferrymq_types::limits::GET_WAIT_MAX_MS {
                return Err(mqerr!(
                    WAIT_INTERVAL_ERROR,
                    "wait interval {ms} ms is longer than the limit; use an unlimited wait"
                ));
            }
        }
        let queue = h.queue.clone();
        let alias = h.alias.clone();
        let cursor = if opts.browse == Browse::Next {
            h.browse_cursor
        } else {
            None
        };
        if let Some(a) = alias {
            if self.queues.get(&a).is_some_and(|q| q.def.get_inhibited) {
                return Err(mqerr!(
                    GET_INHIBITED,
                    "gets from alias '{a}' are inhibited (GET(DISABLED))"
                ));
            }
        }
        let q = self
            .queues
            .get(&queue)
            .ok_or_else(|| mqerr!(Q_DELETED, "queue '{queue}' has been deleted"))?;
        if q.def.get_inhibited {
            return Err(mqerr!(
                GET_INHIBITED,
                "gets from queue '{queue}' are inhibited (GET(DISABLED))"
            ));
        }
        let sel = Selector::for_get(opts);
        if sel.searches_groups {
            self.check_group_get(conn, hobj, opts)?;
            if let Some(key) = self.find_grouped(conn, hobj, &queue, opts, cursor, now_ms) {
                let (got, lsn) = self.take_grouped(conn, hobj, &queue, key, opts, now_ms)?;
                return Ok(GetOutcome::Got(got, lsn));
            }
        } else if let Some(key) = self.find(&queue, &sel, cursor, now_ms) {
            let (got, lsn) = self.take(conn, hobj, &queue, key, opts, now_ms)?;
            return Ok(GetOutcome::Got(got, lsn));
        }
        if opts.wait == Wait::NoWait {
            return Err(mqerr!(
                NO_MSG_AVAILABLE,
                "no matching message on queue '{queue}'"
            ));
        }
        let id = self.waiters.add(Waiter {
            id: 0,
            conn,
            hobj,
            token,
            queue,
            opts: opts.clone(),
            sel,
            consumer: false,
            deadline_ms: match opts.wait {
                Wait::Ms(ms) => Some(now_ms.saturating_add(ms)),
                _ => None,
            },
        });
        self.conns.get_mut(&conn).expect("checked").waiting = Some(id);
        Ok(GetOutcome::Waiting(id))
    }

    /// Ends every wait whose interval has run out by `now_ms`; returns the connections and tokens
    /// to answer with MQRC_NO_MSG_AVAILABLE. A get answered earlier is no longer waiting and is not
    /// among them.
    pub fn expire_waits(&mut self, now_ms: u64) -> Vec<(ConnId, u64)> {
        self.waiters
            .due(now_ms)
            .into_iter()
            .filter_map(|w| self.cancel_wait(w))
            .collect()
    }

    /// The soonest moment a wait runs out, for the caller's timer.
    pub fn next_wait_deadline(&self) -> Option<u64> {
        self.waiters.next_deadline()
    }

    /// Ends a waiting get whose wait interval ran out. Returns the connection and token to answer
    /// with MQRC_NO_MSG_AVAILABLE, or `None` if a message was delivered to it first.
    pub fn cancel_wait(&mut self, waiter: u64) -> Option<(ConnId, u64)> {
        let w = self.waiters.remove(waiter)?;
        if let Some(c) = self.conns.get_mut(&w.conn) {
            c.waiting = None;
        }
        Some((w.conn, w.token))
    }

    /// Finds the selected message, discarding expired messages met on the way (MQ never delivers
    /// them; their removal is not logged because after a restart they are still expired).
    pub(crate) fn find(
        &mut self,
        queue: &str,
        sel: &Selector,
        after: Option<Key>,
        now_ms: u64,
    ) -> Option<Key> {
        let q = self.queues.get_mut(queue)?;
        if sel.msg_id.is_some() {
            q.index_msg_ids();
        }
        let mut expired = Vec::new();
        let found = q.find(sel, after, now_ms, &mut expired);
        self.discard_expired(queue, expired, now_ms);
        found
    }

    /// Takes (or browses) the message at `key` for a get through `hobj`.
    pub(crate) fn take(
        &mut self,
        conn: ConnId,
        hobj: u32,
        queue: &str,
        key: Key,
        opts: &GetOptions,
        now_ms: u64,
    ) -> Result<(Got, Lsn), MqError> {
        let q = self.queues.get(queue).expect("caller found the message");
        let entry = q.entry(key).expect("caller found the message").clone();
        let len = entry.msg.body.len();
        let truncated = len as u64 > opts.max_len as u64;
        if truncated && !opts.accept_truncated {
            return Err(MqError::new(
                Reason::TRUNCATED_MSG_FAILED,
                format!("message of {len} bytes on '{queue}' is longer than the {} bytes accepted; it stays on the queue", opts.max_len),
            ));
        }
        let mut got = Got {
            md: entry.msg.md(),
            props: entry.msg.props().clone(),
            body: if truncated {
                entry.msg.body.slice(..opts.max_len as usize)
            } else {
                entry.msg.body.clone()
            },
            data_len: len as u32,
            reason: if truncated {
                Reason::TRUNCATED_MSG_ACCEPTED
            } else {
                Reason::NONE
            },
        };
        got.md.backout_count = entry.backout_count;
        // As in MQ, Expiry counts down while the message waits: a get returns what is left, in
        // tenths of a second (rounded up, so an unexpired message never shows 0).
        if let Some(at) = entry.msg.expires_at_ms() {
            let left_ms = at.saturating_sub(now_ms).max(1);
            got.md.expiry = left_ms.div_ceil(100).min(i32::MAX as u64) as i32;
        }
        let mut lsn = entry.msg.put_lsn();

        if opts.browse != Browse::No {
            if let Some(h) = self
                .conns
                .get_mut(&conn)
                .and_then(|c| c.handles.get_mut(&hobj))
            {
                h.browse_cursor = Some(key);
            }
            return Ok((got, lsn));
        }

        if let Some(h) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.handles.get_mut(&hobj))
            .filter(|h| h.options & open::SAVE_ALL_CONTEXT != 0)
        {
            h.saved_context = Some(Box::new(Context {
                user_id: got.md.user_id.clone(),
                appl_identity: got.md.appl_identity.clone(),
                put_appl_name: got.md.put_appl_name.clone(),
                put_time_ms: got.md.put_time_ms,
            }));
        }
        let in_uow = match opts.syncpoint {
            Syncpoint::Yes => true,
            Syncpoint::No => false,
            Syncpoint::IfPersistent => entry.msg.persistent,
        };
        if in_uow {
            let max = self.attrs.max_uncommitted_msgs;
            let c = self.conns.get_mut(&conn).expect("connected");
            if c.uow.len() as u32 >= max {
                return Err(mqerr!(
                    SYNCPOINT_LIMIT_REACHED,
                    "the unit of work already holds {max} messages (MAXUMSGS); commit first"
                ));
            }
            let q = self.queues.get_mut(queue).expect("exists");
            q.remove(key);
            q.locked += 1;
            q.stats.last_get_ms = now_ms;
            c.uow.gets.push((queue.to_string(), key, entry));
            // Answered at once, even if the message's put is not durable yet: what the getter
            // does with it stays inside this unit of work, whose commit waits for the put's
            // record (a later position in the one ordered log), and a crash before that takes
            // the put and the unit of work back together.
            lsn = 0;
        } else {
            // A confirm-on-delivery report is logged with the get, in one commit record.
            let report = self.report_for(&entry.msg, Event::Delivered, now_ms);
            if entry.msg.persistent {
                let get = GetRec {
                    queue: queue.to_string(),
                    seq: key.seq(),
                    rank: key.rank(),
                };
                if let Some(g) = &report {
                    match self.log_event(&[(g.queue.as_str(), &g.msg)], &[get]) {
                        Ok(l) => lsn = lsn.max(l.unwrap_or(0)),
                        Err(e) => {
                            self.forget(report.into_iter().collect());
                            return Err(e);
                        }
                    }
                } else {
                    let mut buf = BytesMut::with_capacity(64);
                    let kind = Record::Get(get).encode_small(&mut buf);
                    lsn = lsn.max(self.log.append(kind, &[&buf])?);
                }
            }
            let q = self.queues.get_mut(queue).expect("exists");
            q.remove(key);
            q.stats.last_get_ms = now_ms;
            q.stats.gets += 1;
            self.place(report.into_iter().collect(), lsn, now_ms);
        }
        Ok((got, lsn))
    }

    /// A message became available at `key` on `queue` (a put, a commit, a backout): hand it to the
    /// longest-waiting matching getter, if any. Browsers each receive a copy; the first destructive
    /// getter takes it.
    pub(crate) fn arrived(&mut self, queue: &str, key: Key, now_ms: u64) {
        let mut browsed: Vec<u64> = Vec::new();
        loop {
            let Some(entry): Option<Entry> =
                self.queues.get(queue).and_then(|q| q.entry(key)).cloned()
            else {
                return;
            };
            if entry.msg.is_expired(now_ms) {
                self.discard_expired(queue, vec![key], now_ms);
                return;
            }
            let Some(wid) = self.waiters.candidate(queue, &entry, &browsed) else {
                return;
            };
            // A get with group options takes what its own search chooses, once the arrival
            // makes anything eligible (a group's last message completes the group: the getter
            // takes its first).
            let mut target = key;
            let grouped = self.waiters.get(wid).is_some_and(|w| w.sel.searches_groups);
            if grouped {
                let w = self.waiters.get(wid).expect("candidate exists").clone();
                let after = if w.opts.browse == Browse::Next {
                    self.handle(w.conn, w.hobj)
                        .ok()
                        .and_then(|h| h.browse_cursor)
                } else {
                    None
                };
                match self.find_grouped(w.conn, w.hobj, queue, &w.opts, after, now_ms) {
                    Some(k) => target = k,
                    None => {
                        browsed.push(wid);
                        continue;
                    }
                }
            }
            // The waiter stops waiting whatever the outcome: a getter whose get fails (a too-long
            // message) is answered with the failure, as MQ's MQGET would return it.
            let w = self.waiters.remove(wid).expect("candidate exists");
            let result = if grouped {
                self.take_grouped(w.conn, w.hobj, queue, target, &w.opts, now_ms)
            } else {
                self.take(w.conn, w.hobj, queue, target, &w.opts, now_ms)
            };
            let browse = w.opts.browse != Browse::No;
            if let Some(c) = self.conns.get_mut(&w.conn) {
                if c.waiting == Some(wid) {
                    c.waiting = None;
                }
            }
            let (result, wait_lsn) = match result {
                Ok((got, lsn)) => (Ok(got), lsn),
                Err(e) => (Err(e), 0),
            };
            let delivered = result.is_ok();
            self.deliveries.push(Delivery {
                conn: w.conn,
                token: w.token,
                result,
                wait_lsn,
            });
            if w.consumer {
                self.consumer_delivered(w.conn, w.hobj, delivered, now_ms);
            }
            if delivered && !browse && target == key {
                return;
            }
            browsed.push(wid);
        }
    }
}
