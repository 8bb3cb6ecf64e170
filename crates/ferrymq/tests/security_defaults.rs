//! A new queue manager is secure by default, against the real binary over real TCP: the back-stop
//! channel authentication rules refuse clients on SYSTEM.* channels, every client needs a user
//! and password from the queue manager's user store, administrative users are refused on
//! application channels, and MQSC over TCP is accepted only on SYSTEM.ADMIN.SVRCONN from an
//! authenticated user the object authority manager lets run it. `crtmqm --dev` opens the
//! development configuration, and the MQ container image's developer script runs on a new queue
//! manager and is enforced.

mod support;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, MqError, Reason};
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Properties};
use support::{error_log, Home, Qm, BIN};

const PASSWORD: &str = "Corr3ct-H0rse";
const ADMIN_PASSWORD: &str = "B0ss-Passw0rd";

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

/// Adds a user to the queue manager's user store with `groups` and `password`.
fn add_user(home: &Home, qm: &str, user: &str, groups: &str, password: &str) {
    let out = home.run_with_input(
        &[
            "setmqusr",
            "-m",
            qm,
            "-u",
            user,
            "-g",
            groups,
            "--password-stdin",
        ],
        &format!("{password}\n"),
    );
    assert!(out.status.success(), "setmqusr {user}: {out:?}");
}

/// A client connection from `host` (a loopback address: failures are counted per address).
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

fn reason<T>(r: Result<T, MqError>) -> Reason {
    match r {
        Ok(_) => Reason::NONE,
        Err(e) => e.reason,
    }
}

fn put_get(c: &Connection, queue: &str, body: &str) {
    let q = c.open(queue, open::OUTPUT | open::INPUT_SHARED).unwrap();
    c.put(
        &q,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from(body.to_string()),
        &PutOptions::default(),
    )
    .unwrap();
    let m = c.get(&q, &GetOptions::any()).unwrap();
    assert_eq!(&m.body[..], body.as_bytes());
}

/// `runmqsc -c` over `channel` as `user` (password in FERRYMQ_PASSWORD when given): exit status
/// and output.
fn runmqsc_c(
    home: &Home,
    qm: &Qm,
    channel: &str,
    user: Option<&str>,
    password: &str,
    script: &str,
) -> (Option<i32>, String) {
    use std::io::Write;
    let conname = qm.conname();
    let mut args = vec!["runmqsc", "-c", "--conn", &conname, "--channel", channel];
    if let Some(u) = user {
        args.extend(["--user", u]);
    }
    args.push(&qm.name);
    let mut child = std::process::Command::new(BIN)
        .args(&args)
        .env("FERRYMQ_HOME", home.path())
        .env("FERRYMQ_PASSWORD", password)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(script.as_bytes());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_new_queue_manager_lets_in_only_authenticated_users_on_application_channels() {
    let home = Home::new();
    let qm = Qm::start_secure(&home, "QDEF1", &[]);
    // An application channel, a user with a password, and what its group may do.
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE CHANNEL(APP.SVRCONN) CHLTYPE(SVRCONN)\n\
         DEFINE QLOCAL(APP.Q)\n\
         SET AUTHREC OBJTYPE(QMGR) GROUP('apps') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) GROUP('apps') AUTHADD(PUT,GET)\n",
    );
    add_user(&home, &qm.name, "alice", "apps", PASSWORD);
    add_user(&home, &qm.name, "boss", "mqm", ADMIN_PASSWORD);

    // The back-stop: nobody comes in over SYSTEM.DEF.SVRCONN, not even with a right password.
    for (user, pw) in [("", ""), ("alice", PASSWORD)] {
        assert_eq!(
            reason(client(&qm, "127.0.0.2", "SYSTEM.DEF.SVRCONN", user, pw)),
            Reason::NOT_AUTHORIZED,
            "user '{user}' on SYSTEM.DEF.SVRCONN"
        );
    }
    // An application channel needs a user and its password.
    assert_eq!(
        reason(client(&qm, "127.0.0.3", "APP.SVRCONN", "", "")),
        Reason::NOT_AUTHORIZED,
        "no user on an application channel"
    );
    assert_eq!(
        reason(client(&qm, "127.0.0.3", "APP.SVRCONN", "alice", "")),
        Reason::NOT_AUTHORIZED,
        "a user without its password"
    );
    // An administrative user is blocked on an application channel, password or not.
    assert_eq!(
        reason(client(
            &qm,
            "127.0.0.4",
            "APP.SVRCONN",
            "boss",
            ADMIN_PASSWORD
        )),
        Reason::NOT_AUTHORIZED,
        "an administrative user on an application channel"
    );
    let log = error_log(&qm.dir());
    assert!(
        log.contains("SYSTEM.*") && log.contains("USERSRC(NOACCESS)"),
        "the back-stop rule is named:\n{log}"
    );
    assert!(
        log.contains("user 'boss' refused by") && log.contains("*MQADMIN"),
        "the blocking rule is named:\n{log}"
    );

    // The user with its password works as its authorities allow.
    let c = client(&qm, "127.0.0.1", "APP.SVRCONN", "alice", PASSWORD).unwrap();
    put_get(&c, "APP.Q", "hello");
    c.disconnect().unwrap();
}

