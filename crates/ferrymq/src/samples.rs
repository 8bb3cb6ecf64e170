//! Sample programs in the spirit of MQ's amqsput, amqsget and amqsbcg: `put` puts each line of
//! standard input (or each `--file`) as a message with the descriptor fields and properties its
//! options give; `get` prints and removes messages, `browse` prints them and leaves them, as text,
//! hex dump, descriptor (`--md`) or JSON lines. Both end with an exit status scripts can use: the
//! class of the MQ reason code they stopped on ([`exit_code`], the table in `--help`).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use crate::lines::Line;

use bytes::Bytes;
use clap::error::ErrorKind;
use clap::Parser;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, Message};
use ferrymq_types::descriptor::{msg_type, EXPIRY_UNLIMITED, PRIORITY_AS_Q_DEF};
use ferrymq_types::dlh;
use ferrymq_types::limits::{
    GET_WAIT_MAX_MS, OBJECT_NAME_LEN_MAX, PROPERTIES_PER_MSG_MAX, QMGR_NAME_LEN_MAX,
    STRING_LEN_MAX_BYTES,
};
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MqError, MsgId, Persistence, Properties, PropertyValue};
use ferrymq_types::{Reason, Reason as R};

use crate::lifecycle::{Fail, Res};

/// Exit status: any other failure, an MQ reason outside the classes below or a local one.
pub const EXIT_OTHER: i32 = 1;
/// Exit status: the command line is wrong.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: no message available (get/browse found none to write).
pub const EXIT_NO_MSG: i32 = 3;
/// Exit status: not authorised.
pub const EXIT_NOT_AUTHORIZED: i32 = 4;
/// Exit status: the queue (or queue manager it names) is not known.
pub const EXIT_UNKNOWN_OBJECT: i32 = 5;
/// Exit status: the queue manager cannot be reached or is ending.
pub const EXIT_QMGR_UNAVAILABLE: i32 = 6;

/// The reason classes with an exit status of their own, in the order `--help` lists them.
const CLASSES: &[(i32, &str, &[Reason])] = &[
    (EXIT_NO_MSG, "no message available", &[R::NO_MSG_AVAILABLE]),
    (
        EXIT_NOT_AUTHORIZED,
        "not authorised",
        &[
            R::NOT_AUTHORIZED,
            R::CONNECTION_NOT_AUTHORIZED,
            R::SECURITY_ERROR,
        ],
    ),
    (
        EXIT_UNKNOWN_OBJECT,
        "unknown object",
        &[
            R::UNKNOWN_OBJECT_NAME,
            R::UNKNOWN_OBJECT_Q_MGR,
            R::UNKNOWN_REMOTE_Q_MGR,
            R::UNKNOWN_ALIAS_BASE_Q,
            R::Q_DELETED,
        ],
    ),
    (
        EXIT_QMGR_UNAVAILABLE,
        "queue manager unavailable",
        &[
            R::Q_MGR_NOT_AVAILABLE,
            R::CONNECTION_BROKEN,
            R::HOST_NOT_AVAILABLE,
            R::STANDBY_Q_MGR,
            R::RECONNECT_FAILED,
            R::CHANNEL_NOT_AVAILABLE,
            R::Q_MGR_NAME_ERROR,
            R::Q_MGR_QUIESCING,
            R::Q_MGR_STOPPING,
            R::CONNECTION_QUIESCING,
            R::CONNECTION_STOPPING,
        ],
    ),
];

/// The exit status for an MQ reason: its class's, or [`EXIT_OTHER`].
pub fn exit_code(reason: Reason) -> i32 {
    CLASSES
        .iter()
        .find(|(_, _, rs)| rs.contains(&reason))
        .map_or(EXIT_OTHER, |(code, _, _)| *code)
}

/// The exit status table as `--help` prints it.
fn exit_table() -> String {
    let mut s = String::from(
        "Exit status (on an MQ error standard error says `COMMAND: MQRC_NAME (number): what happened`):\n\
         \x20 0  success; get/browse wrote at least one message (fewer than --count is not an error)\n\
         \x20 1  any other MQ reason, or a local failure (unreadable file, standard output)\n\
         \x20 2  usage error (unknown option, missing or malformed value)\n",
    );
    for (code, what, reasons) in CLASSES {
        let mut line = format!("  {code}  {what}:");
        for (i, r) in reasons.iter().enumerate() {
            let comma = if i + 1 < reasons.len() { "," } else { "" };
            let item = format!("{} ({}){comma}", r.mq_name(), r.code());
            if line.len() + 1 + item.len() > 96 {
                s.push_str(&line);
                s.push('\n');
                line = String::from("     ");
            }
            line.push(' ');
            line.push_str(&item);
        }
        s.push_str(&line);
        s.push('\n');
    }
    s
}

