//! SET CHLAUTH, SET AUTHREC, DELETE AUTHREC, their DISPLAY commands and DISPLAY ENTAUTH:
//! parsing and checking. Channel authentication and authority records are stored and shown as
//! MQ administrators write them, so setup scripts run unchanged; the queue manager enforces the
//! authority records (CHLAUTH replies say whether their records are acted on).
//!
//! Each record is kept as an engine object of kind CHLAUTH or AUTHREC whose name is the record's
//! key (what identifies it in MQ: for CHLAUTH the profile, type and what it matches; for AUTHREC
//! the object type, profile and entity) and whose attributes are the MQSC keywords it was set with.

use crate::command::SyntaxError;
use crate::lexer::{scalar, scalar_at, Item, Paren};
use crate::values::{name_problem, CHANNEL_NAME_LEN_MAX};
use ferrymq_types::authority;
use ferrymq_types::limits::OBJECT_NAME_LEN_MAX;

/// CHLAUTH record types.
pub const CHLAUTH_TYPES: &[&str] = &[
    "BLOCKUSER",
    "BLOCKADDR",
    "ADDRESSMAP",
    "USERMAP",
    "SSLPEERMAP",
    "QMGRMAP",
];

/// Object types an authority record can name.
pub const AUTHREC_OBJTYPES: &[&str] = authority::OBJTYPES;

/// Authorities in the order AUTHLIST shows them.
pub const AUTHREC_ORDER: &[&str] = authority::AUTHORITIES;

/// SET CHLAUTH's ACTION.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChlAuthAction {
    /// Adds a record; fails if one with the same key exists.
    Add,
    /// Adds or replaces.
    Replace,
    /// Removes the record with this key.
    Remove,
    /// Removes every record of this profile and type.
    RemoveAll,
}

/// A parsed SET CHLAUTH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChlAuthSet {
    pub profile: String,
    pub type_: String,
    pub action: ChlAuthAction,
    /// The record's attributes in MQSC keyword order (identifying ones included).
    pub attrs: Vec<(String, String)>,
}

impl ChlAuthSet {
    /// The record's key: type, profile and what it matches.
    pub fn key(&self) -> String {
        chlauth_key(&self.profile, &self.type_, &self.attrs)
    }
}

/// The attributes that, with the profile and type, identify a CHLAUTH record.
const CHLAUTH_KEY_ATTRS: &[&str] = &["ADDRESS", "CLNTUSER", "SSLPEER", "SSLCERTI", "QMNAME"];

/// The key of a CHLAUTH record made of its profile, type and identifying attributes.
pub fn chlauth_key(profile: &str, type_: &str, attrs: &[(String, String)]) -> String {
    let mut k = format!("{type_}|{profile}");
    for name in CHLAUTH_KEY_ATTRS {
        if let Some((_, v)) = attrs.iter().find(|(n, _)| n == name) {
            k.push_str(&format!("|{name}={v}"));
        }
    }
    k
}

/// Whether a stored CHLAUTH key belongs to `profile` and `type_` (for REMOVEALL).
pub fn chlauth_key_is(key: &str, profile: &str, type_: &str) -> bool {
    let head = format!("{type_}|{profile}");
    key == head || key.starts_with(&format!("{head}|"))
}

/// An entity of an authority record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entity {
    Principal(String),
    Group(String),
}

impl Entity {
    pub fn kind(&self) -> &'static str {
        match self {
            Entity::Principal(_) => "PRINCIPAL",
            Entity::Group(_) => "GROUP",
        }
    }
    pub fn name(&self) -> &str {
        match self {
            Entity::Principal(n) | Entity::Group(n) => n,
        }
    }
}

/// A parsed SET AUTHREC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthRecSet {
    /// Empty for OBJTYPE(QMGR), which names the queue manager itself.
    pub profile: String,
    pub objtype: String,
    pub entity: Entity,
    /// Authorities to add and to remove, expanded (ALL, ALLADM, ALLMQI) and sorted.
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// The key of an authority record.
pub fn authrec_key(objtype: &str, profile: &str, entity: &Entity) -> String {
    let e = match entity {
        Entity::Principal(n) => format!("P:{n}"),
        Entity::Group(n) => format!("G:{n}"),
    };
    format!("{objtype}|{profile}|{e}")
}

