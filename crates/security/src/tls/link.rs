//! Mutual TLS on the links between a queue manager's own instances (HA replication, the DR
//! stream): both ends present a certificate from the key repository and each verifies the other's
//! against the trusted CAs, then against an optional peer DN filter. Host names are not checked:
//! instances reach each other by whatever addresses the configuration names (often IP addresses a
//! certificate does not list), so an instance's identity is the CA that issued its certificate and
//! the DN filter, as MQ's SSLPEER is for channels. Sans-IO: what connects and accepts sockets is
//! the caller's; this module builds the configurations and judges the outcome.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
    ServerConfig, SignatureScheme,
};

use super::{cert_names, provider, CertNames, KeyRepository, TlsError};

/// Which rule refused a link: what the error log names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkRule {
    /// The other end sent something that is not TLS (it is not configured for TLS links).
    NotTls,
    /// The other end presented no certificate.
    NoCertificate,
    /// The other end's certificate does not chain to a trusted CA (or is expired, or not for
    /// this use).
    Untrusted,
    /// The other end's certificate is trusted but its DN does not match the peer filter.
    DnMismatch,
    /// The other end refused this instance's certificate (it sent an alert).
    RefusedByPeer,
    /// The handshake did not finish in time.
    Timeout,
    /// Anything else (the connection broke during the handshake, an incompatible peer).
    Handshake,
}

impl LinkRule {
    pub fn name(self) -> &'static str {
        match self {
            LinkRule::NotTls => "not TLS",
            LinkRule::NoCertificate => "no certificate",
            LinkRule::Untrusted => "untrusted certificate",
            LinkRule::DnMismatch => "DN mismatch",
            LinkRule::RefusedByPeer => "refused by the peer",
            LinkRule::Timeout => "handshake timeout",
            LinkRule::Handshake => "handshake failed",
        }
    }
}

/// Why a link was refused: the rule and what happened, never key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRefusal {
    pub rule: LinkRule,
    pub detail: String,
}

impl std::fmt::Display for LinkRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule.name(), self.detail)
    }
}

/// The rule a failed handshake broke, from rustls' error.
pub fn classify(e: &rustls::Error) -> LinkRefusal {
    use rustls::Error as E;
    let (rule, detail) = match e {
        E::NoCertificatesPresented => (
            LinkRule::NoCertificate,
            "the peer presented no certificate".to_string(),
        ),
        E::InvalidCertificate(c) => (
            LinkRule::Untrusted,
            match c {
                // A CA of the same name but another key fails on the signature.
                CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                    "the peer's certificate is not issued by a CA in this instance's CAFile"
                        .to_string()
                }
                other => format!("the peer's certificate cannot be accepted ({other:?})"),
            },
        ),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => (
            LinkRule::NotTls,
            "the peer does not speak TLS (set SslLink on every instance of the link)".to_string(),
        ),
        E::AlertReceived(a) => match a {
            AlertDescription::UnknownCA
            | AlertDescription::BadCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateExpired
            | AlertDescription::AccessDenied
            | AlertDescription::DecryptError => (
                LinkRule::RefusedByPeer,
                format!("the peer refused this instance's certificate (alert {a:?})"),
            ),
            other => (
                LinkRule::Handshake,
                format!("the peer ended the handshake (alert {other:?})"),
            ),
        },
        other => (LinkRule::Handshake, other.to_string()),
    };
    LinkRefusal { rule, detail }
}

/// Verifies a server's certificate chain against the trusted CAs, without a host name check
/// (see the module's rules).
#[derive(Debug)]
struct InstanceVerifier {
    roots: Arc<RootCertStore>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for InstanceVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// Both ends' TLS configurations of an instance link, and the peer DN filter.
pub struct LinkTls {
    pub server: Arc<ServerConfig>,
    pub client: Arc<ClientConfig>,
    /// An SSLPEER-style filter the peer certificate's subject must match (None: any certificate
    /// from a trusted CA).
    pub peer_filter: Option<String>,
    /// This instance's own certificate's names (for the error log).
    pub own: CertNames,
}

impl std::fmt::Debug for LinkTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkTls")
            .field("peer_filter", &self.peer_filter)
            .field("own", &self.own.subject)
            .finish_non_exhaustive()
    }
}

impl LinkTls {
    /// The link configurations of `repo`; `peer_filter` must be a well-formed DN filter.
    pub fn new(repo: &KeyRepository, peer_filter: Option<&str>) -> Result<LinkTls, TlsError> {
        let peer_filter = peer_filter.map(str::trim).filter(|f| !f.is_empty());
        if let Some(f) = peer_filter {
            super::check_filter(f)
                .map_err(|e| TlsError::Config(format!("peer DN filter '{f}': {e}")))?;
        }
        let verifier = Arc::new(InstanceVerifier {
            roots: repo.roots.clone(),
            algs: provider().signature_verification_algorithms,
        });
        let client = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(repo.certs.clone(), repo.key.clone_key())
            .map_err(|e| TlsError::Config(format!("{}: {e}", repo.paths.key_file.display())))?;
        Ok(LinkTls {
            server: repo.mutual_server_config()?,
            client: Arc::new(client),
            peer_filter: peer_filter.map(str::to_string),
            own: repo.names.clone(),
        })
    }

