//! A message as the engine holds it: immutable content shared by `Arc` (so a checkpoint, a
//! delivery and a queue can all hold it without copying the body), plus where it lives on disk.
//!
//! Kept compact, since a deep queue holds millions: the descriptor's commonly set fixed fields
//! inline, its strings, the properties and the fields that are nearly always zero (report options,
//! feedback, backout count at put) behind one optional pointer (absent when all are empty or zero;
//! shared by consecutive messages whose text is the same, as one program's stream's is), the body
//! in an allocation of its own sized to it (see [`own_body`]). The
//! structure is kept at or under 152 bytes so that its `Arc` allocation (16 bytes more) falls in
//! glibc's 176-byte chunk size rather than the 192-byte one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use ferrymq_types::descriptor::{msg_flags, DescriptorRef, MsgId};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue};

/// A log sequence number: the end position of a recovery-log record.
pub type Lsn = u64;

/// The descriptor's strings, the properties and its rarely nonzero fields: behind a pointer,
/// and only when one of them is set. Since the queue manager fills in the context (user,
/// program) of every message, nearly every message has one; messages with the same text (one
/// program's stream: same user, program, format, reply queue) share it rather than each holding
/// a copy ([`shared_text`]).
///
/// The six strings are kept end to end in one buffer: comparing a put's text with a kept one
/// then reads two allocations (this structure and the buffer) rather than seven, which matters
/// because a kept text is usually no longer in the processor's caches when the next message of
/// its stream arrives.
#[derive(Debug, Default, Clone, PartialEq)]
struct Text {
    /// Format, ReplyToQ, ReplyToQMgr, UserIdentifier, ApplIdentityData and PutApplName, in that
    /// order ([`Strs`]), end to end.
    strings: Box<str>,
    /// Where each of the six ends in `strings`.
    ends: [u32; 6],
    props: Properties,
    /// What `props` held when this text was made, counted in [`held_bytes`] while it lives.
    props_held: PropsHeld,
    backout_count: u32,
    feedback: i32,
    report: i32,
    group: Group,
}

/// Bytes of message properties alive in this process (see [`PropsHeld`]).
static PROPS_BYTES: AtomicU64 = AtomicU64::new(0);

/// A text's share of [`PROPS_BYTES`]: added when the text is made or cloned, taken back when
/// it is dropped (the amount it added, whatever its properties became since).
#[derive(Debug, Default)]
struct PropsHeld(u64);

impl PropsHeld {
    fn of(props: &Properties) -> PropsHeld {
        let n = props_bytes(props) as u64;
        PROPS_BYTES.fetch_add(n, Ordering::Relaxed);
        PropsHeld(n)
    }
}

/// What a message's properties count for in [`held_bytes`]: names and values, and 48 bytes
/// each for their entry and allocations.
pub fn props_bytes(props: &Properties) -> usize {
    props
        .0
        .iter()
        .map(|(name, v)| {
            let value = match v {
                PropertyValue::String(s) => s.len(),
                PropertyValue::Bytes(b) => b.len(),
                _ => 8,
            };
            name.len() + value + 48
        })
        .sum()
}

impl Clone for PropsHeld {
    fn clone(&self) -> PropsHeld {
        PROPS_BYTES.fetch_add(self.0, Ordering::Relaxed);
        PropsHeld(self.0)
    }
}

