//! Managed file transfer against the real binary: agents created on a running queue manager,
//! started as processes of their own, moving files (one file, a directory, wildcards) in small
//! chunks with a checksum, honouring the destination-exists policy and the source disposition,
//! and accepting an XML request put straight on an agent's command queue.

mod fte_support;
mod support;

use std::path::Path;

use bytes::Bytes;
use ferrymq_types::options::{open, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue};
use fte_support::{agents, data, dir, text, transfer};
use support::{mqsc, Home, Qm};

#[test]
fn a_file_crosses_between_two_agents_in_many_chunks_and_arrives_whole() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM1", &[]);
    let _a = agents(&home, "FTQM1", &["SRC1", "DST1"], 4096);
    let list = home.ok(&["fteListAgents"]);
    assert!(list.contains("SRC1") && list.contains("READY"), "{list}");
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("payload.bin");
    // Not a multiple of the chunk size: the last chunk is short.
    let body = data(300_001, 7);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("copy.bin");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC1",
            "-sm",
            "FTQM1",
            "-da",
            "DST1",
            "-dm",
            "FTQM1",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("300001 bytes"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&dst).unwrap(), body);
    assert!(!dst.with_extension("bin.part").exists());
    // The source stays (disposition leave), the checkpoint is gone.
    assert!(src.exists());
    // Files after the first, each many windows long, flow without a stall: the receiver's count
    // of chunks (what its acknowledgements carry) lasts across the files of a transfer.
    let many = dir(work.path(), "many");
    for i in 0..3 {
        std::fs::write(many.join(format!("m{i}.bin")), data(60_000, i)).unwrap();
    }
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC1",
            "-da",
            "DST1",
            "-r",
            "-dd",
            dir(work.path(), "in2").to_str().unwrap(),
            many.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("resumed 0 times"),
        "{}",
        text(&out)
    );
    let stop = home.ok(&["fteStopAgent", "SRC1"]);
    assert!(stop.contains("stopped"), "{stop}");
    let list = home.ok(&["fteListAgents"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("SRC1") && l.contains("STOPPED")),
        "{list}"
    );
}

#[test]
fn directories_recursively_and_wildcards_with_exists_policy_and_delete_disposition() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM2", &[]);
    let _a = agents(&home, "FTQM2", &["SRC2", "DST2"], 1000);
    let work = tempfile::tempdir().unwrap();
    let tree = dir(work.path(), "tree");
    std::fs::write(tree.join("a.txt"), data(2500, 1)).unwrap();
    std::fs::write(dir(&tree, "sub").join("b.txt"), data(10, 2)).unwrap();
    std::fs::write(tree.join("sub/empty.txt"), b"").unwrap();
    let inbox = dir(work.path(), "inbox");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC2",
            "-da",
            "DST2",
            "-r",
            "-dd",
            inbox.to_str().unwrap(),
            tree.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(inbox.join("tree/a.txt")).unwrap(),
        data(2500, 1)
    );
    assert_eq!(
        std::fs::read(inbox.join("tree/sub/b.txt")).unwrap(),
        data(10, 2)
    );
    assert_eq!(
        std::fs::read(inbox.join("tree/sub/empty.txt")).unwrap(),
        b""
    );

    // A directory without -r is refused, and says how to fix it.
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC2",
            "-da",
            "DST2",
            "-dd",
            inbox.to_str().unwrap(),
            tree.to_str().unwrap(),
        ],
    );
    assert!(
        !out.status.success() && text(&out).contains("-r"),
        "{}",
        text(&out)
    );

    // Wildcards, deleting the sources once they arrived.
    let out_dir = dir(work.path(), "outgoing");
    for n in ["x1.csv", "x2.csv", "keep.dat"] {
        std::fs::write(out_dir.join(n), n.as_bytes()).unwrap();
    }
    let pattern = out_dir.join("*.csv");
    let inbox2 = dir(work.path(), "inbox2");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC2",
            "-da",
            "DST2",
            "-sd",
            "delete",
            "-dd",
            inbox2.to_str().unwrap(),
            pattern.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(inbox2.join("x1.csv")).unwrap(), b"x1.csv");
    assert_eq!(std::fs::read(inbox2.join("x2.csv")).unwrap(), b"x2.csv");
    assert!(!inbox2.join("keep.dat").exists());
    assert!(!out_dir.join("x1.csv").exists() && !out_dir.join("x2.csv").exists());
    assert!(out_dir.join("keep.dat").exists());

    // The destination exists: error by default (the file is untouched, the source kept) ...
    let src = out_dir.join("keep.dat");
    let dst = inbox2.join("x1.csv");
    let args = [
        "-sa",
        "SRC2",
        "-da",
        "DST2",
        "-sd",
        "delete",
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ];
    let out = transfer(&home, &args);
    assert!(
        !out.status.success() && text(&out).contains("exists"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"x1.csv");
    assert!(src.exists());
    // ... and replaced with -de overwrite.
    let mut args = args.to_vec();
    args.extend(["-de", "overwrite"]);
    let out = transfer(&home, &args);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&dst).unwrap(), b"keep.dat");
    assert!(!src.exists());
}

