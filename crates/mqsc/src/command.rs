//! The parsed form of one MQSC command. Parsing resolves every abbreviation and folds case, so the
//! executor (and anything else that inspects a command) deals only in canonical MQ keywords.

use crate::attrs::AttrSpec;
use crate::security::{AuthRecFilter, AuthRecSet, ChlAuthSet, EntAuthQuery};

/// The object types DEFINE, ALTER and DELETE work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjType {
    QLocal,
    QAlias,
    QModel,
    QRemote,
    Channel,
    Listener,
    AuthInfo,
    Topic,
}

impl ObjType {
    /// The canonical MQSC keyword (`QLOCAL`, `CHANNEL`, ...).
    pub fn keyword(self) -> &'static str {
        match self {
            ObjType::QLocal => "QLOCAL",
            ObjType::QAlias => "QALIAS",
            ObjType::QModel => "QMODEL",
            ObjType::QRemote => "QREMOTE",
            ObjType::Channel => "CHANNEL",
            ObjType::Listener => "LISTENER",
            ObjType::AuthInfo => "AUTHINFO",
            ObjType::Topic => "TOPIC",
        }
    }

    /// True for the four queue types, which share one name space in a queue manager.
    pub fn is_queue(self) -> bool {
        [
            ObjType::QLocal,
            ObjType::QAlias,
            ObjType::QModel,
            ObjType::QRemote,
        ]
        .contains(&self)
    }
}

/// What a DISPLAY command shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisplayWhat {
    /// DISPLAY QUEUE / Q: queues of every type (narrowed by `TYPE(...)`).
    Queue,
    /// DISPLAY QLOCAL, CHANNEL, ...: objects of one type.
    Object(ObjType),
    Qmgr,
    QStatus,
    Conn,
    ChStatus,
    LsStatus,
    QmStatus,
    /// DISPLAY SUB: subscriptions by name.
    Sub,
    /// DISPLAY SBSTATUS: subscriptions in use, with their last publication.
    SbStatus,
    /// DISPLAY TPSTATUS: a topic string's publishers, subscribers and retained publication.
    TpStatus,
    /// DISPLAY PUBSUB: the publish/subscribe engine's status.
    PubSub,
}

impl DisplayWhat {
    pub fn keyword(self) -> &'static str {
        match self {
            DisplayWhat::Queue => "QUEUE",
            DisplayWhat::Object(t) => t.keyword(),
            DisplayWhat::Qmgr => "QMGR",
            DisplayWhat::QStatus => "QSTATUS",
            DisplayWhat::Conn => "CONN",
            DisplayWhat::ChStatus => "CHSTATUS",
            DisplayWhat::LsStatus => "LSSTATUS",
            DisplayWhat::QmStatus => "QMSTATUS",
            DisplayWhat::Sub => "SUB",
            DisplayWhat::SbStatus => "SBSTATUS",
            DisplayWhat::TpStatus => "TPSTATUS",
            DisplayWhat::PubSub => "PUBSUB",
        }
    }
}

/// Which attributes a DISPLAY asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requested {
    /// Neither `ALL` nor a list: the identifying attributes only (as MQ does).
    Default,
    All,
    /// Canonical attribute names, in the order given.
    List(Vec<String>),
}

/// WHERE comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterOp {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    /// Like: equal, or a prefix match when the value ends in `*`.
    Lk,
    /// Not like.
    Nl,
}

/// `WHERE(attr op value)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// Canonical attribute name.
    pub attr: String,
    pub op: FilterOp,
    /// Folded to upper case unless it was quoted.
    pub value: String,
}

/// One attribute a DEFINE or ALTER sets, its value already checked and normalised (integers in
/// decimal, enumerated words and switches in upper case).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub attr: &'static AttrSpec,
    pub value: String,
}