const ID_HELP: &str = "\
ID (--msg-id, --correl-id): up to 24 bytes as hex, `0x` optional (e.g. 0A1B2C), or text after
`text:` (e.g. text:ORDER-42); a shorter id is padded with zero bytes. Ids print as 48 hex digits.";

const PUT_EXAMPLES: &str = "\
Examples:
  echo hello | ferrymq put QM1 APP.IN --persistent
  seq 100 | ferrymq put QM1 APP.IN --conn 'mq1(1414),mq2(1414)'
  ferrymq put QM1 APP.IN --file invoice.pdf --correl-id text:INV-2024-17 --property kind=pdf
  echo ping | ferrymq put QM1 APP.REQ --reply-to APP.REPLY@QM1 --expiry 300 --priority 7 \\
      --property attempt:int=1 --property urgent:bool=true

One message per line of standard input (the newline removed, Format MQSTR), or one per --file
(binary-safe, any size up to the queue manager's MAXMSGL, Format blank). Messages are put outside
syncpoint, one by one: if a put fails, the ones before it stay put and the count is reported.
";

const GET_EXAMPLES: &str = "\
Examples:
  ferrymq get QM1 APP.IN                           print each body as a line, remove it
  ferrymq get QM1 APP.IN --count 1 --wait-ms 5000  wait up to 5 s for one message
  ferrymq get QM1 APP.REPLY --correl-id text:INV-2024-17 --md
  ferrymq browse QM1 APP.IN --json | jq -r .body   leave the messages, one JSON object each
  ferrymq get QM1 APP.IN --hex > dump.txt

A get removes a message only once it is written (to a pipe: once its reader has read it);
if the reader closes the pipe (`| head -1`) the command ends with status 0 and the rest stay
queued. --json prints, per line, the descriptor, the properties, `body` (UTF-8 text) or
`body_base64` (when the body is not UTF-8).
";

/// `ferrymq put`: options of the put sample.
#[derive(Parser, Debug)]
#[command(
    bin_name = "ferrymq put",
    about = "Put messages to a queue: each line of standard input, or each --file, is one message"
)]
struct PutArgs {
    /// Queue manager name (bindings mode, unless --conn)
    qmgr: String,
    /// Queue to put to
    queue: String,
    /// Make the messages persistent (default: the queue's DEFPSIST)
    #[arg(long)]
    persistent: bool,
    /// Priority 0-9 (default: the queue's DEFPRTY)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..=9))]
    priority: Option<i32>,
    /// Correlation id (see ID below)
    #[arg(long, value_name = "ID", value_parser = parse_id)]
    correl_id: Option<MsgId>,
    /// Message id (see ID below; default: a new one per message)
    #[arg(long, value_name = "ID", value_parser = parse_id)]
    msg_id: Option<MsgId>,
    /// Reply-to queue, @ its queue manager (default: this one); makes the messages requests (MsgType 1)
    #[arg(long, value_name = "Q[@QMGR]")]
    reply_to: Option<String>,
    /// Expiry in tenths of a second, as MQ counts it (default: unlimited)
    #[arg(long, value_name = "TENTHS", value_parser = clap::value_parser!(i32).range(1..))]
    expiry: Option<i32>,
    /// A property; repeatable. TYPE: string (default), int, float, bool, or bytes (hex)
    #[arg(long = "property", value_name = "NAME[:TYPE]=VALUE", value_parser = parse_property)]
    properties: Vec<(String, PropertyValue)>,
    /// Put the whole file as one message (repeatable; standard input is then not read)
    #[arg(long, value_name = "PATH")]
    file: Vec<PathBuf>,
    #[command(flatten)]
    conn: crate::cli::ConnArgs,
}

/// `ferrymq get` / `ferrymq browse`: options of the get and browse samples.
#[derive(Parser, Debug)]
struct GetArgs {
    /// Queue manager name (bindings mode, unless --conn)
    qmgr: String,
    /// Queue to read
    queue: String,
    /// Print the message descriptor and properties before each body (browse: the default)
    #[arg(long)]
    md: bool,
    /// Browse: print only the bodies, one per line, without the descriptor
    #[arg(long, conflicts_with = "md")]
    body_only: bool,
    /// Print each body as a hex dump
    #[arg(long)]
    hex: bool,
    /// Print one JSON object per message (descriptor, properties, body)
    #[arg(long, conflicts_with_all = ["md", "hex"])]
    json: bool,
    /// Stop after N messages
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Only messages with this correlation id (see ID below)
    #[arg(long, value_name = "ID", value_parser = parse_id)]
    correl_id: Option<MsgId>,
    /// Wait up to MS milliseconds for each message; 0 does not wait
    #[arg(long, value_name = "MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=GET_WAIT_MAX_MS))]
    wait_ms: u64,
    #[command(flatten)]
    conn: crate::cli::ConnArgs,
}

