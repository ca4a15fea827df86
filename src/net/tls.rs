//! TLS settings for servers and clients (feature `tls`), built from PEM
//! files with rustls and its ring crypto provider, and what a failed TLS
//! exchange means for the person who has to fix it.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, CertificateError, RootCertStore};

use crate::Error;

fn invalid(what: &str, err: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{what}: {err}"))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM chain; at least one.
fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(what, e))?;
    if chain.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{what}: no certificate found (expected PEM with -----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(chain)
}

fn private_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| invalid(what, e))
}

/// A trust store with every certificate of a PEM file; at least one.
fn roots(pem: &[u8], what: &str) -> Result<Arc<RootCertStore>, Error> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(pem, what)? {
        roots.add(cert).map_err(|e| invalid(what, e))?;
    }
    Ok(Arc::new(roots))
}

/// A server's TLS settings: its certificate chain and private key, and,
/// for mutual TLS, the CAs whose client certificates it accepts.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");
/// # let read = |name: &str| std::fs::read(format!("{dir}/{name}")).unwrap();
/// use quorum_lock::net::{ServerConfig, ServerTls};
///
/// // The node's certificate and key, as `quorum-lock certs` writes them.
/// let tls = ServerTls::from_pem(&read("node-localhost.pem"), &read("node-localhost-key.pem"))?
///     // Optional: admit only clients with a certificate signed by this CA.
///     .require_client_cert(&read("ca.pem"))?;
/// let config = ServerConfig::new("client-secret").tls(tls);
/// # Ok::<(), quorum_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    client_cas: Option<Arc<RootCertStore>>,
}

impl ServerTls {
    /// Parses the certificate chain (the server's certificate first, then
    /// any intermediates) and its private key. Fails with
    /// [`Error::InvalidArgument`] for unreadable PEM or a key that does not
    /// belong to the certificate.
    pub fn from_pem(cert_chain: &[u8], private_key: &[u8]) -> Result<Self, Error> {
        let chain = certificates(cert_chain, "TLS certificate chain")?;
        let key = Arc::new(self::private_key(private_key, "TLS private key")?);
        let acceptor = acceptor(&chain, &key, None)?;
        Ok(ServerTls {
            acceptor,
            chain,
            key,
            client_cas: None,
        })
    }

    /// Mutual TLS: requires every client to present a certificate signed by
    /// one of the CA certificates in `ca_pem`, and closes the connection of
    /// one that does not, before it can send anything. A client still has
    /// to present the token: the certificate decides who may connect, the
    /// token what it may do. Several CAs in the file are all trusted, which
    /// is how clients move from one CA to the next.
    ///
    /// Fails with [`Error::InvalidArgument`] when `ca_pem` holds no readable
    /// certificate.
    pub fn require_client_cert(mut self, ca_pem: &[u8]) -> Result<Self, Error> {
        let cas = roots(ca_pem, "TLS client CA file")?;
        self.acceptor = acceptor(&self.chain, &self.key, Some(&cas))?;
        self.client_cas = Some(cas);
        Ok(self)
    }

    /// Whether clients must present a certificate
    /// ([`require_client_cert`](Self::require_client_cert)).
    pub fn requires_client_cert(&self) -> bool {
        self.client_cas.is_some()
    }
}

