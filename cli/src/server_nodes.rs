//! Lock servers as the nodes of the client commands: loading the tokens,
//! the client configuration (TLS too), connecting to every server at once,
//! and saying why those that did not answer are down, one cause once.
//! A token is never shown, whatever fails.

use std::path::Path;
use std::time::Duration;

use futures::future::join_all;
use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::{Error, NetLocker};

use crate::args::ClientArgs;
use crate::fail::{Failure, AUTH, UNAVAILABLE};

/// The token from `file` if given, else from `value` (flag or environment).
/// Surrounding whitespace is dropped; an empty token is an error.
pub fn load_token(
    file: Option<&Path>,
    value: Option<&str>,
    what: &str,
) -> Result<Option<String>, Failure> {
    let (token, origin) = match (file, value) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::usage(format!(
                    "cannot read the {what} file {}: {e}",
                    crate::node_urls::path_shown(path)
                ))
            })?;
            (
                text,
                format!("the {what} file {}", crate::node_urls::path_shown(path)),
            )
        }
        (None, Some(value)) => (value.to_owned(), format!("the {what}")),
        (None, None) => return Ok(None),
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(Failure::usage(format!("{origin} is empty")));
    }
    // Masked wherever the command prints it, whether or not it presents
    // it (a listing may quote either token).
    quorum_lock::remember_secret(token);
    Ok(Some(token.to_owned()))
}

/// The token a client presents: the admin token for admin commands, the
/// client token otherwise, each falling back to the other, since the admin
/// token may do everything.
pub fn client_token(args: &ClientArgs, admin: bool) -> Result<String, Failure> {
    let client = load_token(
        args.tokens.token_file.as_deref(),
        args.tokens.token.as_deref(),
        "token",
    )?;
    let admin_token = load_token(
        args.tokens.admin_token_file.as_deref(),
        args.tokens.admin_token.as_deref(),
        "admin token",
    )?;
    let (first, second) = if admin {
        (admin_token, client)
    } else {
        (client, admin_token)
    };
    first.or(second).ok_or_else(|| {
        Failure::usage(if admin {
            "no token: pass --admin-token-file FILE or set QUORUM_LOCK_ADMIN_TOKEN"
        } else {
            "no token: pass --token-file FILE or set QUORUM_LOCK_TOKEN"
        })
    })
}

/// How to reach lock servers: the token (the admin token for admin
/// commands), the timeouts and TLS.
pub fn remote_config(args: &ClientArgs, admin: bool) -> Result<RemoteConfig, Failure> {
    let token = client_token(args, admin)?;
    let mut config = RemoteConfig::new(token);
    config.connect_timeout = args.connect_timeout;
    if let Some(ca) = &args.tls_ca {
        config.tls = Some(client_tls(args, ca)?);
    }
    // A `run` may hold its lock for hours: pick a restarted server up
    // within a second, so the quorum is whole again quickly.
    config.reconnect.max = Duration::from_secs(1);
    Ok(config)
}

/// The TLS settings of the client flags: the CA to trust, the client's
/// certificate (mutual TLS), and the one name every server must present
/// (by default each node's host).
fn client_tls(args: &ClientArgs, ca: &Path) -> Result<ClientTls, Failure> {
    let read = |path: &Path, flag: &str| {
        std::fs::read(path).map_err(|e| {
            Failure::usage(format!(
                "cannot read {flag} {}: {e}",
                crate::node_urls::path_shown(path)
            ))
        })
    };
    let usage = |e: Error| Failure::usage(e.to_string());
    let mut tls = ClientTls::new(&read(ca, "--tls-ca")?).map_err(usage)?;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        tls = tls
            .client_cert(&read(cert, "--tls-cert")?, &read(key, "--tls-key")?)
            .map_err(usage)?;
    }
    if let Some(name) = &args.tls_server_name {
        tls = tls.server_name(name).map_err(usage)?;
    }
    Ok(tls)
}

