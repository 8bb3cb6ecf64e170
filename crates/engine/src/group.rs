//! Message groups and segments (MQ's GroupId, MsgSeqNumber, Offset and MsgFlags): checking and
//! assigning a put's group fields (MQPMO_LOGICAL_ORDER continues, per object handle, the group and
//! logical message last put through it), choosing the message a get with group options takes
//! (MQGMO_LOGICAL_ORDER, ALL_MSGS_AVAILABLE, ALL_SEGMENTS_AVAILABLE, COMPLETE_MSG), and the
//! reassembly of a segmented logical message.
//!
//! A group is complete when its messages 1..=N are all available on the queue, the N-th flagged
//! MQMF_LAST_MSG_IN_GROUP, and each of them complete: a message that is not a segment, or
//! segments from offset 0, each starting where the one before ended, the last flagged
//! MQMF_LAST_SEGMENT. The checks scan the queue; groups are looked up only by gets that ask for
//! them, so queues without groups pay nothing.

use ahash::AHashMap;
use bytes::BytesMut;
use ferrymq_types::descriptor::{msg_flags, MessageDescriptor, MsgId, ID_NONE};
use ferrymq_types::options::{gmo, Browse, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{mqerr, MqError, Persistence, Reason};

use crate::conn::ConnId;
use crate::message::{Entry, Group, Lsn};
use crate::queue::{Key, Queue, Selector};
use crate::{Engine, Got};

/// Where a handle is in a group or a logical message, for puts or gets in logical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    group_id: MsgId,
    /// MsgSeqNumber of the last message put or got.
    seq: i32,
    /// Where the next segment starts, while a logical message is unfinished.
    next_offset: Option<i32>,
    /// The group's last message has not been reached.
    group_open: bool,
    persistent: bool,
    syncpoint: bool,
}

impl Position {
    /// The position after a message with these fields, or `None` when nothing is in progress.
    fn after(g: &Group, body_len: usize, persistent: bool, syncpoint: bool) -> Option<Position> {
        let next_offset =
            (g.is_segment() && !g.last_segment()).then(|| g.offset.saturating_add(body_len as i32));
        let group_open = g.in_group() && !g.last_in_group();
        (group_open || next_offset.is_some()).then_some(Position {
            group_id: g.group_id,
            seq: g.msg_seq_number,
            next_offset,
            group_open,
            persistent,
            syncpoint,
        })
    }

    /// The (MsgSeqNumber, Offset) that comes next.
    fn next(&self) -> (i32, i32) {
        match self.next_offset {
            Some(o) => (self.seq, o),
            None => (self.seq.saturating_add(1), 0),
        }
    }
}

/// A handle's positions for puts and gets in logical order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandleGroups {
    pub put: Option<Position>,
    pub get: Option<Position>,
}

fn group_of(md: &MessageDescriptor) -> Group {
    Group {
        group_id: md.group_id,
        msg_seq_number: md.msg_seq_number,
        offset: md.offset,
        msg_flags: md.msg_flags,
        original_length: md.original_length,
    }
}

/// Checks the group fields a put gives explicitly (without MQPMO_LOGICAL_ORDER).
fn check_explicit(md: &MessageDescriptor) -> Result<(), MqError> {
    let g = group_of(md);
    if md.msg_seq_number < 1 || (!g.in_group() && md.msg_seq_number != 1) {
        return Err(mqerr!(
            MSG_SEQ_NUMBER_ERROR,
            "MsgSeqNumber {} is not valid: it starts at 1, and is 1 for a message outside a group",
            md.msg_seq_number
        ));
    }
    if md.offset < 0 || (!g.is_segment() && md.offset != 0) {
        return Err(mqerr!(
            OFFSET_ERROR,
            "Offset {} is not valid: it is 0 or more, and 0 for a message that is not a segment",
            md.offset
        ));
    }
    Ok(())
}

