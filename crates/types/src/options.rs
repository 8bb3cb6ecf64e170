//! Options of the MQI verbs (open, put, get, close), as structured values. The wire protocol carries
//! them with MQ's own numeric flag values so that MQ programmers can read a trace.

use bytes::{BufMut, BytesMut};

use crate::codec::{Codec, DecodeError, PutExt, Reader};
use crate::descriptor::MsgId;

/// MQOO_* open options (MQ's numbers).
pub mod open {
    pub const INPUT_AS_Q_DEF: u32 = 0x1;
    pub const INPUT_SHARED: u32 = 0x2;
    pub const INPUT_EXCLUSIVE: u32 = 0x4;
    pub const BROWSE: u32 = 0x8;
    pub const OUTPUT: u32 = 0x10;
    pub const INQUIRE: u32 = 0x20;
    pub const SET: u32 = 0x40;
    /// Keep the context of each message got through the handle, to pass on a later put.
    pub const SAVE_ALL_CONTEXT: u32 = 0x80;
    pub const PASS_IDENTITY_CONTEXT: u32 = 0x100;
    pub const PASS_ALL_CONTEXT: u32 = 0x200;
    pub const SET_IDENTITY_CONTEXT: u32 = 0x400;
    pub const SET_ALL_CONTEXT: u32 = 0x800;
    pub const FAIL_IF_QUIESCING: u32 = 0x2000;
    /// Binding to a queue manager of a cluster: with one queue manager, every choice is the same.
    pub const BIND_AS_Q_DEF: u32 = 0;
    pub const BIND_ON_OPEN: u32 = 0x4000;
    pub const BIND_NOT_FIXED: u32 = 0x8000;
    /// Read-ahead of non-persistent messages for a client: a hint FerryMQ's server-pushed
    /// delivery makes moot.
    pub const READ_AHEAD_AS_Q_DEF: u32 = 0;
    pub const NO_READ_AHEAD: u32 = 0x80000;
    pub const READ_AHEAD: u32 = 0x100000;
    pub const ANY_INPUT: u32 = INPUT_AS_Q_DEF | INPUT_SHARED | INPUT_EXCLUSIVE;
    pub const CONTEXT: u32 = SAVE_ALL_CONTEXT
        | PASS_IDENTITY_CONTEXT
        | PASS_ALL_CONTEXT
        | SET_IDENTITY_CONTEXT
        | SET_ALL_CONTEXT;
    pub const KNOWN: u32 = ANY_INPUT
        | BROWSE
        | OUTPUT
        | INQUIRE
        | SET
        | CONTEXT
        | FAIL_IF_QUIESCING
        | BIND_ON_OPEN
        | BIND_NOT_FIXED
        | NO_READ_AHEAD
        | READ_AHEAD;
}

