//! MQSC command parsing: the verb, the object keyword and its name, then parameters in any order,
//! each checked against the object type's attribute table. Every error points at the token that
//! caused it, so runmqsc can show the administrator exactly where a script went wrong.

use crate::attrs::{self, lookup, lookup_any_queue, AttrSpec, QMGR};
use crate::command::{Command, DisplayWhat, ObjType, Requested, Setting, StopMode, SyntaxError};
use crate::lexer::{lex, Item};
use crate::security;
use crate::values::{conn_id, filter, object_name, setting, CHANNEL_NAME_LEN_MAX};
use ferrymq_types::limits::OBJECT_NAME_LEN_MAX;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Define,
    Alter,
    Delete,
    Display,
    Clear,
    Start,
    Stop,
    Refresh,
    End,
    Ping,
    Set,
    Resolve,
    Reset,
}

fn verb(word: &str) -> Option<Verb> {
    Some(match word {
        "DEFINE" | "DEF" => Verb::Define,
        "ALTER" | "ALT" => Verb::Alter,
        "DELETE" => Verb::Delete,
        "DISPLAY" | "DIS" => Verb::Display,
        "CLEAR" => Verb::Clear,
        "START" | "STA" => Verb::Start,
        "STOP" => Verb::Stop,
        "REFRESH" | "REF" => Verb::Refresh,
        "END" => Verb::End,
        "PING" => Verb::Ping,
        "SET" => Verb::Set,
        "RESOLVE" => Verb::Resolve,
        "RESET" => Verb::Reset,
        _ => return None,
    })
}

fn obj_type(word: &str) -> Option<ObjType> {
    Some(match word {
        "QLOCAL" | "QL" => ObjType::QLocal,
        "QALIAS" | "QA" => ObjType::QAlias,
        "QMODEL" | "QM" => ObjType::QModel,
        "QREMOTE" | "QR" => ObjType::QRemote,
        "CHANNEL" | "CHL" => ObjType::Channel,
        "LISTENER" | "LSTR" => ObjType::Listener,
        "AUTHINFO" => ObjType::AuthInfo,
        "TOPIC" => ObjType::Topic,
        _ => return None,
    })
}

/// MQ object keywords FerryMQ has no objects for yet, with the capability each belongs to: the
/// error says what is not built rather than "unknown".
const UNSUPPORTED_OBJECTS: &[(&str, &str)] = &[
    ("NAMELIST", "namelist support"),
    ("NL", "namelist support"),
    ("CLUSQMGR", "clustering"),
    ("PROCESS", "triggering (process definitions)"),
    ("PRO", "triggering (process definitions)"),
    ("SERVICE", "service object support"),
    ("SVSTATUS", "service object support"),
    ("COMMINFO", "multicast"),
];

/// The longest name an object of this type may have.
fn name_max(t: ObjType) -> usize {
    if t == ObjType::Channel {
        CHANNEL_NAME_LEN_MAX
    } else {
        OBJECT_NAME_LEN_MAX
    }
}

/// The most characters an MQSC command may have, joined from its lines (MQ's bound), so that
/// no command is larger than what every tool and queue manager is prepared to take.
pub const COMMAND_CHARS_MAX: usize = 32_762;