impl Engine {
    /// Checks a put's group and segment fields and, under MQPMO_LOGICAL_ORDER, assigns them.
    /// Returns the handle's position to record once the put succeeds.
    pub(crate) fn group_put_fields(
        &mut self,
        conn: ConnId,
        hobj: u32,
        opts: &PutOptions,
        md: &mut MessageDescriptor,
        body_len: usize,
    ) -> Result<Option<Position>, MqError> {
        if md.msg_flags & !msg_flags::KNOWN != 0 {
            return Err(mqerr!(
                MSG_FLAGS_ERROR,
                "MsgFlags {:#x} has bits that are not MQMF_* flags",
                md.msg_flags
            ));
        }
        if md.original_length < -1 {
            return Err(mqerr!(
                ORIGINAL_LENGTH_ERROR,
                "OriginalLength {} is neither a length nor MQOL_UNDEFINED",
                md.original_length
            ));
        }
        let h = self.handle(conn, hobj)?;
        let cur = h.groups.put;
        let persistent = self.resolved_persistence(h, md.persistence);
        let syncpoint = opts.syncpoint == Syncpoint::Yes;
        let g = group_of(md);
        if !opts.logical_order {
            if let Some(p) = cur {
                return Err(incomplete(&p));
            }
            check_explicit(md)?;
            if (g.in_group() || g.is_segment()) && md.group_id == ID_NONE {
                md.group_id = self.new_id();
            }
            return Ok(None);
        }
        match cur {
            None => {
                if g.in_group() || g.is_segment() {
                    md.group_id = self.new_id();
                } else {
                    md.group_id = ID_NONE;
                }
                md.msg_seq_number = 1;
                md.offset = 0;
            }
            Some(p) => {
                if p.next_offset.is_some() && !g.is_segment() {
                    return Err(mqerr!(
                        INCOMPLETE_MSG,
                        "the logical message being put in segments through this handle is not finished: put its remaining segments (the last with MQMF_LAST_SEGMENT) first"
                    ));
                }
                if p.group_open && !g.in_group() {
                    return Err(mqerr!(
                        INCOMPLETE_GROUP,
                        "the group being put through this handle is not finished: put its remaining messages (the last with MQMF_LAST_MSG_IN_GROUP) first"
                    ));
                }
                if !p.group_open && g.in_group() {
                    return Err(mqerr!(
                        MSG_FLAGS_ERROR,
                        "a segment of a logical message outside a group cannot be flagged MQMF_MSG_IN_GROUP"
                    ));
                }
                if p.persistent != persistent {
                    return Err(mqerr!(
                        INCONSISTENT_PERSISTENCE,
                        "every message of a group, and every segment of a logical message, must have the same persistence"
                    ));
                }
                if p.syncpoint != syncpoint {
                    return Err(mqerr!(
                        INCONSISTENT_UOW,
                        "every message of a group, and every segment of a logical message, must be put with the same syncpoint option"
                    ));
                }
                let (seq, offset) = p.next();
                md.group_id = p.group_id;
                md.msg_seq_number = seq;
                md.offset = offset;
            }
        }
        Ok(Position::after(
            &group_of(md),
            body_len,
            persistent,
            syncpoint,
        ))
    }