impl Drop for PropsHeld {
    fn drop(&mut self) {
        PROPS_BYTES.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// Not part of what a text says.
impl PartialEq for PropsHeld {
    fn eq(&self, _: &PropsHeld) -> bool {
        true
    }
}

/// The descriptor's group and segment fields (MQ's GroupId, MsgSeqNumber, Offset, MsgFlags,
/// OriginalLength): kept in the box with the other rarely set fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub group_id: MsgId,
    pub msg_seq_number: i32,
    pub offset: i32,
    pub msg_flags: i32,
    pub original_length: i32,
}

impl Default for Group {
    fn default() -> Group {
        let md = MessageDescriptor::default();
        Group {
            group_id: md.group_id,
            msg_seq_number: md.msg_seq_number,
            offset: md.offset,
            msg_flags: md.msg_flags,
            original_length: md.original_length,
        }
    }
}

impl Group {
    /// A member of a group (MQMF_MSG_IN_GROUP or MQMF_LAST_MSG_IN_GROUP).
    pub fn in_group(&self) -> bool {
        self.msg_flags & msg_flags::IN_GROUP != 0
    }
    /// The last message of its group.
    pub fn last_in_group(&self) -> bool {
        self.msg_flags & msg_flags::LAST_MSG_IN_GROUP != 0
    }
    /// A segment of a logical message (MQMF_SEGMENT or MQMF_LAST_SEGMENT).
    pub fn is_segment(&self) -> bool {
        self.msg_flags & msg_flags::SEGMENTED != 0
    }
    pub fn last_segment(&self) -> bool {
        self.msg_flags & msg_flags::LAST_SEGMENT != 0
    }
}

static NO_GROUP: Group = Group {
    group_id: ferrymq_types::descriptor::ID_NONE,
    msg_seq_number: 1,
    offset: 0,
    msg_flags: 0,
    original_length: ferrymq_types::descriptor::ORIGINAL_LENGTH_UNDEFINED,
};

impl Text {
    /// String `i` of the six (see [`Strs`]).
    fn str(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.strings[start..self.ends[i] as usize]
    }
}

/// A message's text fields as its descriptor holds them, borrowed: compared with the kept texts
/// before any copy is made of them.
struct Strs<'a> {
    /// Format, ReplyToQ, ReplyToQMgr, UserIdentifier, ApplIdentityData, PutApplName.
    strs: [&'a str; 6],
    backout_count: u32,
    feedback: i32,
    report: i32,
    group: Group,
}

impl Strs<'_> {
    fn is_empty(&self) -> bool {
        self.strs.iter().all(|s| s.is_empty())
            && self.backout_count == 0
            && self.feedback == 0
            && self.report == 0
            && self.group == NO_GROUP
    }

    /// Whether `t` (a text without properties) holds exactly these fields.
    fn matches(&self, t: &Text) -> bool {
        t.props.is_empty()
            && self.backout_count == t.backout_count
            && self.feedback == t.feedback
            && self.report == t.report
            && self.group == t.group
            && self.strings_match(t)
    }

    /// The six strings against `t`'s buffer: lengths first (they sit beside the other fields),
    /// then bytes, skipping the empty ones.
    fn strings_match(&self, t: &Text) -> bool {
        let bytes = t.strings.as_bytes();
        let mut start = 0;
        for (s, &end) in self.strs.iter().zip(&t.ends) {
            let end = end as usize;
            if end.wrapping_sub(start) != s.len() {
                return false;
            }
            if !s.is_empty() && bytes.get(start..end) != Some(s.as_bytes()) {
                return false;
            }
            start = end;
        }
        true
    }

    fn to_text(&self, props: Properties) -> Text {
        let mut strings = String::with_capacity(self.strs.iter().map(|s| s.len()).sum());
        let mut ends = [0u32; 6];
        for (end, s) in ends.iter_mut().zip(self.strs) {
            strings.push_str(s);
            // The descriptor's strings travel with 16-bit lengths: six of them end to end are
            // far below 4 GiB.
            *end = u32::try_from(strings.len()).expect("descriptor strings fit in 4 GiB");
        }
        Text {
            strings: strings.into_boxed_str(),
            ends,
            props_held: PropsHeld::of(&props),
            props,
            backout_count: self.backout_count,
            feedback: self.feedback,
            report: self.report,
            group: self.group,
        }
    }
}

static NO_PROPERTIES: Properties = Properties(Vec::new());

/// Texts (without properties) recently made on this thread: a message whose text equals a kept
/// one shares it. A text is looked for only among the few kept under its fingerprint (a hash of
/// its fields): one set of `TEXT_CACHE_WAYS` entries, most recently used first, whose
/// fingerprints are compared before any text is. So a put pays one hash and, on a hit, one full
/// comparison (which guards against fingerprint collisions), however many streams interleave; a
/// miss compares no text at all and replaces the set's least recently used entry. (A single
/// short list compared text by text missed on every put once more streams interleaved than it
/// held — one per requester's reply queue is common — and paid a full comparison for each
/// entry, touching cold memory, on every miss.) Sharing changes nothing a message shows: a text
/// is immutable once shared.
const TEXT_CACHE_SETS: usize = 32;
const TEXT_CACHE_WAYS: usize = 4;
const _: () = assert!(TEXT_CACHE_SETS.is_power_of_two());

