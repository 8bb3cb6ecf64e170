//! What MQSC commands ask of the server itself rather than of the engine: starting and stopping
//! listeners, and the status of listeners, channels (sockets) and the queue manager.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferrymq_admin::ServerOps;
use ferrymq_types::{MqError, ObjectDef};

use crate::listeners;
use crate::qmgr::Shared;

pub struct Ops<'a> {
    pub shared: &'a Arc<Shared>,
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
        self.shared.control.lock().channel_rows()
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

    fn refresh_security(&mut self, type_: &str) -> Result<String, MqError> {
        if type_ == "SSL" || type_ == "ALL" {
            // The TLS key repository is read again for connections accepted from now on.
            let tls = self.shared.tls.refresh().map_err(|e| {
                MqError::new(
                    ferrymq_types::Reason::SSL_INITIALIZATION_ERROR,
                    format!("REFRESH SECURITY TYPE({type_}): {e}"),
                )
            })?;
            return Ok(format!("security refreshed (TYPE({type_})): {tls}"));
        }
        Ok(format!(
            "security refreshed (TYPE({type_})); connection authentication is not enforced by this release, so nothing else changed"
        ))
    }
}