fn acceptor(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    client_cas: Option<&Arc<RootCertStore>>,
) -> Result<tokio_rustls::TlsAcceptor, Error> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("TLS settings", e))?;
    let builder = match client_cas {
        None => builder.with_no_client_auth(),
        Some(cas) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                cas.clone(),
                provider(),
            )
            .build()
            .map_err(|e| invalid("TLS client CA file", e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain.to_vec(), key.clone_key())
        .map_err(|e| invalid("TLS certificate or key", e))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A client's TLS settings: the CA certificates it trusts, optionally a
/// certificate of its own for servers that require one (mutual TLS), and
/// optionally one server name for every server.
///
/// By default each connection expects the host of the endpoint it
/// connects to on the server's certificate: `db1.example.net` for
/// `db1.example.net:7070`, the IP address `10.0.0.1` for `10.0.0.1:7070`
/// (certificates can name IP addresses too). So each node has a
/// certificate for its own name, and one `ClientTls` serves a whole
/// cluster.
///
/// ```
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");
/// # let read = |name: &str| std::fs::read(format!("{dir}/{name}")).unwrap();
/// use quorum_lock::net::{ClientTls, RemoteConfig};
///
/// let tls = ClientTls::new(&read("ca.pem"))?
///     // Only for servers that require client certificates:
///     .client_cert(&read("client-test.pem"), &read("client-test-key.pem"))?;
/// let mut config = RemoteConfig::new("client-secret");
/// config.tls = Some(tls);
/// # Ok::<(), quorum_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct ClientTls {
    roots: Arc<RootCertStore>,
    pub(crate) connector: tokio_rustls::TlsConnector,
    server_name: Option<ServerName<'static>>,
    client_cert: bool,
}

impl ClientTls {
    /// Trusts the CA certificates in `ca_pem` (PEM, one or more); each
    /// server is expected to present a certificate for the host of its
    /// endpoint. Fails with [`Error::InvalidArgument`] when the file holds
    /// no readable certificate.
    pub fn new(ca_pem: &[u8]) -> Result<Self, Error> {
        let roots = roots(ca_pem, "TLS CA file")?;
        let connector = connector(&roots, None)?;
        Ok(ClientTls {
            roots,
            connector,
            server_name: None,
            client_cert: false,
        })
    }

    /// Expects `name` (a DNS name or an IP address) on every server's
    /// certificate, instead of the host of each endpoint: for servers
    /// reached by an address their certificates do not name, such as
    /// several servers sharing one certificate. Fails with
    /// [`Error::InvalidArgument`] for something that is neither.
    pub fn server_name(mut self, name: &str) -> Result<Self, Error> {
        let name = ServerName::try_from(name.trim().to_owned())
            .map_err(|e| invalid(&format!("TLS server name '{name}'"), e))?;
        self.server_name = Some(name);
        Ok(self)
    }

    /// Presents this certificate chain (PEM, the client's certificate
    /// first) and its private key to servers that require client
    /// certificates ([`ServerTls::require_client_cert`]); servers that do
    /// not, do not ask for it. Fails with [`Error::InvalidArgument`] for
    /// unreadable PEM or a key that does not belong to the certificate.
    pub fn client_cert(mut self, cert_chain: &[u8], private_key: &[u8]) -> Result<Self, Error> {
        let chain = certificates(cert_chain, "TLS client certificate")?;
        let key = self::private_key(private_key, "TLS client key")?;
        self.connector = connector(&self.roots, Some((chain, key)))?;
        self.client_cert = true;
        Ok(self)
    }

    /// Trusts `ca_pem` and expects `server_name` on every server's
    /// certificate.
    #[deprecated(
        since = "0.1.0",
        note = "the server name now comes from each endpoint's host: use \
                `ClientTls::new(ca_pem)`, adding `.server_name(name)` only to \
                expect one name on every server"
    )]
    pub fn from_pem(ca_pem: &[u8], server_name: &str) -> Result<Self, Error> {
        Self::new(ca_pem)?.server_name(server_name)
    }

    /// The name the server at `endpoint` must present: the override, or
    /// the endpoint's host.
    pub(crate) fn name_for(&self, endpoint: &str) -> Result<ServerName<'static>, Error> {
        if let Some(name) = &self.server_name {
            return Ok(name.clone());
        }
        let host = super::connect::host_of(endpoint).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "lock server address '{endpoint}': expected host:port, from which TLS takes \
                 the name the server's certificate must carry"
            ))
        })?;
        ServerName::try_from(host.to_owned()).map_err(|e| {
            Error::InvalidArgument(format!(
                "lock server address '{endpoint}': '{host}' is not a name TLS can check ({e}); \
                 use a DNS name or an IP address, or set the expected name with \
                 ClientTls::server_name"
            ))
        })
    }
}