type TextSet = [Option<(u64, Arc<Text>)>; TEXT_CACHE_WAYS];

thread_local! {
    static TEXT_CACHE: std::cell::RefCell<[TextSet; TEXT_CACHE_SETS]> =
        const { std::cell::RefCell::new([const { [const { None }; TEXT_CACHE_WAYS] }; TEXT_CACHE_SETS]) };
}

impl Strs<'_> {
    /// A hash of every field (texts with properties are not cached).
    fn fingerprint(&self) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = TEXT_HASHER.build_hasher();
        self.strs.hash(&mut h);
        self.backout_count.hash(&mut h);
        self.feedback.hash(&mut h);
        self.report.hash(&mut h);
        let g = &self.group;
        g.group_id.hash(&mut h);
        (g.msg_seq_number, g.offset, g.msg_flags, g.original_length).hash(&mut h);
        h.finish()
    }
}

/// Fixed keys: the fingerprints only pick slots in this process's own cache.
static TEXT_HASHER: ahash::RandomState = ahash::RandomState::with_seeds(
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
);

fn shared_text(text: &Strs, props: Properties) -> Arc<Text> {
    // Texts with properties are neither shared nor kept: they seldom repeat, and the cache must
    // not hold large ones alive after their messages are gone.
    if !props.is_empty() {
        return Arc::new(text.to_text(props));
    }
    let fp = text.fingerprint();
    TEXT_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let set = &mut c[fp as usize & (TEXT_CACHE_SETS - 1)];
        let found = set
            .iter()
            .position(|e| e.as_ref().is_some_and(|(f, t)| *f == fp && text.matches(t)));
        // The entry found (or the least recently used one, replaced) moves to the front.
        let at = found.unwrap_or(TEXT_CACHE_WAYS - 1);
        set[..=at].rotate_right(1);
        if found.is_none() {
            set[0] = Some((fp, Arc::new(text.to_text(props))));
        }
        set[0]
            .as_ref()
            .map(|(_, t)| t.clone())
            .expect("just placed")
    })
}

/// The stored content of one message. The descriptor's backout count here is the count at put
/// time; the live count is kept beside the message on its queue.
#[derive(Debug)]
pub struct Message {
    /// Queue-manager-wide sequence number given at put: the message's identity in the log and its
    /// FIFO position on a queue.
    pub seq: u64,
    pub body: Bytes,
    /// Absolute expiry time (ms since the Unix epoch); 0 if the message does not expire.
    expires_ms: u64,
    /// The log record that made this message durable (0 for non-persistent or recovered ones).
    /// A reply that reveals the message waits until the log is durable to here.
    put_lsn: AtomicU64,
    /// Packed location in the message store once a checkpoint has copied it there (0 = not yet).
    store_loc: AtomicU64,
    pub put_time_ms: u64,
    pub msg_id: MsgId,
    pub correl_id: MsgId,
    md_priority: i32,
    expiry: i32,
    msg_type: i32,
    encoding: i32,
    ccsid: i32,
    text: Option<Arc<Text>>,
    persistence: Persistence,
    pub persistent: bool,
    /// 0..=9 after resolving MQPRI_PRIORITY_AS_Q_DEF.
    pub priority: u8,
}

impl Message {
    pub fn new(
        seq: u64,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        expires_at_ms: Option<u64>,
        put_lsn: Lsn,
    ) -> Message {
        Message::with_owned_body(seq, md, props, own_body(body), expires_at_ms, put_lsn)
    }

