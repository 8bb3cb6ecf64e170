//! DEFINE, ALTER and DELETE of queues, and the mapping between MQSC attributes and `QueueDef`.

use ferrymq_engine::{Engine, QueueStatus};
use ferrymq_types::{
    mqerr, DynamicKind, MqError, MsgDeliverySequence, ObjectTimes, QueueDef, QueueKind,
};

use super::Response;
use ferrymq_mqsc::attrs::{self, AttrSpec, ValueKind};
use ferrymq_mqsc::format::{mq_date, mq_time, Field};
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::{ObjType, Setting};

/// The queue type of a definition.
pub(crate) fn obj_type(kind: &QueueKind) -> ObjType {
    match kind {
        QueueKind::Local => ObjType::QLocal,
        QueueKind::Alias { .. } => ObjType::QAlias,
        QueueKind::Model { .. } => ObjType::QModel,
        QueueKind::Remote { .. } => ObjType::QRemote,
    }
}

/// The object new queues of this type copy, as MQ's SYSTEM.DEFAULT.* queues are.
fn default_object(t: ObjType) -> &'static str {
    match t {
        ObjType::QAlias => "SYSTEM.DEFAULT.ALIAS.QUEUE",
        ObjType::QModel => "SYSTEM.DEFAULT.MODEL.QUEUE",
        ObjType::QRemote => "SYSTEM.DEFAULT.REMOTE.QUEUE",
        _ => "SYSTEM.DEFAULT.LOCAL.QUEUE",
    }
}

/// Where a new queue's attributes start: the type's default object if the queue manager has it,
/// otherwise FerryMQ's built-in defaults.
fn starting_point(engine: &Engine, t: ObjType) -> QueueDef {
    if let Some(d) = engine
        .queue_def(default_object(t))
        .filter(|d| obj_type(&d.kind) == t)
    {
        return d.clone();
    }
    let kind = match t {
        ObjType::QAlias => QueueKind::Alias {
            target: String::new(),
        },
        ObjType::QModel => QueueKind::Model {
            def_type: DynamicKind::Temporary,
        },
        ObjType::QRemote => QueueKind::Remote {
            rname: String::new(),
            rqmname: String::new(),
            xmitq: String::new(),
        },
        _ => QueueKind::Local,
    };
    QueueDef::new("", kind)
}

fn word(b: bool, yes: &str, no: &str) -> String {
    if b { yes } else { no }.to_string()
}

/// The value DISPLAY shows for `spec` on this queue, or None when the queue has no such attribute.
pub(crate) fn value(
    def: &QueueDef,
    status: Option<&QueueStatus>,
    spec: &AttrSpec,
) -> Option<String> {
    if !spec.acted_on {
        return Some(
            def.other
                .get(spec.name)
                .cloned()
                .unwrap_or_else(|| spec.default.to_string()),
        );
    }
    Some(match (spec.name, &def.kind) {
        ("DESCR", _) => def.description.clone(),
        ("MAXDEPTH", _) => def.max_depth.to_string(),
        ("MAXMSGL", _) => def.max_msg_len.to_string(),
        ("DEFPSIST", _) => word(def.def_persistent, "YES", "NO"),
        ("DEFPRTY", _) => def.def_priority.to_string(),
        ("MSGDLVSQ", _) => word(
            def.msg_delivery_sequence == MsgDeliverySequence::Fifo,
            "FIFO",
            "PRIORITY",
        ),
        ("PUT", _) => word(def.put_inhibited, "DISABLED", "ENABLED"),
        ("GET", _) => word(def.get_inhibited, "DISABLED", "ENABLED"),
        ("BOTHRESH", _) => def.backout_threshold.to_string(),
        ("BOQNAME", _) => def.backout_queue.clone(),
        ("USAGE", _) => word(def.is_xmitq, "XMITQ", "NORMAL"),
        ("TARGET", QueueKind::Alias { target }) => target.clone(),
        ("DEFTYPE", QueueKind::Model { def_type }) => {
            word(*def_type == DynamicKind::Permanent, "PERMDYN", "TEMPDYN")
        }
        // A local queue shows how it came to exist.
        ("DEFTYPE", QueueKind::Local) => match def.dynamic {
            None => "PREDEFINED".into(),
            Some(DynamicKind::Permanent) => "PERMDYN".into(),
            Some(DynamicKind::Temporary) => "TEMPDYN".into(),
        },
        ("RNAME", QueueKind::Remote { rname, .. }) => rname.clone(),
        ("RQMNAME", QueueKind::Remote { rqmname, .. }) => rqmname.clone(),
        ("XMITQ", QueueKind::Remote { xmitq, .. }) => xmitq.clone(),
        ("CRDATE", _) => mq_date(def.times.created_ms),
        ("CRTIME", _) => mq_time(def.times.created_ms),
        ("ALTDATE", _) => mq_date(def.times.altered_ms),
        ("ALTTIME", _) => mq_time(def.times.altered_ms),
        ("CURDEPTH", _) => status?.cur_depth.to_string(),
        ("IPPROCS", _) => status?.open_input.to_string(),
        ("OPPROCS", _) => status?.open_output.to_string(),
        _ => return None,
    })
}

