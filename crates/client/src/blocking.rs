//! A synchronous client for plain threads: the same verbs as [`crate::Connection`], each run to
//! completion on a shared background tokio runtime. Do not call these from inside an async task
//! (blocking a runtime thread on another runtime panics); use the async API there.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use ferrymq_types::options::{GetOptions, PutOptions};
use ferrymq_types::{MessageDescriptor, MqError, MsgId, Properties};
use tokio::runtime::Runtime;

use crate::{ConnectOptions, Message, ObjectHandle};

/// One runtime for every blocking connection of the process, made on first use. A single worker
/// is enough: it only moves bytes between sockets and waiting calls, and each calling thread
/// drives its own call through `block_on`.
pub(crate) fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ferrymq-client")
            .enable_all()
            .build()
            .expect("the FerryMQ client cannot start its I/O thread")
    })
}

/// A synchronous handle to one conversation; see [`crate::Connection`] for each verb.
#[derive(Clone, Debug)]
pub struct Connection {
    inner: crate::Connection,
}

impl Connection {
    pub fn connect(opts: ConnectOptions) -> Result<Connection, MqError> {
        let inner = runtime().block_on(crate::Connection::connect(opts))?;
        Ok(Connection { inner })
    }

    pub fn share(&self) -> Result<Connection, MqError> {
        let inner = runtime().block_on(self.inner.share())?;
        Ok(Connection { inner })
    }

    /// The async handle to the same conversation.
    pub fn as_async(&self) -> &crate::Connection {
        &self.inner
    }

    pub fn qmgr_name(&self) -> &str {
        self.inner.qmgr_name()
    }

    pub fn max_msg_len(&self) -> u32 {
        self.inner.max_msg_len()
    }

    /// See [`crate::Connection::tls_session`].
    pub fn tls_session(&self) -> Option<ferrymq_security::tls::TlsSession> {
        self.inner.tls_session()
    }

    pub fn reconnects(&self) -> u64 {
        self.inner.reconnects()
    }

    pub fn open(&self, name: &str, options: u32) -> Result<ObjectHandle, MqError> {
        runtime().block_on(self.inner.open(name, options))
    }

    /// Opens queue `name` of queue manager `qmgr`; see [`crate::Connection::open_qmgr`].
    pub fn open_qmgr(&self, name: &str, qmgr: &str, options: u32) -> Result<ObjectHandle, MqError> {
        runtime().block_on(self.inner.open_qmgr(name, qmgr, options))
    }

    pub fn open_dynamic(
        &self,
        model: &str,
        dynamic_name: &str,
        options: u32,
    ) -> Result<ObjectHandle, MqError> {
        runtime().block_on(self.inner.open_dynamic(model, dynamic_name, options))
    }

    pub fn close(&self, h: &ObjectHandle, options: u32) -> Result<(), MqError> {
        runtime().block_on(self.inner.close(h, options))
    }

    /// See [`crate::Connection::open_topic`].
    pub fn open_topic(
        &self,
        object: &str,
        topic: &str,
        options: u32,
    ) -> Result<ObjectHandle, MqError> {
        runtime().block_on(self.inner.open_topic(object, topic, options))
    }