/// Parses one MQSC command (already joined from its continuation lines).
pub fn parse(text: &str) -> Result<Command, SyntaxError> {
    // Counting stops past the bound, so an enormous text costs no more than a long one.
    if text.chars().take(COMMAND_CHARS_MAX + 1).count() > COMMAND_CHARS_MAX {
        return Err(SyntaxError::new(
            format!(
                "the command is {} bytes long; an MQSC command has at most {COMMAND_CHARS_MAX} \
                 characters",
                text.len()
            ),
            COMMAND_CHARS_MAX,
            "",
        ));
    }
    let trimmed = text.trim_end();
    if let Some(c) = trimmed.chars().last().filter(|c| *c == '+' || *c == '-') {
        return Err(SyntaxError::new(
            format!("the command ends with the continuation character '{c}' but no line follows"),
            trimmed.chars().count() - 1,
            c.to_string(),
        ));
    }
    let items = lex(text)?;
    let end_col = trimmed.chars().count();
    let Some(first) = items.first() else {
        return Err(SyntaxError::new("the command is empty", 0, ""));
    };
    let Some(v) = verb(&first.word) else {
        return Err(SyntaxError::new(
            format!(
                "'{}' is not an MQSC command FerryMQ knows (DEFINE, ALTER, DELETE, DISPLAY, CLEAR, SET, START, STOP, REFRESH, PING, RESOLVE, RESET, END)",
                first.text
            ),
            first.col,
            &first.text,
        ));
    };
    if let Some(p) = &first.value {
        return Err(SyntaxError::new(
            format!("{} takes no value", first.word),
            p.open_col,
            "(",
        ));
    }
    if v == Verb::End {
        no_more(&items[1..])?;
        return Ok(Command::End);
    }
    let Some(obj) = items.get(1) else {
        return Err(SyntaxError::new(
            format!(
                "{} needs an object keyword, e.g. {} QLOCAL(name)",
                first.word, first.word
            ),
            end_col,
            "",
        ));
    };
    let rest = &items[2..];
    match v {
        Verb::Define if obj.word == "SUB" => crate::pubsub::define_sub(obj, rest),
        Verb::Delete if obj.word == "SUB" => crate::pubsub::delete_sub(obj, rest),
        Verb::Delete if obj.word == "AUTHREC" => {
            no_name(obj)?;
            Ok(Command::DeleteAuthRec(security::delete_authrec(rest)?))
        }
        Verb::Set => match obj.word.as_str() {
            "CHLAUTH" => Ok(Command::SetChlAuth(security::set_chlauth(obj, rest)?)),
            "AUTHREC" => {
                no_name(obj)?;
                Ok(Command::SetAuthRec(security::set_authrec(rest)?))
            }
            _ => Err(unknown_object(
                obj,
                "FerryMQ supports SET CHLAUTH and SET AUTHREC",
            )),
        },
        Verb::Display if obj.word == "CHLAUTH" => {
            let (profile, type_, runcheck, filter) = security::display_chlauth(obj, rest)?;
            Ok(Command::DisplayChlAuth {
                profile,
                type_,
                runcheck,
                filter,
            })
        }
        Verb::Display if obj.word == "ENTAUTH" => {
            no_name(obj)?;
            Ok(Command::DisplayEntAuth(security::display_entauth(rest)?))
        }
        Verb::Display if obj.word == "AUTHREC" => {
            no_name(obj)?;
            Ok(Command::DisplayAuthRec(security::display_authrec(rest)?))
        }
        Verb::Define | Verb::Alter | Verb::Delete | Verb::Clear => {
            if v == Verb::Alter && obj.word == "QMGR" {
                no_name(obj)?;
                return Ok(Command::AlterQmgr {
                    attrs: settings(rest, QMGR, None, "QMGR")?,
                });
            }
            let kind =
                match obj_type(&obj.word) {
                    Some(k) if v != Verb::Clear || k == ObjType::QLocal => k,
                    _ if v == Verb::Clear => {
                        return Err(unknown_object(obj, "CLEAR works on QLOCAL only"))
                    }
                    _ if obj.word == "QMGR" => return Err(unknown_object(
                        obj,
                        "the queue manager can be altered and displayed, not defined or deleted",
                    )),
                    _ => return Err(unknown_object(obj, "")),
                };
            let name = required_name(obj, kind)?;
            match v {
                Verb::Define => define(kind, name, obj, rest),
                Verb::Alter => alter(kind, name, obj, rest),
                Verb::Delete => delete(kind, name, rest),
                _ => {
                    no_more(rest)?;
                    Ok(Command::Clear { name })
                }
            }
        }
        Verb::Display => display(obj, rest),
        Verb::Start | Verb::Stop => {
            let kind = match obj_type(&obj.word) {
                Some(k @ (ObjType::Listener | ObjType::Channel)) => k,
                _ => {
                    return Err(unknown_object(
                        obj,
                        "START and STOP work on LISTENER and CHANNEL",
                    ))
                }
            };
            let name = required_name(obj, kind)?;
            if v == Verb::Stop && kind == ObjType::Channel {
                return stop_channel(name, rest);
            }
            let ignstate = ignstate(rest)?;
            Ok(match (v == Verb::Start, kind) {
                (true, ObjType::Listener) => Command::StartListener { name, ignstate },
                (false, ObjType::Listener) => Command::StopListener { name, ignstate },
                (true, _) => Command::StartChannel { name, ignstate },
                (false, _) => Command::StopChannel {
                    name,
                    ignstate,
                    mode: StopMode::Quiesce,
                    inactive: false,
                },
            })
        }
        Verb::Refresh => refresh(obj, rest),
        Verb::Ping => {
            if matches!(obj_type(&obj.word), Some(ObjType::Channel)) {
                let name = required_name(obj, ObjType::Channel)?;
                let mut datalen = 16u32;
                for item in rest {
                    let value = match (&item.word[..], &item.value) {
                        ("DATALEN", Some(p)) => crate::lexer::scalar(p)?,
                        _ => {
                            return Err(SyntaxError::new(
                                format!(
                                    "unexpected '{}': PING CHANNEL takes DATALEN(16-32768) only",
                                    item.text
                                ),
                                item.col,
                                &item.text,
                            ))
                        }
                    };
                    datalen = match value.value.parse::<u32>() {
                        Ok(n) if (16..=32768).contains(&n) => n,
                        _ => {
                            return Err(SyntaxError::new(
                                "DATALEN must be a number from 16 to 32768",
                                value.col,
                                value.written,
                            ))
                        }
                    };
                }
                return Ok(Command::PingChannel { name, datalen });
            }
            if obj.word != "QMGR" {
                return Err(unknown_object(obj, "PING works on QMGR and CHANNEL"));
            }
            no_name(obj)?;
            no_more(rest)?;
            Ok(Command::PingQmgr)
        }
        Verb::Resolve | Verb::Reset => {
            if obj_type(&obj.word) != Some(ObjType::Channel) {
                return Err(unknown_object(
                    obj,
                    "RESOLVE and RESET work on CHANNEL only",
                ));
            }
            let name = required_name(obj, ObjType::Channel)?;
            channel_action(v == Verb::Resolve, name, rest)
        }
        Verb::End => unreachable!("handled above"),
    }
}

