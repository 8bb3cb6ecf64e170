//! SET CHLAUTH, SET AUTHREC, DELETE AUTHREC, DISPLAY CHLAUTH, DISPLAY AUTHREC and DISPLAY
//! ENTAUTH against the engine's stored records. The queue manager enforces authority records
//! (`ferrymq_security::oam` decides); CHLAUTH records are stored, and their replies say they
//! are not enforced yet.

use std::collections::BTreeMap;

use ferrymq_engine::Engine;
use ferrymq_types::{mqerr, ObjectDef, ObjectKind, ObjectTimes, Reason};

use super::display::matches;
use super::object::time_value;
use super::{Response, ServerOps};
use ferrymq_mqsc::format::Field;
use ferrymq_mqsc::messages as msg;
use ferrymq_mqsc::security::{
    authlist, authrec_key, chlauth_key_is, AuthMatch, AuthRecFilter, AuthRecSet, ChlAuthAction,
    ChlAuthSet, EntAuthQuery, Entity,
};

pub(crate) fn set_chlauth(engine: &mut Engine, s: &ChlAuthSet, now_ms: u64) -> Response {
    let what = format!("SET CHLAUTH({}) TYPE({})", s.profile, s.type_);
    let key = s.key();
    let existing = engine.object(ObjectKind::ChlAuth, &key).cloned();
    let r = match s.action {
        ChlAuthAction::Add | ChlAuthAction::Replace => {
            if existing.is_some() && s.action == ChlAuthAction::Add {
                let e = mqerr!(
                    OBJECT_ALREADY_EXISTS,
                    "a TYPE({}) record for profile '{}' matching the same values already exists; use ACTION(REPLACE) to change it",
                    s.type_,
                    s.profile
                );
                return Response::failure(&what, &e);
            }
            let mut attrs: BTreeMap<String, String> = s.attrs.iter().cloned().collect();
            attrs.insert("CHLAUTH".into(), s.profile.clone());
            attrs.insert("TYPE".into(), s.type_.clone());
            let mut times = ObjectTimes::at(now_ms);
            if let Some(ex) = &existing {
                times.created_ms = ex.times.created_ms;
            }
            let def = ObjectDef {
                kind: ObjectKind::ChlAuth,
                name: key,
                attrs,
                times,
            };
            match engine.define_object(def, true) {
                Ok(_) => Response::success(
                    msg::CHLAUTH_SET,
                    format!(
                        "Channel authentication record {} for CHLAUTH({}) TYPE({}).",
                        if existing.is_some() {
                            "replaced"
                        } else {
                            "added"
                        },
                        s.profile,
                        s.type_
                    ),
                ),
                Err(e) => Response::failure(&what, &e),
            }
        }
        ChlAuthAction::Remove => {
            if existing.is_none() {
                let e = mqerr!(
                    UNKNOWN_OBJECT_NAME,
                    "no TYPE({}) record for profile '{}' matches the values given",
                    s.type_,
                    s.profile
                );
                return Response::failure(&what, &e);
            }
            match engine.delete_object(ObjectKind::ChlAuth, &key) {
                Ok(_) => Response::success(
                    msg::CHLAUTH_SET,
                    format!(
                        "Channel authentication record removed from CHLAUTH({}) TYPE({}).",
                        s.profile, s.type_
                    ),
                ),
                Err(e) => Response::failure(&what, &e),
            }
        }
        ChlAuthAction::RemoveAll => {
            let keys: Vec<String> = engine
                .objects()
                .filter(|o| {
                    o.kind == ObjectKind::ChlAuth && chlauth_key_is(&o.name, &s.profile, &s.type_)
                })
                .map(|o| o.name.clone())
                .collect();
            for k in &keys {
                if let Err(e) = engine.delete_object(ObjectKind::ChlAuth, k) {
                    return Response::failure(&what, &e);
                }
            }
            Response::success(
                msg::CHLAUTH_SET,
                format!(
                    "{} channel authentication record(s) removed from CHLAUTH({}) TYPE({}).",
                    keys.len(),
                    s.profile,
                    s.type_
                ),
            )
        }
    };
    r
}

