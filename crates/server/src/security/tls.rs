//! TLS on client sockets: the key repository in force (replaced whole by REFRESH SECURITY
//! TYPE(SSL), so a socket accepted after it sees the new one and sockets already open keep theirs),
//! and the one place a channel's SSLCIPH, SSLCAUTH and SSLPEER accept or refuse a socket. Also the
//! links between the queue manager's own instances (HA replication, DR) when qm.ini makes them
//! mutual TLS ([`instance_links`]); a refresh reaches their new connections too.
//!
//! One port serves plain and TLS sockets (the listener looks at the first byte); whether a
//! channel needs TLS, which suites and which peers it accepts is each channel's decision, taken at
//! Hello for the channel the socket is on.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ferrymq_replication::link::{Links, Refusal as LinkRefused, TlsPolicy};
use ferrymq_security::tls::link::{classify, LinkRefusal, LinkTls};
use ferrymq_security::tls::{
    dn_matches, CipherSpec, KeyRepoPaths, KeyRepository, TlsSession, HANDSHAKE_RECORD_BYTE,
};
use ferrymq_types::Reason;
use parking_lot::{Mutex, RwLock};
use rustls::ServerConfig;

use crate::config::{ssl_from_ini, Ini};

/// The key repository a new TLS socket is served with.
pub struct TlsState {
    current: RwLock<Option<Arc<ServerConfig>>>,
    /// The queue manager's qm.ini (re-read by a refresh) and directory (relative paths).
    ini: PathBuf,
    dir: PathBuf,
    /// The instance links whose new connections a refresh reaches, with their peer filters.
    links: Mutex<Vec<(Links, Option<String>)>>,
}

/// The links of kind `what` ("HA replication", "DR") as qm.ini sets them: plain, or mutual TLS
/// with the key repository at `ssl` (relative paths under `dir`) and the peer DN filter. A
/// repository that cannot be used is an error: such links could never connect.
pub fn instance_links(
    what: &'static str,
    link: &crate::config::LinkTlsConfig,
    ssl: Option<&KeyRepoPaths>,
    dir: &std::path::Path,
) -> Result<Links, String> {
    if !link.required {
        return Ok(Links::plain(what));
    }
    let paths = ssl
        .ok_or_else(|| format!("{what} links need TLS but qm.ini has no SSL stanza"))?
        .under(dir);
    let tls = link_tls(&paths, link.peer.as_deref()).map_err(|e| {
        format!("{what} links need TLS, and the key repository cannot be used: {e}")
    })?;
    crate::qm_log!(
        crate::errlog::ids::LINK_TLS_ON,
        "{what} links are mutual TLS: this instance presents {} (issued by {}); a peer must present a certificate from {}{}",
        tls.own.subject,
        tls.own.issuer,
        paths.ca_file.display(),
        link.peer
            .as_ref()
            .map_or(String::new(), |p| format!(" whose DN matches '{p}'"))
    );
    Ok(Links::tls(
        what,
        std::sync::Arc::new(Policy(tls)),
        std::sync::Arc::new(|msg: &str| {
            crate::qm_log!(crate::errlog::ids::LINK_TLS_REFUSED, "{msg}")
        }),
    ))
}

fn link_tls(paths: &KeyRepoPaths, peer: Option<&str>) -> Result<LinkTls, String> {
    let repo = KeyRepository::load(paths).map_err(|e| e.to_string())?;
    LinkTls::new(&repo, peer).map_err(|e| e.to_string())
}

/// The security crate's link rules, as the links ask for them.
struct Policy(LinkTls);

fn refusal(r: LinkRefusal) -> LinkRefused {
    LinkRefused {
        rule: r.rule.name(),
        detail: r.detail,
    }
}

