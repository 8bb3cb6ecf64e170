//! The DR lag bound. Every reply that reveals durable work waits on the queue manager's durable
//! watch (the durability gate); on a DR primary that watch is fed through [`Gate`], which
//! publishes a durable value only as far as it lies within `DR:MaxLagBytes` of what the recovery
//! site has acknowledged. So the acknowledged work a disaster can take is bounded, commits never
//! wait for the recovery site while it keeps up, and producers slow down when it does not.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use ferrymq_replication::ha::Committed;

/// How stream positions translate into bytes of log.
pub enum Meter {
    /// A standalone queue manager: positions and durable values are both log LSNs (bytes).
    Ring,
    /// An HA group: positions are Raft indexes, durable values are record numbers; the gate
    /// keeps, per committed batch it is told of ([`Gate::committed`]), its index, last record
    /// number and running bytes.
    Raft(Mutex<BatchLedger>),
}

impl Meter {
    /// The meter of an HA group, with an empty ledger.
    pub fn raft() -> Meter {
        Meter::Raft(Mutex::new(BatchLedger::default()))
    }

    /// The largest durable value a reply may be released at.
    fn allowed(&self, raw: u64, acked: u64, max: u64) -> u64 {
        match self {
            Meter::Ring => raw.min(acked.saturating_add(max)),
            Meter::Raft(l) => l.lock().allowed(raw, acked, max),
        }
    }

    /// The stream's durable end, and the bytes of log after the secondary's position `acked`.
    fn lag(&self, raw: u64, acked: u64) -> (u64, u64) {
        match self {
            Meter::Ring => (raw, raw.saturating_sub(acked)),
            Meter::Raft(l) => {
                let mut l = l.lock();
                (l.last_index().max(acked), l.lag_bytes(acked))
            }
        }
    }

    /// Bytes of log after the secondary's position `acked` up to the durable value `released`
    /// that replies have been let out at: the acknowledged work a disaster would take.
    fn released_bytes(&self, acked: u64, released: u64) -> u64 {
        match self {
            Meter::Ring => released.saturating_sub(acked),
            Meter::Raft(l) => l.lock().released_bytes(acked, released),
        }
    }
}

/// The DR lag as status shows it: the acknowledged work a disaster would take (bounded by the
/// lag bound while a secondary is connected or within the grace period), and the durable log
/// after it whose replies are still held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lag {
    /// The stream's durable end (POSITION).
    pub end: u64,
    /// Acknowledged and not yet acknowledged by the secondary (LAGBYTES).
    pub at_risk: u64,
    /// Durable, its replies held by the bound (HELDBYTES).
    pub held: u64,
}

impl Lag {
    /// Everything the secondary has not acknowledged.
    pub fn total(&self) -> u64 {
        self.at_risk + self.held
    }
}

/// Batches committed by an HA group, for [`Meter::Raft`]: Raft index, last record number (0 for
/// an entry applied from another instance), and the running bytes committed before and after
/// it.
#[derive(Default)]
pub struct BatchLedger {
    batches: VecDeque<Batch>,
    total: u64,
}

#[derive(Clone, Copy)]
struct Batch {
    index: u64,
    last_seq: u64,
    before: u64,
    after: u64,
}

/// Batches remembered at most (older ones are dropped; the lag then counts from the oldest).
const LEDGER_MAX: usize = 1 << 16;

impl BatchLedger {
    pub fn push(&mut self, index: u64, last_seq: u64, bytes: usize) {
        let before = self.total;
        self.total += bytes as u64;
        self.batches.push_back(Batch {
            index,
            last_seq,
            before,
            after: self.total,
        });
        if self.batches.len() > LEDGER_MAX {
            self.batches.pop_front();
        }
    }

    /// Running bytes the secondary holds at its acknowledged index: up to the last batch at or
    /// before it; when it is older than every batch remembered, none of them.
    fn acked_bytes(&mut self, acked: u64) -> u64 {
        // The last acknowledged batch stays as the anchor; older ones are of no further use.
        while self.batches.len() > 1 && self.batches[1].index <= acked {
            self.batches.pop_front();
        }
        match self.batches.front() {
            Some(b) if b.index <= acked => b.after,
            Some(b) => b.before,
            None => self.total,
        }
    }

    pub fn allowed(&mut self, raw: u64, acked: u64, max: u64) -> u64 {
        let base = self.acked_bytes(acked);
        let mut allowed = 0;
        for b in &self.batches {
            if b.last_seq > raw || b.after - base > max {
                break;
            }
            allowed = b.last_seq;
        }
        allowed
    }