/// Every attribute of a queue in display order: QUEUE, TYPE, its table, then anything stored
/// that the table does not know (kept so nothing set is ever hidden).
pub(crate) fn fields(def: &QueueDef, status: Option<&QueueStatus>) -> Vec<Field> {
    let t = obj_type(&def.kind);
    let table = attrs::table(t);
    let mut out = vec![
        Field::new("QUEUE", &def.name),
        Field::new("TYPE", t.keyword()),
    ];
    for spec in table {
        if let Some(v) = value(def, status, spec) {
            out.push(Field {
                name: spec.name.to_string(),
                value: v,
                bare: matches!(spec.kind, ValueKind::Switch { .. }),
            });
        }
    }
    for (k, v) in &def.other {
        if !table.iter().any(|s| s.name == k) {
            out.push(Field::new(k, v));
        }
    }
    out
}

fn num(s: &Setting) -> u32 {
    // Values were range-checked by the parser against ranges that fit u32.
    s.value.parse().unwrap_or(0)
}

/// Applies one checked setting to a definition.
fn apply(def: &mut QueueDef, s: &Setting) {
    if !s.attr.acted_on {
        def.other.insert(s.attr.name.to_string(), s.value.clone());
        return;
    }
    let v = s.value.as_str();
    match (s.attr.name, &mut def.kind) {
        ("DESCR", _) => def.description = s.value.clone(),
        ("MAXDEPTH", _) => def.max_depth = num(s),
        ("MAXMSGL", _) => def.max_msg_len = num(s),
        ("DEFPSIST", _) => def.def_persistent = v == "YES",
        ("DEFPRTY", _) => def.def_priority = num(s) as i32,
        ("MSGDLVSQ", _) => {
            def.msg_delivery_sequence = if v == "FIFO" {
                MsgDeliverySequence::Fifo
            } else {
                MsgDeliverySequence::Priority
            }
        }
        ("PUT", _) => def.put_inhibited = v == "DISABLED",
        ("GET", _) => def.get_inhibited = v == "DISABLED",
        ("BOTHRESH", _) => def.backout_threshold = num(s),
        ("BOQNAME", _) => def.backout_queue = s.value.clone(),
        ("USAGE", _) => def.is_xmitq = v == "XMITQ",
        ("TARGET", QueueKind::Alias { target }) => *target = s.value.clone(),
        ("DEFTYPE", QueueKind::Model { def_type }) => {
            *def_type = if v == "PERMDYN" {
                DynamicKind::Permanent
            } else {
                DynamicKind::Temporary
            }
        }
        ("RNAME", QueueKind::Remote { rname, .. }) => *rname = s.value.clone(),
        ("RQMNAME", QueueKind::Remote { rqmname, .. }) => *rqmname = s.value.clone(),
        ("XMITQ", QueueKind::Remote { xmitq, .. }) => *xmitq = s.value.clone(),
        // The parser only lets through attributes of the queue's own table.
        _ => {}
    }
}

fn label(t: ObjType, name: &str) -> String {
    format!("{}({name})", t.keyword())
}

fn wrong_type(existing: &QueueDef, asked: ObjType) -> MqError {
    mqerr!(
        OBJECT_TYPE_ERROR,
        "queue '{}' is a {}, not a {}; name it as {}({}) instead",
        existing.name,
        existing.kind.mq_name(),
        asked.keyword(),
        existing.kind.mq_name(),
        existing.name
    )
}

