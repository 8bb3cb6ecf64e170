//! MQSC execution for FerryMQ: this crate owns applying a parsed MQSC command to the queue engine
//! (and, for listeners, channel status and queue manager status, to the server through
//! [`ServerOps`]), building the response block runmqsc prints, and the configuration dump
//! (`dmpmqcfg`). The language itself — splitting, parsing, attribute tables, formatting — is
//! `ferrymq-mqsc`, which knows nothing of the engine, so `runmqsc` checks syntax without linking it
//! and the server runs exactly the commands the language crate parsed. The queue manager calls
//! this crate under its engine lock and answers only once the records it wrote are durable.

mod display;
mod dump;
mod object;
mod pubsub;
mod queue;
mod security;
pub(crate) mod status;

pub use dump::{dump_config, DumpScope};
use ferrymq_engine::{Engine, Lsn};
use ferrymq_types::{MqError, ObjectDef, ObjectKind, Reason};
pub use security::authority_records;

use ferrymq_mqsc::format::{render_fields, Field};
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::parse;
use ferrymq_mqsc::{Command, ObjType, Setting};

/// What commands need from the server itself rather than from the engine.
pub trait ServerOps {
    fn start_listener(&mut self, def: &ObjectDef) -> Result<String, MqError>;
    fn stop_listener(&mut self, name: &str) -> Result<String, MqError>;
    /// Rows for DISPLAY LSSTATUS: name plus attribute pairs (STATUS(RUNNING), PORT(..), STARTDA, STARTTI...).
    fn listener_status(&self) -> Vec<Vec<(String, String)>>;
    /// Rows for DISPLAY CHSTATUS: one per active socket/conversation (CHANNEL, CHLTYPE(SVRCONN), CONNAME, STATUS(RUNNING), CURSHCNV, ...).
    fn channel_status(&self) -> Vec<Vec<(String, String)>>;
    /// Pairs for DISPLAY QMSTATUS (STATUS(RUNNING), STARTDA, STARTTI, CONNS, ...).
    fn qmgr_status(&self) -> Vec<(String, String)>;
    /// START CHANNEL of a message channel (SDR; a RCVR runs when its sender connects).
    fn start_channel(&mut self, def: &ObjectDef) -> Result<String, MqError> {
        Err(MqError::new(
            Reason::COMMAND_FAILED,
            format!("CHANNEL({}) cannot be started here", def.name),
        ))
    }
    /// STOP CHANNEL of a message channel: `force` ends it at once (MODE FORCE or TERMINATE),
    /// otherwise after its current batch; `inactive` leaves it startable by its trigger.
    fn stop_channel(&mut self, name: &str, force: bool, inactive: bool) -> Result<String, MqError> {
        let _ = (force, inactive);
        Err(MqError::new(
            Reason::CHANNEL_NOT_ACTIVE,
            format!("channel {name} is not active"),
        ))
    }
    fn refresh_security(&mut self, type_: &str) -> Result<String, MqError>;
    /// A user's groups, and whether it holds every authority (the queue manager's own user, or
    /// a member of the administrators' group).
    fn principal(&self, user: &str) -> (Vec<String>, bool) {
        (ferrymq_security::users::os::groups_of(user), false)
    }
    /// Whether members of `group` hold every authority.
    fn is_admin_group(&self, _group: &str) -> bool {
        false
    }
    /// Whether a generic DISPLAY shows the object: the command's user holds DSP on it (objects
    /// it may not display are left out, as MQ leaves them out).
    fn may_display(&self, _objtype: &str, _name: &str) -> bool {
        true
    }
}

/// The outcome of one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The id of the first line, `FMQnnnnX`.
    pub msg_id: String,
    pub ok: bool,
    /// `Reason::NONE` on success; the engine's reason (or `COMMAND_FAILED` for a syntax error)
    /// on failure.
    pub reason: Reason,
    /// The whole response block, lines joined with `\n`, ready to print.
    pub text: String,
    /// For DISPLAY: each object shown, as its attribute pairs in display order.
    pub rows: Vec<Vec<(String, String)>>,
    /// The end of the last log record the command wrote (0: it wrote none). The change is not
    /// done until the log is durable up to here (HA: committed by the group), so the queue
    /// manager holds the response until then, as it holds a persistent put's.
    pub lsn: Lsn,
}

impl Response {
    pub(crate) fn success(id: &str, line: impl AsRef<str>) -> Response {
        Response {
            msg_id: id.to_string(),
            ok: true,
            reason: Reason::NONE,
            text: format!("{id}: {}", line.as_ref()),
            rows: Vec::new(),
            lsn: 0,
        }
    }

