//! DEFINE, ALTER and DELETE of channels, listeners and authentication information, and ALTER
//! QMGR. These objects keep their attributes as MQSC keyword/value pairs; the tables supply what
//! DISPLAY shows for an attribute never set.

use std::collections::BTreeMap;

use ferrymq_engine::Engine;
use ferrymq_types::{mqerr, MqError, ObjectDef, ObjectKind, ObjectTimes, QmgrAttrs};

use super::Response;
use ferrymq_mqsc::attrs::{self, AttrSpec, ValueKind, QMGR};
use ferrymq_mqsc::format::{mq_date, mq_time, Field};
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::{ObjType, Setting};

pub(crate) fn object_kind(t: ObjType) -> ObjectKind {
    match t {
        ObjType::Channel => ObjectKind::Channel,
        ObjType::Listener => ObjectKind::Listener,
        ObjType::Topic => ObjectKind::Topic,
        _ => ObjectKind::AuthInfo,
    }
}

pub(crate) fn obj_type(k: ObjectKind) -> ObjType {
    match k {
        ObjectKind::Channel => ObjType::Channel,
        ObjectKind::Listener => ObjType::Listener,
        ObjectKind::AuthInfo => ObjType::AuthInfo,
        ObjectKind::Topic => ObjType::Topic,
        ObjectKind::ChlAuth | ObjectKind::AuthRec => {
            unreachable!("security records are set with SET and shown by their own DISPLAY")
        }
        ObjectKind::Sub => unreachable!("subscriptions are shown by DISPLAY SUB"),
    }
}

/// The keyword that says what sort of channel or authinfo an object is.
fn subtype_key(t: ObjType) -> Option<&'static str> {
    match t {
        ObjType::Channel => Some("CHLTYPE"),
        ObjType::AuthInfo => Some("AUTHTYPE"),
        _ => None,
    }
}

fn label(t: ObjType, name: &str) -> String {
    format!("{}({name})", t.keyword())
}

pub(crate) fn not_defined(t: ObjType, name: &str) -> MqError {
    mqerr!(UNKNOWN_OBJECT_NAME, "{} is not defined", label(t, name))
}

/// What DISPLAY shows for `spec`: the stored value, or the table's default.
fn effective(attrs: &BTreeMap<String, String>, spec: &AttrSpec) -> String {
    attrs
        .get(spec.name)
        .cloned()
        .unwrap_or_else(|| spec.default.to_string())
}

fn subtype_of(def: &ObjectDef) -> Option<String> {
    subtype_key(obj_type(def.kind)).and_then(|k| def.attrs.get(k).cloned())
}

/// The default object MQ copies new objects of this type (and subtype) from.
fn default_object(t: ObjType, sub: Option<&str>) -> Option<String> {
    let channel = |c: &str| match c {
        "SVRCONN" => Some("SYSTEM.DEF.SVRCONN"),
        "CLNTCONN" => Some("SYSTEM.DEF.CLNTCONN"),
        "SDR" => Some("SYSTEM.DEF.SENDER"),
        "SVR" => Some("SYSTEM.DEF.SERVER"),
        "RCVR" => Some("SYSTEM.DEF.RECEIVER"),
        "RQSTR" => Some("SYSTEM.DEF.REQUESTER"),
        _ => None,
    };
    match (t, sub) {
        (ObjType::Listener, _) => Some("SYSTEM.DEFAULT.LISTENER.TCP".into()),
        (ObjType::Topic, _) => Some("SYSTEM.DEFAULT.TOPIC".into()),
        (ObjType::Channel, Some(c)) => channel(c).map(String::from),
        (ObjType::AuthInfo, Some(a)) => Some(format!("SYSTEM.DEFAULT.AUTHINFO.{a}")),
        _ => None,
    }
}

/// Every attribute of an object in display order: its name, its table (the attributes of its
/// subtype), then anything stored that the table does not know.
pub(crate) fn fields(def: &ObjectDef) -> Vec<Field> {
    let t = obj_type(def.kind);
    let table = attrs::table(t);
    let sub = subtype_of(def);
    let mut out = vec![Field::new(t.keyword(), &def.name)];
    for spec in table {
        if let Some(v) = time_value(&def.times, spec.name) {
            out.push(Field::new(spec.name, v));
        } else if sub.as_deref().is_none_or(|s| spec.applies_to(s)) {
            out.push(Field {
                name: spec.name.to_string(),
                value: effective(&def.attrs, spec),
                bare: matches!(spec.kind, ValueKind::Switch { .. }),
            });
        }
    }
    for (k, v) in &def.attrs {
        if !table.iter().any(|s| s.name == k) {
            out.push(Field::new(k, v));
        }
    }
    out
}

