//! MQ's authority commands: `setmqaut` (grants and revokes, as SET AUTHREC), `dspmqaut` (what an
//! entity may do to one object, as DISPLAY ENTAUTH) and `dmpmqaut` (the records, as DISPLAY
//! AUTHREC). Each runs one MQSC command through the local queue manager's bindings socket, as
//! runmqsc does, so the queue manager checks the caller's authority and decides the answer.

use std::io::Write;

use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_proto::ControlCommand;

use crate::cli;
use crate::lifecycle::{Fail, Res};

/// Exit status of a refused or failed command (MQ's authority commands use small numbers; 1 is
/// a usage error here as for the other MQ-style commands).
const FAILED: i32 = 71;

fn fail(cmd: &str, message: impl std::fmt::Display) -> Fail {
    Fail {
        code: FAILED,
        message: format!("{cmd}: {message}"),
    }
}

fn usage(cmd: &str, message: impl std::fmt::Display) -> Fail {
    Fail {
        code: 1,
        message: format!("{cmd}: {message}"),
    }
}

/// OBJTYPE for a `-t` word (MQ's words and short forms).
pub fn objtype(word: &str) -> Option<&'static str> {
    Some(match word.to_ascii_lowercase().as_str() {
        "queue" | "q" => "QUEUE",
        "qmgr" => "QMGR",
        "channel" | "chl" => "CHANNEL",
        "clntconn" | "clcn" => "CLNTCONN",
        "listener" | "lstr" => "LISTENER",
        "authinfo" => "AUTHINFO",
        "namelist" | "nl" => "NAMELIST",
        "process" | "prcs" => "PROCESS",
        "service" | "srvc" => "SERVICE",
        "topic" | "top" => "TOPIC",
        "rqmname" | "rqmn" => "RQMNAME",
        "comminfo" | "cmin" => "COMMINFO",
        _ => return None,
    })
}

fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `PRINCIPAL('u')` or `GROUP('g')` from `-p`/`-g`.
fn entity(cmd: &str, p: &Option<String>, g: &Option<String>) -> Result<String, Fail> {
    match (p, g) {
        (Some(u), None) => Ok(format!("PRINCIPAL({})", quoted(u))),
        (None, Some(g)) => Ok(format!("GROUP({})", quoted(g))),
        _ => Err(usage(cmd, "give one of -p USER or -g GROUP")),
    }
}

fn run_mqsc(cmd: &str, qm: &str, mqsc: &str) -> Result<String, Fail> {
    let mut opts = ConnectOptions::bindings(qm);
    opts.app_name = cmd.into();
    let conn = Connection::connect(opts)
        .map_err(|e| fail(cmd, format!("queue manager '{qm}' is not available: {e}")))?;
    let r = conn.admin(&ControlCommand::Mqsc(mqsc.to_string()).to_text());
    let _ = conn.disconnect();
    r.map_err(|e| fail(cmd, format!("{}\n({})", e.message, e.reason)))
}

fn print(text: &str) -> Res {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())
        .and_then(|_| o.flush())
        .map_err(|e| fail("output", e))
}

fn target(cmd: &str, t: &str, n: &Option<String>) -> Result<(&'static str, String), Fail> {
    let objtype = objtype(t).ok_or_else(|| {
        usage(
            cmd,
            format!("-t {t}: use queue, qmgr, channel, clntconn, listener, authinfo, namelist, process, service, topic, rqmname or comminfo"),
        )
    })?;
    match (objtype, n) {
        ("QMGR", Some(_)) => Err(usage(cmd, "-n is not valid with -t qmgr")),
        ("QMGR", None) => Ok((objtype, String::new())),
        (_, None) => Err(usage(cmd, format!("-t {t} needs -n NAME"))),
        (_, Some(n)) => Ok((objtype, n.clone())),
    }
}

/// `setmqaut -m QM -t TYPE [-n PROFILE] (-p USER | -g GROUP) +auth -auth ...`.
pub fn setmqaut(a: &cli::Setmqaut) -> Res {
    let cmd = "setmqaut";
    let qm = a.m.clone().unwrap_or_default();
    let (objtype, profile) = target(cmd, &a.t, &a.n)?;
    let who = entity(cmd, &a.p, &a.g)?;
    let mut add = Vec::new();
    for w in &a.add {
        let Some(name) = w.strip_prefix('+') else {
            return Err(usage(
                cmd,
                format!("'{w}': authorities are given as +NAME (grant) or -NAME (revoke)"),
            ));
        };
        add.push(name.to_ascii_uppercase());
    }
    let remove: Vec<String> = a.remove.iter().map(|r| r.to_ascii_uppercase()).collect();
    for name in add.iter().chain(&remove) {
        if ferrymq_types::authority::expand(name).is_none() {
            return Err(usage(
                cmd,
                format!(
                    "'{}' is not an authority: use all, allmqi, alladm, none or one of {}",
                    name.to_ascii_lowercase(),
                    ferrymq_types::authority::AUTHORITIES
                        .join(", ")
                        .to_ascii_lowercase()
                ),
            ));
        }
    }
    if add.is_empty() && remove.is_empty() {
        return Err(usage(
            cmd,
            "give at least one +AUTH or -AUTH, e.g. +put +get",
        ));
    }
    let mut mqsc = String::from("SET AUTHREC");
    if objtype != "QMGR" {
        mqsc.push_str(&format!(" PROFILE({})", quoted(&profile)));
    }
    mqsc.push_str(&format!(" OBJTYPE({objtype}) {who}"));
    if !add.is_empty() {
        mqsc.push_str(&format!(" AUTHADD({})", add.join(",")));
    }
    if !remove.is_empty() {
        mqsc.push_str(&format!(" AUTHRMV({})", remove.join(",")));
    }
    let reply = run_mqsc(cmd, &qm, &mqsc)?;
    print(&format!("{reply}\n"))
}