impl TlsPolicy for Policy {
    fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.0.client.clone()
    }

    fn server_config(&self) -> Arc<ServerConfig> {
        self.0.server.clone()
    }

    fn server_name(&self, addr: &str) -> rustls::pki_types::ServerName<'static> {
        LinkTls::server_name(addr)
    }

    fn check_peer(&self, state: &rustls::CommonState) -> Result<(), LinkRefused> {
        self.0.check_peer(state).map(|_| ()).map_err(refusal)
    }

    fn classify(&self, e: &rustls::Error) -> LinkRefused {
        refusal(classify(e))
    }
}

impl TlsState {
    /// Loads the repository named in qm.ini's SSL stanza; a failure is logged and leaves TLS off
    /// (TLS sockets are refused, each with an error-log entry) until a refresh succeeds.
    pub fn load(
        ssl: Option<&ferrymq_security::tls::KeyRepoPaths>,
        ini: PathBuf,
        dir: PathBuf,
    ) -> TlsState {
        let state = TlsState {
            current: RwLock::new(None),
            ini,
            dir,
            links: Mutex::new(Vec::new()),
        };
        if let Some(paths) = ssl {
            match state.build(paths) {
                Ok((cfg, msg)) => {
                    *state.current.write() = Some(cfg);
                    crate::qm_log!(crate::errlog::ids::TLS_REPOSITORY_LOADED, "{msg}");
                }
                Err(e) => crate::qm_log!(
                    crate::errlog::ids::TLS_REPOSITORY_FAILED,
                    "the TLS key repository cannot be used, so TLS connections are refused: {e}"
                ),
            }
        }
        state
    }

    fn build(
        &self,
        paths: &ferrymq_security::tls::KeyRepoPaths,
    ) -> Result<(Arc<ServerConfig>, String), String> {
        let paths = paths.under(&self.dir);
        let repo = KeyRepository::load(&paths).map_err(|e| e.to_string())?;
        let cfg = repo.server_config().map_err(|e| e.to_string())?;
        Ok((
            cfg,
            format!(
                "TLS key repository loaded: certificate {} (serial {}, issued by {}) from {}, trusted CAs from {}",
                repo.names.subject,
                repo.names.serial,
                repo.names.issuer,
                paths.cert_file.display(),
                paths.ca_file.display()
            ),
        ))
    }

    /// The mutual-TLS configurations a sending message channel connects with: the key
    /// repository qm.ini names now (read at each channel start, so a refresh needs nothing
    /// more), checking the receiver's certificate against `peer` (SSLPEER) when set.
    pub fn channel_client(&self, peer: Option<&str>) -> Result<LinkTls, String> {
        let ini = Ini::load(&self.ini)?;
        let paths = ssl_from_ini(&ini)?
            .ok_or("qm.ini has no SSL stanza, so this queue manager has no certificate")?;
        link_tls(&paths.under(&self.dir), peer)
    }

    /// Makes REFRESH SECURITY TYPE(SSL) reach `links` too (if they are TLS links).
    pub fn refresh_links(&self, links: Links, peer: Option<String>) {
        if links.is_tls() {
            self.links.lock().push((links, peer));
        }
    }

    /// The configuration a TLS socket accepted now is served with; None: TLS is not configured.
    pub fn server_config(&self) -> Option<Arc<ServerConfig>> {
        self.current.read().clone()
    }

