//! Mutual TLS on the links between a queue manager's instances, with real processes and
//! certificates from `ferrymq mkdevcerts`: an HA group whose replication links are TLS elects,
//! replicates and fails over without losing an acknowledged message; an instance whose
//! certificate comes from another CA cannot join (the group carries on with the two others, the
//! outsider never becomes active nor receives an entry, and a good instance's error log names
//! the refusal); a DR primary streams to a secondary with the right certificate and refuses one
//! with a wrong certificate, which receives nothing; REFRESH SECURITY TYPE(SSL) reaches the DR
//! link without a restart.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use support::ha::{HaGroup, NAMES};
use support::{free_port, Home, Qm};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";
/// What an instance's certificate must match to be taken as an instance (`mkdevcerts` puts
/// queue managers' certificates in this unit, clients' in another).
const PEER: &str = "OU=queue managers";

fn persistent() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

fn wait_until(what: &str, limit: Duration, logs: impl Fn() -> String, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out: {what}\n{}", logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issues queue manager `qm`'s certificate in `<home>/certs` from the CA in `ca_dir` (a new CA
/// there if it holds none) and points the queue manager's qm.ini SSL stanza at it.
fn issue(home: &Home, qm: &str, ca_dir: &Path) -> PathBuf {
    let dir = home.path().join("certs");
    std::fs::create_dir_all(&dir).unwrap();
    if ca_dir.join("ca.pem").exists() {
        for f in ["ca.pem", "ca.key"] {
            std::fs::copy(ca_dir.join(f), dir.join(f)).unwrap();
        }
    }
    home.ok(&["mkdevcerts", "--dir", dir.to_str().unwrap(), "-m", qm]);
    if !ca_dir.join("ca.pem").exists() {
        std::fs::create_dir_all(ca_dir).unwrap();
        for f in ["ca.pem", "ca.key"] {
            std::fs::copy(dir.join(f), ca_dir.join(f)).unwrap();
        }
    }
    dir
}

fn set_ini(home: &Home, qm: &str, stanza: &str, key: &str, value: &str) {
    home.ok(&["setmqini", "-m", qm, "-s", stanza, "-k", key, "-v", value]);
}

/// A group of three whose replication links are mutual TLS; instance `i` gets its certificate
/// from `ca(i)` (a directory holding a CA, or to hold a new one).
fn tls_group(name: &str, ca: impl Fn(usize) -> PathBuf) -> HaGroup {
    let g = HaGroup::create(name, &[], |_| "127.0.0.1".to_string());
    for (i, home) in g.homes.iter().enumerate() {
        issue(home, name, &ca(i));
        set_ini(home, name, "NativeHA", "SslLink", "Required");
        set_ini(home, name, "NativeHA", "SslPeer", PEER);
    }
    g
}

fn put_all(c: &Connection, from: u32, to: u32) {
    let h = c.open(Q, open::OUTPUT).unwrap();
    for i in from..to {
        c.put_commit(
            &h,
            &persistent(),
            &Properties::default(),
            Bytes::from(format!("m{i}")),
        )
        .unwrap();
    }
}

/// Puts messages `from..to` of `size` bytes each (`m<n>|` then filler) under syncpoint, committing
/// every hundred: megabytes through the link, so its socket fills and TLS records queue.
fn put_bulk(c: &Connection, from: u32, to: u32, size: usize) {
    let h = c.open(Q, open::OUTPUT).unwrap();
    let sp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    for i in from..to {
        let mut b = format!("m{i}|");
        b.extend(std::iter::repeat_n('x', size.saturating_sub(b.len())));
        c.put(
            &h,
            &persistent(),
            &Properties::default(),
            Bytes::from(b),
            &sp,
        )
        .unwrap();
        if i % 100 == 99 {
            c.commit().unwrap();
        }
    }
    c.commit().unwrap();
}

/// Every message on `Q`, as their bodies' numbers, in order.
fn drain(c: &Connection) -> Vec<u32> {
    let h = c.open(Q, open::INPUT_EXCLUSIVE).unwrap();
    let mut got = Vec::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => {
                let b = String::from_utf8(m.body.to_vec()).unwrap();
                let n = b.strip_prefix('m').unwrap().split('|').next().unwrap();
                got.push(n.parse().unwrap());
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return got,
            Err(e) => panic!("get: {e}"),
        }
    }
}

