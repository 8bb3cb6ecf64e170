//! The queue manager's user store: user ids, argon2-hashed passwords and group memberships.
//!
//! One text file in the queue manager's directory (`QmPaths::users`), mode 0600, replaced
//! atomically (written to a temporary file, synced, renamed, directory synced) so that a crash
//! leaves the old store or the new one, never half of each. Format, one user per line after a
//! version header: `user:group,group:$argon2id$...` (the PHC string is last, so its own
//! punctuation needs no escaping). Names are limited to a safe character set, so no name can
//! contain the separators. Passwords are never stored, shown or logged: only their hashes, which
//! are never shown either.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use ferrymq_types::limits::{
    PASSWORD_LEN_MAX_BYTES, USER_GROUPS_MAX, USER_NAME_LEN_MAX, USER_STORE_FILE_MAX_BYTES,
    USER_STORE_USERS_MAX,
};

const HEADER: &str =
    "# FerryMQ user store v1: user:groups:argon2id hash. Edit with setmqusr and dltmqusr.";

/// A problem with the store or a request to change it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("{0}")]
    Invalid(String),
    #[error("user store {path}: {why}")]
    Io { path: String, why: String },
}

/// One user of the store.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub groups: Vec<String>,
    /// The PHC string of the password's argon2id hash; empty for a user without a password
    /// (who can never authenticate by password).
    hash: String,
}

// Hand-written so that a hash never reaches a log through `{:?}`.
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("groups", &self.groups)
            .field("has_password", &!self.hash.is_empty())
            .finish()
    }
}

impl User {
    /// The PHC string of the password's hash: what a remembered verification is bound to
    /// (`users::cache`), so that a changed password invalidates it.
    pub fn password_hash(&self) -> &str {
        &self.hash
    }

    pub fn has_password(&self) -> bool {
        !self.hash.is_empty()
    }
}

/// The users of a queue manager.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserStore {
    users: BTreeMap<String, User>,
}

