//! The server's side of security: where the rules of `ferrymq-security` meet sockets and the
//! queue manager's state.

pub mod tls;