/// DISPLAY AUTHREC's MATCH: how PROFILE and PRINCIPAL select records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AuthMatch {
    /// The records whose profile is PROFILE or a generic profile that covers it (the default).
    #[default]
    Profile,
    /// As PROFILE, and with PRINCIPAL also the records of the groups the principal is in.
    Membership,
    /// Only the record of exactly this profile and entity.
    Exact,
}

/// Which authority records a DELETE or DISPLAY AUTHREC selects. DELETE always matches exactly.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AuthRecFilter {
    pub profile: Option<String>,
    pub objtype: Option<String>,
    pub entity: Option<Entity>,
    /// DISPLAY's MATCH (DELETE's is always EXACT).
    pub match_: AuthMatch,
}

/// A parsed DISPLAY ENTAUTH: what an entity may do to one object, its records combined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntAuthQuery {
    /// The object's name (empty for OBJTYPE(QMGR): this queue manager).
    pub objname: String,
    pub objtype: String,
    pub entity: Entity,
}

impl AuthRecFilter {
    /// Whether a record with these identifying attributes is selected.
    pub fn selects(&self, objtype: &str, profile: &str, entity: &Entity) -> bool {
        self.objtype.as_deref().is_none_or(|t| t == objtype)
            && self.profile.as_deref().is_none_or(|p| p == profile)
            && self.entity.as_ref().is_none_or(|e| e == entity)
    }
}

fn err(msg: impl Into<String>, item: &Item) -> SyntaxError {
    SyntaxError::new(msg, item.col, &item.text)
}

fn value_of<'a>(item: &'a Item, example: &str) -> Result<&'a Paren, SyntaxError> {
    item.value.as_ref().ok_or_else(|| {
        err(
            format!("{} needs a value in parentheses, e.g. {example}", item.word),
            item,
        )
    })
}

fn word_in(item: &Item, words: &[&str]) -> Result<String, SyntaxError> {
    let p = value_of(item, &format!("{}({})", item.word, words[0]))?;
    let s = scalar(p)?;
    let w = s.value.to_ascii_uppercase();
    if !words.contains(&w.as_str()) {
        return Err(SyntaxError::new(
            format!("{} must be one of {}", item.word, words.join(", ")),
            s.col,
            s.written,
        ));
    }
    Ok(w)
}

fn text(item: &Item, max_len: usize) -> Result<String, SyntaxError> {
    let p = value_of(item, &format!("{}('text')", item.word))?;
    let s = scalar(p)?;
    if s.value.len() > max_len {
        return Err(SyntaxError::new(
            format!(
                "{} is {} bytes long; the most is {max_len}",
                item.word,
                s.value.len()
            ),
            s.col,
            s.written,
        ));
    }
    Ok(s.value)
}

/// A list in parentheses: items separated by commas or blanks, each bare or quoted.
fn list(item: &Item, max_len: usize) -> Result<Vec<String>, SyntaxError> {
    let p = value_of(item, &format!("{}('a','b')", item.word))?;
    let chars: Vec<char> = p.raw.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let start = i;
        if chars[i] == '\'' {
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' && chars.get(i + 1) == Some(&'\'') {
                    i += 2;
                } else if chars[i] == '\'' {
                    i += 1;
                    break;
                } else {
                    i += 1;
                }
            }
        } else {
            while i < chars.len() && !(chars[i].is_whitespace() || chars[i] == ',') {
                i += 1;
            }
        }
        let raw: String = chars[start..i].iter().collect();
        let s = scalar_at(&raw, p.inner_col() + start)?;
        if s.value.is_empty() || s.value.len() > max_len {
            return Err(SyntaxError::new(
                format!(
                    "each item of {} is 1 to {max_len} characters long",
                    item.word
                ),
                s.col,
                s.written,
            ));
        }
        out.push(s.value);
    }
    if out.is_empty() {
        return Err(err(format!("{} needs at least one item", item.word), item));
    }
    Ok(out)
}

/// A profile name: MQ's name characters plus the generic `*` (and `?` for AUTHREC).
fn profile_name(p: &Paren, max: usize, generic: &str, what: &str) -> Result<String, SyntaxError> {
    let s = scalar(p)?;
    let plain: String = s.value.chars().filter(|c| !generic.contains(*c)).collect();
    let problem = if s.value.is_empty() {
        Some("it is empty".to_string())
    } else if s.value.len() > max {
        Some(format!("it is longer than {max} characters"))
    } else if plain.is_empty() {
        None
    } else {
        name_problem(&plain, max)
    };
    match problem {
        Some(p) => Err(SyntaxError::new(
            format!("not a valid {what}: {p}"),
            s.col,
            s.written,
        )),
        None => Ok(s.value),
    }
}

