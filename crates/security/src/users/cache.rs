//! Recently verified passwords, so that a client reconnecting with the same user and password is
//! not made to wait for, and the queue manager does not spend, another argon2 verification (tens
//! of milliseconds of a core each, on purpose) every time.
//!
//! What is kept per user is a keyed BLAKE2b digest of the password together with the stored
//! argon2 hash it was verified against, never the password: the key is random per process, so a
//! digest means nothing outside it, and a changed password (a new stored hash with a new salt)
//! no longer matches. Only successes are kept, each for a bounded time, and at most a bounded
//! number of users; REFRESH SECURITY (a new store) empties it.

use std::collections::HashMap;

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use ferrymq_types::limits::{AUTH_CACHE_TTL_MS, AUTH_CACHE_USERS_MAX};

type Tag = [u8; 32];

/// Successful verifications: user → (digest, when verified, in ms).
pub struct VerifiedCache {
    key: [u8; 32],
    entries: HashMap<String, (Tag, u64)>,
}

impl Default for VerifiedCache {
    fn default() -> VerifiedCache {
        let mut key = [0u8; 32];
        rand::Rng::fill(&mut rand::thread_rng(), &mut key[..]);
        VerifiedCache {
            key,
            entries: HashMap::new(),
        }
    }
}

impl VerifiedCache {
    fn tag(&self, stored_hash: &str, password: &str) -> Tag {
        let mut h = Blake2b::<U32>::new();
        h.update(self.key);
        h.update((stored_hash.len() as u64).to_le_bytes());
        h.update(stored_hash.as_bytes());
        h.update(password.as_bytes());
        h.finalize().into()
    }

    /// Whether `user` proved this `password` against `stored_hash` within the last
    /// [`AUTH_CACHE_TTL_MS`] before `now_ms`.
    pub fn verified(&self, user: &str, stored_hash: &str, password: &str, now_ms: u64) -> bool {
        match self.entries.get(user) {
            Some((tag, at)) => {
                now_ms.saturating_sub(*at) < AUTH_CACHE_TTL_MS
                    && constant_time_eq(tag, &self.tag(stored_hash, password))
            }
            None => false,
        }
    }

    /// Remembers a successful verification. Full: expired entries go first, then everything
    /// (a cache miss costs one verification, never a wrong answer).
    pub fn remember(&mut self, user: &str, stored_hash: &str, password: &str, now_ms: u64) {
        if self.entries.len() >= AUTH_CACHE_USERS_MAX && !self.entries.contains_key(user) {
            self.entries
                .retain(|_, (_, at)| now_ms.saturating_sub(*at) < AUTH_CACHE_TTL_MS);
            if self.entries.len() >= AUTH_CACHE_USERS_MAX {
                self.entries.clear();
            }
        }
        let tag = self.tag(stored_hash, password);
        self.entries.insert(user.to_string(), (tag, now_ms));
    }

    /// Forgets `user` (a failed attempt with another password must not leave the old one valid
    /// for longer than the administrator expects after a change).
    pub fn forget(&mut self, user: &str) {
        self.entries.remove(user);
    }

    /// Forgets everyone (a new user store).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn constant_time_eq(a: &Tag, b: &Tag) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA";
    const H2: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdDI$aGFzaDI";

    #[test]
    fn a_remembered_password_is_verified_until_it_expires() {
        let mut c = VerifiedCache::default();
        assert!(!c.verified("app", H1, "pw", 0));
        c.remember("app", H1, "pw", 1_000);
        assert!(c.verified("app", H1, "pw", 1_000 + AUTH_CACHE_TTL_MS - 1));
        assert!(!c.verified("app", H1, "pw", 1_000 + AUTH_CACHE_TTL_MS));
    }

    #[test]
    fn another_password_user_or_stored_hash_is_not_verified() {
        let mut c = VerifiedCache::default();
        c.remember("app", H1, "pw", 0);
        assert!(!c.verified("app", H1, "pw2", 0));
        assert!(!c.verified("other", H1, "pw", 0));
        // The password was changed: a new stored hash.
        assert!(!c.verified("app", H2, "pw", 0));
        c.forget("app");
        assert!(!c.verified("app", H1, "pw", 0));
    }

    #[test]
    fn two_processes_keys_differ_so_a_digest_means_nothing_elsewhere() {
        let (a, b) = (VerifiedCache::default(), VerifiedCache::default());
        assert_ne!(a.tag(H1, "pw"), b.tag(H1, "pw"));
    }

    #[test]
    fn the_cache_never_holds_more_than_its_bound() {
        let mut c = VerifiedCache::default();
        for i in 0..(AUTH_CACHE_USERS_MAX + 10) {
            c.remember(&format!("u{i}"), H1, "pw", 0);
            assert!(c.len() <= AUTH_CACHE_USERS_MAX);
        }
        let last = format!("u{}", AUTH_CACHE_USERS_MAX + 9);
        assert!(c.verified(&last, H1, "pw", 0));
    }
}
