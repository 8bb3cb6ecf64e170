//! Object authorities (MQ's OAM): authority records (profile, object type, principal or group,
//! authorities), generic profiles (`*`, `**`, `?`), the most specific profile per entity, the
//! union over a principal's groups, and the answer to "may this principal do this to this object",
//! with the record that granted it or the authorities that were missing.
//!
//! The rules, as MQ has them:
//! - A profile is split into qualifiers on `.`. Within a qualifier `?` stands for one character
//!   and `*` for any number of characters (none included); a qualifier that is exactly `**`
//!   stands for any number of whole qualifiers, none included (`APP.**` matches `APP` and
//!   `APP.X.Y`; `**` matches every name). A profile without wildcards names one object.
//! - For one entity (a principal, or a group), the most specific profile that matches the
//!   object's name decides, alone: its authorities are the entity's, whatever less specific
//!   profiles say. Specificity: a profile without wildcards beats every generic one; two generic
//!   profiles are compared from the left, character by character, and the first difference
//!   decides: a literal character beats `?`, which beats `*`, which beats `**`, which beats the
//!   end of the profile (so `APP.Q*` beats `APP.*`, `A?C` beats `A*`, `APP.**.B` beats `APP.**`).
//! - A principal holds the union of what its own records and those of each of its groups give.
//! - Records of OBJTYPE(QMGR) have no profile: they are about this queue manager.
//!
//! [`Oam::build`] compiles the records once (the caller rebuilds when they change);
//! [`Oam::check`] is then a few hash look-ups and pattern matches on a name of at most 48
//! characters.

mod profile;

use std::collections::HashMap;
use std::fmt;

use ferrymq_types::authority::AUTHORITIES;

pub use profile::{compare_specificity, matches, Profile};

/// A set of authorities: bit `i` is `AUTHORITIES[i]` of `ferrymq_types::authority`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Authorities(u32);

macro_rules! authority_consts {
    ($($name:ident = $bit:expr),* $(,)?) => {
        impl Authorities {
            $(pub const $name: Authorities = Authorities(1 << $bit);)*
        }
    };
}

authority_consts! {
    ALTUSR = 0, BROWSE = 1, CHG = 2, CLR = 3, CONNECT = 4, CRT = 5, CTRL = 6, CTRLX = 7,
    DLT = 8, DSP = 9, GET = 10, INQ = 11, PASSALL = 12, PASSID = 13, PUB = 14, PUT = 15,
    RESUME = 16, SET = 17, SETALL = 18, SETID = 19, SUB = 20, SYSTEM = 21,
}

impl Authorities {
    pub const NONE: Authorities = Authorities(0);
    pub const ALL: Authorities = Authorities((1 << 22) - 1);

    /// The set named by a list of authority names and groupings (`PUT`, `ALLMQI`, ...); None
    /// if one of them is neither.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Option<Authorities> {
        let mut out = Authorities::NONE;
        for n in names {
            for a in ferrymq_types::authority::expand(n.as_ref())? {
                out = out | Authorities::named(a)?;
            }
        }
        Some(out)
    }

    /// One authority by its name (`PUT`).
    pub fn named(name: &str) -> Option<Authorities> {
        AUTHORITIES
            .iter()
            .position(|a| a.eq_ignore_ascii_case(name))
            .map(|i| Authorities(1 << i))
    }

    /// The set an AUTHLIST value stands for (`GET,PUT`, `NONE`, empty); names it does not
    /// know are skipped (a record written by a newer version keeps what this one knows).
    pub fn from_authlist(list: &str) -> Authorities {
        list.split(',')
            .filter_map(|a| Authorities::from_names(&[a.trim()]))
            .fold(Authorities::NONE, |acc, a| acc | a)
    }

    pub fn contains(self, other: Authorities) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// What of `needed` this set lacks.
    pub fn missing(self, needed: Authorities) -> Authorities {
        Authorities(needed.0 & !self.0)
    }

    /// The names of the authorities held, in AUTHLIST order.
    pub fn names(self) -> Vec<&'static str> {
        AUTHORITIES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, a)| *a)
            .collect()
    }
}

impl std::ops::BitOr for Authorities {
    type Output = Authorities;
    fn bitor(self, o: Authorities) -> Authorities {
        Authorities(self.0 | o.0)
    }
}

impl fmt::Display for Authorities {
    /// As AUTHLIST shows them: `GET,PUT`, or `NONE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&self.names().join(","))
        }
    }
}

/// Who a record is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    Principal(String),
    Group(String),
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entity::Principal(n) => write!(f, "PRINCIPAL({n})"),
            Entity::Group(n) => write!(f, "GROUP({n})"),
        }
    }
}

