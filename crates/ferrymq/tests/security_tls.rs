//! TLS on client connections, end to end: certificates from `ferrymq mkdevcerts`, the queue
//! manager's one port serving plain and TLS sockets, each channel's SSLCIPH, SSLCAUTH and SSLPEER
//! deciding at connect, what the client is told and what the error log says, and REFRESH
//! SECURITY TYPE(SSL) serving a replaced certificate to new sockets without a restart.

mod support;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, MqError, TlsOptions};
use ferrymq_types::options::{open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Properties, Reason};
use support::{Home, Qm};

const SVRCONN: &str = "SYSTEM.DEF.SVRCONN";

fn mqsc(c: &Connection, cmd: &str) -> String {
    c.admin(&format!("MQSC {cmd}"))
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// TLS options trusting `certs/ca.pem`, presenting `certs/<client>.pem` when given.
fn tls(certs: &Path, client: Option<&str>) -> TlsOptions {
    TlsOptions {
        ca_file: certs.join("ca.pem"),
        cert_file: client.map(|c| certs.join(format!("{c}.pem"))),
        key_file: client.map(|c| certs.join(format!("{c}.key"))),
        ..Default::default()
    }
}

fn connect(qm: &Qm, tls: Option<TlsOptions>) -> Result<Connection, MqError> {
    let mut o = ConnectOptions::client(&qm.name, &qm.conname()).unwrap();
    o.tls = tls;
    Connection::connect(o)
}

fn refused(qm: &Qm, tls: Option<TlsOptions>) -> MqError {
    match connect(qm, tls) {
        Ok(_) => panic!("the connection was accepted"),
        Err(e) => e,
    }
}

/// A queue manager whose qm.ini SSL stanza names certificates made by mkdevcerts in
/// `<home>/certs` (clients `app` and `other`), started with them.
fn tls_qm<'h>(home: &'h Home, name: &str) -> (Qm<'h>, PathBuf) {
    let qm = Qm::create(home, name, &[]);
    let certs = home.path().join("certs");
    let d = certs.to_str().unwrap();
    home.ok(&[
        "mkdevcerts",
        "--dir",
        d,
        "-m",
        name,
        "--client",
        "app",
        "--client",
        "other",
    ]);
    qm.restart();
    (qm, certs)
}

