//! Command-line options of `ferrymq-bench cph`.

use std::path::PathBuf;
use std::time::Duration;

/// Which MQ-CPH module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    /// Requesters and responders together (the reports' workload).
    Rr,
    Requester,
    Responder,
    PutGet,
    Sender,
    Receiver,
}

#[derive(Debug, Clone)]
pub struct Args {
    pub module: Module,
    /// Queue managers to spread the work over (each gets its own queue pairs).
    pub qms: Vec<String>,
    /// Client mode connection names, one per queue manager (`host(port)`); bindings mode if empty.
    pub conns: Vec<String>,
    pub requesters: usize,
    pub responders: usize,
    pub size: usize,
    pub persistent: bool,
    /// putget/sender/receiver: put and get under syncpoint (default: when persistent). The
    /// Request/Responder modules always use syncpoint as the reports do.
    pub syncpoint: Option<bool>,
    pub duration: Duration,
    pub warmup: Duration,
    /// Queue pairs per queue manager (REQUEST0..n-1 / REPLY0..n-1).
    pub queues: usize,
    pub request_prefix: String,
    pub reply_prefix: String,
    /// Total rate limit in round trips (or messages) per second; 0 = as fast as possible.
    pub rate: u64,
    pub json: bool,
    /// Print the rate every interval while running (to stderr).
    pub live: bool,
    /// The queue manager process, for its CPU; found from $FERRYMQ_HOME when not given. More pids
    /// than queue managers (the instances of HA queue managers) are all measured and summed.
    pub server_pids: Vec<u32>,
    /// Define missing REQUESTn/REPLYn queues (MAXDEPTH 5000) before starting.
    pub setup: bool,
    /// Client-side runtime threads.
    pub client_threads: usize,
    /// The channel, TLS and user every client connection uses.
    pub security: ConnSecurity,
}

/// How each client connection of a run identifies itself: the channel it names, TLS, and the
/// user it asserts with its password (from `FERRYMQ_PASSWORD` on the command line).
#[derive(Clone, Default)]
pub struct ConnSecurity {
    /// The server-connection channel; None: the client's default (SYSTEM.DEF.SVRCONN).
    pub channel: Option<String>,
    pub tls: Option<ferrymq_client::TlsOptions>,
    /// Empty: no user is asserted.
    pub user: String,
    pub password: String,
}

// Hand-written so that the password never reaches an output through `{:?}`.
impl std::fmt::Debug for ConnSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnSecurity")
            .field("channel", &self.channel)
            .field("tls", &self.tls)
            .field("user", &self.user)
            .field(
                "password",
                &if self.password.is_empty() { "" } else { "***" },
            )
            .finish()
    }
}

impl ConnSecurity {
    /// Applies these settings to a client connection's options.
    pub fn apply(&self, o: &mut ferrymq_client::ConnectOptions) {
        if let Some(c) = &self.channel {
            o.channel = c.clone();
        }
        o.tls = self.tls.clone();
        o.user = self.user.clone();
        o.password = self.password.clone();
    }
}

const EXAMPLES: &str = "\
Examples:
  ferrymq-bench cph rr --qm QM1 --requesters 64 --size 2048 --persistent --duration-s 30
  ferrymq-bench cph rr --qm QM1 --conn 'localhost(1414)' --requesters 16 --json";

/// `ferrymq-bench cph MODULE`: the module and its options.
#[derive(clap::Subcommand, Debug)]
pub enum CphCmd {
    /// Requesters and responders together, in one shot (the reports' workload)
    #[command(after_help = EXAMPLES)]
    Rr(CphOpts),
    /// Requesters only: put a request, wait for its reply
    #[command(after_help = EXAMPLES)]
    Requester(CphOpts),
    /// Responders only: get a request, put the reply
    #[command(after_help = EXAMPLES)]
    Responder(CphOpts),
    /// Each thread puts a message and gets it back by MsgId
    #[command(after_help = EXAMPLES)]
    Putget(CphOpts),
    /// Put only
    #[command(after_help = EXAMPLES)]
    Sender(CphOpts),
    /// Get only
    #[command(after_help = EXAMPLES)]
    Receiver(CphOpts),
}

