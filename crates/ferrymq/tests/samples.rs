//! The sample programs (issue 18, "samples worth using" and "exit codes that scripts can use"),
//! black-box against the real binary: every put option shows in get/browse `--md` and `--json`,
//! `--file` round-trips binary data byte for byte, `--count`, `--correl-id` and `--hex` select and
//! print, each class of MQ reason ends with its own exit status, and a put that stops early says
//! how many it put.

mod support;

use std::io::{Read, Write};
use std::process::Output;

use ferrymq_client::open;
use support::{Home, Qm};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

fn depth(qm: &Qm, q: &str) -> u64 {
    let c = qm.connect();
    let h = c.open(q, open::INQUIRE).unwrap();
    let d = c.inquire(&h, &["CURDEPTH"]).unwrap();
    c.close(&h, 0).unwrap();
    c.disconnect().unwrap();
    d[0].1.parse().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

fn ok_with_input(home: &Home, args: &[&str], input: &str) -> String {
    let out = home.run_with_input(args, input);
    assert!(out.status.success(), "{args:?}: {}", show(&out));
    text(&out.stderr)
}

/// Asserts the exit status and that standard error names the reason as `MQRC_NAME (number)`.
fn assert_fails(out: &Output, code: i32, reason: &str) {
    assert_eq!(out.status.code(), Some(code), "{}", show(out));
    assert!(text(&out.stderr).contains(reason), "{}", show(out));
}

fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `text:` ids are the text's bytes padded with zeros, printed as 48 hex digits.
fn text_id_hex(t: &str) -> String {
    let mut id = [0u8; 24];
    id[..t.len()].copy_from_slice(t.as_bytes());
    id.iter().map(|b| format!("{b:02X}")).collect()
}

#[test]
fn every_put_option_shows_in_get_md_and_json() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMSAMP", &[]);
    let put = [
        "put",
        "QMSAMP",
        Q,
        "--persistent",
        "--priority",
        "7",
        "--correl-id",
        "text:ORDER-42",
        "--msg-id",
        "0x0A0B0c",
        "--reply-to",
        "REPLY.Q@QMOTHER",
        "--expiry",
        "60000",
        "--property",
        "color=red",
        "--property",
        "n:int=-5",
        "--property",
        "f:float=1.5",
        "--property",
        "urgent:bool=true",
        "--property",
        "raw:bytes=00ff",
    ];
    let err = ok_with_input(&home, &put, "hello\n");
    assert!(err.contains("put: 1 message(s) put to"), "{err}");
    // Without options: the queue's defaults, a datagram, a new msg id.
    ok_with_input(&home, &["put", "QMSAMP", Q], "plain\n");
    // A reply-to queue alone: on the queue manager put to, as MQ fills in a blank ReplyToQMgr.
    ok_with_input(
        &home,
        &["put", "QMSAMP", Q, "--reply-to", "MY.REPLY"],
        "ask\n",
    );

    let msg_id = format!("0A0B0C{}", "00".repeat(21));
    let correl_id = text_id_hex("ORDER-42");
    let md = home.ok(&["browse", "QMSAMP", Q, "--md"]);
    for field in [
        format!("MsgId({msg_id})"),
        format!("CorrelId({correl_id})"),
        "Persistence(1)".into(),
        "Priority(7)".into(),
        "MsgType(1)".into(),
        "Format(MQSTR)".into(),
        "ReplyToQ(REPLY.Q)".into(),
        "ReplyToQMgr(QMOTHER)".into(),
        "BackoutCount(0)".into(),
        "PutDate(".into(),
        "Property(color) String(red)".into(),
        "Property(n) Int(-5)".into(),
        "Property(f) Float(1.5)".into(),
        "Property(urgent) Bool(true)".into(),
        "Property(raw) Bytes(00FF)".into(),
        "\nhello\n".into(),
        "Message 2 (5 bytes)".into(),
        "Persistence(0)".into(),
        "MsgType(8)".into(),
        "\nplain\n".into(),
        "ReplyToQ(MY.REPLY)\n  ReplyToQMgr(QMSAMP)".into(),
    ] {
        assert!(md.contains(&field), "{field} missing:\n{md}");
    }
    let expiry: i64 = md
        .split("Expiry(")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no Expiry in:\n{md}"));
    assert!(0 < expiry && expiry <= 60000, "{md}");
    assert!(md.contains("Expiry(-1)"), "the second never expires:\n{md}");
    // Browse left them all; get --json removes them and shows the same.
    assert_eq!(depth(&qm, Q), 3);

    let all = json_lines(&home.ok(&["get", "QMSAMP", Q, "--json"]));
    assert_eq!(all.len(), 3, "{all:?}");
    let m = &all[0];
    assert_eq!(m["msg_id"], msg_id.as_str());
    assert_eq!(m["correl_id"], correl_id.as_str());
    assert_eq!(m["persistence"], 1);
    assert_eq!(m["priority"], 7);
    assert_eq!(m["msg_type"], 1);
    assert_eq!(m["format"], "MQSTR");
    assert_eq!(m["reply_to_q"], "REPLY.Q");
    assert_eq!(m["reply_to_qmgr"], "QMOTHER");
    assert_eq!(m["backout_count"], 0);
    assert_eq!(m["length"], 5);
    assert!(
        m["expiry"].as_i64().is_some_and(|e| 0 < e && e <= 60000),
        "{m}"
    );
    assert_eq!(m["put_date"].as_str().map(str::len), Some(8), "{m}");
    assert_eq!(m["put_time"].as_str().map(str::len), Some(8), "{m}");
    let p = &m["properties"];
    assert_eq!(p["color"], "red");
    assert_eq!(p["n"], -5);
    assert_eq!(p["f"], 1.5);
    assert_eq!(p["urgent"], true);
    assert_eq!(p["raw"]["hex"], "00FF");
    assert_eq!(m["body"], "hello");
    assert!(m.get("body_base64").is_none(), "{m}");
    let m = &all[1];
    assert_eq!(m["body"], "plain");
    assert_eq!(m["expiry"], -1);
    assert_eq!(m["msg_type"], 8);
    assert_ne!(m["msg_id"], msg_id.as_str());
    assert_eq!(m["correl_id"], "00".repeat(24));
    assert_eq!(all[2]["reply_to_qmgr"], "QMSAMP");
    assert_eq!(all[2]["msg_type"], 1);
    assert_eq!(depth(&qm, Q), 0);

    // Malformed values are usage errors (2), refused before anything is put.
    for bad in [
        &["--priority", "10"][..],
        &["--msg-id", "ABC"],
        &["--correl-id", &"00".repeat(25)],
        &["--expiry", "0"],
        &["--property", "n:int=x"],
        &["--reply-to", "@QM"],
        &["--reply-to", &"Q".repeat(49)],
        &["--bogus"],
    ] {
        let mut args = vec!["put", "QMSAMP", Q];
        args.extend_from_slice(bad);
        let out = home.run_with_input(&args, "never\n");
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", show(&out));
    }
    // More properties than a message carries (256): refused, not sent.
    let props: Vec<String> = (0..257).map(|i| format!("p{i}={i}")).collect();
    let mut args = vec!["put", "QMSAMP", Q];
    for p in &props {
        args.extend(["--property", p.as_str()]);
    }
    let out = home.run_with_input(&args, "never\n");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(text(&out.stderr).contains("at most 256"), "{}", show(&out));
    args.truncate(args.len() - 2);
    ok_with_input(&home, &args, "many\n");
    let m = &json_lines(&home.ok(&["get", "QMSAMP", Q, "--json"]))[0];
    assert_eq!(m["properties"].as_object().map(|o| o.len()), Some(256));
    assert_eq!(m["properties"]["p255"], "255");
    assert_eq!(depth(&qm, Q), 0);
}