#[test]
fn transfer_definition_files_in_both_of_mqs_forms() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM16", &[]);
    let _a = agents(&home, "FTQM16", &["SRC16", "DST16", "OTHER16"], 4096);
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("a.dat");
    std::fs::write(&src, data(20_000, 6)).unwrap();
    let out_dir = dir(work.path(), "in");
    // A whole <request>, as -gt writes it: nothing else on the command line.
    let whole = work.path().join("whole.xml");
    home.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC16",
        "-da",
        "DST16",
        "-gt",
        whole.to_str().unwrap(),
        "-df",
        out_dir.join("one.dat").to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let out = transfer(&home, &["-td", whole.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(out_dir.join("one.dat")).unwrap(),
        data(20_000, 6)
    );
    // Items only (<transferSpecifications>): the agents come from -sa and -da, and without
    // them the command says so instead of guessing.
    let specs = work.path().join("specs.xml");
    std::fs::write(
        &specs,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<transferSpecifications>\n\
             <item checksumMethod=\"MD5\" mode=\"binary\">\n\
             <source recursive=\"false\" disposition=\"leave\"><file>{}</file></source>\n\
             <destination type=\"directory\" exist=\"error\"><file>{}</file></destination>\n\
             </item>\n</transferSpecifications>\n",
            src.display(),
            dir(&out_dir, "two").display()
        ),
    )
    .unwrap();
    let out = transfer(&home, &["-td", specs.to_str().unwrap()]);
    assert!(
        !out.status.success() && text(&out).contains("give -sa and -da"),
        "{}",
        text(&out)
    );
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC16",
            "-da",
            "DST16",
            "-td",
            specs.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(out_dir.join("two/a.dat")).unwrap(),
        data(20_000, 6)
    );
    // The command line overrides a whole request's agent: with the request's own destination
    // agent stopped, the file still arrives, through OTHER16.
    std::fs::remove_file(out_dir.join("one.dat")).unwrap();
    home.ok(&["fteStopAgent", "DST16"]);
    let out = transfer(&home, &["-da", "OTHER16", "-td", whole.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read(out_dir.join("one.dat")).unwrap(),
        data(20_000, 6)
    );
    // Without -td, both agents are needed.
    let out = home.run(&["fteCreateTransfer", "-df", "/tmp/x", src.to_str().unwrap()]);
    assert!(
        !out.status.success() && text(&out).contains("(-sa)"),
        "{}",
        text(&out)
    );
}

#[test]
fn an_xml_request_put_on_the_command_queue_is_carried_out_and_answered() {
    let home = Home::new();
    let qm = Qm::start(&home, "FTQM3", &[]);
    let _a = agents(&home, "FTQM3", &["SRC3", "DST3"], 512);
    let mqsc = home.ok(&[
        "fteCreateAgent",
        "-agentName",
        "X",
        "-agentQMgr",
        "FTQM3",
        "-p",
    ]);
    assert!(
        mqsc.contains("DEFINE QLOCAL(SYSTEM.FTE.COMMAND.X)"),
        "{mqsc}"
    );
    assert!(mqsc.contains("SYSTEM.FTE.STATE.X"), "{mqsc}");

    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("report & summary.txt");
    std::fs::write(&src, data(5000, 9)).unwrap();
    let dst = work.path().join("copied.txt");
    // The request as fteCreateTransfer -gt writes it, and as an application would put it.
    let xml_file = work.path().join("req.xml");
    home.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC3",
        "-da",
        "DST3",
        "-cs",
        "MD5",
        "-gt",
        xml_file.to_str().unwrap(),
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let xml = std::fs::read_to_string(&xml_file).unwrap();
    assert!(
        xml.contains("<managedTransfer>") && xml.contains("checksumMethod=\"MD5\""),
        "{xml}"
    );
    assert!(xml.contains("report &amp; summary.txt"), "{xml}");
    assert!(!dst.exists(), "-gt only writes the request");

    let c = qm.connect_bindings();
    c.admin("MQSC DEFINE QLOCAL(APP.REPLY)").unwrap();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        reply_to_q: "APP.REPLY".into(),
        ..Default::default()
    };
    let (msg_id, _) = c
        .put1(
            "SYSTEM.FTE.COMMAND.SRC3",
            &md,
            &Properties::default(),
            Bytes::from(xml),
            &PutOptions::default(),
        )
        .unwrap();
    let h = c.open("APP.REPLY", open::INPUT_SHARED).unwrap();
    let reply = c
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(60_000),
                match_correl_id: Some(msg_id),
                max_len: u32::MAX,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        reply.props.get("fteOk"),
        Some(&PropertyValue::Bool(true)),
        "{:?}",
        reply.body
    );
    assert_eq!(std::fs::read(&dst).unwrap(), data(5000, 9));

    // A request that is not one is refused with a reason, not dropped.
    let (bad_id, _) = c
        .put1(
            "SYSTEM.FTE.COMMAND.SRC3",
            &md,
            &Properties::default(),
            Bytes::from_static(b"<request/>"),
            &PutOptions::default(),
        )
        .unwrap();
    let reply = c
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(60_000),
                match_correl_id: Some(bad_id),
                max_len: u32::MAX,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(reply.props.get("fteOk"), Some(&PropertyValue::Bool(false)));
    assert!(
        String::from_utf8_lossy(&reply.body).contains("managedTransfer"),
        "{:?}",
        reply.body
    );

    // A start message whose name would leave the destination directory is refused by the
    // receiver itself, whatever the sender checked, and nothing is written outside.
    let inbox = dir(work.path(), "inbox");
    let mut props = Properties::default();
    props.set("fteKind", PropertyValue::String("start".into()));
    props.set("fteIndex", PropertyValue::Int(0));
    props.set("ftePath", PropertyValue::String("../escaped.txt".into()));
    props.set(
        "fteDir",
        PropertyValue::String(inbox.to_str().unwrap().into()),
    );
    props.set("fteReplyQ", PropertyValue::String("APP.REPLY".into()));
    props.set("fteReplyQMgr", PropertyValue::String("FTQM3".into()));
    let tid = *b"escape-attempt-000000001";
    let start = MessageDescriptor {
        correl_id: tid,
        ..Default::default()
    };
    c.put1(
        "SYSTEM.FTE.DATA.DST3",
        &start,
        &props,
        Bytes::new(),
        &PutOptions::default(),
    )
    .unwrap();
    let reply = c
        .get(
            &h,
            &GetOptions {
                wait: Wait::Ms(60_000),
                match_correl_id: Some(tid),
                max_len: u32::MAX,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(reply.props.get("fteOk"), Some(&PropertyValue::Bool(false)));
    assert!(
        String::from_utf8_lossy(&reply.body).contains("leave the destination"),
        "{:?}",
        reply.body
    );
    assert!(!work.path().join("escaped.txt").exists());
    assert!(!work.path().join("escaped.txt.part").exists());
}

#[test]
fn agents_on_two_queue_managers_joined_by_channels_transfer_a_file() {
    let home = Home::new();
    let qm1 = Qm::start(&home, "FTB1", &[]);
    let qm2 = Qm::start(&home, "FTB2", &[]);
    // Each queue manager reaches the other through a transmission queue named after it and a
    // sender channel to the other's receiver: chunks go one way, acknowledgements the other.
    for (from, to, port) in [("FTB1", "FTB2", qm2.port), ("FTB2", "FTB1", qm1.port)] {
        mqsc(
            &home,
            from,
            &format!(
                "DEFINE QLOCAL({to}) USAGE(XMITQ)\n\
                 DEFINE CHANNEL({to}.TO.{from}) CHLTYPE(RCVR) TRPTYPE(TCP)\n\
                 DEFINE CHANNEL({from}.TO.{to}) CHLTYPE(SDR) TRPTYPE(TCP) \
                 CONNAME('127.0.0.1({port})') XMITQ({to}) SHORTTMR(1)\n\
                 START CHANNEL({from}.TO.{to})\n"
            ),
        );
    }
    // The coordination queue manager is FTB2: the sending agent, on FTB1, publishes its log
    // there through FTB2's stream queue, and a subscriber on FTB2 sees it.
    home.ok(&["fteSetupCoordination", "-coordinationQMgr", "FTB2"]);
    let watcher = qm2.connect();
    let log_sub = watcher
        .subscribe(&ferrymq_client::SubscriptionOptions::topic(
            "SYSTEM.FTE/Log/SRCB/#",
        ))
        .unwrap();
    let _a = agents(&home, "FTB1", &["SRCB"], 4096);
    let _b = agents(&home, "FTB2", &["DSTB"], 4096);
    let list = home.ok(&["fteListAgents"]);
    assert!(list.contains("SRCB") && list.contains("DSTB"), "{list}");
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("over.bin");
    let body = data(200_003, 9);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("over.bin");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRCB",
            "-sm",
            "FTB1",
            "-da",
            "DSTB",
            "-dm",
            "FTB2",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&dst).unwrap(), body);
    assert!(!fte_support::part_of(&dst).exists());
    // The events arrive over the channel, then are published: started first, completed last.
    let mut events = Vec::new();
    let wait = GetOptions {
        wait: Wait::Ms(10_000),
        ..GetOptions::any()
    };
    while !events.iter().any(|e: &String| e.contains("completed")) {
        let m = watcher
            .get(log_sub.queue.as_ref().unwrap(), &wait)
            .unwrap_or_else(|e| panic!("the log events so far {events:?}, then: {e}"));
        let topic = match m.props.get("MQTopicString") {
            Some(PropertyValue::String(t)) => t.clone(),
            other => panic!("a log event without its topic: {other:?}"),
        };
        assert!(topic.starts_with("SYSTEM.FTE/Log/SRCB/"), "{topic}");
        let json = match m.props.get("fteJson") {
            Some(PropertyValue::String(j)) => j.clone(),
            other => panic!("a log event without JSON: {other:?}"),
        };
        events.push(json);
    }
    assert!(events[0].contains("started"), "{events:?}");
    // And the coordination queue manager's durable subscription kept them for `fte log`.
    let log = home.ok(&["fte", "log", "--json"]);
    assert!(log.contains("completed") && log.contains("SRCB"), "{log}");
}

