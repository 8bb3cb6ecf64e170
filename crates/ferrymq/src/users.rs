//! `setmqusr`, `dltmqusr` and `dspmqusr`: the queue manager's user store, which connection
//! authentication (CONNAUTH) checks client passwords against. The file is changed here, whether
//! or not the queue manager runs; a running one is told through its bindings socket (REFRESH
//! SECURITY TYPE(CONNAUTH)) so that the change applies to the next connection. Passwords come
//! from standard input or FERRYMQ_PASSWORD, never from the command line.

use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_proto::ControlCommand;
use ferrymq_security::users::store::{hash_password, UserStore};

use crate::cli;
use crate::lifecycle::{existing, is_running, other, Res};

/// The store, read under an exclusive lock (`users.lock` next to it) that the returned file
/// holds until it is dropped: two commands changing the store at once (each reads, changes and
/// writes the whole file) would otherwise lose one's change.
fn load(
    cmd: &str,
    qm: &str,
) -> Result<(ferrymq_types::home::QmPaths, UserStore, std::fs::File), crate::lifecycle::Fail> {
    let paths = existing(cmd, qm)?;
    let lock_path = paths.users().with_extension("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .and_then(|f| f.lock().map(|()| f))
        .map_err(|e| other(format!("{cmd}: cannot lock {}: {e}", lock_path.display())))?;
    let store = UserStore::load(&paths.users()).map_err(|e| other(format!("{cmd}: {e}")))?;
    Ok((paths, store, lock))
}

/// Tells a running queue manager to read its user store again; says so when it is not running.
fn notify(qm: &str, paths: &ferrymq_types::home::QmPaths) -> String {
    if !is_running(paths) {
        return "the queue manager is not running; it reads the store when it starts".into();
    }
    let mut opts = ConnectOptions::bindings(qm);
    opts.app_name = "setmqusr".into();
    let r = Connection::connect(opts).and_then(|c| {
        let r = c.admin(&ControlCommand::Mqsc("REFRESH SECURITY TYPE(CONNAUTH)".into()).to_text());
        let _ = c.disconnect();
        r
    });
    match r {
        Ok(_) => "the running queue manager has read the store again".into(),
        Err(e) => format!(
            "the running queue manager could not be told ({e}); run REFRESH SECURITY TYPE(CONNAUTH)"
        ),
    }
}

pub fn setmqusr(a: &cli::Setmqusr) -> Res {
    let qm = a.m.clone().unwrap_or_default();
    let user = a.u.clone().unwrap_or_default();
    let password = if a.password_stdin {
        Some(cli::read_password_line().map_err(|e| other(format!("setmqusr: {e}")))?)
    } else {
        std::env::var("FERRYMQ_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty())
    };
    let hash = password
        .map(|p| hash_password(&p))
        .transpose()
        .map_err(|e| other(format!("setmqusr: {e}")))?;
    let groups = a.g.as_ref().map(|g| {
        g.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
    });
    // Hashed before the store is locked: argon2 takes its time on purpose.
    let (paths, mut store, _lock) = load("setmqusr", &qm)?;
    let existed = store.get(&user).is_some();
    store
        .set(&user, groups, hash)
        .map_err(|e| other(format!("setmqusr: {e}")))?;
    store
        .save(&paths.users())
        .map_err(|e| other(format!("setmqusr: {e}")))?;
    println!(
        "User '{user}' {} in the user store of queue manager '{qm}'; {}.",
        if existed { "changed" } else { "added" },
        notify(&qm, &paths)
    );
    Ok(())
}

pub fn dltmqusr(a: &cli::Dltmqusr) -> Res {
    let qm = a.m.clone().unwrap_or_default();
    let user = a.u.clone().unwrap_or_default();
    let (paths, mut store, _lock) = load("dltmqusr", &qm)?;
    if !store.remove(&user) {
        return Err(other(format!(
            "dltmqusr: user '{user}' is not in the user store of queue manager '{qm}' (dspmqusr -m {qm} lists them)"
        )));
    }
    store
        .save(&paths.users())
        .map_err(|e| other(format!("dltmqusr: {e}")))?;
    println!(
        "User '{user}' removed from the user store of queue manager '{qm}'; {}.",
        notify(&qm, &paths)
    );
    Ok(())
}

pub fn dspmqusr(a: &cli::Dspmqusr) -> Res {
    let qm = a.m.clone().unwrap_or_default();
    let (_, store, _lock) = load("dspmqusr", &qm)?;
    if store.is_empty() {
        println!("The user store of queue manager '{qm}' holds no users.");
    }
    for (name, groups, has_password) in store.list() {
        println!(
            "USER({name}) GROUPS({}) PASSWORD({})",
            groups.join(","),
            if has_password { "SET" } else { "NONE" }
        );
    }
    Ok(())
}
