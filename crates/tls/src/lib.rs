//! # kandev-tls
//!
//! TLS shared by `kandev` (HTTPS/WSS operator API, `wss://` remote executors) and
//! `agentctl` (`serve --tls-cert --tls-key`), on rustls with the ring provider
//! (docs/architecture.md §10).
//!
//! - [`server_config`] reads a PEM certificate chain and its private key.
//! - [`client_config`] trusts the system's root certificates, or only the CA(s) of one
//!   PEM file (`executor.ca_cert`).
//! - [`ServeListener`] is the listener both servers hand to `axum::serve`: plain TCP, or
//!   TLS when given a server config. TLS handshakes run in their own tasks with a
//!   deadline, so a client that connects and stalls never holds up the next one.
//! - [`PeerAddr`] is the connect info (the client's address) of either kind.

mod listener;

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use listener::{HANDSHAKE_TIMEOUT, PeerAddr, ServeListener, Stream};

/// Why a TLS configuration could not be built. [`std::fmt::Display`] is one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("cannot read the {what} {path}: {reason}")]
    Read {
        /// `certificate`, `private key`, `CA certificate`.
        what: &'static str,
        /// The file.
        path: String,
        /// The I/O or PEM error.
        reason: String,
    },
    /// A PEM file holds no certificate.
    #[error("the {what} {path} holds no PEM certificate")]
    Empty {
        /// `certificate`, `CA certificate`.
        what: &'static str,
        /// The file.
        path: String,
    },
    /// rustls refused the material (a key that does not match the certificate, …).
    #[error("invalid TLS {what}: {reason}")]
    Invalid {
        /// What was refused.
        what: &'static str,
        /// rustls' reason.
        reason: String,
    },
    /// No usable root certificate in the system store, and no CA file was given.
    #[error(
        "no system root certificates could be loaded ({0}); name the CA that signed the server's certificate (executor.ca_cert)"
    )]
    NoSystemRoots(String),
}

/// Makes ring this process's default rustls provider, so HTTP clients built by libraries
/// (rmcp's streamable-HTTP client, reqwest) find one: the workspace builds reqwest with
/// `rustls-no-provider` to keep aws-lc's C toolchain out of the build. Every binary calls this
/// first; calling it again is harmless.
pub fn install_process_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The one crypto provider of every config built here.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate of a PEM file, in order (a leaf, then its chain).
fn read_certs(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read_error = |reason: String| TlsError::Read {
        what,
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|err| read_error(err.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| read_error(err.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            what,
            path: path.display().to_string(),
        });
    }
    Ok(certs)
}

/// A server config from a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or
/// SEC1). It offers HTTP/1.1 over ALPN, which is what `axum::serve` speaks here.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = read_certs(cert, "certificate")?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|err| TlsError::Read {
        what: "private key",
        path: key.display().to_string(),
        reason: err.to_string(),
    })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|err| TlsError::Invalid {
            what: "protocol versions",
            reason: err.to_string(),
        })?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|err| TlsError::Invalid {
            what: "certificate and key",
            reason: err.to_string(),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client config trusting the CA certificate(s) of `ca_cert` only, or the system's
/// root certificates when `None`.
pub fn client_config(ca_cert: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    match ca_cert {
        Some(path) => {
            for cert in read_certs(path, "CA certificate")? {
                roots.add(cert).map_err(|err| TlsError::Invalid {
                    what: "CA certificate",
                    reason: format!("{}: {err}", path.display()),
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for err in &found.errors {
                tracing::debug!(error = %err, "a system root certificate source failed");
            }
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "the store is empty".to_owned());
                return Err(TlsError::NoSystemRoots(why));
            }
        }
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|err| TlsError::Invalid {
            what: "protocol versions",
            reason: err.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
