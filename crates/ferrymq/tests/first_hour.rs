//! What a new user meets in the first hour (issue 18): queue manager names that must never reach
//! another queue manager's files, `get | head -1`, Ctrl-C during the demo, misspelt qm.ini keys,
//! and flags that mean what MQ means by them. Black-box, against the real binary.

mod support;

use support::{Home, Qm};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

fn put_lines(home: &Home, qm: &str, lines: &[String]) {
    let out = home.run_with_input(&["put", qm, Q, "--persistent"], &(lines.join("\n") + "\n"));
    assert!(
        out.status.success(),
        "put to {qm}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn dspmq(home: &Home) -> String {
    home.ok(&["dspmq"])
}

#[test]
fn a_queue_manager_name_never_reaches_another_queue_managers_files() {
    let home = Home::new();
    let site = Qm::start(&home, "SITE", &[]);
    let msgs: Vec<String> = (0..5).map(|i| format!("payment-{i}")).collect();
    put_lines(&home, "SITE", &msgs);
    site.end();

    // A name with '/' is MQ-valid; it gets a directory of its own ('/' becomes '&').
    let nested = Qm::start(&home, "SITE/log", &[]);
    assert!(home.path().join("qmgrs/SITE&log/qm.ini").exists());
    let other = Qm::start(&home, "SITE/QMA", &[]);
    put_lines(&home, "SITE/QMA", &["kept".to_string()]);
    // Bindings mode (put above), dspmq and endmqm find them by name.
    let shown = dspmq(&home);
    for n in ["SITE", "SITE/log", "SITE/QMA"] {
        assert!(
            shown.contains(&format!("QMNAME({n}) ")),
            "{n} missing:\n{shown}"
        );
    }
    assert!(
        shown.contains("QMNAME(SITE/log) STATUS(Running)"),
        "{shown}"
    );
    nested.end();
    other.end();

    // Deleting SITE/log deletes exactly its own directory, not SITE's recovery log.
    home.ok(&["dltmqm", "SITE/log"]);
    assert!(!home.path().join("qmgrs/SITE&log").exists());
    assert!(
        home.path().join("qmgrs/SITE/log").is_dir(),
        "SITE's log was deleted"
    );
    site.restart();
    let got = home.ok(&["get", "SITE", Q]);
    assert_eq!(got.lines().collect::<Vec<_>>(), msgs, "SITE lost messages");
    site.end();

    // Deleting SITE leaves SITE/QMA alone.
    home.ok(&["dltmqm", "SITE"]);
    let shown = dspmq(&home);
    assert!(!shown.contains("QMNAME(SITE) "), "{shown}");
    assert!(shown.contains("QMNAME(SITE/QMA) "), "{shown}");
    other.restart();
    assert_eq!(home.ok(&["get", "SITE/QMA", Q]).trim(), "kept");
    other.end();

    // A leading '.' is not a hidden directory, and cannot become '.' or '..'.
    let dotted = Qm::create(&home, ".QM", &[]);
    assert!(home.path().join("qmgrs/!QM/qm.ini").exists());
    assert!(dspmq(&home).contains("QMNAME(.QM) "));
    drop(dotted);

    // Bad names: refused with MQ's "queue manager name error" (72), nothing touched.
    let long = "Q".repeat(49);
    for bad in ["..", ".", "", "a b", "a&b", "a\\b", long.as_str()] {
        for cmd in [
            vec!["crtmqm", bad],
            vec!["dltmqm", bad],
            vec!["strmqm", bad],
            vec!["endmqm", bad],
        ] {
            let out = home.run(&cmd);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(72), "{cmd:?}: {err}");
            assert!(err.contains("queue manager name"), "{cmd:?}: {err}");
        }
        let out = home.run(&[
            "setmqini",
            "-m",
            bad,
            "-s",
            "Log",
            "-k",
            "Durability",
            "-v",
            "os",
        ]);
        assert_eq!(out.status.code(), Some(72), "setmqini -m {bad:?}");
    }
    assert!(home.path().join("qmgrs/SITE&QMA/qm.ini").exists());
    assert_eq!(
        std::fs::read_dir(home.path().join("qmgrs"))
            .unwrap()
            .count(),
        1,
        "only SITE/QMA is left"
    );
}
