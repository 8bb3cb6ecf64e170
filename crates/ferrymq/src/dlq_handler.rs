//! `ferrymq runmqdlq`, a dead-letter queue handler in the spirit of MQ's runmqdlq: a rules table
//! (a control line, then rules that match fields of a dead-lettered message and its dead-letter
//! header and name an action) read from standard input or a file, applied to each message on the
//! dead-letter queue. RETRY puts the original message back to its destination without the header,
//! FWD puts it to another queue with or without the header, DISCARD removes it, IGNORE leaves it.
//! Each message is browsed, matched, then got by MsgId and put in one unit of work, so a failed
//! put leaves it where it was; puts pass the dead-lettered message's context on
//! (MQPMO_PASS_ALL_CONTEXT), as MQ's handler does with PUTAUT(DEF).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{Message, ObjectHandle};
use ferrymq_types::dlh::{self, DeadLetterHeader};
use ferrymq_types::options::{open, pmo, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, Reason};

use crate::cli::Runmqdlq;
use crate::lifecycle::{Fail, Res};
use crate::samples::{self, EXIT_USAGE};

/// The queue manager's dead-letter queue when neither the command line nor the rules name one.
const DEFAULT_DLQ: &str = "SYSTEM.DEAD.LETTER.QUEUE";
/// The most rules a table may hold.
const RULES_MAX: usize = 1000;
/// The most times RETRY(n) may ask to retry a put.
const RETRY_MAX: u32 = 999_999_999;

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Retry,
    Fwd,
    Discard,
    Ignore,
}

/// One rule: patterns (keyword → value) and an action.
#[derive(Debug, Clone)]
struct Rule {
    line: usize,
    patterns: BTreeMap<String, String>,
    action: Action,
    fwdq: String,
    header: bool,
    retry: u32,
}

/// The control line's settings.
#[derive(Debug, Default)]
struct Control {
    inputq: Option<String>,
    inputqm: Option<String>,
    /// Seconds between retries (RETRYINT), 60 as in MQ unless set.
    retry_int_s: Option<u64>,
    /// WAIT(YES) (MQ's default: keep waiting), WAIT(NO), or WAIT(seconds).
    wait: Option<Option<u64>>,
}

/// The keywords a rule matches on, and the keywords of actions.
const PATTERNS: &[&str] = &[
    "APPLIDAT", "APPLNAME", "APPLTYPE", "DESTQ", "DESTQM", "FEEDBACK", "FORMAT", "MSGTYPE",
    "PERSIST", "REASON", "REPLYQ", "REPLYQM", "USERID",
];
const ACTIONS: &[&str] = &["ACTION", "FWDQ", "FWDQM", "HEADER", "PUTAUT", "RETRY"];
const CONTROLS: &[&str] = &["INPUTQ", "INPUTQM", "RETRYINT", "WAIT"];

/// `KEY(value)` pairs of one line.
fn keywords(line: &str, n: usize) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let open = rest
            .find('(')
            .ok_or_else(|| format!("line {n}: '{rest}' is not KEYWORD(value)"))?;
        let close = rest[open..]
            .find(')')
            .ok_or_else(|| format!("line {n}: '{rest}' has no closing parenthesis"))?
            + open;
        let key = rest[..open].trim().to_ascii_uppercase();
        let value = rest[open + 1..close].trim().trim_matches('\'').to_string();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("line {n}: '{}' is not a keyword", &rest[..open]));
        }
        out.push((key, value));
        rest = rest[close + 1..].trim_start();
    }
    Ok(out)
}