#[test]
fn a_file_round_trips_byte_for_byte_and_a_file_too_big_is_refused() {
    use base64::Engine as _;
    use rand::RngCore;
    let home = Home::new();
    let qm = Qm::start(&home, "QMFILE", &[]);
    // 1 MiB of random bytes: newlines, zeros, and certainly not UTF-8.
    let mut data = vec![0u8; 1 << 20];
    rand::thread_rng().fill_bytes(&mut data);
    data[..4].copy_from_slice(b"\n\0\xff\n");
    let path = home.path().join("blob.bin");
    std::fs::write(&path, &data).unwrap();
    let p = path.to_str().unwrap();
    home.ok(&["put", "QMFILE", Q, "--file", p, "--conn", &qm.conname()]);
    assert_eq!(depth(&qm, Q), 1, "one message, whatever its newlines");

    let got = json_lines(&home.ok(&["get", "QMFILE", Q, "--json"]));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["length"], data.len());
    assert_eq!(got[0]["format"], "");
    assert!(
        got[0].get("body").is_none(),
        "not UTF-8: {}",
        got[0]["format"]
    );
    let body = base64::engine::general_purpose::STANDARD
        .decode(got[0]["body_base64"].as_str().expect("body_base64"))
        .unwrap();
    assert!(body == data, "the body differs from the file");

    // Above the queue manager's MAXMSGL (4 MiB by default): a clear error, nothing put.
    let big = home.path().join("big.bin");
    std::fs::write(&big, vec![b'x'; 4 * 1024 * 1024 + 1]).unwrap();
    let small = home.path().join("small.txt");
    std::fs::write(&small, "small").unwrap();
    let out = home.run(&[
        "put",
        "QMFILE",
        Q,
        "--file",
        small.to_str().unwrap(),
        "--file",
        big.to_str().unwrap(),
    ]);
    assert_fails(&out, 1, "MQRC_MSG_TOO_BIG_FOR_Q_MGR (2031)");
    let err = text(&out.stderr);
    assert!(
        err.contains("4194305 bytes") && err.contains("4194304") && err.contains("nothing was put"),
        "{err}"
    );
    assert_eq!(depth(&qm, Q), 0);

    // Exactly MAXMSGL is accepted.
    std::fs::write(&big, vec![b'y'; 4 * 1024 * 1024]).unwrap();
    home.ok(&["put", "QMFILE", Q, "--file", big.to_str().unwrap()]);
    let got = json_lines(&home.ok(&["get", "QMFILE", Q, "--json"]));
    assert_eq!(got[0]["length"], 4 * 1024 * 1024);

    // A client connection's limit is also its server-connection channel's MAXMSGL (4 MiB by
    // default): with the queue manager's raised, the error names the channel, not MAXMSGL.
    support::mqsc(
        &home,
        "QMFILE",
        &format!("ALTER QMGR MAXMSGL(8388608)\nALTER QLOCAL({Q}) MAXMSGL(8388608)\n"),
    );
    std::fs::write(&big, vec![b'z'; 4 * 1024 * 1024 + 1]).unwrap();
    let b = big.to_str().unwrap();
    let out = home.run(&["put", "QMFILE", Q, "--file", b, "--conn", &qm.conname()]);
    assert_fails(&out, 1, "MQRC_MSG_TOO_BIG_FOR_CHANNEL (2218)");
    let err = text(&out.stderr);
    assert!(
        err.contains("server-connection channel") && err.contains("nothing was put"),
        "{err}"
    );
    assert_eq!(depth(&qm, Q), 0);
    // In bindings mode the queue manager's own limit applies, so the same file goes.
    home.ok(&["put", "QMFILE", Q, "--file", b]);
    assert_eq!(depth(&qm, Q), 1);
}

