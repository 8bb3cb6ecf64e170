//! Who a connection is, and whether it may come in: the path a client connection takes is
//! accept → BLOCKADDR → (TLS) → Hello, which binds the socket to its SVRCONN channel → per
//! conversation, at Connect: CHLAUTH mapping → CONNAUTH (the AUTHINFO named by QMGR CONNAUTH,
//! checked against the queue manager's user store) → BLOCKUSER on the resulting user → the
//! effective user and its groups, which the conversation's engine connection carries.
//!
//! The rules themselves are pure functions of `ferrymq_security`; this module reads the stored
//! records under the core lock, does the slow parts (password hashing, FAILDLAY) outside it,
//! logs every refusal with who, from where and why (never a password), and counts failures for
//! the metrics and for the per-address rate limit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferrymq_security::chlauth::{self, Attempt, Mapping, Rule};
use ferrymq_security::users::cache::VerifiedCache;
use ferrymq_security::users::store::UserStore;
use ferrymq_types::limits::{
    AUTH_FAILURES_PER_WINDOW_MAX, AUTH_FAILURE_ADDRESSES_MAX, AUTH_FAILURE_WINDOW_MS,
    AUTH_VERIFY_CONCURRENT_MAX, MSG_LEN_MAX_BYTES,
};
use ferrymq_types::{MqError, ObjectKind, Reason};
use parking_lot::{Mutex, RwLock};

use crate::core::Core;
use crate::qmgr::Shared;
use crate::storage::now_ms;

/// The AUTHINFO a new queue manager's QMGR CONNAUTH names. It is enforced only with qm.ini
/// `Security:ConnAuth=on` (which crtmqm writes, with CHCKCLNT(REQUIRED) on the object), so that
/// queue managers created before keep connecting their clients as before.
pub const DEFAULT_AUTHINFO: &str = "SYSTEM.DEFAULT.AUTHINFO.IDPWOS";
/// The channel a client that names none runs as.
pub const DEFAULT_CHANNEL: &str = "SYSTEM.DEF.SVRCONN";

/// The queue manager's connection security state: its user store and the failure counts.
pub struct Security {
    path: PathBuf,
    store: RwLock<Arc<UserStore>>,
    /// Recent failed authentications per address: (window start, failures in it).
    failures: Mutex<BTreeMap<String, (u64, u32)>>,
    /// Failed authentications (wrong or missing password) since start.
    pub auth_failures: AtomicU64,
    /// Attempts refused without a password check because their address failed too often.
    pub auth_throttled: AtomicU64,
    /// Connections or conversations refused by a CHLAUTH rule since start.
    pub chlauth_refusals: AtomicU64,
    /// Recently verified passwords (a reconnect costs no argon2 verification).
    verified: Mutex<VerifiedCache>,
    /// Password verifications running at once (AUTH_VERIFY_CONCURRENT_MAX).
    verify_slots: tokio::sync::Semaphore,
    /// Connects let in by a remembered verification since start.
    pub auth_cache_hits: AtomicU64,
}

impl Security {
    /// Reads the user store at `path`; a store that cannot be read is logged and taken as empty
    /// (nobody can authenticate until it is fixed and REFRESH SECURITY reads it again).
    pub fn new(path: PathBuf) -> Security {
        let s = Security {
            path,
            store: RwLock::new(Arc::new(UserStore::default())),
            failures: Mutex::new(BTreeMap::new()),
            auth_failures: AtomicU64::new(0),
            auth_throttled: AtomicU64::new(0),
            chlauth_refusals: AtomicU64::new(0),
            verified: Mutex::new(VerifiedCache::default()),
            verify_slots: tokio::sync::Semaphore::new(AUTH_VERIFY_CONCURRENT_MAX),
            auth_cache_hits: AtomicU64::new(0),
        };
        if let Err(e) = s.reload() {
            crate::qm_log!(crate::errlog::ids::USER_STORE, "{e}");
        }
        s
    }

    /// Reads the user store again (REFRESH SECURITY, setmqusr, dltmqusr).
    pub fn reload(&self) -> Result<usize, String> {
        let store = UserStore::load(&self.path).map_err(|e| {
            format!("{e}; the users already loaded stay in force until it can be read")
        })?;
        let n = store.len();
        *self.store.write() = Arc::new(store);
        self.verified.lock().clear();
        Ok(n)
    }