pub(crate) fn not_defined(t: ObjType, name: &str) -> MqError {
    mqerr!(UNKNOWN_OBJECT_NAME, "{} is not defined", label(t, name))
}

pub(crate) fn define(
    engine: &mut Engine,
    t: ObjType,
    name: &str,
    settings: &[Setting],
    like: Option<&str>,
    replace: bool,
    now_ms: u64,
) -> Response {
    let what = format!("DEFINE {}", label(t, name));
    let mut def = match like {
        Some(l) => match engine.queue_def(l) {
            None => return Response::failure(&what, &not_defined(t, l)),
            Some(d) if obj_type(&d.kind) != t => {
                return Response::failure(&what, &wrong_type(d, t))
            }
            Some(d) => d.clone(),
        },
        None => starting_point(engine, t),
    };
    def.name = name.to_string();
    def.dynamic = None;
    def.times = ObjectTimes::at(now_ms);
    for s in settings {
        apply(&mut def, s);
    }
    let existing = engine.queue_def(name).cloned();
    if let Some(ex) = &existing {
        if obj_type(&ex.kind) != t {
            let e = mqerr!(
                OBJECT_ALREADY_EXISTS,
                "a {} named '{name}' already exists; queues of every type share one name space",
                ex.kind.mq_name()
            );
            return Response::failure(&what, &e);
        }
        if !replace {
            // Scripts often define objects a queue manager already has (MQ's default objects).
            // When the command asks for nothing the existing object lacks, it is not an error.
            // With LIKE every attribute counts; otherwise only those the command names.
            let same = match like {
                Some(_) => {
                    let strip = |d: &QueueDef| {
                        let mut d = d.clone();
                        d.dynamic = None;
                        d.times = ObjectTimes::default();
                        d
                    };
                    fields(&strip(ex), None) == fields(&strip(&def), None)
                }
                None => settings
                    .iter()
                    .all(|s| value(ex, None, s.attr).as_deref() == Some(s.value.as_str())),
            };
            if same {
                return Response::success(
                    msg::UNCHANGED,
                    format!(
                        "{} already exists with the attributes given; nothing changed.",
                        label(t, name)
                    ),
                );
            }
            let e = mqerr!(
                OBJECT_ALREADY_EXISTS,
                "{} already exists with different attributes; add REPLACE to change it, or use ALTER",
                label(t, name)
            );
            return Response::failure(&what, &e);
        }
        def.dynamic = ex.dynamic;
        // A replaced queue keeps its creation time; the replacement is its latest alteration.
        def.times.created_ms = ex.times.created_ms;
    }
    match engine.define_queue(def, replace) {
        Ok(_) => Response::success(
            msg::defined(t),
            if existing.is_some() {
                format!("{} replaced.", label(t, name))
            } else {
                format!("{} defined.", label(t, name))
            },
        )
        .flag_not_acted_on(settings),
        Err(e) => Response::failure(&what, &e),
    }
}

pub(crate) fn alter(
    engine: &mut Engine,
    t: ObjType,
    name: &str,
    settings: &[Setting],
    now_ms: u64,
) -> Response {
    let what = format!("ALTER {}", label(t, name));
    let mut def = match engine.queue_def(name) {
        None => return Response::failure(&what, &not_defined(t, name)),
        Some(d) if obj_type(&d.kind) != t => return Response::failure(&what, &wrong_type(d, t)),
        Some(d) => d.clone(),
    };
    def.times.altered_ms = now_ms;
    for s in settings {
        apply(&mut def, s);
    }
    match engine.alter_queue(def) {
        Ok(_) => Response::success(msg::altered(t), format!("{} altered.", label(t, name)))
            .flag_not_acted_on(settings),
        Err(e) => Response::failure(&what, &e),
    }
}

pub(crate) fn delete(engine: &mut Engine, t: ObjType, name: &str, purge: bool) -> Response {
    let what = format!("DELETE {}", label(t, name));
    match engine.queue_def(name) {
        None => return Response::failure(&what, &not_defined(t, name)),
        Some(d) if obj_type(&d.kind) != t => return Response::failure(&what, &wrong_type(d, t)),
        Some(_) => {}
    }
    match engine.delete_queue(name, purge) {
        Ok(_) => Response::success(msg::deleted(t), format!("{} deleted.", label(t, name))),
        Err(e) => Response::failure(&what, &e),
    }
}