/// MQPMO_* context options of a put (MQ's numbers): who fills in the message's identity context
/// (UserIdentifier, ApplIdentityData) and origin context (PutApplName, PutDate, PutTime).
pub mod pmo {
    /// The queue manager fills in both (the default).
    pub const DEFAULT_CONTEXT: u32 = 0x20;
    /// Identity from the message last got through the handle named in `context_hobj`.
    pub const PASS_IDENTITY_CONTEXT: u32 = 0x100;
    /// Identity and origin from the message last got through `context_hobj`.
    pub const PASS_ALL_CONTEXT: u32 = 0x200;
    /// Identity as the descriptor gives it (needs MQOO_SET_IDENTITY_CONTEXT).
    pub const SET_IDENTITY_CONTEXT: u32 = 0x400;
    /// Identity and origin as the descriptor gives them (needs MQOO_SET_ALL_CONTEXT).
    pub const SET_ALL_CONTEXT: u32 = 0x800;
    /// Both left blank.
    pub const NO_CONTEXT: u32 = 0x4000;
    /// A publication with MQRC_NO_SUBS_MATCHED as a warning when no subscription takes it.
    pub const WARN_IF_NO_SUBS_MATCHED: u32 = 0x80000;
    /// A publication the queue manager keeps for the topic string, for later subscribers.
    pub const RETAIN: u32 = 0x200000;
    /// The publish/subscribe options [`PutOptions::pubsub`] may hold.
    pub const PUBSUB: u32 = WARN_IF_NO_SUBS_MATCHED | RETAIN;
    /// Put response options ([`PutOptions::response`]): the put returns at once without the
    /// queue manager's answer; failures are collected for MQSTAT.
    pub const ASYNC_RESPONSE: u32 = 0x10000;
    /// The put waits for the queue manager's answer.
    pub const SYNC_RESPONSE: u32 = 0x20000;
    /// As the queue's DEFPRESP says (MQ's default when neither of the above is given).
    pub const RESPONSE_AS_Q_DEF: u32 = 0;
    /// As the topic's DEFPRESP says (the same value as [`RESPONSE_AS_Q_DEF`]).
    pub const RESPONSE_AS_TOPIC_DEF: u32 = 0;
    /// The put response options [`PutOptions::response`] may hold.
    pub const RESPONSE: u32 = ASYNC_RESPONSE | SYNC_RESPONSE;
    pub const CONTEXT: u32 = DEFAULT_CONTEXT
        | PASS_IDENTITY_CONTEXT
        | PASS_ALL_CONTEXT
        | SET_IDENTITY_CONTEXT
        | SET_ALL_CONTEXT
        | NO_CONTEXT;
}

/// MQRO_* report options of a message's Report field (MQ's numbers).
pub mod report {
    pub const NONE: i32 = 0;
    pub const PASS_CORREL_ID: i32 = 0x40;
    pub const PASS_MSG_ID: i32 = 0x80;
    pub const COA: i32 = 0x100;
    pub const COA_WITH_DATA: i32 = 0x300;
    pub const COA_WITH_FULL_DATA: i32 = 0x700;
    pub const COD: i32 = 0x800;
    pub const COD_WITH_DATA: i32 = 0x1800;
    pub const COD_WITH_FULL_DATA: i32 = 0x3800;
    pub const EXPIRATION: i32 = 0x200000;
    pub const EXPIRATION_WITH_DATA: i32 = 0x600000;
    pub const EXPIRATION_WITH_FULL_DATA: i32 = 0xE00000;
    pub const EXCEPTION: i32 = 0x1000000;
    pub const EXCEPTION_WITH_DATA: i32 = 0x3000000;
    pub const EXCEPTION_WITH_FULL_DATA: i32 = 0x7000000;
    /// Discard the message rather than put it to the dead-letter queue when it cannot be
    /// delivered.
    pub const DISCARD_MSG: i32 = 0x8000000;
    /// The bytes of the original message a `_WITH_DATA` report carries.
    pub const WITH_DATA_BYTES: usize = 100;
}

/// MQFB_* feedback codes of report messages (an exception report's feedback is the MQRC reason).
pub mod feedback {
    pub const NONE: i32 = 0;
    pub const EXPIRATION: i32 = 258;
    pub const COA: i32 = 259;
    pub const COD: i32 = 260;
}

/// MQCO_* close options.
pub mod close {
    pub const NONE: u32 = 0;
    pub const DELETE: u32 = 1;
    pub const DELETE_PURGE: u32 = 2;
    /// Closing a subscription handle leaves a durable subscription in place (the default).
    pub const KEEP_SUB: u32 = 4;
    /// Closing a subscription handle removes the subscription, durable or not.
    pub const REMOVE_SUB: u32 = 8;
}