    pub fn store(&self) -> Arc<UserStore> {
        self.store.read().clone()
    }

    /// Whether `password` is `user`'s in `store`: remembered from a recent success, or verified
    /// (argon2, on a blocking thread, at most AUTH_VERIFY_CONCURRENT_MAX at once).
    async fn verify(&self, store: &Arc<UserStore>, user: &str, password: &str) -> bool {
        let Some(stored) = store.get(user).map(|u| u.password_hash().to_string()) else {
            return false;
        };
        let now = now_ms();
        if self.verified.lock().verified(user, &stored, password, now) {
            self.auth_cache_hits.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        let ok = {
            let _slot = self.verify_slots.acquire().await;
            let (st, u, pw) = (store.clone(), user.to_string(), password.to_string());
            tokio::task::spawn_blocking(move || st.verify(&u, &pw))
                .await
                .unwrap_or(false)
        };
        let mut cache = self.verified.lock();
        if ok {
            cache.remember(user, &stored, password, now_ms());
        } else {
            cache.forget(user);
        }
        ok
    }

    /// Whether `address` failed too often lately.
    fn throttled(&self, address: &str, now: u64) -> bool {
        self.failures.lock().get(address).is_some_and(|(start, n)| {
            now.saturating_sub(*start) < AUTH_FAILURE_WINDOW_MS
                && *n >= AUTH_FAILURES_PER_WINDOW_MAX
        })
    }

    fn record_failure(&self, address: &str, now: u64) {
        self.auth_failures.fetch_add(1, Ordering::Relaxed);
        let mut f = self.failures.lock();
        f.retain(|_, (start, _)| now.saturating_sub(*start) < AUTH_FAILURE_WINDOW_MS);
        if f.len() >= AUTH_FAILURE_ADDRESSES_MAX && !f.contains_key(address) {
            // Forget the oldest window first: the table stays bounded under a spray of addresses.
            if let Some(oldest) = f
                .iter()
                .min_by_key(|(_, (s, _))| *s)
                .map(|(k, _)| k.clone())
            {
                f.remove(&oldest);
            }
        }
        let e = f.entry(address.to_string()).or_insert((now, 0));
        e.1 += 1;
    }
}

/// The channel a client socket runs as, from its definition at Hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelBinding {
    pub name: String,
    /// The channel's MCAUSER; empty: none.
    pub mcauser: String,
    /// The channel's MAXMSGL (0: the queue manager's).
    pub max_msg_len: u32,
    /// The channel's SHARECNV, when set.
    pub sharecnv: Option<u16>,
    /// The channel's HBINT in milliseconds, when set.
    pub heartbeat_ms: Option<u32>,
}

impl ChannelBinding {
    /// The bounds this channel puts on the handshake: (max message length, heartbeat, sharecnv)
    /// given the queue manager's own.
    pub fn bound(
        &self,
        qm_max_msg: u32,
        qm_heartbeat_ms: u32,
        qm_sharecnv: u16,
    ) -> (u32, u32, u16) {
        let max = if self.max_msg_len == 0 {
            qm_max_msg
        } else {
            qm_max_msg.min(self.max_msg_len)
        };
        (
            max.min(MSG_LEN_MAX_BYTES),
            self.heartbeat_ms.unwrap_or(qm_heartbeat_ms),
            self.sharecnv.map_or(qm_sharecnv, |c| c.min(qm_sharecnv)),
        )
    }
}

