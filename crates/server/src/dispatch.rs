//! One request, one engine call: turns a decoded request of a conversation into the engine verb
//! and the engine's answer into a response (or a registered wait). Runs under the core lock.

use ahash::AHashMap;
use ferrymq_engine::{ConnId, GetOutcome, Lsn};
use ferrymq_proto::{ControlCommand, Response};
use ferrymq_types::options::Wait;
use ferrymq_types::{MqError, Reason};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::admin_ops::Ops;
use crate::async_put::AsyncStatus;
use crate::authz::{self, Who};
use crate::config::RemoteAdmin;
use crate::core::{error_response, message_response, Core, Outbox};
use crate::listeners::SocketInfo;
use crate::qmgr::Shared;

/// Per-socket state the dispatcher needs.
pub struct Session {
    pub convs: AHashMap<u16, ConnId>,
    pub sharecnv: u16,
    /// Connected through the Unix socket: a local process with the queue manager's own authority.
    pub bindings: bool,
    pub tx: Outbox,
    pub info: SocketInfo,
    /// A refused MQSC command from this socket has been reported in the error log.
    pub admin_refusal_logged: bool,
    /// Who each connected conversation runs as, resolved when it connected.
    pub principals: AHashMap<u16, Arc<Who>>,
    /// The channel a client socket runs as (None: bindings).
    pub channel: Option<crate::connsec::ChannelBinding>,
    /// Who each connected conversation runs as: its effective user (the one its engine
    /// connection carries) and that user's groups, for authority checks.
    pub identities: AHashMap<u16, crate::connsec::Identity>,
    /// The user store's groups of the user a Connect being handled was admitted as (set by the
    /// connection task just before it hands the Connect over).
    pub connect_groups: Vec<String>,
    /// The protocol version the handshake agreed.
    pub version: u16,
    /// What became of each conversation's unanswered (asynchronous) puts, for MQSTAT.
    pub async_puts: AHashMap<u16, AsyncStatus>,
}

impl Session {
    /// Whether `Opened` may carry the object's DEFPRESP (the client reads it).
    fn speaks_async_put(&self) -> bool {
        self.version >= ferrymq_proto::PROTOCOL_VERSION_ASYNC_PUT
    }
}

/// What the connection task does after a request.
pub enum Action {
    Reply(Response, Lsn),
    /// Nothing to answer (a credit grant).
    Nothing,
    /// A get is waiting; answered later by a delivery, or when its deadline passes (if any).
    Wait {
        deadline_ms: Option<u64>,
    },
    /// An administrative request the server itself acts on (shutdown).
    Admin(AdminAction, Response),
    /// A reply that takes a while (it waits for the HA group); sent when the future ends,
    /// outside the core lock.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    ShutdownControlled,
    ShutdownImmediate,
}

/// The application name the queue manager control commands connect with.
pub const ADMIN_APP: &str = "endmqm";

fn status_ok() -> Response {
    Response::Status {
        reason: Reason::NONE,
        message: String::new(),
    }
}

/// A put that completed with a warning (a publication no subscription matched, asked for with
/// MQPMO_WARN_IF_NO_SUBS_MATCHED): the warning is the answer, sent once the put is durable.
fn warned(d: ferrymq_engine::PutDone) -> Action {
    let reason = d.warning.unwrap_or(Reason::NONE);
    Action::Reply(
        Response::Status {
            reason,
            message: "the publication matched no subscription (a warning: it was published)"
                .to_string(),
        },
        d.wait_lsn,
    )
}

/// A put the client does not wait for: nothing is sent back; its outcome is counted for MQSTAT.
/// Its log record becomes durable with the next one a reply waits for (MQ promises no more
/// for an asynchronous put before MQCMIT or MQSTAT).
fn unanswered(
    s: &mut Session,
    conv: u16,
    opts: &ferrymq_types::options::PutOptions,
    outcome: Result<(Option<Reason>, Lsn), &MqError>,
    object: impl FnOnce() -> String,
) -> Action {
    let under_syncpoint = opts.syncpoint != ferrymq_types::options::Syncpoint::No;
    s.async_puts
        .entry(conv)
        .or_default()
        .record(under_syncpoint, outcome, object);
    Action::Nothing
}

fn done(r: Result<Lsn, MqError>) -> Action {
    match r {
        Ok(lsn) => Action::Reply(status_ok(), lsn),
        Err(e) => Action::Reply(error_response(e), 0),
    }
}