/// Parses `rest` (the arguments after the command name) with `T`'s derived parser, the examples
/// and the exit status table added to its help. `Ok(None)`: help was printed.
pub(crate) fn parse_args<T: Parser>(
    bin: &'static str,
    about: Option<&'static str>,
    examples: &str,
    rest: &[String],
) -> Result<Option<T>, Fail> {
    let mut cmd = T::command()
        .bin_name(bin)
        .after_help(format!("{ID_HELP}\n\n{examples}\n{}", exit_table()));
    if let Some(a) = about {
        cmd = cmd.about(a);
    }
    let argv = std::iter::once(bin.to_string()).chain(rest.iter().cloned());
    match cmd
        .try_get_matches_from(argv)
        .and_then(|m| T::from_arg_matches(&m))
    {
        Ok(t) => Ok(Some(t)),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            // A closed standard output is no reason to panic.
            let _ = write!(std::io::stdout(), "{}", e.render());
            Ok(None)
        }
        Err(e) => Err(Fail {
            code: EXIT_USAGE,
            message: e.render().to_string().trim_end().to_string(),
        }),
    }
}

/// An identifier from the command line: hex (optionally `0x`), or `text:` and the bytes of the
/// text; at most 24 bytes, padded with zeros.
fn parse_id(s: &str) -> Result<MsgId, String> {
    let bytes = match s.strip_prefix("text:") {
        Some(t) => t.as_bytes().to_vec(),
        None => {
            let h = s
                .strip_prefix("0x")
                .or_else(|| s.strip_prefix("0X"))
                .unwrap_or(s);
            from_hex(h).ok_or_else(|| {
                format!("'{s}' is neither hex (an even number of 0-9 A-F) nor text:TEXT")
            })?
        }
    };
    if bytes.len() > 24 {
        return Err(format!(
            "'{s}' is {} bytes; an id holds at most 24",
            bytes.len()
        ));
    }
    let mut id = [0u8; 24];
    id[..bytes.len()].copy_from_slice(&bytes);
    Ok(id)
}

fn from_hex(h: &str) -> Option<Vec<u8>> {
    if h.is_empty() || !h.len().is_multiple_of(2) || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
        .collect()
}

/// `NAME=VALUE` (a string) or `NAME:TYPE=VALUE`.
pub(crate) fn parse_property(s: &str) -> Result<(String, PropertyValue), String> {
    let (left, value) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=VALUE or NAME:TYPE=VALUE"))?;
    let (name, ty) = left.split_once(':').unwrap_or((left, "string"));
    if name.is_empty() {
        return Err(format!("'{s}' has no property name"));
    }
    if name.len() > STRING_LEN_MAX_BYTES || value.len() > STRING_LEN_MAX_BYTES {
        return Err(format!(
            "property '{}': names and values are at most {STRING_LEN_MAX_BYTES} bytes",
            name.chars().take(40).collect::<String>()
        ));
    }
    let bad = |what: &str| format!("'{value}' is not {what} (property '{name}')");
    let v = match ty {
        "string" => PropertyValue::String(value.to_string()),
        "int" => PropertyValue::Int(value.parse().map_err(|_| bad("an integer"))?),
        "float" => PropertyValue::Float(value.parse().map_err(|_| bad("a number"))?),
        "bool" => PropertyValue::Bool(match value {
            "true" => true,
            "false" => false,
            _ => return Err(bad("true or false")),
        }),
        "bytes" => PropertyValue::Bytes(if value.is_empty() {
            Vec::new()
        } else {
            from_hex(value).ok_or_else(|| bad("hex"))?
        }),
        t => {
            return Err(format!(
                "property type '{t}' is not one of string, int, float, bool, bytes"
            ))
        }
    };
    Ok((name.to_string(), v))
}

fn usage(m: impl Into<String>) -> Fail {
    Fail {
        code: EXIT_USAGE,
        message: m.into(),
    }
}

pub(crate) fn other(m: impl Into<String>) -> Fail {
    Fail {
        code: EXIT_OTHER,
        message: m.into(),
    }
}

