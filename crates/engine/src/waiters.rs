//! Gets that are waiting for a message. When a message becomes available the engine hands it to
//! the longest-waiting getter that matches it, found through indexes by CorrelId and MsgId so that
//! hundreds of requesters waiting on one reply queue cost a hash lookup per arriving message.

use std::collections::VecDeque;

use ahash::AHashMap;
use ferrymq_types::descriptor::MsgId;
use ferrymq_types::options::GetOptions;

use crate::conn::ConnId;
use crate::message::Entry;
use crate::queue::Selector;

#[derive(Debug, Clone)]
pub struct Waiter {
    pub id: u64,
    pub conn: ConnId,
    pub hobj: u32,
    /// The caller's token for the delivery (the request id).
    pub token: u64,
    pub queue: String,
    pub opts: GetOptions,
    pub sel: Selector,
    /// Stands in for an asynchronous consumer rather than a get call.
    pub consumer: bool,
    /// When the wait interval ends (ms since the Unix epoch); `None` waits without limit.
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Default)]
struct QueueWaiters {
    any: VecDeque<u64>,
    by_correl: AHashMap<MsgId, VecDeque<u64>>,
    /// Waiters selecting by MsgId (possibly with a CorrelId too).
    by_msg: AHashMap<MsgId, VecDeque<u64>>,
}

#[derive(Debug, Default)]
pub struct Waiters {
    by_id: AHashMap<u64, Waiter>,
    /// Waits with a deadline, soonest first; an answered get leaves this set with its waiter.
    deadlines: std::collections::BTreeSet<(u64, u64)>,
    per_queue: AHashMap<String, QueueWaiters>,
    next_id: u64,
}

fn remove_from(list: &mut VecDeque<u64>, id: u64) {
    if let Some(pos) = list.iter().position(|x| *x == id) {
        list.remove(pos);
    }
}

impl Waiters {
    pub fn add(&mut self, mut w: Waiter) -> u64 {
        self.next_id += 1;
        w.id = self.next_id;
        // Looked up before inserting: the queue's name is copied only for its first waiter.
        if !self.per_queue.contains_key(&w.queue) {
            self.per_queue
                .insert(w.queue.clone(), QueueWaiters::default());
        }
        let qw = self.per_queue.get_mut(&w.queue).expect("inserted above");
        if w.sel.searches_groups {
            qw.any.push_back(w.id);
        } else if let Some(id) = w.sel.msg_id {
            qw.by_msg.entry(id).or_default().push_back(w.id);
        } else if let Some(id) = w.sel.correl_id {
            qw.by_correl.entry(id).or_default().push_back(w.id);
        } else {
            qw.any.push_back(w.id);
        }
        let id = w.id;
        if let Some(d) = w.deadline_ms {
            self.deadlines.insert((d, id));
        }
        self.by_id.insert(id, w);
        id
    }

    /// The soonest deadline of any wait.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Waiters whose deadline is at or before `now_ms`, soonest first (not removed).
    pub fn due(&self, now_ms: u64) -> Vec<u64> {
        self.deadlines
            .iter()
            .take_while(|(d, _)| *d <= now_ms)
            .map(|(_, id)| *id)
            .collect()
    }

    pub fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.by_id.remove(&id)?;
        if let Some(d) = w.deadline_ms {
            self.deadlines.remove(&(d, id));
        }
        if let Some(qw) = self.per_queue.get_mut(&w.queue) {
            if w.sel.searches_groups {
                remove_from(&mut qw.any, id);
            } else if let Some(mid) = w.sel.msg_id {
                if let Some(l) = qw.by_msg.get_mut(&mid) {
                    remove_from(l, id);
                    if l.is_empty() {
                        qw.by_msg.remove(&mid);
                    }
                }
            } else if let Some(cid) = w.sel.correl_id {
                if let Some(l) = qw.by_correl.get_mut(&cid) {
                    remove_from(l, id);
                    if l.is_empty() {
                        qw.by_correl.remove(&cid);
                    }
                }
            } else {
                remove_from(&mut qw.any, id);
            }
            if qw.any.is_empty() && qw.by_correl.is_empty() && qw.by_msg.is_empty() {
                self.per_queue.remove(&w.queue);
            }
        }
        Some(w)
    }

    pub fn get(&self, id: u64) -> Option<&Waiter> {
        self.by_id.get(&id)
    }

    /// The longest-waiting getter on `queue` that would take `entry`, excluding `skip` (browsers
    /// that have already seen it).
    pub fn candidate(&self, queue: &str, entry: &Entry, skip: &[u64]) -> Option<u64> {
        let qw = self.per_queue.get(queue)?;
        let ok = |id: &u64| {
            !skip.contains(id)
                && self
                    .by_id
                    .get(id)
                    .is_some_and(|w| w.sel.searches_groups || w.sel.matches(entry))
        };
        let mut best: Option<u64> = None;
        let mut consider = |id: Option<&u64>| {
            if let Some(id) = id {
                if best.is_none_or(|b| *id < b) {
                    best = Some(*id);
                }
            }
        };
        consider(qw.any.iter().find(|id| ok(id)));
        if let Some(l) = qw.by_correl.get(&entry.msg.correl_id) {
            consider(l.iter().find(|id| ok(id)));
        }
        if let Some(l) = qw.by_msg.get(&entry.msg.msg_id) {
            consider(l.iter().find(|id| ok(id)));
        }
        best
    }

    /// Every waiter on a queue (to fail them when the queue is deleted).
    pub fn on_queue(&self, queue: &str) -> Vec<u64> {
        self.by_id
            .values()
            .filter(|w| w.queue == queue)
            .map(|w| w.id)
            .collect()
    }

    pub fn of_handle(&self, conn: ConnId, hobj: u32) -> Vec<u64> {
        self.by_id
            .values()
            .filter(|w| w.conn == conn && w.hobj == hobj)
            .map(|w| w.id)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}
