//! How an application says where its queue manager is and how the connection should behave:
//! [`ConnectOptions`], the two transports, MQ-syntax connection name lists and the FerryMQ home
//! directory that locates a local queue manager's socket.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ferrymq_types::limits::{HEARTBEAT_DEFAULT_MS, MSG_LEN_MAX_BYTES, SHARECNV_DEFAULT};
use ferrymq_types::{MqError, Reason};

pub use ferrymq_types::conname::{parse_conn_name, DEFAULT_PORT};
pub use ferrymq_types::home::ferrymq_home;
/// The channel a client connection runs as unless it names another (MQ's default SVRCONN).
pub const DEFAULT_CHANNEL: &str = "SYSTEM.DEF.SVRCONN";
/// How long an initial connect (TCP connect plus handshake) may take by default.
pub const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// Where the queue manager is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A queue manager on this machine, through its Unix socket
    /// `<home>/qmgrs/<QMNAME>/qm.sock`. `home: None` takes [`ferrymq_home`].
    Bindings { home: Option<PathBuf> },
    /// Over TCP to the first address of the list that answers (and, on reconnect, to the next).
    Client { conn_names: Vec<(String, u16)> },
}

/// Whether a broken connection is re-established behind the application's back (MQCNO_RECONNECT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reconnect {
    /// A broken socket fails every call with CONNECTION_BROKEN (MQCNO_RECONNECT_DISABLED).
    #[default]
    Disabled,
    /// Calls wait while the client reconnects, for at most `timeout` per break; then
    /// RECONNECT_FAILED.
    Enabled { timeout: Duration },
}

/// Everything [`crate::Connection::connect`] needs (MQ's MQCNO, MQCD and MQCSP in one).
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Queue manager name; empty accepts whichever queue manager answers (client mode only).
    pub qmgr: String,
    pub transport: Transport,
    /// The server-connection channel a client (TCP) connection runs as; unused in bindings mode.
    pub channel: String,
    pub user: String,
    pub password: String,
    /// Shown by the queue manager in its connection displays.
    pub app_name: String,
    /// Largest message this connection exchanges; the queue manager may lower it.
    pub max_msg_len: u32,
    /// Heartbeat interval proposed; 0 proposes none (the queue manager may still ask for one).
    pub heartbeat_ms: u32,
    /// Conversations that may share one socket (SHARECNV); the queue manager may lower it.
    pub sharecnv: u16,
    pub reconnect: Reconnect,
    /// Bound on one TCP/Unix connect plus handshake.
    pub connect_timeout: Duration,
    /// TLS on client (TCP) connections, every socket of them, reconnects included; ignored in
    /// bindings mode.
    pub tls: Option<TlsOptions>,
}

/// How a client speaks TLS (MQ's SSLCIPH of the client channel and its key repository).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsOptions {
    /// The CA certificates (PEM) the queue manager's certificate must chain to.
    pub ca_file: PathBuf,
    /// This client's certificate and private key (PEM), for channels with SSLCAUTH(REQUIRED) or
    /// SSLPEER.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The CipherSpec offered (an SSLCIPH value: `ANY_TLS12_OR_HIGHER`, `TLS_AES_256_GCM_SHA384`,
    /// ...); None offers every TLS 1.2 and 1.3 suite.
    pub cipher: Option<String>,
    /// The name the queue manager's certificate must carry; None: the host of the connection
    /// name (an IP address is checked against the certificate's IP addresses).
    pub server_name: Option<String>,
}

/// The size and modification time of each file a TLS configuration was read from: a changed
/// file (a renewed certificate) makes a new configuration.
type FileStamps = Vec<Option<(u64, std::time::SystemTime)>>;

/// Configurations already built in this process, most recent last.
static CONFIGS: std::sync::Mutex<
    Vec<(TlsOptions, FileStamps, std::sync::Arc<rustls::ClientConfig>)>,
> = std::sync::Mutex::new(Vec::new());

