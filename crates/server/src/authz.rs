//! Object authorities enforced: who a connection is (its user and groups, resolved once when it
//! connects), what each MQI call and MQSC command needs (MQ's mapping of open options and
//! commands to authorities), and the answer from the authority records the engine holds
//! (compiled by `ferrymq_security::oam`, rebuilt only when the records change).
//!
//! Authority is decided when a connection connects, opens an object, puts one message (MQPUT1)
//! or runs an MQSC command; a handle keeps what its open was granted, so puts, gets and inquiries
//! on it cost nothing here, as in MQ. The queue manager's own OS user and the members of the
//! administrators' group (qm.ini `Security:AdminGroup`, default `mqm`) may do everything. A
//! client that asserts no user runs as the queue manager's user, as an MQ server-connection
//! channel with a blank MCAUSER runs as its MCA's.

use std::sync::Arc;

use ferrymq_engine::Engine;
use ferrymq_mqsc::{Command, DisplayWhat, ObjType};
use ferrymq_security::oam::{Authorities, Oam, Principal};
use ferrymq_security::users::os;
use ferrymq_types::options::{open, pmo};
use ferrymq_types::{MqError, Reason};

/// Who a connection or command runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Who {
    pub principal: Principal,
    /// The queue manager's own user, or a member of the administrators' group: never checked.
    pub admin: bool,
}

impl Who {
    fn describe(&self) -> String {
        format!(
            "user '{}' (groups: {})",
            self.principal.user,
            if self.principal.groups.is_empty() {
                "none".to_string()
            } else {
                self.principal.groups.join(", ")
            }
        )
    }
}

/// The queue manager's authority state: its own user, the administrators' group, and the
/// compiled records with the engine's objects version they were built from.
#[derive(Debug)]
pub struct Authz {
    qm_user: String,
    compiled: Option<(u64, Arc<Oam>)>,
}

impl Default for Authz {
    fn default() -> Authz {
        Authz {
            qm_user: os::current_user(),
            compiled: None,
        }
    }
}

/// Who `user` is, for a queue manager run by `qm_user` whose administrators' group is
/// `admin_group`: the queue manager's user when empty; groups from the operating system.
pub fn resolve(qm_user: &str, admin_group: &str, user: &str, store_groups: &[String]) -> Who {
    let user = if user.is_empty() { qm_user } else { user };
    let mut groups = os::groups_of(user);
    for g in store_groups {
        if !groups.contains(g) {
            groups.push(g.clone());
        }
    }
    let admin = user == qm_user || groups.iter().any(|g| g == admin_group);
    Who {
        principal: Principal {
            user: user.to_string(),
            groups,
        },
        admin,
    }
}

impl Authz {
    /// Who `user` is (see [`resolve`]).
    pub fn resolve(&self, admin_group: &str, user: &str, store_groups: &[String]) -> Arc<Who> {
        Arc::new(resolve(&self.qm_user, admin_group, user, store_groups))
    }

    /// The compiled records, rebuilt if the engine's objects changed since.
    pub fn oam(&mut self, engine: &Engine) -> Arc<Oam> {
        let v = engine.objects_version();
        match &self.compiled {
            Some((built, oam)) if *built == v => oam.clone(),
            _ => {
                let oam = Arc::new(Oam::build(ferrymq_admin::authority_records(engine)));
                self.compiled = Some((v, oam.clone()));
                oam
            }
        }
    }

    /// Checks that `who` holds `needed` on the object; a refusal is logged and returned as
    /// MQRC_NOT_AUTHORIZED with a text naming who, what, which object and what was missing.
    pub fn check(
        &mut self,
        engine: &Engine,
        who: &Who,
        what: &str,
        objtype: &str,
        name: &str,
        needed: Authorities,
    ) -> Result<(), MqError> {
        if who.admin || needed.is_empty() {
            return Ok(());
        }
        let qm = engine.qmgr_name();
        let name = if objtype == "QMGR" { qm } else { name };
        match self
            .oam(engine)
            .check(&who.principal, objtype, name, needed)
        {
            Ok(_) => Ok(()),
            Err(denied) => {
                let text = format!(
                    "{} is not authorized to {what} on {objtype} '{name}' of queue manager '{qm}': {denied}. Grant it with: ferrymq setmqaut -m {qm} -t {} {}-p {} +{}",
                    who.describe(),
                    setmqaut_type(objtype),
                    if objtype == "QMGR" {
                        String::new()
                    } else {
                        format!("-n '{name}' ")
                    },
                    who.principal.user,
                    denied
                        .missing
                        .names()
                        .iter()
                        .map(|a| a.to_ascii_lowercase())
                        .collect::<Vec<_>>()
                        .join(" +")
                );
                crate::qm_log!(crate::errlog::ids::NOT_AUTHORIZED, "{text}");
                Err(MqError::new(Reason::NOT_AUTHORIZED, text))
            }
        }
    }
}

