//! TLS settings for servers and clients (feature `tls`), built from PEM
//! files with rustls and its ring crypto provider.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::Error;

fn invalid(what: &str, err: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{what}: {err}"))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server's TLS settings from a PEM certificate chain and its PEM
/// private key.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
/// // A certificate and its key, as `quorum-lock certs` writes them.
/// let cert = std::fs::read(dir.join("test-cert.pem"))?;
/// let key = std::fs::read(dir.join("test-key.pem"))?;
/// let tls = quorum_lock::net::ServerTls::from_pem(&cert, &key)?;
/// # drop(tls);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
}

impl ServerTls {
    /// Parses the chain and key. Fails with [`Error::InvalidArgument`] for
    /// unreadable PEM or a key that does not match.
    pub fn from_pem(cert_chain: &[u8], private_key: &[u8]) -> Result<Self, Error> {
        let chain = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("TLS certificate chain", e))?;
        if chain.is_empty() {
            return Err(Error::InvalidArgument(
                "TLS certificate chain: no certificate found".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(private_key)
            .map_err(|e| invalid("TLS private key", e))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS settings", e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| invalid("TLS certificate or key", e))?;
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// A client's TLS settings: the CA certificates (PEM) it trusts and the
/// name it expects on the server certificate.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) connector: tokio_rustls::TlsConnector,
    pub(crate) server_name: ServerName<'static>,
}

impl ClientTls {
    /// Trusts the certificates in `ca_pem` and expects servers to present
    /// `server_name` (a DNS name or an IP address).
    pub fn from_pem(ca_pem: &[u8], server_name: &str) -> Result<Self, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots
                .add(cert.map_err(|e| invalid("TLS CA certificate", e))?)
                .map_err(|e| invalid("TLS CA certificate", e))?;
        }
        if roots.is_empty() {
            return Err(Error::InvalidArgument(
                "TLS CA file: no certificate found".into(),
            ));
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS settings", e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| invalid("TLS server name", e))?;
        Ok(ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("server_name", &self.server_name)
            .finish()
    }
}
