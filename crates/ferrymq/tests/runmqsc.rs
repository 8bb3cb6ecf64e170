//! `runmqsc` against the real binary: the seed report's queue manager configuration (Appendix B)
//! run verbatim, the objects usable by clients and durable across restarts, and the error paths
//! and exit statuses administrators rely on.

mod support;

use bytes::Bytes;
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};
use support::{free_port, Home, Qm};

/// The MQSC lines of the seed's Appendix B, with `$QMport` given and the loop expanded for
/// j = 0..=10 as its `<=` bound runs (the fixture is shared with the MQSC crate's own test).
fn appendix_b(port: u16) -> String {
    include_str!("../../admin/tests/fixtures/appendix_b.mqsc").replace("$QMport", &port.to_string())
}

#[test]
fn the_seed_appendix_b_configuration_runs_verbatim_and_its_objects_work() {
    let home = Home::new();
    // Appendix B's own commands, as written.
    home.ok(&[
        "crtmqm", "-lp", "64", "-lf", "16384", "-h", "5000", "-fs", "16", "PERF0",
    ]);
    home.ok(&[
        "setmqini",
        "-m",
        "PERF0",
        "-s",
        "TuningParameters",
        "-k",
        "DefaultPQBufferSize",
        "-v",
        "10485760",
    ]);
    home.ok(&[
        "setmqini",
        "-m",
        "PERF0",
        "-s",
        "TuningParameters",
        "-k",
        "DefaultQBufferSize",
        "-v",
        "10485760",
    ]);
    let ini = home.ok(&["dspmqini", "-m", "PERF0"]);
    for expect in [
        "LogPrimaryFiles=64",
        "LogFilePages=16384",
        "MaxHandles=5000",
        "DefaultQFileSize=16",
        "DefaultPQBufferSize=10485760",
    ] {
        assert!(ini.contains(expect), "missing {expect} in:\n{ini}");
    }
    // No listener from qm.ini (port 1414 may be taken on a shared machine): the script's
    // LISTENER(L1) is the only way in over TCP, as in the report.
    home.ok(&[
        "setmqini",
        "-m",
        "PERF0",
        "-s",
        "QueueManager",
        "-k",
        "Port",
        "-v",
        "0",
    ]);
    home.ok(&["strmqm", "PERF0"]);
    let qm = Qm {
        home: &home,
        name: "PERF0".into(),
        port: free_port(),
    };
    let out = home.run_with_input(&["runmqsc", "PERF0"], &appendix_b(qm.port));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "runmqsc output:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("38 MQSC commands read"), "{text}");

    let shown = home.run_with_input(
        &["runmqsc", "PERF0"],
        "DIS QL(REQUEST*) MAXDEPTH\nDIS QMGR MAXMSGL CHLAUTH\nDIS LSSTATUS(L1)\n",
    );
    let shown = String::from_utf8_lossy(&shown.stdout);
    for expect in [
        "QUEUE(REQUEST10)",
        "MAXDEPTH(5000)",
        "MAXMSGL(104857600)",
        "CHLAUTH(DISABLED)",
        &format!("PORT({})", qm.port),
        "STATUS(RUNNING)",
    ] {
        assert!(shown.contains(expect), "missing {expect} in:\n{shown}");
    }

    // Clients reach the queues through L1, and a 100 MB message is accepted.
    let c = qm.connect();
    let h = c
        .open("REQUEST3", open::OUTPUT | open::INPUT_SHARED)
        .unwrap();
    let big = Bytes::from(vec![5u8; 104_857_600]);
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        big,
        &PutOptions::default(),
    )
    .unwrap();
    assert_eq!(
        c.get(&h, &GetOptions::any()).unwrap().body.len(),
        104_857_600
    );
    let pm = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    c.put(
        &h,
        &pm,
        &Properties::default(),
        Bytes::from_static(b"durable"),
        &PutOptions::default(),
    )
    .unwrap();
    drop(c);

    // Definitions are in the recovery log: after SIGKILL and restart they are all there, and
    // L1 (CONTROL(QMGR)) starts with the queue manager.
    qm.kill9();
    qm.restart();
    let c = qm.connect();
    let h = c.open("REQUEST3", open::INPUT_SHARED).unwrap();
    assert_eq!(&c.get(&h, &GetOptions::any()).unwrap().body[..], b"durable");
    let again = home.run_with_input(
        &["runmqsc", "PERF0"],
        "DIS Q(REPLY10) MAXDEPTH\nDIS QMGR MAXMSGL\n",
    );
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.contains("QUEUE(REPLY10)") && again.contains("MAXMSGL(104857600)"),
        "{again}"
    );
}

