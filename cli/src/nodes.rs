//! What the client subcommands share: checking the node list, loading the
//! tokens, and connecting to every server with a clear verdict.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::{Error, NetLocker};

use crate::args::ClientArgs;
use crate::fail::{Failure, AUTH, UNAVAILABLE};

/// Splits and checks `A,B,C`. Duplicates are refused: the same server twice
/// would count twice towards the quorum and break mutual exclusion.
pub fn parse_nodes(raw: &str) -> Result<Vec<String>, Failure> {
    if raw.trim().is_empty() {
        return Err(Failure::usage(
            "empty node list: pass --nodes host:port,... or set QUORUM_LOCK_NODES",
        ));
    }
    let mut nodes: Vec<String> = Vec::new();
    for entry in raw.split(',').map(str::trim) {
        check_address(entry)?;
        if nodes.iter().any(|n| n == entry) {
            return Err(Failure::usage(format!("node {entry} is listed twice")));
        }
        nodes.push(entry.to_owned());
    }
    Ok(nodes)
}

/// `host:port` with a non-empty host and a port in 1..=65535; IPv6 hosts in
/// brackets. Resolution happens when connecting.
fn check_address(entry: &str) -> Result<(), Failure> {
    let bad = |why: &str| Failure::usage(format!("bad node address '{entry}': {why}"));
    if entry.is_empty() {
        return Err(bad("empty entry in the node list"));
    }
    let (host, port) = entry
        .rsplit_once(':')
        .ok_or_else(|| bad("expected host:port"))?;
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty() || (host.contains(':') && !bracketed) || host.contains(char::is_whitespace) {
        return Err(bad("expected host:port (IPv6 as [addr]:port)"));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad("the port must be a number from 1 to 65535")),
        Ok(_) => Ok(()),
    }
}

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
                    path.display()
                ))
            })?;
            (text, format!("the {what} file {}", path.display()))
        }
        (None, Some(value)) => (value.to_owned(), format!("the {what}")),
        (None, None) => return Ok(None),
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(Failure::usage(format!("{origin} is empty")));
    }
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
        std::fs::read(path)
            .map_err(|e| Failure::usage(format!("cannot read {flag} {}: {e}", path.display())))
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
    pub fn of(servers: &[RemoteLocker]) -> Down {
        Down(
            servers
                .iter()
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
            if let Some(words) = advice_for(&err.to_string(), args) {
                if !advice.contains(&words) {
                    advice.push(words);
                }
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
        "--nodes takes lock servers ('quorum-lock server'); for Redis servers pass --redis \
         redis://HOST:PORT,... instead"
    } else if said("is this the port of a lock server?") {
        "each --nodes entry must be the --listen address of a 'quorum-lock server'"
    } else {
        return None;
    };
    Some(advice)
}

/// The kind of nodes a client command talks to: lock servers (`--nodes`)
/// or Redis servers (`--redis`), never both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    LockServers,
    Redis,
}

impl Kind {
    /// How the nodes are called in messages.
    pub fn nodes(self) -> &'static str {
        match self {
            Kind::LockServers => "lock servers",
            Kind::Redis => "Redis nodes",
        }
    }

    /// Which flags were given decides; both or neither is a usage error,
    /// and so are options of the other kind.
    pub fn of(args: &ClientArgs) -> Result<Kind, Failure> {
        let redis = &args.redis;
        match (&args.nodes, &redis.redis) {
            (Some(_), Some(_)) => Err(Failure::usage(
                "both lock servers (--nodes / QUORUM_LOCK_NODES) and Redis nodes (--redis / \
                 QUORUM_LOCK_REDIS) are given; a lock lives on one kind of node: pass only one",
            )),
            (None, None) => Err(Failure::usage(
                "no nodes: pass --nodes host:port,... for lock servers or --redis \
                 redis://host:port,... for Redis nodes (or set QUORUM_LOCK_NODES / QUORUM_LOCK_REDIS)",
            )),
            (Some(_), None) => {
                let stray = [
                    (redis.redis_prefix.is_some(), "--redis-prefix / QUORUM_LOCK_REDIS_PREFIX"),
                    (redis.redis_ca.is_some(), "--redis-ca / QUORUM_LOCK_REDIS_CA"),
                ];
                match stray.iter().find(|(given, _)| *given) {
                    Some((_, flag)) => Err(Failure::usage(format!(
                        "{flag} is set, but it only applies to Redis nodes (--redis), not to lock servers (--nodes)"
                    ))),
                    None => Ok(Kind::LockServers),
                }
            }
            (None, Some(_)) => {
                let stray = [
                    (
                        args.tls_ca.is_some(),
                        "--tls-ca / QUORUM_LOCK_TLS_CA is for lock servers; for rediss:// Redis \
                         nodes pass the CA file with --redis-ca",
                    ),
                    (
                        args.tls_cert.is_some(),
                        "--tls-cert / QUORUM_LOCK_TLS_CERT is for lock servers; Redis nodes \
                         take no client certificate from quorum-lock",
                    ),
                ];
                match stray.iter().find(|(given, _)| *given) {
                    Some((_, message)) => Err(Failure::usage(*message)),
                    None => Ok(Kind::Redis),
                }
            }
        }
    }
}

