//! The state shared by every connection task: the engine and the routes that carry replies for
//! waiting gets back to the socket of the connection that asked. Both sit under one mutex, taken
//! once per batch of frames read from a socket.

use ahash::AHashMap;
use bytes::{Bytes, BytesMut};
use ferrymq_engine::{ConnId, Engine, Got, Lsn};
use ferrymq_proto::{encode_response, encode_response_split, Response};
use ferrymq_types::{MqError, Reason};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc::error::SendError;
use tokio::sync::Notify;

/// Bytes for one socket, sent once the log is durable up to `wait_lsn`.
#[derive(Debug)]
pub struct Out {
    pub frame: Bytes,
    /// Written right after `frame`, whose length counts it: a large message body, written from
    /// its own buffer rather than copied into the frame's (empty for most frames).
    pub tail: Bytes,
    pub wait_lsn: Lsn,
    /// Close the socket after writing this.
    pub close: bool,
    /// The answer to a request sent with `FLAG_LATER`: it may wait in the queue until a frame
    /// that is not `later` is queued behind it, and leave in the same write.
    pub later: bool,
}

/// The sending side of one socket's outbound queue. Anything may send to it without blocking —
/// the socket's own task, and other sockets' tasks pushing deliveries under the core lock — and
/// every sender counts the bytes it queues, so the socket's task can stop reading requests while
/// its replies are not being taken (back pressure), and a socket whose queue passes its hard cap
/// is marked to be closed instead of growing without bound.
#[derive(Debug)]
pub struct Outbox {
    tx: Arc<OutChan>,
    pub q: Arc<OutQueue>,
}

/// A socket's frames on their way to its writer: sent by every [`Outbox`] clone, taken by the
/// writer alone. A plain queue under a lock rather than a channel, because a channel allocates
/// a block of slots per socket up front, and tens of thousands of idle sockets each paid for it.
#[derive(Debug, Default)]
pub struct OutChan {
    state: parking_lot::Mutex<OutState>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct OutState {
    frames: std::collections::VecDeque<Out>,
    /// Queued frames that are not `later`: while there are none, queued frames wait.
    due: usize,
    senders: usize,
    writer_gone: bool,
    /// The socket's reader is running a batch of frames and writes what they produced itself
    /// at the end ([`Outbox::take_ready`]): until then a send does not wake the writer task.
    held: bool,
}

/// The writer's end of an [`OutChan`].
#[derive(Debug)]
pub struct OutRx(Arc<OutChan>);

/// A socket's outbound queue: its first sender and its writer's end.
pub fn out_channel(q: Arc<OutQueue>) -> (Outbox, OutRx) {
    let chan = Arc::new(OutChan::default());
    chan.state.lock().senders = 1;
    (
        Outbox {
            tx: chan.clone(),
            q,
        },
        OutRx(chan),
    )
}

impl OutRx {
    /// Waits until a frame is queued (true), or every sender is gone and the queue is empty
    /// (false). The frame is taken with [`OutRx::try_recv`] under the socket's write lock, as
    /// the reader takes frames it writes itself: whoever writes, frames leave in queue order.
    pub async fn ready(&mut self) -> bool {
        loop {
            // Registered before looking, so a send in between is not missed.
            let ready = self.0.ready.notified();
            {
                let mut st = self.0.state.lock();
                // Answers that may wait do, until one that may not is queued behind them (or
                // nobody can queue one any more).
                if st.due > 0 || (st.senders == 0 && !st.frames.is_empty()) {
                    return true;
                }
                if st.senders == 0 {
                    return false;
                }
                // An idle socket keeps no queue storage from a burst.
                if st.frames.is_empty() && st.frames.capacity() > OUT_IDLE_SLOTS {
                    st.frames = Default::default();
                }
            }
            ready.await;
        }
    }

