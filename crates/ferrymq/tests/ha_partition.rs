//! High availability under a network partition. Three instances of one queue manager each run in
//! their own Linux network namespace, joined by veth pairs to a bridge in the root namespace
//! (where this test and its clients live). Taking the active instance's link down isolates it
//! completely — from its peers and from clients. The test proves that
//!
//! - once the isolated instance has had time to notice (quorum loss after 1 s, then a restart as
//!   a replica), exactly one instance accepts a committed persistent put, on the majority side,
//!   and no two instances ever both report themselves active;
//! - the isolated instance never acknowledges a persistent put, not even to a client on its own
//!   side of the partition, and nothing it took in while cut off survives;
//! - the majority side goes on committing work during the partition;
//! - after the link comes back the old active instance rejoins as a replica and catches up, and
//!   every message committed before and during the partition is there exactly once.
//!
//! Needs root (network namespaces, veth pairs, a bridge) and iproute2 at `/usr/sbin/ip`; it fails,
//! rather than skipping itself, where it cannot build that network.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::ConnectOptions;
use ferrymq_types::options::{open, GetOptions};
use ferrymq_types::{MessageDescriptor, MqError, Persistence, Properties, Reason};
use support::ha::{HaGroup, NAMES};
use support::netns::{Net, IP};
use support::workload::Q;
use support::BIN;

const QM: &str = "QPART";
/// Probes put here, so that the main queue holds exactly the messages the test committed.
const PROBE_Q: &str = "PARTITION.PROBE";
/// A probe that has not committed by then counts as "not accepting work".
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
const SAMPLE_EVERY: Duration = Duration::from_millis(200);
/// Sampling is finer right after the cut and the heal, to time the role changes.
const SAMPLE_FAST: Duration = Duration::from_millis(50);
const FAST_FOR: Duration = Duration::from_millis(2_500);
/// Time the isolated active instance is given to notice: quorum loss (1 s) plus its restart.
const NOTICE: Duration = Duration::from_secs(3);
/// The majority side must have an active instance by then.
const ELECTION_LIMIT: Duration = Duration::from_secs(10);
/// When after the cut each probe round starts: the first shows the isolated instance's lame-duck
/// moment (still listening, cannot commit); the others are the ones asserted on.
const PROBE_ROUNDS: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_secs(3),
    Duration::from_secs(6),
];
/// The partition lasts at least this long (and until the probes and puts made in it are done).
const PARTITION_MIN: Duration = Duration::from_millis(9_500);
const HEAL_LIMIT: Duration = Duration::from_secs(20);
const MESSAGES: usize = 100;

/// The group and its network; dropping it kills the instances (by pid, only ones this test
/// started), then removes the network.
struct Cluster {
    g: HaGroup,
    net: Net,
    /// Every instance pid seen.
    pids: BTreeSet<u32>,
}

impl Cluster {
    fn start_instance(&mut self, i: usize) {
        let out = Command::new(IP)
            .args(["netns", "exec", &self.net.ns[i], BIN, "strmqm", QM])
            .env("FERRYMQ_HOME", self.g.homes[i].path())
            .output()
            .expect("run ip netns exec ferrymq strmqm");
        assert!(
            out.status.success(),
            "strmqm of instance {} in namespace {} failed ({}):\nstdout: {}\nstderr: {}\n{}",
            NAMES[i],
            self.net.ns[i],
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.g.logs()
        );
        let pid = self.g.pid(i).expect("qm.pid after strmqm");
        self.pids.insert(pid);
    }