/// RESOLVE CHANNEL's ACTION(COMMIT|BACKOUT) (required), RESET CHANNEL's SEQNUM(n) (default 1).
fn channel_action(resolve: bool, name: String, rest: &[Item]) -> Result<Command, SyntaxError> {
    let key = if resolve { "ACTION" } else { "SEQNUM" };
    let mut value: Option<(String, usize)> = None;
    for item in rest {
        if item.word != key {
            return Err(SyntaxError::new(
                format!("unexpected '{}': this command takes {key} only", item.text),
                item.col,
                &item.text,
            ));
        }
        if value.is_some() {
            return Err(twice(item));
        }
        let Some(p) = &item.value else {
            return Err(SyntaxError::new(
                format!("{key} needs a value"),
                item.col,
                &item.text,
            ));
        };
        let s = crate::lexer::scalar(p)?;
        value = Some((s.value.to_ascii_uppercase(), s.col));
    }
    if resolve {
        let Some((v, col)) = value else {
            return Err(SyntaxError::new(
                "RESOLVE CHANNEL needs ACTION(COMMIT) or ACTION(BACKOUT)",
                0,
                "",
            ));
        };
        let commit = match v.as_str() {
            "COMMIT" => true,
            "BACKOUT" => false,
            _ => {
                return Err(SyntaxError::new(
                    "ACTION must be COMMIT or BACKOUT",
                    col,
                    &v,
                ))
            }
        };
        return Ok(Command::ResolveChannel { name, commit });
    }
    let seqnum = match value {
        None => 1,
        Some((v, col)) => match v.parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(SyntaxError::new(
                    "SEQNUM must be a number from 1 to 999999999",
                    col,
                    &v,
                ))
            }
        },
    };
    Ok(Command::ResetChannel { name, seqnum })
}