#[test]
fn text_mode_converts_line_endings_and_encodings_across_chunk_boundaries() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM4", &[]);
    // Five-byte chunks: multi-byte characters and CR LF pairs are split between chunks.
    let _a = agents(&home, "FTQM4", &["SRC4", "DST4"], 5);
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("notes.txt");
    let line = "héllo wörld 日本語 🚀\r\nplain\n";
    let body = format!("{}end\r", line.repeat(7));
    std::fs::write(&src, &body).unwrap();
    let inbox = dir(work.path(), "in");
    let common = ["-sa", "SRC4", "-da", "DST4", "-t", "text"];
    // To the agents' platform: LF, UTF-8.
    let unix = inbox.join("unix.txt");
    let out = transfer(
        &home,
        &[
            &common[..],
            &["-df", unix.to_str().unwrap(), src.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let want = body.replace("\r\n", "\n");
    assert_eq!(std::fs::read_to_string(&unix).unwrap(), want);
    // Asked for CRLF and ISO-8859-1: what Latin-1 lacks becomes '?'.
    let win = inbox.join("win.txt");
    let out = transfer(
        &home,
        &[
            &common[..],
            &[
                "-dle",
                "CRLF",
                "-dce",
                "ISO-8859-1",
                "-df",
                win.to_str().unwrap(),
                src.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let latin: Vec<u8> = want
        .replace('\n', "\r\n")
        .chars()
        .map(|c| {
            if (c as u32) < 256 {
                c as u32 as u8
            } else {
                b'?'
            }
        })
        .collect();
    assert_eq!(std::fs::read(&win).unwrap(), latin);
    // Binary mode leaves every byte alone.
    let raw = inbox.join("raw.txt");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC4",
            "-da",
            "DST4",
            "-df",
            raw.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&raw).unwrap(), body);
}

#[test]
fn the_transfer_log_keeps_every_event_for_later_readers_and_status_shows_progress() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM5", &[]);
    home.ok(&["fteSetupCoordination", "-coordinationQMgr", "FTQM5"]);
    let _a = agents(&home, "FTQM5", &["SRC5", "DST5"], 16 * 1024);
    let work = tempfile::tempdir().unwrap();
    let inbox = dir(work.path(), "in");
    let small = work.path().join("small.bin");
    std::fs::write(&small, data(50_000, 1)).unwrap();
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC5",
            "-da",
            "DST5",
            "-jn",
            "nightly",
            "-dd",
            inbox.to_str().unwrap(),
            small.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let missing = work.path().join("missing.bin");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC5",
            "-da",
            "DST5",
            "-dd",
            inbox.to_str().unwrap(),
            missing.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    // Nobody subscribed: the durable subscription kept the events, in order (a request refused
    // before it started has only its failure).
    let json = home.ok(&["fte", "log", "--json"]);
    let events: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["started", "completed", "failed"], "{json}");
    assert_eq!(events[1]["bytes"], 50_000, "{json}");
    assert_eq!(events[1]["files"], 1);
    assert_eq!(events[1]["job"], "nightly");
    assert_eq!(events[1]["resultCode"], 0);
    assert_eq!(events[2]["resultCode"], 1);
    assert!(events[2]["text"].as_str().unwrap().contains("missing.bin"));
    assert_eq!(events[0]["transferId"], events[1]["transferId"]);
    let xml = home.ok(&["fte", "log", "--xml"]);
    assert!(xml.contains(">completed</action>"), "{xml}");
    assert!(xml.contains("<name>nightly</name>"), "{xml}");
    let lines = home.ok(&["fte", "log"]);
    assert_eq!(lines.lines().count(), 3, "{lines}");
    assert_eq!(
        home.ok(&["fte", "status"]).trim(),
        "no transfer in progress"
    );
    // A transfer under way shows in the status with its bytes, rate, time left and bar.
    let big = work.path().join("big.bin");
    let body = data(16 << 20, 2);
    std::fs::write(&big, &body).unwrap();
    home.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC5",
        "-da",
        "DST5",
        "-dd",
        inbox.to_str().unwrap(),
        big.to_str().unwrap(),
    ]);
    let mut seen = String::new();
    fte_support::wait_until("the transfer in fte status", 60, || {
        let s = home.ok(&["fte", "status"]);
        if s.contains("SRC5 -> DST5") {
            seen = s;
            true
        } else {
            false
        }
    });
    assert!(
        seen.contains('[') && seen.contains("/16777216 bytes") && seen.contains("ETA"),
        "{seen}"
    );
    fte_support::wait_until("the transfer's end in the log", 120, || {
        home.ok(&["fte", "log", "--json"])
            .lines()
            .any(|l| l.contains("\"completed\"") && l.contains("16777216"))
    });
    assert_eq!(std::fs::read(inbox.join("big.bin")).unwrap(), body);
    assert_eq!(
        home.ok(&["fte", "status"]).trim(),
        "no transfer in progress"
    );
}

