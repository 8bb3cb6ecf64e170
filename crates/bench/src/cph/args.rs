//! Command-line options of `ferrymq cph`.

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
}

fn value<'a>(argv: &'a [String], i: &mut usize, name: &str) -> Result<&'a str, String> {
    *i += 1;
    argv.get(*i)
        .map(String::as_str)
        .ok_or_else(|| format!("{name} needs a value"))
}

fn num<T: std::str::FromStr>(s: &str, name: &str) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{name} {s}: not a valid number"))
}

pub const USAGE: &str = "usage: ferrymq cph rr|requester|responder|putget|sender|receiver --qm NAME[,NAME...] \
[--conn 'host(port)'[,...]] [--requesters N] [--responders M] [--threads N] [--size BYTES] [--persistent] \
[--syncpoint|--no-syncpoint] [--duration-s S] [--warmup-s W] [--queues 10] [--request-prefix REQUEST] [--reply-prefix REPLY] [--rate N] \
[--server-pid PID[,PID...]] [--no-setup] [--client-threads N] [--quiet] [--json]";

impl Args {
    pub fn parse(argv: &[String]) -> Result<Args, String> {
        let module = match argv.first().map(String::as_str) {
            Some("rr") => Module::Rr,
            Some("requester") => Module::Requester,
            Some("responder") => Module::Responder,
            Some("putget") => Module::PutGet,
            Some("sender") => Module::Sender,
            Some("receiver") => Module::Receiver,
            _ => return Err(USAGE.into()),
        };
        let mut a = Args {
            module,
            qms: Vec::new(),
            conns: Vec::new(),
            requesters: 1,
            responders: 0,
            size: 2048,
            persistent: false,
            syncpoint: None,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            queues: 10,
            request_prefix: "REQUEST".into(),
            reply_prefix: "REPLY".into(),
            rate: 0,
            json: false,
            live: true,
            server_pids: Vec::new(),
            setup: true,
            client_threads: 1,
        };
        let mut i = 1;
        while i < argv.len() {
            let flag = argv[i].as_str();
            match flag {
                "--qm" => {
                    a.qms = value(argv, &mut i, flag)?
                        .split(',')
                        .map(str::to_string)
                        .collect()
                }
                "--conn" => a.conns = split_connames(value(argv, &mut i, flag)?),
                "--requesters" | "--threads" => {
                    a.requesters = num(value(argv, &mut i, flag)?, flag)?
                }
                "--responders" => a.responders = num(value(argv, &mut i, flag)?, flag)?,
                "--size" => a.size = num(value(argv, &mut i, flag)?, flag)?,
                "--persistent" => a.persistent = true,
                "--syncpoint" => a.syncpoint = Some(true),
                "--no-syncpoint" => a.syncpoint = Some(false),
                "--duration-s" => {
                    a.duration = Duration::from_secs_f64(num(value(argv, &mut i, flag)?, flag)?)
                }
                "--warmup-s" => {
                    a.warmup = Duration::from_secs_f64(num(value(argv, &mut i, flag)?, flag)?)
                }
                "--queues" => a.queues = num(value(argv, &mut i, flag)?, flag)?,
                "--request-prefix" => a.request_prefix = value(argv, &mut i, flag)?.to_string(),
                "--reply-prefix" => a.reply_prefix = value(argv, &mut i, flag)?.to_string(),
                "--rate" => a.rate = num(value(argv, &mut i, flag)?, flag)?,
                "--server-pid" => {
                    a.server_pids = value(argv, &mut i, flag)?
                        .split(',')
                        .map(|p| num(p, flag))
                        .collect::<Result<_, _>>()?
                }
                "--no-setup" => a.setup = false,
                "--client-threads" => a.client_threads = num(value(argv, &mut i, flag)?, flag)?,
                "--quiet" => a.live = false,
                "--json" => a.json = true,
                other => return Err(format!("unknown option '{other}'\n{USAGE}")),
            }
            i += 1;
        }
        if a.qms.is_empty() {
            return Err(format!("--qm is required\n{USAGE}"));
        }
        if !a.conns.is_empty() && a.conns.len() != a.qms.len() {
            return Err("give one --conn entry per queue manager".into());
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
