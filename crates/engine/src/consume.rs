//! Asynchronous consume (MQ's MQCB): a consumer registered on an input handle receives messages
//! pushed by the queue manager, one per credit the application has granted, so a slow consumer is
//! never flooded. While nothing matches, a waiter stands in for the consumer; each delivery spends
//! a credit and re-arms the waiter while credit remains. A pushed message is removed when it is
//! sent: outside syncpoint it is then gone (and, if persistent, its removal logged); under
//! syncpoint it joins the connection's unit of work like a get's.

use ferrymq_types::options::{open, Browse, GetOptions, Syncpoint};
use ferrymq_types::{mqerr, MqError};

use crate::conn::{ConnId, Consumer};
use crate::queue::Selector;
use crate::waiters::Waiter;
use crate::{Delivery, Engine};

impl Engine {
    /// Registers (or replaces) the consumer of `hobj`; deliveries carry `token`. It starts with no
    /// credit: nothing is pushed until [`Engine::add_credit`].
    pub fn register_consumer(
        &mut self,
        conn: ConnId,
        hobj: u32,
        opts: &GetOptions,
        token: u64,
    ) -> Result<(), MqError> {
        let h = self.handle(conn, hobj)?;
        if h.options & open::ANY_INPUT == 0 {
            return Err(mqerr!(
                NOT_OPEN_FOR_INPUT,
                "'{}' was not opened for input (MQOO_INPUT_*); a consumer needs it",
                h.opened_name
            ));
        }
        if opts.browse != Browse::No {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "browsing consumers are not supported; consume destructively or browse with get"
            ));
        }
        // Under syncpoint a delivery joins the connection's unit of work when it is pushed, so a
        // message pushed ahead of the application would be committed by a commit it made without
        // having seen it. A syncpoint consumer is therefore never ahead: its credit is at most
        // one, and the client grants it as the application asks for each message (as MQ, which
        // reads ahead only outside syncpoint).
        self.cancel_consumer(conn, hobj);
        let c = self.conns.get_mut(&conn).expect("checked");
        c.consumers.insert(
            hobj,
            Consumer {
                token,
                opts: opts.clone(),
                credit: 0,
                waiter: None,
            },
        );
        Ok(())
    }

    /// Ends the consumer of `hobj` (no-op if there is none).
    pub fn cancel_consumer(&mut self, conn: ConnId, hobj: u32) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(old) = c.consumers.remove(&hobj) {
            if let Some(w) = old.waiter {
                self.waiters.remove(w);
            }
        }
    }

    /// Grants `n` more pushes to the consumer of `hobj` and delivers what is already waiting.
    pub fn add_credit(&mut self, conn: ConnId, hobj: u32, n: u32, now_ms: u64) {
        let Some(cons) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.consumers.get_mut(&hobj))
        else {
            return;
        };
        cons.credit = cons.credit.saturating_add(n);
        if cons.opts.syncpoint != Syncpoint::No {
            cons.credit = cons.credit.min(1);
        }
        if cons.waiter.is_none() {
            self.pump_consumer(conn, hobj, now_ms);
        }
    }

    /// Delivers available messages while credit lasts, then leaves a waiter for the next one.
    fn pump_consumer(&mut self, conn: ConnId, hobj: u32, now_ms: u64) {
        loop {
            let Some(c) = self.conns.get(&conn) else {
                return;
            };
            let Some(cons) = c.consumers.get(&hobj).cloned() else {
                return;
            };
            if cons.credit == 0 || cons.waiter.is_some() {
                return;
            }
            let Some(h) = c.handles.get(&hobj) else {
                return;
            };
            let queue = h.queue.clone();
            let sel = Selector::for_get(&cons.opts);
            let inhibited = self.queues.get(&queue).is_none_or(|q| q.def.get_inhibited);
            if !inhibited {
                let found = if sel.searches_groups {
                    self.find_grouped(conn, hobj, &queue, &cons.opts, None, now_ms)
                } else {
                    self.find(&queue, &sel, None, now_ms)
                };
                if let Some(key) = found {
                    let result = if sel.searches_groups {
                        self.take_grouped(conn, hobj, &queue, key, &cons.opts, now_ms)
                    } else {
                        self.take(conn, hobj, &queue, key, &cons.opts, now_ms)
                    };
                    let ok = result.is_ok();
                    let (result, wait_lsn) = match result {
                        Ok((got, lsn)) => (Ok(got), lsn),
                        Err(e) => (Err(e), 0),
                    };
                    self.deliveries.push(Delivery {
                        conn,
                        token: cons.token,
                        result,
                        wait_lsn,
                    });
                    if !ok {
                        self.cancel_consumer(conn, hobj);
                        return;
                    }
                    if let Some(cs) = self
                        .conns
                        .get_mut(&conn)
                        .and_then(|c| c.consumers.get_mut(&hobj))
                    {
                        cs.credit -= 1;
                    }
                    continue;
                }
            }
            let w = Waiter {
                id: 0,
                conn,
                hobj,
                token: cons.token,
                queue,
                opts: cons.opts.clone(),
                sel,
                consumer: true,
                deadline_ms: None,
            };
            let id = self.waiters.add(w);
            if let Some(cs) = self
                .conns
                .get_mut(&conn)
                .and_then(|c| c.consumers.get_mut(&hobj))
            {
                cs.waiter = Some(id);
            }
            return;
        }
    }

    /// Called after a consumer's waiter took (or failed to take) an arriving message.
    pub(crate) fn consumer_delivered(&mut self, conn: ConnId, hobj: u32, ok: bool, now_ms: u64) {
        if !ok {
            // A failed delivery (a message too long for the consumer) ends the consumer, as the
            // application must decide what to do with that message.
            self.cancel_consumer(conn, hobj);
            return;
        }
        if let Some(cs) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.consumers.get_mut(&hobj))
        {
            cs.waiter = None;
            cs.credit = cs.credit.saturating_sub(1);
        }
        self.pump_consumer(conn, hobj, now_ms);
    }
}