fn row<'s>(status: &'s str, instance: &str) -> &'s str {
    status
        .lines()
        .find(|l| l.contains(&format!("INSTANCE({instance})")))
        .unwrap_or("")
}

#[test]
fn an_ha_group_on_tls_links_replicates_and_fails_over_without_losing_a_message() {
    let ca = tempfile::tempdir().unwrap();
    let g = tls_group("QTLSHA", |_| ca.path().to_path_buf());
    for i in 0..3 {
        g.start_instance(i);
    }
    let first = g.wait_active(Duration::from_secs(30));
    let log = g.logs();
    assert!(
        log.contains("HA replication links are mutual TLS") && !log.contains("FMQ3018"),
        "{log}"
    );
    let c = g.connect_reconnecting(30);
    put_all(&c, 0, 100);
    // Every instance holds the entries: replication runs over the TLS links.
    wait_until(
        "every instance in sync",
        Duration::from_secs(30),
        || g.logs(),
        || {
            g.status(first)
                .is_some_and(|s| s.matches("INSYNC(YES)").count() == 3)
        },
    );
    g.kill9(first);
    let next = g.wait_active(Duration::from_secs(30));
    assert_ne!(next, first);
    put_all(&c, 100, 150);
    let got = drain(&c);
    assert_eq!(
        got,
        (0..150).collect::<Vec<_>>(),
        "every acknowledged message, once, in order\n{}",
        g.logs()
    );
}