/// MQSO_* subscription options (MQSUB).
pub mod sub {
    pub const NON_DURABLE: u32 = 0;
    pub const ALTER: u32 = 0x1;
    pub const CREATE: u32 = 0x2;
    pub const RESUME: u32 = 0x4;
    pub const DURABLE: u32 = 0x8;
    /// The queue manager creates the subscriber's queue (from the topic's MDURMDL/MNDURMDL).
    pub const MANAGED: u32 = 0x20;
    /// Retained publications are sent only when asked for (MQSUBRQ).
    pub const PUBLICATIONS_ON_REQUEST: u32 = 0x800;
    /// No retained publication is sent when the subscription is made.
    pub const NEW_PUBLICATIONS_ONLY: u32 = 0x1000;
    pub const FAIL_IF_QUIESCING: u32 = 0x2000;
    /// Wildcards are characters: `*` any number (across levels), `?` exactly one.
    pub const WILDCARD_CHAR: u32 = 0x100000;
    /// Wildcards are whole topic levels (`#`, `+`): the default.
    pub const WILDCARD_TOPIC: u32 = 0x200000;
    /// Every publication the subscription receives carries the SubCorrelId it was given as
    /// its CorrelId.
    pub const SET_CORREL_ID: u32 = 0x400000;
    pub const KNOWN: u32 = ALTER
        | CREATE
        | RESUME
        | DURABLE
        | MANAGED
        | PUBLICATIONS_ON_REQUEST
        | NEW_PUBLICATIONS_ONLY
        | FAIL_IF_QUIESCING
        | WILDCARD_CHAR
        | WILDCARD_TOPIC
        | SET_CORREL_ID;
}

/// Whether an operation joins the connection's unit of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Syncpoint {
    /// MQ's default for distributed platforms: the operation takes effect at once.
    #[default]
    No,
    Yes,
    /// Get only: persistent messages join the unit of work, non-persistent ones do not.
    IfPersistent,
}

impl Syncpoint {
    fn to_u8(self) -> u8 {
        match self {
            Syncpoint::No => 0,
            Syncpoint::Yes => 1,
            Syncpoint::IfPersistent => 2,
        }
    }
    fn from_u8(v: u8) -> Result<Syncpoint, DecodeError> {
        Ok(match v {
            0 => Syncpoint::No,
            1 => Syncpoint::Yes,
            2 => Syncpoint::IfPersistent,
            _ => return Err(DecodeError::invalid("syncpoint", format!("value {v}"))),
        })
    }
}

/// Put options (MQPMO). The default is MQ's MQPMO_DEFAULT: no syncpoint, and neither
/// MQPMO_NEW_MSG_ID nor MQPMO_NEW_CORREL_ID, so the descriptor's MsgId and CorrelId are kept
/// (an all-zero MsgId, MQMI_NONE, is replaced by a generated one, as in MQ).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutOptions {
    pub syncpoint: Syncpoint,
    /// Replace the descriptor's MsgId with a fresh one (MQPMO_NEW_MSG_ID). Off by default: the
    /// descriptor's is kept, or generated when it is all zeros.
    pub new_msg_id: bool,
    /// Replace the descriptor's CorrelId with a fresh one (MQPMO_NEW_CORREL_ID).
    pub new_correl_id: bool,
    /// MQPMO_LOGICAL_ORDER: the queue manager gives the message its GroupId, MsgSeqNumber and
    /// Offset, continuing the group (and logical message) last put through the same handle.
    pub logical_order: bool,
    /// One of the MQPMO_*_CONTEXT options ([`pmo`]); 0 is MQPMO_DEFAULT_CONTEXT.
    pub context: u32,
    /// With MQPMO_PASS_IDENTITY_CONTEXT or MQPMO_PASS_ALL_CONTEXT: the input handle, opened with
    /// MQOO_SAVE_ALL_CONTEXT, whose last got message's context is passed (MQPMO's Context).
    pub context_hobj: u32,
    /// Publish/subscribe options of a put to a topic ([`pmo::RETAIN`],
    /// [`pmo::WARN_IF_NO_SUBS_MATCHED`]); ignored by a put to a queue.
    pub pubsub: u32,
    /// Put response ([`pmo::ASYNC_RESPONSE`], [`pmo::SYNC_RESPONSE`], or 0: as the queue's or
    /// topic's DEFPRESP). The client resolves it before sending; on the wire only "asynchronous"
    /// is carried, as a flag: the queue manager then sends no answer to the put.
    pub response: u32,
}

