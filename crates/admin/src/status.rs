//! Status displays: QSTATUS and CONN from the engine's live state, CHSTATUS, LSSTATUS and
//! QMSTATUS from rows the server supplies.

use ferrymq_engine::{ConnInfo, Engine, HandleInfo};
use ferrymq_types::options::open;
use ferrymq_types::{mqerr, QueueKind};

use super::display::{is_generic, matches, Obj};
use super::{Response, ServerOps};
use ferrymq_mqsc::format::{mq_date, mq_time, Field};
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::DisplayWhat;

/// A connection id as DISPLAY CONN shows and takes it.
pub(crate) fn conn_hex(id: u64) -> String {
    format!("{id:016X}")
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

/// The handle's MQOO_* options as DISPLAY QSTATUS TYPE(HANDLE) shows them.
fn handle_fields(h: &HandleInfo, out: &mut Vec<Field>) {
    let o = h.options;
    let input = if o & open::INPUT_EXCLUSIVE != 0 {
        "EXCL"
    } else if o & open::ANY_INPUT != 0 {
        // The engine opens MQOO_INPUT_AS_Q_DEF shared.
        "SHARED"
    } else {
        "NO"
    };
    out.push(Field::new("INPUT", input));
    out.push(Field::new("OUTPUT", yes_no(o & open::OUTPUT != 0)));
    out.push(Field::new("BROWSE", yes_no(o & open::BROWSE != 0)));
    out.push(Field::new("INQUIRE", yes_no(o & open::INQUIRE != 0)));
    out.push(Field::new("SET", yes_no(o & open::SET != 0)));
}

/// The status of local queues; by a generic name, only those the viewer may display (as for
/// DISPLAY QUEUE).
pub(crate) fn qstatus(
    engine: &Engine,
    name: &str,
    type_: Option<&str>,
    ops: &dyn ServerOps,
    now_ms: u64,
) -> Result<(&'static str, Vec<Obj>), Response> {
    let queues: Vec<String> = engine
        .queue_defs()
        .into_iter()
        .filter(|d| d.kind == QueueKind::Local && matches(name, &d.name))
        .filter(|d| !is_generic(name) || ops.may_display("QUEUE", &d.name))
        .map(|d| d.name.clone())
        .collect();
    if queues.is_empty() && !is_generic(name) {
        let e = match engine.queue_def(name) {
            Some(d) => mqerr!(
                UNKNOWN_OBJECT_NAME,
                "'{name}' is a {}; only local queues have a status",
                d.kind.mq_name()
            ),
            None => mqerr!(UNKNOWN_OBJECT_NAME, "QLOCAL({name}) is not defined"),
        };
        return Err(Response::failure(&format!("DISPLAY QSTATUS({name})"), &e));
    }
    let mut objs = Vec::new();
    if type_ == Some("HANDLE") {
        let conns = engine.connections();
        for q in &queues {
            for c in &conns {
                for h in c.handles.iter().filter(|h| &h.queue == q) {
                    let mut f = vec![
                        Field::new("QUEUE", q),
                        Field::new("TYPE", "HANDLE"),
                        Field::new("CONN", conn_hex(c.id)),
                        Field::new("APPLTAG", &c.app),
                        Field::new("USERID", &c.user),
                    ];
                    handle_fields(h, &mut f);
                    objs.push(Obj::new(
                        format!("{}: Handle on queue {q}:", msg::QSTATUS_DETAILS),
                        f,
                        5,
                    ));
                }
            }
        }
        return Ok((msg::QSTATUS_DETAILS, objs));
    }
    for q in &queues {
        let Some(st) = engine.queue_status(q) else {
            continue;
        };
        let age = st
            .oldest_put_ms
            .map(|t| (now_ms.saturating_sub(t) / 1000).to_string())
            .unwrap_or_default();
        let f = vec![
            Field::new("QUEUE", q),
            Field::new("TYPE", "QUEUE"),
            Field::new("CURDEPTH", st.cur_depth.to_string()),
            Field::new("IPPROCS", st.open_input.to_string()),
            Field::new("OPPROCS", st.open_output.to_string()),
            Field::new("UNCOM", st.uncommitted.to_string()),
            Field::new("MSGAGE", age),
            Field::new("LGETDATE", mq_date(st.last_get_ms)),
            Field::new("LGETTIME", mq_time(st.last_get_ms)),
            Field::new("LPUTDATE", mq_date(st.last_put_ms)),
            Field::new("LPUTTIME", mq_time(st.last_put_ms)),
        ];
        objs.push(Obj::new(
            format!("{}: Status of queue {q}:", msg::QSTATUS_DETAILS),
            f,
            5,
        ));
    }
    Ok((msg::QSTATUS_DETAILS, objs))
}

fn conn_matches(pattern: &str, id: u64) -> bool {
    if is_generic(pattern) {
        return matches(pattern, &conn_hex(id));
    }
    // A full id may be given with or without leading zeros.
    u64::from_str_radix(pattern, 16).is_ok_and(|p| p == id)
}

pub(crate) fn conns(
    engine: &Engine,
    name: &str,
    type_: Option<&str>,
    all: bool,
) -> Result<(&'static str, Vec<Obj>), Response> {
    let conns: Vec<ConnInfo> = engine
        .connections()
        .into_iter()
        .filter(|c| conn_matches(name, c.id))
        .collect();
    if conns.is_empty() && !is_generic(name) {
        let e = mqerr!(UNKNOWN_OBJECT_NAME, "no connection has the id {name}");
        return Err(Response::failure(&format!("DISPLAY CONN({name})"), &e));
    }
    let (show_conn, show_handles) = match type_ {
        Some("HANDLE") => (false, true),
        Some("ALL") => (true, true),
        Some(_) => (true, false),
        None => (true, all),
    };
    let mut objs = Vec::new();
    for c in &conns {
        let id = conn_hex(c.id);
        if show_conn {
            let f = vec![
                Field::new("CONN", &id),
                Field::new("TYPE", "CONN"),
                Field::new("APPLTAG", &c.app),
                Field::new("USERID", &c.user),
                Field::new("UOWSTATE", if c.uow_msgs > 0 { "ACTIVE" } else { "NONE" }),
            ];
            objs.push(Obj::new(
                format!("{}: Connection {id}:", msg::CONN_DETAILS),
                f,
                5,
            ));
        }
        if show_handles {
            for h in &c.handles {
                let f = vec![
                    Field::new("CONN", &id),
                    Field::new("TYPE", "HANDLE"),
                    Field::new("OBJNAME", &h.opened_name),
                    Field::new("OBJTYPE", "QUEUE"),
                    Field::new("OPENOPTS", h.options.to_string()),
                ];
                objs.push(Obj::new(
                    format!("{}: Handle of connection {id}:", msg::CONN_DETAILS),
                    f,
                    5,
                ));
            }
        }
    }
    Ok((msg::CONN_DETAILS, objs))
}

/// CHSTATUS, LSSTATUS and QMSTATUS rows from the server. The server decides the fields, so by
/// default every field is shown.
pub(crate) fn server_rows(
    what: DisplayWhat,
    ops: &dyn ServerOps,
    name: &str,
) -> Result<(&'static str, Vec<Obj>), Response> {
    let to_fields =
        |row: Vec<(String, String)>| row.into_iter().map(|(k, v)| Field::new(k, v)).collect();
    if what == DisplayWhat::QmStatus {
        let fields: Vec<Field> = to_fields(ops.qmgr_status());
        let mut o = Obj::new(
            format!("{}: Status of the queue manager:", msg::QMSTATUS_DETAILS),
            fields,
            1,
        );
        o.default_all = true;
        return Ok((msg::QMSTATUS_DETAILS, vec![o]));
    }
    let (id, key, noun, rows) = if what == DisplayWhat::ChStatus {
        (
            msg::CHSTATUS_DETAILS,
            "CHANNEL",
            "channel",
            ops.channel_status(),
        )
    } else {
        (
            msg::LSSTATUS_DETAILS,
            "LISTENER",
            "listener",
            ops.listener_status(),
        )
    };
    let mut objs = Vec::new();
    for row in rows {
        let fields: Vec<Field> = to_fields(row);
        let Some(n) = fields.iter().find(|f| f.name == key).or(fields.first()) else {
            continue;
        };
        if !matches(name, &n.value) {
            continue;
        }
        let mut o = Obj::new(format!("{id}: Status of {noun} {}:", n.value), fields, 1);
        o.default_all = true;
        objs.push(o);
    }
    if objs.is_empty() && !is_generic(name) {
        let e = mqerr!(
            UNKNOWN_OBJECT_NAME,
            "{noun} '{name}' has no status: it is not running"
        );
        return Err(Response::failure(
            &format!("DISPLAY {}({name})", what.keyword()),
            &e,
        ));
    }
    Ok((id, objs))
}
