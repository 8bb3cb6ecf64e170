//! Object authorities enforced by the real queue manager over real TCP: a client asserting a
//! user may connect, open, put, get and administer only as its authority records allow; grants
//! made with `setmqaut` take effect without a restart; refusals are MQRC_NOT_AUTHORIZED (2035)
//! with a reason text and an error-log entry naming the user, the object and what was missing;
//! `dspmqaut` and `dmpmqaut` show the authorities and the records.

mod support;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::options::{open, Browse, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use support::{Home, Qm};

fn mqsc(qm: &Qm<'_>, text: &str) -> String {
    let out = qm.home.run_with_input(&["runmqsc", &qm.name], text);
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "runmqsc failed:\n{s}");
    s
}

fn client_as(qm: &Qm<'_>, user: &str) -> Result<Connection, ferrymq_types::MqError> {
    let mut o = ConnectOptions::client(&qm.name, &qm.conname()).unwrap();
    o.user = user.to_string();
    o.app_name = "oam-test".to_string();
    Connection::connect(o)
}

fn put(c: &Connection, q: &str, body: &str) -> Result<(), ferrymq_types::MqError> {
    let h = c.open(q, open::OUTPUT)?;
    let r = c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::copy_from_slice(body.as_bytes()),
        &PutOptions::default(),
    );
    let _ = c.close(&h, 0);
    r.map(|_| ())
}

fn reason_of<T>(r: Result<T, ferrymq_types::MqError>) -> Reason {
    match r {
        Ok(_) => Reason::NONE,
        Err(e) => e.reason,
    }
}

fn error_log(qm: &Qm<'_>) -> String {
    std::fs::read_to_string(qm.dir().join("errors").join("FMQERR01.LOG")).unwrap_or_default()
}

#[test]
fn a_user_may_only_browse_until_put_is_granted_with_setmqaut() {
    let home = Home::new();
    let qm = Qm::start(&home, "OAM1", &[]);
    mqsc(
        &qm,
        "DEFINE QLOCAL(Q1)\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('app') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE(Q1) OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(BROWSE,INQ)\n",
    );
    // A message to browse, put by the queue manager's own user (bindings).
    put(&qm.connect_bindings(), "Q1", "hello").unwrap();

    let c = client_as(&qm, "app").expect("CONNECT is granted");
    let refused = c.open("Q1", open::OUTPUT).unwrap_err();
    assert_eq!(
        refused.reason,
        Reason::NOT_AUTHORIZED,
        "{}",
        refused.message
    );
    assert!(refused.message.contains("'app'"), "{}", refused.message);
    assert!(refused.message.contains("PUT"), "{}", refused.message);
    assert!(refused.message.contains("Q1"), "{}", refused.message);

    let h = c
        .open("Q1", open::BROWSE | open::INQUIRE)
        .expect("browse is granted");
    let m = c
        .get(
            &h,
            &GetOptions {
                browse: Browse::First,
                ..GetOptions::any()
            },
        )
        .expect("browse works");
    assert_eq!(&m.body[..], b"hello");
    c.close(&h, 0).unwrap();
    // A get needs GET, which browse does not give.
    assert_eq!(
        reason_of(c.open("Q1", open::INPUT_SHARED)),
        Reason::NOT_AUTHORIZED
    );

    let out = home.ok(&[
        "setmqaut", "-m", "OAM1", "-t", "queue", "-n", "Q1", "-p", "app", "+put",
    ]);
    assert!(out.contains("AUTHLIST(BROWSE,INQ,PUT)"), "{out}");
    // No restart, no reconnect: the next open sees the grant.
    put(&c, "Q1", "from app").expect("put granted");

    // And a revocation takes it back.
    home.ok(&[
        "setmqaut", "-m", "OAM1", "-t", "queue", "-n", "Q1", "-p", "app", "-put",
    ]);
    assert_eq!(reason_of(put(&c, "Q1", "again")), Reason::NOT_AUTHORIZED);
}

