//! The publish/subscribe samples, like MQ's amqspub and amqssub: `ferrymq pub` publishes each
//! line of standard input on a topic; `ferrymq sub` subscribes (non-durable, or durable by name,
//! resumed if it exists) and prints each publication's body as it arrives.

use std::io::Write;

use bytes::Bytes;
use clap::Parser;
use ferrymq_client::SubscriptionOptions;
use ferrymq_types::limits::GET_WAIT_MAX_MS;
use ferrymq_types::options::{close, open, pmo, GetOptions, PutOptions, Wait};
use ferrymq_types::{MessageDescriptor, Persistence, Properties, PropertyValue, Reason};

use crate::lifecycle::Res;
use crate::lines::each_stdin_message;
use crate::samples::{connect_with, mq, named, parse_args, parse_property};

const PUB_EXAMPLES: &str = "\
Examples:
  echo 'fruit prices up' | ferrymq pub QM1 'price/fruit'
  ferrymq pub QM1 'price/fruit/apples' --retain --persistent < prices.txt
  ferrymq pub QM1 'orders/new' --property region=eu --property amount:int=250";

const SUB_EXAMPLES: &str = "\
Examples:
  ferrymq sub QM1 'price/#'                      # every topic under price/, for 30 s after the last
  ferrymq sub QM1 'price/+/apples' --wait-ms 0    # what is waiting (retained), then end
  ferrymq sub QM1 'orders/#' --durable ORDERS.AUDIT --selector \"amount > 100\"
  ferrymq sub QM1 'orders/#' --durable ORDERS.AUDIT --remove   # ... and remove it at the end";

/// `ferrymq pub`: publishes each line of standard input.
#[derive(Parser, Debug)]
struct PubArgs {
    /// Queue manager name (bindings mode, unless --conn)
    qmgr: String,
    /// Topic string to publish on (after the topic object's, with --topic-object)
    topic: String,
    /// Topic object whose TOPICSTR starts the topic string
    #[arg(long, value_name = "NAME", default_value = "")]
    topic_object: String,
    /// Make the publications persistent (default: the topic's DEFPSIST)
    #[arg(long)]
    persistent: bool,
    /// Keep the last publication for subscribers that come later (MQPMO_RETAIN)
    #[arg(long)]
    retain: bool,
    /// A property; repeatable. TYPE: string (default), int, float, bool, or bytes (hex)
    #[arg(long = "property", value_name = "NAME[:TYPE]=VALUE", value_parser = parse_property)]
    properties: Vec<(String, PropertyValue)>,
    #[command(flatten)]
    conn: crate::cli::ConnArgs,
}

/// `ferrymq sub`: subscribes and prints publications.
#[derive(Parser, Debug)]
struct SubArgs {
    /// Queue manager name (bindings mode, unless --conn)
    qmgr: String,
    /// Topic string, with '#' (any levels) and '+' (one level) wildcards
    topic: String,
    /// Make (or resume) a durable subscription of this name: publications wait while it runs
    /// no subscriber
    #[arg(long, value_name = "NAME")]
    durable: Option<String>,
    /// Remove the durable subscription when done
    #[arg(long, requires = "durable")]
    remove: bool,
    /// Only publications whose properties satisfy this SQL92-like selector
    #[arg(long, value_name = "EXPR")]
    selector: Option<String>,
    /// Wait up to MS milliseconds for each publication (amqssub waits 30 s); 0 does not wait
    #[arg(long, value_name = "MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(0..=GET_WAIT_MAX_MS))]
    wait_ms: u64,
    /// Stop after N publications
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    #[command(flatten)]
    conn: crate::cli::ConnArgs,
}

pub fn publish(rest: &[String]) -> Res {
    let Some(a) = parse_args::<PubArgs>(
        "ferrymq pub",
        Some("Publish each line of standard input on a topic"),
        PUB_EXAMPLES,
        rest,
    )?
    else {
        return Ok(());
    };
    publish_with(&a).map_err(named("pub"))
}

fn publish_with(a: &PubArgs) -> Res {
    let c = connect_with(&a.qmgr, &a.conn, "ferrymq pub")?;
    let h = c
        .open_topic(&a.topic_object, &a.topic, open::OUTPUT)
        .map_err(mq)?;
    let md = MessageDescriptor {
        persistence: if a.persistent {
            Persistence::Persistent
        } else {
            Persistence::AsQueueDef
        },
        format: "MQSTR".into(),
        ..Default::default()
    };
    let mut props = Properties::default();
    for (k, v) in &a.properties {
        props.set(k.clone(), v.clone());
    }
    let opts = PutOptions {
        new_msg_id: true,
        pubsub: if a.retain { pmo::RETAIN } else { 0 },
        ..PutOptions::default()
    };
    let mut n = 0u64;
    each_stdin_message(c.max_msg_len() as usize, "published", |line| {
        c.put(&h, &md, &props, Bytes::from(line), &opts)
            .map_err(mq)?;
        n += 1;
        Ok(())
    })?;
    let _ = c.close(&h, 0);
    eprintln!("{n} publications on '{}'", h.name);
    Ok(())
}

pub fn subscribe(rest: &[String]) -> Res {
    let Some(a) = parse_args::<SubArgs>(
        "ferrymq sub",
        Some("Subscribe to a topic and print each publication"),
        SUB_EXAMPLES,
        rest,
    )?
    else {
        return Ok(());
    };
    subscribe_with(&a).map_err(named("sub"))
}

fn subscribe_with(a: &SubArgs) -> Res {
    let c = connect_with(&a.qmgr, &a.conn, "ferrymq sub")?;
    let s = c
        .subscribe(&SubscriptionOptions {
            topic: a.topic.clone(),
            name: a.durable.clone(),
            durable: a.durable.is_some(),
            resume: a.durable.is_some(),
            create: true,
            selector: a.selector.clone(),
            ..Default::default()
        })
        .map_err(mq)?;
    let q = s.queue.clone().expect("a managed subscription has a queue");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut n = 0u64;
    while a.count.is_none_or(|max| n < max) {
        let opts = GetOptions {
            wait: if a.wait_ms > 0 {
                Wait::Ms(a.wait_ms)
            } else {
                Wait::NoWait
            },
            ..GetOptions::any()
        };
        match c.get(&q, &opts) {
            Ok(m) => {
                n += 1;
                let mut line = m.body.to_vec();
                line.push(b'\n');
                if out.write_all(&line).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
            Err(e) if e.reason == Reason::NO_MSG_AVAILABLE => break,
            Err(e) => return Err(mq(e)),
        }
    }
    let how = if a.remove { close::REMOVE_SUB } else { 0 };
    c.close_subscription(&s, how).map_err(mq)?;
    eprintln!("{n} publications");
    Ok(())
}
