//! The `ferrymq` command line: one clap tree (derive) for every command, from which `--help`,
//! `ferrymq --help`, the shell completions, the man pages and the hidden `ferrymq commands` list
//! are all generated.
//!
//! MQ's control commands take single-dash flags of several letters (`crtmqm -lp 3 -lf 4096`),
//! which clap does not have. Each such flag is a clap long flag (`--lp`); before clap sees the
//! arguments, [`prepare`] reads them as MQ does (and as FerryMQ always has): a known flag by its
//! exact MQ spelling, or a value-taking flag with its value attached (`-p1414`); the longest
//! spelling wins, so `-lp` is never `-l p`; a flag's value is the next argument whatever it looks
//! like; anything else starting with `-` is an unknown flag, named as typed. Every text clap
//! renders for such a command (help, usage, errors, man pages, completions) is then given back
//! MQ's spelling by [`mq_spelling`].
//!
//! Flags MQ has that FerryMQ accepts but does not act on are under the help heading
//! [`IGNORED`]; using one prints a note with the reason (its help text). Flags under [`REFUSED`]
//! are errors with the reason. Usage errors exit 1 (20 for runmqsc, as MQ's runmqsc), as the
//! commands always have.

use clap::builder::StyledStr;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod security;
pub use security::*;

/// Help heading of MQ flags that FerryMQ accepts and ignores (the help text is the reason).
pub const IGNORED: &str = "Accepted from MQ, not used";
/// Help heading of MQ flags that FerryMQ refuses (the help text is the reason).
pub const REFUSED: &str = "MQ flags refused";

/// The commands whose flags are spelt as MQ spells them: one dash, however many letters.
const MQ_STYLE: &[&str] = &[
    "crtmqm",
    "strmqm",
    "endmqm",
    "dltmqm",
    "dspmq",
    "setmqini",
    "dspmqini",
    "setmqusr",
    "dltmqusr",
    "dspmqusr",
    "sethapreferred",
    "clearhapreferred",
    "makedrprimary",
    "makedrsecondary",
    "runmqsc",
    "dmpmqcfg",
    "setmqaut",
    "dspmqaut",
    "dmpmqaut",
    "run-qmgr",
];

/// FerryMQ's own flags on MQ-style commands, spelt with two dashes (command, long name).
const DOUBLE_DASH_IN_MQ: &[(&str, &str)] = &[
    ("runmqsc", "conn"),
    ("runmqsc", "channel"),
    ("runmqsc", "user"),
    ("runmqsc", "password-stdin"),
    ("setmqusr", "password-stdin"),
    ("crtmqm", "dev"),
    ("crtmqm", "dev-app-password-stdin"),
    ("crtmqm", "insecure"),
    ("runmqsc", "tls-ca"),
    ("runmqsc", "tls-cert"),
    ("runmqsc", "tls-key"),
    ("runmqsc", "cipher"),
];

/// How `ferrymq --help` groups the commands (as the README does). A test checks that every
/// visible command is in exactly one group.
pub const GROUPS: &[(&str, &[&str], &str)] = &[
    (
        "Queue manager lifecycle (MQ's names and flags)",
        &["crtmqm", "strmqm", "endmqm", "dltmqm", "dspmq", "setmqini", "dspmqini"],
        "QMNAME: up to 48 of A-Z a-z 0-9 . / _ % (exit 72 if not).",
    ),
    (
        "High availability (three instances of one queue manager, each on its own host)",
        &["sethapreferred", "clearhapreferred"],
        "Create each instance with: crtmqm -p PORT -ha 'a=host(p),b=host(p),c=host(p)' -hi a QMNAME\n\
         (-hi b, -hi c on the other hosts); dspmq -m QMNAME -o ha shows the group.",
    ),
    (
        "Disaster recovery (asynchronous to a recovery site; loss bounded by -drlag, 4 MiB by default)",
        &["makedrprimary", "makedrsecondary"],
        "Main site: crtmqm ... -dr primary -drr 'host(p)[,host(p)...]' [-drlag BYTES] QMNAME;\n\
         recovery site: crtmqm ... -dr secondary -drl 'host(p)' QMNAME; dspmq -o dr shows both.",
    ),
    (
        "Administration",
        &[
            "runmqsc", "dmpmqcfg", "setmqaut", "dspmqaut", "dmpmqaut", "dmplog", "dspmqver",
            "mkdevcerts",
        ],
        "",
    ),
    (
        "Users of the queue manager's user store (connection authentication)",
        &["setmqusr", "dltmqusr", "dspmqusr"],
        "Passwords never go on the command line: --password-stdin, or FERRYMQ_PASSWORD.",
    ),
    (
        "Sample programs (bindings mode by queue manager name, or --conn 'host(port),...')",
        &["put", "get", "browse", "req", "pub", "sub", "runmqdlq"],
        "Exit 3 no message, 4 not authorised, 5 unknown object, 6 queue manager unavailable,\n\
         1 any other failure, 2 usage.",
    ),
    (
        "Managed file transfer (agents that move files through queue managers; MQ's names)",
        &[
            "fteSetupCoordination",
            "fteCreateAgent",
            "fteStartAgent",
            "fteStopAgent",
            "fteListAgents",
            "fteShowAgentDetails",
            "fteCreateTransfer",
            "fteCancelTransfer",
            "fteCreateMonitor",
            "fteListMonitors",
            "fteDeleteMonitor",
            "fte",
        ],
        "ferrymq fte log [--json|--xml] prints the transfer log; ferrymq fte status the transfers\n\
         in progress.",
    ),
    ("Network rehearsal and demo", &["relay", "demo"], ""),
    ("This command line", &["completions", "man", "help"], ""),
];

const EXAMPLES_CRTMQM: &str = "\
Examples:
  ferrymq crtmqm -p 1414 QM1
  ferrymq crtmqm -p 1414 -lp 3 -lf 4096 -c 'orders' QM1
  ferrymq crtmqm -p 1414 -ha 'a=h1(4444),b=h2(4444),c=h3(4444)' -hi a QM1   (then -hi b, -hi c)
  ferrymq crtmqm -p 1414 -dr primary -drr 'dr1(4445)' -drlag 4194304 QM1
  FERRYMQ_APP_PASSWORD=... ferrymq crtmqm -p 1414 --dev QM1   (development configuration)

A new queue manager is secure by default: clients need a user and password (ferrymq setmqusr),
SYSTEM.* channels refuse clients except SYSTEM.ADMIN.SVRCONN (administrators, with a password),
and administrative users are refused on other channels.

QMNAME: up to 48 of A-Z a-z 0-9 . / _ % (exit 72 if not). Exit 8: it already exists.";

const EXAMPLES_STRMQM: &str = "\
Examples:
  ferrymq strmqm QM1

Returns once the queue manager accepts connections. Exit 3: it is running, but recovery
discarded what may have been acknowledged (the error log lists it); 5: already running;
16: it does not exist.";