fn connector(
    roots: &Arc<RootCertStore>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<tokio_rustls::TlsConnector, Error> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("TLS settings", e))?
        .with_root_certificates(roots.clone());
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid("TLS client certificate or key", e))?,
    };
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The reason to report when a TLS exchange failed over a certificate
/// (ours refused by the server, or the server's by us), with what to fix;
/// `None` for other failures, which are worth retrying. No `;` in it:
/// callers list several servers' reasons separated by `;`.
pub(crate) fn certificate_problem(err: &std::io::Error) -> Option<String> {
    let tls = err.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match tls {
        rustls::Error::InvalidCertificate(problem) => server_certificate(problem),
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the server requires a client certificate (mutual TLS) and this client presented \
             none: give the client a certificate signed by a CA the server trusts for clients"
                .into()
        }
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied
            // A certificate whose issuer has a trusted CA's name but
            // not its key: its signature does not verify.
            | AlertDescription::DecryptError),
        ) => format!(
            "the server refused this client's certificate ({alert:?}): it must be signed by a \
             CA the server trusts for clients, be unexpired, and be made for a TLS client"
        ),
        _ => return None,
    })
}

/// What is wrong with the server's certificate, in words, and what to do.
fn server_certificate(problem: &CertificateError) -> String {
    match problem {
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => format!(
            "the server's certificate is for {}, not for {}, the host this client connects to: \
             the certificate must name that host (as a DNS name or IP address among its subject \
             alternative names), or the client must be told which name to expect",
            names(presented),
            expected.to_str()
        ),
        CertificateError::NotValidForName => {
            "the server's certificate does not name the host this client connects to: the \
             certificate must name that host (as a DNS name or IP address among its subject \
             alternative names), or the client must be told which name to expect"
                .into()
        }
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "the server's certificate is not signed by a CA this client trusts: trust the CA \
             that signed it, or give the server a certificate from the trusted CA"
                .into()
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired: renew the server's certificate, or check the \
             clocks of both machines"
                .into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet: check the clocks of both machines, or \
             renew the server's certificate"
                .into()
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "the server's certificate is not made for a TLS server (its extended key usage): \
             give the server a certificate made for a server"
                .into()
        }
        // webpki's error, which rustls passes on without a variant of its
        // own: the certificate can sign others, so it is no server's.
        CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
            "the server presents a CA certificate as its own: a server needs a certificate of \
             its own, signed by the CA, not the CA's certificate"
                .into()
        }
        other => format!("the server's certificate is not acceptable ({other})"),
    }
}

/// The names a certificate carries, as webpki lists them
/// (`DnsName("db1")`, `IpAddress(10.0.0.1)`), without the wrapping.
fn names(presented: &[String]) -> String {
    // The certificate's words, which its signer chose: escaped, so that a
    // name with control characters cannot drive the terminal that shows
    // the error.
    let plain: Vec<String> = presented
        .iter()
        .map(|name| {
            let name = name.as_str();
            let bare = name
                .strip_prefix("DnsName(\"")
                .and_then(|n| n.strip_suffix("\")"))
                .or_else(|| {
                    name.strip_prefix("IpAddress(")
                        .and_then(|n| n.strip_suffix(')'))
                })
                .unwrap_or(name);
            crate::locker::escape_peer_text(bare)
        })
        .collect();
    match plain.as_slice() {
        [] => "no name at all".to_owned(),
        names => names.join(", "),
    }
}