fn twice(item: &Item) -> SyntaxError {
    err(format!("{} is given more than once", item.word), item)
}

/// Which attributes each CHLAUTH type takes (besides TYPE and ACTION), and which it requires
/// when a record is added or replaced.
fn chlauth_attrs(type_: &str) -> (&'static [&'static str], &'static [&'static str]) {
    const MAP: &[&str] = &["USERSRC", "MCAUSER", "CHCKCLNT", "DESCR", "WARN", "CUSTOM"];
    match type_ {
        "BLOCKUSER" => (&["USERLIST", "DESCR", "WARN", "CUSTOM"], &["USERLIST"]),
        "BLOCKADDR" => (&["ADDRLIST", "DESCR", "WARN", "CUSTOM"], &["ADDRLIST"]),
        "ADDRESSMAP" => (
            &[
                "ADDRESS", "USERSRC", "MCAUSER", "CHCKCLNT", "DESCR", "WARN", "CUSTOM",
            ],
            &["ADDRESS"],
        ),
        "USERMAP" => (
            &[
                "CLNTUSER", "ADDRESS", "USERSRC", "MCAUSER", "CHCKCLNT", "DESCR", "WARN", "CUSTOM",
            ],
            &["CLNTUSER"],
        ),
        "SSLPEERMAP" => (
            &[
                "SSLPEER", "SSLCERTI", "ADDRESS", "USERSRC", "MCAUSER", "CHCKCLNT", "DESCR",
                "WARN", "CUSTOM",
            ],
            &["SSLPEER"],
        ),
        "QMGRMAP" => (
            &[
                "QMNAME", "ADDRESS", "USERSRC", "MCAUSER", "CHCKCLNT", "DESCR", "WARN", "CUSTOM",
            ],
            &["QMNAME"],
        ),
        _ => (MAP, &[]),
    }
}

