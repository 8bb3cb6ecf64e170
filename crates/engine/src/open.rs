//! MQOPEN and MQCLOSE: resolving names (aliases, model queues creating dynamic queues), checking
//! open options against the object and its current users, and closing handles.

use ferrymq_types::options::{close, open};
use ferrymq_types::{mqerr, DynamicKind, MqError, QueueDef, QueueKind, Reason};

/// Where a name resolves to.
pub(crate) enum Route {
    /// A queue of this queue manager (to be opened by this name).
    Local(String),
    /// Another queue manager's queue, through this transmission queue.
    Xmit(String, RemoteDest),
}

/// How a transmission queue was named, which decides the reason when it is not one.
enum XmitqRole<'a> {
    /// By the XMITQ of a remote queue definition or queue manager alias.
    Named(&'a str),
    NamedLikeQmgr,
    Default,
}

/// What a handle to another queue manager's queue may do: put (with context), and inquire on
/// a remote queue definition's own attributes.
fn remote_options_check(options: u32, name: &str, via_definition: bool) -> Result<(), MqError> {
    let mut allowed = open::OUTPUT
        | (open::CONTEXT & !open::SAVE_ALL_CONTEXT)
        | open::FAIL_IF_QUIESCING
        | open::BIND_ON_OPEN
        | open::BIND_NOT_FIXED;
    if via_definition {
        allowed |= open::INQUIRE;
    }
    if options & !allowed != 0 {
        return Err(mqerr!(
            OPTION_NOT_VALID_FOR_TYPE,
            "'{name}' is a queue of another queue manager: it can be opened for output{} only",
            if via_definition { " and inquire" } else { "" }
        ));
    }
    Ok(())
}

use crate::conn::{ConnId, Handle, RemoteDest};
use crate::message::Lsn;
use crate::queue::Queue;
use crate::records::Record;
use crate::Engine;

