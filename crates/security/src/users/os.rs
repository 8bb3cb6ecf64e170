//! The operating system's users and groups, read from the passwd and group databases.