/// The fields DISPLAY CHLAUTH shows for a record, in MQ's order.
pub(crate) fn chlauth_fields(o: &ObjectDef) -> Vec<Field> {
    let get = |k: &str| o.attrs.get(k).cloned();
    let mut out = vec![
        Field::new("CHLAUTH", get("CHLAUTH").unwrap_or_default()),
        Field::new("TYPE", get("TYPE").unwrap_or_default()),
    ];
    let blocking = get("TYPE").is_some_and(|t| t.starts_with("BLOCK"));
    for k in [
        "ADDRESS", "CLNTUSER", "SSLPEER", "SSLCERTI", "QMNAME", "USERLIST", "ADDRLIST",
    ] {
        if let Some(v) = get(k) {
            let v = if k.ends_with("LIST") {
                v.split(',')
                    .map(|x| format!("'{x}'"))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                v
            };
            out.push(Field::new(k, v));
        }
    }
    if !blocking {
        let src = get("USERSRC").unwrap_or_else(|| "MAP".into());
        out.push(Field::new("USERSRC", &src));
        if src == "MAP" {
            out.push(Field::new("MCAUSER", get("MCAUSER").unwrap_or_default()));
        }
        out.push(Field::new(
            "CHCKCLNT",
            get("CHCKCLNT").unwrap_or_else(|| "ASQMGR".into()),
        ));
    }
    out.push(Field::new("DESCR", get("DESCR").unwrap_or_default()));
    out.push(Field::new("CUSTOM", get("CUSTOM").unwrap_or_default()));
    out.push(Field::new(
        "WARN",
        get("WARN").unwrap_or_else(|| "NO".into()),
    ));
    for t in ["ALTDATE", "ALTTIME"] {
        out.push(Field::new(t, time_value(&o.times, t).unwrap_or_default()));
    }
    out
}

