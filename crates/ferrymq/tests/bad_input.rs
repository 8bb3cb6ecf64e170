//! Hostile and broken input over real sockets: the queue manager answers with a clear error or
//! drops only the offending connection, keeps serving everyone else, and loses nothing.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ferrymq_proto::{encode_request, parse_response, FrameDecoder, Hello, Request, Response};
use ferrymq_types::options::{open, GetOptions, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use support::{Home, Qm};

const Q: &str = "SYSTEM.DEFAULT.LOCAL.QUEUE";

fn raw(qm: &Qm) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", qm.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads responses until the peer closes; returns them.
fn read_all(s: &mut TcpStream) -> Vec<Response> {
    let mut dec = FrameDecoder::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        while let Ok(Some(f)) = dec.decode(&mut buf) {
            if let Ok(r) = parse_response(&f) {
                out.push(r);
            }
        }
    }
    out
}

fn hello_bytes() -> BytesMut {
    let mut b = BytesMut::new();
    encode_request(0, 0, &Request::Hello(Hello::new("test")), &mut b);
    b
}

/// The queue manager still serves a normal client, and the message put earlier is intact.
fn still_serving(qm: &Qm, expect_depth_at_least: usize) {
    let c = qm.connect();
    let h = c
        .open(Q, open::BROWSE | open::INPUT_SHARED | open::OUTPUT)
        .unwrap();
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"after"),
        &PutOptions::default(),
    )
    .unwrap();
    let mut n = 0;
    while c.get(&h, &GetOptions::any()).is_ok() {
        n += 1;
    }
    assert!(n > expect_depth_at_least, "got {n} messages");
}

fn put_persistent(qm: &Qm, body: &'static [u8]) {
    let c = qm.connect();
    let md = MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    };
    c.put1(
        Q,
        &md,
        &Properties::default(),
        Bytes::from_static(body),
        &PutOptions::default(),
    )
    .unwrap();
    c.disconnect().unwrap();
}

#[test]
fn garbage_instead_of_a_handshake_closes_only_that_socket() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD1", &[]);
    put_persistent(&qm, b"before");
    let mut s = raw(&qm);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let replies = read_all(&mut s);
    assert!(
        replies
            .iter()
            .any(|r| matches!(r, Response::Status { reason, .. } if *reason != Reason::NONE)),
        "expected an error before the close, got {replies:?}"
    );
    still_serving(&qm, 1);
}

#[test]
fn an_oversized_frame_is_refused_from_its_header() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD2", &[]);
    put_persistent(&qm, b"before");
    let mut s = raw(&qm);
    let mut b = hello_bytes();
    // A header announcing a 3 GB frame: refused before any body is read.
    b.put_u32_le(3_000_000_000);
    b.put_slice(&[0x06, 0, 1, 0, 1, 0, 0, 0]);
    s.write_all(&b).unwrap();
    let replies = read_all(&mut s);
    assert!(
        replies.iter().any(|r| matches!(
            r,
            Response::Status {
                reason: Reason::MSG_TOO_BIG_FOR_CHANNEL,
                ..
            }
        )),
        "{replies:?}"
    );
    still_serving(&qm, 1);
}

#[test]
fn truncated_frames_and_abrupt_closes_do_not_disturb_the_queue_manager() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD3", &[]);
    put_persistent(&qm, b"before");
    for cut in [1usize, 5, 11, 20] {
        let mut s = raw(&qm);
        let b = hello_bytes();
        s.write_all(&b[..cut.min(b.len())]).unwrap();
        drop(s);
    }
    still_serving(&qm, 1);
}

#[test]
fn a_malformed_request_on_a_conversation_gets_an_error_and_the_socket_stays_usable() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD4", &[]);
    let mut s = raw(&qm);
    let mut b = hello_bytes();
    encode_request(
        1,
        1,
        &Request::Connect {
            qmgr: "QBAD4".into(),
            user: String::new(),
            password: String::new(),
            app_name: "t".into(),
        },
        &mut b,
    );
    // Kind 0x06 (put) with a body that is not a put.
    b.put_u32_le(8 + 3);
    b.put_slice(&[0x06, 0, 1, 0, 2, 0, 0, 0]);
    b.put_slice(&[1, 2, 3]);
    encode_request(
        1,
        3,
        &Request::Open {
            name: "NO.SUCH.QUEUE".into(),
            qmgr: String::new(),
            options: open::OUTPUT,
            dynamic_name: String::new(),
        },
        &mut b,
    );
    encode_request(1, 4, &Request::Disconnect, &mut b);
    s.write_all(&b).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let replies = read_all(&mut s);
    let statuses: Vec<Reason> = replies
        .iter()
        .filter_map(|r| match r {
            Response::Status { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            Reason::NONE,
            Reason::HEADER_ERROR,
            Reason::UNKNOWN_OBJECT_NAME,
            Reason::NONE
        ],
        "{replies:?}"
    );
}

/// Sends frames on a raw socket and reads responses until `n` have arrived.
fn exchange(s: &mut TcpStream, frames: &BytesMut, n: usize) -> Vec<Response> {
    s.write_all(frames).unwrap();
    let mut dec = FrameDecoder::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        let k = s.read(&mut chunk).unwrap();
        assert!(k > 0, "closed after {out:?}");
        buf.extend_from_slice(&chunk[..k]);
        while let Some(f) = dec.decode(&mut buf).unwrap() {
            out.push(parse_response(&f).unwrap());
        }
    }
    out
}