    /// Records a handle's put position after a successful put in logical order.
    pub(crate) fn group_put_done(&mut self, conn: ConnId, hobj: u32, pos: Option<Position>) {
        if let Some(h) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.handles.get_mut(&hobj))
        {
            h.groups.put = pos;
        }
    }

    fn resolved_persistence(&self, h: &crate::conn::Handle, p: Persistence) -> bool {
        match p {
            Persistence::Persistent => true,
            Persistence::NotPersistent => false,
            Persistence::AsQueueDef => h
                .alias
                .as_ref()
                .and_then(|a| self.queues.get(a))
                .or_else(|| self.queues.get(&h.queue))
                .is_some_and(|q| q.def.def_persistent),
        }
    }

    /// Checks a get in logical order against the group or logical message under way on its
    /// handle: all of it is got in one unit of work or all outside one.
    pub(crate) fn check_group_get(
        &self,
        conn: ConnId,
        hobj: u32,
        opts: &GetOptions,
    ) -> Result<(), MqError> {
        if opts.group_options & !gmo::KNOWN != 0 {
            return Err(mqerr!(OPTIONS_ERROR, "unknown MQGMO_* group options"));
        }
        if opts.group_options & gmo::LOGICAL_ORDER == 0 || opts.browse != Browse::No {
            return Ok(());
        }
        let pos = self.handle(conn, hobj)?.groups.get;
        if pos.is_some_and(|p| p.syncpoint != (opts.syncpoint == Syncpoint::Yes)) {
            return Err(mqerr!(
                INCONSISTENT_UOW,
                "the group being got in logical order through this handle was started with another syncpoint option; get all of it in one unit of work or all outside one"
            ));
        }
        Ok(())
    }

    /// The message a get with group options (or group match fields) selects, discarding expired
    /// messages met on the way. `None` when none is eligible now.
    pub(crate) fn find_grouped(
        &mut self,
        conn: ConnId,
        hobj: u32,
        queue: &str,
        opts: &GetOptions,
        after: Option<Key>,
        now_ms: u64,
    ) -> Option<Key> {
        let sel = &Selector::for_get(opts);
        let logical = opts.group_options & gmo::LOGICAL_ORDER != 0 && opts.browse == Browse::No;
        let pos = if logical {
            self.handle(conn, hobj).ok().and_then(|h| h.groups.get)
        } else {
            None
        };
        let q = self.queues.get_mut(queue)?;
        let mut expired = Vec::new();
        let found = choose(q, opts, sel, logical, pos, after, now_ms, &mut expired);
        for k in expired {
            q.remove(k);
        }
        found
    }

    /// Takes (or browses) the message at `key` for a get with group options: a whole segmented
    /// logical message under MQGMO_COMPLETE_MSG, and the handle's logical-order position moved on.
    pub(crate) fn take_grouped(
        &mut self,
        conn: ConnId,
        hobj: u32,
        queue: &str,
        key: Key,
        opts: &GetOptions,
        now_ms: u64,
    ) -> Result<(Got, Lsn), MqError> {
        let q = self.queues.get(queue).expect("caller found the message");
        let first = q.entry(key).expect("caller found the message").msg.clone();
        let fg = *first.group();
        let (got, lsn) = if opts.group_options & gmo::COMPLETE_MSG != 0 && fg.is_segment() {
            let keys = segments_of(q, &fg.group_id, fg.msg_seq_number)
                .ok_or_else(|| mqerr!(NO_MSG_AVAILABLE, "no complete message on '{queue}'"))?;
            let total: usize = keys
                .iter()
                .map(|k| q.entry(*k).map_or(0, |e| e.msg.body.len()))
                .sum();
            if total as u64 > opts.max_len as u64 && !opts.accept_truncated {
                return Err(MqError::new(
                    Reason::TRUNCATED_MSG_FAILED,
                    format!("message of {total} bytes on '{queue}' is longer than the {} bytes accepted; it stays on the queue", opts.max_len),
                ));
            }
            // Every segment is taken, or none: a unit of work with too little room left is
            // refused before the first.
            let max = self.attrs.max_uncommitted_msgs;
            let held = self.conns.get(&conn).map_or(0, |c| c.uow.len());
            if opts.syncpoint != Syncpoint::No
                && opts.browse == Browse::No
                && (held + keys.len()) as u64 > u64::from(max)
            {
                return Err(mqerr!(
                    SYNCPOINT_LIMIT_REACHED,
                    "the unit of work cannot take the {} segments of this message within MAXUMSGS {max}; commit first",
                    keys.len()
                ));
            }
            let whole = GetOptions {
                max_len: u32::MAX,
                accept_truncated: false,
                ..opts.clone()
            };
            let mut body = BytesMut::with_capacity(total);
            let mut lsn = 0;
            let mut head = None;
            for k in keys {
                let (g, l) = self.take(conn, hobj, queue, k, &whole, now_ms)?;
                body.extend_from_slice(&g.body);
                lsn = lsn.max(l);
                head.get_or_insert(g);
            }
            let mut got = head.expect("a complete message has a segment");
            got.md.msg_flags &= !msg_flags::SEGMENTED;
            got.md.offset = 0;
            got.md.original_length = ferrymq_types::descriptor::ORIGINAL_LENGTH_UNDEFINED;
            got.data_len = total as u32;
            let body = body.freeze();
            if total as u64 > opts.max_len as u64 {
                got.body = body.slice(..opts.max_len as usize);
                got.reason = Reason::TRUNCATED_MSG_ACCEPTED;
            } else {
                got.body = body;
            }
            (got, lsn)
        } else {
            self.take(conn, hobj, queue, key, opts, now_ms)?
        };
        if opts.group_options & gmo::LOGICAL_ORDER != 0 && opts.browse == Browse::No {
            let g = group_of(&got.md);
            // A reassembled message moves the position past all its segments.
            let syncpoint = opts.syncpoint == Syncpoint::Yes;
            let pos = Position::after(&g, got.data_len as usize, false, syncpoint);
            if let Some(h) = self
                .conns
                .get_mut(&conn)
                .and_then(|c| c.handles.get_mut(&hobj))
            {
                h.groups.get = pos;
            }
        }
        Ok((got, lsn))
    }
}

