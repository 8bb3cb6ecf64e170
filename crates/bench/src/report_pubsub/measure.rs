//! The fan-out measurement itself: one queue manager in a private `$FERRYMQ_HOME`, one
//! publisher, subscribers on bindings connections (managed subscriptions, non-durable for
//! non-persistent publications and durable for persistent ones), and in the same run the plain
//! put then get of as many messages on one local queue. CPU is the queue manager's, from /proc.
//! The publisher (and the baseline's putter) either waits for each put's reply or puts with
//! MQPMO_ASYNC_RESPONSE and asks MQSTAT once at the end of its loop (which answers when every
//! put before it has been carried out, so the loop's CPU is all in).

use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use ferrymq_client::blocking::Connection;
use ferrymq_client::{ConnectOptions, ObjectHandle, Subscription, SubscriptionOptions, Transport};
use ferrymq_types::options::{close, open, pmo, GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, Reason};
use serde::Serialize;

use crate::cpu::cpu_seconds;
use crate::qm::mq;

/// Subscriptions per subscriber connection (two handles each, under the 256 per connection).
const SUBS_PER_CONN: usize = 100;
const QM: &str = "FANOUT";
const TOPIC: &str = "bench/fanout";
/// A topic nobody subscribes to: the publication's own cost.
const ALONE_TOPIC: &str = "bench/alone";

/// The plain put and get of the same messages: the baseline of one persistence.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Plain {
    pub persistent: bool,
    /// The puts (plain and to nobody) were MQPMO_ASYNC_RESPONSE, not waiting for replies.
    pub async_put: bool,
    /// The fan-out row measured right after this baseline (its subscribers), so that both see
    /// the machine in the same state.
    pub row_subscribers: usize,
    pub messages: usize,
    /// Queue manager CPU per message put, and per message got, in µs.
    pub put_cpu_us: f64,
    pub get_cpu_us: f64,
    pub msgs_per_s: f64,
    /// Queue manager CPU per publication to the topic while nobody subscribes, in µs: the
    /// publication's own cost, which every row's deliveries share.
    pub publish_alone_cpu_us: f64,
}

/// One fan-out row: `subscribers` subscriptions to the topic, `publications` published.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Row {
    pub persistent: bool,
    /// The publisher put with MQPMO_ASYNC_RESPONSE instead of waiting for each reply.
    pub async_put: bool,
    pub subscribers: usize,
    pub publications: usize,
    pub deliveries: usize,
    /// Publications per second while publishing (the copies' puts included).
    pub publications_per_s: f64,
    /// Copies delivered (put and got) per second, publishing and draining together.
    pub deliveries_per_s: f64,
    /// Queue manager CPU per delivery: the copy's put at publish time plus its get.
    pub cpu_us_per_delivery: f64,
    /// Queue manager CPU per publication while publishing (its copies' puts included), and per
    /// copy while the subscribers get them.
    pub publish_cpu_us: f64,
    pub get_cpu_us: f64,
    /// What one more subscriber costs: the row's CPU less that of as many publications to
    /// nobody (`Plain::publish_alone_cpu_us`), per delivery.
    pub marginal_cpu_us: f64,
    pub marginal_ratio_to_get: f64,
    /// `cpu_us_per_delivery` against a plain put+get, and against a plain get alone.
    pub ratio_to_put_get: f64,
    pub ratio_to_get: f64,
}

pub struct Fanout {
    home: std::path::PathBuf,
    pid: u32,
    admin: Connection,
}

fn err(e: ferrymq_types::MqError) -> String {
    e.to_string()
}

fn connect(home: &Path) -> Result<Connection, String> {
    let mut o = ConnectOptions::bindings(QM);
    o.transport = Transport::Bindings {
        home: Some(home.to_path_buf()),
    };
    Connection::connect(o).map_err(|e| e.to_string())
}