    /// A failure of `what` (e.g. `ALTER QLOCAL(X)`) for the reason in `err`.
    pub(crate) fn failure(what: &str, err: &MqError) -> Response {
        let id = msg::failure(err.reason);
        Response {
            msg_id: id.to_string(),
            ok: false,
            reason: err.reason,
            text: format!(
                "{id}: {what} failed: {}\n   Reason: {}",
                err.message, err.reason
            ),
            rows: Vec::new(),
            lsn: 0,
        }
    }

    /// Adds the warning that names attributes stored but not acted on, if the command set any.
    pub(crate) fn flag_not_acted_on(mut self, attrs: &[Setting]) -> Response {
        let names: Vec<&str> = attrs
            .iter()
            .filter(|s| !s.attr.acted_on)
            .map(|s| s.attr.name)
            .collect();
        if !names.is_empty() {
            self.text.push_str(&format!(
                "\n{}: {} stored; FerryMQ does not act on {} yet.",
                msg::NOT_ACTED_ON,
                names.join(", "),
                if names.len() == 1 { "it" } else { "them" }
            ));
        }
        self
    }

    /// Appends one object of a DISPLAY: its header line and attribute lines.
    pub(crate) fn push_object(&mut self, header: String, fields: Vec<Field>) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&header);
        for line in render_fields(&fields) {
            self.text.push('\n');
            self.text.push_str(&line);
        }
        self.rows
            .push(fields.into_iter().map(|f| (f.name, f.value)).collect());
    }
}

/// Runs one parsed command. `now_ms` is the current time (for message ages); the engine has no
/// clock of its own. The response's `lsn` is where the records the command logged end.
pub fn execute(
    cmd: &Command,
    engine: &mut Engine,
    ops: &mut dyn ServerOps,
    now_ms: u64,
) -> Response {
    let before = engine.admin_lsn();
    let mut r = execute_command(cmd, engine, ops, now_ms);
    if engine.admin_lsn() > before {
        r.lsn = engine.admin_lsn();
    }
    r
}

