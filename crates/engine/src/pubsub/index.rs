//! The subscription index: a trie of topic levels, so that a publication visits only the
//! branches its topic string can match (its own levels, the `+` children and the `#` children)
//! instead of every subscription. A subscription sits on the node where its pattern ends.
//!
//! The result is the same set as testing `tree::matches` on every subscription (the property
//! tests below check it on random patterns and topics), returned in name order so that
//! delivery order does not depend on the trie's shape.

use std::collections::BTreeMap;
use std::sync::Arc;

use ahash::{AHashMap, AHashSet};

use ferrymq_types::limits::TOPIC_LEVELS_MAX;

use super::sub::Sub;
use super::tree;

/// One topic level of the trie.
#[derive(Debug, Default)]
struct Node {
    /// Children by literal level (an empty level is a level too).
    children: AHashMap<Box<str>, Node>,
    /// The `+` child: any one level.
    plus: Option<Box<Node>>,
    /// The `#` child: any number of levels, none included.
    hash: Option<Box<Node>>,
    /// The subscriptions whose pattern ends here, by name.
    subs: BTreeMap<String, Arc<Sub>>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.subs.is_empty()
            && self.children.is_empty()
            && self.plus.is_none()
            && self.hash.is_none()
    }
}

/// Subscriptions indexed by their topic pattern.
#[derive(Debug, Default)]
pub struct Index {
    root: Node,
    /// Patterns deeper than TOPIC_LEVELS_MAX (possible only for a durable subscription made
    /// before that limit existed): matched by the plain matcher, so the trie walk's recursion
    /// stays bounded.
    deep: BTreeMap<String, Arc<Sub>>,
    /// Patterns with character wildcards (MQSO_WILDCARD_CHAR): not levels, so not in the trie;
    /// each matched by the character matcher.
    chars: BTreeMap<String, Arc<Sub>>,
    len: usize,
}

impl Index {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `s` under its topic pattern (replacing a subscription of the same name there).
    pub fn insert(&mut self, s: Arc<Sub>) {
        if s.char_wildcards {
            if self.chars.insert(s.name.clone(), s).is_none() {
                self.len += 1;
            }
            return;
        }
        if tree::levels(&s.topic) > TOPIC_LEVELS_MAX {
            if self.deep.insert(s.name.clone(), s).is_none() {
                self.len += 1;
            }
            return;
        }
        let mut node = &mut self.root;
        for level in s.topic.split('/') {
            node = match level {
                "+" => node.plus.get_or_insert_with(Box::default),
                "#" => node.hash.get_or_insert_with(Box::default),
                l => node.children.entry(l.into()).or_default(),
            };
        }
        if node.subs.insert(s.name.clone(), s).is_none() {
            self.len += 1;
        }
    }

    /// Removes subscription `name` indexed under `pattern`, and the nodes left empty.
    pub fn remove(&mut self, pattern: &str, name: &str) -> Option<Arc<Sub>> {
        let found = if let Some(s) = self.chars.remove(name) {
            Some(s)
        } else if tree::levels(pattern) > TOPIC_LEVELS_MAX {
            self.deep.remove(name)
        } else {
            let levels: Vec<&str> = pattern.split('/').collect();
            remove_at(&mut self.root, &levels, name)
        };
        if found.is_some() {
            self.len -= 1;
        }
        found
    }

    /// Every subscription whose pattern matches `topic` (a topic string without wildcards), in
    /// name order.
    pub fn matching(&self, topic: &str) -> Vec<Arc<Sub>> {
        let levels: Vec<&str> = topic.split('/').collect();
        let mut out: Vec<&Arc<Sub>> = Vec::new();
        // States reached after a `#` may be reached again through another split of the levels
        // among several `#`: each (node, level) is visited once, which bounds the walk by
        // nodes × levels whatever the patterns.
        let mut seen: AHashSet<(*const Node, usize)> = AHashSet::new();
        // Each recursion goes one trie node deeper: at most TOPIC_LEVELS_MAX + 1.
        walk(&self.root, &levels, 0, &mut out, &mut seen);
        out.extend(
            self.deep
                .values()
                .filter(|s| tree::matches(&s.topic, topic)),
        );
        out.extend(
            self.chars
                .values()
                .filter(|s| tree::char_matches(&s.topic, topic)),
        );
        out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| Arc::ptr_eq(a, b));
        out.into_iter().cloned().collect()
    }
}

fn walk<'a>(
    node: &'a Node,
    levels: &[&str],
    at: usize,
    out: &mut Vec<&'a Arc<Sub>>,
    seen: &mut AHashSet<(*const Node, usize)>,
) {
    if at == levels.len() {
        out.extend(node.subs.values());
    }
    if let Some(h) = &node.hash {
        // `#` takes levels at.. up to all of them, then the rest of the pattern goes on.
        for j in at..=levels.len() {
            if seen.insert((&**h as *const Node, j)) {
                walk(h, levels, j, out, seen);
            }
        }
    }
    if at < levels.len() {
        if let Some(p) = &node.plus {
            walk(p, levels, at + 1, out, seen);
        }
        if let Some(c) = node.children.get(levels[at]) {
            walk(c, levels, at + 1, out, seen);
        }
    }
}