    /// The next frame if one is queued.
    pub fn try_recv(&mut self) -> Option<Out> {
        let mut st = self.0.state.lock();
        let o = st.frames.pop_front()?;
        if !o.later {
            st.due -= 1;
        }
        Some(o)
    }
}

impl Drop for OutRx {
    fn drop(&mut self) {
        let mut st = self.0.state.lock();
        st.writer_gone = true;
        st.frames.clear();
        st.due = 0;
    }
}

/// A message body at least this large leaves a reply as a buffer of its own (see [`Out::tail`]):
/// a smaller one is cheaper to copy than to write apart.
const REPLY_TAIL_MIN_BYTES: usize = 16 * 1024;

/// Queue slots an idle socket may keep.
const OUT_IDLE_SLOTS: usize = 8;

impl Clone for Outbox {
    fn clone(&self) -> Outbox {
        self.tx.state.lock().senders += 1;
        Outbox {
            tx: self.tx.clone(),
            q: self.q.clone(),
        }
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        let last = {
            let mut st = self.tx.state.lock();
            st.senders -= 1;
            st.senders == 0
        };
        if last {
            self.tx.ready.notify_one();
        }
    }
}

/// One socket's outbound accounting, shared by its senders, its reader and its writer.
#[derive(Debug)]
pub struct OutQueue {
    /// Queued frames in the top 24 bits, their bytes in the low 40.
    queued: AtomicU64,
    /// Above this many queued bytes the socket's task reads no more requests.
    pub soft_bytes: u64,
    /// Above this many queued bytes (in more than one frame) the socket is closed.
    pub hard_bytes: u64,
    /// Set by the reader while it waits for the queue to drain; the writer then wakes it.
    paused: AtomicBool,
    pub drained: Notify,
    killed: AtomicBool,
    pub kill: Notify,
}

const FRAME_UNIT: u64 = 1 << 40;
const BYTES_MASK: u64 = FRAME_UNIT - 1;

impl OutQueue {
    pub fn new(soft_bytes: u64, hard_bytes: u64) -> OutQueue {
        OutQueue {
            queued: AtomicU64::new(0),
            soft_bytes,
            hard_bytes,
            paused: AtomicBool::new(false),
            drained: Notify::new(),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
        }
    }

    /// Bytes queued and not yet written to the socket.
    pub fn bytes(&self) -> u64 {
        self.queued.load(Ordering::SeqCst) & BYTES_MASK
    }

    pub fn over_soft(&self) -> bool {
        self.bytes() > self.soft_bytes
    }

    /// Called by the writer once `frames` frames of `bytes` bytes have left (or been dropped).
    pub fn written(&self, frames: u64, bytes: u64) {
        self.queued
            .fetch_sub(frames * FRAME_UNIT + bytes, Ordering::SeqCst);
        if self.paused.load(Ordering::SeqCst) {
            self.drained.notify_one();
        }
    }

    /// The reader is about to wait for the queue to drain under the soft bound. Returns false if
    /// it already has (so the reader must not wait).
    pub fn pause(&self) -> bool {
        self.paused.store(true, Ordering::SeqCst);
        if self.over_soft() {
            true
        } else {
            self.paused.store(false, Ordering::SeqCst);
            false
        }
    }

    pub fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Marks the socket to be closed (its units of work are backed out by its task).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }
}

impl Out {
    /// A frame with nothing after it.
    pub fn frame(frame: Bytes, wait_lsn: Lsn, close: bool) -> Out {
        Out {
            frame,
            tail: Bytes::new(),
            wait_lsn,
            close,
            later: false,
        }
    }

    /// Its bytes on the wire.
    pub fn len(&self) -> usize {
        self.frame.len() + self.tail.len()
    }

    /// Moves its buffers, in the order they are written, to `out`.
    pub fn push_to(self, out: &mut Vec<Bytes>) {
        out.push(self.frame);
        if !self.tail.is_empty() {
            out.push(self.tail);
        }
    }
}

impl Outbox {
    /// Queues a frame; never blocks. A frame that takes a queue already holding other frames
    /// past the hard cap marks the socket to be closed (one frame alone may exceed it: a single
    /// reply carrying a message larger than the cap must still be sendable).
    /// Gives back the queue's room when nothing waits in it: an idle socket keeps none.
    pub fn shrink_idle(&self) {
        let mut st = self.tx.state.lock();
        if st.frames.is_empty() && st.frames.capacity() > 0 {
            st.frames = std::collections::VecDeque::new();
        }
    }