/// How STOP CHANNEL ends a channel, with MQ's meanings: QUIESCE after the current batch; FORCE
/// and TERMINATE at once (a batch in doubt is resolved when the channel starts again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StopMode {
    #[default]
    Quiesce,
    Force,
    Terminate,
}

/// A parsed MQSC command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// DEFINE: create an object, starting from LIKE's attributes or the type's default object.
    Define {
        kind: ObjType,
        name: String,
        attrs: Vec<Setting>,
        like: Option<String>,
        replace: bool,
    },
    /// ALTER of a queue, channel, listener or authentication information object.
    Alter {
        kind: ObjType,
        name: String,
        attrs: Vec<Setting>,
    },
    AlterQmgr {
        attrs: Vec<Setting>,
    },
    Delete {
        kind: ObjType,
        name: String,
        purge: bool,
    },
    /// DEFINE SUB: an administrative durable subscription; attributes as written (canonical
    /// keywords), checked by the engine as a subscription made by MQSUB is.
    DefineSub {
        name: String,
        attrs: Vec<(String, String)>,
        replace: bool,
    },
    DeleteSub {
        name: String,
    },
    /// CLEAR QLOCAL: remove every message.
    Clear {
        name: String,
    },
    Display {
        what: DisplayWhat,
        /// The object name or generic pattern (trailing `*`); empty for QMGR and QMSTATUS.
        name: String,
        requested: Requested,
        where_: Option<Filter>,
        /// `TYPE(...)`, canonical (e.g. `QLOCAL`, `HANDLE`, `SVRCONN`).
        type_: Option<String>,
    },
    /// START/STOP LISTENER and CHANNEL. `ignstate` (IGNSTATE(YES)): succeed when the object is
    /// already in the state asked for, instead of failing with MQ's reason for that.
    StartListener {
        name: String,
        ignstate: bool,
    },
    StopListener {
        name: String,
        ignstate: bool,
    },
    StartChannel {
        name: String,
        ignstate: bool,
    },
    /// STOP CHANNEL [MODE(QUIESCE|FORCE|TERMINATE)] [STATUS(STOPPED|INACTIVE)].
    StopChannel {
        name: String,
        ignstate: bool,
        mode: StopMode,
        /// STATUS(INACTIVE): the channel ends but is not stopped (a message on its
        /// transmission queue starts it again).
        inactive: bool,
    },
    /// RESOLVE CHANNEL ACTION(COMMIT|BACKOUT): ends a sender's batch in doubt by hand.
    ResolveChannel {
        name: String,
        commit: bool,
    },
    /// RESET CHANNEL SEQNUM(n): the next message sequence number of the channel.
    ResetChannel {
        name: String,
        seqnum: u32,
    },
    RefreshSecurity {
        type_: String,
    },
    /// REFRESH QMGR TYPE(EXPIRY) NAME(generic queue name): discard the expired messages of the
    /// queues named now, rather than at the next expiry scan.
    RefreshQmgrExpiry {
        name: String,
    },
    /// SET CHLAUTH: add, replace or remove channel authentication records.
    SetChlAuth(ChlAuthSet),
    /// SET AUTHREC: add or remove authorities of a principal or group.
    SetAuthRec(AuthRecSet),
    DeleteAuthRec(AuthRecFilter),
    DisplayChlAuth {
        /// Profile or generic pattern.
        profile: String,
        type_: Option<String>,
        /// MATCH(RUNCHECK): which record applies to a connection attempt on channel `profile`.
        runcheck: Option<crate::security::RunCheck>,
        /// MATCH(EXACT|GENERIC|ALL) and the ADDRESS, CLNTUSER and SSLPEER filters.
        filter: crate::security::ChlAuthFilter,
    },
    DisplayAuthRec(AuthRecFilter),
    /// DISPLAY ENTAUTH: the authorities an entity holds on one object (dspmqaut).
    DisplayEntAuth(EntAuthQuery),
    PingQmgr,
    /// PING CHANNEL(name) [DATALEN(16..32768)].
    PingChannel {
        name: String,
        datalen: u32,
    },
    /// END: ends a runmqsc session (the client acts on it; the server has nothing to do).
    End,
}

