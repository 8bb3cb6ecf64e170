//! Attribute tables, one per object type: every attribute's MQSC name, its abbreviations, the values
//! it takes, and whether FerryMQ acts on it today. Attributes FerryMQ does not act on are still
//! accepted, stored and displayed, because MQ administrators' scripts set them routinely and a
//! script that fails on them would be useless; the response flags them instead.

mod channel;
mod other;
mod qmgr;
mod queue;
mod topic;

pub use channel::CHANNEL;
pub use other::{AUTHINFO, LISTENER};
pub use qmgr::{CMDLEVEL, QMGR};
pub use queue::{QALIAS, QLOCAL, QMODEL, QREMOTE};
pub use topic::{TOPIC, TOPICSTR_LEN_MAX};

use crate::command::ObjType;

/// The values an attribute takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// An integer in an inclusive range.
    Int { min: i64, max: i64 },
    /// An integer in a range, or one of a few words (e.g. MAXFSIZE(DEFAULT)).
    IntOrWord {
        min: i64,
        max: i64,
        words: &'static [&'static str],
    },
    /// One of a fixed set of words.
    Enum(&'static [&'static str]),
    /// Free text of at most `max_len` bytes.
    Str { max_len: usize },
    /// The name of another MQ object (a queue, namelist, process or queue manager), or blank.
    Name,
    /// A keyword that stands alone (SHARE/NOSHARE): the attribute's name turns it on, `off` off.
    Switch { off: &'static str },
    /// Shown by DISPLAY, never set (CURDEPTH, IPPROCS, ...).
    ReadOnly,
}

/// One attribute of an object type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrSpec {
    /// Canonical MQSC name, as DISPLAY shows it.
    pub name: &'static str,
    pub abbrevs: &'static [&'static str],
    pub kind: ValueKind,
    /// Whether FerryMQ acts on the attribute today (others are stored and displayed only).
    pub acted_on: bool,
    /// What DISPLAY shows for a stored-only attribute that was never set (MQ's default).
    pub default: &'static str,
    /// The subtypes (CHLTYPE or AUTHTYPE values) the attribute belongs to; empty means all.
    pub only: &'static [&'static str],
}

impl AttrSpec {
    /// An attribute FerryMQ acts on; its value lives in a typed field of the definition.
    pub const fn acted(name: &'static str, kind: ValueKind) -> AttrSpec {
        AttrSpec {
            name,
            abbrevs: &[],
            kind,
            acted_on: true,
            default: "",
            only: &[],
        }
    }

    /// An attribute stored and displayed but not acted on, with the value shown until it is set.
    pub const fn stored(name: &'static str, kind: ValueKind, default: &'static str) -> AttrSpec {
        AttrSpec {
            name,
            abbrevs: &[],
            kind,
            acted_on: false,
            default,
            only: &[],
        }
    }

    /// Marks a stored attribute (with its MQ default) as one FerryMQ acts on.
    pub const fn honoured(self) -> AttrSpec {
        let mut s = self;
        s.acted_on = true;
        s
    }

    pub const fn abbr(self, abbrevs: &'static [&'static str]) -> AttrSpec {
        let mut s = self;
        s.abbrevs = abbrevs;
        s
    }

    /// The value DISPLAY shows when a definition does not hold the attribute.
    pub const fn def(self, default: &'static str) -> AttrSpec {
        let mut s = self;
        s.default = default;
        s
    }

    pub const fn only(self, only: &'static [&'static str]) -> AttrSpec {
        let mut s = self;
        s.only = only;
        s
    }

    /// Whether `word` (upper case) names this attribute: its name, an abbreviation, or a
    /// switch's off word.
    pub fn is_named(&self, word: &str) -> bool {
        self.name == word
            || self.abbrevs.contains(&word)
            || matches!(self.kind, ValueKind::Switch { off } if off == word)
    }

    /// Whether the attribute belongs to objects of subtype `sub` (a CHLTYPE or AUTHTYPE).
    pub fn applies_to(&self, sub: &str) -> bool {
        self.only.is_empty() || self.only.contains(&sub)
    }

    /// True when DEFINE and ALTER may set it.
    pub fn settable(&self) -> bool {
        !matches!(self.kind, ValueKind::ReadOnly)
    }
}

/// The attribute table of an object type.
pub fn table(kind: ObjType) -> &'static [AttrSpec] {
    match kind {
        ObjType::QLocal => QLOCAL,
        ObjType::QAlias => QALIAS,
        ObjType::QModel => QMODEL,
        ObjType::QRemote => QREMOTE,
        ObjType::Channel => CHANNEL,
        ObjType::Listener => LISTENER,
        ObjType::AuthInfo => AUTHINFO,
        ObjType::Topic => TOPIC,
    }
}

/// Finds an attribute by name or abbreviation (upper case) in a table.
pub fn lookup(table: &'static [AttrSpec], word: &str) -> Option<&'static AttrSpec> {
    table.iter().find(|a| a.is_named(word))
}

/// Finds an attribute of any queue type (for DISPLAY QUEUE, which covers them all).
pub fn lookup_any_queue(word: &str) -> Option<&'static AttrSpec> {
    [QLOCAL, QMODEL, QALIAS, QREMOTE]
        .into_iter()
        .find_map(|t| lookup(t, word))
}

