//! Channel authentication rules (CHLAUTH): matching a connection attempt — channel name, remote
//! address, asserted client user, certificate DN, remote queue manager — against the stored rules
//! (generic channel profiles, address patterns and ranges), MQ's precedence between them, and the
//! decision: refuse (BLOCKADDR, BLOCKUSER, USERSRC(NOACCESS)), map to an MCA user (USERSRC(MAP)),
//! or take the channel's own (USERSRC(CHANNEL)). Also answers DISPLAY CHLAUTH MATCH(RUNCHECK).
//!
//! # Order of evaluation
//!
//! 1. BLOCKADDR (profile `*` only): the address alone decides, so the listener asks
//!    [`blocked_address`] as soon as it accepts a socket, before any frame is read.
//! 2. The mapping rules (SSLPEERMAP, USERMAP, QMGRMAP, ADDRESSMAP) that match the attempt are
//!    ranked, and the first one decides ([`mapping`]):
//!    - the channel profile first: an exact profile beats a generic one, and of two generic
//!      profiles the one with more literal characters wins (`APP.SVR.*` before `APP.*` before
//!      `*`);
//!    - then, for one profile, the type: SSLPEERMAP, then USERMAP and QMGRMAP (a client asserts a
//!      user, a queue manager a name: one attempt never matches both), then ADDRESSMAP — what
//!      identifies the partner more strongly wins over where it connects from;
//!    - then a rule that also restricts the address beats one that does not, and of two address
//!      patterns the one with more exact parts (then ranges) wins;
//!    - finally the record key, so that the choice never depends on the order rules were stored.
//! 3. BLOCKUSER, of the most specific channel profile that has one, against the user the
//!    connection will run as once mapping, the channel's MCAUSER and authentication have had
//!    their say ([`blocked_user`]); `*MQADMIN` in its list stands for every administrative user.
//!
//! A rule with WARN(YES) that would refuse an attempt only reports it: the caller logs it and lets
//! the attempt through, as MQ does.
//!
//! Certificate DN filters (SSLPEER) are matched through a function the caller passes
//! ([`DnMatch`]), so that the TLS module's matcher serves here unchanged; [`dn_matches_simple`] is
//! a small one for callers without TLS.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};

/// Matches an SSLPEER filter against a certificate's distinguished name.
pub type DnMatch = fn(filter: &str, dn: &str) -> bool;

/// The type of a CHLAUTH record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleType {
    BlockUser,
    BlockAddr,
    SslPeerMap,
    UserMap,
    QmgrMap,
    AddressMap,
}

impl RuleType {
    pub fn parse(s: &str) -> Option<RuleType> {
        Some(match s {
            "BLOCKUSER" => RuleType::BlockUser,
            "BLOCKADDR" => RuleType::BlockAddr,
            "SSLPEERMAP" => RuleType::SslPeerMap,
            "USERMAP" => RuleType::UserMap,
            "QMGRMAP" => RuleType::QmgrMap,
            "ADDRESSMAP" => RuleType::AddressMap,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            RuleType::BlockUser => "BLOCKUSER",
            RuleType::BlockAddr => "BLOCKADDR",
            RuleType::SslPeerMap => "SSLPEERMAP",
            RuleType::UserMap => "USERMAP",
            RuleType::QmgrMap => "QMGRMAP",
            RuleType::AddressMap => "ADDRESSMAP",
        }
    }

    /// Rank of a mapping type within one channel profile: lower wins.
    fn rank(self) -> u8 {
        match self {
            RuleType::SslPeerMap => 0,
            RuleType::UserMap | RuleType::QmgrMap => 1,
            RuleType::AddressMap => 2,
            RuleType::BlockUser | RuleType::BlockAddr => 3,
        }
    }
}

/// USERSRC of a mapping rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSrc {
    /// Run as the rule's MCAUSER.
    Map,
    /// Refuse the connection.
    NoAccess,
    /// Run as the channel would without the rule.
    Channel,
}

