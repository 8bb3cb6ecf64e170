//! A development certificate authority: a CA that issues a queue manager's certificate (with the
//! names clients reach it by) and clients' certificates, so that TLS can be tried and tested
//! with nothing from outside. For development only: the keys are written unencrypted, the
//! certificates never expire in practice and nothing can revoke them.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::TlsError;

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The development CA's certificate and key.
pub struct DevCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl std::fmt::Debug for DevCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCa").finish_non_exhaustive()
    }
}

fn err(what: &str, e: rcgen::Error) -> TlsError {
    TlsError::Config(format!("{what}: {e}"))
}

fn name(cn: &str, ou: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, "GB");
    dn.push(DnType::OrganizationName, "FerryMQ");
    if let Some(ou) = ou {
        dn.push(DnType::OrganizationalUnitName, ou);
    }
    dn.push(DnType::CommonName, cn);
    dn
}

impl DevCa {
    /// A new CA, `CN=<cn>,OU=development,O=FerryMQ,C=GB`.
    pub fn new(cn: &str) -> Result<DevCa, TlsError> {
        let key = KeyPair::generate().map_err(|e| err("generating the CA key", e))?;
        let mut p = CertificateParams::default();
        p.distinguished_name = name(cn, Some("development"));
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p
            .self_signed(&key)
            .map_err(|e| err("signing the CA certificate", e))?;
        Ok(DevCa { cert, key })
    }

    /// The CA written before by [`DevCa::cert_pem`] and [`DevCa::key_pem`], to issue more
    /// certificates that the same trust bundle accepts.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<DevCa, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| err("reading the CA key", e))?;
        let params = CertificateParams::from_ca_cert_pem(cert_pem)
            .map_err(|e| err("reading the CA certificate", e))?;
        // Signed again with the same name and key: certificates it issues name the same issuer
        // and verify against the original certificate.
        let cert = params
            .self_signed(&key)
            .map_err(|e| err("loading the CA certificate", e))?;
        Ok(DevCa { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    fn issue(
        &self,
        sans: Vec<String>,
        dn: DistinguishedName,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Issued, TlsError> {
        let key = KeyPair::generate().map_err(|e| err("generating a key", e))?;
        let mut p = CertificateParams::new(sans).map_err(|e| err("a subject name", e))?;
        p.distinguished_name = dn;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        // Server and client both: an HA instance is each to the others.
        p.extended_key_usages = vec![usage.clone()];
        if usage != ExtendedKeyUsagePurpose::ClientAuth {
            p.extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        let cert = p
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| err("signing a certificate", e))?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A queue manager's certificate, `CN=<qmgr>,OU=queue managers,O=FerryMQ,C=GB`, valid for
    /// `localhost`, `127.0.0.1`, `::1` and each of `hosts` (names or IP addresses).
    pub fn issue_qmgr(&self, qmgr: &str, hosts: &[String]) -> Result<Issued, TlsError> {
        let mut sans: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        for h in hosts {
            if !sans.contains(h) {
                sans.push(h.clone());
            }
        }
        self.issue(
            sans,
            name(qmgr, Some("queue managers")),
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client's certificate, `CN=<cn>,OU=clients,O=FerryMQ,C=GB`.
    pub fn issue_client(&self, cn: &str) -> Result<Issued, TlsError> {
        self.issue(
            Vec::new(),
            name(cn, Some("clients")),
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }
}