/// Parses the parameters of SET CHLAUTH(profile).
pub(crate) fn set_chlauth(obj: &Item, rest: &[Item]) -> Result<ChlAuthSet, SyntaxError> {
    let Some(p) = &obj.value else {
        return Err(err(
            "CHLAUTH needs a channel profile in parentheses, e.g. CHLAUTH('APP.*')",
            obj,
        ));
    };
    let profile = profile_name(p, CHANNEL_NAME_LEN_MAX, "*", "channel profile")?;
    let mut type_ = None;
    let mut action = None;
    let mut attrs: Vec<(String, String)> = Vec::new();
    let mut items: Vec<&Item> = Vec::new();
    for item in rest {
        match item.word.as_str() {
            "TYPE" => {
                if type_.is_some() {
                    return Err(twice(item));
                }
                type_ = Some(word_in(item, CHLAUTH_TYPES)?);
            }
            "ACTION" => {
                if action.is_some() {
                    return Err(twice(item));
                }
                action = Some(
                    match word_in(item, &["ADD", "REPLACE", "REMOVE", "REMOVEALL"])?.as_str() {
                        "ADD" => ChlAuthAction::Add,
                        "REPLACE" => ChlAuthAction::Replace,
                        "REMOVE" => ChlAuthAction::Remove,
                        _ => ChlAuthAction::RemoveAll,
                    },
                );
            }
            _ => items.push(item),
        }
    }
    let Some(type_) = type_ else {
        return Err(err(
            format!(
                "SET CHLAUTH needs TYPE({}), e.g. TYPE(ADDRESSMAP)",
                CHLAUTH_TYPES.join("|")
            ),
            obj,
        ));
    };
    let action = action.unwrap_or(ChlAuthAction::Add);
    if type_ == "BLOCKADDR" && profile != "*" {
        return Err(err(
            "TYPE(BLOCKADDR) applies to every channel: its profile must be CHLAUTH('*')",
            obj,
        ));
    }
    let (allowed, required) = chlauth_attrs(&type_);
    for item in items {
        let w = item.word.as_str();
        if !allowed.contains(&w) {
            let msg = if [
                "ADDRESS", "ADDRLIST", "USERLIST", "CLNTUSER", "SSLPEER", "SSLCERTI", "QMNAME",
                "USERSRC", "MCAUSER", "CHCKCLNT", "DESCR", "WARN", "CUSTOM",
            ]
            .contains(&w)
            {
                format!("{w} is not valid with TYPE({type_})")
            } else {
                format!("unknown keyword '{}' for SET CHLAUTH", item.text)
            };
            return Err(err(msg, item));
        }
        if attrs.iter().any(|(n, _)| n == w) {
            return Err(twice(item));
        }
        let v = match w {
            "USERLIST" | "ADDRLIST" => list(item, 1024)?.join(","),
            "USERSRC" => word_in(item, &["MAP", "NOACCESS", "CHANNEL"])?,
            "WARN" => word_in(item, &["YES", "NO"])?,
            "CHCKCLNT" => word_in(item, &["ASQMGR", "REQUIRED", "REQDADM"])?,
            "DESCR" => text(item, 64)?,
            "MCAUSER" | "CLNTUSER" => text(item, 64)?,
            "ADDRESS" => text(item, 264)?,
            "SSLPEER" | "SSLCERTI" | "CUSTOM" => text(item, 1024)?,
            _ => {
                // QMNAME: a queue manager name or generic pattern.
                let p = value_of(item, "QMNAME('QM*')")?;
                profile_name(p, OBJECT_NAME_LEN_MAX, "*", "queue manager name")?
            }
        };
        attrs.push((w.to_string(), v));
    }
    let has = |n: &str| attrs.iter().any(|(k, _)| k == n);
    match action {
        ChlAuthAction::Add | ChlAuthAction::Replace => {
            if let Some(missing) = required.iter().find(|r| !has(r)) {
                return Err(err(
                    format!("TYPE({type_}) needs {missing}(...) to add or replace a record"),
                    obj,
                ));
            }
            if !type_.starts_with("BLOCK") {
                let src = attrs
                    .iter()
                    .find(|(k, _)| k == "USERSRC")
                    .map_or("MAP", |(_, v)| v.as_str());
                if src == "MAP" && !has("MCAUSER") {
                    return Err(err(
                        "USERSRC(MAP), the default, needs MCAUSER('user') to map to; or give USERSRC(NOACCESS) or USERSRC(CHANNEL)",
                        obj,
                    ));
                }
                if src != "MAP" && has("MCAUSER") {
                    return Err(err(
                        format!("MCAUSER is valid only with USERSRC(MAP), not USERSRC({src})"),
                        obj,
                    ));
                }
            }
        }
        ChlAuthAction::Remove => {
            if let Some(missing) = required.iter().find(|r| !has(r) && !r.ends_with("LIST")) {
                return Err(err(
                    format!(
                        "ACTION(REMOVE) of a TYPE({type_}) record needs {missing}(...) to name it"
                    ),
                    obj,
                ));
            }
            if let Some((k, _)) = attrs
                .iter()
                .find(|(k, _)| !CHLAUTH_KEY_ATTRS.contains(&k.as_str()) && !k.ends_with("LIST"))
            {
                return Err(err(
                    format!("ACTION(REMOVE) takes only what names the record, not {k}"),
                    obj,
                ));
            }
        }
        ChlAuthAction::RemoveAll => {
            if let Some((k, _)) = attrs.first() {
                return Err(err(
                    format!("ACTION(REMOVEALL) removes every TYPE({type_}) record of the profile; it takes no {k}"),
                    obj,
                ));
            }
        }
    }
    Ok(ChlAuthSet {
        profile,
        type_,
        action,
        attrs,
    })
}

fn expand(item: &Item, v: Vec<String>) -> Result<Vec<String>, SyntaxError> {
    let mut out: Vec<&str> = Vec::new();
    for a in &v {
        match authority::expand(a) {
            Some(list) => out.extend(list),
            None => {
                return Err(err(
                    format!(
                        "'{}' is not an authority; use ALL, ALLADM, ALLMQI, NONE or {}",
                        a.to_ascii_uppercase(),
                        authority::AUTHORITIES.join(", ")
                    ),
                    item,
                ))
            }
        }
    }
    Ok(authority::AUTHORITIES
        .iter()
        .filter(|a| out.contains(a))
        .map(|a| a.to_string())
        .collect())
}

/// AUTHLIST as shown: the authorities in table order, or NONE.
pub fn authlist(auths: &[String]) -> String {
    if auths.is_empty() {
        "NONE".into()
    } else {
        auths.join(",")
    }
}