fn incomplete(p: &Position) -> MqError {
    if p.next_offset.is_some() {
        mqerr!(
            INCOMPLETE_MSG,
            "a logical message put in logical order through this handle is not finished; finish it with MQPMO_LOGICAL_ORDER first"
        )
    } else {
        mqerr!(
            INCOMPLETE_GROUP,
            "a group put in logical order through this handle is not finished; finish it with MQPMO_LOGICAL_ORDER first"
        )
    }
}

/// Whether a get needs the group-aware search rather than the plain one.
pub(crate) fn searches_groups(opts: &GetOptions) -> bool {
    opts.group_options != 0
        || opts.match_group_id.is_some()
        || opts.match_msg_seq_number.is_some()
        || opts.match_offset.is_some()
}

/// The keys of the segments of logical message `seq` of group `gid`, in offset order, if all of
/// them are available.
fn segments_of(q: &Queue, gid: &MsgId, seq: i32) -> Option<Vec<Key>> {
    let mut segs: Vec<(i32, usize, bool, Key)> = q
        .iter()
        .filter(|(_, e)| {
            let g = e.msg.group();
            g.group_id == *gid && g.msg_seq_number == seq && g.is_segment()
        })
        .map(|(k, e)| {
            let g = e.msg.group();
            (g.offset, e.msg.body.len(), g.last_segment(), *k)
        })
        .collect();
    segs.sort_by_key(|s| s.0);
    let mut expect = 0i64;
    for (i, (off, len, last, _)) in segs.iter().enumerate() {
        if i64::from(*off) != expect {
            return None;
        }
        expect += *len as i64;
        if *last {
            return (i + 1 == segs.len()).then(|| segs.iter().map(|s| s.3).collect());
        }
    }
    None
}

/// Whether every message of group `gid` is available on the queue (and each logical message
/// whole, if segmented).
fn group_complete(q: &Queue, gid: &MsgId) -> bool {
    let mut members: AHashMap<i32, bool> = AHashMap::new();
    let mut last: Option<i32> = None;
    for (_, e) in q.iter() {
        let g = e.msg.group();
        if g.group_id != *gid || !g.in_group() {
            continue;
        }
        if g.last_in_group() {
            last = Some(g.msg_seq_number);
        }
        members.entry(g.msg_seq_number).or_insert(g.is_segment());
    }
    let Some(n) = last else {
        return false;
    };
    (1..=n).all(|s| match members.get(&s) {
        None => false,
        Some(false) => true,
        Some(true) => segments_of(q, gid, s).is_some(),
    })
}

/// The selection itself (see [`Engine::find_grouped`]).
#[allow(clippy::too_many_arguments)]
fn choose(
    q: &Queue,
    opts: &GetOptions,
    sel: &Selector,
    logical: bool,
    pos: Option<Position>,
    after: Option<Key>,
    now_ms: u64,
    expired: &mut Vec<Key>,
) -> Option<Key> {
    let go = opts.group_options;
    let mut complete_groups: AHashMap<MsgId, bool> = AHashMap::new();
    let range = q.iter().filter(|(k, _)| after.is_none_or(|a| **k > a));
    for (k, e) in range {
        if e.msg.is_expired(now_ms) {
            expired.push(*k);
            continue;
        }
        if !sel.matches(e) {
            continue;
        }
        let g = e.msg.group();
        if let Some(p) = pos {
            // In logical order with a group or logical message under way: only its next message.
            let (seq, offset) = p.next();
            if g.group_id == p.group_id && g.msg_seq_number == seq && g.offset == offset {
                return Some(*k);
            }
            continue;
        }
        if logical && (g.offset != 0 || (g.in_group() && g.msg_seq_number != 1)) {
            continue;
        }
        if go & gmo::ALL_MSGS_AVAILABLE != 0
            && g.in_group()
            && !*complete_groups
                .entry(g.group_id)
                .or_insert_with(|| group_complete(q, &g.group_id))
        {
            continue;
        }
        if g.is_segment() && go & (gmo::ALL_SEGMENTS_AVAILABLE | gmo::COMPLETE_MSG) != 0 {
            if go & gmo::COMPLETE_MSG != 0 && g.offset != 0 {
                continue;
            }
            if segments_of(q, &g.group_id, g.msg_seq_number).is_none() {
                continue;
            }
        }
        return Some(*k);
    }
    None
}

/// Whether `e` passes a selector's group match fields.
pub(crate) fn group_matches(sel: &Selector, e: &Entry) -> bool {
    let g = e.msg.group();
    sel.group_id.is_none_or(|id| g.group_id == id)
        && sel.msg_seq_number.is_none_or(|n| g.msg_seq_number == n)
        && sel.offset.is_none_or(|o| g.offset == o)
}