/// Whether a record passes DISPLAY CHLAUTH's ADDRESS, CLNTUSER and SSLPEER filters.
fn passes(o: &ObjectDef, f: &ferrymq_mqsc::security::ChlAuthFilter) -> bool {
    use ferrymq_security::chlauth;
    let get = |k: &str| o.attrs.get(k).map(String::as_str);
    let list = |k: &str| {
        get(k)
            .unwrap_or("")
            .split(',')
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    if let Some(a) = &f.address {
        let ip = chlauth::parse_ip(a);
        let holds = |p: &str| {
            p.eq_ignore_ascii_case(a) || ip.is_some_and(|ip| chlauth::address_matches(p, ip))
        };
        let ok = get("ADDRESS").is_some_and(holds) || list("ADDRLIST").iter().any(|p| holds(p));
        if !ok {
            return false;
        }
    }
    if let Some(u) = &f.clntuser {
        if get("CLNTUSER") != Some(u.as_str()) && !list("USERLIST").contains(u) {
            return false;
        }
    }
    if let Some(dn) = &f.sslpeer {
        if !get("SSLPEER").is_some_and(|p| p == dn || ferrymq_security::tls::dn_matches(p, dn)) {
            return false;
        }
    }
    true
}

pub(crate) fn display_chlauth(
    engine: &Engine,
    profile: &str,
    type_: Option<&str>,
    filter: &ferrymq_mqsc::security::ChlAuthFilter,
) -> Response {
    let mut shown: Vec<&ObjectDef> = engine
        .objects()
        .filter(|o| o.kind == ObjectKind::ChlAuth)
        .filter(|o| {
            let p = o.attrs.get("CHLAUTH").map(String::as_str).unwrap_or("");
            // A pattern matches profiles by prefix; a profile that is itself generic (APP.*)
            // is also found by its exact text. MATCH(EXACT) takes the text only; MATCH(ALL)
            // also the generic profiles that would apply to the name.
            let by_profile = if filter.exact {
                profile == p
            } else {
                matches(profile, p)
                    || profile == p
                    || (filter.all && ferrymq_security::chlauth::profile_matches(p, profile))
            };
            by_profile
                && type_.is_none_or(|t| o.attrs.get("TYPE").map(String::as_str) == Some(t))
                && passes(o, filter)
        })
        .collect();
    shown.sort_by(|a, b| (a.attrs.get("CHLAUTH"), &a.name).cmp(&(b.attrs.get("CHLAUTH"), &b.name)));
    if shown.is_empty() {
        let filtered = *filter != ferrymq_mqsc::security::ChlAuthFilter::default();
        if !profile.ends_with('*') && !filtered {
            let e = mqerr!(
                UNKNOWN_OBJECT_NAME,
                "no channel authentication record has profile '{profile}'"
            );
            return Response::failure(&format!("DISPLAY CHLAUTH({profile})"), &e);
        }
        return Response::success(
            msg::NO_MATCH,
            format!("No channel authentication records matched CHLAUTH({profile})."),
        );
    }
    let mut r = Response::success(msg::CHLAUTH_DETAILS, "");
    r.text.clear();
    for o in shown {
        r.push_object(
            format!(
                "{}: Display channel authentication record details.",
                msg::CHLAUTH_DETAILS
            ),
            chlauth_fields(o),
        );
    }
    r
}

/// Every stored authority record, as the authority checks read them.
pub fn authority_records(engine: &Engine) -> Vec<ferrymq_security::oam::Record> {
    use ferrymq_security::oam;
    engine
        .objects()
        .filter(|o| o.kind == ObjectKind::AuthRec)
        .map(|o| {
            let (objtype, profile, e) = authrec_identity(o);
            oam::Record {
                objtype,
                profile,
                entity: match e {
                    Entity::Principal(n) => oam::Entity::Principal(n),
                    Entity::Group(n) => oam::Entity::Group(n),
                },
                auths: oam::Authorities::from_authlist(
                    o.attrs.get("AUTHLIST").map(String::as_str).unwrap_or(""),
                ),
            }
        })
        .collect()
}

/// DISPLAY CHLAUTH(channel) MATCH(RUNCHECK): the record that would decide a connection attempt,
/// shown as DISPLAY CHLAUTH shows records, or a message that none applies.
pub(crate) fn runcheck_chlauth(
    engine: &Engine,
    channel: &str,
    rc: &ferrymq_mqsc::security::RunCheck,
) -> Response {
    use ferrymq_security::chlauth;
    let stored: Vec<&ObjectDef> = engine
        .objects()
        .filter(|o| o.kind == ObjectKind::ChlAuth)
        .collect();
    let rules: Vec<chlauth::Rule> = stored
        .iter()
        .filter_map(|o| chlauth::Rule::from_attrs(&o.attrs))
        .collect();
    let attempt = chlauth::Attempt {
        channel,
        address: &rc.address,
        client_user: &rc.clntuser,
        cert_dn: rc.sslpeer.as_deref(),
        remote_qmgr: None,
    };
    let admin = |u: &str| u == "mqm" || u == "root";
    let Some(rule) = chlauth::runcheck(&rules, &attempt, ferrymq_security::tls::dn_matches, &admin)
    else {
        return Response::success(
            msg::NO_MATCH,
            format!(
                "No channel authentication record applies to channel '{channel}' from address '{}'{}.",
                rc.address,
                if rc.clntuser.is_empty() {
                    String::new()
                } else {
                    format!(" for client user '{}'", rc.clntuser)
                }
            ),
        );
    };
    let Some(o) = stored
        .iter()
        .find(|o| chlauth::Rule::from_attrs(&o.attrs).as_ref() == Some(rule))
    else {
        return Response::success(msg::NO_MATCH, rule.describe());
    };
    let mut r = Response::success(msg::CHLAUTH_DETAILS, "");
    r.text.clear();
    r.push_object(
        format!(
            "{}: Display channel authentication record details.",
            msg::CHLAUTH_DETAILS
        ),
        chlauth_fields(o),
    );
    r
}

/// An authority record's identity from its stored attributes.
fn authrec_identity(o: &ObjectDef) -> (String, String, Entity) {
    let get = |k: &str| o.attrs.get(k).cloned().unwrap_or_default();
    let entity = if get("ENTTYPE") == "GROUP" {
        Entity::Group(get("ENTITY"))
    } else {
        Entity::Principal(get("ENTITY"))
    };
    (get("OBJTYPE"), get("PROFILE"), entity)
}

fn authorities(o: &ObjectDef) -> Vec<String> {
    o.attrs
        .get("AUTHLIST")
        .filter(|l| l.as_str() != "NONE" && !l.is_empty())
        .map(|l| l.split(',').map(String::from).collect())
        .unwrap_or_default()
}

pub(crate) fn set_authrec(engine: &mut Engine, s: &AuthRecSet, now_ms: u64) -> Response {
    let what = "SET AUTHREC";
    let key = authrec_key(&s.objtype, &s.profile, &s.entity);
    let existing = engine.object(ObjectKind::AuthRec, &key).cloned();
    let mut auths = existing.as_ref().map(authorities).unwrap_or_default();
    auths.retain(|a| !s.remove.contains(a));
    for a in &s.add {
        if !auths.contains(a) {
            auths.push(a.clone());
        }
    }
    // Keep the canonical order the parser gives (add is already in it).
    let order: Vec<String> = ferrymq_mqsc::security::AUTHREC_ORDER
        .iter()
        .map(|a| a.to_string())
        .collect();
    auths.sort_by_key(|a| order.iter().position(|o| o == a));
    let attrs = BTreeMap::from([
        ("PROFILE".to_string(), s.profile.clone()),
        ("OBJTYPE".to_string(), s.objtype.clone()),
        ("ENTITY".to_string(), s.entity.name().to_string()),
        ("ENTTYPE".to_string(), s.entity.kind().to_string()),
        ("AUTHLIST".to_string(), authlist(&auths)),
    ]);
    let mut times = ObjectTimes::at(now_ms);
    if let Some(ex) = &existing {
        times.created_ms = ex.times.created_ms;
    }
    let def = ObjectDef {
        kind: ObjectKind::AuthRec,
        name: key,
        attrs,
        times,
    };
    let r = match engine.define_object(def, true) {
        Ok(_) => Response::success(
            msg::AUTHREC_SET,
            format!(
                "Authority record set: {} '{}' has AUTHLIST({}) on {}.",
                s.entity.kind(),
                s.entity.name(),
                authlist(&auths),
                if s.profile.is_empty() {
                    "this queue manager".to_string()
                } else {
                    format!("OBJTYPE({}) PROFILE({})", s.objtype, s.profile)
                }
            ),
        ),
        Err(e) => Response::failure(what, &e),
    };
    r
}

fn selected<'e>(engine: &'e Engine, f: &AuthRecFilter) -> Vec<&'e ObjectDef> {
    engine
        .objects()
        .filter(|o| o.kind == ObjectKind::AuthRec)
        .filter(|o| {
            let (t, p, e) = authrec_identity(o);
            f.selects(&t, &p, &e)
        })
        .collect()
}

