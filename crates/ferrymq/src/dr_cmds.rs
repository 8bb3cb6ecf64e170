//! Disaster recovery commands, with the MQ Appliance's names: `crtmqm -dr ...` (the role and the
//! sites' addresses), `makedrprimary`, `makedrsecondary`, and `dspmq -o dr`.

use ferrymq_proto::ControlCommand;
use std::time::{Duration, Instant};

use ferrymq_server::config::{parse_addr, parse_addr_list, DrRole};
use ferrymq_server::{Ini, QmConfig};

use crate::cli;
use crate::lifecycle::{
    admin_command, existing, fail, is_running, other, qmgr_names, Res, EXIT_NOT_AVAILABLE,
    EXIT_RUNNING,
};

/// How long `makedrprimary` waits for a running secondary to end.
const END_WAIT: Duration = Duration::from_secs(30);

/// `crtmqm -dr primary|secondary [-drl host(port)] [-drr host(port),...] [-drlag BYTES]`:
/// writes qm.ini's `DR:` stanza.
pub fn dr_flags(p: &cli::Crtmqm, ini: &mut Ini) -> Result<(), String> {
    let Some(role) = &p.dr else {
        if p.drl.is_some() || p.drr.is_some() || p.drlag.is_some() {
            return Err("-drl, -drr and -drlag go with -dr primary|secondary".into());
        }
        return Ok(());
    };
    let role = match role.to_ascii_lowercase().as_str() {
        "primary" => "Primary",
        "secondary" => "Secondary",
        _ => return Err(format!("-dr {role}: use primary or secondary")),
    };
    ini.set("DR", "Role", role);
    if let Some(l) = &p.drl {
        parse_addr(l).map_err(|e| format!("-drl: {e}"))?;
        ini.set("DR", "LocalAddress", l);
    }
    if let Some(r) = &p.drr {
        parse_addr_list(r).map_err(|e| format!("-drr: {e}"))?;
        ini.set("DR", "RemoteAddresses", r);
    }
    if let Some(b) = &p.drlag {
        ini.set("DR", "MaxLagBytes", b);
    }
    Ok(())
}

/// `-drlag BYTES` on a role change: the lag bound (`DR:MaxLagBytes`) from now on. Without it
/// the bound stays as qm.ini has it — on a former secondary, the bound its primary gave it.
fn set_drlag(cmd: &str, drlag: Option<&str>, ini: &mut Ini) -> Result<(), crate::lifecycle::Fail> {
    if let Some(b) = drlag {
        ini.set("DR", "MaxLagBytes", b);
        QmConfig::from_ini(ini).map_err(|e| other(format!("{cmd}: -drlag: {e}")))?;
    }
    Ok(())
}

/// What a DR role change works on: the name, paths, qm.ini and its settings.
type Loaded = (String, ferrymq_server::QmPaths, Ini, QmConfig);

/// Loads the qm.ini of queue manager `m` (`CMD -m QM`), which must give it a DR role.
fn load(cmd: &str, m: Option<&str>) -> Result<Loaded, crate::lifecycle::Fail> {
    let name = m
        .ok_or_else(|| other(format!("{cmd}: -m QMNAME is required")))?
        .to_string();
    let paths = existing(cmd, &name)?;
    let ini = Ini::load(&paths.ini()).map_err(other)?;
    let cfg = QmConfig::from_ini(&ini).map_err(other)?;
    if cfg.dr.is_none() {
        return Err(other(format!(
            "{cmd}: queue manager '{name}' has no DR role (crtmqm -dr primary|secondary)"
        )));
    }
    Ok((name, paths, ini, cfg))
}

