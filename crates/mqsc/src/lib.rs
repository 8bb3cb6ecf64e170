//! FerryMQ's MQSC command language: splitting scripts into commands (comments, continuation
//! lines), parsing commands with MQ's keywords and abbreviations, the attribute tables of every
//! object type and the validation of their values, and formatting responses the way MQ
//! administrators expect to read them. A pure language crate: it knows nothing of the engine
//! (execution is `ferrymq-admin`). Both sides share it: `runmqsc` on the client splits a script,
//! checks each command's syntax and counts outcomes before anything is sent, and the queue
//! manager parses again and executes, so what runs is exactly what the server understands. Attributes FerryMQ does not act on yet are accepted,
//! stored, displayed and flagged, so existing MQ scripts run unchanged.

pub mod attrs;
mod command;
mod driver;
pub mod format;
mod lexer;
pub mod messages;
mod parser;
mod pubsub;
pub mod security;
mod split;
mod values;

pub use command::{
    Command, DisplayWhat, Filter, FilterOp, ObjType, Requested, Setting, StopMode, SyntaxError,
};
pub use driver::{echo_line, Tally};
pub use format::format_attributes;
pub use parser::{parse, COMMAND_CHARS_MAX};
pub use split::{split_commands, SourceCommand};
