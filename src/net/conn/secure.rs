//! The TLS layer of a connection being opened, and what a failed TCP
//! connect or TLS handshake says: a certificate problem is `Error::Tls`,
//! anything else `Error::LockerUnavailable` with the reason in words.

use tokio::net::TcpStream;

use crate::error::CANNOT_CONNECT;
use crate::net::io::BoxIo;
use crate::net::RemoteConfig;
use crate::Error;

/// Why a TCP connection was not made.
pub(super) fn cannot_connect(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!(
                "{CANNOT_CONNECT}: connection refused, nothing listens on that port (is the \
                server running, and is this its port?)"
            )
        }
        _ => format!("{CANNOT_CONNECT}: {err}"),
    }
}

/// Wraps the stream in TLS when the config asks for it, expecting the
/// name [`ClientTls`](crate::net::ClientTls) gives for `endpoint`.
pub(super) async fn secure(
    stream: TcpStream,
    endpoint: &str,
    config: &RemoteConfig,
) -> Result<BoxIo, Error> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let name = tls.name_for(endpoint)?;
        return match tls.connector.connect(name, stream).await {
            Ok(stream) => Ok(Box::new(stream)),
            Err(e) => Err(tls_refusal(endpoint, &e).unwrap_or_else(|| {
                let reason = crate::net::tls::plain_answer(&e).unwrap_or_else(|| {
                    // A close or a reset is worded as the same ends of
                    // the protocol's own handshake are (the command line
                    // reads these words to give a server that ended it a
                    // moment to return); a refusal (a fatal alert) is not:
                    // the server answered, and will answer the same.
                    use std::io::ErrorKind;
                    match e.kind() {
                        ErrorKind::UnexpectedEof => {
                            "the server closed the connection during the handshake (TLS's), \
                             before answering it: it may be full (a later attempt tries again), \
                             or not speak TLS on this port"
                                .to_owned()
                        }
                        ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe => format!("handshake failed (TLS's): {e}"),
                        _ => format!("TLS handshake failed: {e}"),
                    }
                });
                Error::LockerUnavailable {
                    endpoint: endpoint.to_owned(),
                    reason,
                }
            })),
        };
    }
    let _ = (endpoint, config);
    Ok(Box::new(stream))
}

/// [`Error::Tls`] when `err` is a TLS failure over a certificate.
pub(super) fn tls_refusal(endpoint: &str, err: &std::io::Error) -> Option<Error> {
    #[cfg(feature = "tls")]
    if let Some(reason) = crate::net::tls::certificate_problem(err) {
        return Some(Error::Tls {
            endpoint: endpoint.to_owned(),
            reason,
        });
    }
    let _ = (endpoint, err);
    None
}