/// One stored CHLAUTH record, as the matcher reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The channel profile: a name, or a pattern with `*`.
    pub profile: String,
    pub type_: RuleType,
    pub address: Option<String>,
    pub clntuser: Option<String>,
    pub sslpeer: Option<String>,
    pub qmname: Option<String>,
    pub userlist: Vec<String>,
    pub addrlist: Vec<String>,
    pub usersrc: UserSrc,
    pub mcauser: String,
    pub warn: bool,
}

impl Rule {
    /// A rule from a stored record's MQSC attributes (CHLAUTH, TYPE, ADDRESS, ...); `None` for a
    /// record without a known type.
    pub fn from_attrs(attrs: &BTreeMap<String, String>) -> Option<Rule> {
        let get = |k: &str| attrs.get(k).cloned();
        let list = |k: &str| -> Vec<String> {
            get(k)
                .map(|v| {
                    v.split(',')
                        .map(|x| x.trim().to_string())
                        .filter(|x| !x.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(Rule {
            profile: get("CHLAUTH")?,
            type_: RuleType::parse(attrs.get("TYPE")?)?,
            address: get("ADDRESS"),
            clntuser: get("CLNTUSER"),
            sslpeer: get("SSLPEER"),
            qmname: get("QMNAME"),
            userlist: list("USERLIST"),
            addrlist: list("ADDRLIST"),
            usersrc: match attrs.get("USERSRC").map(String::as_str) {
                Some("NOACCESS") => UserSrc::NoAccess,
                Some("CHANNEL") => UserSrc::Channel,
                _ => UserSrc::Map,
            },
            mcauser: get("MCAUSER").unwrap_or_default(),
            warn: attrs.get("WARN").map(String::as_str) == Some("YES"),
        })
    }

    /// How the rule is named in logs and DISPLAY CHLAUTH MATCH(RUNCHECK) answers.
    pub fn describe(&self) -> String {
        let mut s = format!("CHLAUTH('{}') TYPE({})", self.profile, self.type_.name());
        for (k, v) in [
            ("SSLPEER", &self.sslpeer),
            ("CLNTUSER", &self.clntuser),
            ("QMNAME", &self.qmname),
            ("ADDRESS", &self.address),
        ] {
            if let Some(v) = v {
                s.push_str(&format!(" {k}('{v}')"));
            }
        }
        if self.type_ == RuleType::BlockAddr {
            s.push_str(&format!(" ADDRLIST('{}')", self.addrlist.join("','")));
        }
        if self.type_ == RuleType::BlockUser {
            s.push_str(&format!(" USERLIST('{}')", self.userlist.join("','")));
        }
        if !matches!(self.type_, RuleType::BlockAddr | RuleType::BlockUser) {
            match self.usersrc {
                UserSrc::Map => s.push_str(&format!(" USERSRC(MAP) MCAUSER('{}')", self.mcauser)),
                UserSrc::NoAccess => s.push_str(" USERSRC(NOACCESS)"),
                UserSrc::Channel => s.push_str(" USERSRC(CHANNEL)"),
            }
        }
        s
    }
}

/// What is known of a connection attempt when the rules are asked.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    pub channel: &'a str,
    /// The peer's IP address as text (IPv4, IPv6 or IPv4-mapped IPv6).
    pub address: &'a str,
    /// The user id the client asserts (empty: none).
    pub client_user: &'a str,
    /// The peer certificate's distinguished name; `None` without TLS.
    pub cert_dn: Option<&'a str>,
    /// The partner queue manager's name (queue manager channels only).
    pub remote_qmgr: Option<&'a str>,
}

/// What the mapping rules decide for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping<'r> {
    /// No mapping rule matches: the channel's own rules apply.
    None,
    /// Run as this user (USERSRC(MAP)).
    Map(&'r Rule, String),
    /// Refused by USERSRC(NOACCESS).
    NoAccess(&'r Rule),
    /// Let through as the channel would be (USERSRC(CHANNEL)).
    Channel(&'r Rule),
}

impl<'r> Mapping<'r> {
    pub fn rule(&self) -> Option<&'r Rule> {
        match self {
            Mapping::None => None,
            Mapping::Map(r, _) | Mapping::NoAccess(r) | Mapping::Channel(r) => Some(r),
        }
    }
}

/// The BLOCKADDR rule whose ADDRLIST holds `address`, if any (WARN(YES) rules included: the
/// caller logs those and lets the socket through).
pub fn blocked_address<'r>(rules: &'r [Rule], address: &str) -> Option<&'r Rule> {
    let ip = parse_ip(address)?;
    rules
        .iter()
        .filter(|r| r.type_ == RuleType::BlockAddr)
        .filter(|r| r.addrlist.iter().any(|p| address_matches(p, ip)))
        .min_by(|x, y| tie_key(x).cmp(&tie_key(y)))
}

/// Orders rules that decide alike, so that which one is reported (RUNCHECK, the error log) never
/// depends on the order the records are stored in.
#[allow(clippy::type_complexity)]
fn tie_key(
    r: &Rule,
) -> (
    &str,
    RuleType,
    &Option<String>,
    &Option<String>,
    &Option<String>,
    &Option<String>,
    &[String],
    &[String],
    u8,
    &str,
    bool,
) {
    (
        &r.profile,
        r.type_,
        &r.address,
        &r.clntuser,
        &r.sslpeer,
        &r.qmname,
        &r.userlist,
        &r.addrlist,
        r.usersrc as u8,
        &r.mcauser,
        r.warn,
    )
}

/// The mapping rule that decides `a`, by the order in the module documentation.
pub fn mapping<'r>(rules: &'r [Rule], a: &Attempt<'_>, dn_match: DnMatch) -> Mapping<'r> {
    let ip = parse_ip(a.address);
    let best = rules
        .iter()
        .filter(|r| {
            !matches!(r.type_, RuleType::BlockAddr | RuleType::BlockUser)
                && profile_matches(&r.profile, a.channel)
                && rule_matches(r, a, ip, dn_match)
        })
        .min_by(|x, y| {
            let key = |r: &Rule| {
                (
                    std::cmp::Reverse(profile_specificity(&r.profile)),
                    r.type_.rank(),
                    std::cmp::Reverse(r.address.as_deref().map_or(0, address_specificity) + 1),
                    r.profile.clone(),
                    r.address.clone(),
                    r.clntuser.clone(),
                    r.sslpeer.clone(),
                    r.qmname.clone(),
                    // Records with one key are one record in the store; should the matcher be
                    // given two, the choice still does not depend on their order.
                    r.usersrc as u8,
                    r.mcauser.clone(),
                    r.type_,
                )
            };
            key(x).cmp(&key(y))
        });
    match best {
        None => Mapping::None,
        Some(r) => match r.usersrc {
            UserSrc::Map => Mapping::Map(r, r.mcauser.clone()),
            UserSrc::NoAccess => Mapping::NoAccess(r),
            UserSrc::Channel => Mapping::Channel(r),
        },
    }
}

/// The BLOCKUSER rule of the most specific channel profile that has one, if its USERLIST names
/// `user` (or holds `*MQADMIN` and `is_admin(user)`).
pub fn blocked_user<'r>(
    rules: &'r [Rule],
    channel: &str,
    user: &str,
    is_admin: &dyn Fn(&str) -> bool,
) -> Option<&'r Rule> {
    let candidates = || {
        rules
            .iter()
            .filter(|r| r.type_ == RuleType::BlockUser && profile_matches(&r.profile, channel))
    };
    // The most specific profile decides; should it hold several records (the store keeps one
    // per profile, but the matcher does not rely on it), any of them blocks, whatever their order.
    let best = candidates()
        .map(|r| (profile_specificity(&r.profile), &r.profile))
        .max_by(|x, y| x.0.cmp(&y.0).then_with(|| y.1.cmp(x.1)))?;
    candidates()
        .filter(|r| &r.profile == best.1)
        .filter(|r| {
            r.userlist.iter().any(|u| {
                if u.eq_ignore_ascii_case("*MQADMIN") {
                    is_admin(user)
                } else {
                    u == user
                }
            })
        })
        .min_by(|x, y| tie_key(x).cmp(&tie_key(y)))
}

