//! What the client subcommands share: which nodes were given (lock
//! servers, Redis nodes, databases, or a mix), loading the tokens, and
//! connecting to every node with a clear verdict.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use quorum_lock::net::{ClientTls, RemoteConfig, RemoteLocker};
use quorum_lock::{Error, NetLocker};

use crate::args::ClientArgs;
use crate::fail::{Failure, AUTH, UNAVAILABLE};
use crate::fleet::Member;
use crate::node_urls::{classify, Entry};
use crate::redis_nodes::split_urls;
use crate::{redis_nodes, sql_nodes};

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

/// The kind of nodes a client command talks to: lock servers, Redis
/// nodes, databases, or a mix of them (URLs beside `host:port` in
/// `--nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    LockServers,
    Redis,
    Sql,
    Mixed,
}

impl Kind {
    /// How the nodes are called in messages.
    pub fn nodes(self) -> &'static str {
        match self {
            Kind::LockServers => "lock servers",
            Kind::Redis => "Redis nodes",
            Kind::Sql => "databases",
            Kind::Mixed => "nodes",
        }
    }

    /// The kind of a list: one kind alone, or mixed.
    fn of_entries(entries: &[Entry]) -> Kind {
        let kind = |e: &Entry| match e {
            Entry::Server(_) => Kind::LockServers,
            Entry::Redis(_) => Kind::Redis,
            Entry::Sql { .. } => Kind::Sql,
        };
        let mut kinds = entries.iter().map(kind);
        let first = kinds.next().unwrap_or(Kind::LockServers);
        if kinds.all(|k| k == first) {
            first
        } else {
            Kind::Mixed
        }
    }
}

/// The nodes a client command was given, each with its kind, in order:
/// `--nodes` (lock servers, and URLs of Redis nodes and databases) or
/// `--redis` (Redis nodes only, as before `--nodes` took URLs).
#[derive(Debug)]
pub struct Plan {
    pub kind: Kind,
    pub entries: Vec<Entry>,
}

impl Plan {
    /// Which flags were given, and the schemes in `--nodes`, decide; both
    /// flags or neither is a usage error, and so are options for a kind of
    /// node that is not in the list (they would be ignored silently).
    pub fn of(args: &ClientArgs) -> Result<Plan, Failure> {
        let entries =
            match (&args.nodes, &args.redis.redis) {
                (Some(_), Some(_)) => return Err(Failure::usage(
                    "both lock servers (--nodes / QUORUM_LOCK_NODES) and Redis nodes (--redis / \
                     QUORUM_LOCK_REDIS) are given: pass one list; --nodes also takes Redis nodes, \
                     as redis://host:port entries beside the others",
                )),
                (None, None) => return Err(Failure::usage(
                    "no nodes: pass --nodes host:port,... for lock servers (or URLs: redis://, \
                     postgres://, mysql://) or --redis redis://host:port,... for Redis nodes (or \
                     set QUORUM_LOCK_NODES / QUORUM_LOCK_REDIS)",
                )),
                (Some(nodes), None) => classify(nodes)?,
                (None, Some(urls)) => split_urls(urls)?.into_iter().map(Entry::Redis).collect(),
            };
        let plan = Plan {
            kind: Kind::of_entries(&entries),
            entries,
        };
        plan.check_options(args)?;
        Ok(plan)
    }

    /// Refuses the options of a kind of node that is not in the list.
    fn check_options(&self, args: &ClientArgs) -> Result<(), Failure> {
        let redis = &args.redis;
        let (servers, redises, sql) = (self.has_servers(), self.has_redis(), self.has_sql());
        if !redises {
            let stray = [
                (
                    redis.redis_prefix.is_some(),
                    "--redis-prefix / QUORUM_LOCK_REDIS_PREFIX",
                ),
                (
                    redis.redis_ca.is_some(),
                    "--redis-ca / QUORUM_LOCK_REDIS_CA",
                ),
            ];
            if let Some((_, flag)) = stray.iter().find(|(given, _)| *given) {
                return Err(Failure::usage(format!(
                    "{flag} is set, but it only applies to Redis nodes (--redis, or redis:// \
                     entries in --nodes), and none is listed"
                )));
            }
        }
        if !sql && args.sql.sql_prefix.is_some() {
            return Err(Failure::usage(
                "--sql-prefix / QUORUM_LOCK_SQL_PREFIX is set, but it only applies to databases \
                 (postgres:// or mysql:// entries in --nodes), and none is listed",
            ));
        }
        if !servers {
            // Where the CA of the other kinds goes instead.
            let elsewhere = match (redises, sql) {
                (true, false) => "for rediss:// Redis nodes pass the CA file with --redis-ca",
                (false, _) => {
                    "for databases put it in the URL (postgres://...?sslmode=verify-full&\
                     sslrootcert=FILE, mysql://...?ssl-mode=VERIFY_IDENTITY&ssl-ca=FILE)"
                }
                (true, true) => {
                    "for rediss:// Redis nodes pass the CA file with --redis-ca; for databases \
                     put it in the URL (sslrootcert=FILE, ssl-ca=FILE)"
                }
            };
            if args.tls_ca.is_some() {
                return Err(Failure::usage(format!(
                    "--tls-ca / QUORUM_LOCK_TLS_CA is for lock servers (host:port entries of \
                     --nodes), and none is listed; {elsewhere}"
                )));
            }
            if args.tls_cert.is_some() {
                let instead = match (redises, sql) {
                    (true, false) => "Redis nodes take no client certificate from quorum-lock",
                    _ => {
                        "Redis nodes take no client certificate from quorum-lock, and databases \
                         take theirs in the URL (sslcert=FILE&sslkey=FILE, \
                         ssl-cert=FILE&ssl-key=FILE)"
                    }
                };
                return Err(Failure::usage(format!(
                    "--tls-cert / QUORUM_LOCK_TLS_CERT is for lock servers; {instead}"
                )));
            }
        }
        Ok(())
    }

