//! Certificates made at run time (nothing checked in): a test CA and a certificate for
//! `localhost` / `127.0.0.1` it signed, as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The PEM files of one test CA and the server certificate it signed.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The CA certificate (what a client trusts).
    pub ca: PathBuf,
    /// The server's certificate chain.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl TestPki {
    /// Makes a fresh CA named `name` and a `localhost`/`127.0.0.1` certificate in `dir`.
    ///
    /// # Panics
    /// When generating or writing fails.
    pub fn new(dir: &Path, name: &str) -> Self {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("kandev e2e {name} CA"));
        let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("server key");
        let cert = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("server params")
            .signed_by(&key, &issuer)
            .expect("server certificate");
        let pki = Self {
            ca: dir.join(format!("{name}-ca.pem")),
            cert: dir.join(format!("{name}-cert.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        std::fs::write(&pki.ca, ca_cert.pem()).expect("write CA");
        std::fs::write(&pki.cert, cert.pem()).expect("write certificate");
        std::fs::write(&pki.key, key.serialize_pem()).expect("write key");
        pki
    }
}
