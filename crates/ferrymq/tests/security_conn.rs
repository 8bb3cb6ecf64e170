//! Who may connect, against the real binary over real TCP: a client names its channel, which must
//! be a defined SVRCONN channel whose limits bound the connection; channel authentication records
//! (CHLAUTH) refuse addresses, map users and refuse or admit by address; connection
//! authentication (CONNAUTH) checks passwords against the queue manager's user store, which
//! `setmqusr` changes without a restart; and the password shows nowhere it should not.

mod support;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, MqError, Reason};
use ferrymq_types::options::{open, GetOptions, PutOptions};

fn any() -> GetOptions {
    GetOptions::any()
}
use ferrymq_types::{MessageDescriptor, Properties};
use support::{error_log, Home, Qm};

/// Runs MQSC in bindings mode and asserts it all worked; returns the output.
fn mqsc_ok(home: &Home, qm: &str, script: &str) -> String {
    let out = home.run_with_input(&["runmqsc", qm], script);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "runmqsc failed:\n{script}\n---\n{text}"
    );
    text
}

fn client(
    qm: &Qm,
    host: &str,
    channel: &str,
    user: &str,
    password: &str,
) -> Result<Connection, MqError> {
    let mut o = ConnectOptions::client(&qm.name, &format!("{host}({})", qm.port)).unwrap();
    o.channel = channel.into();
    o.user = user.into();
    o.password = password.into();
    Connection::connect(o)
}

fn reason(r: Result<Connection, MqError>) -> Reason {
    match r {
        Ok(_) => Reason::NONE,
        Err(e) => e.reason,
    }
}

const PASSWORD: &str = "Corr3ct-H0rse";
const WRONG: &str = "not-the-passw0rd";

#[test]
fn chckclnt_required_refuses_no_or_wrong_password_and_a_new_user_applies_without_restart() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSEC1", &[]);
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE AUTHINFO(APP.IDPW) AUTHTYPE(IDPWOS) CHCKCLNT(REQUIRED) FAILDLAY(0)\n\
         ALTER QMGR CONNAUTH(APP.IDPW)\n\
         REFRESH SECURITY TYPE(CONNAUTH)\n\
         SET AUTHREC OBJTYPE(QMGR) GROUP('apps') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE('SYSTEM.DEFAULT.LOCAL.QUEUE') OBJTYPE(QUEUE) GROUP('apps') +
             AUTHADD(BROWSE)\n",
    );
    let d = "SYSTEM.DEF.SVRCONN";
    assert_eq!(
        reason(client(&qm, "127.0.0.1", d, "alice", "")),
        Reason::NOT_AUTHORIZED
    );

    // The running queue manager learns of the new user from setmqusr itself.
    let out = home.run_with_input(
        &[
            "setmqusr",
            "-m",
            &qm.name,
            "-u",
            "alice",
            "-g",
            "apps",
            "--password-stdin",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("read the store again"),
        "{out:?}"
    );
    assert_eq!(
        reason(client(&qm, "127.0.0.1", d, "alice", WRONG)),
        Reason::NOT_AUTHORIZED
    );
    assert_eq!(
        reason(client(&qm, "127.0.0.1", d, "nobody", PASSWORD)),
        Reason::NOT_AUTHORIZED
    );
    let c = client(&qm, "127.0.0.1", d, "alice", PASSWORD).expect("the right password connects");
    c.disconnect().unwrap();

    // The password through the command line's environment variable works the same.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ferrymq"));
    cmd.args([
        "browse",
        &qm.name,
        "SYSTEM.DEFAULT.LOCAL.QUEUE",
        "--conn",
        &qm.conname(),
        "--user",
        "alice",
    ])
    .env("FERRYMQ_HOME", home.path())
    .env("FERRYMQ_PASSWORD", PASSWORD);
    let out = cmd.output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("2035"),
        "{out:?}"
    );

    // dspmqusr shows groups, never the hash; the log says who failed and why, never a password.
    let users = home.ok(&["dspmqusr", "-m", &qm.name]);
    assert!(
        users.contains("USER(alice) GROUPS(apps) PASSWORD(SET)"),
        "{users}"
    );
    assert!(!users.contains("argon2"), "{users}");
    let log = error_log(&qm.dir());
    assert!(
        log.contains("user 'alice'") && log.contains("no password given"),
        "{log}"
    );
    assert!(log.contains("wrong password"), "{log}");
    assert!(
        log.contains("user 'nobody'") && log.contains("127.0.0.1"),
        "{log}"
    );
    let dump = home.ok(&["dmpmqcfg", "-m", &qm.name]);
    let store = std::fs::read_to_string(qm.dir().join("users")).unwrap();
    for (what, text) in [
        ("error log", &log),
        ("dmpmqcfg", &dump),
        ("user store", &store),
    ] {
        assert!(
            !text.contains(PASSWORD) && !text.contains(WRONG),
            "password in the {what}:\n{text}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(qm.dir().join("users"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    qm.end();
}

#[test]
fn blockaddr_refuses_the_address_at_accept_and_the_log_names_the_rule() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSEC2", &[]);
    mqsc_ok(
        &home,
        &qm.name,
        "SET CHLAUTH('*') TYPE(BLOCKADDR) ADDRLIST('127.0.0.1')\n",
    );
    let d = "SYSTEM.DEF.SVRCONN";
    assert_ne!(reason(client(&qm, "127.0.0.1", d, "", "")), Reason::NONE);
    // A loopback client's source address is 127.0.0.1 whichever loopback address it dials, so
    // the allowed case is the same client once the list no longer holds its address.
    mqsc_ok(
        &home,
        &qm.name,
        "SET CHLAUTH('*') TYPE(BLOCKADDR) ADDRLIST('192.0.2.*') ACTION(REPLACE)\n",
    );
    client(&qm, "127.0.0.1", d, "", "").expect("an address not listed connects");
    let log = error_log(&qm.dir());
    assert!(
        log.contains("connection from 127.0.0.1 refused by CHLAUTH('*') TYPE(BLOCKADDR)"),
        "{log}"
    );
    qm.end();
}