    pub fn send(&self, o: Out) -> Result<(), SendError<Out>> {
        let n = o.len() as u64;
        let before = self.q.queued.fetch_add(FRAME_UNIT + n, Ordering::SeqCst);
        if before >> 40 > 0 && (before & BYTES_MASK) + n > self.q.hard_bytes {
            self.q.kill();
        }
        {
            let mut st = self.tx.state.lock();
            if st.writer_gone {
                drop(st);
                self.q.queued.fetch_sub(FRAME_UNIT + n, Ordering::SeqCst);
                return Err(SendError(o));
            }
            let later = o.later;
            st.frames.push_back(o);
            if !later {
                st.due += 1;
            }
            if st.held || later {
                // The reader writes it (or wakes the writer) when its batch ends; an answer
                // that may wait leaves with the next one that may not.
                return Ok(());
            }
        }
        self.tx.ready.notify_one();
        Ok(())
    }

    /// The socket's reader starts a batch: frames queued from now on (its replies, deliveries
    /// pushed by other sockets) wait for [`Outbox::take_ready`] instead of waking the writer
    /// task, so a batch whose replies the reader writes itself costs no task hand-off.
    pub fn hold(&self) {
        self.tx.state.lock().held = true;
    }

    /// Ends a batch begun by [`Outbox::hold`]. With `take` (the caller holds the socket's write
    /// lock), when every queued frame may leave now — the log is durable up to `durable` for all
    /// of them, and none closes the socket — they are moved to `out`, with their count and bytes
    /// returned. Otherwise all stay queued and wake the writer task: a batch with a reply that
    /// waits for the log leaves in one write once it is durable, rather than in two. When every
    /// queued frame is an answer that may wait (`later`), they stay queued and nobody is woken:
    /// they leave with the next frame that may not wait.
    pub fn take_ready(&self, take: bool, durable: Lsn, out: &mut Vec<Bytes>) -> (u64, u64) {
        let (mut frames, mut bytes) = (0u64, 0u64);
        let rest = {
            let mut st = self.tx.state.lock();
            st.held = false;
            if st.due == 0 {
                if !self.q.over_soft() {
                    return (0, 0);
                }
                // Over the pause bound the reader stops reading, so the request whose answer
                // would release these may never be read: they leave now.
                for o in st.frames.iter_mut() {
                    o.later = false;
                }
                st.due = st.frames.len();
            }
            if take && st.frames.iter().all(|o| o.wait_lsn <= durable && !o.close) {
                for o in st.frames.drain(..) {
                    frames += 1;
                    bytes += o.len() as u64;
                    o.push_to(out);
                }
                st.due = 0;
            }
            !st.frames.is_empty()
        };
        if rest {
            self.tx.ready.notify_one();
        }
        (frames, bytes)
    }

    /// Queues the response `r` to request `req` of conversation `conv`, written once the log is
    /// durable up to `wait_lsn` (0: at once). A closed socket has nobody to tell: dropped.
    pub fn reply(&self, conv: u16, req: u32, r: &Response, wait_lsn: Lsn) {
        self.answer(conv, req, r, wait_lsn, false);
    }

    /// [`Outbox::reply`] to a request that came with `FLAG_LATER` when `later`: the answer may
    /// wait for the next one that may not, and leave with it.
    pub fn answer(&self, conv: u16, req: u32, r: &Response, wait_lsn: Lsn, later: bool) {
        let mut b = BytesMut::new();
        // A large message body is written from the buffer it is queued in, not copied.
        let tail = match r {
            Response::Message { body, .. } if body.len() >= REPLY_TAIL_MIN_BYTES => {
                encode_response_split(conv, req, r, &mut b).unwrap_or_default()
            }
            _ => {
                encode_response(conv, req, r, &mut b);
                Bytes::new()
            }
        };
        let _ = self.send(Out {
            frame: b.freeze(),
            tail,
            wait_lsn,
            close: false,
            later,
        });
    }
}

#[derive(Debug)]
struct Route {
    tx: Outbox,
    conv: u16,
}

pub struct Core {
    pub engine: Engine,
    /// Object authorities: the compiled records and the queue manager's own user.
    pub authz: crate::authz::Authz,
    /// The CHLAUTH records, compiled (see `connsec::rules`).
    pub chlauth: crate::connsec::RuleCache,
    routes: AHashMap<ConnId, Route>,
    /// Engine connections that wait for messages without a socket (a sending channel's
    /// transmission queue): a delivery to one of them only wakes its task.
    wakers: AHashMap<ConnId, Arc<Notify>>,
    /// New connections are refused once a controlled or immediate end has begun.
    pub quiescing: bool,
}

