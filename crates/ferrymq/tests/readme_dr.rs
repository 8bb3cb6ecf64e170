//! The README's disaster-recovery sequence, run as written (with this test's homes and ports in
//! place of `/tmp/dr/...` and the fixed ports): a secondary and a primary are created and
//! started, the main site is lost (SIGKILL), the recovery site takes over with `makedrprimary -r`
//! and `strmqm`, and the old main comes back as the secondary with `makedrsecondary` and
//! `strmqm`. The new primary must then ship to it: a full copy first, and what is put afterwards.

mod support;

use std::time::{Duration, Instant};

use support::dr::field;
use support::{free_port, Home, Qm};

const QM: &str = "QMDR";

fn status(home: &Home) -> String {
    home.ok(&["dspmq", "-o", "dr", "-m", QM])
}

fn wait_status(home: &Home, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let s = status(home);
        if pred(&s) {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{what}: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn put_lines(home: &Home, conn: &str, lines: &str) {
    let out = home.run_with_input(
        &[
            "put",
            QM,
            "SYSTEM.DEFAULT.LOCAL.QUEUE",
            "--persistent",
            "--conn",
            conn,
        ],
        lines,
    );
    assert!(out.status.success(), "put: {out:?}");
}

#[test]
fn the_readme_dr_failover_and_failback_sequence_works_as_written() {
    let (main, rec) = (Home::new(), Home::new());
    let (dr1, dr2) = (free_port(), free_port());
    let (l1, l2) = (format!("127.0.0.1({dr1})"), format!("127.0.0.1({dr2})"));
    // FERRYMQ_HOME=/tmp/dr/rec  ferrymq crtmqm -p 1422 -dr secondary -drl '127.0.0.1(4100)' QMDR
    // FERRYMQ_HOME=/tmp/dr/rec  ferrymq strmqm QMDR
    let recovery = Qm::start(&rec, QM, &["-dr", "secondary", "-drl", &l1]);
    // FERRYMQ_HOME=/tmp/dr/main ferrymq crtmqm -p 1421 -dr primary -drr '127.0.0.1(4100)' QMDR
    // FERRYMQ_HOME=/tmp/dr/main ferrymq strmqm QMDR
    let primary = Qm::start(&main, QM, &["-dr", "primary", "-drr", &l1]);
    wait_status(&main, "the primary reaches the secondary", |s| {
        s.contains("DRSTATUS(Normal)")
    });
    put_lines(&main, &primary.conname(), "one\ntwo\nthree\n");
    wait_status(&main, "the secondary holds the three", |s| {
        s.contains("DRSTATUS(Normal)") && field(s, "LAGBYTES").as_deref() == Some("0")
    });

    // The main site is lost.
    primary.kill9();
    // FERRYMQ_HOME=/tmp/dr/rec  ferrymq makedrprimary -m QMDR -r '127.0.0.1(4101)'
    // FERRYMQ_HOME=/tmp/dr/rec  ferrymq strmqm QMDR
    rec.ok(&["makedrprimary", "-m", QM, "-r", &l2]);
    rec.ok(&["strmqm", QM]);
    put_lines(&rec, &recovery.conname(), "four\n");
    // FERRYMQ_HOME=/tmp/dr/main ferrymq makedrsecondary -m QMDR -l '127.0.0.1(4101)'
    // FERRYMQ_HOME=/tmp/dr/main ferrymq strmqm QMDR
    main.ok(&["makedrsecondary", "-m", QM, "-l", &l2]);
    main.ok(&["strmqm", QM]);
    let synced = wait_status(&rec, "the new primary resynchronises the old main", |s| {
        s.contains("DRSTATUS(Normal)") && field(s, "LAGBYTES").as_deref() == Some("0")
    });
    assert!(
        synced.contains("RESYNC(FullCopy)"),
        "an old primary comes back by a full copy: {synced}"
    );
    put_lines(&rec, &recovery.conname(), "five\n");
    wait_status(&rec, "later work is shipped too", |s| {
        s.contains("DRSTATUS(Normal)") && field(s, "LAGBYTES").as_deref() == Some("0")
    });

    // The old main now holds all five: fail back and count them.
    recovery.kill9();
    main.ok(&["makedrprimary", "-m", QM]);
    main.ok(&["strmqm", QM]);
    let out = main.run(&["get", QM, "SYSTEM.DEFAULT.LOCAL.QUEUE"]);
    let got = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "get: {out:?}");
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines, ["one", "two", "three", "four", "five"], "{got}");
}