#[test]
fn remote_administration_needs_the_admin_channel_a_password_and_authority() {
    let home = Home::new();
    let qm = Qm::start_secure(&home, "QDEF2", &[]);
    mqsc_ok(
        &home,
        &qm.name,
        "DEFINE CHANNEL(APP.SVRCONN) CHLTYPE(SVRCONN)\n\
         SET AUTHREC OBJTYPE(QMGR) GROUP('apps') AUTHADD(CONNECT)\n",
    );
    add_user(&home, &qm.name, "alice", "apps", PASSWORD);
    add_user(&home, &qm.name, "boss", "mqm", ADMIN_PASSWORD);
    let admin = "SYSTEM.ADMIN.SVRCONN";

    // An administrator with its password over the administration channel.
    let (code, out) = runmqsc_c(
        &home,
        &qm,
        admin,
        Some("boss"),
        ADMIN_PASSWORD,
        "DEFINE QLOCAL(FROM.FAR)\nDISPLAY QLOCAL(FROM.FAR)\n",
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("QUEUE(FROM.FAR)"), "{out}");

    // A user who is not an administrator: in, but refused the command by its authorities.
    let (code, out) = runmqsc_c(
        &home,
        &qm,
        admin,
        Some("alice"),
        PASSWORD,
        "DEFINE QLOCAL(NOT.MINE)\n",
    );
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}:\n{out}");
    assert!(out.contains("MQRC_NOT_AUTHORIZED (2035)"), "{out}");
    assert!(!out.contains("defined."), "{out}");

    // Anywhere but the administration channel, MQSC is refused, even to a permitted user.
    let (code, out) = runmqsc_c(
        &home,
        &qm,
        "APP.SVRCONN",
        Some("alice"),
        PASSWORD,
        "DISPLAY QMGR\n",
    );
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}:\n{out}");
    assert!(
        out.contains("2035") && out.contains("SYSTEM.ADMIN.SVRCONN"),
        "{out}"
    );
    // Without a user, the administration channel refuses the connection.
    let (code, out) = runmqsc_c(&home, &qm, admin, None, "", "DISPLAY QMGR\n");
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}:\n{out}");
    assert!(out.contains("2035"), "{out}");

    let out = home.run_with_input(&["runmqsc", &qm.name], "DISPLAY QLOCAL(NOT.MINE)\n");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("is not defined"), "{out}");
}