/// CRDATE, CRTIME, ALTDATE or ALTTIME in MQ's formats; None for any other attribute.
pub(crate) fn time_value(times: &ObjectTimes, name: &str) -> Option<String> {
    Some(match name {
        "CRDATE" => mq_date(times.created_ms),
        "CRTIME" => mq_time(times.created_ms),
        "ALTDATE" => mq_date(times.altered_ms),
        "ALTTIME" => mq_time(times.altered_ms),
        _ => return None,
    })
}

fn subtype_setting(t: ObjType, settings: &[Setting]) -> Option<&str> {
    let key = subtype_key(t)?;
    settings
        .iter()
        .find(|s| s.attr.name == key)
        .map(|s| s.value.as_str())
}

fn type_mismatch(t: ObjType, name: &str, key: &str, have: &str, asked: &str) -> MqError {
    mqerr!(
        OBJECT_TYPE_ERROR,
        "{} has {key}({have}), not {key}({asked}); the type of an object cannot change",
        label(t, name)
    )
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
    let kind = object_kind(t);
    let sub = subtype_setting(t, settings);
    let key = subtype_key(t).unwrap_or("");
    let mut attrs = match like {
        Some(l) => match engine.object(kind, l) {
            None => return Response::failure(&what, &not_defined(t, l)),
            Some(d) => {
                if let (Some(have), Some(asked)) = (subtype_of(d), sub) {
                    if have != asked {
                        return Response::failure(&what, &type_mismatch(t, l, key, &have, asked));
                    }
                }
                d.attrs.clone()
            }
        },
        // The default object counts only if it is of the subtype asked for.
        None => default_object(t, sub)
            .and_then(|n| engine.object(kind, &n))
            .filter(|d| subtype_of(d).as_deref() == sub)
            .map(|d| d.attrs.clone())
            .unwrap_or_default(),
    };
    for s in settings {
        attrs.insert(s.attr.name.to_string(), s.value.clone());
    }
    if t == ObjType::Topic {
        if let Err(e) = topic_string_rules(engine, name, &attrs, settings, false) {
            return Response::failure(&what, &e);
        }
    }
    let mut def = ObjectDef {
        kind,
        name: name.to_string(),
        attrs,
        times: ObjectTimes::at(now_ms),
    };
    let existing = engine.object(kind, name).cloned();
    if let Some(ex) = &existing {
        // A replaced object keeps its creation time; the replacement is its latest alteration.
        def.times.created_ms = ex.times.created_ms;
    }
    if let Some(ex) = &existing {
        if let (Some(have), Some(asked)) = (subtype_of(ex), sub) {
            if have != asked {
                return Response::failure(&what, &type_mismatch(t, name, key, &have, asked));
            }
        }
        if !replace {
            // As for queues: a DEFINE that asks for nothing the object lacks is not an error.
            let same = match like {
                Some(_) => ex.attrs == def.attrs,
                None => settings
                    .iter()
                    .all(|s| effective(&ex.attrs, s.attr) == s.value),
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
    }
    match engine.define_object(def, replace) {
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
    let Some(mut def) = engine.object(object_kind(t), name).cloned() else {
        return Response::failure(&what, &not_defined(t, name));
    };
    def.times.altered_ms = now_ms;
    let key = subtype_key(t).unwrap_or("");
    let have = subtype_of(&def);
    if let (Some(have), Some(asked)) = (&have, subtype_setting(t, settings)) {
        if have != asked {
            return Response::failure(&what, &type_mismatch(t, name, key, have, asked));
        }
    }
    // The parser checked attributes against the type the command named; when it named none
    // (ALTER AUTHINFO without AUTHTYPE), check them against the object's own type here.
    if let Some(have) = &have {
        if let Some(s) = settings.iter().find(|s| !s.attr.applies_to(have)) {
            let e = mqerr!(
                OBJECT_TYPE_ERROR,
                "{} is not an attribute of {key}({have}) objects",
                s.attr.name
            );
            return Response::failure(&what, &e);
        }
    }
    if t == ObjType::Topic {
        if let Err(e) = topic_string_rules(engine, name, &def.attrs, settings, true) {
            return Response::failure(&what, &e);
        }
    }
    for s in settings {
        def.attrs.insert(s.attr.name.to_string(), s.value.clone());
    }
    match engine.define_object(def, true) {
        Ok(_) => Response::success(msg::altered(t), format!("{} altered.", label(t, name)))
            .flag_not_acted_on(settings),
        Err(e) => Response::failure(&what, &e),
    }
}

/// A topic object's topic string is its identity: DEFINE must give one (only the queue
/// manager's own root objects have the empty string), no two topic objects share one, and ALTER
/// cannot change it (delete and define the object again). `attrs` are the object's attributes as
/// DEFINE would store them, or as they are before an ALTER.
fn topic_string_rules(
    engine: &Engine,
    name: &str,
    attrs: &BTreeMap<String, String>,
    settings: &[Setting],
    altering: bool,
) -> Result<(), MqError> {
    let current = attrs.get("TOPICSTR").map(String::as_str).unwrap_or("");
    if altering {
        if let Some(s) = settings.iter().find(|s| s.attr.name == "TOPICSTR") {
            if s.value != current {
                return Err(mqerr!(
                    COMMAND_FAILED,
                    "TOPIC({name}) has TOPICSTR('{current}'); a topic object's topic string cannot be altered (delete the object and define it again)"
                ));
            }
        }
        return Ok(());
    }
    if current.is_empty() {
        return Err(mqerr!(
            COMMAND_FAILED,
            "DEFINE TOPIC({name}) needs a TOPICSTR: the topic string this object stands for (e.g. TOPICSTR('prices/fx'))"
        ));
    }
    if let Some(was) = engine
        .object(ObjectKind::Topic, name)
        .and_then(|o| o.attrs.get("TOPICSTR"))
        .filter(|was| was.as_str() != current)
    {
        return Err(mqerr!(
            COMMAND_FAILED,
            "TOPIC({name}) has TOPICSTR('{was}'); REPLACE cannot change a topic object's topic string (delete the object and define it again)"
        ));
    }
    if let Some(other) = engine.objects().find(|o| {
        o.kind == ObjectKind::Topic
            && o.name != name
            && o.attrs.get("TOPICSTR").map(String::as_str) == Some(current)
    }) {
        return Err(mqerr!(
            COMMAND_FAILED,
            "topic string '{current}' already belongs to TOPIC({}); each topic string has at most one topic object",
            other.name
        ));
    }
    Ok(())
}

pub(crate) fn delete(engine: &mut Engine, t: ObjType, name: &str) -> Response {
    let what = format!("DELETE {}", label(t, name));
    if engine.object(object_kind(t), name).is_none() {
        return Response::failure(&what, &not_defined(t, name));
    }
    match engine.delete_object(object_kind(t), name) {
        Ok(_) => Response::success(msg::deleted(t), format!("{} deleted.", label(t, name))),
        Err(e) => Response::failure(&what, &e),
    }
}

/// The queue manager's attributes in display order.
pub(crate) fn qmgr_fields(engine: &Engine) -> Vec<Field> {
    let a = engine.attrs();
    let mut out = Vec::new();
    for spec in QMGR {
        let v = match spec.name {
            "QMNAME" => engine.qmgr_name().to_string(),
            "DESCR" => a.description.clone(),
            "MAXMSGL" => a.max_msg_len.to_string(),
            "DEADQ" => a.dead_letter_queue.clone(),
            "MAXUMSGS" => a.max_uncommitted_msgs.to_string(),
            "QMID" => a.qmid.clone(),
            "CMDLEVEL" => attrs::CMDLEVEL.to_string(),
            n => time_value(&a.times, n).unwrap_or_else(|| effective(&a.other, spec)),
        };
        out.push(Field::new(spec.name, v));
    }
    for (k, v) in &a.other {
        if !QMGR.iter().any(|s| s.name == k) {
            out.push(Field::new(k, v));
        }
    }
    out
}

fn apply_qmgr(a: &mut QmgrAttrs, s: &Setting) {
    let n = || s.value.parse::<u32>().unwrap_or(0);
    match s.attr.name {
        "DESCR" => a.description = s.value.clone(),
        "MAXMSGL" => a.max_msg_len = n(),
        "DEADQ" => a.dead_letter_queue = s.value.clone(),
        "MAXUMSGS" => a.max_uncommitted_msgs = n(),
        _ => {
            a.other.insert(s.attr.name.to_string(), s.value.clone());
        }
    }
}

pub(crate) fn alter_qmgr(engine: &mut Engine, settings: &[Setting], now_ms: u64) -> Response {
    let mut a = engine.attrs().clone();
    a.times.altered_ms = now_ms;
    for s in settings {
        apply_qmgr(&mut a, s);
    }
    match engine.set_qmgr_attrs(a) {
        Ok(_) => Response::success(
            msg::QMGR_ALTERED,
            format!("Queue manager {} altered.", engine.qmgr_name()),
        )
        .flag_not_acted_on(settings),
        Err(e) => Response::failure("ALTER QMGR", &e),
    }
}
