//! The channel attribute table. Which attributes a channel has depends on its CHLTYPE, as in MQ;
//! `only` lists the types each belongs to.

use super::words::{CHLTYPES, YES_NO};
use super::ValueKind::{Enum, Int, Name, Str};
use super::{AttrSpec, ALTDATE, ALTTIME, CRDATE, CRTIME};
use ferrymq_types::limits::{MSG_LEN_MAX_BYTES, SHARECNV_MAX};

const SENDING: &[&str] = &["SDR", "SVR"];
const RECEIVING: &[&str] = &["RCVR", "RQSTR"];
const MCA: &[&str] = &["SDR", "SVR", "RCVR", "RQSTR"];
const CALLED: &[&str] = &["SVRCONN", "RCVR", "RQSTR", "SVR"];
const CONNECTING: &[&str] = &["SDR", "SVR", "RQSTR", "CLNTCONN"];
const CLIENT: &[&str] = &["SVRCONN", "CLNTCONN"];
const NOT_CLNTCONN: &[&str] = &["SVRCONN", "SDR", "SVR", "RCVR", "RQSTR"];
const LEVELS: &[&str] = &["QMGR", "OFF", "LOW", "MEDIUM", "HIGH"];
const BIG: super::ValueKind = Int {
    min: 0,
    max: 999_999_999,
};

pub static CHANNEL: &[AttrSpec] = &[
    // What a channel is: FerryMQ keeps and honours these.
    AttrSpec::acted("CHLTYPE", Enum(CHLTYPES)),
    AttrSpec::acted("TRPTYPE", Enum(&["TCP"])).def("TCP"),
    AttrSpec::acted("DESCR", Str { max_len: 64 }),
    // Stored and displayed; the server does not read channel definitions yet.
    AttrSpec::stored(
        "MAXMSGL",
        Int {
            min: 0,
            max: MSG_LEN_MAX_BYTES as i64,
        },
        "4194304",
    ),
    AttrSpec::stored(
        "SHARECNV",
        Int {
            min: 0,
            max: SHARECNV_MAX as i64,
        },
        "10",
    )
    .only(CLIENT),
    AttrSpec::stored(
        "HBINT",
        Int {
            min: 0,
            max: 999_999,
        },
        "300",
    )
    .honoured(),
    AttrSpec::stored("CONNAME", Str { max_len: 264 }, "")
        .only(CONNECTING)
        .honoured(),
    AttrSpec::stored("XMITQ", Name, "").only(SENDING).honoured(),
    AttrSpec::stored("MCAUSER", Str { max_len: 64 }, "").only(NOT_CLNTCONN),
    AttrSpec::stored("SSLCIPH", Str { max_len: 32 }, ""),
    AttrSpec::stored("SSLCAUTH", Enum(&["REQUIRED", "OPTIONAL"]), "REQUIRED").only(CALLED),
    AttrSpec::stored("SSLPEER", Str { max_len: 1024 }, ""),
    AttrSpec::stored("CERTLABL", Str { max_len: 64 }, ""),
    AttrSpec::stored("MAXINST", BIG, "999999999").only(&["SVRCONN"]),
    AttrSpec::stored("MAXINSTC", BIG, "999999999").only(&["SVRCONN"]),
    AttrSpec::stored(
        "DISCINT",
        Int {
            min: 0,
            max: 999_999,
        },
        "0",
    )
    .only(&["SVRCONN", "SDR", "SVR"])
    .honoured(),
    AttrSpec::stored("MONCHL", Enum(LEVELS), "QMGR").only(NOT_CLNTCONN),
    AttrSpec::stored("STATCHL", Enum(LEVELS), "QMGR").only(MCA),
    AttrSpec::stored("BATCHSZ", Int { min: 1, max: 9999 }, "50")
        .only(MCA)
        .honoured(),
    AttrSpec::stored("BATCHINT", BIG, "0")
        .only(SENDING)
        .honoured(),
    AttrSpec::stored(
        "BATCHHB",
        Int {
            min: 0,
            max: 999_999,
        },
        "0",
    )
    .only(SENDING)
    .honoured(),
    AttrSpec::stored(
        "BATCHLIM",
        Int {
            min: 0,
            max: 999_999,
        },
        "5000",
    )
    .only(SENDING)
    .honoured(),
    AttrSpec::stored("MRRTY", BIG, "10").only(RECEIVING),
    AttrSpec::stored("MRTMR", BIG, "1000").only(RECEIVING),
    AttrSpec::stored("SHORTRTY", BIG, "10")
        .only(SENDING)
        .honoured(),
    AttrSpec::stored("SHORTTMR", BIG, "60")
        .only(SENDING)
        .honoured(),
    AttrSpec::stored("LONGRTY", BIG, "999999999")
        .only(SENDING)
        .honoured(),
    AttrSpec::stored("LONGTMR", BIG, "1200")
        .only(SENDING)
        .honoured(),
    AttrSpec::stored("CONVERT", Enum(YES_NO), "NO").only(SENDING),
    AttrSpec::stored("NPMSPEED", Enum(&["FAST", "NORMAL"]), "FAST")
        .only(MCA)
        .honoured(),
    AttrSpec::stored("USEDLQ", Enum(YES_NO), "YES")
        .only(MCA)
        .honoured(),
    AttrSpec::stored("COMPHDR", Enum(&["NONE", "SYSTEM"]), "NONE"),
    AttrSpec::stored(
        "COMPMSG",
        Enum(&["NONE", "RLE", "ZLIBFAST", "ZLIBHIGH", "ANY"]),
        "NONE",
    ),
    AttrSpec::stored("QMNAME", Name, "").only(&["CLNTCONN"]),
    AttrSpec::stored("USERID", Str { max_len: 12 }, "").only(&["CLNTCONN"]),
    AttrSpec::stored("DEFRECON", Enum(&["NO", "YES", "QMGR", "DISABLED"]), "NO")
        .only(&["CLNTCONN"]),
    ALTDATE,
    ALTTIME,
    CRDATE,
    CRTIME,
];