/// PROFILE, OBJTYPE and PRINCIPAL/GROUP, shared by SET, DELETE and DISPLAY AUTHREC; other items
/// are handed to `other`.
fn authrec_common(
    rest: &[Item],
    mut other: impl FnMut(&Item) -> Result<(), SyntaxError>,
) -> Result<AuthRecFilter, SyntaxError> {
    let mut f = AuthRecFilter::default();
    for item in rest {
        match item.word.as_str() {
            "PROFILE" => {
                if f.profile.is_some() {
                    return Err(twice(item));
                }
                let p = value_of(item, "PROFILE('APP.**')")?;
                f.profile = Some(profile_name(p, OBJECT_NAME_LEN_MAX, "*?", "profile")?);
            }
            "OBJTYPE" => {
                if f.objtype.is_some() {
                    return Err(twice(item));
                }
                f.objtype = Some(word_in(item, AUTHREC_OBJTYPES)?);
            }
            "PRINCIPAL" | "GROUP" => {
                if f.entity.is_some() {
                    return Err(err(
                        "give one PRINCIPAL(...) or one GROUP(...), not both",
                        item,
                    ));
                }
                let name = text(item, 64)?;
                if name.is_empty() {
                    return Err(err(format!("{} needs a name", item.word), item));
                }
                f.entity = Some(if item.word == "PRINCIPAL" {
                    Entity::Principal(name)
                } else {
                    Entity::Group(name)
                });
            }
            _ => other(item)?,
        }
    }
    if f.objtype.as_deref() == Some("QMGR") && f.profile.is_some() {
        return Err(SyntaxError::new(
            "PROFILE is not valid with OBJTYPE(QMGR): the record is for this queue manager",
            0,
            "PROFILE",
        ));
    }
    Ok(f)
}

fn objtype_required(f: &AuthRecFilter, verb: &str) -> Result<String, SyntaxError> {
    let t = f.objtype.clone().ok_or_else(|| {
        SyntaxError::new(
            format!("{verb} AUTHREC needs OBJTYPE(...), e.g. OBJTYPE(QUEUE)"),
            0,
            "",
        )
    })?;
    if t != "QMGR" && f.profile.is_none() {
        return Err(SyntaxError::new(
            format!("{verb} AUTHREC needs PROFILE(...) with OBJTYPE({t})"),
            0,
            "",
        ));
    }
    Ok(t)
}

/// Parses SET AUTHREC's parameters.
pub(crate) fn set_authrec(rest: &[Item]) -> Result<AuthRecSet, SyntaxError> {
    let mut add = None;
    let mut remove = None;
    let f = authrec_common(rest, |item| {
        let slot = match item.word.as_str() {
            "AUTHADD" => &mut add,
            "AUTHRMV" => &mut remove,
            "SERVCOMP" => return text(item, 48).map(|_| ()),
            _ => {
                return Err(err(
                    format!(
                        "unknown keyword '{}' for SET AUTHREC (PROFILE, OBJTYPE, PRINCIPAL, GROUP, AUTHADD, AUTHRMV)",
                        item.text
                    ),
                    item,
                ))
            }
        };
        if slot.is_some() {
            return Err(twice(item));
        }
        *slot = Some(expand(item, list(item, 16)?)?);
        Ok(())
    })?;
    let objtype = objtype_required(&f, "SET")?;
    let Some(entity) = f.entity else {
        return Err(SyntaxError::new(
            "SET AUTHREC needs PRINCIPAL('user') or GROUP('group')",
            0,
            "",
        ));
    };
    if add.is_none() && remove.is_none() {
        return Err(SyntaxError::new(
            "SET AUTHREC needs AUTHADD(...) or AUTHRMV(...), e.g. AUTHADD(GET,PUT)",
            0,
            "",
        ));
    }
    Ok(AuthRecSet {
        profile: f.profile.unwrap_or_default(),
        objtype,
        entity,
        add: add.unwrap_or_default(),
        remove: remove.unwrap_or_default(),
    })
}

/// Parses DELETE AUTHREC's parameters.
pub(crate) fn delete_authrec(rest: &[Item]) -> Result<AuthRecFilter, SyntaxError> {
    let mut f = authrec_common(rest, |item| {
        Err(err(
            format!(
                "unexpected '{}': DELETE AUTHREC takes PROFILE, OBJTYPE and PRINCIPAL or GROUP",
                item.text
            ),
            item,
        ))
    })?;
    let t = objtype_required(&f, "DELETE")?;
    if t == "QMGR" {
        f.profile = Some(String::new());
    }
    Ok(f)
}