/// The error log once it contains `needle` (or after 20 s): a refusal may be logged after the
/// client has seen it.
fn log_with(qm: &Qm, needle: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let log = support::error_log(&qm.dir());
        if log.contains(needle) || std::time::Instant::now() > deadline {
            return log;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn put_and_get(c: &Connection, body: &str) {
    let h = c.open("TLS.Q", open::OUTPUT | open::INPUT_SHARED).unwrap();
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from(body.to_string()),
        &PutOptions::default(),
    )
    .unwrap();
    let m = c.get(&h, &GetOptions::any()).unwrap();
    assert_eq!(m.body.as_ref(), body.as_bytes());
}

#[test]
fn a_tls_client_puts_and_gets_and_each_channel_rule_refuses_whom_it_should() {
    let home = Home::new();
    let (qm, certs) = tls_qm(&home, "QTLS1");
    let admin = qm.connect_bindings();
    mqsc(&admin, "DEFINE QLOCAL(TLS.Q)");
    let mode = |f: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(certs.join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!((mode("QTLS1.key"), mode("app.key")), (0o600, 0o600));

    // A channel without SSLCIPH takes TLS and plain sockets alike.
    let c = connect(&qm, Some(tls(&certs, None))).expect("TLS connect");
    let s = c.tls_session().expect("the socket is TLS");
    let server = s.peer.expect("the queue manager's certificate");
    assert_eq!(server.subject, "CN=QTLS1,OU=queue managers,O=FerryMQ,C=GB");
    put_and_get(&c, "over TLS");
    put_and_get(&connect(&qm, None).expect("plain connect"), "plain");
    // DISPLAY CHSTATUS shows the TLS socket's suite.
    let st = mqsc(&admin, "DISPLAY CHSTATUS(*)");
    assert!(st.contains("SSLCIPH(TLS_"), "{st}");
    drop(c);

    // SSLCIPH: TLS is required, and the suite must be one it allows.
    mqsc(
        &admin,
        &format!("ALTER CHANNEL({SVRCONN}) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(OPTIONAL)"),
    );
    let e = refused(&qm, None);
    assert_eq!(e.reason, Reason::SSL_INITIALIZATION_ERROR, "{e}");
    assert!(e.message.contains("SSLCIPH"), "{e}");
    put_and_get(
        &connect(&qm, Some(tls(&certs, None))).unwrap(),
        "anonymous TLS",
    );
    mqsc(
        &admin,
        &format!("ALTER CHANNEL({SVRCONN}) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12)"),
    );
    let e = refused(&qm, Some(tls(&certs, None)));
    assert_eq!(e.reason, Reason::SSL_INITIALIZATION_ERROR, "{e}");
    let tls12 = TlsOptions {
        cipher: Some("ECDHE_ECDSA_AES_128_GCM_SHA256".into()),
        ..tls(&certs, None)
    };
    let c = connect(&qm, Some(tls12)).expect("a TLS 1.2 suite on an ANY_TLS12 channel");
    assert_eq!(
        c.tls_session().unwrap().cipher_name(),
        "ECDHE_ECDSA_AES_128_GCM_SHA256"
    );
    drop(c);

    // SSLCAUTH(REQUIRED): a client certificate is needed.
    mqsc(
        &admin,
        &format!("ALTER CHANNEL({SVRCONN}) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED)"),
    );
    let e = refused(&qm, Some(tls(&certs, None)));
    assert_eq!(e.reason, Reason::SSL_INITIALIZATION_ERROR, "{e}");
    assert!(e.message.contains("SSLCAUTH"), "{e}");
    put_and_get(
        &connect(&qm, Some(tls(&certs, Some("app")))).unwrap(),
        "with a certificate",
    );

    // SSLPEER: the client certificate's DN must match.
    mqsc(
        &admin,
        &format!("ALTER CHANNEL({SVRCONN}) CHLTYPE(SVRCONN) SSLPEER('CN=app,O=FerryMQ')"),
    );
    let e = refused(&qm, Some(tls(&certs, Some("other"))));
    assert_eq!(e.reason, Reason::SSL_PEER_NAME_MISMATCH, "{e}");
    put_and_get(
        &connect(&qm, Some(tls(&certs, Some("app")))).unwrap(),
        "app",
    );

    // A certificate named CN=app by another CA does not verify.
    let foreign = home.path().join("foreign");
    home.ok(&[
        "mkdevcerts",
        "--dir",
        foreign.to_str().unwrap(),
        "--client",
        "app",
    ]);
    let impostor = TlsOptions {
        cert_file: Some(foreign.join("app.pem")),
        key_file: Some(foreign.join("app.key")),
        ..tls(&certs, None)
    };
    let e = refused(&qm, Some(impostor));
    assert_eq!(e.reason, Reason::SSL_INITIALIZATION_ERROR, "{e}");

    // The error log says which channel refused, by which rule, and whom. The handshake failure
    // is logged once the server has sent its alert, so possibly after the client saw it.
    let log = log_with(&qm, "TLS handshake with");
    for needle in [
        "channel SYSTEM.DEF.SVRCONN: SSLCIPH(ANY_TLS12_OR_HIGHER) requires TLS",
        "refused by SSLCAUTH",
        "refused by SSLPEER",
        "CN=other,OU=clients,O=FerryMQ,C=GB",
        "TLS handshake with 127.0.0.1 failed",
    ] {
        assert!(log.contains(needle), "error log lacks {needle:?}:\n{log}");
    }
}

#[test]
fn refresh_security_serves_a_replaced_certificate_to_new_sockets_without_a_restart() {
    let home = Home::new();
    let (qm, certs) = tls_qm(&home, "QTLS2");
    let admin = qm.connect_bindings();
    mqsc(&admin, "DEFINE QLOCAL(TLS.Q)");
    let serial = |c: &Connection| c.tls_session().unwrap().peer.unwrap().serial;
    let before = connect(&qm, Some(tls(&certs, None))).unwrap();
    let old = serial(&before);

    // A new certificate from the same CA (a new key, so a new serial number).
    let d = certs.to_str().unwrap();
    home.ok(&[
        "mkdevcerts",
        "--dir",
        d,
        "-m",
        "QTLS2",
        "--host",
        "mq.example",
    ]);
    let c = connect(&qm, Some(tls(&certs, None))).unwrap();
    assert_eq!(serial(&c), old, "nothing changes before the refresh");

    let out = mqsc(&admin, "REFRESH SECURITY TYPE(SSL)");
    assert!(out.contains("QTLS2"), "{out}");
    let after = connect(&qm, Some(tls(&certs, None))).unwrap();
    let new = serial(&after);
    assert_ne!(
        new, old,
        "a socket accepted after the refresh gets the new certificate"
    );
    // Sockets open before it carry on.
    put_and_get(&before, "still here");

    // A refresh that fails keeps the repository in force and says why.
    std::fs::write(certs.join("QTLS2.key"), "not a key\n").unwrap();
    let said = match admin.admin("MQSC REFRESH SECURITY TYPE(SSL)") {
        Ok(text) => text,
        Err(e) => e.to_string(),
    };
    assert!(
        said.contains("QTLS2.key") && said.contains("stays in force"),
        "{said}"
    );
    let c = connect(&qm, Some(tls(&certs, None))).unwrap();
    assert_eq!(serial(&c), new);
    put_and_get(&c, "kept");
}

#[test]
fn a_tls_socket_is_closed_and_logged_when_no_key_repository_is_configured() {
    let home = Home::new();
    let qm = Qm::start(&home, "QTLS3", &[]);
    let certs = home.path().join("certs");
    home.ok(&["mkdevcerts", "--dir", certs.to_str().unwrap()]);
    let e = refused(&qm, Some(tls(&certs, None)));
    assert_eq!(e.reason, Reason::SSL_INITIALIZATION_ERROR, "{e}");
    let log = log_with(&qm, "no TLS key repository");
    assert!(log.contains("no TLS key repository"), "{log}");
    // The same port still serves plain sockets.
    connect(&qm, None).expect("plain connect");
}

#[test]
fn on_a_secure_queue_manager_a_certificate_mapped_by_sslpeermap_stands_in_for_the_password() {
    let home = Home::new();
    let qm = Qm::start_secure(&home, "QTLS4", &[]);
    let certs = home.path().join("certs");
    home.ok(&[
        "mkdevcerts",
        "--dir",
        certs.to_str().unwrap(),
        "-m",
        "QTLS4",
        "--client",
        "app",
        "--client",
        "other",
    ]);
    qm.end();
    qm.restart();
    let admin = qm.connect_bindings();
    for cmd in [
        "DEFINE QLOCAL(TLS.Q)",
        "DEFINE CHANNEL(APP.TLS) CHLTYPE(SVRCONN) SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED)",
        "SET CHLAUTH('APP.TLS') TYPE(SSLPEERMAP) SSLPEER('CN=app') USERSRC(MAP) MCAUSER('appuser')",
        "SET AUTHREC OBJTYPE(QMGR) PRINCIPAL('appuser') AUTHADD(CONNECT)",
        "SET AUTHREC PROFILE(TLS.Q) OBJTYPE(QUEUE) PRINCIPAL('appuser') AUTHADD(PUT,GET)",
    ] {
        mqsc(&admin, cmd);
    }
    let on_channel = |client: Option<&str>| {
        let mut o = ConnectOptions::client(&qm.name, &qm.conname()).unwrap();
        o.channel = "APP.TLS".into();
        o.tls = Some(tls(&certs, client));
        Connection::connect(o)
    };
    // The default AUTHINFO wants a password (CHCKCLNT(REQUIRED)); the verified certificate that
    // the SSLPEERMAP rule maps takes its place, and the connection runs as the mapped user.
    let c = on_channel(Some("app")).expect("the mapped certificate authenticates");
    put_and_get(&c, "by certificate");
    let out = mqsc(&admin, "DISPLAY CONN(*) WHERE(APPLTAG NE ' ') USERID");
    assert!(out.contains("appuser"), "{out}");
    drop(c);
    // A certificate no rule maps is no authentication: without a password, refused.
    let e = on_channel(Some("other")).map(|_| ()).unwrap_err();
    assert_eq!(e.reason, Reason::NOT_AUTHORIZED, "{e}");
    assert!(e.message.contains("password"), "{e}");
}
