//! A queue manager's configuration: its directory layout under `$FERRYMQ_HOME`, and the `qm.ini`
//! file of MQ-style stanzas (`Stanza:` lines followed by indented `Key=Value` lines) that
//! `crtmqm` writes and `setmqini`/`dspmqini` change and show. The stanzas and keys FerryMQ knows
//! are listed once, in [`KNOWN_KEYS`]: the readers below take keys only from it (checked in debug
//! builds), `setmqini` refuses others (unless forced), and the queue manager warns at start about
//! any others it finds. Unknown stanzas and keys are kept as they are, so nothing an administrator
//! set is lost.

use std::fmt;
use std::path::{Path, PathBuf};

use ferrymq_log::Durability;
use ferrymq_types::limits;

pub use ferrymq_types::home::{ferrymq_home, QmPaths};

/// Every qm.ini stanza and its keys that FerryMQ reads or writes, and MQ's keys that it keeps
/// without acting on them ([`MQ_KEYS_NOT_USED`]), so MQ's own setmqini lines run verbatim. A key
/// misspelt in qm.ini would otherwise be silently ignored.
pub const KNOWN_KEYS: &[(&str, &[&str])] = &[
    (
        "QueueManager",
        &[
            "Name",
            "Port",
            "IPAddress",
            "MaxHandles",
            "Description",
            "BackoutRequeue",
            "ExpiryInterval",
        ],
    ),
    (
        "Log",
        &[
            "LogType",
            "LogPrimaryFiles",
            "LogFilePages",
            "Durability",
            "DirectWrites",
            "CheckpointIntervalMs",
        ],
    ),
    (
        "Channels",
        &[
            "ShareConversations",
            "HeartbeatMs",
            "MaxChannels",
            "MaxActiveChannels",
            "MaxConnMemory",
            "RemoteAdmin",
        ],
    ),
    (
        "NativeHA",
        &[
            "Instances",
            "LocalName",
            "LocalAddress",
            "PreferredInstance",
            "MaxInFlight",
            "SslLink",
            "SslPeer",
        ],
    ),
    (
        "DR",
        &[
            "Role",
            "LocalAddress",
            "RemoteAddresses",
            "MaxLagBytes",
            "DisconnectGraceMs",
            "SslLink",
            "SslPeer",
        ],
    ),
    ("Metrics", &["Port", "Address"]),
    ("Security", &["AdminGroup", "ConnAuth"]),
    ("SSL", &["CertFile", "KeyFile", "CAFile"]),
    ("AutoConfig", &["MQSCConfig"]),
    ("QMErrorLog", &["ErrorLogSize", "Format"]),
    (
        "TuningParameters",
        &[
            "DefaultQFileSize",
            "DefaultQBufferSize",
            "DefaultPQBufferSize",
            "CpuWakeLatencyUs",
            "IoThreads",
            "MaxMessageMemory",
        ],
    ),
];

/// MQ qm.ini keys FerryMQ accepts and keeps but does not act on (its queues are not file-backed
/// buffers): `setmqini` says so when one is set.
pub const MQ_KEYS_NOT_USED: &[(&str, &str)] = &[
    ("TuningParameters", "DefaultQFileSize"),
    ("TuningParameters", "DefaultQBufferSize"),
    ("TuningParameters", "DefaultPQBufferSize"),
];

/// Whether `stanza:key` is one of [`MQ_KEYS_NOT_USED`].
pub fn is_kept_not_used(stanza: &str, key: &str) -> bool {
    MQ_KEYS_NOT_USED
        .iter()
        .any(|(s, k)| s.eq_ignore_ascii_case(stanza) && k.eq_ignore_ascii_case(key))
}

/// Whether `stanza:key` is in [`KNOWN_KEYS`]; if not, says what is valid there (the stanzas, or
/// the stanza's keys). Names match without regard to case, as qm.ini lookups do.
pub fn check_key(stanza: &str, key: &str) -> Result<(), String> {
    let Some((st, keys)) = KNOWN_KEYS
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(stanza))
    else {
        let all: Vec<&str> = KNOWN_KEYS.iter().map(|(s, _)| *s).collect();
        return Err(format!(
            "unknown qm.ini stanza '{stanza}'; known stanzas: {}",
            all.join(", ")
        ));
    };
    if keys.iter().any(|k| k.eq_ignore_ascii_case(key)) {
        return Ok(());
    }
    Err(format!(
        "unknown qm.ini key '{key}' in stanza '{st}'; its keys: {}",
        keys.join(", ")
    ))
}

/// The stanzas and keys of `ini` that FerryMQ does not know, one line each.
pub fn unknown_keys(ini: &Ini) -> Vec<String> {
    let mut out = Vec::new();
    for (stanza, kv) in &ini.stanzas {
        if kv.is_empty()
            && !KNOWN_KEYS
                .iter()
                .any(|(s, _)| s.eq_ignore_ascii_case(stanza))
        {
            if let Err(e) = check_key(stanza, "") {
                out.push(e);
            }
        }
        for (key, _) in kv {
            if let Err(e) = check_key(stanza, key) {
                out.push(e);
            }
        }
    }
    out.dedup();
    out
}

/// Reads a key the queue manager uses; the key must be in [`KNOWN_KEYS`].
fn known<'a>(ini: &'a Ini, stanza: &str, key: &str) -> Option<&'a str> {
    debug_assert!(
        check_key(stanza, key).is_ok(),
        "{stanza}:{key} not in KNOWN_KEYS"
    );
    ini.get(stanza, key)
}

/// An ordered list of stanzas, each an ordered list of key/value pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ini {
    pub stanzas: Vec<(String, Vec<(String, String)>)>,
}

