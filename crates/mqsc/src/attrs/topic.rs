//! Topic object attributes. A topic object names a node of the topic tree (TOPICSTR) and the
//! defaults of publications and subscriptions below it; most values may say ASPARENT (take the
//! nearest ancestor's). Publish/subscribe itself does not run yet, so only the topic string (its
//! identity, unique among topic objects and fixed once defined) and the description are acted on.

use super::ValueKind::{Enum, Str};
use super::{AttrSpec, ALTDATE, ALTTIME, CRDATE, CRTIME};

const ASPARENT_ENABLED: &[&str] = &["ASPARENT", "ENABLED", "DISABLED"];
const ASPARENT_YES_NO: &[&str] = &["ASPARENT", "YES", "NO"];
const DELIVERY: &[&str] = &["ASPARENT", "ALL", "ALLAVAIL", "ALLDUR"];
const SCOPE: &[&str] = &["ASPARENT", "QMGR", "ALL"];
const PRIORITY: &[&str] = &["ASPARENT", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
/// The longest topic string MQ allows.
pub const TOPICSTR_LEN_MAX: usize = 10_240;

pub static TOPIC: &[AttrSpec] = &[
    AttrSpec::acted(
        "TOPICSTR",
        Str {
            max_len: TOPICSTR_LEN_MAX,
        },
    ),
    AttrSpec::acted("DESCR", Str { max_len: 64 }),
    AttrSpec::stored("TYPE", Enum(&["LOCAL"]), "LOCAL"),
    AttrSpec::stored("PUB", Enum(ASPARENT_ENABLED), "ASPARENT"),
    AttrSpec::stored("SUB", Enum(ASPARENT_ENABLED), "ASPARENT"),
    AttrSpec::stored("DEFPSIST", Enum(ASPARENT_YES_NO), "ASPARENT"),
    AttrSpec::stored("DEFPRTY", Enum(PRIORITY), "ASPARENT"),
    AttrSpec::stored("DEFPRESP", Enum(&["ASPARENT", "SYNC", "ASYNC"]), "ASPARENT"),
    AttrSpec::stored("DURSUB", Enum(ASPARENT_YES_NO), "ASPARENT"),
    AttrSpec::stored("MDURMDL", Str { max_len: 48 }, ""),
    AttrSpec::stored("MNDURMDL", Str { max_len: 48 }, ""),
    AttrSpec::stored("PMSGDLV", Enum(DELIVERY), "ASPARENT"),
    AttrSpec::stored("NPMSGDLV", Enum(DELIVERY), "ASPARENT"),
    AttrSpec::stored("PUBSCOPE", Enum(SCOPE), "ASPARENT"),
    AttrSpec::stored("SUBSCOPE", Enum(SCOPE), "ASPARENT"),
    AttrSpec::stored("PROXYSUB", Enum(&["FIRSTUSE", "FORCE"]), "FIRSTUSE"),
    AttrSpec::stored("WILDCARD", Enum(&["PASSTHRU", "BLOCK"]), "PASSTHRU"),
    AttrSpec::stored("USEDLQ", Enum(ASPARENT_YES_NO), "ASPARENT"),
    AttrSpec::stored(
        "MCAST",
        Enum(&["ASPARENT", "ENABLED", "DISABLED", "ONLY"]),
        "ASPARENT",
    ),
    AttrSpec::stored("COMMINFO", Str { max_len: 48 }, ""),
    AttrSpec::stored("CLUSTER", Str { max_len: 48 }, ""),
    AttrSpec::stored("CLROUTE", Enum(&["DIRECT", "TOPICHOST"]), "DIRECT"),
    AttrSpec::stored("CUSTOM", Str { max_len: 128 }, ""),
    ALTDATE,
    ALTTIME,
    CRDATE,
    CRTIME,
];