#[test]
fn a_cancelled_transfer_removes_its_partial_destination_and_keeps_the_source() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM6", &[]);
    home.ok(&["fteSetupCoordination", "-coordinationQMgr", "FTQM6"]);
    let _a = agents(&home, "FTQM6", &["SRC6", "DST6"], 4096);
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("big.bin");
    let body = data(8 << 20, 6);
    std::fs::write(&src, &body).unwrap();
    let dst = dir(work.path(), "in").join("big.bin");
    let out = home.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC6",
        "-da",
        "DST6",
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let id = out
        .split("with ID ")
        .nth(1)
        .unwrap_or_else(|| panic!("no ID in: {out}"))
        .trim()
        .to_string();
    let part = fte_support::part_of(&dst);
    fte_support::wait_until("the transfer under way", 60, || {
        std::fs::metadata(&part).is_ok_and(|m| m.len() > 0)
    });
    let out = home.ok(&["fteCancelTransfer", "-agentName", "SRC6", &id]);
    assert!(out.contains("cancelled"), "{out}");
    fte_support::wait_until("the .part removed", 30, || !part.exists());
    assert!(!dst.exists());
    assert_eq!(std::fs::read(&src).unwrap(), body);
    let mut log = String::new();
    fte_support::wait_until("a cancelled event", 30, || {
        log = home.ok(&["fte", "log", "--json"]);
        log.contains("\"cancelled\"")
    });
    assert!(log.contains(&id), "{log}");
    // Nothing left to cancel.
    let again = home.run(&["fteCancelTransfer", "-agentName", "SRC6", &id]);
    assert!(!again.status.success(), "{}", text(&again));
}

#[test]
fn a_chunk_corrupted_in_flight_fails_the_transfer_and_leaves_no_file() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM7", &[]);
    let _d = agents(&home, "FTQM7", &["DST7"], 4096);
    home.ok(&[
        "fteCreateAgent",
        "-agentName",
        "SRC7",
        "-agentQMgr",
        "FTQM7",
        "-agentChunkSize",
        "4096",
    ]);
    let _s = fte_support::Agents {
        home: &home,
        names: vec!["SRC7".into()],
    };
    // The sending agent's test hook inverts a byte of its fourth chunk after checksumming it.
    let started = std::process::Command::new(env!("CARGO_BIN_EXE_ferrymq"))
        .args(["fteStartAgent", "SRC7"])
        .env("FERRYMQ_HOME", home.path())
        .env("FERRYMQ_FTE_TEST_CORRUPT_CHUNK", "3")
        .output()
        .unwrap();
    assert!(started.status.success(), "{}", text(&started));
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("data.bin");
    std::fs::write(&src, data(100_000, 7)).unwrap();
    let dst = dir(work.path(), "in").join("data.bin");
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC7",
            "-da",
            "DST7",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("checksum mismatch"), "{}", text(&out));
    assert!(!dst.exists());
    assert!(!fte_support::part_of(&dst).exists());
}