    /// As [`Message::new`] with a body already as the engine keeps it (another message's).
    fn with_owned_body(
        seq: u64,
        md: MessageDescriptor,
        props: Properties,
        body: Bytes,
        expires_at_ms: Option<u64>,
        put_lsn: Lsn,
    ) -> Message {
        let persistent = md.persistence == Persistence::Persistent;
        let priority = md.priority.clamp(0, 9) as u8;
        let MessageDescriptor {
            msg_id,
            correl_id,
            persistence,
            priority: md_priority,
            expiry,
            msg_type,
            format,
            reply_to_q,
            reply_to_qmgr,
            backout_count,
            put_time_ms,
            user_id,
            appl_identity,
            put_appl_name,
            encoding,
            ccsid,
            feedback,
            report,
            group_id,
            msg_seq_number,
            offset,
            msg_flags,
            original_length,
        } = md;
        let text = Strs {
            strs: [
                &format,
                &reply_to_q,
                &reply_to_qmgr,
                &user_id,
                &appl_identity,
                &put_appl_name,
            ],
            backout_count,
            feedback,
            report,
            group: Group {
                group_id,
                msg_seq_number,
                offset,
                msg_flags,
                original_length,
            },
        };
        let empty = text.is_empty() && props.is_empty();
        MESSAGES.fetch_add(1, Ordering::Relaxed);
        Message {
            seq,
            body,
            expires_ms: expires_at_ms.map_or(0, |t| t.max(1)),
            put_lsn: AtomicU64::new(put_lsn),
            store_loc: AtomicU64::new(0),
            put_time_ms,
            msg_id,
            correl_id,
            md_priority,
            expiry,
            msg_type,
            encoding,
            ccsid,
            text: (!empty).then(|| shared_text(&text, props)),
            persistence,
            persistent,
            priority,
        }
    }

    /// The descriptor as put (backout count as at put time).
    pub fn md(&self) -> MessageDescriptor {
        self.md_ref().to_descriptor()
    }

    /// The descriptor as put, borrowed from the message (what [`md`](Self::md) copies): for
    /// encoding it, as the log records do, without rebuilding its strings.
    pub fn md_ref(&self) -> DescriptorRef<'_> {
        let t = self.text.as_deref();
        let s = |i: usize| t.map_or("", |t| t.str(i));
        let n = |f: fn(&Text) -> i32| t.map_or(0, f);
        let g = self.group();
        DescriptorRef {
            msg_id: &self.msg_id,
            correl_id: &self.correl_id,
            persistence: self.persistence,
            priority: self.md_priority,
            expiry: self.expiry,
            msg_type: self.msg_type,
            format: s(0),
            reply_to_q: s(1),
            reply_to_qmgr: s(2),
            backout_count: t.map_or(0, |t| t.backout_count),
            put_time_ms: self.put_time_ms,
            user_id: s(3),
            appl_identity: s(4),
            put_appl_name: s(5),
            encoding: self.encoding,
            ccsid: self.ccsid,
            feedback: n(|t| t.feedback),
            report: n(|t| t.report),
            group_id: &g.group_id,
            msg_seq_number: g.msg_seq_number,
            offset: g.offset,
            msg_flags: g.msg_flags,
            original_length: g.original_length,
        }
    }

    /// The group and segment fields.
    pub fn group(&self) -> &Group {
        self.text.as_deref().map_or(&NO_GROUP, |t| &t.group)
    }

    pub fn msg_type(&self) -> i32 {
        self.msg_type
    }

    /// The Report field (MQRO_* options) as put.
    pub fn report(&self) -> i32 {
        self.text.as_deref().map_or(0, |t| t.report)
    }

    pub fn props(&self) -> &Properties {
        self.text.as_deref().map_or(&NO_PROPERTIES, |t| &t.props)
    }

    /// The properties, to change them on a copy being made (a move to the dead-letter queue).
    pub fn props_mut(&mut self) -> &mut Properties {
        &mut Arc::make_mut(self.text.get_or_insert_with(Arc::default)).props
    }

    /// Absolute expiry time (ms since the Unix epoch), if the message expires.
    pub fn expires_at_ms(&self) -> Option<u64> {
        (self.expires_ms != 0).then_some(self.expires_ms)
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_ms != 0 && now_ms >= self.expires_ms
    }

    pub fn put_lsn(&self) -> Lsn {
        self.put_lsn.load(Ordering::Acquire)
    }

    /// Set when the record that makes the message durable is known (a commit of a unit of work).
    pub fn set_put_lsn(&self, lsn: Lsn) {
        self.put_lsn.store(lsn, Ordering::Release);
    }

    pub fn store_loc(&self) -> u64 {
        self.store_loc.load(Ordering::Acquire)
    }

    /// Recorded by the checkpointer once the message is durable in the message store.
    pub fn set_store_loc(&self, loc: u64) {
        self.store_loc.store(loc, Ordering::Release);
    }

    /// Another copy of this message under sequence number `seq`, sharing its descriptor text,
    /// properties and body (a publication's copies for its subscribers): no allocation beyond
    /// the message itself.
    pub fn copy_as(&self, seq: u64) -> Message {
        MESSAGES.fetch_add(1, Ordering::Relaxed);
        Message {
            seq,
            body: self.body.clone(),
            expires_ms: self.expires_ms,
            put_lsn: AtomicU64::new(0),
            store_loc: AtomicU64::new(0),
            put_time_ms: self.put_time_ms,
            msg_id: self.msg_id,
            correl_id: self.correl_id,
            md_priority: self.md_priority,
            expiry: self.expiry,
            msg_type: self.msg_type,
            encoding: self.encoding,
            ccsid: self.ccsid,
            text: self.text.clone(),
            persistence: self.persistence,
            persistent: self.persistent,
            priority: self.priority,
        }
    }

    /// A copy of this message under a new sequence number (a move to another queue).
    pub fn renumbered(&self, seq: u64, put_lsn: Lsn) -> Message {
        Message::with_owned_body(
            seq,
            self.md(),
            self.props().clone(),
            self.body.clone(),
            self.expires_at_ms(),
            put_lsn,
        )
    }
}