/// Parses DISPLAY AUTHREC's parameters (every one optional).
pub(crate) fn display_authrec(rest: &[Item]) -> Result<AuthRecFilter, SyntaxError> {
    let mut match_ = None;
    let mut f = authrec_common(rest, |item| match item.word.as_str() {
        "MATCH" => {
            if match_.is_some() {
                return Err(twice(item));
            }
            match_ = Some(
                match word_in(item, &["PROFILE", "MEMBERSHIP", "EXACT"])?.as_str() {
                    "PROFILE" => AuthMatch::Profile,
                    "MEMBERSHIP" => AuthMatch::Membership,
                    _ => AuthMatch::Exact,
                },
            );
            Ok(())
        }
        "ALL" | "SERVCOMP" => Ok(()),
        "AUTHLIST" | "ENTITY" | "ENTTYPE" => Ok(()),
        _ => Err(err(
            format!(
                "unexpected '{}': DISPLAY AUTHREC takes PROFILE, OBJTYPE, PRINCIPAL or GROUP",
                item.text
            ),
            item,
        )),
    })?;
    if f.objtype.as_deref() == Some("QMGR") {
        f.profile = Some(String::new());
    }
    f.match_ = match_.unwrap_or_default();
    if f.match_ == AuthMatch::Membership && !matches!(f.entity, Some(Entity::Principal(_))) {
        return Err(SyntaxError::new(
            "MATCH(MEMBERSHIP) needs PRINCIPAL('user'): it adds the records of the user's groups",
            0,
            "MATCH",
        ));
    }
    Ok(f)
}

/// Parses DISPLAY ENTAUTH's parameters: OBJNAME (not with OBJTYPE(QMGR)), OBJTYPE, and one
/// PRINCIPAL or GROUP.
pub(crate) fn display_entauth(rest: &[Item]) -> Result<EntAuthQuery, SyntaxError> {
    let mut objname = None;
    let f = authrec_common(rest, |item| match item.word.as_str() {
        "OBJNAME" => {
            if objname.is_some() {
                return Err(twice(item));
            }
            let p = value_of(item, "OBJNAME('APP.IN')")?;
            let s = scalar(p)?;
            if let Some(problem) = name_problem(&s.value, OBJECT_NAME_LEN_MAX) {
                return Err(SyntaxError::new(
                    format!("not a valid object name: {problem}"),
                    s.col,
                    s.written,
                ));
            }
            objname = Some(s.value);
            Ok(())
        }
        "ALL" | "AUTHLIST" | "SERVCOMP" => Ok(()),
        _ => Err(err(
            format!(
                "unexpected '{}': DISPLAY ENTAUTH takes OBJNAME, OBJTYPE and PRINCIPAL or GROUP",
                item.text
            ),
            item,
        )),
    })?;
    if f.profile.is_some() {
        return Err(SyntaxError::new(
            "DISPLAY ENTAUTH names its object with OBJNAME(...), not PROFILE",
            0,
            "PROFILE",
        ));
    }
    let Some(objtype) = f.objtype else {
        return Err(SyntaxError::new(
            "DISPLAY ENTAUTH needs OBJTYPE(...), e.g. OBJTYPE(QUEUE)",
            0,
            "",
        ));
    };
    let objname = match (objtype.as_str(), objname) {
        ("QMGR", None) => String::new(),
        ("QMGR", Some(_)) => {
            return Err(SyntaxError::new(
                "OBJNAME is not valid with OBJTYPE(QMGR): the object is this queue manager",
                0,
                "OBJNAME",
            ))
        }
        (t, None) => {
            return Err(SyntaxError::new(
                format!("DISPLAY ENTAUTH needs OBJNAME(...) with OBJTYPE({t})"),
                0,
                "",
            ))
        }
        (_, Some(n)) => n,
    };
    let Some(entity) = f.entity else {
        return Err(SyntaxError::new(
            "DISPLAY ENTAUTH needs PRINCIPAL('user') or GROUP('group')",
            0,
            "",
        ));
    };
    Ok(EntAuthQuery {
        objname,
        objtype,
        entity,
    })
}