pub fn handle(
    core: &mut Core,
    shared: &Arc<Shared>,
    s: &mut Session,
    conv: u16,
    req: u32,
    r: ferrymq_proto::Request,
    now_ms: u64,
) -> Action {
    use ferrymq_proto::Request as Q;
    if let Q::Connect {
        qmgr,
        user,
        app_name,
        ..
    } = &r
    {
        if let Some(h) = shared.ha.as_ref().filter(|h| !h.is_active()) {
            // The control commands (endmqm, dspmq -o ha) reach a replica through its bindings
            // socket; they get a conversation with no engine connection behind it, so nothing
            // but administrative requests can be made on it.
            if s.bindings && app_name == ADMIN_APP {
                return Action::Reply(status_ok(), 0);
            }
            let m = h.replica.metrics();
            // The leader may be this very instance, elected but not yet serving: it is not the
            // active instance until it has taken over.
            let text = match m.current_leader {
                Some(l) if l == h.cfg.local_id() => format!(
                    "instance '{}' of queue manager '{}' has been elected and is taking over; it accepts applications once it is the active instance",
                    h.cfg.local, shared.cfg.name
                ),
                Some(l)
                    if !h
                        .replica
                        .contacts()
                        .get(l)
                        .is_some_and(|c| c.reachable()) =>
                {
                    format!(
                        "instance '{}' of queue manager '{}' is a replica; the last active instance it knew, '{}', is not reachable from it",
                        h.cfg.local,
                        shared.cfg.name,
                        h.cfg.name_of(l)
                    )
                }
                Some(l) => format!(
                    "instance '{}' of queue manager '{}' is a replica; the active instance is '{}'",
                    h.cfg.local,
                    shared.cfg.name,
                    h.cfg.name_of(l)
                ),
                None => format!(
                    "instance '{}' of queue manager '{}' is a replica; no instance is active yet",
                    h.cfg.local, shared.cfg.name
                ),
            };
            let e = MqError::new(Reason::STANDBY_Q_MGR, text);
            return Action::Reply(error_response(e), 0);
        }
        if shared.is_dr_secondary() {
            if s.bindings && app_name == ADMIN_APP {
                return Action::Reply(status_ok(), 0);
            }
            let e = MqError::new(
                Reason::STANDBY_Q_MGR,
                format!(
                    "queue manager '{}' is the DR secondary here; it takes applications after makedrprimary and strmqm",
                    shared.cfg.name
                ),
            );
            return Action::Reply(error_response(e), 0);
        }
        return Action::Reply(
            connect(core, &shared.cfg.admin_group, s, conv, qmgr, user, app_name),
            0,
        );
    }
    if let Q::Admin { command } = &r {
        return admin(core, shared, s, conv, command, now_ms);
    }
    if let Q::Heartbeat = &r {
        // Heartbeats belong to the socket (conversation 0), not to a connection.
        return Action::Reply(Response::HeartbeatAck, 0);
    }
    let Some(&conn) = s.convs.get(&conv) else {
        let e = MqError::new(
            Reason::HCONN_ERROR,
            format!("conversation {conv} is not connected; send Connect first"),
        );
        return Action::Reply(error_response(e), 0);
    };
    // Authority is decided here, at open and MQPUT1; a handle keeps what its open was granted.
    match &r {
        Q::Open { name, options, .. } => {
            let (needed, names) = authz::open_needs(*options);
            if let Err(err) = check(
                core,
                s,
                conv,
                &format!("MQOPEN with options {names}"),
                "QUEUE",
                name,
                needed,
            ) {
                return Action::Reply(error_response(err), 0);
            }
        }
        Q::OpenTopic { object, topic, .. } | Q::Put1Topic { object, topic, .. } => {
            // MQ asks for PUB on the closest topic object above the topic string.
            let what = if matches!(r, Q::OpenTopic { .. }) {
                "MQOPEN of a topic for publishing"
            } else {
                "MQPUT1 to a topic"
            };
            let closest = core.engine.topic_object_for(object, topic);
            if let Err(err) = closest.and_then(|name| {
                check(
                    core,
                    s,
                    conv,
                    what,
                    "TOPIC",
                    &name,
                    ferrymq_security::oam::Authorities::PUB,
                )
            }) {
                return Action::Reply(error_response(err), 0);
            }
        }
        Q::Subscribe(sd) => {
            let closest = core.engine.topic_object_for(&sd.object, &sd.topic);
            if let Err(err) = closest.and_then(|name| {
                check(
                    core,
                    s,
                    conv,
                    "MQSUB",
                    "TOPIC",
                    &name,
                    ferrymq_security::oam::Authorities::SUB,
                )
            }) {
                return Action::Reply(error_response(err), 0);
            }
        }
        Q::Put1 { name, opts, .. } => {
            if let Err(err) = check(
                core,
                s,
                conv,
                "MQPUT1",
                "QUEUE",
                name,
                authz::put1_needs(opts.context),
            ) {
                return Action::Reply(error_response(err), 0);
            }
        }
        _ => {}
    }
    let e = &mut core.engine;
    match r {
        Q::Disconnect => {
            let r = e.disconnect_normally(conn, now_ms);
            core.remove_route(conn);
            s.convs.remove(&conv);
            s.principals.remove(&conv);
            s.identities.remove(&conv);
            s.async_puts.remove(&conv);
            s.info.conversations.fetch_sub(1, Ordering::Relaxed);
            done(r)
        }
        Q::Open {
            name,
            qmgr,
            options,
            dynamic_name,
        } => {
            // A dynamic queue records when it was created.
            e.note_time(now_ms);
            match e.open(conn, &name, &qmgr, options, &dynamic_name) {
                Ok((hobj, resolved, lsn)) => {
                    // DEFPRESP of the object opened (an alias's own), or of the queue created
                    // from a model.
                    let async_default = s.speaks_async_put()
                        && qmgr.is_empty()
                        && [name.as_str(), resolved.as_str()].iter().any(|n| {
                            e.queue_def(n).is_some_and(|d| {
                                d.other
                                    .get("DEFPRESP")
                                    .or_else(|| d.other.get("DEFRESP"))
                                    .is_some_and(|v| v == "ASYNC")
                            })
                        });
                    Action::Reply(
                        Response::Opened {
                            hobj,
                            name: resolved,
                            async_default,
                        },
                        lsn,
                    )
                }
                Err(err) => Action::Reply(error_response(err), 0),
            }
        }
        Q::Close { hobj, options } => done(e.close(conn, hobj, options, now_ms)),
        Q::Put {
            hobj,
            opts,
            md,
            props,
            body,
        } if opts.is_async() => {
            let r = e.put(conn, hobj, &opts, md, props, body, now_ms);
            let name = || e.handle_name(conn, hobj).unwrap_or_default();
            unanswered(
                s,
                conv,
                &opts,
                r.as_ref().map(|d| (d.warning, d.wait_lsn)),
                name,
            )
        }
        Q::Put1 {
            name,
            qmgr,
            opts,
            md,
            props,
            body,
        } if opts.is_async() => {
            let r = e.put1(conn, &name, &qmgr, &opts, md, props, body, now_ms);
            unanswered(
                s,
                conv,
                &opts,
                r.as_ref().map(|d| (d.warning, d.wait_lsn)),
                || name,
            )
        }
        Q::Put1Topic {
            object,
            topic,
            opts,
            md,
            props,
            body,
        } if opts.is_async() => {
            let r = e.put1_topic(conn, &object, &topic, &opts, md, props, body, now_ms);
            let name = || if topic.is_empty() { object } else { topic };
            unanswered(
                s,
                conv,
                &opts,
                r.as_ref().map(|d| (d.warning, d.wait_lsn)),
                name,
            )
        }
        Q::Stat { stat_type } => {
            if stat_type != ferrymq_types::options::STAT_TYPE_ASYNC_ERROR {
                let e = MqError::new(
                    Reason::STAT_TYPE_ERROR,
                    format!("MQSTAT type {stat_type} is not supported; only MQSTAT_TYPE_ASYNC_ERROR (0) is"),
                );
                return Action::Reply(error_response(e), 0);
            }
            // Answered once the puts it counts are durable.
            let (r, lsn) = s.async_puts.entry(conv).or_default().take();
            Action::Reply(r, lsn)
        }
        Q::Put {
            hobj,
            opts,
            md,
            props,
            body,
        } => match e.put(conn, hobj, &opts, md, props, body, now_ms) {
            Ok(d) if d.warning.is_some() => warned(d),
            Ok(d) => Action::Reply(
                Response::PutOk {
                    msg_id: d.msg_id,
                    correl_id: d.correl_id,
                    group: d.group.map(|(group_id, msg_seq_number, offset)| {
                        ferrymq_proto::PutGroup {
                            group_id,
                            msg_seq_number,
                            offset,
                        }
                    }),
                },
                d.wait_lsn,
            ),
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Put1 {
            name,
            qmgr,
            opts,
            md,
            props,
            body,
        } => match e.put1(conn, &name, &qmgr, &opts, md, props, body, now_ms) {
            Ok(d) => Action::Reply(
                Response::PutOk {
                    msg_id: d.msg_id,
                    correl_id: d.correl_id,
                    group: d.group.map(|(group_id, msg_seq_number, offset)| {
                        ferrymq_proto::PutGroup {
                            group_id,
                            msg_seq_number,
                            offset,
                        }
                    }),
                },
                d.wait_lsn,
            ),
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Get { hobj, opts } => match e.get(conn, hobj, &opts, req as u64, now_ms) {
            Ok(GetOutcome::Got(got, lsn)) => Action::Reply(message_response(got), lsn),
            Ok(GetOutcome::Waiting(_)) => Action::Wait {
                deadline_ms: match opts.wait {
                    Wait::Ms(ms) => Some(now_ms.saturating_add(ms)),
                    Wait::Unlimited | Wait::NoWait => None,
                },
            },
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Commit => match s.async_puts.get_mut(&conv).and_then(|a| a.doomed_commit()) {
            Some(err) => {
                let _ = e.backout(conn, now_ms);
                Action::Reply(error_response(err), 0)
            }
            None => done(e.commit(conn, now_ms)),
        },
        Q::Backout => {
            if let Some(a) = s.async_puts.get_mut(&conv) {
                a.uow_doomed = false;
            }
            done(e.backout(conn, now_ms))
        }
        Q::Inquire { hobj, selectors } => match e.inquire(conn, hobj, &selectors) {
            Ok(attrs) => Action::Reply(Response::InquireReply { attrs }, 0),
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Set { hobj, attrs } => done(e.set(conn, hobj, &attrs)),
        Q::RegisterConsumer { hobj, opts } => {
            match e.register_consumer(conn, hobj, &opts, req as u64) {
                Ok(()) => Action::Reply(status_ok(), 0),
                Err(err) => Action::Reply(error_response(err), 0),
            }
        }
        Q::Credit { hobj, n } => {
            e.add_credit(conn, hobj, n, now_ms);
            Action::Nothing
        }
        Q::CancelConsumer { hobj } => {
            e.cancel_consumer(conn, hobj);
            Action::Reply(status_ok(), 0)
        }
        Q::OpenTopic {
            object,
            topic,
            options,
        } => match e.open_topic(conn, &object, &topic, options) {
            Ok((hobj, name)) => {
                let async_default = s.speaks_async_put() && e.topic_attrs(&name).async_put_default;
                Action::Reply(
                    Response::Opened {
                        hobj,
                        name,
                        async_default,
                    },
                    0,
                )
            }
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Put1Topic {
            object,
            topic,
            opts,
            md,
            props,
            body,
        } => match e.put1_topic(conn, &object, &topic, &opts, md, props, body, now_ms) {
            Ok(d) if d.warning.is_some() => warned(d),
            Ok(d) => Action::Reply(
                Response::PutOk {
                    msg_id: d.msg_id,
                    correl_id: d.correl_id,
                    group: None,
                },
                d.wait_lsn,
            ),
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Subscribe(sd) => {
            let sd = *sd;
            let req = ferrymq_engine::pubsub::SubRequest {
                object: sd.object,
                topic: sd.topic,
                name: sd.name,
                options: sd.options,
                dest: sd.dest,
                dest_qmgr: sd.dest_qmgr,
                selector: sd.selector,
                expiry: sd.expiry,
                user_data: sd.user_data,
                correl_id: sd.correl_id,
            };
            match e.subscribe(conn, &req, now_ms) {
                Ok(d) => Action::Reply(
                    Response::Subscribed {
                        hsub: d.hsub,
                        hobj: d.hobj,
                        queue: d.queue,
                    },
                    d.wait_lsn,
                ),
                Err(err) => Action::Reply(error_response(err), 0),
            }
        }
        Q::SubRequest { hsub } => match e.sub_request(conn, hsub, now_ms) {
            Ok((_, lsn)) => Action::Reply(status_ok(), lsn),
            Err(err) => Action::Reply(error_response(err), 0),
        },
        Q::Hello(_) => Action::Reply(
            error_response(MqError::new(
                Reason::HEADER_ERROR,
                "Hello may be sent only once, as the first frame",
            )),
            0,
        ),
        Q::Connect { .. } | Q::Admin { .. } | Q::Heartbeat => unreachable!("handled above"),
    }
}

/// Checks the authority of the conversation's user (see [`authz`]).
fn check(
    core: &mut Core,
    s: &Session,
    conv: u16,
    what: &str,
    objtype: &str,
    name: &str,
    needed: ferrymq_security::oam::Authorities,
) -> Result<(), MqError> {
    let Some(who) = s.principals.get(&conv) else {
        return Ok(());
    };
    core.authz
        .check(&core.engine, who, what, objtype, name, needed)
}

fn connect(
    core: &mut Core,
    admin_group: &str,
    s: &mut Session,
    conv: u16,
    qmgr: &str,
    user: &str,
    app: &str,
) -> Response {
    let fail = |reason, message: String| Response::Status { reason, message };
    if core.quiescing {
        return fail(
            Reason::Q_MGR_STOPPING,
            format!(
                "queue manager '{}' is ending; connect again after it restarts",
                core.engine.qmgr_name()
            ),
        );
    }
    if !qmgr.is_empty() && qmgr != core.engine.qmgr_name() {
        return fail(
            Reason::Q_MGR_NAME_ERROR,
            format!(
                "this listener belongs to queue manager '{}', not '{qmgr}'",
                core.engine.qmgr_name()
            ),
        );
    }
    if conv == 0 || conv > s.sharecnv {
        return fail(
            Reason::MAX_CONNS_LIMIT_REACHED,
            format!(
                "conversation {conv} is outside 1..={} (SHARECNV); open another socket",
                s.sharecnv
            ),
        );
    }
    if s.convs.contains_key(&conv) {
        return fail(
            Reason::ALREADY_CONNECTED,
            format!("conversation {conv} is already connected"),
        );
    }
    // `user` is the effective user `connsec::admit` decided: for a bindings connection its
    // process's operating-system user (unless authentication adopted another), for a client the
    // mapped, channel, adopted or asserted user, in that order. Its groups are the operating
    // system's and, for a user of the queue manager's user store, the store's.
    let store_groups = std::mem::take(&mut s.connect_groups);
    let who = core.authz.resolve(admin_group, user, &store_groups);
    if let Err(e) = core.authz.check(
        &core.engine,
        &who,
        "connect (MQCONN)",
        "QMGR",
        "",
        ferrymq_security::oam::Authorities::CONNECT,
    ) {
        return fail(e.reason, e.message);
    }
    let conn = core.engine.connect(user, app);
    core.add_route(conn, s.tx.clone(), conv);
    s.convs.insert(conv, conn);
    s.principals.insert(conv, who);
    s.info.conversations.fetch_add(1, Ordering::Relaxed);
    status_ok()
}

/// How long an MQSC response waits for its record to be durable (HA: committed) before the
/// command is reported as not confirmed.
const ADMIN_CONFIRM: std::time::Duration = std::time::Duration::from_secs(10);

/// Why MQSC over a client connection is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AdminRefusal {
    /// qm.ini Channels:RemoteAdmin=no.
    Off,
    /// RemoteAdmin=authenticated, and the conversation is not on SYSTEM.ADMIN.SVRCONN.
    NotAdminChannel,
    /// RemoteAdmin=authenticated, and the conversation gave no password the store accepted.
    NotAuthenticated,
}

impl AdminRefusal {
    fn log(self) -> &'static str {
        match self {
            AdminRefusal::Off => "qm.ini Channels:RemoteAdmin is off",
            AdminRefusal::NotAdminChannel => {
                "remote administration goes through channel SYSTEM.ADMIN.SVRCONN only"
            }
            AdminRefusal::NotAuthenticated => {
                "the conversation did not authenticate with a password"
            }
        }
    }
}

/// Whether MQSC from client conversation `conv` is refused, and why.
fn remote_admin_refusal(mode: RemoteAdmin, s: &Session, conv: u16) -> Option<AdminRefusal> {
    match mode {
        RemoteAdmin::Any => None,
        RemoteAdmin::No => Some(AdminRefusal::Off),
        RemoteAdmin::Authenticated => {
            if s.channel.as_ref().map(|c| c.name.as_str()) != Some(RemoteAdmin::CHANNEL) {
                Some(AdminRefusal::NotAdminChannel)
            } else if !s.identities.get(&conv).is_some_and(|i| i.authenticated) {
                Some(AdminRefusal::NotAuthenticated)
            } else {
                None
            }
        }
    }
}

/// The reply to MQSC over a client (TCP) connection that remote administration does not allow.
fn remote_admin_refused(qm: &str, why: AdminRefusal) -> String {
    let what = match why {
        AdminRefusal::Off => format!(
            "queue manager '{qm}' does not allow remote administration. Run runmqsc without -c on the queue manager's host, or allow it over channel SYSTEM.ADMIN.SVRCONN with a password with qm.ini Channels:RemoteAdmin=authenticated (ferrymq setmqini -m {qm} -s Channels -k RemoteAdmin -v authenticated, then restart the queue manager)"
        ),
        AdminRefusal::NotAdminChannel => format!(
            "queue manager '{qm}' accepts administration only over channel SYSTEM.ADMIN.SVRCONN (runmqsc -c --channel SYSTEM.ADMIN.SVRCONN --user USER, the password on standard input or in FERRYMQ_PASSWORD)"
        ),
        AdminRefusal::NotAuthenticated => format!(
            "queue manager '{qm}' accepts administration only from a connection that authenticated with a user and password (--user USER, the password on standard input or in FERRYMQ_PASSWORD)"
        ),
    };
    format!(
        "{}: MQSC over a client (TCP) connection is refused: {what}.\n   Reason: {}",
        ferrymq_mqsc::messages::NOT_AUTHORIZED,
        Reason::NOT_AUTHORIZED
    )
}

/// The response of a command whose record did not become durable in time.
fn not_confirmed(what: &str, why: &str, ha: bool) -> String {
    format!(
        "{}: {what} not confirmed: {why}. Whether it takes effect is not known: {}; DISPLAY the object once the queue manager is healthy again.\n   Reason: {}",
        ferrymq_mqsc::messages::NOT_CONFIRMED,
        if ha {
            "an active instance that loses its majority restarts and drops what the group did not commit, but a record that reached another instance may still be committed"
        } else {
            "the record may still reach the disk"
        },
        Reason::CALL_INTERRUPTED
    )
}

/// `resp` once the log is durable up to `need`, or — after `bound`, or if the log stops first —
/// the response saying the command `what` is not confirmed.
async fn confirmed(
    durable: crate::lsn::LsnWatch,
    need: Lsn,
    resp: Response,
    what: String,
    ha: bool,
    bound: std::time::Duration,
) -> Response {
    let why = match tokio::time::timeout(bound, durable.wait(need)).await {
        Ok(Ok(())) => return resp,
        Ok(Err(_)) => "the recovery log stopped before its record was durable".to_string(),
        Err(_) => format!(
            "its record was not {} within {} s",
            if ha {
                "committed by a majority of the HA group's instances"
            } else {
                "written to disk"
            },
            bound.as_secs_f64()
        ),
    };
    crate::qm_log!(
        crate::errlog::ids::ADMIN_NOT_CONFIRMED,
        "{what}: not confirmed to the administrator: {why}"
    );
    Response::AdminReply {
        text: not_confirmed(&what, &why, ha),
        reason: Reason::COMMAND_FAILED,
    }
}

fn admin(
    core: &mut Core,
    shared: &Arc<Shared>,
    s: &mut Session,
    conv: u16,
    command: &str,
    now_ms: u64,
) -> Action {
    let reply = |reason, text: &str| Response::AdminReply {
        text: text.to_string(),
        reason,
    };
    let cmd = match ControlCommand::parse(command) {
        Ok(c) => c,
        Err(e) => return Action::Reply(reply(Reason::COMMAND_FAILED, &e), 0),
    };
    // MQSC travels as "MQSC <command>"; the queue manager parses it again (the client only checked
    // its syntax), so what runs is exactly what this server understands.
    if let ControlCommand::Mqsc(mqsc) = &cmd {
        let mqsc = mqsc.as_str();
        let refusal = if s.bindings {
            None
        } else {
            remote_admin_refusal(shared.cfg.remote_admin, s, conv)
        };
        if let Some(why) = refusal {
            if !s.admin_refusal_logged {
                s.admin_refusal_logged = true;
                let verb: String = mqsc
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(60)
                    .collect();
                crate::qm_log!(
                    crate::errlog::ids::REMOTE_ADMIN_REFUSED,
                    "MQSC from client connection {} refused ({verb} ...): {}",
                    s.info.conname,
                    why.log()
                );
            }
            return Action::Reply(
                reply(
                    Reason::NOT_AUTHORIZED,
                    &remote_admin_refused(&shared.cfg.name, why),
                ),
                0,
            );
        }
        // The command's authority: the conversation's user; a bindings socket's process's user
        // when the conversation is not connected; a client's that asserted nobody, the queue
        // manager's own (see `authz`).
        let who = match s.principals.get(&conv) {
            Some(w) => w.clone(),
            None => core.authz.resolve(
                &shared.cfg.admin_group,
                if s.bindings {
                    s.info.os_user.as_deref().unwrap_or("")
                } else {
                    ""
                },
                &[],
            ),
        };
        let parsed = ferrymq_mqsc::parse(mqsc);
        let needs = parsed.as_ref().map(authz::mqsc_needs).unwrap_or_default();
        for (objtype, name, needed) in needs {
            let label = parsed.as_ref().map(|c| c.label()).unwrap_or_default();
            if let Err(e) = core.authz.check(
                &core.engine,
                &who,
                &format!("run MQSC {label}"),
                objtype,
                &name,
                needed,
            ) {
                let text = format!(
                    "{}: {label} refused: {}\n   Reason: {}",
                    ferrymq_mqsc::messages::NOT_AUTHORIZED,
                    e.message,
                    e.reason
                );
                return Action::Reply(reply(Reason::NOT_AUTHORIZED, &text), 0);
            }
        }
        // PING CHANNEL talks to the partner: answered later, off the core lock.
        if let Ok(ferrymq_mqsc::Command::PingChannel { name, datalen }) = &parsed {
            let def = core
                .engine
                .object(ferrymq_types::ObjectKind::Channel, name)
                .cloned();
            let label = format!("PING CHANNEL({name})");
            let (shared, datalen) = (shared.clone(), *datalen);
            // As MQ: a channel can be pinged when stopped, inactive or retrying, not while it runs.
            let in_use = shared.channels.sender_state(name).filter(|s| {
                matches!(
                    s,
                    crate::channels::State::Starting
                        | crate::channels::State::Binding
                        | crate::channels::State::Running
                )
            });
            return Action::Later(Box::pin(async move {
                let r = match def {
                    Some(_) if in_use.is_some() => Err(MqError::new(
                        Reason::CHANNEL_IN_USE,
                        format!(
                            "{label}: the channel is {}; stop it first (PING tests a channel that is not running)",
                            in_use.map(|s| s.name()).unwrap_or_default()
                        ),
                    )),
                    Some(d)
                        if matches!(
                            d.attrs.get("CHLTYPE").map(String::as_str),
                            Some("SDR" | "SVR")
                        ) =>
                    {
                        crate::channels::sender::ping(shared, d, datalen).await
                    }
                    Some(_) => Err(MqError::new(
                        Reason::COMMAND_FAILED,
                        format!("{label}: only a sending (SDR or SVR) channel can be pinged"),
                    )),
                    None => Err(MqError::new(
                        Reason::UNKNOWN_OBJECT_NAME,
                        format!("{label}: no such channel is defined"),
                    )),
                };
                match r {
                    Ok(m) => Response::AdminReply {
                        text: format!(
                            "{}: Ping complete. {m}",
                            ferrymq_mqsc::messages::PING_COMPLETE
                        ),
                        reason: Reason::NONE,
                    },
                    Err(e) => Response::AdminReply {
                        text: format!(
                            "{}: {label} failed: {}\n   Reason: {}",
                            ferrymq_mqsc::messages::failure(e.reason),
                            e.message,
                            e.reason
                        ),
                        reason: Reason::COMMAND_FAILED,
                    },
                }
            }));
        }
        let mut ops = Ops {
            shared,
            viewer: Some((who, core.authz.oam(&core.engine))),
        };
        let r = match &parsed {
            Ok(cmd) => ferrymq_admin::execute(cmd, &mut core.engine, &mut ops, now_ms),
            Err(_) => ferrymq_admin::execute_text(mqsc, &mut core.engine, &mut ops, now_ms),
        };
        core.flush_deliveries();
        let resp = reply(
            if r.ok {
                Reason::NONE
            } else {
                Reason::COMMAND_FAILED
            },
            &r.text,
        );
        // The response waits, as a persistent put's does, until the log is durable (HA:
        // committed by a majority) up to the command's own record and every earlier definition
        // change it may show; but for a bounded time, after which it says the change is not
        // confirmed rather than leave the administrator waiting on a group without a majority.
        let need = r.lsn.max(core.engine.admin_lsn());
        if need <= shared.durable.get() {
            return Action::Reply(resp, need);
        }
        let what = mqsc.split_whitespace().collect::<Vec<_>>().join(" ");
        return Action::Later(Box::pin(confirmed(
            shared.durable.clone(),
            need,
            resp,
            what,
            shared.ha.is_some(),
            ADMIN_CONFIRM,
        )));
    }
    if !s.bindings {
        return Action::Reply(
            reply(Reason::NOT_AUTHORIZED, "queue manager control commands are accepted only from local (bindings-mode) connections"),
            0,
        );
    }
    match cmd {
        ControlCommand::Mqsc(_) => unreachable!("MQSC is answered above"),
        ControlCommand::Ping => Action::Reply(reply(Reason::NONE, "queue manager is running"), 0),
        ControlCommand::HaPrefer(name) => match &shared.ha {
            None => Action::Reply(
                reply(
                    Reason::COMMAND_FAILED,
                    "this queue manager is not part of an HA group",
                ),
                0,
            ),
            Some(h) => {
                let h = h.clone();
                Action::Later(Box::pin(async move {
                    match h.set_preferred(name.as_deref()).await {
                        Ok(t) => Response::AdminReply {
                            text: t,
                            reason: Reason::NONE,
                        },
                        Err(t) => Response::AdminReply {
                            text: t,
                            reason: Reason::COMMAND_FAILED,
                        },
                    }
                }))
            }
        },
        ControlCommand::HaStatus => match &shared.ha {
            None => Action::Reply(
                reply(
                    Reason::COMMAND_FAILED,
                    "this queue manager is not part of an HA group",
                ),
                0,
            ),
            Some(h) => {
                let text = h
                    .status_rows()
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|(k, v)| format!("{k}({v})"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                Action::Reply(reply(Reason::NONE, &text), 0)
            }
        },
        ControlCommand::DrStatus => match shared.dr_status() {
            None => Action::Reply(
                reply(
                    Reason::COMMAND_FAILED,
                    "this queue manager has no DR role (crtmqm -dr, or qm.ini DR:)",
                ),
                0,
            ),
            Some(line) => Action::Reply(reply(Reason::NONE, &line), 0),
        },
        // dmpmqcfg: the configuration as MQSC (or JSON), shown only once every definition change
        // it may include is durable, as a DISPLAY is.
        ControlCommand::DumpConfig { scope, json } => {
            let Some(scope) = ferrymq_admin::DumpScope::from_word(&scope) else {
                return Action::Reply(
                    reply(
                        Reason::COMMAND_FAILED,
                        "dmpmqcfg: the scope is one of all, object, authrec, chlauth",
                    ),
                    0,
                );
            };
            let text = ferrymq_admin::dump_config(&core.engine, scope, json, now_ms);
            let resp = reply(Reason::NONE, &text);
            let need = core.engine.admin_lsn();
            if need <= shared.durable.get() {
                return Action::Reply(resp, need);
            }
            Action::Later(Box::pin(confirmed(
                shared.durable.clone(),
                need,
                resp,
                "dmpmqcfg".into(),
                shared.ha.is_some(),
                ADMIN_CONFIRM,
            )))
        }
        ControlCommand::Shutdown { immediate: false } => Action::Admin(
            AdminAction::ShutdownControlled,
            reply(Reason::NONE, "controlled end requested"),
        ),
        ControlCommand::Shutdown { immediate: true } => Action::Admin(
            AdminAction::ShutdownImmediate,
            reply(Reason::NONE, "immediate end requested"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn done() -> Response {
        Response::AdminReply {
            text: "FMQ8006I: QLOCAL(X) defined.".into(),
            reason: Reason::NONE,
        }
    }

    fn text(r: Response) -> String {
        match r {
            Response::AdminReply { text, reason } => format!("{reason}: {text}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_mqsc_answer_waits_for_its_record_and_is_not_confirmed_past_the_bound() {
        let (tx, watch) = crate::lsn::channel(0);
        // Durable in time: the command's own answer.
        let waiting = tokio::spawn(confirmed(
            watch.clone(),
            5,
            done(),
            "DEFINE QLOCAL(X)".into(),
            true,
            Duration::from_secs(30),
        ));
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "answered before its record was durable"
        );
        tx.advance(5);
        assert!(text(waiting.await.unwrap()).contains("defined"));

        // Never durable: not confirmed, with the reason, once the bound passes.
        let t = text(
            confirmed(
                watch.clone(),
                9,
                done(),
                "DEFINE QLOCAL(Y)".into(),
                true,
                Duration::from_millis(50),
            )
            .await,
        );
        assert!(t.contains("DEFINE QLOCAL(Y) not confirmed"), "{t}");
        assert!(t.contains("majority"), "{t}");
        assert!(t.contains("MQRC_CALL_INTERRUPTED (2549)"), "{t}");
        assert!(!t.contains("defined."), "{t}");

        // The log stops: not confirmed at once.
        drop(tx);
        let t = text(
            confirmed(
                watch,
                9,
                done(),
                "CLEAR QLOCAL(Z)".into(),
                false,
                Duration::from_secs(30),
            )
            .await,
        );
        assert!(
            t.contains("CLEAR QLOCAL(Z) not confirmed: the recovery log stopped"),
            "{t}"
        );
    }
}