/// Whether one rule's own filters (address, user, DN, queue manager) match `a`.
fn rule_matches(r: &Rule, a: &Attempt<'_>, ip: Option<IpAddr>, dn_match: DnMatch) -> bool {
    if let Some(p) = &r.address {
        if !ip.is_some_and(|ip| address_matches(p, ip)) {
            return false;
        }
    }
    match r.type_ {
        RuleType::AddressMap => r.address.is_some(),
        RuleType::UserMap => {
            r.clntuser.as_deref() == Some(a.client_user) && !a.client_user.is_empty()
        }
        RuleType::SslPeerMap => match (&r.sslpeer, a.cert_dn) {
            (Some(f), Some(dn)) => dn_match(f, dn),
            _ => false,
        },
        RuleType::QmgrMap => match (&r.qmname, a.remote_qmgr) {
            (Some(p), Some(q)) => profile_matches(p, q),
            _ => false,
        },
        RuleType::BlockAddr | RuleType::BlockUser => false,
    }
}

/// Whether a channel profile (`*` stands for any run of characters) matches a channel name.
pub fn profile_matches(profile: &str, name: &str) -> bool {
    glob(profile.as_bytes(), name.as_bytes())
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative wildcard match with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// How specific a channel profile is: an exact name beats any pattern; among patterns, more
/// literal characters win.
fn profile_specificity(profile: &str) -> usize {
    let literal = profile.bytes().filter(|&c| c != b'*').count();
    if profile.contains('*') {
        literal
    } else {
        usize::MAX / 2 + literal
    }
}

/// An address as the matcher compares it: IPv4-mapped IPv6 addresses are taken as IPv4.
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    let ip: IpAddr = text.trim().parse().ok()?;
    Some(match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    })
}

