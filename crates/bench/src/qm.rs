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
    let out = Command::new(ferrymq_bin()?)
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

/// A TCP port free on the loopback interface right now.
pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}
