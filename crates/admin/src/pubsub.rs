//! DEFINE SUB, DELETE SUB and the publish/subscribe DISPLAYs (SUB, SBSTATUS, TPSTATUS, PUBSUB).
//! The engine makes and removes subscriptions; this module words the responses and rows.

use std::collections::BTreeSet;

use ferrymq_engine::pubsub::{tree, SubStatus, RETAINED_QUEUE, TOPIC_PROPERTY};
use ferrymq_engine::Engine;
use ferrymq_mqsc::format::{mq_date, mq_time, Field};
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::DisplayWhat;
use ferrymq_types::{mqerr, ObjectKind, PropertyValue};

use crate::display::{is_generic, matches, Obj};
use crate::Response;

pub(crate) fn define(
    engine: &mut Engine,
    name: &str,
    attrs: &[(String, String)],
    replace: bool,
    now_ms: u64,
) -> Response {
    match engine.define_sub(name, attrs, replace, now_ms) {
        Ok(_) => Response::success(msg::SUB_DEFINED, format!("SUB({name}) defined.")),
        Err(e) => Response::failure(&format!("DEFINE SUB({name})"), &e),
    }
}

pub(crate) fn delete(engine: &mut Engine, name: &str) -> Response {
    match engine.delete_sub(name) {
        Ok(_) => Response::success(msg::SUB_DELETED, format!("SUB({name}) deleted.")),
        Err(e) => Response::failure(&format!("DELETE SUB({name})"), &e),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

fn sub_fields(s: &SubStatus) -> Vec<Field> {
    let sub = &s.sub;
    vec![
        Field::new("SUB", &sub.name),
        Field::new("SUBID", sub.id_hex()),
        Field::new("TOPICSTR", &sub.topic),
        Field::new("TOPICOBJ", &sub.topic_obj),
        Field::new("DEST", &sub.dest),
        Field::new("DESTQMGR", &sub.dest_qmgr),
        Field::new("DESTCLAS", if sub.managed { "MANAGED" } else { "PROVIDED" }),
        Field::new("DURABLE", yes_no(sub.durable)),
        Field::new("SELECTOR", &sub.selector_text),
        Field::new("EXPIRY", sub.expiry_text()),
        Field::new("REQONLY", yes_no(sub.on_request)),
        Field::new("SUBTYPE", if sub.admin { "ADMIN" } else { "API" }),
        Field::new("SUBUSER", &sub.user),
        Field::new("USERDATA", &sub.user_data),
        Field::new("WSCHEMA", if sub.char_wildcards { "CHAR" } else { "TOPIC" }),
        Field::new(
            "DESTCORL",
            sub.correl_id
                .as_ref()
                .map_or(String::new(), ferrymq_engine::pubsub::sub::correl_id_hex),
        ),
        Field::new("CRDATE", mq_date(sub.created_ms)),
        Field::new("CRTIME", mq_time(sub.created_ms)),
        Field::new("ALTDATE", mq_date(sub.altered_ms)),
        Field::new("ALTTIME", mq_time(sub.altered_ms)),
    ]
}

/// The rows of DISPLAY SUB, SBSTATUS, TPSTATUS and PUBSUB.
pub(crate) fn rows(
    engine: &mut Engine,
    what: DisplayWhat,
    name: &str,
    type_: Option<&str>,
) -> Result<(&'static str, Vec<Obj>), Response> {
    match what {
        DisplayWhat::Sub | DisplayWhat::SbStatus => {
            let mut objs = Vec::new();
            for s in engine.subscriptions() {
                if !matches(name, &s.sub.name) {
                    continue;
                }
                if what == DisplayWhat::Sub {
                    objs.push(Obj::new(
                        format!("{}: Display subscription details.", msg::SUB_DETAILS),
                        sub_fields(&s),
                        2,
                    ));
                } else {
                    let depth = engine.queue_status(&s.sub.dest).map_or(0, |q| q.cur_depth);
                    let mut o = Obj::new(
                        format!(
                            "{}: Display subscription status details.",
                            msg::SBSTATUS_DETAILS
                        ),
                        vec![
                            Field::new("SUB", &s.sub.name),
                            Field::new("SUBID", s.sub.id_hex()),
                            Field::new("DURABLE", yes_no(s.sub.durable)),
                            Field::new("SUBTYPE", if s.sub.admin { "ADMIN" } else { "API" }),
                            Field::new(
                                "ACTCONN",
                                s.conn.map_or(String::new(), |c| format!("{c:016X}")),
                            ),
                            Field::new("DEST", &s.sub.dest),
                            Field::new("CURDEPTH", depth.to_string()),
                            Field::new("NUMMSGS", s.delivered.messages.to_string()),
                            Field::new("LMSGDATE", mq_date(s.delivered.last_ms)),
                            Field::new("LMSGTIME", mq_time(s.delivered.last_ms)),
                        ],
                        2,
                    );
                    o.default_all = true;
                    objs.push(o);
                }
            }
            if objs.is_empty() && !is_generic(name) {
                let e = mqerr!(UNKNOWN_OBJECT_NAME, "subscription '{name}' is not defined");
                return Err(Response::failure(
                    &format!("DISPLAY {}({name})", what.keyword()),
                    &e,
                ));
            }
            let id = if what == DisplayWhat::Sub {
                msg::SUB_DETAILS
            } else {
                msg::SBSTATUS_DETAILS
            };
            Ok((id, objs))
        }
        DisplayWhat::TpStatus => {
            // A topic string, or every topic string the queue manager knows of (topic
            // objects, subscriptions without wildcards, retained publications) for '#' or a
            // pattern ending in '*'.
            let topics: Vec<String> = if name == "#" || is_generic(name) {
                let mut known = BTreeSet::new();
                for o in engine.objects().filter(|o| o.kind == ObjectKind::Topic) {
                    if let Some(t) = o.attrs.get("TOPICSTR").filter(|t| !t.is_empty()) {
                        known.insert(t.clone());
                    }
                }
                for s in engine.subscriptions() {
                    if !tree::has_wildcard(&s.sub.topic) {
                        known.insert(s.sub.topic.clone());
                    }
                }
                known.extend(retained_topics(engine));
                known
                    .into_iter()
                    .filter(|t| name == "#" || matches(name, t))
                    .collect()
            } else {
                vec![name.to_string()]
            };
            let mut objs = Vec::new();
            if type_ == Some("SUB") || type_ == Some("PUB") {
                for t in &topics {
                    objs.extend(if type_ == Some("SUB") {
                        topic_subs(engine, t)
                    } else {
                        topic_pubs(engine, t)
                    });
                }
                return Ok((msg::TPSTATUS_DETAILS, objs));
            }
            for t in topics {
                let st = engine.topic_status(&t);
                // The attributes in force at the topic string, ASPARENT resolved.
                let a = engine.topic_attrs(&t);
                let enabled = |b: bool| if b { "ENABLED" } else { "DISABLED" };
                let mut o = Obj::new(
                    format!("{}: Display topic status details.", msg::TPSTATUS_DETAILS),
                    vec![
                        Field::new("TOPICSTR", &st.topic),
                        Field::new("ADMIN", &st.object),
                        Field::new("PUBCOUNT", st.publishers.to_string()),
                        Field::new("SUBCOUNT", st.subscribers.to_string()),
                        Field::new("RETAINED", yes_no(st.retained)),
                        Field::new(
                            "DEFPRESP",
                            if a.async_put_default { "ASYNC" } else { "SYNC" },
                        ),
                        Field::new("DEFPSIST", yes_no(a.def_persistent)),
                        Field::new("DEFPRTY", a.def_priority.to_string()),
                        Field::new("DURSUB", yes_no(a.durable_subs)),
                        Field::new("PUB", enabled(a.publish)),
                        Field::new("SUB", enabled(a.subscribe)),
                        Field::new("PMSGDLV", delivery(a.pmsgdlv)),
                        Field::new("NPMSGDLV", delivery(a.npmsgdlv)),
                        Field::new("MDURMDL", &a.mdurmdl),
                        Field::new("MNDURMDL", &a.mndurmdl),
                    ],
                    1,
                );
                o.default_all = true;
                objs.push(o);
            }
            Ok((msg::TPSTATUS_DETAILS, objs))
        }
        _ => {
            let subs = engine.subscriptions();
            let durable = subs.iter().filter(|s| s.sub.durable).count();
            let retained = retained_topics(engine).len();
            let mut o = Obj::new(
                format!("{}: Display pub/sub status details.", msg::PUBSUB_DETAILS),
                vec![
                    Field::new("TYPE", "LOCAL"),
                    Field::new("STATUS", "ACTIVE"),
                    Field::new("SUBCOUNT", subs.len().to_string()),
                    Field::new("DURSUBS", durable.to_string()),
                    Field::new("NDURSUBS", (subs.len() - durable).to_string()),
                    Field::new("RETAINED", retained.to_string()),
                ],
                1,
            );
            o.default_all = true;
            Ok((msg::PUBSUB_DETAILS, vec![o]))
        }
    }
}

fn delivery(d: ferrymq_engine::pubsub::Delivery) -> &'static str {
    use ferrymq_engine::pubsub::Delivery;
    match d {
        Delivery::All => "ALL",
        Delivery::AllDur => "ALLDUR",
        Delivery::AllAvail => "ALLAVAIL",
    }
}

/// The topic strings that have a retained publication.
fn retained_topics(engine: &Engine) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Some(q) = engine.local_queues().find(|q| q.def.name == RETAINED_QUEUE) {
        for (_, e) in q.iter() {
            if let Some(PropertyValue::String(t)) = e.msg.props().get(TOPIC_PROPERTY) {
                out.insert(t.clone());
            }
        }
    }
    out
}

