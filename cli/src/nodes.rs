//! Connecting a client command's nodes into a `Cluster`: lock servers,
//! Redis nodes, databases, or a mix, each kind through its own module,
//! with one verdict for all. Too few answering is fatal, unless the
//! command waits for as long as it takes and waiting can mend it.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::NetLocker;

use crate::args::ClientArgs;
use crate::fail::{Failure, AUTH, UNAVAILABLE};
use crate::fleet::Member;
use crate::plan::{Kind, Plan};
use crate::server_nodes::{connect_servers, remote_config, Down};
use crate::waiting::Patience;
use crate::{redis_nodes, sql_nodes};

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
        patience: Patience,
    ) -> Result<Cluster, Failure> {
        let wait = matches!(patience, Patience::Forever);
        Self::connect_or_wait(args, false, needed, validity, wait).await
    }

    async fn connect_or_wait(
        args: &ClientArgs,
        admin: bool,
        needed: impl Fn(usize) -> usize,
        validity: Option<Duration>,
        wait: bool,
    ) -> Result<Cluster, Failure> {
        // One group of several is named in every failure.
        Self::connect_group(args, admin, needed, validity, wait)
            .await
            .map_err(|failure| crate::plan::in_group(args.group.as_deref(), failure))
    }

    async fn connect_group(
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
                let lockers = redis_nodes::connect(args, &urls, needed, validity, wait).await?;
                return Ok(Cluster {
                    lockers,
                    kind: Kind::Redis,
                });
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