    /// REFRESH SECURITY TYPE(SSL): reads qm.ini's SSL stanza and the files it names again. A
    /// failure keeps the repository in force and says why.
    pub fn refresh(&self) -> Result<String, String> {
        let ini = Ini::load(&self.ini)?;
        let Some(paths) = ssl_from_ini(&ini)? else {
            let had = self.current.write().take().is_some();
            return Ok(if had {
                "qm.ini has no SSL stanza any more: TLS connections are refused from now on".into()
            } else {
                "qm.ini has no SSL stanza: TLS connections stay refused".into()
            });
        };
        match self.build(&paths) {
            Ok((cfg, msg)) => {
                // The instance links take the new repository too (it loaded once already).
                let under = paths.under(&self.dir);
                for (links, peer) in self.links.lock().iter() {
                    if let Ok(t) = link_tls(&under, peer.as_deref()) {
                        links.replace(Arc::new(Policy(t)));
                    }
                }
                *self.current.write() = Some(cfg);
                crate::qm_log!(crate::errlog::ids::TLS_REPOSITORY_LOADED, "{msg}");
                Ok(format!("{msg}; new connections use it"))
            }
            Err(e) => {
                let kept = if self.current.read().is_some() {
                    "the key repository loaded before stays in force"
                } else {
                    "TLS connections stay refused"
                };
                crate::qm_log!(
                    crate::errlog::ids::TLS_REPOSITORY_FAILED,
                    "REFRESH SECURITY TYPE(SSL) failed, {kept}: {e}"
                );
                Err(format!("{e}; {kept}"))
            }
        }
    }
}

/// What a fresh client socket speaks, told by the first byte its client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstByte {
    /// A TLS handshake record: the socket is served through the key repository.
    Tls,
    /// Anything else: FerryMQ's plain protocol (whose frames never start with a handshake
    /// record's byte), checked by the frame decoder from there on.
    Plain,
}

/// How the listener tells TLS from plain on its one port: a pure function of the first byte,
/// shared by the listener and the TLS handshake fuzz target.
pub fn sniff(first: u8) -> FirstByte {
    if first == HANDSHAKE_RECORD_BYTE {
        FirstByte::Tls
    } else {
        FirstByte::Plain
    }
}

/// Why a channel refused a socket: the reason the client gets, the rule that refused (SSLCIPH,
/// SSLCAUTH or SSLPEER) and what the error log says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub rule: &'static str,
    pub message: String,
}

