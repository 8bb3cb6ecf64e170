//! Checks values against the attribute tables and MQ's naming rules, turning each into its
//! normalised form or a syntax error that points at it.

use crate::attrs::{AttrSpec, ValueKind};
use crate::command::{Filter, FilterOp, Setting, SyntaxError};
use crate::lexer::{scalar, scalar_at, Item, Paren};
use ferrymq_types::limits::OBJECT_NAME_LEN_MAX;

/// Longest channel name (MQ's limit is shorter than other objects').
pub const CHANNEL_NAME_LEN_MAX: usize = 20;

/// Why `name` is not a valid MQ object name (A-Z a-z 0-9 . / _ %), if it is not.
pub(crate) fn name_problem(name: &str, max: usize) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty".into());
    }
    if name.len() > max {
        return Some(format!("'{name}' is longer than {max} characters"));
    }
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._/%".contains(*c)))
        .map(|c| format!("'{name}' contains '{c}'; names use A-Z, a-z, 0-9, '.', '/', '_' and '%'"))
}

/// An object name from parentheses: quoted names keep their case, bare ones are folded. With
/// `generic`, a trailing `*` (or `*` alone) is allowed, as DISPLAY takes.
pub(crate) fn object_name(
    p: &Paren,
    max: usize,
    generic: bool,
    what: &str,
) -> Result<String, SyntaxError> {
    let s = scalar(p)?;
    let name = s.value.trim_end().to_string();
    let base = name.strip_suffix('*').filter(|_| generic).unwrap_or(&name);
    if generic && base.is_empty() && name == "*" {
        return Ok(name);
    }
    if let Some(problem) = name_problem(base, max) {
        let hint = if name.contains('*') && !generic {
            format!("{what} needs a full name here, not a generic one")
        } else if name.is_empty() {
            format!("{what} needs a name in the parentheses")
        } else {
            format!("not a valid {what} name: {problem}")
        };
        return Err(SyntaxError::new(hint, s.col, s.written));
    }
    Ok(name)
}

/// A connection id for DISPLAY CONN: hexadecimal, or generic with a trailing `*`.
pub(crate) fn conn_id(p: &Paren) -> Result<String, SyntaxError> {
    let s = scalar(p)?;
    let base = s.value.strip_suffix('*').unwrap_or(&s.value);
    let ok = (s.value == "*" || !base.is_empty())
        && base.len() <= 48
        && base.chars().all(|c| c.is_ascii_hexdigit());
    if !ok {
        return Err(SyntaxError::new(
            "CONN takes a connection id in hexadecimal, or '*'",
            s.col,
            s.written,
        ));
    }
    Ok(s.value.to_ascii_uppercase())
}

fn value_error(spec: &AttrSpec, detail: String, col: usize, written: &str) -> SyntaxError {
    SyntaxError::new(
        format!("bad value for {}: {detail}", spec.name),
        col,
        written,
    )
}

fn parse_int(v: &str) -> Option<i64> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Too many digits for i64 is out of every range: report it as such rather than as "not a number".
    Some(v.parse::<i64>().unwrap_or(if v.starts_with('-') {
        i64::MIN
    } else {
        i64::MAX
    }))
}

/// Checks one attribute keyword and its value against the attribute's table entry.
pub(crate) fn setting(item: &Item, spec: &'static AttrSpec) -> Result<Setting, SyntaxError> {
    if !spec.settable() {
        return Err(SyntaxError::new(
            format!("{} is shown by DISPLAY but cannot be set", spec.name),
            item.col,
            &item.text,
        ));
    }
    if let ValueKind::Switch { off } = spec.kind {
        if let Some(p) = &item.value {
            return Err(SyntaxError::new(
                format!("{} takes no value", item.word),
                p.open_col,
                format!("({})", p.raw),
            ));
        }
        let value = if item.word == off { off } else { spec.name };
        return Ok(Setting {
            attr: spec,
            value: value.to_string(),
        });
    }
    let Some(p) = &item.value else {
        return Err(SyntaxError::new(
            format!(
                "{} needs a value in parentheses, e.g. {}",
                spec.name,
                example(spec)
            ),
            item.col,
            &item.text,
        ));
    };
    let s = scalar(p)?;
    let bad = |detail: String| Err(value_error(spec, detail, s.col, &s.written));
    let value = match spec.kind {
        ValueKind::Int { min, max } => match parse_int(&s.value) {
            Some(v) if (min..=max).contains(&v) && !s.quoted => v.to_string(),
            Some(_) if !s.quoted => return bad(format!("it must be from {min} to {max}")),
            _ => return bad(format!("expected a whole number from {min} to {max}")),
        },
        ValueKind::IntOrWord { min, max, words } => {
            let word = s.value.to_ascii_uppercase();
            if words.contains(&word.as_str()) {
                word
            } else {
                match parse_int(&s.value) {
                    Some(v) if (min..=max).contains(&v) => v.to_string(),
                    _ => {
                        return bad(format!(
                            "expected a whole number from {min} to {max} or {}",
                            words.join(", ")
                        ))
                    }
                }
            }
        }
        ValueKind::Enum(words) => {
            let word = s.value.to_ascii_uppercase();
            if !words.contains(&word.as_str()) {
                return bad(format!("expected one of {}", words.join(", ")));
            }
            word
        }
        ValueKind::Str { max_len } => {
            if s.value.len() > max_len {
                return bad(format!(
                    "it is {} bytes long; the most is {max_len}",
                    s.value.len()
                ));
            }
            s.value
        }
        ValueKind::Name => {
            let name = s.value.trim().to_string();
            if !name.is_empty() {
                if let Some(problem) = name_problem(&name, OBJECT_NAME_LEN_MAX) {
                    return bad(problem);
                }
            }
            name
        }
        ValueKind::Switch { .. } | ValueKind::ReadOnly => unreachable!("handled above"),
    };
    Ok(Setting { attr: spec, value })
}