pub(crate) fn mq(e: MqError) -> Fail {
    Fail {
        code: exit_code(e.reason),
        message: e.to_string(),
    }
}

/// The same failure, its message prefixed with the command's name.
pub(crate) fn named(cmd: &str) -> impl Fn(Fail) -> Fail + '_ {
    move |f| Fail {
        code: f.code,
        message: format!("{cmd}: {}", f.message),
    }
}

/// Connects in bindings mode, or in client mode with `--conn` (and TLS with `--tls-ca`).
pub fn connect_with(
    qmgr: &str,
    args: &crate::cli::ConnArgs,
    app: &str,
) -> Result<Connection, Fail> {
    let tls = args.tls.options().map_err(usage)?;
    let mut opts = match &args.conn {
        Some(c) => ConnectOptions::client(qmgr, c).map_err(mq)?,
        None if tls.is_some() => {
            return Err(usage(
                "--tls-ca is for client mode: give --conn 'host(port)' too".to_string(),
            ))
        }
        None => ConnectOptions::bindings(qmgr),
    };
    opts.tls = tls;
    opts.app_name = app.to_string();
    args.auth.apply(&mut opts).map_err(|message| Fail {
        code: EXIT_USAGE,
        message,
    })?;
    Connection::connect(opts).map_err(mq)
}

/// `ferrymq put QMNAME QUEUE [options]`.
pub fn put(rest: &[String]) -> Res {
    let Some(a) = parse_args::<PutArgs>("ferrymq put", None, PUT_EXAMPLES, rest)? else {
        return Ok(());
    };
    put_with(&a).map_err(named("put"))
}

fn put_with(a: &PutArgs) -> Res {
    let (reply_to_q, reply_to_qmgr) = match a.reply_to.as_deref() {
        None => (String::new(), String::new()),
        Some(r) => {
            let (q, qm) = r.split_once('@').unwrap_or((r, ""));
            if q.is_empty() || q.len() > OBJECT_NAME_LEN_MAX || qm.len() > QMGR_NAME_LEN_MAX {
                return Err(Fail {
                    code: EXIT_USAGE,
                    message: format!(
                        "--reply-to '{r}': expected Q or Q@QMGR, a queue name of 1 to {OBJECT_NAME_LEN_MAX} characters and a queue manager name of at most {QMGR_NAME_LEN_MAX}"
                    ),
                });
            }
            (q.to_string(), qm.to_string())
        }
    };
    let mut md = MessageDescriptor {
        persistence: if a.persistent {
            Persistence::Persistent
        } else {
            Persistence::AsQueueDef
        },
        priority: a.priority.unwrap_or(PRIORITY_AS_Q_DEF),
        expiry: a.expiry.unwrap_or(EXPIRY_UNLIMITED),
        msg_id: a.msg_id.unwrap_or_default(),
        correl_id: a.correl_id.unwrap_or_default(),
        msg_type: if reply_to_q.is_empty() {
            msg_type::DATAGRAM
        } else {
            msg_type::REQUEST
        },
        format: if a.file.is_empty() {
            "MQSTR".into()
        } else {
            String::new()
        },
        reply_to_q,
        reply_to_qmgr,
        ..Default::default()
    };
    let mut props = Properties::default();
    for (k, v) in &a.properties {
        props.set(k.clone(), v.clone());
    }
    if props.0.len() > PROPERTIES_PER_MSG_MAX {
        return Err(Fail {
            code: EXIT_USAGE,
            message: format!(
                "{} properties; a message carries at most {PROPERTIES_PER_MSG_MAX}",
                props.0.len()
            ),
        });
    }
    let opts = PutOptions {
        new_msg_id: a.msg_id.is_none(),
        ..PutOptions::default()
    };

    let c = connect_with(&a.qmgr, &a.conn, "ferrymq put")?;
    if !md.reply_to_q.is_empty() && md.reply_to_qmgr.is_empty() {
        // As MQ does for a blank ReplyToQMgr: the queue manager the message is put on.
        md.reply_to_qmgr = c.qmgr_name().to_string();
    }
    // Files are checked before anything is put, so that a file too big puts nothing.
    let max = c.max_msg_len() as u64;
    // In client mode the limit is the lower of the queue manager's MAXMSGL and its
    // server-connection channel's, as the connection negotiated it.
    let too_big = |what: String, len: u64, after: &str| {
        let (reason, whose) = if a.conn.conn.is_some() {
            (
                Reason::MSG_TOO_BIG_FOR_CHANNEL,
                format!("this client connection takes messages of at most {max} bytes (the lower of the queue manager's MAXMSGL and its server-connection channel's)"),
            )
        } else {
            (
                Reason::MSG_TOO_BIG_FOR_Q_MGR,
                format!("the queue manager takes messages of at most {max} bytes (its MAXMSGL)"),
            )
        };
        Fail {
            code: exit_code(reason),
            message: format!("{reason}: {what} is {len} bytes; {whose}; {after}"),
        }
    };
    for f in &a.file {
        let len = std::fs::metadata(f)
            .map_err(|e| other(format!("cannot read {}: {e}", f.display())))?
            .len();
        if len > max {
            return Err(too_big(f.display().to_string(), len, "nothing was put"));
        }
    }
    let h = c.open(&a.queue, open::OUTPUT).map_err(mq)?;
    let mut n: u64 = 0;
    let stopped = |f: Fail, n: u64| Fail {
        code: f.code,
        message: format!(
            "{}\nput: stopped after {n} message(s) put to '{}'; the rest were not put",
            f.message, a.queue
        ),
    };
    let put_one = |body: Vec<u8>| {
        c.put(&h, &md, &props, Bytes::from(body), &opts)
            .map(|_| ())
            .map_err(mq)
    };
    let mut progress = ferrymq_client::progress::Progress::new(
        &format!("put '{}'", a.queue),
        "messages",
        (!a.file.is_empty()).then_some(a.file.len() as u64),
    );
    if a.file.is_empty() {
        let mut input = std::io::stdin().lock();
        let mut line = Vec::new();
        loop {
            // A line is never held past the largest message the connection takes.
            match crate::lines::read_line(&mut input, &mut line, max as usize) {
                Ok(Line::End) => break,
                Ok(Line::Read) => {}
                Ok(Line::TooLong { len, .. }) => {
                    let what = format!("line {} of the standard input", n + 1);
                    let after = "it and the lines after it were not put";
                    return Err(stopped(too_big(what, len, after), n));
                }
                Err(e) => return Err(stopped(other(format!("reading stdin: {e}")), n)),
            }
            put_one(std::mem::take(&mut line)).map_err(|f| stopped(f, n))?;
            n += 1;
            progress.inc(1);
        }
    } else {
        for f in &a.file {
            let mut body = Vec::new();
            std::fs::File::open(f)
                .and_then(|mut file| file.read_to_end(&mut body))
                .map_err(|e| stopped(other(format!("cannot read {}: {e}", f.display())), n))?;
            put_one(body).map_err(|f| stopped(f, n))?;
            n += 1;
            progress.inc(1);
        }
    }
    progress.finish();
    c.close(&h, 0).map_err(mq)?;
    c.disconnect().map_err(mq)?;
    let _ = writeln!(
        std::io::stderr(),
        "put: {n} message(s) put to '{}'",
        a.queue
    );
    Ok(())
}

