//! MQ completion and reason codes as one table. Every error a user sees carries a reason (name and
//! number, as MQ applications and administrators know them) and a message that names the object
//! and, where there is one, the fix.

use std::fmt;

macro_rules! reasons {
    ($( $name:ident = $code:literal, )*) => {
        /// An MQ reason code (MQRC_*). `Reason::NONE` is success.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        #[allow(non_camel_case_types)]
        pub enum Reason { $( $name = $code, )* }

        impl Reason {
            /// Every reason in the table, for docs and tests.
            pub const ALL: &'static [Reason] = &[ $( Reason::$name, )* ];

            /// The reason's number, as in MQ.
            pub fn code(self) -> u32 { self as u32 }

            /// Looks a number up; unknown numbers (a newer peer) map to `UNEXPECTED_ERROR`.
            pub fn from_code(code: u32) -> Reason {
                match code { $( $code => Reason::$name, )* _ => Reason::UNEXPECTED_ERROR }
            }

            /// The MQ constant name, e.g. `MQRC_Q_FULL` (PCF reasons, 3000-4999, are `MQRCCF_*`).
            pub fn mq_name(self) -> &'static str {
                match self { $( Reason::$name if $code >= 3000 && $code < 5000 => concat!("MQRCCF_", stringify!($name)), )* _ => self.table_name() }
            }

            fn table_name(self) -> &'static str {
                match self { $( Reason::$name => concat!("MQRC_", stringify!($name)), )* }
            }
        }
    };
}

reasons! {
    NONE = 0,
    ALIAS_BASE_Q_TYPE_ERROR = 2001,
    ALREADY_CONNECTED = 2002,
    BACKED_OUT = 2003,
    BUFFER_LENGTH_ERROR = 2005,
    CONNECTION_BROKEN = 2009,
    DATA_LENGTH_ERROR = 2010,
    DYNAMIC_Q_NAME_ERROR = 2011,
    ENVIRONMENT_ERROR = 2012,
    EXPIRY_ERROR = 2013,
    GET_INHIBITED = 2016,
    HANDLE_NOT_AVAILABLE = 2017,
    HCONN_ERROR = 2018,
    HOBJ_ERROR = 2019,
    SYNCPOINT_LIMIT_REACHED = 2024,
    MAX_CONNS_LIMIT_REACHED = 2025,
    MD_ERROR = 2026,
    MISSING_REPLY_TO_Q = 2027,
    MSG_TOO_BIG_FOR_Q = 2030,
    MSG_TOO_BIG_FOR_Q_MGR = 2031,
    NO_MSG_AVAILABLE = 2033,
    NO_MSG_UNDER_CURSOR = 2034,
    NOT_AUTHORIZED = 2035,
    NOT_OPEN_FOR_BROWSE = 2036,
    NOT_OPEN_FOR_INPUT = 2037,
    NOT_OPEN_FOR_INQUIRE = 2038,
    NOT_OPEN_FOR_OUTPUT = 2039,
    OBJECT_CHANGED = 2041,
    OBJECT_IN_USE = 2042,
    OBJECT_TYPE_ERROR = 2043,
    OD_ERROR = 2044,
    OPTION_NOT_VALID_FOR_TYPE = 2045,
    OPTIONS_ERROR = 2046,
    PERSISTENCE_ERROR = 2047,
    PRIORITY_ERROR = 2050,
    PUT_INHIBITED = 2051,
    Q_DELETED = 2052,
    Q_FULL = 2053,
    Q_NOT_EMPTY = 2055,
    Q_SPACE_NOT_AVAILABLE = 2056,
    Q_TYPE_ERROR = 2057,
    Q_MGR_NAME_ERROR = 2058,
    Q_MGR_NOT_AVAILABLE = 2059,
    REPORT_OPTIONS_ERROR = 2061,
    SELECTOR_COUNT_ERROR = 2065,
    SELECTOR_ERROR = 2067,
    SELECTOR_NOT_FOR_TYPE = 2068,
    TRUNCATED_MSG_ACCEPTED = 2079,
    TRUNCATED_MSG_FAILED = 2080,
    UNKNOWN_ALIAS_BASE_Q = 2082,
    UNKNOWN_OBJECT_NAME = 2085,
    UNKNOWN_OBJECT_Q_MGR = 2086,
    UNKNOWN_REMOTE_Q_MGR = 2087,
    WAIT_INTERVAL_ERROR = 2090,
    XMIT_Q_TYPE_ERROR = 2091,
    XMIT_Q_USAGE_ERROR = 2092,
    UNKNOWN_XMIT_Q = 2196,
    UNKNOWN_DEF_XMIT_Q = 2197,
    DEF_XMIT_Q_TYPE_ERROR = 2198,
    DEF_XMIT_Q_USAGE_ERROR = 2199,
    CONTEXT_HANDLE_ERROR = 2097,
    OBJECT_ALREADY_EXISTS = 2100,
    OBJECT_DAMAGED = 2101,
    RESOURCE_PROBLEM = 2102,
    FORMAT_ERROR = 2110,
    Q_MGR_QUIESCING = 2161,
    Q_MGR_STOPPING = 2162,
    STORAGE_NOT_AVAILABLE = 2071,
    HEADER_ERROR = 2142,
    CALL_INTERRUPTED = 2549,
    PERSISTENT_NOT_ALLOWED = 2048,
    SECURITY_ERROR = 2063,
    CONNECTION_QUIESCING = 2202,
    CONNECTION_STOPPING = 2203,
    MSG_TOO_BIG_FOR_CHANNEL = 2218,
    CALL_IN_PROGRESS = 2219,
    UNEXPECTED_ERROR = 2195,
    PROPERTY_NAME_ERROR = 2442,
    PROPERTY_VALUE_TOO_BIG = 2469,
    HOST_NOT_AVAILABLE = 2538,
    RECONNECT_FAILED = 2548,
    RECONNECTING = 2544,
    STANDBY_Q_MGR = 2543,
    RECONNECTED = 2545,
    CONNECTION_NOT_AUTHORIZED = 2217,
    CHANNEL_NOT_AVAILABLE = 2537,
    UNKNOWN_CHANNEL_NAME = 2540,
    BACKOUT_THRESHOLD_REACHED = 2362,
    // Publish/subscribe.
    TOPIC_STRING_ERROR = 2425,
    NO_SUBSCRIPTION = 2428,
    SUBSCRIPTION_IN_USE = 2429,
    STAT_TYPE_ERROR = 2430,
    SUB_ALREADY_EXISTS = 2432,
    DURABILITY_NOT_ALLOWED = 2436,
    NO_RETAINED_MSG = 2437,
    SUB_NAME_ERROR = 2440,
    SELECTOR_SYNTAX_ERROR = 2459,
    PUBLICATION_FAILURE = 2502,
    SUB_INHIBITED = 2503,
    NO_SUBS_MATCHED = 2550,
    // TLS on channels.
    SSL_INITIALIZATION_ERROR = 2393,
    SSL_PEER_NAME_MISMATCH = 2398,
    COMMAND_FAILED = 3008,
    CHANNEL_IN_USE = 4031,
    LISTENER_STARTED = 3233,
    LISTENER_STOPPED = 3234,
    MISSING_CONN_NAME = 4061,
    CHANNEL_NOT_ACTIVE = 4064,
    // Message groups and segments, MQSET.
    CHAR_ATTR_LENGTH_ERROR = 2006,
    INHIBIT_VALUE_ERROR = 2020,
    NOT_OPEN_FOR_SET = 2040,
    TRIGGER_CONTROL_ERROR = 2075,
    TRIGGER_DEPTH_ERROR = 2076,
    TRIGGER_MSG_PRIORITY_ERR = 2077,
    TRIGGER_TYPE_ERROR = 2078,
    INCONSISTENT_PERSISTENCE = 2185,
    INCOMPLETE_GROUP = 2241,
    INCOMPLETE_MSG = 2242,
    INCONSISTENT_UOW = 2245,
    MSG_FLAGS_ERROR = 2249,
    MSG_SEQ_NUMBER_ERROR = 2250,
    OFFSET_ERROR = 2251,
    ORIGINAL_LENGTH_ERROR = 2252,
}

