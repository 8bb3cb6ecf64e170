//! Sample programs in the spirit of MQ's amqsput, amqsget and amqsbcg: put each line of standard
//! input as a message, get (print and remove) messages, browse (print and leave) them.

use std::io::BufRead;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::descriptor::msg_type;
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};

use crate::lifecycle::{Fail, Res};
use crate::mqargs::{parse, Flag};

fn other(m: impl Into<String>) -> Fail {
    Fail {
        code: 1,
        message: m.into(),
    }
}

fn mq(e: ferrymq_types::MqError) -> Fail {
    Fail {
        code: e.reason.code().min(255) as i32,
        message: e.to_string(),
    }
}

pub fn connect(qmgr: &str, conn: Option<&str>, app: &str) -> Result<Connection, Fail> {
    let mut opts = match conn {
        Some(c) => ConnectOptions::client(qmgr, c).map_err(mq)?,
        None => ConnectOptions::bindings(qmgr),
    };
    opts.app_name = app.to_string();
    Connection::connect(opts).map_err(mq)
}

fn queue_args(
    cmd: &str,
    args: &[String],
    extra: &[Flag],
) -> Result<(crate::mqargs::Parsed, String, String), Fail> {
    let mut flags = vec![Flag::Value("--conn")];
    flags.extend_from_slice(extra);
    let p = parse(cmd, args, &flags).map_err(other)?;
    match p.positional.as_slice() {
        [qm, q] => {
            let (qm, q) = (qm.clone(), q.clone());
            Ok((p, qm, q))
        }
        _ => Err(other(format!("{cmd}: usage: ferrymq {cmd} QMNAME QUEUE"))),
    }
}

pub fn put(args: &[String]) -> Res {
    let (p, qm, q) = queue_args("put", args, &[Flag::Switch("--persistent")])?;
    let c = connect(&qm, p.value("--conn"), "ferrymq put")?;
    let h = c.open(&q, open::OUTPUT).map_err(mq)?;
    let md = MessageDescriptor {
        persistence: if p.has("--persistent") {
            Persistence::Persistent
        } else {
            Persistence::AsQueueDef
        },
        format: "MQSTR".into(),
        msg_type: msg_type::DATAGRAM,
        ..Default::default()
    };
    let mut n = 0;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| other(format!("put: reading stdin: {e}")))?;
        c.put(
            &h,
            &md,
            &Properties::default(),
            Bytes::from(line),
            &PutOptions::default(),
        )
        .map_err(mq)?;
        n += 1;
    }
    c.close(&h, 0).map_err(mq)?;
    c.disconnect().map_err(mq)?;
    eprintln!("put: {n} message(s) put to '{q}'");
    Ok(())
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02X}")).collect()
}

pub fn get(args: &[String], browse: bool) -> Res {
    let cmd = if browse { "browse" } else { "get" };
    let (p, qm, q) = queue_args(cmd, args, &[Flag::Value("--wait-ms")])?;
    let wait_ms: u64 = p.num("--wait-ms").map_err(other)?.unwrap_or(0);
    let c = connect(&qm, p.value("--conn"), &format!("ferrymq {cmd}"))?;
    let h = c
        .open(
            &q,
            if browse {
                open::BROWSE
            } else {
                open::INPUT_AS_Q_DEF
            },
        )
        .map_err(mq)?;
    let mut n = 0;
    loop {
        let opts = GetOptions {
            wait: if wait_ms > 0 {
                Wait::Ms(wait_ms)
            } else {
                Wait::NoWait
            },
            browse: match (browse, n) {
                (false, _) => Browse::No,
                (true, 0) => Browse::First,
                (true, _) => Browse::Next,
            },
            ..GetOptions::any()
        };
        match c.get(&h, &opts) {
            Ok(m) => {
                n += 1;
                if browse {
                    let (date, time) = m.md.put_date_time();
                    println!(
                        "MsgId({}) CorrelId({}) Persistence({}) Priority({}) PutDate({date}) PutTime({time}) ReplyToQ({}) BackoutCount({}) Length({})",
                        hex(&m.md.msg_id),
                        hex(&m.md.correl_id),
                        m.md.persistence.to_i32(),
                        m.md.priority,
                        m.md.reply_to_q,
                        m.md.backout_count,
                        m.data_len
                    );
                    for (k, v) in &m.props.0 {
                        println!("  property {k} = {v:?}");
                    }
                    println!("  {}", String::from_utf8_lossy(&m.body));
                } else {
                    println!("{}", String::from_utf8_lossy(&m.body));
                }
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => return Err(mq(e)),
        }
    }
    c.close(&h, 0).map_err(mq)?;
    c.disconnect().map_err(mq)?;
    eprintln!("{cmd}: {n} message(s) from '{q}'");
    Ok(())
}