/// Binds a client socket to the channel its Hello names (empty: SYSTEM.DEF.SVRCONN). An unknown
/// channel, or one that is not a server-connection channel, is refused with
/// MQRC_UNKNOWN_CHANNEL_NAME, and the error log names the channel and the address.
pub fn bind_channel(
    core: &Core,
    requested: &str,
    conname: &str,
) -> Result<ChannelBinding, MqError> {
    let name = if requested.is_empty() {
        DEFAULT_CHANNEL
    } else {
        requested
    };
    let def = core.engine.object(ObjectKind::Channel, name);
    let chltype = def.and_then(|d| d.attrs.get("CHLTYPE").cloned());
    let Some(def) = def.filter(|_| chltype.as_deref() == Some("SVRCONN")) else {
        let why = match chltype {
            None => format!(
                "channel '{name}' is not defined on queue manager '{}'; DEFINE CHANNEL('{name}') CHLTYPE(SVRCONN), or connect through an existing one",
                core.engine.qmgr_name()
            ),
            Some(t) => format!(
                "channel '{name}' is a CHLTYPE({t}) channel; clients connect through a SVRCONN channel"
            ),
        };
        crate::qm_log!(
            crate::errlog::ids::CHANNEL_REFUSED,
            "connection from {conname} refused: {why}"
        );
        return Err(MqError::new(Reason::UNKNOWN_CHANNEL_NAME, why));
    };
    let num = |k: &str| def.attrs.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    Ok(ChannelBinding {
        name: name.to_string(),
        mcauser: def.attrs.get("MCAUSER").cloned().unwrap_or_default(),
        max_msg_len: num("MAXMSGL").map_or(0, |v| v.min(u32::MAX as u64) as u32),
        sharecnv: num("SHARECNV").map(|v| v.min(u16::MAX as u64) as u16),
        heartbeat_ms: num("HBINT").map(|s| (s.saturating_mul(1000)).min(u32::MAX as u64) as u32),
    })
}

/// The CHLAUTH records compiled once per version of the engine's objects (and QMGR CHLAUTH),
/// not per connection: every accept consults them under the core lock. Beside each rule, the
/// CHCKCLNT it asks of the connections it lets through (None: ASQMGR, the AUTHINFO's).
#[derive(Debug, Default)]
pub struct RuleCache {
    #[allow(clippy::type_complexity)]
    compiled: Option<(u64, bool, Arc<Vec<Rule>>, Arc<Vec<Option<Check>>>)>,
}

/// The CHLAUTH records in force: none when QMGR CHLAUTH(DISABLED).
pub fn rules(core: &mut Core) -> Arc<Vec<Rule>> {
    rules_with_checks(core).0
}

/// The CHLAUTH records in force, and each one's CHCKCLNT (same order).
fn rules_with_checks(core: &mut Core) -> (Arc<Vec<Rule>>, Arc<Vec<Option<Check>>>) {
    let disabled = core.engine.attrs().other.get("CHLAUTH").map(String::as_str) == Some("DISABLED");
    let version = core.engine.objects_version();
    if let Some((v, d, r, c)) = &core.chlauth.compiled {
        if *v == version && *d == disabled {
            return (r.clone(), c.clone());
        }
    }
    let (r, c): (Vec<Rule>, Vec<Option<Check>>) = if disabled {
        (Vec::new(), Vec::new())
    } else {
        core.engine
            .objects()
            .filter(|o| o.kind == ObjectKind::ChlAuth)
            .filter_map(|o| {
                let check = match o.attrs.get("CHCKCLNT").map(String::as_str) {
                    Some("REQUIRED") => Some(Check::Required),
                    Some("REQDADM") => Some(Check::ReqdAdm),
                    _ => None,
                };
                Rule::from_attrs(&o.attrs).map(|r| (r, check))
            })
            .unzip()
    };
    let (r, c) = (Arc::new(r), Arc::new(c));
    core.chlauth.compiled = Some((version, disabled, r.clone(), c.clone()));
    (r, c)
}

/// The peer address of a client's connection name (`host` or `host(port)`).
fn address_of(conname: &str) -> &str {
    conname.split('(').next().unwrap_or(conname)
}

/// At accept, before any frame: whether a BLOCKADDR rule refuses `address`. Logs either way a
/// rule matched (a WARN(YES) rule only logs).
pub fn refused_at_accept(shared: &Shared, address: &str) -> bool {
    let rules = rules(&mut shared.core.lock());
    chlauth::blocked_address(&rules, address)
        .is_some_and(|r| rule_refuses(shared, r, &format!("connection from {address}")))
}

