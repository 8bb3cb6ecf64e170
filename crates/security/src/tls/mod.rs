//! TLS: a queue manager's key repository (PEM certificate, key and trusted CAs named in qm.ini's
//! SSL stanza), the rustls server and client configurations built from it, distinguished-name
//! filters (SSLPEER, SSLPEERMAP), and a development certificate authority that issues a queue
//! manager's and a client's certificates so that tests and the README need nothing from outside.

pub mod cipher;
pub mod devca;
pub mod dn;
pub mod link;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{CipherSuite, ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use cipher::CipherSpec;
pub use dn::{check_filter, dn_matches};

/// The first byte of every TLS connection (a handshake record): how one port tells TLS from
/// FerryMQ's plain protocol, whose frames never start with it.
pub const HANDSHAKE_RECORD_BYTE: u8 = 0x16;

/// Why a key repository or TLS configuration cannot be used; names the file and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("{}: {problem}", path.display())]
    File { path: PathBuf, problem: String },
    #[error("{0}")]
    Config(String),
}

fn file_err(path: &Path, problem: impl Into<String>) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

/// The cryptography FerryMQ uses: rustls' ring provider (no C toolchain beyond what ring needs).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn pem_problem(e: rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(io) => format!("cannot be read: {io}"),
        rustls_pki_types::pem::Error::NoItemsFound => "holds no PEM item of the kind needed".into(),
        other => format!("is not valid PEM: {other:?}"),
    }
}

/// Every certificate in a PEM file (a chain: the entity's certificate first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(path, pem_problem(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(path, pem_problem(e)))?;
    if certs.is_empty() {
        return Err(file_err(
            path,
            "holds no certificate (expected '-----BEGIN CERTIFICATE-----')",
        ));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => file_err(
            path,
            "holds no private key (expected '-----BEGIN PRIVATE KEY-----' or similar)",
        ),
        e => file_err(path, pem_problem(e)),
    })
}

/// The trusted CA certificates of a PEM bundle.
pub fn load_roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(path)? {
        roots
            .add(c)
            .map_err(|e| file_err(path, format!("holds a CA certificate rustls refuses: {e}")))?;
    }
    Ok(Arc::new(roots))
}

/// Where a queue manager's key repository is (qm.ini `SSL:CertFile`, `KeyFile`, `CAFile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRepoPaths {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub ca_file: PathBuf,
}

impl KeyRepoPaths {
    /// The same paths with relative ones taken under `dir` (the queue manager's directory).
    pub fn under(&self, dir: &Path) -> KeyRepoPaths {
        KeyRepoPaths {
            cert_file: dir.join(&self.cert_file),
            key_file: dir.join(&self.key_file),
            ca_file: dir.join(&self.ca_file),
        }
    }
}

/// The subject, issuer and serial number of a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertNames {
    pub subject: String,
    pub issuer: String,
    /// Hexadecimal, as MQ shows serial numbers.
    pub serial: String,
}

/// Reads a certificate's names.
pub fn cert_names(der: &CertificateDer<'_>) -> Result<CertNames, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| format!("not a valid X.509 certificate: {e}"))?;
    Ok(CertNames {
        subject: dn::format_name(cert.subject()),
        issuer: dn::format_name(cert.issuer()),
        serial: cert.raw_serial_as_string().replace(':', "").to_uppercase(),
    })
}

/// A queue manager's key repository, loaded and checked.
#[derive(Debug)]
pub struct KeyRepository {
    pub paths: KeyRepoPaths,
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    roots: Arc<RootCertStore>,
    /// The queue manager's own certificate's names.
    pub names: CertNames,
}

impl KeyRepository {
    pub fn load(paths: &KeyRepoPaths) -> Result<KeyRepository, TlsError> {
        let certs = load_certs(&paths.cert_file)?;
        let key = load_key(&paths.key_file)?;
        let roots = load_roots(&paths.ca_file)?;
        let names = cert_names(&certs[0]).map_err(|e| file_err(&paths.cert_file, e))?;
        let repo = KeyRepository {
            paths: paths.clone(),
            certs,
            key,
            roots,
            names,
        };
        // Building a configuration checks that the key belongs to the certificate.
        repo.server_config()?;
        Ok(repo)
    }