/// A body as the engine keeps it. Bodies arrive as slices of larger buffers — a socket's read
/// buffer (64 KiB, shared by every frame read with it), a log or message-store segment read at
/// restart, a shipped DR chunk — and a slice keeps its whole buffer alive for as long as the
/// message is queued: a million 64-byte messages once held 4.8 GB. So a body up to
/// `BODY_COPY_MAX_BYTES` (64 KiB) is copied into an allocation of its own (a few hundred
/// nanoseconds for 2 KB). A larger one is kept as it is: it came in a frame larger than a
/// socket read, which the frame decoder reads into an allocation of exactly its own size (and
/// [`body_from_frame`] copies it when it is not most of that frame), or it was copied out of a
/// segment or chunk ([`detach_large`]). Copying a 256 KiB file transfer chunk in each queue
/// manager it passes was a measurable share of their CPU.
pub fn own_body(body: Bytes) -> Bytes {
    if body.is_empty() {
        Bytes::new()
    } else if body.len() <= ferrymq_types::limits::BODY_COPY_MAX_BYTES {
        counted(Bytes::copy_from_slice(&body))
    } else {
        counted(body)
    }
}

/// Bytes of message bodies alive in this process, each counted once however many messages
/// share it (a publication's copies) and until its last holder drops it (a queue, a unit of
/// work, a get reply on its way, a checkpoint image).
static BODY_BYTES: AtomicU64 = AtomicU64::new(0);
/// Messages alive in this process.
static MESSAGES: AtomicU64 = AtomicU64::new(0);
/// What a message holds besides its body, for [`held_bytes`]: the message itself, its queue
/// entry and index slots, its descriptor's text (shared or not), rounded up.
pub const MESSAGE_OVERHEAD_BYTES: u64 = 256;

/// A body's allocation, counted in [`BODY_BYTES`] while any `Bytes` refers to it.
struct CountedBody(Bytes);