/// START and STOP's only option: IGNSTATE(YES) succeeds when the object is already in the
/// state asked for; IGNSTATE(NO), the default, fails then.
/// STOP CHANNEL(name) [MODE(QUIESCE|FORCE|TERMINATE)] [STATUS(STOPPED|INACTIVE)] [IGNSTATE].
fn stop_channel(name: String, rest: &[Item]) -> Result<Command, SyntaxError> {
    let mut mode = None;
    let mut status = None;
    let mut others = Vec::new();
    for item in rest {
        let (slot, words): (&mut Option<String>, &[&str]) = match item.word.as_str() {
            "MODE" => (&mut mode, &["QUIESCE", "FORCE", "TERMINATE"]),
            "STATUS" => (&mut status, &["STOPPED", "INACTIVE"]),
            _ => {
                others.push(item.clone());
                continue;
            }
        };
        if slot.is_some() {
            return Err(twice(item));
        }
        let Some(p) = &item.value else {
            return Err(SyntaxError::new(
                format!("{} needs a value: {}", item.word, words.join(", ")),
                item.col,
                &item.text,
            ));
        };
        let s = crate::lexer::scalar(p)?;
        let v = s.value.to_ascii_uppercase();
        if !words.contains(&v.as_str()) {
            return Err(SyntaxError::new(
                format!("{} must be one of {}", item.word, words.join(", ")),
                s.col,
                s.written,
            ));
        }
        *slot = Some(v);
    }
    let ignstate = ignstate(&others)?;
    Ok(Command::StopChannel {
        name,
        ignstate,
        mode: match mode.as_deref() {
            Some("FORCE") => StopMode::Force,
            Some("TERMINATE") => StopMode::Terminate,
            _ => StopMode::Quiesce,
        },
        inactive: status.as_deref() == Some("INACTIVE"),
    })
}

fn ignstate(rest: &[Item]) -> Result<bool, SyntaxError> {
    let mut seen = None;
    for item in rest {
        if item.word != "IGNSTATE" {
            return Err(SyntaxError::new(
                format!(
                    "unexpected '{}': this command takes IGNSTATE(YES|NO) only",
                    item.text
                ),
                item.col,
                &item.text,
            ));
        }
        if seen.is_some() {
            return Err(twice(item));
        }
        let Some(p) = &item.value else {
            return Err(SyntaxError::new(
                "IGNSTATE needs a value, YES or NO",
                item.col,
                &item.text,
            ));
        };
        let s = crate::lexer::scalar(p)?;
        seen = Some(match s.value.to_ascii_uppercase().as_str() {
            "YES" => true,
            "NO" => false,
            _ => {
                return Err(SyntaxError::new(
                    "IGNSTATE must be YES or NO",
                    s.col,
                    s.written,
                ))
            }
        });
    }
    Ok(seen.unwrap_or(false))
}

fn unknown_object(obj: &Item, hint: &str) -> SyntaxError {
    let security = match obj.word.as_str() {
        "CHLAUTH" => "channel authentication records are set with SET CHLAUTH and shown with DISPLAY CHLAUTH",
        "AUTHREC" => "authority records are set with SET AUTHREC, removed with DELETE AUTHREC and shown with DISPLAY AUTHREC",
        _ => "",
    };
    let hint = if security.is_empty() { hint } else { security };
    let msg = if !hint.is_empty() {
        format!("'{}' is not valid here: {hint}", obj.text)
    } else if let Some((_, what)) = UNSUPPORTED_OBJECTS.iter().find(|(w, _)| *w == obj.word) {
        format!(
            "FerryMQ does not support '{}' with this command: {what} is not built yet",
            obj.text
        )
    } else {
        format!("'{}' is not an object type FerryMQ knows", obj.text)
    };
    SyntaxError::new(msg, obj.col, &obj.text)
}