pub fn message_response(got: Got) -> Response {
    Response::Message {
        reason: got.reason,
        data_len: got.data_len,
        md: got.md,
        props: got.props,
        body: got.body,
    }
}

pub fn error_response(e: MqError) -> Response {
    Response::Status {
        reason: e.reason,
        message: e.message,
    }
}

pub fn encode(conv: u16, req: u32, r: &Response) -> Bytes {
    let mut b = BytesMut::new();
    encode_response(conv, req, r, &mut b);
    b.freeze()
}

impl Core {
    pub fn new(engine: Engine) -> Core {
        Core {
            engine,
            authz: crate::authz::Authz::default(),
            chlauth: crate::connsec::RuleCache::default(),
            routes: AHashMap::new(),
            wakers: AHashMap::new(),
            quiescing: false,
        }
    }

    pub fn add_route(&mut self, conn: ConnId, tx: Outbox, conv: u16) {
        self.routes.insert(conn, Route { tx, conv });
    }

    /// Makes deliveries to `conn` wake `notify` instead of being sent to a socket (a browse wait
    /// used as a signal that messages arrived).
    pub fn add_waker(&mut self, conn: ConnId, notify: Arc<Notify>) {
        self.wakers.insert(conn, notify);
    }

    pub fn remove_waker(&mut self, conn: ConnId) {
        self.wakers.remove(&conn);
    }

    pub fn remove_route(&mut self, conn: ConnId) {
        self.routes.remove(&conn);
    }

    /// Sends a response to a connection's socket (for replies produced outside its own task).
    pub fn send(&self, conn: ConnId, req: u32, r: &Response, wait_lsn: Lsn) {
        if let Some(route) = self.routes.get(&conn) {
            // A closed socket has nobody to tell; its connection is being disconnected.
            route.tx.reply(route.conv, req, r, wait_lsn);
        }
    }

    /// Routes the replies the engine produced for waiting gets.
    pub fn flush_deliveries(&mut self) {
        if !self.engine.has_deliveries() {
            return;
        }
        for d in self.engine.take_deliveries() {
            if let Some(n) = self.wakers.get(&d.conn) {
                n.notify_one();
                continue;
            }
            let resp = match d.result {
                Ok(got) => message_response(got),
                Err(e) => error_response(e),
            };
            self.send(d.conn, d.token as u32, &resp, d.wait_lsn);
        }
    }

