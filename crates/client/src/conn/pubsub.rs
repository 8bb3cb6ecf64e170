//! Publish/subscribe verbs of a [`Connection`]: opening a topic to publish (MQOPEN of a topic),
//! MQPUT1 to a topic, subscribing (MQSUB: durable or not, to a queue the queue manager manages
//! or to a named one, with a selector), resuming a durable subscription, and asking for retained
//! publications again (MQSUBRQ). A subscription ends with [`Connection::close`] of its handle:
//! a non-durable one always, a durable one with `close::REMOVE_SUB`.

use bytes::Bytes;
use ferrymq_proto::{Request, Response, SubscribeRequest};
use ferrymq_types::options::{sub, PutOptions, Syncpoint};
use ferrymq_types::{MessageDescriptor, MqError, MsgId, Properties};

use super::{failure, status, Connection, HandleState, Reopen, Role};
use crate::ObjectHandle;

/// What to subscribe to and how (MQSD).
#[derive(Debug, Clone, Default)]
pub struct SubscriptionOptions {
    /// A topic object whose TOPICSTR starts the topic string (may be empty).
    pub topic_object: String,
    /// The topic string (after the object's), with `#` and `+` wildcard levels if wanted.
    pub topic: String,
    /// The subscription's name: required for a durable subscription.
    pub name: Option<String>,
    pub durable: bool,
    /// The queue publications go to; `None` asks the queue manager for a managed queue, which
    /// the subscription returns open for input.
    pub queue: Option<String>,
    /// An SQL92-like selector on message properties (see the README's publish/subscribe
    /// section for the subset).
    pub selector: Option<String>,
    /// Tenths of a second until the subscription expires (`None`: never).
    pub expiry: Option<i32>,
    /// Resume the durable subscription `name` if it exists (MQSO_RESUME); with `create`, make
    /// it otherwise.
    pub resume: bool,
    /// Make the subscription (MQSO_CREATE). The default options (neither set) create.
    pub create: bool,
    /// No retained publication is sent when it is made (MQSO_NEW_PUBLICATIONS_ONLY).
    pub new_publications_only: bool,
    /// Retained publications only on request (MQSO_PUBLICATIONS_ON_REQUEST).
    pub publications_on_request: bool,
    pub user_data: String,
    /// Resume the durable subscription with these options' user data, expiry and
    /// `publications_on_request` (MQSO_ALTER); its topic and selector cannot change.
    pub alter: bool,
    /// The topic string's wildcards are characters (MQSO_WILDCARD_CHAR): `*` any number of
    /// them, across levels, and `?` one; `#` and `+` are then plain characters.
    pub char_wildcards: bool,
    /// SubCorrelId (MQSO_SET_CORREL_ID): every publication to the subscription carries it as
    /// its CorrelId.
    pub correl_id: Option<[u8; 24]>,
}

impl SubscriptionOptions {
    /// A subscription to `topic`: non-durable, managed, no selector.
    pub fn topic(topic: &str) -> SubscriptionOptions {
        SubscriptionOptions {
            topic: topic.to_string(),
            ..Default::default()
        }
    }

    /// MQSO_* bits for these options.
    pub fn mqso(&self) -> u32 {
        let mut o = 0;
        if self.create || !self.resume {
            o |= sub::CREATE;
        }
        if self.resume {
            o |= sub::RESUME;
        }
        if self.durable {
            o |= sub::DURABLE;
        }
        if self.queue.is_none() {
            o |= sub::MANAGED;
        }
        if self.new_publications_only {
            o |= sub::NEW_PUBLICATIONS_ONLY;
        }
        if self.publications_on_request {
            o |= sub::PUBLICATIONS_ON_REQUEST;
        }
        if self.alter {
            o |= sub::ALTER;
        }
        if self.char_wildcards {
            o |= sub::WILDCARD_CHAR;
        }
        if self.correl_id.is_some() {
            o |= sub::SET_CORREL_ID;
        }
        o
    }
}

/// A subscription's handles (MQSUB's Hsub and Hobj).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// Close it to end the use of the subscription (`close::REMOVE_SUB` removes a durable
    /// one); its `name` is the subscription's name.
    pub handle: ObjectHandle,
    /// The managed queue, open for input: get publications from it. `None` when the
    /// subscription names its own queue (open that one to get them).
    pub queue: Option<ObjectHandle>,
    /// The name of the queue publications arrive on.
    pub queue_name: String,
}

