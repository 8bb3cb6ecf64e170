//! Queue attribute tables: QLOCAL, QALIAS, QMODEL and QREMOTE. Order matters: DISPLAY shows
//! attributes in table order, after QUEUE and TYPE.

use super::words::{ENABLED, MON_LEVELS_QMGR, ON_OFF_QMGR, YES_NO};
use super::ValueKind::{Enum, Int, IntOrWord, Name, ReadOnly, Str, Switch};
use super::{AttrSpec, ALTDATE, ALTTIME, CRDATE, CRTIME};
use ferrymq_types::limits::{MSG_LEN_MAX_BYTES, QUEUE_DEPTH_MAX};

// Acted on: each maps to a field of `QueueDef`.
const DESCR: AttrSpec = AttrSpec::acted("DESCR", Str { max_len: 64 });
const MAXDEPTH: AttrSpec = AttrSpec::acted(
    "MAXDEPTH",
    Int {
        min: 0,
        max: QUEUE_DEPTH_MAX as i64,
    },
);
const MAXMSGL: AttrSpec = AttrSpec::acted(
    "MAXMSGL",
    Int {
        min: 0,
        max: MSG_LEN_MAX_BYTES as i64,
    },
);
const DEFPSIST: AttrSpec = AttrSpec::acted("DEFPSIST", Enum(YES_NO));
const DEFPRTY: AttrSpec = AttrSpec::acted("DEFPRTY", Int { min: 0, max: 9 });
const MSGDLVSQ: AttrSpec = AttrSpec::acted("MSGDLVSQ", Enum(&["PRIORITY", "FIFO"]));
const PUT: AttrSpec = AttrSpec::acted("PUT", Enum(ENABLED));
const GET: AttrSpec = AttrSpec::acted("GET", Enum(ENABLED));
const BOTHRESH: AttrSpec = AttrSpec::acted(
    "BOTHRESH",
    Int {
        min: 0,
        max: 999_999_999,
    },
);
const BOQNAME: AttrSpec = AttrSpec::acted("BOQNAME", Name);
const USAGE: AttrSpec = AttrSpec::acted("USAGE", Enum(&["NORMAL", "XMITQ"]));
const TARGET: AttrSpec = AttrSpec::acted("TARGET", Name).abbr(&["TARGQ"]);
const DEFTYPE: AttrSpec = AttrSpec::acted("DEFTYPE", Enum(&["TEMPDYN", "PERMDYN"]));
const RNAME: AttrSpec = AttrSpec::acted("RNAME", Name);
const RQMNAME: AttrSpec = AttrSpec::acted("RQMNAME", Name);
const XMITQ: AttrSpec = AttrSpec::acted("XMITQ", Name);

// Shown by DISPLAY only: live state, or (for a local queue) how it came to exist.
const CURDEPTH: AttrSpec = AttrSpec::acted("CURDEPTH", ReadOnly);
const IPPROCS: AttrSpec = AttrSpec::acted("IPPROCS", ReadOnly);
const OPPROCS: AttrSpec = AttrSpec::acted("OPPROCS", ReadOnly);
const DEFTYPE_SHOWN: AttrSpec = AttrSpec::acted("DEFTYPE", ReadOnly);

