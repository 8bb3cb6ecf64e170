//! Prometheus metrics from real queue manager processes (qm.ini `Metrics: Port=`): queue depths
//! and counters, bad HTTP requests answered without harm, an HA group's instances as each sees
//! them, and a DR primary's lag — in bytes and seconds against its bound — growing once its
//! recovery site is gone.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_types::options::open;
use ferrymq_types::Properties;
use support::dr::persistent;
use support::ha::{HaGroup, NAMES};
use support::{free_port, Home, Qm};

/// Restarts `qm` with metrics served on a free port (`setmqini`); returns the port.
fn serve_metrics(qm: &Qm) -> u16 {
    let port = free_port();
    qm.end();
    let p = port.to_string();
    qm.home.ok(&[
        "setmqini", "-m", &qm.name, "-s", "Metrics", "-k", "Port", "-v", &p,
    ]);
    qm.restart();
    port
}

/// Sends `request` as is and returns the status code and body of the answer.
fn http(port: u16, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (code, body)
}

fn get(port: u16, path: &str) -> (u16, String) {
    http(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn scrape(port: u16) -> String {
    let (code, body) = get(port, "/metrics");
    assert_eq!(code, 200, "{body}");
    body
}

/// The value of the sample whose name and labels start with `prefix`.
fn value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn wait_metric(port: u16, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let m = scrape(port);
        if ok(&m) {
            return m;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{what}:\n{m}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn put(qm: &Qm, queue: &str, n: usize) {
    put_to(&qm.connect(), queue, n);
}

fn put_to(c: &ferrymq_client::blocking::Connection, queue: &str, n: usize) {
    let h = c.open(queue, open::OUTPUT).unwrap();
    for i in 0..n {
        c.put_commit(
            &h,
            &persistent(),
            &Properties::default(),
            Bytes::from(format!("m{i}")),
        )
        .unwrap();
    }
}

#[test]
fn queue_depths_and_counters_are_served_and_bad_requests_do_no_harm() {
    let home = Home::new();
    let qm = Qm::start(&home, "MQM", &[]);
    let port = serve_metrics(&qm);
    let out = home.run_with_input(&["runmqsc", "MQM"], "DEFINE QLOCAL(M.Q) MAXDEPTH(500)\n");
    assert!(out.status.success(), "{out:?}");
    put(&qm, "M.Q", 3);

    let m = scrape(port);
    assert!(m.contains("# TYPE ferrymq_queue_depth gauge"), "{m}");
    assert_eq!(value(&m, "ferrymq_up{qmgr=\"MQM\"}"), Some(1.0), "{m}");
    let q = "{qmgr=\"MQM\",queue=\"M.Q\"}";
    assert_eq!(
        value(&m, &format!("ferrymq_queue_depth{q}")),
        Some(3.0),
        "{m}"
    );
    assert_eq!(
        value(&m, &format!("ferrymq_queue_max_depth{q}")),
        Some(500.0)
    );
    assert_eq!(
        value(&m, &format!("ferrymq_queue_puts_total{q}")),
        Some(3.0)
    );
    assert!(!m.contains("ferrymq_dr_"), "no DR here: {m}");
    assert!(!m.contains("ferrymq_ha_"), "no HA here: {m}");

    // Wrong path and method, then bytes that are not HTTP at all, then a scraper that never
    // finishes its request: each gets its answer (or is dropped) and scraping carries on.
    assert_eq!(get(port, "/nothing").0, 404);
    assert_eq!(
        http(
            port,
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .0,
        405
    );
    assert_eq!(http(port, b"\x00\x01\x02 garbage\r\n\r\n").0, 400);
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.write_all(b"GET /metr").unwrap();
    put(&qm, "M.Q", 2);
    let m = scrape(port);
    assert_eq!(
        value(&m, &format!("ferrymq_queue_depth{q}")),
        Some(5.0),
        "{m}"
    );
    drop(stalled);
}

#[test]
fn a_dr_primarys_lag_is_in_its_metrics_and_grows_when_the_recovery_site_is_gone() {
    let (main, rec) = (Home::new(), Home::new());
    let dr_port = free_port();
    let secondary = Qm::start(
        &rec,
        "DRM",
        &["-dr", "secondary", "-drl", &format!("127.0.0.1({dr_port})")],
    );
    let sec_port = serve_metrics(&secondary);
    let primary = Qm::start(
        &main,
        "DRM",
        &[
            "-dr",
            "primary",
            "-drr",
            &format!("127.0.0.1({dr_port})"),
            "-drlag",
            "1048576",
        ],
    );
    let port = serve_metrics(&primary);
    wait_metric(port, "the primary never reached the secondary", |m| {
        value(m, "ferrymq_dr_connected{qmgr=\"DRM\"}") == Some(1.0)
    });
    let out = main.run_with_input(&["runmqsc", "DRM"], "DEFINE QLOCAL(DR.Q)\n");
    assert!(out.status.success(), "{out:?}");
    put(&primary, "DR.Q", 20);

    // In step: everything acknowledged soon after, and the secondary has received it.
    let m = wait_metric(port, "the recovery site never caught up", |m| {
        value(m, "ferrymq_dr_lag_bytes{qmgr=\"DRM\"}") == Some(0.0)
    });
    assert_eq!(
        value(&m, "ferrymq_dr_max_lag_bytes{qmgr=\"DRM\"}"),
        Some(1_048_576.0),
        "{m}"
    );
    assert!(m.contains("ferrymq_dr_info{qmgr=\"DRM\",role=\"primary\",status=\"Normal\"} 1"));
    let sent = value(&m, "ferrymq_dr_sent_bytes_total{qmgr=\"DRM\"}").unwrap();
    assert!(sent > 20.0 * 2.0, "{m}");
    let s = scrape(sec_port);
    assert!(
        s.contains("ferrymq_dr_info{qmgr=\"DRM\",role=\"secondary\",status=\"Normal\"} 1"),
        "{s}"
    );
    assert!(value(&s, "ferrymq_dr_received_bytes_total{qmgr=\"DRM\"}").unwrap() > 0.0);
    assert!(
        !s.contains("ferrymq_dr_lag_bytes"),
        "a secondary has no lag: {s}"
    );

    // The recovery site goes: the primary keeps working within the bound, and its lag shows it.
    secondary.kill9();
    put(&primary, "DR.Q", 10);
    let m = wait_metric(port, "the lost link never showed", |m| {
        value(m, "ferrymq_dr_connected{qmgr=\"DRM\"}") == Some(0.0)
    });
    let lag = value(&m, "ferrymq_dr_lag_bytes{qmgr=\"DRM\"}").unwrap();
    assert!(lag > 10.0 * 2.0 && lag <= 1_048_576.0, "{m}");
    std::thread::sleep(Duration::from_millis(300));
    let m = scrape(port);
    let secs = value(&m, "ferrymq_dr_lag_seconds{qmgr=\"DRM\"}").unwrap();
    assert!(
        secs >= 0.3,
        "the lag's age must grow while nothing is acknowledged: {m}"
    );
    assert_eq!(
        value(&m, "ferrymq_queue_depth{qmgr=\"DRM\",queue=\"DR.Q\"}"),
        Some(30.0),
        "{m}"
    );
}

#[test]
fn every_ha_instance_serves_its_role_and_the_groups_sync_state() {
    let g = HaGroup::create("HAM", &[], |_| "127.0.0.1".to_string());
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    for (i, home) in g.homes.iter().enumerate() {
        let p = ports[i].to_string();
        home.ok(&[
            "setmqini", "-m", "HAM", "-s", "Metrics", "-k", "Port", "-v", &p,
        ]);
        g.start_instance(i);
    }
    let active = g.wait_active(Duration::from_secs(30));
    put_to(&g.connect(), "SYSTEM.DEFAULT.LOCAL.QUEUE", 4);
    // In sync is a bounded lag (a replica may still lack the last entries); with no more puts,
    // every backlog then drains to nothing.
    let m = wait_metric(
        ports[active],
        "the replicas never showed in sync, backlog 0",
        |m| {
            NAMES.iter().all(|n| {
                value(
                    m,
                    &format!("ferrymq_ha_instance_in_sync{{qmgr=\"HAM\",instance=\"{n}\"}}"),
                ) == Some(1.0)
                    && value(
                        m,
                        &format!(
                            "ferrymq_ha_instance_backlog_bytes{{qmgr=\"HAM\",instance=\"{n}\"}}"
                        ),
                    ) == Some(0.0)
            })
        },
    );
    let me = NAMES[active];
    assert_eq!(
        value(
            &m,
            &format!("ferrymq_ha_active{{qmgr=\"HAM\",instance=\"{me}\"}}")
        ),
        Some(1.0),
        "{m}"
    );
    for n in NAMES {
        let backlog = format!("ferrymq_ha_instance_backlog_bytes{{qmgr=\"HAM\",instance=\"{n}\"}}");
        assert_eq!(value(&m, &backlog), Some(0.0), "{m}");
    }
    let q = "{qmgr=\"HAM\",queue=\"SYSTEM.DEFAULT.LOCAL.QUEUE\"}";
    assert_eq!(
        value(&m, &format!("ferrymq_queue_depth{q}")),
        Some(4.0),
        "{m}"
    );
    // A replica answers too, as a replica, with the messages already applied (warm).
    let r = (active + 1) % 3;
    let rn = NAMES[r];
    let m = wait_metric(ports[r], "the replica never applied the puts", |m| {
        value(m, &format!("ferrymq_queue_depth{q}")) == Some(4.0)
    });
    assert_eq!(
        value(
            &m,
            &format!("ferrymq_ha_active{{qmgr=\"HAM\",instance=\"{rn}\"}}")
        ),
        Some(0.0),
        "{m}"
    );
}