fn no_more(rest: &[Item]) -> Result<(), SyntaxError> {
    match rest.first() {
        None => Ok(()),
        Some(i) => Err(SyntaxError::new(
            format!(
                "unexpected '{}': this command takes no further parameters",
                i.text
            ),
            i.col,
            &i.text,
        )),
    }
}

fn no_name(obj: &Item) -> Result<(), SyntaxError> {
    match &obj.value {
        None => Ok(()),
        Some(p) => Err(SyntaxError::new(
            format!("{} takes no name", obj.word),
            p.open_col,
            format!("({})", p.raw),
        )),
    }
}

fn required_name(obj: &Item, kind: ObjType) -> Result<String, SyntaxError> {
    let what = kind.keyword();
    let Some(p) = &obj.value else {
        return Err(SyntaxError::new(
            format!("{what} needs a name in parentheses, e.g. {what}(MY.NAME)"),
            obj.col,
            &obj.text,
        ));
    };
    object_name(p, name_max(kind), false, what)
}

fn no_value(item: &Item) -> Result<(), SyntaxError> {
    match &item.value {
        None => Ok(()),
        Some(p) => Err(SyntaxError::new(
            format!("{} takes no value", item.word),
            p.open_col,
            format!("({})", p.raw),
        )),
    }
}

fn twice(item: &Item) -> SyntaxError {
    SyntaxError::new(
        format!("{} is given more than once", item.word),
        item.col,
        &item.text,
    )
}

/// The subtype keyword (CHLTYPE, AUTHTYPE) and value, checked, if the command gives it.
fn subtype(
    rest: &[Item],
    table: &'static [AttrSpec],
    key: &str,
) -> Result<Option<Setting>, SyntaxError> {
    let spec = lookup(table, key).expect("subtype keyword is in its table");
    rest.iter()
        .find(|i| i.word == key)
        .map(|i| setting(i, spec))
        .transpose()
}

/// Attribute keywords checked against `table`; `sub` is the channel or authinfo type, when known,
/// which some attributes are restricted to.
fn settings(
    rest: &[Item],
    table: &'static [AttrSpec],
    sub: Option<&str>,
    label: &str,
) -> Result<Vec<Setting>, SyntaxError> {
    let mut out: Vec<Setting> = Vec::new();
    for item in rest {
        let spec = attr_for(item, table, label)?;
        if let Some(st) = sub.filter(|st| !spec.applies_to(st)) {
            return Err(SyntaxError::new(
                format!("{} is not an attribute of {st} objects", spec.name),
                item.col,
                &item.text,
            ));
        }
        if out.iter().any(|s| s.attr.name == spec.name) {
            return Err(twice(item));
        }
        out.push(setting(item, spec)?);
    }
    Ok(out)
}

fn attr_for(
    item: &Item,
    table: &'static [AttrSpec],
    label: &str,
) -> Result<&'static AttrSpec, SyntaxError> {
    lookup(table, &item.word).ok_or_else(|| {
        let elsewhere = [
            attrs::QLOCAL,
            attrs::QALIAS,
            attrs::QMODEL,
            attrs::QREMOTE,
            attrs::CHANNEL,
            attrs::LISTENER,
            attrs::AUTHINFO,
            QMGR,
        ]
        .iter()
        .any(|t| lookup(t, &item.word).is_some());
        let msg = if elsewhere {
            format!("{} is not an attribute of {label}", item.text)
        } else {
            format!("unknown keyword '{}'", item.text)
        };
        SyntaxError::new(msg, item.col, &item.text)
    })
}

/// For DEFINE and ALTER of channels and authinfo: the type keyword, required where MQ requires it.
fn required_subtype(
    kind: ObjType,
    obj: &Item,
    rest: &[Item],
    required: bool,
) -> Result<Option<String>, SyntaxError> {
    let key = match kind {
        ObjType::Channel => "CHLTYPE",
        ObjType::AuthInfo => "AUTHTYPE",
        _ => return Ok(None),
    };
    match subtype(rest, attrs::table(kind), key)? {
        Some(s) => Ok(Some(s.value)),
        None if required => Err(SyntaxError::new(
            format!(
                "{key} is required with {} (e.g. {key}(...))",
                kind.keyword()
            ),
            obj.col,
            &obj.text,
        )),
        None => Ok(None),
    }
}