/// setmqaut's `-t` word for an OBJTYPE.
fn setmqaut_type(objtype: &str) -> String {
    match objtype {
        "QUEUE" => "queue".into(),
        "QMGR" => "qmgr".into(),
        "CHANNEL" => "channel".into(),
        t => t.to_ascii_lowercase(),
    }
}

/// The authorities an MQOPEN with these options needs on the object, and the options named.
pub fn open_needs(options: u32) -> (Authorities, String) {
    let table: &[(u32, &str, Authorities)] = &[
        (open::INPUT_AS_Q_DEF, "INPUT_AS_Q_DEF", Authorities::GET),
        (open::INPUT_SHARED, "INPUT_SHARED", Authorities::GET),
        (open::INPUT_EXCLUSIVE, "INPUT_EXCLUSIVE", Authorities::GET),
        (open::BROWSE, "BROWSE", Authorities::BROWSE),
        (open::OUTPUT, "OUTPUT", Authorities::PUT),
        (open::INQUIRE, "INQUIRE", Authorities::INQ),
        (open::SET, "SET", Authorities::SET),
        (
            open::PASS_IDENTITY_CONTEXT,
            "PASS_IDENTITY_CONTEXT",
            Authorities::PASSID,
        ),
        (
            open::PASS_ALL_CONTEXT,
            "PASS_ALL_CONTEXT",
            Authorities::PASSALL,
        ),
        (
            open::SET_IDENTITY_CONTEXT,
            "SET_IDENTITY_CONTEXT",
            Authorities::SETID,
        ),
        (
            open::SET_ALL_CONTEXT,
            "SET_ALL_CONTEXT",
            Authorities::SETALL,
        ),
    ];
    let mut needed = Authorities::NONE;
    let mut names = Vec::new();
    for (bit, name, a) in table {
        if options & bit != 0 {
            needed = needed | *a;
            names.push(*name);
        }
    }
    (needed, names.join("+"))
}

/// The authorities an MQPUT1 with this put's context option needs (PUT and the context one).
pub fn put1_needs(context: u32) -> Authorities {
    Authorities::PUT
        | match context {
            pmo::PASS_IDENTITY_CONTEXT => Authorities::PASSID,
            pmo::PASS_ALL_CONTEXT => Authorities::PASSALL,
            pmo::SET_IDENTITY_CONTEXT => Authorities::SETID,
            pmo::SET_ALL_CONTEXT => Authorities::SETALL,
            _ => Authorities::NONE,
        }
}

fn objtype_of(kind: ObjType) -> &'static str {
    match kind {
        ObjType::QLocal | ObjType::QAlias | ObjType::QModel | ObjType::QRemote => "QUEUE",
        ObjType::Channel => "CHANNEL",
        ObjType::Listener => "LISTENER",
        ObjType::AuthInfo => "AUTHINFO",
        ObjType::Topic => "TOPIC",
    }
}

