//! What crtmqm configures in a new queue manager beyond MQ's default objects: the security
//! defaults (back-stop CHLAUTH rules, a password required of clients, remote administration only
//! over SYSTEM.ADMIN.SVRCONN), and with `--dev` the open development configuration. Both are MQSC
//! scripts embedded in the binary, run by the same executor as runmqsc before the first
//! checkpoint (`ferrymq_server::create_storage_with`), plus the qm.ini keys and users they need.

use ferrymq_security::users::store::{hash_password, UserStore};
use ferrymq_server::{Ini, QmPaths};

use crate::cli;
use crate::lifecycle::{other, Fail};

/// The security defaults of every new queue manager (not with `--insecure`).
const SECURE: &str = include_str!("initial/secure.mqsc");
/// `--dev`: queues, topic, channels, CHLAUTH rules and authorities for applications.
const DEV: &str = include_str!("initial/dev.mqsc");

/// The development configuration's application user and its group.
pub const DEV_APP_USER: &str = "app";
pub const DEV_APP_GROUP: &str = "mqclient";
/// The development configuration's application channel.
pub const DEV_APP_CHANNEL: &str = "DEV.APP.SVRCONN";

/// What crtmqm was asked to configure, read before anything is created.
pub struct Plan {
    insecure: bool,
    /// `--dev`: Some(the app user's password, if one was given).
    dev: Option<Option<String>>,
}

impl Plan {
    /// Reads the flags, and the app password (FERRYMQ_APP_PASSWORD, or the first line of
    /// standard input with --dev-app-password-stdin).
    pub fn from_flags(p: &cli::Crtmqm) -> Result<Plan, Fail> {
        if p.insecure && p.dev {
            return Err(other(
                "crtmqm: --dev and --insecure exclude each other: --dev is built on the security defaults",
            ));
        }
        if p.dev_app_password_stdin && !p.dev {
            return Err(other("crtmqm: --dev-app-password-stdin goes with --dev"));
        }
        let dev = if p.dev {
            let pw = if p.dev_app_password_stdin {
                Some(cli::read_password_line().map_err(|e| other(format!("crtmqm: {e}")))?)
            } else {
                std::env::var("FERRYMQ_APP_PASSWORD").ok()
            };
            Some(pw.filter(|p| !p.is_empty()))
        } else {
            None
        };
        Ok(Plan {
            insecure: p.insecure,
            dev,
        })
    }

    /// The qm.ini keys the security defaults need: CONNAUTH through the default AUTHINFO is
    /// enforced, and MQSC over TCP is accepted from authenticated conversations on
    /// SYSTEM.ADMIN.SVRCONN. A queue manager whose qm.ini lacks them (created before, or with
    /// --insecure) keeps the old defaults.
    pub fn set_ini(&self, ini: &mut Ini) {
        if !self.insecure {
            ini.set("Security", "ConnAuth", "on");
            ini.set("Channels", "RemoteAdmin", "authenticated");
        }
    }

    /// The MQSC crtmqm runs before the first checkpoint.
    pub fn script(&self) -> String {
        if self.insecure {
            return String::new();
        }
        let mut s = SECURE.to_string();
        if let Some(pw) = &self.dev {
            // With a password, the application channel asks for it; without, 'app' (not an
            // administrative user) comes in on it without one, as in MQ's developer image.
            let check = if pw.is_some() { "REQUIRED" } else { "ASQMGR" };
            s.push_str(&DEV.replace("%APP_CHCKCLNT%", check));
        }
        s
    }

    /// After the storage exists: the user store of `--dev` (user 'app' in group 'mqclient').
    pub fn finish(&self, paths: &QmPaths) -> Result<(), String> {
        let Some(pw) = &self.dev else {
            return Ok(());
        };
        let mut store = UserStore::load(&paths.users()).map_err(|e| e.to_string())?;
        let hash = pw
            .as_deref()
            .map(hash_password)
            .transpose()
            .map_err(|e| e.to_string())?;
        store
            .set(DEV_APP_USER, Some(vec![DEV_APP_GROUP.to_string()]), hash)
            .map_err(|e| e.to_string())?;
        store.save(&paths.users()).map_err(|e| e.to_string())
    }

    /// One line for crtmqm's output: what the queue manager lets in.
    pub fn describe(&self) -> &'static str {
        match (&self.dev, self.insecure) {
            (_, true) => "Security defaults left out (--insecure): clients connect without a password, as the queue manager's own user unless they name one; use it only where nobody else reaches the port.",
            (Some(Some(_)), _) => "Development configuration: user 'app' (its password) on DEV.APP.SVRCONN; DEV.QUEUE.1-3, DEV.DEAD.LETTER.QUEUE, DEV.BASE.TOPIC; administrators with a password on DEV.ADMIN.SVRCONN or SYSTEM.ADMIN.SVRCONN.",
            (Some(None), _) => "Development configuration: user 'app' without a password on DEV.APP.SVRCONN (set FERRYMQ_APP_PASSWORD to require one); DEV.QUEUE.1-3, DEV.DEAD.LETTER.QUEUE, DEV.BASE.TOPIC; administrators with a password on DEV.ADMIN.SVRCONN or SYSTEM.ADMIN.SVRCONN.",
            (None, false) => "Secure by default: clients need a user and password from its user store (ferrymq setmqusr) on a channel you define; SYSTEM.* channels refuse clients, except SYSTEM.ADMIN.SVRCONN for administrators with a password.",
        }
    }
}