fn example(spec: &AttrSpec) -> String {
    let v = match spec.kind {
        ValueKind::Int { min, .. } | ValueKind::IntOrWord { min, .. } => min.max(1).to_string(),
        ValueKind::Enum(words) => words[0].to_string(),
        _ => "'text'".to_string(),
    };
    format!("{}({v})", spec.name)
}

/// `WHERE(attr op value)`; `resolve` maps the attribute keyword to its canonical name.
pub(crate) fn filter(
    p: &Paren,
    resolve: &dyn Fn(&str) -> Option<String>,
) -> Result<Filter, SyntaxError> {
    let chars: Vec<char> = p.raw.chars().collect();
    let base = p.inner_col();
    let mut i = 0;
    let word = |i: &mut usize| -> (usize, String) {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
        let start = *i;
        while *i < chars.len() && !chars[*i].is_whitespace() && chars[*i] != '\'' {
            *i += 1;
        }
        (start, chars[start..*i].iter().collect())
    };
    let (acol, attr) = word(&mut i);
    if attr.is_empty() {
        return Err(SyntaxError::new(
            "WHERE needs a condition, e.g. WHERE(CURDEPTH GT 0)",
            p.open_col,
            "(",
        ));
    }
    let canonical = resolve(&attr.to_ascii_uppercase()).ok_or_else(|| {
        SyntaxError::new(
            format!("WHERE cannot test '{attr}': it is not an attribute this DISPLAY shows"),
            base + acol,
            &attr,
        )
    })?;
    let (ocol, op_word) = word(&mut i);
    let op = match op_word.to_ascii_uppercase().as_str() {
        "EQ" => FilterOp::Eq,
        "NE" => FilterOp::Ne,
        "GT" => FilterOp::Gt,
        "LT" => FilterOp::Lt,
        "GE" => FilterOp::Ge,
        "LE" => FilterOp::Le,
        "LK" => FilterOp::Lk,
        "NL" => FilterOp::Nl,
        _ => {
            let col = base + ocol;
            return Err(SyntaxError::new(
                "WHERE needs an operator: EQ, NE, GT, LT, GE, LE, LK or NL",
                col,
                op_word,
            ));
        }
    };
    let rest: String = chars[i..].iter().collect();
    let s = scalar_at(&rest, base + i)?;
    if s.written.is_empty() {
        return Err(SyntaxError::new(
            "WHERE needs a value to compare with",
            base + ocol,
            op_word,
        ));
    }
    Ok(Filter {
        attr: canonical,
        op,
        value: s.value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::{lookup, QLOCAL};
    use crate::lexer::lex;

    fn set(text: &str) -> Result<Setting, SyntaxError> {
        let item = lex(text).unwrap().remove(0);
        setting(&item, lookup(QLOCAL, &item.word).unwrap())
    }

    #[test]
    fn integers_are_range_checked_and_normalised() {
        assert_eq!(set("MAXDEPTH(007)").unwrap().value, "7");
        let e = set("MAXDEPTH(1000000000)").unwrap_err();
        assert_eq!(e.column, 9);
        assert!(e.message.contains("0 to 999999999"), "{}", e.message);
        assert!(set("MAXDEPTH(99999999999999999999999)").is_err());
        assert!(set("MAXDEPTH(ten)").is_err());
        assert!(set("MAXDEPTH").is_err());
    }

    #[test]
    fn switches_take_their_on_or_off_word_and_no_value() {
        assert_eq!(set("NOSHARE").unwrap().value, "NOSHARE");
        assert_eq!(set("share").unwrap().value, "SHARE");
        assert!(set("SHARE(YES)").is_err());
    }

    #[test]
    fn names_are_checked_with_mq_rules() {
        assert_eq!(set("BOQNAME(bo.q)").unwrap().value, "BO.Q");
        assert_eq!(set("BOQNAME('Bo.q')").unwrap().value, "Bo.q");
        assert_eq!(set("BOQNAME(' ')").unwrap().value, "");
        assert!(set("BOQNAME('a b')").is_err());
        assert!(set(&format!("BOQNAME({})", "Q".repeat(49))).is_err());
    }

    #[test]
    fn where_reads_attribute_operator_and_quoted_value() {
        let items = lex("WHERE(descr eq 'It''s here')").unwrap();
        let f = filter(items[0].value.as_ref().unwrap(), &|w| Some(w.to_string())).unwrap();
        assert_eq!(f.attr, "DESCR");
        assert_eq!(f.op, FilterOp::Eq);
        assert_eq!(f.value, "It's here");
        let items = lex("WHERE(CURDEPTH XX 1)").unwrap();
        let e = filter(items[0].value.as_ref().unwrap(), &|w| Some(w.to_string())).unwrap_err();
        assert_eq!(e.column, 15);
    }
}