/// One part of an address pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Any,
    Range(u32, u32),
}

/// Parses an address pattern's parts: IPv4 (`10.1.*`, `10.1.2.3-20`, `*`) or IPv6 with full
/// groups (`fe80:*`, `2001:db8:0:0:0:0:0:1-ff`), or an exact IPv6 address in any form. A `*`
/// as the last part stands for every remaining part.
fn pattern_parts(pattern: &str, v6: bool) -> Option<Vec<Part>> {
    let pattern = pattern.trim();
    if pattern == "*" {
        return Some(vec![Part::Any]);
    }
    if v6 {
        if let Ok(exact) = pattern.parse::<Ipv6Addr>() {
            return Some(
                exact
                    .segments()
                    .iter()
                    .map(|&s| Part::Range(s.into(), s.into()))
                    .collect(),
            );
        }
    }
    let (sep, radix, max, count) = if v6 {
        (':', 16, 0xffff, 8)
    } else {
        ('.', 10, 255, 4)
    };
    let mut parts = Vec::new();
    for piece in pattern.split(sep) {
        if parts.len() == count {
            return None;
        }
        let part = if piece == "*" {
            Part::Any
        } else if let Some((lo, hi)) = piece.split_once('-') {
            let lo = u32::from_str_radix(lo, radix).ok()?;
            let hi = u32::from_str_radix(hi, radix).ok()?;
            if lo > hi || hi > max {
                return None;
            }
            Part::Range(lo, hi)
        } else {
            if piece.is_empty() || piece.len() > 5 {
                return None;
            }
            let v = u32::from_str_radix(piece, radix).ok()?;
            if v > max {
                return None;
            }
            Part::Range(v, v)
        };
        parts.push(part);
    }
    let trailing_any = parts.last() == Some(&Part::Any);
    if parts.len() == count || trailing_any {
        Some(parts)
    } else {
        None
    }
}

