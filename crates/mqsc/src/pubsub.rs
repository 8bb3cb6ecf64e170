//! MQSC for publish/subscribe: DEFINE SUB and DELETE SUB (a subscription is made and removed by
//! the engine, which checks it as MQSUB does, so the attributes are passed on as written), and
//! the names DISPLAY SUB, SBSTATUS and TPSTATUS take (a subscription name or a topic string,
//! quoted to keep its case; `*` at the end is generic).

use crate::command::{Command, SyntaxError};
use crate::lexer::{scalar, Item};
use ferrymq_types::limits::{SELECTOR_LEN_MAX_BYTES, SUB_NAME_LEN_MAX, TOPIC_STRING_LEN_MAX};

/// DEFINE SUB's attributes and the longest value each takes (0: a keyword from a list).
const SUB_ATTRS: &[(&str, usize)] = &[
    ("TOPICSTR", TOPIC_STRING_LEN_MAX),
    ("TOPICOBJ", 48),
    ("DEST", 48),
    ("DESTQMGR", 48),
    ("DESTCLAS", 0),
    ("SELECTOR", SELECTOR_LEN_MAX_BYTES),
    ("EXPIRY", 0),
    ("USERDATA", 10_240),
    ("REQONLY", 0),
    ("WSCHEMA", 0),
    // The CorrelId of every publication the subscription gets (MQ's SubCorrelId), in hex.
    ("DESTCORL", 48),
];

/// The name in `SUB(name)`, `SBSTATUS(name)` or `TPSTATUS(string)`.
pub(crate) fn name_of(obj: &Item, what: &str) -> Result<String, SyntaxError> {
    let Some(p) = &obj.value else {
        return Err(SyntaxError::new(
            format!("{} needs a {what} in parentheses", obj.word),
            obj.col,
            &obj.text,
        ));
    };
    let s = scalar(p)?;
    if s.value.len() > SUB_NAME_LEN_MAX.max(TOPIC_STRING_LEN_MAX) {
        return Err(SyntaxError::new(
            format!("the {what} is longer than {SUB_NAME_LEN_MAX} bytes"),
            s.col,
            s.written,
        ));
    }
    Ok(s.value)
}

pub(crate) fn define_sub(obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    let name = name_of(obj, "subscription name")?;
    if name.is_empty() {
        return Err(SyntaxError::new(
            "DEFINE SUB needs a subscription name",
            obj.col,
            &obj.text,
        ));
    }
    let mut attrs: Vec<(String, String)> = Vec::new();
    let mut replace = false;
    for item in rest {
        match item.word.as_str() {
            "REPLACE" | "NOREPLACE" if item.value.is_none() => {
                replace = item.word == "REPLACE";
                continue;
            }
            _ => {}
        }
        let Some(&(key, max)) = SUB_ATTRS.iter().find(|(k, _)| *k == item.word) else {
            return Err(SyntaxError::new(
                format!(
                    "DEFINE SUB does not take '{}' (it takes {})",
                    item.text,
                    SUB_ATTRS
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                item.col,
                &item.text,
            ));
        };
        let Some(p) = &item.value else {
            return Err(SyntaxError::new(
                format!("{key} needs a value in parentheses"),
                item.col,
                &item.text,
            ));
        };
        let s = scalar(p)?;
        let value = match key {
            "DESTCLAS" if ["PROVIDED", "MANAGED"].contains(&s.value.as_str()) => s.value,
            "REQONLY" if ["YES", "NO"].contains(&s.value.as_str()) => s.value,
            "WSCHEMA" if ["TOPIC", "CHAR"].contains(&s.value.as_str()) => s.value,
            "DESTCORL"
                if !s.value.is_empty()
                    && s.value.len() <= 48
                    && s.value.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                s.value.to_ascii_uppercase()
            }
            "EXPIRY" if s.value == "UNLIMITED" || s.value.parse::<u32>().is_ok() => s.value,
            "DESTCLAS" | "REQONLY" | "EXPIRY" | "WSCHEMA" | "DESTCORL" => {
                return Err(SyntaxError::new(
                    format!(
                        "{key}({}) is not valid: {}",
                        s.written,
                        match key {
                            "DESTCLAS" => "PROVIDED or MANAGED",
                            "REQONLY" => "YES or NO",
                            "WSCHEMA" => "TOPIC or CHAR",
                            "DESTCORL" => "1 to 48 hexadecimal digits",
                            _ => "tenths of a second, or UNLIMITED",
                        }
                    ),
                    s.col,
                    s.written,
                ))
            }
            _ if s.value.len() > max => {
                return Err(SyntaxError::new(
                    format!("{key} is longer than {max} characters"),
                    s.col,
                    s.written,
                ))
            }
            _ => s.value,
        };
        if attrs.iter().any(|(k, _)| k == key) {
            return Err(SyntaxError::new(
                format!("{key} is given twice"),
                item.col,
                &item.text,
            ));
        }
        attrs.push((key.to_string(), value));
    }
    if !attrs
        .iter()
        .any(|(k, _)| k == "TOPICSTR" || k == "TOPICOBJ")
    {
        return Err(SyntaxError::new(
            "DEFINE SUB needs TOPICSTR, TOPICOBJ or both",
            obj.col,
            &obj.text,
        ));
    }
    Ok(Command::DefineSub {
        name,
        attrs,
        replace,
    })
}

pub(crate) fn delete_sub(obj: &Item, rest: &[Item]) -> Result<Command, SyntaxError> {
    let name = name_of(obj, "subscription name")?;
    if let Some(item) = rest.first() {
        return Err(SyntaxError::new(
            format!("DELETE SUB takes nothing after the name ('{}')", item.text),
            item.col,
            &item.text,
        ));
    }
    Ok(Command::DeleteSub { name })
}