    /// Answers every get whose wait interval has ended with no message.
    pub fn expire_waits(&mut self, now_ms: u64) {
        for (conn, token) in self.engine.expire_waits(now_ms) {
            let r = Response::Status {
                reason: Reason::NO_MSG_AVAILABLE,
                message: "no matching message arrived within the wait interval".into(),
            };
            self.send(conn, token as u32, &r, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(tag: u8, wait_lsn: Lsn, close: bool) -> Out {
        Out {
            frame: Bytes::from(vec![tag; 10]),
            tail: Bytes::new(),
            wait_lsn,
            close,
            later: false,
        }
    }

    /// The reader takes, at the end of a batch it held, the whole queue when all of it may leave
    /// now, else nothing: a reply waiting for the log keeps the frames queued before and after it
    /// for the writer task (one write once durable, in order), as does a closing frame.
    #[test]
    fn a_held_batch_gives_the_reader_all_or_nothing() {
        let q = Arc::new(OutQueue::new(1 << 20, 1 << 30));
        let (tx, mut rx) = out_channel(q.clone());
        tx.hold();
        tx.send(out(1, 0, false)).unwrap();
        tx.send(out(2, 5, false)).unwrap();
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(true, 6, &mut got), (2, 20));
        assert_eq!(got.iter().map(|b| b[0]).collect::<Vec<_>>(), vec![1, 2]);
        assert!(rx.try_recv().is_none());

        tx.hold();
        tx.send(out(3, 0, false)).unwrap();
        tx.send(out(4, 7, false)).unwrap();
        tx.send(out(5, 0, false)).unwrap();
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(true, 6, &mut got), (0, 0));
        assert!(got.is_empty());
        // All stay queued, in order, for the writer task.
        assert_eq!(rx.try_recv().map(|o| o.frame[0]), Some(3));
        assert_eq!(rx.try_recv().map(|o| o.frame[0]), Some(4));
        assert_eq!(rx.try_recv().map(|o| o.frame[0]), Some(5));
        assert!(rx.try_recv().is_none());

        tx.hold();
        tx.send(out(6, 0, false)).unwrap();
        tx.send(out(7, 0, true)).unwrap();
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(true, 0, &mut got), (0, 0));
        assert_eq!(rx.try_recv().map(|o| o.frame[0]), Some(6));
        assert_eq!(rx.try_recv().map(|o| o.close), Some(true));

        // Without the write lock (`take` false) nothing is taken.
        tx.hold();
        tx.send(out(8, 0, false)).unwrap();
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(false, 0, &mut got), (0, 0));
        assert!(got.is_empty());
        assert_eq!(rx.try_recv().map(|o| o.frame[0]), Some(8));
    }

    fn later(tag: u8) -> Out {
        Out {
            later: true,
            ..out(tag, 0, false)
        }
    }

    /// Answers that may wait (LATER) stay queued, without waking the writer, until a frame that
    /// may not is queued behind them; then all leave together, in order.
    #[tokio::test]
    async fn answers_sent_later_wait_for_the_next_frame_due() {
        let q = Arc::new(OutQueue::new(1 << 20, 1 << 30));
        let (tx, mut rx) = out_channel(q);
        // At the end of the reader's batch: nothing to write, nobody woken.
        tx.hold();
        tx.send(later(1)).unwrap();
        tx.send(later(2)).unwrap();
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(true, 0, &mut got), (0, 0));
        assert!(got.is_empty());
        let wait = tokio::time::timeout(std::time::Duration::from_millis(100), rx.ready()).await;
        assert!(
            wait.is_err(),
            "the writer was woken for answers that may wait"
        );
        // Sent outside a batch (a delivery to the waiting get): the writer wakes for all three.
        tx.send(out(3, 0, false)).unwrap();
        assert!(rx.ready().await);
        let order: Vec<u8> = std::iter::from_fn(|| rx.try_recv().map(|o| o.frame[0])).collect();
        assert_eq!(order, vec![1, 2, 3]);
        // In one batch with a frame due, the reader writes them all at once.
        tx.hold();
        tx.send(later(4)).unwrap();
        tx.send(out(5, 0, false)).unwrap();
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(true, 0, &mut got), (2, 20));
        assert_eq!(got.iter().map(|b| b[0]).collect::<Vec<_>>(), vec![4, 5]);
        // Answers that may wait but fill the queue past the pause bound leave at the end of the
        // batch: the reader will not read the request that would release them.
        let big = Arc::new(OutQueue::new(15, 1 << 30));
        let (btx, mut brx) = out_channel(big);
        btx.hold();
        btx.send(later(7)).unwrap();
        btx.send(later(8)).unwrap();
        let mut got = Vec::new();
        assert_eq!(btx.take_ready(true, 0, &mut got), (2, 20));
        assert!(brx.try_recv().is_none());
        // Once nobody can send any more, what waits is written.
        tx.send(later(6)).unwrap();
        drop(tx);
        assert!(rx.ready().await);
        assert_eq!(rx.try_recv().map(|o| o.frame[0]), Some(6));
        assert!(!rx.ready().await);
    }

    /// While the reader holds a batch, sends do not wake the writer task; ending the batch with
    /// frames left over does.
    #[tokio::test]
    async fn a_held_send_wakes_the_writer_only_when_the_batch_ends_with_frames_left() {
        let q = Arc::new(OutQueue::new(1 << 20, 1 << 30));
        let (tx, mut rx) = out_channel(q);
        let writer = tokio::spawn(async move { rx.ready().await });
        tokio::task::yield_now().await;
        tx.hold();
        tx.send(out(1, 9, false)).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!writer.is_finished(), "a held send woke the writer");
        let mut got = Vec::new();
        assert_eq!(tx.take_ready(true, 0, &mut got), (0, 0));
        let woke = tokio::time::timeout(std::time::Duration::from_secs(10), writer).await;
        assert!(
            matches!(woke, Ok(Ok(true))),
            "the writer was not woken for the frame left"
        );
    }
}
