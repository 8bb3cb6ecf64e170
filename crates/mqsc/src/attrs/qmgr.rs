//! The queue manager's attribute table (ALTER QMGR, DISPLAY QMGR).
//!
//! CMDLEVEL is [`CMDLEVEL`]: the MQ command level whose MQSC syntax FerryMQ follows. Scripts
//! compare it to decide which commands they may use; what FerryMQ has not built yet is refused
//! with a message saying so, whatever the level.

use super::words::ENABLED;
use super::ValueKind::{Enum, Int, IntOrWord, Name, Str};
use super::{AttrSpec, ALTDATE, ALTTIME, CRDATE, CRTIME};
use ferrymq_types::limits::MSG_LEN_MAX_BYTES;

const ON_OFF: &[&str] = &["ON", "OFF", "NONE"];
const LEVELS: &[&str] = &["OFF", "NONE", "LOW", "MEDIUM", "HIGH"];

/// The command level DISPLAY QMGR shows (MQ 9.4's).
pub const CMDLEVEL: u32 = 940;

pub static QMGR: &[AttrSpec] = &[
    // Shown by DISPLAY, first: the queue manager's name.
    AttrSpec::acted("QMNAME", super::ValueKind::ReadOnly),
    // Shown, never set: identity, command level, and when created and last altered.
    AttrSpec::acted("QMID", super::ValueKind::ReadOnly),
    AttrSpec::acted("CMDLEVEL", super::ValueKind::ReadOnly),
    CRDATE,
    CRTIME,
    ALTDATE,
    ALTTIME,
    // Acted on: fields of `QmgrAttrs`.
    AttrSpec::acted("DESCR", Str { max_len: 64 }),
    // MQ's floor for a queue manager's MAXMSGL is 32 KB; queues may go lower.
    AttrSpec::acted(
        "MAXMSGL",
        Int {
            min: 32_768,
            max: MSG_LEN_MAX_BYTES as i64,
        },
    ),
    AttrSpec::acted("DEADQ", Name),
    AttrSpec::acted(
        "MAXUMSGS",
        Int {
            min: 1,
            max: 999_999_999,
        },
    ),
    // Stored and displayed, not acted on yet.
    AttrSpec::stored("CHLAUTH", Enum(ENABLED), "ENABLED"),
    AttrSpec::stored("CONNAUTH", Name, "SYSTEM.DEFAULT.AUTHINFO.IDPWOS"),
    AttrSpec::stored("STATQ", Enum(ON_OFF), "OFF"),
    AttrSpec::stored("MONQ", Enum(LEVELS), "OFF"),
    AttrSpec::stored("ACCTQ", Enum(ON_OFF), "OFF"),
    AttrSpec::stored("STATMQI", Enum(&["ON", "OFF"]), "OFF"),
    AttrSpec::stored("ACCTMQI", Enum(&["ON", "OFF"]), "OFF"),
    AttrSpec::stored("STATCHL", Enum(LEVELS), "OFF"),
    AttrSpec::stored("MONCHL", Enum(LEVELS), "OFF"),
    AttrSpec::stored(
        "STATINT",
        Int {
            min: 1,
            max: 604_800,
        },
        "1800",
    ),
    AttrSpec::stored(
        "ACCTINT",
        Int {
            min: 1,
            max: 604_800,
        },
        "1800",
    ),
    AttrSpec::stored("SSLKEYR", Str { max_len: 256 }, ""),
    AttrSpec::stored("CERTLABL", Str { max_len: 64 }, ""),
    AttrSpec::stored("SSLFIPS", Enum(&["YES", "NO"]), "NO"),
    AttrSpec::stored(
        "MAXHANDS",
        Int {
            min: 0,
            max: 999_999_999,
        },
        "256",
    ),
    AttrSpec::stored(
        "MAXPROPL",
        IntOrWord {
            min: 0,
            max: MSG_LEN_MAX_BYTES as i64,
            words: &["NOLIMIT"],
        },
        "NOLIMIT",
    ),
    AttrSpec::stored(
        "TRIGINT",
        Int {
            min: 0,
            max: 999_999_999,
        },
        "999999999",
    ),
    AttrSpec::stored(
        "CCSID",
        Int {
            min: 1,
            max: 65_535,
        },
        "1208",
    ),
    AttrSpec::stored("DEFXMITQ", Name, ""),
    AttrSpec::stored("REPOS", Name, ""),
    AttrSpec::stored("CLWLUSEQ", Enum(&["LOCAL", "ANY"]), "LOCAL"),
    AttrSpec::stored("CHAD", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("PERFMEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("INHIBTEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("LOCALEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("REMOTEEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("AUTHOREV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("CHLEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("SSLEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("STRSTPEV", Enum(ENABLED), "ENABLED"),
    AttrSpec::stored(
        "CMDEV",
        Enum(&["DISABLED", "ENABLED", "NODISPLAY"]),
        "DISABLED",
    ),
    AttrSpec::stored("CONFIGEV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("LOGGEREV", Enum(ENABLED), "DISABLED"),
    AttrSpec::stored("CUSTOM", Str { max_len: 128 }, ""),
];