/// Completion code of a call (MQCC_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    Ok = 0,
    Warning = 1,
    Failed = 2,
}

impl Reason {
    /// The completion code MQ reports with this reason.
    pub fn completion(self) -> Completion {
        match self {
            Reason::NONE => Completion::Ok,
            Reason::TRUNCATED_MSG_ACCEPTED | Reason::RECONNECTED => Completion::Warning,
            _ => Completion::Failed,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.mq_name(), self.code())
    }
}

/// An error with its MQ reason and a sentence for a human: what object, what went wrong, what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MqError {
    pub reason: Reason,
    pub message: String,
}

impl MqError {
    pub fn new(reason: Reason, message: impl Into<String>) -> MqError {
        MqError {
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for MqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for MqError {}

/// Shorthand for building an [`MqError`] with a formatted message.
#[macro_export]
macro_rules! mqerr {
    ($reason:ident, $($arg:tt)*) => {
        $crate::reason::MqError::new($crate::reason::Reason::$reason, format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_number() {
        for r in Reason::ALL {
            assert_eq!(Reason::from_code(r.code()), *r, "{}", r.mq_name());
        }
    }

    #[test]
    fn reason_numbers_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for r in Reason::ALL {
            assert!(seen.insert(r.code()), "duplicate number {}", r.code());
        }
    }

    #[test]
    fn names_follow_mq_spelling() {
        assert_eq!(Reason::Q_FULL.mq_name(), "MQRC_Q_FULL");
        assert_eq!(
            Reason::NO_MSG_AVAILABLE.to_string(),
            "MQRC_NO_MSG_AVAILABLE (2033)"
        );
    }
}