/// Connects to every lock server at once, and returns them in the order
/// given. A rejected token anywhere is fatal (exit 77); a server that
/// cannot be reached is returned offline, reconnecting in the background.
pub async fn connect_servers(
    nodes: &[String],
    config: &RemoteConfig,
    admin: bool,
) -> Result<Vec<RemoteLocker>, Failure> {
    let connects = nodes
        .iter()
        .map(|n| RemoteLocker::connect(n.clone(), config.clone()));
    let mut lockers = Vec::with_capacity(nodes.len());
    for (node, result) in nodes.iter().zip(join_all(connects).await) {
        match result {
            Ok(locker) => lockers.push(locker),
            Err(Error::Unauthorized { reason, .. }) => {
                let check = if admin {
                    "--admin-token-file / QUORUM_LOCK_ADMIN_TOKEN"
                } else {
                    "--token-file / QUORUM_LOCK_TOKEN"
                };
                return Err(Failure::new(
                    AUTH,
                    format!("lock server {node} rejected the token ({reason}); check {check}"),
                ));
            }
            Err(err) => return Err(Failure::from(err)),
        }
    }
    Ok(lockers)
}

/// Why a server is unreachable, without its endpoint (the caller names it).
pub fn why(err: &Error) -> String {
    match err {
        Error::LockerUnavailable { reason, .. } => reason.clone(),
        Error::LockerTimeout { after, .. } => format!("no answer within {after:?}"),
        Error::Unauthorized { reason, .. } => format!("token rejected: {reason}"),
        Error::Tls { reason, .. } => format!("TLS refused: {reason}"),
        other => other.to_string(),
    }
}

/// The lock servers without a connection, in the order given, each with
/// why its latest attempt failed (if one ended yet).
pub struct Down(pub Vec<(String, Option<Error>)>);

impl Down {
    pub fn of<'a>(servers: impl IntoIterator<Item = &'a RemoteLocker>) -> Down {
        Down(
            servers
                .into_iter()
                .filter(|s| !s.is_online())
                .map(|s| (s.endpoint(), s.connect_error()))
                .collect(),
        )
    }

    /// `a, b: reason; c: other reason`: servers that failed alike are
    /// named together, so that one cause is said once.
    pub fn describe(&self) -> String {
        let mut groups: Vec<(Option<String>, Vec<&str>)> = Vec::new();
        for (node, err) in &self.0 {
            let reason = err.as_ref().map(why);
            match groups.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, nodes)) => nodes.push(node),
                None => groups.push((reason, vec![node])),
            }
        }
        let parts: Vec<String> = groups
            .into_iter()
            .map(|(reason, nodes)| match reason {
                Some(reason) => format!("{}: {reason}", nodes.join(", ")),
                None => nodes.join(", "),
            })
            .collect();
        parts.join("; ")
    }

    /// Whether some node is not a lock server of this setup at all (a
    /// Redis or HTTP server, TLS on one side only): waiting does not mend
    /// that, so a client that would wait for its nodes fails at once.
    pub fn mistaken(&self) -> bool {
        const FOREIGN: [&str; 3] = [
            "is this the port of a lock server?",
            "it serves TLS only",
            "it does not serve TLS",
        ];
        self.0.iter().any(|(_, err)| {
            err.as_ref()
                .is_some_and(|err| FOREIGN.iter().any(|words| err.to_string().contains(words)))
        })
    }

    /// 77 when servers refused TLS over certificates, as for a rejected
    /// token: a setting to change, not an outage to wait out. 69 otherwise.
    pub fn code(&self) -> u8 {
        let refused = self
            .0
            .iter()
            .any(|(_, err)| matches!(err, Some(Error::Tls { .. })));
        if refused {
            AUTH
        } else {
            UNAVAILABLE
        }
    }

    /// Which flags or addresses to change, when the reasons point at
    /// them: one piece of advice per cause, in the order the servers were
    /// given; the library says what is wrong in its own terms.
    pub fn advice(&self, args: &ClientArgs) -> Option<String> {
        let mut advice: Vec<&'static str> = Vec::new();
        for err in self.0.iter().filter_map(|(_, err)| err.as_ref()) {
            if let Some(words) = advice_for(&err.to_string(), args)
                && !advice.contains(&words)
            {
                advice.push(words);
            }
        }
        (!advice.is_empty()).then(|| advice.join("; "))
    }
}

