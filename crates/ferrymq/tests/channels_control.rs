//! What keeps a message channel running, ends it and starts it again, through the real binary
//! and two queue managers: heartbeats notice a link that stopped forwarding without closing (a
//! relay frozen with SIGSTOP) and the channel retries; DISCINT ends an idle sender, which starts
//! again by itself when its transmission queue gets a message; BATCHLIM ends batches by size;
//! BATCHHB checks a silent receiver before a batch goes in doubt; STOP CHANNEL's MODE and STATUS;
//! a message the receiver can neither put nor dead-letter stops the channel; MRRTY retries a put
//! that may pass; server/requester pairs, a SVR without CONNAME sending over its requester's
//! connection.

mod support;

use std::time::{Duration, Instant};

use support::chan::{depth, drain, get_wait, put_to, wait_depth};
use support::{chan, mqsc, Home, Qm};

const WAIT: Duration = Duration::from_secs(30);

/// QM2 with the receiver (its attributes `rcvr`) and ORDERS.IN; QM1 with the transmission
/// queue, the remote queue ORDERS and the sender (attributes `sdr`) to `port`, started.
fn pair<'h>(home: &'h Home, rcvr: &str, sdr: &str, port: Option<u16>) -> (Qm<'h>, Qm<'h>) {
    let qm2 = Qm::start(home, "QM2", &[]);
    chan::define_receiver(home, rcvr);
    let qm1 = Qm::start(home, "QM1", &[]);
    let port = port.unwrap_or(qm2.port);
    chan::define_sender(home, port, sdr);
    (qm1, qm2)
}

/// DISPLAY CHSTATUS of the channel; a channel with no status (not running) fails the command.
fn status(home: &Home, qm: &str) -> String {
    let out = home.run_with_input(&["runmqsc", qm], "DISPLAY CHSTATUS(QM1.TO.QM2)\n");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls DISPLAY CHSTATUS until `cond` holds (bounded).
fn wait_until(home: &Home, qm: &str, what: &str, cond: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let text = status(home, qm);
        if cond(&text) {
            return text;
        }
        assert!(t.elapsed() < WAIT, "{qm}: {what} did not happen:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_status(home: &Home, qm: &str, status: &str) -> String {
    let want = format!("STATUS({status})");
    wait_until(home, qm, &want.clone(), move |t| t.contains(&want))
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn heartbeats_notice_a_link_that_stopped_forwarding_and_the_channel_retries() {
    let home = Home::new();
    let port = support::free_port();
    let (qm1, qm2) = pair(&home, "HBINT(1)", "HBINT(1)", Some(port));
    let relay = support::relay(port, qm2.port, 0);
    let c1 = qm1.connect_bindings();
    let c2 = qm2.connect_bindings();
    put_to(&c1, "ORDERS", b"before");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"before");
    let text = wait_status(&home, "QM1", "RUNNING");
    assert!(text.contains("HBINT(1)"), "negotiated HBINT shown:\n{text}");
    // The relay freezes: the sockets stay open and nothing moves, as with a dead router.
    signal(relay.pid(), "-STOP");
    wait_status(&home, "QM1", "RETRYING");
    let log = support::error_log(&qm1.dir());
    assert!(log.contains("did not answer a heartbeat"), "{log}");
    // The receiving end gives up too: its instance ends.
    wait_until(&home, "QM2", "the receiver's end", |t| {
        !t.contains("STATUS(RUNNING)")
    });
    // The link returns: the channel resumes by itself and delivers, once.
    drop(relay);
    let _relay = support::relay(port, qm2.port, 0);
    put_to(&c1, "ORDERS", b"after");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"after");
    assert!(drain(&c2, "ORDERS.IN").is_empty(), "nothing twice");
}

#[test]
fn an_idle_sender_ends_after_discint_and_starts_again_when_a_message_arrives() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "", "DISCINT(1)", None);
    let c1 = qm1.connect_bindings();
    let c2 = qm2.connect_bindings();
    put_to(&c1, "ORDERS", b"first");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"first");
    // Nothing more to send: the channel ends normally, and the receiving end with it.
    wait_status(&home, "QM1", "INACTIVE");
    wait_until(&home, "QM2", "the receiver's end", |t| {
        !t.contains("STATUS(RUNNING)")
    });
    let log = support::error_log(&qm1.dir());
    assert!(log.contains("ended normally"), "{log}");
    // A message on the transmission queue starts it again, with no trigger monitor.
    put_to(&c1, "ORDERS", b"second");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"second");
    wait_status(&home, "QM1", "INACTIVE");
    // STOP CHANNEL of an inactive channel stops it: messages then wait on the queue.
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "STOPPED");
    put_to(&c1, "ORDERS", b"third");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        1,
        "a stopped channel sends nothing"
    );
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"third");
}

