//! The HA side of a running instance: its replica, proposals and engine, and the status rows
//! `dspmq -o ha` shows.

use super::*;

/// The HA side of a running instance, for status and the role monitor.
pub struct HaHandle {
    pub cfg: HaConfig,
    pub replica: Replica,
    pub props: Arc<Proposals>,
    pub app: Arc<HaApp>,
    /// A DR primary's lag gate, subscribed to the proposals' commits.
    pub dr_gate: Option<Arc<Gate>>,
    /// Set once this instance is the active one (it stays set until the process restarts).
    pub active: AtomicBool,
    /// Set when the instance is being ended (endmqm): the monitor stops acting.
    pub ending: AtomicBool,
    pub started: Instant,
}

impl HaHandle {
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// One row of `NAME=value` pairs per instance, as this instance sees the group.
    ///
    /// - `REACHABLE`: heard from within [`ferrymq_replication::REACH_WINDOW`] with no failed
    ///   call since (the active instance hears from every replica; a replica only from the
    ///   active instance, so it says `UNKNOWN` of the others); `REACHDATE`/`REACHTIME`/`REACHSECS`
    ///   say since when (the start of the contact, or the last contact once unreachable). An
    ///   instance this one cannot reach has `ROLE(Unknown)`.
    /// - `LOGINDEX`, `LAGENTRIES`, `BACKLOG`, `BEHIND`: the last entry it is known to hold, the
    ///   entries and bytes of log after it, and how long ago the first of those was appended
    ///   (its delay; 0 when it lacks nothing). `UNKNOWN` while the active instance has not yet
    ///   matched its log (one that died before this instance became active).
    /// - `INSYNC(YES)`: reachable, and it lacks nothing or only entries appended less than
    ///   [`INSYNC_MS`] ago — a replica one batch behind under load is in sync; a replica that
    ///   stops answering or falls a second behind is not.
    pub fn status_rows(&self) -> Vec<Vec<(String, String)>> {
        let m = self.replica.metrics();
        let me = self.cfg.local_id();
        let leader = m.current_leader;
        let leading = m.state == ServerState::Leader;
        let last = m.last_log_index.unwrap_or(0);
        let contacts = self.replica.contacts();
        let mut rows = Vec::new();
        for (i, (name, addr)) in self.cfg.instances.iter().enumerate() {
            let id = i as u64 + 1;
            let local = id == me;
            // (reachable, since when); None when this instance cannot know.
            let reach = if local {
                Some((true, Some(self.started)))
            } else if leading || leader == Some(id) {
                let c = contacts.get(id).unwrap_or_default();
                Some((c.reachable(), c.since()))
            } else {
                None
            };
            let reachable = reach.map(|r| r.0);
            let role = if reachable == Some(false) {
                "Unknown"
            } else if leader == Some(id) {
                if local && !self.is_active() {
                    "Starting"
                } else {
                    "Active"
                }
            } else {
                "Replica"
            };
            let mut row = vec![
                ("INSTANCE".to_string(), name.clone()),
                ("ROLE".to_string(), role.to_string()),
                ("REPLADDR".to_string(), addr.clone()),
            ];
            if local {
                row.push(("LOCAL".into(), "YES".into()));
            }
            if self.app.preferred().as_deref() == Some(name.as_str()) {
                row.push(("PREFERRED".into(), "YES".into()));
            }
            match reach {
                Some((up, since)) => {
                    row.push(("REACHABLE".into(), yes_no(up).into()));
                    if let Some(t) = since {
                        let ms = now_ms().saturating_sub(t.elapsed().as_millis() as u64);
                        let (d, tm) = crate::listeners::fmt_date_time(ms);
                        row.push(("REACHDATE".into(), d));
                        row.push(("REACHTIME".into(), tm));
                        row.push((
                            "REACHSECS".into(),
                            format!("{:.3}", t.elapsed().as_secs_f64()),
                        ));
                    }
                }
                None => row.push(("REACHABLE".into(), "UNKNOWN".into())),
            }
            // The last entry the instance is known to hold.
            let matched = if leading {
                if local {
                    Some(Some(last))
                } else {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id))
                        .map(|l| l.map(|l| l.index))
                }
            } else if local {
                Some(m.last_applied.map(|l| l.index))
            } else {
                None
            };
            // A replica's own row: in contact with the active instance, or not.
            let connected = if local && !leading {
                leader
                    .filter(|&l| l != me)
                    .and_then(|l| contacts.get(l))
                    .is_some_and(|c| c.reachable())
            } else {
                reachable == Some(true)
            };
            match (matched, reach) {
                (Some(Some(matched)), Some(_)) => {
                    let behind = if matched >= last {
                        Duration::ZERO
                    } else {
                        self.replica
                            .storage()
                            .appended_after(matched)
                            .map_or(Duration::ZERO, |t| t.elapsed())
                    };
                    let bytes = if matched >= last {
                        Some(0)
                    } else {
                        self.replica.storage().bytes_after(matched)
                    };
                    let insync = connected && behind <= Duration::from_millis(INSYNC_MS);
                    row.push(("INSYNC".into(), yes_no(insync).into()));
                    row.push(("LOGINDEX".into(), matched.to_string()));
                    row.push((
                        "LAGENTRIES".into(),
                        last.saturating_sub(matched).to_string(),
                    ));
                    row.push((
                        "BACKLOG".into(),
                        bytes.map_or("SNAPSHOT".into(), |b| b.to_string()),
                    ));
                    row.push(("BEHIND".into(), format!("{:.3}", behind.as_secs_f64())));
                }
                (Some(_), Some(_)) => {
                    row.push(("INSYNC".into(), "NO".into()));
                    for k in ["LOGINDEX", "LAGENTRIES", "BACKLOG", "BEHIND"] {
                        row.push((k.into(), "UNKNOWN".into()));
                    }
                }
                _ => row.push(("INSYNC".into(), "UNKNOWN".into())),
            }
            rows.push(row);
        }
        rows
    }

    /// The preferred instance to hand the active role to, once it has been in sync for a second.
    pub(super) fn switch_over_due(
        &self,
        m: &ferrymq_replication::Metrics,
        in_sync_since: &mut Option<Instant>,
    ) -> Option<String> {
        let pref = self.app.preferred()?;
        let id = self.cfg.node_id(&pref)?;
        if id == self.cfg.local_id() {
            *in_sync_since = None;
            return None;
        }
        let last = m.last_log_index.unwrap_or(0);
        let matched = m
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).copied().flatten())
            .map_or(0, |l| l.index);
        if matched < last {
            *in_sync_since = None;
            return None;
        }
        let since = *in_sync_since.get_or_insert_with(Instant::now);
        (since.elapsed() >= Duration::from_secs(1)).then_some(pref)
    }

    /// Records (through the group's log, from any instance) which instance should be active
    /// whenever it is available; `None` clears the preference.
    pub async fn set_preferred(&self, name: Option<&str>) -> Result<String, String> {
        if let Some(n) = name {
            if self.cfg.node_id(n).is_none() {
                return Err(format!(
                    "'{n}' is not an instance of this group ({})",
                    self.cfg
                        .instances
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let rec = AppRecord {
            kind: KIND_CONTROL,
            payload: match name {
                Some(n) => format!("PREFER {n}"),
                None => "PREFER".to_string(),
            }
            .into_bytes(),
        };
        self.replica
            .write_anywhere(rec)
            .await
            .map_err(|e| format!("the group did not record it: {e}"))?;
        Ok(match name {
            Some(n) => {
                format!("instance '{n}' is now preferred; it becomes active once it is in sync")
            }
            None => "no instance is preferred now".to_string(),
        })
    }

    /// Extra QMSTATUS rows of an HA instance.
    pub fn qmstatus_rows(&self) -> Vec<(String, String)> {
        let m = self.replica.metrics();
        let (cap, _) = self.replica.storage().geometry();
        let used = self.replica.storage().used_bytes().unwrap_or(0);
        vec![
            ("HAINST".into(), self.cfg.local.clone()),
            (
                "HAROLE".into(),
                if self.is_active() {
                    "ACTIVE"
                } else {
                    "REPLICA"
                }
                .into(),
            ),
            (
                "HALEADER".into(),
                m.current_leader
                    .map_or("NONE".into(), |l| self.cfg.name_of(l).to_string()),
            ),
            ("HATERM".into(), m.current_term.to_string()),
            ("LOGUTIL".into(), (used * 100 / cap.max(1)).to_string()),
            ("CURRLOG".into(), m.last_log_index.unwrap_or(0).to_string()),
        ]
    }
}