    pub fn has_servers(&self) -> bool {
        self.entries.iter().any(|e| matches!(e, Entry::Server(_)))
    }

    pub fn has_redis(&self) -> bool {
        self.entries.iter().any(|e| matches!(e, Entry::Redis(_)))
    }

    pub fn has_sql(&self) -> bool {
        self.entries.iter().any(|e| matches!(e, Entry::Sql { .. }))
    }

    /// The lock servers' addresses, in order.
    pub fn servers(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| match e {
                Entry::Server(addr) => Some(addr.clone()),
                _ => None,
            })
            .collect()
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
        let plan = Plan::of(args)?;
        match plan.kind {
            Kind::LockServers => {}
            Kind::Redis => {
                let urls: Vec<String> = plan.entries.iter().map(|e| e.given().to_owned()).collect();
                return crate::redis_nodes::connect(args, &urls, needed, validity, wait).await;
            }
            Kind::Sql | Kind::Mixed => {
                return Self::connect_mixed(args, &plan, admin, needed, validity, wait).await
            }
        }
        let nodes = plan.servers();
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
            crate::words::say(&format!(
                "only {up} of {} lock servers answered but {need} are needed; \
                 waiting for them (unreachable: {})",
                servers.len(),
                down.describe()
            ));
        } else if !down.0.is_empty() {
            crate::words::warn(&format!(
                "unreachable, continuing with a quorum of the rest: {}",
                down.describe()
            ));
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

    /// [`connect_or_wait`](Self::connect_or_wait) for databases, alone or
    /// beside lock servers and Redis nodes: the same rules, each kind's
    /// refusals (a lock server's TLS, a Redis password, a database's
    /// credentials) failing at once with 77.
    async fn connect_mixed(
        args: &ClientArgs,
        plan: &Plan,
        admin: bool,
        needed: impl Fn(usize) -> usize,
        validity: Option<Duration>,
        wait: bool,
    ) -> Result<Cluster, Failure> {
        let members = crate::fleet::connect_members(args, plan, admin, validity).await?;
        let servers = Down::of(members.iter().filter_map(|(m, _)| m.server()));
        let down: Vec<(String, String)> = members
            .iter()
            .filter_map(|(m, why)| Some((m.locker().endpoint(), why.clone()?)))
            .collect();
        let listed: Vec<String> = down
            .iter()
            .map(|(node, why)| format!("{node}: {why}"))
            .collect();
        let redis_refused = members.iter().any(|(m, why)| {
            matches!(m, Member::Redis(_)) && why.as_deref().is_some_and(redis_nodes::is_auth)
        });
        let sql_refused = members.iter().any(|(m, why)| {
            matches!(m, Member::Sql(_)) && why.as_deref().is_some_and(sql_nodes::is_refusal)
        });
        let refused = servers.code() == AUTH || redis_refused || sql_refused;
        let mistaken = servers.mistaken()
            || members.iter().any(|(m, why)| {
                matches!(m, Member::Sql(_)) && why.as_deref().is_some_and(sql_nodes::is_mistaken)
            });
        let (total, up) = (members.len(), members.len() - down.len());
        let need = needed(total);
        let nodes = plan.kind.nodes();
        if up < need && (!wait || refused || mistaken) {
            let mut advice: Vec<String> = servers.advice(args).into_iter().collect();
            if redis_refused {
                advice.push(redis_nodes::AUTH_ADVICE.to_owned());
            }
            if sql_refused {
                advice.push(sql_nodes::AUTH_ADVICE.to_owned());
            }
            let mut message = format!(
                "only {up} of {total} {nodes} answered but {need} are needed for a quorum; \
                 not answering: {}",
                listed.join("; ")
            );
            if !advice.is_empty() {
                message.push_str(&format!(" ({})", advice.join("; ")));
            }
            let code = if refused { AUTH } else { UNAVAILABLE };
            return Err(Failure::new(code, message));
        }
        if up < need {
            crate::words::say(&format!(
                "only {up} of {total} {nodes} answered but {need} are needed; \
                 waiting for them (not answering: {})",
                listed.join("; ")
            ));
        } else if !down.is_empty() {
            crate::words::warn(&format!(
                "not answering, continuing with a quorum of the rest: {}",
                listed.join("; ")
            ));
        }
        Ok(Cluster {
            lockers: members.into_iter().map(|(m, _)| m.into_locker()).collect(),
            kind: plan.kind,
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
}