#[test]
fn an_instance_with_a_certificate_from_another_ca_cannot_join_the_group() {
    let (good_ca, other_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let outsider = 2;
    let g = tls_group("QTLSBAD", |i| {
        if i == outsider {
            other_ca.path().to_path_buf()
        } else {
            good_ca.path().to_path_buf()
        }
    });
    for i in 0..3 {
        g.start_instance(i);
    }
    let active = g.wait_active(Duration::from_secs(30));
    assert_ne!(active, outsider);
    let c = g.connect();
    put_all(&c, 0, 50);
    let good = 1 - active;
    wait_until(
        "the two good instances in sync, the outsider unreachable",
        Duration::from_secs(30),
        || g.logs(),
        || {
            g.status(active).is_some_and(|s| {
                row(&s, NAMES[good]).contains("INSYNC(YES)")
                    && row(&s, NAMES[outsider]).contains("REACHABLE(NO)")
            })
        },
    );
    // The active instance refuses the certificate the outsider presents when it connects to it
    // (the outsider, never a member, does not connect by itself).
    let refused_log = format!("link to 127.0.0.1:{} refused", g.repl_ports[outsider]);
    wait_until(
        "the active instance's error log names the refusal",
        Duration::from_secs(20),
        || g.logs(),
        || {
            let log = support::error_log(&g.dir(active));
            log.contains(&format!("{refused_log} (untrusted certificate)"))
        },
    );
    put_all(&c, 50, 100);
    assert_eq!(drain(&c), (0..100).collect::<Vec<_>>());
    // The outsider never became active and holds no entry of the group's log.
    let s = g.status(outsider).expect("the outsider answers dspmq");
    let own = row(&s, NAMES[outsider]);
    assert!(
        !own.contains("ROLE(Active)") && own.contains("LOGINDEX(UNKNOWN)"),
        "{s}"
    );
    let log = support::error_log(&g.dir(outsider));
    assert!(!log.contains("now the active instance"), "{log}");
    assert!(log.contains("FMQ3018W"), "the outsider is told too: {log}");
    let s = g.status(active).unwrap();
    assert!(
        row(&s, NAMES[outsider]).contains("INSYNC(NO)"),
        "the outsider holds nothing: {s}"
    );
}

fn dr_status(home: &Home, qm: &str) -> String {
    home.ok(&["dspmq", "-o", "dr", "-m", qm])
}

#[test]
fn a_dr_primary_streams_to_a_trusted_secondary_and_refuses_an_untrusted_one() {
    const QM: &str = "QTLSDR";
    let (main, rec, stranger) = (Home::new(), Home::new(), Home::new());
    let (ca, other_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (good_port, bad_port) = (free_port(), free_port());
    fn make<'h>(home: &'h Home, ca: &Path, flags: &[&str]) -> Qm<'h> {
        let qm = Qm::create(home, QM, flags);
        issue(home, QM, ca);
        set_ini(home, QM, "DR", "SslLink", "Required");
        set_ini(home, QM, "DR", "SslPeer", PEER);
        qm
    }
    let bad_l = format!("127.0.0.1({bad_port})");
    let good_l = format!("127.0.0.1({good_port})");
    let bad = make(
        &stranger,
        other_ca.path(),
        &["-dr", "secondary", "-drl", &bad_l],
    );
    let secondary = make(&rec, ca.path(), &["-dr", "secondary", "-drl", &good_l]);
    // The untrusted secondary is first in the list: the primary tries it at every connection.
    let remotes = format!("{bad_l},{good_l}");
    let primary = make(&main, ca.path(), &["-dr", "primary", "-drr", &remotes]);
    bad.restart();
    secondary.restart();
    primary.restart();
    let logs = || {
        format!(
            "--- primary ---\n{}\n--- secondary ---\n{}\n--- untrusted ---\n{}",
            support::error_log(&primary.dir()),
            support::error_log(&secondary.dir()),
            support::error_log(&bad.dir())
        )
    };
    wait_until("the link up", Duration::from_secs(30), logs, || {
        dr_status(&main, QM).contains("DRSTATUS(Normal)")
    });
    let c = primary.connect();
    put_all(&c, 0, 50);
    put_bulk(&c, 50, 1050, 4096);
    wait_until(
        "the secondary holds it all",
        Duration::from_secs(30),
        logs,
        || dr_status(&main, QM).contains("LAGBYTES(0)"),
    );
    let primary_log = support::error_log(&primary.dir());
    assert!(
        primary_log.contains(&format!(
            "DR link to 127.0.0.1:{bad_port} refused (untrusted certificate)"
        )),
        "{primary_log}"
    );
    assert!(
        primary_log.contains("DR links are mutual TLS"),
        "{primary_log}"
    );
    // The untrusted secondary never had the primary connected and received nothing.
    let st = dr_status(&stranger, QM);
    assert!(
        st.contains("RECEIVEDBYTES(0)") && !st.contains("DRSTATUS(Normal)"),
        "{st}"
    );
    assert!(
        !support::error_log(&bad.dir()).contains("primary connected"),
        "{}",
        logs()
    );
    // The trusted secondary, promoted, holds every acknowledged message.
    drop(c);
    primary.end();
    rec.ok(&["makedrprimary", "-m", QM]);
    secondary.restart();
    assert_eq!(drain(&secondary.connect()), (0..1050).collect::<Vec<_>>());
}

