//! Listener and authentication-information attribute tables.

use super::words::{AUTHTYPES, YES_NO};
use super::ValueKind::{Enum, Int, Str};
use super::{AttrSpec, ALTDATE, ALTTIME, CRDATE, CRTIME};

pub static LISTENER: &[AttrSpec] = &[
    // The server reads these when it starts a listener.
    AttrSpec::acted("TRPTYPE", Enum(&["TCP"])).def("TCP"),
    AttrSpec::acted(
        "PORT",
        Int {
            min: 0,
            max: 65_535,
        },
    )
    .def("0"),
    AttrSpec::acted("CONTROL", Enum(&["MANUAL", "QMGR", "STARTONLY"])).def("MANUAL"),
    AttrSpec::acted("IPADDR", Str { max_len: 48 }),
    AttrSpec::acted("DESCR", Str { max_len: 64 }),
    AttrSpec::stored(
        "BACKLOG",
        Int {
            min: 0,
            max: 999_999_999,
        },
        "0",
    ),
    ALTDATE,
    ALTTIME,
    CRDATE,
    CRTIME,
];

const IDPW: &[&str] = &["IDPWOS", "IDPWLDAP"];
const LDAP: &[&str] = &["IDPWLDAP", "CRLLDAP"];
const CHECKS: &[&str] = &["NONE", "OPTIONAL", "REQUIRED", "REQDADM"];

pub static AUTHINFO: &[AttrSpec] = &[
    AttrSpec::acted("AUTHTYPE", Enum(AUTHTYPES)),
    AttrSpec::acted("DESCR", Str { max_len: 64 }),
    // Connection authentication is not enforced yet: everything below is stored only.
    AttrSpec::stored("CHCKCLNT", Enum(CHECKS), "REQDADM").only(IDPW),
    AttrSpec::stored("CHCKLOCL", Enum(CHECKS), "OPTIONAL").only(IDPW),
    AttrSpec::stored("ADOPTCTX", Enum(YES_NO), "NO").only(IDPW),
    AttrSpec::stored("FAILDLAY", Int { min: 0, max: 60 }, "1").only(IDPW),
    AttrSpec::stored("AUTHENMD", Enum(&["OS", "PAM"]), "OS").only(&["IDPWOS"]),
    AttrSpec::stored(
        "AUTHORMD",
        Enum(&["OS", "SEARCHGRP", "SEARCHUSR", "SRCHGRPSN"]),
        "OS",
    )
    .only(IDPW),
    AttrSpec::stored("CONNAME", Str { max_len: 264 }, "").only(LDAP),
    AttrSpec::stored("LDAPUSER", Str { max_len: 1024 }, "").only(LDAP),
    AttrSpec::stored("SECCOMM", Enum(&["YES", "NO", "ANON"]), "NO").only(&["IDPWLDAP"]),
    AttrSpec::stored("BASEDNU", Str { max_len: 1024 }, "").only(&["IDPWLDAP"]),
    AttrSpec::stored("SHORTUSR", Str { max_len: 10 }, "").only(&["IDPWLDAP"]),
    AttrSpec::stored("USRFIELD", Str { max_len: 10 }, "").only(&["IDPWLDAP"]),
    AttrSpec::stored("CLASSUSR", Str { max_len: 128 }, "").only(&["IDPWLDAP"]),
    AttrSpec::stored("OCSPURL", Str { max_len: 256 }, "").only(&["OCSP"]),
    ALTDATE,
    ALTTIME,
    CRDATE,
    CRTIME,
];
