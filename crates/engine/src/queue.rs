//! One local queue's messages: ordered for delivery (priority then arrival, or arrival only) and
//! indexed by MsgId and CorrelId so that a get by identifier costs a hash lookup, not a scan, even
//! when hundreds of requesters share one reply queue.

use std::collections::BTreeMap;

use ahash::AHashMap;
use ferrymq_types::descriptor::{MsgId, ID_NONE};
use ferrymq_types::{MsgDeliverySequence, QueueDef};
use smallvec::SmallVec;

use crate::message::Entry;

/// Delivery order key: (inverted priority, sequence). Smaller keys are delivered first.
///
/// Packed into one `u64` — the rank (0..=9) in the top 4 bits, the sequence number in the low 60 —
/// so that it orders exactly as the pair (rank, seq) while a queue's B-tree holds 8 bytes per key
/// rather than 16 (about 12 bytes less per queued message). Sequence numbers are a queue manager's
/// put counter and stay far below 2^60 (a billion puts a second for 36 years).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(u64);

const SEQ_BITS: u32 = 60;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
const _: () = assert!(SEQ_MASK == ferrymq_types::limits::MSG_SEQ_MAX);

impl Key {
    pub fn new(rank: u8, seq: u64) -> Key {
        debug_assert!(
            rank <= 15 && seq <= SEQ_MASK,
            "key ({rank}, {seq}) out of range"
        );
        Key((u64::from(rank & 15) << SEQ_BITS) | (seq & SEQ_MASK))
    }

    /// Inverted priority: 0 for priority 9 (or any message of a FIFO queue), 9 for priority 0.
    pub fn rank(self) -> u8 {
        (self.0 >> SEQ_BITS) as u8
    }

    pub fn seq(self) -> u64 {
        self.0 & SEQ_MASK
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("rank", &self.rank())
            .field("seq", &self.seq())
            .finish()
    }
}

/// The keys of the messages with one identifier, in delivery order. Nearly always one: kept
/// inline (16 bytes, no allocation of its own).
type Keys = SmallVec<[Key; 1]>;

/// Which messages a get will take.
#[derive(Clone, Copy, Debug, Default)]
pub struct Selector {
    pub msg_id: Option<MsgId>,
    pub correl_id: Option<MsgId>,
    pub group_id: Option<MsgId>,
    pub msg_seq_number: Option<i32>,
    pub offset: Option<i32>,
    /// The get has group options or group match fields: the engine's group-aware search
    /// (`group.rs`) chooses its message, which need not be the one that just arrived.
    pub searches_groups: bool,
}

impl Selector {
    /// MQ treats an all-zero identifier in a match field as "any".
    pub fn new(msg_id: Option<MsgId>, correl_id: Option<MsgId>) -> Selector {
        Selector {
            msg_id: msg_id.filter(|id| *id != ID_NONE),
            correl_id: correl_id.filter(|id| *id != ID_NONE),
            ..Selector::default()
        }
    }

    /// The selector of a get's options: identifiers and group match fields.
    pub fn for_get(opts: &ferrymq_types::options::GetOptions) -> Selector {
        Selector {
            group_id: opts.match_group_id.filter(|id| *id != ID_NONE),
            msg_seq_number: opts.match_msg_seq_number,
            offset: opts.match_offset,
            searches_groups: crate::group::searches_groups(opts),
            ..Selector::new(opts.match_msg_id, opts.match_correl_id)
        }
    }

    pub fn matches(&self, e: &Entry) -> bool {
        self.msg_id.is_none_or(|id| e.msg.msg_id == id)
            && self.correl_id.is_none_or(|id| e.msg.correl_id == id)
            && (!self.searches_groups || crate::group::group_matches(self, e))
    }

    pub fn is_any(&self) -> bool {
        self.msg_id.is_none() && self.correl_id.is_none()
    }
}

/// Per-queue status counters shown by inquire and DISPLAY QSTATUS.
#[derive(Clone, Debug, Default)]
pub struct QueueStats {
    pub open_input: u32,
    pub open_output: u32,
    pub last_put_ms: u64,
    pub last_get_ms: u64,
    pub puts: u64,
    pub gets: u64,
}