#[test]
fn a_generic_profile_grants_on_every_queue_it_covers_and_nothing_else() {
    let home = Home::new();
    let qm = Qm::start(&home, "OAM2", &[]);
    mqsc(
        &qm,
        "DEFINE QLOCAL(DEV.QUEUE.1)\nDEFINE QLOCAL(OTHER.Q)\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('dev') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE('DEV.**') OBJTYPE(QUEUE) PRINCIPAL('dev') AUTHADD(GET)\n",
    );
    let b = qm.connect_bindings();
    put(&b, "DEV.QUEUE.1", "m1").unwrap();
    put(&b, "OTHER.Q", "m2").unwrap();

    let c = client_as(&qm, "dev").unwrap();
    let h = c
        .open("DEV.QUEUE.1", open::INPUT_SHARED)
        .expect("DEV.** grants GET");
    let m = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(&m.body[..], b"m1");
    let e = c.open("OTHER.Q", open::INPUT_SHARED).unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED);
    assert!(e.message.contains("no authority record"), "{}", e.message);
}

#[test]
fn a_user_without_connect_is_refused_at_connect_and_the_error_log_says_why() {
    let home = Home::new();
    let qm = Qm::start(&home, "OAM3", &[]);
    mqsc(
        &qm,
        "SET AUTHREC PROFILE(Q1) OBJTYPE(QUEUE) PRINCIPAL('nocon') AUTHADD(PUT)\n",
    );
    let e = client_as(&qm, "nocon").unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{}", e.message);
    assert!(e.message.contains("CONNECT"), "{}", e.message);

    let log = error_log(&qm);
    let line = log
        .lines()
        .find(|l| l.contains("FMQ3008W"))
        .unwrap_or_else(|| panic!("no FMQ3008W entry in:\n{log}"));
    assert!(line.contains("user 'nocon'"), "{line}");
    assert!(line.contains("QMGR 'OAM3'"), "{line}");
    assert!(line.contains("missing authority CONNECT"), "{line}");

    // A client asserting nobody runs as the queue manager's own user, which may do anything.
    let anyone = client_as(&qm, "").expect("blank user is the queue manager's");
    drop(anyone);
}

#[test]
fn mqsc_over_a_client_connection_needs_dsp_for_display() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "OAM4", &[]);
    mqsc(
        &qm,
        "DEFINE QLOCAL(ADM.Q)\nDEFINE QLOCAL(SECRET.Q)\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('ops') AUTHADD(CONNECT)\n",
    );
    let c = client_as(&qm, "ops").unwrap();
    let e = c.admin("MQSC DISPLAY QLOCAL(ADM.Q)").unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{}", e.message);
    assert!(e.message.contains("DSP"), "{}", e.message);
    assert!(e.message.contains("ADM.Q"), "{}", e.message);
    // Nor may it grant itself anything.
    let e = c
        .admin("MQSC SET AUTHREC PROFILE(ADM.Q) OBJTYPE(QUEUE) PRINCIPAL('ops') AUTHADD(DSP)")
        .unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{}", e.message);

    home.ok(&[
        "setmqaut", "-m", "OAM4", "-t", "queue", "-n", "ADM.*", "-p", "ops", "+dsp",
    ]);
    let out = c.admin("MQSC DISPLAY QLOCAL(ADM.Q)").expect("DSP granted");
    assert!(out.contains("QUEUE(ADM.Q)"), "{out}");
    // A generic DISPLAY shows only what the user may display.
    let out = c.admin("MQSC DISPLAY QLOCAL(*)").unwrap();
    assert!(out.contains("QUEUE(ADM.Q)"), "{out}");
    assert!(!out.contains("SECRET.Q"), "{out}");
    // DSP is not CHG.
    assert_eq!(
        reason_of(c.admin("MQSC ALTER QLOCAL(ADM.Q) DESCR('x')")),
        Reason::NOT_AUTHORIZED
    );
    // A generic DISPLAY QSTATUS, likewise, lists only the queues the user may display.
    let out = c.admin("MQSC DISPLAY QSTATUS(*)").unwrap();
    assert!(out.contains("QUEUE(ADM.Q)"), "{out}");
    assert!(!out.contains("SECRET.Q"), "{out}");
    // DEFINE ... LIKE reads the LIKE object: CRT alone is not enough without DSP on it.
    home.ok(&[
        "setmqaut", "-m", "OAM4", "-t", "queue", "-n", "NEW.**", "-p", "ops", "+crt",
    ]);
    let e = c
        .admin("MQSC DEFINE QLOCAL(NEW.Q1) LIKE(SECRET.Q)")
        .unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{}", e.message);
    assert!(e.message.contains("SECRET.Q"), "{}", e.message);
    c.admin("MQSC DEFINE QLOCAL(NEW.Q2) LIKE(ADM.Q)")
        .expect("CRT on NEW.Q2 and DSP on ADM.Q");
}