#[test]
fn batchlim_ends_a_batch_once_its_messages_reach_that_many_kilobytes() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "", "BATCHSZ(50) BATCHLIM(4)", None);
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "STOPPED");
    let c1 = qm1.connect_bindings();
    // Ten messages of 3 KB: two reach 4 KB, so five batches where BATCHSZ alone makes one.
    for i in 0..10u8 {
        put_to(&c1, "ORDERS", &[i; 3 * 1024]);
    }
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    let c2 = qm2.connect_bindings();
    for i in 0..10u8 {
        assert_eq!(get_wait(&c2, "ORDERS.IN"), vec![i; 3 * 1024]);
    }
    let text = wait_until(&home, "QM1", "MSGS(10)", |t| t.contains("MSGS(10)"));
    assert!(text.contains("BATCHES(5)"), "{text}");
}

#[test]
fn batchhb_finds_a_silent_receiver_before_the_batch_goes_in_doubt() {
    let home = Home::new();
    let port = support::free_port();
    // HBINT long enough that idle heartbeats notice nothing during the test.
    let (qm1, qm2) = pair(&home, "HBINT(3)", "HBINT(3) BATCHHB(100)", Some(port));
    let relay = support::relay(port, qm2.port, 0);
    let c1 = qm1.connect_bindings();
    let c2 = qm2.connect_bindings();
    put_to(&c1, "ORDERS", b"before");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"before");
    signal(relay.pid(), "-STOP");
    // Silent for longer than BATCHHB: that is the condition under test, not a synchronisation.
    std::thread::sleep(Duration::from_millis(400));
    put_to(&c1, "ORDERS", b"during");
    // The batch heartbeat goes unanswered: the batch is backed out, not left in doubt.
    let text = wait_status(&home, "QM1", "RETRYING");
    assert!(text.contains("INDOUBT(NO)"), "{text}");
    drop(relay);
    let _relay = support::relay(port, qm2.port, 0);
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"during");
    let log = support::error_log(&qm1.dir());
    assert!(
        !log.contains("batch in doubt"),
        "no batch was in doubt:\n{log}"
    );
    assert!(drain(&c2, "ORDERS.IN").is_empty(), "nothing twice");
}

#[test]
fn stop_quiesce_waits_for_the_batch_in_doubt_and_force_ends_it_at_once() {
    let home = Home::new();
    let port = support::free_port();
    let (qm1, qm2) = pair(&home, "", "", Some(port));
    let relay = support::relay(port, qm2.port, 0);
    let c1 = qm1.connect_bindings();
    let c2 = qm2.connect_bindings();
    put_to(&c1, "ORDERS", b"before");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"before");
    // The link freezes with a batch sent: the sender waits for its confirmation, in doubt.
    signal(relay.pid(), "-STOP");
    put_to(&c1, "ORDERS", b"in doubt");
    wait_until(&home, "QM1", "INDOUBT(YES)", |t| t.contains("INDOUBT(YES)"));
    // QUIESCE ends the channel after the batch, which has not ended.
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2) MODE(QUIESCE)\n");
    let text = wait_until(&home, "QM1", "STOPREQ(YES)", |t| t.contains("STOPREQ(YES)"));
    assert!(text.contains("STATUS(RUNNING)"), "{text}");
    std::thread::sleep(Duration::from_millis(500));
    let text = status(&home, "QM1");
    assert!(text.contains("STATUS(RUNNING)"), "QUIESCE waits:\n{text}");
    // FORCE ends it now; the batch stays in doubt until the channel starts again.
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2) MODE(FORCE)\n");
    let text = wait_status(&home, "QM1", "STOPPED");
    assert!(text.contains("INDOUBT(YES)"), "{text}");
    drop(relay);
    let _relay = support::relay(port, qm2.port, 0);
    mqsc(&home, "QM1", "START CHANNEL(QM1.TO.QM2)\n");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"in doubt");
    wait_until(&home, "QM1", "the transmission queue emptied", |_| {
        depth(&home, "QM1", "QM2") == 0
    });
    assert!(drain(&c2, "ORDERS.IN").is_empty(), "nothing twice");
}

