//! MQ connection names, one owner for client and server: `host(port)` entries separated by
//! commas, the port defaulting to MQ's 1414 as in a CONNAME. The client reads connection name
//! lists with it; the queue manager reads its HA, DR and relay addresses with it.

use crate::{MqError, Reason};

/// MQ's default listener port, used when a connection name gives none.
pub const DEFAULT_PORT: u16 = 1414;

fn syntax_error(whole: &str, detail: String) -> MqError {
    MqError::new(
        Reason::ENVIRONMENT_ERROR,
        format!(
            "connection name '{whole}' is not valid: {detail}; expected host(port) entries separated by commas, e.g. 'mq1.example.com(1414),mq2.example.com(1415)'"
        ),
    )
}

/// Parses an MQ connection name list, `host(port),host2(port2)`: entries separated by commas,
/// spaces around entries and inside the parentheses allowed, the port defaulting to 1414.
/// Errors carry ENVIRONMENT_ERROR and name the entry that is wrong.
pub fn parse_conn_name(s: &str) -> Result<Vec<(String, u16)>, MqError> {
    if s.trim().is_empty() {
        return Err(syntax_error(s, "it is empty".into()));
    }
    let mut out = Vec::new();
    for (i, raw) in s.split(',').enumerate() {
        let entry = raw.trim();
        let n = i + 1;
        if entry.is_empty() {
            return Err(syntax_error(s, format!("entry {n} is empty")));
        }
        let (host, port) = match entry.find('(') {
            None => (entry, DEFAULT_PORT),
            Some(open) => {
                let Some(inner) = entry[open + 1..].strip_suffix(')') else {
                    return Err(syntax_error(
                        s,
                        format!("entry '{entry}' has no closing ')' at its end"),
                    ));
                };
                let inner = inner.trim();
                let port = match inner.parse::<u16>() {
                    Ok(p) if p != 0 => p,
                    _ => {
                        return Err(syntax_error(
                            s,
                            format!("'{inner}' in entry '{entry}' is not a port (1-65535)"),
                        ))
                    }
                };
                (entry[..open].trim(), port)
            }
        };
        if host.is_empty() {
            return Err(syntax_error(s, format!("entry '{entry}' has no host")));
        }
        if let Some(c) = host
            .chars()
            .find(|c| c.is_whitespace() || matches!(c, '(' | ')'))
        {
            return Err(syntax_error(
                s,
                format!("host '{host}' in entry '{entry}' contains {c:?}"),
            ));
        }
        out.push((host.to_string(), port));
    }
    Ok(out)
}

/// One `host(port)` address as `host:port` (for binding and connecting); the port defaults to
/// 1414. Exactly one entry.
pub fn parse_addr(text: &str) -> Result<String, String> {
    match parse_conn_name(text).map_err(|e| e.message)?.as_slice() {
        [(host, port)] => Ok(format!("{host}:{port}")),
        _ => Err(format!(
            "'{}': one host(port) address was expected",
            text.trim()
        )),
    }
}

/// `host(port),host(port),...` as `host:port` addresses.
pub fn parse_addr_list(text: &str) -> Result<Vec<String>, String> {
    Ok(parse_conn_name(text)
        .map_err(|e| e.message)?
        .into_iter()
        .map(|(h, p)| format!("{h}:{p}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_parser_for_lists_and_single_addresses() {
        assert_eq!(
            parse_conn_name(" mq1 ( 1415 ),mq2").unwrap(),
            vec![("mq1".to_string(), 1415), ("mq2".to_string(), DEFAULT_PORT)]
        );
        assert_eq!(parse_addr("127.0.0.1(4100)").unwrap(), "127.0.0.1:4100");
        assert_eq!(parse_addr("h").unwrap(), "h:1414");
        assert!(parse_addr("a(1),b(2)").is_err());
        assert!(parse_addr("h(0)").is_err());
        assert!(parse_addr("h(x)").unwrap_err().contains("not a port"));
        assert!(parse_addr_list("").is_err());
        assert_eq!(parse_addr_list("a(1), b(2)").unwrap(), vec!["a:1", "b:2"]);
    }
}