impl AsRef<[u8]> for CountedBody {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for CountedBody {
    fn drop(&mut self) {
        BODY_BYTES.fetch_sub(self.0.len() as u64, Ordering::Relaxed);
    }
}

fn counted(body: Bytes) -> Bytes {
    BODY_BYTES.fetch_add(body.len() as u64, Ordering::Relaxed);
    Bytes::from_owner(CountedBody(body))
}

/// The memory the messages alive in this process hold: their bodies, their properties and
/// [`MESSAGE_OVERHEAD_BYTES`] each, and the large frames being received ([`reserve_inbound`]).
/// The queue manager's `MaxMessageMemory` is checked against it. A body put again in this
/// process (a publication from a stream queue, larger than `BODY_COPY_MAX_BYTES`) counts twice
/// while both live: an over-count, never an under-count.
pub fn held_bytes() -> u64 {
    BODY_BYTES.load(Ordering::Relaxed)
        + PROPS_BYTES.load(Ordering::Relaxed)
        + MESSAGES.load(Ordering::Relaxed) * MESSAGE_OVERHEAD_BYTES
        + INBOUND_BYTES.load(Ordering::Relaxed)
}

/// Bytes reserved for large frames still arriving ([`reserve_inbound`]).
static INBOUND_BYTES: AtomicU64 = AtomicU64::new(0);

/// Room in [`held_bytes`] for a frame of `len` bytes that is still arriving, given back when
/// dropped (once the whole frame is there and cut off the read buffer, or the socket goes).
#[derive(Debug)]
pub struct InboundReservation(u64);

impl Drop for InboundReservation {
    fn drop(&mut self) {
        INBOUND_BYTES.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// Reserves room for a frame of `len` bytes before its bytes are read, or `None` when the
/// messages held and the frames already arriving leave less than that under `max` (0: no
/// limit, and nothing is reserved). A socket receiving a large message holds its bytes before
/// any put can refuse them: without this, many connections each half-way through a 100 MB
/// message would hold what no limit counted.
pub fn reserve_inbound(len: u64, max: u64) -> Option<InboundReservation> {
    if max == 0 {
        return Some(InboundReservation(0));
    }
    INBOUND_BYTES.fetch_add(len, Ordering::Relaxed);
    let r = InboundReservation(len);
    // `held_bytes` now counts this reservation: it must stay within the limit with it.
    if held_bytes() > max {
        drop(r);
        return None;
    }
    Some(r)
}

/// Puts refused for memory in this process (`Engine::check_message_memory`), for the error log.
static REFUSED_FOR_MEMORY: AtomicU64 = AtomicU64::new(0);

pub fn note_refused_for_memory() {
    REFUSED_FOR_MEMORY.fetch_add(1, Ordering::Relaxed);
}

/// How many puts were refused for memory since the process started.
pub fn refused_for_memory() -> u64 {
    REFUSED_FOR_MEMORY.load(Ordering::Relaxed)
}

/// What a message of `body_len` bytes adds to [`held_bytes`].
pub fn footprint(body_len: usize) -> u64 {
    body_len as u64 + MESSAGE_OVERHEAD_BYTES
}

impl Drop for Message {
    fn drop(&mut self) {
        MESSAGES.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A message body cut from a received frame of `frame_len` bytes, before it is queued: a body
/// over `BODY_COPY_MAX_BYTES` (which [`own_body`] keeps) is copied here when it is less than half
/// of its frame, so that the descriptor, properties and names that came with it (up to
/// `FRAME_OVERHEAD_MAX_BYTES`) are not kept allocated for as long as it is queued.
pub fn body_from_frame(body: Bytes, frame_len: usize) -> Bytes {
    if body.len() > ferrymq_types::limits::BODY_COPY_MAX_BYTES && frame_len > 2 * body.len() {
        Bytes::copy_from_slice(&body)
    } else {
        body
    }
}

/// For bodies read from a log or store segment at restart, or from a shipped chunk: those buffers
/// are large, so even a body over `BODY_COPY_MAX_BYTES` is copied out of them (`Message::new`
/// copies the smaller ones).
pub fn detach_large(body: Bytes) -> Bytes {
    if body.len() > ferrymq_types::limits::BODY_COPY_MAX_BYTES {
        Bytes::copy_from_slice(&body)
    } else {
        body
    }
}

/// A message on a queue with its live backout count.
#[derive(Debug, Clone)]
pub struct Entry {
    pub msg: Arc<Message>,
    pub backout_count: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    /// A deep queue holds millions of these: keep the per-message structure small (it was 344
    /// bytes with the descriptor inline). At 152 bytes or less, `Arc<Message>`'s allocation is
    /// a 176-byte glibc chunk; at 153 to 168 it is a 192-byte one.
    #[test]
    fn a_message_stays_compact() {
        let size = std::mem::size_of::<Message>();
        eprintln!(
            "Message {size} B, Entry {} B, MessageDescriptor {} B",
            std::mem::size_of::<Entry>(),
            std::mem::size_of::<MessageDescriptor>()
        );
        assert!(size <= 152, "Message is {size} bytes");
    }

    /// A descriptor with no text fields: a message of it keeps no text box.
    fn plain_md() -> MessageDescriptor {
        MessageDescriptor {
            msg_id: [1; 24],
            correl_id: [2; 24],
            persistence: Persistence::Persistent,
            priority: 4,
            put_time_ms: 77,
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_descriptor_text_takes_no_box_and_round_trips() {
        let md = plain_md();
        let m = Message::new(1, md.clone(), Properties::default(), Bytes::new(), None, 0);
        assert!(m.text.is_none());
        assert_eq!(m.md(), md);
        let mut with = md.clone();
        with.format = "MQSTR".into();
        with.put_appl_name = "app".into();
        with.backout_count = 3;
        with.feedback = 275;
        with.report = 7;
        let mut props = Properties::default();
        props.set("a", ferrymq_types::PropertyValue::Int(1));
        let m = Message::new(2, with.clone(), props.clone(), Bytes::new(), Some(5), 0);
        assert_eq!(m.md(), with);
        assert_eq!(m.props(), &props);
        assert_eq!(m.expires_at_ms(), Some(5));
        assert!(m.is_expired(5) && !m.is_expired(4));
        let grouped = MessageDescriptor {
            group_id: [5; 24],
            msg_seq_number: 3,
            msg_flags: msg_flags::LAST_MSG_IN_GROUP,
            ..md.clone()
        };
        let m = Message::new(
            4,
            grouped.clone(),
            Properties::default(),
            Bytes::new(),
            None,
            0,
        );
        assert!(m.group().last_in_group() && m.group().in_group());
        assert_eq!(m.md(), grouped);
        // A rarely set number alone is kept too.
        let only_report = MessageDescriptor {
            report: 1 << 8,
            ..md.clone()
        };
        let m = Message::new(
            3,
            only_report.clone(),
            Properties::default(),
            Bytes::new(),
            None,
            0,
        );
        assert!(m.text.is_some());
        assert_eq!(m.md(), only_report);
    }

    #[test]
    fn the_borrowed_descriptor_encodes_as_the_owned_one() {
        use ferrymq_types::codec::Codec;
        let base = plain_md();
        let texts = MessageDescriptor {
            format: "MQSTR".into(),
            reply_to_q: "REPLY1".into(),
            reply_to_qmgr: "QM1".into(),
            user_id: "app1".into(),
            appl_identity: "ident".into(),
            put_appl_name: "payments".into(),
            backout_count: 3,
            feedback: 275,
            report: 7,
            ..base.clone()
        };
        let grouped = MessageDescriptor {
            group_id: [5; 24],
            msg_seq_number: 3,
            offset: 100,
            msg_flags: msg_flags::LAST_MSG_IN_GROUP,
            original_length: 900,
            ..texts.clone()
        };
        for md in [base, texts, grouped] {
            let m = Message::new(9, md.clone(), Properties::default(), Bytes::new(), None, 0);
            let (mut owned, mut borrowed) = (BytesMut::new(), BytesMut::new());
            md.encode(&mut owned);
            m.md_ref().encode(&mut borrowed);
            assert_eq!(owned, borrowed, "{md:?}");
            assert_eq!(m.md_ref().to_descriptor(), md);
        }
    }

    #[test]
    fn messages_with_the_same_context_share_one_text() {
        let md = |user: &str| MessageDescriptor {
            user_id: user.into(),
            put_appl_name: "app".into(),
            format: "MQSTR".into(),
            ..Default::default()
        };
        let make =
            |user: &str| Message::new(1, md(user), Properties::default(), Bytes::new(), None, 0);
        let (a, b, c) = (make("u1"), make("u1"), make("u2"));
        let (ta, tb, tc) = (
            a.text.clone().unwrap(),
            b.text.clone().unwrap(),
            c.text.clone().unwrap(),
        );
        assert!(Arc::ptr_eq(&ta, &tb));
        assert!(!Arc::ptr_eq(&ta, &tc));
        let mut d = make("u1");
        d.props_mut().set("k", ferrymq_types::PropertyValue::Int(1));
        assert!(
            make("u1").props().is_empty(),
            "a changed copy is not shared"
        );
        assert_eq!(d.md().user_id, "u1");
    }

    #[test]
    fn interleaved_streams_each_keep_sharing_their_text() {
        // Sixteen requesters, each naming its own reply queue, put in turn: more streams than
        // a short most-recently-used list holds, so each message's nearest equal text is
        // fifteen messages back.
        let md = |q: usize| MessageDescriptor {
            reply_to_q: format!("REPLY{q}"),
            user_id: "app".into(),
            put_appl_name: "requester".into(),
            ..Default::default()
        };
        let make = |q| Message::new(1, md(q), Properties::default(), Bytes::new(), None, 0);
        let first: Vec<Message> = (0..16).map(make).collect();
        for _round in 0..3 {
            for (q, f) in first.iter().enumerate() {
                let m = make(q);
                let (t, ft) = (m.text.as_ref().unwrap(), f.text.as_ref().unwrap());
                assert!(Arc::ptr_eq(t, ft), "stream {q} got a text of its own");
                assert_eq!(m.md().reply_to_q, format!("REPLY{q}"));
            }
        }
    }

    #[test]
    fn texts_whose_strings_join_alike_stay_apart() {
        // Kept end to end, "REPLY" + "1Q" and "REPLY1" + "Q" read the same: the lengths tell
        // them apart.
        let md = |q: &str, qmgr: &str| MessageDescriptor {
            reply_to_q: q.into(),
            reply_to_qmgr: qmgr.into(),
            user_id: "app".into(),
            ..Default::default()
        };
        let make = |m: &MessageDescriptor| {
            Message::new(1, m.clone(), Properties::default(), Bytes::new(), None, 0)
        };
        let (a, b) = (md("REPLY", "1Q"), md("REPLY1", "Q"));
        let (ma, mb) = (make(&a), make(&b));
        assert!(!Arc::ptr_eq(
            ma.text.as_ref().unwrap(),
            mb.text.as_ref().unwrap()
        ));
        assert_eq!(ma.md(), a);
        assert_eq!(mb.md(), b);
        assert_eq!(make(&a).md(), a);
    }

    #[test]
    fn a_small_body_is_copied_out_of_its_buffer() {
        let big = Bytes::from(vec![7u8; 64 * 1024]);
        let m = Message::new(
            1,
            MessageDescriptor::default(),
            Properties::default(),
            big.slice(100..164),
            None,
            0,
        );
        assert_eq!(&m.body[..], &big[100..164]);
        // The slice no longer points into the 64 KiB buffer.
        let p = m.body.as_ptr() as usize;
        let b = big.as_ptr() as usize;
        assert!(p < b || p >= b + big.len());
    }

    #[test]
    fn a_large_body_that_is_most_of_its_frame_is_kept_and_others_copied() {
        use ferrymq_types::limits::BODY_COPY_MAX_BYTES;
        let inside = |body: &Bytes, buf: &Bytes| {
            let (p, b) = (body.as_ptr() as usize, buf.as_ptr() as usize);
            p >= b && p < b + buf.len()
        };
        // A 256 KiB chunk in its frame (a few hundred bytes of descriptor before it): kept.
        let frame = Bytes::from(vec![1u8; 400 + (256 << 10)]);
        let body = body_from_frame(frame.slice(400..), frame.len());
        assert!(inside(&body, &frame));
        let m = Message::new(
            1,
            MessageDescriptor::default(),
            Properties::default(),
            body,
            None,
            0,
        );
        assert!(inside(&m.body, &frame), "a 256 KiB chunk was copied");
        // At the limit and below: copied, whatever the frame.
        let edge = frame.slice(400..400 + BODY_COPY_MAX_BYTES);
        let m = Message::new(
            1,
            MessageDescriptor::default(),
            Properties::default(),
            edge,
            None,
            0,
        );
        assert!(!inside(&m.body, &frame));
        // A large body beside larger properties: copied, so they are not kept with it.
        let heavy = Bytes::from(vec![2u8; 3 * (BODY_COPY_MAX_BYTES + 1)]);
        let body = body_from_frame(heavy.slice(..BODY_COPY_MAX_BYTES + 1), heavy.len());
        assert!(!inside(&body, &heavy));
        assert_eq!(body.len(), BODY_COPY_MAX_BYTES + 1);
    }
}