    pub fn lag_bytes(&mut self, acked: u64) -> u64 {
        let base = self.acked_bytes(acked);
        self.total - base
    }

    /// Bytes of the batches after the secondary's index `acked` whose replies may have gone
    /// out: up to the last batch ending at or before record number `released` (batches an
    /// instance inherited count as released: their replies were another instance's to give).
    pub fn released_bytes(&mut self, acked: u64, released: u64) -> u64 {
        let base = self.acked_bytes(acked);
        let mut upto = base;
        for b in &self.batches {
            if b.last_seq > released {
                break;
            }
            upto = upto.max(b.after);
        }
        upto - base
    }

    /// The last committed batch's Raft index.
    pub fn last_index(&self) -> u64 {
        self.batches.back().map_or(0, |b| b.index)
    }
}

/// Publishes the durable value replies wait for, held within the lag bound while a secondary is
/// connected (`bounded`), passed straight through otherwise.
pub struct Gate {
    meter: Meter,
    max: u64,
    st: Mutex<GateState>,
    out: crate::lsn::LsnSender,
}

struct GateState {
    raw: u64,
    acked: u64,
    bounded: bool,
    /// A full copy sent and not yet acknowledged: the position it leaves the secondary at, and
    /// its bytes, all of them at risk until the secondary confirms it holds the copy durably.
    copy: Option<(u64, u64)>,
}

impl Gate {
    pub fn new(meter: Meter, max: u64, start: u64) -> Arc<Gate> {
        Arc::new(Gate {
            meter,
            max,
            st: Mutex::new(GateState {
                raw: start,
                acked: 0,
                bounded: false,
                copy: None,
            }),
            out: crate::lsn::channel(start).0,
        })
    }

    pub fn watch(&self) -> crate::lsn::LsnWatch {
        self.out.subscribe()
    }

    /// The stream's durable end and the bytes the secondary at `acked` lacks, split into the
    /// acknowledged work at risk and the held rest, for status. While a full copy is
    /// unconfirmed, its bytes count as at risk as well.
    pub fn lag(&self, acked: u64) -> Lag {
        // The gate's own acknowledged position (it may be a step ahead of the caller's) and
        // the value released from it, read together (both move under this lock).
        let (raw, copy, acked, released) = {
            let st = self.st.lock();
            (st.raw, st.copy, st.acked.max(acked), self.out.get())
        };
        let (from, copied) = match copy {
            Some((pos, bytes)) => (pos.max(acked), bytes),
            None => (acked, 0),
        };
        let (end, after) = self.meter.lag(raw, from);
        let out = self.meter.released_bytes(from, released).min(after);
        Lag {
            end,
            at_risk: copied + out,
            held: after - out,
        }
    }

    fn publish(&self, st: &GateState) {
        let allowed = match (st.bounded, st.copy) {
            (false, _) => st.raw,
            (true, None) => self.meter.allowed(st.raw, st.acked, self.max),
            // The copy's bytes use up the bound first: what is left of it may be acknowledged
            // after the copy's position, and nothing more once the copy alone exceeds it (the
            // released value never goes back, so a hold is simply no advance).
            (true, Some((pos, bytes))) => {
                if bytes >= self.max {
                    return;
                }
                self.meter.allowed(st.raw, pos, self.max - bytes)
            }
        };
        self.out.advance(allowed);
    }

    /// Batches an HA group committed (or, with no record number, that this instance applied
    /// from another): into the ledger, and the last record number becomes durable.
    pub fn committed(&self, batches: &[Committed]) {
        if let Meter::Raft(l) = &self.meter {
            let mut l = l.lock();
            for b in batches {
                l.push(b.index, b.last_seq, b.bytes as usize);
            }
        }
        if let Some(seq) = batches.iter().map(|b| b.last_seq).max().filter(|&s| s > 0) {
            self.durable(seq);
        }
    }

    /// The log became durable up to `raw`.
    pub fn durable(&self, raw: u64) {
        let mut st = self.st.lock();
        st.raw = st.raw.max(raw);
        self.publish(&st);
    }

    /// The secondary acknowledged `pos` (once it reaches a copy's position, the copy is held).
    pub fn acked(&self, pos: u64) {
        let mut st = self.st.lock();
        st.acked = st.acked.max(pos);
        if st.copy.is_some_and(|(at, _)| pos >= at) {
            st.copy = None;
        }
        self.publish(&st);
    }

    /// A secondary is connected from `pos` on (`Some`), or none is (`None`).
    pub fn bound(&self, from: Option<u64>) {
        let mut st = self.st.lock();
        st.copy = None;
        match from {
            Some(pos) => {
                st.bounded = true;
                st.acked = pos;
            }
            None => st.bounded = false,
        }
        self.publish(&st);
    }