impl Ini {
    pub fn parse(text: &str) -> Result<Ini, String> {
        let mut ini = Ini::default();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split(['#', ';']).next().unwrap_or("").trim_end();
            if line.trim().is_empty() {
                continue;
            }
            if !line.starts_with([' ', '\t']) {
                let name = line.trim().strip_suffix(':').ok_or_else(|| {
                    format!(
                        "line {}: '{}' is neither a stanza ('Name:') nor an indented 'Key=Value'",
                        n + 1,
                        raw.trim()
                    )
                })?;
                ini.stanzas.push((name.trim().to_string(), Vec::new()));
                continue;
            }
            let (k, v) = line
                .trim()
                .split_once('=')
                .ok_or_else(|| format!("line {}: '{}' has no '='", n + 1, line.trim()))?;
            let st = ini
                .stanzas
                .last_mut()
                .ok_or_else(|| format!("line {}: a key before any stanza", n + 1))?;
            st.1.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(ini)
    }

    pub fn get(&self, stanza: &str, key: &str) -> Option<&str> {
        self.stanzas
            .iter()
            .filter(|(s, _)| s.eq_ignore_ascii_case(stanza))
            .flat_map(|(_, kv)| kv.iter())
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    /// Sets a key, creating the stanza if needed.
    pub fn set(&mut self, stanza: &str, key: &str, value: &str) {
        let idx = match self
            .stanzas
            .iter()
            .position(|(s, _)| s.eq_ignore_ascii_case(stanza))
        {
            Some(i) => i,
            None => {
                self.stanzas.push((stanza.to_string(), Vec::new()));
                self.stanzas.len() - 1
            }
        };
        let kv = &mut self.stanzas[idx].1;
        match kv.iter_mut().find(|(k, _)| k.eq_ignore_ascii_case(key)) {
            Some(slot) => slot.1 = value.to_string(),
            None => kv.push((key.to_string(), value.to_string())),
        }
    }

    pub fn load(path: &Path) -> Result<Ini, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ini::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Whether every stanza name, key and value reads back unchanged once written: each is one
    /// line without a comment character (`#`, `;`) or blanks around it, and a key has no `=`.
    /// A value that failed this would be cut short on the next read, or end the file's parse
    /// there and stop the queue manager from starting.
    pub fn check_writable(&self) -> Result<(), String> {
        fn one(what: &str, s: &str, extra: &[char]) -> Result<(), String> {
            let bad = |c: char| c == '\n' || c == '#' || c == ';' || extra.contains(&c);
            if let Some(c) = s.chars().find(|&c| bad(c)) {
                return Err(format!(
                    "{what} {s:?} cannot be written to qm.ini: it holds {c:?} \
                     (stanza names, keys and values are one line, without '#' or ';')"
                ));
            }
            if s.trim() != s {
                return Err(format!(
                    "{what} {s:?} cannot be written to qm.ini: blanks around it would be lost"
                ));
            }
            Ok(())
        }
        for (stanza, kv) in &self.stanzas {
            one("stanza name", stanza, &[])?;
            for (k, v) in kv {
                one(&format!("{stanza}: key"), k, &['='])?;
                one(&format!("{stanza}:{k} value"), v, &[])?;
            }
        }
        Ok(())
    }

    /// Writes atomically (temporary file, then rename) so a crash never leaves half a file.
    /// Refuses (writing nothing) what would not read back as it is.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        self.check_writable()?;
        let tmp = path.with_extension("ini.tmp");
        std::fs::write(&tmp, self.to_string())
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot replace {}: {e}", path.display()))
    }
}

impl fmt::Display for Ini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, kv)) in self.stanzas.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(f, "{name}:")?;
            for (k, v) in kv {
                writeln!(f, "   {k}={v}")?;
            }
        }
        Ok(())
    }
}

/// Which client (TCP) connections may send MQSC (qm.ini `Channels:RemoteAdmin`). Bindings
/// connections always may; the object authority manager decides each command either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteAdmin {
    /// None (`no`; the default of a queue manager whose qm.ini does not say).
    No,
    /// Conversations on SYSTEM.ADMIN.SVRCONN that authenticated with a password (CONNAUTH)
    /// (`authenticated`; what crtmqm writes for a new queue manager).
    Authenticated,
    /// Every client conversation (`yes`), whoever it runs as.
    Any,
}

impl RemoteAdmin {
    /// The channel remote administration goes through with [`RemoteAdmin::Authenticated`].
    pub const CHANNEL: &'static str = "SYSTEM.ADMIN.SVRCONN";

    pub fn parse(v: &str) -> Option<RemoteAdmin> {
        match v.trim().to_ascii_lowercase().as_str() {
            "no" => Some(RemoteAdmin::No),
            "authenticated" => Some(RemoteAdmin::Authenticated),
            "yes" => Some(RemoteAdmin::Any),
            _ => None,
        }
    }
}