/// Parses DISPLAY CHLAUTH(profile) [TYPE(...)] [ALL]: the profile pattern and type wanted.
/// DISPLAY CHLAUTH(channel) MATCH(RUNCHECK): the attempt to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCheck {
    pub address: String,
    pub clntuser: String,
    pub sslpeer: Option<String>,
}

/// How DISPLAY CHLAUTH selects records (without MATCH(RUNCHECK)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChlAuthFilter {
    /// MATCH(EXACT): only records whose profile is exactly the name given.
    pub exact: bool,
    /// MATCH(ALL): also every record whose generic profile would match the name given.
    pub all: bool,
    /// Records whose ADDRESS pattern (or BLOCKADDR list) holds this address.
    pub address: Option<String>,
    /// Records for this client user (USERMAP CLNTUSER, or in a BLOCKUSER list).
    pub clntuser: Option<String>,
    /// Records whose SSLPEER filter matches this DN.
    pub sslpeer: Option<String>,
}

/// What DISPLAY CHLAUTH asks: profile, type, MATCH(RUNCHECK) attempt or filter.
type ChlAuthQuery = (String, Option<String>, Option<RunCheck>, ChlAuthFilter);

pub(crate) fn display_chlauth(obj: &Item, rest: &[Item]) -> Result<ChlAuthQuery, SyntaxError> {
    let Some(p) = &obj.value else {
        return Err(err(
            "CHLAUTH needs a profile or pattern in parentheses, e.g. CHLAUTH(*)",
            obj,
        ));
    };
    let name = profile_name(p, CHANNEL_NAME_LEN_MAX, "*", "channel profile")?;
    let mut type_ = None;
    let mut runcheck = false;
    let mut filter = ChlAuthFilter::default();
    let (mut address, mut clntuser, mut sslpeer) = (None, None, None);
    for item in rest {
        match item.word.as_str() {
            "TYPE" => {
                if type_.is_some() {
                    return Err(twice(item));
                }
                let mut words = CHLAUTH_TYPES.to_vec();
                words.push("ALL");
                type_ = Some(word_in(item, &words)?).filter(|t| t != "ALL");
            }
            "MATCH" => {
                let m = word_in(item, &["RUNCHECK", "EXACT", "GENERIC", "ALL"])?;
                runcheck = m == "RUNCHECK";
                filter.exact = m == "EXACT";
                filter.all = m == "ALL";
            }
            "ADDRESS" if item.value.is_some() => address = Some(text(item, 264)?),
            "CLNTUSER" if item.value.is_some() => clntuser = Some(text(item, 64)?),
            "SSLPEER" if item.value.is_some() => sslpeer = Some(text(item, 1024)?),
            "ALL" | "DESCR" | "ALTDATE" | "ALTTIME" | "USERSRC" | "MCAUSER" | "ADDRESS"
            | "WARN" | "CUSTOM" | "CHCKCLNT" | "CLNTUSER" | "SSLPEER" => {}
            _ => {
                return Err(err(
                    format!(
                        "unexpected '{}': DISPLAY CHLAUTH takes TYPE(...), MATCH(...) and ALL",
                        item.text
                    ),
                    item,
                ))
            }
        }
    }
    if !runcheck {
        filter.address = address;
        filter.clntuser = clntuser;
        filter.sslpeer = sslpeer;
        return Ok((name, type_, None, filter));
    }
    if name.contains('*') {
        return Err(err(
            "MATCH(RUNCHECK) checks one channel: give its name, not a pattern",
            obj,
        ));
    }
    let Some(address) = address else {
        return Err(err(
            "MATCH(RUNCHECK) needs ADDRESS('a.b.c.d'): the address the connection comes from",
            obj,
        ));
    };
    Ok((
        name,
        type_,
        Some(RunCheck {
            address,
            clntuser: clntuser.unwrap_or_default(),
            sslpeer,
        }),
        filter,
    ))
}

#[cfg(test)]
mod tests {
    use crate::command::Command;
    use crate::parse;

    fn err(text: &str) -> String {
        parse(text).unwrap_err().message
    }

