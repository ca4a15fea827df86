//! [`connect_all`]: one [`RemoteLocker`] per lock server, connected at
//! once, ready for a [`Dsync`](crate::Dsync).

use std::sync::Arc;

use futures::future::join_all;

use super::{RemoteConfig, RemoteLocker};
use crate::quorum::write_quorum;
use crate::{Error, NetLocker};

/// The host of `host:port`, without the brackets of an IPv6 address;
/// `None` unless the port is a number from 1 to 65535 and the host is not
/// empty (an IPv6 host must be in brackets).
pub(crate) fn host_of(endpoint: &str) -> Option<&str> {
    let (host, port) = endpoint.rsplit_once(':')?;
    match port.parse::<u16>() {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    let host = match host.strip_prefix('[') {
        Some(rest) => rest.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    (!host.is_empty() && !host.contains(char::is_whitespace) && !host.contains(NOT_IN_AN_ADDRESS))
        .then_some(host)
}

/// Characters no `host:port` holds, though a URL does (user information, a
/// path, a query): an address holding one is a URL given in the wrong
/// place, whose password must not be shown.
const NOT_IN_AN_ADDRESS: [char; 4] = ['@', '/', '?', '#'];

/// Refuses an `endpoint` that cannot be a lock server's `host:port`
/// because it holds a URL's parts (a Redis or database URL from a list of
/// nodes, say), naming it as [`redact_url`](crate::redact_url) shows it:
/// such text may carry a password.
pub(crate) fn refuse_url(endpoint: &str) -> Result<(), Error> {
    if endpoint.contains(NOT_IN_AN_ADDRESS) || endpoint.contains(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "lock server address '{}': a lock server is addressed as host:port, with no \
             scheme, user, password or path (a Redis or database URL belongs in the list of \
             nodes the command line reads, not here)",
            crate::redact_url(endpoint)
        )));
    }
    Ok(())
}

/// Connects to every lock server of `nodes` (`host:port` each) at once, and
/// returns their lockers in the order given, for [`Dsync::new`] or
/// [`Dsync::builder`]. Every client of the same locks must list the same
/// servers.
///
/// Each locker is a [`RemoteLocker`] with a copy of `config`, so what
/// [`RemoteLocker::connect`] does for one server holds for each:
///
/// * **A server that cannot be reached is not an error.** Its locker
///   starts offline, counts as refusing until it connects, and connects in
///   the background. So a cluster with a minority down starts and locks
///   as usual, and a service may start before its lock servers (its locks
///   fail with [`Error::QuorumUnavailable`] until a quorum is up). Check
///   [`NetLocker::is_online`] to require more at start.
/// * **A rejected token is an error**, whichever server rejects it:
///   [`Error::Unauthorized`]. Every server of a cluster takes the same
///   token, so this is a configuration to fix, not an outage to wait out.
/// * **TLS refused over a certificate** ([`Error::Tls`]: this client's
///   certificate refused by the server, or the server's refused by this
///   client) leaves that locker offline, retrying, like an unreachable
///   server, unless it makes a write quorum impossible even once every
///   unreachable server is back: then the first such error is returned,
///   since nothing but a change of certificates or settings can help.
///
/// Also [`Error::InvalidArgument`] for an empty list, an entry that is not
/// `host:port`, an entry listed twice (a server counted twice would break
/// mutual exclusion; two names of the same server are not detected), a
/// host TLS cannot check, or a protocol version this build does not speak.
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::LocalLocker;
/// # use quorum_lock::net::{LockServer, ServerConfig};
/// use quorum_lock::net::{connect_all, RemoteConfig};
/// use quorum_lock::Dsync;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let mut nodes = Vec::new();
/// # for _ in 0..3 {
/// #     let server = LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new("s3cret"))?;
/// #     let (addr, serve) = server.bind("127.0.0.1:0".parse()?, std::future::pending()).await?;
/// #     tokio::spawn(serve);
/// #     nodes.push(addr.to_string());
/// # }
/// // nodes: ["10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"], say
/// let lockers = connect_all(&nodes, RemoteConfig::new("s3cret")).await?;
/// let ds = Dsync::builder(lockers).owner("billing").build()?;
/// let guard = ds.rw_mutex(["invoices"])?.lock().await?;
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
///
/// [`Dsync::new`]: crate::Dsync::new
/// [`Dsync::builder`]: crate::Dsync::builder
///
/// # Cancel safety
///
/// Cancel safe: dropping the future drops every locker made so far and
/// closes every connection being set up; the background reconnection of
/// a locker already made ends at its next attempt.
pub async fn connect_all<I>(
    nodes: I,
    config: RemoteConfig,
) -> Result<Vec<Arc<dyn NetLocker>>, Error>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut endpoints: Vec<String> = Vec::new();
    for node in nodes {
        let node = node.as_ref().trim();
        // A URL's text may hold a password: refused before anything
        // quotes the address.
        refuse_url(node)?;
        if host_of(node).is_none() {
            return Err(Error::InvalidArgument(format!(
                "lock server address '{node}': expected host:port with a port from 1 to 65535 \
                 (an IPv6 address in brackets, [::1]:7070)"
            )));
        }
        if endpoints.iter().any(|e| e == node) {
            return Err(Error::InvalidArgument(format!(
                "lock server {node} is listed twice: it would count twice towards the quorum"
            )));
        }
        endpoints.push(node.to_owned());
    }
    if endpoints.is_empty() {
        return Err(Error::InvalidArgument(
            "no lock servers to connect to: pass at least one host:port".into(),
        ));
    }
    let connects = endpoints
        .iter()
        .map(|endpoint| RemoteLocker::connect(endpoint.clone(), config.clone()));
    let mut lockers = Vec::with_capacity(endpoints.len());
    for result in join_all(connects).await {
        lockers.push(result?);
    }
    let refused: Vec<Error> = lockers
        .iter()
        .filter_map(|l| l.connect_error())
        .filter(|e| matches!(e, Error::Tls { .. }))
        .collect();
    if lockers.len() - refused.len() < write_quorum(lockers.len())
        && let Some(first) = refused.into_iter().next()
    {
        return Err(first);
    }
    Ok(lockers
        .into_iter()
        .map(|l| Arc::new(l) as Arc<dyn NetLocker>)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn hosts_are_taken_from_host_and_port() {
        assert_eq!(host_of("db1.example.net:7070"), Some("db1.example.net"));
        assert_eq!(host_of("10.0.0.1:1"), Some("10.0.0.1"));
        assert_eq!(host_of("[::1]:7070"), Some("::1"));
        for bad in [
            "",
            "host",
            "host:",
            "host:0",
            "host:65536",
            ":7070",
            "::1:7070",
            "[::1:7070",
            "a b:1",
            "[]:7070",
            "app:pw@db:7070",
            "db/x:7070",
        ] {
            assert_eq!(host_of(bad), None, "{bad:?}");
        }
    }
}