#[test]
fn syntax_errors_point_at_the_token_and_set_exit_status_10() {
    let home = Home::new();
    let _qm = Qm::start(&home, "QM1", &[]);
    let script =
        "DEFINE QLOCAL(GOOD)\nDEFINE QLOCAL(BAD) MAXDEPHT(5)\nDEFINE QLOCAL(WORSE) MAXDEPTH(-3)\n";
    let out = home.run_with_input(&["runmqsc", "QM1"], script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(10), "{text}");
    assert!(
        text.contains("MAXDEPHT"),
        "the bad attribute is named:\n{text}"
    );
    assert!(text.contains('^'), "a pointer marks the token:\n{text}");
    assert!(text.contains("3 MQSC commands read"), "{text}");
    let shown = home.run_with_input(&["runmqsc", "QM1"], "DIS Q(GOOD)\nDIS Q(BAD)\n");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("QUEUE(GOOD)"), "{shown}");
    assert!(
        shown.contains("QUEUE(BAD) is not defined"),
        "a command with a syntax error changes nothing:\n{shown}"
    );
}

/// MQSC commands have at most 32,762 characters (MQ's bound): a longer one, on one line or
/// continued over many, is a syntax error, is not run, and does not stop the script; a line of
/// megabytes is dropped as it is read, not echoed back.
#[test]
fn an_overlong_command_is_refused_unrun_and_the_script_goes_on() {
    let home = Home::new();
    let _qm = Qm::start(&home, "QM5", &[]);
    let mut script = format!("DEFINE QLOCAL({})\n", "A".repeat(5_000_000));
    // Continued past the bound: 52 KB (held, then refused) and 260 KB (dropped as it is read).
    for (name, lines) in [("LONG.CONT", 4_000), ("LONGER.CONT", 20_000)] {
        script.push_str(&format!("DEFINE QLOCAL({name}) +\n"));
        script.push_str(&"DESCR('x') +\n".repeat(lines));
        script.push_str("MAXDEPTH(5)\n");
    }
    script.push_str("DEFINE QLOCAL(AFTER.LONG)\n");
    let out = home.run_with_input(&["runmqsc", "QM5"], &script);
    let text = String::from_utf8_lossy(&out.stdout);
    let head: String = text.chars().take(3000).collect();
    assert_eq!(out.status.code(), Some(10), "{head}");
    assert_eq!(
        text.matches("an MQSC command has at most 32762 characters")
            .count(),
        3,
        "{head}"
    );
    assert!(
        text.contains("the command from line 1 is 5000015 bytes long"),
        "{head}"
    );
    assert!(
        text.contains("4 MQSC commands read. 3 had syntax errors. 0 failed."),
        "{head}"
    );
    assert!(
        text.len() < 1_000_000,
        "the 5 MB line is not echoed: {} bytes of output",
        text.len()
    );
    let shown = home.run_with_input(&["runmqsc", "QM5"], "DIS Q(*.CONT)\nDIS Q(AFTER.LONG)\n");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("QUEUE(AFTER.LONG)"), "{shown}");
    assert!(!shown.contains("QUEUE(LONG.CONT)"), "{shown}");
    assert!(!shown.contains("QUEUE(LONGER.CONT)"), "{shown}");
}