/// MQSTAT_TYPE_ASYNC_ERROR: the status of the asynchronous puts since the last MQSTAT.
pub const STAT_TYPE_ASYNC_ERROR: u32 = 0;

/// Set in the syncpoint byte of an encoded [`PutOptions`] when the context options follow: a put
/// with the default context encodes as it always did, so an older queue manager still reads it.
const PUT_CONTEXT_FOLLOWS: u8 = 0x40;
/// Set in the syncpoint byte when the publish/subscribe options follow (after the context
/// options, if any): only a publication that uses them encodes differently.
const PUT_PUBSUB_FOLLOWS: u8 = 0x20;
/// Set in the syncpoint byte of a put whose answer the client does not wait for
/// (MQPMO_ASYNC_RESPONSE, resolved). Only a client that negotiated a protocol version knowing
/// it sets it.
const PUT_ASYNC_RESPONSE: u8 = 0x10;

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions {
            syncpoint: Syncpoint::No,
            new_msg_id: false,
            new_correl_id: false,
            logical_order: false,
            context: 0,
            context_hobj: 0,
            pubsub: 0,
            response: 0,
        }
    }
}

impl PutOptions {
    /// The put is answered by nothing (resolved MQPMO_ASYNC_RESPONSE).
    pub fn is_async(&self) -> bool {
        self.response & pmo::ASYNC_RESPONSE != 0
    }
}

/// Set in the encoded syncpoint byte of put and get options for the options added with message
/// groups: a put's MQPMO_LOGICAL_ORDER, or a get's group block (after its match fields). Frames
/// of peers that predate them never set it, so they keep decoding, and options that use none of
/// these features are encoded as they always were.
const SYNCPOINT_EXT_GROUP: u8 = 0x80;

impl Codec for PutOptions {
    fn encode(&self, out: &mut BytesMut) {
        let extended = self.context != 0 || self.context_hobj != 0;
        let mut flags = if extended { PUT_CONTEXT_FOLLOWS } else { 0 };
        if self.logical_order {
            flags |= SYNCPOINT_EXT_GROUP;
        }
        if self.pubsub != 0 {
            flags |= PUT_PUBSUB_FOLLOWS;
        }
        if self.is_async() {
            flags |= PUT_ASYNC_RESPONSE;
        }
        out.put_u8(self.syncpoint.to_u8() | flags);
        out.put_bool(self.new_msg_id);
        out.put_bool(self.new_correl_id);
        if extended {
            out.put_u32_le(self.context);
            out.put_u32_le(self.context_hobj);
        }
        if self.pubsub != 0 {
            out.put_u32_le(self.pubsub);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let first = r.u8("put syncpoint")?;
        let extended = first & PUT_CONTEXT_FOLLOWS != 0;
        let logical_order = first & SYNCPOINT_EXT_GROUP != 0;
        let pubsub_follows = first & PUT_PUBSUB_FOLLOWS != 0;
        let response = if first & PUT_ASYNC_RESPONSE != 0 {
            pmo::ASYNC_RESPONSE
        } else {
            0
        };
        let syncpoint = Syncpoint::from_u8(
            first
                & !(PUT_CONTEXT_FOLLOWS
                    | SYNCPOINT_EXT_GROUP
                    | PUT_PUBSUB_FOLLOWS
                    | PUT_ASYNC_RESPONSE),
        )?;
        if syncpoint == Syncpoint::IfPersistent {
            return Err(DecodeError::invalid(
                "put syncpoint",
                "IfPersistent applies to get only",
            ));
        }
        let new_msg_id = r.bool("new_msg_id")?;
        let new_correl_id = r.bool("new_correl_id")?;
        let (context, context_hobj) = if extended {
            (r.u32("put context")?, r.u32("put context hobj")?)
        } else {
            (0, 0)
        };
        let pubsub = if pubsub_follows {
            r.u32("put publish/subscribe options")?
        } else {
            0
        };
        Ok(PutOptions {
            syncpoint,
            new_msg_id,
            new_correl_id,
            logical_order,
            context,
            context_hobj,
            pubsub,
            response,
        })
    }
}

/// Which message a browse reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Browse {
    /// A destructive get.
    #[default]
    No,
    First,
    Next,
}