/// Each line of standard input is a message (`put`) or a publication (`pub`): a line longer
/// than the largest message the connection takes stops the command there with the reason, the
/// lines before it put and none after, and is never held whole.
#[test]
fn a_line_of_standard_input_too_big_stops_the_put_there() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMLINE", &[]);
    let max = 4 * 1024 * 1024;
    let mut input = String::from("one\r\ntwo\n");
    input.push_str(&"x".repeat(max + 1));
    input.push_str("\nthree\n");
    let out = home.run_with_input(&["put", "QMLINE", Q], &input);
    assert_fails(&out, 1, "MQRC_MSG_TOO_BIG_FOR_Q_MGR (2031)");
    let err = text(&out.stderr);
    assert!(
        err.contains("line 3 of the standard input is 4194305 bytes")
            && err.contains("stopped after 2 message(s)"),
        "{err}"
    );
    let got = json_lines(&home.ok(&["get", "QMLINE", Q, "--json"]));
    let bodies: Vec<&str> = got.iter().filter_map(|m| m["body"].as_str()).collect();
    assert_eq!(bodies, ["one", "two"]);
    assert_eq!(depth(&qm, Q), 0);

    // A line of exactly the limit is a message.
    let out = home.run_with_input(&["put", "QMLINE", Q], &format!("{}\n", "y".repeat(max)));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(depth(&qm, Q), 1);

    let out = home.run_with_input(&["pub", "QMLINE", "line/limit"], &input);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    let err = text(&out.stderr);
    assert!(
        err.contains("line 3 of the standard input is 4194305 bytes")
            && err.contains("not published (the 2 before it were)"),
        "{err}"
    );
}