    #[test]
    fn set_chlauth_checks_what_each_type_needs() {
        let Command::SetChlAuth(s) = parse(
            "SET CHLAUTH('APP.*') TYPE(ADDRESSMAP) ADDRESS('10.0.*') USERSRC(CHANNEL) ACTION(REPLACE)",
        )
        .unwrap() else {
            panic!("not SET CHLAUTH")
        };
        assert_eq!(s.profile, "APP.*");
        assert_eq!(s.key(), "ADDRESSMAP|APP.*|ADDRESS=10.0.*");
        assert!(err("SET CHLAUTH(X) ADDRESS('1')").contains("needs TYPE"));
        assert!(err("SET CHLAUTH(X) TYPE(ADDRESSMAP) USERSRC(CHANNEL)").contains("ADDRESS"));
        assert!(err("SET CHLAUTH(X) TYPE(BLOCKUSER) ADDRESS('1')").contains("not valid with"));
        assert!(err("SET CHLAUTH(X) TYPE(BLOCKADDR) ADDRLIST('1')").contains("CHLAUTH('*')"));
        assert!(err("SET CHLAUTH(X) TYPE(USERMAP) CLNTUSER('a')").contains("MCAUSER"));
        assert!(err("SET CHLAUTH(X) TYPE(NOPE)").contains("must be one of"));
        assert!(
            err("SET CHLAUTH(X) TYPE(BLOCKUSER) USERLIST(a) ACTION(REMOVEALL)")
                .contains("takes no USERLIST")
        );
        let Command::SetChlAuth(s) =
            parse("SET CHLAUTH(*) TYPE(BLOCKUSER) USERLIST('*MQADMIN', nobody)").unwrap()
        else {
            panic!()
        };
        assert_eq!(s.attrs, [("USERLIST".into(), "*MQADMIN,NOBODY".into())]);
    }

    #[test]
    fn set_authrec_expands_and_checks_authorities() {
        let Command::SetAuthRec(s) = parse(
            "SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(PUT,GET,INQ)",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(s.add, ["GET", "INQ", "PUT"]);
        assert_eq!(s.profile, "APP.**");
        assert!(err("SET AUTHREC OBJTYPE(QUEUE) PRINCIPAL(a) AUTHADD(GET)").contains("PROFILE"));
        assert!(err("SET AUTHREC PROFILE(Q) OBJTYPE(QUEUE) AUTHADD(GET)").contains("PRINCIPAL"));
        assert!(err("SET AUTHREC PROFILE(Q) OBJTYPE(QUEUE) GROUP(g)").contains("AUTHADD"));
        assert!(
            err("SET AUTHREC PROFILE(Q) OBJTYPE(QUEUE) GROUP(g) AUTHADD(EAT)")
                .contains("not an authority")
        );
        assert!(
            err("SET AUTHREC PROFILE(Q) OBJTYPE(QMGR) GROUP(g) AUTHADD(CONNECT)")
                .contains("OBJTYPE(QMGR)")
        );
        assert!(
            err("SET AUTHREC PROFILE(Q) OBJTYPE(QUEUE) GROUP(g) PRINCIPAL(p) AUTHADD(GET)")
                .contains("not both")
        );
        assert!(parse("SET AUTHREC OBJTYPE(QMGR) GROUP('mqclient') AUTHADD(CONNECT,INQ)").is_ok());
    }

    #[test]
    fn display_authrec_takes_match_and_display_entauth_names_one_object() {
        use crate::security::{AuthMatch, Entity};
        let Command::DisplayAuthRec(f) =
            parse("DISPLAY AUTHREC PROFILE(A.B) OBJTYPE(QUEUE) PRINCIPAL(app) MATCH(MEMBERSHIP)")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(f.match_, AuthMatch::Membership);
        let Command::DisplayAuthRec(f) = parse("DISPLAY AUTHREC").unwrap() else {
            panic!()
        };
        assert_eq!(f.match_, AuthMatch::Profile);
        assert!(err("DISPLAY AUTHREC GROUP(g) MATCH(MEMBERSHIP)").contains("PRINCIPAL"));
        let Command::DisplayEntAuth(q) =
            parse("DISPLAY ENTAUTH OBJNAME('Q1') OBJTYPE(QUEUE) PRINCIPAL('app')").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (q.objname.as_str(), q.objtype.as_str(), q.entity),
            ("Q1", "QUEUE", Entity::Principal("app".into()))
        );
        assert!(parse("DISPLAY ENTAUTH OBJTYPE(QMGR) GROUP(g)").is_ok());
        assert!(err("DISPLAY ENTAUTH OBJTYPE(QUEUE) GROUP(g)").contains("OBJNAME"));
        assert!(err("DISPLAY ENTAUTH OBJNAME(Q) OBJTYPE(QUEUE)").contains("PRINCIPAL"));
    }
}