pub(crate) fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02X}")).collect()
}

/// A classic hex dump: offset, 16 bytes in hex, the printable ones as text.
fn hex_dump(body: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    for (i, chunk) in body.chunks(16).enumerate() {
        let _ = write!(out, "{:08X} ", i * 16);
        for j in 0..16 {
            if j == 8 {
                out.push(' ');
            }
            match chunk.get(j) {
                Some(b) => {
                    let _ = write!(out, " {b:02X}");
                }
                None => out.push_str("   "),
            }
        }
        out.push_str("  |");
        out.extend(chunk.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        }));
        out.push_str("|\n");
    }
}

fn property_text(v: &PropertyValue) -> String {
    match v {
        PropertyValue::String(s) => format!("String({s})"),
        PropertyValue::Int(i) => format!("Int({i})"),
        PropertyValue::Float(f) => format!("Float({f})"),
        PropertyValue::Bool(b) => format!("Bool({b})"),
        PropertyValue::Bytes(b) => format!("Bytes({})", hex(b)),
    }
}

fn property_json(v: &PropertyValue) -> serde_json::Value {
    use serde_json::json;
    match v {
        PropertyValue::String(s) => json!(s),
        PropertyValue::Int(i) => json!(i),
        PropertyValue::Float(f) => json!(f),
        PropertyValue::Bool(b) => json!(b),
        PropertyValue::Bytes(b) => json!({ "hex": hex(b) }),
    }
}

/// How `get` and `browse` print messages.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    pub md: bool,
    pub hex: bool,
    pub json: bool,
}