fn define(kind: ObjType, name: String, obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    let sub = required_subtype(kind, obj, rest, true)?;
    let mut replace: Option<bool> = None;
    let mut like: Option<String> = None;
    let mut attr_items = Vec::new();
    for item in rest {
        match item.word.as_str() {
            "REPLACE" | "NOREPLACE" => {
                no_value(item)?;
                if replace.replace(item.word == "REPLACE").is_some() {
                    return Err(twice(item));
                }
            }
            "LIKE" => {
                let Some(p) = &item.value else {
                    return Err(SyntaxError::new(
                        "LIKE needs the name of an object to copy, e.g. LIKE(MY.Q)",
                        item.col,
                        &item.text,
                    ));
                };
                if like.is_some() {
                    return Err(twice(item));
                }
                like = Some(object_name(p, name_max(kind), false, kind.keyword())?);
            }
            _ => attr_items.push(item.clone()),
        }
    }
    let attrs = settings(
        &attr_items,
        attrs::table(kind),
        sub.as_deref(),
        kind.keyword(),
    )?;
    Ok(Command::Define {
        kind,
        name,
        attrs,
        like,
        replace: replace.unwrap_or(false),
    })
}

fn alter(kind: ObjType, name: String, obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    let sub = required_subtype(kind, obj, rest, kind == ObjType::Channel)?;
    let attrs = settings(rest, attrs::table(kind), sub.as_deref(), kind.keyword())?;
    Ok(Command::Alter { kind, name, attrs })
}

fn delete(kind: ObjType, name: String, rest: &[Item]) -> Result<Command, SyntaxError> {
    let mut purge = None;
    for item in rest {
        if kind == ObjType::QLocal && matches!(item.word.as_str(), "PURGE" | "NOPURGE") {
            no_value(item)?;
            if purge.replace(item.word == "PURGE").is_some() {
                return Err(twice(item));
            }
        } else {
            let hint = if kind == ObjType::QLocal {
                "DELETE QLOCAL takes PURGE or NOPURGE"
            } else {
                "this DELETE takes no further parameters"
            };
            return Err(SyntaxError::new(
                format!("unexpected '{}': {hint}", item.text),
                item.col,
                &item.text,
            ));
        }
    }
    Ok(Command::Delete {
        kind,
        name,
        purge: purge.unwrap_or(false),
    })
}

fn refresh(obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    if obj.word == "QMGR" {
        return refresh_qmgr(obj, rest);
    }
    if obj.word != "SECURITY" {
        return Err(unknown_object(
            obj,
            "FerryMQ supports REFRESH SECURITY and REFRESH QMGR TYPE(EXPIRY)",
        ));
    }
    if let Some(p) = &obj.value {
        if p.raw.trim() != "*" {
            return Err(SyntaxError::new(
                "SECURITY takes no name other than (*)",
                p.open_col,
                format!("({})", p.raw),
            ));
        }
    }
    let mut type_ = None;
    for item in rest {
        if item.word != "TYPE" {
            return Err(SyntaxError::new(
                format!(
                    "unexpected '{}': REFRESH SECURITY takes TYPE(...)",
                    item.text
                ),
                item.col,
                &item.text,
            ));
        }
        if type_.is_some() {
            return Err(twice(item));
        }
        type_ = Some(type_value(
            item,
            &["ALL", "AUTHSERV", "CONNAUTH", "SSL", "CLASSES"],
        )?);
    }
    // MQ refreshes the authorization service when no TYPE is given.
    Ok(Command::RefreshSecurity {
        type_: type_.unwrap_or_else(|| "AUTHSERV".into()),
    })
}

