//! The command-line arguments of security and client connections: where a client-mode command
//! connects and as whom (`ConnArgs`: connection name, channel, user and password source, TLS
//! files), the object-authority commands (`setmqaut`, `dspmqaut`, `dmpmqaut`) and the development
//! certificates command (`mkdevcerts`).

use clap::Args;

#[derive(Args, Debug, Default)]
pub struct Mkdevcerts {
    /// Where the certificates and keys are written (created if needed)
    #[arg(long, value_name = "DIR", required = true)]
    pub dir: Option<std::path::PathBuf>,
    /// The queue manager: its certificate is issued, and its qm.ini SSL stanza set
    #[arg(short = 'm', value_name = "QMNAME")]
    pub m: Option<String>,
    /// A client certificate with this common name (repeatable)
    #[arg(long, value_name = "NAME")]
    pub client: Vec<String>,
    /// A host name or IP address the queue manager is reached by, besides localhost (repeatable)
    #[arg(long, value_name = "NAME")]
    pub host: Vec<String>,
    /// The name of the queue manager certificate's files without -m (default: qmgr)
    #[arg(long, value_name = "NAME")]
    pub qmgr_cert: Option<String>,
}

/// Where a client-mode command connects: the connection name list and TLS.
#[derive(Args, Debug, Default, Clone)]
pub struct ConnArgs {
    /// Client mode: MQ connection name list, e.g. 'host(1414),host2(1414)'
    #[arg(long, value_name = "CONNAME")]
    pub conn: Option<String>,
    #[command(flatten)]
    pub auth: ConnAuth,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// TLS for a client-mode connection (see `ferrymq mkdevcerts` for development certificates).
#[derive(Args, Debug, Default, Clone)]
pub struct TlsArgs {
    /// Client mode over TLS: the CA certificates (PEM) the queue manager's certificate must chain to
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// TLS: this client's certificate (PEM), for channels with SSLCAUTH(REQUIRED) or SSLPEER
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// TLS: the private key (PEM) of --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// TLS: the CipherSpec to offer, as SSLCIPH names it (default: any TLS 1.2 or 1.3 suite)
    #[arg(long, value_name = "SPEC")]
    pub cipher: Option<String>,
}

impl TlsArgs {
    /// The client's TLS options; None without --tls-ca (then the other TLS flags are refused).
    pub fn options(&self) -> Result<Option<ferrymq_client::TlsOptions>, String> {
        let Some(ca) = &self.tls_ca else {
            if self.tls_cert.is_some() || self.cipher.is_some() {
                return Err("--tls-cert, --tls-key and --cipher need --tls-ca FILE (the CA certificates the queue manager's certificate must chain to)".into());
            }
            return Ok(None);
        };
        Ok(Some(ferrymq_client::TlsOptions {
            ca_file: ca.clone(),
            cert_file: self.tls_cert.clone(),
            key_file: self.tls_key.clone(),
            cipher: self.cipher.clone(),
            server_name: None,
        }))
    }
}

/// How a client connection names its channel and who it is: shared by every command that takes
/// `--conn`. The password is never an argument (arguments show in `ps`).
#[derive(Args, Debug, Default, Clone)]
pub struct ConnAuth {
    /// Client mode: the server-connection channel to run as (default SYSTEM.DEF.SVRCONN)
    #[arg(long, value_name = "NAME")]
    pub channel: Option<String>,
    /// The user id to connect as; its password comes from FERRYMQ_PASSWORD, --password-stdin,
    /// or else (standard input a terminal) a prompt that does not echo
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Read the password from the first line of standard input
    #[arg(long)]
    pub password_stdin: bool,
}

impl ConnAuth {
    /// Sets the channel, user and password of `opts` from these arguments and the environment.
    pub fn apply(&self, opts: &mut ferrymq_client::ConnectOptions) -> Result<(), String> {
        if let Some(c) = &self.channel {
            opts.channel = c.clone();
        }
        if let Some(u) = &self.user {
            opts.user = u.clone();
        }
        if self.password_stdin {
            opts.password = read_password_line()?;
        } else if let Ok(p) = std::env::var("FERRYMQ_PASSWORD") {
            opts.password = p;
        } else if let Some(u) = &self.user {
            // A person at a terminal is asked, without echo; a script gets no prompt to hang on.
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                opts.password = rpassword::prompt_password(format!("Password for user '{u}': "))
                    .map_err(|e| format!("--user {u}: cannot read the password: {e}"))?;
            }
        }
        Ok(())
    }
}

/// The first line of standard input, without its line end (the rest stays for the command).
pub fn read_password_line() -> Result<String, String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("--password-stdin: cannot read standard input: {e}"))?;
    let p = line.trim_end_matches(['\n', '\r']).to_string();
    if p.is_empty() {
        return Err("--password-stdin: the first line of standard input is empty".into());
    }
    Ok(p)
}

#[derive(Args, Debug, Default)]
pub struct Setmqaut {
    /// The queue manager (local: through its bindings socket)
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The object type: queue, qmgr, channel, listener, authinfo, ...
    #[arg(long, value_name = "TYPE", required = true)]
    pub t: String,
    /// The profile: an object name or a generic profile (not with -t qmgr)
    #[arg(long, value_name = "PROFILE")]
    pub n: Option<String>,
    /// The user (principal)
    #[arg(long, value_name = "USER", conflicts_with = "g")]
    pub p: Option<String>,
    /// The group
    #[arg(long, value_name = "GROUP")]
    pub g: Option<String>,
    /// Authorities to revoke (written -AUTH)
    #[arg(long, value_name = "AUTH", hide = true)]
    pub remove: Vec<String>,
    /// Authorities to grant (+AUTH) and revoke (-AUTH)
    #[arg(value_name = "+AUTH|-AUTH")]
    pub add: Vec<String>,
}

#[derive(Args, Debug, Default)]
pub struct Dspmqaut {
    /// The queue manager (local: through its bindings socket)
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The object type: queue, qmgr, channel, listener, authinfo, ...
    #[arg(long, value_name = "TYPE", required = true)]
    pub t: String,
    /// The object's name (not with -t qmgr)
    #[arg(long, value_name = "OBJECT")]
    pub n: Option<String>,
    /// The user (principal)
    #[arg(long, value_name = "USER", conflicts_with = "g")]
    pub p: Option<String>,
    /// The group
    #[arg(long, value_name = "GROUP")]
    pub g: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Dmpmqaut {
    /// The queue manager (local: through its bindings socket)
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// Only records of this object type
    #[arg(long, value_name = "TYPE")]
    pub t: Option<String>,
    /// Only records whose profile is this name or covers it
    #[arg(long, value_name = "PROFILE")]
    pub n: Option<String>,
    /// Only this user's records
    #[arg(long, value_name = "USER", conflicts_with = "g")]
    pub p: Option<String>,
    /// Only this group's records
    #[arg(long, value_name = "GROUP")]
    pub g: Option<String>,
}