#[test]
fn stop_with_status_inactive_leaves_the_channel_to_start_again_with_the_next_message() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "", "", None);
    wait_status(&home, "QM1", "RUNNING");
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2) STATUS(INACTIVE)\n");
    wait_status(&home, "QM1", "INACTIVE");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"wakes it");
    let c2 = qm2.connect_bindings();
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"wakes it");
}

#[test]
fn a_message_the_receiver_can_neither_put_nor_dead_letter_stops_the_channel_with_the_reason() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "USEDLQ(NO)", "", None);
    mqsc(
        &home,
        "QM1",
        "DEFINE QREMOTE(NOWHERE) RNAME(NO.SUCH.QUEUE) RQMNAME(QM2) XMITQ(QM2)\n",
    );
    let c1 = qm1.connect_bindings();
    put_to(&c1, "NOWHERE", b"undeliverable");
    put_to(&c1, "ORDERS", b"behind it");
    // Not retrying for ever: stopped, the messages kept, the reason in both error logs.
    wait_status(&home, "QM1", "STOPPED");
    assert_eq!(depth(&home, "QM1", "QM2"), 2, "nothing lost");
    let log1 = support::error_log(&qm1.dir());
    assert!(log1.contains("cannot put a message"), "{log1}");
    assert!(log1.contains("NO.SUCH.QUEUE"), "{log1}");
    let log2 = support::error_log(&qm2.dir());
    assert!(log2.contains("USEDLQ(NO)"), "{log2}");
    assert_eq!(depth(&home, "QM2", "SYSTEM.DEAD.LETTER.QUEUE"), 0);
    assert_eq!(depth(&home, "QM2", "ORDERS.IN"), 0, "the batch backed out");
    // It stays stopped across a restart of the sending queue manager.
    drop(c1);
    qm1.end();
    qm1.restart();
    std::thread::sleep(Duration::from_millis(1000));
    let text = status(&home, "QM1");
    assert!(text.contains("STATUS(STOPPED)"), "{text}");
    assert_eq!(
        depth(&home, "QM1", "QM2"),
        2,
        "still on the transmission queue"
    );
}

#[test]
fn a_put_that_fails_for_a_full_queue_is_retried_mrrty_times_before_the_dead_letter_queue() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "MRRTY(200) MRTMR(100)", "", None);
    mqsc(&home, "QM2", "ALTER QLOCAL(ORDERS.IN) MAXDEPTH(1)\n");
    let c2 = qm2.connect_bindings();
    put_to(&c2, "ORDERS.IN", b"in the way");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"patient");
    // Once the message reached the receiver (and found the queue full), make room.
    wait_until(&home, "QM2", "the message's arrival", |t| {
        t.contains("BYTSRCVD(") && !t.contains("BYTSRCVD(0)")
    });
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"in the way");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"patient");
    assert_eq!(depth(&home, "QM2", "SYSTEM.DEAD.LETTER.QUEUE"), 0);
}

