//! Room for large frames before their bytes are read. A socket receiving a message over
//! `FRAME_OWN_BUFFER_MIN_BYTES` (64 KiB) holds its bytes from the first read to the last,
//! before any put can look at `TuningParameters:MaxMessageMemory`: many connections each half-way
//! through a 100 MB message would hold gigabytes no limit counted. So once a large frame's header
//! is in, its length is reserved in the engine's count of what messages hold
//! (`ferrymq_engine::message::reserve_inbound`) before more of it is read, and given back once the
//! frame is cut off the buffer (its put then counts the body, or refuses it) or the socket goes.
//! Arrivals may take the messages past the limit by one largest frame ([`OVERDRAFT_BYTES`]): a
//! put that finds the limit reached is then read, and refused by the engine with
//! MQRC_STORAGE_NOT_AVAILABLE like any other put (or taken, once messages were got), rather than
//! left waiting. Past that, a frame with no room waits, not read (TCP holds the sender back),
//! while other frames finish; if none comes within [`ROOM_WAIT`] the connection is closed with
//! MQRC_STORAGE_NOT_AVAILABLE and the reason, which the client sees as the call's failure. The
//! put never happened, so nothing is lost, and the queue manager holds at most the limit and
//! one largest frame.

use std::time::Duration;

use bytes::BytesMut;
pub(crate) use ferrymq_engine::message::InboundReservation;
use ferrymq_engine::message::{held_bytes, note_refused_for_memory, reserve_inbound};
use ferrymq_types::limits::FRAME_OWN_BUFFER_MIN_BYTES;
use ferrymq_types::{MqError, Reason};

/// How far past `MaxMessageMemory` arriving frames may take what messages hold: one frame of
/// the largest message any queue manager accepts.
pub(crate) const OVERDRAFT_BYTES: u64 =
    ferrymq_proto::frame_limit_for(ferrymq_types::limits::MSG_LEN_MAX_BYTES) as u64 + 4;
/// How long a large frame waits for room before its connection is closed.
pub(crate) const ROOM_WAIT: Duration = Duration::from_secs(5);
/// How soon a waiting frame looks again at first; each look waits twice as long as the one
/// before, up to [`LOOK_EVERY_MAX`]: a thousand connections waiting cost a few thousand
/// wake-ups a second, not a hundred thousand.
const LOOK_FIRST: Duration = Duration::from_millis(5);
const LOOK_EVERY_MAX: Duration = Duration::from_millis(250);

/// The length of the frame at the front of `buf` when it is large and not all there yet: the
/// bytes still to come need room. (`buf` starts at a frame boundary, and the decoder has
/// already refused a length over the negotiated limit.)
pub(crate) fn arriving_large(buf: &BytesMut) -> Option<u64> {
    if buf.len() < 4 {
        return None;
    }
    let total = 4 + u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    (total > FRAME_OWN_BUFFER_MIN_BYTES && buf.len() < total).then_some(total as u64)
}

/// Room for a frame of `len` bytes under `max` (0: no limit) and [`OVERDRAFT_BYTES`], waiting
/// up to [`ROOM_WAIT`] for other frames to finish or messages to be got. `what` names the
/// sender for the reason.
pub(crate) async fn room_for(
    len: u64,
    max: u64,
    what: &str,
) -> Result<InboundReservation, MqError> {
    let until = tokio::time::Instant::now() + ROOM_WAIT;
    let bound = if max == 0 {
        0
    } else {
        max.saturating_add(OVERDRAFT_BYTES)
    };
    let mut look = LOOK_FIRST;
    loop {
        if let Some(r) = reserve_inbound(len, bound) {
            return Ok(r);
        }
        if tokio::time::Instant::now() >= until {
            note_refused_for_memory();
            return Err(MqError::new(
                Reason::STORAGE_NOT_AVAILABLE,
                format!(
                    "a message of {len} bytes arriving from {what} found no room for {} s: the queue manager's messages and the large messages arriving hold {} bytes, and may take no more than one largest message past its limit of {max} (TuningParameters:MaxMessageMemory); get or clear messages, or raise the limit",
                    ROOM_WAIT.as_secs(),
                    held_bytes()
                ),
            ));
        }
        tokio::time::sleep(look.min(until.saturating_duration_since(tokio::time::Instant::now())))
            .await;
        look = (look * 2).min(LOOK_EVERY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_large_frame_not_all_there_needs_room() {
        let frame = |len: u32, have: usize| {
            let mut b = BytesMut::new();
            b.extend_from_slice(&len.to_le_bytes());
            b.resize(have.max(4), 0);
            b
        };
        let big = (FRAME_OWN_BUFFER_MIN_BYTES + 100) as u32;
        assert_eq!(arriving_large(&frame(big, 12)), Some(big as u64 + 4));
        assert_eq!(
            arriving_large(&frame(big, big as usize + 3)),
            Some(big as u64 + 4)
        );
        assert_eq!(
            arriving_large(&frame(big, big as usize + 4)),
            None,
            "all there"
        );
        assert_eq!(arriving_large(&frame(1000, 12)), None, "small");
        assert_eq!(
            arriving_large(&BytesMut::from(&[1u8, 0][..])),
            None,
            "no length yet"
        );
    }
}