#[test]
fn usermap_runs_alice_as_bob() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSEC3", &[]);
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE QLOCAL(APP.Q)\n\
         SET CHLAUTH('SYSTEM.DEF.SVRCONN') TYPE(USERMAP) CLNTUSER('alice') USERSRC(MAP) MCAUSER('bob')\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('bob') AUTHADD(CONNECT)\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('carol') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('bob') AUTHADD(ALLMQI)\n\
         SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('carol') AUTHADD(ALLMQI)\n",
    );
    let c = client(&qm, "127.0.0.1", "SYSTEM.DEF.SVRCONN", "alice", "").unwrap();
    let h = c.open("APP.Q", open::OUTPUT | open::INPUT_SHARED).unwrap();
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"hi"),
        &PutOptions::default(),
    )
    .unwrap();
    let m = c.get(&h, &any()).unwrap();
    assert_eq!(m.md.user_id, "bob");
    let status = mqsc_ok(&home, &qm.name, "DISPLAY CHSTATUS(*)\n");
    assert!(status.contains("MCAUSER(bob)"), "{status}");
    // Another user is not mapped.
    let c2 = client(&qm, "127.0.0.1", "SYSTEM.DEF.SVRCONN", "carol", "").unwrap();
    let h2 = c2.open("APP.Q", open::OUTPUT).unwrap();
    c2.put(
        &h2,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"hi"),
        &PutOptions::default(),
    )
    .unwrap();
    assert_eq!(c.get(&h, &any()).unwrap().md.user_id, "carol");
    qm.end();
}