/// Whether the CHLAUTH rule `r`, which matched the attempt `who` names, refuses it: a WARN(YES)
/// rule only logs that it would have; any other is counted and logged.
fn rule_refuses(shared: &Shared, r: &Rule, who: &str) -> bool {
    if r.warn {
        crate::qm_log!(
            crate::errlog::ids::CHLAUTH_REFUSED,
            "{who} would be refused by {} (WARN(YES): let through)",
            r.describe()
        );
        return false;
    }
    shared
        .security
        .chlauth_refusals
        .fetch_add(1, Ordering::Relaxed);
    crate::qm_log!(
        crate::errlog::ids::CHLAUTH_REFUSED,
        "{who} refused by {}",
        r.describe()
    );
    true
}

/// CHCKCLNT / CHCKLOCL of an AUTHINFO (and CHCKCLNT of a CHLAUTH rule), weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Check {
    None,
    Optional,
    ReqdAdm,
    Required,
}

fn check(v: Option<&String>, default: Check) -> Check {
    match v.map(String::as_str) {
        Some("NONE") => Check::None,
        Some("OPTIONAL") => Check::Optional,
        Some("REQDADM") => Check::ReqdAdm,
        Some("REQUIRED") => Check::Required,
        _ => default,
    }
}

/// The connection authentication policy in force.
#[derive(Debug, Clone)]
struct AuthPolicy {
    authinfo: String,
    chckclnt: Check,
    chcklocl: Check,
    adoptctx: bool,
    faildlay: Duration,
}

fn auth_policy(core: &Core, forced: bool) -> Option<AuthPolicy> {
    let name = core
        .engine
        .attrs()
        .other
        .get("CONNAUTH")
        .cloned()
        .unwrap_or_else(|| DEFAULT_AUTHINFO.to_string());
    if name.trim().is_empty() || (name == DEFAULT_AUTHINFO && !forced) {
        return None;
    }
    let def = core.engine.object(ObjectKind::AuthInfo, &name)?;
    if def.attrs.get("AUTHTYPE").map(String::as_str) != Some("IDPWOS") {
        return None;
    }
    Some(AuthPolicy {
        authinfo: name.clone(),
        chckclnt: check(def.attrs.get("CHCKCLNT"), Check::ReqdAdm),
        chcklocl: check(def.attrs.get("CHCKLOCL"), Check::Optional),
        adoptctx: def.attrs.get("ADOPTCTX").map(String::as_str) == Some("YES"),
        faildlay: Duration::from_secs(
            def.attrs
                .get("FAILDLAY")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1)
                .min(60),
        ),
    })
}

/// The user a conversation runs as, and that user's groups in the user store: what object
/// authority checks look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    /// The conversation gave a password that the user store accepted (CONNAUTH).
    pub authenticated: bool,
}

/// The operating-system user the queue manager runs as: its process's effective uid, named by
/// the system's passwd (not `$USER`, which the environment that started it could set to anyone).
fn own_user() -> Option<&'static str> {
    static OWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    Some(
        OWN.get_or_init(ferrymq_security::users::os::current_user)
            .as_str(),
    )
    .filter(|u| !u.is_empty())
}

/// Administrative users (CHCKCLNT(REQDADM), BLOCKUSER `*MQADMIN`): the queue manager's own user,
/// root, `mqm`, and members of group `mqm` in the user store.
fn is_admin(store: &UserStore, user: &str) -> bool {
    user == "mqm"
        || user == "root"
        || own_user() == Some(user)
        || store
            .get(user)
            .is_some_and(|u| u.groups.iter().any(|g| g == "mqm"))
}

/// What a conversation's Connect asks.
pub struct ConnectRequest<'a> {
    pub user: &'a str,
    pub password: &'a str,
    pub app: &'a str,
}

