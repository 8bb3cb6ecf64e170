//! Domain types of FerryMQ shared by every other crate: the message descriptor and properties,
//! object definitions and their attributes, MQ reason codes (one table), the limits of the system
//! (one place, units last) and the small binary codec both the wire protocol and the recovery log
//! use to encode them. This crate does no I/O and knows nothing about sockets or files.

pub mod codec;
pub mod descriptor;
pub mod dlh;
pub mod limits;
pub mod objects;
pub mod options;
pub mod reason;

pub use descriptor::{MessageDescriptor, MsgId, Persistence, Properties, PropertyValue};
pub use objects::{
    DynamicKind, MsgDeliverySequence, ObjectDef, ObjectKind, ObjectTimes, QmgrAttrs, QueueDef,
    QueueKind,
};
pub use reason::{MqError, Reason};
