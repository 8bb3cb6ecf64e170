//! The queue manager's user store: user ids, argon2-hashed passwords and group memberships.
