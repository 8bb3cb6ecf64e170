//! Topic object attributes. A topic object names a node of the topic tree (TOPICSTR) and the
//! defaults of publications and subscriptions below it; most values may say ASPARENT (take the
//! nearest ancestor's). The topic string (its identity, unique among topic objects and fixed once
//! defined), the description and the publish/subscribe attributes below are acted on; the
//! clustering, multicast and proxy-subscription ones are stored only.

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
    AttrSpec::acted("PUB", Enum(ASPARENT_ENABLED)).def("ASPARENT"),
    AttrSpec::acted("SUB", Enum(ASPARENT_ENABLED)).def("ASPARENT"),
    AttrSpec::acted("DEFPSIST", Enum(ASPARENT_YES_NO)).def("ASPARENT"),
    AttrSpec::acted("DEFPRTY", Enum(PRIORITY)).def("ASPARENT"),
    AttrSpec::stored("DEFPRESP", Enum(&["ASPARENT", "SYNC", "ASYNC"]), "ASPARENT"),
    AttrSpec::acted("DURSUB", Enum(ASPARENT_YES_NO)).def("ASPARENT"),
    AttrSpec::acted("MDURMDL", Str { max_len: 48 }),
    AttrSpec::acted("MNDURMDL", Str { max_len: 48 }),
    AttrSpec::acted("PMSGDLV", Enum(DELIVERY)).def("ASPARENT"),
    AttrSpec::acted("NPMSGDLV", Enum(DELIVERY)).def("ASPARENT"),
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
