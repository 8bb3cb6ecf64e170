//! The shadow model: what the clients were told, and the checks against what the group holds
//! at the end.

use std::collections::{BTreeMap, BTreeSet};

use ferrymq_replication::NodeId;

/// What a client knows of one put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutFate {
    /// Acknowledged: must be delivered exactly once.
    Acked,
    /// No reply (the instance went away, or the wait timed out): at most once.
    Unknown,
    /// Refused, or its unit of work was never committed: never delivered.
    NotDone,
}

/// Counters for the report.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub puts_acked: u64,
    pub puts_unknown: u64,
    pub puts_not_done: u64,
    pub gets_acked: u64,
    pub gets_unknown: u64,
    pub gets_backed_out: u64,
    pub drained: u64,
    pub activations: u64,
}

#[derive(Default)]
pub struct Ledger {
    pub puts: BTreeMap<u64, PutFate>,
    /// Messages a get's reply revealed (released after its log position was durable): their put
    /// was committed, whatever its client was told.
    pub seen: BTreeSet<u64>,
    pub acked_gets: BTreeMap<u64, u32>,
    /// Messages taken by a get whose commit got no reply.
    pub unknown_gets: BTreeSet<u64>,
    /// Which node acknowledged in which term.
    pub ack_terms: BTreeMap<u64, NodeId>,
    pub stats: Stats,
}

impl Ledger {
    pub fn put(&mut self, id: u64, fate: PutFate) {
        match fate {
            PutFate::Acked => self.stats.puts_acked += 1,
            PutFate::Unknown => self.stats.puts_unknown += 1,
            PutFate::NotDone => self.stats.puts_not_done += 1,
        }
        self.puts.insert(id, fate);
    }

    /// A reply went out from `node` in `term`; another node replying in the same term would
    /// mean two active instances at once. Returns the violation, if any.
    pub fn acked_in(&mut self, term: u64, node: NodeId) -> Option<String> {
        match self.ack_terms.insert(term, node) {
            Some(other) if other != node => Some(format!(
                "nodes {other} and {node} both acknowledged in term {term}"
            )),
            _ => None,
        }
    }

    /// The end-of-run checks, given the messages drained from the healed group's queue (their
    /// ids; `None` for a body that is no put's).
    pub fn check(&self, drained: &[Option<u64>]) -> Vec<String> {
        let mut bad = Vec::new();
        let mut delivered: BTreeMap<u64, u32> = self.acked_gets.clone();
        let mut in_queue: BTreeSet<u64> = BTreeSet::new();
        for d in drained {
            match d {
                None => bad.push("a message nobody put was delivered".to_string()),
                Some(id) => {
                    *delivered.entry(*id).or_default() += 1;
                    in_queue.insert(*id);
                }
            }
        }
        for (&id, &n) in &delivered {
            let Some(&fate) = self.puts.get(&id) else {
                bad.push(format!("message {id} was delivered but never put"));
                continue;
            };
            if n > 1 {
                let got = self.acked_gets.get(&id).copied().unwrap_or(0);
                bad.push(format!(
                    "message {id} ({fate:?}) delivered {n} times ({got} acknowledged gets{})",
                    if in_queue.contains(&id) {
                        ", and still queued"
                    } else {
                        ""
                    }
                ));
            }
            if fate == PutFate::NotDone {
                bad.push(format!(
                    "message {id} was delivered, but its put was refused or never committed"
                ));
            }
        }
        for &id in self.seen.iter() {
            if self.puts.get(&id) == Some(&PutFate::NotDone) {
                bad.push(format!(
                    "message {id} was seen by a get, but its put was refused or never committed"
                ));
            }
        }
        for (&id, &fate) in &self.puts {
            let known = fate == PutFate::Acked || self.seen.contains(&id);
            if known && !delivered.contains_key(&id) && !self.unknown_gets.contains(&id) {
                bad.push(format!(
                    "message {id} ({}) was lost: neither got nor queued",
                    if fate == PutFate::Acked {
                        "put acknowledged"
                    } else {
                        "seen by a backed-out or unacknowledged get"
                    }
                ));
            }
        }
        bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_catch_loss_duplicates_and_ghosts() {
        let mut l = Ledger::default();
        l.put(1, PutFate::Acked);
        l.put(2, PutFate::Unknown);
        l.put(3, PutFate::NotDone);
        l.put(4, PutFate::Acked);
        l.acked_gets.insert(4, 1);
        assert!(l.check(&[Some(1)]).is_empty());
        assert!(l.check(&[Some(1), Some(2)]).is_empty());
        assert_eq!(l.check(&[]).len(), 1, "acknowledged put lost");
        assert_eq!(l.check(&[Some(1), Some(1)]).len(), 1, "twice");
        assert_eq!(l.check(&[Some(1), Some(4)]).len(), 1, "got and queued");
        assert_eq!(l.check(&[Some(1), Some(3)]).len(), 1, "never committed");
        assert_eq!(l.check(&[Some(1), None]).len(), 1, "never put");
        l.seen.insert(2);
        assert_eq!(l.check(&[Some(1)]).len(), 1, "seen, then lost");
        l.unknown_gets.insert(2);
        assert!(
            l.check(&[Some(1)]).is_empty(),
            "maybe taken by an unknown get"
        );
        assert_eq!(l.acked_in(5, 1), None);
        assert_eq!(l.acked_in(5, 1), None);
        assert!(l.acked_in(5, 2).is_some());
    }
}