pub(crate) fn delete_authrec(engine: &mut Engine, f: &AuthRecFilter) -> Response {
    let keys: Vec<String> = selected(engine, f)
        .into_iter()
        .map(|o| o.name.clone())
        .collect();
    if keys.is_empty() {
        let e = mqerr!(
            UNKNOWN_OBJECT_NAME,
            "no authority record matches PROFILE({}) OBJTYPE({}){}",
            f.profile.as_deref().unwrap_or(""),
            f.objtype.as_deref().unwrap_or(""),
            f.entity
                .as_ref()
                .map(|e| format!(" {}({})", e.kind(), e.name()))
                .unwrap_or_default()
        );
        return Response::failure("DELETE AUTHREC", &e);
    }
    for k in &keys {
        if let Err(e) = engine.delete_object(ObjectKind::AuthRec, k) {
            return Response::failure("DELETE AUTHREC", &e);
        }
    }
    Response::success(
        msg::AUTHREC_DELETED,
        format!("{} authority record(s) deleted.", keys.len()),
    )
}

/// The fields DISPLAY AUTHREC shows for a record; OBJTYPE(QMGR) records show the queue
/// manager's name as their profile.
pub(crate) fn authrec_fields(o: &ObjectDef, qmgr: &str) -> Vec<Field> {
    let (t, p, e) = authrec_identity(o);
    vec![
        Field::new("PROFILE", if t == "QMGR" { qmgr.to_string() } else { p }),
        Field::new("ENTITY", e.name()),
        Field::new("ENTTYPE", e.kind()),
        Field::new("OBJTYPE", t),
        Field::new(
            "AUTHLIST",
            o.attrs.get("AUTHLIST").cloned().unwrap_or_default(),
        ),
    ]
}

