//! DISPLAY: collect the matching objects with every attribute, apply WHERE, then keep the
//! attributes asked for. One block per object, in name order.

use std::cmp::Ordering;

use ferrymq_engine::Engine;
use ferrymq_types::{mqerr, QueueDef};

use super::{object, queue, status, Response, ServerOps};
use ferrymq_mqsc::format::Field;
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::{Command, DisplayWhat, Filter, FilterOp, ObjType, Requested};

/// One object to show: every attribute it has, in display order.
pub(crate) struct Obj {
    pub header: String,
    pub fields: Vec<Field>,
    /// The leading fields shown whatever is asked for (name and type).
    pub always: usize,
    /// Show every field when the command asks for nothing in particular (QMGR, server rows).
    pub default_all: bool,
}

impl Obj {
    pub fn new(header: String, fields: Vec<Field>, always: usize) -> Obj {
        Obj {
            header,
            fields,
            always,
            default_all: false,
        }
    }
}

pub(crate) fn is_generic(pattern: &str) -> bool {
    pattern.ends_with('*')
}

/// MQ's generic names: a trailing `*` matches any ending, `*` alone matches everything.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

fn passes(f: &Filter, fields: &[Field]) -> bool {
    // An object without the attribute (MAXDEPTH of an alias) does not match.
    let Some(field) = fields.iter().find(|x| x.name == f.attr) else {
        return false;
    };
    let (have, want) = (field.value.trim(), f.value.trim());
    let ord = || match (have.parse::<i64>(), want.parse::<i64>()) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => have.cmp(want),
    };
    match f.op {
        FilterOp::Lk => matches(want, have),
        FilterOp::Nl => !matches(want, have),
        FilterOp::Eq => ord() == Ordering::Equal,
        FilterOp::Ne => ord() != Ordering::Equal,
        FilterOp::Gt => ord() == Ordering::Greater,
        FilterOp::Lt => ord() == Ordering::Less,
        FilterOp::Ge => ord() != Ordering::Less,
        FilterOp::Le => ord() != Ordering::Greater,
    }
}

fn project(obj: Obj, requested: &Requested, where_: Option<&Filter>) -> (String, Vec<Field>) {
    let keep_all = match requested {
        Requested::All => true,
        Requested::Default => obj.default_all,
        Requested::List(_) => false,
    };
    if keep_all {
        return (obj.header, obj.fields);
    }
    let always = obj.always;
    let fields = obj
        .fields
        .into_iter()
        .enumerate()
        .filter(|(i, f)| {
            *i < always
                || matches!(requested, Requested::List(l) if l.contains(&f.name))
                // MQ shows the attribute a WHERE tested.
                || where_.is_some_and(|w| w.attr == f.name)
        })
        .map(|(_, f)| f)
        .collect();
    (obj.header, fields)
}

fn queue_type(word: &str) -> Option<ObjType> {
    Some(match word {
        "QLOCAL" => ObjType::QLocal,
        "QALIAS" => ObjType::QAlias,
        "QMODEL" => ObjType::QModel,
        "QREMOTE" => ObjType::QRemote,
        _ => return None,
    })
}

fn queues(
    engine: &Engine,
    what: DisplayWhat,
    name: &str,
    type_: Option<&str>,
    ops: &dyn ServerOps,
) -> Result<(&'static str, Vec<Obj>), Response> {
    let wanted = match what {
        DisplayWhat::Object(t) => Some(t),
        _ => type_.and_then(queue_type),
    };
    let defs: Vec<&QueueDef> = engine
        .queue_defs()
        .into_iter()
        .filter(|d| matches(name, &d.name))
        .collect();
    let kw = wanted.map_or("QUEUE", ObjType::keyword);
    if !is_generic(name) {
        let e = match defs.first() {
            None => Some(mqerr!(UNKNOWN_OBJECT_NAME, "{kw}({name}) is not defined")),
            Some(d) if wanted.is_some_and(|t| t != queue::obj_type(&d.kind)) => Some(mqerr!(
                UNKNOWN_OBJECT_NAME,
                "no {kw} is named '{name}' (a {} is)",
                d.kind.mq_name()
            )),
            Some(_) => None,
        };
        if let Some(e) = e {
            return Err(Response::failure(&format!("DISPLAY {kw}({name})"), &e));
        }
    }
    let id = msg::details(ObjType::QLocal);
    let objs = defs
        .into_iter()
        .filter(|d| wanted.is_none_or(|t| t == queue::obj_type(&d.kind)))
        .filter(|d| !is_generic(name) || ops.may_display("QUEUE", &d.name))
        .map(|d| {
            let st = engine.queue_status(&d.name);
            Obj::new(
                format!("{id}: Attributes of queue {}:", d.name),
                queue::fields(d, st.as_ref()),
                2,
            )
        })
        .collect();
    Ok((id, objs))
}

