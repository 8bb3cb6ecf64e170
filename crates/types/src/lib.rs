//! Domain types of FerryMQ shared by every other crate: the message descriptor and properties,
//! object definitions and their attributes, MQ reason codes (one table), the limits of the system
//! (one place, units last) and the small binary codec both the wire protocol and the recovery log
//! use to encode them. It also owns two contracts every process shares: the home directory's layout and MQ's
//! connection names. This crate does no I/O.

pub mod authority;
pub mod codec;
pub mod conname;
pub mod descriptor;
pub mod dlh;
pub mod home;
pub mod limits;
pub mod objects;
pub mod options;
pub mod reason;
pub mod time;
pub mod xqh;

pub use descriptor::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue};
pub use objects::{
    DynamicKind, MsgDeliverySequence, ObjectDef, ObjectKind, ObjectTimes, QmgrAttrs, QueueDef,
    QueueKind,
};
pub use reason::{MqError, Reason};
