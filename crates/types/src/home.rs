//! Where FerryMQ keeps its files, one owner for every process: `$FERRYMQ_HOME` (or
//! `~/.ferrymq`), and in it `qmgrs/<mapped name>/` per queue manager with its qm.ini, recovery log,
//! message store, bindings socket, pid and lock files and error log. The queue manager, the
//! command line, the client (for the bindings socket) and the tools all name paths through it.
//! (It reads one environment variable; it opens no file.)

use std::path::{Path, PathBuf};

/// The files of one queue manager.
#[derive(Debug, Clone)]
pub struct QmPaths {
    pub dir: PathBuf,
}

impl QmPaths {
    /// The directory of queue manager `name`: `<home>/qmgrs/<mapped name>`, the one place a name
    /// becomes a path (`crate::objects::qmgr_dir_name`: `/` becomes `&`, a leading `.`
    /// becomes `!`). Fails for a name that is not a valid queue manager name.
    pub fn new(home: &Path, name: &str) -> Result<QmPaths, String> {
        let dir = crate::objects::qmgr_dir_name(name)?;
        Ok(QmPaths {
            dir: Self::root(home).join(dir),
        })
    }
    /// The directory holding every queue manager's directory.
    pub fn root(home: &Path) -> PathBuf {
        home.join("qmgrs")
    }
    pub fn ini(&self) -> PathBuf {
        self.dir.join("qm.ini")
    }
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }
    pub fn store_dir(&self) -> PathBuf {
        self.dir.join("store")
    }
    /// The queue manager's user store: user ids, hashed passwords and groups (mode 0600).
    pub fn users(&self) -> PathBuf {
        self.dir.join("users")
    }
    /// The bindings-mode socket local applications connect through.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("qm.sock")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("qm.pid")
    }
    /// Held locked (flock) by the running queue manager: at most one process per queue manager.
    pub fn lock_file(&self) -> PathBuf {
        self.dir.join("qm.lock")
    }
    /// How the last run ended , read by `endmqm -w`.
    pub fn end_status(&self) -> PathBuf {
        self.dir.join("qm.end")
    }
    /// Where `*.mqsc` files applied at every start live unless qm.ini `AutoConfig:MQSCConfig`
    /// names another directory.
    pub fn autoconfig_dir(&self) -> PathBuf {
        self.dir.join("autocfg")
    }
    /// The error log's directory (the error log: FMQERR01..03.LOG, console.log).
    pub fn errors_dir(&self) -> PathBuf {
        self.dir.join("errors")
    }
    /// The current error-log file.
    pub fn error_log(&self) -> PathBuf {
        self.errors_dir().join(crate::objects::ERROR_LOG_FILES[0])
    }
    /// The queue manager process's stderr: what did not go through the error log (a panic).
    pub fn console_log(&self) -> PathBuf {
        self.errors_dir().join(crate::objects::CONSOLE_LOG)
    }
}

/// `$FERRYMQ_HOME`, or `~/.ferrymq`.
pub fn ferrymq_home() -> PathBuf {
    if let Some(h) = std::env::var_os("FERRYMQ_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".ferrymq")
}