const EXAMPLES_ENDMQM: &str = "\
Examples:
  ferrymq endmqm -w QM1        controlled end, wait until it has ended
  ferrymq endmqm -i QM1        immediate end

Exit 16: it does not exist; 40: it is not running.";

const EXAMPLES_SETMQUSR: &str = "\
Examples:
  printf '%s\\n' \"$PW\" | ferrymq setmqusr -m QM1 -u alice -g apps --password-stdin
  ferrymq setmqusr -m QM1 -u alice -g apps,ops

Adds the user or changes its groups (-g) and password (--password-stdin, or FERRYMQ_PASSWORD).
A running queue manager reads the store again at once.";

const EXAMPLES_DLTMQUSR: &str = "\
Examples:
  ferrymq dltmqusr -m QM1 -u alice";

const EXAMPLES_DSPMQUSR: &str = "\
Examples:
  ferrymq dspmqusr -m QM1

Shows each user's groups and whether it has a password (never the password or its hash).";

const EXAMPLES_DLTMQM: &str = "\
Examples:
  ferrymq endmqm -w QM1 && ferrymq dltmqm QM1

Deletes exactly this queue manager's directory. Exit 5: it is running; 16: it does not exist.";

const EXAMPLES_DSPMQ: &str = "\
Examples:
  ferrymq dspmq
  ferrymq dspmq -m QM1 -o ha     the HA group as this instance sees it
  ferrymq dspmq -o dr            role, link, positions, LAGBYTES/HELDBYTES, lag in seconds
  ferrymq dspmq -o dr -m QM1 -w 600
                                 wait for a resynchronisation to end, with its progress";

const EXAMPLES_SETMQINI: &str = "\
Examples:
  ferrymq setmqini -m QM1 -s Log -k Durability -v os
  ferrymq setmqini -m QM1 -s Metrics -k Port -v 9157
  ferrymq setmqini -m QM1 -s Metrics -k Port -d

Unknown stanzas or keys are refused with the valid list (-f keeps them, with a warning).";

const EXAMPLES_DSPMQINI: &str = "\
Examples:
  ferrymq dspmqini -m QM1";

const EXAMPLES_SETHA: &str = "\
Examples:
  ferrymq sethapreferred -m QM1          prefer the instance on this host
  ferrymq sethapreferred -m QM1 -i b";

const EXAMPLES_CLEARHA: &str = "\
Examples:
  ferrymq clearhapreferred -m QM1";

const EXAMPLES_MAKEDRPRIMARY: &str = "\
Examples:
  ferrymq makedrprimary -m QM1 -r 'main1(4445)' && ferrymq strmqm QM1

The recovery site takes over, with the old primary's lag bound unless -drlag; -r names the
site it ships to from now on (the old main site, once it is back as secondary).";

const EXAMPLES_MAKEDRSECONDARY: &str = "\
Examples:
  ferrymq makedrsecondary -m QM1 -l 'main1(4445)' && ferrymq strmqm QM1

An ended (old) primary becomes the secondary; the primary resynchronises it.";

const EXAMPLES_RUNMQSC: &str = "\
Examples:
  echo 'DEFINE QLOCAL(APP.IN)' | ferrymq runmqsc QM1
  ferrymq runmqsc -v QM1 < setup.mqsc                 check the syntax only
  ferrymq runmqsc -c --conn 'mq1(1414)' QM1 < setup.mqsc

Exit 0: every command worked; 10: some failed; 20: none worked, or a usage error.";

const EXAMPLES_DMPMQCFG: &str = "\
Examples:
  ferrymq dmpmqcfg -m QM1 > qm1.mqsc                  everything, as MQSC
  ferrymq runmqsc QM2 < qm1.mqsc                      the same configuration on QM2
  ferrymq dmpmqcfg -m QM1 -x chlauth                  channel authentication records only
  ferrymq dmpmqcfg -m QM1 -o json | jq '.commands[].name'

ALTER QMGR, then DEFINE ... REPLACE of every object that is not a SYSTEM one with all its
attributes, then SET CHLAUTH and SET AUTHREC. Lines starting '*' are comments (queue manager
name, QMID, time of the dump). Exit 0; 1: usage; 20: the queue manager is not available.";

const EXAMPLES_SETMQAUT: &str = "\
Examples:
  ferrymq setmqaut -m QM1 -t qmgr -p app +connect +inq
  ferrymq setmqaut -m QM1 -t queue -n 'APP.**' -g apps +put +get +browse +inq
  ferrymq setmqaut -m QM1 -t queue -n APP.SECRET -p app -get -browse

Runs SET AUTHREC through the queue manager's bindings socket (so the caller needs CHG on the
queue manager). Profiles may be generic: * within a qualifier, ** any qualifiers, ? one
character; for each entity the most specific matching profile decides. Authorities: all,
allmqi, alladm, none, or altusr browse chg clr connect crt ctrl ctrlx dlt dsp get inq passall
passid pub put resume set setall setid sub system. Exit 0; 1: usage; 71: refused or failed.";

const EXAMPLES_DSPMQAUT: &str = "\
Examples:
  ferrymq dspmqaut -m QM1 -t queue -n APP.IN -p app
  ferrymq dspmqaut -m QM1 -t qmgr -g apps

The authorities the entity holds on the object: a user's own records and its groups' combined
(DISPLAY ENTAUTH), and the records they come from. Exit 0; 1: usage; 71: refused or failed.";

const EXAMPLES_DMPMQAUT: &str = "\
Examples:
  ferrymq dmpmqaut -m QM1
  ferrymq dmpmqaut -m QM1 -t queue -n APP.IN -p app

Lists authority records (DISPLAY AUTHREC): with -n, the records whose profile is the name or a
generic profile covering it. Exit 0; 1: usage; 71: refused or failed.";

const EXAMPLES_DMPLOG: &str = "\
Examples:
  ferrymq dmplog QM1
  ferrymq endmqm -w QM1 && ferrymq dmplog --salvage QM1";

const EXAMPLES_DEMO: &str = "\
Examples:
  ferrymq demo
  ferrymq demo --seconds 10 --requesters 8 --persistent

Ctrl-C or SIGTERM ends and deletes the queue manager (exit 130).";

const EXAMPLES_RELAY: &str = "\
Examples:
  ferrymq relay --listen 'localhost(5000)' --target 'localhost(1414)' --rtt-ms 20
  ferrymq relay --listen 127.0.0.1:5000 --target 127.0.0.1:1414 --rtt-ms 50 --mbps 100";

const EXAMPLES_REQ: &str = "\
Examples:
  echo ping | ferrymq req QM1 APP.REQUEST --reply-to APP.REPLY
  printf 'a\\nb\\n' | ferrymq req QM1 APP.REQUEST --reply-to APP.REPLY --wait-ms 30000 --md
  echo ping | ferrymq req QM1 APP.REQUEST --reply-to APP.REPLY --report coa,cod

