//! Every node of `locks` and `status`, reachable or not. These are the
//! commands an operator runs when nodes are down, so unlike
//! `Cluster::connect` nothing here needs a quorum to connect: each command
//! asks every node and decides from what answered.

use std::future::Future;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::redis::RedisLocker;
use quorum_lock::{Error, NetLocker};

use crate::admin::{refused, ADMIN_CALL};
use crate::args::ClientArgs;
use crate::fail::{Failure, AUTH, UNAVAILABLE};
use crate::nodes::{connect_servers, parse_nodes, remote_config, why, Down, Kind};
use crate::redis_nodes;

/// The nodes, in the order given.
pub enum Fleet {
    Servers(Vec<RemoteLocker>),
    Redis(Vec<RedisLocker>),
}

/// Why a node gave no answer.
#[derive(Debug, Clone)]
pub enum Missing {
    /// No connection: why the latest attempt failed.
    Unreachable(String),
    /// Connected, but the call failed or did not answer in time.
    Failing(String),
}

impl Missing {
    pub fn reason(&self) -> &str {
        match self {
            Missing::Unreachable(why) | Missing::Failing(why) => why,
        }
    }

    /// As the text output shows it after the node: "unreachable: ...".
    pub fn describe(&self) -> String {
        match self {
            Missing::Unreachable(why) => format!("unreachable: {why}"),
            Missing::Failing(why) => format!("failing: {why}"),
        }
    }
}

impl Fleet {
    /// Connects to every node at once; a node that cannot be reached is
    /// kept and reported by the calls. Lock servers: `admin` picks the
    /// admin token, and a rejected token is fatal (77), as everywhere.
    /// Redis: `validity` as for `run` (the quarantine after a Redis start).
    pub async fn connect(
        args: &ClientArgs,
        admin: bool,
        validity: Option<Duration>,
    ) -> Result<Fleet, Failure> {
        match (Kind::of(args)?, &args.nodes) {
            (Kind::LockServers, Some(nodes)) => {
                let nodes = parse_nodes(nodes)?;
                let config = remote_config(args, admin)?;
                Ok(Fleet::Servers(
                    connect_servers(&nodes, &config, admin).await?,
                ))
            }
            _ => {
                // Why a node did not connect is asked again by each call:
                // a Redis locker connects on every call until one succeeds.
                let nodes = redis_nodes::connect_each(args, validity).await?;
                Ok(Fleet::Redis(nodes.into_iter().map(|(l, _)| l).collect()))
            }
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Fleet::Servers(_) => Kind::LockServers,
            Fleet::Redis(_) => Kind::Redis,
        }
    }

    /// Every node as a locker, in order.
    pub fn lockers(&self) -> Vec<&dyn NetLocker> {
        match self {
            Fleet::Servers(s) => s.iter().map(|l| l as &dyn NetLocker).collect(),
            Fleet::Redis(r) => r.iter().map(|l| l as &dyn NetLocker).collect(),
        }
    }

    /// The exit code when too few nodes answered, and which setting to
    /// check when the causes point at one: credentials refused (a Redis
    /// password, TLS over a lock server's certificate) are 77, a setting to
    /// fix; anything else is 69, an outage to wait out.
    pub fn verdict(&self, args: &ClientArgs, missing: &[&Missing]) -> (u8, Option<String>) {
        match self {
            Fleet::Servers(servers) => {
                let down = Down::of(servers);
                (down.code(), down.advice(args))
            }
            Fleet::Redis(_) => {
                if missing.iter().any(|m| redis_nodes::is_auth(m.reason())) {
                    (AUTH, Some(redis_nodes::AUTH_ADVICE.to_owned()))
                } else {
                    (UNAVAILABLE, None)
                }
            }
        }
    }
}

/// Asks `locker` with `call`, bounded by [`ADMIN_CALL`]. A lock server
/// without a connection is not asked: its call would only say "not
/// connected", and why its latest attempt failed says more. A lock server
/// that refuses the token for `what` ends the command (77): the token is
/// not the admin token, the same on every server.
pub async fn ask<T, F>(
    locker: &dyn NetLocker,
    server: Option<&RemoteLocker>,
    what: &str,
    call: F,
) -> Result<Result<T, Missing>, Failure>
where
    F: Future<Output = Result<T, Error>>,
{
    if let Some(server) = server.filter(|s| !s.is_online()) {
        let why = server
            .connect_error()
            .map_or_else(|| "not connected".to_owned(), |e| why(&e));
        return Ok(Err(Missing::Unreachable(why)));
    }
    let answer = match tokio::time::timeout(ADMIN_CALL, call).await {
        Err(_) => Err(Missing::Failing(format!("no answer within {ADMIN_CALL:?}"))),
        Ok(Ok(value)) => Ok(value),
        Ok(Err(Error::Unauthorized { endpoint, reason })) => {
            return Err(refused(&endpoint, &reason, what))
        }
        Ok(Err(err)) if !locker.is_online() => Err(Missing::Unreachable(why(&err))),
        Ok(Err(err)) => Err(Missing::Failing(why(&err))),
    };
    Ok(answer)
}