/// Whether channel `channel` (its attributes `attrs`) accepts a socket that is plain (`tls`
/// None) or negotiated `tls`:
/// - SSLCIPH set: a plain socket is refused, and a TLS socket whose suite it does not allow;
/// - SSLCAUTH(REQUIRED), with SSLCIPH set: a TLS socket whose client sent no certificate is
///   refused (as in MQ, SSLCAUTH means nothing on a channel without SSLCIPH);
/// - SSLPEER set: the client certificate's subject must match it (a socket without one is
///   refused, whatever SSLCIPH says).
///
/// A channel with none of them set accepts plain and TLS sockets alike.
pub fn check_channel(
    channel: &str,
    attrs: &BTreeMap<String, String>,
    tls: Option<&TlsSession>,
) -> Result<(), Refusal> {
    let get = |k: &str| attrs.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let refuse = |reason, rule, message: String| {
        Err(Refusal {
            reason,
            rule,
            message: format!("channel {channel}: {message}"),
        })
    };
    if let Some(ciph) = get("SSLCIPH") {
        let spec = match CipherSpec::parse(ciph) {
            Ok(s) => s,
            Err(e) => {
                return refuse(
                    Reason::SSL_INITIALIZATION_ERROR,
                    "SSLCIPH",
                    format!("SSLCIPH({ciph}) cannot be used ({e}); ALTER the channel"),
                )
            }
        };
        let Some(t) = tls else {
            return refuse(
                Reason::SSL_INITIALIZATION_ERROR,
                "SSLCIPH",
                format!(
                    "SSLCIPH({ciph}) requires TLS, but the client connected without it; connect with TLS (--tls-ca)"
                ),
            );
        };
        if !spec.allows(t.suite) {
            return refuse(
                Reason::SSL_INITIALIZATION_ERROR,
                "SSLCIPH",
                format!(
                    "the client negotiated {}, which SSLCIPH({ciph}) does not allow",
                    t.cipher_name()
                ),
            );
        }
        let required = get("SSLCAUTH").is_none_or(|v| v.eq_ignore_ascii_case("REQUIRED"));
        if required && t.peer.is_none() {
            return refuse(
                Reason::SSL_INITIALIZATION_ERROR,
                "SSLCAUTH",
                "SSLCAUTH(REQUIRED): the client sent no certificate".into(),
            );
        }
    }
    if let Some(filter) = get("SSLPEER") {
        let Some(peer) = tls.and_then(|t| t.peer.as_ref()) else {
            return refuse(
                Reason::SSL_PEER_NAME_MISMATCH,
                "SSLPEER",
                format!("SSLPEER('{filter}'): the client presented no certificate"),
            );
        };
        if !dn_matches(filter, &peer.subject) {
            return refuse(
                Reason::SSL_PEER_NAME_MISMATCH,
                "SSLPEER",
                format!(
                    "SSLPEER('{filter}') does not match the client's certificate DN '{}' (issued by '{}')",
                    peer.subject, peer.issuer
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrymq_security::tls::CertNames;
    use rustls::CipherSuite;

    fn attrs(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn tls(peer: Option<&str>) -> TlsSession {
        TlsSession {
            suite: CipherSuite::TLS13_AES_128_GCM_SHA256,
            peer: peer.map(|s| CertNames {
                subject: s.into(),
                issuer: "CN=ca".into(),
                serial: "01".into(),
            }),
        }
    }

    #[test]
    fn only_a_handshake_records_first_byte_is_taken_for_tls() {
        assert_eq!(sniff(0x16), FirstByte::Tls);
        for b in (0..=u8::MAX).filter(|b| *b != 0x16) {
            assert_eq!(sniff(b), FirstByte::Plain, "{b:#04x}");
        }
    }

    #[test]
    fn a_channel_without_tls_attributes_takes_both_kinds_of_socket() {
        let a = attrs(&[("SSLCAUTH", "REQUIRED")]);
        assert!(check_channel("C", &a, None).is_ok());
        assert!(check_channel("C", &a, Some(&tls(None))).is_ok());
    }

    #[test]
    fn each_rule_refuses_with_its_reason_and_name() {
        let a = attrs(&[("SSLCIPH", "ANY_TLS12_OR_HIGHER"), ("SSLCAUTH", "OPTIONAL")]);
        let r = check_channel("C", &a, None).unwrap_err();
        assert_eq!(
            (r.reason, r.rule),
            (Reason::SSL_INITIALIZATION_ERROR, "SSLCIPH")
        );
        assert!(r.message.starts_with("channel C: "));
        assert!(check_channel("C", &a, Some(&tls(None))).is_ok());
        let a12 = attrs(&[("SSLCIPH", "ANY_TLS12"), ("SSLCAUTH", "OPTIONAL")]);
        let r = check_channel("C", &a12, Some(&tls(None))).unwrap_err();
        assert!(
            r.message.contains("TLS_AES_128_GCM_SHA256"),
            "{}",
            r.message
        );
        let req = attrs(&[("SSLCIPH", "ANY"), ("SSLCAUTH", "REQUIRED")]);
        assert_eq!(
            check_channel("C", &req, Some(&tls(None))).unwrap_err().rule,
            "SSLCAUTH"
        );
        assert!(check_channel("C", &req, Some(&tls(Some("CN=app")))).is_ok());
        let peer = attrs(&[("SSLCIPH", "ANY"), ("SSLPEER", "CN=app")]);
        let r = check_channel("C", &peer, Some(&tls(Some("CN=other,O=x")))).unwrap_err();
        assert_eq!(
            (r.reason, r.rule),
            (Reason::SSL_PEER_NAME_MISMATCH, "SSLPEER")
        );
        assert!(r.message.contains("CN=other,O=x"));
        let bad = attrs(&[("SSLCIPH", "NULL_MD5")]);
        assert!(check_channel("C", &bad, Some(&tls(None)))
            .unwrap_err()
            .message
            .contains("NULL_MD5"));
    }
}