/// Why a TLS client's handshake failed when the server answered with
/// something that is not TLS: a server that serves plain TCP, or no lock
/// server at all. `None` for other failures.
pub(crate) fn plain_answer(err: &std::io::Error) -> Option<String> {
    let tls = err.get_ref()?.downcast_ref::<rustls::Error>()?;
    matches!(tls, rustls::Error::InvalidMessage(_)).then(|| {
        "the server answered without TLS: it does not serve TLS (or it is not a lock server), \
         and this client connects with TLS"
            .to_owned()
    })
}

/// How a server reports a TLS handshake that failed: whether it is worth a
/// warning, and why it failed in words. A peer that closed before saying
/// anything (a port check, a client that gave up) is no warning.
pub(crate) fn accept_failure(err: &std::io::Error) -> (bool, String) {
    let Some(tls) = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        let closed = matches!(
            err.kind(),
            std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
        );
        return if closed {
            (
                false,
                "the peer closed the connection before the TLS handshake ended".into(),
            )
        } else {
            (true, err.to_string())
        };
    };
    let why = match tls {
        rustls::Error::InvalidMessage(_) => "a client that does not speak TLS (a client without \
             TLS, or no lock client): this server serves TLS only"
            .to_owned(),
        rustls::Error::NoCertificatesPresented => "a client without a certificate: this server \
             requires one signed by its client CA"
            .to_owned(),
        rustls::Error::InvalidCertificate(problem) => {
            format!("the client's certificate was refused ({problem}): it must be signed by the client CA, be unexpired, and be made for a TLS client")
        }
        // Only an alert about a certificate blames one: a peer may send an
        // alert before this server sent anything (a scanner, a client that
        // gives up on the versions or cipher suites offered).
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied
            | AlertDescription::DecryptError),
        ) => format!(
            "the client refused this server's certificate ({alert:?}): the client trusts \
             another CA, or expects another name"
        ),
        rustls::Error::AlertReceived(alert) => format!(
            "the client ended the handshake with an alert ({alert:?}): it may support none of \
             this server's TLS versions or cipher suites, or it gave up"
        ),
        // The log line says "TLS handshake failed" already.
        other => other.to_string(),
    };
    (true, why)
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("certificates", &self.chain.len())
            .field("requires_client_cert", &self.requires_client_cert())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match &self.server_name {
            Some(name) => name.to_str().into_owned(),
            None => "each endpoint's host".to_owned(),
        };
        f.debug_struct("ClientTls")
            .field("trusted_cas", &self.roots.len())
            .field("server_name", &name)
            .field("client_cert", &self.client_cert)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &[u8] = include_bytes!("../../tests/data/tls/ca.pem");

    #[test]
    fn the_server_name_comes_from_each_endpoint() {
        let tls = ClientTls::new(CA).expect("ca");
        let name = |endpoint: &str| tls.name_for(endpoint).map(|n| n.to_str().into_owned());
        assert_eq!(
            name("db1.example.net:7070").ok().as_deref(),
            Some("db1.example.net")
        );
        assert_eq!(name("10.0.0.1:7070").ok().as_deref(), Some("10.0.0.1"));
        assert_eq!(name("[::1]:7070").ok().as_deref(), Some("::1"));
        for bad in ["no-port", ":7070", "::1:7070", "bad_name!:7070"] {
            let err = name(bad).expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
        let fixed = tls.server_name("locks.internal").expect("name");
        assert_eq!(
            fixed
                .name_for("10.0.0.1:7070")
                .map(|n| n.to_str().into_owned()),
            Ok("locks.internal".into())
        );
    }

    #[test]
    fn files_without_certificates_are_refused_with_their_role() {
        let err = ClientTls::new(b"not pem").expect_err("no certificate");
        assert!(err.to_string().contains("TLS CA file"), "{err}");
        let err = ClientTls::new(CA)
            .and_then(|t| t.client_cert(CA, b""))
            .expect_err("no key");
        assert!(err.to_string().contains("TLS client key"), "{err}");
    }
}