/// Decides a conversation's Connect: CHLAUTH mapping, CONNAUTH, BLOCKUSER; returns the identity
/// it runs as, or the 2035 (MQRC_NOT_AUTHORIZED) it is refused with. `channel` is None for a
/// bindings connection, whose asserted user is its process's operating-system user.
pub async fn admit(
    shared: &Arc<Shared>,
    channel: Option<&ChannelBinding>,
    conname: &str,
    os_user: Option<&str>,
    cert_dn: Option<&str>,
    req: ConnectRequest<'_>,
) -> Result<Identity, MqError> {
    let address = address_of(conname).to_string();
    let (rules, checks, policy) = {
        let mut core = shared.core.lock();
        let (rules, checks) = rules_with_checks(&mut core);
        (rules, checks, auth_policy(&core, shared.cfg.connauth))
    };
    let store = shared.security.store();
    let refuse = |why: String| -> MqError {
        MqError::new(
            Reason::NOT_AUTHORIZED,
            format!(
                "connection refused by queue manager '{}': {why}",
                shared.cfg.name
            ),
        )
    };

    // The user the client asserts; a bindings connection is its process's own user.
    let asserted = match (channel, os_user) {
        (None, Some(os)) => os,
        _ => req.user,
    };

    // CHLAUTH mapping (client connections only).
    let mut mapped: Option<String> = None;
    // Mapped by an SSLPEERMAP rule from a client certificate the TLS layer verified: the
    // certificate authenticates the connection as the mapped user (see CONNAUTH below).
    let mut cert_mapped = false;
    // A mapping rule's CHCKCLNT(REQUIRED|REQDADM): stricter than the AUTHINFO's, never looser.
    let mut rule_check: Option<Check> = None;
    if let Some(ch) = channel {
        let attempt = Attempt {
            channel: &ch.name,
            address: &address,
            client_user: req.user,
            cert_dn,
            remote_qmgr: None,
        };
        let decided = chlauth::mapping(&rules, &attempt, ferrymq_security::tls::dn_matches);
        if let Some(r) = decided.rule() {
            rule_check = rules
                .iter()
                .position(|x| std::ptr::eq(x, r))
                .and_then(|i| checks.get(i).copied().flatten());
        }
        match decided {
            // USERSRC(CHANNEL): the channel's own rules apply, as with no rule.
            Mapping::None | Mapping::Channel(_) => {}
            Mapping::Map(r, u) => {
                cert_mapped = r.type_ == chlauth::RuleType::SslPeerMap && cert_dn.is_some();
                mapped = Some(u);
            }
            Mapping::NoAccess(r) => {
                let who = format!("channel {} from {address}, user '{}'", ch.name, req.user);
                if rule_refuses(shared, r, &who) {
                    return Err(refuse(format!(
                        "a channel authentication record refuses channel '{}' from {address}",
                        ch.name
                    )));
                }
            }
        }
    }

    // CONNAUTH. The queue manager's own operating-system user, over bindings, is exempt: it owns
    // the store file and every queue manager file anyway.
    let mut authenticated: Option<String> = None;
    if let Some(p) = &policy {
        let exempt = channel.is_none() && os_user.is_some() && os_user == own_user();
        let check = if exempt {
            Check::None
        } else if channel.is_some() {
            // A rule can raise the check, not lower it, and not turn on one the AUTHINFO has off.
            match rule_check {
                Some(r) if p.chckclnt != Check::None => p.chckclnt.max(r),
                _ => p.chckclnt,
            }
        } else {
            p.chcklocl
        };
        let who = if req.user.is_empty() {
            asserted
        } else {
            req.user
        };
        let needed = match check {
            Check::None => false,
            Check::Optional => false,
            Check::ReqdAdm => is_admin(&store, who),
            Check::Required => true,
        };
        let given = !req.password.is_empty();
        // A verified certificate mapped by SSLPEERMAP stands in for the password; a password
        // given anyway is still checked.
        let needed = needed && !cert_mapped;
        if check != Check::None && (needed || given) {
            let now = now_ms();
            let fail = |why: &str| {
                shared.security.record_failure(&address, now);
                crate::qm_log!(
                    crate::errlog::ids::CONNAUTH_FAILED,
                    "user '{who}' from {} (application '{}'{}): authentication failed: {why} (AUTHINFO '{}')",
                    if channel.is_some() { address.as_str() } else { "a bindings connection" },
                    req.app,
                    channel.map(|c| format!(", channel {}", c.name)).unwrap_or_default(),
                    p.authinfo
                );
            };
            if shared.security.throttled(&address, now) {
                shared
                    .security
                    .auth_throttled
                    .fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(p.faildlay).await;
                fail("too many failed attempts from this address lately; refused without a password check");
                return Err(refuse(format!(
                    "too many failed authentications from {address}; wait and try again"
                )));
            }
            if !given {
                fail("no password given, and CHCKCLNT/CHCKLOCL requires one");
                tokio::time::sleep(p.faildlay).await;
                return Err(refuse(format!(
                    "user '{who}' must authenticate with a password (AUTHINFO '{}')",
                    p.authinfo
                )));
            }
            let ok = shared.security.verify(&store, who, req.password).await;
            if !ok {
                fail(if store.get(who).is_none() {
                    "no such user in the queue manager's user store"
                } else {
                    "wrong password"
                });
                tokio::time::sleep(p.faildlay).await;
                return Err(refuse(format!(
                    "user '{who}' or its password is not valid (AUTHINFO '{}')",
                    p.authinfo
                )));
            }
            authenticated = Some(who.to_string());
        }
    }

    // The effective user: a CHLAUTH MAP, else the channel's MCAUSER, else the authenticated user
    // when ADOPTCTX(YES), else the asserted one.
    let adopt = policy.as_ref().is_some_and(|p| p.adoptctx);
    let password_checked = authenticated.is_some();
    let user = mapped
        .or_else(|| channel.map(|c| c.mcauser.clone()).filter(|m| !m.is_empty()))
        .or_else(|| authenticated.filter(|_| adopt))
        .unwrap_or_else(|| asserted.to_string());

    if let Some(ch) = channel {
        let admin = |u: &str| is_admin(&store, u);
        if let Some(r) = chlauth::blocked_user(&rules, &ch.name, &user, &admin) {
            let who = format!("channel {} from {address}: user '{user}'", ch.name);
            if rule_refuses(shared, r, &who) {
                return Err(refuse(format!(
                    "user '{user}' is blocked on channel '{}'",
                    ch.name
                )));
            }
        }
    }
    let groups = store
        .get(&user)
        .map(|u| u.groups.clone())
        .unwrap_or_default();
    Ok(Identity {
        user,
        groups,
        authenticated: password_checked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_bounds_the_handshake_by_its_own_limits() {
        let b = ChannelBinding {
            name: "C".into(),
            mcauser: String::new(),
            max_msg_len: 1000,
            sharecnv: Some(2),
            heartbeat_ms: Some(5000),
        };
        assert_eq!(b.bound(4_194_304, 60_000, 10), (1000, 5000, 2));
        let open = ChannelBinding {
            max_msg_len: 0,
            sharecnv: None,
            heartbeat_ms: None,
            ..b
        };
        assert_eq!(open.bound(4_194_304, 60_000, 10), (4_194_304, 60_000, 10));
    }

    #[test]
    fn an_address_that_failed_too_often_is_throttled_until_its_window_passes() {
        let dir = tempfile::tempdir().unwrap();
        let sec = Security::new(dir.path().join("users"));
        let t0 = 1_000_000;
        for i in 0..AUTH_FAILURES_PER_WINDOW_MAX {
            assert!(!sec.throttled("10.0.0.1", t0), "after {i} failures");
            sec.record_failure("10.0.0.1", t0 + u64::from(i));
        }
        assert!(sec.throttled("10.0.0.1", t0 + 10));
        assert!(!sec.throttled("10.0.0.2", t0 + 10));
        assert!(!sec.throttled("10.0.0.1", t0 + AUTH_FAILURE_WINDOW_MS));
        assert_eq!(
            sec.auth_failures.load(Ordering::Relaxed),
            u64::from(AUTH_FAILURES_PER_WINDOW_MAX)
        );
    }

    #[test]
    fn the_failure_table_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let sec = Security::new(dir.path().join("users"));
        for i in 0..(AUTH_FAILURE_ADDRESSES_MAX + 10) {
            sec.record_failure(&format!("a{i}"), 5 + i as u64);
        }
        assert_eq!(sec.failures.lock().len(), AUTH_FAILURE_ADDRESSES_MAX);
    }

    #[test]
    fn the_address_of_a_connection_name() {
        assert_eq!(address_of("127.0.0.1"), "127.0.0.1");
        assert_eq!(address_of("10.0.0.1(1414)"), "10.0.0.1");
    }
}