/// When an object was created and last altered: shown by DISPLAY of every object type (MQ's
/// formats, UTC), never set.
pub const ALTDATE: AttrSpec = AttrSpec::acted("ALTDATE", ValueKind::ReadOnly);
pub const ALTTIME: AttrSpec = AttrSpec::acted("ALTTIME", ValueKind::ReadOnly);
pub const CRDATE: AttrSpec = AttrSpec::acted("CRDATE", ValueKind::ReadOnly);
pub const CRTIME: AttrSpec = AttrSpec::acted("CRTIME", ValueKind::ReadOnly);

/// Whether an attribute is one of the four creation and alteration times.
pub fn is_time_attr(name: &str) -> bool {
    matches!(name, "ALTDATE" | "ALTTIME" | "CRDATE" | "CRTIME")
}

/// Enumerated value lists shared by several tables.
pub mod words {
    pub const ENABLED: &[&str] = &["ENABLED", "DISABLED"];
    pub const YES_NO: &[&str] = &["YES", "NO"];
    pub const ON_OFF_QMGR: &[&str] = &["QMGR", "ON", "OFF"];
    pub const MON_LEVELS_QMGR: &[&str] = &["QMGR", "OFF", "LOW", "MEDIUM", "HIGH"];
    pub const CHLTYPES: &[&str] = &["SVRCONN", "SDR", "RCVR", "CLNTCONN", "SVR", "RQSTR"];
    pub const AUTHTYPES: &[&str] = &["IDPWOS", "IDPWLDAP", "CRLLDAP", "OCSP"];
}

/// Attributes DISPLAY QSTATUS can show (both TYPE(QUEUE) and TYPE(HANDLE) rows).
pub const QSTATUS_FIELDS: &[&str] = &[
    "QUEUE", "TYPE", "CURDEPTH", "IPPROCS", "OPPROCS", "UNCOM", "MSGAGE", "LGETDATE", "LGETTIME",
    "LPUTDATE", "LPUTTIME", "CONN", "APPLTAG", "USERID", "INPUT", "OUTPUT", "BROWSE", "INQUIRE",
    "SET",
];

/// Attributes DISPLAY CONN can show (connection and handle rows).
pub const CONN_FIELDS: &[&str] = &[
    "CONN", "TYPE", "APPLTAG", "USERID", "UOWSTATE", "OBJNAME", "OBJTYPE", "OPENOPTS",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn all_tables() -> Vec<(&'static str, &'static [AttrSpec])> {
        vec![
            ("QLOCAL", QLOCAL),
            ("QALIAS", QALIAS),
            ("QMODEL", QMODEL),
            ("QREMOTE", QREMOTE),
            ("CHANNEL", CHANNEL),
            ("LISTENER", LISTENER),
            ("AUTHINFO", AUTHINFO),
            ("TOPIC", TOPIC),
            ("QMGR", QMGR),
        ]
    }

    #[test]
    fn no_table_has_two_attributes_answering_to_one_word() {
        for (t, table) in all_tables() {
            let mut seen = std::collections::HashSet::new();
            for a in table {
                let mut words = vec![a.name];
                words.extend(a.abbrevs);
                if let ValueKind::Switch { off } = a.kind {
                    words.push(off);
                }
                for w in words {
                    assert!(seen.insert(w), "{t}: '{w}' names two attributes");
                }
            }
        }
    }

    #[test]
    fn stored_only_defaults_are_values_the_attribute_accepts() {
        for (t, table) in all_tables() {
            for a in table.iter().filter(|a| !a.acted_on) {
                let ok = match a.kind {
                    ValueKind::Enum(w) => w.contains(&a.default),
                    ValueKind::Int { min, max } => a
                        .default
                        .parse::<i64>()
                        .is_ok_and(|v| (min..=max).contains(&v)),
                    ValueKind::IntOrWord { min, max, words } => {
                        words.contains(&a.default)
                            || a.default
                                .parse::<i64>()
                                .is_ok_and(|v| (min..=max).contains(&v))
                    }
                    ValueKind::Str { max_len } => a.default.len() <= max_len,
                    ValueKind::Name => a.default.len() <= 48,
                    ValueKind::Switch { off } => a.default == a.name || a.default == off,
                    ValueKind::ReadOnly => true,
                };
                assert!(
                    ok,
                    "{t}: default '{}' of {} is not valid",
                    a.default, a.name
                );
            }
        }
    }

    #[test]
    fn the_acted_on_queue_attributes_are_the_ones_ferrymq_implements() {
        let acted = |t: &[AttrSpec]| -> Vec<&str> {
            t.iter()
                .filter(|a| a.acted_on && a.settable())
                .map(|a| a.name)
                .collect()
        };
        assert_eq!(
            acted(QLOCAL),
            [
                "DESCR", "MAXDEPTH", "MAXMSGL", "DEFPSIST", "DEFPRTY", "MSGDLVSQ", "PUT", "GET",
                "BOTHRESH", "BOQNAME", "USAGE"
            ]
        );
        assert_eq!(
            acted(QALIAS),
            ["DESCR", "TARGET", "PUT", "GET", "DEFPSIST", "DEFPRTY"]
        );
        assert_eq!(
            acted(QREMOTE),
            ["DESCR", "RNAME", "RQMNAME", "XMITQ", "PUT", "DEFPSIST", "DEFPRTY"]
        );
        assert_eq!(acted(QMGR), ["DESCR", "MAXMSGL", "DEADQ", "MAXUMSGS"]);
        let mut model = acted(QLOCAL);
        model.push("DEFTYPE");
        assert_eq!(acted(QMODEL), model);
    }
}