/// What `get` and `browse` write for message number `n` (from 1).
pub(crate) fn render(m: &Message, n: u64, style: Style) -> String {
    use std::fmt::Write as _;
    let md = &m.md;
    let (date, time) = md.put_date_time();
    if style.json {
        let mut o = serde_json::json!({
            "msg_id": hex(&md.msg_id),
            "correl_id": hex(&md.correl_id),
            "persistence": md.persistence.to_i32(),
            "priority": md.priority,
            "expiry": md.expiry,
            "msg_type": md.msg_type,
            "format": md.format,
            "reply_to_q": md.reply_to_q,
            "reply_to_qmgr": md.reply_to_qmgr,
            "put_date": date,
            "put_time": time,
            "put_time_ms": md.put_time_ms,
            "backout_count": md.backout_count,
            "put_appl_name": md.put_appl_name,
            "user_id": md.user_id,
            "appl_identity": md.appl_identity,
            "report": md.report,
            "feedback": md.feedback,
            "encoding": md.encoding,
            "ccsid": md.ccsid,
            "length": m.data_len,
            "properties": serde_json::Map::from_iter(
                m.props.0.iter().map(|(k, v)| (k.clone(), property_json(v)))
            ),
        });
        match std::str::from_utf8(&m.body) {
            Ok(t) => o["body"] = t.into(),
            Err(_) => {
                use base64::Engine as _;
                o["body_base64"] = base64::engine::general_purpose::STANDARD
                    .encode(&m.body)
                    .into();
            }
        }
        return format!("{o}\n");
    }
    let mut out = String::new();
    if style.md {
        let _ = writeln!(out, "Message {n} ({} bytes)", m.data_len);
        let _ = writeln!(out, "  MsgId({})", hex(&md.msg_id));
        let _ = writeln!(out, "  CorrelId({})", hex(&md.correl_id));
        let _ = writeln!(out, "  Persistence({})", md.persistence.to_i32());
        let _ = writeln!(out, "  Priority({})", md.priority);
        let _ = writeln!(out, "  Expiry({})", md.expiry);
        let _ = writeln!(out, "  MsgType({})", md.msg_type);
        let _ = writeln!(out, "  Format({})", md.format);
        let _ = writeln!(out, "  ReplyToQ({})", md.reply_to_q);
        let _ = writeln!(out, "  ReplyToQMgr({})", md.reply_to_qmgr);
        let _ = writeln!(out, "  PutDate({date}) PutTime({time})");
        let _ = writeln!(out, "  PutApplName({})", md.put_appl_name);
        let _ = writeln!(out, "  UserIdentifier({})", md.user_id);
        if !md.appl_identity.is_empty() {
            let _ = writeln!(out, "  ApplIdentityData({})", md.appl_identity);
        }
        let _ = writeln!(
            out,
            "  Encoding({}) CodedCharSetId({})",
            md.encoding, md.ccsid
        );
        if md.report != 0 {
            let _ = writeln!(out, "  Report({:#010X})", md.report);
        }
        if md.msg_type == msg_type::REPORT || md.feedback != 0 {
            let _ = writeln!(
                out,
                "  Feedback({} {})",
                md.feedback,
                crate::req::feedback_name(md.feedback)
            );
        }
        let _ = writeln!(out, "  BackoutCount({})", md.backout_count);
        for (k, v) in &m.props.0 {
            let _ = writeln!(out, "  Property({k}) {}", property_text(v));
        }
    }
    // A dead-lettered message: its header's fields, then the original message.
    let mut body: &[u8] = &m.body;
    if style.md && md.format.trim_end() == dlh::FORMAT {
        if let Some((h, rest)) = dlh::DeadLetterHeader::parse(&m.body) {
            let reason = crate::req::feedback_name(h.reason);
            let _ = writeln!(out, "  DLH Reason({} {reason})", h.reason);
            let _ = writeln!(out, "  DLH DestQName({})", h.dest_q_name);
            let _ = writeln!(out, "  DLH DestQMgrName({})", h.dest_q_mgr_name);
            let _ = writeln!(out, "  DLH Format({})", h.format);
            let _ = writeln!(
                out,
                "  DLH Encoding({}) CodedCharSetId({})",
                h.encoding, h.ccsid
            );
            let _ = writeln!(
                out,
                "  DLH PutApplType({}) PutApplName({})",
                h.put_appl_type, h.put_appl_name
            );
            let _ = writeln!(out, "  DLH PutDate({}) PutTime({})", h.put_date, h.put_time);
            body = rest;
        }
    }
    if style.hex || (style.md && std::str::from_utf8(body).is_err()) {
        hex_dump(body, &mut out);
    } else {
        out.push_str(&String::from_utf8_lossy(body));
        out.push('\n');
    }
    if style.md || style.hex {
        out.push('\n');
    }
    out
}