impl TlsOptions {
    fn stamps(&self) -> FileStamps {
        [
            Some(&self.ca_file),
            self.cert_file.as_ref(),
            self.key_file.as_ref(),
        ]
        .into_iter()
        .map(|f| {
            let m = std::fs::metadata(f?).ok()?;
            Some((m.len(), m.modified().ok()?))
        })
        .collect()
    }

    /// The rustls configuration for these options, shared by every socket of the process that
    /// uses the same options and unchanged files: the PEM files are read once, and the
    /// configuration's session cache lets a reconnect resume its TLS session instead of a full
    /// handshake. At most TLS_CLIENT_CONFIGS_MAX are kept.
    pub(crate) fn client_config(&self) -> Result<std::sync::Arc<rustls::ClientConfig>, MqError> {
        let stamps = self.stamps();
        let mut cache = CONFIGS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, c)) = cache.iter().find(|(o, s, _)| o == self && *s == stamps) {
            return Ok(c.clone());
        }
        let c = self.build_config()?;
        cache.retain(|(o, _, _)| o != self);
        if cache.len() >= ferrymq_types::limits::TLS_CLIENT_CONFIGS_MAX {
            cache.remove(0);
        }
        cache.push((self.clone(), stamps, c.clone()));
        Ok(c)
    }

    /// The rustls configuration, or why these options cannot be used (MQRC_SSL_INITIALIZATION_ERROR).
    fn build_config(&self) -> Result<std::sync::Arc<rustls::ClientConfig>, MqError> {
        let bad = |m: String| MqError::new(Reason::SSL_INITIALIZATION_ERROR, m);
        let cipher = self
            .cipher
            .as_deref()
            .map(ferrymq_security::tls::CipherSpec::parse)
            .transpose()
            .map_err(bad)?;
        ferrymq_security::tls::ClientTls {
            ca_file: self.ca_file.clone(),
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            cipher,
        }
        .config()
        .map_err(|e| bad(format!("TLS settings cannot be used: {e}")))
    }
}

// Hand-written so that the password never reaches a log through `{:?}`.
impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("qmgr", &self.qmgr)
            .field("transport", &self.transport)
            .field("channel", &self.channel)
            .field("user", &self.user)
            .field(
                "password",
                &if self.password.is_empty() { "" } else { "***" },
            )
            .field("app_name", &self.app_name)
            .field("max_msg_len", &self.max_msg_len)
            .field("heartbeat_ms", &self.heartbeat_ms)
            .field("sharecnv", &self.sharecnv)
            .field("reconnect", &self.reconnect)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls", &self.tls)
            .finish()
    }
}

impl ConnectOptions {
    fn with_transport(qmgr: impl Into<String>, transport: Transport) -> ConnectOptions {
        ConnectOptions {
            qmgr: qmgr.into(),
            transport,
            channel: DEFAULT_CHANNEL.to_string(),
            user: String::new(),
            password: String::new(),
            app_name: default_app_name(),
            max_msg_len: MSG_LEN_MAX_BYTES,
            heartbeat_ms: HEARTBEAT_DEFAULT_MS,
            sharecnv: SHARECNV_DEFAULT,
            reconnect: Reconnect::Disabled,
            connect_timeout: CONNECT_TIMEOUT_DEFAULT,
            tls: None,
        }
    }

    /// A local queue manager through its Unix socket under [`ferrymq_home`].
    pub fn bindings(qmgr: impl Into<String>) -> ConnectOptions {
        ConnectOptions::with_transport(qmgr, Transport::Bindings { home: None })
    }

    /// A queue manager over TCP; `conn_name` is an MQ connection name list, see
    /// [`parse_conn_name`].
    pub fn client(qmgr: impl Into<String>, conn_name: &str) -> Result<ConnectOptions, MqError> {
        let conn_names = parse_conn_name(conn_name)?;
        Ok(ConnectOptions::with_transport(
            qmgr,
            Transport::Client { conn_names },
        ))
    }
}

