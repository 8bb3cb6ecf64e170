//! Identities: the operating system's users and groups (for bindings connections and group
//! membership), and the queue manager's own user store (user ids with argon2-hashed passwords),
//! which connection authentication (CONNAUTH, AUTHINFO of type IDPWOS) checks passwords against.