/// `makedrprimary -m QM [-r host(port),...] [-drlag BYTES]`: makes the recovery site's queue
/// manager the primary, with the lag bound its primary had (recorded from the primary's hello)
/// unless `-drlag` sets another. A running secondary is ended first (it stops taking the old primary's stream);
/// then `strmqm` starts it as the primary, with what it had received. `-r` names the addresses
/// it ships to from now on (usually the old main site, once it is back as secondary).
///
/// The state promoted is the last complete one the secondary holds: a full copy still being
/// received is left out (and named). A secondary that never completed a full copy holds no image
/// of the primary at all; `makedrprimary` refuses it unless `-f` is given.
pub fn makedrprimary(p: &cli::Makedrprimary) -> Res {
    let (name, paths, mut ini, cfg) = load("makedrprimary", p.m.as_deref())?;
    let name = name.as_str();
    if let Some(r) = &p.r {
        parse_addr_list(r).map_err(|e| other(format!("makedrprimary: -r: {e}")))?;
        ini.set("DR", "RemoteAddresses", r);
    }
    set_drlag("makedrprimary", p.drlag.as_deref(), &mut ini)?;
    if cfg.dr.as_ref().map(|d| d.role) == Some(DrRole::Primary) {
        ini.save(&paths.ini()).map_err(other)?;
        println!("Queue manager '{name}' is already the DR primary.");
        return Ok(());
    }
    let was_running = is_running(&paths);
    if was_running {
        admin_command(&paths, name, &ControlCommand::Shutdown { immediate: true }).map_err(
            |e| {
                other(format!(
                    "makedrprimary: cannot end the running secondary: {e}"
                ))
            },
        )?;
        let began = Instant::now();
        while is_running(&paths) {
            if began.elapsed() > END_WAIT {
                return Err(other(format!(
                    "makedrprimary: the secondary '{name}' did not end within {END_WAIT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // What the secondary holds: a complete image of the primary's stream, or nothing.
    let copying_file = paths
        .store_dir()
        .join(ferrymq_server::dr::recv::COPYING_FILE);
    let copying = std::fs::read_to_string(&copying_file)
        .ok()
        .map(|s| s.trim().to_string());
    if cfg.ha.is_none() {
        let mark = ferrymq_server::dr_recovered_mark(&paths, &cfg)
            .map_err(|e| other(format!("makedrprimary: cannot read '{name}''s state: {e}")))?;
        let partial = copying
            .as_deref()
            .map(|c| {
                format!(
                    "; a full copy from the primary was being received ({c}) and is not part of it"
                )
            })
            .unwrap_or_default();
        match mark {
            Some(m) => {
                if copying.is_some() {
                    eprintln!(
                        "makedrprimary: warning: '{name}' is promoted with the last complete state it received (stream {:016x} to position {}){partial}",
                        m.stream, m.pos
                    );
                }
            }
            None if p.f => eprintln!(
                "makedrprimary: warning: '{name}' holds no complete image of the primary (it never finished a full copy){partial}; promoted anyway (-f): it has none of the primary's messages or objects that the copy would have brought"
            ),
            None => {
                return Err(fail(
                    EXIT_NOT_AVAILABLE,
                    format!(
                        "makedrprimary: queue manager '{name}' holds no complete image of the primary: it never finished a full copy{partial}. Promoting it would serve a queue manager without the primary's messages. Let the copy complete (dspmq -o dr on the primary), or give -f to promote it anyway.{}",
                        if was_running { format!(" It was ended: strmqm {name} resumes it as the secondary.") } else { String::new() }
                    ),
                ));
            }
        }
    }
    let _ = std::fs::remove_file(&copying_file);
    ini.set("DR", "Role", "Primary");
    ini.save(&paths.ini()).map_err(other)?;
    println!("Queue manager '{name}' is now the DR primary. Start it with: strmqm {name}");
    Ok(())
}

/// `makedrsecondary -m QM [-l host(port)] [-drlag BYTES]`: makes an ended queue manager a DR secondary, which
/// takes the primary's stream once started. Its state is resynchronised by the primary: only the
/// difference when its position is in the primary's stream, otherwise a full copy.
pub fn makedrsecondary(p: &cli::Makedrsecondary) -> Res {
    let (name, paths, mut ini, _) = load("makedrsecondary", p.m.as_deref())?;
    let name = name.as_str();
    if is_running(&paths) {
        return Err(fail(
            EXIT_RUNNING,
            format!(
                "makedrsecondary: queue manager '{name}' is running; end it first (endmqm {name})"
            ),
        ));
    }
    if let Some(l) = &p.l {
        parse_addr(l).map_err(|e| other(format!("makedrsecondary: -l: {e}")))?;
        ini.set("DR", "LocalAddress", l);
    }
    set_drlag("makedrsecondary", p.drlag.as_deref(), &mut ini)?;
    ini.set("DR", "Role", "Secondary");
    QmConfig::from_ini(&ini).map_err(|e| other(format!("makedrsecondary: {e}")))?;
    ini.save(&paths.ini()).map_err(other)?;
    println!(
        "Queue manager '{name}' is now a DR secondary. Start it with strmqm {name}; the primary resynchronises it."
    );
    Ok(())
}

/// `dspmq -o dr [-m QM]`: the DR status line of each queue manager with a DR role.
pub fn dspmq_dr(only: Option<&str>) -> Res {
    let mut names = qmgr_names();
    if let Some(m) = only {
        existing("dspmq", m)?;
        names.retain(|n| n == m);
    }
    let mut shown = 0;
    for name in names {
        let paths = crate::lifecycle::paths_of("dspmq", &name)?;
        let Ok(cfg) = Ini::load(&paths.ini()).and_then(|i| QmConfig::from_ini(&i)) else {
            continue;
        };
        let Some(dr) = cfg.dr else { continue };
        shown += 1;
        if is_running(&paths) {
            let line = admin_command(&paths, &name, &ControlCommand::DrStatus)
                .map_err(|e| fail(EXIT_NOT_AVAILABLE, format!("dspmq: {e}")))?;
            println!("{line}");
        } else {
            let role = match dr.role {
                DrRole::Primary => "Primary",
                DrRole::Secondary => "Secondary",
            };
            println!("QMNAME({name}) DRROLE({role}) DRSTATUS(Ended)");
        }
    }
    if shown == 0 && only.is_some() {
        return Err(other(format!(
            "dspmq: queue manager '{}' has no DR role",
            only.unwrap_or_default()
        )));
    }
    Ok(())
}

/// A `NAME(value)` field of a DR status line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}("))? + name.len() + 1;
    let len = line[start..].find(')')?;
    Some(&line[start..start + len])
}

/// `dspmq -o dr -m QM -w SECONDS`: waits until the queue manager's DR link is streaming
/// (DRSTATUS(Normal): any resynchronisation, difference or full copy, is over and confirmed by
/// the recovery site), telling the person waiting what happens — the link's state as it
/// changes, and a full copy's progress in bytes (a bar on a terminal, plain lines otherwise) —
/// then prints the status line. Exit 1, with the last status, if that takes longer.
pub fn dspmq_dr_wait(only: Option<&str>, secs: u64) -> Res {
    let name = only.ok_or_else(|| other("dspmq: -w needs -m QMNAME"))?;
    let paths = existing("dspmq", name)?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut last_state = String::new();
    // The copy being shown: its size, and the bar.
    let mut copy: Option<(u64, ferrymq_client::progress::Progress, u64)> = None;
    let say = |copy: &Option<(u64, ferrymq_client::progress::Progress, u64)>, line: &str| match copy
    {
        Some((_, p, _)) => p.println(line),
        None => eprintln!("{line}"),
    };
    loop {
        if !is_running(&paths) {
            return Err(fail(
                EXIT_NOT_AVAILABLE,
                format!("dspmq: queue manager '{name}' is not running"),
            ));
        }
        let line = admin_command(&paths, name, &ControlCommand::DrStatus)
            .map_err(|e| fail(EXIT_NOT_AVAILABLE, format!("dspmq: {e}")))?;
        let state = field(&line, "DRSTATUS").unwrap_or("").to_string();
        let num = |f: &str| field(&line, f).and_then(|v| v.parse::<u64>().ok());
        if state != last_state {
            let partner = field(&line, "PARTNER").unwrap_or("");
            say(
                &copy,
                &format!(
                    "dspmq: {name}: DRSTATUS({state}){}",
                    if partner.is_empty() {
                        String::new()
                    } else {
                        format!(" PARTNER({partner})")
                    }
                ),
            );
            last_state = state.clone();
        }
        if state == "Normal" {
            if let Some((_, p, _)) = copy.take() {
                p.finish();
            }
            println!("{line}");
            return Ok(());
        }
        if state == "FullCopy" {
            if let (Some(total), Some(sent)) = (num("COPYBYTES"), num("COPIEDBYTES")) {
                // A new copy (or the first sight of one): a new bar.
                if total > 0
                    && copy
                        .as_ref()
                        .is_none_or(|(t, _, s)| *t != total || sent < *s)
                {
                    if let Some((_, p, _)) = copy.take() {
                        p.finish();
                    }
                    eprintln!("dspmq: {name}: full copy of {total} bytes to the recovery site");
                    let what = format!("DR full copy '{name}'");
                    copy = Some((
                        total,
                        ferrymq_client::progress::Progress::new(&what, "bytes", Some(total)),
                        0,
                    ));
                }
                if let Some((_, p, shown)) = copy.as_mut() {
                    if sent > *shown {
                        p.inc(sent - *shown);
                        *shown = sent;
                    }
                }
            }
        }
        if Instant::now() >= deadline {
            if let Some((_, p, _)) = copy.take() {
                p.finish();
            }
            println!("{line}");
            return Err(other(format!(
                "dspmq: the DR link of '{name}' is not streaming after {secs} s (DRSTATUS({state}))"
            )));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
