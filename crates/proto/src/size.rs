//! Encoded sizes of the types crate's values, so an encoder can reserve a frame's capacity once
//! instead of letting the buffer regrow (and copy a large body) while it writes. These mirror the
//! layouts in `ferrymq_types`; a test checks every message's estimate against its real encoding, so
//! a layout change there shows up here as a failing test, never as a wrong frame (the header's
//! length is always patched from the bytes actually written).

use ferrymq_types::options::{GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, Properties, PropertyValue};

pub(crate) fn str16(s: &str) -> usize {
    2 + s.len()
}

pub(crate) fn bytes32(b: &[u8]) -> usize {
    4 + b.len()
}

pub(crate) fn descriptor(md: &MessageDescriptor) -> usize {
    let ids = 24 + 24;
    let ints = 4 * 4 + 4 + 8 + 4 * 4;
    let strings = [
        &md.format,
        &md.reply_to_q,
        &md.reply_to_qmgr,
        &md.user_id,
        &md.appl_identity,
        &md.put_appl_name,
    ];
    let group = if md.has_group_fields() { 24 + 4 * 4 } else { 0 };
    ids + ints + group + strings.iter().map(|s| str16(s)).sum::<usize>()
}

pub(crate) fn properties(p: &Properties) -> usize {
    2 + p
        .0
        .iter()
        .map(|(name, value)| {
            str16(name)
                + 1
                + match value {
                    PropertyValue::String(s) => str16(s),
                    PropertyValue::Int(_) | PropertyValue::Float(_) => 8,
                    PropertyValue::Bool(_) => 1,
                    PropertyValue::Bytes(b) => bytes32(b),
                }
        })
        .sum::<usize>()
}

pub(crate) fn put_options(o: &PutOptions) -> usize {
    // The context option and its handle follow only when either is set, the publish/subscribe
    // options only when set.
    let context = if o.context != 0 || o.context_hobj != 0 {
        8
    } else {
        0
    };
    3 + context + if o.pubsub != 0 { 4 } else { 0 }
}

pub(crate) fn get_options(o: &GetOptions) -> usize {
    let wait = match o.wait {
        Wait::Ms(_) => 9,
        Wait::NoWait | Wait::Unlimited => 1,
    };
    let id = |id: &Option<_>| if id.is_some() { 25 } else { 1 };
    let int = |v: &Option<i32>| if v.is_some() { 5 } else { 1 };
    let group = o.match_group_id.is_some()
        || o.match_msg_seq_number.is_some()
        || o.match_offset.is_some()
        || o.group_options != 0;
    let group_block = if group {
        id(&o.match_group_id) + int(&o.match_msg_seq_number) + int(&o.match_offset) + 4
    } else {
        0
    };
    1 + wait + 1 + 1 + 4 + id(&o.match_msg_id) + id(&o.match_correl_id) + group_block
}