fn execute_command(
    cmd: &Command,
    engine: &mut Engine,
    ops: &mut dyn ServerOps,
    now_ms: u64,
) -> Response {
    let label = cmd.label();
    match cmd {
        Command::Define {
            kind,
            name,
            attrs,
            like,
            replace,
        } => {
            if kind.is_queue() {
                queue::define(engine, *kind, name, attrs, like.as_deref(), *replace, now_ms)
            } else {
                object::define(engine, *kind, name, attrs, like.as_deref(), *replace, now_ms)
            }
        }
        Command::Alter { kind, name, attrs } => {
            if kind.is_queue() {
                queue::alter(engine, *kind, name, attrs, now_ms)
            } else {
                object::alter(engine, *kind, name, attrs, now_ms)
            }
        }
        Command::AlterQmgr { attrs } => object::alter_qmgr(engine, attrs, now_ms),
        Command::Delete { kind, name, purge } => {
            if kind.is_queue() {
                queue::delete(engine, *kind, name, *purge)
            } else {
                object::delete(engine, *kind, name)
            }
        }
        Command::DefineSub {
            name,
            attrs,
            replace,
        } => pubsub::define(engine, name, attrs, *replace, now_ms),
        Command::DeleteSub { name } => pubsub::delete(engine, name),
        Command::Clear { name } => match engine.clear_queue(name) {
            Ok(_) => Response::success(
                msg::QUEUE_CLEARED,
                format!("QLOCAL({name}) cleared: every committed message was removed."),
            ),
            Err(e) => Response::failure(&label, &e),
        },
        Command::Display { .. } => display::display(cmd, engine, &*ops, now_ms),
        Command::StartListener { name, ignstate } => {
            match engine.object(ObjectKind::Listener, name) {
                None => Response::failure(&label, &object::not_defined(ObjType::Listener, name)),
                Some(def) => match ops.start_listener(&def.clone()) {
                    Ok(m) => {
                        Response::success(msg::LISTENER_STARTED, format!("LISTENER({name}): {m}"))
                    }
                    Err(e) => already(&label, e, Reason::LISTENER_STARTED, *ignstate, msg::LISTENER_STARTED),
                },
            }
        }
        Command::StopListener { name, ignstate } => {
            if engine.object(ObjectKind::Listener, name).is_none() {
                return Response::failure(&label, &object::not_defined(ObjType::Listener, name));
            }
            match ops.stop_listener(name) {
                Ok(m) => Response::success(msg::LISTENER_STOPPED, format!("LISTENER({name}): {m}")),
                Err(e) => already(&label, e, Reason::LISTENER_STOPPED, *ignstate, msg::LISTENER_STOPPED),
            }
        }
        Command::StartChannel { name, .. } => match channel_type(engine, name) {
            Err(e) => Response::failure(&label, &e),
            Ok(t) if t == "SVRCONN" => Response::success(
                msg::CHANNEL_STARTED,
                format!(
                    "CHANNEL({name}): a SVRCONN channel takes client connections whenever a listener runs; FerryMQ never holds one STOPPED, so it is already available."
                ),
            ),
            Ok(_) => {
                let def = engine
                    .object(ObjectKind::Channel, name)
                    .cloned()
                    .expect("its type was read");
                match ops.start_channel(&def) {
                    Ok(m) => match engine.channel_set_stopped(name, false) {
                        Ok(lsn) => Response {
                            lsn,
                            ..Response::success(msg::CHANNEL_STARTED, m)
                        },
                        Err(e) => Response::failure(&label, &e),
                    },
                    Err(e) => Response::failure(&label, &e),
                }
            }
        },
        Command::StopChannel {
            name,
            ignstate,
            mode,
            inactive,
        } => {
            match channel_type(engine, name) {
                Err(e) => return Response::failure(&label, &e),
                Ok(t) if t != "SVRCONN" => {
                    // A sender stays stopped, across restarts too, until START CHANNEL;
                    // STATUS(INACTIVE) only ends it.
                    let lsn = if (t == "SDR" || t == "SVR") && !*inactive {
                        match engine.channel_set_stopped(name, true) {
                            Ok(l) => l,
                            Err(e) => return Response::failure(&label, &e),
                        }
                    } else {
                        0
                    };
                    let force = *mode != ferrymq_mqsc::StopMode::Quiesce;
                    return match ops.stop_channel(name, force, *inactive) {
                        Ok(m) => Response {
                            lsn,
                            ..Response::success(msg::CHANNEL_STOPPED, m)
                        },
                        Err(e) => already(
                            &label,
                            e,
                            Reason::CHANNEL_NOT_ACTIVE,
                            *ignstate,
                            msg::CHANNEL_STOPPED,
                        ),
                    };
                }
                Ok(_) => {}
            }
            let instances = ops
                .channel_status()
                .iter()
                .filter(|row| row.iter().any(|(k, v)| k == "CHANNEL" && v == name))
                .count();
            if instances > 0 {
                return Response::failure(
                    &label,
                    &MqError::new(
                        Reason::COMMAND_FAILED,
                        format!(
                            "CHANNEL({name}) has {instances} running instance(s); this release cannot stop client connections by channel"
                        ),
                    ),
                );
            }
            already(
                &label,
                MqError::new(
                    Reason::CHANNEL_NOT_ACTIVE,
                    format!("channel {name} is not active: no connection uses it"),
                ),
                Reason::CHANNEL_NOT_ACTIVE,
                *ignstate,
                msg::CHANNEL_STOPPED,
            )
        }
        Command::RefreshQmgrExpiry { name } => {
            let select = |q: &str| display::matches(name, q);
            let (mut examined, mut discarded) = (0, 0);
            let mut cursor = Default::default();
            loop {
                let p = engine.scan_expired(&mut cursor, now_ms, usize::MAX, &select);
                examined += p.examined;
                discarded += p.discarded;
                if p.wrapped {
                    break;
                }
            }
            Response::success(
                msg::QMGR_REFRESHED,
                format!(
                    "Expiry scan of the queues matching '{name}': {discarded} expired messages discarded, {examined} examined."
                ),
            )
        }
        Command::RefreshSecurity { type_ } => match ops.refresh_security(type_) {
            Ok(m) => Response::success(msg::SECURITY_REFRESHED, m),
            Err(e) => Response::failure(&label, &e),
        },
        Command::SetChlAuth(s) => security::set_chlauth(engine, s, now_ms),
        Command::SetAuthRec(s) => security::set_authrec(engine, s, now_ms),
        Command::DeleteAuthRec(f) => security::delete_authrec(engine, f),
        Command::DisplayChlAuth {
            profile,
            runcheck: Some(rc),
            ..
        } => security::runcheck_chlauth(engine, profile, rc),
        Command::DisplayChlAuth {
            profile,
            type_,
            filter,
            ..
        } => security::display_chlauth(engine, profile, type_.as_deref(), filter),
        Command::DisplayAuthRec(f) => security::display_authrec(engine, f, &*ops),
        Command::DisplayEntAuth(q) => security::display_entauth(engine, q, &*ops),
        Command::ResolveChannel { name, commit } => {
            if let Err(e) = sender_channel(engine, name) {
                return Response::failure(&label, &e);
            }
            let had = engine.channel_sync(name).indoubt;
            match engine.channel_resolve(name, *commit) {
                Ok(lsn) => {
                    let text = match had {
                        None => format!("CHANNEL({name}) has no batch in doubt: nothing to resolve."),
                        Some(d) => format!(
                            "CHANNEL({name}): the batch in doubt (LUWID {:016X}, {} messages) was {}.",
                            d.luwid,
                            d.gets.len(),
                            if *commit { "committed: its messages left the transmission queue" } else { "backed out: its messages will be sent again" }
                        ),
                    };
                    Response {
                        lsn,
                        ..Response::success(msg::CHANNEL_RESOLVED, text)
                    }
                }
                Err(e) => Response::failure(&label, &e),
            }
        }
        Command::ResetChannel { name, seqnum } => {
            if let Err(e) = channel_type(engine, name) {
                return Response::failure(&label, &e);
            }
            match engine.channel_reset(name, u64::from(*seqnum) - 1) {
                Ok(lsn) => Response {
                    lsn,
                    ..Response::success(
                        msg::CHANNEL_RESET,
                        format!("CHANNEL({name}): the next message sequence number is {seqnum}."),
                    )
                },
                Err(e) => Response::failure(&label, &e),
            }
        }
        // The server answers PING CHANNEL itself (it talks to the partner over the network);
        // anywhere else there is no network to ping over.
        Command::PingChannel { .. } => Response::failure(
            &label,
            &MqError::new(
                Reason::COMMAND_FAILED,
                "PING CHANNEL needs a running queue manager",
            ),
        ),
        Command::PingQmgr => Response::success(
            msg::PING,
            format!(
                "Queue manager {} is running and answering commands.",
                engine.qmgr_name()
            ),
        ),
        Command::End => Response::success(
            msg::END,
            "END ends a runmqsc session; the queue manager has nothing to do for it.",
        ),
    }
}