/// Gets every message waiting on `q`; returns how many.
fn drain(c: &Connection, q: &ObjectHandle) -> Result<usize, String> {
    let mut n = 0;
    loop {
        match c.get(
            q,
            &GetOptions {
                max_len: u32::MAX,
                ..Default::default()
            },
        ) {
            Ok(_) => n += 1,
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => return Ok(n),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The put options of a publisher that waits for each reply, or does not.
fn put_opts(async_put: bool) -> PutOptions {
    PutOptions {
        response: if async_put {
            pmo::ASYNC_RESPONSE
        } else {
            pmo::SYNC_RESPONSE
        },
        ..PutOptions::default()
    }
}

/// After a loop of `n` asynchronous puts: MQSTAT, which is answered once all of them have been
/// carried out, and must count them all as done.
fn settle(c: &Connection, async_put: bool, n: usize) -> Result<(), String> {
    if !async_put {
        return Ok(());
    }
    let st = c.stat().map_err(err)?;
    if st.put_success_count != n as u64 {
        return Err(format!(
            "{n} asynchronous puts: MQSTAT counts {} done, {} failed (first: {})",
            st.put_success_count, st.put_failure_count, st.reason
        ));
    }
    Ok(())
}

fn md(persistent: bool) -> MessageDescriptor {
    MessageDescriptor {
        persistence: if persistent {
            Persistence::Persistent
        } else {
            Persistence::NotPersistent
        },
        ..Default::default()
    }
}

impl Fanout {
    /// Creates and starts the queue manager in `home`.
    pub fn start(home: &Path) -> Result<Fanout, String> {
        mq(home, &["crtmqm", "-p", "0", "--insecure", QM])?;
        mq(home, &["strmqm", QM])?;
        let pid_file = home.join("qmgrs").join(QM).join("qm.pid");
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .map_err(|e| format!("{}: {e}", pid_file.display()))?
            .trim()
            .parse()
            .map_err(|_| format!("{}: not a pid", pid_file.display()))?;
        let admin = connect(home)?;
        for c in [
            "DEFINE QLOCAL(PLAIN) MAXDEPTH(999999999)",
            "ALTER QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH(999999999)",
            "ALTER QMODEL(SYSTEM.NDURABLE.MODEL.QUEUE) MAXDEPTH(999999999)",
        ] {
            admin.admin(&format!("MQSC {c}")).map_err(err)?;
        }
        Ok(Fanout {
            home: home.to_path_buf(),
            pid,
            admin,
        })
    }

    fn cpu(&self) -> f64 {
        cpu_seconds(self.pid).unwrap_or(0.0)
    }

    /// Puts `messages` on a local queue, then gets them all.
    pub fn plain(
        &self,
        persistent: bool,
        async_put: bool,
        messages: usize,
        size: usize,
    ) -> Result<Plain, String> {
        let c = &self.admin;
        let opts = put_opts(async_put);
        let body = Bytes::from(vec![b'x'; size]);
        let md = md(persistent);
        let h = c
            .open("PLAIN", open::OUTPUT | open::INPUT_SHARED)
            .map_err(err)?;
        let (c0, t0) = (self.cpu(), Instant::now());
        for _ in 0..messages {
            c.put(&h, &md, &Properties::default(), body.clone(), &opts)
                .map_err(err)?;
        }
        settle(c, async_put, messages)?;
        let c1 = self.cpu();
        let got = drain(c, &h)?;
        let (c2, seconds) = (self.cpu(), t0.elapsed().as_secs_f64());
        c.close(&h, 0).map_err(err)?;
        if got != messages {
            return Err(format!("put {messages} plain messages, got {got} back"));
        }
        // The same number of publications to a topic nobody subscribes to.
        let p = c.open_topic("", ALONE_TOPIC, open::OUTPUT).map_err(err)?;
        let c3 = self.cpu();
        for _ in 0..messages {
            c.put(&p, &md, &Properties::default(), body.clone(), &opts)
                .map_err(err)?;
        }
        settle(c, async_put, messages)?;
        let c4 = self.cpu();
        c.close(&p, 0).map_err(err)?;
        Ok(Plain {
            persistent,
            async_put,
            row_subscribers: 0,
            messages,
            put_cpu_us: (c1 - c0) / messages as f64 * 1e6,
            get_cpu_us: (c2 - c1) / messages as f64 * 1e6,
            msgs_per_s: messages as f64 / seconds,
            publish_alone_cpu_us: (c4 - c3) / messages as f64 * 1e6,
        })
    }

    /// Publishes to `subscribers` subscriptions until about `deliveries` copies are delivered,
    /// then gets them all.
    pub fn fanout(
        &self,
        plain: &Plain,
        subscribers: usize,
        deliveries: usize,
        size: usize,
    ) -> Result<Row, String> {
        let persistent = plain.persistent;
        let async_put = plain.async_put;
        let opts = put_opts(async_put);
        let body = Bytes::from(vec![b'x'; size]);
        let md = md(persistent);
        let conns: Vec<Connection> = (0..subscribers.div_ceil(SUBS_PER_CONN))
            .map(|_| connect(&self.home))
            .collect::<Result<_, _>>()?;
        let mut made: Vec<(usize, Subscription)> = Vec::with_capacity(subscribers);
        for k in 0..subscribers {
            let ci = k / SUBS_PER_CONN;
            let s = conns[ci]
                .subscribe(&SubscriptionOptions {
                    name: persistent.then(|| format!("FANOUT.{k}")),
                    durable: persistent,
                    ..SubscriptionOptions::topic(TOPIC)
                })
                .map_err(err)?;
            made.push((ci, s));
        }
        let c = &self.admin;
        let pubs = (deliveries / subscribers).max(1);
        let p = c.open_topic("", TOPIC, open::OUTPUT).map_err(err)?;
        let (c0, t0) = (self.cpu(), Instant::now());
        for _ in 0..pubs {
            c.put(&p, &md, &Properties::default(), body.clone(), &opts)
                .map_err(err)?;
        }
        settle(c, async_put, pubs)?;
        let publish_s = t0.elapsed().as_secs_f64();
        let c1 = self.cpu();
        let mut got = 0;
        for (ci, s) in &made {
            got += drain(&conns[*ci], s.queue.as_ref().expect("managed"))?;
        }
        let (cpu_s, seconds) = (self.cpu() - c0, t0.elapsed().as_secs_f64());
        c.close(&p, 0).map_err(err)?;
        for (ci, s) in &made {
            conns[*ci]
                .close_subscription(s, close::REMOVE_SUB)
                .map_err(err)?;
        }
        if got != pubs * subscribers {
            return Err(format!(
                "{subscribers} subscribers got {got} copies of {pubs} publications"
            ));
        }
        let per = cpu_s / got as f64 * 1e6;
        let marginal =
            (cpu_s * 1e6 - plain.publish_alone_cpu_us * pubs as f64).max(0.0) / got as f64;
        Ok(Row {
            persistent,
            async_put,
            subscribers,
            publications: pubs,
            deliveries: got,
            publications_per_s: pubs as f64 / publish_s,
            deliveries_per_s: got as f64 / seconds,
            cpu_us_per_delivery: per,
            publish_cpu_us: (c1 - c0) / pubs as f64 * 1e6,
            get_cpu_us: (c0 + cpu_s - c1) / got as f64 * 1e6,
            marginal_cpu_us: marginal,
            marginal_ratio_to_get: marginal / plain.get_cpu_us,
            ratio_to_put_get: per / (plain.put_cpu_us + plain.get_cpu_us),
            ratio_to_get: per / plain.get_cpu_us,
        })
    }
}

impl Drop for Fanout {
    fn drop(&mut self) {
        let _ = mq(&self.home, &["endmqm", "-i", "-w", QM]);
    }
}