#[derive(Debug)]
pub struct Queue {
    pub def: QueueDef,
    msgs: BTreeMap<Key, Entry>,
    /// Built on the first get or browse by MsgId and kept while the queue holds messages. Most
    /// queues are never searched by MsgId (it is unique per message, so the index would cost
    /// about a hundred bytes per queued message for nothing); those that are pay one scan.
    by_msg_id: Option<AHashMap<MsgId, Keys>>,
    by_correl_id: AHashMap<MsgId, Keys>,
    /// Messages put under syncpoint and not yet committed: they count towards MAXDEPTH.
    pub uncommitted_puts: u32,
    /// Messages taken by gets of units of work not yet committed: still part of CURDEPTH.
    pub locked: u32,
    pub stats: QueueStats,
    /// Handle holding the queue open for exclusive input, if any.
    pub exclusive: Option<(u64, u32)>,
}

fn index_add(ix: &mut AHashMap<MsgId, Keys>, id: MsgId, key: Key) {
    if id == ID_NONE {
        return;
    }
    let v = ix.entry(id).or_default();
    let pos = v.partition_point(|k| *k < key);
    v.insert(pos, key);
}

fn index_remove(ix: &mut AHashMap<MsgId, Keys>, id: MsgId, key: Key) {
    if id == ID_NONE {
        return;
    }
    if let Some(v) = ix.get_mut(&id) {
        if let Ok(pos) = v.binary_search(&key) {
            v.remove(pos);
        }
        if v.is_empty() {
            ix.remove(&id);
        }
    }
}

impl Queue {
    pub fn new(def: QueueDef) -> Queue {
        Queue {
            def,
            msgs: BTreeMap::new(),
            by_msg_id: None,
            by_correl_id: AHashMap::new(),
            uncommitted_puts: 0,
            locked: 0,
            stats: QueueStats::default(),
            exclusive: None,
        }
    }

    /// The delivery key a message gets on this queue.
    pub fn key_for(&self, priority: u8, seq: u64) -> Key {
        match self.def.msg_delivery_sequence {
            MsgDeliverySequence::Priority => Key::new(9 - priority.min(9), seq),
            MsgDeliverySequence::Fifo => Key::new(0, seq),
        }
    }

    /// Replaces the definition (ALTER, or its replay). Every queued message's key is always
    /// `key_for(priority, seq)` under the current definition: the checkpoint image stores no keys
    /// and restore recomputes them, and a unit of work logs the rank its gets have under the
    /// definition in force when it commits. So a change of MSGDLVSQ re-keys the messages here,
    /// at the same point of the log on every replica and on replay. Returns whether it did.
    pub fn set_def(&mut self, def: QueueDef) -> bool {
        let rekey = def.msg_delivery_sequence != self.def.msg_delivery_sequence;
        self.def = def;
        if !rekey || self.msgs.is_empty() {
            return rekey;
        }
        let old = std::mem::take(&mut self.msgs);
        self.by_msg_id = None;
        self.by_correl_id.clear();
        for (_, e) in old {
            let key = self.key_for(e.msg.priority, e.msg.seq);
            self.insert(key, e);
        }
        true
    }

    /// The key of the queued message with sequence number `seq`, whatever rank it sits at (a
    /// sequence number is unique in a queue manager; ranks are 0..=9, so this is at most ten
    /// lookups, never a scan).
    pub fn key_of_seq(&self, seq: u64, hint_rank: u8) -> Option<Key> {
        // Decoded records carry no larger sequence number, but a hint is only a hint.
        if seq > SEQ_MASK {
            return None;
        }
        if hint_rank <= 9 {
            let hint = Key::new(hint_rank, seq);
            if self.msgs.contains_key(&hint) {
                return Some(hint);
            }
        }
        (0..=9u8)
            .map(|rank| Key::new(rank, seq))
            .find(|k| self.msgs.contains_key(k))
    }

    /// Committed messages available or locked by a unit of work (MQ's CURDEPTH).
    pub fn depth(&self) -> u32 {
        self.msgs.len() as u32 + self.locked
    }

    pub fn available(&self) -> usize {
        self.msgs.len()
    }