/// Parses a rules table: comments (`*` first), a control line (if the first line of keywords has
/// only control keywords), then one rule per line.
fn parse_rules(text: &str) -> Result<(Control, Vec<Rule>), String> {
    let mut control = Control::default();
    let mut rules = Vec::new();
    let mut first = true;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('*') {
            continue;
        }
        let kws = keywords(line, n)?;
        if first && kws.iter().all(|(k, _)| CONTROLS.contains(&k.as_str())) {
            first = false;
            for (k, v) in kws {
                match k.as_str() {
                    "INPUTQ" => control.inputq = Some(v),
                    "INPUTQM" => control.inputqm = Some(v),
                    "RETRYINT" => {
                        control.retry_int_s = Some(v.parse().map_err(|_| {
                            format!("line {n}: RETRYINT({v}) is not a number of seconds")
                        })?)
                    }
                    _ => {
                        control.wait = Some(match v.to_ascii_uppercase().as_str() {
                            "YES" => None,
                            "NO" => Some(0),
                            s => Some(s.parse().map_err(|_| {
                                format!("line {n}: WAIT({v}) is not YES, NO or seconds")
                            })?),
                        })
                    }
                }
            }
            continue;
        }
        first = false;
        let mut rule = Rule {
            line: n,
            patterns: BTreeMap::new(),
            action: Action::Ignore,
            fwdq: String::new(),
            header: true,
            retry: 1,
        };
        let mut action = None;
        for (k, v) in kws {
            if PATTERNS.contains(&k.as_str()) {
                rule.patterns.insert(k, v);
                continue;
            }
            match k.as_str() {
                "ACTION" => {
                    action = Some(match v.to_ascii_uppercase().as_str() {
                        "RETRY" => Action::Retry,
                        "FWD" => Action::Fwd,
                        "DISCARD" => Action::Discard,
                        "IGNORE" => Action::Ignore,
                        _ => {
                            return Err(format!(
                                "line {n}: ACTION({v}) is not RETRY, FWD, DISCARD or IGNORE"
                            ))
                        }
                    })
                }
                "FWDQ" => rule.fwdq = v,
                "FWDQM" | "PUTAUT" => {}
                "HEADER" => {
                    rule.header = match v.to_ascii_uppercase().as_str() {
                        "YES" => true,
                        "NO" => false,
                        _ => return Err(format!("line {n}: HEADER({v}) is not YES or NO")),
                    }
                }
                "RETRY" => {
                    rule.retry = v
                        .parse()
                        .ok()
                        .filter(|r| (1..=RETRY_MAX).contains(r))
                        .ok_or_else(|| format!("line {n}: RETRY({v}) is not 1 to {RETRY_MAX}"))?
                }
                _ => {
                    return Err(format!(
                        "line {n}: unknown keyword {k}; patterns are {}, actions {}",
                        PATTERNS.join(" "),
                        ACTIONS.join(" ")
                    ))
                }
            }
        }
        rule.action = action.ok_or_else(|| format!("line {n}: the rule has no ACTION"))?;
        if rule.action == Action::Fwd && rule.fwdq.is_empty() {
            return Err(format!("line {n}: ACTION(FWD) needs FWDQ(queue)"));
        }
        rules.push(rule);
        if rules.len() > RULES_MAX {
            return Err(format!("more than {RULES_MAX} rules"));
        }
    }
    Ok((control, rules))
}