fn remove_at(node: &mut Node, levels: &[&str], name: &str) -> Option<Arc<Sub>> {
    let Some((first, rest)) = levels.split_first() else {
        return node.subs.remove(name);
    };
    match *first {
        "+" | "#" => {
            let slot = if *first == "+" {
                &mut node.plus
            } else {
                &mut node.hash
            };
            let child = slot.as_deref_mut()?;
            let found = remove_at(child, rest, name);
            if child.is_empty() {
                *slot = None;
            }
            found
        }
        l => {
            let child = node.children.get_mut(l)?;
            let found = remove_at(child, rest, name);
            if child.is_empty() {
                node.children.remove(l);
            }
            found
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sub(name: &str, topic: &str) -> Arc<Sub> {
        Arc::new(Sub {
            name: name.into(),
            id: [0; 24],
            topic: topic.into(),
            topic_obj: String::new(),
            dest: "Q".into(),
            dest_qmgr: String::new(),
            managed: false,
            durable: false,
            selector_text: String::new(),
            selector: None,
            expiry: -1,
            created_ms: 0,
            altered_ms: 0,
            user: String::new(),
            user_data: String::new(),
            on_request: false,
            admin: false,
            char_wildcards: false,
            correl_id: None,
        })
    }

    fn names(v: &[Arc<Sub>]) -> Vec<&str> {
        v.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn a_publication_finds_exact_plus_and_hash_subscriptions_in_name_order() {
        let mut ix = Index::default();
        for (n, t) in [
            ("z", "a/b"),
            ("y", "a/+"),
            ("x", "#"),
            ("w", "a/#"),
            ("v", "a/#/b"),
            ("u", "b/#"),
            ("t", "a/b/c"),
            ("s", "#/#"),
        ] {
            ix.insert(sub(n, t));
        }
        assert_eq!(names(&ix.matching("a/b")), ["s", "v", "w", "x", "y", "z"]);
        assert_eq!(names(&ix.matching("a")), ["s", "w", "x"]);
        assert_eq!(names(&ix.matching("")), ["s", "x"]);
        assert_eq!(ix.len(), 8);
        assert!(ix.remove("a/+", "y").is_some());
        assert!(ix.remove("a/+", "y").is_none());
        assert!(ix.remove("a/b", "nobody").is_none());
        assert_eq!(names(&ix.matching("a/b")), ["s", "v", "w", "x", "z"]);
        for (n, t) in [
            ("z", "a/b"),
            ("x", "#"),
            ("w", "a/#"),
            ("v", "a/#/b"),
            ("u", "b/#"),
            ("t", "a/b/c"),
            ("s", "#/#"),
        ] {
            assert!(ix.remove(t, n).is_some(), "{n} {t}");
        }
        assert!(ix.is_empty());
        assert!(ix.root.is_empty(), "emptied nodes are pruned");
    }

    #[test]
    fn patterns_deeper_than_the_level_limit_are_still_found() {
        let mut ix = Index::default();
        let deep = vec!["a"; TOPIC_LEVELS_MAX + 1].join("/");
        ix.insert(sub("deep", &format!("{deep}/#")));
        ix.insert(sub("all", "#"));
        assert_eq!(names(&ix.matching(&format!("{deep}/b"))), ["all", "deep"]);
        assert_eq!(names(&ix.matching("a")), ["all"]);
        assert!(ix.remove(&format!("{deep}/#"), "deep").is_some());
        assert_eq!(ix.len(), 1);
    }

    /// Patterns and topics over a small alphabet, so that they often match.
    fn level() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("a".to_string()),
            Just("b".to_string()),
            Just("ab".to_string()),
        ]
    }

    fn pattern_level() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => level(),
            1 => Just("+".to_string()),
            1 => Just("#".to_string()),
        ]
    }

    fn join(v: Vec<String>) -> String {
        v.join("/")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The index finds exactly the subscriptions the plain matcher accepts.
        #[test]
        fn the_index_agrees_with_the_plain_matcher(
            patterns in prop::collection::vec(prop::collection::vec(pattern_level(), 1..6).prop_map(join), 1..24),
            topics in prop::collection::vec(prop::collection::vec(level(), 1..7).prop_map(join), 1..16),
            removed in prop::collection::vec(any::<bool>(), 24),
        ) {
            let mut ix = Index::default();
            let subs: Vec<Arc<Sub>> = patterns
                .iter()
                .enumerate()
                .map(|(i, p)| sub(&format!("S{i:02}"), p))
                .collect();
            for s in &subs {
                ix.insert(s.clone());
            }
            let mut kept = Vec::new();
            for (i, s) in subs.iter().enumerate() {
                if removed[i] {
                    prop_assert!(ix.remove(&s.topic, &s.name).is_some());
                } else {
                    kept.push(s.clone());
                }
            }
            prop_assert_eq!(ix.len(), kept.len());
            for t in &topics {
                let want: Vec<&str> = kept
                    .iter()
                    .filter(|s| tree::matches(&s.topic, t))
                    .map(|s| s.name.as_str())
                    .collect();
                let got = ix.matching(t);
                prop_assert_eq!(names(&got), want, "topic '{}'", t);
            }
        }
    }
}
