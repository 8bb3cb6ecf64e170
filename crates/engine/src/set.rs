//! MQSET: changing the few queue attributes an application may set through a handle opened with
//! MQOO_SET — InhibitGet, InhibitPut and the trigger attributes — named by their MQSC keywords
//! as MQINQ names them. The change is logged and replayed exactly as an ALTER of the queue.

use ferrymq_types::options::open;
use ferrymq_types::{mqerr, MqError, QueueKind};

use crate::conn::ConnId;
use crate::message::Lsn;
use crate::Engine;

/// The keywords MQSET accepts (MQIA_INHIBIT_GET, MQIA_INHIBIT_PUT, MQIA_TRIGGER_CONTROL,
/// MQIA_TRIGGER_TYPE, MQIA_TRIGGER_DEPTH, MQIA_TRIGGER_MSG_PRIORITY, MQCA_TRIGGER_DATA).
pub const SETTABLE: &[&str] = &[
    "GET", "PUT", "TRIGGER", "TRIGTYPE", "TRIGDPTH", "TRIGMPRI", "TRIGDATA",
];

/// Longest TRIGDATA (MQ_TRIGGER_DATA_LENGTH).
const TRIGGER_DATA_MAX_BYTES: usize = 64;

fn enabled(name: &str, v: &str) -> Result<bool, MqError> {
    match v {
        "ENABLED" => Ok(false),
        "DISABLED" => Ok(true),
        _ => Err(mqerr!(
            INHIBIT_VALUE_ERROR,
            "{name}({v}) is not valid: use ENABLED or DISABLED"
        )),
    }
}

impl Engine {
    /// MQSET on an open handle. `attrs` are (keyword, value) pairs as MQSC writes them; all are
    /// checked before any is changed, and all change in one logged definition. Returns the LSN
    /// the reply must wait for.
    pub fn set(
        &mut self,
        conn: ConnId,
        hobj: u32,
        attrs: &[(String, String)],
    ) -> Result<Lsn, MqError> {
        let h = self.handle(conn, hobj)?;
        if h.options & open::SET == 0 {
            return Err(mqerr!(
                NOT_OPEN_FOR_SET,
                "'{}' was not opened for set (MQOO_SET)",
                h.opened_name
            ));
        }
        let name = h.alias.clone().unwrap_or_else(|| h.queue.clone());
        let q = self
            .queues
            .get(&name)
            .ok_or_else(|| mqerr!(Q_DELETED, "queue '{name}' has been deleted"))?;
        let mut def = q.def.clone();
        let triggers = matches!(def.kind, QueueKind::Local | QueueKind::Model { .. });
        for (k, v) in attrs {
            let k = k.to_ascii_uppercase();
            let v = v.trim();
            let upper = v.to_ascii_uppercase();
            if !SETTABLE.contains(&k.as_str()) {
                return Err(mqerr!(
                    SELECTOR_ERROR,
                    "'{k}' is not an attribute MQSET can change; it changes {}",
                    SETTABLE.join(", ")
                ));
            }
            if !triggers && k.starts_with("TRIG") {
                return Err(mqerr!(
                    SELECTOR_NOT_FOR_TYPE,
                    "queue '{name}' is not a local queue: it has no {k}"
                ));
            }
            match k.as_str() {
                "GET" => def.get_inhibited = enabled("GET", &upper)?,
                "PUT" => def.put_inhibited = enabled("PUT", &upper)?,
                "TRIGGER" => {
                    if upper != "TRIGGER" && upper != "NOTRIGGER" {
                        return Err(mqerr!(
                            TRIGGER_CONTROL_ERROR,
                            "trigger control '{v}' is not valid: use TRIGGER or NOTRIGGER"
                        ));
                    }
                    def.other.insert(k, upper);
                }
                "TRIGTYPE" => {
                    if !["FIRST", "EVERY", "DEPTH", "NONE"].contains(&upper.as_str()) {
                        return Err(mqerr!(
                            TRIGGER_TYPE_ERROR,
                            "TRIGTYPE({v}) is not valid: use FIRST, EVERY, DEPTH or NONE"
                        ));
                    }
                    def.other.insert(k, upper);
                }
                "TRIGDPTH" => match v.parse::<u32>() {
                    Ok(n) if (1..=999_999_999).contains(&n) => {
                        def.other.insert(k, n.to_string());
                    }
                    _ => {
                        return Err(mqerr!(
                            TRIGGER_DEPTH_ERROR,
                            "TRIGDPTH({v}) is not valid: use 1 to 999999999"
                        ))
                    }
                },
                "TRIGMPRI" => match v.parse::<u8>() {
                    Ok(n) if n <= 9 => {
                        def.other.insert(k, n.to_string());
                    }
                    _ => {
                        return Err(mqerr!(
                            TRIGGER_MSG_PRIORITY_ERR,
                            "TRIGMPRI({v}) is not valid: use 0 to 9"
                        ))
                    }
                },
                _ => {
                    // TRIGDATA keeps its case, as MQSC's quoted string does.
                    if v.len() > TRIGGER_DATA_MAX_BYTES {
                        return Err(mqerr!(
                            CHAR_ATTR_LENGTH_ERROR,
                            "TRIGDATA of {} bytes is longer than {TRIGGER_DATA_MAX_BYTES}",
                            v.len()
                        ));
                    }
                    def.other.insert(k, v.to_string());
                }
            }
        }
        if def == q.def {
            return Ok(0);
        }
        self.alter_queue(def)
    }
}
