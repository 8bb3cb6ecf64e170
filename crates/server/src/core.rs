//! The state shared by every connection task: the engine and the routes that carry replies for
//! waiting gets back to the socket of the connection that asked. Both sit under one mutex, taken
//! once per batch of frames read from a socket.

use ahash::AHashMap;
use bytes::{Bytes, BytesMut};
use ferrymq_engine::{ConnId, Engine, Got, Lsn};
use ferrymq_proto::{encode_response, Response};
use ferrymq_types::{MqError, Reason};
use tokio::sync::mpsc::UnboundedSender;

/// Bytes for one socket, sent once the log is durable up to `wait_lsn`.
#[derive(Debug)]
pub struct Out {
    pub frame: Bytes,
    pub wait_lsn: Lsn,
    /// Close the socket after writing this.
    pub close: bool,
}

pub type Outbox = UnboundedSender<Out>;

#[derive(Debug)]
struct Route {
    tx: Outbox,
    conv: u16,
}

pub struct Core {
    pub engine: Engine,
    routes: AHashMap<ConnId, Route>,
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
            routes: AHashMap::new(),
            quiescing: false,
        }
    }

    pub fn add_route(&mut self, conn: ConnId, tx: Outbox, conv: u16) {
        self.routes.insert(conn, Route { tx, conv });
    }

    pub fn remove_route(&mut self, conn: ConnId) {
        self.routes.remove(&conn);
    }

    /// Sends a response to a connection's socket (for replies produced outside its own task).
    pub fn send(&self, conn: ConnId, req: u32, r: &Response, wait_lsn: Lsn) {
        if let Some(route) = self.routes.get(&conn) {
            // A closed socket has nobody to tell; its connection is being disconnected.
            let _ = route.tx.send(Out {
                frame: encode(route.conv, req, r),
                wait_lsn,
                close: false,
            });
        }
    }

    /// Routes the replies the engine produced for waiting gets.
    pub fn flush_deliveries(&mut self) {
        if !self.engine.has_deliveries() {
            return;
        }
        for d in self.engine.take_deliveries() {
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