#[test]
fn dspmqaut_shows_effective_authorities_and_dmpmqaut_the_records() {
    let home = Home::new();
    let qm = Qm::start(&home, "OAM5", &[]);
    mqsc(
        &qm,
        "DEFINE QLOCAL(APP.IN)\n\
         SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(GET,PUT)\n\
         SET AUTHREC PROFILE('APP.IN') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(INQ,BROWSE)\n",
    );
    // The exact profile decides alone for APP.IN; the generic one for any other APP queue.
    let out = home.ok(&[
        "dspmqaut", "-m", "OAM5", "-t", "queue", "-n", "APP.IN", "-p", "app",
    ]);
    assert!(
        out.contains("Entity app has the following authorizations for object APP.IN:"),
        "{out}"
    );
    assert!(out.contains("\tbrowse\n\tinq\n"), "{out}");
    assert!(!out.contains("\tput"), "{out}");
    let out = home.ok(&[
        "dspmqaut", "-m", "OAM5", "-t", "queue", "-n", "APP.OUT", "-p", "app",
    ]);
    assert!(out.contains("\tget\n\tput\n"), "{out}");
    assert!(out.contains("PROFILE(APP.**)"), "{out}");

    let out = home.ok(&["dmpmqaut", "-m", "OAM5", "-n", "APP.IN"]);
    assert!(out.contains("profile:     APP.**"), "{out}");
    assert!(out.contains("profile:     APP.IN"), "{out}");
    assert!(out.contains("authority:   browse inq"), "{out}");
    let out = mqsc(
        &qm,
        "DISPLAY AUTHREC PROFILE(APP.IN) OBJTYPE(QUEUE) MATCH(EXACT)\n",
    );
    assert!(out.contains("PROFILE(APP.IN)"), "{out}");
    assert!(!out.contains("PROFILE(APP.**)"), "{out}");
}

/// An operating-system group and a user in it, made for one test and removed after it.
struct OsUser {
    user: String,
    group: String,
}

impl OsUser {
    fn new(tag: &str) -> OsUser {
        let id = std::process::id();
        let u = OsUser {
            user: format!("fmq{tag}u{id}"),
            group: format!("fmq{tag}g{id}"),
        };
        let run = |cmd: &str, args: &[&str]| {
            let out = std::process::Command::new(cmd)
                .args(args)
                .output()
                .unwrap_or_else(|e| panic!("{cmd}: {e} (these tests run as root)"));
            assert!(
                out.status.success(),
                "{cmd} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run("groupadd", &[&u.group]);
        run("useradd", &["-M", "-N", "-G", &u.group, &u.user]);
        u
    }
}

impl Drop for OsUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("userdel")
            .arg(&self.user)
            .output();
        let _ = std::process::Command::new("groupdel")
            .arg(&self.group)
            .output();
    }
}