// Stored and displayed, not acted on yet; defaults are MQ's.
const BIG: super::ValueKind = Int {
    min: 0,
    max: 999_999_999,
};
const INDXTYPE: AttrSpec = AttrSpec::stored(
    "INDXTYPE",
    Enum(&["NONE", "MSGID", "CORRELID", "GROUPID", "MSGTOKEN"]),
    "NONE",
);
const SHARE: AttrSpec = AttrSpec::stored("SHARE", Switch { off: "NOSHARE" }, "SHARE");
const DEFSOPT: AttrSpec = AttrSpec::stored("DEFSOPT", Enum(&["SHARED", "EXCL"]), "SHARED");
const TRIGGER: AttrSpec = AttrSpec::stored("TRIGGER", Switch { off: "NOTRIGGER" }, "NOTRIGGER");
const TRIGTYPE: AttrSpec = AttrSpec::stored(
    "TRIGTYPE",
    Enum(&["FIRST", "EVERY", "DEPTH", "NONE"]),
    "FIRST",
);
const TRIGDPTH: AttrSpec = AttrSpec::stored(
    "TRIGDPTH",
    Int {
        min: 1,
        max: 999_999_999,
    },
    "1",
);
const TRIGMPRI: AttrSpec = AttrSpec::stored("TRIGMPRI", Int { min: 0, max: 9 }, "0");
const TRIGDATA: AttrSpec = AttrSpec::stored("TRIGDATA", Str { max_len: 64 }, "");
const INITQ: AttrSpec = AttrSpec::stored("INITQ", Name, "");
const PROCESS: AttrSpec = AttrSpec::stored("PROCESS", Name, "");
const RETINTVL: AttrSpec = AttrSpec::stored("RETINTVL", BIG, "999999999");
const HARDENBO: AttrSpec = AttrSpec::stored("HARDENBO", Switch { off: "NOHARDENBO" }, "NOHARDENBO");
const QDEPTHHI: AttrSpec = AttrSpec::stored("QDEPTHHI", Int { min: 0, max: 100 }, "80");
const QDEPTHLO: AttrSpec = AttrSpec::stored("QDEPTHLO", Int { min: 0, max: 100 }, "20");
const QDPHIEV: AttrSpec = AttrSpec::stored("QDPHIEV", Enum(ENABLED), "DISABLED");
const QDPLOEV: AttrSpec = AttrSpec::stored("QDPLOEV", Enum(ENABLED), "DISABLED");
const QDPMAXEV: AttrSpec = AttrSpec::stored("QDPMAXEV", Enum(ENABLED), "ENABLED");
const QSVCIEV: AttrSpec = AttrSpec::stored("QSVCIEV", Enum(&["NONE", "HIGH", "OK"]), "NONE");
const QSVCINT: AttrSpec = AttrSpec::stored("QSVCINT", BIG, "999999999");
const STATQ: AttrSpec = AttrSpec::stored("STATQ", Enum(ON_OFF_QMGR), "QMGR");
const MONQ: AttrSpec = AttrSpec::stored("MONQ", Enum(MON_LEVELS_QMGR), "QMGR");
const ACCTQ: AttrSpec = AttrSpec::stored("ACCTQ", Enum(ON_OFF_QMGR), "QMGR");
const CLUSTER: AttrSpec = AttrSpec::stored("CLUSTER", Name, "");
const CLUSNL: AttrSpec = AttrSpec::stored("CLUSNL", Name, "");
const CLWLPRTY: AttrSpec = AttrSpec::stored("CLWLPRTY", Int { min: 0, max: 9 }, "0");
const CLWLRANK: AttrSpec = AttrSpec::stored("CLWLRANK", Int { min: 0, max: 9 }, "0");
const CLWLUSEQ: AttrSpec = AttrSpec::stored("CLWLUSEQ", Enum(&["QMGR", "ANY", "LOCAL"]), "QMGR");
const DEFBIND: AttrSpec = AttrSpec::stored("DEFBIND", Enum(&["OPEN", "NOTFIXED", "GROUP"]), "OPEN");
/// Kept with the stored attributes (the queue manager tells the client at MQOPEN; the client
/// acts on it).
const DEFPRESP: AttrSpec = AttrSpec::stored("DEFPRESP", Enum(&["SYNC", "ASYNC"]), "SYNC");
const DEFREADA: AttrSpec = AttrSpec::stored("DEFREADA", Enum(&["NO", "YES", "DISABLED"]), "NO");
const PROPCTL: AttrSpec = AttrSpec::stored(
    "PROPCTL",
    Enum(&["COMPAT", "NONE", "ALL", "FORCE", "V6COMPAT"]),
    "COMPAT",
);
const MAXFSIZE: AttrSpec = AttrSpec::stored(
    "MAXFSIZE",
    IntOrWord {
        min: 20,
        max: 267_386_880,
        words: &["DEFAULT"],
    },
    "DEFAULT",
);
const CUSTOM: AttrSpec = AttrSpec::stored("CUSTOM", Str { max_len: 128 }, "");
const SCOPE: AttrSpec = AttrSpec::stored("SCOPE", Enum(&["QMGR", "CELL"]), "QMGR");
const DISTL: AttrSpec = AttrSpec::stored("DISTL", Enum(YES_NO), "NO");
const NPMCLASS: AttrSpec = AttrSpec::stored("NPMCLASS", Enum(&["NORMAL", "HIGH"]), "NORMAL");
const TARGTYPE: AttrSpec = AttrSpec::stored("TARGTYPE", Enum(&["QUEUE", "TOPIC"]), "QUEUE");
const IMGRCOVQ: AttrSpec = AttrSpec::stored("IMGRCOVQ", Enum(&["QMGR", "YES", "NO"]), "QMGR");