#[test]
fn count_and_correl_id_select_and_hex_dumps() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMSEL", &[]);
    ok_with_input(
        &home,
        &["put", "QMSEL", Q, "--correl-id", "text:A"],
        "a1\na2\na3\n",
    );
    ok_with_input(
        &home,
        &["put", "QMSEL", Q, "--correl-id", "0x42"],
        "b1\nb2\nb3\n",
    );
    ok_with_input(&home, &["put", "QMSEL", Q], "c1\n");

    // B in hex is the same id as text:B.
    let out = home.ok(&["get", "QMSEL", Q, "--correl-id", "text:B", "--count", "2"]);
    assert_eq!(out, "b1\nb2\n");
    let out = home.ok(&[
        "browse",
        "QMSEL",
        Q,
        "--body-only",
        "--correl-id",
        "text:A",
        "--count",
        "2",
    ]);
    assert_eq!(out, "a1\na2\n");
    assert_eq!(depth(&qm, Q), 5);
    assert_eq!(
        home.ok(&["browse", "QMSEL", Q, "--body-only"]),
        "a1\na2\na3\nb3\nc1\n",
        "browse leaves everything, get took exactly the two it printed"
    );
    assert_eq!(home.ok(&["get", "QMSEL", Q, "--count", "1"]), "a1\n");
    // Fewer than --count is still success; none at all is "no message" (3).
    assert_eq!(
        home.ok(&["get", "QMSEL", Q, "--correl-id", "0x42", "--count", "5"]),
        "b3\n"
    );
    let out = home.run(&["get", "QMSEL", Q, "--correl-id", "0x42"]);
    assert_fails(&out, 3, "MQRC_NO_MSG_AVAILABLE (2033)");
    assert_eq!(text(&out.stdout), "");
    assert_eq!(depth(&qm, Q), 3);
    let out = home.run(&["get", "QMSEL", Q, "--count", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));

    // --hex: offset, bytes, printable text; a binary body via --file.
    let f = home.path().join("bin");
    std::fs::write(&f, b"AB\x00\xff\nHello, world! 0123456789").unwrap();
    home.ok(&["put", "QMSEL", Q, "--file", f.to_str().unwrap()]);
    let all = home.ok(&["get", "QMSEL", Q, "--hex"]);
    let dump = all.split("\n\n").nth(3).unwrap_or_else(|| panic!("{all}"));
    assert_eq!(
        dump,
        "00000000  41 42 00 FF 0A 48 65 6C  6C 6F 2C 20 77 6F 72 6C  |AB...Hello, worl|\n\
         00000010  64 21 20 30 31 32 33 34  35 36 37 38 39           |d! 0123456789|",
        "{all}"
    );
    assert!(all.starts_with("00000000  61 32 "), "a2 first: {all}");
    assert_eq!(depth(&qm, Q), 0);
}