/// Like MQ, the program's own name identifies the application unless it says otherwise.
fn default_app_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The Unix socket of queue manager `qmgr` under `home`, in the directory its name maps to
/// (`ferrymq_types::objects::qmgr_dir_name`, the same mapping the queue manager uses). Fails with
/// MQRC_Q_MGR_NAME_ERROR for a name that is not a valid queue manager name.
pub fn bindings_socket_path(home: &std::path::Path, qmgr: &str) -> Result<PathBuf, MqError> {
    ferrymq_types::home::QmPaths::new(home, qmgr)
        .map(|p| p.socket())
        .map_err(|e| MqError::new(Reason::Q_MGR_NAME_ERROR, e))
}

/// One place a socket can be opened to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Tcp(String, u16),
    Unix(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(h, p) => write!(f, "{h}({p})"),
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The endpoints to try, in order, checking what can be checked before any I/O.
pub(crate) fn endpoints(opts: &ConnectOptions) -> Result<Vec<Endpoint>, MqError> {
    match &opts.transport {
        Transport::Bindings { home } => {
            if opts.qmgr.is_empty() {
                return Err(MqError::new(
                    Reason::Q_MGR_NAME_ERROR,
                    "bindings mode needs a queue manager name: there is no default local queue manager",
                ));
            }
            let home = home.clone().unwrap_or_else(ferrymq_home);
            Ok(vec![Endpoint::Unix(bindings_socket_path(
                &home, &opts.qmgr,
            )?)])
        }
        Transport::Client { conn_names } => {
            if conn_names.is_empty() {
                return Err(MqError::new(
                    Reason::ENVIRONMENT_ERROR,
                    "client mode needs at least one host(port) in its connection name list",
                ));
            }
            Ok(conn_names
                .iter()
                .map(|(h, p)| Endpoint::Tcp(h.clone(), *p))
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_tls_configuration_serves_every_socket_until_a_file_changes() {
        use ferrymq_security::tls::devca::DevCa;
        let dir = tempfile::tempdir().unwrap();
        let ca = DevCa::new("test CA").unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let opts = TlsOptions {
            ca_file: ca_file.clone(),
            ..Default::default()
        };
        let a = opts.client_config().unwrap();
        let b = opts.clone().client_config().unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b), "the same options share one");
        let other = TlsOptions {
            cipher: Some("ANY_TLS13".into()),
            ..opts.clone()
        };
        assert!(!std::sync::Arc::ptr_eq(&a, &other.client_config().unwrap()));
        // A renewed CA file (another size) is read again.
        let renewed = DevCa::new("renewed test CA with a longer name").unwrap();
        std::fs::write(&ca_file, renewed.cert_pem()).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&a, &opts.client_config().unwrap()));
    }

    use super::*;

    #[test]
    fn the_password_is_not_shown_by_debug() {
        let mut o = ConnectOptions::bindings("QM1");
        o.password = "s3cret".into();
        let shown = format!("{o:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("***"),
            "{shown}"
        );
    }

    #[test]
    fn bindings_needs_a_name_and_client_mode_an_address() {
        let e = endpoints(&ConnectOptions::bindings("")).unwrap_err();
        assert_eq!(e.reason, Reason::Q_MGR_NAME_ERROR);
        let mut o = ConnectOptions::bindings("QM1");
        o.transport = Transport::Client { conn_names: vec![] };
        assert_eq!(endpoints(&o).unwrap_err().reason, Reason::ENVIRONMENT_ERROR);
    }

    #[test]
    fn the_bindings_socket_lives_under_the_queue_managers_directory() {
        let mut o = ConnectOptions::bindings("QM1");
        o.transport = Transport::Bindings {
            home: Some("/h".into()),
        };
        assert_eq!(
            endpoints(&o).unwrap(),
            vec![Endpoint::Unix("/h/qmgrs/QM1/qm.sock".into())]
        );
        o.qmgr = "SITE/log".into();
        assert_eq!(
            endpoints(&o).unwrap(),
            vec![Endpoint::Unix("/h/qmgrs/SITE&log/qm.sock".into())]
        );
        o.qmgr = "..".into();
        assert_eq!(endpoints(&o).unwrap_err().reason, Reason::Q_MGR_NAME_ERROR);
    }
}