/// The settings the running queue manager uses, read from `qm.ini`.
#[derive(Debug, Clone)]
pub struct QmConfig {
    pub name: String,
    /// TCP listener port; 0 means no TCP listener (bindings mode only).
    pub port: u16,
    pub bind_address: String,
    pub log_primary_files: u32,
    pub log_file_pages: u32,
    pub durability: Durability,
    /// Write the recovery log with `O_DIRECT | O_DSYNC` where the filesystem allows it (qm.ini
    /// `Log:DirectWrites`, default yes; only under `fsync` durability).
    pub log_direct_writes: bool,
    pub max_handles: u32,
    pub sharecnv: u16,
    pub heartbeat_ms: u32,
    /// Most client connections (sockets) accepted at once (qm.ini `Channels:MaxChannels`).
    pub max_sockets: usize,
    /// Most client channels running at once (qm.ini `Channels:MaxActiveChannels`, default
    /// MaxChannels). Every client socket is a running channel, so the smaller of the two bounds.
    pub max_active: usize,
    /// Most bytes of replies one socket may have queued for its client (qm.ini
    /// `Channels:MaxConnMemory`); reading its requests pauses at a quarter of this (at most
    /// `CONN_OUTBOUND_PAUSE_BYTES`).
    pub max_conn_memory: u64,
    /// Most memory the messages of this queue manager may hold, bodies and a fixed share per
    /// message (qm.ini `TuningParameters:MaxMessageMemory`, bytes; 0: no limit). Default: half
    /// of the machine's memory, or of the process's cgroup limit when that is lower
    /// ([`default_message_memory`]). Past it puts and publications are refused with
    /// MQRC_STORAGE_NOT_AVAILABLE; messages already held (a restart's) are all loaded.
    pub message_memory_max: u64,
    /// While application work runs, the bound on every CPU's wake-up latency asked of the kernel
    /// (qm.ini `TuningParameters:CpuWakeLatencyUs`; none unless set). See `wake_latency`.
    pub cpu_wake_latency_us: Option<u32>,
    /// Worker threads of the I/O runtime that serves every socket (qm.ini
    /// `TuningParameters:IoThreads`, 1 to `limits::IO_THREADS_MAX`, default 2). The engine is one
    /// lock, so a queue manager is about one core of work; a second thread overlaps socket reads
    /// and writes, and on a machine with few cores costs contention on that lock instead.
    pub io_threads: usize,
    /// Which client (TCP) connections may send MQSC (qm.ini `Channels:RemoteAdmin`).
    pub remote_admin: RemoteAdmin,
    /// The operating-system group whose members hold every authority, as the queue manager's
    /// own user does (qm.ini `Security:AdminGroup`, default `mqm`).
    pub admin_group: String,
    /// Connection authentication through the default AUTHINFO (SYSTEM.DEFAULT.AUTHINFO.IDPWOS)
    /// is enforced (qm.ini `Security:ConnAuth=on`; off by default, so that a new release does
    /// not refuse every existing client). An AUTHINFO an administrator names in QMGR CONNAUTH is
    /// enforced either way.
    pub connauth: bool,
    /// A backout moves a message that reached BOTHRESH to BOQNAME or the dead-letter queue
    /// (qm.ini `QueueManager:BackoutRequeue=yes`, the default); `no` leaves it on its queue for
    /// the application, as MQ does.
    pub backout_requeue: bool,
    /// Seconds between two expiry scans (qm.ini `QueueManager:ExpiryInterval`, default 60; 0
    /// turns the scan off, and expired messages then leave only when a get or browse meets them).
    pub expiry_interval_s: u64,
    /// A checkpoint is taken at least this often while anything is being logged.
    pub checkpoint_interval_ms: u64,
    /// Set when this queue manager is one instance of a replicated (HA) group.
    pub ha: Option<HaConfig>,
    /// Set when this queue manager takes part in disaster recovery (qm.ini `DR:`).
    pub dr: Option<DrConfig>,
    /// Where Prometheus metrics are served over HTTP (`host:port`, qm.ini `Metrics:Port` and
    /// `Metrics:Address`, default address 127.0.0.1); None: not served.
    pub metrics: Option<String>,
    /// The queue manager's TLS key repository (qm.ini `SSL:CertFile`, `KeyFile`, `CAFile`; a
    /// relative path is under the queue manager's directory); None: TLS sockets are refused.
    pub ssl: Option<ferrymq_security::tls::KeyRepoPaths>,
    /// The directory whose `*.mqsc` files are applied at every start (qm.ini
    /// `AutoConfig:MQSCConfig`, as MQ names it); None: `<qmdir>/autocfg`.
    pub autoconfig_dir: Option<PathBuf>,
}

/// A queue manager's part in disaster recovery: the role it has now and where the other site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrRole {
    /// Runs applications and ships its log to the recovery site.
    Primary,
    /// Receives a primary's log and refuses applications until `makedrprimary`.
    Secondary,
}

/// qm.ini `DR:` stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrConfig {
    pub role: DrRole,
    /// Where a secondary listens for the stream (`DR:LocalAddress`, `host:port`).
    pub local: Option<String>,
    /// The other site's DR addresses, tried in order (`DR:RemoteAddresses`, `host:port` each;
    /// every instance of a recovery HA group).
    pub remote: Vec<String>,
    /// The most log a primary lets applications get ahead of the recovery site
    /// (`DR:MaxLagBytes`); past it, replies to puts and commits wait.
    pub max_lag_bytes: u64,
    /// How long the bound still holds after the link drops (`DR:DisconnectGraceMs`).
    pub disconnect_grace_ms: u64,
    /// The DR link is mutual TLS (`DR:SslLink`, `DR:SslPeer`).
    pub link_tls: LinkTlsConfig,
}

/// Whether a link between a queue manager's instances (HA replication, the DR stream) is mutual
/// TLS with the SSL stanza's key repository (`SslLink=Required`), and the DN filter the peer's
/// certificate must match (`SslPeer`, SSLPEER's syntax).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkTlsConfig {
    pub required: bool,
    pub peer: Option<String>,
}

impl LinkTlsConfig {
    fn from_ini(ini: &Ini, stanza: &str) -> Result<LinkTlsConfig, String> {
        let required = match known(ini, stanza, "SslLink").map(|v| v.trim().to_ascii_lowercase()) {
            None => false,
            Some(v) => match v.as_str() {
                "required" | "yes" => true,
                "no" | "none" | "" => false,
                _ => {
                    return Err(format!(
                        "qm.ini {stanza}:SslLink={v}: use 'Required' (mutual TLS with the SSL stanza's key repository) or 'No'"
                    ))
                }
            },
        };
        let peer = known(ini, stanza, "SslPeer")
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        if let Some(p) = &peer {
            ferrymq_security::tls::check_filter(p)
                .map_err(|e| format!("qm.ini {stanza}:SslPeer={p}: {e}"))?;
            if !required {
                return Err(format!(
                    "qm.ini {stanza}:SslPeer is set but {stanza}:SslLink is not Required"
                ));
            }
        }
        Ok(LinkTlsConfig { required, peer })
    }
}

