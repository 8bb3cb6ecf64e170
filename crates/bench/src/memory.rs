//! Memory per queued message: fills a real queue manager process with N messages of each size,
//! persistent and not, and reports its resident memory (VmRSS) per queued message and the overhead
//! beyond the payload, before and after a restart (endmqm + strmqm; only persistent messages
//! survive it).

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, Transport};
use ferrymq_types::options::open;
use ferrymq_types::{MessageDescriptor, Persistence};

use ferrymq_bench::qm::mq;

const QM: &str = "MEMBENCH";
const FILLERS: usize = 4;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a value")),
    }
}

fn connect(home: &Path) -> Result<Connection, String> {
    let mut o = ConnectOptions::bindings(QM);
    o.transport = Transport::Bindings {
        home: Some(home.to_path_buf()),
    };
    Connection::connect(o).map_err(|e| e.to_string())
}

/// VmRSS of the running queue manager, in bytes.
fn rss(home: &Path) -> Result<u64, String> {
    let dir = home.join("qmgrs").join(QM);
    let pid = std::fs::read_to_string(dir.join("qm.pid")).map_err(|e| e.to_string())?;
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim()))
        .map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| "no VmRSS in /proc status".to_string())
}

fn depth(home: &Path) -> Result<u64, String> {
    let c = connect(home)?;
    let h = c.open("DEEP", open::INQUIRE).map_err(|e| e.to_string())?;
    let d = c.inquire(&h, &["CURDEPTH"]).map_err(|e| e.to_string())?;
    d[0].1
        .trim()
        .parse()
        .map_err(|_| format!("CURDEPTH {:?}", d[0].1))
}

fn fill(home: &Path, n: usize, size: usize, persistent: bool) -> Result<(), String> {
    let per = n / FILLERS;
    let mut threads = Vec::new();
    for k in 0..FILLERS {
        let home = home.to_path_buf();
        let count = if k == FILLERS - 1 {
            n - (FILLERS - 1) * per
        } else {
            per
        };
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let c = connect(&home)?;
            let md = MessageDescriptor {
                persistence: if persistent {
                    Persistence::Persistent
                } else {
                    Persistence::NotPersistent
                },
                ..Default::default()
            };
            let body = Bytes::from(vec![b'm'; size]);
            ferrymq_bench::qm::put_batched(c, "DEEP", &md, body, count)
        }));
    }
    for t in threads {
        t.join()
            .map_err(|_| "a filler thread panicked".to_string())??;
    }
    Ok(())
}