/// Whether an address pattern matches `ip`. A pattern that does not parse matches nothing.
pub fn address_matches(pattern: &str, ip: IpAddr) -> bool {
    let (values, v6): (Vec<u32>, bool) = match ip {
        IpAddr::V4(v4) => (v4.octets().iter().map(|&o| o.into()).collect(), false),
        IpAddr::V6(v6) => (v6.segments().iter().map(|&s| s.into()).collect(), true),
    };
    // `*` alone matches every address, whatever its family.
    if pattern.trim() == "*" {
        return true;
    }
    let Some(parts) = pattern_parts(pattern, v6) else {
        return false;
    };
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Any if i + 1 == parts.len() => return true,
            Part::Any => {}
            Part::Range(lo, hi) => {
                let v = values[i];
                if v < *lo || v > *hi {
                    return false;
                }
            }
        }
    }
    parts.len() == values.len()
}

/// How specific an address pattern is: 3 per exact part, 2 per range, none for `*`.
fn address_specificity(pattern: &str) -> usize {
    let v6 = pattern.contains(':');
    pattern_parts(pattern, v6).map_or(0, |parts| {
        parts
            .iter()
            .map(|p| match p {
                Part::Any => 0,
                Part::Range(lo, hi) if lo == hi => 3,
                Part::Range(..) => 2,
            })
            .sum()
    })
}

/// A small SSLPEER matcher for callers without TLS's own: the filter's comma-separated
/// `ATTR=value` pairs must each appear in the DN (attribute names without regard to case, values
/// exactly, a trailing `*` in a value matching any rest).
pub fn dn_matches_simple(filter: &str, dn: &str) -> bool {
    let pairs = |s: &str| -> Vec<(String, String)> {
        s.split(',')
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                Some((k.trim().to_ascii_uppercase(), v.trim().to_string()))
            })
            .collect()
    };
    let have = pairs(dn);
    let want = pairs(filter);
    !want.is_empty()
        && want.iter().all(|(k, v)| {
            have.iter().any(|(hk, hv)| {
                hk == k
                    && match v.strip_suffix('*') {
                        Some(prefix) => hv.starts_with(prefix),
                        None => hv == v,
                    }
            })
        })
}