/// REFRESH QMGR TYPE(EXPIRY) [NAME(generic queue name)]; NAME defaults to every queue.
fn refresh_qmgr(obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    if let Some(p) = &obj.value {
        return Err(SyntaxError::new(
            "QMGR takes no name",
            p.open_col,
            format!("({})", p.raw),
        ));
    }
    let (mut type_, mut name) = (None, None);
    for item in rest {
        match item.word.as_str() {
            "TYPE" if type_.is_none() => type_ = Some(type_value(item, &["EXPIRY"])?),
            "NAME" if name.is_none() => {
                let Some(p) = &item.value else {
                    return Err(SyntaxError::new(
                        "NAME needs a queue name in parentheses",
                        item.col,
                        &item.text,
                    ));
                };
                name = Some(crate::lexer::scalar(p)?.value);
            }
            "TYPE" | "NAME" => return Err(twice(item)),
            _ => {
                return Err(SyntaxError::new(
                    format!(
                        "unexpected '{}': REFRESH QMGR takes TYPE(EXPIRY) and NAME(...)",
                        item.text
                    ),
                    item.col,
                    &item.text,
                ))
            }
        }
    }
    if type_.is_none() {
        return Err(SyntaxError::new(
            "REFRESH QMGR needs TYPE(EXPIRY), the only refresh of the queue manager FerryMQ has",
            obj.col,
            &obj.text,
        ));
    }
    Ok(Command::RefreshQmgrExpiry {
        name: name.unwrap_or_else(|| "*".into()),
    })
}

/// The word in `TYPE(...)`, one of `allowed` (queue-type abbreviations are expanded).
fn type_value(item: &Item, allowed: &[&str]) -> Result<String, SyntaxError> {
    let Some(p) = &item.value else {
        return Err(SyntaxError::new(
            format!("TYPE needs a value, one of {}", allowed.join(", ")),
            item.col,
            &item.text,
        ));
    };
    let s = crate::lexer::scalar(p)?;
    let word = obj_type(&s.value)
        .filter(|t| t.is_queue())
        .map(|t| t.keyword().to_string())
        .unwrap_or(s.value.clone());
    if !allowed.contains(&word.as_str()) {
        return Err(SyntaxError::new(
            format!("TYPE must be one of {}", allowed.join(", ")),
            s.col,
            s.written,
        ));
    }
    Ok(word)
}

/// The canonical name of an attribute DISPLAY of `what` can show, or None.
pub(crate) fn display_attr(what: DisplayWhat, word: &str) -> Option<String> {
    let fixed: &[&str] = match what {
        DisplayWhat::Queue => {
            return ["QUEUE", "TYPE"]
                .contains(&word)
                .then(|| word.to_string())
                .or_else(|| lookup_any_queue(word).map(|a| a.name.to_string()))
        }
        DisplayWhat::Object(t) => {
            let id: &[&str] = if t.is_queue() {
                &["QUEUE", "TYPE"]
            } else {
                &[t.keyword()]
            };
            return id
                .contains(&word)
                .then(|| word.to_string())
                .or_else(|| lookup(attrs::table(t), word).map(|a| a.name.to_string()));
        }
        DisplayWhat::Qmgr => return lookup(QMGR, word).map(|a| a.name.to_string()),
        DisplayWhat::QStatus => attrs::QSTATUS_FIELDS,
        DisplayWhat::Conn => attrs::CONN_FIELDS,
        // These rows come from the server, which decides their fields: any keyword may be asked for.
        DisplayWhat::ChStatus
        | DisplayWhat::LsStatus
        | DisplayWhat::QmStatus
        | DisplayWhat::Sub
        | DisplayWhat::SbStatus
        | DisplayWhat::TpStatus
        | DisplayWhat::PubSub => {
            return (!word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric()))
                .then(|| word.to_string())
        }
    };
    fixed.contains(&word).then(|| word.to_string())
}

