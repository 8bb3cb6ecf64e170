//! Distinguished names as MQ writes them (`CN=app,OU=dev,O=FerryMQ,C=GB`: most specific first,
//! short attribute names, `\` before a character that would end a value), read from a
//! certificate, and SSLPEER-style filters matched against them.
//!
//! A filter matches a DN when every attribute it names is in the DN with a matching value:
//! attribute names without regard to case (and with MQ's synonyms: `S`/`SP` for `ST`, `MAIL` for
//! `E`), values without regard to case, a value may start or end with `*` (any characters there),
//! the order of different attributes in the filter does not matter, and an attribute named more
//! than once (`OU=a,OU=b`, `DC=example,DC=com`) must match as many of the DN's values of that
//! attribute, in the same order.

use x509_parser::x509::X509Name;

/// One attribute of a parsed DN or filter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Attr {
    /// Upper case, synonyms folded.
    name: String,
    value: String,
    /// The value started / ended with an unescaped `*` (a filter's wildcard), not kept in
    /// `value`.
    lead_star: bool,
    trail_star: bool,
}

/// The short names of the attributes MQ shows, by object identifier.
const NAMES: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.4", "SN"),
    ("2.5.4.5", "SERIALNUMBER"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.12", "T"),
    ("2.5.4.17", "PC"),
    ("2.5.4.42", "GIVENNAME"),
    ("1.2.840.113549.1.9.1", "E"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.25", "DC"),
];

/// A certificate name as MQ writes it: its relative names from the most specific (the last in
/// the certificate) to the least, `NAME=value` joined by commas.
pub fn format_name(name: &X509Name<'_>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for rdn in name.iter_rdn() {
        for atv in rdn.iter() {
            let oid = atv.attr_type().to_id_string();
            let short = NAMES
                .iter()
                .find(|(o, _)| *o == oid)
                .map_or(oid.clone(), |(_, n)| n.to_string());
            let value = match atv.as_str() {
                Ok(v) => v.to_string(),
                Err(_) => String::from_utf8_lossy(atv.attr_value().data).into_owned(),
            };
            parts.push(format!("{short}={}", escape(&value)));
        }
    }
    parts.reverse();
    parts.join(",")
}

fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let edge_blank = c == ' ' && (i == 0 || i + 1 == v.chars().count());
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') || edge_blank {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn fold_name(n: &str) -> String {
    let up = n.trim().to_ascii_uppercase();
    match up.as_str() {
        "S" | "SP" => "ST".into(),
        "MAIL" | "EMAIL" | "EMAILADDRESS" => "E".into(),
        "SERIALNUMBER" | "SERIAL" => "SERIALNUMBER".into(),
        _ => up,
    }
}