/// Whether what was written to standard output has been handed over. To a pipe: once its reader
/// has read all of it (FIONREAD on the pipe is 0), waiting for that as long as the reader lives;
/// false if the reader closed its end first (`| head -1` after its line), as what it did not read
/// was not handed over. Any other output (a file, a terminal): at once.
fn handed_over(out: &std::io::StdoutLock<'_>) -> std::io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    let fd = out.as_fd();
    let file = std::fs::File::from(fd.try_clone_to_owned()?);
    if !file.metadata()?.file_type().is_fifo() {
        return Ok(true);
    }
    // Readers usually take what was written within microseconds: look again soon, then less often.
    let mut wait_ns: i64 = 20_000;
    loop {
        if rustix::io::ioctl_fionread(fd)? == 0 {
            return Ok(true);
        }
        // On a pipe's write end, POLLERR means no reader is left; it may have read everything
        // just before leaving.
        let mut fds = [PollFd::new(&fd, PollFlags::empty())];
        let tick = Timespec {
            tv_sec: 0,
            tv_nsec: wait_ns,
        };
        wait_ns = (wait_ns * 2).min(10_000_000);
        poll(&mut fds, Some(&tick))?;
        if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) {
            return Ok(rustix::io::ioctl_fionread(fd)? == 0);
        }
    }
}

const GET_ABOUT: &str =
    "Get messages from a queue: print each one, then remove it (committed once written)";
const BROWSE_ABOUT: &str = "Browse messages on a queue: print each one and leave it there";

/// `get` prints and removes messages, `browse` prints them and leaves them. A get never removes a
/// message it could not hand over: each message is got under syncpoint, written and flushed to
/// standard output, and only then committed — to a pipe, once its reader has read it
/// ([`handed_over`]); if the write fails or the reader closes the pipe first (as `| head -1`
/// does) the get is backed out, the message stays on the queue, and the command ends quietly
/// with exit status 0. Finding no message at all ends with [`EXIT_NO_MSG`].
pub fn get(rest: &[String], browse: bool) -> Res {
    let cmd = if browse { "browse" } else { "get" };
    let parsed = if browse {
        parse_args::<GetArgs>("ferrymq browse", Some(BROWSE_ABOUT), GET_EXAMPLES, rest)?
    } else {
        parse_args::<GetArgs>("ferrymq get", Some(GET_ABOUT), GET_EXAMPLES, rest)?
    };
    let Some(a) = parsed else {
        return Ok(());
    };
    get_with(&a, browse, cmd).map_err(named(cmd))
}

fn get_with(a: &GetArgs, browse: bool, cmd: &str) -> Res {
    // Browse prints the descriptor as MQ's amqsbcg does, unless asked for the bodies only.
    let style = Style {
        md: a.md || (browse && !a.body_only && !a.json),
        hex: a.hex,
        json: a.json,
    };
    let q = &a.queue;
    let c = connect_with(&a.qmgr, &a.conn, &format!("ferrymq {cmd}"))?;
    let h = c
        .open(
            q,
            if browse {
                open::BROWSE
            } else {
                open::INPUT_AS_Q_DEF
            },
        )
        .map_err(mq)?;
    let stdout = std::io::stdout();
    // Progress on standard error for a long get into a file or pipe; on a terminal the messages
    // themselves show it.
    let mut progress = (!stdout.is_terminal()).then(|| {
        ferrymq_client::progress::Progress::new(&format!("{cmd} '{q}'"), "messages", a.count)
    });
    let mut out = stdout.lock();
    let mut n: u64 = 0;
    let mut closed = None;
    let mut empty = None;
    while a.count.is_none_or(|max| n < max) {
        let opts = GetOptions {
            wait: if a.wait_ms > 0 {
                Wait::Ms(a.wait_ms)
            } else {
                Wait::NoWait
            },
            browse: match (browse, n) {
                (false, _) => Browse::No,
                (true, 0) => Browse::First,
                (true, _) => Browse::Next,
            },
            syncpoint: if browse {
                Syncpoint::No
            } else {
                Syncpoint::Yes
            },
            match_correl_id: a.correl_id,
            ..GetOptions::any()
        };
        match c.get(&h, &opts) {
            Ok(m) => {
                let text = render(&m, n + 1, style);
                if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                    if !browse {
                        c.backout().map_err(mq)?;
                    }
                    closed = Some(e);
                    break;
                }
                if !browse {
                    // If whether it was read cannot be told, the successful write counts.
                    if let Ok(false) = handed_over(&out) {
                        c.backout().map_err(mq)?;
                        closed = Some(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
                        break;
                    }
                    c.commit().map_err(mq)?;
                }
                n += 1;
                if let Some(p) = progress.as_mut() {
                    p.inc(1);
                }
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                empty = Some(e);
                break;
            }
            Err(e) => {
                if !browse {
                    // Nothing uncommitted should remain, but never leave a got message behind.
                    let _ = c.backout();
                }
                return Err(stopped_after(mq(e), cmd, n, q));
            }
        }
    }
    if let Some(p) = progress {
        p.finish();
    }
    c.close(&h, 0).map_err(mq)?;
    c.disconnect().map_err(mq)?;
    // Not eprintln!: a closed standard error must not turn this into a panic either.
    let mut err = std::io::stderr();
    match closed {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            let _ = writeln!(
                err,
                "{cmd}: {n} message(s) from '{q}'; output closed, the next message was left on the queue"
            );
        }
        Some(e) => {
            return Err(other(format!(
                "{n} message(s) from '{q}'; cannot write standard output ({e}), the next message was left on the queue"
            )))
        }
        None => match empty {
            Some(e) if n == 0 => return Err(mq(e)),
            _ => {
                let _ = writeln!(err, "{cmd}: {n} message(s) from '{q}'");
            }
        },
    }
    Ok(())
}

