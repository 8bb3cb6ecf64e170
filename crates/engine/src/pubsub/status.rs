//! What DISPLAY SUB, SBSTATUS and TPSTATUS show of publish/subscribe at run time: who uses
//! each subscription and the copies it received, the handles open for publishing on a topic
//! string, and a topic string's publishers, subscribers and retained publication.

use std::sync::Arc;

use super::sub::Sub;
use super::{retained_keys, RETAINED_QUEUE};
use crate::conn::ConnId;
use crate::Engine;

/// DISPLAY SBSTATUS: a subscription and who uses it.
#[derive(Debug, Clone)]
pub struct SubStatus {
    pub sub: Arc<Sub>,
    /// The connection that has it open, if any.
    pub conn: Option<ConnId>,
    /// Copies delivered to its destination since the queue manager started.
    pub delivered: Delivered,
}

/// Copies of publications a subscription received since the queue manager started: counted
/// when the publication is made (in a unit of work, when it is put, not when it commits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivered {
    /// NUMMSGS.
    pub messages: u64,
    /// LMSGDATE/LMSGTIME, milliseconds since the epoch; 0: none yet.
    pub last_ms: u64,
}

/// DISPLAY TPSTATUS TYPE(PUB): a handle open for publishing on a topic string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publisher {
    pub conn: ConnId,
    pub app: String,
    /// NUMPUBS: publications made through the handle.
    pub publications: u64,
    /// LPUBDATE/LPUBTIME: when the last was (ms since the epoch; 0: none yet).
    pub last_publication_ms: u64,
}

/// DISPLAY TPSTATUS of one topic string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStatus {
    pub topic: String,
    pub publishers: u32,
    pub subscribers: u32,
    pub retained: bool,
    pub object: String,
}

impl Engine {
    /// Counts a copy of a publication made at `now_ms` for each of `subs`.
    pub(super) fn count_deliveries(&mut self, subs: &[Arc<Sub>], now_ms: u64) {
        for s in subs {
            let d = match self.pubsub.delivered.get_mut(s.name.as_str()) {
                Some(d) => d,
                None => self.pubsub.delivered.entry(s.name.clone()).or_default(),
            };
            d.messages += 1;
            d.last_ms = now_ms;
        }
    }

    /// Every subscription, with the connection using it (DISPLAY SUB, DISPLAY SBSTATUS).
    pub fn subscriptions(&mut self) -> Vec<SubStatus> {
        let in_use = self.pubsub.in_use.clone();
        let subs = self.all_subs();
        subs.into_iter()
            .map(|s| SubStatus {
                conn: in_use.get(&s.name).map(|(c, _)| *c),
                delivered: self
                    .pubsub
                    .delivered
                    .get(s.name.as_str())
                    .copied()
                    .unwrap_or_default(),
                sub: s,
            })
            .collect()
    }

    /// DISPLAY TPSTATUS TYPE(PUB): the connections with a handle open for publishing on
    /// `topic`, with their application names, one entry per handle.
    pub fn topic_publishers(&self, topic: &str) -> Vec<Publisher> {
        let mut v: Vec<Publisher> = self
            .conns
            .iter()
            .flat_map(|(id, c)| {
                c.handles
                    .values()
                    .filter(|h| h.topic.as_deref() == Some(topic))
                    .map(move |h| Publisher {
                        conn: *id,
                        app: c.app.clone(),
                        publications: h.publications,
                        last_publication_ms: h.last_publication_ms,
                    })
            })
            .collect();
        v.sort_by(|a, b| (a.conn, &a.app).cmp(&(b.conn, &b.app)));
        v
    }

    /// DISPLAY TPSTATUS: publishers (open topic handles), subscriptions matching and whether a
    /// publication is retained, for `topic`.
    pub fn topic_status(&mut self, topic: &str) -> TopicStatus {
        let publishers = self
            .conns
            .values()
            .flat_map(|c| c.handles.values())
            .filter(|h| h.topic.as_deref() == Some(topic))
            .count() as u32;
        let subscribers = self.matching_subs(topic).len() as u32;
        let retained = self
            .queues
            .get(RETAINED_QUEUE)
            .is_some_and(|q| !retained_keys(q, |t| t == topic).is_empty());
        let object = self.topic_attrs(topic).object.clone();
        TopicStatus {
            topic: topic.to_string(),
            publishers,
            subscribers,
            retained,
            object,
        }
    }
}