#[test]
fn channel_status_shows_what_each_end_is_doing_and_the_network_and_queue_times() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "", "", None);
    let c1 = qm1.connect_bindings();
    let c2 = qm2.connect_bindings();
    put_to(&c1, "ORDERS", b"timed");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"timed");
    // Idle: the sender waits on its transmission queue, the receiver on the network.
    let text = wait_until(&home, "QM1", "SUBSTATE(MQGET) after a batch", |t| {
        t.contains("SUBSTATE(MQGET)") && t.contains("BATCHES(1)")
    });
    for field in ["NETTIME(", "XQTIME("] {
        let at = text
            .find(field)
            .unwrap_or_else(|| panic!("{field} missing:\n{text}"));
        let shown = text[at + field.len()..].split(')').next().unwrap();
        let (short, long) = shown
            .split_once(',')
            .expect("a short- and a long-term value");
        assert!(short.trim().parse::<u64>().is_ok(), "{field}{shown}");
        assert!(long.trim().parse::<u64>().is_ok(), "{field}{shown}");
    }
    let text = status(&home, "QM2");
    assert!(text.contains("SUBSTATE(RECEIVE)"), "{text}");
}

#[test]
fn ping_channel_exchanges_data_with_the_partner_or_says_why_it_cannot() {
    let home = Home::new();
    let (qm1, qm2) = pair(&home, "", "", None);
    // A running channel is in use: PING is refused, as MQ does.
    wait_status(&home, "QM1", "RUNNING");
    let out = status_of(&home, "QM1", "PING CHANNEL(QM1.TO.QM2)\n");
    assert!(out.contains("MQRCCF_CHANNEL_IN_USE"), "{out}");
    mqsc(&home, "QM1", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_status(&home, "QM1", "STOPPED");
    let out = mqsc(&home, "QM1", "PING CHANNEL(QM1.TO.QM2) DATALEN(1000)\n");
    assert!(out.contains("Ping complete"), "{out}");
    assert!(out.contains("1000 bytes"), "{out}");
    // No messages moved: a message put since waits on the transmission queue.
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"stays");
    let out = mqsc(&home, "QM1", "PING CHANNEL(QM1.TO.QM2)\n");
    assert!(out.contains("Ping complete"), "{out}");
    assert_eq!(depth(&home, "QM1", "QM2"), 1);
    // A partner without the channel says so.
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE CHANNEL(NOT.THERE) CHLTYPE(SDR) CONNAME('127.0.0.1({})') XMITQ(QM2)\n",
            qm2.port
        ),
    );
    let out = status_of(&home, "QM1", "PING CHANNEL(NOT.THERE)\n");
    assert!(out.contains("MQRC_UNKNOWN_CHANNEL_NAME"), "{out}");
}

/// runmqsc output of a command that may fail.
fn status_of(home: &Home, qm: &str, script: &str) -> String {
    let out = home.run_with_input(&["runmqsc", qm], script);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_requester_asks_its_server_to_start_and_the_server_calls_back_as_the_sender() {
    let home = Home::new();
    let qm1 = Qm::start(&home, "QM1", &[]);
    let qm2 = Qm::start(&home, "QM2", &[]);
    let (p1, p2) = (qm1.port, qm2.port);
    mqsc(
        &home,
        "QM1",
        &format!(
            "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
             DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SVR) CONNAME('127.0.0.1({p2})') XMITQ(QM2) SHORTTMR(1)\n"
        ),
    );
    mqsc(
        &home,
        "QM2",
        &format!(
            "DEFINE QLOCAL(ORDERS.IN)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RQSTR) CONNAME('127.0.0.1({p1})')\n"
        ),
    );
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"requested");
    // The receiving side starts the channel.
    mqsc(&home, "QM2", "START CHANNEL(QM1.TO.QM2)\n");
    let c2 = qm2.connect_bindings();
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"requested");
    let text = wait_status(&home, "QM1", "RUNNING");
    assert!(text.contains("CHLTYPE(SVR)"), "{text}");
    let text = status(&home, "QM2");
    assert!(text.contains("CHLTYPE(RQSTR)"), "{text}");
}