    /// A full copy of `bytes` leaving the secondary at `pos` was sent: until the secondary
    /// acknowledges `pos`, the copy counts against the bound as unacknowledged work.
    pub fn bound_copy(&self, pos: u64, bytes: u64) {
        let mut st = self.st.lock();
        st.bounded = true;
        st.acked = pos;
        st.copy = Some((pos, bytes));
        self.publish(&st);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_gate_releases_only_within_the_bound_of_the_acknowledged_position() {
        let g = Gate::new(Meter::Ring, 1000, 0);
        let rx = g.watch();
        g.durable(5000);
        assert_eq!(rx.get(), 5000, "no secondary connected: not bounded");
        g.bound(Some(4500));
        g.durable(9000);
        assert_eq!(rx.get(), 5500);
        g.acked(8500);
        assert_eq!(rx.get(), 9000);
        g.durable(20_000);
        assert_eq!(rx.get(), 9500);
        // Status: the acknowledged work at risk stays within the bound; the rest is held.
        assert_eq!(
            g.lag(8500),
            Lag {
                end: 20_000,
                at_risk: 1000,
                held: 10_500
            }
        );
        g.bound(None);
        assert_eq!(rx.get(), 20_000);
        assert_eq!(
            g.lag(8500).at_risk,
            11_500,
            "unbounded: all of it is at risk"
        );
    }

    #[test]
    fn an_unconfirmed_full_copy_counts_against_the_bound_until_acknowledged() {
        let g = Gate::new(Meter::Ring, 1000, 0);
        let rx = g.watch();
        g.durable(5000);
        assert_eq!(rx.get(), 5000);
        // A copy larger than the bound: nothing more is released until it is confirmed.
        g.bound_copy(6000, 4000);
        g.durable(6500);
        assert_eq!(rx.get(), 5000, "held while the copy is unconfirmed");
        assert_eq!(
            g.lag(0).total(),
            4500,
            "the copy and the work after it are unacknowledged"
        );
        assert_eq!(g.lag(0).at_risk, 4000, "the work after the copy is held");
        g.acked(6000);
        assert_eq!(rx.get(), 6500);
        assert_eq!(g.lag(6000).total(), 500);
        // A small copy leaves the rest of the bound for work after it.
        g.bound_copy(7000, 300);
        g.durable(8000);
        assert_eq!(rx.get(), 7000 + 700);
        g.acked(7900);
        assert_eq!(rx.get(), 8000);
    }

    #[test]
    fn an_ha_gate_keeps_its_ledger_from_the_commit_events() {
        let ev = |index, last_seq, bytes| Committed {
            index,
            last_seq,
            bytes,
            latency: std::time::Duration::ZERO,
        };
        let g = Gate::new(Meter::raft(), 1000, 0);
        let rx = g.watch();
        // Entries inherited from another instance count as lag but release nothing here.
        g.committed(&[ev(10, 0, 600)]);
        assert_eq!(rx.get(), 0);
        g.bound(Some(9));
        g.committed(&[ev(11, 5, 300), ev(12, 9, 300)]);
        assert_eq!(rx.get(), 5, "the second batch would exceed the bound");
        assert_eq!(g.lag(9).end, 12);
        assert_eq!(g.lag(9).total(), 1200);
        g.acked(11);
        assert_eq!(rx.get(), 9);
        assert_eq!(g.lag(11).total(), 300);
    }

    #[test]
    fn a_batch_ledger_counts_bytes_between_the_acknowledged_index_and_the_end() {
        let mut l = BatchLedger::default();
        // index, last record number, bytes
        l.push(10, 5, 400);
        l.push(11, 9, 400);
        l.push(12, 12, 400);
        l.push(13, 20, 400);
        // Nothing acknowledged yet: all 1600 bytes are lag; with 1000 allowed, the first two
        // batches (800 bytes) may be released.
        assert_eq!(l.lag_bytes(3), 1600);
        assert_eq!(l.allowed(20, 3, 1000), 9);
        // Index 11 acknowledged: 800 bytes stand after it; everything fits.
        assert_eq!(l.lag_bytes(11), 800);
        assert_eq!(l.allowed(20, 11, 1000), 20);
        // Never beyond what is durable.
        assert_eq!(l.allowed(12, 11, 1000), 12);
        // Released up to record 12: the batch of index 12 is at risk, 13 is held.
        assert_eq!(l.released_bytes(11, 12), 400);
        assert_eq!(l.released_bytes(11, 20), 800);
        assert_eq!(l.lag_bytes(13), 0);
    }
}