/// How long a get waits for a message to arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Wait {
    #[default]
    NoWait,
    Ms(u64),
    Unlimited,
}

/// Get options (MQGMO plus the match fields of the MQMD that select the message).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GetOptions {
    pub syncpoint: Syncpoint,
    pub wait: Wait,
    pub browse: Browse,
    /// Return as much of a too-long message as fits and remove it (MQGMO_ACCEPT_TRUNCATED_MSG).
    pub accept_truncated: bool,
    /// Largest body the caller accepts; `u32::MAX` means any.
    pub max_len: u32,
    pub match_msg_id: Option<MsgId>,
    pub match_correl_id: Option<MsgId>,
    /// MQMO_MATCH_GROUP_ID with the GroupId to match.
    pub match_group_id: Option<MsgId>,
    /// MQMO_MATCH_MSG_SEQ_NUMBER with the MsgSeqNumber to match.
    pub match_msg_seq_number: Option<i32>,
    /// MQMO_MATCH_OFFSET with the Offset to match.
    pub match_offset: Option<i32>,
    /// MQGMO_* group and segment options (`gmo`).
    pub group_options: u32,
}

/// MQGMO_* options about groups and segments (MQ's numbers).
pub mod gmo {
    /// Return a group's messages, and a logical message's segments, in order.
    pub const LOGICAL_ORDER: u32 = 0x8000;
    /// Return a group's messages only once all of them are available.
    pub const ALL_MSGS_AVAILABLE: u32 = 0x20000;
    /// Return a logical message's segments only once all of them are available.
    pub const ALL_SEGMENTS_AVAILABLE: u32 = 0x40000;
    /// Return a segmented logical message whole, reassembled.
    pub const COMPLETE_MSG: u32 = 0x10000;
    pub const KNOWN: u32 =
        LOGICAL_ORDER | ALL_MSGS_AVAILABLE | ALL_SEGMENTS_AVAILABLE | COMPLETE_MSG;
}

impl GetOptions {
    /// A destructive get of any message, any length.
    pub fn any() -> GetOptions {
        GetOptions {
            max_len: u32::MAX,
            ..Default::default()
        }
    }
}

fn put_opt_id(out: &mut BytesMut, id: &Option<MsgId>) {
    match id {
        Some(id) => {
            out.put_u8(1);
            out.put_slice(id);
        }
        None => out.put_u8(0),
    }
}

fn get_opt_id(r: &mut Reader, what: &'static str) -> Result<Option<MsgId>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.fixed::<24>(what)?)),
        v => Err(DecodeError::invalid(what, format!("presence byte {v}"))),
    }
}

fn put_opt_i32(out: &mut BytesMut, v: Option<i32>) {
    match v {
        Some(v) => {
            out.put_u8(1);
            out.put_i32_le(v);
        }
        None => out.put_u8(0),
    }
}

fn get_opt_i32(r: &mut Reader, what: &'static str) -> Result<Option<i32>, DecodeError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(r.i32(what)?)),
        v => Err(DecodeError::invalid(what, format!("presence byte {v}"))),
    }
}