/// Checks a user or group name: 1 to 64 characters of letters, digits and `._-@`.
pub fn check_name(what: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty() || name.len() > USER_NAME_LEN_MAX {
        return Err(StoreError::Invalid(format!(
            "a {what} name has 1 to {USER_NAME_LEN_MAX} characters; '{name}' has {}",
            name.chars().count()
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-@".contains(*c)))
    {
        return Err(StoreError::Invalid(format!(
            "{what} name '{name}' holds '{c}': use letters, digits and . _ - @ only"
        )));
    }
    Ok(())
}

/// The argon2id hash of `password` with a fresh random salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String, StoreError> {
    if password.len() > PASSWORD_LEN_MAX_BYTES {
        return Err(StoreError::Invalid(format!(
            "a password has at most {PASSWORD_LEN_MAX_BYTES} bytes"
        )));
    }
    let mut salt = [0u8; 16];
    rand::Rng::fill(&mut rand::thread_rng(), &mut salt[..]);
    let salt = SaltString::encode_b64(&salt).map_err(|e| StoreError::Invalid(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| StoreError::Invalid(format!("hashing failed: {e}")))
}

impl UserStore {
    pub fn get(&self, user: &str) -> Option<&User> {
        self.users.get(user)
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Users and their groups, by name (never the hashes).
    pub fn list(&self) -> impl Iterator<Item = (&str, &[String], bool)> {
        self.users
            .iter()
            .map(|(n, u)| (n.as_str(), u.groups.as_slice(), u.has_password()))
    }

    /// Adds a user or changes one: `groups` replaces its groups when given, `hash` (from
    /// [`hash_password`]) its password when given.
    pub fn set(
        &mut self,
        user: &str,
        groups: Option<Vec<String>>,
        hash: Option<String>,
    ) -> Result<(), StoreError> {
        check_name("user", user)?;
        if let Some(g) = &groups {
            if g.len() > USER_GROUPS_MAX {
                return Err(StoreError::Invalid(format!(
                    "a user belongs to at most {USER_GROUPS_MAX} groups"
                )));
            }
            for n in g {
                check_name("group", n)?;
            }
        }
        if !self.users.contains_key(user) && self.users.len() >= USER_STORE_USERS_MAX {
            return Err(StoreError::Invalid(format!(
                "the user store holds at most {USER_STORE_USERS_MAX} users"
            )));
        }
        let u = self.users.entry(user.to_string()).or_insert(User {
            groups: Vec::new(),
            hash: String::new(),
        });
        if let Some(mut g) = groups {
            g.sort();
            g.dedup();
            u.groups = g;
        }
        if let Some(h) = hash {
            u.hash = h;
        }
        Ok(())
    }

    /// Removes a user; false if there was none.
    pub fn remove(&mut self, user: &str) -> bool {
        self.users.remove(user).is_some()
    }

    /// Whether `password` is `user`'s. Takes tens of milliseconds (argon2id): call it outside any
    /// lock. A user without a stored password, or an unknown one, never matches.
    pub fn verify(&self, user: &str, password: &str) -> bool {
        let Some(u) = self.users.get(user) else {
            return false;
        };
        if u.hash.is_empty() || password.len() > PASSWORD_LEN_MAX_BYTES {
            return false;
        }
        let Ok(parsed) = PasswordHash::new(&u.hash) else {
            return false;
        };
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    }

    /// The store's text.
    pub fn to_text(&self) -> String {
        let mut s = String::from(HEADER);
        s.push('\n');
        for (n, u) in &self.users {
            s.push_str(&format!("{n}:{}:{}\n", u.groups.join(","), u.hash));
        }
        s
    }

    /// Parses a store's text, checking every line.
    pub fn from_text(text: &str) -> Result<UserStore, StoreError> {
        let mut store = UserStore::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| StoreError::Invalid(format!("line {}: {why}", i + 1));
            let mut f = line.splitn(3, ':');
            let (Some(user), Some(groups), Some(hash)) = (f.next(), f.next(), f.next()) else {
                return Err(bad("expected user:groups:hash"));
            };
            if !hash.is_empty() && PasswordHash::new(hash).is_err() {
                return Err(bad("the password hash is not a PHC string"));
            }
            let groups: Vec<String> = groups
                .split(',')
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect();
            if store.users.contains_key(user) {
                return Err(bad(&format!("user '{user}' is listed twice")));
            }
            store
                .set(user, Some(groups), Some(hash.to_string()))
                .map_err(|e| bad(&e.to_string()))?;
        }
        Ok(store)
    }

    /// Reads the store at `path`; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<UserStore, StoreError> {
        let io = |why: String| StoreError::Io {
            path: path.display().to_string(),
            why,
        };
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(UserStore::default()),
            Err(e) => return Err(io(e.to_string())),
            Ok(m) if m.len() > USER_STORE_FILE_MAX_BYTES => {
                return Err(io(format!("larger than {USER_STORE_FILE_MAX_BYTES} bytes")))
            }
            Ok(_) => {}
        }
        let text = std::fs::read_to_string(path).map_err(|e| io(e.to_string()))?;
        UserStore::from_text(&text).map_err(|e| io(e.to_string()))
    }

    /// Writes the store to `path` atomically, readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let io = |why: String| StoreError::Io {
            path: path.display().to_string(),
            why,
        };
        let text = self.to_text();
        if text.len() as u64 > USER_STORE_FILE_MAX_BYTES {
            return Err(io(format!(
                "would be larger than {USER_STORE_FILE_MAX_BYTES} bytes"
            )));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let tmp = path.with_extension("tmp");
        {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| io(e.to_string()))?;
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| io(e.to_string()))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| io(e.to_string()))?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_and_a_wrong_one_does_not() {
        let mut s = UserStore::default();
        s.set(
            "alice",
            Some(vec!["apps".into()]),
            Some(hash_password("pw1").unwrap()),
        )
        .unwrap();
        assert!(s.verify("alice", "pw1"));
        assert!(!s.verify("alice", "pw2"));
        assert!(!s.verify("bob", "pw1"));
    }

    #[test]
    fn the_store_round_trips_through_its_file_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users");
        let mut s = UserStore::default();
        s.set(
            "alice",
            Some(vec!["b".into(), "a".into()]),
            Some(hash_password("x").unwrap()),
        )
        .unwrap();
        s.set("nopw", None, None).unwrap();
        s.save(&p).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let back = UserStore::load(&p).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.get("alice").unwrap().groups, vec!["a", "b"]);
        assert!(back.verify("alice", "x"));
        assert!(!back.get("nopw").unwrap().has_password());
        assert!(!back.verify("nopw", ""));
    }

    #[test]
    fn names_with_separators_are_refused() {
        let mut s = UserStore::default();
        assert!(s.set("a:b", None, None).is_err());
        assert!(s.set("ok", Some(vec!["x,y".into()]), None).is_err());
        assert!(s.set("", None, None).is_err());
    }

    #[test]
    fn a_damaged_store_is_refused_naming_the_line() {
        let e = UserStore::from_text("# h\nalice:g:notahash\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn debug_never_shows_the_hash() {
        let mut s = UserStore::default();
        s.set("alice", None, Some(hash_password("x").unwrap()))
            .unwrap();
        assert!(!format!("{s:?}").contains("argon2"));
    }
}