/// The answer to DISPLAY CHLAUTH MATCH(RUNCHECK): the rule that would decide the attempt, in the
/// order a connection meets them (BLOCKADDR, mapping, BLOCKUSER on the client user after mapping).
pub fn runcheck<'r>(
    rules: &'r [Rule],
    a: &Attempt<'_>,
    dn_match: DnMatch,
    is_admin: &dyn Fn(&str) -> bool,
) -> Option<&'r Rule> {
    if let Some(r) = blocked_address(rules, a.address) {
        return Some(r);
    }
    let m = mapping(rules, a, dn_match);
    let user = match &m {
        Mapping::Map(_, u) => u.as_str(),
        _ => a.client_user,
    };
    if let Some(r) = blocked_user(rules, a.channel, user, is_admin) {
        return Some(r);
    }
    m.rule()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn rule(profile: &str, t: &str, attrs: &[(&str, &str)]) -> Rule {
        let mut m: BTreeMap<String, String> = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        m.insert("CHLAUTH".into(), profile.into());
        m.insert("TYPE".into(), t.into());
        Rule::from_attrs(&m).unwrap()
    }

    #[test]
    fn which_of_two_alike_blocking_records_is_reported_does_not_depend_on_their_order() {
        // Found by the chlauth_match fuzz target: two BLOCKUSER records of one profile naming
        // the same user, differing only in an attribute BLOCKUSER does not use.
        let a = rule("", "BLOCKUSER", &[("USERLIST", "$"), ("SSLPEER", "")]);
        let b = rule("", "BLOCKUSER", &[("USERLIST", "$"), ("SSLPEER", "*~x")]);
        let c = rule("*", "BLOCKADDR", &[("ADDRLIST", "10.*")]);
        let d = rule("*", "BLOCKADDR", &[("ADDRLIST", "10.1.*")]);
        let no_admin = |_: &str| false;
        let at = attempt("", "10.1.2.3", "$");
        let one = vec![a.clone(), b.clone(), c.clone(), d.clone()];
        let two = vec![d, c, b, a];
        assert_eq!(
            runcheck(&one, &at, dn_matches_simple, &no_admin),
            runcheck(&two, &at, dn_matches_simple, &no_admin)
        );
        let at = attempt("", "192.0.2.1", "$");
        assert_eq!(
            runcheck(&one, &at, dn_matches_simple, &no_admin),
            runcheck(&two, &at, dn_matches_simple, &no_admin)
        );
    }

    fn attempt<'a>(channel: &'a str, address: &'a str, user: &'a str) -> Attempt<'a> {
        Attempt {
            channel,
            address,
            client_user: user,
            cert_dn: None,
            remote_qmgr: None,
        }
    }

    fn ip(s: &str) -> IpAddr {
        parse_ip(s).unwrap()
    }

    #[test]
    fn address_patterns_match_wildcards_ranges_and_exact_addresses() {
        assert!(address_matches("*", ip("10.1.2.3")));
        assert!(address_matches("*", ip("::1")));
        assert!(address_matches("10.1.*", ip("10.1.2.3")));
        assert!(!address_matches("10.1.*", ip("10.2.2.3")));
        assert!(address_matches("10.1.*.3", ip("10.1.9.3")));
        assert!(address_matches("10.1.2.3-20", ip("10.1.2.20")));
        assert!(!address_matches("10.1.2.3-20", ip("10.1.2.21")));
        assert!(address_matches("127.0.0.1", ip("127.0.0.1")));
        assert!(!address_matches("127.0.0.1", ip("127.0.0.2")));
        // Too few parts without a trailing `*`, or nonsense, matches nothing.
        assert!(!address_matches("10.1", ip("10.1.0.0")));
        assert!(!address_matches("10.1.2.300", ip("10.1.2.44")));
        assert!(!address_matches("host.example", ip("10.1.2.3")));
    }

    #[test]
    fn ipv6_patterns_and_ipv4_mapped_addresses() {
        assert!(address_matches("::1", ip("::1")));
        assert!(address_matches("fe80:*", ip("fe80::1")));
        assert!(address_matches(
            "2001:db8:0:0:0:0:0:1-ff",
            ip("2001:db8::20")
        ));
        assert!(!address_matches(
            "2001:db8:0:0:0:0:0:1-ff",
            ip("2001:db8::100")
        ));
        // A v4 client reached over a dual-stack socket is matched as v4.
        assert!(address_matches("127.0.0.*", ip("::ffff:127.0.0.1")));
    }

    #[test]
    fn blockaddr_finds_the_rule_holding_the_address() {
        let rules = [rule("*", "BLOCKADDR", &[("ADDRLIST", "10.9.*,127.0.0.1")])];
        assert!(blocked_address(&rules, "127.0.0.1").is_some());
        assert!(blocked_address(&rules, "10.9.1.1").is_some());
        assert!(blocked_address(&rules, "127.0.0.2").is_none());
    }

    #[test]
    fn the_most_specific_channel_profile_wins() {
        let rules = [
            rule(
                "*",
                "ADDRESSMAP",
                &[("ADDRESS", "*"), ("USERSRC", "NOACCESS")],
            ),
            rule(
                "APP.*",
                "ADDRESSMAP",
                &[("ADDRESS", "*"), ("MCAUSER", "app")],
            ),
            rule(
                "APP.SVRCONN",
                "ADDRESSMAP",
                &[("ADDRESS", "*"), ("USERSRC", "CHANNEL")],
            ),
        ];
        let m = mapping(
            &rules,
            &attempt("APP.SVRCONN", "1.2.3.4", ""),
            dn_matches_simple,
        );
        assert!(matches!(m, Mapping::Channel(_)), "{m:?}");
        let m = mapping(
            &rules,
            &attempt("APP.OTHER", "1.2.3.4", ""),
            dn_matches_simple,
        );
        assert_eq!(m, Mapping::Map(&rules[1], "app".into()));
        let m = mapping(&rules, &attempt("OTHER", "1.2.3.4", ""), dn_matches_simple);
        assert!(matches!(m, Mapping::NoAccess(_)), "{m:?}");
    }

    #[test]
    fn for_one_profile_sslpeer_then_user_then_address() {
        let rules = [
            rule(
                "*",
                "ADDRESSMAP",
                &[("ADDRESS", "*"), ("MCAUSER", "byaddr")],
            ),
            rule(
                "*",
                "USERMAP",
                &[("CLNTUSER", "alice"), ("MCAUSER", "byuser")],
            ),
            rule(
                "*",
                "SSLPEERMAP",
                &[("SSLPEER", "CN=alice"), ("MCAUSER", "bydn")],
            ),
        ];
        let mut a = attempt("C", "1.2.3.4", "alice");
        assert_eq!(
            mapping(&rules, &a, dn_matches_simple),
            Mapping::Map(&rules[1], "byuser".into())
        );
        a.cert_dn = Some("CN=alice,O=x");
        assert_eq!(
            mapping(&rules, &a, dn_matches_simple),
            Mapping::Map(&rules[2], "bydn".into())
        );
        a.cert_dn = None;
        a.client_user = "carol";
        assert_eq!(
            mapping(&rules, &a, dn_matches_simple),
            Mapping::Map(&rules[0], "byaddr".into())
        );
    }

    #[test]
    fn a_more_specific_address_wins_within_a_type() {
        let rules = [
            rule(
                "*",
                "ADDRESSMAP",
                &[("ADDRESS", "10.*"), ("MCAUSER", "wide")],
            ),
            rule(
                "*",
                "ADDRESSMAP",
                &[("ADDRESS", "10.1.2.*"), ("MCAUSER", "narrow")],
            ),
        ];
        let a = attempt("C", "10.1.2.3", "");
        assert_eq!(
            mapping(&rules, &a, dn_matches_simple),
            Mapping::Map(&rules[1], "narrow".into())
        );
    }

    #[test]
    fn usermap_with_an_address_only_matches_from_there() {
        let rules = [rule(
            "*",
            "USERMAP",
            &[
                ("CLNTUSER", "alice"),
                ("ADDRESS", "10.*"),
                ("MCAUSER", "bob"),
            ],
        )];
        assert_eq!(
            mapping(
                &rules,
                &attempt("C", "11.0.0.1", "alice"),
                dn_matches_simple
            ),
            Mapping::None
        );
        assert!(matches!(
            mapping(
                &rules,
                &attempt("C", "10.0.0.1", "alice"),
                dn_matches_simple
            ),
            Mapping::Map(_, _)
        ));
    }

    #[test]
    fn blockuser_of_the_most_specific_profile_and_mqadmin() {
        let rules = [
            rule("*", "BLOCKUSER", &[("USERLIST", "*MQADMIN")]),
            rule("APP.*", "BLOCKUSER", &[("USERLIST", "eve")]),
        ];
        let admin = |u: &str| u == "mqm";
        assert!(blocked_user(&rules, "SYSTEM.DEF.SVRCONN", "mqm", &admin).is_some());
        assert!(blocked_user(&rules, "SYSTEM.DEF.SVRCONN", "alice", &admin).is_none());
        // APP.* has its own list, which does not hold mqm.
        assert!(blocked_user(&rules, "APP.1", "mqm", &admin).is_none());
        assert!(blocked_user(&rules, "APP.1", "eve", &admin).is_some());
    }

    #[test]
    fn two_blockuser_records_of_one_profile_block_in_either_order() {
        // Found by the chlauth_match fuzz target: the first record of the profile used to
        // decide alone.
        let mut rules = vec![
            rule("", "BLOCKUSER", &[("USERLIST", "x")]),
            rule("", "BLOCKUSER", &[("USERLIST", "e")]),
        ];
        let no = |_: &str| false;
        assert!(blocked_user(&rules, "", "e", &no).is_some());
        rules.reverse();
        assert!(blocked_user(&rules, "", "e", &no).is_some());
    }

    #[test]
    fn runcheck_names_blockaddr_before_mapping() {
        let rules = [
            rule("*", "BLOCKADDR", &[("ADDRLIST", "10.0.0.1")]),
            rule("*", "ADDRESSMAP", &[("ADDRESS", "*"), ("MCAUSER", "x")]),
        ];
        let no = |_: &str| false;
        let r = runcheck(
            &rules,
            &attempt("C", "10.0.0.1", ""),
            dn_matches_simple,
            &no,
        );
        assert_eq!(r.unwrap().type_, RuleType::BlockAddr);
        let r = runcheck(
            &rules,
            &attempt("C", "10.0.0.2", ""),
            dn_matches_simple,
            &no,
        );
        assert_eq!(r.unwrap().type_, RuleType::AddressMap);
    }

    #[test]
    fn the_simple_dn_matcher_needs_every_pair() {
        assert!(dn_matches_simple("CN=a,O=b", "CN=a, O=b, C=GB"));
        assert!(dn_matches_simple("cn=app*", "CN=app1,O=b"));
        assert!(!dn_matches_simple("CN=a,O=c", "CN=a,O=b"));
        assert!(!dn_matches_simple("", "CN=a"));
    }

    proptest! {
        #[test]
        fn a_profile_matches_its_own_name_and_star_matches_all(name in "[A-Z.]{1,20}") {
            prop_assert!(profile_matches(&name, &name));
            prop_assert!(profile_matches("*", &name));
            let prefix = format!("{}*", &name[..name.len() / 2]);
            prop_assert!(profile_matches(&prefix, &name));
        }

        #[test]
        fn an_exact_ipv4_pattern_matches_only_its_address(a in any::<[u8; 4]>(), b in any::<[u8; 4]>()) {
            let pa = Ipv4Addr::from(a).to_string();
            prop_assert!(address_matches(&pa, IpAddr::V4(Ipv4Addr::from(a))));
            prop_assert_eq!(address_matches(&pa, IpAddr::V4(Ipv4Addr::from(b))), a == b);
            // A range around the last octet holds it.
            let r = format!("{}.{}.{}.{}-{}", a[0], a[1], a[2], a[3].saturating_sub(1), a[3]);
            prop_assert!(address_matches(&r, IpAddr::V4(Ipv4Addr::from(a))));
        }

        #[test]
        fn mapping_does_not_depend_on_the_order_rules_are_stored(
            seed in proptest::collection::vec(0usize..6, 1..6),
            user in "(alice|bob|carol)",
            last in 0u8..4,
        ) {
            let all = [
                rule("*", "ADDRESSMAP", &[("ADDRESS", "*"), ("MCAUSER", "a1")]),
                rule("*", "ADDRESSMAP", &[("ADDRESS", "10.0.0.*"), ("MCAUSER", "a2")]),
                rule("*", "USERMAP", &[("CLNTUSER", "alice"), ("MCAUSER", "u1")]),
                rule("C*", "USERMAP", &[("CLNTUSER", "bob"), ("USERSRC", "NOACCESS")]),
                rule("CH", "ADDRESSMAP", &[("ADDRESS", "10.0.0.0-1"), ("USERSRC", "CHANNEL")]),
                rule("CH", "USERMAP", &[("CLNTUSER", "carol"), ("MCAUSER", "u3")]),
            ];
            let mut picked: Vec<Rule> = seed.iter().map(|&i| all[i].clone()).collect();
            picked.dedup();
            let addr = format!("10.0.0.{last}");
            let a = attempt("CH", &addr, &user);
            let one = mapping(&picked, &a, dn_matches_simple).rule().cloned();
            picked.reverse();
            let two = mapping(&picked, &a, dn_matches_simple).rule().cloned();
            prop_assert_eq!(one, two);
        }
    }
}