#[test]
fn each_class_of_failure_has_its_exit_status() {
    let home = Home::new();
    let qm = Qm::start(&home, "QMEXIT", &[]);
    // An empty queue: "no message" (3), for get, browse, over TCP, and after a wait.
    for args in [
        vec!["get", "QMEXIT", Q],
        vec!["browse", "QMEXIT", Q],
        vec!["get", "QMEXIT", Q, "--wait-ms", "100", "--json"],
        vec!["get", "QMEXIT", Q, "--conn", &qm.conname()],
    ] {
        let out = home.run(&args);
        assert_fails(&out, 3, "MQRC_NO_MSG_AVAILABLE (2033)");
        assert_eq!(text(&out.stdout), "", "{args:?}");
    }
    // An unknown queue: "unknown object" (5).
    for cmd in ["get", "browse"] {
        let out = home.run(&[cmd, "QMEXIT", "NO.SUCH.Q"]);
        assert_fails(&out, 5, "MQRC_UNKNOWN_OBJECT_NAME (2085)");
        assert!(
            text(&out.stderr).starts_with(&format!("{cmd}: ")),
            "{}",
            show(&out)
        );
    }
    let out = home.run_with_input(&["put", "QMEXIT", "NO.SUCH.Q"], "x\n");
    assert_fails(&out, 5, "MQRC_UNKNOWN_OBJECT_NAME (2085)");

    // A closed port: "queue manager unavailable" (6).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let conn = format!("127.0.0.1({port})");
    let out = home.run(&["get", "QMEXIT", Q, "--conn", &conn]);
    assert_fails(&out, 6, "MQRC_HOST_NOT_AVAILABLE (2538)");
    let out = home.run_with_input(&["put", "QMEXIT", Q, "--conn", &conn], "x\n");
    assert_fails(&out, 6, "MQRC_HOST_NOT_AVAILABLE (2538)");
    // An ended queue manager in bindings mode: the same class.
    qm.end();
    let out = home.run(&["browse", "QMEXIT", Q]);
    assert_fails(&out, 6, "MQRC_Q_MGR_NOT_AVAILABLE (2059)");
    qm.restart();

    // Not authorised (4): a listener that refuses the connection with MQRC_NOT_AUTHORIZED.
    let (conn, server) = refusing_listener();
    let out = home.run(&["get", "QMEXIT", Q, "--conn", &conn]);
    assert_fails(&out, 4, "MQRC_NOT_AUTHORIZED (2035)");
    server.join().unwrap();

    // Anything else (1): a full queue; the put says how many it put before it.
    ok_with_input(
        &home,
        &["runmqsc", "QMEXIT"],
        "DEFINE QLOCAL(SMALL) MAXDEPTH(3)\n",
    );
    let out = home.run_with_input(&["put", "QMEXIT", "SMALL"], "1\n2\n3\n4\n5\n");
    assert_fails(&out, 1, "MQRC_Q_FULL (2053)");
    assert!(
        text(&out.stderr).contains("put: stopped after 3 message(s) put to 'SMALL'"),
        "{}",
        show(&out)
    );
    assert_eq!(depth(&qm, "SMALL"), 3);
    assert_eq!(
        home.ok(&["browse", "QMEXIT", "SMALL", "--body-only"]),
        "1\n2\n3\n"
    );
    // Usage (2).
    let out = home.run(&["get", "QMEXIT"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let out = home.run(&["browse", "QMEXIT", Q, "--json", "--md"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

/// A TCP listener that completes the handshake and answers the one connection's Connect with
/// MQRC_NOT_AUTHORIZED, as a queue manager checking credentials would.
fn refusing_listener() -> (String, std::thread::JoinHandle<()>) {
    use bytes::BytesMut;
    use ferrymq_proto::{
        encode_response, negotiate, parse_request, FrameDecoder, Request, Response,
        PRE_HANDSHAKE_FRAME_MAX_BYTES,
    };
    use ferrymq_types::Reason;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let conn = format!("127.0.0.1({})", l.local_addr().unwrap().port());
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        let mut dec = FrameDecoder::new(PRE_HANDSHAKE_FRAME_MAX_BYTES);
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk).expect("the client went quiet");
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Some(f) = dec.decode(&mut buf).unwrap() {
                let reply = match parse_request(&f).unwrap() {
                    Request::Hello(h) => {
                        let (version, max_msg_len, heartbeat_ms, sharecnv) =
                            negotiate(&h, 4 << 20, 0, 10).unwrap();
                        Response::HelloOk {
                            version,
                            max_msg_len,
                            heartbeat_ms,
                            sharecnv,
                            qmgr_name: "QMEXIT".into(),
                            server_id: "test".into(),
                        }
                    }
                    Request::Connect { .. } => Response::Status {
                        reason: Reason::NOT_AUTHORIZED,
                        message: "user 'app' is not authorised to connect".into(),
                    },
                    _ => Response::Status {
                        reason: Reason::NONE,
                        message: String::new(),
                    },
                };
                let mut out = BytesMut::new();
                encode_response(f.conv, f.req, &reply, &mut out);
                if s.write_all(&out).is_err() {
                    return;
                }
            }
        }
    });
    (conn, h)
}

#[test]
fn help_shows_usage_examples_and_the_exit_status_table() {
    let home = Home::new();
    for cmd in ["put", "get", "browse"] {
        for flag in ["--help", "-h"] {
            let out = home.run(&[cmd, flag]);
            assert!(out.status.success(), "{cmd} {flag}: {}", show(&out));
            let help = text(&out.stdout);
            for want in [
                format!("Usage: ferrymq {cmd} [OPTIONS] <QMGR> <QUEUE>"),
                "Examples:".into(),
                "--conn <CONNAME>".into(),
                "3  no message available: MQRC_NO_MSG_AVAILABLE (2033)".into(),
                "4  not authorised: MQRC_NOT_AUTHORIZED (2035)".into(),
                "5  unknown object: MQRC_UNKNOWN_OBJECT_NAME (2085)".into(),
                "6  queue manager unavailable: MQRC_Q_MGR_NOT_AVAILABLE (2059)".into(),
            ] {
                assert!(
                    help.contains(&want),
                    "{cmd} {flag}: {want} missing:\n{help}"
                );
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    // The README's table lists what --help lists, class by class.
    let help = home.ok(&["get", "--help"]);
    let table = help.split("Exit status").nth(1).unwrap();
    let mut classes = 0;
    for line in table.lines() {
        let line = line.trim();
        let Some((code, rest)) = line.split_once("  ") else {
            continue;
        };
        if code.parse::<u8>().is_err() || !rest.contains("MQRC_") {
            continue;
        }
        classes += 1;
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| {code} |")))
            .unwrap_or_else(|| panic!("README has no row for exit status {code}"));
        // The class's reasons continue on the following help lines.
        let mut reasons: Vec<&str> = rest.split("MQRC_").skip(1).collect();
        for more in table
            .lines()
            .skip_while(|l| l.trim() != line)
            .skip(1)
            .take_while(|l| l.starts_with("      "))
        {
            reasons.extend(more.split("MQRC_").skip(1));
        }
        for r in reasons {
            let r = format!("MQRC_{}", r.trim_end_matches([',', ' ']));
            assert!(row.contains(&r), "README's row {code} lacks {r}: {row}");
        }
    }
    assert_eq!(classes, 4, "{help}");
}
