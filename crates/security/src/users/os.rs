//! The operating system's users and groups, read from the passwd and group databases.
//!
//! A principal's groups are its primary group (passwd's fourth field) and every group that
//! lists it as a member, as `id -Gn` shows them. The files are read at each call: a connection
//! or a command looks a user up once, and an administrator's `usermod` takes effect on the next
//! connection without a restart (REFRESH SECURITY has nothing to reload).

use std::path::Path;

/// One passwd entry: name, uid and primary gid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// One group entry: name, gid and listed members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The entries of passwd-format text (malformed lines and comments skipped).
pub fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some(PasswdEntry {
                name: f.first().filter(|n| !n.is_empty())?.to_string(),
                uid: f.get(2)?.parse().ok()?,
                gid: f.get(3)?.parse().ok()?,
            })
        })
        .collect()
}

/// The entries of group-format text (malformed lines and comments skipped).
pub fn parse_group(text: &str) -> Vec<GroupEntry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some(GroupEntry {
                name: f.first().filter(|n| !n.is_empty())?.to_string(),
                gid: f.get(2)?.parse().ok()?,
                members: f
                    .get(3)
                    .map(|m| {
                        m.split(',')
                            .map(str::trim)
                            .filter(|m| !m.is_empty())
                            .map(String::from)
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// The groups of `user` given the two databases: the primary group first, then the others in
/// the group file's order, each once. A user the passwd database does not know still has the
/// groups that list it.
pub fn groups_in(user: &str, passwd: &[PasswdEntry], groups: &[GroupEntry]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(pw) = passwd.iter().find(|p| p.name == user) {
        if let Some(g) = groups.iter().find(|g| g.gid == pw.gid) {
            out.push(g.name.clone());
        }
    }
    for g in groups {
        if g.members.iter().any(|m| m == user) && !out.contains(&g.name) {
            out.push(g.name.clone());
        }
    }
    out
}

/// Where the databases are; tests point elsewhere.
#[derive(Clone, Debug)]
pub struct Files<'a> {
    pub passwd: &'a Path,
    pub group: &'a Path,
}

impl Default for Files<'_> {
    fn default() -> Self {
        Files {
            passwd: Path::new("/etc/passwd"),
            group: Path::new("/etc/group"),
        }
    }
}

impl Files<'_> {
    fn passwd(&self) -> Vec<PasswdEntry> {
        parse_passwd(&std::fs::read_to_string(self.passwd).unwrap_or_default())
    }

    fn group(&self) -> Vec<GroupEntry> {
        parse_group(&std::fs::read_to_string(self.group).unwrap_or_default())
    }

    /// The groups of `user` (empty when the files cannot be read).
    pub fn groups_of(&self, user: &str) -> Vec<String> {
        groups_in(user, &self.passwd(), &self.group())
    }

    /// The name of the user with this uid.
    pub fn user_name(&self, uid: u32) -> Option<String> {
        self.passwd()
            .into_iter()
            .find(|p| p.uid == uid)
            .map(|p| p.name)
    }
}

/// The groups of `user` from the system's databases.
pub fn groups_of(user: &str) -> Vec<String> {
    Files::default().groups_of(user)
}

/// The name of the user this process runs as (its effective uid, as the owner of
/// `/proc/self`), or the uid in decimal when passwd does not name it.
pub fn current_user() -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata("/proc/self") {
        Ok(m) => Files::default()
            .user_name(m.uid())
            .unwrap_or_else(|| m.uid().to_string()),
        Err(_) => std::env::var("USER").unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n# comment\napp:x:1001:1001::/home/app:/bin/sh\nbroken line\nops:x:1002:50::/:/bin/sh\n";
    const GROUP: &str =
        "root:x:0:\napp:x:1001:\nstaff:x:50:\nmqm:x:990:ops,app\nwriters:x:991:app\n";

    #[test]
    fn a_users_groups_are_its_primary_group_then_those_listing_it() {
        let (p, g) = (parse_passwd(PASSWD), parse_group(GROUP));
        assert_eq!(p.len(), 3);
        assert_eq!(groups_in("app", &p, &g), ["app", "mqm", "writers"]);
        assert_eq!(groups_in("ops", &p, &g), ["staff", "mqm"]);
        assert_eq!(groups_in("root", &p, &g), ["root"]);
        assert!(groups_in("nobody", &p, &g).is_empty());
    }

    #[test]
    fn the_files_are_read_where_they_are_named() {
        let dir = std::env::temp_dir().join(format!("ferrymq-os-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("passwd"), PASSWD).unwrap();
        std::fs::write(dir.join("group"), GROUP).unwrap();
        let f = Files {
            passwd: &dir.join("passwd"),
            group: &dir.join("group"),
        };
        assert_eq!(f.user_name(1002).as_deref(), Some("ops"));
        assert_eq!(f.groups_of("ops"), ["staff", "mqm"]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!current_user().is_empty());
    }
}