#[test]
fn a_chunk_put_that_fails_fails_the_transfer_with_its_reason_instead_of_stalling() {
    // Chunks are put without waiting for each answer; a put refused by the queue manager is
    // learnt from MQSTAT and fails the transfer, as a refused synchronous put did.
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM12", &[]);
    let _a = agents(&home, "FTQM12", &["SRC12", "DST12"], 4096);
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("data.bin");
    std::fs::write(&src, data(200_000, 5)).unwrap();
    let dst = dir(work.path(), "in").join("data.bin");
    // With no -cs the request names the default, BLAKE3.
    let xml_file = work.path().join("req.xml");
    home.ok(&[
        "fteCreateTransfer",
        "-sa",
        "SRC12",
        "-da",
        "DST12",
        "-gt",
        xml_file.to_str().unwrap(),
        "-df",
        dst.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let xml = std::fs::read_to_string(&xml_file).unwrap();
    assert!(xml.contains("checksumMethod=\"BLAKE3\""), "{xml}");
    mqsc(
        &home,
        "FTQM12",
        "ALTER QLOCAL(SYSTEM.FTE.DATA.DST12) PUT(DISABLED)\n",
    );
    // A put failure that went unnoticed would stall the transfer and resume it again and again,
    // past the wait (-w 60).
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC12",
            "-da",
            "DST12",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("2051") || text(&out).contains("PUT_INHIBITED"),
        "{}",
        text(&out)
    );
    assert!(!dst.exists());
    // Puts allowed again, the same transfer goes through.
    mqsc(
        &home,
        "FTQM12",
        "ALTER QLOCAL(SYSTEM.FTE.DATA.DST12) PUT(ENABLED)\n",
    );
    let out = transfer(
        &home,
        &[
            "-sa",
            "SRC12",
            "-da",
            "DST12",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&dst).unwrap(), data(200_000, 5));
}

#[test]
fn a_monitor_transfers_each_file_dropped_at_once_exactly_once_two_at_a_time() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM8", &[]);
    let _d = agents(&home, "FTQM8", &["DST8"], 4096);
    home.ok(&[
        "fteCreateAgent",
        "-agentName",
        "SRC8",
        "-agentQMgr",
        "FTQM8",
        "-maxSourceTransfers",
        "2",
    ]);
    let _s = fte_support::Agents {
        home: &home,
        names: vec!["SRC8".into()],
    };
    home.ok(&["fteStartAgent", "SRC8"]);
    let work = tempfile::tempdir().unwrap();
    let outbox = dir(work.path(), "out");
    let inbox = dir(work.path(), "in");
    let task = work.path().join("task.xml");
    std::fs::write(
        &task,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<request version=\"6.00\"><managedTransfer>\
             <sourceAgent agent=\"SRC8\" QMgr=\"FTQM8\"/><destinationAgent agent=\"DST8\" \
             QMgr=\"FTQM8\"/><transferSet><item mode=\"binary\"><source><file>${{FilePath}}</file>\
             </source><destination type=\"file\" exist=\"error\"><file>{}/${{FileName}}.copy</file>\
             </destination></item></transferSet></managedTransfer></request>\n",
            inbox.display()
        ),
    )
    .unwrap();
    home.ok(&[
        "fteCreateMonitor",
        "-ma",
        "SRC8",
        "-mn",
        "OUTBOX",
        "-md",
        outbox.to_str().unwrap(),
        "-mt",
        task.to_str().unwrap(),
        "-tr",
        "match,*.csv",
        "-pi",
        "1",
    ]);
    let list = home.ok(&["fteListMonitors"]);
    assert!(list.contains("OUTBOX") && list.contains("*.csv"), "{list}");
    // Many files at once, and one that does not match.
    const N: usize = 40;
    for i in 0..N {
        std::fs::write(outbox.join(format!("f{i}.csv")), data(3000 + i, i as u8)).unwrap();
    }
    std::fs::write(outbox.join("skip.tmp"), b"x").unwrap();
    // A file still open for writing waits, however stable its size.
    let mut held = std::fs::File::create(outbox.join("held.csv")).unwrap();
    std::io::Write::write_all(&mut held, b"still writing").unwrap();
    fte_support::wait_until("every file transferred", 120, || {
        (0..N).all(|i| inbox.join(format!("f{i}.csv.copy")).exists())
    });
    for i in 0..N {
        assert_eq!(
            std::fs::read(inbox.join(format!("f{i}.csv.copy"))).unwrap(),
            data(3000 + i, i as u8)
        );
    }
    // A few more polls: nothing fires twice (a second transfer would fail: exist=error), and the
    // file held open has not fired.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(!inbox.join("held.csv.copy").exists());
    drop(held);
    fte_support::wait_until("the file closed transferred", 60, || {
        inbox.join("held.csv.copy").exists()
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    let log = fte_support::agent_log(&home, "SRC8");
    assert_eq!(log.matches("monitor OUTBOX fired").count(), N + 1, "{log}");
    assert_eq!(log.matches("transfer complete").count(), N + 1, "{log}");
    assert!(!log.contains("transfer failed"), "{log}");
    assert!(!inbox.join("skip.tmp.copy").exists());
    // Never more than maxSourceTransfers at once.
    let most = log
        .lines()
        .filter_map(|l| l.split(" started (").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse::<usize>().ok())
        .max()
        .unwrap();
    assert!(most <= 2, "{log}");
    home.ok(&["fteDeleteMonitor", "-ma", "SRC8", "-mn", "OUTBOX"]);
    assert!(home.ok(&["fteListMonitors"]).contains("no monitors"));
}

/// The task of a monitor test: the file that fired goes to `inbox`, under its own name, and is
/// deleted at the source once it arrived (exist=error: a file that fired twice would fail).
fn monitor_task(src: &str, dst: &str, qm: &str, inbox: &std::path::Path, file: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<request version=\"6.00\"><managedTransfer>\
         <sourceAgent agent=\"{src}\" QMgr=\"{qm}\"/><destinationAgent agent=\"{dst}\" \
         QMgr=\"{qm}\"/><transferSet><item mode=\"binary\"><source disposition=\"delete\">\
         <file>{file}</file></source><destination type=\"file\" exist=\"error\">\
         <file>{}/${{FileName}}</file></destination></item></transferSet></managedTransfer>\
         </request>\n",
        inbox.display()
    )
}