Each line of standard input is one request (MsgType 1, Format MQSTR) with ReplyToQ; then
each reply is awaited by CorrelId (the request's MsgId, as a responder copies it) and printed
as `get` prints it; with --report, the reports the queue manager sends (COA, COD) are printed
too, by the same CorrelId. Exit 3: a reply did not come within --wait-ms.";

const EXAMPLES_RUNMQDLQ: &str = "\
Examples:
  ferrymq runmqdlq SYSTEM.DEAD.LETTER.QUEUE QM1 < rules.txt
  ferrymq runmqdlq --rules rules.txt

rules.txt:
  INPUTQ(SYSTEM.DEAD.LETTER.QUEUE) INPUTQM(QM1) RETRYINT(0) WAIT(NO)
  REASON(MQRC_Q_FULL) ACTION(RETRY) RETRY(3)
  DESTQ(APP.*) ACTION(FWD) FWDQ(APP.DEAD) HEADER(YES)
  REASON(2085) ACTION(DISCARD)
  ACTION(IGNORE)

One control line (INPUTQ, INPUTQM, WAIT(YES|NO), RETRYINT seconds) then rules: the first rule
whose patterns (REASON, DESTQ, DESTQM, FORMAT, USERID, APPLNAME... as MQ spells them; * ends a
generic name) all match a message decides: RETRY puts it back to its destination (without the header)
up to RETRY(n) times, FWD puts it to FWDQ with (HEADER(YES)) or without the header, DISCARD
removes it, IGNORE leaves it. A message no rule matches stays on the queue. WAIT(YES), MQ's
default, keeps watching the queue; WAIT(NO) ends at its end, WAIT(n) after n idle seconds.";

const EXAMPLES_DSPMQVER: &str = "\
Examples:
  ferrymq dspmqver";

const EXAMPLES_COMPLETIONS: &str = "\
Examples:
  ferrymq completions bash > ~/.local/share/bash-completion/completions/ferrymq
  ferrymq completions zsh > ~/.zfunc/_ferrymq
  ferrymq completions fish > ~/.config/fish/completions/ferrymq.fish";

const EXAMPLES_MAN: &str = "\
Examples:
  ferrymq man --out ~/.local/share/man/man1 && man ferrymq-crtmqm";

const EXAMPLES_HELP: &str = "\
Examples:
  ferrymq help
  ferrymq help dspmq";

const PUBSUB_NOTE: &str = "`ferrymq pub --help` and `ferrymq sub --help` describe their options.";
const FTE_NOTE: &str = "`ferrymq fteCreateTransfer --help` (and each fte command's) describes its flags; MQ's single-dash spellings (-agentName) are accepted.";
const SAMPLE_NOTE: &str = "`ferrymq put --help` (get, browse) describes its options.";

/// The whole command line.
#[derive(Parser, Debug)]
#[command(
    name = "ferrymq",
    version = crate::version::SHORT,
    about = "FerryMQ, an open-source message queue manager",
    disable_help_subcommand = true,
    propagate_version = false
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Create a queue manager
    #[command(
        after_help = EXAMPLES_CRTMQM,
        override_usage = "ferrymq crtmqm [-p PORT] [-lp N] [-lf PAGES] [-h MAXHANDLES] [-fs N] [-c TEXT]\n              [-ha LIST -hi NAME] [-dr primary|secondary [-drr LIST] [-drl ADDR] [-drlag BYTES]]\n              [--dev [--dev-app-password-stdin] | --insecure] QMNAME"
    )]
    Crtmqm(Box<Crtmqm>),
    /// Start a queue manager in the background; returns once it accepts connections
    #[command(after_help = EXAMPLES_STRMQM, override_usage = "ferrymq strmqm QMNAME")]
    Strmqm(Strmqm),
    /// End a queue manager: controlled (default) or immediate
    #[command(after_help = EXAMPLES_ENDMQM, override_usage = "ferrymq endmqm [-c|-i|-p] [-w] QMNAME")]
    Endmqm(Endmqm),
    /// Delete an ended queue manager and all its data
    #[command(after_help = EXAMPLES_DLTMQM, override_usage = "ferrymq dltmqm QMNAME")]
    Dltmqm(Dltmqm),
    /// Show queue managers and their status (-o ha: the HA group; -o dr: DR status)
    #[command(after_help = EXAMPLES_DSPMQ, override_usage = "ferrymq dspmq [-m QMNAME] [-o ha|dr]")]
    Dspmq(Dspmq),
    /// Set (or with -d remove) a qm.ini key; takes effect at the next start
    #[command(
        after_help = EXAMPLES_SETMQINI,
        override_usage = "ferrymq setmqini -m QMNAME -s STANZA -k KEY (-v VALUE | -d) [-f]"
    )]
    Setmqini(Setmqini),
    /// Add a user to the queue manager's user store, or change its groups or password
    #[command(
        after_help = EXAMPLES_SETMQUSR,
        override_usage = "ferrymq setmqusr -m QMNAME -u USER [-g GROUP,...] [--password-stdin]"
    )]
    Setmqusr(Setmqusr),
    /// Remove a user from the queue manager's user store
    #[command(after_help = EXAMPLES_DLTMQUSR, override_usage = "ferrymq dltmqusr -m QMNAME -u USER")]
    Dltmqusr(Dltmqusr),
    /// Show the users of the queue manager's user store and their groups
    #[command(after_help = EXAMPLES_DSPMQUSR, override_usage = "ferrymq dspmqusr -m QMNAME")]
    Dspmqusr(Dspmqusr),
    /// Show a queue manager's qm.ini
    #[command(after_help = EXAMPLES_DSPMQINI, override_usage = "ferrymq dspmqini -m QMNAME")]
    Dspmqini(Dspmqini),
    /// HA: prefer this (or the named) instance as the active one
    #[command(
        after_help = EXAMPLES_SETHA,
        override_usage = "ferrymq sethapreferred -m QMNAME [-i INSTANCE]"
    )]
    Sethapreferred(Sethapreferred),
    /// HA: no preferred instance any more
    #[command(after_help = EXAMPLES_CLEARHA, override_usage = "ferrymq clearhapreferred -m QMNAME")]
    Clearhapreferred(Clearhapreferred),
    /// DR: the recovery site's queue manager becomes the primary (then strmqm it)
    #[command(
        after_help = EXAMPLES_MAKEDRPRIMARY,
        override_usage = "ferrymq makedrprimary -m QMNAME [-r LIST] [-f] [-drlag BYTES]"
    )]
    Makedrprimary(Makedrprimary),
    /// DR: an ended (old) primary becomes the secondary
    #[command(
        after_help = EXAMPLES_MAKEDRSECONDARY,
        override_usage = "ferrymq makedrsecondary -m QMNAME [-l ADDR] [-drlag BYTES]"
    )]
    Makedrsecondary(Makedrsecondary),
    /// Run MQSC commands from standard input
    #[command(
        after_help = EXAMPLES_RUNMQSC,
        override_usage = "ferrymq runmqsc [-e] [-v] [-c [--conn 'host(port)']] QMNAME"
    )]
    Runmqsc(Runmqsc),
    /// Dump a queue manager's configuration as MQSC (or JSON) that runmqsc replays
    #[command(
        after_help = EXAMPLES_DMPMQCFG,
        override_usage = "ferrymq dmpmqcfg -m QMNAME [-o mqsc|json] [-x all|object|authrec|chlauth]"
    )]
    Dmpmqcfg(Dmpmqcfg),
    /// Grant or revoke authorities of a user or group on objects (SET AUTHREC)
    #[command(
        after_help = EXAMPLES_SETMQAUT,
        override_usage = "ferrymq setmqaut -m QMNAME -t TYPE [-n PROFILE] (-p USER | -g GROUP) +AUTH|-AUTH ..."
    )]
    Setmqaut(Setmqaut),
    /// Show the authorities a user or group holds on an object
    #[command(
        after_help = EXAMPLES_DSPMQAUT,
        override_usage = "ferrymq dspmqaut -m QMNAME -t TYPE [-n OBJECT] (-p USER | -g GROUP)"
    )]
    Dspmqaut(Dspmqaut),
    /// List authority records
    #[command(
        after_help = EXAMPLES_DMPMQAUT,
        override_usage = "ferrymq dmpmqaut -m QMNAME [-t TYPE] [-n PROFILE] [-p USER | -g GROUP]"
    )]
    Dmpmqaut(Dmpmqaut),
    /// Development only: a CA, a queue manager's and clients' TLS certificates (PEM)
    #[command(
        after_help = EXAMPLES_MKDEVCERTS,
        override_usage = "ferrymq mkdevcerts --dir DIR [-m QMNAME] [--client NAME ...] [--host NAME ...]"
    )]
    Mkdevcerts(Mkdevcerts),
    /// List a queue manager's recovery log and message store records, and their damage
    #[command(after_help = EXAMPLES_DMPLOG)]
    Dmplog(Dmplog),
    /// Show FerryMQ's name, version, build and platform
    #[command(after_help = EXAMPLES_DSPMQVER)]
    Dspmqver,
    /// Sample: put messages (one per line of stdin, or per --file)
    #[command(disable_help_flag = true, after_help = SAMPLE_NOTE)]
    Put(Raw),
    /// Sample: print and remove messages
    #[command(disable_help_flag = true, after_help = SAMPLE_NOTE)]
    Get(Raw),
    /// Sample: print messages, leaving them on the queue
    #[command(disable_help_flag = true, after_help = SAMPLE_NOTE)]
    Browse(Raw),
    /// Sample: publish each line of stdin on a topic (like amqspub)
    #[command(disable_help_flag = true, after_help = PUBSUB_NOTE)]
    Pub(Raw),
    /// Sample: subscribe to a topic and print its publications (like amqssub)
    #[command(disable_help_flag = true, after_help = PUBSUB_NOTE)]
    Sub(Raw),
    /// Managed file transfer: set up the coordination queue manager (the transfer log)
    #[command(name = "fteSetupCoordination", disable_help_flag = true, after_help = FTE_NOTE)]
    FteSetupCoordination(Raw),
    /// Managed file transfer: create an agent (its queues and agent.properties)
    #[command(name = "fteCreateAgent", disable_help_flag = true, after_help = FTE_NOTE)]
    FteCreateAgent(Raw),
    /// Managed file transfer: start an agent and wait until it is ready
    #[command(name = "fteStartAgent", disable_help_flag = true, after_help = FTE_NOTE)]
    FteStartAgent(Raw),
    /// Managed file transfer: stop an agent
    #[command(name = "fteStopAgent", disable_help_flag = true, after_help = FTE_NOTE)]
    FteStopAgent(Raw),
    /// Managed file transfer: list the agents
    #[command(name = "fteListAgents", disable_help_flag = true, after_help = FTE_NOTE)]
    FteListAgents(Raw),
    /// Managed file transfer: show an agent's properties and status
    #[command(name = "fteShowAgentDetails", disable_help_flag = true, after_help = FTE_NOTE)]
    FteShowAgentDetails(Raw),
    /// Managed file transfer: transfer files between agents
    #[command(name = "fteCreateTransfer", disable_help_flag = true, after_help = FTE_NOTE)]
    FteCreateTransfer(Raw),
    /// Managed file transfer: create a resource monitor (a directory that triggers transfers)
    #[command(name = "fteCreateMonitor", disable_help_flag = true, after_help = FTE_NOTE)]
    FteCreateMonitor(Raw),
    /// Managed file transfer: list resource monitors
    #[command(name = "fteListMonitors", disable_help_flag = true, after_help = FTE_NOTE)]
    FteListMonitors(Raw),
    /// Managed file transfer: delete a resource monitor
    #[command(name = "fteDeleteMonitor", disable_help_flag = true, after_help = FTE_NOTE)]
    FteDeleteMonitor(Raw),
    /// Managed file transfer: cancel a transfer in progress
    #[command(name = "fteCancelTransfer", disable_help_flag = true, after_help = FTE_NOTE)]
    FteCancelTransfer(Raw),
    /// Managed file transfer: the agent process (fteStartAgent runs it)
    #[command(disable_help_flag = true, after_help = FTE_NOTE)]
    Fte(Raw),
    /// Sample: put requests (one per line of stdin) and print their replies, matched by CorrelId
    #[command(after_help = EXAMPLES_REQ)]
    Req(Req),
    /// Dead-letter queue handler: act on dead-lettered messages by rules (retry, forward, discard)
    #[command(after_help = EXAMPLES_RUNMQDLQ)]
    Runmqdlq(Runmqdlq),
    /// TCP relay adding round-trip time (and a bandwidth limit): netem without netem
    #[command(after_help = EXAMPLES_RELAY)]
    Relay(Relay),
    /// Create a queue manager, run request/reply, print the rate, clean up
    #[command(after_help = EXAMPLES_DEMO)]
    Demo(Demo),
    /// Print a shell completion script (bash, zsh or fish) to standard output
    #[command(after_help = EXAMPLES_COMPLETIONS)]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Write one man page per command
    #[command(after_help = EXAMPLES_MAN)]
    Man {
        /// Directory to write the pages to (created if missing)
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: std::path::PathBuf,
    },
    /// Help on ferrymq or on one command
    #[command(after_help = EXAMPLES_HELP)]
    Help {
        /// The command (e.g. `crtmqm`, `dspmq`)
        command: Vec<String>,
    },
    /// Every command, one per line (for tests and scripts)
    #[command(hide = true, after_help = "Examples:\n  ferrymq commands")]
    Commands,
    /// The queue manager process itself, in the foreground (what strmqm starts)
    #[command(
        name = "run-qmgr",
        hide = true,
        override_usage = "ferrymq run-qmgr QMNAME",
        after_help = "Examples:\n  ferrymq run-qmgr QM1      (strmqm QM1 runs this in the background)"
    )]
    RunQmgr(QmName),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

