//! Identities: the operating system's users and groups (`os`: for bindings connections and group
//! membership), and the queue manager's own user store (`store`: user ids with argon2-hashed
//! passwords and their groups), which connection authentication (CONNAUTH, AUTHINFO of type
//! IDPWOS) checks passwords against.

pub mod cache;
pub mod os;
pub mod store;