/// MQ's appliance holds at most 4 MB per queue manager in flight to the recovery site.
pub const DR_MAX_LAG_DEFAULT: u64 = 4 * 1024 * 1024;
/// The smallest `DR:MaxLagBytes` accepted.
pub const DR_MIN_LAG: u64 = 64 * 1024;

pub use ferrymq_types::conname::{parse_addr, parse_addr_list};

impl DrConfig {
    fn from_ini(ini: &Ini) -> Result<Option<DrConfig>, String> {
        let Some(role) = known(ini, "DR", "Role") else {
            return Ok(None);
        };
        let role = match role.to_ascii_lowercase().as_str() {
            "primary" => DrRole::Primary,
            "secondary" => DrRole::Secondary,
            _ => return Err(format!("qm.ini DR:Role={role}: use Primary or Secondary")),
        };
        let local = known(ini, "DR", "LocalAddress")
            .map(parse_addr)
            .transpose()
            .map_err(|e| format!("qm.ini DR:LocalAddress: {e}"))?;
        let remote = match known(ini, "DR", "RemoteAddresses") {
            None => Vec::new(),
            Some(l) => parse_addr_list(l).map_err(|e| format!("qm.ini DR:RemoteAddresses: {e}"))?,
        };
        if role == DrRole::Secondary && local.is_none() {
            return Err(
                "qm.ini DR:Role=Secondary needs LocalAddress=host(port) to receive the stream on"
                    .into(),
            );
        }
        let max_lag_bytes = num(ini, "DR", "MaxLagBytes", DR_MAX_LAG_DEFAULT)?;
        if max_lag_bytes < DR_MIN_LAG {
            return Err(format!(
                "qm.ini DR:MaxLagBytes={max_lag_bytes}: use at least 65536"
            ));
        }
        Ok(Some(DrConfig {
            role,
            local,
            remote,
            max_lag_bytes,
            disconnect_grace_ms: num(ini, "DR", "DisconnectGraceMs", 5_000u64)?,
            link_tls: LinkTlsConfig::from_ini(ini, "DR")?,
        }))
    }
}

/// The HA group a queue manager instance belongs to (qm.ini `NativeHA:` stanza).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaConfig {
    /// This instance's name.
    pub local: String,
    /// Every instance in the group, in the order given to `crtmqm` (the order defines the
    /// instances' Raft node ids, 1, 2, 3...): name and replication address `host:port`.
    pub instances: Vec<(String, String)>,
    /// The address this instance listens on for replication when it differs from its entry in
    /// `instances` (`NativeHA:LocalAddress`, e.g. behind a relay or NAT).
    pub local_bind: Option<String>,
    /// The instance to make active whenever it is in sync (`sethapreferred`).
    pub preferred: Option<String>,
    /// Replicated batches in flight at once (`NativeHA:MaxInFlight`, a tuning knob).
    pub max_in_flight: Option<usize>,
    /// The replication links are mutual TLS (`NativeHA:SslLink`, `NativeHA:SslPeer`).
    pub link_tls: LinkTlsConfig,
}

/// The kernel's range of ephemeral ports (`/proc/sys/net/ipv4/ip_local_port_range`): the local
/// ports it hands to outgoing connections and to listeners bound to port 0. `None` where it cannot
/// be read (not Linux).
pub fn ephemeral_port_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    parse_port_range(&text)
}

fn parse_port_range(text: &str) -> Option<(u16, u16)> {
    let mut it = text.split_whitespace().map(|w| w.parse::<u16>().ok());
    let lo = it.next()??;
    let hi = it.next()??;
    (lo <= hi).then_some((lo, hi))
}

/// Why a replication address (`host:port`) is a poor choice: its port lies in the kernel's
/// ephemeral range `range`, so any outgoing connection on the host may hold it while the instance
/// is down and the instance then cannot listen on it when it restarts.
pub fn ephemeral_port_warning(addr: &str, range: (u16, u16)) -> Option<String> {
    let port: u16 = addr.rsplit_once(':')?.1.parse().ok()?;
    (range.0..=range.1).contains(&port).then(|| {
        format!(
            "replication port {port} ({addr}) is inside the kernel's ephemeral port range \
             {}-{} (/proc/sys/net/ipv4/ip_local_port_range): an outgoing connection may hold it \
             while the instance is down and stop it from restarting; use a port below {}",
            range.0, range.1, range.0
        )
    })
}

