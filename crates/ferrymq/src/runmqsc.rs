//! `runmqsc [-e] [-v] [-c] QMNAME`: reads MQSC from standard input (a script or typed at a
//! prompt), checks each command's syntax here, and has the queue manager run it — over the
//! bindings socket, or with `-c` over TCP (`--conn 'host(port)'` or MQ's `MQSERVER` variable,
//! `CHANNEL/TCP/host(port)`), which the queue manager refuses (MQRC_NOT_AUTHORIZED, ending the
//! session) unless its qm.ini `Channels:RemoteAdmin` allows it (a new queue manager's:
//! `--channel SYSTEM.ADMIN.SVRCONN` with `--user` and a password). A change is answered once its log
//! record is durable; a command whose answer never came (the connection broke) is reported as not
//! confirmed, with the reason. Exit status as runmqsc's: 0 all good, 10 some failed, 20 none worked.

use ferrymq_proto::ControlCommand;
use std::io::{IsTerminal, Write};

use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_mqsc::{echo_line, parse, split_commands, Command, Tally, COMMAND_CHARS_MAX};
use ferrymq_types::Reason;

use crate::cli;
use crate::lifecycle::{Fail, Res};
use crate::lines::{self, Line};

fn connect(
    qm: &str,
    client: bool,
    conn: Option<&str>,
    auth: &cli::ConnAuth,
    tls: &cli::TlsArgs,
) -> Result<Connection, String> {
    let tls = tls.options()?;
    if tls.is_some() && !client {
        return Err("runmqsc: --tls-ca is for client mode (-c)".into());
    }
    let mut opts = if client {
        let conname = match conn {
            Some(c) => c.to_string(),
            None => {
                let env = std::env::var("MQSERVER").map_err(|_| "runmqsc -c: give --conn 'host(port)' or set MQSERVER=CHANNEL/TCP/host(port)".to_string())?;
                env.rsplit('/').next().unwrap_or_default().to_string()
            }
        };
        ConnectOptions::client(qm, &conname).map_err(|e| e.to_string())?
    } else {
        ConnectOptions::bindings(qm)
    };
    opts.tls = tls;
    opts.app_name = "runmqsc".into();
    auth.apply(&mut opts)?;
    Connection::connect(opts).map_err(|e| e.to_string())
}

pub fn run(p: &cli::Runmqsc) -> Res {
    let qm = p.name.clone();
    let echo = !p.e;
    let verify_only = p.v;
    let conn = if verify_only {
        None
    } else {
        Some(
            connect(&qm, p.c, p.conn.as_deref(), &p.auth, &p.tls).map_err(|e| Fail {
                code: 20,
                message: format!("runmqsc: queue manager '{qm}' is not available: {e}"),
            })?,
        )
    };
    println!(
        "FerryMQ MQSC for queue manager {qm}{}.",
        if verify_only {
            " (verifying syntax only)"
        } else {
            ""
        }
    );
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    let mut tally = Tally::default();
    let mut pending = String::new();
    let mut line_no = 0usize;
    let mut out = std::io::stdout();
    let mut input = stdin.lock();
    let mut raw = Vec::new();
    // A command found too long: the line it started on and its bytes so far. Its lines are
    // read and dropped until the command ends.
    let mut dropping: Option<(usize, u64)> = None;
    // The line the command being read started on.
    let mut start = 0usize;
    let mut ended = false;
    // Read line by line so that an interactive session runs each command as it is completed.
    loop {
        let got = lines::read_line(&mut input, &mut raw, COMMAND_BYTES_MAX).map_err(|e| Fail {
            code: 20,
            message: format!("runmqsc: reading input: {e}"),
        })?;
        line_no += 1;
        let (bytes, last) = match got {
            Line::End => break,
            Line::Read => (raw.len() as u64, lines::last_visible(&raw, 0)),
            Line::TooLong { len, last } => (len, last),
        };
        let continues = last == b'+' || last == b'-';
        if pending.is_empty() && dropping.is_none() {
            start = line_no;
        }
        if dropping.is_none()
            && (got != Line::Read || pending.len() + raw.len() + 1 > COMMAND_BYTES_MAX)
        {
            dropping = Some((start, pending.len() as u64));
            pending.clear();
        }
        if let Some((first, so_far)) = dropping.as_mut() {
            *so_far += bytes + 1;
            if !continues {
                too_long(*first, *so_far - 1, &mut tally, &mut out);
                dropping = None;
            }
            continue;
        }
        let line = std::str::from_utf8(&raw).map_err(|_| Fail {
            code: 20,
            message: format!("runmqsc: reading input: line {line_no} is not UTF-8 text"),
        })?;
        pending.push_str(line);
        pending.push('\n');
        if continues {
            continue;
        }
        for cmd in split_commands(&pending) {
            if run_one(
                &cmd.text,
                conn.as_ref(),
                echo,
                verify_only,
                &mut tally,
                &mut out,
            )? {
                ended = true;
                break;
            }
        }
        pending.clear();
        if ended {
            break;
        }
        if interactive {
            let _ = out.flush();
        }
    }
    if let Some((first, so_far)) = dropping {
        too_long(first, so_far.saturating_sub(1), &mut tally, &mut out);
    }
    if !ended && !pending.trim().is_empty() {
        for cmd in split_commands(&pending) {
            if run_one(
                &cmd.text,
                conn.as_ref(),
                echo,
                verify_only,
                &mut tally,
                &mut out,
            )? {
                break;
            }
        }
    }
    let _ = line_no;
    println!("{}", tally.summary());
    if let Some(c) = conn {
        let _ = c.disconnect();
    }
    match tally.exit_code() {
        0 => Ok(()),
        code => Err(Fail {
            code,
            message: String::new(),
        }),
    }
}

