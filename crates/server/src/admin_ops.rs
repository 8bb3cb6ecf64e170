//! What MQSC commands ask of the server itself rather than of the engine: starting and stopping
//! listeners, and the status of listeners, channels (sockets) and the queue manager.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferrymq_admin::ServerOps;
use ferrymq_types::{MqError, ObjectDef};

use crate::authz::Who;
use crate::listeners;
use crate::qmgr::Shared;
use ferrymq_security::oam::{Authorities, Oam};

pub struct Ops<'a> {
    pub shared: &'a Arc<Shared>,
    /// Who runs the command and the records in force, when a generic DISPLAY must leave out
    /// what that user may not display (None: the administrator's AutoConfig, everything).
    pub viewer: Option<(Arc<Who>, Arc<Oam>)>,
}

impl ServerOps for Ops<'_> {
    fn start_listener(&mut self, def: &ObjectDef) -> Result<String, MqError> {
        let (addr, port) = listeners::address_of(self.shared, def);
        listeners::start(self.shared, &def.name, &addr, port)
    }

    fn stop_listener(&mut self, name: &str) -> Result<String, MqError> {
        listeners::stop(self.shared, name)
    }

    fn listener_status(&self) -> Vec<Vec<(String, String)>> {
        self.shared.control.lock().listener_rows()
    }

    fn channel_status(&self) -> Vec<Vec<(String, String)>> {
        let mut rows = self.shared.control.lock().channel_rows();
        rows.extend(self.shared.channels.rows());
        rows
    }

    fn start_channel(&mut self, def: &ObjectDef) -> Result<String, MqError> {
        crate::channels::start(self.shared, def)
    }

    fn stop_channel(&mut self, name: &str, force: bool, inactive: bool) -> Result<String, MqError> {
        crate::channels::stop(self.shared, name, force, inactive)
    }

    fn qmgr_status(&self) -> Vec<(String, String)> {
        let ctl = self.shared.control.lock();
        let conns: u64 = ctl
            .sockets
            .values()
            .map(|s| s.conversations.load(Ordering::Relaxed))
            .sum();
        let md = ferrymq_types::MessageDescriptor {
            put_time_ms: self.shared.started_ms,
            ..Default::default()
        };
        let (d, t) = md.put_date_time();
        let mut rows = vec![
            ("QMNAME".into(), self.shared.cfg.name.clone()),
            ("STATUS".into(), "RUNNING".into()),
            (
                "STARTDA".into(),
                format!("{}-{}-{}", &d[..4], &d[4..6], &d[6..8]),
            ),
            (
                "STARTTI".into(),
                format!("{}.{}.{}", &t[..2], &t[2..4], &t[4..6]),
            ),
            ("CONNS".into(), conns.to_string()),
            ("LOGTYPE".into(), "CIRCULAR".into()),
        ];
        if let Some(log) = &self.shared.storage.log {
            rows.extend([
                (
                    "LOGUTIL".into(),
                    (log.used_bytes() * 100 / log.capacity().max(1)).to_string(),
                ),
                ("CURRLOG".into(), log.end_lsn().to_string()),
                ("RECLOG".into(), log.checkpoint_lsn().to_string()),
            ]);
        }
        if let Some(ha) = &self.shared.ha {
            rows.extend(ha.qmstatus_rows());
        }
        rows
    }

    fn principal(&self, user: &str) -> (Vec<String>, bool) {
        let store_groups = self
            .shared
            .security
            .store()
            .get(user)
            .map(|u| u.groups.clone())
            .unwrap_or_default();
        let who = crate::authz::resolve(
            &ferrymq_security::users::os::current_user(),
            &self.shared.cfg.admin_group,
            user,
            &store_groups,
        );
        (who.principal.groups, who.admin)
    }

    fn is_admin_group(&self, group: &str) -> bool {
        group == self.shared.cfg.admin_group
    }

    fn may_display(&self, objtype: &str, name: &str) -> bool {
        match &self.viewer {
            None => true,
            Some((who, oam)) => {
                who.admin
                    || oam
                        .check(&who.principal, objtype, name, Authorities::DSP)
                        .is_ok()
            }
        }
    }

    fn refresh_security(&mut self, type_: &str) -> Result<String, MqError> {
        let mut tls = None;
        if type_ == "SSL" || type_ == "ALL" {
            // The TLS key repository is read again for connections accepted from now on.
            tls = Some(self.shared.tls.refresh().map_err(|e| {
                MqError::new(
                    ferrymq_types::Reason::SSL_INITIALIZATION_ERROR,
                    format!("REFRESH SECURITY TYPE({type_}): {e}"),
                )
            })?);
            if type_ == "SSL" {
                return Ok(format!(
                    "security refreshed (TYPE({type_})): {}",
                    tls.unwrap_or_default()
                ));
            }
        }
        // Channel authentication records and AUTHINFO objects are read at every connection; the
        // user store is read from its file again here.
        let n = self
            .shared
            .security
            .reload()
            .map_err(|e| MqError::new(ferrymq_types::Reason::RESOURCE_PROBLEM, e))?;
        Ok(format!(
            "security refreshed (TYPE({type_})): the user store holds {n} user(s); channel authentication records and AUTHINFO objects apply from the next connection{}",
            tls.map(|t| format!("; {t}")).unwrap_or_default()
        ))
    }
}
