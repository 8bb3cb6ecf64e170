//! Administration over TCP is refused unless qm.ini allows it (`Channels:RemoteAdmin=yes`):
//! `runmqsc -c` and the admin verb of any client connection get MQRC_NOT_AUTHORIZED (2035) with
//! the switch named; MQI work over TCP and runmqsc in bindings mode are unaffected.

mod support;

use ferrymq_types::Reason;
use support::{Home, Qm};

fn runmqsc_c(home: &Home, qm: &Qm, script: &str) -> (Option<i32>, String) {
    let out = home.run_with_input(
        &["runmqsc", "-c", "--conn", &qm.conname(), &qm.name],
        script,
    );
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
fn mqsc_over_tcp_is_refused_by_default_and_allowed_by_the_switch() {
    let home = Home::new();
    let qm = Qm::start(&home, "QRADM", &[]);

    let (code, out) = runmqsc_c(&home, &qm, "DEFINE QLOCAL(FROM.FAR)\nDISPLAY QMGR\n");
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}:\n{out}");
    assert!(out.contains("MQRC_NOT_AUTHORIZED (2035)"), "{out}");
    assert!(out.contains("Channels:RemoteAdmin=authenticated"), "{out}");
    assert!(!out.contains("defined."), "{out}");

    // The admin verb of an ordinary client connection is refused the same way; the connection
    // itself and MQI work over it are not affected.
    let c = qm.connect();
    let e = c.admin("MQSC DISPLAY QMGR").unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{e}");
    let e = c.admin("SHUTDOWN IMMEDIATE").unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{e}");
    let h = c
        .open(
            "SYSTEM.DEFAULT.LOCAL.QUEUE",
            ferrymq_types::options::open::OUTPUT,
        )
        .expect("MQI over TCP still works");
    c.close(&h, 0).unwrap();
    c.disconnect().unwrap();
    // Each refused connection is reported once in the error log (runmqsc's and this one).
    let log = support::error_log(&qm.dir());
    assert_eq!(log.matches("FMQ3007W").count(), 2, "{log}");

    // Bindings mode is unchanged, and nothing was defined over TCP.
    let out = home.run_with_input(
        &["runmqsc", "QRADM"],
        "DISPLAY QLOCAL(FROM.FAR)\nDEFINE QLOCAL(FROM.NEAR)\n",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("QLOCAL(FROM.NEAR) defined."), "{text}");
    assert!(!text.contains("QUEUE(FROM.FAR)"), "{text}");
    assert_eq!(out.status.code(), Some(10), "one of two failed:\n{text}");

    // With the switch, runmqsc -c works.
    qm.end();
    qm.set_ini("Channels", "RemoteAdmin", "yes");
    qm.restart();
    let (code, out) = runmqsc_c(
        &home,
        &qm,
        "DEFINE QLOCAL(FROM.FAR)\nDISPLAY QLOCAL(FROM.NEAR)\n",
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("QLOCAL(FROM.FAR) defined."), "{out}");
    assert!(out.contains("QUEUE(FROM.NEAR)"), "{out}");
    // Control commands stay local whatever the switch says.
    let c = qm.connect();
    let e = c.admin("SHUTDOWN IMMEDIATE").unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{e}");
    c.disconnect().unwrap();
}

#[test]
fn a_bad_remote_admin_value_is_refused_with_the_key_named() {
    let home = Home::new();
    let qm = Qm::create(&home, "QRBAD", &[]);
    let out = home.run(&[
        "setmqini",
        "-m",
        &qm.name,
        "-s",
        "Channels",
        "-k",
        "RemoteAdmin",
        "-v",
        "maybe",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("Channels:RemoteAdmin=maybe"), "{text}");
}
