//! FerryMQ's message ids for MQSC responses, in one table. Numbers follow the ranges MQ
//! administrators know, so a familiar number points at a familiar kind of event; the wording is
//! FerryMQ's own. The last letter is the severity: I information, W warning, E error.

use crate::command::ObjType;
use ferrymq_types::Reason;

pub const END: &str = "FMQ8000I";
pub const PING: &str = "FMQ8002I";
pub const QMGR_ALTERED: &str = "FMQ8005I";
pub const CHANNEL_STARTED: &str = "FMQ8018I";
pub const CHANNEL_STOPPED: &str = "FMQ8019I";
pub const PING_COMPLETE: &str = "FMQ8020I";
pub const LISTENER_STARTED: &str = "FMQ8021I";
pub const QUEUE_CLEARED: &str = "FMQ8022I";
pub const LISTENER_STOPPED: &str = "FMQ8023I";
pub const CHANNEL_RESET: &str = "FMQ8024I";
pub const CHANNEL_RESOLVED: &str = "FMQ8025I";
pub const UNCHANGED: &str = "FMQ8151I";
pub const NO_MATCH: &str = "FMQ8420I";
pub const SECURITY_REFRESHED: &str = "FMQ8560I";
pub const QMGR_REFRESHED: &str = "FMQ8561I";
pub const NOT_ACTED_ON: &str = "FMQ8890W";
pub const AUTHREC_SET: &str = "FMQ8862I";
pub const AUTHREC_DELETED: &str = "FMQ8863I";
pub const AUTHREC_DETAILS: &str = "FMQ8864I";
pub const ENTAUTH_DETAILS: &str = "FMQ8865I";
pub const CHLAUTH_SET: &str = "FMQ8877I";
pub const CHLAUTH_DETAILS: &str = "FMQ8878I";
pub const SYNTAX_ERROR: &str = "FMQ8405E";
/// MQSC refused: the connection may not administer this queue manager.
pub const NOT_AUTHORIZED: &str = "FMQ8135E";
/// A command's log record was not durable (HA: not committed by the group) in time, so the
/// command is not reported done.
pub const NOT_CONFIRMED: &str = "FMQ8199E";

pub const QMGR_DETAILS: &str = "FMQ8408I";
pub const QSTATUS_DETAILS: &str = "FMQ8450I";
pub const CONN_DETAILS: &str = "FMQ8276I";
pub const CHSTATUS_DETAILS: &str = "FMQ8417I";
pub const LSSTATUS_DETAILS: &str = "FMQ8631I";
pub const QMSTATUS_DETAILS: &str = "FMQ8705I";
pub const SUB_DEFINED: &str = "FMQ8094I";
pub const SUB_DELETED: &str = "FMQ8095I";
pub const SUB_DETAILS: &str = "FMQ8096I";
pub const SBSTATUS_DETAILS: &str = "FMQ8099I";
pub const TPSTATUS_DETAILS: &str = "FMQ8754I";
pub const PUBSUB_DETAILS: &str = "FMQ8792I";

/// What a successful DEFINE, ALTER or DELETE reports, by object type.
pub fn defined(t: ObjType) -> &'static str {
    match t {
        ObjType::QLocal | ObjType::QAlias | ObjType::QModel | ObjType::QRemote => "FMQ8006I",
        ObjType::Channel => "FMQ8014I",
        ObjType::Listener => "FMQ8626I",
        ObjType::AuthInfo => "FMQ8563I",
        ObjType::Topic => "FMQ8690I",
    }
}

pub fn altered(t: ObjType) -> &'static str {
    match t {
        ObjType::QLocal | ObjType::QAlias | ObjType::QModel | ObjType::QRemote => "FMQ8008I",
        ObjType::Channel => "FMQ8016I",
        ObjType::Listener => "FMQ8623I",
        ObjType::AuthInfo => "FMQ8567I",
        ObjType::Topic => "FMQ8691I",
    }
}

pub fn deleted(t: ObjType) -> &'static str {
    match t {
        ObjType::QLocal | ObjType::QAlias | ObjType::QModel | ObjType::QRemote => "FMQ8007I",
        ObjType::Channel => "FMQ8015I",
        ObjType::Listener => "FMQ8627I",
        ObjType::AuthInfo => "FMQ8565I",
        ObjType::Topic => "FMQ8692I",
    }
}

/// The header of each object a DISPLAY of this type shows.
pub fn details(t: ObjType) -> &'static str {
    match t {
        ObjType::QLocal | ObjType::QAlias | ObjType::QModel | ObjType::QRemote => "FMQ8409I",
        ObjType::Channel => "FMQ8414I",
        ObjType::Listener => "FMQ8630I",
        ObjType::AuthInfo => "FMQ8566I",
        ObjType::Topic => "FMQ8633I",
    }
}

/// The id of a failure, by the reason behind it.
pub fn failure(reason: Reason) -> &'static str {
    match reason {
        Reason::UNKNOWN_OBJECT_NAME => "FMQ8147E",
        Reason::OBJECT_ALREADY_EXISTS => "FMQ8150E",
        Reason::OBJECT_IN_USE => "FMQ8148E",
        Reason::Q_NOT_EMPTY => "FMQ8143E",
        Reason::OBJECT_TYPE_ERROR | Reason::Q_TYPE_ERROR => "FMQ8149E",
        Reason::NOT_AUTHORIZED => NOT_AUTHORIZED,
        _ => "FMQ8101E",
    }
}