/// `KEY(value)` from a DISPLAY response block (values hold no parentheses here).
fn field<'t>(block: &'t str, key: &str) -> Option<&'t str> {
    let pat = format!("{key}(");
    let mut from = 0;
    while let Some(i) = block[from..].find(&pat) {
        let at = from + i;
        // A whole keyword: at the start or after a blank.
        if at == 0 || block[..at].ends_with([' ', '\n']) {
            let rest = &block[at + pat.len()..];
            return rest.find(')').map(|j| &rest[..j]);
        }
        from = at + pat.len();
    }
    None
}

/// `dspmqaut -m QM -t TYPE [-n OBJECT] (-p USER | -g GROUP)`: the entity's authorities on the
/// object, its records and its groups' combined.
pub fn dspmqaut(a: &cli::Dspmqaut) -> Res {
    let cmd = "dspmqaut";
    let qm = a.m.clone().unwrap_or_default();
    let (objtype, name) = target(cmd, &a.t, &a.n)?;
    let who = entity(cmd, &a.p, &a.g)?;
    let mut mqsc = String::from("DISPLAY ENTAUTH");
    if objtype != "QMGR" {
        mqsc.push_str(&format!(" OBJNAME({})", quoted(&name)));
    }
    mqsc.push_str(&format!(" OBJTYPE({objtype}) {who}"));
    let reply = run_mqsc(cmd, &qm, &mqsc)?;
    let auths = field(&reply, "AUTHLIST").unwrap_or("NONE");
    let object = field(&reply, "OBJNAME").unwrap_or(&name);
    let entity = a.p.as_deref().or(a.g.as_deref()).unwrap_or_default();
    let mut out =
        format!("Entity {entity} has the following authorizations for object {object}:\n");
    if auths != "NONE" {
        for x in auths.split(',') {
            out.push_str(&format!("\t{}\n", x.to_ascii_lowercase()));
        }
    }
    // The lines after the details say where the authorities come from.
    for line in reply.lines().skip(1) {
        if let Some(note) = line.split_once(": ").map(|(_, n)| n) {
            if line.starts_with("FMQ") {
                out.push_str(&format!("({note})\n"));
            }
        }
    }
    print(&out)
}

/// `dmpmqaut -m QM [-t TYPE] [-n PROFILE] [-p USER | -g GROUP]`: the authority records, as
/// MQ's dmpmqaut lists them.
pub fn dmpmqaut(a: &cli::Dmpmqaut) -> Res {
    let cmd = "dmpmqaut";
    let qm = a.m.clone().unwrap_or_default();
    let mut mqsc = String::from("DISPLAY AUTHREC");
    if let Some(t) = &a.t {
        let objtype =
            objtype(t).ok_or_else(|| usage(cmd, format!("-t {t}: not an object type")))?;
        mqsc.push_str(&format!(" OBJTYPE({objtype})"));
        if objtype == "QMGR" && a.n.is_some() {
            return Err(usage(cmd, "-n is not valid with -t qmgr"));
        }
    }
    if let Some(n) = &a.n {
        mqsc.push_str(&format!(" PROFILE({})", quoted(n)));
    }
    if a.p.is_some() || a.g.is_some() {
        mqsc.push(' ');
        mqsc.push_str(&entity(cmd, &a.p, &a.g)?);
    }
    let reply = run_mqsc(cmd, &qm, &mqsc)?;
    let mut out = String::new();
    for block in reply.split("\nFMQ").filter(|b| b.contains("PROFILE(")) {
        let get = |k| field(block, k).unwrap_or_default();
        out.push_str(&format!(
            "profile:     {}\nobject type: {}\nentity:      {}\nentity type: {}\nauthority:   {}\n- - - - - - - - -\n",
            get("PROFILE"),
            get("OBJTYPE").to_ascii_lowercase(),
            get("ENTITY"),
            get("ENTTYPE").to_ascii_lowercase(),
            get("AUTHLIST")
                .split(',')
                .map(str::to_ascii_lowercase)
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    if out.is_empty() {
        out.push_str("No matching authority records.\n");
    }
    print(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_by_whole_keyword() {
        let b = "FMQ8864I: Display authority record details.\n   PROFILE(DEV.**)   ENTITY(app)\n   ENTTYPE(PRINCIPAL) OBJTYPE(QUEUE)\n   AUTHLIST(GET,PUT)";
        assert_eq!(field(b, "PROFILE"), Some("DEV.**"));
        assert_eq!(field(b, "TYPE"), None);
        assert_eq!(field(b, "AUTHLIST"), Some("GET,PUT"));
        assert_eq!(objtype("q"), Some("QUEUE"));
        assert_eq!(objtype("nope"), None);
    }
}