/// Whether `value` matches `pattern`: equal, or a generic pattern ending in `*`.
fn matches(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// A number pattern (REASON, FEEDBACK...): a number, or an MQ constant name for a reason.
fn number_matches(pattern: &str, value: i32) -> bool {
    if let Ok(n) = pattern.parse::<i32>() {
        return n == value;
    }
    let name = Reason::from_code(value.max(0) as u32).mq_name();
    matches(&pattern.to_ascii_uppercase(), name)
        || crate::req::feedback_name(value) == pattern.to_ascii_uppercase()
}

fn rule_matches(rule: &Rule, md: &MessageDescriptor, h: &DeadLetterHeader) -> bool {
    rule.patterns.iter().all(|(k, p)| match k.as_str() {
        "REASON" => number_matches(p, h.reason),
        "FEEDBACK" => number_matches(p, md.feedback),
        "DESTQ" => matches(p, &h.dest_q_name),
        "DESTQM" => matches(p, &h.dest_q_mgr_name),
        "FORMAT" => matches(p, &h.format),
        "APPLNAME" => matches(p, &md.put_appl_name),
        "APPLIDAT" => matches(p, &md.appl_identity),
        "USERID" => matches(p, &md.user_id),
        "REPLYQ" => matches(p, &md.reply_to_q),
        "REPLYQM" => matches(p, &md.reply_to_qmgr),
        "MSGTYPE" => p.parse::<i32>().is_ok_and(|t| t == md.msg_type),
        "PERSIST" => p.parse::<i32>().is_ok_and(|t| t == md.persistence.to_i32()),
        "APPLTYPE" => p.parse::<i32>().is_ok_and(|t| t == h.put_appl_type),
        _ => false,
    })
}

pub fn run(a: &Runmqdlq) -> Res {
    run_with(a).map_err(|f| Fail {
        code: f.code,
        message: format!("runmqdlq: {}", f.message),
    })
}

fn usage(m: String) -> Fail {
    Fail {
        code: EXIT_USAGE,
        message: m,
    }
}

fn run_with(a: &Runmqdlq) -> Res {
    let mut text = String::new();
    match &a.rules {
        Some(p) => {
            text = std::fs::read_to_string(p)
                .map_err(|e| samples::other(format!("cannot read {}: {e}", p.display())))?
        }
        None => {
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| samples::other(format!("reading the rules from stdin: {e}")))?;
        }
    }
    let (control, rules) = parse_rules(&text).map_err(usage)?;
    let qmgr =
        a.qmgr.clone().or(control.inputqm.clone()).ok_or_else(|| {
            usage("no queue manager: name it after the queue, or INPUTQM(..)".into())
        })?;
    let retry_int = Duration::from_secs(control.retry_int_s.unwrap_or(60));
    let c = samples::connect_with(&qmgr, &a.conn, "ferrymq runmqdlq")?;
    let dlq = a
        .queue
        .clone()
        .or(control.inputq.clone())
        .unwrap_or_else(|| qmgr_deadq(&c));
    let h = c
        .open(
            &dlq,
            open::INPUT_SHARED | open::BROWSE | open::SAVE_ALL_CONTEXT,
        )
        .map_err(samples::mq)?;
    let mut err = std::io::stderr();
    let mut done = Tally::default();
    loop {
        pass(&c, &h, &rules, retry_int, &mut done)?;
        // WAIT(NO) ends with the queue's end; WAIT(n) waits n seconds for another message,
        // WAIT(YES) as long as it takes (and passes over what it left now and then).
        let wait = match control.wait {
            Some(Some(0)) => break,
            Some(Some(s)) => Wait::Ms(s * 1000),
            _ => Wait::Ms(retry_int.as_millis().max(1000) as u64),
        };
        // A browse past the last message seen waits for the next one to arrive.
        let probe = GetOptions {
            browse: Browse::Next,
            wait,
            ..GetOptions::any()
        };
        match c.get(&h, &probe) {
            Ok(_) => continue,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                if control.wait.flatten().is_some() {
                    break;
                }
            }
            Err(e) => return Err(samples::mq(e)),
        }
    }
    c.close(&h, 0).map_err(samples::mq)?;
    c.disconnect().map_err(samples::mq)?;
    let _ = writeln!(
        err,
        "runmqdlq: '{dlq}': {} retried, {} forwarded, {} discarded, {} left",
        done.retried, done.forwarded, done.discarded, done.left
    );
    Ok(())
}

/// The queue manager's DEADQ (asked with MQSC, which a local connection may send), or
/// FerryMQ's default dead-letter queue when it cannot be asked.
fn qmgr_deadq(c: &Connection) -> String {
    c.admin("DISPLAY QMGR DEADQ")
        .ok()
        .and_then(|text| {
            let at = text.find("DEADQ(")? + "DEADQ(".len();
            let name = text[at..].split(')').next()?.trim().to_string();
            (!name.is_empty()).then_some(name)
        })
        .unwrap_or_else(|| DEFAULT_DLQ.to_string())
}

#[derive(Default)]
struct Tally {
    retried: u64,
    forwarded: u64,
    discarded: u64,
    left: u64,
}

/// One pass over the dead-letter queue, from its first message to its last.
fn pass(
    c: &Connection,
    h: &ObjectHandle,
    rules: &[Rule],
    retry_int: Duration,
    done: &mut Tally,
) -> Result<(), Fail> {
    let mut first = true;
    loop {
        let browse = GetOptions {
            browse: if first { Browse::First } else { Browse::Next },
            ..GetOptions::any()
        };
        first = false;
        let m = match c.get(h, &browse) {
            Ok(m) => m,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return Ok(()),
            Err(e) => return Err(samples::mq(e)),
        };
        let parsed = (m.md.format.trim_end() == dlh::FORMAT)
            .then(|| DeadLetterHeader::parse(&m.body))
            .flatten();
        let Some((header, _)) = parsed else {
            done.left += 1;
            continue;
        };
        let Some(rule) = rules.iter().find(|r| rule_matches(r, &m.md, &header)) else {
            done.left += 1;
            continue;
        };
        let mut err = std::io::stderr();
        match act(c, h, &m, &header, rule, retry_int) {
            Ok(true) => match rule.action {
                Action::Retry => done.retried += 1,
                Action::Fwd => done.forwarded += 1,
                Action::Discard => done.discarded += 1,
                Action::Ignore => done.left += 1,
            },
            Ok(false) => done.left += 1,
            Err(e) => {
                done.left += 1;
                let _ = writeln!(
                    err,
                    "runmqdlq: message {} (rule on line {}) left on the queue: {e}",
                    samples::hex(&m.md.msg_id),
                    rule.line
                );
            }
        }
    }
}

