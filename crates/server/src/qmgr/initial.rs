//! A new queue manager's initial configuration: MQSC run by crtmqm against the engine before the
//! first checkpoint, through the same executor as runmqsc (`ferrymq_admin`), with no server
//! around it. What the commands define is in the first checkpoint, so the queue manager starts
//! with it as with the default objects; every instance of an HA group runs the same commands at
//! time 0, so all start from identical state.

use ferrymq_admin::{execute_text, ServerOps};
use ferrymq_engine::Engine;
use ferrymq_mqsc::split_commands;
use ferrymq_types::{MqError, ObjectDef, Reason};

/// The server side of commands that need a running queue manager: there is none yet. Security
/// commands (REFRESH SECURITY) have nothing to refresh: the queue manager reads everything when
/// it starts.
struct Offline;

impl ServerOps for Offline {
    fn start_listener(&mut self, def: &ObjectDef) -> Result<String, MqError> {
        Err(MqError::new(
            Reason::COMMAND_FAILED,
            format!(
                "listener '{}' cannot start before the queue manager does",
                def.name
            ),
        ))
    }
    fn stop_listener(&mut self, name: &str) -> Result<String, MqError> {
        Err(MqError::new(
            Reason::COMMAND_FAILED,
            format!("listener '{name}' is not running: the queue manager is being created"),
        ))
    }
    fn listener_status(&self) -> Vec<Vec<(String, String)>> {
        Vec::new()
    }
    fn channel_status(&self) -> Vec<Vec<(String, String)>> {
        Vec::new()
    }
    fn qmgr_status(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn refresh_security(&mut self, _type_: &str) -> Result<String, MqError> {
        Ok("Security is read when the queue manager starts.".to_string())
    }
}

/// Runs every command of `script` (MQSC text, as runmqsc reads it; END stops it); the first that
/// fails stops creation with its response and line.
pub fn apply(engine: &mut Engine, script: &str, now_ms: u64) -> Result<(), String> {
    for cmd in split_commands(script) {
        if ferrymq_mqsc::parse(&cmd.text).is_ok_and(|c| c == ferrymq_mqsc::Command::End) {
            break;
        }
        let r = execute_text(&cmd.text, engine, &mut Offline, now_ms);
        if !r.ok {
            return Err(format!(
                "initial configuration, line {}: {}: {}",
                cmd.line,
                cmd.text.split_whitespace().collect::<Vec<_>>().join(" "),
                r.text
            ));
        }
    }
    Ok(())
}