/// 1,000 files dropped at once into a watched directory: each fires once and arrives once (the
/// destination holds each file, the transfer log one completed transfer of each), and once they
/// left the source directory (delete disposition) the monitor forgets them, so a file of the
/// same name dropped later fires again. Within a minute on a loaded two-core machine: the
/// transfers run maxSourceTransfers (25) at a time.
#[test]
fn a_monitor_sends_a_thousand_files_dropped_at_once_each_once_and_then_forgets_them() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM9", &[]);
    home.ok(&["fteSetupCoordination", "-coordinationQMgr", "FTQM9"]);
    let _a = agents(&home, "FTQM9", &["SRC9", "DST9"], 64 * 1024);
    let work = tempfile::tempdir().unwrap();
    let outbox = dir(work.path(), "out");
    let inbox = dir(work.path(), "in");
    let task = work.path().join("task.xml");
    std::fs::write(
        &task,
        monitor_task("SRC9", "DST9", "FTQM9", &inbox, "${FilePath}"),
    )
    .unwrap();
    home.ok(&[
        "fteCreateMonitor",
        "-ma",
        "SRC9",
        "-mn",
        "DROP",
        "-md",
        outbox.to_str().unwrap(),
        "-mt",
        task.to_str().unwrap(),
        "-tr",
        "match,*.dat",
        "-pi",
        "1",
        "-stable",
        "1",
    ]);
    const N: usize = 1000;
    // Written beside the directory and moved in, as a file drop does.
    let stage = dir(work.path(), "stage");
    for i in 0..N {
        std::fs::write(stage.join(format!("f{i}.dat")), data(100 + i, i as u8)).unwrap();
    }
    for i in 0..N {
        let n = format!("f{i}.dat");
        std::fs::rename(stage.join(&n), outbox.join(&n)).unwrap();
    }
    fte_support::wait_until("every file transferred and deleted", 120, || {
        std::fs::read_dir(&outbox).unwrap().count() == 0
            && std::fs::read_dir(&inbox).unwrap().count() == N
    });
    for i in 0..N {
        assert_eq!(
            std::fs::read(inbox.join(format!("f{i}.dat"))).unwrap(),
            data(100 + i, i as u8)
        );
    }
    let completed = || {
        home.ok(&["fte", "log", "--json"])
            .lines()
            .filter(|l| l.contains("\"completed\""))
            .count()
    };
    fte_support::wait_until("every transfer in the log", 60, || completed() >= N);
    // A few more polls: nothing fires twice.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(completed(), N);
    let log = fte_support::agent_log(&home, "SRC9");
    assert_eq!(log.matches("monitor DROP fired").count(), N);
    assert!(!log.contains("transfer failed"));
    // The files left the directory: the monitor forgot them.
    let fired = home.path().join("mqft/agents/SRC9/monitors/DROP.fired");
    fte_support::wait_until("the fired files forgotten", 30, || {
        std::fs::read_to_string(&fired)
            .unwrap_or_default()
            .is_empty()
    });
    // So a file of a name that fired before fires again.
    std::fs::remove_file(inbox.join("f7.dat")).unwrap();
    std::fs::write(outbox.join("f7.dat"), b"again").unwrap();
    fte_support::wait_until("the file dropped again transferred", 60, || {
        std::fs::read(inbox.join("f7.dat")).is_ok_and(|b| b == b"again")
    });
}

