//! How fast the machine's CPUs wake while messages flow (qm.ini
//! `TuningParameters:CpuWakeLatencyUs`, off unless set).
//!
//! A round trip through the queue manager is four hand-offs between processes (requester, queue
//! manager, responder, queue manager, requester), and at low rates each one lands on a CPU that
//! has gone idle. On a virtual machine whose idle CPUs halt, waking one costs tens of
//! microseconds, several times what the queue manager spends on the message. The kernel's CPU
//! latency request (PM QoS, `/dev/cpu_dma_latency`) bounds that: with a small bound the idle
//! CPUs poll instead of halting, so a wake-up is a flag, not an interrupt. It is the same knob
//! a latency tuning profile sets for the whole machine; here it is held only while the queue
//! manager has application work (an MQI request in the last second) and dropped when it goes
//! quiet, so an idle queue manager keeps its CPUs idle. The cost while held: the idle CPUs spin
//! (on a shared host that is CPU taken from others), which is why it is off unless asked for.
//!
//! The request needs write access to `/dev/cpu_dma_latency` (root, or a group given it): without
//! it the queue manager says so once at start and runs as if the key were not set.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The kernel's CPU latency request: held while the file is open.
const DEVICE: &str = "/dev/cpu_dma_latency";
/// How often the holder looks for activity.
const CHECK_EVERY: Duration = Duration::from_millis(100);
/// Checks without activity before the request is dropped (a second).
const QUIET_CHECKS: u32 = 10;

/// Set by every batch of application requests; taken by the holder's next check.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Notes that application work ran when `is_work()` says so. The flag is read first, so that a
/// busy queue manager's connections neither look at their frames nor all write one cache line
/// once it is set (and with the key unset nothing clears it after the first batch).
#[inline]
pub fn note_activity_if(is_work: impl FnOnce() -> bool) {
    if !ACTIVE.load(Ordering::Relaxed) && is_work() {
        ACTIVE.store(true, Ordering::Relaxed);
    }
}

/// Makes the kernel request: bounds every CPU's wake-up latency to `us` microseconds for as long
/// as the returned file stays open.
fn request(us: u32) -> std::io::Result<File> {
    let mut f = std::fs::OpenOptions::new().write(true).open(DEVICE)?;
    // The device takes a native-endian 32-bit value.
    f.write_all(&(us as i32).to_ne_bytes())?;
    Ok(f)
}

/// Starts the holder when `us` is set. Returns the warning to log when the request cannot be
/// made (then nothing is started).
pub fn start(us: Option<u32>) -> Option<String> {
    let us = us?;
    // Tried once now, so that a missing permission is said at start, not at the first message.
    if let Err(e) = request(us) {
        return Some(format!(
            "TuningParameters:CpuWakeLatencyUs={us} is set but the CPU latency request could not \
             be made ({DEVICE}: {e}); the queue manager runs without it. Run it as a user that \
             may write {DEVICE}, or remove the key."
        ));
    }
    let spawned = std::thread::Builder::new()
        .name("ferrymq-wake".into())
        .spawn(move || hold(us));
    spawned
        .err()
        .map(|e| format!("TuningParameters:CpuWakeLatencyUs: cannot start its thread: {e}"))
}

/// Holds the request while there is activity and drops it after a quiet second.
fn hold(us: u32) {
    let mut held: Option<File> = None;
    let mut quiet = 0u32;
    loop {
        std::thread::sleep(CHECK_EVERY);
        if ACTIVE.swap(false, Ordering::Relaxed) {
            quiet = 0;
            if held.is_none() {
                // Failing now (the device went away) only leaves the CPUs as they were.
                held = request(us).ok();
            }
        } else if held.is_some() {
            quiet += 1;
            if quiet >= QUIET_CHECKS {
                held = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_is_noted_once_and_taken_by_the_next_check() {
        ACTIVE.store(false, Ordering::Relaxed);
        note_activity_if(|| false);
        assert!(
            !ACTIVE.load(Ordering::Relaxed),
            "heartbeats only: no activity"
        );
        note_activity_if(|| true);
        note_activity_if(|| panic!("not looked at once noted"));
        assert!(ACTIVE.swap(false, Ordering::Relaxed));
        assert!(!ACTIVE.swap(false, Ordering::Relaxed));
    }

    #[test]
    fn nothing_starts_when_the_key_is_not_set() {
        assert_eq!(start(None), None);
    }
}
