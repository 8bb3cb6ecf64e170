//! Core measurements: restart time with a deep persistent queue, and commit latency beside the
//! disk's own fdatasync latency.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, Transport};
use ferrymq_types::options::{open, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties};

use ferrymq_bench::qm::mq;

struct Opts {
    messages: usize,
    size: usize,
    samples: usize,
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number")),
    }
}

fn connect(home: &Path, qm: &str) -> Result<Connection, String> {
    let mut o = ConnectOptions::bindings(qm);
    o.transport = Transport::Bindings {
        home: Some(home.to_path_buf()),
    };
    Connection::connect(o).map_err(|e| e.to_string())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    println!(
        "{name:<44} n={:<6} median {:.3} ms   p99 {:.3} ms   min {:.3} ms",
        v.len(),
        percentile(&v, 0.5),
        percentile(&v, 0.99),
        v[0].as_secs_f64() * 1000.0
    );
}

/// Raw cost of making 2 KB durable: pwrite into a preallocated file, then fdatasync.
fn fsync_latency(dir: &Path, size: usize, samples: usize) -> Result<Vec<Duration>, String> {
    let path = dir.join("fsync-probe.dat");
    let f = File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| e.to_string())?;
    let block = vec![7u8; size];
    let span = 16 * 1024 * 1024;
    for off in (0..span).step_by(1 << 20) {
        f.write_at(&vec![0u8; 1 << 20], off as u64)
            .map_err(|e| e.to_string())?;
    }
    f.sync_all().map_err(|e| e.to_string())?;
    let mut v = Vec::with_capacity(samples);
    for i in 0..samples {
        let off = (i * size) % (span - size);
        let t = Instant::now();
        f.write_at(&block, off as u64).map_err(|e| e.to_string())?;
        f.sync_data().map_err(|e| e.to_string())?;
        v.push(t.elapsed());
    }
    let _ = std::fs::remove_file(&path);
    Ok(v)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let o = Opts {
        messages: arg(args, "--messages", 500_000)?,
        size: arg(args, "--size", 2048)?,
        samples: arg(args, "--samples", 2000)?,
    };
    let home = std::env::temp_dir().join(format!("ferrymq-bench-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    let r = measure(&home, &o);
    let _ = mq(&home, &["endmqm", "-i", "-w", "BENCH"]);
    let _ = std::fs::remove_dir_all(&home);
    r
}

fn measure(home: &Path, o: &Opts) -> Result<(), String> {
    println!(
        "ferrymq-bench core: {} persistent messages of {} bytes, {} latency samples; ferrymq {}",
        o.messages,
        o.size,
        o.samples,
        env!("CARGO_PKG_VERSION")
    );
    // A 3 x 64 MiB circular log, as a production queue manager might have.
    mq(
        home,
        // Its clients connect without credentials: no security defaults (crtmqm --insecure).
        &[
            "crtmqm",
            "-p",
            "0",
            "-lp",
            "3",
            "-lf",
            "16384",
            "--insecure",
            "BENCH",
        ],
    )?;
    mq(home, &["strmqm", "BENCH"])?;
    let c = connect(home, "BENCH")?;
    c.admin("MQSC DEFINE QLOCAL(DEEP) MAXDEPTH(999999999) MAXMSGL(104857600)")
        .map_err(|e| e.to_string())?;
    c.admin("MQSC DEFINE QLOCAL(LAT) MAXDEPTH(999999999)")
        .map_err(|e| e.to_string())?;

    // Latency first, on an idle queue manager.
    let dir = home.join("qmgrs").join("BENCH");
    summary(
        "raw pwrite+fdatasync (same file system)",
        fsync_latency(&dir, o.size, o.samples)?,
    );
    let h = c.open("LAT", open::OUTPUT).map_err(|e| e.to_string())?;
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    let body = Bytes::from(vec![b'x'; o.size]);
    let mut v = Vec::with_capacity(o.samples);
    for _ in 0..o.samples {
        let t = Instant::now();
        c.put_commit(&h, &md, &Properties::default(), body.clone())
            .map_err(|e| e.to_string())?;
        v.push(t.elapsed());
    }
    summary("persistent put+commit, 1 client, bindings", v);
    let mut v = Vec::with_capacity(o.samples);
    for _ in 0..o.samples {
        let t = Instant::now();
        c.put(
            &h,
            &md,
            &Properties::default(),
            body.clone(),
            &PutOptions::default(),
        )
        .map_err(|e| e.to_string())?;
        v.push(t.elapsed());
    }
    summary("persistent put outside syncpoint, bindings", v);

    // Fill the deep queue: 4 connections, 100 messages per unit of work.
    let t = Instant::now();
    let per = o.messages / 4;
    let mut threads = Vec::new();
    for k in 0..4 {
        let home = home.to_path_buf();
        let body = body.clone();
        let n = if k == 3 { o.messages - 3 * per } else { per };
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let c = connect(&home, "BENCH")?;
            let md = MessageDescriptor {
                persistence: Persistence::Persistent,
                ..Default::default()
            };
            ferrymq_bench::qm::put_batched(c, "DEEP", &md, body, n)
        }));
    }
    for th in threads {
        th.join()
            .map_err(|_| "a filler thread panicked".to_string())??;
    }
    let fill = t.elapsed().as_secs_f64();
    println!(
        "filled DEEP with {} x {} B persistent in {fill:.1} s ({:.0} msgs/s)",
        o.messages,
        o.size,
        o.messages as f64 / fill
    );
    drop(c);

    let depth = |home: &Path| -> Result<String, String> {
        let c = connect(home, "BENCH")?;
        let h = c.open("DEEP", open::INQUIRE).map_err(|e| e.to_string())?;
        let d = c.inquire(&h, &["CURDEPTH"]).map_err(|e| e.to_string())?;
        Ok(d[0].1.clone())
    };

    let kill = |dir: &Path| -> Result<(), String> {
        let pid = std::fs::read_to_string(dir.join("qm.pid")).map_err(|e| e.to_string())?;
        Command::new("kill")
            .arg("-9")
            .arg(pid.trim())
            .status()
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    // Restart after SIGKILL straight after the fill: load the last checkpoint, replay the log
    // written since.
    kill(&dir)?;
    let t = Instant::now();
    mq(home, &["strmqm", "BENCH"])?;
    let crash = t.elapsed();
    let d1 = depth(home)?;
    // Restart after a controlled end (a final checkpoint was taken, nothing to replay).
    mq(home, &["endmqm", "-w", "BENCH"])?;
    let t = Instant::now();
    mq(home, &["strmqm", "BENCH"])?;
    let clean = t.elapsed();
    let d2 = depth(home)?;
    println!(
        "restart after SIGKILL, {} queued (CURDEPTH {d1}): strmqm returned in {:.2} s",
        o.messages,
        crash.as_secs_f64()
    );
    println!(
        "restart after endmqm, {} queued (CURDEPTH {d2}): strmqm returned in {:.2} s",
        o.messages,
        clean.as_secs_f64()
    );
    let log = ferrymq_bench::qm::error_log(&dir);
    for line in log.lines().filter(|l| l.contains("recovered in")) {
        println!("  queue manager log: {line}");
    }
    Ok(())
}