/// The options every `ferrymq-bench cph` module takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CphOpts {
    /// Queue managers to spread the work over (each gets its own queue pairs)
    #[arg(
        long,
        value_name = "NAME[,NAME...]",
        required = true,
        value_delimiter = ','
    )]
    pub qm: Vec<String>,
    /// Client mode: one connection name per queue manager, 'host(port)' (`;` between queue
    /// managers when one has several addresses); bindings mode if not given
    #[arg(long, value_name = "CONNAMES")]
    pub conn: Option<String>,
    /// Requester (or sender, putget) threads
    #[arg(long, visible_alias = "threads", value_name = "N", default_value_t = 1)]
    pub requesters: usize,
    /// Responder threads (rr: one per queue pair if not given)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub responders: usize,
    /// Message size in bytes
    #[arg(long, value_name = "BYTES", default_value_t = 2048)]
    pub size: usize,
    /// Persistent messages
    #[arg(long)]
    pub persistent: bool,
    /// putget/sender/receiver: put and get under syncpoint (default: when persistent)
    #[arg(long, conflicts_with = "no_syncpoint")]
    pub syncpoint: bool,
    /// putget/sender/receiver: put and get outside syncpoint
    #[arg(long)]
    pub no_syncpoint: bool,
    /// Length of the measured window, in seconds
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub duration_s: f64,
    /// Warm-up before the measured window, in seconds
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub warmup_s: f64,
    /// Queue pairs per queue manager (REQUEST0..n-1 / REPLY0..n-1)
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub queues: usize,
    /// Prefix of the request queues' names
    #[arg(long, value_name = "PREFIX", default_value = "REQUEST")]
    pub request_prefix: String,
    /// Prefix of the reply queues' names
    #[arg(long, value_name = "PREFIX", default_value = "REPLY")]
    pub reply_prefix: String,
    /// Total rate limit in round trips (or messages) per second; 0: as fast as possible
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub rate: u64,
    /// The queue manager processes to measure the CPU of (default: found from $FERRYMQ_HOME)
    #[arg(long, value_name = "PID[,PID...]", value_delimiter = ',')]
    pub server_pid: Vec<u32>,
    /// Do not define missing REQUESTn/REPLYn queues before starting
    #[arg(long)]
    pub no_setup: bool,
    /// Client-side runtime threads
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub client_threads: usize,
    /// Do not print the rate while running
    #[arg(long)]
    pub quiet: bool,
    /// Print the result as one JSON object
    #[arg(long)]
    pub json: bool,
    /// The server-connection channel the client connections name (default SYSTEM.DEF.SVRCONN)
    #[arg(long, value_name = "NAME")]
    pub channel: Option<String>,
    /// The user id to connect as; its password comes from FERRYMQ_PASSWORD
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// TLS: the CA certificates (PEM) the queue manager's certificate must chain to
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: this client's certificate (PEM), for channels with SSLCAUTH(REQUIRED) or SSLPEER
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the private key (PEM) of --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// TLS: the CipherSpec to offer, as SSLCIPH names it (default: any TLS 1.2 or 1.3 suite)
    #[arg(long, value_name = "SPEC", requires = "tls_ca")]
    pub cipher: Option<String>,
}

/// `ferrymq-bench cph` as a command of its own (what [`Args::parse`] reads).
#[derive(clap::Parser, Debug)]
#[command(name = "ferrymq-bench cph", no_binary_name = true)]
struct CphCli {
    #[command(subcommand)]
    module: CphCmd,
}

pub const USAGE: &str = "usage: ferrymq-bench cph rr|requester|responder|putget|sender|receiver --qm NAME[,NAME...] \
[--conn 'host(port)'[,...]] [--requesters N] [--responders M] [--threads N] [--size BYTES] [--persistent] \
[--syncpoint|--no-syncpoint] [--duration-s S] [--warmup-s W] [--queues 10] [--request-prefix REQUEST] [--reply-prefix REPLY] [--rate N] \
[--server-pid PID[,PID...]] [--no-setup] [--client-threads N] [--quiet] [--json] [--channel NAME] [--user USER] \
[--tls-ca FILE [--tls-cert FILE --tls-key FILE] [--cipher SPEC]]";

fn seconds(flag: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{flag} {s}: not a valid number of seconds"))
}

