//! A Redis node or a database server in two groups of `--nodes`, however
//! spelled: refused as a lock server in two groups is (node_groups.rs
//! compares lock servers by address, and URLs only as given). Two URLs
//! are one node as the within-group check of redis_nodes.rs and
//! sql_nodes.rs reads them: by the endpoint the Redis client reads from
//! the URL (another database number is the same node), by the server the
//! database driver reads (another database or user is the same server).

use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::NetLocker;

use crate::fail::Failure;
use crate::node_groups::NodeGroup;
use crate::node_urls::Entry;

/// A URL's node, as the within-group checks compare them.
enum Node {
    Redis(String),
    Sql(SqlLocker),
}

impl Node {
    /// `None` for a lock server, or a URL its locker refuses (the group's
    /// own check says why, before anything connects).
    fn of(entry: &Entry) -> Option<Node> {
        match entry {
            Entry::Server(_) => None,
            Entry::Redis(url) => RedisLocker::new(url, RedisConfig::default())
                .ok()
                .map(|l| Node::Redis(l.endpoint().to_ascii_lowercase())),
            Entry::Sql { url, .. } => SqlLocker::new(url, SqlConfig::default())
                .ok()
                .map(Node::Sql),
        }
    }

    fn is(&self, other: &Node) -> bool {
        match (self, other) {
            (Node::Redis(a), Node::Redis(b)) => a == b,
            (Node::Sql(a), Node::Sql(b)) => a.same_server(b),
            _ => false,
        }
    }

    /// How a message names it: the endpoint, without credentials.
    fn shown(&self) -> String {
        let endpoint = match self {
            Node::Redis(endpoint) => endpoint.clone(),
            Node::Sql(locker) => locker.endpoint(),
        };
        crate::words::escaped(&endpoint).into_owned()
    }
}

/// Refuses a Redis node or database server listed in two of `groups`.
/// Nothing connects: the lockers are built only to read their URLs.
pub fn refuse_shared_urls(groups: &[NodeGroup]) -> Result<(), Failure> {
    let mut seen: Vec<(Node, &str)> = Vec::new();
    for group in groups {
        let mut own: Vec<Node> = Vec::new();
        for node in group.entries.iter().filter_map(Node::of) {
            if let Some((_, first)) = seen.iter().find(|(n, _)| n.is(&node)) {
                return Err(Failure::usage(format!(
                    "node {} is in both groups '{first}' and '{}' of --nodes: each node serves \
                     one group, or it would count towards two clusters (a Redis node under \
                     another database number, or a database server under another database or \
                     user, is one node)",
                    node.shown(),
                    group.id
                )));
            }
            own.push(node);
        }
        seen.extend(own.into_iter().map(|n| (n, group.id.as_str())));
    }
    Ok(())
}