#[test]
fn addressmap_noaccess_refuses_and_usersrc_channel_lets_through() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSEC4", &[]);
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE CHANNEL(APP.SVRCONN) CHLTYPE(SVRCONN)\n\
         SET CHLAUTH('*') TYPE(ADDRESSMAP) ADDRESS('*') USERSRC(NOACCESS)\n\
         SET CHLAUTH('APP.SVRCONN') TYPE(ADDRESSMAP) ADDRESS('127.0.0.*') USERSRC(CHANNEL)\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('u1') AUTHADD(CONNECT)\n",
    );
    assert_eq!(
        reason(client(&qm, "127.0.0.1", "SYSTEM.DEF.SVRCONN", "u1", "")),
        Reason::NOT_AUTHORIZED
    );
    client(&qm, "127.0.0.1", "APP.SVRCONN", "u1", "").expect("USERSRC(CHANNEL) lets it through");
    let log = error_log(&qm.dir());
    assert!(
        log.contains("TYPE(ADDRESSMAP)") && log.contains("USERSRC(NOACCESS)"),
        "{log}"
    );
    // The rules apply only while QMGR CHLAUTH is enabled.
    mqsc_ok(&home, &qm.name, "ALTER QMGR CHLAUTH(DISABLED)\n");
    client(&qm, "127.0.0.1", "SYSTEM.DEF.SVRCONN", "u1", "").expect("CHLAUTH(DISABLED)");
    qm.end();
}

#[test]
fn an_unknown_channel_is_refused_and_a_channels_limits_bound_the_connection() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSEC5", &[]);
    assert_eq!(
        reason(client(&qm, "127.0.0.1", "NO.SUCH.CHANNEL", "", "")),
        Reason::UNKNOWN_CHANNEL_NAME
    );
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE CHANNEL(SMALL.SVRCONN) CHLTYPE(SVRCONN) MAXMSGL(1000) SHARECNV(1)\n\
         DEFINE CHANNEL(TO.QM2) CHLTYPE(SDR) CONNAME('h(1)') XMITQ(SYSTEM.DEFAULT.LOCAL.QUEUE)\n",
    );
    assert_eq!(
        reason(client(&qm, "127.0.0.1", "TO.QM2", "", "")),
        Reason::UNKNOWN_CHANNEL_NAME
    );
    let c = client(&qm, "127.0.0.1", "SMALL.SVRCONN", "", "").unwrap();
    assert_eq!(c.max_msg_len(), 1000);
    let status = mqsc_ok(&home, &qm.name, "DISPLAY CHSTATUS(*)\n");
    assert!(status.contains("CHANNEL(SMALL.SVRCONN)"), "{status}");
    let log = error_log(&qm.dir());
    assert!(
        log.contains("channel 'NO.SUCH.CHANNEL' is not defined") && log.contains("127.0.0.1"),
        "{log}"
    );
    qm.end();
}

#[test]
fn display_chlauth_runcheck_names_the_rule_that_applies() {
    let home = Home::new();
    let qm = Qm::start(&home, "QSEC6", &[]);
    let out = mqsc_ok(
        &home,
        &qm.name,
        "SET CHLAUTH('*') TYPE(ADDRESSMAP) ADDRESS('*') USERSRC(NOACCESS)\n\
         SET CHLAUTH('APP.*') TYPE(USERMAP) CLNTUSER('alice') USERSRC(MAP) MCAUSER('bob')\n\
         DISPLAY CHLAUTH('APP.ONE') MATCH(RUNCHECK) ADDRESS('10.1.2.3') CLNTUSER('alice')\n",
    );
    let tail = &out[out.find("MATCH(RUNCHECK)").expect("echoed")..];
    assert!(
        tail.contains("CHLAUTH(APP.*)") && tail.contains("TYPE(USERMAP)"),
        "{out}"
    );
    let out = mqsc_ok(
        &home,
        &qm.name,
        "DISPLAY CHLAUTH('OTHER') MATCH(RUNCHECK) ADDRESS('10.1.2.3') CLNTUSER('alice')\n",
    );
    let tail = &out[out.find("MATCH(RUNCHECK)").expect("echoed")..];
    assert!(
        tail.contains("CHLAUTH(*)") && tail.contains("TYPE(ADDRESSMAP)"),
        "{out}"
    );

    // The filters select records: by client user, and MATCH(ALL) with the generic profiles that
    // would apply to a channel name.
    let out = mqsc_ok(&home, &qm.name, "DISPLAY CHLAUTH(*) CLNTUSER('alice')\n");
    assert!(
        out.contains("TYPE(USERMAP)") && !out.contains("TYPE(ADDRESSMAP)"),
        "{out}"
    );
    let out = mqsc_ok(&home, &qm.name, "DISPLAY CHLAUTH('APP.ONE') MATCH(ALL)\n");
    assert!(
        out.contains("CHLAUTH(APP.*)") && out.contains("CHLAUTH(*)"),
        "{out}"
    );
    let out = mqsc_ok(&home, &qm.name, "DISPLAY CHLAUTH('APP.*') MATCH(EXACT)\n");
    assert!(
        out.contains("CHLAUTH(APP.*)") && !out.contains("CHLAUTH(*)"),
        "{out}"
    );
    qm.end();
}

