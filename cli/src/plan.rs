//! Which nodes a client command was given (`Plan`), and what kind they
//! are (`Kind`): lock servers, Redis nodes, databases, or a mix. A plan is
//! checked whole before anything connects, so a bad list or a flag that
//! does not fit its nodes fails without a connection.

use crate::args::ClientArgs;
use crate::fail::Failure;
use crate::node_groups::{split_groups, NodeGroup};
use crate::node_urls::{split_urls, Entry};

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
                // A group narrowed from several: its entries as checked.
                (Some(_), None) if args.group_entries.is_some() => {
                    args.group_entries.clone().unwrap_or_default()
                }
                (Some(nodes), None) => match split_groups(nodes)?.as_mut_slice() {
                    [one] => std::mem::take(&mut one.entries),
                    several => {
                        return Err(Failure::usage(format!(
                            "--nodes lists {} groups of nodes where one is needed here",
                            several.len()
                        )))
                    }
                },
                (None, Some(urls)) => split_urls(urls)?.into_iter().map(Entry::Redis).collect(),
            };
        let plan = Plan {
            kind: Kind::of_entries(&entries),
            entries,
        };
        // A group narrowed from several had its options checked against
        // every group's nodes (`groups`): one group may lack the Redis
        // nodes that another has.
        if args.group.is_none() {
            plan.check_options(args)?;
        }
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

/// One group of a client command's nodes: its id, and the client's flags
/// with `--nodes` narrowed to the group's own nodes (see node_groups.rs).
#[derive(Debug, Clone)]
pub struct Group {
    pub id: String,
    pub client: ClientArgs,
}

impl Group {
    /// `failure` naming the group, when there are several.
    pub fn named(&self, failure: Failure) -> Failure {
        in_group(self.client.group.as_deref(), failure)
    }
}

/// `failure` with the group it happened in first, when there is one.
pub fn in_group(group: Option<&str>, mut failure: Failure) -> Failure {
    if let Some(id) = group {
        failure.message = format!("group '{id}': {}", failure.message);
    }
    failure
}

/// Every group of the command's nodes, in the order given, each checked
/// as [`Plan::of`] checks one list, the options against all groups'
/// nodes. One group (no `;` in `--nodes`, or `--redis`) comes back with
/// the flags untouched, so that it behaves as before groups.
pub fn groups(args: &ClientArgs) -> Result<Vec<Group>, Failure> {
    let nodes = match (&args.nodes, &args.redis.redis) {
        (Some(nodes), None) => nodes,
        _ => return one_group(args, "1"),
    };
    let groups: Vec<NodeGroup> = split_groups(nodes)?;
    if let [one] = groups.as_slice() {
        return one_group(args, &one.id);
    }
    let entries: Vec<Entry> = groups.iter().flat_map(|g| g.entries.clone()).collect();
    let all = Plan {
        kind: Kind::of_entries(&entries),
        entries,
    };
    all.check_options(args)?;
    crate::shared_nodes::refuse_shared_urls(&groups)?;
    Ok(groups
        .into_iter()
        .map(|g| Group {
            client: ClientArgs {
                nodes: Some(g.nodes),
                group: Some(g.id.clone()),
                group_entries: Some(g.entries),
                ..args.clone()
            },
            id: g.id,
        })
        .collect())
}

fn one_group(args: &ClientArgs, id: &str) -> Result<Vec<Group>, Failure> {
    Plan::of(args)?;
    Ok(vec![Group {
        id: id.to_owned(),
        client: args.clone(),
    }])
}

/// The group `name` lives in (a lock's, a semaphore's or an election's
/// name), placed as the library's `Groups` places it, so that this
/// command and a program using `Groups` over the same ids meet in one
/// group.
pub fn group_of(args: &ClientArgs, name: &str) -> Result<Group, Failure> {
    let mut groups = groups(args)?;
    if groups.len() == 1 {
        return Ok(groups.remove(0));
    }
    let id = quorum_lock::Groups::place(groups.iter().map(|g| g.id.as_str()), name)
        .map(str::to_owned)
        .unwrap_or_default();
    tracing::debug!(group = %id, "the name lives in this group of --nodes");
    let at = groups.iter().position(|g| g.id == id).unwrap_or(0);
    Ok(groups.swap_remove(at))
}