impl HaConfig {
    /// Parses `name=host(port),name=host(port),...`.
    pub fn parse_instances(text: &str) -> Result<Vec<(String, String)>, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, addr) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected name=host(port)"))?;
            let addr = parse_addr(addr).map_err(|e| format!("'{part}': {e}"))?;
            let name = name.trim().to_string();
            if name.is_empty() || out.iter().any(|(n, _)| *n == name) {
                return Err(format!("'{part}': instance names must be given and unique"));
            }
            out.push((name, addr));
        }
        if out.len() < 2 {
            return Err(
                "an HA group needs at least two instances (three to survive the loss of one)"
                    .into(),
            );
        }
        Ok(out)
    }

    /// The Raft node id of instance `name`.
    pub fn node_id(&self, name: &str) -> Option<u64> {
        self.instances
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| i as u64 + 1)
    }

    pub fn local_id(&self) -> u64 {
        self.node_id(&self.local).expect("validated")
    }

    pub fn name_of(&self, id: u64) -> &str {
        self.instances
            .get((id as usize).wrapping_sub(1))
            .map_or("?", |(n, _)| n.as_str())
    }

    pub fn local_addr(&self) -> &str {
        &self.instances[self.local_id() as usize - 1].1
    }

    /// Where this instance listens for replication.
    pub fn bind_addr(&self) -> &str {
        self.local_bind.as_deref().unwrap_or(self.local_addr())
    }

    fn from_ini(ini: &Ini) -> Result<Option<HaConfig>, String> {
        let Some(list) = known(ini, "NativeHA", "Instances") else {
            return Ok(None);
        };
        let instances = HaConfig::parse_instances(list)
            .map_err(|e| format!("qm.ini NativeHA:Instances: {e}"))?;
        let local = known(ini, "NativeHA", "LocalName")
            .ok_or("qm.ini NativeHA: has Instances= but no LocalName=")?
            .to_string();
        let cfg = HaConfig {
            local,
            instances,
            local_bind: known(ini, "NativeHA", "LocalAddress").map(str::to_string),
            preferred: known(ini, "NativeHA", "PreferredInstance").map(str::to_string),
            max_in_flight: match known(ini, "NativeHA", "MaxInFlight") {
                None => None,
                Some(v) => Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|n| (1..=1024).contains(n))
                        .ok_or_else(|| format!("qm.ini NativeHA:MaxInFlight={v}: use 1..1024"))?,
                ),
            },
            link_tls: LinkTlsConfig::from_ini(ini, "NativeHA")?,
        };
        if cfg.node_id(&cfg.local).is_none() {
            return Err(format!(
                "qm.ini NativeHA:LocalName={} is not one of the Instances",
                cfg.local
            ));
        }
        Ok(Some(cfg))
    }
}

/// qm.ini `SSL:` stanza: all three files, or none (TLS off).
pub fn ssl_from_ini(ini: &Ini) -> Result<Option<ferrymq_security::tls::KeyRepoPaths>, String> {
    let get = |k: &str| {
        known(ini, "SSL", k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    match (get("CertFile"), get("KeyFile"), get("CAFile")) {
        (None, None, None) => Ok(None),
        (Some(c), Some(k), Some(a)) => Ok(Some(ferrymq_security::tls::KeyRepoPaths {
            cert_file: c.into(),
            key_file: k.into(),
            ca_file: a.into(),
        })),
        _ => Err(
            "qm.ini SSL: needs all of CertFile=, KeyFile= and CAFile= (PEM files; relative to the queue manager's directory), or none of them"
                .into(),
        ),
    }
}

/// `TuningParameters:MaxMessageMemory`'s default: half of the memory this process may use —
/// the machine's (`MemTotal`) or its cgroup's limit if lower ([`cgroup_memory_limit`]) — so
/// that queues filled with large messages end in MQRC_STORAGE_NOT_AVAILABLE, not in the kernel
/// killing the queue manager. 4 GiB when neither can be read.
pub fn default_message_memory() -> u64 {
    let mem_total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| cgroup_memory_limit(&t, |p| std::fs::read_to_string(p).ok()));
    match (mem_total, cgroup) {
        (Some(m), Some(c)) => m.min(c) / 2,
        (Some(m), None) => m / 2,
        (None, Some(c)) => c / 2,
        (None, None) => 4 << 30,
    }
}

/// The memory limit of this process's cgroup, from `/proc/self/cgroup` (`cgroup`) and the
/// files `read` returns: v2's `memory.max` or v1's `memory.limit_in_bytes`, under the cgroup's
/// path or, inside a container that shows its own cgroup as a path of the host's, at the
/// controller's root. None when there is none ("max", or v1's "no limit" near 2^63).
fn cgroup_memory_limit(cgroup: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let mut files = Vec::new();
    for line in cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.is_empty() {
            files.push(format!("/sys/fs/cgroup{path}/memory.max"));
            files.push("/sys/fs/cgroup/memory.max".to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            files.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
            files.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string());
        }
    }
    files
        .iter()
        .filter_map(|f| read(f)?.trim().parse::<u64>().ok())
        .filter(|&v| v < 1 << 62)
        .min()
}

fn num<T: std::str::FromStr>(ini: &Ini, stanza: &str, key: &str, default: T) -> Result<T, String> {
    match known(ini, stanza, key) {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| format!("qm.ini {stanza}:{key}={v} is not a valid number")),
    }
}