/// DISPLAY TPSTATUS TYPE(SUB): one row per subscription a publication on `topic` reaches.
fn topic_subs(engine: &mut Engine, topic: &str) -> Vec<Obj> {
    engine
        .subscriptions()
        .into_iter()
        .filter(|s| s.sub.matches(topic))
        .map(|s| {
            let mut o = Obj::new(
                format!("{}: Display topic status details.", msg::TPSTATUS_DETAILS),
                vec![
                    Field::new("TOPICSTR", topic),
                    Field::new("SUBID", s.sub.id_hex()),
                    Field::new("SUBUSER", &s.sub.user),
                    Field::new(
                        "ACTCONN",
                        s.conn.map_or(String::new(), |c| format!("{c:016X}")),
                    ),
                    Field::new("DURABLE", yes_no(s.sub.durable)),
                    Field::new("SUBTYPE", if s.sub.admin { "ADMIN" } else { "API" }),
                    Field::new("NUMMSGS", s.delivered.messages.to_string()),
                    Field::new("LMSGDATE", mq_date(s.delivered.last_ms)),
                    Field::new("LMSGTIME", mq_time(s.delivered.last_ms)),
                ],
                1,
            );
            o.default_all = true;
            o
        })
        .collect()
}

/// DISPLAY TPSTATUS TYPE(PUB): one row per handle open for publishing on `topic`.
fn topic_pubs(engine: &mut Engine, topic: &str) -> Vec<Obj> {
    engine
        .topic_publishers(topic)
        .into_iter()
        .map(|p| {
            let mut o = Obj::new(
                format!("{}: Display topic status details.", msg::TPSTATUS_DETAILS),
                vec![
                    Field::new("TOPICSTR", topic),
                    Field::new("ACTCONN", format!("{:016X}", p.conn)),
                    Field::new("PUBAPPTAG", p.app),
                    Field::new("NUMPUBS", p.publications.to_string()),
                    Field::new("LPUBDATE", mq_date(p.last_publication_ms)),
                    Field::new("LPUBTIME", mq_time(p.last_publication_ms)),
                ],
                1,
            );
            o.default_all = true;
            o
        })
        .collect()
}
