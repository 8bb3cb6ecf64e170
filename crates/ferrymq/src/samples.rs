//! Sample programs in the spirit of MQ's amqsput, amqsget and amqsbcg: put each line of standard
//! input as a message, get (print and remove) messages, browse (print and leave) them.

use std::io::BufRead;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::descriptor::msg_type;
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions, Syncpoint, Wait};
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

/// What `get` and `browse` write for one message.
fn render(m: &ferrymq_client::Message, browse: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if browse {
        let (date, time) = m.md.put_date_time();
        let _ = writeln!(
            out,
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
            let _ = writeln!(out, "  property {k} = {v:?}");
        }
        let _ = writeln!(out, "  {}", String::from_utf8_lossy(&m.body));
    } else {
        let _ = writeln!(out, "{}", String::from_utf8_lossy(&m.body));
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

/// `get` prints and removes messages, `browse` prints them and leaves them. A get never removes a
/// message it could not hand over: each message is got under syncpoint, written and flushed to
/// standard output, and only then committed — to a pipe, once its reader has read it
/// ([`handed_over`]); if the write fails or the reader closes the pipe first (as `| head -1`
/// does) the get is backed out, the message stays on the queue, and the command ends quietly
/// with exit status 0.
pub fn get(args: &[String], browse: bool) -> Res {
    use std::io::Write;
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
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut n = 0;
    let mut closed = None;
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
            syncpoint: if browse {
                Syncpoint::No
            } else {
                Syncpoint::Yes
            },
            ..GetOptions::any()
        };
        match c.get(&h, &opts) {
            Ok(m) => {
                let text = render(&m, browse);
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
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => {
                if !browse {
                    // Nothing uncommitted should remain, but never leave a got message behind.
                    let _ = c.backout();
                }
                return Err(mq(e));
            }
        }
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
                "{cmd}: {n} message(s) from '{q}'; cannot write standard output ({e}), the next message was left on the queue"
            )))
        }
        None => {
            let _ = writeln!(err, "{cmd}: {n} message(s) from '{q}'");
        }
    }
    Ok(())
}