/// A queue monitor: each message on the queue triggers the task once, with the message's
/// properties standing for the task's variables.
#[test]
fn a_queue_monitor_fires_once_for_each_message_with_its_properties() {
    let home = Home::new();
    let qm = Qm::start(&home, "FTQMA", &[]);
    mqsc(&home, "FTQMA", "DEFINE QLOCAL(FILES.TO.SEND)");
    let _a = agents(&home, "FTQMA", &["SRCA", "DSTA"], 4096);
    let work = tempfile::tempdir().unwrap();
    let outbox = dir(work.path(), "out");
    let inbox = dir(work.path(), "in");
    let task = work.path().join("task.xml");
    let src = format!("{}/${{FileName}}", outbox.display());
    std::fs::write(&task, monitor_task("SRCA", "DSTA", "FTQMA", &inbox, &src)).unwrap();
    home.ok(&[
        "fteCreateMonitor",
        "-ma",
        "SRCA",
        "-mn",
        "ONREQ",
        "-mq",
        "FILES.TO.SEND",
        "-mt",
        task.to_str().unwrap(),
        "-tr",
        "queueNotEmpty",
        "-pi",
        "1",
    ]);
    assert!(home
        .ok(&["fteListMonitors"])
        .contains("queue FILES.TO.SEND"));
    const N: usize = 20;
    let c = qm.connect();
    let h = c.open("FILES.TO.SEND", open::OUTPUT).unwrap();
    for i in 0..N {
        let name = format!("q{i}.bin");
        std::fs::write(outbox.join(&name), data(1000 + i, i as u8)).unwrap();
        let mut props = Properties::default();
        props.set("FileName", PropertyValue::String(name));
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        c.put(&h, &md, &props, Bytes::new(), &PutOptions::default())
            .unwrap();
    }
    fte_support::wait_until("every file transferred", 90, || {
        (0..N).all(|i| inbox.join(format!("q{i}.bin")).exists())
            && std::fs::read_dir(&outbox).unwrap().count() == 0
    });
    for i in 0..N {
        assert_eq!(
            std::fs::read(inbox.join(format!("q{i}.bin"))).unwrap(),
            data(1000 + i, i as u8)
        );
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let log = fte_support::agent_log(&home, "SRCA");
    assert_eq!(log.matches("monitor ONREQ fired").count(), N, "{log}");
    assert_eq!(log.matches("transfer complete").count(), N, "{log}");
    assert!(!log.contains("transfer failed"), "{log}");
}

/// Admission: 10,000 transfer requests put at once on the source agent's command queue (as
/// applications submit MQ's XML) wait their turn there and run maxSourceTransfers at a time:
/// every one is answered with success, none stalls into a resume, and the agent never runs
/// more than its maximum at once (its log says how many run as each starts). Meanwhile a cancel
/// passes the queued requests and takes the last one off the queue before it started.
#[test]
fn ten_thousand_requests_at_once_queue_and_run_max_source_transfers_at_a_time() {
    let home = Home::new();
    let qm = Qm::start(&home, "FTQMB", &[]);
    let _a = agents(&home, "FTQMB", &["SRCB", "DSTB"], 4096);
    let work = tempfile::tempdir().unwrap();
    let outbox = dir(work.path(), "out");
    let inbox = dir(work.path(), "in");
    const N: usize = 10_000;
    for i in 0..N {
        std::fs::write(outbox.join(format!("r{i}")), format!("request {i}\n")).unwrap();
    }
    let c = qm.connect_bindings();
    c.admin("MQSC DEFINE QLOCAL(APP.REPLY) MAXDEPTH(20000)")
        .unwrap();
    let cmd = c.open("SYSTEM.FTE.COMMAND.SRCB", open::OUTPUT).unwrap();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        reply_to_q: "APP.REPLY".into(),
        ..Default::default()
    };
    let in_unit = PutOptions {
        syncpoint: ferrymq_types::options::Syncpoint::Yes,
        ..Default::default()
    };
    let mut last = Default::default();
    for i in 0..N {
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<request version=\"6.00\">\
             <managedTransfer><sourceAgent agent=\"SRCB\" QMgr=\"FTQMB\"/>\
             <destinationAgent agent=\"DSTB\" QMgr=\"FTQMB\"/><transferSet><item \
             mode=\"binary\"><source><file>{}/r{i}</file></source><destination type=\"file\" \
             exist=\"error\"><file>{}/r{i}</file></destination></item></transferSet>\
             </managedTransfer></request>\n",
            outbox.display(),
            inbox.display()
        );
        let mut m = md.clone();
        m.msg_id = Default::default();
        last = c
            .put(&cmd, &m, &Properties::default(), Bytes::from(xml), &in_unit)
            .unwrap_or_else(|e| panic!("request {i}: {e}"))
            .0;
        if i % 500 == 499 {
            c.commit().unwrap();
        }
    }
    c.commit().unwrap();
    let id: String = last.iter().map(|b| format!("{b:02x}")).collect();
    let out = home.ok(&["fteCancelTransfer", "-agentName", "SRCB", &id]);
    assert!(out.contains("cancelled before it started"), "{out}");
    let h = c.open("APP.REPLY", open::INPUT_SHARED).unwrap();
    let wait = GetOptions {
        wait: Wait::Ms(5_000),
        max_len: u32::MAX,
        ..Default::default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    let (mut ok, mut cancelled) = (0, 0);
    while ok + cancelled < N {
        assert!(
            std::time::Instant::now() < deadline,
            "{ok} of {N} answered in time"
        );
        match c.get(&h, &wait) {
            Ok(r) if r.md.correl_id == last => {
                assert_eq!(r.props.get("fteOk"), Some(&PropertyValue::Bool(false)));
                cancelled += 1;
            }
            Ok(r) => {
                assert_eq!(
                    r.props.get("fteOk"),
                    Some(&PropertyValue::Bool(true)),
                    "{}",
                    String::from_utf8_lossy(&r.body)
                );
                ok += 1;
            }
            Err(e) if e.reason == ferrymq_types::Reason::NO_MSG_AVAILABLE => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(cancelled, 1);
    assert_eq!(std::fs::read_dir(&inbox).unwrap().count(), N - 1);
    assert!(!inbox.join(format!("r{}", N - 1)).exists());
    assert_eq!(
        std::fs::read_to_string(inbox.join("r9998")).unwrap(),
        "request 9998\n"
    );
    let log = fte_support::agent_log(&home, "SRCB");
    assert!(
        !log.contains("resuming"),
        "a transfer stalled into a resume"
    );
    let started: Vec<usize> = log
        .lines()
        .filter_map(|l| l.split(" started (").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(started.len(), N - 1);
    let most = started.iter().max().copied().unwrap();
    assert!(most <= 25, "{most} transfers ran at once");
}

/// An agent writes and reads only inside its sandbox (`sandboxRoot`, with `!` exclusions),
/// however the path is spelt (`..`, a symbolic link inside it that leads out), and no agent, with a
/// sandbox or without, touches FerryMQ's own data: a transfer request naming a queue manager's
/// files is refused with its reason and leaves them as they were.
#[test]
fn an_agent_stays_in_its_sandbox_and_out_of_ferrymqs_own_data() {
    let home = Home::new();
    let _qm = Qm::start(&home, "FTQM10", &[]);
    let work = tempfile::tempdir().unwrap();
    let (inbox, outside) = (dir(work.path(), "in"), dir(work.path(), "out"));
    let private = dir(&inbox, "private");
    std::os::unix::fs::symlink(&outside, inbox.join("link")).unwrap();
    for a in ["SRC10", "DST10"] {
        home.ok(&[
            "fteCreateAgent",
            "-agentName",
            a,
            "-agentQMgr",
            "FTQM10",
            "-agentChunkSize",
            "4096",
        ]);
    }
    let _agents = fte_support::Agents {
        home: &home,
        names: vec!["SRC10".into(), "DST10".into()],
    };
    let props = home.path().join("mqft/agents/DST10/agent.properties");
    let mut p = std::fs::read_to_string(&props).unwrap();
    p.push_str(&format!(
        "sandboxRoot={}:!{}\n",
        inbox.display(),
        private.display()
    ));
    std::fs::write(&props, p).unwrap();
    for a in ["SRC10", "DST10"] {
        assert!(home.ok(&["fteStartAgent", a]).contains("started"));
    }
    let src = work.path().join("data.bin");
    std::fs::write(&src, data(20_000, 9)).unwrap();
    let send = |from: &str, to: &str, dst: &Path, src: &Path| {
        transfer(
            &home,
            &[
                "-sa",
                from,
                "-da",
                to,
                "-df",
                dst.to_str().unwrap(),
                src.to_str().unwrap(),
            ],
        )
    };
    let ok = inbox.join("ok.bin");
    let out = send("SRC10", "DST10", &ok, &src);
    assert!(out.status.success(), "inside the sandbox: {}", text(&out));
    assert_eq!(std::fs::read(&ok).unwrap(), std::fs::read(&src).unwrap());
    for (dst, why) in [
        (outside.join("a.bin"), "outside this agent's sandbox"),
        (private.join("b.bin"), "excluded from this agent's sandbox"),
        (inbox.join("../out/c.bin"), "outside this agent's sandbox"),
        (inbox.join("link/d.bin"), "outside this agent's sandbox"),
    ] {
        let out = send("SRC10", "DST10", &dst, &src);
        assert!(!out.status.success(), "{}: {}", dst.display(), text(&out));
        assert!(
            text(&out).contains(why),
            "{}: {}",
            dst.display(),
            text(&out)
        );
    }
    let left: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
    assert!(
        left.is_empty(),
        "files written outside the sandbox: {left:?}"
    );
    assert!(std::fs::read_dir(&private).unwrap().next().is_none());

    // FerryMQ's own data, to an agent without a sandbox (SRC10) and from one.
    let qm_dir = home.path().join("qmgrs/FTQM10");
    let ini = std::fs::read(qm_dir.join("qm.ini")).unwrap();
    let out = send("DST10", "SRC10", &qm_dir.join("qm.ini"), &ok);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("FerryMQ's own data"), "{}", text(&out));
    let out = send(
        "SRC10",
        "DST10",
        &inbox.join("ini.copy"),
        &qm_dir.join("qm.ini"),
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("FerryMQ's own data"), "{}", text(&out));
    assert_eq!(std::fs::read(qm_dir.join("qm.ini")).unwrap(), ini);
    assert!(!qm_dir.join("qm.ini.part").exists());
    assert!(!inbox.join("ini.copy").exists());
    // Nor does a monitor watch it.
    let task = work.path().join("task.xml");
    std::fs::write(
        &task,
        monitor_task("SRC10", "DST10", "FTQM10", &inbox, "${FilePath}"),
    )
    .unwrap();
    let out = home.run(&[
        "fteCreateMonitor",
        "-ma",
        "SRC10",
        "-mn",
        "LOGS",
        "-md",
        qm_dir.join("log").to_str().unwrap(),
        "-mt",
        task.to_str().unwrap(),
        "-tr",
        "match,*",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("FerryMQ's own data"), "{}", text(&out));
}

/// An agent started again right after it was killed may find its queue manager still holding
/// its exclusive queues for the dead connection. It waits for them instead of failing at start:
/// here a connection of the test holds the agent's command and data queues for a second.
#[test]
fn an_agent_started_while_its_queues_are_still_held_waits_for_them() {
    let home = Home::new();
    let qm = Qm::start(&home, "FTQM11", &[]);
    home.ok(&[
        "fteCreateAgent",
        "-agentName",
        "AG11",
        "-agentQMgr",
        "FTQM11",
    ]);
    let _agents = fte_support::Agents {
        home: &home,
        names: vec!["AG11".into()],
    };
    let holder = qm.connect_bindings();
    let held: Vec<_> = ["SYSTEM.FTE.COMMAND.AG11", "SYSTEM.FTE.DATA.AG11"]
        .iter()
        .map(|q| holder.open(q, open::INPUT_EXCLUSIVE).unwrap())
        .collect();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(1));
        drop(held);
        drop(holder);
    });
    let t = std::time::Instant::now();
    let out = home.ok(&["fteStartAgent", "AG11"]);
    assert!(out.contains("started"), "{out}");
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(900),
        "the agent was ready while its command queue was held"
    );
    release.join().unwrap();
    let list = home.ok(&["fteListAgents"]);
    assert!(list.contains("AG11") && list.contains("READY"), "{list}");
    // It serves: a transfer to itself arrives.
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("a.bin");
    std::fs::write(&src, data(10_000, 3)).unwrap();
    let dst = work.path().join("b.bin");
    let out = transfer(
        &home,
        &[
            "-sa",
            "AG11",
            "-da",
            "AG11",
            "-df",
            dst.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&dst).unwrap(), std::fs::read(&src).unwrap());
}