fn objects(
    engine: &Engine,
    t: ObjType,
    name: &str,
    type_: Option<&str>,
    ops: &dyn ServerOps,
) -> Result<(&'static str, Vec<Obj>), Response> {
    let kind = object::object_kind(t);
    let defs: Vec<_> = engine
        .objects()
        .filter(|o| o.kind == kind && matches(name, &o.name))
        .collect();
    if defs.is_empty() && !is_generic(name) {
        return Err(Response::failure(
            &format!("DISPLAY {}({name})", t.keyword()),
            &object::not_defined(t, name),
        ));
    }
    let id = msg::details(t);
    let noun = match t {
        ObjType::Channel => "channel",
        ObjType::Listener => "listener",
        ObjType::Topic => "topic",
        _ => "authentication information",
    };
    let objs = defs
        .into_iter()
        .filter(|o| {
            // TYPE(chltype) narrows DISPLAY CHANNEL.
            type_.is_none_or(|ty| {
                ty == "ALL" || o.attrs.get("CHLTYPE").map(String::as_str) == Some(ty)
            })
        })
        .filter(|o| !is_generic(name) || ops.may_display(t.keyword(), &o.name))
        .map(|o| {
            Obj::new(
                format!("{id}: Attributes of {noun} {}:", o.name),
                object::fields(o),
                2,
            )
        })
        .collect();
    Ok((id, objs))
}

pub(crate) fn display(
    cmd: &Command,
    engine: &mut Engine,
    ops: &dyn ServerOps,
    now_ms: u64,
) -> Response {
    let Command::Display {
        what,
        name,
        requested,
        where_,
        type_,
    } = cmd
    else {
        unreachable!("display() is called for DISPLAY commands only");
    };
    let type_ = type_.as_deref();
    let found = match what {
        DisplayWhat::Queue => queues(engine, *what, name, type_, ops),
        DisplayWhat::Object(t) if t.is_queue() => queues(engine, *what, name, type_, ops),
        DisplayWhat::Object(t) => objects(engine, *t, name, type_, ops),
        DisplayWhat::Qmgr => {
            let mut o = Obj::new(
                format!(
                    "{}: Attributes of queue manager {}:",
                    msg::QMGR_DETAILS,
                    engine.qmgr_name()
                ),
                object::qmgr_fields(engine),
                1,
            );
            o.default_all = true;
            Ok((msg::QMGR_DETAILS, vec![o]))
        }
        DisplayWhat::QStatus => status::qstatus(engine, name, type_, ops, now_ms),
        DisplayWhat::Conn => status::conns(engine, name, type_, *requested == Requested::All),
        DisplayWhat::ChStatus | DisplayWhat::LsStatus | DisplayWhat::QmStatus => {
            status::server_rows(*what, ops, name)
        }
        DisplayWhat::Sub | DisplayWhat::SbStatus | DisplayWhat::TpStatus | DisplayWhat::PubSub => {
            crate::pubsub::rows(engine, *what, name, type_)
        }
    };
    let (id, objs) = match found {
        Ok(x) => x,
        Err(r) => return r,
    };
    let shown: Vec<(String, Vec<Field>)> = objs
        .into_iter()
        .filter(|o| where_.as_ref().is_none_or(|w| passes(w, &o.fields)))
        .map(|o| project(o, requested, where_.as_ref()))
        .collect();
    if shown.is_empty() {
        return Response::success(
            msg::NO_MATCH,
            format!("No objects matched {}.", cmd.label()),
        );
    }
    let mut r = Response {
        msg_id: id.to_string(),
        ok: true,
        reason: ferrymq_types::Reason::NONE,
        text: String::new(),
        rows: Vec::new(),
        lsn: 0,
    };
    for (header, fields) in shown {
        r.push_object(header, fields);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_names_match_by_prefix() {
        assert!(matches("*", "ANY"));
        assert!(matches("REQ*", "REQUEST1"));
        assert!(!matches("REQ*", "REPLY"));
        assert!(matches("REPLY", "REPLY"));
        assert!(!matches("REPLY", "REPLY1"));
    }

    #[test]
    fn where_compares_numbers_as_numbers_and_text_as_text() {
        let f = [Field::new("CURDEPTH", "10"), Field::new("DESCR", "abc")];
        let w = |attr: &str, op, v: &str| Filter {
            attr: attr.into(),
            op,
            value: v.into(),
        };
        assert!(passes(&w("CURDEPTH", FilterOp::Gt, "9"), &f));
        assert!(!passes(&w("CURDEPTH", FilterOp::Gt, "10"), &f));
        assert!(passes(&w("CURDEPTH", FilterOp::Ge, "10"), &f));
        assert!(passes(&w("DESCR", FilterOp::Lk, "ab*"), &f));
        assert!(passes(&w("DESCR", FilterOp::Nl, "x*"), &f));
        assert!(!passes(&w("MAXDEPTH", FilterOp::Eq, "1"), &f));
    }
}