const EXAMPLES_MKDEVCERTS: &str = "\
For development and tests only: keys are written unencrypted and nothing can revoke them.
DIR gets ca.pem (and ca.key, reused by later runs), QMNAME.pem/QMNAME.key for the queue manager
(valid for localhost, 127.0.0.1, ::1 and each --host) and NAME.pem/NAME.key per --client (CN=NAME).
With -m, the queue manager's qm.ini SSL stanza is set to them (REFRESH SECURITY TYPE(SSL) or a
restart makes it take effect).

Examples:
  ferrymq mkdevcerts --dir /tmp/certs -m QM1 --client app
  ferrymq put --conn 'localhost(1414)' --tls-ca /tmp/certs/ca.pem \\
      --tls-cert /tmp/certs/app.pem --tls-key /tmp/certs/app.key QM1 Q1";

/// Arguments passed on untouched (the samples parse their own).
#[derive(Args, Debug)]
pub struct Raw {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

#[derive(Args, Debug, Default)]
pub struct QmName {
    /// The queue manager
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

#[derive(Args, Debug, Default)]
pub struct Crtmqm {
    /// TCP port of the listener (default 1414; 0: any free port)
    #[arg(long, value_name = "PORT")]
    pub p: Option<u16>,
    /// Log files in the circular log, 2-254
    #[arg(long, value_name = "N")]
    pub lp: Option<u32>,
    /// Pages of 4 KiB per log file, 64-65535
    #[arg(long, value_name = "PAGES")]
    pub lf: Option<u32>,
    /// Most open handles per connection
    #[arg(long, value_name = "MAXHANDLES")]
    pub h: Option<u32>,
    /// Default queue file size, kept in qm.ini (TuningParameters:DefaultQFileSize)
    #[arg(long, value_name = "N")]
    pub fs: Option<String>,
    /// Description
    #[arg(long, value_name = "TEXT")]
    pub c: Option<String>,
    /// Circular logging (the only kind, and the default)
    #[arg(long)]
    pub lc: bool,
    /// HA: every instance of the group, in the same order on each host: 'a=host(p),b=host(p),c=host(p)'
    #[arg(long, value_name = "LIST")]
    pub ha: Option<String>,
    /// HA: this instance's name in -ha
    #[arg(long, value_name = "NAME")]
    pub hi: Option<String>,
    /// DR role: primary (main site) or secondary (recovery site)
    #[arg(long, value_name = "ROLE")]
    pub dr: Option<String>,
    /// DR secondary: the address it receives on, 'host(port)'
    #[arg(long, value_name = "ADDR")]
    pub drl: Option<String>,
    /// DR primary: the recovery sites' addresses, 'host(p)[,host(p)...]'
    #[arg(long, value_name = "LIST")]
    pub drr: Option<String>,
    /// DR primary: most bytes of work at risk before puts wait (default 4 MiB)
    #[arg(long, value_name = "BYTES")]
    pub drlag: Option<String>,
    /// Development configuration: user 'app' (group mqclient), DEV.QUEUE.1-3, DEV.DEAD.LETTER.QUEUE,
    /// DEV.BASE.TOPIC, channels DEV.APP.SVRCONN and DEV.ADMIN.SVRCONN, their CHLAUTH rules and
    /// authorities. app's password: FERRYMQ_APP_PASSWORD or --dev-app-password-stdin; without
    /// one, app needs none on DEV.APP.SVRCONN
    #[arg(long)]
    pub dev: bool,
    /// With --dev: read the app user's password from the first line of standard input
    #[arg(long)]
    pub dev_app_password_stdin: bool,
    /// Leave out the security defaults (back-stop CHLAUTH rules, passwords, remote administration
    /// over SYSTEM.ADMIN.SVRCONN only): clients connect as before them. For test rigs only
    #[arg(long)]
    pub insecure: bool,
    #[command(flatten)]
    pub ignored: CrtmqmIgnored,
    /// The queue manager's name
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

/// crtmqm's flags that MQ has and FerryMQ does not act on (read only by the notes).
#[derive(Args, Debug, Default)]
#[allow(dead_code)]
pub struct CrtmqmIgnored {
    /// secondary log files: the circular log is fixed at -lp files
    #[arg(long, value_name = "N", help_heading = IGNORED)]
    ls: Option<String>,
    /// the log lives in the queue manager's directory
    #[arg(long, value_name = "PATH", help_heading = IGNORED)]
    ld: Option<String>,
    /// data lives under $FERRYMQ_HOME
    #[arg(long, value_name = "PATH", help_heading = IGNORED)]
    md: Option<String>,
    /// the dead-letter queue is SYSTEM.DEAD.LETTER.QUEUE
    #[arg(long, value_name = "QUEUE", help_heading = IGNORED)]
    u: Option<String>,
    /// trigger monitors are not supported yet
    #[arg(long, value_name = "SECONDS", help_heading = IGNORED)]
    t: Option<String>,
    /// the most uncommitted messages in a unit of work is the queue manager's MAXUMSGS (10000 by default): set it with ALTER QMGR MAXUMSGS(n) in runmqsc
    #[arg(long, value_name = "N", help_heading = IGNORED)]
    x: Option<String>,
    /// there is no default queue manager; name it on each command
    #[arg(long, help_heading = IGNORED)]
    q: bool,
    /// FerryMQ has no verbose error suppression to turn off
    #[arg(long, help_heading = IGNORED)]
    z: bool,
    /// only circular logging exists, as on the MQ Appliance
    #[arg(long, help_heading = REFUSED)]
    ll: bool,
}

#[derive(Args, Debug, Default)]
pub struct Strmqm {
    /// standby instances arrive with high availability
    #[arg(long, help_heading = IGNORED)]
    pub x: bool,
    /// The queue manager
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

#[derive(Args, Debug, Default)]
pub struct Endmqm {
    /// Controlled end (the default): waits for applications to disconnect
    #[arg(long)]
    pub c: bool,
    /// Immediate end
    #[arg(long)]
    pub i: bool,
    /// Preemptive end (as immediate)
    #[arg(long)]
    pub p: bool,
    /// Wait until the queue manager has ended, and say how it ended
    #[arg(long)]
    pub w: bool,
    #[command(flatten)]
    pub ignored: EndmqmIgnored,
    /// The queue manager
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

#[derive(Args, Debug, Default)]
#[allow(dead_code)]
pub struct EndmqmIgnored {
    /// clients reconnect by themselves when given several addresses
    #[arg(long, help_heading = IGNORED)]
    r: bool,
    /// standby instances arrive with high availability
    #[arg(long, help_heading = IGNORED)]
    s: bool,
    /// standby instances arrive with high availability
    #[arg(long, help_heading = IGNORED)]
    x: bool,
}

#[derive(Args, Debug, Default)]
pub struct Dltmqm {
    /// nothing to suppress
    #[arg(long, help_heading = IGNORED)]
    pub z: bool,
    /// The queue manager
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

#[derive(Args, Debug, Default)]
pub struct Dspmq {
    /// Only this queue manager
    #[arg(long, value_name = "QMNAME")]
    pub m: Option<String>,
    /// ha: the HA group as this instance sees it (needs -m); dr: the DR status
    #[arg(long, value_name = "ha|dr")]
    pub o: Option<String>,
    /// With -o dr -m QMNAME: wait up to SECONDS for the DR link to be streaming (a
    /// resynchronisation over), showing the full copy's progress; exit 1 if it is not
    #[arg(long, value_name = "SECONDS")]
    pub w: Option<u64>,
    /// standby instances arrive with high availability
    #[arg(long, help_heading = IGNORED)]
    #[allow(dead_code)]
    x: bool,
    /// status is always shown
    #[arg(long, help_heading = IGNORED)]
    #[allow(dead_code)]
    s: bool,
}

#[derive(Args, Debug, Default)]
pub struct Setmqusr {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The user
    #[arg(long, value_name = "USER", required = true)]
    pub u: Option<String>,
    /// Its groups, comma-separated (replaces the ones it had)
    #[arg(long, value_name = "GROUPS")]
    pub g: Option<String>,
    /// Read its password from the first line of standard input
    #[arg(long)]
    pub password_stdin: bool,
}

#[derive(Args, Debug, Default)]
pub struct Dltmqusr {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The user
    #[arg(long, value_name = "USER", required = true)]
    pub u: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Dspmqusr {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Setmqini {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The stanza, e.g. Log
    #[arg(long, value_name = "STANZA", required = true)]
    pub s: Option<String>,
    /// The key, e.g. Durability
    #[arg(long, value_name = "KEY", required = true)]
    pub k: Option<String>,
    /// The value
    #[arg(long, value_name = "VALUE", required_unless_present = "d")]
    pub v: Option<String>,
    /// Remove the key instead
    #[arg(long)]
    pub d: bool,
    /// Keep a stanza or key FerryMQ does not know, with a warning
    #[arg(long)]
    pub f: bool,
}

#[derive(Args, Debug, Default)]
pub struct Dspmqini {
    /// The queue manager
    #[arg(long, value_name = "QMNAME")]
    pub m: Option<String>,
    /// The queue manager (instead of -m)
    #[arg(value_name = "QMNAME", hide = true)]
    pub name: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Sethapreferred {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The instance to prefer (default: the one on this host)
    #[arg(long, value_name = "INSTANCE")]
    pub i: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Clearhapreferred {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Makedrprimary {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The addresses to ship to from now on, 'host(p)[,host(p)...]'
    #[arg(long, value_name = "LIST")]
    pub r: Option<String>,
    /// Promote even without a complete copy of the primary
    #[arg(long)]
    pub f: bool,
    /// Most bytes of work at risk from now on (default: the old primary's bound)
    #[arg(long, value_name = "BYTES")]
    pub drlag: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Makedrsecondary {
    /// The queue manager
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// The address it receives on from now on, 'host(port)'
    #[arg(long, value_name = "ADDR")]
    pub l: Option<String>,
    /// Most bytes of work at risk (default: as qm.ini has it)
    #[arg(long, value_name = "BYTES")]
    pub drlag: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct Runmqsc {
    /// Do not echo the commands
    #[arg(long)]
    pub e: bool,
    /// Verify the syntax only; run nothing
    #[arg(long)]
    pub v: bool,
    /// Client mode: over TCP (--conn, or MQSERVER=CHANNEL/TCP/host(port))
    #[arg(long)]
    pub c: bool,
    /// Client mode: the connection name, 'host(port)'
    #[arg(long, value_name = "CONNAME")]
    pub conn: Option<String>,
    #[command(flatten)]
    pub auth: ConnAuth,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The queue manager
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

#[derive(Args, Debug, Default)]
pub struct Dmpmqcfg {
    /// The queue manager (local: through its bindings socket)
    #[arg(long, value_name = "QMNAME", required = true)]
    pub m: Option<String>,
    /// Output format
    #[arg(long, value_name = "FORMAT", default_value = "mqsc", value_parser = ["mqsc", "json"])]
    pub o: String,
    /// What to dump
    #[arg(long, value_name = "WHAT", default_value = "all", value_parser = ["all", "object", "authrec", "chlauth"])]
    pub x: String,
}

#[derive(Args, Debug, Default)]
pub struct Dmplog {
    /// (queue manager ended) overwrite each damaged log span that readable records follow with a
    /// filler, so that recovery keeps the records after it
    #[arg(long)]
    pub salvage: bool,
    /// The queue manager
    #[arg(value_name = "QMNAME")]
    pub name: String,
}

#[derive(Args, Debug)]
pub struct Demo {
    /// How long the workload runs
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub seconds: u64,
    /// Requester threads
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub requesters: usize,
    /// Persistent messages
    #[arg(long)]
    pub persistent: bool,
    /// Message size in bytes
    #[arg(long, value_name = "BYTES", default_value_t = 2048)]
    pub size: usize,
}

#[derive(Args, Debug)]
pub struct Req {
    /// Queue manager name (bindings mode, unless --conn)
    pub qmgr: String,
    /// Queue the requests are put to
    pub queue: String,
    /// Queue the replies come back to, @ its queue manager (default: this one)
    #[arg(long, value_name = "Q[@QMGR]")]
    pub reply_to: String,
    /// How long to wait for each reply, in ms
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub wait_ms: u64,
    /// Ask for reports too: coa, cod, exception, expiration (comma-separated)
    #[arg(long, value_name = "KINDS", value_delimiter = ',')]
    pub report: Vec<String>,
    /// Make the requests persistent
    #[arg(long)]
    pub persistent: bool,
    /// Expiry of each request, in tenths of a second
    #[arg(long, value_name = "TENTHS")]
    pub expiry: Option<i32>,
    /// Print each reply's descriptor too
    #[arg(long)]
    pub md: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Args, Debug)]
pub struct Runmqdlq {
    /// The dead-letter queue (default: the control line's INPUTQ, else the queue manager's DEADQ)
    pub queue: Option<String>,
    /// Queue manager name (default: the control line's INPUTQM)
    pub qmgr: Option<String>,
    /// Read the rules from this file instead of standard input
    #[arg(long, value_name = "PATH")]
    pub rules: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Args, Debug)]
pub struct Relay {
    /// Where to listen: 'host(port)' or ADDR:PORT
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// Where to connect each accepted connection: 'host(port)' or ADDR:PORT
    #[arg(long, value_name = "ADDR")]
    pub target: String,
    /// Round trip added, in ms (half each way), 0-60000
    #[arg(long, value_name = "N", default_value_t = 0.0)]
    pub rtt_ms: f64,
    /// Stop after S seconds (default: run until killed)
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Limit each direction to M megabits/s
    #[arg(long, value_name = "M")]
    pub mbps: Option<f64>,
}

/// The command tree: [`Cli`]'s, with MQ-style commands' help flag as `--help` only (`-h` is
/// crtmqm's MAXHANDLES; `-?` and, where free, `-h` are read as `--help` by [`prepare`]), built.
pub fn command() -> clap::Command {
    let mut root = Cli::command();
    for name in MQ_STYLE {
        root = root.mut_subcommand(name, |c| {
            c.disable_help_flag(true).arg(
                clap::Arg::new("help")
                    .long("help")
                    .action(clap::ArgAction::Help)
                    .help("Print help (also -?)"),
            )
        });
    }
    root.build();
    root
}

/// What to do after reading the command line: run `Cli`, or end now with this status (help,
/// version and usage errors are already printed).
pub enum Parsed {
    Run(Box<Cli>),
    Exit(i32),
}

/// The exit status of a usage error of `cmd` (its first word): runmqsc's is 20, as MQ's.
pub fn usage_status(cmd: &str) -> i32 {
    if cmd == "runmqsc" {
        20
    } else {
        1
    }
}

/// The long names of `sub`'s flags that are spelt with one dash.
fn mq_longs(sub: &clap::Command) -> Vec<String> {
    let name = sub.get_name();
    if !MQ_STYLE.contains(&name) {
        return Vec::new();
    }
    sub.get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "help" && !DOUBLE_DASH_IN_MQ.contains(&(name, *l)))
        .map(str::to_string)
        .collect()
}

/// Every MQ single-dash long name in the tree (for completions and man pages).
fn all_mq_longs(root: &clap::Command) -> Vec<String> {
    let mut v: Vec<String> = root.get_subcommands().flat_map(mq_longs).collect();
    v.sort();
    v.dedup();
    v
}

/// `text` with each `{dash}{dash}X` (X one of `longs`, as a whole word) spelt `{dash}X`, as MQ
/// spells it. `dash` is `-`, or `\-` in roff.
pub fn mq_spelling(text: &str, longs: &[String], dash: &str) -> String {
    if longs.is_empty() {
        return text.to_string();
    }
    let double = format!("{dash}{dash}");
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&double) {
        let before = &rest[..at];
        let before_ok = !before.ends_with(dash)
            && (dash != "-" || !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
        let after = &rest[at + double.len()..];
        let hit = longs.iter().find(|l| {
            after.starts_with(l.as_str())
                && !after[l.len()..].starts_with(word)
                && !after[l.len()..].starts_with("\\-")
        });
        match hit {
            Some(l) if before_ok => {
                out.push_str(&rest[..at]);
                out.push_str(dash);
                out.push_str(l);
                rest = &after[l.len()..];
            }
            _ => {
                out.push_str(&rest[..at + double.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A help text with MQ's spellings, its columns kept: an option line's `--lp` becomes ` -lp`.
pub fn mq_help(text: &str, longs: &[String]) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            if !indent.is_empty() && body.starts_with("--") {
                let spelt = mq_spelling(body, longs, "-");
                if spelt.len() < body.len() && !body[2..].starts_with("help") {
                    return format!("{indent} {spelt}");
                }
            }
            mq_spelling(line, longs, "-")
        })
        .collect();
    let mut s = lines.join("\n");
    if text.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// One flag of an MQ-style command as the user spells it.
struct Spelt {
    spelling: String,
    long: String,
    takes_value: bool,
}

/// Rewrites the arguments of MQ-style command `sub` for clap (see the module's doc). Unknown
/// flags are errors, named as typed.
fn prepare(sub: &clap::Command, args: &[String]) -> Result<Vec<String>, String> {
    let name = sub.get_name();
    if !MQ_STYLE.contains(&name) {
        return Ok(args.to_vec());
    }
    let mq = mq_longs(sub);
    let mut flags: Vec<Spelt> = sub
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            if long == "help" {
                return None;
            }
            let spelling = if mq.iter().any(|m| m == long) {
                format!("-{long}")
            } else {
                format!("--{long}")
            };
            Some(Spelt {
                spelling,
                long: long.to_string(),
                takes_value: a.get_action().takes_values(),
            })
        })
        .collect();
    flags.sort_by_key(|f| std::cmp::Reverse(f.spelling.len()));
    let has_h = flags.iter().any(|f| f.spelling == "-h");
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if !a.starts_with('-') || a == "-" {
            out.push(a.clone());
            continue;
        }
        if a == "--" {
            out.extend(args[i - 1..].iter().cloned());
            break;
        }
        // setmqaut's revocations (-put, -all) are authorities, not flags.
        if name == "setmqaut" && ferrymq_types::authority::expand(&a[1..]).is_some() {
            out.push(format!("--remove={}", &a[1..]));
            continue;
        }
        if a == "-?" || a == "--help" || (a == "-h" && !has_h) {
            out.push("--help".into());
            continue;
        }
        let exact = flags.iter().find(|f| *a == f.spelling);
        let found = exact.map(|f| (f, None)).or_else(|| {
            flags
                .iter()
                .filter(|f| f.takes_value)
                .find_map(|f| a.strip_prefix(f.spelling.as_str()).map(|v| (f, Some(v))))
                .map(|(f, v)| (f, v.map(|v| v.trim_start_matches('=').to_string())))
        });
        let Some((flag, attached)) = found else {
            return Err(format!("{name}: unknown flag '{a}'"));
        };
        if !flag.takes_value {
            out.push(format!("--{}", flag.long));
            continue;
        }
        // The value is the next argument whatever it looks like (as MQ reads it).
        let value = match attached {
            Some(v) => Some(v),
            None => {
                let v = args.get(i).cloned();
                if v.is_some() {
                    i += 1;
                }
                v
            }
        };
        match value {
            Some(v) => out.push(format!("--{}={v}", flag.long)),
            // clap reports the missing value.
            None => out.push(format!("--{}", flag.long)),
        }
    }
    Ok(out)
}

/// The subcommand (at any depth) that `words` name, with its path.
fn find_sub<'a>(root: &'a clap::Command, words: &[String]) -> Option<&'a clap::Command> {
    let mut cmd = root;
    for w in words {
        cmd = cmd.find_subcommand(w)?;
    }
    Some(cmd)
}

/// Writes to stdout without panicking on a closed pipe.
fn out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
    let _ = std::io::stdout().flush();
}

/// Writes to stderr without panicking.
pub fn err(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// The help of the command named by `words` (empty: `ferrymq` itself), as MQ spells its flags.
pub fn help_of(words: &[String]) -> Option<String> {
    let root = command();
    if words.is_empty() {
        return Some(top_help(&root));
    }
    let sub = find_sub(&root, words)?;
    let longs = mq_longs(find_sub(&root, &words[..1])?);
    let mut sub = sub.clone();
    Some(mq_help(&sub.render_help().to_string(), &longs))
}

/// `ferrymq --help`: the commands in [`GROUPS`], each with its one-line description.
pub fn top_help(root: &clap::Command) -> String {
    let mut s = format!(
        "{}\n\nUsage: ferrymq COMMAND [ARGS]   (`ferrymq COMMAND --help` or `-?` for each)\n",
        root.get_about()
            .map(StyledStr::to_string)
            .unwrap_or_default()
    );
    for (group, names, note) in GROUPS {
        s.push_str(&format!("\n{group}:\n"));
        for n in *names {
            let about = root
                .find_subcommand(n)
                .and_then(|c| c.get_about())
                .map(StyledStr::to_string)
                .unwrap_or_default();
            // A name longer than the column still gets a space before its description.
            let gap = if n.len() >= 18 { " " } else { "" };
            s.push_str(&format!("  {n:<18}{gap}{about}\n"));
        }
        for line in note.lines() {
            s.push_str(&format!("    {}\n", line.trim()));
        }
    }
    s.push_str(
        "\nOptions:\n  -h, --help        Print this help\n  -V, --version     Print the version\n\n\
         Data lives under $FERRYMQ_HOME (default ~/.ferrymq), one directory per queue manager.\n\
         Shell completions: ferrymq completions bash|zsh|fish; man pages: ferrymq man --out DIR.\n",
    );
    s
}

/// Reads the command line. Help, version and usage errors are printed here.
pub fn parse(args: &[String]) -> Parsed {
    let root = command();
    let Some(first) = args.first() else {
        err(&top_help(&root));
        return Parsed::Exit(1);
    };
    match first.as_str() {
        "--help" | "-h" | "-?" => {
            out(&top_help(&root));
            return Parsed::Exit(0);
        }
        "--version" | "-V" => {
            out(&format!("{}\n", crate::version::long()));
            return Parsed::Exit(0);
        }
        _ => {}
    }
    let Some(sub) = root.find_subcommand(first).cloned() else {
        err(&format!(
            "ferrymq: unknown command '{first}'\n\n{}",
            top_help(&root)
        ));
        return Parsed::Exit(1);
    };
    let longs = mq_longs(&sub);
    let status = usage_status(first);
    let rest = match prepare(&sub, &args[1..]) {
        Ok(r) => r,
        Err(e) => {
            let mut sub = sub.clone();
            let usage = mq_spelling(&sub.render_usage().to_string(), &longs, "-");
            err(&format!(
                "{e}\n{usage}\n\nFor more information, try '{first} -?'.\n"
            ));
            return Parsed::Exit(status);
        }
    };
    let argv = ["ferrymq".to_string(), first.clone()]
        .into_iter()
        .chain(rest);
    let matches = match root.clone().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    out(&mq_help(&e.render().to_string(), &longs));
                    Parsed::Exit(0)
                }
                _ => {
                    err(&mq_spelling(&e.render().to_string(), &longs, "-"));
                    Parsed::Exit(status)
                }
            };
        }
    };
    if let Some((name, m)) = matches.subcommand() {
        if let Err(e) = notes_and_refusals(name, &sub, m) {
            err(&format!("{e}\n"));
            return Parsed::Exit(status);
        }
    }
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => Parsed::Run(Box::new(cli)),
        Err(e) => {
            err(&mq_spelling(&e.render().to_string(), &longs, "-"));
            Parsed::Exit(status)
        }
    }
}

/// Prints a note for each flag used under [`IGNORED`]; a flag used under [`REFUSED`] is an error.
fn notes_and_refusals(cmd: &str, sub: &clap::Command, m: &ArgMatches) -> Result<(), String> {
    let longs = mq_longs(sub);
    for a in sub.get_arguments() {
        let heading = a.get_help_heading();
        if heading != Some(IGNORED) && heading != Some(REFUSED) {
            continue;
        }
        let id = a.get_id().as_str();
        if m.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let spelt = mq_spelling(&format!("--{}", a.get_long().unwrap_or(id)), &longs, "-");
        let why = a.get_help().map(StyledStr::to_string).unwrap_or_default();
        if heading == Some(REFUSED) {
            return Err(format!("{cmd}: {spelt} is not supported: {why}"));
        }
        let value = if a.get_action().takes_values() {
            m.get_raw(id)
                .and_then(|mut v| v.next())
                .map(|v| format!(" {}", v.to_string_lossy()))
                .unwrap_or_default()
        } else {
            String::new()
        };
        err(&format!(
            "{cmd}: note: {spelt}{value} accepted but not used: {why}\n"
        ));
    }
    Ok(())
}

/// Every command's words (`crtmqm`, `dspmq`, ...), hidden ones included, depth first.
pub fn all_commands() -> Vec<String> {
    fn walk(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        for s in cmd.get_subcommands() {
            let words = if prefix.is_empty() {
                s.get_name().to_string()
            } else {
                format!("{prefix} {}", s.get_name())
            };
            out.push(words.clone());
            walk(s, &words, out);
        }
    }
    let root = command();
    let mut v = Vec::new();
    walk(&root, "", &mut v);
    v
}

/// `ferrymq completions SHELL`: the script, with MQ's spellings.
pub fn completions(shell: Shell) -> String {
    let mut root = command();
    let longs = all_mq_longs(&root);
    let mut buf = Vec::new();
    let sh = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(sh, &mut root, "ferrymq", &mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    match shell {
        // fish: `-o lp` is an old-style (single-dash) option, `-l lp` a GNU long one.
        Shell::Fish => fish_spelling(&text, &longs),
        _ => mq_spelling(&text, &longs, "-"),
    }
}

fn fish_spelling(text: &str, longs: &[String]) -> String {
    text.lines()
        .map(|line| {
            let mut l = line.to_string();
            for long in longs {
                let from = format!(" -l {long} ");
                if l.contains(&from) && mq_line(line) {
                    l = l.replace(&from, &format!(" -o {long} "));
                }
            }
            l
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Whether a fish completion line belongs to an MQ-style command.
fn mq_line(line: &str) -> bool {
    MQ_STYLE.iter().any(|c| {
        [
            format!("using_subcommand {c}\""),
            format!("using_subcommand {c};"),
            format!("seen_subcommand_from {c}\""),
            format!("seen_subcommand_from {c};"),
        ]
        .iter()
        .any(|p| line.contains(p.as_str()))
    }) && !line.contains(" -l conn ")
}

/// `ferrymq man --out DIR`: one page per command (`ferrymq.1`, `ferrymq-crtmqm.1`, ...), hidden
/// ones left out. Returns the files written.
pub fn man_pages(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    fn walk(
        cmd: &clap::Command,
        longs: &[String],
        dir: &std::path::Path,
        out: &mut Vec<std::path::PathBuf>,
    ) -> std::io::Result<()> {
        for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let own = if MQ_STYLE.contains(&s.get_name()) {
                mq_longs(s)
            } else {
                longs.to_vec()
            };
            walk(s, &own, dir, out)?;
        }
        let man = clap_mangen::Man::new(cmd.clone());
        let mut buf = Vec::new();
        man.render(&mut buf)?;
        let text = mq_spelling(&String::from_utf8_lossy(&buf), longs, "\\-");
        let path = dir.join(man.get_filename());
        std::fs::write(&path, text)?;
        out.push(path);
        Ok(())
    }
    std::fs::create_dir_all(dir)?;
    let root = command();
    let mut files = Vec::new();
    walk(&root, &[], dir, &mut files)?;
    Ok(files)
}

#[cfg(test)]
mod tests;
