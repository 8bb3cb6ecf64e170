//! Configuration as code, against the real binary: `dmpmqcfg` dumps a queue manager's whole
//! configuration as MQSC that `runmqsc` replays onto a new queue manager to the same state; the
//! AutoConfig directory's MQSC files are applied at every start, idempotently, with each file's
//! outcome in the error log; and setup scripts written the way MQ's developer configuration and
//! sender/receiver samples are run, refused only where a capability is not built yet.

mod support;

use support::{error_log, Home, Qm};

/// Runs MQSC in bindings mode; returns (exit status, stdout).
fn mqsc(home: &Home, qm: &str, script: &str) -> (i32, String) {
    let out = home.run_with_input(&["runmqsc", qm], script);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn mqsc_ok(home: &Home, qm: &str, script: &str) -> String {
    let (code, text) = mqsc(home, qm, script);
    assert_eq!(code, 0, "runmqsc failed:\n{script}\n---\n{text}");
    text
}

/// A dump without its comment lines (queue manager name, QMID, time of the dump).
fn commands(dump: &str) -> String {
    dump.lines()
        .filter(|l| !l.trim_start().starts_with('*'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every object type FerryMQ has, each with attributes other than its defaults.
const CONFIG: &str = "\
ALTER QMGR DESCR('Orders hub') MAXUMSGS(5000) DEADQ('APP.DLQ') CHLAUTH(DISABLED) STATINT(600)
DEFINE QLOCAL(APP.DLQ) MAXDEPTH(99999)
DEFINE QLOCAL('APP.In') DESCR('it''s the input') MAXDEPTH(1234) MAXMSGL(65536) DEFPSIST(YES) +
       DEFPRTY(7) MSGDLVSQ(FIFO) GET(DISABLED) BOTHRESH(3) BOQNAME(APP.DLQ) NOSHARE TRIGGER +
       TRIGTYPE(EVERY) CUSTOM('k=v')
DEFINE QLOCAL(APP.XMITQ) USAGE(XMITQ)
DEFINE QALIAS(APP.ALIAS) TARGET('APP.In') DEFPRTY(2) PUT(DISABLED)
DEFINE QMODEL(APP.MODEL) DEFTYPE(PERMDYN) MAXDEPTH(77)
DEFINE QREMOTE(APP.REMOTE) RNAME(THEIR.Q) RQMNAME(QMX) XMITQ(APP.XMITQ) DEFPSIST(YES)
DEFINE CHANNEL(APP.SVRCONN) CHLTYPE(SVRCONN) MCAUSER('app') MAXINST(20) SHARECNV(1)
DEFINE CHANNEL(TO.QMX) CHLTYPE(SDR) CONNAME('qmx.example(1414)') XMITQ(APP.XMITQ) BATCHSZ(10)
DEFINE CHANNEL(QMX.TO.US) CHLTYPE(RCVR) DESCR('from QMX')
DEFINE CHANNEL(APP.CLNT) CHLTYPE(CLNTCONN) CONNAME('h(1)') QMNAME(QMX)
DEFINE LISTENER(APP.LSTR) TRPTYPE(TCP) PORT(0) CONTROL(MANUAL) BACKLOG(50)
DEFINE AUTHINFO(APP.LDAP) AUTHTYPE(IDPWLDAP) CONNAME('ldap(389)') SHORTUSR('uid')
DEFINE TOPIC(APP.PRICES) TOPICSTR('prices/fx') DESCR('fx prices') DEFPSIST(YES) DURSUB(NO)
SET CHLAUTH('APP.*') TYPE(ADDRESSMAP) ADDRESS('10.1.*') USERSRC(CHANNEL) DESCR('lan')
SET CHLAUTH('*') TYPE(BLOCKUSER) USERLIST('nobody','*MQADMIN') WARN(YES)
SET CHLAUTH('*') TYPE(BLOCKADDR) ADDRLIST('192.0.2.*')
SET CHLAUTH(TO.QMX) TYPE(QMGRMAP) QMNAME(QMX) MCAUSER('mqm2')
SET CHLAUTH(APP.SVRCONN) TYPE(SSLPEERMAP) SSLPEER('CN=app') USERSRC(NOACCESS)
SET CHLAUTH(APP.SVRCONN) TYPE(USERMAP) CLNTUSER('alice') MCAUSER('app')
SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(GET,PUT,INQ)
SET AUTHREC OBJTYPE(QMGR) GROUP('apps') AUTHADD(CONNECT)
SET AUTHREC PROFILE(APP.SVRCONN) OBJTYPE(CHANNEL) GROUP('nobody') AUTHADD(NONE)
";

#[test]
fn a_dump_replays_onto_a_new_queue_manager_to_the_same_state() {
    let home = Home::new();
    let _a = Qm::start(&home, "DUMPA", &[]);
    let _b = Qm::start(&home, "DUMPB", &[]);
    mqsc_ok(&home, "DUMPA", CONFIG);
    let first = home.ok(&["dmpmqcfg", "-m", "DUMPA"]);
    for expect in [
        "ALTER QMGR",
        "DESCR('Orders hub')",
        "DEFINE QLOCAL('APP.In')",
        "DESCR('it''s the input')",
        "NOSHARE",
        "DEFINE QALIAS('APP.ALIAS')",
        "DEFINE QMODEL('APP.MODEL')",
        "DEFINE QREMOTE('APP.REMOTE')",
        "DEFINE CHANNEL('TO.QMX')",
        "DEFINE LISTENER('APP.LSTR')",
        "DEFINE AUTHINFO('APP.LDAP')",
        "SET CHLAUTH('APP.*')",
        "ACTION(REPLACE)",
        "SET AUTHREC",
        "AUTHADD(GET,INQ,PUT)",
    ] {
        assert!(first.contains(expect), "missing {expect}:\n{first}");
    }
    assert!(
        !first.contains("SYSTEM.DEFAULT.LOCAL.QUEUE") && !first.contains("CURDEPTH"),
        "no SYSTEM objects, no read-only attributes:\n{first}"
    );

    // Replayed onto a fresh queue manager with runmqsc: every command works...
    let replayed = mqsc_ok(&home, "DUMPB", &first);
    assert!(!replayed.contains("E: "), "{replayed}");
    // ...and the same state dumps the same, but for the comments (name, QMID, time).
    let second = home.ok(&["dmpmqcfg", "-m", "DUMPB"]);
    assert_eq!(commands(&first), commands(&second));
    assert!(first.contains("QMID(DUMPA_") && second.contains("QMID(DUMPB_"));

    // Replaying again changes nothing (DEFINE ... REPLACE, SET ... ACTION(REPLACE)).
    mqsc_ok(&home, "DUMPB", &first);
    let third = home.ok(&["dmpmqcfg", "-m", "DUMPB"]);
    assert_eq!(commands(&first), commands(&third));

    // -x narrows the dump; -o json carries the same commands.
    let chl = home.ok(&["dmpmqcfg", "-m", "DUMPA", "-x", "chlauth"]);
    assert_eq!(commands(&chl).matches("SET CHLAUTH").count(), 6, "{chl}");
    assert!(!chl.contains("DEFINE") && !chl.contains("AUTHREC"), "{chl}");
    let auth = home.ok(&["dmpmqcfg", "-m", "DUMPA", "-x", "authrec"]);
    assert_eq!(commands(&auth).matches("SET AUTHREC").count(), 3, "{auth}");
    let json = home.ok(&["dmpmqcfg", "-m", "DUMPA", "-o", "json", "-x", "object"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let cmds = v["commands"].as_array().unwrap();
    assert_eq!(cmds[0]["type"], "QMGR");
    assert!(cmds
        .iter()
        .any(|c| c["name"] == "APP.In" && c["attributes"]["MAXDEPTH"] == "1234"));
    assert!(v["qmid"].as_str().unwrap().starts_with("DUMPA_"));

    // Usage errors and an unavailable queue manager.
    let out = home.run(&["dmpmqcfg", "-m", "DUMPA", "-x", "queues"]);
    assert_eq!(out.status.code(), Some(1));
    let out = home.run(&["dmpmqcfg", "-m", "NOSUCHQM"]);
    assert_eq!(out.status.code(), Some(20));
}

#[test]
fn autoconfig_files_apply_in_name_order_at_every_start_and_failures_are_logged() {
    let home = Home::new();
    let qm = Qm::create(&home, "AUTOCFG", &[]);
    let dir = qm.dir().join("autocfg");
    std::fs::create_dir_all(&dir).unwrap();
    // Name order: 20 alters what 10 defines. 15 has a failing command on its third line and a
    // good one after it.
    std::fs::write(
        dir.join("10-queues.mqsc"),
        "* application queues\nDEFINE QLOCAL(AC.IN) MAXDEPTH(5) REPLACE\n\
         DEFINE QLOCAL(AC.OUT) REPLACE\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("15-partly-bad.mqsc"),
        "DEFINE QALIAS(AC.ALIAS) TARGET(AC.IN) REPLACE\n\
         * the next command fails: the queue is not defined\n\
         ALTER QLOCAL(AC.MISSING) MAXDEPTH(1)\n\
         SET CHLAUTH('AC.*') TYPE(ADDRESSMAP) ADDRESS('*') USERSRC(CHANNEL) ACTION(REPLACE)\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("20-tune.mqsc"),
        "ALTER QLOCAL(AC.IN) MAXDEPTH(7)\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "DEFINE QLOCAL(AC.IGNORED)\n").unwrap();
    qm.restart();
    let text = mqsc_ok(
        &home,
        "AUTOCFG",
        "DISPLAY QLOCAL(AC.IN) MAXDEPTH\nDISPLAY QALIAS(AC.ALIAS)\nDISPLAY CHLAUTH('AC.*')\n",
    );
    assert!(
        text.contains("MAXDEPTH(7)"),
        "files run in name order:\n{text}"
    );
    assert!(
        text.contains("CHLAUTH(AC.*)"),
        "the file went on after a failure:\n{text}"
    );
    let (_, text) = mqsc(&home, "AUTOCFG", "DISPLAY QLOCAL(AC.IGNORED)\n");
    assert!(
        text.contains("not defined"),
        "only *.mqsc files run:\n{text}"
    );

    let log = error_log(&qm.dir());
    for expect in [
        "10-queues.mqsc: 2 command(s) run, 0 failed",
        "15-partly-bad.mqsc: 3 command(s) run, 1 failed",
        "20-tune.mqsc: 1 command(s) run, 0 failed",
    ] {
        assert!(log.contains(expect), "missing '{expect}' in:\n{log}");
    }
    let failure = log
        .lines()
        .find(|l| l.contains("FMQ1011E"))
        .unwrap_or_else(|| panic!("no FMQ1011E in:\n{log}"));
    assert!(
        failure.contains("15-partly-bad.mqsc line 3") && failure.contains("AC.MISSING"),
        "{failure}"
    );

    // Applying the files again at the next start gives the same state.
    let before = home.ok(&["dmpmqcfg", "-m", "AUTOCFG"]);
    qm.end();
    qm.restart();
    let after = home.ok(&["dmpmqcfg", "-m", "AUTOCFG"]);
    assert_eq!(commands(&before), commands(&after));
    let log = error_log(&qm.dir());
    assert_eq!(log.matches("10-queues.mqsc: 2 command(s) run").count(), 2);

    // qm.ini AutoConfig:MQSCConfig names another directory.
    let other = home.path().join("mqsc.d");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("a.mqsc"),
        "DEFINE QLOCAL(AC.ELSEWHERE) REPLACE\n",
    )
    .unwrap();
    qm.set_ini("AutoConfig", "MQSCConfig", other.to_str().unwrap());
    qm.end();
    qm.restart();
    mqsc_ok(&home, "AUTOCFG", "DISPLAY QLOCAL(AC.ELSEWHERE)\n");
}

#[test]
fn a_topic_object_has_one_topic_string_of_its_own_that_never_changes() {
    let home = Home::new();
    let qm = Qm::start(&home, "TOPICS", &[]);
    mqsc_ok(
        &home,
        "TOPICS",
        "DEFINE TOPIC(FX) TOPICSTR('prices/fx') DESCR('fx')\n",
    );
    let fail = |script: &str, why: &str| {
        let (code, out) = mqsc(&home, "TOPICS", script);
        assert_ne!(code, 0, "{script} should fail:\n{out}");
        assert!(out.contains(why), "{script}: expected '{why}' in:\n{out}");
    };
    fail(
        "DEFINE TOPIC(FX2) TOPICSTR('prices/fx')\n",
        "already belongs to TOPIC(FX)",
    );
    fail("DEFINE TOPIC(NOSTR)\n", "needs a TOPICSTR");
    fail(
        "ALTER TOPIC(FX) TOPICSTR('prices/eq')\n",
        "cannot be altered",
    );
    fail(
        "DEFINE TOPIC(FX) TOPICSTR('prices/eq') REPLACE\n",
        "REPLACE cannot change",
    );
    // Other attributes change; the root of the tree exists from the start.
    mqsc_ok(&home, "TOPICS", "ALTER TOPIC(FX) DEFPSIST(YES)\n");
    qm.end();
    qm.restart();
    let shown = mqsc_ok(
        &home,
        "TOPICS",
        "DISPLAY TOPIC(FX) TOPICSTR DEFPSIST DESCR\nDISPLAY TOPIC(SYSTEM.BASE.TOPIC)\n",
    );
    for want in [
        "TOPICSTR(prices/fx)",
        "DEFPSIST(YES)",
        "DESCR(fx)",
        "TOPIC(SYSTEM.BASE.TOPIC)",
    ] {
        assert!(shown.contains(want), "{want} missing:\n{shown}");
    }
    mqsc_ok(
        &home,
        "TOPICS",
        "DELETE TOPIC(FX)\nDEFINE TOPIC(FX2) TOPICSTR('prices/fx')\n",
    );
}

/// The commands runmqsc reports failed or refused (their echo lines), in order.
fn rejected(out: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut current = String::new();
    for line in out.lines() {
        if let Some((n, cmd)) = line.split_once(" : ") {
            if n.trim().parse::<usize>().is_ok() {
                current = cmd.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
                continue;
            }
        }
        let id = line.split(':').next().unwrap_or("");
        if id.starts_with("FMQ") && id.ends_with('E') {
            v.push(format!("{current} | {}", line.trim()));
        }
    }
    v
}

#[test]
fn public_style_setup_scripts_run_except_for_capabilities_not_built_yet() {
    let home = Home::new();
    let _qm = Qm::start(&home, "SETUP", &[]);
    for (script, refused) in [
        (
            include_str!("fixtures/dev_config.mqsc"),
            &[(
                "DEFINE SUB('DEV.SUB.1')",
                "publish/subscribe is not built yet",
            )][..],
        ),
        (
            include_str!("fixtures/sender_receiver.mqsc"),
            // START CHANNEL of the sender runs it (it retries: nothing listens at its CONNAME).
            &[(
                "DEFINE PROCESS('ORDERS.PROCESS')",
                "triggering (process definitions) is not built yet",
            )][..],
        ),
    ] {
        let (code, out) = mqsc(&home, "SETUP", script);
        let got = rejected(&out);
        assert_eq!(
            got.len(),
            refused.len(),
            "rejections:\n{got:#?}\n---\n{out}"
        );
        for (line, (cmd, why)) in got.iter().zip(refused) {
            assert!(
                line.starts_with(&cmd.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
                    && line.contains(why),
                "expected {cmd} refused because {why}, got: {line}\n---\n{out}"
            );
        }
        assert_eq!(code, 10, "{out}");
        // Channel authentication and authority records are enforced: no reply says otherwise.
        assert!(!out.contains("does not enforce them yet"), "{out}");
    }
    let shown = mqsc_ok(
        &home,
        "SETUP",
        "DISPLAY QMGR CHLAUTH CONNAUTH DEADQ\nDISPLAY CHLAUTH(*)\nDISPLAY AUTHREC\n\
         DISPLAY QREMOTE(ORDERS.TO.DST) XMITQ\nDISPLAY CHANNEL(QMSRC.TO.QMDST) CONNAME\n",
    );
    for expect in [
        "CHLAUTH(ENABLED)",
        "CONNAUTH(DEV.AUTHINFO)",
        "DEADQ(DEV.DEAD.LETTER.QUEUE)",
        "CHLAUTH(DEV.APP.SVRCONN)",
        "TYPE(QMGRMAP)",
        "PROFILE(DEV.**)",
        "AUTHLIST(PUB,SUB)",
        "XMITQ(QMDST)",
        "CONNAME(127.0.0.1(1415))",
    ] {
        assert!(shown.contains(expect), "missing {expect}:\n{shown}");
    }
}