    /// Whether one more message would exceed MAXDEPTH.
    pub fn is_full(&self) -> bool {
        self.depth() + self.uncommitted_puts >= self.def.max_depth
    }

    pub fn insert(&mut self, key: Key, entry: Entry) {
        if let Some(ix) = &mut self.by_msg_id {
            index_add(ix, entry.msg.msg_id, key);
        }
        index_add(&mut self.by_correl_id, entry.msg.correl_id, key);
        let old = self.msgs.insert(key, entry);
        debug_assert!(old.is_none(), "two messages with one delivery key");
    }

    /// Inserts `entry` unless a message already has `key`; then nothing changes and the entry
    /// is handed back (restoring a damaged image must not let one message replace another).
    pub fn insert_new(&mut self, key: Key, entry: Entry) -> Result<(), Box<Entry>> {
        if self.msgs.contains_key(&key) {
            return Err(Box::new(entry));
        }
        self.insert(key, entry);
        Ok(())
    }

    pub fn remove(&mut self, key: Key) -> Option<Entry> {
        let e = self.msgs.remove(&key)?;
        if let Some(ix) = &mut self.by_msg_id {
            index_remove(ix, e.msg.msg_id, key);
        }
        index_remove(&mut self.by_correl_id, e.msg.correl_id, key);
        if self.msgs.is_empty() {
            self.by_msg_id = None;
        }
        Some(e)
    }

    /// Builds the MsgId index if the queue has none yet (before a get or browse by MsgId).
    pub fn index_msg_ids(&mut self) {
        if self.by_msg_id.is_none() {
            let mut ix = AHashMap::new();
            for (k, e) in &self.msgs {
                index_add(&mut ix, e.msg.msg_id, *k);
            }
            self.by_msg_id = Some(ix);
        }
    }

    pub fn entry(&self, key: Key) -> Option<&Entry> {
        self.msgs.get(&key)
    }

    /// The first message matching `sel` with a key after `after` (browse cursor), skipping and
    /// collecting expired messages into `expired` so the caller can discard them.
    pub fn find(
        &self,
        sel: &Selector,
        after: Option<Key>,
        now_ms: u64,
        expired: &mut Vec<Key>,
    ) -> Option<Key> {
        let from_index = |keys: &Keys| -> Option<Key> {
            for k in keys {
                if after.is_some_and(|a| *k <= a) {
                    continue;
                }
                let e = &self.msgs[k];
                if e.msg.is_expired(now_ms) {
                    expired.push(*k);
                    continue;
                }
                if sel.matches(e) {
                    return Some(*k);
                }
            }
            None
        };
        if let (Some(id), Some(ix)) = (sel.msg_id, &self.by_msg_id) {
            return ix.get(&id).and_then(from_index);
        }
        if let (None, Some(id)) = (sel.msg_id, sel.correl_id) {
            return self.by_correl_id.get(&id).and_then(from_index);
        }
        let range = match after {
            Some(a) => self
                .msgs
                .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
            None => self.msgs.range(..),
        };
        // In order (a MsgId search without its index, made only if the caller did not build it).
        for (k, e) in range {
            if e.msg.is_expired(now_ms) {
                expired.push(*k);
                continue;
            }
            if sel.matches(e) {
                return Some(*k);
            }
        }
        None
    }

    /// The available messages after `after` (all of them for `None`), in delivery order.
    pub fn entries_after(&self, after: Option<Key>) -> impl Iterator<Item = (&Key, &Entry)> {
        let lo = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        self.msgs.range((lo, std::ops::Bound::Unbounded))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Entry)> {
        self.msgs.iter()
    }

    /// Removes every available message (CLEAR QLOCAL, DELETE PURGE) and returns them.
    pub fn drain(&mut self) -> Vec<Entry> {
        self.by_msg_id = None;
        self.by_correl_id.clear();
        std::mem::take(&mut self.msgs).into_values().collect()
    }

