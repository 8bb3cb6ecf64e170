//! CipherSpecs as a channel's SSLCIPH names them: MQ's protocol families (`ANY`, `ANY_TLS12`,
//! `ANY_TLS12_OR_HIGHER`, `ANY_TLS13`, `ANY_TLS13_OR_HIGHER`) and the single suites that the
//! ring provider of rustls implements, under MQ's names. A channel decides from the suite a
//! socket negotiated; a client restricts what it offers with the same names.

use rustls::crypto::ring::default_provider;
use rustls::{CipherSuite, SupportedCipherSuite, SupportedProtocolVersion};

/// Every single-suite CipherSpec FerryMQ accepts: MQ's name and the suite it stands for.
pub const SUITES: &[(&str, CipherSuite)] = &[
    (
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE_ECDSA_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE_ECDSA_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE_ECDSA_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE_RSA_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE_RSA_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE_RSA_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The protocol families MQ names, in the order an error message lists them.
pub const FAMILIES: &[&str] = &[
    "ANY",
    "ANY_TLS12",
    "ANY_TLS12_OR_HIGHER",
    "ANY_TLS13",
    "ANY_TLS13_OR_HIGHER",
];

/// A parsed SSLCIPH value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherSpec {
    /// Any protocol and suite FerryMQ speaks (TLS 1.2 and 1.3).
    Any,
    /// TLS 1.2 only.
    AnyTls12,
    /// TLS 1.2 or 1.3.
    AnyTls12OrHigher,
    /// TLS 1.3 only (`ANY_TLS13` and `ANY_TLS13_OR_HIGHER`: there is nothing higher yet).
    AnyTls13,
    /// Exactly this suite.
    Suite(CipherSuite),
}

impl CipherSpec {
    /// Parses an SSLCIPH value (case-insensitive, blanks around it ignored). A blank value is
    /// not a CipherSpec: the caller treats it as "no TLS required".
    pub fn parse(text: &str) -> Result<CipherSpec, String> {
        let t = text.trim().to_ascii_uppercase();
        let spec =
            match t.as_str() {
                "ANY" => CipherSpec::Any,
                "ANY_TLS12" => CipherSpec::AnyTls12,
                "ANY_TLS12_OR_HIGHER" => CipherSpec::AnyTls12OrHigher,
                "ANY_TLS13" | "ANY_TLS13_OR_HIGHER" => CipherSpec::AnyTls13,
                other => match SUITES.iter().find(|(n, _)| *n == other) {
                    Some((_, s)) => CipherSpec::Suite(*s),
                    None => {
                        return Err(format!(
                        "CipherSpec '{}' is not one FerryMQ supports; use one of {}, or one of {}",
                        text.trim(),
                        FAMILIES.join(", "),
                        SUITES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    ))
                    }
                },
            };
        Ok(spec)
    }

    /// Whether a socket that negotiated `suite` satisfies this CipherSpec.
    pub fn allows(&self, suite: CipherSuite) -> bool {
        let tls13 = is_tls13(suite);
        match self {
            CipherSpec::Any | CipherSpec::AnyTls12OrHigher => true,
            CipherSpec::AnyTls12 => !tls13,
            CipherSpec::AnyTls13 => tls13,
            CipherSpec::Suite(s) => *s == suite,
        }
    }

    /// The suites of the ring provider a client offers for this CipherSpec.
    pub fn suites(&self) -> Vec<SupportedCipherSuite> {
        default_provider()
            .cipher_suites
            .into_iter()
            .filter(|s| self.allows(s.suite()))
            .collect()
    }

    /// The protocol versions a client offers for this CipherSpec.
    pub fn versions(&self) -> Vec<&'static SupportedProtocolVersion> {
        let both = self.suites();
        let mut v = Vec::new();
        if both.iter().any(|s| !is_tls13(s.suite())) {
            v.push(&rustls::version::TLS12);
        }
        if both.iter().any(|s| is_tls13(s.suite())) {
            v.push(&rustls::version::TLS13);
        }
        v
    }
}

fn is_tls13(suite: CipherSuite) -> bool {
    format!("{suite:?}").starts_with("TLS13_")
}

/// MQ's name for a negotiated suite (what DISPLAY CHSTATUS shows as SSLCIPH); rustls' own name
/// for one MQ has no name for.
pub fn mq_name(suite: CipherSuite) -> String {
    SUITES
        .iter()
        .find(|(_, s)| *s == suite)
        .map(|(n, _)| n.to_string())
        .unwrap_or_else(|| format!("{suite:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_names_parse_without_regard_to_case() {
        assert_eq!(CipherSpec::parse(" any_tls12 "), Ok(CipherSpec::AnyTls12));
        assert_eq!(
            CipherSpec::parse("ANY_TLS13_OR_HIGHER"),
            Ok(CipherSpec::AnyTls13)
        );
        assert_eq!(
            CipherSpec::parse("tls_aes_256_gcm_sha384"),
            Ok(CipherSpec::Suite(CipherSuite::TLS13_AES_256_GCM_SHA384))
        );
        let e = CipherSpec::parse("TLS_RSA_WITH_DES_CBC_SHA").unwrap_err();
        assert!(e.contains("TLS_RSA_WITH_DES_CBC_SHA") && e.contains("ANY_TLS12_OR_HIGHER"));
    }

    #[test]
    fn a_family_allows_the_suites_of_its_protocols() {
        let t13 = CipherSuite::TLS13_AES_128_GCM_SHA256;
        let t12 = CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256;
        assert!(
            CipherSpec::AnyTls12OrHigher.allows(t13) && CipherSpec::AnyTls12OrHigher.allows(t12)
        );
        assert!(!CipherSpec::AnyTls12.allows(t13) && CipherSpec::AnyTls12.allows(t12));
        assert!(CipherSpec::AnyTls13.allows(t13) && !CipherSpec::AnyTls13.allows(t12));
        assert!(!CipherSpec::Suite(t13).allows(CipherSuite::TLS13_AES_256_GCM_SHA384));
    }

    #[test]
    fn every_named_suite_is_one_the_provider_implements() {
        for (name, s) in SUITES {
            let spec = CipherSpec::parse(name).unwrap();
            assert_eq!(spec.suites().len(), 1, "{name}");
            assert_eq!(mq_name(*s), *name);
            assert_eq!(spec.versions().len(), 1);
        }
        assert_eq!(
            CipherSpec::AnyTls13.versions(),
            vec![&rustls::version::TLS13]
        );
    }
}