impl Args {
    /// Reads `MODULE [options]` (the arguments after `ferrymq-bench cph`).
    pub fn parse(argv: &[String]) -> Result<Args, String> {
        use clap::Parser;
        let cli = CphCli::try_parse_from(argv).map_err(|e| e.to_string().trim_end().to_string())?;
        let (module, o) = match cli.module {
            CphCmd::Rr(o) => (Module::Rr, o),
            CphCmd::Requester(o) => (Module::Requester, o),
            CphCmd::Responder(o) => (Module::Responder, o),
            CphCmd::Putget(o) => (Module::PutGet, o),
            CphCmd::Sender(o) => (Module::Sender, o),
            CphCmd::Receiver(o) => (Module::Receiver, o),
        };
        let mut a = Args {
            module,
            qms: o.qm,
            conns: o.conn.as_deref().map(split_connames).unwrap_or_default(),
            requesters: o.requesters,
            responders: o.responders,
            size: o.size,
            persistent: o.persistent,
            syncpoint: if o.syncpoint {
                Some(true)
            } else if o.no_syncpoint {
                Some(false)
            } else {
                None
            },
            duration: seconds("--duration-s", o.duration_s)?,
            warmup: seconds("--warmup-s", o.warmup_s)?,
            queues: o.queues,
            request_prefix: o.request_prefix,
            reply_prefix: o.reply_prefix,
            rate: o.rate,
            json: o.json,
            live: !o.quiet,
            server_pids: o.server_pid,
            setup: !o.no_setup,
            client_threads: o.client_threads,
            security: ConnSecurity {
                channel: o.channel,
                tls: o.tls_ca.map(|ca_file| ferrymq_client::TlsOptions {
                    ca_file,
                    cert_file: o.tls_cert,
                    key_file: o.tls_key,
                    cipher: o.cipher,
                    server_name: None,
                }),
                password: match &o.user {
                    Some(_) => std::env::var("FERRYMQ_PASSWORD").unwrap_or_default(),
                    None => String::new(),
                },
                user: o.user.unwrap_or_default(),
            },
        };
        if a.qms.is_empty() {
            return Err(format!("--qm is required\n{USAGE}"));
        }
        if !a.conns.is_empty() && a.conns.len() != a.qms.len() {
            return Err("give one --conn entry per queue manager".into());
        }
        if a.security.tls.is_some() && a.conns.is_empty() {
            return Err(
                "--tls-ca needs client mode (--conn): bindings connections have no TLS".into(),
            );
        }
        if a.queues == 0 {
            return Err("--queues must be at least 1".into());
        }
        if a.module == Module::Rr && a.responders == 0 {
            // The reports use 30 responders per request queue for one queue manager; scaled to
            // this machine, one per queue pair is the default.
            a.responders = a.queues * a.qms.len();
        }
        Ok(a)
    }
}

/// Splits `h(1414),h(1415)` lists given for several queue managers with `;` between them, or
/// one `host(port)` per queue manager separated by commas when each has one address.
fn split_connames(s: &str) -> Vec<String> {
    if s.contains(';') {
        // `;` separates queue managers, so one entry may be a whole list (an HA group).
        s.split(';')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    } else {
        s.split("),")
            .map(|x| {
                if x.ends_with(')') {
                    x.trim().to_string()
                } else {
                    format!("{})", x.trim())
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_headline_command_parses() {
        let a = Args::parse(&v("rr --qm QM1 --conn localhost(1414) --requesters 64 --responders 10 --size 2048 --persistent --duration-s 30 --warmup-s 5 --queues 10 --json")).unwrap();
        assert_eq!(
            (
                a.module,
                a.requesters,
                a.responders,
                a.size,
                a.persistent,
                a.json
            ),
            (Module::Rr, 64, 10, 2048, true, true)
        );
        assert_eq!(a.conns, vec!["localhost(1414)"]);
    }

    #[test]
    fn several_queue_managers_take_one_address_each() {
        let a = Args::parse(&v("rr --qm A,B --conn h(1),h(2)")).unwrap();
        assert_eq!(a.conns, vec!["h(1)", "h(2)"]);
        assert_eq!(a.responders, 20);
        assert!(Args::parse(&v("rr --qm A,B --conn h(1)")).is_err());
        assert!(Args::parse(&v("rr --bogus")).is_err());
    }
}
