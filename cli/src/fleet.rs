//! Every node of `locks` and `status`, reachable or not, whatever its
//! kind. These are the commands an operator runs when nodes are down, so
//! unlike `Cluster::connect` nothing here needs a quorum to connect: each
//! command asks every node and decides from what answered.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::redis::RedisLocker;
use quorum_lock::sql::{Backend, SqlLocker};
use quorum_lock::{Error, NetLocker};

use crate::args::ClientArgs;
use crate::fail::{Failure, AUTH, UNAVAILABLE};
use crate::node_urls::Entry;
use crate::plan::{Kind, Plan};
use crate::server_nodes::{connect_servers, remote_config, why, Down};
use crate::{redis_nodes, sql_nodes};

/// One node of any kind.
pub enum Member {
    Server(RemoteLocker),
    Redis(RedisLocker),
    Sql(SqlLocker),
}

impl Member {
    pub fn locker(&self) -> &dyn NetLocker {
        match self {
            Member::Server(l) => l,
            Member::Redis(l) => l,
            Member::Sql(l) => l,
        }
    }

    pub fn into_locker(self) -> Arc<dyn NetLocker> {
        match self {
            Member::Server(l) => Arc::new(l),
            Member::Redis(l) => Arc::new(l),
            Member::Sql(l) => Arc::new(l),
        }
    }

    /// The lock server, if this is one.
    pub fn server(&self) -> Option<&RemoteLocker> {
        match self {
            Member::Server(server) => Some(server),
            _ => None,
        }
    }

    /// The node's kind in the JSON documents (`nodes[].kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Member::Server(_) => "lock-server",
            Member::Redis(_) => "redis",
            Member::Sql(l) => match l.backend() {
                Backend::Postgres => "postgres",
                Backend::MySql => "mysql",
            },
        }
    }
}

/// Connects to every node of `plan` at once, after checking every entry
/// (nothing is sent anywhere before all are). Each comes back in the
/// order given, with why it did not answer (`None` when it did): a lock
/// server reconnects in the background, a Redis node or database on each
/// later call. Lock servers: `admin` picks the admin token, and a
/// rejected token is fatal (77), as everywhere. `validity` is how long
/// Redis nodes and databases keep an entry that is not refreshed, and
/// their quarantine (lock servers announce their own).
pub async fn connect_members(
    args: &ClientArgs,
    plan: &Plan,
    admin: bool,
    validity: Option<Duration>,
) -> Result<Vec<(Member, Option<String>)>, Failure> {
    let total = plan.entries.len();
    let label = |i: usize| format!("node {} of {total}", i + 1);
    let pick = |wanted: fn(&Entry) -> bool| -> Vec<(String, String)> {
        plan.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| wanted(e))
            .map(|(i, e)| (label(i), e.given().to_owned()))
            .collect()
    };
    let redis_urls = pick(|e| matches!(e, Entry::Redis(_)));
    let sql_urls = pick(|e| matches!(e, Entry::Sql { .. }));
    let redis = match redis_urls.is_empty() {
        true => None,
        false => Some(redis_nodes::prepare(args, &redis_urls, validity)?),
    };
    let sql = match sql_urls.is_empty() {
        true => None,
        false => Some(sql_nodes::prepare(args, &sql_urls, validity)?),
    };
    let addrs = plan.servers();
    // A token is only needed, and only asked for, when lock servers are.
    let config = match addrs.is_empty() {
        true => None,
        false => Some(remote_config(args, admin)?),
    };
    let (servers, redis, sql) = tokio::join!(
        async {
            match &config {
                Some(config) => connect_servers(&addrs, config, admin).await,
                None => Ok(Vec::new()),
            }
        },
        async {
            match redis {
                Some(prepared) => prepared.connect(args).await,
                None => Vec::new(),
            }
        },
        async {
            match sql {
                Some(prepared) => prepared.connect(args).await,
                None => Vec::new(),
            }
        },
    );
    let (mut servers, mut redis, mut sql) =
        (servers?.into_iter(), redis.into_iter(), sql.into_iter());
    let mut members = Vec::with_capacity(total);
    for entry in &plan.entries {
        // Each list holds exactly the entries of its kind, in order.
        let member = match entry {
            Entry::Server(_) => servers.next().map(|server| {
                let down = (!server.is_online()).then(|| {
                    server
                        .connect_error()
                        .map_or_else(|| "not connected".to_owned(), |e| why(&e))
                });
                (Member::Server(server), down)
            }),
            Entry::Redis(_) => redis.next().map(|(l, down)| (Member::Redis(l), down)),
            Entry::Sql { .. } => sql.next().map(|(l, down)| (Member::Sql(l), down)),
        };
        members.extend(member);
    }
    Ok(members)
}

