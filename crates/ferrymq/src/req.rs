//! `ferrymq req`, in the spirit of MQ's amqsreq: puts each line of standard input as a request
//! (MsgType MQMT_REQUEST, with a ReplyToQ), then waits for each request's reply on the reply
//! queue, matched by CorrelId (a responder copies the request's MsgId there, as MQ's default
//! report options ask), and prints it; reports the requests asked for (`--report coa,cod`) come
//! with the same CorrelId and are printed as they arrive.

use std::io::Write;

use bytes::Bytes;
use ferrymq_types::descriptor::{msg_type, EXPIRY_UNLIMITED, PRIORITY_AS_Q_DEF};
use ferrymq_types::options::{feedback, open, report, GetOptions, PutOptions, Syncpoint, Wait};
use ferrymq_types::{MessageDescriptor, MsgId, Persistence, Properties, Reason};

use crate::cli::Req;
use crate::lifecycle::{Fail, Res};
use crate::lines::each_stdin_message;
use crate::samples::{self, render, Style, EXIT_USAGE};

/// The Report bits for `--report` words.
fn report_bits(kinds: &[String]) -> Result<i32, Fail> {
    let mut bits = report::NONE;
    for k in kinds {
        bits |= match k.trim().to_ascii_lowercase().as_str() {
            "coa" => report::COA,
            "cod" => report::COD,
            "exception" => report::EXCEPTION,
            "expiration" => report::EXPIRATION,
            other => {
                return Err(Fail {
                    code: EXIT_USAGE,
                    message: format!(
                        "req: --report '{other}': use coa, cod, exception or expiration"
                    ),
                })
            }
        };
    }
    Ok(bits)
}

/// A report's Feedback as MQ names it.
pub fn feedback_name(fb: i32) -> String {
    match fb {
        feedback::NONE => "MQFB_NONE".into(),
        feedback::COA => "MQFB_COA".into(),
        feedback::COD => "MQFB_COD".into(),
        feedback::EXPIRATION => "MQFB_EXPIRATION".into(),
        n if n > 0 => Reason::from_code(n as u32).mq_name().to_string(),
        n => n.to_string(),
    }
}

pub fn run(a: &Req) -> Res {
    run_with(a).map_err(|f| Fail {
        code: f.code,
        message: format!("req: {}", f.message),
    })
}

fn run_with(a: &Req) -> Res {
    let (reply_q, reply_qmgr) = a.reply_to.split_once('@').unwrap_or((&a.reply_to, ""));
    if reply_q.is_empty() {
        return Err(Fail {
            code: EXIT_USAGE,
            message: "--reply-to names no queue".into(),
        });
    }
    let bits = report_bits(&a.report)?;
    let c = samples::connect_with(&a.qmgr, &a.conn, "ferrymq req")?;
    let reply_qmgr = if reply_qmgr.is_empty() {
        c.qmgr_name().to_string()
    } else {
        reply_qmgr.to_string()
    };
    let out = c.open(&a.queue, open::OUTPUT).map_err(samples::mq)?;
    let replies = c.open(reply_q, open::INPUT_SHARED).map_err(samples::mq)?;
    let md = MessageDescriptor {
        msg_type: msg_type::REQUEST,
        format: "MQSTR".into(),
        reply_to_q: reply_q.to_string(),
        reply_to_qmgr: reply_qmgr,
        report: bits,
        persistence: if a.persistent {
            Persistence::Persistent
        } else {
            Persistence::AsQueueDef
        },
        priority: PRIORITY_AS_Q_DEF,
        expiry: a.expiry.unwrap_or(EXPIRY_UNLIMITED),
        ..Default::default()
    };
    let opts = PutOptions {
        new_msg_id: true,
        ..PutOptions::default()
    };
    let mut sent: Vec<MsgId> = Vec::new();
    each_stdin_message(c.max_msg_len() as usize, "put", |line| {
        let (msg_id, _) = c
            .put(&out, &md, &Properties::default(), Bytes::from(line), &opts)
            .map_err(samples::mq)?;
        sent.push(msg_id);
        Ok(())
    })?;
    let _ = writeln!(
        std::io::stderr(),
        "req: {} request(s) put to '{}'; waiting for replies on '{reply_q}'",
        sent.len(),
        a.queue
    );
    let style = Style {
        md: a.md,
        hex: false,
        json: false,
    };
    let mut stdout = std::io::stdout().lock();
    let mut n = 0;
    for id in &sent {
        // Reports and the reply share the CorrelId; the reply ends the wait for this request.
        let started = std::time::Instant::now();
        loop {
            let left = (a.wait_ms as u128).saturating_sub(started.elapsed().as_millis()) as u64;
            let gopts = GetOptions {
                wait: if left == 0 {
                    Wait::NoWait
                } else {
                    Wait::Ms(left)
                },
                match_correl_id: Some(*id),
                syncpoint: Syncpoint::No,
                ..GetOptions::any()
            };
            let m = match c.get(&replies, &gopts) {
                Ok(m) => m,
                Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => {
                    return Err(Fail {
                        code: samples::EXIT_NO_MSG,
                        message: format!(
                            "{e}\nno reply to request {} within {} ms; {n} reply(ies) received",
                            samples::hex(id),
                            a.wait_ms
                        ),
                    })
                }
                Err(e) => return Err(samples::mq(e)),
            };
            let text = if m.md.msg_type == msg_type::REPORT && !a.md {
                format!(
                    "report {} for request {}\n",
                    feedback_name(m.md.feedback),
                    samples::hex(id)
                )
            } else {
                render(&m, n + 1, style)
            };
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
            if m.md.msg_type != msg_type::REPORT {
                n += 1;
                break;
            }
        }
    }
    c.close(&replies, 0).map_err(samples::mq)?;
    c.close(&out, 0).map_err(samples::mq)?;
    c.disconnect().map_err(samples::mq)?;
    let _ = writeln!(std::io::stderr(), "req: {n} reply(ies)");
    Ok(())
}
