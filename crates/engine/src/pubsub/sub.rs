//! A subscription: what it matches (a topic string, perhaps with wildcards, and a selector),
//! where its publications go (a queue the queue manager manages, or one the subscriber names),
//! and, for a durable one, its form as an object (`ObjectKind::Sub`) in the DefineObject and
//! DeleteObject records and in checkpoints.

use std::collections::BTreeMap;

use ferrymq_types::{ObjectDef, ObjectKind, ObjectTimes, Properties};

use super::selector::Selector;
use super::tree;

/// One subscription.
#[derive(Debug, Clone)]
pub struct Sub {
    /// SUBNAME: the name of a durable subscription; a non-durable one's, or one made up.
    pub name: String,
    /// SUBID: 24 bytes unique to the subscription, shown in hex.
    pub id: [u8; 24],
    /// The full topic string, perhaps with wildcards.
    pub topic: String,
    /// TOPICOBJ as given (informational: the topic string is already full).
    pub topic_obj: String,
    /// DEST and DESTQMGR: the queue publications go to.
    pub dest: String,
    pub dest_qmgr: String,
    /// DESTCLAS(MANAGED): the queue manager made `dest` and removes it with the subscription.
    pub managed: bool,
    pub durable: bool,
    pub selector_text: String,
    pub selector: Option<Selector>,
    /// EXPIRY in tenths of a second from creation (-1: unlimited).
    pub expiry: i32,
    pub created_ms: u64,
    pub altered_ms: u64,
    /// SUBUSER: who made it.
    pub user: String,
    /// USERDATA.
    pub user_data: String,
    /// REQONLY: retained publications only when asked for (MQSUBRQ).
    pub on_request: bool,
    /// SUBTYPE: made by MQSUB (API) or by DEFINE SUB (ADMIN).
    pub admin: bool,
    /// WSCHEMA(CHAR): `topic` has character wildcards (MQSO_WILDCARD_CHAR), not level ones.
    pub char_wildcards: bool,
    /// SUBCORRELID given with MQSO_SET_CORREL_ID: every copy's CorrelId.
    pub correl_id: Option<[u8; 24]>,
}