#[test]
fn a_client_vanishing_mid_transaction_has_its_work_backed_out() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD5", &[]);
    put_persistent(&qm, b"got-then-abandoned");
    {
        // A raw socket, so that "vanishing" is exactly a close with the unit of work open.
        let mut s = raw(&qm);
        let mut b = hello_bytes();
        encode_request(
            1,
            1,
            &Request::Connect {
                qmgr: String::new(),
                user: String::new(),
                password: String::new(),
                app_name: "t".into(),
            },
            &mut b,
        );
        encode_request(
            1,
            2,
            &Request::Open {
                name: Q.into(),
                qmgr: String::new(),
                options: open::INPUT_SHARED | open::OUTPUT,
                dynamic_name: String::new(),
            },
            &mut b,
        );
        let r = exchange(&mut s, &b, 3);
        let Response::Opened { hobj, .. } = r[2] else {
            panic!("{r:?}")
        };
        let mut b = BytesMut::new();
        let md = MessageDescriptor {
            persistence: Persistence::Persistent,
            ..Default::default()
        };
        let sp = PutOptions {
            syncpoint: Syncpoint::Yes,
            ..Default::default()
        };
        encode_request(
            1,
            3,
            &Request::Put {
                hobj,
                opts: sp,
                md,
                props: Properties::default(),
                body: Bytes::from_static(b"never-committed"),
            },
            &mut b,
        );
        encode_request(
            1,
            4,
            &Request::Get {
                hobj,
                opts: GetOptions {
                    syncpoint: Syncpoint::Yes,
                    ..GetOptions::any()
                },
            },
            &mut b,
        );
        let r = exchange(&mut s, &b, 2);
        let Response::Message { body, .. } = &r[1] else {
            panic!("expected the message, got {r:?}")
        };
        assert_eq!(&body[..], b"got-then-abandoned");
        drop(s);
    }
    let c = qm.connect();
    let h = c.open(Q, open::INPUT_SHARED).unwrap();
    let opts = GetOptions {
        wait: ferrymq_types::options::Wait::Ms(3000),
        ..GetOptions::any()
    };
    let m = c.get(&h, &opts).unwrap();
    assert_eq!(&m.body[..], b"got-then-abandoned");
    assert_eq!(m.md.backout_count, 1);
    assert_eq!(
        c.get(&h, &GetOptions::any()).unwrap_err().reason,
        Reason::NO_MSG_AVAILABLE,
        "the uncommitted put never appears"
    );
}

#[test]
fn a_full_queue_refuses_puts_with_q_full_and_keeps_its_messages() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD6", &[]);
    let c = qm.connect();
    let h = c.open(Q, open::OUTPUT | open::INQUIRE).unwrap();
    let md = MessageDescriptor::default();
    for i in 0..5000 {
        c.put(
            &h,
            &md,
            &Properties::default(),
            Bytes::from(format!("{i}")),
            &PutOptions::default(),
        )
        .unwrap();
    }
    let err = c
        .put(
            &h,
            &md,
            &Properties::default(),
            Bytes::from_static(b"one too many"),
            &PutOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.reason, Reason::Q_FULL);
    assert!(err.message.contains(Q), "the error names the queue: {err}");
    let depth = c.inquire(&h, &["CURDEPTH"]).unwrap();
    assert_eq!(depth, vec![("CURDEPTH".to_string(), "5000".to_string())]);
}

#[test]
fn a_message_over_maxmsgl_is_refused_with_a_reason_and_nothing_changes() {
    let home = Home::new();
    let qm = Qm::start(&home, "QBAD7", &[]);
    let c = qm.connect();
    let h = c.open(Q, open::OUTPUT | open::INQUIRE).unwrap();
    // The default MAXMSGL is 4 MB: the client refuses a larger message before sending it, as an
    // MQ channel with that MAXMSGL would.
    let big = Bytes::from(vec![0u8; 4 * 1024 * 1024 + 1]);
    let err = c
        .put(
            &h,
            &MessageDescriptor::default(),
            &Properties::default(),
            big,
            &PutOptions::default(),
        )
        .unwrap_err();
    let refused = [
        Reason::MSG_TOO_BIG_FOR_CHANNEL,
        Reason::MSG_TOO_BIG_FOR_Q,
        Reason::MSG_TOO_BIG_FOR_Q_MGR,
    ];
    assert!(refused.contains(&err.reason), "{err}");
    assert_eq!(c.inquire(&h, &["CURDEPTH"]).unwrap()[0].1, "0");
    // A message exactly at the limit is accepted.
    let max = Bytes::from(vec![1u8; 4 * 1024 * 1024]);
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        max,
        &PutOptions::default(),
    )
    .unwrap();
}

#[test]
fn a_message_over_the_queues_own_maxmsgl_gets_msg_too_big_for_q_naming_the_queue() {
    let home = Home::new();
    let qm = Qm::start_remote_admin(&home, "QBAD8", &[]);
    let c = qm.connect();
    c.admin("MQSC DEFINE QLOCAL(SMALL.MSGS) MAXMSGL(10)")
        .unwrap();
    let h = c.open("SMALL.MSGS", open::OUTPUT | open::INQUIRE).unwrap();
    let err = c
        .put(
            &h,
            &MessageDescriptor::default(),
            &Properties::default(),
            Bytes::from_static(b"eleven byte"),
            &PutOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.reason, Reason::MSG_TOO_BIG_FOR_Q);
    assert!(
        err.message.contains("SMALL.MSGS") && err.message.contains("MAXMSGL"),
        "{err}"
    );
    c.put(
        &h,
        &MessageDescriptor::default(),
        &Properties::default(),
        Bytes::from_static(b"ten bytes!"),
        &PutOptions::default(),
    )
    .unwrap();
    assert_eq!(c.inquire(&h, &["CURDEPTH"]).unwrap()[0].1, "1");
}