#[test]
fn a_server_without_conname_sends_over_its_requesters_connection() {
    let home = Home::new();
    let qm1 = Qm::start(&home, "QM1", &[]);
    let qm2 = Qm::start(&home, "QM2", &[]);
    // The requester reaches QM1 through a relay with a round trip of 20 ms, so that each batch
    // takes a while and a kill lands mid-flow.
    let p1 = support::free_port();
    let _relay = support::relay(p1, qm1.port, 20);
    mqsc(
        &home,
        "QM1",
        "DEFINE QLOCAL(QM2) USAGE(XMITQ)\n\
         DEFINE QREMOTE(ORDERS) RNAME(ORDERS.IN) RQMNAME(QM2) XMITQ(QM2)\n\
         DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(SVR) XMITQ(QM2) BATCHSZ(5)\n",
    );
    mqsc(
        &home,
        "QM2",
        &format!(
            "DEFINE QLOCAL(ORDERS.IN) MAXDEPTH(100000)\n\
             DEFINE CHANNEL(QM1.TO.QM2) CHLTYPE(RQSTR) CONNAME('127.0.0.1({p1})')\n"
        ),
    );
    // It cannot start by itself: only its requester starts it.
    let out = home.run_with_input(&["runmqsc", "QM1"], "START CHANNEL(QM1.TO.QM2)\n");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("MQRCCF_MISSING_CONN_NAME"), "{out}");
    let c1 = qm1.connect_bindings();
    put_to(&c1, "ORDERS", b"first");
    mqsc(&home, "QM2", "START CHANNEL(QM1.TO.QM2)\n");
    let c2 = qm2.connect_bindings();
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"first");
    let text = wait_status(&home, "QM1", "RUNNING");
    assert!(text.contains("CHLTYPE(SVR)"), "{text}");
    let text = wait_status(&home, "QM2", "RUNNING");
    assert!(text.contains("CHLTYPE(RQSTR)"), "{text}");

    // STOP and START of the requester.
    mqsc(&home, "QM2", "STOP CHANNEL(QM1.TO.QM2)\n");
    wait_until(&home, "QM1", "the server ends", |t| !t.contains("RUNNING"));
    put_to(&c1, "ORDERS", b"second");
    assert_eq!(depth(&home, "QM1", "QM2"), 1);
    mqsc(&home, "QM2", "START CHANNEL(QM1.TO.QM2)\n");
    assert_eq!(get_wait(&c2, "ORDERS.IN"), b"second");
    drop((c1, c2));

    // A kill -9 of either side mid-flow, a restart and the requester started again: every
    // persistent message arrives once.
    let mut next = 0;
    let mut all = Vec::new();
    for victim in ["QM1", "QM2"] {
        let c1 = qm1.connect_bindings();
        let first = next;
        for _ in 0..400 {
            put_to(&c1, "ORDERS", format!("m{next}").as_bytes());
            next += 1;
        }
        drop(c1);
        mqsc(&home, "QM2", "START CHANNEL(QM1.TO.QM2)\n");
        wait_depth(&home, "QM2", "ORDERS.IN", 20);
        let qm = if victim == "QM1" { &qm1 } else { &qm2 };
        // Mid-flow: part of the messages are still on QM1's transmission queue.
        assert!(depth(&home, "QM1", "QM2") > 0, "the kill is not mid-flow");
        qm.kill9();
        qm.restart();
        mqsc(&home, "QM2", "START CHANNEL(QM1.TO.QM2)\n");
        wait_depth(&home, "QM2", "ORDERS.IN", next - first);
        wait_until(&home, "QM1", "the transmission queue empties", |_| {
            depth(&home, "QM1", "QM2") == 0
        });
        all.extend(drain(&qm2.connect_bindings(), "ORDERS.IN"));
    }
    let mut want: Vec<Vec<u8>> = (0..next).map(|i| format!("m{i}").into_bytes()).collect();
    want.sort();
    all.sort();
    assert_eq!(all.len(), want.len(), "every message once");
    assert_eq!(all, want);
}