    /// The server name a link's client offers: the host of `addr` (`host:port`) when it is one,
    /// else a fixed name (no host name is checked either way).
    pub fn server_name(addr: &str) -> ServerName<'static> {
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| ServerName::try_from("ferrymq-instance").expect("a valid name"))
    }

    /// Judges a finished handshake: the peer's certificate (verified against the CAs by rustls)
    /// must match the peer filter. Returns the peer certificate's names.
    pub fn check_peer(&self, state: &rustls::CommonState) -> Result<CertNames, LinkRefusal> {
        let Some(cert) = state.peer_certificates().and_then(|c| c.first()) else {
            return Err(LinkRefusal {
                rule: LinkRule::NoCertificate,
                detail: "the peer presented no certificate".into(),
            });
        };
        let names = cert_names(cert).map_err(|e| LinkRefusal {
            rule: LinkRule::Untrusted,
            detail: format!("the peer's certificate cannot be read: {e}"),
        })?;
        if let Some(f) = &self.peer_filter {
            if !super::dn_matches(f, &names.subject) {
                return Err(LinkRefusal {
                    rule: LinkRule::DnMismatch,
                    detail: format!(
                        "the peer's certificate DN '{}' (issued by '{}') does not match SslPeer '{f}'",
                        names.subject, names.issuer
                    ),
                });
            }
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::devca::{DevCa, Issued};
    use crate::tls::KeyRepoPaths;
    use rustls::{ClientConnection, ServerConnection};

    fn repo(dir: &std::path::Path, tag: &str, ca: &DevCa, who: &Issued) -> KeyRepository {
        let w = |name: &str, text: &str| {
            let p = dir.join(format!("{tag}-{name}"));
            std::fs::write(&p, text).unwrap();
            p
        };
        KeyRepository::load(&KeyRepoPaths {
            cert_file: w("cert.pem", &who.cert_pem),
            key_file: w("key.pem", &who.key_pem),
            ca_file: w("ca.pem", &ca.cert_pem()),
        })
        .unwrap()
    }

    /// Runs a handshake in memory; the first error of either side, or both connections.
    fn handshake(
        client: &LinkTls,
        server: &LinkTls,
    ) -> Result<(ClientConnection, ServerConnection), (&'static str, rustls::Error)> {
        let mut c =
            ClientConnection::new(client.client.clone(), LinkTls::server_name("10.9.8.7:1500"))
                .unwrap();
        let mut s = ServerConnection::new(server.server.clone()).unwrap();
        for _ in 0..20 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
            }
            s.process_new_packets().map_err(|e| ("server", e))?;
            let mut buf = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
            }
            c.process_new_packets().map_err(|e| ("client", e))?;
            if !c.is_handshaking() && !s.is_handshaking() && !s.wants_write() && !c.wants_write() {
                return Ok((c, s));
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn instances_of_one_ca_link_whatever_address_they_use_and_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ca = DevCa::new("Link CA").unwrap();
        let other_ca = DevCa::new("Other CA").unwrap();
        let a = repo(dir.path(), "a", &ca, &ca.issue_qmgr("QM", &[]).unwrap());
        let b = repo(dir.path(), "b", &ca, &ca.issue_qmgr("QM", &[]).unwrap());
        let x = repo(
            dir.path(),
            "x",
            &other_ca,
            &other_ca.issue_qmgr("QM", &[]).unwrap(),
        );
        let app = repo(dir.path(), "app", &ca, &ca.issue_client("app").unwrap());
        let filter = Some("OU=queue managers");
        let (la, lb) = (
            LinkTls::new(&a, filter).unwrap(),
            LinkTls::new(&b, filter).unwrap(),
        );

        // The address 10.9.8.7 is in neither certificate: no host name is checked.
        let (c, s) = handshake(&la, &lb).unwrap();
        assert_eq!(lb.check_peer(&s).unwrap().subject, a.names.subject);
        assert_eq!(la.check_peer(&c).unwrap().subject, b.names.subject);

        // An instance of another CA: refused by whichever side checks it first.
        let lx = LinkTls::new(&x, filter).unwrap();
        let (side, e) = handshake(&la, &lx).map(|_| ()).unwrap_err();
        assert_eq!(side, "client", "the client checks the server first");
        assert_eq!(classify(&e).rule, LinkRule::Untrusted, "{e}");
        let (side, e) = handshake(&lx, &la).map(|_| ()).unwrap_err();
        assert_eq!(side, "client");
        assert_eq!(classify(&e).rule, LinkRule::Untrusted, "{e}");
        // One that trusts this CA but holds another's certificate: the server refuses it.
        let x2 = repo(
            dir.path(),
            "x2",
            &ca,
            &other_ca.issue_qmgr("QM", &[]).unwrap(),
        );
        let lx2 = LinkTls::new(&x2, filter).unwrap();
        let (side, e) = handshake(&lx2, &la).map(|_| ()).unwrap_err();
        assert_eq!(side, "server");
        assert_eq!(classify(&e).rule, LinkRule::Untrusted, "{e}");

        // A client application's certificate from the same CA is trusted, but not an instance's.
        let lapp = LinkTls::new(&app, None).unwrap();
        let (_, s) = handshake(&lapp, &la).unwrap();
        let r = la.check_peer(&s).unwrap_err();
        assert_eq!(r.rule, LinkRule::DnMismatch);
        assert!(r.detail.contains("CN=app,OU=clients"), "{r}");
        assert!(LinkTls::new(&a, Some("no attribute here")).is_err());
    }

    #[test]
    fn refusals_are_named_by_their_rule() {
        let c = |e| classify(&e).rule;
        assert_eq!(
            c(rustls::Error::NoCertificatesPresented),
            LinkRule::NoCertificate
        );
        assert_eq!(
            c(rustls::Error::AlertReceived(AlertDescription::UnknownCA)),
            LinkRule::RefusedByPeer
        );
        assert_eq!(
            c(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            )),
            LinkRule::NotTls
        );
        assert_eq!(LinkTls::server_name("[::1]:1500").to_str(), "::1");
    }
}