impl QmConfig {
    pub fn from_ini(ini: &Ini) -> Result<QmConfig, String> {
        let name = known(ini, "QueueManager", "Name")
            .ok_or("qm.ini has no QueueManager: Name=")?
            .to_string();
        let durability = match known(ini, "Log", "Durability") {
            None => Durability::Fsync,
            Some(v) => v
                .parse()
                .map_err(|_| format!("qm.ini Log:Durability={v}: use 'fsync' or 'os'"))?,
        };
        let cfg = QmConfig {
            name,
            port: num(ini, "QueueManager", "Port", 1414)?,
            bind_address: known(ini, "QueueManager", "IPAddress")
                .unwrap_or("0.0.0.0")
                .to_string(),
            log_primary_files: num(
                ini,
                "Log",
                "LogPrimaryFiles",
                limits::LOG_PRIMARY_FILES_DEFAULT,
            )?,
            log_file_pages: num(ini, "Log", "LogFilePages", limits::LOG_FILE_PAGES_DEFAULT)?,
            durability,
            log_direct_writes: match known(ini, "Log", "DirectWrites") {
                None => true,
                Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(format!("qm.ini Log:DirectWrites={v}: use 'yes' or 'no'")),
                },
            },
            max_handles: num(
                ini,
                "QueueManager",
                "MaxHandles",
                limits::HANDLES_PER_CONN_DEFAULT,
            )?,
            sharecnv: num(
                ini,
                "Channels",
                "ShareConversations",
                limits::SHARECNV_DEFAULT,
            )?,
            heartbeat_ms: num(ini, "Channels", "HeartbeatMs", limits::HEARTBEAT_DEFAULT_MS)?,
            max_sockets: num(ini, "Channels", "MaxChannels", limits::MAX_CHANNELS_DEFAULT)?,
            // As in MQ, MaxActiveChannels defaults to MaxChannels.
            max_active: num(
                ini,
                "Channels",
                "MaxActiveChannels",
                num(ini, "Channels", "MaxChannels", limits::MAX_CHANNELS_DEFAULT)?,
            )?,
            max_conn_memory: {
                let v = num(
                    ini,
                    "Channels",
                    "MaxConnMemory",
                    limits::CONN_MEMORY_DEFAULT_BYTES,
                )?;
                if v < limits::CONN_MEMORY_MIN_BYTES {
                    return Err(format!(
                        "qm.ini Channels:MaxConnMemory={v} is below the minimum of {} bytes",
                        limits::CONN_MEMORY_MIN_BYTES
                    ));
                }
                v
            },
            message_memory_max: num(
                ini,
                "TuningParameters",
                "MaxMessageMemory",
                default_message_memory(),
            )?,
            checkpoint_interval_ms: num(ini, "Log", "CheckpointIntervalMs", 30_000u64)?,
            cpu_wake_latency_us: match known(ini, "TuningParameters", "CpuWakeLatencyUs") {
                None => None,
                Some(v) => match v.trim().parse::<u32>() {
                    Ok(us) if us <= limits::CPU_WAKE_LATENCY_MAX_US => Some(us),
                    _ => {
                        return Err(format!(
                            "qm.ini TuningParameters:CpuWakeLatencyUs={v}: use microseconds \
                             from 0 to {} (0: idle CPUs poll while messages flow), or remove \
                             the key",
                            limits::CPU_WAKE_LATENCY_MAX_US
                        ))
                    }
                },
            },
            io_threads: match num(
                ini,
                "TuningParameters",
                "IoThreads",
                limits::IO_THREADS_DEFAULT,
            )? {
                n @ 1..=limits::IO_THREADS_MAX => n,
                n => {
                    return Err(format!(
                        "qm.ini TuningParameters:IoThreads={n}: use 1 to {} threads, or remove the \
                         key (default {})",
                        limits::IO_THREADS_MAX,
                        limits::IO_THREADS_DEFAULT
                    ))
                }
            },
            admin_group: known(ini, "Security", "AdminGroup")
                .map(|g| g.trim().to_string())
                .filter(|g| !g.is_empty())
                .unwrap_or_else(|| "mqm".to_string()),
            remote_admin: match known(ini, "Channels", "RemoteAdmin") {
                None => RemoteAdmin::No,
                Some(v) => RemoteAdmin::parse(v).ok_or_else(|| {
                    format!("qm.ini Channels:RemoteAdmin={v}: use 'authenticated', 'yes' or 'no'")
                })?,
            },
            connauth: match known(ini, "Security", "ConnAuth") {
                None => false,
                Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                    "on" | "yes" => true,
                    "off" | "no" => false,
                    _ => return Err(format!("qm.ini Security:ConnAuth={v}: use 'on' or 'off'")),
                },
            },
            backout_requeue: match known(ini, "QueueManager", "BackoutRequeue") {
                None => true,
                Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => {
                        return Err(format!(
                            "qm.ini QueueManager:BackoutRequeue={v}: use 'yes' or 'no'"
                        ))
                    }
                },
            },
            expiry_interval_s: num(ini, "QueueManager", "ExpiryInterval", 60u64)?,
            ha: HaConfig::from_ini(ini)?,
            dr: DrConfig::from_ini(ini)?,
            ssl: ssl_from_ini(ini)?,
            autoconfig_dir: known(ini, "AutoConfig", "MQSCConfig")
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            metrics: match known(ini, "Metrics", "Port") {
                None => None,
                Some(_) => {
                    let port: u16 = num(ini, "Metrics", "Port", 0)?;
                    let addr = known(ini, "Metrics", "Address").unwrap_or("127.0.0.1");
                    (port != 0).then(|| format!("{addr}:{port}"))
                }
            },
        };
        let tls_links = [
            ("NativeHA", cfg.ha.as_ref().map(|h| &h.link_tls)),
            ("DR", cfg.dr.as_ref().map(|d| &d.link_tls)),
        ];
        for (stanza, link) in tls_links {
            if link.is_some_and(|l| l.required) && cfg.ssl.is_none() {
                return Err(format!(
                    "qm.ini {stanza}:SslLink=Required needs the SSL stanza's key repository (CertFile=, KeyFile=, CAFile=)"
                ));
            }
        }
        Ok(cfg)
    }
}