#[test]
fn a_script_where_nothing_works_exits_20_and_failures_name_the_object() {
    let home = Home::new();
    let _qm = Qm::start(&home, "QM2", &[]);
    let out = home.run_with_input(
        &["runmqsc", "QM2"],
        "ALTER QLOCAL(NOT.THERE) MAXDEPTH(10)\nDELETE QLOCAL(ALSO.MISSING)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(20), "{text}");
    assert!(
        text.contains("NOT.THERE") && text.contains("ALSO.MISSING"),
        "{text}"
    );
}

#[test]
fn deleting_a_queue_in_use_fails_and_verify_mode_changes_nothing() {
    let home = Home::new();
    let qm = Qm::start(&home, "QM3", &[]);
    home.run_with_input(&["runmqsc", "QM3"], "DEFINE QLOCAL(BUSY)\n");
    let c = qm.connect();
    let _h = c.open("BUSY", open::INPUT_SHARED).unwrap();
    let out = home.run_with_input(&["runmqsc", "QM3"], "DELETE QLOCAL(BUSY)\n");
    assert_eq!(out.status.code(), Some(20));
    assert!(String::from_utf8_lossy(&out.stdout).contains("BUSY"));
    let out = home.run_with_input(&["runmqsc", "-v", "QM3"], "DEFINE QLOCAL(ONLY.VERIFIED)\n");
    assert_eq!(out.status.code(), Some(0));
    let shown = home.run_with_input(&["runmqsc", "QM3"], "DIS Q(ONLY.*)\n");
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("QUEUE(ONLY.VERIFIED)"));
}

#[test]
fn runmqsc_in_client_mode_administers_over_tcp() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QM4", &[]);
    let out = home.run_with_input(
        &["runmqsc", "-c", "--conn", &qm.conname(), "-e", "QM4"],
        "DEFINE QLOCAL(REMOTE.ADMIN)\nDIS QSTATUS(REMOTE.ADMIN)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("CURDEPTH(0)"), "{text}");
    assert!(
        !text.contains("1 : DEFINE"),
        "-e suppresses the echo:\n{text}"
    );
}