/// DESTCORL as MQSC writes it (1 to 48 hex digits, padded on the right with zeros to 24
/// bytes); None when empty or not hex.
pub fn correl_id_from_hex(hex: &str) -> Option<[u8; 24]> {
    let hex = hex.trim();
    if hex.is_empty() || hex.len() > 48 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let padded = format!("{hex:0<48}");
    let mut id = [0u8; 24];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&padded[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(id)
}

/// A CorrelId in hex, as DISPLAY SUB shows DESTCORL.
pub fn correl_id_hex(id: &[u8; 24]) -> String {
    id.iter().map(|b| format!("{b:02X}")).collect()
}

impl Sub {
    pub fn expires_at_ms(&self) -> Option<u64> {
        (self.expiry > 0).then(|| self.created_ms + self.expiry as u64 * 100)
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms().is_some_and(|at| now_ms >= at)
    }

    /// Whether a publication on `topic` with `props` reaches this subscription.
    pub fn takes(&self, topic: &str, props: &Properties) -> bool {
        self.matches(topic) && self.selects(props)
    }

    /// Whether a publication on `topic` matches the subscription's topic string.
    pub fn matches(&self, topic: &str) -> bool {
        if self.char_wildcards {
            tree::char_matches(&self.topic, topic)
        } else {
            tree::matches(&self.topic, topic)
        }
    }

    /// Whether the selector, if any, takes a message with `props`.
    pub fn selects(&self, props: &Properties) -> bool {
        self.selector.as_ref().is_none_or(|s| s.matches(props))
    }

    pub fn id_hex(&self) -> String {
        self.id.iter().map(|b| format!("{b:02X}")).collect()
    }

    /// The durable subscription as an object.
    pub fn to_object(&self) -> ObjectDef {
        let mut a = BTreeMap::new();
        let mut set = |k: &str, v: String| {
            a.insert(k.to_string(), v);
        };
        set("TOPICSTR", self.topic.clone());
        set("TOPICOBJ", self.topic_obj.clone());
        set("DEST", self.dest.clone());
        set("DESTQMGR", self.dest_qmgr.clone());
        set(
            "DESTCLAS",
            if self.managed { "MANAGED" } else { "PROVIDED" }.into(),
        );
        set("SELECTOR", self.selector_text.clone());
        set("EXPIRY", self.expiry_text());
        set("SUBID", self.id_hex());
        set("SUBUSER", self.user.clone());
        set("USERDATA", self.user_data.clone());
        set("REQONLY", if self.on_request { "YES" } else { "NO" }.into());
        set("SUBTYPE", if self.admin { "ADMIN" } else { "API" }.into());
        if self.char_wildcards {
            // Absent (as in objects made before it) is WSCHEMA(TOPIC).
            set("WSCHEMA", "CHAR".into());
        }
        if let Some(c) = &self.correl_id {
            set("SUBCORRELID", correl_id_hex(c));
        }
        ObjectDef {
            kind: ObjectKind::Sub,
            name: self.name.clone(),
            attrs: a,
            times: ObjectTimes {
                created_ms: self.created_ms,
                altered_ms: self.altered_ms,
            },
        }
    }

    pub fn expiry_text(&self) -> String {
        if self.expiry > 0 {
            self.expiry.to_string()
        } else {
            "UNLIMITED".into()
        }
    }

    /// A durable subscription back from its object. A selector that no longer parses (it was
    /// checked when the subscription was made) selects nothing rather than everything.
    pub fn from_object(o: &ObjectDef) -> Sub {
        let get = |k: &str| o.attrs.get(k).cloned().unwrap_or_default();
        let selector_text = get("SELECTOR");
        let selector =
            if selector_text.is_empty() {
                None
            } else {
                Some(Selector::parse(&selector_text).unwrap_or_else(|_| {
                    Selector::parse("FALSE").expect("a constant selector parses")
                }))
            };
        let mut id = [0u8; 24];
        let hex = get("SUBID");
        for (i, b) in id.iter_mut().enumerate() {
            *b = hex
                .get(i * 2..i * 2 + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .unwrap_or(0);
        }
        Sub {
            name: o.name.clone(),
            id,
            topic: get("TOPICSTR"),
            topic_obj: get("TOPICOBJ"),
            dest: get("DEST"),
            dest_qmgr: get("DESTQMGR"),
            managed: get("DESTCLAS") == "MANAGED",
            durable: true,
            selector_text,
            selector,
            expiry: get("EXPIRY").parse().unwrap_or(-1),
            created_ms: o.times.created_ms,
            altered_ms: o.times.altered_ms,
            user: get("SUBUSER"),
            user_data: get("USERDATA"),
            on_request: get("REQONLY") == "YES",
            admin: get("SUBTYPE") == "ADMIN",
            char_wildcards: get("WSCHEMA") == "CHAR",
            correl_id: o.attrs.get("SUBCORRELID").and_then(|h| {
                let mut c = [0u8; 24];
                for (i, b) in c.iter_mut().enumerate() {
                    *b = u8::from_str_radix(h.get(i * 2..i * 2 + 2)?, 16).ok()?;
                }
                Some(c)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_subscription_round_trips_through_its_object() {
        let s = Sub {
            name: "S1".into(),
            id: [7; 24],
            topic: "a/+/c".into(),
            topic_obj: "T".into(),
            dest: "Q".into(),
            dest_qmgr: "QM".into(),
            managed: true,
            durable: true,
            selector_text: "x = 1".into(),
            selector: Some(Selector::parse("x = 1").unwrap()),
            expiry: 600,
            created_ms: 5,
            altered_ms: 6,
            user: "app".into(),
            user_data: "ud".into(),
            on_request: true,
            admin: false,
            char_wildcards: false,
            correl_id: None,
        };
        let back = Sub::from_object(&s.to_object());
        assert_eq!(back.to_object(), s.to_object());
        assert_eq!(back.selector, s.selector);
        assert_eq!(back.expires_at_ms(), Some(60_005));
    }
}