fn display(obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    let what = match obj.word.as_str() {
        "QUEUE" | "Q" => DisplayWhat::Queue,
        "QMGR" => DisplayWhat::Qmgr,
        "QSTATUS" | "QS" => DisplayWhat::QStatus,
        "CONN" => DisplayWhat::Conn,
        "CHSTATUS" | "CHS" => DisplayWhat::ChStatus,
        "LSSTATUS" => DisplayWhat::LsStatus,
        "QMSTATUS" => DisplayWhat::QmStatus,
        "SUB" => DisplayWhat::Sub,
        "SBSTATUS" => DisplayWhat::SbStatus,
        "TPSTATUS" => DisplayWhat::TpStatus,
        "PUBSUB" => DisplayWhat::PubSub,
        w => match obj_type(w) {
            Some(t) => DisplayWhat::Object(t),
            None => return Err(unknown_object(obj, "")),
        },
    };
    let name = match what {
        DisplayWhat::Qmgr | DisplayWhat::QmStatus | DisplayWhat::PubSub => {
            no_name(obj)?;
            String::new()
        }
        DisplayWhat::Sub | DisplayWhat::SbStatus => {
            crate::pubsub::name_of(obj, "subscription name or pattern")?
        }
        DisplayWhat::TpStatus => crate::pubsub::name_of(obj, "topic string")?,
        _ => {
            let Some(p) = &obj.value else {
                return Err(SyntaxError::new(
                    format!(
                        "{} needs a name or pattern in parentheses, e.g. {}(*)",
                        obj.word, obj.word
                    ),
                    obj.col,
                    &obj.text,
                ));
            };
            match what {
                DisplayWhat::Conn => conn_id(p)?,
                DisplayWhat::ChStatus => object_name(p, CHANNEL_NAME_LEN_MAX, true, "channel")?,
                DisplayWhat::Object(t) => object_name(p, name_max(t), true, t.keyword())?,
                _ => object_name(p, OBJECT_NAME_LEN_MAX, true, &obj.word)?,
            }
        }
    };
    let type_words: &[&str] = match what {
        DisplayWhat::Queue => &["QLOCAL", "QALIAS", "QMODEL", "QREMOTE", "ALL"],
        DisplayWhat::Object(ObjType::Channel) => {
            &["SVRCONN", "SDR", "RCVR", "CLNTCONN", "SVR", "RQSTR", "ALL"]
        }
        DisplayWhat::QStatus => &["QUEUE", "HANDLE"],
        DisplayWhat::Conn => &["CONN", "HANDLE", "ALL"],
        DisplayWhat::TpStatus => &["TOPIC", "PUB", "SUB"],
        _ => &[],
    };
    let mut all = false;
    let mut list: Vec<String> = Vec::new();
    let mut where_ = None;
    let mut type_ = None;
    for item in rest {
        match item.word.as_str() {
            "ALL" => {
                no_value(item)?;
                all = true;
            }
            "TYPE" if item.value.is_some() => {
                if type_words.is_empty() {
                    return Err(SyntaxError::new(
                        format!("TYPE(...) is not valid with DISPLAY {}", obj.word),
                        item.col,
                        &item.text,
                    ));
                }
                if type_.is_some() {
                    return Err(twice(item));
                }
                type_ = Some(type_value(item, type_words)?);
            }
            "WHERE" => {
                let Some(p) = &item.value else {
                    return Err(SyntaxError::new(
                        "WHERE needs a condition, e.g. WHERE(CURDEPTH GT 0)",
                        item.col,
                        &item.text,
                    ));
                };
                if where_.is_some() {
                    return Err(twice(item));
                }
                where_ = Some(filter(p, &|w| display_attr(what, w))?);
            }
            w => {
                let Some(canonical) = display_attr(what, w) else {
                    return Err(SyntaxError::new(
                        format!("DISPLAY {} cannot show '{}'", obj.word, item.text),
                        item.col,
                        &item.text,
                    ));
                };
                no_value(item)?;
                if !list.contains(&canonical) {
                    list.push(canonical);
                }
            }
        }
    }
    let requested = if all {
        Requested::All
    } else if list.is_empty() {
        Requested::Default
    } else {
        Requested::List(list)
    };
    Ok(Command::Display {
        what,
        name,
        requested,
        where_,
        type_,
    })
}
