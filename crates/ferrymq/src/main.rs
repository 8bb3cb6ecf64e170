//! The `ferrymq` command: queue manager lifecycle with MQ's command names (crtmqm, strmqm, endmqm,
//! dltmqm, dspmq, setmqini, dspmqini), the sample programs (put, get, browse, like MQ's amqsput,
//! amqsget and amqsbcg), and a self-contained demo. It parses arguments and calls the crates that
//! do the work; it holds no queue logic of its own.

mod demo;
mod dmplog;
mod dr_cmds;
mod lifecycle;
mod mqargs;
mod relay;
mod runmqsc;
mod samples;

use lifecycle::Res;

const USAGE: &str = "\
FerryMQ — an open-source message queue manager

Queue manager lifecycle (MQ's names and flags):
  ferrymq crtmqm [-p PORT] [-lp N] [-lf PAGES] [-h MAXHANDLES] [-fs N] [-c TEXT] QMNAME
                                        QMNAME: up to 48 of A-Z a-z 0-9 . / _ % (exit 72 if not)
  ferrymq strmqm QMNAME                 start in the background; returns once it accepts connections
                                        (exit 3: running, but recovery discarded what may have been
                                        acknowledged; the error log lists it)
  ferrymq endmqm [-c|-i|-p] [-w] QMNAME controlled (default) or immediate end; -w waits for it
  ferrymq dltmqm QMNAME
  ferrymq dspmq [-m QMNAME] [-o ha|dr]  -o ha: the HA group as this instance sees it
High availability (three instances of one queue manager, each on its own host):
  ferrymq crtmqm -p PORT -ha 'a=host(p),b=host(p),c=host(p)' -hi a QMNAME   on each host (-hi b, -hi c)
  ferrymq sethapreferred -m QMNAME [-i INSTANCE]   prefer this (or the named) instance as active
  ferrymq clearhapreferred -m QMNAME
Disaster recovery (asynchronous to a recovery site; loss bounded by -drlag, 4 MiB by default):
  ferrymq crtmqm ... -dr primary -drr 'host(p)[,host(p)...]' [-drlag BYTES] QMNAME   main site
  ferrymq crtmqm ... -dr secondary -drl 'host(p)' QMNAME      recovery site (strmqm it: it receives)
  ferrymq makedrprimary -m QMNAME [-r 'host(p),...'] [-f] [-drlag BYTES]   recovery site takes
                                          over (with the old primary's bound unless -drlag); then
                                          strmqm (-f: even without a complete copy of the primary)
  ferrymq makedrsecondary -m QMNAME [-l 'host(p)'] [-drlag BYTES]   an ended (old) primary
                                          becomes the secondary
  ferrymq dspmq -o dr [-m QMNAME]      role, link, positions, work at risk (LAGBYTES) and held
                                       (HELDBYTES) in bytes, lag in seconds
  ferrymq setmqini -m QMNAME -s STANZA -k KEY -v VALUE [-f]   unknown stanzas/keys are refused
                                        with the valid list (-f: kept with a warning)
  ferrymq dspmqini -m QMNAME

Administration:
  ferrymq runmqsc [-e] [-v] [-c [--conn 'host(port)']] QMNAME   MQSC from stdin; exit 0/10/20
  ferrymq dmplog [--salvage] QMNAME     list the log's readable records (LSN, kind, length, CRC)
                                        and damage, and the message store's; --salvage (ended
                                        queue manager) makes recovery keep the records after damage

Sample programs (bindings mode by queue manager name, or --conn 'host(port),...' for client mode;
`ferrymq put --help` for every option; exit 3 no message, 4 not authorised, 5 unknown object,
6 queue manager unavailable, 1 any other failure, 2 usage):
  ferrymq put QMNAME QUEUE [--persistent] [--priority N] [--correl-id ID] [--msg-id ID]
                [--reply-to Q[@QMGR]] [--expiry TENTHS] [--property K[:TYPE]=V]... [--file PATH]
                                          one message per line of stdin, or per --file
  ferrymq get QMNAME QUEUE [--md] [--hex] [--json] [--count N] [--correl-id ID] [--wait-ms N]
                                          print and remove messages (each committed once
                                          written, to a pipe once read; exit 0 if the reader
                                          closes the pipe, the rest stay queued)
  ferrymq browse QMNAME QUEUE [same options as get]   print messages, leave them

Performance (MQ-CPH equivalent; the workload is described in ARCHITECTURE.md, 'The hot path and
what it costs', and in the ferrymq-bench crate's docs, crates/bench/src/lib.rs):
  ferrymq cph rr --qm QMNAME [--conn 'host(port)'] --requesters N --responders M --size BYTES
                 [--persistent] --duration-s S [--warmup-s W] [--queues 10] [--json]
  ferrymq cph requester|responder|putget|sender|receiver ...
  ferrymq report standalone [--quick] [--qms 1,10] [--sizes 2048,...] [--out DIR]
                                         sweep and write the seeds' tables, charts, JSON
  ferrymq report ha [--quick] [--rtts 0,1,2,5,10] [--failover-messages 0,500000] [--out DIR]
                                         HA vs standalone, replication latency, failover time
  ferrymq report dr [--quick] [--rtts 10,20,50,100] [--steps dr1,dr2,hadr,distance] [--out DIR]
                                         DR vs no DR, HA+DR vs HA, DR link latency, DR lag

Network rehearsal:
  ferrymq relay --listen 'host(port)' --target 'host(port)' --rtt-ms N [--seconds S] [--mbps M]
                                         TCP relay adding N ms of round trip (half each way),
                                         keeping order and bandwidth (netem without netem);
                                         ADDR:PORT is accepted as well as host(port);
                                         --mbps limits each direction to M megabits/s

  ferrymq demo [--seconds N] [--requesters N] [--persistent]   create a queue manager, run
                                                               request/reply, print the rate, clean up
                                                               (also on Ctrl-C/SIGTERM, exit 130)

Data lives under $FERRYMQ_HOME (default ~/.ferrymq), one directory per queue manager.
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprint!("{USAGE}");
        std::process::exit(1);
    };
    let rest = &args[1..];
    let r: Res = match cmd.as_str() {
        "crtmqm" => lifecycle::crtmqm(rest),
        "strmqm" => lifecycle::strmqm(rest),
        "endmqm" => lifecycle::endmqm(rest),
        "dltmqm" => lifecycle::dltmqm(rest),
        "dspmq" => lifecycle::dspmq(rest),
        "setmqini" => lifecycle::setmqini(rest),
        "dspmqini" => lifecycle::dspmqini(rest),
        "sethapreferred" => lifecycle::hapreferred(rest, true),
        "clearhapreferred" => lifecycle::hapreferred(rest, false),
        "makedrprimary" => dr_cmds::makedrprimary(rest),
        "makedrsecondary" => dr_cmds::makedrsecondary(rest),
        "run-qmgr" => lifecycle::run_qmgr(rest),
        "runmqsc" => runmqsc::run(rest),
        "dmplog" => dmplog::run(rest),
        "put" => samples::put(rest),
        "get" => samples::get(rest, false),
        "browse" => samples::get(rest, true),
        "demo" => demo::run(rest),
        "relay" => relay::run(rest),
        "report" => ferrymq_bench::report::main(rest).map_err(|m| lifecycle::Fail {
            code: 1,
            message: format!("report: {m}"),
        }),
        "cph" => ferrymq_bench::cph::main(rest).map_err(|m| lifecycle::Fail {
            code: 1,
            message: format!("cph: {m}"),
        }),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprintln!("ferrymq: unknown command '{other}'\n\n{USAGE}");
            std::process::exit(1);
        }
    };
    if let Err(f) = r {
        if !f.message.is_empty() {
            // Not eprintln!: run-qmgr's stderr is its error log, which a full disk cannot take,
            // and a panic here would turn the exit status into 101.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{}", f.message);
        }
        std::process::exit(f.code);
    }
}