    /// What a queue manager's listener speaks: TLS 1.2 and 1.3 with every suite of the provider
    /// (each channel's SSLCIPH then accepts or refuses what was negotiated), its certificate,
    /// and clients' certificates asked for and verified against the trusted CAs when offered
    /// (whether one is required is the channel's SSLCAUTH).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots.clone(), provider())
            .allow_unauthenticated()
            .build()
            .map_err(|e| file_err(&self.paths.ca_file, format!("cannot verify clients: {e}")))?;
        self.server_with(verifier)
    }

    /// For links between a queue manager's own instances (HA, DR): the peer must present a
    /// certificate from the trusted CAs.
    pub fn mutual_server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots.clone(), provider())
            .build()
            .map_err(|e| file_err(&self.paths.ca_file, format!("cannot verify peers: {e}")))?;
        self.server_with(verifier)
    }

    fn server_with(
        &self,
        verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let cfg = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| {
                file_err(
                    &self.paths.key_file,
                    format!(
                        "cannot be used with the certificate of {}: {e}",
                        self.paths.cert_file.display()
                    ),
                )
            })?;
        Ok(Arc::new(cfg))
    }

    /// A client configuration presenting this repository's certificate and trusting its CAs
    /// (an instance connecting to another instance of its group).
    pub fn mutual_client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let cfg = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(self.roots.clone())
            .with_client_auth_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| file_err(&self.paths.key_file, e.to_string()))?;
        Ok(Arc::new(cfg))
    }
}

/// What a client needs to speak TLS to a queue manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA bundle the queue manager's certificate must chain to.
    pub ca_file: PathBuf,
    /// The client's own certificate and key (for SSLCAUTH(REQUIRED) and SSLPEER).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// What to offer; `None` offers everything (as `ANY_TLS12_OR_HIGHER`).
    pub cipher: Option<CipherSpec>,
}

impl ClientTls {
    pub fn config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let spec = self.cipher.unwrap_or(CipherSpec::AnyTls12OrHigher);
        let provider = CryptoProvider {
            cipher_suites: spec.suites(),
            ..rustls::crypto::ring::default_provider()
        };
        let builder = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&spec.versions())
            .map_err(|e| TlsError::Config(format!("CipherSpec {spec:?}: {e}")))?
            .with_root_certificates(load_roots(&self.ca_file)?);
        let cfg = match (&self.cert_file, &self.key_file) {
            (Some(c), Some(k)) => builder
                .with_client_auth_cert(load_certs(c)?, load_key(k)?)
                .map_err(|e| {
                    file_err(
                        k,
                        format!(
                            "cannot be used with the certificate of {}: {e}",
                            c.display()
                        ),
                    )
                })?,
            (None, None) => builder.with_no_client_auth(),
            (Some(c), None) => {
                return Err(file_err(c, "a client certificate needs its key file too"))
            }
            (None, Some(k)) => return Err(file_err(k, "a key file needs its certificate too")),
        };
        Ok(Arc::new(cfg))
    }
}

/// What a TLS socket negotiated and who its peer is: what the channel's rules look at and
/// DISPLAY CHSTATUS shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSession {
    pub suite: CipherSuite,
    /// The peer certificate's subject and issuer (`None`: it presented none).
    pub peer: Option<CertNames>,
}

impl TlsSession {
    /// Reads a finished handshake's state.
    pub fn from_state(state: &rustls::CommonState) -> Option<TlsSession> {
        let suite = state.negotiated_cipher_suite()?.suite();
        let peer = state
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| cert_names(c).ok());
        Some(TlsSession { suite, peer })
    }

    /// MQ's name of the negotiated suite.
    pub fn cipher_name(&self) -> String {
        cipher::mq_name(self.suite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_development_ca_issues_a_repository_that_loads_and_names_its_subject() {
        let dir = std::env::temp_dir().join(format!("ferrymq-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = devca::DevCa::new("FerryMQ development CA").unwrap();
        let qm = ca.issue_qmgr("QM1", &["mq.example".into()]).unwrap();
        let paths = KeyRepoPaths {
            cert_file: write(&dir, "QM1.pem", &qm.cert_pem),
            key_file: write(&dir, "QM1.key", &qm.key_pem),
            ca_file: write(&dir, "ca.pem", &ca.cert_pem()),
        };
        let repo = KeyRepository::load(&paths).unwrap();
        assert_eq!(
            repo.names.subject,
            "CN=QM1,OU=queue managers,O=FerryMQ,C=GB"
        );
        assert_eq!(
            repo.names.issuer,
            "CN=FerryMQ development CA,OU=development,O=FerryMQ,C=GB"
        );
        // The same CA read back issues certificates under the same name.
        let again = devca::DevCa::from_pem(&ca.cert_pem(), &ca.key_pem()).unwrap();
        let app = again.issue_client("app").unwrap();
        let der = CertificateDer::from_pem_slice(app.cert_pem.as_bytes()).unwrap();
        assert_eq!(cert_names(&der).unwrap().issuer, repo.names.issuer);

        // A key that is not the certificate's is named as such.
        let other = ca.issue_client("other").unwrap();
        let bad = KeyRepoPaths {
            key_file: write(&dir, "other.key", &other.key_pem),
            ..paths.clone()
        };
        let e = KeyRepository::load(&bad).unwrap_err().to_string();
        assert!(e.contains("other.key") && e.contains("QM1.pem"), "{e}");
        let missing = KeyRepoPaths {
            ca_file: dir.join("nope.pem"),
            ..paths
        };
        let e = KeyRepository::load(&missing).unwrap_err().to_string();
        assert!(
            e.contains("nope.pem") && e.contains("cannot be read"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