#[test]
fn refresh_security_ssl_reaches_the_dr_link_without_a_restart() {
    const QM: &str = "QTLSREF";
    let (main, rec) = (Home::new(), Home::new());
    let (ca, other_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let l = format!("127.0.0.1({})", free_port());
    fn setup<'h>(home: &'h Home, ca: &Path, flags: &[&str]) -> (Qm<'h>, PathBuf) {
        let qm = Qm::create(home, QM, flags);
        let certs = issue(home, QM, ca);
        set_ini(home, QM, "DR", "SslLink", "Required");
        (qm, certs)
    }
    // The secondary's certificate comes from another CA; it trusts both CAs, the primary only
    // its own at first.
    let (secondary, sec_certs) = setup(&rec, other_ca.path(), &["-dr", "secondary", "-drl", &l]);
    let (primary, pri_certs) = setup(&main, ca.path(), &["-dr", "primary", "-drr", &l]);
    let append = |to: &Path, from: &Path| {
        let mut bundle = std::fs::read_to_string(to.join("ca.pem")).unwrap();
        bundle.push_str(&std::fs::read_to_string(from.join("ca.pem")).unwrap());
        std::fs::write(to.join("ca.pem"), bundle).unwrap();
    };
    append(&sec_certs, ca.path());
    secondary.restart();
    primary.restart();
    let logs = || {
        format!(
            "--- primary ---\n{}\n--- secondary ---\n{}",
            support::error_log(&primary.dir()),
            support::error_log(&secondary.dir())
        )
    };
    let refused = format!(
        "DR link to {} refused (untrusted certificate)",
        l.replace('(', ":").replace(')', "")
    );
    wait_until("the refusal", Duration::from_secs(20), logs, || {
        support::error_log(&primary.dir()).contains(&refused)
    });
    assert!(!dr_status(&main, QM).contains("DRSTATUS(Normal)"));
    // The primary is told to trust the other CA too: new link connections use it.
    append(&pri_certs, other_ca.path());
    let out = primary
        .connect_bindings()
        .admin("MQSC REFRESH SECURITY TYPE(SSL)")
        .unwrap();
    assert!(out.contains(QM), "{out}");
    wait_until(
        "the link up after the refresh",
        Duration::from_secs(30),
        logs,
        || dr_status(&main, QM).contains("DRSTATUS(Normal)"),
    );
}

#[test]
fn a_client_certificate_from_the_same_ca_cannot_feed_a_secondary() {
    const QM: &str = "QTLSDN";
    let (rogue, rec) = (Home::new(), Home::new());
    let ca = tempfile::tempdir().unwrap();
    let l = format!("127.0.0.1({})", free_port());
    let secondary = Qm::create(&rec, QM, &["-dr", "secondary", "-drl", &l]);
    issue(&rec, QM, ca.path());
    set_ini(&rec, QM, "DR", "SslLink", "Required");
    set_ini(&rec, QM, "DR", "SslPeer", PEER);
    // A "primary" holding an application's certificate from the same CA.
    let primary = Qm::create(&rogue, QM, &["-dr", "primary", "-drr", &l]);
    let certs = issue(&rogue, QM, ca.path());
    let d = certs.to_str().unwrap();
    rogue.ok(&["mkdevcerts", "--dir", d, "--client", "app"]);
    for (k, f) in [("CertFile", "app.pem"), ("KeyFile", "app.key")] {
        set_ini(&rogue, QM, "SSL", k, certs.join(f).to_str().unwrap());
    }
    set_ini(&rogue, QM, "DR", "SslLink", "Required");
    secondary.restart();
    primary.restart();
    let logs = || {
        format!(
            "--- rogue primary ---\n{}\n--- secondary ---\n{}",
            support::error_log(&primary.dir()),
            support::error_log(&secondary.dir())
        )
    };
    wait_until(
        "the secondary's refusal",
        Duration::from_secs(20),
        logs,
        || {
            let log = support::error_log(&secondary.dir());
            log.contains("DR link from 127.0.0.1:")
                && log.contains("refused (DN mismatch)")
                && log.contains("CN=app,OU=clients")
        },
    );
    let st = dr_status(&rec, QM);
    assert!(
        st.contains("RECEIVEDBYTES(0)") && !st.contains("DRSTATUS(Normal)"),
        "{st}"
    );
    assert!(
        !support::error_log(&secondary.dir()).contains("primary connected"),
        "{}",
        logs()
    );
}
