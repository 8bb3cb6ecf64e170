//! The relay floor of `report mft`: the same files moved with no queue manager and no agent at
//! all, through the hops a bindings-mode transfer crosses: read from the source file, a Unix
//! socket (agent to its queue manager), loopback TCP (the channel between the two), a Unix
//! socket (queue manager to the receiving agent), written to the destination, then `sync`.
//! Each stream is four threads (reader, two relays, writer) passing opaque bytes in chunk-size
//! reads: no framing, no checksum, no queue, no acknowledgement. So it is the most those
//! sockets carry on this machine, the ceiling any transfer through them shares with the
//! `cp`+`sync` baseline, and the report shows it beside the goal.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Instant;

use super::files::{sha256_of, sync, SourceSet};
use super::MULTIPLE_TRANSFERS;

/// Copies `r` to `w` in `chunk`-byte reads until end of stream; returns the bytes.
fn pump(mut r: impl Read, mut w: impl Write, chunk: usize) -> std::io::Result<u64> {
    let mut buf = vec![0u8; chunk];
    let mut n = 0u64;
    loop {
        let k = match r.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..k])?;
        n += k as u64;
    }
}

fn spawn(
    name: &str,
    f: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<JoinHandle<Result<(), String>>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| format!("relay floor: cannot start a thread: {e}"))
}

/// The floor run of `report mft`: `relay` timed, then the copy checked (one file per group)
/// and removed, outside the time. Returns the seconds.
pub(crate) fn relay_floor(src: &SourceSet, dest: &Path, chunk: usize) -> Result<f64, String> {
    let secs = relay(src, dest, chunk)?;
    for (rel, sum) in src.files.iter().take(MULTIPLE_TRANSFERS) {
        if &sha256_of(&dest.join(rel))? != sum {
            return Err(format!(
                "relay floor: {} differs from its source",
                dest.join(rel).display()
            ));
        }
    }
    std::fs::remove_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    sync()?;
    Ok(secs)
}

/// Moves every file of `src` to the same place under `dest`: one stream per group directory
/// (ten at once, as a "multiple" row runs ten transfers), each file sent as its length then
/// its bytes. Timed to the end of the `sync` after the last file; returns the seconds.
pub(crate) fn relay(src: &SourceSet, dest: &Path, chunk: usize) -> Result<f64, String> {
    let _ = std::fs::remove_dir_all(dest);
    let mut streams: Vec<Vec<String>> = vec![Vec::new(); MULTIPLE_TRANSFERS];
    for (i, (rel, _)) in src.files.iter().enumerate() {
        streams[i % MULTIPLE_TRANSFERS].push(rel.clone());
    }
    streams.retain(|s| !s.is_empty());
    for s in &streams {
        let parent = dest.join(&s[0]);
        let parent = parent.parent().unwrap_or(dest);
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let t = Instant::now();
    let mut threads = Vec::new();
    for files in streams {
        let (to_a, at_a) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        let (to_w, at_w) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("relay floor: {e}"))?;
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        let io = |what: &'static str| move |e: std::io::Error| format!("relay floor {what}: {e}");
        let (src_dir, dest_dir) = (src.dir.clone(), dest.to_path_buf());
        let names = files.clone();
        threads.push(spawn("floor-reader", move || {
            let mut to_a = to_a;
            let mut buf = vec![0u8; chunk];
            for rel in &names {
                let mut f = std::fs::File::open(src_dir.join(rel)).map_err(io("read"))?;
                let len = f.metadata().map_err(io("read"))?.len();
                to_a.write_all(&len.to_le_bytes()).map_err(io("read"))?;
                loop {
                    let k = f.read(&mut buf).map_err(io("read"))?;
                    if k == 0 {
                        break;
                    }
                    to_a.write_all(&buf[..k]).map_err(io("read"))?;
                }
            }
            Ok(())
        })?);
        threads.push(spawn("floor-relay-a", move || {
            let tcp = TcpStream::connect(addr).map_err(io("relay A"))?;
            pump(at_a, tcp, chunk).map(|_| ()).map_err(io("relay A"))
        })?);
        threads.push(spawn("floor-relay-b", move || {
            let (tcp, _) = l.accept().map_err(io("relay B"))?;
            pump(tcp, to_w, chunk).map(|_| ()).map_err(io("relay B"))
        })?);
        threads.push(spawn("floor-writer", move || {
            let mut at_w = at_w;
            let mut buf = vec![0u8; chunk];
            for rel in &files {
                let mut len = [0u8; 8];
                at_w.read_exact(&mut len).map_err(io("write"))?;
                let mut left = u64::from_le_bytes(len);
                let mut f = std::fs::File::create(dest_dir.join(rel)).map_err(io("write"))?;
                while left > 0 {
                    let want = buf.len().min(left as usize);
                    let k = at_w.read(&mut buf[..want]).map_err(io("write"))?;
                    if k == 0 {
                        return Err(format!("relay floor: {rel} ended {left} bytes short"));
                    }
                    f.write_all(&buf[..k]).map_err(io("write"))?;
                    left -= k as u64;
                }
            }
            Ok(())
        })?);
    }
    // A thread that fails drops its sockets, so the others of its stream end too.
    let mut failed = None;
    for h in threads {
        let r = h
            .join()
            .unwrap_or_else(|_| Err("relay floor: a thread panicked".into()));
        if let (Err(e), None) = (r, &failed) {
            failed = Some(e);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    sync()?;
    Ok(t.elapsed().as_secs_f64())
}
