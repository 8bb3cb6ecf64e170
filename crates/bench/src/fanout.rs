//! Publish/subscribe fan-out: one publisher to 1, 10, 100 and 1000 subscribers, non-persistent
//! (non-durable subscriptions) and persistent (durable ones), 2 KB by default. Reports
//! publications and deliveries per second and the queue manager's CPU per delivery (the copy's
//! put at publish time plus its get by the subscriber), beside a plain put and get of the same
//! messages in the same run: the ratio is what a subscriber's copy costs against a message
//! put and got on a queue.

use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, Subscription, SubscriptionOptions, Transport};
use ferrymq_types::options::{close, open, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};

use ferrymq_bench::cpu::cpu_seconds;
use ferrymq_bench::qm::mq;

/// Subscriptions per subscriber connection (two handles each, under the 256 per connection).
const SUBS_PER_CONN: usize = 100;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number")),
    }
}

fn connect(home: &Path) -> Result<Connection, String> {
    let mut o = ConnectOptions::bindings("FANOUT");
    o.transport = Transport::Bindings {
        home: Some(home.to_path_buf()),
    };
    Connection::connect(o).map_err(|e| e.to_string())
}

fn err(e: ferrymq_types::MqError) -> String {
    e.to_string()
}

/// Gets every message waiting on `q`; returns how many.
fn drain(c: &Connection, q: &ferrymq_client::ObjectHandle) -> Result<usize, String> {
    let mut n = 0;
    loop {
        match c.get(
            q,
            &GetOptions {
                max_len: u32::MAX,
                ..Default::default()
            },
        ) {
            Ok(_) => n += 1,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return Ok(n),
            Err(e) => return Err(e.to_string()),
        }
    }
}

struct Run {
    seconds: f64,
    cpu_s: f64,
}

pub fn run(args: &[String]) -> Result<(), String> {
    let deliveries: usize = arg(args, "--deliveries", 50_000)?;
    let size: usize = arg(args, "--size", 2048)?;
    let home = std::env::temp_dir().join(format!("ferrymq-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    let r = measure(&home, deliveries, size);
    let _ = mq(&home, &["endmqm", "-i", "-w", "FANOUT"]);
    let _ = std::fs::remove_dir_all(&home);
    r
}

fn measure(home: &Path, deliveries: usize, size: usize) -> Result<(), String> {
    mq(home, &["crtmqm", "-p", "0", "--insecure", "FANOUT"])?;
    mq(home, &["strmqm", "FANOUT"])?;
    let pid: u32 = std::fs::read_to_string(home.join("qmgrs").join("FANOUT").join("qm.pid"))
        .map_err(|e| e.to_string())?
        .trim()
        .parse()
        .map_err(|_| "qm.pid is not a number".to_string())?;
    let cpu = || cpu_seconds(pid).unwrap_or(0.0);
    let c = connect(home)?;
    c.admin("MQSC DEFINE QLOCAL(PLAIN) MAXDEPTH(999999999)")
        .map_err(err)?;
    c.admin("MQSC ALTER QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH(999999999)")
        .map_err(err)?;
    c.admin("MQSC ALTER QMODEL(SYSTEM.NDURABLE.MODEL.QUEUE) MAXDEPTH(999999999)")
        .map_err(err)?;
    let body = Bytes::from(vec![b'x'; size]);
    println!(
        "ferrymq-bench fanout: {deliveries} deliveries per row, {size} B, bindings; ferrymq {}",
        env!("CARGO_PKG_VERSION")
    );
    println!(
        "{:<8} {:>6} {:>12} {:>12} {:>14} {:>16} {:>10}",
        "persist", "subs", "pubs/s", "deliv/s", "CPU/deliv µs", "plain put+get µs", "ratio"
    );
    for persistent in [false, true] {
        let md = MessageDescriptor {
            persistence: if persistent {
                Persistence::Persistent
            } else {
                Persistence::NotPersistent
            },
            ..Default::default()
        };
        // The plain put and get of the same number of messages, as the baseline.
        let h = c
            .open("PLAIN", open::OUTPUT | open::INPUT_SHARED)
            .map_err(err)?;
        let (c0, t0) = (cpu(), Instant::now());
        for _ in 0..deliveries {
            c.put(
                &h,
                &md,
                &Properties::default(),
                body.clone(),
                &PutOptions::default(),
            )
            .map_err(err)?;
        }
        let got = drain(&c, &h)?;
        let plain = Run {
            seconds: t0.elapsed().as_secs_f64(),
            cpu_s: cpu() - c0,
        };
        assert_eq!(got, deliveries, "every plain message got back");
        c.close(&h, 0).map_err(err)?;
        let plain_us = plain.cpu_s / deliveries as f64 * 1e6;
        let _ = plain.seconds;
        for subs in [1usize, 10, 100, 1000] {
            let conns: Vec<Connection> = (0..subs.div_ceil(SUBS_PER_CONN))
                .map(|_| connect(home))
                .collect::<Result<_, _>>()?;
            let mut made: Vec<(usize, Subscription)> = Vec::with_capacity(subs);
            for k in 0..subs {
                let ci = k / SUBS_PER_CONN;
                let s = conns[ci]
                    .subscribe(&SubscriptionOptions {
                        name: persistent.then(|| format!("FANOUT.{k}")),
                        durable: persistent,
                        ..SubscriptionOptions::topic("bench/fanout")
                    })
                    .map_err(err)?;
                made.push((ci, s));
            }
            let pubs = (deliveries / subs).max(1);
            let p = c
                .open_topic("", "bench/fanout", open::OUTPUT)
                .map_err(err)?;
            let (c0, t0) = (cpu(), Instant::now());
            for _ in 0..pubs {
                c.put(
                    &p,
                    &md,
                    &Properties::default(),
                    body.clone(),
                    &PutOptions::default(),
                )
                .map_err(err)?;
            }
            let publish_s = t0.elapsed().as_secs_f64();
            let mut got = 0;
            for (ci, s) in &made {
                got += drain(&conns[*ci], s.queue.as_ref().expect("managed"))?;
            }
            let all = Run {
                seconds: t0.elapsed().as_secs_f64(),
                cpu_s: cpu() - c0,
            };
            if got != pubs * subs {
                return Err(format!(
                    "{subs} subscribers got {got} copies of {pubs} publications"
                ));
            }
            c.close(&p, 0).map_err(err)?;
            for (ci, s) in &made {
                conns[*ci]
                    .close_subscription(s, close::REMOVE_SUB)
                    .map_err(err)?;
            }
            let per_us = all.cpu_s / got as f64 * 1e6;
            println!(
                "{:<8} {:>6} {:>12.0} {:>12.0} {:>14.1} {:>16.1} {:>10.2}",
                if persistent { "yes" } else { "no" },
                subs,
                pubs as f64 / publish_s,
                got as f64 / all.seconds,
                per_us,
                plain_us,
                per_us / plain_us
            );
        }
    }
    Ok(())
}