/// The records DISPLAY AUTHREC shows, by its MATCH: EXACT as DELETE selects; PROFILE also the
/// generic profiles that cover the PROFILE named; MEMBERSHIP also the records of the groups
/// the PRINCIPAL is in.
fn displayed<'e>(engine: &'e Engine, f: &AuthRecFilter, ops: &dyn ServerOps) -> Vec<&'e ObjectDef> {
    if f.match_ == AuthMatch::Exact {
        return selected(engine, f);
    }
    let groups: Vec<String> = match (&f.entity, f.match_) {
        (Some(Entity::Principal(u)), AuthMatch::Membership) => ops.principal(u).0,
        _ => Vec::new(),
    };
    engine
        .objects()
        .filter(|o| o.kind == ObjectKind::AuthRec)
        .filter(|o| {
            let (t, p, e) = authrec_identity(o);
            f.objtype.as_deref().is_none_or(|x| x == t)
                && f.profile
                    .as_deref()
                    .is_none_or(|x| x == p || ferrymq_security::oam::matches(&p, x))
                && f.entity
                    .as_ref()
                    .is_none_or(|x| *x == e || matches!(&e, Entity::Group(g) if groups.contains(g)))
        })
        .collect()
}

pub(crate) fn display_authrec(engine: &Engine, f: &AuthRecFilter, ops: &dyn ServerOps) -> Response {
    let mut shown = displayed(engine, f, ops);
    shown.sort_by_key(|o| {
        let (t, p, e) = authrec_identity(o);
        (t, p, e.kind(), e.name().to_string())
    });
    if shown.is_empty() {
        return Response::success(msg::NO_MATCH, "No authority records matched.");
    }
    let mut r = Response::success(msg::AUTHREC_DETAILS, "");
    r.text.clear();
    for o in shown {
        r.push_object(
            format!(
                "{}: Display authority record details.",
                msg::AUTHREC_DETAILS
            ),
            authrec_fields(o, engine.qmgr_name()),
        );
    }
    r.reason = Reason::NONE;
    r
}

/// DISPLAY ENTAUTH: what the entity holds on the object, from its records (a principal's
/// combined with its groups'), or everything for the queue manager's administrators.
pub(crate) fn display_entauth(engine: &Engine, q: &EntAuthQuery, ops: &dyn ServerOps) -> Response {
    use ferrymq_security::oam::{Authorities, Oam, Principal};
    let (principal, admin) = match &q.entity {
        Entity::Principal(u) => {
            let (groups, admin) = ops.principal(u);
            (
                Principal {
                    user: u.clone(),
                    groups,
                },
                admin,
            )
        }
        Entity::Group(g) => (
            Principal {
                // No principal record can be named by an empty user.
                user: String::new(),
                groups: vec![g.clone()],
            },
            ops.is_admin_group(g),
        ),
    };
    let objname = if q.objtype == "QMGR" {
        engine.qmgr_name().to_string()
    } else {
        q.objname.clone()
    };
    let eff = Oam::build(authority_records(engine)).effective(&principal, &q.objtype, &objname);
    let auths = if admin { Authorities::ALL } else { eff.auths };
    let mut r = Response::success(msg::ENTAUTH_DETAILS, "");
    r.text.clear();
    r.push_object(
        format!(
            "{}: Display entity authority details.",
            msg::ENTAUTH_DETAILS
        ),
        vec![
            Field::new("OBJNAME", &objname),
            Field::new("ENTITY", q.entity.name()),
            Field::new("ENTTYPE", q.entity.kind()),
            Field::new("OBJTYPE", &q.objtype),
            Field::new("AUTHLIST", auths.to_string()),
        ],
    );
    if admin {
        r.text.push_str(&format!(
            "\n{}: {} '{}' is the queue manager's own user or in its administrators' group (qm.ini Security:AdminGroup): it holds every authority whatever the records say.",
            msg::ENTAUTH_DETAILS,
            q.entity.kind(),
            q.entity.name()
        ));
    } else if eff.consulted.is_empty() {
        r.text.push_str(&format!(
            "\n{}: no authority record of the entity{} matches the object.",
            msg::ENTAUTH_DETAILS,
            if principal.groups.is_empty() {
                String::new()
            } else {
                format!(" or its groups ({})", principal.groups.join(", "))
            }
        ));
    } else {
        for c in &eff.consulted {
            r.text
                .push_str(&format!("\n{}: from {c}", msg::ENTAUTH_DETAILS));
        }
    }
    r
}
