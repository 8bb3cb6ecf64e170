//! The engine's log sink over the ring (a full or failed log turned into MQ reasons), and the
//! record of failing checkpoints that explains why a log is full.

use super::*;

/// Whether checkpoints are failing, so that a full log's reason says why it is full.
#[derive(Default)]
pub struct CheckpointHealth {
    /// Consecutive failed checkpoints and the last one's error.
    failing: Mutex<Option<(u32, String)>>,
}

impl CheckpointHealth {
    pub(super) fn record<T>(&self, r: &Result<T, String>) {
        let mut f = self.failing.lock();
        match r {
            Ok(_) => *f = None,
            Err(e) => {
                let n = f.as_ref().map_or(0, |(n, _)| *n);
                *f = Some((n + 1, e.clone()));
            }
        }
    }

    /// Consecutive failed checkpoints and the last error, while checkpoints fail.
    pub fn failing(&self) -> Option<(u32, String)> {
        self.failing.lock().clone()
    }
}

/// The engine's log sink: appends to the ring and turns a full or failed log into MQ reasons.
pub struct RingSink {
    pub(super) log: Arc<RecoveryLog>,
    /// Wakes the checkpointer when the log is filling up.
    pub on_pressure: Box<dyn Fn() + Send>,
    pub(super) trigger_bytes: u64,
    /// Past this much in use, `room_low` is raised for the sockets (see [`super::Storage::room_low`]).
    pub(super) room_bytes: u64,
    pub(super) room_low: Arc<std::sync::atomic::AtomicBool>,
    pub(super) health: Arc<CheckpointHealth>,
}

impl RingSink {
    fn appended(&self, r: Result<Lsn, LogError>) -> Result<Lsn, MqError> {
        let used = self.log.used_bytes();
        if used >= self.trigger_bytes {
            (self.on_pressure)();
        }
        if used >= self.room_bytes {
            self.room_low
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r.map_err(|e| match e {
            LogError::Full { .. } => match self.health.failing() {
                Some((n, why)) => MqError::new(
                    Reason::RESOURCE_PROBLEM,
                    format!(
                        "the recovery log is full ({e}) and checkpoints are failing ({n} in a row; last: {why}); persistent work resumes by itself once a checkpoint succeeds — {}",
                        if why.contains("No space left on device") {
                            "the disk is full: free space on the queue manager's filesystem"
                        } else {
                            "fix the cause"
                        }
                    ),
                ),
                None => MqError::new(
                    Reason::RESOURCE_PROBLEM,
                    format!("the recovery log is full ({e}); a checkpoint has been asked for to free space — retry, or enlarge the log with crtmqm -lp/-lf"),
                ),
            },
            LogError::RecordTooLarge { len, max } => MqError::new(
                Reason::RESOURCE_PROBLEM,
                format!("a log record of {len} bytes exceeds the largest the recovery log holds ({max}); enlarge the log (-lf) for messages this big"),
            ),
            other => MqError::new(Reason::RESOURCE_PROBLEM, format!("the recovery log failed: {other}")),
        })
    }
}

impl LogSink for RingSink {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let r = self.log.append_parts(kind, parts);
        self.appended(r)
    }

    fn append_lazy(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        let r = self.log.append_lazy(kind, parts);
        self.appended(r)
    }
}