/// Splits a DN or filter (`wildcards`: a leading or trailing unescaped `*` is a wildcard) into
/// its attributes. Separators are `,`, `;` and `+` outside quotes and
/// not escaped; blanks around names and values do not count.
fn parse(text: &str, wildcards: bool) -> Result<Vec<Attr>, String> {
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Ok(out);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    loop {
        // The name, up to '='.
        let start = i;
        while i < chars.len() && chars[i] != '=' {
            if matches!(chars[i], ',' | ';' | '+') {
                return Err(format!(
                    "'{}' has no '=' in '{}'",
                    chars[start..i].iter().collect::<String>().trim(),
                    text
                ));
            }
            i += 1;
        }
        if i == chars.len() {
            return Err(format!(
                "'{}' has no '=' in '{text}'",
                chars[start..].iter().collect::<String>().trim()
            ));
        }
        let name = fold_name(&chars[start..i].iter().collect::<String>());
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
            return Err(format!(
                "an attribute name is missing or not valid in '{text}'"
            ));
        }
        i += 1;
        // The value, up to an unescaped separator.
        let mut value = String::new();
        let mut raw_len_before_trail = 0usize;
        let mut lead_star = false;
        let mut trail_star = false;
        let mut first = true;
        let mut in_quotes = false;
        // Whether the last character kept is an escaped or quoted one (trailing blanks and stars
        // only count when not).
        let mut last_literal = false;
        while i < chars.len() {
            let c = chars[i];
            if in_quotes {
                if c == '"' {
                    in_quotes = false;
                } else {
                    value.push(c);
                    last_literal = true;
                    raw_len_before_trail = value.len();
                }
                i += 1;
                continue;
            }
            match c {
                '\\' => {
                    let next = *chars
                        .get(i + 1)
                        .ok_or_else(|| format!("'{text}' ends with a lone '\\'"))?;
                    value.push(next);
                    last_literal = true;
                    raw_len_before_trail = value.len();
                    first = false;
                    i += 2;
                    continue;
                }
                '"' => {
                    in_quotes = true;
                    first = false;
                    i += 1;
                    continue;
                }
                ',' | ';' | '+' => break,
                ' ' if first => {
                    i += 1;
                    continue;
                }
                '*' if first && wildcards => {
                    lead_star = true;
                    first = false;
                    i += 1;
                    continue;
                }
                _ => {
                    value.push(c);
                    if c != ' ' {
                        last_literal = false;
                        raw_len_before_trail = value.len();
                    }
                    first = false;
                    i += 1;
                }
            }
        }
        if in_quotes {
            return Err(format!("a quoted value is not closed in '{text}'"));
        }
        // Trailing unescaped blanks do not count; then an unescaped trailing '*' is a wildcard.
        value.truncate(raw_len_before_trail);
        if wildcards && !last_literal && value.ends_with('*') {
            value.pop();
            trail_star = true;
        }
        out.push(Attr {
            name,
            value,
            lead_star,
            trail_star,
        });
        if i >= chars.len() {
            break;
        }
        i += 1; // the separator
    }
    Ok(out)
}

/// Checks that `filter` is a well-formed SSLPEER value (for DEFINE and ALTER).
pub fn check_filter(filter: &str) -> Result<(), String> {
    parse(filter, true).map(|_| ())
}

fn value_matches(pattern: &Attr, value: &str) -> bool {
    let p = pattern.value.to_lowercase();
    let v = value.to_lowercase();
    match (pattern.lead_star, pattern.trail_star) {
        (false, false) => p == v,
        (false, true) => v.starts_with(&p),
        (true, false) => v.ends_with(&p),
        (true, true) => v.contains(&p),
    }
}