/// The connected nodes, in the order given.
pub struct Cluster {
    pub lockers: Vec<Arc<dyn NetLocker>>,
    pub kind: Kind,
}

impl Cluster {
    /// Connects to every node at once. Lock servers: a rejected token
    /// anywhere is fatal (exit 77). Nodes that cannot be reached are
    /// tolerated as long as `needed` of them answered, since the lock only
    /// needs a quorum; when fewer did, the failure names each one's reason
    /// (exit 77 if some refused TLS over a certificate, else 69). `validity` is how long Redis nodes keep an entry
    /// that is not refreshed (lock servers announce their own).
    pub async fn connect(
        args: &ClientArgs,
        admin: bool,
        needed: impl Fn(usize) -> usize,
        validity: Option<Duration>,
    ) -> Result<Cluster, Failure> {
        Self::connect_or_wait(args, admin, needed, validity, false).await
    }

    /// For a client that takes a lock with `patience`: as [`connect`](Self::connect),
    /// except that one that waits for as long as it takes does not give up
    /// when too few nodes answer (a rolling restart, an outage): it goes on
    /// with the nodes reconnecting in the background, and its wait says
    /// what it waits for. A refused token or certificate still fails at
    /// once, since waiting does not mend it.
    pub async fn connect_for(
        args: &ClientArgs,
        needed: impl Fn(usize) -> usize,
        validity: Option<Duration>,
        patience: crate::target::Patience,
    ) -> Result<Cluster, Failure> {
        let wait = matches!(patience, crate::target::Patience::Forever);
        Self::connect_or_wait(args, false, needed, validity, wait).await
    }

    async fn connect_or_wait(
        args: &ClientArgs,
        admin: bool,
        needed: impl Fn(usize) -> usize,
        validity: Option<Duration>,
        wait: bool,
    ) -> Result<Cluster, Failure> {
        let nodes = match (Kind::of(args)?, &args.nodes) {
            (Kind::LockServers, Some(nodes)) => nodes,
            _ => return crate::redis_nodes::connect(args, needed, validity, wait).await,
        };
        let nodes = parse_nodes(nodes)?;
        let config = remote_config(args, admin)?;
        let servers = connect_servers(&nodes, &config, admin).await?;
        let down = Down::of(&servers);
        let up = servers.len() - down.0.len();
        let need = needed(servers.len());
        if up < need && (!wait || down.code() == AUTH || down.mistaken()) {
            let mut message = format!(
                "only {up} of {} lock servers answered but {need} are needed for a quorum; \
                 unreachable: {}",
                servers.len(),
                down.describe()
            );
            if let Some(advice) = down.advice(args) {
                message.push_str(&format!(" ({advice})"));
            }
            return Err(Failure::new(down.code(), message));
        }
        if up < need {
            eprintln!(
                "quorum-lock: only {up} of {} lock servers answered but {need} are needed; \
                 waiting for them (unreachable: {})",
                servers.len(),
                down.describe()
            );
        } else if !down.0.is_empty() {
            eprintln!(
                "quorum-lock: warning: unreachable, continuing with a quorum of the rest: {}",
                down.describe()
            );
        }
        let lockers: Vec<Arc<dyn NetLocker>> = servers
            .into_iter()
            .map(|server| Arc::new(server) as Arc<dyn NetLocker>)
            .collect();
        Ok(Cluster {
            lockers,
            kind: Kind::LockServers,
        })
    }

    /// The servers that are down right now, for error messages.
    pub fn down(&self) -> Vec<String> {
        self.lockers
            .iter()
            .filter(|l| !l.is_online())
            .map(|l| l.endpoint())
            .collect()
    }
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

    #[test]
    fn node_lists_are_checked() {
        assert_eq!(parse_nodes(" a:1, b:2 ").map(|n| n.len()).ok(), Some(2));
        assert!(parse_nodes("[::1]:7070").is_ok());
        for bad in [
            "", " ", "a:1,,b:2", "a", "a:0", "a:x", ":80", "::1:80", "a:1,a:1", "a b:1",
        ] {
            assert!(parse_nodes(bad).is_err(), "{bad:?} accepted");
        }
    }
}
