//! Shared by the engine's integration tests: a log the test can read after handing it to the
//! engine, and the engine configuration they use.

use std::sync::{Arc, Mutex};

use ferrymq_engine::{EngineConfig, LogSink, Lsn, MemoryLog};
use ferrymq_types::MqError;

/// A log whose records the test can read after handing the sink to the engine.
#[derive(Clone, Default)]
pub struct SharedLog(pub Arc<Mutex<MemoryLog>>);

impl LogSink for SharedLog {
    fn append(&mut self, kind: u8, parts: &[&[u8]]) -> Result<Lsn, MqError> {
        self.0.lock().unwrap().append(kind, parts)
    }
}

pub fn cfg() -> EngineConfig {
    EngineConfig {
        qmgr_name: "QM1".into(),
        max_handles: 16,
        instance_id: 42,
        backout_requeue: true,
        message_memory_max: 0,
    }
}