/// Carries out `rule` on the browsed message `m`; `Ok(false)` when it stays (IGNORE, or gone).
fn act(
    c: &Connection,
    h: &ObjectHandle,
    m: &Message,
    header: &DeadLetterHeader,
    rule: &Rule,
    retry_int: Duration,
) -> Result<bool, MqError> {
    if rule.action == Action::Ignore {
        return Ok(false);
    }
    let (dest, strip, tries) = match rule.action {
        Action::Retry => (header.dest_q_name.clone(), true, rule.retry),
        Action::Fwd => (
            rule.fwdq
                .replace("&DESTQ", &header.dest_q_name)
                .replace("&REPLYQ", &m.md.reply_to_q),
            !rule.header,
            1,
        ),
        _ => (String::new(), false, 1),
    };
    let mut last = None;
    for attempt in 0..tries {
        if attempt > 0 {
            std::thread::sleep(retry_int);
        }
        match move_one(c, h, m, header, &dest, strip) {
            Ok(moved) => return Ok(moved),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

/// Gets the message by its MsgId and, unless discarding (`dest` empty), puts it to `dest` (the
/// header stripped when `strip`), in one unit of work.
fn move_one(
    c: &Connection,
    h: &ObjectHandle,
    m: &Message,
    header: &DeadLetterHeader,
    dest: &str,
    strip: bool,
) -> Result<bool, MqError> {
    let get = GetOptions {
        syncpoint: Syncpoint::Yes,
        match_msg_id: Some(m.md.msg_id),
        ..GetOptions::any()
    };
    let got = match c.get(h, &get) {
        Ok(g) => g,
        // Another handler took it in the meantime.
        Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return Ok(false),
        Err(e) => return Err(e),
    };
    if !dest.is_empty() {
        let (md, body) = if strip {
            let mut md = got.md.clone();
            md.format = header.format.clone();
            md.encoding = header.encoding;
            md.ccsid = header.ccsid;
            (md, got.body.slice(dlh::LEN_BYTES..))
        } else {
            (got.md.clone(), Bytes::clone(&got.body))
        };
        let opts = PutOptions {
            syncpoint: Syncpoint::Yes,
            context: pmo::PASS_ALL_CONTEXT,
            context_hobj: h.hobj,
            ..PutOptions::default()
        };
        let put = c
            .open(dest, open::OUTPUT | open::PASS_ALL_CONTEXT)
            .and_then(|out| {
                let r = c.put(&out, &md, &got.props, body, &opts);
                let _ = c.close(&out, 0);
                r
            });
        if let Err(e) = put {
            c.backout()?;
            return Err(e);
        }
    }
    c.commit()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_table_with_control_line_comments_and_generic_names() {
        let (control, rules) = parse_rules(
            "* handler rules\n\
             INPUTQ(SYSTEM.DEAD.LETTER.QUEUE) INPUTQM(QM1) WAIT(NO) RETRYINT(0)\n\
             REASON(MQRC_Q_FULL) ACTION(RETRY) RETRY(3)\n\
             DESTQ(APP.*) ACTION(FWD) FWDQ(APP.DEAD) HEADER(NO)\n\
             ACTION(IGNORE)\n",
        )
        .unwrap();
        assert_eq!(control.inputq.as_deref(), Some("SYSTEM.DEAD.LETTER.QUEUE"));
        assert_eq!(control.wait, Some(Some(0)));
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].action, Action::Retry);
        assert_eq!(rules[0].retry, 3);
        assert!(!rules[1].header);
        let h = DeadLetterHeader {
            reason: 2053,
            dest_q_name: "APP.IN".into(),
            ..Default::default()
        };
        let md = MessageDescriptor::default();
        assert!(rule_matches(&rules[0], &md, &h));
        assert!(rule_matches(&rules[1], &md, &h));
        let other = DeadLetterHeader {
            reason: 2085,
            dest_q_name: "OTHER".into(),
            ..Default::default()
        };
        assert!(!rule_matches(&rules[0], &md, &other));
        assert!(!rule_matches(&rules[1], &md, &other));
        assert!(rule_matches(&rules[2], &md, &other));
        assert!(number_matches("2053", 2053));
        assert!(parse_rules("ACTION(FWD)").is_err());
        assert!(parse_rules("REASON(1) ACTION(JUMP)").is_err());
        assert!(parse_rules("BOGUS(1) ACTION(DISCARD)").is_err());
    }
}