/// The flag to change for one server's reason, if the reason names one.
fn advice_for(reason: &str, args: &ClientArgs) -> Option<&'static str> {
    let said = |words: &str| reason.contains(words);
    let advice = if said("requires a client certificate") && args.tls_cert.is_none() {
        "the servers require a client certificate: pass --tls-cert FILE and --tls-key FILE \
         ('quorum-lock certs --client NAME' makes them)"
    } else if said("refused this client's certificate") {
        "the servers refused --tls-cert: it must be signed by the CA in their --tls-client-ca \
         ('quorum-lock certs --client NAME' with that CA makes one)"
    } else if said("the host this client connects to") {
        "each server's certificate must name its host as given in --nodes ('quorum-lock certs \
         --node HOST' makes one), or pass --tls-server-name NAME"
    } else if said("presents a CA certificate as its own") {
        "start each server with its own certificate and key ('quorum-lock certs --node HOST' \
         makes them), not with the CA's ca.pem"
    } else if said("not signed by a CA this client trusts") {
        "--tls-ca must hold the CA certificate that signed the servers' certificates"
    } else if said("renew the server's certificate") {
        "renew the servers' certificates ('quorum-lock certs --node HOST --force')"
    } else if said("it serves TLS only") && args.tls_ca.is_none() {
        "the servers serve TLS: pass --tls-ca FILE, the CA that signed their certificates"
    } else if said("does not serve TLS") || said("check that it serves TLS") {
        "the servers do not serve TLS: start them with --tls-cert and --tls-key, or drop --tls-ca"
    } else if said("it is a Redis server") {
        "a host:port entry of --nodes is a lock server ('quorum-lock server'); for Redis \
         servers pass --redis redis://HOST:PORT,... instead, or write each as redis://HOST:PORT \
         in --nodes"
    } else if said("is this the port of a lock server?") {
        "each --nodes entry must be the --listen address of a 'quorum-lock server'"
    } else {
        return None;
    };
    Some(advice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_that_are_no_lock_servers_are_told_from_servers_that_are_down() {
        let failed = |reason: &str| {
            Some(Error::LockerUnavailable {
                endpoint: "x".into(),
                reason: reason.into(),
            })
        };
        let down = Down(vec![(
            "a:1".into(),
            failed("cannot connect: connection refused"),
        )]);
        assert!(!down.mistaken());
        let redis = Down(vec![(
            "a:1".into(),
            failed(
                "the server answered \"+PONG\" in the Redis protocol: it is a Redis server, \
                 not a lock server (is this the port of a lock server?)",
            ),
        )]);
        assert!(redis.mistaken());
    }

    #[test]
    fn unreachable_servers_that_failed_alike_are_named_together() {
        let failed = |reason: &str| {
            Some(Error::LockerUnavailable {
                endpoint: "x".into(),
                reason: reason.into(),
            })
        };
        let down = Down(vec![
            ("a:1".into(), failed("refused")),
            ("b:1".into(), failed("refused")),
            ("c:1".into(), None),
            ("d:1".into(), failed("timeout")),
        ]);
        assert_eq!(down.describe(), "a:1, b:1: refused; c:1; d:1: timeout");
        assert_eq!(down.code(), UNAVAILABLE);
        let tls = Down(vec![(
            "a:1".into(),
            Some(Error::Tls {
                endpoint: "a:1".into(),
                reason: "the server requires a client certificate".into(),
            }),
        )]);
        assert_eq!(tls.code(), AUTH);
    }
}