/// Whether the distinguished name `dn` satisfies the SSLPEER-style `filter` (see the module's
/// rules). A blank filter matches every DN; a filter or DN that cannot be parsed matches
/// nothing.
pub fn dn_matches(filter: &str, dn: &str) -> bool {
    let (Ok(want), Ok(have)) = (parse(filter, true), parse(dn, false)) else {
        return false;
    };
    let mut names: Vec<&str> = want.iter().map(|a| a.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().all(|name| {
        // The filter's values of this attribute must match the DN's, in order (earliest match
        // first is enough: each pattern either matches a value or not).
        let mut dn_values = have.iter().filter(|a| a.name == name);
        want.iter()
            .filter(|a| a.name == name)
            .all(|p| dn_values.any(|v| value_matches(p, &v.value)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DN: &str = "CN=app,OU=payments,OU=dev,O=FerryMQ,L=Leeds,C=GB";

    #[test]
    fn every_attribute_of_the_filter_must_be_in_the_dn() {
        assert!(dn_matches("CN=app", DN));
        assert!(dn_matches("C=GB,CN=app", DN), "order does not matter");
        assert!(!dn_matches("CN=other", DN));
        assert!(
            !dn_matches("CN=app,ST=Yorkshire", DN),
            "ST is not in the DN"
        );
        assert!(dn_matches("", DN));
    }

    #[test]
    fn names_and_values_are_compared_without_regard_to_case() {
        assert!(dn_matches("cn=APP, o=ferrymq", DN));
        assert!(dn_matches("S=Yorks", "CN=a,ST=yorks"));
        assert!(dn_matches("MAIL=a@b.c", "CN=a,E=A@B.C"));
    }

    #[test]
    fn a_value_may_start_or_end_with_a_wildcard() {
        assert!(dn_matches("CN=ap*", DN));
        assert!(dn_matches("CN=*pp", DN));
        assert!(dn_matches("O=*rry*", DN));
        assert!(!dn_matches("CN=apx*", DN));
        assert!(dn_matches("CN=*", DN));
        assert!(!dn_matches("CN=\\*", DN), "an escaped star is a star");
        assert!(dn_matches("CN=a\\*", "CN=a*"));
    }

    #[test]
    fn repeated_attributes_match_in_order() {
        assert!(dn_matches("OU=payments,OU=dev", DN));
        assert!(dn_matches("OU=dev", DN));
        assert!(!dn_matches("OU=dev,OU=payments", DN), "out of order");
        assert!(!dn_matches("OU=dev,OU=dev", DN), "only one dev");
        assert!(dn_matches("OU=pay*,OU=d*", DN));
    }

    #[test]
    fn escapes_and_quotes_keep_separators_in_values() {
        assert!(dn_matches("O=\"Smith, Jones\"", "CN=a,O=Smith\\, Jones"));
        assert!(dn_matches("O=Smith\\, J*", "CN=a,O=Smith\\, Jones"));
        assert!(!dn_matches("O=Smith", "CN=a,O=Smith\\, Jones"));
    }

    #[test]
    fn malformed_filters_match_nothing_and_say_why() {
        assert!(!dn_matches("CN", DN));
        assert!(!dn_matches("=app", DN));
        assert!(!dn_matches("CN=\"app", DN));
        assert!(check_filter("CN=app,OU").unwrap_err().contains("no '='"));
        assert!(check_filter("CN=app, OU=x*").is_ok());
    }

    proptest! {
        #[test]
        fn a_dn_matches_itself_and_any_reordering_of_it(
            attrs in proptest::collection::vec(
                (prop::sample::select(vec!["CN", "O", "L", "C", "ST"]), "[a-zA-Z0-9 ,=+*\\\\\"]{0,12}"),
                1..6)
        ) {
            let mut seen = std::collections::HashSet::new();
            let attrs: Vec<_> = attrs.into_iter().filter(|(n, _)| seen.insert(*n)).collect();
            let dn = attrs.iter().map(|(n, v)| format!("{n}={}", escape(v))).collect::<Vec<_>>().join(",");
            prop_assert!(dn_matches(&dn, &dn), "{}", dn);
            let rev = attrs.iter().rev().map(|(n, v)| format!("{}={}", n.to_lowercase(), escape(&v.to_uppercase()))).collect::<Vec<_>>().join(", ");
            prop_assert!(dn_matches(&rev, &dn), "{} vs {}", rev, dn);
        }

        #[test]
        fn a_prefix_with_a_star_matches(value in "[a-z0-9]{1,16}", cut in 0usize..16) {
            let cut = cut.min(value.len());
            let dn = format!("CN={value},O=x");
            let filter = format!("CN={}*", &value[..cut]);
            prop_assert!(dn_matches(&filter, &dn));
            let other = format!("CN={value}z");
            prop_assert!(!dn_matches(&other, &dn));
        }

        #[test]
        fn parsing_never_panics(filter in ".{0,64}", dn in ".{0,64}") {
            let _ = dn_matches(&filter, &dn);
        }

        #[test]
        fn a_well_formed_filter_without_wildcards_matches_itself(
            text in "[A-Za-z ]{1,3}=[a-zA-Z0-9 ,;+=\\\"]{0,10}(,[A-Za-z]{1,3}=[a-z0-9 \\\"]{0,8}){0,4}"
        ) {
            if check_filter(&text).is_ok() {
                prop_assert!(dn_matches("", &text));
                prop_assert!(dn_matches(&text, &text), "{:?}", text);
            }
        }
    }
}