/// One authority record, as SET AUTHREC stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// OBJTYPE: `QUEUE`, `QMGR`, `CHANNEL`, ...
    pub objtype: String,
    /// The profile (empty for OBJTYPE(QMGR)).
    pub profile: String,
    pub entity: Entity,
    pub auths: Authorities,
}

/// A user and the groups it belongs to, as a check sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Principal {
    pub user: String,
    pub groups: Vec<String>,
}

/// A record that took part in a decision: the most specific matching profile of one entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consulted {
    pub entity: Entity,
    pub profile: String,
    pub auths: Authorities,
}

impl fmt::Display for Consulted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.profile.is_empty() {
            write!(f, "{} AUTHLIST({})", self.entity, self.auths)
        } else {
            write!(
                f,
                "PROFILE({}) {} AUTHLIST({})",
                self.profile, self.entity, self.auths
            )
        }
    }
}

/// What a principal holds on an object, and the records that decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effective {
    pub auths: Authorities,
    /// One per entity (the principal, each group) that has a matching profile.
    pub consulted: Vec<Consulted>,
}

/// A check that passed: the records that gave the authorities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Granted {
    pub by: Vec<Consulted>,
}

/// A check that failed: what was missing and which records were consulted (none: no record of
/// the principal or its groups matches the object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub missing: Authorities,
    pub consulted: Vec<Consulted>,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "missing authority {}; ", self.missing)?;
        if self.consulted.is_empty() {
            f.write_str("no authority record of the user or its groups matches the object")
        } else {
            let list: Vec<String> = self.consulted.iter().map(|c| c.to_string()).collect();
            write!(
                f,
                "the records that apply do not grant it: {}",
                list.join("; ")
            )
        }
    }
}

/// The compiled records: per object type and entity, the profiles from most to least specific.
#[derive(Clone, Debug, Default)]
pub struct Oam {
    index: HashMap<(String, Entity), Vec<(Profile, Authorities)>>,
}

impl Oam {
    /// Compiles the records. Two records with the same type, profile and entity (not made by
    /// SET AUTHREC, which keeps one) are merged.
    pub fn build(records: impl IntoIterator<Item = Record>) -> Oam {
        let mut index: HashMap<(String, Entity), Vec<(Profile, Authorities)>> = HashMap::new();
        for r in records {
            let list = index.entry((r.objtype, r.entity)).or_default();
            match list.iter_mut().find(|(p, _)| p.text() == r.profile) {
                Some((_, a)) => *a = *a | r.auths,
                None => list.push((Profile::new(&r.profile), r.auths)),
            }
        }
        for list in index.values_mut() {
            list.sort_by(|(a, _), (b, _)| compare_specificity(b, a));
        }
        Oam { index }
    }

    /// The number of records compiled.
    pub fn len(&self) -> usize {
        self.index.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The most specific profile of `entity` that matches `name` for `objtype`.
    fn decide(&self, objtype: &str, entity: &Entity, name: &str) -> Option<Consulted> {
        // Building a key would allocate; the map is small and this runs at open, not per put.
        let list = self.index.get(&(objtype.to_string(), entity.clone()))?;
        let qmgr = objtype == "QMGR";
        list.iter()
            .find(|(p, _)| qmgr || p.matches(name))
            .map(|(p, a)| Consulted {
                entity: entity.clone(),
                profile: p.text().to_string(),
                auths: *a,
            })
    }

    /// What `who` holds on the object `name` of type `objtype` (for OBJTYPE(QMGR) the name is
    /// not looked at).
    pub fn effective(&self, who: &Principal, objtype: &str, name: &str) -> Effective {
        let mut consulted = Vec::new();
        let mut auths = Authorities::NONE;
        let entities = std::iter::once(Entity::Principal(who.user.clone()))
            .chain(who.groups.iter().map(|g| Entity::Group(g.clone())));
        for e in entities {
            if let Some(c) = self.decide(objtype, &e, name) {
                auths = auths | c.auths;
                consulted.push(c);
            }
        }
        Effective { auths, consulted }
    }

    /// Whether `who` holds every authority of `needed` on the object.
    pub fn check(
        &self,
        who: &Principal,
        objtype: &str,
        name: &str,
        needed: Authorities,
    ) -> Result<Granted, Denied> {
        let eff = self.effective(who, objtype, name);
        let missing = eff.auths.missing(needed);
        if missing.is_empty() {
            Ok(Granted { by: eff.consulted })
        } else {
            Err(Denied {
                missing,
                consulted: eff.consulted,
            })
        }
    }
}

#[cfg(test)]
mod tests;