#[test]
fn the_mq_developer_script_runs_on_a_new_queue_manager_and_is_enforced() {
    let home = Home::new();
    let qm = Qm::start_secure(&home, "QDEF3", &[]);
    mqsc_ok(&home, &qm.name, include_str!("fixtures/dev-config.mqsc"));
    add_user(&home, &qm.name, "app", "mqclient", PASSWORD);
    mqsc_ok(&home, &qm.name, "DEFINE QLOCAL(APP.PRIVATE)\n");

    let app = "DEV.APP.SVRCONN";
    let c = client(&qm, "127.0.0.1", app, "app", PASSWORD).unwrap();
    put_get(&c, "DEV.QUEUE.1", "from the developer script");
    // A queue the application group holds nothing on.
    let e = c.open("APP.PRIVATE", open::OUTPUT).unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{e}");
    c.disconnect().unwrap();

    // A user the queue manager does not know, and app without its password.
    assert_eq!(
        reason(client(&qm, "127.0.0.2", app, "mallory", PASSWORD)),
        Reason::NOT_AUTHORIZED
    );
    assert_eq!(
        reason(client(&qm, "127.0.0.2", app, "app", "")),
        Reason::NOT_AUTHORIZED
    );
}

#[test]
fn crtmqm_dev_opens_the_development_configuration_for_app() {
    let home = Home::new();
    let port = support::free_port();
    let p = port.to_string();
    let out = home.run_with_input(
        &[
            "crtmqm",
            "-p",
            &p,
            "--dev",
            "--dev-app-password-stdin",
            "QDEV",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(out.status.success(), "{out:?}");
    let qm = Qm {
        home: &home,
        name: "QDEV".into(),
        port,
    };
    qm.restart();
    let out = mqsc_ok(
        &home,
        &qm.name,
        "DISPLAY QMGR DEADQ\nDISPLAY TOPIC(DEV.BASE.TOPIC) TOPICSTR\nDISPLAY QLOCAL(DEV.QUEUE.3)\n",
    );
    assert!(out.contains("DEADQ(DEV.DEAD.LETTER.QUEUE)"), "{out}");
    assert!(out.contains("TOPICSTR(dev/)"), "{out}");
    assert!(out.contains("QUEUE(DEV.QUEUE.3)"), "{out}");

    let app = "DEV.APP.SVRCONN";
    let c = client(&qm, "127.0.0.1", app, "app", PASSWORD).unwrap();
    put_get(&c, "DEV.QUEUE.2", "developer");
    c.disconnect().unwrap();
    // The password was given, so the application channel asks for it; SYSTEM.DEF.SVRCONN stays
    // shut.
    assert_eq!(
        reason(client(&qm, "127.0.0.2", app, "app", "")),
        Reason::NOT_AUTHORIZED
    );
    assert_eq!(
        reason(client(
            &qm,
            "127.0.0.2",
            "SYSTEM.DEF.SVRCONN",
            "app",
            PASSWORD
        )),
        Reason::NOT_AUTHORIZED
    );
}

#[test]
fn crtmqm_dev_without_a_password_lets_app_in_without_one_on_its_channel_only() {
    let home = Home::new();
    let qm = Qm::start(&home, "QDEVOPEN", &["--dev"]);
    let app = "DEV.APP.SVRCONN";
    // As MQ's developer image without an application password: app (not an administrative
    // user) comes in on its channel without one, and its temporary reply queues work.
    let c = client(&qm, "127.0.0.1", app, "app", "").unwrap();
    put_get(&c, "DEV.QUEUE.1", "open for development");
    let reply = c
        .open_dynamic(
            "SYSTEM.DEFAULT.MODEL.QUEUE",
            "DEV.REPLY.*",
            open::INPUT_EXCLUSIVE,
        )
        .unwrap();
    c.close(&reply, 0).unwrap();
    c.disconnect().unwrap();
    // Administrative users still need a password, and SYSTEM.DEF.SVRCONN stays shut.
    add_user(&home, &qm.name, "boss", "mqm", ADMIN_PASSWORD);
    assert_eq!(
        reason(client(&qm, "127.0.0.2", "DEV.ADMIN.SVRCONN", "boss", "")),
        Reason::NOT_AUTHORIZED
    );
    let c = client(
        &qm,
        "127.0.0.1",
        "DEV.ADMIN.SVRCONN",
        "boss",
        ADMIN_PASSWORD,
    )
    .unwrap();
    c.disconnect().unwrap();
    assert_eq!(
        reason(client(&qm, "127.0.0.2", "SYSTEM.DEF.SVRCONN", "", "")),
        Reason::NOT_AUTHORIZED
    );
}
