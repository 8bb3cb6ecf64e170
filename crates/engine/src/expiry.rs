//! The expiry scan: expired messages leave their queues even when no get or browse meets them,
//! so that CURDEPTH, MAXDEPTH and the disk stop counting messages nobody can receive, and their
//! expiration reports are sent when they expire rather than when someone looks. The scan walks the
//! queues in name order and each queue in delivery order, a bounded number of messages per call,
//! resuming where the caller's cursor says the previous call stopped, so the core lock is never
//! held for a whole deep queue, and two scans (the periodic one, an administrator's REFRESH QMGR)
//! never disturb each other. A discarded message is treated exactly as a get that met it would treat it
//! ([`Engine::discard_expired`]): removal unlogged unless a report is made.

use crate::queue::Key;
use crate::Engine;

/// Where a scan stopped: the queue and the last message examined on it. `Default` starts a pass
/// from the first queue.
#[derive(Clone, Debug, Default)]
pub struct ExpiryCursor {
    queue: Option<String>,
    after: Option<Key>,
}

/// What one call of [`Engine::scan_expired`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpiryPass {
    /// Queued messages looked at.
    pub examined: usize,
    /// Expired messages discarded.
    pub discarded: usize,
    /// The scan reached the end of the last queue (the next call starts again from the first).
    pub wrapped: bool,
}

impl Engine {
    /// Examines up to `budget` queued messages of the queues `select` accepts, from `cursor`
    /// (where the previous call of this scan stopped), and discards the expired ones. Once a
    /// call reports `wrapped`, the cursor starts the next pass from the first queue.
    pub fn scan_expired(
        &mut self,
        cursor: &mut ExpiryCursor,
        now_ms: u64,
        budget: usize,
        select: &dyn Fn(&str) -> bool,
    ) -> ExpiryPass {
        let mut pass = ExpiryPass::default();
        let mut names: Vec<String> = self.queues.keys().filter(|n| select(n)).cloned().collect();
        names.sort_unstable();
        let from = std::mem::take(cursor);
        let start = match &from.queue {
            Some(q) => names.partition_point(|n| n < q),
            None => 0,
        };
        for (i, name) in names.iter().enumerate().skip(start) {
            // The cursor's key belongs to the cursor's queue only.
            let after = from
                .after
                .filter(|_| from.queue.as_deref() == Some(name.as_str()));
            let Some(q) = self.queues.get(name) else {
                continue;
            };
            let remaining = budget.saturating_sub(pass.examined);
            let (mut expired, mut last, mut more) = (Vec::new(), None, false);
            for (n, (k, e)) in q.entries_after(after).enumerate() {
                if n == remaining {
                    more = true;
                    break;
                }
                pass.examined += 1;
                if e.msg.is_expired(now_ms) {
                    expired.push(*k);
                }
                last = Some(*k);
            }
            pass.discarded += expired.len();
            self.discard_expired(name, expired, now_ms);
            if more {
                *cursor = ExpiryCursor {
                    queue: Some(name.clone()),
                    after: last,
                };
                return pass;
            }
            if pass.examined >= budget {
                if let Some(next) = names.get(i + 1) {
                    *cursor = ExpiryCursor {
                        queue: Some(next.clone()),
                        after: None,
                    };
                    return pass;
                }
            }
        }
        pass.wrapped = true;
        pass
    }
}