    fn conname(&self, which: &[usize]) -> String {
        which
            .iter()
            .map(|&i| format!("{}({})", self.net.addr(i), self.g.ports[i]))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Is `pid` one of this test's instance processes (not a reused pid)?
    fn ours(&self, pid: u32) -> bool {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        has(&cmdline, b"run-qmgr")
            && self.g.homes.iter().any(|h| {
                let mut e = b"FERRYMQ_HOME=".to_vec();
                e.extend_from_slice(h.path().as_os_str().as_encoded_bytes());
                e.push(0);
                has(&environ, &e)
            })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut pids = self.pids.clone();
        pids.extend((0..3).filter_map(|i| self.g.pid(i)));
        for pid in pids {
            if support::alive(pid) && self.ours(pid) {
                support::kill9_pid(pid);
            }
        }
        // Then `g` (nothing left to kill; removes the homes) and `net` (torn down) drop.
    }
}

// ---------------------------------------------------------------------------------------------
// Looking at the instances

/// Waits for `child` at most `limit`; kills it (it is ours) if it is still running then.
fn wait_deadline(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `dspmq -o ha` as the instance with this home sees the group (None: no answer within 2 s).
fn dspmq(home: &Path) -> Option<String> {
    let mut child = Command::new(BIN)
        .args(["dspmq", "-o", "ha", "-m", QM])
        .env("FERRYMQ_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let st = wait_deadline(&mut child, Duration::from_secs(2))?;
    let mut s = String::new();
    child.stdout.take()?.read_to_string(&mut s).ok()?;
    st.success().then_some(s)
}

/// Every instance's view of the group, asked at the same time.
type Views = [Option<String>; 3];

fn views(g: &HaGroup) -> Views {
    std::thread::scope(|s| {
        let hs: Vec<_> = g
            .homes
            .iter()
            .map(|h| {
                let p = h.path();
                s.spawn(move || dspmq(p))
            })
            .collect();
        let v: Vec<Option<String>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        v.try_into().unwrap()
    })
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("{key}("))? + key.len() + 1;
    line[start..].split(')').next()
}

/// The role an instance reports for itself (its LOCAL(YES) line).
fn own_role(view: &Option<String>) -> Option<&str> {
    let line = view
        .as_deref()?
        .lines()
        .find(|l| l.contains("LOCAL(YES)"))?;
    field(line, "ROLE")
}

/// The role `view` gives instance `name`.
fn role_of<'a>(view: &'a Option<String>, name: &str) -> Option<&'a str> {
    let tag = format!("INSTANCE({name})");
    let line = view.as_deref()?.lines().find(|l| l.contains(&tag))?;
    field(line, "ROLE")
}

fn self_active(views: &Views) -> Vec<usize> {
    (0..3)
        .filter(|&i| own_role(&views[i]) == Some("Active"))
        .collect()
}