impl Command {
    /// A short label for messages: the verb and object, e.g. `DEFINE QLOCAL(Q1)`.
    pub fn label(&self) -> String {
        match self {
            Command::Define { kind, name, .. } => format!("DEFINE {}({name})", kind.keyword()),
            Command::Alter { kind, name, .. } => format!("ALTER {}({name})", kind.keyword()),
            Command::AlterQmgr { .. } => "ALTER QMGR".into(),
            Command::Delete { kind, name, .. } => format!("DELETE {}({name})", kind.keyword()),
            Command::Clear { name } => format!("CLEAR QLOCAL({name})"),
            Command::DefineSub { name, .. } => format!("DEFINE SUB({name})"),
            Command::DeleteSub { name } => format!("DELETE SUB({name})"),
            Command::Display { what, name, .. } if name.is_empty() => {
                format!("DISPLAY {}", what.keyword())
            }
            Command::Display { what, name, .. } => format!("DISPLAY {}({name})", what.keyword()),
            Command::StartListener { name, .. } => format!("START LISTENER({name})"),
            Command::StopListener { name, .. } => format!("STOP LISTENER({name})"),
            Command::StartChannel { name, .. } => format!("START CHANNEL({name})"),
            Command::StopChannel { name, .. } => format!("STOP CHANNEL({name})"),
            Command::ResolveChannel { name, .. } => format!("RESOLVE CHANNEL({name})"),
            Command::ResetChannel { name, .. } => format!("RESET CHANNEL({name})"),
            Command::RefreshSecurity { .. } => "REFRESH SECURITY".into(),
            Command::RefreshQmgrExpiry { .. } => "REFRESH QMGR TYPE(EXPIRY)".into(),
            Command::SetChlAuth(s) => format!("SET CHLAUTH({})", s.profile),
            Command::SetAuthRec(s) if s.profile.is_empty() => {
                format!("SET AUTHREC OBJTYPE({})", s.objtype)
            }
            Command::SetAuthRec(s) => {
                format!("SET AUTHREC PROFILE({}) OBJTYPE({})", s.profile, s.objtype)
            }
            Command::DeleteAuthRec(_) => "DELETE AUTHREC".into(),
            Command::DisplayChlAuth { profile, .. } => format!("DISPLAY CHLAUTH({profile})"),
            Command::DisplayAuthRec(_) => "DISPLAY AUTHREC".into(),
            Command::DisplayEntAuth(_) => "DISPLAY ENTAUTH".into(),
            Command::PingQmgr => "PING QMGR".into(),
            Command::PingChannel { name, .. } => format!("PING CHANNEL({name})"),
            Command::End => "END".into(),
        }
    }
}

/// A command that does not parse: what is wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    pub message: String,
    /// 0-based character offset of the offending token in the command text.
    pub column: usize,
    /// The offending token as written.
    pub token: String,
}

impl SyntaxError {
    pub fn new(message: impl Into<String>, column: usize, token: impl Into<String>) -> Self {
        SyntaxError {
            message: message.into(),
            column,
            token: token.into(),
        }
    }

    /// The command followed by a line with `^` under the offending token, for a terminal.
    pub fn pointer(&self, text: &str) -> String {
        // Far into a long command, only the stretch before the error (a command may be
        // tens of thousands of characters).
        const BEFORE: usize = 60;
        if self.column > 2 * BEFORE {
            let excerpt: String = text
                .chars()
                .skip(self.column - BEFORE)
                .take(BEFORE + 20)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            return format!(
                "...{excerpt}\n{}^ (character {})",
                " ".repeat(3 + BEFORE),
                self.column + 1
            );
        }
        // Tabs keep their width on the marker line so the caret still lines up.
        let pad: String = text
            .chars()
            .take(self.column)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{text}\n{pad}^")
    }
}