    /// See [`crate::Connection::put1_topic`].
    pub fn put1_topic(
        &self,
        object: &str,
        topic: &str,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(MsgId, MsgId), MqError> {
        runtime().block_on(self.inner.put1_topic(object, topic, md, props, body, opts))
    }

    /// See [`crate::Connection::subscribe`].
    pub fn subscribe(
        &self,
        o: &crate::SubscriptionOptions,
    ) -> Result<crate::Subscription, MqError> {
        runtime().block_on(self.inner.subscribe(o))
    }

    /// See [`crate::Connection::sub_request`].
    pub fn sub_request(&self, s: &crate::Subscription) -> Result<(), MqError> {
        runtime().block_on(self.inner.sub_request(s))
    }

    /// See [`crate::Connection::close_subscription`].
    pub fn close_subscription(&self, s: &crate::Subscription, options: u32) -> Result<(), MqError> {
        runtime().block_on(self.inner.close_subscription(s, options))
    }

    pub fn put(
        &self,
        h: &ObjectHandle,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(MsgId, MsgId), MqError> {
        runtime().block_on(self.inner.put(h, md, props, body, opts))
    }

    pub fn put_md(
        &self,
        h: &ObjectHandle,
        md: &mut MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(), MqError> {
        runtime().block_on(self.inner.put_md(h, md, props, body, opts))
    }

    pub fn put1(
        &self,
        queue: &str,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(MsgId, MsgId), MqError> {
        runtime().block_on(self.inner.put1(queue, md, props, body, opts))
    }

    pub fn put_commit(
        &self,
        h: &ObjectHandle,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
    ) -> Result<(MsgId, MsgId), MqError> {
        runtime().block_on(self.inner.put_commit(h, md, props, body))
    }

    /// Put under syncpoint, commit and get in one write; see [`crate::Connection::put_commit_get`].
    #[allow(clippy::too_many_arguments)]
    pub fn put_commit_get(
        &self,
        put_h: &ObjectHandle,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        get_h: &ObjectHandle,
        get_opts: &GetOptions,
    ) -> Result<((MsgId, MsgId), Message), MqError> {
        runtime().block_on(
            self.inner
                .put_commit_get(put_h, md, props, body, get_h, get_opts),
        )
    }

    pub fn get(&self, h: &ObjectHandle, opts: &GetOptions) -> Result<Message, MqError> {
        runtime().block_on(self.inner.get(h, opts))
    }

    /// Registers an asynchronous consumer; see [`crate::Connection::consume`].
    pub fn consume(
        &self,
        h: &ObjectHandle,
        opts: &GetOptions,
        window: u32,
    ) -> Result<Consumer, MqError> {
        let inner = runtime().block_on(self.inner.consume(h, opts, window))?;
        Ok(Consumer { inner })
    }

    pub fn commit(&self) -> Result<(), MqError> {
        runtime().block_on(self.inner.commit())
    }

    pub fn backout(&self) -> Result<(), MqError> {
        runtime().block_on(self.inner.backout())
    }

    /// MQSTAT (MQSTAT_TYPE_ASYNC_ERROR): see [`crate::Connection::stat`].
    pub fn stat(&self) -> Result<crate::AsyncPutStatus, MqError> {
        runtime().block_on(self.inner.stat())
    }

    pub fn inquire(
        &self,
        h: &ObjectHandle,
        selectors: &[&str],
    ) -> Result<Vec<(String, String)>, MqError> {
        runtime().block_on(self.inner.inquire(h, selectors))
    }

    pub fn set(&self, h: &ObjectHandle, attrs: &[(&str, &str)]) -> Result<(), MqError> {
        runtime().block_on(self.inner.set(h, attrs))
    }

    pub fn admin(&self, command: &str) -> Result<String, MqError> {
        runtime().block_on(self.inner.admin(command))
    }

    pub fn disconnect(self) -> Result<(), MqError> {
        runtime().block_on(self.inner.disconnect())
    }
}

/// A synchronous handle to an asynchronous consumer; see [`crate::Consumer`]. Dropping it
/// without [`Consumer::cancel`] cancels it without waiting.
#[derive(Debug)]
pub struct Consumer {
    inner: crate::Consumer,
}

impl Consumer {
    // Named as the async `next`; not an `Iterator`, which would have to invent an end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Message, MqError> {
        runtime().block_on(self.inner.next())
    }

    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Message, MqError> {
        runtime().block_on(self.inner.next_timeout(timeout))
    }

    pub fn cancel(self) -> Result<(), MqError> {
        runtime().block_on(self.inner.cancel())
    }
}