/// What an MQSC command needs: (object type, object name, authorities) for each object it
/// touches. The name of a QMGR check is the queue manager's own. A DISPLAY of queues, queue
/// status or objects by a generic name needs nothing up front: it shows only the objects the
/// user may display (DSP on each). A DEFINE with LIKE reads the LIKE object's attributes, so it
/// needs DSP on that object besides CRT.
pub fn mqsc_needs(cmd: &Command) -> Vec<(&'static str, String, Authorities)> {
    let qmgr = |a| vec![("QMGR", String::new(), a)];
    match cmd {
        Command::Display {
            what: DisplayWhat::Queue | DisplayWhat::QStatus | DisplayWhat::Object(_),
            name,
            ..
        } if name.contains('*') => Vec::new(),
        Command::Define {
            kind, name, like, ..
        } => {
            let mut v = vec![(objtype_of(*kind), name.clone(), Authorities::CRT)];
            if let Some(l) = like {
                v.push((objtype_of(*kind), l.clone(), Authorities::DSP));
            }
            v
        }
        Command::Alter { kind, name, .. } => {
            vec![(objtype_of(*kind), name.clone(), Authorities::CHG)]
        }
        Command::Delete { kind, name, .. } => {
            vec![(objtype_of(*kind), name.clone(), Authorities::DLT)]
        }
        Command::Clear { name } => vec![("QUEUE", name.clone(), Authorities::CLR)],
        Command::Display { what, name, .. } => match what {
            DisplayWhat::Queue | DisplayWhat::QStatus => {
                vec![("QUEUE", name.clone(), Authorities::DSP)]
            }
            DisplayWhat::Object(t) => vec![(objtype_of(*t), name.clone(), Authorities::DSP)],
            DisplayWhat::Qmgr
            | DisplayWhat::Conn
            | DisplayWhat::ChStatus
            | DisplayWhat::LsStatus
            | DisplayWhat::QmStatus
            | DisplayWhat::Sub
            | DisplayWhat::SbStatus
            | DisplayWhat::TpStatus
            | DisplayWhat::PubSub => qmgr(Authorities::DSP),
        },
        Command::StartListener { name, .. } | Command::StopListener { name, .. } => {
            vec![("LISTENER", name.clone(), Authorities::CTRL)]
        }
        Command::StartChannel { name, .. }
        | Command::StopChannel { name, .. }
        | Command::PingChannel { name, .. } => {
            vec![("CHANNEL", name.clone(), Authorities::CTRL)]
        }
        Command::ResolveChannel { name, .. } | Command::ResetChannel { name, .. } => {
            vec![("CHANNEL", name.clone(), Authorities::CTRLX)]
        }
        Command::PingQmgr => qmgr(Authorities::CTRL),
        // Discarding expired messages changes no definition: control of the queue manager.
        Command::RefreshQmgrExpiry { .. } => qmgr(Authorities::CTRL),
        // Subscriptions are administered as part of the queue manager.
        Command::AlterQmgr { .. }
        | Command::DefineSub { .. }
        | Command::DeleteSub { .. }
        | Command::RefreshSecurity { .. }
        | Command::SetChlAuth(_)
        | Command::SetAuthRec(_)
        | Command::DeleteAuthRec(_) => qmgr(Authorities::CHG),
        Command::DisplayChlAuth { .. }
        | Command::DisplayAuthRec(_)
        | Command::DisplayEntAuth(_) => qmgr(Authorities::DSP),
        Command::End => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_options_map_to_mq_authorities() {
        let (a, names) = open_needs(open::INPUT_SHARED | open::BROWSE | open::INQUIRE);
        assert_eq!(a, Authorities::GET | Authorities::BROWSE | Authorities::INQ);
        assert_eq!(names, "INPUT_SHARED+BROWSE+INQUIRE");
        assert_eq!(
            open_needs(open::OUTPUT | open::SET_ALL_CONTEXT).0,
            Authorities::PUT | Authorities::SETALL
        );
        assert_eq!(open_needs(open::FAIL_IF_QUIESCING).0, Authorities::NONE);
        assert_eq!(
            put1_needs(pmo::SET_IDENTITY_CONTEXT),
            Authorities::PUT | Authorities::SETID
        );
    }

    #[test]
    fn mqsc_commands_map_to_mq_authorities() {
        let need = |t: &str| {
            mqsc_needs(&ferrymq_mqsc::parse(t).unwrap())
                .into_iter()
                .next()
        };
        assert_eq!(
            need("DEFINE QLOCAL(A.B)"),
            Some(("QUEUE", "A.B".into(), Authorities::CRT))
        );
        assert_eq!(
            mqsc_needs(&ferrymq_mqsc::parse("DEFINE QLOCAL(A.C) LIKE(A.B)").unwrap()),
            vec![
                ("QUEUE", "A.C".into(), Authorities::CRT),
                ("QUEUE", "A.B".into(), Authorities::DSP)
            ]
        );
        assert_eq!(
            need("DISPLAY QLOCAL(Q1)"),
            Some(("QUEUE", "Q1".into(), Authorities::DSP))
        );
        assert_eq!(
            need("DISPLAY QMGR"),
            Some(("QMGR", String::new(), Authorities::DSP))
        );
        assert_eq!(
            need("SET AUTHREC OBJTYPE(QMGR) GROUP(g) AUTHADD(CONNECT)"),
            Some(("QMGR", String::new(), Authorities::CHG))
        );
        assert_eq!(need("DISPLAY QLOCAL(APP.*)"), None);
        assert_eq!(need("DISPLAY QSTATUS(APP.*)"), None);
        assert_eq!(
            need("CLEAR QLOCAL(Q)"),
            Some(("QUEUE", "Q".into(), Authorities::CLR))
        );
    }
}