/// The error log's settings (`QMErrorLog:ErrorLogSize`, bytes per file before rotation;
/// `QMErrorLog:Format`, `text` or `json`), and a warning for each value that is not valid (the
/// default is used for it: a typo must not stop the queue manager from reporting).
pub fn error_log_settings(ini: &Ini) -> (crate::errlog::Settings, Vec<String>) {
    use crate::errlog::{Settings, MIN_FILE_BYTES};
    let mut s = Settings::default();
    let mut warnings = Vec::new();
    if let Some(v) = known(ini, "QMErrorLog", "ErrorLogSize") {
        match v.trim().parse::<u64>() {
            Ok(n) if n >= MIN_FILE_BYTES => s.file_bytes = n,
            _ => warnings.push(format!(
                "QMErrorLog:ErrorLogSize={v} is not a number of bytes >= {MIN_FILE_BYTES}; {} is used",
                s.file_bytes
            )),
        }
    }
    if let Some(v) = known(ini, "QMErrorLog", "Format") {
        match v.trim().to_ascii_lowercase().as_str() {
            "text" => s.json = false,
            "json" => s.json = true,
            _ => warnings.push(format!(
                "QMErrorLog:Format={v} is neither text nor json; text is used"
            )),
        }
    }
    (s, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_memory_limit_is_found_for_v1_and_v2_and_no_limit_is_none() {
        let files = |m: &'static [(&'static str, &'static str)]| {
            move |p: &str| m.iter().find(|(f, _)| *f == p).map(|(_, v)| v.to_string())
        };
        // v2, nested: the cgroup's own file.
        let v2 = "0::/system.slice/qm.service\n";
        let m = files(&[(
            "/sys/fs/cgroup/system.slice/qm.service/memory.max",
            "2147483648\n",
        )]);
        assert_eq!(cgroup_memory_limit(v2, m), Some(2 << 30));
        assert_eq!(
            cgroup_memory_limit(v2, files(&[("/sys/fs/cgroup/memory.max", "max\n")])),
            None
        );
        // v1 (a container seeing the host's path): the controller's root file.
        let v1 = "9:name=systemd:/\n4:memory:/docker/abc\n0::/\n";
        let m = files(&[("/sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824")]);
        assert_eq!(cgroup_memory_limit(v1, m), Some(1 << 30));
        // v1's "unlimited" (near 2^63), and nothing readable.
        let m = files(&[(
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
            "9223372036854771712",
        )]);
        assert_eq!(cgroup_memory_limit(v1, m), None);
        assert_eq!(cgroup_memory_limit(v1, |_: &str| None), None);
        // The default is half of something, never zero (no limit).
        assert!(default_message_memory() > 0);
    }

    #[test]
    fn error_log_settings_are_read_and_bad_ones_named() {
        let ini = Ini::parse("QMErrorLog:\n   ErrorLogSize=65536\n   Format=JSON\n").unwrap();
        let (s, w) = error_log_settings(&ini);
        assert_eq!((s.file_bytes, s.json, w.len()), (65536, true, 0));
        let ini = Ini::parse("QMErrorLog:\n   ErrorLogSize=12\n   Format=xml\n").unwrap();
        let (s, w) = error_log_settings(&ini);
        assert_eq!(s, crate::errlog::Settings::default());
        assert_eq!(w.len(), 2, "{w:?}");
    }

    #[test]
    fn io_threads_default_to_two_and_a_value_out_of_range_is_named() {
        let base = "QueueManager:\n   Name=QM1\n";
        let cfg = |extra: &str| QmConfig::from_ini(&Ini::parse(&format!("{base}{extra}")).unwrap());
        assert_eq!(cfg("").unwrap().io_threads, 2);
        let one = cfg("TuningParameters:\n   IoThreads=1\n").unwrap();
        assert_eq!(one.io_threads, 1);
        for bad in ["0", "17", "two", "-1"] {
            let e = cfg(&format!("TuningParameters:\n   IoThreads={bad}\n")).unwrap_err();
            assert!(e.contains("IoThreads"), "{e}");
        }
    }

    #[test]
    fn direct_log_writes_are_on_unless_turned_off_and_a_bad_value_is_named() {
        let base = "QueueManager:\n   Name=QM1\n";
        let cfg = |extra: &str| QmConfig::from_ini(&Ini::parse(&format!("{base}{extra}")).unwrap());
        assert!(cfg("").unwrap().log_direct_writes);
        assert!(
            cfg("Log:\n   DirectWrites=yes\n")
                .unwrap()
                .log_direct_writes
        );
        assert!(!cfg("Log:\n   DirectWrites=NO\n").unwrap().log_direct_writes);
        let e = cfg("Log:\n   DirectWrites=sometimes\n").unwrap_err();
        assert!(e.contains("Log:DirectWrites=sometimes"), "{e}");
    }

    #[test]
    fn cpu_wake_latency_is_off_unless_set_and_a_bad_value_is_named() {
        let base = "QueueManager:\n   Name=QM1\n";
        let cfg = |extra: &str| QmConfig::from_ini(&Ini::parse(&format!("{base}{extra}")).unwrap());
        assert_eq!(cfg("").unwrap().cpu_wake_latency_us, None);
        let on = cfg("TuningParameters:\n   CpuWakeLatencyUs=0\n").unwrap();
        assert_eq!(on.cpu_wake_latency_us, Some(0));
        for bad in ["-1", "fast", "10001"] {
            let e = cfg(&format!("TuningParameters:\n   CpuWakeLatencyUs={bad}\n")).unwrap_err();
            assert!(e.contains("CpuWakeLatencyUs") && e.contains("10000"), "{e}");
        }
    }

    #[test]
    fn tls_links_need_the_ssl_stanza_and_a_well_formed_peer_filter() {
        let base = "QueueManager:\n   Name=QM1\nNativeHA:\n   Instances=a=h(1501),b=h(1502)\n   LocalName=a\n";
        let cfg = |extra: &str| QmConfig::from_ini(&Ini::parse(&format!("{base}{extra}")).unwrap());
        let ha = |extra: &str| cfg(extra).map(|c| c.ha.unwrap().link_tls);
        assert_eq!(ha("").unwrap(), LinkTlsConfig::default());
        let ssl = "SSL:\n   CertFile=qm.pem\n   KeyFile=qm.key\n   CAFile=ca.pem\n";
        let on = ha(&format!(
            "   SslLink=Required\n   SslPeer=OU=queue managers\n{ssl}"
        ))
        .unwrap();
        assert!(on.required && on.peer.as_deref() == Some("OU=queue managers"));
        let e = ha("   SslLink=Required\n").unwrap_err();
        assert!(
            e.contains("NativeHA:SslLink") && e.contains("SSL stanza"),
            "{e}"
        );
        let e = ha(&format!("   SslLink=maybe\n{ssl}")).unwrap_err();
        assert!(e.contains("Required"), "{e}");
        let e = ha(&format!("   SslPeer=CN=x\n{ssl}")).unwrap_err();
        assert!(e.contains("SslLink is not Required"), "{e}");
        let e = ha(&format!("   SslLink=Required\n   SslPeer=nonsense\n{ssl}")).unwrap_err();
        assert!(e.contains("SslPeer"), "{e}");
        let dr = "DR:\n   Role=Primary\n   RemoteAddresses=h(1600)\n   SslLink=Required\n";
        let e = cfg(dr).unwrap_err();
        assert!(e.contains("DR:SslLink"), "{e}");
        assert!(
            cfg(&format!("{dr}{ssl}"))
                .unwrap()
                .dr
                .unwrap()
                .link_tls
                .required
        );
    }

    #[test]
    fn replication_ports_in_the_ephemeral_range_are_flagged() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_port_range("x 1"), None);
        let r = (32768, 60999);
        assert!(ephemeral_port_warning("127.0.0.1:40000", r)
            .unwrap()
            .contains("below 32768"));
        assert!(ephemeral_port_warning("127.0.0.1:32768", r).is_some());
        assert!(ephemeral_port_warning("127.0.0.1:60999", r).is_some());
        assert!(ephemeral_port_warning("127.0.0.1:32767", r).is_none());
        assert!(ephemeral_port_warning("[::1]:9414", r).is_none());
    }

    #[test]
    fn remote_admin_is_off_unless_qm_ini_says_otherwise() {
        let cfg = |v: Option<&str>| {
            let mut ini = Ini::default();
            ini.set("QueueManager", "Name", "QM1");
            if let Some(v) = v {
                ini.set("Channels", "RemoteAdmin", v);
            }
            QmConfig::from_ini(&ini).map(|c| c.remote_admin)
        };
        assert_eq!(cfg(None), Ok(RemoteAdmin::No));
        assert_eq!(cfg(Some("no")), Ok(RemoteAdmin::No));
        assert_eq!(cfg(Some("Authenticated")), Ok(RemoteAdmin::Authenticated));
        assert_eq!(cfg(Some("yes")), Ok(RemoteAdmin::Any));
        let e = cfg(Some("maybe")).unwrap_err();
        assert!(e.contains("authenticated"), "{e}");
    }

    #[test]
    fn ini_round_trips_and_keeps_unknown_keys() {
        let text = "QueueManager:\n   Name=QM1\n   Port=1414\nTuningParameters:\n   DefaultQBufferSize=10485760\n";
        let mut ini = Ini::parse(text).unwrap();
        assert_eq!(
            ini.get("tuningparameters", "defaultqbuffersize"),
            Some("10485760")
        );
        ini.set("Log", "LogFilePages", "16384");
        let again = Ini::parse(&ini.to_string()).unwrap();
        assert_eq!(again, ini);
        let cfg = QmConfig::from_ini(&again).unwrap();
        assert_eq!(
            (cfg.name.as_str(), cfg.port, cfg.log_file_pages),
            ("QM1", 1414, 16384)
        );
    }

    /// `setmqini -v` takes any text: a value on two lines would end the file's parse at the
    /// second (the queue manager would not start), one with `#` would lose its tail.
    #[test]
    fn a_value_that_would_not_read_back_is_refused_and_the_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qm.ini");
        let text = "QueueManager:\n   Name=QM1\n";
        std::fs::write(&path, text).unwrap();
        for (key, value) in [
            ("Address", "127.0.0.1\nPort=1"),
            ("Address", "a#b"),
            ("Address", " padded"),
            ("A=B", "1"),
        ] {
            let mut ini = Ini::load(&path).unwrap();
            ini.set("Metrics", key, value);
            let err = ini.save(&path).unwrap_err();
            assert!(err.contains("cannot be written"), "{err}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
        let mut ini = Ini::load(&path).unwrap();
        ini.set("Metrics", "Address", "0.0.0.0");
        ini.save(&path).unwrap();
        assert_eq!(Ini::load(&path).unwrap(), ini);
    }

    #[test]
    fn malformed_ini_lines_are_reported_with_their_number() {
        let err = Ini::parse("QueueManager:\n   Name QM1\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let err =
            QmConfig::from_ini(&Ini::parse("QueueManager:\n   Name=Q\n   Port=abc\n").unwrap())
                .unwrap_err();
        assert!(err.contains("Port=abc"), "{err}");
    }

    #[test]
    fn misspelt_stanzas_and_keys_are_named_with_the_valid_ones() {
        assert!(check_key("metrics", "port").is_ok());
        let e = check_key("Metric", "Port").unwrap_err();
        assert!(e.contains("Metric'") && e.contains("Metrics"), "{e}");
        assert!(check_key("TuningParameters", "DefaultPQBufferSize").is_ok());
        assert!(is_kept_not_used("tuningparameters", "defaultqbuffersize"));
        let e = check_key("Metrics", "Prot").unwrap_err();
        assert!(e.contains("Prot") && e.contains("Port, Address"), "{e}");
        let ini = Ini::parse("QueueManager:\n   Name=Q\nMetrics:\n   Prot=1\nMetric:\n").unwrap();
        assert_eq!(unknown_keys(&ini).len(), 2, "{:?}", unknown_keys(&ini));
    }

    #[test]
    fn metrics_are_served_only_when_a_port_is_given() {
        let base = "QueueManager:\n   Name=Q\n";
        let cfg = |extra: &str| QmConfig::from_ini(&Ini::parse(&format!("{base}{extra}")).unwrap());
        assert_eq!(cfg("").unwrap().metrics, None);
        assert_eq!(cfg("Metrics:\n   Port=0\n").unwrap().metrics, None);
        assert_eq!(
            cfg("Metrics:\n   Port=9464\n").unwrap().metrics.as_deref(),
            Some("127.0.0.1:9464")
        );
        assert_eq!(
            cfg("Metrics:\n   Port=9464\n   Address=0.0.0.0\n")
                .unwrap()
                .metrics
                .as_deref(),
            Some("0.0.0.0:9464")
        );
        assert!(cfg("Metrics:\n   Port=http\n")
            .unwrap_err()
            .contains("Port=http"));
    }
}