    /// Age in seconds of the oldest message (MSGAGE).
    pub fn oldest_put_ms(&self) -> Option<u64> {
        self.msgs.values().map(|e| e.msg.put_time_ms).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use bytes::Bytes;
    use ferrymq_types::{MessageDescriptor, Properties};
    use std::sync::Arc;

    fn entry(seq: u64, prio: i32, correl: u8) -> Entry {
        let md = MessageDescriptor {
            msg_id: [seq as u8; 24],
            correl_id: [correl; 24],
            priority: prio,
            ..Default::default()
        };
        Entry {
            msg: Arc::new(Message::new(
                seq,
                md,
                Properties::default(),
                Bytes::new(),
                None,
                0,
            )),
            backout_count: 0,
        }
    }

    fn put(q: &mut Queue, seq: u64, prio: i32, correl: u8) {
        let k = q.key_for(prio as u8, seq);
        q.insert(k, entry(seq, prio, correl));
    }

    #[test]
    fn priority_queue_delivers_highest_priority_first_then_fifo() {
        let mut q = Queue::new(QueueDef::local("Q"));
        put(&mut q, 1, 0, 0);
        put(&mut q, 2, 5, 0);
        put(&mut q, 3, 5, 0);
        let mut x = vec![];
        let order: Vec<u64> = std::iter::from_fn(|| {
            let k = q.find(&Selector::default(), None, 0, &mut x)?;
            q.remove(k).map(|e| e.msg.seq)
        })
        .collect();
        assert_eq!(order, vec![2, 3, 1]);
    }

    #[test]
    fn get_by_correl_id_uses_the_index_and_respects_order() {
        let mut q = Queue::new(QueueDef::local("Q"));
        for seq in 1..=100 {
            put(&mut q, seq, 0, (seq % 10) as u8 + 1);
        }
        let sel = Selector::new(None, Some([4; 24]));
        let k = q.find(&sel, None, 0, &mut vec![]).unwrap();
        assert_eq!(k.seq(), 3);
        q.remove(k);
        assert_eq!(q.find(&sel, None, 0, &mut vec![]).unwrap().seq(), 13);
        assert!(q
            .find(&Selector::new(None, Some([99; 24])), None, 0, &mut vec![])
            .is_none());
    }

    #[test]
    fn the_msg_id_index_is_built_on_first_use_and_kept_while_messages_remain() {
        let mut q = Queue::new(QueueDef::local("Q"));
        for seq in 1..=50 {
            put(&mut q, seq, 0, 0);
        }
        let sel = Selector::new(Some([7; 24]), None);
        // Without the index the search scans, and finds the same message.
        assert_eq!(q.find(&sel, None, 0, &mut vec![]).unwrap().seq(), 7);
        assert!(q.by_msg_id.is_none());
        q.index_msg_ids();
        assert_eq!(q.find(&sel, None, 0, &mut vec![]).unwrap().seq(), 7);
        put(&mut q, 51, 0, 0);
        let k = q
            .find(&Selector::new(Some([51; 24]), None), None, 0, &mut vec![])
            .unwrap();
        q.remove(k);
        assert!(q
            .find(&Selector::new(Some([51; 24]), None), None, 0, &mut vec![])
            .is_none());
        assert!(q.by_msg_id.is_some());
        while let Some(k) = q.find(&Selector::default(), None, 0, &mut vec![]) {
            q.remove(k);
        }
        assert!(q.by_msg_id.is_none(), "dropped once the queue is empty");
    }

    #[test]
    fn a_packed_key_orders_as_the_pair_rank_seq() {
        let ranks = [0u8, 1, 5, 9];
        let seqs = [0u64, 1, 2, 1000, u32::MAX as u64, (1 << 60) - 1];
        let mut pairs = vec![];
        for r in ranks {
            for s in seqs {
                pairs.push((r, s));
            }
        }
        for &(r1, s1) in &pairs {
            let k1 = Key::new(r1, s1);
            assert_eq!((k1.rank(), k1.seq()), (r1, s1));
            for &(r2, s2) in &pairs {
                assert_eq!(k1.cmp(&Key::new(r2, s2)), (r1, s1).cmp(&(r2, s2)));
            }
        }
        assert_eq!(std::mem::size_of::<Key>(), 8);
    }

    #[test]
    fn zero_identifier_matches_anything() {
        let sel = Selector::new(Some(ID_NONE), Some(ID_NONE));
        assert!(sel.is_any());
    }
}
