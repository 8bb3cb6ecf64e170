//! What publish/subscribe derives from the objects: the topic objects by topic string, each
//! topic string's resolved attributes, and the durable subscriptions with their index. The
//! durable subscriptions are kept as each is defined or deleted (a subscribe is one insert, not
//! a rebuild of them all); the topic cache and the resolved attributes are forgotten when a
//! topic object changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use ahash::AHashMap;
use ferrymq_types::limits::TOPIC_ATTRS_CACHED_MAX;
use ferrymq_types::{ObjectDef, ObjectKind};

use super::{
    delivery, explicit, index, tree, Delivery, Sub, TopicAttrs, BASE_TOPIC, DURABLE_MODEL,
    NDURABLE_MODEL,
};
use crate::Engine;

/// Topic objects by TOPICSTR, rebuilt when a topic object changes.
#[derive(Debug, Default)]
pub(super) struct Cache {
    /// Topic objects by TOPICSTR (SYSTEM.BASE.TOPIC for the root).
    pub(super) topics: AHashMap<String, ObjectDef>,
}

/// The durable subscriptions (`ObjectKind::Sub` objects), kept as they are defined and
/// deleted: a subscribe costs one insert, not a rebuild of them all.
#[derive(Debug, Default)]
pub(super) struct Durable {
    pub(super) subs: BTreeMap<String, Arc<Sub>>,
    /// The same subscriptions by topic pattern.
    pub(super) index: index::Index,
}

impl Engine {
    /// Called after the object `(kind, name)` is defined, replaced or deleted: keeps the
    /// durable subscriptions and the topic cache current.
    pub(crate) fn ps_object_changed(&mut self, kind: ObjectKind, name: &str) {
        match kind {
            ObjectKind::Topic => {
                self.pubsub.cache = None;
                self.pubsub.attrs.clear();
            }
            ObjectKind::Sub => {
                let Some(d) = self.pubsub.durable.as_mut() else {
                    return;
                };
                if let Some(old) = d.subs.remove(name) {
                    d.index.remove(&old.topic, name);
                }
                if let Some(o) = self.objects.get(&(ObjectKind::Sub, name.to_string())) {
                    let s = Arc::new(Sub::from_object(o));
                    d.index.insert(s.clone());
                    d.subs.insert(s.name.clone(), s);
                }
            }
            _ => {}
        }
    }

    /// Called after the objects are replaced wholesale (an image loaded, a full copy started).
    pub(crate) fn ps_objects_reset(&mut self) {
        self.pubsub.cache = None;
        self.pubsub.durable = None;
        self.pubsub.attrs.clear();
    }

    pub(super) fn ps_cache(&mut self) -> Arc<Cache> {
        if let Some(c) = self.pubsub.cache.as_ref() {
            return c.clone();
        }
        let mut c = Cache::default();
        for o in self.objects.values() {
            if o.kind == ObjectKind::Topic {
                let s = o.attrs.get("TOPICSTR").cloned().unwrap_or_default();
                // The root is SYSTEM.BASE.TOPIC's alone: SYSTEM.DEFAULT.TOPIC, also with an
                // empty TOPICSTR, is only what DEFINE TOPIC copies.
                if s.is_empty() && o.name != BASE_TOPIC {
                    continue;
                }
                c.topics.insert(s, o.clone());
            }
        }
        let c = Arc::new(c);
        self.pubsub.cache = Some(c.clone());
        c
    }

    /// The durable subscriptions, built from the objects at first use.
    pub(super) fn durable(&mut self) -> &Durable {
        if self.pubsub.durable.is_none() {
            let mut d = Durable::default();
            let from = (ObjectKind::Sub, String::new());
            for (_, o) in self.objects.range(from..) {
                if o.kind != ObjectKind::Sub {
                    break;
                }
                let s = Arc::new(Sub::from_object(o));
                d.index.insert(s.clone());
                d.subs.insert(s.name.clone(), s);
            }
            self.pubsub.durable = Some(d);
        }
        self.pubsub.durable.as_ref().expect("built above")
    }

    /// The attributes of the node `topic`, each from the closest topic object that does not
    /// say ASPARENT, up to SYSTEM.BASE.TOPIC, then MQ's defaults for the root. Kept until an
    /// object changes.
    pub fn topic_attrs(&mut self, topic: &str) -> Arc<TopicAttrs> {
        if let Some(a) = self.pubsub.attrs.get(topic) {
            return a.clone();
        }
        let a = Arc::new(self.resolve_topic_attrs(topic));
        let memo = &mut self.pubsub.attrs;
        if memo.len() >= TOPIC_ATTRS_CACHED_MAX {
            memo.clear();
        }
        memo.insert(topic.into(), a.clone());
        a
    }

    fn resolve_topic_attrs(&mut self, topic: &str) -> TopicAttrs {
        let cache = self.ps_cache();
        let nodes: Vec<&ObjectDef> = tree::ancestors(topic)
            .into_iter()
            .filter_map(|n| cache.topics.get(n))
            .collect();
        let get = |k: &str| -> Option<String> {
            nodes
                .iter()
                .find_map(|o| explicit(o.attrs.get(k)).map(str::to_string))
        };
        let yes = |k: &str, yes: &str, default: bool| get(k).map_or(default, |v| v == yes);
        TopicAttrs {
            object: nodes
                .first()
                .map_or(BASE_TOPIC.to_string(), |o| o.name.clone()),
            publish: yes("PUB", "ENABLED", true),
            subscribe: yes("SUB", "ENABLED", true),
            durable_subs: yes("DURSUB", "YES", true),
            def_persistent: yes("DEFPSIST", "YES", false),
            def_priority: get("DEFPRTY").and_then(|v| v.parse().ok()).unwrap_or(0),
            pmsgdlv: get("PMSGDLV")
                .and_then(|v| delivery(&v))
                .unwrap_or(Delivery::AllDur),
            npmsgdlv: get("NPMSGDLV")
                .and_then(|v| delivery(&v))
                .unwrap_or(Delivery::AllAvail),
            mdurmdl: get("MDURMDL").unwrap_or_else(|| DURABLE_MODEL.to_string()),
            mndurmdl: get("MNDURMDL").unwrap_or_else(|| NDURABLE_MODEL.to_string()),
            async_put_default: yes("DEFPRESP", "ASYNC", false),
        }
    }
}
