//! `mkdevcerts`: a development certificate authority and the certificates a queue manager and
//! its clients need to try TLS, written as PEM files; with `-m`, the queue manager's qm.ini SSL
//! stanza is set to them (through the same code as `setmqini`). For development only.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use ferrymq_security::tls::devca::{DevCa, Issued};

use crate::cli;
use crate::lifecycle::{existing, other, set_ini_keys, Res};

/// Writes `text` to `path`; a private key only its owner may read (mode 0600, even when it
/// replaces an older file).
fn write(path: &Path, text: &str, private: bool) -> Res {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| other(format!("mkdevcerts: cannot write {}: {e}", path.display())))?;
    f.write_all(text.as_bytes())
        .map_err(|e| other(format!("mkdevcerts: cannot write {}: {e}", path.display())))
}

fn write_pair(dir: &Path, name: &str, issued: &Issued) -> Res {
    write(&dir.join(format!("{name}.pem")), &issued.cert_pem, false)?;
    write(&dir.join(format!("{name}.key")), &issued.key_pem, true)?;
    println!(
        "mkdevcerts: {} and {}",
        dir.join(format!("{name}.pem")).display(),
        dir.join(format!("{name}.key")).display()
    );
    Ok(())
}

/// A file name part from a certificate name: what a path cannot hold is replaced.
fn file_part(name: &str) -> Result<String, crate::lifecycle::Fail> {
    let s: String = name
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    if s.is_empty() || s == "." || s == ".." || s == "ca" {
        return Err(other(format!(
            "mkdevcerts: '{name}' cannot name a certificate file"
        )));
    }
    Ok(s)
}

pub fn run(a: &cli::Mkdevcerts) -> Res {
    let dir = a.dir.clone().unwrap_or_default();
    let paths = match &a.m {
        Some(m) => Some(existing("mkdevcerts", m)?),
        None => None,
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| other(format!("mkdevcerts: cannot create {}: {e}", dir.display())))?;
    let fail = |e: ferrymq_security::tls::TlsError| other(format!("mkdevcerts: {e}"));
    // A CA already in DIR is reused, so that certificates issued later are trusted by the same
    // bundle.
    let (ca_pem, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    let ca = if ca_pem.exists() && ca_key.exists() {
        let read = |p: &Path| {
            std::fs::read_to_string(p)
                .map_err(|e| other(format!("mkdevcerts: cannot read {}: {e}", p.display())))
        };
        let ca = DevCa::from_pem(&read(&ca_pem)?, &read(&ca_key)?).map_err(fail)?;
        println!("mkdevcerts: using the CA in {}", ca_pem.display());
        ca
    } else {
        let ca = DevCa::new("FerryMQ development CA").map_err(fail)?;
        write(&ca_pem, &ca.cert_pem(), false)?;
        write(&ca_key, &ca.key_pem(), true)?;
        println!(
            "mkdevcerts: a new CA in {} (development only)",
            ca_pem.display()
        );
        ca
    };
    let qm_name =
        a.m.clone()
            .or_else(|| a.qmgr_cert.clone())
            .unwrap_or_else(|| "qmgr".into());
    let qm_file = file_part(&qm_name)?;
    write_pair(
        &dir,
        &qm_file,
        &ca.issue_qmgr(&qm_name, &a.host).map_err(fail)?,
    )?;
    for c in &a.client {
        write_pair(&dir, &file_part(c)?, &ca.issue_client(c).map_err(fail)?)?;
    }
    if let Some(paths) = paths {
        let abs = std::path::absolute(&dir)
            .map_err(|e| other(format!("mkdevcerts: {}: {e}", dir.display())))?;
        let p = |f: String| abs.join(f).display().to_string();
        let (cert, key, ca) = (
            p(format!("{qm_file}.pem")),
            p(format!("{qm_file}.key")),
            p("ca.pem".into()),
        );
        set_ini_keys(
            "mkdevcerts",
            &paths,
            &[
                ("SSL", "CertFile", &cert),
                ("SSL", "KeyFile", &key),
                ("SSL", "CAFile", &ca),
            ],
        )?;
        println!(
            "mkdevcerts: queue manager '{qm_name}' qm.ini SSL stanza set; REFRESH SECURITY TYPE(SSL) or a restart uses it"
        );
    }
    Ok(())
}