/// The nodes of `locks` and `status`, in the order given.
pub struct Fleet {
    pub kind: Kind,
    pub members: Vec<Member>,
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
    /// Redis nodes and databases: `validity` as for `run` (the quarantine
    /// after a start, or after a database's lock table was emptied).
    pub async fn connect(
        args: &ClientArgs,
        admin: bool,
        validity: Option<Duration>,
    ) -> Result<Fleet, Failure> {
        let plan = Plan::of(args)?;
        // Why a node did not connect is asked again by each call: a Redis
        // or database locker connects on every call until one succeeds.
        let members = connect_members(args, &plan, admin, validity).await?;
        Ok(Fleet {
            kind: plan.kind,
            members: members.into_iter().map(|(member, _)| member).collect(),
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The exit code when too few nodes answered, and which setting to
    /// check when the causes point at one: credentials refused (a Redis
    /// password, a database's user, password, privileges or TLS, TLS over
    /// a lock server's certificate) are 77, a setting to fix; anything
    /// else is 69, an outage to wait out.
    pub fn verdict(&self, args: &ClientArgs, missing: &[&Missing]) -> (u8, Option<String>) {
        let servers: Vec<&RemoteLocker> = self.members.iter().filter_map(Member::server).collect();
        let has = |kind: fn(&Member) -> bool| self.members.iter().any(kind);
        let refused = |test: fn(&str) -> bool| missing.iter().any(|m| test(m.reason()));
        let down = Down::of(servers.iter().copied());
        let mut code = UNAVAILABLE;
        let mut advice: Vec<String> = Vec::new();
        if !servers.is_empty() {
            code = down.code();
            advice.extend(down.advice(args));
        }
        if has(|m| matches!(m, Member::Redis(_))) && refused(redis_nodes::is_auth) {
            code = AUTH;
            advice.push(redis_nodes::AUTH_ADVICE.to_owned());
        }
        if has(|m| matches!(m, Member::Sql(_))) && refused(sql_nodes::is_refusal) {
            code = AUTH;
            advice.push(sql_nodes::AUTH_ADVICE.to_owned());
        }
        (code, (!advice.is_empty()).then(|| advice.join("; ")))
    }
}

/// How long each node may take to list or to force a lock open.
pub const ADMIN_CALL: Duration = Duration::from_secs(5);

/// How long an admin command waits for a lock server that took its
/// connection and then closed it before the handshake was done (a server
/// at its connection limit makes room that way under a flood) to take the
/// connection its locker opens again in the background.
const CLOSED_IN_HANDSHAKE_GRACE: Duration = Duration::from_secs(2);

/// Waits, within [`CLOSED_IN_HANDSHAKE_GRACE`], for `server` to come
/// online when the server itself ended its latest connection in the
/// handshake (closed it, reset it, or turned it away as busy); a server
/// that did not answer (refused, no route, a timeout) is not waited for:
/// the connection's own timeout already has.
async fn reconnected(server: &RemoteLocker) {
    let reached = server.connect_error().is_some_and(|err| match &err {
        Error::LockerUnavailable { reason, .. } => {
            reason.starts_with("the server closed the connection during the handshake")
                || reason.starts_with("handshake failed")
                || reason.starts_with("the server turned the connection away")
        }
        _ => false,
    });
    if !reached {
        return;
    }
    let wait = async {
        while !server.is_online() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(CLOSED_IN_HANDSHAKE_GRACE, wait).await;
}

/// A server that answered, but refused `what` to our token: it is not the
/// admin token.
pub fn refused(endpoint: &str, reason: &str, what: &str) -> Failure {
    Failure::new(
        AUTH,
        format!(
            "lock server {endpoint} refused to {what}: {reason}; \
             pass --admin-token-file FILE or set QUORUM_LOCK_ADMIN_TOKEN"
        ),
    )
}

/// Asks `locker` with `call`, bounded by [`ADMIN_CALL`]. A lock server
/// without a connection is not asked: its call would only say "not
/// connected", and why its latest attempt failed says more. One that
/// closed the connection in its handshake is given a moment to take the
/// next (see [`reconnected`]). A lock server
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
        reconnected(server).await;
    }
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
