//! An agent's credentials file (MQ's `MQMFTCredentials.xml`, named by the agent property
//! `agentQMgrAuthenticationCredentialsFile`): the user id and password a client-mode agent, and
//! the commands that connect like it, present to the agent's queue manager. One `qmgr` element
//! per entry, with MQ's attributes: `name` (the queue manager), `user` (the operating-system user
//! the entry is for; an entry without it is for anyone), `mqUserId` and `mqPassword`. The file
//! holds passwords in the clear, so it must be readable by its owner only: one that the group or
//! others may read or write is refused, with the command that fixes it.

use std::path::Path;

use quick_xml::events::Event;

use crate::{FteError, Result};

/// Largest credentials file read.
const FILE_BYTES_MAX: u64 = 1 << 20;

/// What the agent presents to its queue manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub user: String,
    pub password: String,
}

/// The entry of the file at `path` for queue manager `qmgr` and operating-system user `os_user`
/// (one naming the user before one naming nobody); `None` when no entry is for them.
pub fn load(path: &Path, qmgr: &str, os_user: &str) -> Result<Option<Credential>> {
    let shown = path.display();
    let bad = |m: String| FteError(format!("credentials file {shown}: {m}"));
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(bad(format!(
                "its mode is {mode:03o}, so other users may read the passwords in it; \
                 make it readable by its owner only (chmod 600 {shown})"
            )));
        }
    }
    if !meta.is_file() || meta.len() > FILE_BYTES_MAX {
        return Err(bad(format!("not a file of at most {FILE_BYTES_MAX} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let entries = parse(&text).map_err(bad)?;
    let pick = |for_user: bool| {
        entries.iter().find(|e| {
            e.qmgr == qmgr
                && if for_user {
                    e.os_user.as_deref() == Some(os_user)
                } else {
                    e.os_user.is_none()
                }
        })
    };
    Ok(pick(true).or_else(|| pick(false)).map(|e| Credential {
        user: e.user.clone(),
        password: e.password.clone(),
    }))
}

#[derive(Debug)]
struct Entry {
    qmgr: String,
    os_user: Option<String>,
    user: String,
    password: String,
}

fn parse(xml: &str) -> std::result::Result<Vec<Entry>, String> {
    let mut r = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    let mut depth = 0usize;
    loop {
        let ev = r.read_event().map_err(|e| e.to_string())?;
        let (e, empty) = match &ev {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        if !empty {
            depth += 1;
            if depth > 8 {
                return Err("elements nest too deeply".into());
            }
        }
        if e.local_name().as_ref() != b"qmgr" {
            continue;
        }
        let mut entry = Entry {
            qmgr: String::new(),
            os_user: None,
            user: String::new(),
            password: String::new(),
        };
        for a in e.attributes() {
            let a = a.map_err(|e| e.to_string())?;
            let v = a.unescape_value().map_err(|e| e.to_string())?.into_owned();
            match a.key.local_name().as_ref() {
                b"name" => entry.qmgr = v,
                b"user" => entry.os_user = Some(v),
                b"mqUserId" => entry.user = v,
                b"mqPassword" => entry.password = v,
                _ => {}
            }
        }
        if entry.qmgr.is_empty() || entry.user.is_empty() {
            return Err("a qmgr entry needs name and mqUserId attributes".into());
        }
        if out.len() >= 1_000 {
            return Err("more than 1000 entries".into());
        }
        out.push(entry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const FILE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<tns:mqmftCredentials xmlns:tns="http://wmqfte.ibm.com/MQMFTCredentials">
  <tns:qmgr name="QM1" mqUserId="anyone" mqPassword="p&amp;1"/>
  <tns:qmgr name="QM1" user="ops" mqUserId="opsuser" mqPassword="p2"/>
  <tns:qmgr name="QM2" mqUserId="other" mqPassword="p3"></tns:qmgr>
</tns:mqmftCredentials>
"#;

    fn file(text: &str, mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("MQMFTCredentials.xml");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        (d, p)
    }

    #[test]
    fn the_entry_for_the_user_comes_before_the_entry_for_anyone() {
        let (_d, p) = file(FILE, 0o600);
        let c = |qm, u| load(&p, qm, u).unwrap();
        assert_eq!(
            c("QM1", "ops"),
            Some(Credential {
                user: "opsuser".into(),
                password: "p2".into()
            })
        );
        assert_eq!(
            c("QM1", "someone"),
            Some(Credential {
                user: "anyone".into(),
                password: "p&1".into()
            })
        );
        assert_eq!(c("QM2", "ops").unwrap().user, "other");
        assert_eq!(c("QM3", "ops"), None);
    }

    #[test]
    fn a_file_others_may_read_or_a_broken_one_is_refused_with_its_reason() {
        let (_d, p) = file(FILE, 0o644);
        let e = load(&p, "QM1", "ops").unwrap_err().0;
        assert!(e.contains("mode is 644") && e.contains("chmod 600"), "{e}");
        let (_d, p) = file("<a><tns:qmgr name='QM1'/></a>", 0o600);
        let e = load(&p, "QM1", "ops").unwrap_err().0;
        assert!(e.contains("mqUserId"), "{e}");
        let (_d, p) = file("<a><b></a>", 0o600);
        assert!(load(&p, "QM1", "ops").is_err());
        let e = load(Path::new("/nonexistent/creds.xml"), "QM1", "ops")
            .unwrap_err()
            .0;
        assert!(e.contains("/nonexistent/creds.xml"), "{e}");
    }
}
