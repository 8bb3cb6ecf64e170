//! Running the `ferrymq` lifecycle commands from measurement programs: finding the binary and
//! running a command against a private `$FERRYMQ_HOME`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `ferrymq` binary: this process when it is `ferrymq`, else the one beside it.
pub fn ferrymq_bin() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    if me.file_name().is_some_and(|n| n == "ferrymq") {
        return Ok(me);
    }
    let sibling = me.with_file_name("ferrymq");
    if sibling.exists() {
        Ok(sibling)
    } else {
        Err(format!("cannot find the ferrymq binary beside {}; build it with cargo build --release -p ferrymq", me.display()))
    }
}

/// Runs `ferrymq ARGS` with `FERRYMQ_HOME=home`; its stdout, or an error with both outputs.
pub fn mq(home: &Path, args: &[&str]) -> Result<String, String> {
    mq_with(None, home, args)
}

/// [`mq`] with another `ferrymq` binary than the one beside this program when `bin` is given
/// (a baseline build measured beside this one).
pub fn mq_with(bin: Option<&Path>, home: &Path, args: &[&str]) -> Result<String, String> {
    let bin = match bin {
        Some(b) => b.to_path_buf(),
        None => ferrymq_bin()?,
    };
    let out = Command::new(bin)
        .args(args)
        .env("FERRYMQ_HOME", home)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "ferrymq {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ferrymq ARGS` with `FERRYMQ_HOME=home` and `input` on its standard input (an MQSC
/// script for `runmqsc`, a password for `setmqusr --password-stdin`); its stdout, or an error
/// with both outputs.
pub fn mq_input(home: &Path, args: &[&str], input: &str) -> Result<String, String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(ferrymq_bin()?)
        .args(args)
        .env("FERRYMQ_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| format!("ferrymq {args:?}: writing its input: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "ferrymq {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A TCP port free on the loopback interface right now, outside the kernel's ephemeral range
/// where possible (see [`free_port_outside_ephemeral`]).
pub fn free_port() -> Result<u16, String> {
    if let Some(p) = free_port_outside_ephemeral() {
        return Ok(p);
    }
    bind_probe(0).ok_or_else(|| "no free loopback port".to_string())
}

/// Binds a loopback socket to `port` (0: one the kernel picks) and closes it again; the port it
/// got, or `None` if the port is taken. The socket is bound but never listens, with
/// SO_REUSEADDR as the listeners that take the port later have. A listening probe is a trap in
/// a multi-threaded harness: a process another thread forks at that moment inherits the socket
/// until its exec, and meanwhile a connection meant for the port's next owner is accepted into
/// the inherited backlog and reset when the exec closes it (and that owner's bind fails). A
/// socket that only binds accepts nothing and keeps no SO_REUSEADDR listener from binding.
pub fn bind_probe(port: u16) -> Option<u16> {
    let s = tokio::net::TcpSocket::new_v4().ok()?;
    s.set_reuseaddr(true).ok()?;
    s.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .ok()?;
    s.local_addr().ok().map(|a| a.port())
}

/// Ports handed out by this process (a port checked free is handed out once).
static PORTS_GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// A loopback TCP port free right now and below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`), so that no outgoing connection on this machine can
/// be holding it when a process restarts and listens on it again (a port the kernel picks for
/// `bind(0)` comes from that range). Chosen pseudo-randomly in [10000, start of the range), so
/// processes running at once rarely try the same one; bound once to check that it is free.
pub fn free_port_outside_ephemeral() -> Option<u16> {
    use std::hash::{BuildHasher, Hasher};
    let start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            t.split_whitespace()
                .next()
                .and_then(|w| w.parse::<u16>().ok())
        })
        .unwrap_or(32768);
    let (lo, hi) = (10000u16, start);
    if hi <= lo + 100 {
        return None;
    }
    let seed = std::collections::hash_map::RandomState::new();
    for attempt in 0u32..500 {
        let mut h = seed.build_hasher();
        h.write_u32(std::process::id());
        h.write_u32(attempt);
        let p = lo + (h.finish() % u64::from(hi - lo)) as u16;
        let mut given = PORTS_GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if given.contains(&p) {
            continue;
        }
        if bind_probe(p).is_some() {
            given.push(p);
            return Some(p);
        }
    }
    None
}

/// Puts `n` copies of `body` on `queue` through `c` in units of work of 100 (the last one
/// shorter), then disconnects: how the benchmarks fill a deep queue.
pub fn put_batched(
    c: ferrymq_client::blocking::Connection,
    queue: &str,
    md: &ferrymq_types::MessageDescriptor,
    body: bytes::Bytes,
    n: usize,
) -> Result<(), String> {
    use ferrymq_types::options::{open, PutOptions, Syncpoint};
    let h = c.open(queue, open::OUTPUT).map_err(|e| e.to_string())?;
    let sp = PutOptions {
        syncpoint: Syncpoint::Yes,
        ..Default::default()
    };
    let props = ferrymq_types::Properties::default();
    for i in 0..n {
        c.put(&h, md, &props, body.clone(), &sp)
            .map_err(|e| e.to_string())?;
        if i % 100 == 99 || i + 1 == n {
            c.commit().map_err(|e| e.to_string())?;
        }
    }
    c.disconnect().map_err(|e| e.to_string())
}

/// Everything a queue manager (directory `qm_dir`) wrote to its error log, oldest first (the
/// rotated `FMQERR03..02.LOG`, the current `FMQERR01.LOG`), then what its process printed outside
/// the log (`console.log`: a panic's message). Files that cannot be read count as empty.
pub fn error_log(qm_dir: &Path) -> String {
    use ferrymq_types::objects::{CONSOLE_LOG, ERROR_LOG_FILES};
    let errors = qm_dir.join("errors");
    ERROR_LOG_FILES
        .iter()
        .rev()
        .chain(std::iter::once(&CONSOLE_LOG))
        .filter_map(|f| std::fs::read_to_string(errors.join(f)).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_probe_reports_a_taken_port_and_leaves_nothing_listening() {
        let p = bind_probe(0).expect("a port the kernel picks");
        // Nothing listens after the probe: a connection is refused, and a listener can take it.
        assert!(std::net::TcpStream::connect(("127.0.0.1", p)).is_err());
        let l = std::net::TcpListener::bind(("127.0.0.1", p)).expect("the probed port is free");
        assert_eq!(bind_probe(p), None, "a listening port reads as taken");
        drop(l);
        let q = free_port_outside_ephemeral()
            .or_else(|| bind_probe(0))
            .unwrap();
        assert_ne!(
            free_port_outside_ephemeral(),
            Some(q),
            "a port is handed out once"
        );
    }
}
