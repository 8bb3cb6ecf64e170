//! TLS on message channels, through the real binary and two queue managers whose certificates
//! `ferrymq mkdevcerts` issued from one CA: a sender and a receiver with SSLCIPH move messages
//! over mutual TLS; the receiver's SSLCIPH refuses a plain sender and its SSLPEER a sender whose
//! certificate does not match, each with MQ's reason in the sender's error log, and the refused
//! channel retries.

mod support;

use std::time::{Duration, Instant};

use ferrymq_types::options::{open, GetOptions, Wait};
use support::chan::{get_wait, put_to};
use support::{chan, mqsc, Home, Qm};

const WAIT: Duration = Duration::from_secs(30);

/// QM1 and QM2 with certificates from one CA (qm.ini SSL stanzas set); QM2 has the receiver
/// (attributes `rcvr`), QM1 the sender (attributes `sdr`), started.
fn tls_pair<'h>(home: &'h Home, rcvr: &str, sdr: &str) -> (Qm<'h>, Qm<'h>) {
    let qm2 = Qm::create(home, "QM2", &[]);
    let qm1 = Qm::create(home, "QM1", &[]);
    let certs = home.path().join("certs");
    for qm in ["QM1", "QM2"] {
        home.ok(&["mkdevcerts", "--dir", certs.to_str().unwrap(), "-m", qm]);
    }
    qm2.restart();
    qm1.restart();
    chan::define_receiver(home, rcvr);
    let port = qm2.port;
    chan::define_sender(home, port, sdr);
    (qm1, qm2)
}

/// The error log once it contains `needle` (bounded).
fn log_with(qm: &Qm, needle: &str) -> String {
    let t = Instant::now();
    loop {
        let log = support::error_log(&qm.dir());
        if log.contains(needle) {
            return log;
        }
        assert!(t.elapsed() < WAIT, "'{needle}' never logged:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_channel_with_sslciph_at_both_ends_moves_messages_over_mutual_tls() {
    let home = Home::new();
    let (qm1, qm2) = tls_pair(
        &home,
        "SSLCIPH(ANY_TLS12_OR_HIGHER) SSLCAUTH(REQUIRED) SSLPEER('CN=QM1')",
        "SSLCIPH(ANY_TLS12_OR_HIGHER) SSLPEER('CN=QM2')",
    );
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"sealed");
    let c2 = qm2.connect_bindings();
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"sealed");
}

#[test]
fn a_receiver_with_sslciph_refuses_a_plain_sender_with_mqrc_ssl_initialization_error() {
    let home = Home::new();
    let (qm1, _qm2) = tls_pair(&home, "SSLCIPH(ANY_TLS12_OR_HIGHER)", "");
    let log = log_with(&qm1, "is retrying");
    assert!(log.contains("2393"), "{log}");
    assert!(log.contains("requires TLS"), "{log}");
}

#[test]
fn a_receiver_whose_sslpeer_does_not_match_the_sender_refuses_it_with_mqrc_ssl_peer_name_mismatch()
{
    let home = Home::new();
    let (qm1, qm2) = tls_pair(
        &home,
        "SSLCIPH(ANY_TLS12_OR_HIGHER) SSLPEER('CN=SOMEONE.ELSE')",
        "SSLCIPH(ANY_TLS12_OR_HIGHER)",
    );
    let log = log_with(&qm1, "is retrying");
    assert!(log.contains("2398"), "{log}");
    let log2 = log_with(&qm2, "refused by SSLPEER");
    assert!(log2.contains("CN=QM1"), "{log2}");
    // The sender's own SSLPEER judges the receiver the same way.
    mqsc(
        &home,
        "QM2",
        "ALTER CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR) SSLPEER('CN=QM1')\n",
    );
    mqsc(
        &home,
        "QM1",
        "STOP CHANNEL(QM1.TO.QM2) MODE(FORCE)\nALTER CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) SSLPEER('CN=NOT.QM2')\n",
    );
    std::thread::sleep(Duration::from_millis(300));
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    log_with(&qm1, "the receiver at 127.0.0.1");
}

#[test]
fn a_receiver_with_mcauser_puts_as_that_user_and_dead_letters_what_it_may_not_put() {
    let home = Home::new();
    let qm2 = Qm::start_secure(&home, "QM2", &[]);
    mqsc(
        &home,
        "QM2",
        "DEFINE QLOCAL(ORDERS.IN)\n\
         DEFINE QLOCAL(OPEN.IN)\n\
         DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RCVR) MCAUSER('chanuser')\n\
         SET AUTHREC PROFILE('OPEN.IN') OBJTYPE(QUEUE) PRINCIPAL('chanuser') AUTHADD(PUT,SETALL)\n",
    );
    let qm1 = Qm::start(&home, "QM1", &[]);
    let port = qm2.port;
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE QREMOTE(OPEN) RNAME(OPEN.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SDR) CONNAME('127.0.0.1({port})') XMITQ(QM2) SHORTTMR(1)\n\
             START CHANNEL(QM1.TO.QM2)\n"
        ),
    );
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"not for chanuser");
    put_to(&c1, "OPEN", b"allowed");
    let c2 = qm2.connect_bindings();
    assert_eq!(get_wait(&c2, "OPEN.IN"), b"allowed");
    let h = c2
        .open("SYSTEM.DEAD.LETTER.QUEUE", open::INPUT_SHARED)
        .unwrap();
    let dead = c2
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(WAIT.as_millis() as u64),
                ..GetOptions::any()
            },
        )
        .expect("the refused message on the dead-letter queue");
    let (dlh, data) =
        ferrymq_types::dlh::DeadLetterHeader::parse(&dead.body).expect("a dead-letter header");
    assert_eq!(dlh.reason, 2035, "MQRC_NOT_AUTHORIZED");
    assert_eq!(dlh.dest_q_name, "ORDERS.IN");
    assert_eq!(data, b"not for chanuser");
    let log = log_with(&qm2, "chanuser");
    assert!(log.contains("MCAUSER"), "{log}");
}
