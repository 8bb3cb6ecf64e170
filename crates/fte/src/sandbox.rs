//! Where an agent may read and write files: the agent sandbox (MQ's `sandboxRoot` agent
//! property: absolute paths separated by `:`, a path after `!` excluded), and, whatever it says,
//! never FerryMQ's own data (`<home>/qmgrs`, where the queue managers keep their logs and
//! message stores, and `<home>/mqft`, the agents' own files): a transfer request is a message
//! anybody allowed to put on the command queue can write, and it must not be able to overwrite
//! a queue manager's log or read its users file.
//!
//! A path is judged where it really leads: made absolute, its `.` and `..` resolved, and the
//! symbolic links of its longest existing part followed, so neither `..` nor a link inside an
//! allowed directory leads out of it.

use std::path::{Component, Path, PathBuf};

use crate::{err, Result};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Allowed roots (none: anywhere, but `deny`).
    allow: Vec<PathBuf>,
    /// Excluded roots, within the allowed ones or not.
    deny: Vec<PathBuf>,
    /// FerryMQ's data under the home, refused whatever the sandbox says.
    own: Vec<PathBuf>,
}

impl Sandbox {
    /// The sandbox of an agent under `home` with `sandbox_root` (empty: no sandbox).
    pub fn new(home: &Path, sandbox_root: &str) -> Result<Sandbox> {
        let (allow, deny) = parse(sandbox_root)?;
        let home = absolute(home);
        Ok(Sandbox {
            allow: allow.iter().map(|p| real(p)).collect(),
            deny: deny.iter().map(|p| real(p)).collect(),
            own: [ferrymq_types::home::QmPaths::root(&home), home.join("mqft")]
                .iter()
                .map(|p| real(p))
                .collect(),
        })
    }

    /// Ok when the agent may read (`write` false) or write `path`; otherwise why not.
    pub fn check(&self, path: &Path, write: bool) -> std::result::Result<(), String> {
        let what = if write { "write" } else { "read" };
        let p = real(path);
        if self.own.iter().any(|o| p.starts_with(o)) {
            return Err(format!(
                "{}: an agent does not {what} FerryMQ's own data (queue managers and agents)",
                path.display()
            ));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|a| p.starts_with(a)) {
            return Err(format!(
                "{}: outside this agent's sandbox (sandboxRoot): the agent does not {what} it",
                path.display()
            ));
        }
        if self.deny.iter().any(|d| p.starts_with(d)) {
            return Err(format!(
                "{}: excluded from this agent's sandbox (sandboxRoot): the agent does not {what} it",
                path.display()
            ));
        }
        Ok(())
    }
}

/// The allowed and the excluded (`!`) paths of a `sandboxRoot` value; each must be absolute.
pub fn parse(v: &str) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut allow, mut deny) = (Vec::new(), Vec::new());
    for e in v.split(':').map(str::trim).filter(|e| !e.is_empty()) {
        let (list, p) = match e.strip_prefix('!') {
            Some(p) => (&mut deny, p),
            None => (&mut allow, e),
        };
        if !Path::new(p).is_absolute() {
            return err(format!(
                "agent.properties: sandboxRoot entry '{e}': give absolute paths, separated by ':' (a '!' before a path excludes it)"
            ));
        }
        list.push(PathBuf::from(p));
    }
    Ok((allow, deny))
}

/// `p` made absolute (against the working directory) with `.` and `..` resolved lexically.
fn absolute(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Where `p` really leads: absolute, and the longest part of it that exists with its symbolic
/// links followed (the rest, not yet created, appended as it is).
fn real(p: &Path) -> PathBuf {
    let abs = absolute(p);
    let mut head = abs.as_path();
    let mut tail = Vec::new();
    loop {
        if let Ok(r) = std::fs::canonicalize(head) {
            let mut out = r;
            for t in tail.iter().rev() {
                out.push(t);
            }
            return out;
        }
        match (head.parent(), head.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                head = parent;
            }
            _ => return abs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_allows_its_roots_less_the_excluded_and_never_ferrymqs_own_data() {
        let t = tempfile::tempdir().unwrap();
        let (home, ok, no) = (
            t.path().join("home"),
            t.path().join("ok"),
            t.path().join("ok/private"),
        );
        std::fs::create_dir_all(home.join("qmgrs/QM1")).unwrap();
        std::fs::create_dir_all(&no).unwrap();
        std::fs::create_dir_all(t.path().join("other")).unwrap();
        let root = format!("{}:!{}", ok.display(), no.display());
        let s = Sandbox::new(&home, &root).unwrap();
        assert!(s.check(&ok.join("a/b.bin"), true).is_ok());
        assert!(s
            .check(&no.join("b.bin"), true)
            .unwrap_err()
            .contains("excluded"));
        assert!(s
            .check(&t.path().join("other/x"), false)
            .unwrap_err()
            .contains("outside"));
        // `..` and a symbolic link do not lead out.
        assert!(s.check(&ok.join("../other/x"), true).is_err());
        std::os::unix::fs::symlink(t.path().join("other"), ok.join("link")).unwrap();
        assert!(s.check(&ok.join("link/x"), true).is_err());
        // No sandbox: anywhere but FerryMQ's own data, however it is named.
        let open = Sandbox::new(&home, "").unwrap();
        assert!(open.check(&t.path().join("other/x"), true).is_ok());
        let log = home.join("qmgrs/QM1/log/ring.000");
        assert!(open.check(&log, true).unwrap_err().contains("own data"));
        assert!(open
            .check(&home.join("mqft/agents/A/agent.properties"), false)
            .is_err());
        assert!(open
            .check(&t.path().join("other/../home/qmgrs/QM1"), true)
            .is_err());
        assert!(parse("relative/path").is_err());
    }
}