/// The most bytes of input one command may take: its most characters, each up to four bytes
/// in UTF-8. A longer one is dropped as it is read, never held whole.
const COMMAND_BYTES_MAX: usize = 4 * COMMAND_CHARS_MAX;

/// A command longer than an MQSC command may be: a syntax error, and not run.
fn too_long(first_line: usize, bytes: u64, tally: &mut Tally, out: &mut impl Write) {
    tally.read += 1;
    tally.syntax_errors += 1;
    let _ = writeln!(
        out,
        "FMQ8405E: syntax error: the command from line {first_line} is {bytes} bytes long; an \
         MQSC command has at most {COMMAND_CHARS_MAX} characters. It was not run.\n"
    );
}

/// Runs one command; returns true at END. A queue manager that refuses administration over
/// this connection (MQRC_NOT_AUTHORIZED) ends the session: every other command would be
/// refused the same way.
fn run_one(
    text: &str,
    conn: Option<&Connection>,
    echo: bool,
    verify_only: bool,
    tally: &mut Tally,
    out: &mut impl Write,
) -> Result<bool, Fail> {
    tally.read += 1;
    if echo {
        let _ = writeln!(out, "{}", echo_line(tally.read, text));
    }
    Ok(match parse(text) {
        Err(e) => {
            tally.syntax_errors += 1;
            let _ = writeln!(
                out,
                "FMQ8405E: syntax error: {}\n{}",
                e.message,
                e.pointer(text)
            );
            false
        }
        Ok(Command::End) => {
            // END is not counted as a command, as runmqsc does not count it.
            tally.read -= 1;
            true
        }
        Ok(_) if verify_only => false,
        Ok(_) => {
            let conn = conn.expect("connected unless verifying");
            match conn.admin(&ControlCommand::Mqsc(text.to_string()).to_text()) {
                Ok(reply) => {
                    let _ = writeln!(out, "{reply}");
                }
                Err(e) if e.reason == Reason::NOT_AUTHORIZED => {
                    let _ = writeln!(out, "{}", e.message);
                    let _ = out.flush();
                    return Err(Fail {
                        code: 20,
                        message: format!("runmqsc: {}", e.message.lines().next().unwrap_or("")),
                    });
                }
                // The queue manager's own answer to a command that failed.
                Err(e) if e.reason == Reason::COMMAND_FAILED => {
                    tally.failed += 1;
                    let _ = writeln!(out, "{}", e.message);
                }
                // No answer (the connection broke, e.g. an HA instance that lost its majority
                // restarted): the command may or may not have taken effect.
                Err(e) => {
                    tally.failed += 1;
                    let _ = writeln!(
                        out,
                        "{}: {} not confirmed: {}; whether it took effect is not known: DISPLAY it once the queue manager answers again.\n   Reason: {}",
                        ferrymq_mqsc::messages::NOT_CONFIRMED,
                        text.split_whitespace().collect::<Vec<_>>().join(" "),
                        e.message,
                        e.reason
                    );
                }
            }
            let _ = writeln!(out);
            false
        }
    })
}

/// `dmpmqcfg -m QMNAME [-o mqsc|json] [-x all|object|authrec|chlauth]`: asks the local queue
/// manager (bindings mode, as runmqsc) for its configuration and prints it.
pub fn dmpmqcfg(p: &cli::Dmpmqcfg) -> Res {
    let qm = p.m.clone().unwrap_or_default();
    let conn = connect(
        &qm,
        false,
        None,
        &cli::ConnAuth::default(),
        &cli::TlsArgs::default(),
    )
    .map_err(|e| Fail {
        code: 20,
        message: format!("dmpmqcfg: queue manager '{qm}' is not available: {e}"),
    })?;
    let reply = conn
        .admin(
            &ControlCommand::DumpConfig {
                scope: p.x.clone(),
                json: p.o.eq_ignore_ascii_case("json"),
            }
            .to_text(),
        )
        .map_err(|e| Fail {
            code: 20,
            message: format!("dmpmqcfg: {} ({})", e.message, e.reason),
        })?;
    let _ = conn.disconnect();
    let mut out = std::io::stdout().lock();
    out.write_all(reply.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Fail {
            code: 1,
            message: format!("dmpmqcfg: writing the output: {e}"),
        })
}