pub static QLOCAL: &[AttrSpec] = &[
    DESCR,
    MAXDEPTH,
    MAXMSGL,
    DEFPSIST,
    DEFPRTY,
    MSGDLVSQ,
    PUT,
    GET,
    BOTHRESH,
    BOQNAME,
    USAGE,
    CURDEPTH,
    IPPROCS,
    OPPROCS,
    DEFTYPE_SHOWN, //
    INDXTYPE,
    SHARE,
    DEFSOPT,
    TRIGGER,
    TRIGTYPE,
    TRIGDPTH,
    TRIGMPRI,
    TRIGDATA,
    INITQ,
    PROCESS,
    RETINTVL,
    HARDENBO,
    QDEPTHHI,
    QDEPTHLO,
    QDPHIEV,
    QDPLOEV,
    QDPMAXEV,
    QSVCIEV,
    QSVCINT,
    STATQ,
    MONQ,
    ACCTQ,
    CLUSTER,
    CLUSNL,
    CLWLPRTY,
    CLWLRANK,
    CLWLUSEQ,
    DEFBIND,
    DEFPRESP,
    DEFREADA,
    PROPCTL,
    MAXFSIZE,
    CUSTOM,
    SCOPE,
    DISTL,
    NPMCLASS,
    IMGRCOVQ,
    ALTDATE,
    ALTTIME,
    CRDATE,
    CRTIME,
];

pub static QMODEL: &[AttrSpec] = &[
    DESCR, MAXDEPTH, MAXMSGL, DEFPSIST, DEFPRTY, MSGDLVSQ, PUT, GET, BOTHRESH, BOQNAME, USAGE,
    DEFTYPE, //
    INDXTYPE, SHARE, DEFSOPT, TRIGGER, TRIGTYPE, TRIGDPTH, TRIGMPRI, TRIGDATA, INITQ, PROCESS,
    RETINTVL, HARDENBO, QDEPTHHI, QDEPTHLO, QDPHIEV, QDPLOEV, QDPMAXEV, QSVCIEV, QSVCINT, STATQ,
    MONQ, ACCTQ, DEFPRESP, DEFREADA, PROPCTL, MAXFSIZE, CUSTOM, DISTL, NPMCLASS, ALTDATE, ALTTIME,
    CRDATE, CRTIME,
];

pub static QALIAS: &[AttrSpec] = &[
    DESCR, TARGET, PUT, GET, DEFPSIST, DEFPRTY, //
    TARGTYPE, SCOPE, CLUSTER, CLUSNL, CLWLPRTY, CLWLRANK, DEFBIND, DEFPRESP, DEFREADA, PROPCTL,
    CUSTOM, ALTDATE, ALTTIME, CRDATE, CRTIME,
];

pub static QREMOTE: &[AttrSpec] = &[
    DESCR, RNAME, RQMNAME, XMITQ, PUT, DEFPSIST, DEFPRTY, //
    SCOPE, CLUSTER, CLUSNL, CLWLPRTY, CLWLRANK, DEFBIND, DEFPRESP, CUSTOM, ALTDATE, ALTTIME,
    CRDATE, CRTIME,
];
