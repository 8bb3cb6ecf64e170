//! MQ's object authorities by name, one list shared by the MQSC language (SET AUTHREC's AUTHADD
//! and AUTHRMV, AUTHLIST) and the authority checks of `ferrymq-security`, so the two can never
//! disagree on what an authority or a grouping is.

/// Every authority, in the order AUTHLIST shows them. An authority's position here is its bit
/// in `ferrymq_security::oam::Authorities`.
pub const AUTHORITIES: &[&str] = &[
    "ALTUSR", "BROWSE", "CHG", "CLR", "CONNECT", "CRT", "CTRL", "CTRLX", "DLT", "DSP", "GET",
    "INQ", "PASSALL", "PASSID", "PUB", "PUT", "RESUME", "SET", "SETALL", "SETID", "SUB", "SYSTEM",
];

/// ALLMQI: the authorities the MQI calls need.
pub const ALLMQI: &[&str] = &[
    "ALTUSR", "BROWSE", "CONNECT", "GET", "INQ", "PASSALL", "PASSID", "PUB", "PUT", "RESUME",
    "SET", "SETALL", "SETID", "SUB",
];

/// ALLADM: the administrative authorities (CRT, which applies to a type rather than to an
/// object, is apart, as in MQ).
pub const ALLADM: &[&str] = &["CHG", "CLR", "CTRL", "CTRLX", "DLT", "DSP"];

/// The groupings a list of authorities may name besides single authorities: ALL (every
/// authority: ALLMQI, ALLADM, CRT and SYSTEM), ALLMQI, ALLADM and NONE.
pub const GROUPINGS: &[&str] = &["ALL", "ALLADM", "ALLMQI", "NONE"];

/// The authorities a name stands for: itself, or a grouping's members; None for a name that is
/// neither (matched without regard to case).
pub fn expand(name: &str) -> Option<Vec<&'static str>> {
    let n = name.to_ascii_uppercase();
    match n.as_str() {
        "ALL" => Some(AUTHORITIES.to_vec()),
        "ALLMQI" => Some(ALLMQI.to_vec()),
        "ALLADM" => Some(ALLADM.to_vec()),
        "NONE" => Some(Vec::new()),
        w => AUTHORITIES.iter().find(|a| **a == w).map(|a| vec![*a]),
    }
}

/// Object types an authority record can name (OBJTYPE).
pub const OBJTYPES: &[&str] = &[
    "AUTHINFO", "CHANNEL", "CLNTCONN", "COMMINFO", "LISTENER", "NAMELIST", "PROCESS", "QUEUE",
    "QMGR", "RQMNAME", "SERVICE", "TOPIC",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groupings_are_made_of_authorities_and_all_is_every_one() {
        for a in ALLMQI.iter().chain(ALLADM) {
            assert!(AUTHORITIES.contains(a), "{a}");
        }
        assert_eq!(expand("all").unwrap(), AUTHORITIES);
        assert_eq!(expand("put").unwrap(), ["PUT"]);
        assert!(expand("none").unwrap().is_empty());
        assert!(expand("EAT").is_none());
        assert!(AUTHORITIES.len() <= 32);
    }
}