/// Runs MQSC in bindings mode; returns (exit status, stdout).
fn mqsc(home: &Home, qm: &str, script: &str) -> (i32, String) {
    let out = home.run_with_input(&["runmqsc", "-e", qm], script);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The value of `NAME(value)` in DISPLAY output, the first time it appears.
fn attr(text: &str, name: &str) -> String {
    let key = format!("{name}(");
    let start = text
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        + key.len();
    let end = text[start..].find(')').unwrap() + start;
    text[start..end].to_string()
}

fn is_mq_date(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && s.chars().filter(char::is_ascii_digit).count() == 8
}

fn is_mq_time(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() == 8
        && b[2] == b'.'
        && b[5] == b'.'
        && s.chars().filter(char::is_ascii_digit).count() == 6
}

/// The wall clock's second of the day, as MQ's HH.MM.SS (UTC).
fn clock_time() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 86_400;
    format!("{:02}.{:02}.{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Waits (bounded) until the wall clock shows a second other than `t`, so that a time recorded
/// from now on differs from one recorded at `t`.
fn wait_past(t: &str) {
    let start = std::time::Instant::now();
    while clock_time() == t {
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

const EVERY_OBJECT: &[(&str, &str)] = &[
    ("QLOCAL(D.LQ)", "DEFINE QLOCAL(D.LQ) MAXDEPTH(10)"),
    ("QALIAS(D.AQ)", "DEFINE QALIAS(D.AQ) TARGET(D.LQ)"),
    ("QMODEL(D.MQ)", "DEFINE QMODEL(D.MQ) DEFTYPE(PERMDYN)"),
    (
        "QREMOTE(D.RQ)",
        "DEFINE QREMOTE(D.RQ) RNAME(X) RQMNAME(QM9) XMITQ(D.LQ)",
    ),
    (
        "CHANNEL(D.SVRCONN)",
        "DEFINE CHANNEL(D.SVRCONN) CHLTYPE(SVRCONN)",
    ),
    ("LISTENER(D.L)", "DEFINE LISTENER(D.L) TRPTYPE(TCP) PORT(0)"),
    ("AUTHINFO(D.AI)", "DEFINE AUTHINFO(D.AI) AUTHTYPE(IDPWOS)"),
];

/// Each object's CRDATE, CRTIME, ALTDATE and ALTTIME, and the queue manager's.
fn object_times(home: &Home, qm: &str) -> Vec<(String, [String; 4])> {
    let mut out = Vec::new();
    let mut objects: Vec<&str> = EVERY_OBJECT.iter().map(|(o, _)| *o).collect();
    objects.push("QMGR");
    for o in objects {
        let (code, text) = mqsc(
            home,
            qm,
            &format!("DISPLAY {o} CRDATE CRTIME ALTDATE ALTTIME\n"),
        );
        assert_eq!(code, 0, "{text}");
        let t = ["CRDATE", "CRTIME", "ALTDATE", "ALTTIME"].map(|n| attr(&text, n));
        assert!(is_mq_date(&t[0]) && is_mq_date(&t[2]), "{o}: {t:?}");
        assert!(is_mq_time(&t[1]) && is_mq_time(&t[3]), "{o}: {t:?}");
        out.push((o.to_string(), t));
    }
    out
}

#[test]
fn objects_and_the_queue_manager_keep_their_creation_and_alteration_times_across_kill_9() {
    let home = Home::new();
    let qm = Qm::start(&home, "DATES", &[]);
    let (code, text) = mqsc(&home, "DATES", "DISPLAY QMGR QMID CMDLEVEL\n");
    assert_eq!(code, 0, "{text}");
    let qmid = attr(&text, "QMID");
    assert!(
        qmid.starts_with("DATES_") && qmid.len() > "DATES_".len(),
        "{text}"
    );
    assert_eq!(attr(&text, "CMDLEVEL"), "940");

    let script: String = EVERY_OBJECT.iter().map(|(_, d)| format!("{d}\n")).collect();
    let (code, text) = mqsc(&home, "DATES", &script);
    assert_eq!(code, 0, "{text}");
    let defined = object_times(&home, "DATES");
    for (o, [crd, crt, altd, altt]) in &defined {
        if o != "QMGR" {
            assert_eq!((crd, crt), (altd, altt), "{o}: defined, never altered");
        }
    }

    // An ALTER a second later moves ALTDATE/ALTTIME, never CRDATE/CRTIME. (The script's
    // definitions may span a second boundary: wait past the second they all ended in.)
    wait_past(&clock_time());
    let alters = "ALTER QLOCAL(D.LQ) MAXDEPTH(11)\nALTER QALIAS(D.AQ) DEFPRTY(3)\n\
                  ALTER QMODEL(D.MQ) MAXDEPTH(12)\nALTER QREMOTE(D.RQ) RNAME(Y)\n\
                  ALTER CHANNEL(D.SVRCONN) CHLTYPE(SVRCONN) DESCR('x')\n\
                  ALTER LISTENER(D.L) PORT(0) DESCR('x')\nALTER AUTHINFO(D.AI) DESCR('x')\n\
                  ALTER QMGR DESCR('altered')\n";
    let (code, text) = mqsc(&home, "DATES", alters);
    assert_eq!(code, 0, "{text}");
    let altered = object_times(&home, "DATES");
    for ((o, before), (_, after)) in defined.iter().zip(&altered) {
        assert_eq!(before[..2], after[..2], "{o}: the creation time stays");
        assert_ne!(before[2..], after[2..], "{o}: ALTER records a new time");
    }

    // A permanent dynamic queue records when MQOPEN created it.
    let c = qm.connect_bindings();
    let h = c.open_dynamic("D.MQ", "D.DYN.*", open::OUTPUT).unwrap();
    let dyn_name = h.name.clone();
    c.close(&h, ferrymq_types::options::close::NONE).unwrap();
    drop(c);
    let dyn_times = |home: &Home| {
        let (code, text) = mqsc(
            home,
            "DATES",
            &format!("DISPLAY QLOCAL({dyn_name}) CRDATE CRTIME\n"),
        );
        assert_eq!(code, 0, "{text}");
        (attr(&text, "CRDATE"), attr(&text, "CRTIME"))
    };
    let created = dyn_times(&home);
    assert!(
        is_mq_date(&created.0) && is_mq_time(&created.1),
        "{created:?}"
    );

    // A crash right after the changes: replay restores the recorded times, not the clock's
    // time at replay; so does the checkpoint a controlled end writes.
    wait_past(&clock_time());
    qm.kill9();
    qm.restart();
    assert_eq!(object_times(&home, "DATES"), altered, "after kill -9");
    assert_eq!(dyn_times(&home), created, "the dynamic queue after kill -9");
    qm.end();
    qm.restart();
    assert_eq!(object_times(&home, "DATES"), altered, "after a checkpoint");
    let (_, text) = mqsc(&home, "DATES", "DISPLAY QMGR QMID\n");
    assert_eq!(attr(&text, "QMID"), qmid, "the QMID is fixed at crtmqm");

    // Another queue manager of the same name (another home) has another QMID.
    let home2 = Home::new();
    let _qm2 = Qm::start(&home2, "DATES", &[]);
    let (_, text) = mqsc(&home2, "DATES", "DISPLAY QMGR QMID\n");
    assert_ne!(attr(&text, "QMID"), qmid);
}

#[test]
fn set_chlauth_and_authrec_are_checked_stored_durably_and_shown() {
    let home = Home::new();
    let qm = Qm::start(&home, "SECREC", &[]);
    let (code, text) = mqsc(
        &home,
        "SECREC",
        "SET CHLAUTH('APP.*') TYPE(ADDRESSMAP) ADDRESS('10.1.*') USERSRC(CHANNEL) DESCR('lan')\n\
         SET CHLAUTH('*') TYPE(BLOCKUSER) USERLIST('nobody','*MQADMIN')\n\
         SET CHLAUTH('APP.SVRCONN') TYPE(USERMAP) CLNTUSER('alice') USERSRC(MAP) MCAUSER('app')\n\
         SET CHLAUTH('*') TYPE(BLOCKADDR) ADDRLIST('192.0.2.*')\n\
         SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(PUT,GET,INQ,BROWSE)\n\
         SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHRMV(BROWSE)\n\
         SET AUTHREC OBJTYPE(QMGR) GROUP('apps') AUTHADD(CONNECT,INQ)\n",
    );
    assert_eq!(code, 0, "{text}");
    // Both kinds of record are enforced (tests/security_oam.rs, tests/security_conn.rs): no
    // reply says otherwise.
    assert_eq!(
        text.matches("does not enforce them yet").count(),
        0,
        "no reply says a record is not enforced:\n{text}"
    );

    // Wrong syntax is a clear MQSC error naming what is wrong.
    for (bad, says) in [
        ("SET CHLAUTH(X) ADDRESS('1.2.3.4')", "needs TYPE"),
        (
            "SET CHLAUTH(X) TYPE(ADDRESSMAP) USERSRC(CHANNEL)",
            "needs ADDRESS",
        ),
        (
            "SET CHLAUTH(X) TYPE(BLOCKUSER) ADDRESS('1')",
            "ADDRESS is not valid with TYPE(BLOCKUSER)",
        ),
        ("SET CHLAUTH(X) TYPE(USERMAP) CLNTUSER('a')", "MCAUSER"),
        (
            "SET CHLAUTH(X) TYPE(BLOCKADDR) ADDRLIST('1')",
            "CHLAUTH('*')",
        ),
        (
            "SET CHLAUTH(X) TYPE(ADDRESSMAP) ADDRESS('1') ACTION(MAYBE)",
            "ACTION must be one of",
        ),
        (
            "SET AUTHREC PROFILE(Q) OBJTYPE(QUEUE) PRINCIPAL(a) AUTHADD(EAT)",
            "not an authority",
        ),
        (
            "SET AUTHREC PROFILE(Q) OBJTYPE(QUEUE) AUTHADD(GET)",
            "PRINCIPAL",
        ),
        (
            "SET AUTHREC OBJTYPE(QUEUE) PRINCIPAL(a) AUTHADD(GET)",
            "needs PROFILE",
        ),
        (
            "SET AUTHREC PROFILE(Q) OBJTYPE(BOX) PRINCIPAL(a) AUTHADD(GET)",
            "OBJTYPE must be one of",
        ),
        ("SET QLOCAL(X)", "SET CHLAUTH and SET AUTHREC"),
    ] {
        let (code, text) = mqsc(&home, "SECREC", &format!("{bad}\n"));
        assert_eq!(code, 20, "{bad}:\n{text}");
        assert!(
            text.contains("FMQ8405E") && text.contains(says),
            "{bad}: expected '{says}':\n{text}"
        );
    }
    // An existing record is not added twice; REPLACE changes it.
    let (code, text) = mqsc(
        &home,
        "SECREC",
        "SET CHLAUTH('*') TYPE(BLOCKUSER) USERLIST('x') ACTION(ADD)\n",
    );
    assert_eq!(code, 20, "{text}");
    assert!(text.contains("MQRC_OBJECT_ALREADY_EXISTS"), "{text}");

    // Durable: a crash right after the changes keeps them.
    qm.kill9();
    qm.restart();
    let (code, text) = mqsc(&home, "SECREC", "DISPLAY CHLAUTH(*)\nDISPLAY AUTHREC\n");
    assert_eq!(code, 0, "{text}");
    for shown in [
        "CHLAUTH(APP.*)",
        "ADDRESS(10.1.*)",
        "USERSRC(CHANNEL)",
        "DESCR(lan)",
        "USERLIST('nobody','*MQADMIN')",
        "CLNTUSER(alice)",
        "MCAUSER(app)",
        "ADDRLIST('192.0.2.*')",
        "PROFILE(APP.**)",
        "AUTHLIST(GET,INQ,PUT)",
        "PROFILE(SECREC)",
        "ENTITY(apps)",
        "ENTTYPE(GROUP)",
        "AUTHLIST(CONNECT,INQ)",
    ] {
        assert!(text.contains(shown), "missing {shown}:\n{text}");
    }
    let (_, text) = mqsc(
        &home,
        "SECREC",
        "DISPLAY CHLAUTH(APP.SVRCONN) TYPE(USERMAP)\n",
    );
    assert_eq!(text.matches("FMQ8878I").count(), 1, "{text}");

    // REMOVE, REMOVEALL and DELETE AUTHREC take them away again.
    let (code, text) = mqsc(
        &home,
        "SECREC",
        "SET CHLAUTH('APP.*') TYPE(ADDRESSMAP) ADDRESS('10.1.*') ACTION(REMOVE)\n\
         SET CHLAUTH('*') TYPE(BLOCKUSER) ACTION(REMOVEALL)\n\
         DELETE AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app')\n\
         DELETE AUTHREC OBJTYPE(QMGR) GROUP('apps')\n",
    );
    assert_eq!(code, 0, "{text}");
    let (_, text) = mqsc(&home, "SECREC", "DISPLAY CHLAUTH(*)\nDISPLAY AUTHREC\n");
    assert!(
        !text.contains("APP.*") && !text.contains("BLOCKUSER"),
        "{text}"
    );
    assert!(text.contains("No authority records matched"), "{text}");
    assert!(
        text.contains("TYPE(USERMAP)") && text.contains("TYPE(BLOCKADDR)"),
        "{text}"
    );
}

/// Copies the fixture queue manager `name` into `home`, padding its log files back to their
/// preallocated size (the fixture stores them without trailing zeros).
fn install_fixture(home: &Home, fixture: &str, name: &str, log_file_bytes: u64) {
    fn copy(from: &std::path::Path, to: &std::path::Path, log_file_bytes: u64) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target, log_file_bytes);
            } else if e.file_name() != "README.md" {
                std::fs::copy(e.path(), &target).unwrap();
                if target.extension().is_some_and(|x| x == "LOG") {
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(&target)
                        .unwrap();
                    f.set_len(log_file_bytes).unwrap();
                }
            }
        }
    }
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    copy(&from, &home.path().join("qmgrs").join(name), log_file_bytes);
}