impl Engine {
    /// Opens a queue; returns the handle and the resolved name (the generated name of a dynamic
    /// queue created from a model).
    pub fn open(
        &mut self,
        conn: ConnId,
        name: &str,
        qmgr: &str,
        options: u32,
        dynamic_name: &str,
    ) -> Result<(u32, String, Lsn), MqError> {
        if options & !open::KNOWN != 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "open options {options:#x} include bits FerryMQ does not know"
            ));
        }
        let inputs = [
            open::INPUT_AS_Q_DEF,
            open::INPUT_SHARED,
            open::INPUT_EXCLUSIVE,
        ]
        .iter()
        .filter(|b| options & **b != 0)
        .count();
        if inputs > 1 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "open options ask for more than one kind of input on '{name}'"
            ));
        }
        if options & open::BIND_ON_OPEN != 0 && options & open::BIND_NOT_FIXED != 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "open options ask for both MQOO_BIND_ON_OPEN and MQOO_BIND_NOT_FIXED on '{name}'"
            ));
        }
        if options & open::READ_AHEAD != 0 && options & open::NO_READ_AHEAD != 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "open options ask for both MQOO_READ_AHEAD and MQOO_NO_READ_AHEAD on '{name}'"
            ));
        }
        let passes_or_sets = open::CONTEXT & !open::SAVE_ALL_CONTEXT;
        if options & passes_or_sets != 0 && options & open::OUTPUT == 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "the context options of the open of '{name}' (MQOO_PASS_*/SET_*_CONTEXT) need MQOO_OUTPUT"
            ));
        }
        if options & open::SAVE_ALL_CONTEXT != 0 && options & open::ANY_INPUT == 0 {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "MQOO_SAVE_ALL_CONTEXT on '{name}' needs an input option (MQOO_INPUT_*)"
            ));
        }
        if options & (open::ANY_INPUT | open::BROWSE | open::OUTPUT | open::INQUIRE | open::SET)
            == 0
        {
            return Err(mqerr!(
                OPTIONS_ERROR,
                "open of '{name}' names no access (input, browse, output, inquire or set)"
            ));
        }
        {
            let c = self.conn_mut(conn)?;
            if c.handles.len() as u32 >= c.max_handles {
                return Err(mqerr!(
                    HANDLE_NOT_AVAILABLE,
                    "connection already has {} handles open (MAXHANDS, crtmqm -h); close some",
                    c.max_handles
                ));
            }
        }
        // A queue of another queue manager: its transmission queue, with the destination.
        let mut remote = None;
        let mut cur = name.to_string();
        if !qmgr.is_empty() && qmgr != self.cfg.qmgr_name {
            match self.route(name, qmgr, 0)? {
                Route::Local(q) => cur = q,
                Route::Xmit(xmitq, dest) => {
                    remote_options_check(options, name, false)?;
                    remote = Some((xmitq, dest, None));
                }
            }
        }
        if remote.is_none() {
            if let Some(QueueKind::Remote {
                rname,
                rqmname,
                xmitq,
            }) = self.queues.get(&cur).map(|q| q.def.kind.clone())
            {
                let name = cur.as_str();
                if rname.is_empty() {
                    return Err(mqerr!(
                        Q_TYPE_ERROR,
                        "'{name}' is a queue manager alias (a remote queue definition with no RNAME): name it as the queue manager of a queue, not as a queue"
                    ));
                }
                let route = if !xmitq.is_empty() {
                    self.xmitq_checked(&xmitq, XmitqRole::Named(name))?;
                    Route::Xmit(
                        xmitq,
                        RemoteDest {
                            remote_q: rname,
                            remote_qmgr: rqmname,
                        },
                    )
                } else {
                    self.route(&rname, &rqmname, 0)?
                };
                match route {
                    Route::Local(q) => cur = q,
                    Route::Xmit(x, dest) => {
                        remote_options_check(options, name, true)?;
                        remote = Some((x, dest, Some(name.to_string())));
                    }
                }
            }
        }
        if let Some((xmitq, dest, via)) = remote {
            let opened = via.clone().unwrap_or_else(|| name.to_string());
            return Ok(self.open_remote(conn, xmitq, dest, via, &opened, options));
        }
        let name = cur.as_str();
        let def = self
            .queues
            .get(name)
            .map(|q| q.def.clone())
            .ok_or_else(|| {
                mqerr!(
                    UNKNOWN_OBJECT_NAME,
                    "queue '{name}' is not defined on queue manager '{}'",
                    self.cfg.qmgr_name
                )
            })?;

        let mut lsn = 0;
        let mut owns_temporary = false;
        let (queue, alias) = match &def.kind {
            QueueKind::Local => (def.name.clone(), None),
            QueueKind::Alias { target } => {
                let base = self.queues.get(target).ok_or_else(|| {
                    mqerr!(
                        UNKNOWN_ALIAS_BASE_Q,
                        "alias '{name}' resolves to '{target}', which is not defined"
                    )
                })?;
                if !base.def.holds_messages() {
                    return Err(mqerr!(
                        ALIAS_BASE_Q_TYPE_ERROR,
                        "alias '{name}' resolves to '{target}', a {} (only local queues can be a target)",
                        base.def.kind.mq_name()
                    ));
                }
                (target.clone(), Some(def.name.clone()))
            }
            QueueKind::Model { def_type } => {
                let qname = self.dynamic_queue_name(if dynamic_name.is_empty() {
                    "AMQ.*"
                } else {
                    dynamic_name
                })?;
                let mut qdef = def.clone();
                qdef.name = qname.clone();
                qdef.kind = QueueKind::Local;
                qdef.dynamic = Some(*def_type);
                qdef.times = ferrymq_types::ObjectTimes::at(self.now_hint_ms);
                if *def_type == DynamicKind::Permanent {
                    lsn = self.log_record(&Record::DefineQueue(qdef.clone()))?;
                } else {
                    owns_temporary = true;
                }
                self.queues.insert(qname.clone(), Queue::new(qdef));
                (qname, None)
            }
            QueueKind::Remote { .. } => {
                return Err(mqerr!(
                    Q_TYPE_ERROR,
                    "'{name}' is a remote queue definition that leads back to this queue manager's own remote queue definition"
                ));
            }
        };

        let q = self.queues.get_mut(&queue).expect("resolved queue exists");
        let wants_input = options & open::ANY_INPUT != 0;
        if wants_input {
            let exclusive = options & open::INPUT_EXCLUSIVE != 0;
            if q.exclusive.is_some() {
                return Err(mqerr!(
                    OBJECT_IN_USE,
                    "queue '{queue}' is open for exclusive input by another handle"
                ));
            }
            if exclusive && q.stats.open_input > 0 {
                return Err(mqerr!(
                    OBJECT_IN_USE,
                    "queue '{queue}' cannot be opened for exclusive input: {} handle(s) have it open for input",
                    q.stats.open_input
                ));
            }
        }
        let c = self.conns.get_mut(&conn).expect("checked above");
        let hobj = c.next_hobj;
        c.next_hobj = c.next_hobj.wrapping_add(1).max(1);
        if wants_input {
            q.stats.open_input += 1;
            if options & open::INPUT_EXCLUSIVE != 0 {
                q.exclusive = Some((conn, hobj));
            }
        }
        if options & open::OUTPUT != 0 {
            q.stats.open_output += 1;
        }
        c.handles.insert(
            hobj,
            Box::new(Handle {
                queue: queue.clone(),
                opened_name: def.name.clone(),
                alias,
                options,
                browse_cursor: None,
                owns_temporary,
                groups: Default::default(),
                saved_context: None,
                remote: None,
                topic: None,
                publications: 0,
                last_publication_ms: 0,
            }),
        );
        Ok((hobj, queue, lsn))
    }

    /// Opens a handle that puts to transmission queue `xmitq` for `dest`, opened as `opened`
    /// (through the remote queue definition `via`, if any).
    fn open_remote(
        &mut self,
        conn: ConnId,
        xmitq: String,
        dest: RemoteDest,
        via: Option<String>,
        opened: &str,
        options: u32,
    ) -> (u32, String, Lsn) {
        let c = self.conns.get_mut(&conn).expect("checked by the caller");
        let hobj = c.next_hobj;
        c.next_hobj = c.next_hobj.wrapping_add(1).max(1);
        c.handles.insert(
            hobj,
            Box::new(Handle {
                queue: xmitq.clone(),
                opened_name: opened.to_string(),
                alias: via,
                options,
                browse_cursor: None,
                owns_temporary: false,
                groups: Default::default(),
                saved_context: None,
                remote: Some(Box::new(dest)),
                topic: None,
                publications: 0,
                last_publication_ms: 0,
            }),
        );
        if options & open::OUTPUT != 0 {
            if let Some(q) = self.queues.get_mut(&xmitq) {
                q.stats.open_output += 1;
            }
        }
        (hobj, xmitq, 0)
    }

    /// How queue `remote_q` of queue manager `remote_qmgr` is reached, as MQ resolves a queue
    /// manager name: this queue manager itself; a queue manager alias (a remote queue definition
    /// named like it, with no RNAME); a transmission queue named like it; the default
    /// transmission queue (DEFXMITQ).
    pub(crate) fn route(
        &self,
        remote_q: &str,
        remote_qmgr: &str,
        depth: u32,
    ) -> Result<Route, MqError> {
        if remote_qmgr.is_empty() || remote_qmgr == self.cfg.qmgr_name {
            return Ok(Route::Local(remote_q.to_string()));
        }
        let dest = |qmgr: &str| RemoteDest {
            remote_q: remote_q.to_string(),
            remote_qmgr: qmgr.to_string(),
        };
        if let Some(QueueKind::Remote {
            rname,
            rqmname,
            xmitq,
        }) = self.queues.get(remote_qmgr).map(|q| &q.def.kind)
        {
            if rname.is_empty() && depth == 0 {
                if !xmitq.is_empty() {
                    self.xmitq_checked(xmitq, XmitqRole::Named(remote_qmgr))?;
                    return Ok(Route::Xmit(xmitq.clone(), dest(rqmname)));
                }
                return self.route(remote_q, rqmname, depth + 1);
            }
        }
        if let Some(q) = self.queues.get(remote_qmgr) {
            if !matches!(q.def.kind, QueueKind::Remote { .. }) {
                self.xmitq_checked(remote_qmgr, XmitqRole::NamedLikeQmgr)?;
                return Ok(Route::Xmit(remote_qmgr.to_string(), dest(remote_qmgr)));
            }
        }
        let def_xmitq = self
            .attrs
            .other
            .get("DEFXMITQ")
            .map(|s| s.trim())
            .unwrap_or("");
        if !def_xmitq.is_empty() {
            self.xmitq_checked(def_xmitq, XmitqRole::Default)?;
            return Ok(Route::Xmit(def_xmitq.to_string(), dest(remote_qmgr)));
        }
        Err(mqerr!(
            UNKNOWN_REMOTE_Q_MGR,
            "no route to queue manager '{remote_qmgr}': define a transmission queue named like it (DEFINE QLOCAL('{remote_qmgr}') USAGE(XMITQ)), a queue manager alias, or the queue manager's DEFXMITQ"
        ))
    }

    /// Checks that `name` is a local queue with USAGE(XMITQ), with the reason MQ gives for the
    /// way it was named.
    fn xmitq_checked(&self, name: &str, role: XmitqRole<'_>) -> Result<(), MqError> {
        let (unknown, wrong_type, wrong_usage, how) = match role {
            XmitqRole::Named(by) => (
                Reason::UNKNOWN_XMIT_Q,
                Reason::XMIT_Q_TYPE_ERROR,
                Reason::XMIT_Q_USAGE_ERROR,
                format!("the XMITQ of '{by}'"),
            ),
            XmitqRole::NamedLikeQmgr => (
                Reason::UNKNOWN_XMIT_Q,
                Reason::XMIT_Q_TYPE_ERROR,
                Reason::XMIT_Q_USAGE_ERROR,
                "the transmission queue named like the queue manager".to_string(),
            ),
            XmitqRole::Default => (
                Reason::UNKNOWN_DEF_XMIT_Q,
                Reason::DEF_XMIT_Q_TYPE_ERROR,
                Reason::DEF_XMIT_Q_USAGE_ERROR,
                "the queue manager's DEFXMITQ".to_string(),
            ),
        };
        let Some(q) = self.queues.get(name) else {
            return Err(MqError::new(
                unknown,
                format!("{how}, '{name}', is not defined"),
            ));
        };
        if !q.def.holds_messages() {
            return Err(MqError::new(
                wrong_type,
                format!(
                    "{how}, '{name}', is a {}, not a local queue",
                    q.def.kind.mq_name()
                ),
            ));
        }
        if !q.def.is_xmitq {
            return Err(MqError::new(
                wrong_usage,
                format!("{how}, '{name}', is not a transmission queue: ALTER QLOCAL('{name}') USAGE(XMITQ)"),
            ));
        }
        Ok(())
    }

    /// Builds a dynamic queue name from a pattern whose trailing '*' is replaced by 16 hex digits
    /// unique to this queue manager: this run's random instance id plus a counter. A counter alone
    /// would start again after a restart or an HA failover and repeat the names of permanent
    /// dynamic queues that still exist (MQRC_OBJECT_ALREADY_EXISTS); the instance id differs in
    /// every run of every instance. A name that happens to exist already is skipped.
    pub(crate) fn dynamic_queue_name(&mut self, pattern: &str) -> Result<String, MqError> {
        let Some(prefix) = pattern.strip_suffix('*') else {
            ferrymq_types::objects::validate_object_name(pattern)
                .map_err(|e| mqerr!(DYNAMIC_Q_NAME_ERROR, "dynamic queue name: {e}"))?;
            if self.queues.contains_key(pattern) {
                return Err(mqerr!(
                    OBJECT_ALREADY_EXISTS,
                    "dynamic queue name '{pattern}' is already in use"
                ));
            }
            return Ok(pattern.to_string());
        };
        let room = ferrymq_types::limits::OBJECT_NAME_LEN_MAX.saturating_sub(prefix.len());
        for _ in 0..64 {
            self.id_counter += 1;
            let suffix = format!(
                "{:016X}",
                self.cfg.instance_id.wrapping_add(self.id_counter)
            );
            let name = format!("{prefix}{}", &suffix[suffix.len().saturating_sub(room)..]);
            ferrymq_types::objects::validate_object_name(&name)
                .map_err(|e| mqerr!(DYNAMIC_Q_NAME_ERROR, "dynamic queue name: {e}"))?;
            if !self.queues.contains_key(&name) {
                return Ok(name);
            }
        }
        Err(mqerr!(
            DYNAMIC_Q_NAME_ERROR,
            "no unused dynamic queue name starts with '{prefix}': the prefix leaves {room} characters for the unique part; use a shorter prefix"
        ))
    }

    /// Closes a handle (MQCLOSE). Closing the handle that created a temporary dynamic queue deletes
    /// it; `close::DELETE`/`DELETE_PURGE` delete a permanent dynamic queue.
    pub fn close(
        &mut self,
        conn: ConnId,
        hobj: u32,
        options: u32,
        now_ms: u64,
    ) -> Result<Lsn, MqError> {
        if self.is_sub_handle(conn, hobj) {
            return self.close_sub(conn, hobj, options, now_ms);
        }
        let h = self.handle(conn, hobj)?.clone();
        let delete = options & (close::DELETE | close::DELETE_PURGE) != 0;
        let purge = options & close::DELETE_PURGE != 0;
        let dynamic = self.queues.get(&h.queue).and_then(|q| q.def.dynamic);
        if delete && dynamic.is_none() {
            return Err(mqerr!(
                OPTION_NOT_VALID_FOR_TYPE,
                "'{}' is not a dynamic queue; MQCO_DELETE applies only to those",
                h.queue
            ));
        }
        if delete && !purge {
            if let Some(q) = self.queues.get(&h.queue) {
                if q.depth() > 0 || q.uncommitted_puts > 0 {
                    return Err(mqerr!(
                        Q_NOT_EMPTY,
                        "dynamic queue '{}' still holds {} message(s); use MQCO_DELETE_PURGE",
                        h.queue,
                        q.depth()
                    ));
                }
            }
        }
        for w in self.waiters.of_handle(conn, hobj) {
            self.waiters.remove(w);
            if let Some(c) = self.conns.get_mut(&conn) {
                if c.waiting == Some(w) {
                    c.waiting = None;
                }
            }
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.consumers.remove(&hobj);
        }
        self.conns
            .get_mut(&conn)
            .expect("checked")
            .handles
            .remove(&hobj);
        if let Some(q) = self.queues.get_mut(&h.queue) {
            if h.options & ferrymq_types::options::open::ANY_INPUT != 0 {
                q.stats.open_input = q.stats.open_input.saturating_sub(1);
            }
            if h.options & ferrymq_types::options::open::OUTPUT != 0 {
                q.stats.open_output = q.stats.open_output.saturating_sub(1);
            }
            if q.exclusive == Some((conn, hobj)) {
                q.exclusive = None;
            }
        }
        let mut lsn = 0;
        if h.owns_temporary || (delete && dynamic.is_some()) {
            lsn = self.remove_queue(&h.queue)?;
        }
        Ok(lsn)
    }

    /// Deletes a queue and everything on it, failing waiting getters with MQRC_Q_DELETED. Logs the
    /// deletion unless the queue was temporary (never logged in the first place).
    pub(crate) fn remove_queue(&mut self, name: &str) -> Result<Lsn, MqError> {
        let temporary = self
            .queues
            .get(name)
            .is_some_and(|q| q.def.dynamic == Some(DynamicKind::Temporary));
        let lsn = if temporary {
            0
        } else {
            self.log_record(&Record::DeleteQueue(name.to_string()))?
        };
        self.queues.remove(name);
        for w in self.waiters.on_queue(name) {
            if let Some(w) = self.waiters.remove(w) {
                if let Some(c) = self.conns.get_mut(&w.conn) {
                    if c.waiting == Some(w.id) {
                        c.waiting = None;
                    }
                    if w.consumer {
                        c.consumers.remove(&w.hobj);
                    }
                }
                self.deliveries.push(crate::Delivery {
                    conn: w.conn,
                    token: w.token,
                    result: Err(mqerr!(
                        Q_DELETED,
                        "queue '{name}' was deleted while the get waited"
                    )),
                    wait_lsn: lsn,
                });
            }
        }
        Ok(lsn)
    }

    /// Encodes and appends a record that carries no message body.
    pub(crate) fn log_record(&mut self, rec: &Record) -> Result<Lsn, MqError> {
        let mut buf = bytes::BytesMut::with_capacity(128);
        let kind = rec.encode_small(&mut buf);
        let lsn = self.log.append(kind, &[&buf])?;
        self.admin_lsn = self.admin_lsn.max(lsn);
        Ok(lsn)
    }

    /// The end of the last administrative record this engine logged (0: none since it was
    /// made). A reply that reveals definitions — an MQSC command's, even a DISPLAY's — waits
    /// until the log is durable up to here, so no administrator sees a change a crash or an HA
    /// failover could take back.
    pub fn admin_lsn(&self) -> Lsn {
        self.admin_lsn
    }

    /// The definition of a queue, if it exists.
    pub fn queue_def(&self, name: &str) -> Option<&QueueDef> {
        self.queues.get(name).map(|q| &q.def)
    }

    pub(crate) fn no_such_queue(&self, name: &str) -> MqError {
        MqError::new(
            Reason::UNKNOWN_OBJECT_NAME,
            format!(
                "queue '{name}' is not defined on queue manager '{}'",
                self.cfg.qmgr_name
            ),
        )
    }
}