#[test]
fn concurrent_setmqusr_commands_lose_no_user() {
    let home = Home::new();
    home.ok(&["crtmqm", "USERS1"]);
    // Eight commands at once, each reading, changing and writing the whole store: without the
    // store's lock, one writer's file replaces another's and users go missing.
    let users: Vec<String> = (0..8).map(|i| format!("user{i}")).collect();
    std::thread::scope(|s| {
        for u in &users {
            let home = &home;
            s.spawn(move || {
                let out = home.run_with_input(
                    &["setmqusr", "-m", "USERS1", "-u", u, "--password-stdin"],
                    &format!("{PASSWORD}\n"),
                );
                assert!(out.status.success(), "{out:?}");
            });
        }
    });
    let listed = home.ok(&["dspmqusr", "-m", "USERS1"]);
    for u in &users {
        assert!(listed.contains(u.as_str()), "{u} missing from:\n{listed}");
    }
}

/// The value of the metric `name` on the queue manager's metrics port.
fn metric(port: u16, name: &str) -> f64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

#[test]
fn a_reconnect_is_let_in_by_a_remembered_verification_until_the_password_changes() {
    let home = Home::new();
    let qm = Qm::create(&home, "AUTHCACHE", &[]);
    let mport = support::free_port();
    qm.set_ini("Metrics", "Port", &mport.to_string());
    qm.restart();
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE AUTHINFO(APP.IDPW) AUTHTYPE(IDPWOS) CHCKCLNT(REQUIRED) FAILDLAY(0)\n\
         ALTER QMGR CONNAUTH(APP.IDPW)\n\
         REFRESH SECURITY TYPE(CONNAUTH)\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('alice') AUTHADD(CONNECT)\n",
    );
    let set_password = |pw: &str| {
        let out = home.run_with_input(
            &[
                "setmqusr",
                "-m",
                &qm.name,
                "-u",
                "alice",
                "--password-stdin",
            ],
            &format!("{pw}\n"),
        );
        assert!(out.status.success(), "{out:?}");
    };
    set_password(PASSWORD);
    let d = "SYSTEM.DEF.SVRCONN";
    let hits = || metric(mport, "ferrymq_auth_cache_hits_total");
    assert_eq!(hits(), 0.0);
    client(&qm, "127.0.0.1", d, "alice", PASSWORD)
        .expect("verified")
        .disconnect()
        .unwrap();
    for _ in 0..3 {
        client(&qm, "127.0.0.1", d, "alice", PASSWORD)
            .expect("remembered")
            .disconnect()
            .unwrap();
    }
    assert_eq!(hits(), 3.0, "three reconnects let in without argon2");
    // A remembered password is no key for another one.
    assert_eq!(
        reason(client(&qm, "127.0.0.1", d, "alice", WRONG)),
        Reason::NOT_AUTHORIZED
    );
    // A changed password: the old one no longer connects, though it was remembered.
    client(&qm, "127.0.0.1", d, "alice", PASSWORD)
        .expect("verified again")
        .disconnect()
        .unwrap();
    set_password("An0ther-Passw0rd");
    assert_eq!(
        reason(client(&qm, "127.0.0.1", d, "alice", PASSWORD)),
        Reason::NOT_AUTHORIZED
    );
    client(&qm, "127.0.0.1", d, "alice", "An0ther-Passw0rd")
        .expect("the new password")
        .disconnect()
        .unwrap();
    qm.end();
}
