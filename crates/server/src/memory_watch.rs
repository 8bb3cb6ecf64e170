//! Reports in the error log what `TuningParameters:MaxMessageMemory` refused: the engine counts
//! the puts it refused for memory (`ferrymq_engine::message::refused_for_memory`), and this task
//! logs FMQ1016W at most once a minute while that count grows, and once at start if recovery
//! loaded more than the limit. An application sees MQRC_STORAGE_NOT_AVAILABLE with the reason;
//! the administrator needs to see it without asking every application.

use std::sync::Arc;
use std::time::Duration;

use ferrymq_engine::message::{held_bytes, refused_for_memory};

use crate::qmgr::Shared;

/// How often the count is looked at, and the least time between two reports.
const LOOK_EVERY: Duration = Duration::from_secs(5);
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Runs until the queue manager ends.
pub async fn run(shared: Arc<Shared>) {
    let max = shared.cfg.message_memory_max;
    if max == 0 {
        return;
    }
    let held = held_bytes();
    if held > max {
        crate::qm_log!(
            crate::errlog::ids::MESSAGE_MEMORY_FULL,
            "the messages loaded at start hold {held} bytes, more than TuningParameters:MaxMessageMemory={max}: puts are refused with MQRC_STORAGE_NOT_AVAILABLE until enough are got"
        );
    }
    let mut reported = refused_for_memory();
    let mut last: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = refused_for_memory();
        if now == reported || last.is_some_and(|t| t.elapsed() < REPORT_EVERY) {
            continue;
        }
        crate::qm_log!(
            crate::errlog::ids::MESSAGE_MEMORY_FULL,
            "{} put(s) refused with MQRC_STORAGE_NOT_AVAILABLE: the queue manager's messages hold {} bytes of TuningParameters:MaxMessageMemory={max}; get or clear messages, or raise the limit",
            now - reported,
            held_bytes()
        );
        reported = now;
        last = Some(tokio::time::Instant::now());
    }
}