/// RSS once it has stopped moving (the allocator and the checkpointer settle), at most a few
/// seconds.
fn settled_rss(home: &Path) -> Result<u64, String> {
    let t = Instant::now();
    let mut last = rss(home)?;
    while t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(300));
        let now = rss(home)?;
        if now.abs_diff(last) < 256 * 1024 {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

struct Row {
    size: usize,
    persistent: bool,
    n: usize,
    base: u64,
    full: u64,
    restarted: u64,
    depth_after: u64,
    fill_s: f64,
}

fn per_msg(bytes: u64, base: u64, n: usize) -> f64 {
    bytes.saturating_sub(base) as f64 / n as f64
}

/// With `--hold-s N`, keeps the queue manager as it is for N seconds after a measurement, so
/// that its memory can be inspected (for instance glibc's `malloc_stats()` from gdb).
fn hold(home: &Path, secs: u64, what: &str) {
    if secs == 0 {
        return;
    }
    let pid =
        std::fs::read_to_string(home.join("qmgrs").join(QM).join("qm.pid")).unwrap_or_default();
    println!(
        "  holding {secs} s ({what}): queue manager pid {}",
        pid.trim()
    );
    std::thread::sleep(Duration::from_secs(secs));
}

fn measure(
    home: &Path,
    n: usize,
    size: usize,
    persistent: bool,
    hold_s: u64,
) -> Result<Row, String> {
    let _ = std::fs::remove_dir_all(home);
    std::fs::create_dir_all(home).map_err(|e| e.to_string())?;
    // A 3 x 64 MiB circular log: persistent fills checkpoint into the message store as they go.
    // Its clients connect without credentials: no security defaults (crtmqm --insecure).
    mq(
        home,
        &[
            "crtmqm",
            "-p",
            "0",
            "-lp",
            "3",
            "-lf",
            "16384",
            "--insecure",
            QM,
        ],
    )?;
    mq(home, &["strmqm", QM])?;
    {
        let c = connect(home)?;
        c.admin("MQSC DEFINE QLOCAL(DEEP) MAXDEPTH(999999999) MAXMSGL(104857600)")
            .map_err(|e| e.to_string())?;
    }
    let base = settled_rss(home)?;
    let t = Instant::now();
    fill(home, n, size, persistent)?;
    let fill_s = t.elapsed().as_secs_f64();
    let d = depth(home)?;
    if d != n as u64 {
        return Err(format!("CURDEPTH {d} after putting {n}"));
    }
    let full = settled_rss(home)?;
    hold(home, hold_s, "full");
    mq(home, &["endmqm", "-w", QM])?;
    mq(home, &["strmqm", QM])?;
    let restarted = settled_rss(home)?;
    hold(home, hold_s, "after the restart");
    let depth_after = depth(home)?;
    mq(home, &["endmqm", "-i", "-w", QM])?;
    Ok(Row {
        size,
        persistent,
        n,
        base,
        full,
        restarted,
        depth_after,
        fill_s,
    })
}

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = arg(args, "--messages", 1_000_000)?;
    // 20 KB messages are ten times fewer by default (1,000,000 of them would be 20 GB).
    let n_large: usize = arg(args, "--large-messages", n / 10)?;
    let sizes: String = arg(args, "--sizes", "64,2048,20480".to_string())?;
    let sizes: Vec<usize> = sizes
        .split(',')
        .map(|s| s.trim().parse().map_err(|_| format!("bad size {s:?}")))
        .collect::<Result<_, _>>()?;
    let pers: String = arg(args, "--persistence", "np,p".to_string())?;
    let hold_s: u64 = arg(args, "--hold-s", 0)?;
    let home = std::env::temp_dir().join(format!("ferrymq-mem-{}", std::process::id()));
    println!(
        "ferrymq-bench memory: {n} messages ({n_large} of sizes over 16 KiB) per row, queue manager VmRSS; ferrymq {}",
        env!("CARGO_PKG_VERSION")
    );
    println!(
        "{:>7} {:>4} {:>9} {:>9} {:>10} {:>12} {:>12} {:>11} {:>12} {:>12} {:>7}",
        "size",
        "pers",
        "messages",
        "fill s",
        "base MiB",
        "full MiB",
        "B/msg",
        "overhead",
        "B/msg rst",
        "ovh rst",
        "depth",
    );
    let mut result = Ok(());
    'all: for &size in &sizes {
        for p in pers.split(',') {
            let persistent = match p.trim() {
                "p" => true,
                "np" => false,
                other => return Err(format!("--persistence takes np and p, not {other:?}")),
            };
            let count = if size > 16 * 1024 { n_large } else { n };
            match measure(&home, count, size, persistent, hold_s) {
                Ok(r) => {
                    let b = per_msg(r.full, r.base, r.n);
                    let (rb, ro) = if r.persistent {
                        let rb = per_msg(r.restarted, r.base, r.n);
                        (format!("{rb:.0}"), format!("{:.0}", rb - r.size as f64))
                    } else {
                        ("-".into(), "-".into())
                    };
                    println!(
                        "{:>7} {:>4} {:>9} {:>9.1} {:>10.1} {:>12.1} {:>12.0} {:>11.0} {:>12} {:>12} {:>7}",
                        r.size,
                        if r.persistent { "p" } else { "np" },
                        r.n,
                        r.fill_s,
                        r.base as f64 / 1048576.0,
                        r.full as f64 / 1048576.0,
                        b,
                        b - r.size as f64,
                        rb,
                        ro,
                        r.depth_after
                    );
                    if r.restarted > r.full + (r.full - r.base.min(r.full)) / 2 && r.persistent {
                        println!("  (after the restart RSS is {:.1} MiB, more than 1.5 x the growth before it)", r.restarted as f64 / 1048576.0);
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break 'all;
                }
            }
        }
    }
    let _ = mq(&home, &["endmqm", "-i", "-w", QM]);
    let _ = std::fs::remove_dir_all(&home);
    println!("B/msg: (RSS full - RSS empty) / messages; overhead: B/msg - payload; rst: after endmqm + strmqm (non-persistent messages do not survive it, depth 0).");
    result
}