fn stopped_after(f: Fail, cmd: &str, n: u64, q: &str) -> Fail {
    Fail {
        code: f.code,
        message: format!(
            "{}\n{cmd}: stopped after {n} message(s) from '{q}'",
            f.message
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_reason_has_its_class_and_others_exit_1() {
        for (code, _, reasons) in CLASSES {
            for r in *reasons {
                assert_eq!(exit_code(*r), *code, "{}", r.mq_name());
            }
        }
        assert_eq!(exit_code(Reason::Q_FULL), EXIT_OTHER);
        assert_eq!(exit_code(Reason::MSG_TOO_BIG_FOR_Q_MGR), EXIT_OTHER);
        let table = exit_table();
        for r in [2033, 2035, 2085, 2059, 2009, 2538, 2543] {
            assert!(table.contains(&format!("({r})")), "{r} missing:\n{table}");
        }
    }

    #[test]
    fn ids_are_hex_or_prefixed_text_and_at_most_24_bytes() {
        let id = parse_id("0A1b").unwrap();
        assert_eq!(&id[..3], &[0x0A, 0x1B, 0]);
        assert_eq!(parse_id("0x0A1B").unwrap(), id);
        assert_eq!(&parse_id("text:AB").unwrap()[..3], b"AB\0");
        assert!(parse_id("ABC").is_err());
        assert!(parse_id("zz").is_err());
        assert!(parse_id(&"00".repeat(25)).is_err());
        assert!(parse_id(&format!("text:{}", "x".repeat(25))).is_err());
        assert_eq!(parse_id(&"FF".repeat(24)).unwrap(), [0xFF; 24]);
    }

    #[test]
    fn properties_take_a_type() {
        assert_eq!(
            parse_property("a=b=c").unwrap(),
            ("a".into(), PropertyValue::String("b=c".into()))
        );
        assert_eq!(
            parse_property("n:int=-4").unwrap().1,
            PropertyValue::Int(-4)
        );
        assert_eq!(
            parse_property("f:float=1.5").unwrap().1,
            PropertyValue::Float(1.5)
        );
        assert_eq!(
            parse_property("b:bool=true").unwrap().1,
            PropertyValue::Bool(true)
        );
        assert_eq!(
            parse_property("x:bytes=0aff").unwrap().1,
            PropertyValue::Bytes(vec![0x0A, 0xFF])
        );
        let long = format!("k={}", "v".repeat(STRING_LEN_MAX_BYTES + 1));
        for bad in ["novalue", "=v", "n:int=x", "b:bool=yes", "t:date=1", &long] {
            assert!(parse_property(bad).is_err(), "{bad}");
        }
        let longest = format!("k={}", "v".repeat(STRING_LEN_MAX_BYTES));
        assert!(parse_property(&longest).is_ok());
    }

    #[test]
    fn hex_dump_lines() {
        let mut s = String::new();
        hex_dump(b"Hello, world!\n\x00\xffAB", &mut s);
        assert_eq!(
            s,
            "00000000  48 65 6C 6C 6F 2C 20 77  6F 72 6C 64 21 0A 00 FF  |Hello, world!...|\n\
             00000010  41 42                                             |AB|\n"
        );
    }
}