fn roles_line(views: &Views) -> String {
    (0..3)
        .map(|i| {
            format!(
                "{}={}",
                NAMES[i],
                own_role(&views[i]).unwrap_or("(no answer)")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines of a timeline where the self-reported roles change.
fn timeline(samples: &[(Duration, Views)]) -> String {
    let mut out = String::new();
    let mut last = String::new();
    for (t, v) in samples {
        let l = roles_line(v);
        if l != last {
            out.push_str(&format!("  +{:6.3}s  {l}\n", t.as_secs_f64()));
            last = l;
        }
    }
    out
}

fn persistent() -> MessageDescriptor {
    MessageDescriptor {
        persistence: Persistence::Persistent,
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Probes: does an instance accept (commit) a persistent put?

#[derive(Debug, Clone, PartialEq)]
enum Probe {
    Committed,
    Failed(String),
    TimedOut,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Probe::Committed => f.write_str("committed"),
            Probe::Failed(e) => write!(f, "failed ({e})"),
            Probe::TimedOut => write!(f, "no answer within {PROBE_TIMEOUT:?}"),
        }
    }
}

impl Probe {
    fn committed(&self) -> bool {
        *self == Probe::Committed
    }
}

/// From the root namespace over the bridge: connect, open, put_commit (one persistent message).
fn probe_tcp(conname: String, body: String) -> Probe {
    let (tx, rx) = mpsc::channel();
    // Left running if it hangs; it holds nothing the test needs.
    std::thread::spawn(move || {
        let r = (|| {
            let mut o = ConnectOptions::client(QM, &conname)?;
            o.connect_timeout = PROBE_TIMEOUT;
            let c = Connection::connect(o)?;
            let h = c.open(PROBE_Q, open::OUTPUT)?;
            c.put_commit(&h, &persistent(), &Properties::default(), Bytes::from(body))?;
            Ok::<_, MqError>(())
        })();
        let _ = tx.send(r);
    });
    match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok(Ok(())) => Probe::Committed,
        Ok(Err(e)) => Probe::Failed(e.to_string()),
        Err(_) => Probe::TimedOut,
    }
}

/// From inside the instance's own namespace (its side of the partition), with `ferrymq put` to
/// 127.0.0.1: a persistent put outside syncpoint, which returns only once committed.
fn probe_in_ns(ns: &str, port: u16, body: &str) -> Probe {
    let conn = format!("127.0.0.1({port})");
    let child = Command::new(IP)
        .args([
            "netns",
            "exec",
            ns,
            BIN,
            "put",
            "--conn",
            &conn,
            "--persistent",
            QM,
            PROBE_Q,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Probe::Failed(format!("cannot run ferrymq put: {e}")),
    };
    {
        let mut stdin = child.stdin.take().unwrap();
        let _ = writeln!(stdin, "{body}");
    }
    match wait_deadline(&mut child, PROBE_TIMEOUT) {
        None => Probe::TimedOut,
        Some(st) if st.success() => Probe::Committed,
        Some(st) => {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            Probe::Failed(format!("{st}: {}", err.trim()))
        }
    }
}

/// One round: every instance probed over the bridge and from inside its namespace, at once.
struct Round {
    at: Duration,
    /// [instance] -> (over the bridge, from its own namespace): the body put, the outcome and
    /// when (after the cut) it was known.
    probes: Vec<[(String, Probe, Duration); 2]>,
}

impl Round {
    fn accepting(&self) -> Vec<usize> {
        (0..3)
            .filter(|&i| self.probes[i].iter().any(|(_, p, _)| p.committed()))
            .collect()
    }

    fn describe(&self) -> String {
        let mut s = format!("probe round at +{:.3}s:\n", self.at.as_secs_f64());
        for (i, pr) in self.probes.iter().enumerate() {
            s.push_str(&format!(
                "    {}: over the bridge: {} (+{:.3}s); from its own namespace: {} (+{:.3}s)\n",
                NAMES[i],
                pr[0].1,
                pr[0].2.as_secs_f64(),
                pr[1].1,
                pr[1].2.as_secs_f64()
            ));
        }
        s
    }
}

fn probe_round(c: &Cluster, round: usize, t_cut: Instant) -> Round {
    let at = t_cut.elapsed();
    let probes = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|i| {
                let bridge_body = format!("probe{round}-{}-bridge", NAMES[i]);
                let ns_body = format!("probe{round}-{}-ns", NAMES[i]);
                let conname = c.conname(&[i]);
                let (ns, port) = (c.net.ns[i].as_str(), c.g.ports[i]);
                s.spawn(move || {
                    let (a, b) = std::thread::scope(|s2| {
                        let bb = bridge_body.clone();
                        let a = s2.spawn(move || (probe_tcp(conname, bb), t_cut.elapsed()));
                        let b = (probe_in_ns(ns, port, &ns_body), t_cut.elapsed());
                        (a.join().unwrap(), b)
                    });
                    [(bridge_body, a.0, a.1), (ns_body, b.0, b.1)]
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    Round { at, probes }
}

/// Puts and commits `bodies` through `conname`, one persistent message per unit of work.
fn put_all(conname: &str, bodies: &[String]) -> Result<(), String> {
    let c = Connection::connect(ConnectOptions::client(QM, conname).unwrap())
        .map_err(|e| format!("connect to {conname}: {e}"))?;
    let h = c.open(Q, open::OUTPUT).map_err(|e| format!("open: {e}"))?;
    for (n, b) in bodies.iter().enumerate() {
        c.put_commit(
            &h,
            &persistent(),
            &Properties::default(),
            Bytes::from(b.clone()),
        )
        .map_err(|e| format!("put_commit of {b} ({n} committed before it): {e}"))?;
    }
    let _ = c.disconnect();
    Ok(())
}

/// Gets (destructively, outside syncpoint) everything on `queue`.
fn drain(conname: &str, queue: &str) -> Result<Vec<String>, String> {
    let c = Connection::connect(ConnectOptions::client(QM, conname).unwrap())
        .map_err(|e| format!("connect to {conname}: {e}"))?;
    let h = c
        .open(queue, open::INPUT_EXCLUSIVE)
        .map_err(|e| format!("open {queue}: {e}"))?;
    let mut got = Vec::new();
    loop {
        match c.get(&h, &GetOptions::any()) {
            Ok(m) => got.push(String::from_utf8_lossy(&m.body).into_owned()),
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => return Err(format!("get from {queue} after {}: {e}", got.len())),
        }
    }
    let _ = c.disconnect();
    Ok(got)
}

/// The role changes instance `i` logged, runs of the same line collapsed into one with a count.
fn role_log(g: &HaGroup, i: usize) -> String {
    let text = support::error_log(&g.dir(i));
    let mut runs: Vec<(usize, &str)> = Vec::new();
    for l in text.lines().filter(|l| {
        l.contains("restarting")
            || l.contains("is now the active instance")
            || l.contains("could not take over")
    }) {
        match runs.last_mut() {
            Some((n, last)) if *last == l => *n += 1,
            _ => runs.push((1, l)),
        }
    }
    runs.iter()
        .map(|(n, l)| match n {
            1 => format!("      {l}\n"),
            n => format!("      ({n} times) {l}\n"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn partition_leaves_one_active_instance_and_the_group_heals() {
    let t_test = Instant::now();
    let net = Net::build("part", &NAMES);
    let g = HaGroup::create(QM, &[], |i| net.addr(i));
    let mut c = Cluster {
        g,
        net,
        pids: BTreeSet::new(),
    };
    eprintln!(
        "network: bridge {} 10.213.{}.254/24, namespaces {:?}",
        c.net.bridge, c.net.subnet, c.net.ns
    );

    // 1. Start each instance inside its namespace; wait for an active one and a group in sync.
    for i in 0..3 {
        c.start_instance(i);
    }
    let t = Instant::now();
    let x = loop {
        let v = views(&c.g);
        let act = self_active(&v);
        if let [a] = act[..] {
            let in_sync = v[a].as_deref().unwrap_or("").matches("INSYNC(YES)").count();
            if in_sync == 3 {
                break a;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no active instance with all three in sync within 30 s: {}\n{:#?}\n{}",
            roles_line(&v),
            v,
            c.g.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let majority: Vec<usize> = (0..3).filter(|&i| i != x).collect();
    let x_pid = c.g.pid(x).expect("pid of the active instance");
    eprintln!(
        "instance {} (pid {x_pid}) active after {} ms",
        NAMES[x],
        t.elapsed().as_millis()
    );

    // 2. A probe queue, then 100 committed persistent messages through the whole list.
    let all = c.conname(&[0, 1, 2]);
    {
        let conn = Connection::connect(ConnectOptions::client(QM, &all).unwrap())
            .unwrap_or_else(|e| panic!("connect to {all}: {e}\n{}", c.g.logs()));
        let r = conn
            .admin(&format!("MQSC DEFINE QLOCAL({PROBE_Q})"))
            .unwrap_or_else(|e| panic!("DEFINE QLOCAL({PROBE_Q}): {e}"));
        eprintln!("{}", r.trim());
        let _ = conn.disconnect();
    }
    let before: Vec<String> = (0..MESSAGES).map(|n| format!("before-{n:03}")).collect();
    let during: Vec<String> = (0..MESSAGES).map(|n| format!("during-{n:03}")).collect();
    let t = Instant::now();
    put_all(&all, &before).unwrap_or_else(|e| panic!("{e}\n{}", c.g.logs()));
    eprintln!(
        "{MESSAGES} persistent messages committed in {} ms",
        t.elapsed().as_millis()
    );

    // 3. Isolate the active instance.
    c.net.cut(x);
    let t_cut = Instant::now();
    eprintln!("cut instance {}'s link", NAMES[x]);
    let mut samples: Vec<(Duration, Views)> = Vec::new();
    let mut new_active: Option<(usize, Duration)> = None;
    let mut rounds: Vec<Round> = Vec::new();
    let mut during_result: Option<(Result<(), String>, Duration)> = None;
    std::thread::scope(|s| {
        let mut puts = None;
        let mut probes = Vec::new();
        let c = &c;
        loop {
            let tick = Instant::now();
            let t = t_cut.elapsed();
            let v = views(&c.g);
            if new_active.is_none() {
                if let Some(&a) = self_active(&v).iter().find(|&&a| a != x) {
                    new_active = Some((a, t));
                    let conname = c.conname(&majority);
                    let during = &during;
                    puts = Some(s.spawn(move || {
                        let r = put_all(&conname, during);
                        (r, t_cut.elapsed())
                    }));
                }
            }
            samples.push((t, v));
            if new_active.is_none() && t > ELECTION_LIMIT {
                break;
            }
            if let Some(&at) = PROBE_ROUNDS.get(probes.len()) {
                if t >= at {
                    let round = probes.len();
                    probes.push(s.spawn(move || probe_round(c, round, t_cut)));
                }
            }
            let finished = probes.len() == PROBE_ROUNDS.len()
                && probes.iter().all(|h| h.is_finished())
                && puts.as_ref().is_some_and(|h| h.is_finished());
            if t >= PARTITION_MIN && finished {
                break;
            }
            if t > Duration::from_secs(30) {
                break; // puts or probes stuck: reported below
            }
            let every = if t < FAST_FOR {
                SAMPLE_FAST
            } else {
                SAMPLE_EVERY
            };
            std::thread::sleep(every.saturating_sub(tick.elapsed()));
        }
        for h in probes {
            rounds.push(h.join().unwrap());
        }
        if let Some(h) = puts {
            during_result = Some(h.join().unwrap());
        }
    });
    let partition_lasted = t_cut.elapsed();
    let tl = timeline(&samples);
    eprintln!("roles during the partition (as each instance reports itself):\n{tl}");
    for r in &rounds {
        eprint!("{}", r.describe());
    }
    let (b, elected_after) = new_active.unwrap_or_else(|| {
        panic!(
            "no instance of the majority side became active within {ELECTION_LIMIT:?} of the cut\n{tl}\n{}",
            c.g.logs()
        )
    });
    eprintln!(
        "instance {} reported itself active {} ms after the cut",
        NAMES[b],
        elected_after.as_millis()
    );

    // Step-down timing of the isolated instance, as it reports itself.
    let x_last_active = samples
        .iter()
        .filter(|(_, v)| own_role(&v[x]) == Some("Active"))
        .map(|(t, _)| *t)
        .next_back();
    let dual: Vec<Duration> = samples
        .iter()
        .filter(|(_, v)| self_active(v).len() > 1)
        .map(|(t, _)| *t)
        .collect();
    eprintln!(
        "isolated instance {}: last sample reporting itself active at {}; pid now {:?} (was {x_pid}); \
         samples with two instances reporting themselves active: {:?}",
        NAMES[x],
        x_last_active.map_or("(none after the cut)".to_string(), |t| format!(
            "+{:.3}s",
            t.as_secs_f64()
        )),
        c.g.pid(x),
        dual.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>()
    );

    // After NOTICE: never two self-reported active instances, and never the isolated one.
    for (t, v) in samples.iter().filter(|(t, _)| *t >= NOTICE) {
        let act = self_active(v);
        assert!(
            act.len() <= 1,
            "+{:.3}s after the cut {} instances report themselves active ({})\n{tl}\n{}",
            t.as_secs_f64(),
            act.len(),
            roles_line(v),
            c.g.logs()
        );
        assert!(
            !act.contains(&x),
            "+{:.3}s after the cut the isolated instance {} still reports itself active\n{tl}\n{}",
            t.as_secs_f64(),
            NAMES[x],
            c.g.logs()
        );
    }
    // The isolated instance never commits a probe, however early; after NOTICE exactly the new
    // active instance does.
    assert_eq!(rounds.len(), PROBE_ROUNDS.len(), "probe rounds missing");
    for r in &rounds {
        assert!(
            !r.probes[x].iter().any(|(_, p, _)| p.committed()),
            "the isolated instance {} committed a put\n{}\n{tl}\n{}",
            NAMES[x],
            r.describe(),
            c.g.logs()
        );
        if r.at >= NOTICE {
            assert_eq!(
                r.accepting(),
                vec![b],
                "{:.3}s after the cut exactly the new active instance {} should accept a committed put\n{}\n{tl}\n{}",
                r.at.as_secs_f64(),
                NAMES[b],
                r.describe(),
                c.g.logs()
            );
        }
    }
    let (during_r, during_done) = during_result.expect("puts during the partition never started");
    during_r.unwrap_or_else(|e| {
        panic!(
            "putting {MESSAGES} messages on the majority side during the partition failed: {e}\n{tl}\n{}",
            c.g.logs()
        )
    });
    eprintln!(
        "{MESSAGES} persistent messages committed on the majority side, done +{:.3}s after the cut; \
         partition lasted {:.3}s",
        during_done.as_secs_f64(),
        partition_lasted.as_secs_f64()
    );

    // 4. Heal: the old active instance rejoins as a replica and the group is back in sync.
    c.net.heal(x);
    let t_heal = Instant::now();
    let mut heal_samples: Vec<(Duration, Views)> = Vec::new();
    let healed = loop {
        let tick = Instant::now();
        let t = t_heal.elapsed();
        let v = views(&c.g);
        let act = self_active(&v);
        let done = match act[..] {
            [a] if a != x => {
                own_role(&v[x]) == Some("Replica")
                    && role_of(&v[x], NAMES[a]) == Some("Active")
                    && v[a].as_deref().unwrap_or("").matches("INSYNC(YES)").count() == 3
            }
            _ => false,
        };
        heal_samples.push((t, v));
        if done {
            break Some((t, act[0]));
        }
        if t > HEAL_LIMIT {
            break None;
        }
        let every = if t < FAST_FOR {
            SAMPLE_FAST
        } else {
            SAMPLE_EVERY
        };
        std::thread::sleep(every.saturating_sub(tick.elapsed()));
    };
    let htl = timeline(&heal_samples);
    eprintln!("roles after healing:\n{htl}");
    let (heal_t, final_active) = healed.unwrap_or_else(|| {
        panic!(
            "within {HEAL_LIMIT:?} of healing, instance {} did not rejoin as an in-sync replica of one active instance\nlast views: {:#?}\n{htl}\n{}",
            NAMES[x],
            heal_samples.last().map(|s| &s.1),
            c.g.logs()
        )
    });
    let heal_dual: Vec<f64> = heal_samples
        .iter()
        .filter(|(_, v)| self_active(v).len() > 1)
        .map(|(t, _)| t.as_secs_f64())
        .collect();
    let heal_gaps = heal_samples
        .iter()
        .filter(|(_, v)| self_active(v).is_empty())
        .count();
    eprintln!(
        "healed: {} active, all three in sync, {} ms after the link came back; active changed on heal: {}; \
         samples without an active instance: {heal_gaps}; samples with two: {heal_dual:?}",
        NAMES[final_active],
        heal_t.as_millis(),
        if final_active == b { "no" } else { "YES" }
    );
    for (i, name) in NAMES.iter().enumerate() {
        eprintln!(
            "instance {name}'s role changes, from its log:\n{}",
            role_log(&c.g, i)
        );
    }

    // 5. Every committed message exactly once; no probe the isolated instance took survives.
    let got = drain(&all, Q).unwrap_or_else(|e| panic!("{e}\n{}", c.g.logs()));
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &got {
        *counts.entry(m.as_str()).or_default() += 1;
    }
    let expected: BTreeSet<&str> = before.iter().chain(&during).map(String::as_str).collect();
    let dups: Vec<_> = counts.iter().filter(|(_, &n)| n > 1).collect();
    let missing: Vec<_> = expected
        .iter()
        .filter(|m| !counts.contains_key(*m))
        .collect();
    let extra: Vec<_> = counts.keys().filter(|m| !expected.contains(*m)).collect();
    assert!(
        dups.is_empty() && missing.is_empty() && extra.is_empty() && got.len() == 2 * MESSAGES,
        "expected exactly the {} committed messages once each; got {}: duplicated {dups:?}, missing {missing:?}, unexpected {extra:?}\n{}",
        2 * MESSAGES,
        got.len(),
        c.g.logs()
    );
    let probes_left = drain(&all, PROBE_Q).unwrap_or_else(|e| panic!("{e}\n{}", c.g.logs()));
    let left: BTreeSet<&str> = probes_left.iter().map(String::as_str).collect();
    for r in &rounds {
        for (i, pr) in r.probes.iter().enumerate() {
            for (body, p, _) in pr {
                if p.committed() {
                    assert!(
                        left.contains(body.as_str()),
                        "committed probe {body} lost\n{}",
                        c.g.logs()
                    );
                }
                if i == x {
                    assert!(
                        !left.contains(body.as_str()),
                        "probe {body} put to the isolated instance survived the partition\n{}",
                        c.g.logs()
                    );
                }
            }
        }
    }
    assert_eq!(
        probes_left.len(),
        left.len(),
        "a probe message was delivered twice: {probes_left:?}"
    );
    eprintln!(
        "drained {} messages (exactly the {} committed) and {} probe messages; test took {:.1}s",
        got.len(),
        2 * MESSAGES,
        probes_left.len(),
        t_test.elapsed().as_secs_f64()
    );
}