#[test]
fn a_queue_manager_logged_before_object_times_starts_with_blank_times_and_gets_a_qmid() {
    let home = Home::new();
    install_fixture(&home, "qm-before-object-times", "OLDQM", 64 * 4096);
    let qm = Qm {
        home: &home,
        name: "OLDQM".into(),
        port: 0,
    };
    qm.restart();
    let (code, text) = mqsc(
        &home,
        "OLDQM",
        "DISPLAY QLOCAL(OLD.Q) MAXDEPTH DESCR CRDATE ALTDATE\nDISPLAY QALIAS(OLD.ALIAS)\n\
         DISPLAY CHANNEL(OLD.SVRCONN)\nDISPLAY LISTENER(OLD.L)\nDISPLAY AUTHINFO(OLD.AI)\n\
         DISPLAY QMGR DESCR QMID CRDATE\n",
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("MAXDEPTH(42)"), "{text}");
    assert!(
        text.contains("DESCR(written before object times)"),
        "{text}"
    );
    assert!(
        text.contains("CRDATE( )") && text.contains("ALTDATE( )"),
        "{text}"
    );
    assert!(text.contains("DESCR(old queue manager)"), "{text}");
    // Its first start under this version gave it an identity and a creation date.
    let qmid = attr(&text[text.find("FMQ8408I").unwrap()..], "QMID");
    assert!(qmid.starts_with("OLDQM_"), "{text}");
    assert_eq!(
        home.ok(&["get", "OLDQM", "OLD.Q"]),
        "hello-from-before\n",
        "the message logged before the change is still there"
    );
    let (code, text) = mqsc(
        &home,
        "OLDQM",
        "ALTER QLOCAL(OLD.Q) MAXDEPTH(43)\nDISPLAY QLOCAL(OLD.Q) CRDATE ALTDATE\n",
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("CRDATE( )") && is_mq_date(&attr(&text, "ALTDATE")),
        "{text}"
    );
    qm.kill9();
    qm.restart();
    let (_, text) = mqsc(&home, "OLDQM", "DISPLAY QMGR QMID\n");
    assert_eq!(attr(&text, "QMID"), qmid, "the identity given once is kept");
}

#[test]
fn a_queue_manager_created_before_the_security_defaults_keeps_admitting_its_clients() {
    let home = Home::new();
    install_fixture(&home, "qm-before-object-times", "OLDQM", 64 * 4096);
    let port = free_port();
    let qm = Qm {
        home: &home,
        name: "OLDQM".into(),
        port,
    };
    qm.set_ini("QueueManager", "Port", &port.to_string());
    qm.restart();
    // Its qm.ini names neither Security:ConnAuth nor Channels:RemoteAdmin, and its log holds no
    // back-stop rule: a client with no user or password still comes in on SYSTEM.DEF.SVRCONN.
    let c = qm.connect();
    let h = c.open("OLD.Q", open::INPUT_SHARED).unwrap();
    let m = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(&m.body[..], b"hello-from-before");
    c.disconnect().unwrap();
}