impl Connection {
    /// Opens a topic for publishing: topic object `object` (may be empty) and the rest of the
    /// topic string. Puts through the handle are publications; its `name` is the full topic
    /// string.
    pub async fn open_topic(
        &self,
        object: &str,
        topic: &str,
        options: u32,
    ) -> Result<ObjectHandle, MqError> {
        let req = Request::OpenTopic {
            object: object.to_string(),
            topic: topic.to_string(),
            options,
        };
        match self.inner.call1(req, Role::Plain).await? {
            Response::Opened {
                hobj,
                name,
                async_default,
            } => {
                let id = self.remember(
                    hobj,
                    options,
                    Reopen::Topic {
                        object: object.to_string(),
                        topic: topic.to_string(),
                    },
                );
                if let Some(h) = self.inner.handles.lock().map.get_mut(&id) {
                    h.async_default = async_default;
                }
                Ok(ObjectHandle { hobj: id, name })
            }
            other => Err(failure("OpenTopic", other)),
        }
    }

    /// Publishes one message on a topic without opening it (MQPUT1 to a topic).
    pub async fn put1_topic(
        &self,
        object: &str,
        topic: &str,
        md: &MessageDescriptor,
        props: &Properties,
        body: Bytes,
        opts: &PutOptions,
    ) -> Result<(MsgId, MsgId), MqError> {
        let req = Request::Put1Topic {
            object: object.to_string(),
            topic: topic.to_string(),
            opts: opts.clone(),
            md: md.clone(),
            props: props.clone(),
            body,
        };
        if self.put_is_async(None, opts) {
            return self.put_unanswered(req).await;
        }
        let role = if opts.syncpoint == Syncpoint::No {
            Role::Plain
        } else {
            Role::Join
        };
        match self.inner.call1(req, role).await? {
            Response::PutOk {
                msg_id, correl_id, ..
            } => {
                self.inner.joined(role);
                Ok((msg_id, correl_id))
            }
            other => Err(failure("Put1Topic", other)),
        }
    }

    /// Subscribes (MQSUB), or resumes a durable subscription.
    pub async fn subscribe(&self, o: &SubscriptionOptions) -> Result<Subscription, MqError> {
        let req = Request::Subscribe(Box::new(SubscribeRequest {
            options: o.mqso(),
            object: o.topic_object.clone(),
            topic: o.topic.clone(),
            name: o.name.clone().unwrap_or_default(),
            dest: o.queue.clone().unwrap_or_default(),
            dest_qmgr: String::new(),
            selector: o.selector.clone().unwrap_or_default(),
            expiry: o.expiry.unwrap_or(-1),
            user_data: o.user_data.clone(),
            correl_id: o.correl_id,
        }));
        match self.inner.call1(req, Role::Plain).await? {
            Response::Subscribed { hsub, hobj, queue } => {
                let name = o.name.clone().unwrap_or_default();
                let hsub_id = self.remember(hsub, 0, Reopen::Never);
                let queue_handle = (hobj != 0).then(|| ObjectHandle {
                    hobj: self.remember(hobj, 0, Reopen::Never),
                    name: queue.clone(),
                });
                Ok(Subscription {
                    handle: ObjectHandle {
                        hobj: hsub_id,
                        name,
                    },
                    queue: queue_handle,
                    queue_name: queue,
                })
            }
            other => Err(failure("Subscribe", other)),
        }
    }

    /// Asks for the retained publications matching the subscription again (MQSUBRQ).
    /// MQRC_NO_RETAINED_MSG when there is none.
    pub async fn sub_request(&self, s: &Subscription) -> Result<(), MqError> {
        let req = Request::SubRequest {
            hsub: s.handle.hobj,
        };
        status("SubRequest", self.inner.call1(req, Role::Plain).await?)
    }

    /// Ends the use of a subscription: closes its handle (and its managed queue's) with
    /// MQCO_* `options` (`close::REMOVE_SUB` removes a durable subscription).
    pub async fn close_subscription(&self, s: &Subscription, options: u32) -> Result<(), MqError> {
        self.close(&s.handle, options).await?;
        // The queue manager closed the managed queue's handle with the subscription's.
        if let Some(q) = &s.queue {
            self.inner.handles.lock().map.remove(&q.hobj);
        }
        Ok(())
    }

    /// Records a handle the queue manager gave; returns the application's number for it.
    fn remember(&self, server: u32, options: u32, reopen: Reopen) -> u32 {
        let mut h = self.inner.handles.lock();
        h.next += 1;
        let id = h.next;
        h.map.insert(
            id,
            HandleState {
                server,
                open_name: String::new(),
                open_qmgr: String::new(),
                dynamic_name: String::new(),
                options,
                lost: None,
                reopen,
                async_default: false,
            },
        );
        id
    }
}