impl Codec for GetOptions {
    fn encode(&self, out: &mut BytesMut) {
        let group = self.match_group_id.is_some()
            || self.match_msg_seq_number.is_some()
            || self.match_offset.is_some()
            || self.group_options != 0;
        let ext = if group { SYNCPOINT_EXT_GROUP } else { 0 };
        out.put_u8(self.syncpoint.to_u8() | ext);
        match self.wait {
            Wait::NoWait => out.put_u8(0),
            Wait::Ms(ms) => {
                out.put_u8(1);
                out.put_u64_le(ms);
            }
            Wait::Unlimited => out.put_u8(2),
        }
        out.put_u8(match self.browse {
            Browse::No => 0,
            Browse::First => 1,
            Browse::Next => 2,
        });
        out.put_bool(self.accept_truncated);
        out.put_u32_le(self.max_len);
        put_opt_id(out, &self.match_msg_id);
        put_opt_id(out, &self.match_correl_id);
        if group {
            put_opt_id(out, &self.match_group_id);
            put_opt_i32(out, self.match_msg_seq_number);
            put_opt_i32(out, self.match_offset);
            out.put_u32_le(self.group_options);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let byte = r.u8("get syncpoint")?;
        let syncpoint = Syncpoint::from_u8(byte & !SYNCPOINT_EXT_GROUP)?;
        let wait = match r.u8("wait kind")? {
            0 => Wait::NoWait,
            1 => Wait::Ms(r.u64("wait ms")?),
            2 => Wait::Unlimited,
            v => return Err(DecodeError::invalid("wait kind", format!("value {v}"))),
        };
        let browse = match r.u8("browse")? {
            0 => Browse::No,
            1 => Browse::First,
            2 => Browse::Next,
            v => return Err(DecodeError::invalid("browse", format!("value {v}"))),
        };
        let mut o = GetOptions {
            syncpoint,
            wait,
            browse,
            accept_truncated: r.bool("accept_truncated")?,
            max_len: r.u32("max_len")?,
            match_msg_id: get_opt_id(r, "match msg_id")?,
            match_correl_id: get_opt_id(r, "match correl_id")?,
            ..GetOptions::default()
        };
        if byte & SYNCPOINT_EXT_GROUP != 0 {
            o.match_group_id = get_opt_id(r, "match group_id")?;
            o.match_msg_seq_number = get_opt_i32(r, "match msg_seq_number")?;
            o.match_offset = get_opt_i32(r, "match offset")?;
            let g = r.u32("group options")?;
            if g & !gmo::KNOWN != 0 {
                return Err(DecodeError::invalid("group options", format!("{g:#x}")));
            }
            o.group_options = g;
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options that use no group feature encode exactly as before group options existed, so
    /// frames from and to peers of that time keep working.
    #[test]
    fn options_without_group_features_keep_their_earlier_encoding() {
        let put = PutOptions {
            syncpoint: Syncpoint::Yes,
            new_msg_id: true,
            ..PutOptions::default()
        };
        assert_eq!(&put.to_bytes()[..], &[1, 1, 0]);
        let get = GetOptions {
            syncpoint: Syncpoint::Yes,
            ..GetOptions::any()
        };
        let mut before = vec![1u8, 0, 0, 0];
        before.extend_from_slice(&u32::MAX.to_le_bytes());
        before.extend_from_slice(&[0, 0]);
        assert_eq!(&get.to_bytes()[..], &before[..]);
        for g in [
            GetOptions {
                group_options: gmo::LOGICAL_ORDER,
                ..get.clone()
            },
            GetOptions {
                match_offset: Some(3),
                ..get.clone()
            },
        ] {
            assert_eq!(GetOptions::from_bytes(g.to_bytes()).unwrap(), g);
        }
        let lo = PutOptions {
            logical_order: true,
            ..put
        };
        assert_eq!(PutOptions::from_bytes(lo.to_bytes()).unwrap(), lo);
        let retain = PutOptions {
            pubsub: pmo::RETAIN,
            context: pmo::NO_CONTEXT,
            ..lo
        };
        assert_eq!(PutOptions::from_bytes(retain.to_bytes()).unwrap(), retain);
        let not_answered = PutOptions {
            response: pmo::ASYNC_RESPONSE,
            ..retain
        };
        assert_eq!(
            PutOptions::from_bytes(not_answered.to_bytes()).unwrap(),
            not_answered
        );
        // Only the resolved "asynchronous" travels: a synchronous response is the default.
        let sync = PutOptions {
            response: pmo::SYNC_RESPONSE,
            ..PutOptions::default()
        };
        assert_eq!(&sync.to_bytes()[..], &[0, 0, 0]);
    }
}
