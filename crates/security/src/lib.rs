//! FerryMQ's security rules, as pure functions over the records an administrator stored: channel
//! authentication (`chlauth`: which CHLAUTH rule applies to an address, user, certificate and
//! channel, and what it decides), object authorities (`oam`: whether a principal and its groups
//! hold an authority on an object, through generic profiles), identities (`users`: the queue
//! manager's user store with hashed passwords, and the operating system's users and groups), and
//! TLS (`tls`: the key repository, rustls configurations, distinguished-name filters such as
//! SSLPEER, and a development certificate authority). Nothing here does I/O on a socket or holds a
//! lock of the queue manager: the server asks, this crate answers, so the same rules serve the
//! listener, the dispatcher, `runmqsc`, `dspmqaut` and the fuzzer.

pub mod chlauth;
pub mod oam;
pub mod tls;
pub mod users;