/// Parses and runs one command as the queue manager receives it. A syntax error is a failed
/// response that shows where the command went wrong.
pub fn execute_text(
    text: &str,
    engine: &mut Engine,
    ops: &mut dyn ServerOps,
    now_ms: u64,
) -> Response {
    match parse(text) {
        Ok(cmd) => execute(&cmd, engine, ops, now_ms),
        Err(e) => Response {
            msg_id: msg::SYNTAX_ERROR.to_string(),
            ok: false,
            reason: Reason::COMMAND_FAILED,
            text: format!(
                "{}: Syntax error: {}\n{}",
                msg::SYNTAX_ERROR,
                e.message,
                e.pointer(text)
            ),
            rows: Vec::new(),
            lsn: 0,
        },
    }
}

/// A START or STOP that failed: with IGNSTATE(YES), a failure because the object is already in
/// the state asked for (`state`) is a success; otherwise the failure says how to accept it.
fn already(
    label: &str,
    mut e: MqError,
    state: Reason,
    ignstate: bool,
    ok_id: &'static str,
) -> Response {
    if e.reason != state {
        return Response::failure(label, &e);
    }
    if ignstate {
        return Response::success(ok_id, format!("{label}: {} (IGNSTATE(YES)).", e.message));
    }
    e.message.push_str("; IGNSTATE(YES) accepts that");
    Response::failure(label, &e)
}

/// The CHLTYPE of a defined channel, or why there is none.
/// RESOLVE works on a sending channel only.
fn sender_channel(engine: &Engine, name: &str) -> Result<(), MqError> {
    match channel_type(engine, name)?.as_str() {
        "SDR" | "SVR" => Ok(()),
        t => Err(MqError::new(
            Reason::COMMAND_FAILED,
            format!("CHANNEL({name}) is a {t} channel: only a sending channel (SDR, SVR) has a batch in doubt to resolve"),
        )),
    }
}

fn channel_type(engine: &Engine, name: &str) -> Result<String, MqError> {
    let def = engine
        .object(ObjectKind::Channel, name)
        .ok_or_else(|| object::not_defined(ObjType::Channel, name))?;
    Ok(def.attrs.get("CHLTYPE").cloned().unwrap_or_default())
}