#[test]
fn a_users_operating_system_groups_give_it_their_authorities() {
    let os = OsUser::new("grp");
    let home = Home::new();
    let qm = Qm::start(&home, "OAM6", &[]);
    mqsc(&qm, "DEFINE QLOCAL(TEAM.Q)\n");
    assert_eq!(reason_of(client_as(&qm, &os.user)), Reason::NOT_AUTHORIZED);
    home.ok(&[
        "setmqaut", "-m", "OAM6", "-t", "qmgr", "-g", &os.group, "+connect",
    ]);
    home.ok(&[
        "setmqaut", "-m", "OAM6", "-t", "queue", "-n", "TEAM.*", "-g", &os.group, "+put",
    ]);
    let c = client_as(&qm, &os.user).expect("the group grants CONNECT");
    put(&c, "TEAM.Q", "from the team").expect("the group grants PUT");

    // The refusal names the user's groups.
    let e = c.open("TEAM.Q", open::INPUT_SHARED).unwrap_err();
    assert!(e.message.contains(&os.group), "{}", e.message);

    // MATCH(MEMBERSHIP) shows the records of the user's groups.
    let out = mqsc(
        &qm,
        &format!(
            "DISPLAY AUTHREC PRINCIPAL('{}') MATCH(MEMBERSHIP)\n",
            os.user
        ),
    );
    assert!(out.contains(&format!("ENTITY({})", os.group)), "{out}");
}

#[test]
fn members_of_the_admin_group_may_do_everything() {
    let os = OsUser::new("adm");
    let home = Home::new();
    let qm = Qm::create(&home, "OAM7", &[]);
    qm.set_ini("Security", "AdminGroup", &os.group);
    qm.restart();
    let c = client_as(&qm, &os.user).expect("an administrator connects");
    put(&c, "SYSTEM.DEFAULT.LOCAL.QUEUE", "x").expect("and puts anywhere");
    let out = home.ok(&["dspmqaut", "-m", "OAM7", "-t", "qmgr", "-p", &os.user]);
    assert!(out.contains("\tconnect\n"), "{out}");
    assert!(out.contains("administrators' group"), "{out}");
}

#[test]
fn publishing_and_subscribing_need_pub_and_sub_on_the_closest_topic_object() {
    let home = Home::new();
    let qm = Qm::start(&home, "OAMPS", &[]);
    mqsc(
        &qm,
        "DEFINE TOPIC(SPORTS) TOPICSTR('sport')\n\
         SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('app') AUTHADD(CONNECT)\n\
         SET AUTHREC PROFILE(SPORTS) OBJTYPE(TOPIC) PRINCIPAL('app') AUTHADD(SUB)\n",
    );
    let c = client_as(&qm, "app").unwrap();
    let sub = |topic: &str| {
        c.subscribe(&ferrymq_client::SubscriptionOptions::topic(topic))
            .map(|_| ())
    };
    let publish = |topic: &str| {
        c.put1_topic(
            "",
            topic,
            &MessageDescriptor::default(),
            &Properties::default(),
            Bytes::from_static(b"score"),
            &PutOptions::default(),
        )
        .map(|_| ())
    };
    assert_eq!(reason_of(sub("sport/tennis/#")), Reason::NONE);
    assert_eq!(reason_of(publish("sport/tennis")), Reason::NOT_AUTHORIZED);
    assert_eq!(
        reason_of(sub("news/#")),
        Reason::NOT_AUTHORIZED,
        "the closest topic object of 'news' is SYSTEM.BASE.TOPIC"
    );
    assert!(error_log(&qm).contains("SPORTS"), "{}", error_log(&qm));
    qm.home.ok(&[
        "setmqaut", "-m", "OAMPS", "-t", "topic", "-n", "SPORTS", "-p", "app", "+pub",
    ]);
    assert_eq!(reason_of(publish("sport/tennis")), Reason::NONE);
}
