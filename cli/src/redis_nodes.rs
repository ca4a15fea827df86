//! Redis nodes: standalone Redis servers as the nodes of the client
//! commands, given with `--redis`, or as `redis://` entries of `--nodes`
//! beside other kinds.
//!
//! A Redis URL may carry a password, so nothing here ever shows a URL as
//! given: messages name a node by its `host:port` (what
//! `NetLocker::endpoint` reports), or by [`redact`](crate::node_urls::redact)ed URL when it cannot be
//! parsed.

pub use with_redis::{connect, is_auth, prepare, AUTH_ADVICE};

mod with_redis {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::future::join_all;
    use quorum_lock::redis::{RedisConfig, RedisLocker};
    use quorum_lock::NetLocker;

    use crate::args::ClientArgs;
    use crate::fail::{Failure, AUTH, UNAVAILABLE};
    use crate::node_urls::redact;

    /// What to check when Redis refused the credentials.
    pub const AUTH_ADVICE: &str = "check the user name and password in the --redis URLs, which \
         are not shown here, and that the user may run INFO, TIME, EVALSHA and SCAN";

    /// The Redis nodes of `args`, each connected and checked at once when
    /// it answers. A node that does not answer (down, refusing, wrong
    /// password) is kept as a locker that connects on each later call and
    /// counts as not granting meanwhile, as an unreachable lock server
    /// does; at least `needed` must answer now. `validity` is how long the
    /// nodes keep an entry that is not refreshed (the library's default,
    /// 60 s, without one), and the quarantine after a Redis restart is the
    /// same (see `RedisConfig::quarantine`). With `wait`, fewer than
    /// `needed` is enough for a client that waits for the rest, unless a
    /// node refused the credentials.
    pub async fn connect(
        args: &ClientArgs,
        urls: &[String],
        needed: impl Fn(usize) -> usize,
        validity: Option<Duration>,
        wait: bool,
    ) -> Result<Vec<Arc<dyn NetLocker>>, Failure> {
        let labelled: Vec<(String, String)> = urls
            .iter()
            .enumerate()
            .map(|(i, url)| {
                (
                    format!("Redis node {} of {}", i + 1, urls.len()),
                    url.clone(),
                )
            })
            .collect();
        let nodes = prepare(args, &labelled, validity)?.connect(args).await;
        let down: Vec<(String, String)> = nodes
            .iter()
            .filter_map(|(locker, why)| Some((locker.endpoint(), why.clone()?)))
            .collect();
        let lockers: Vec<Arc<dyn NetLocker>> = nodes
            .into_iter()
            .map(|(locker, _)| Arc::new(locker) as Arc<dyn NetLocker>)
            .collect();
        let up = lockers.len() - down.len();
        let need = needed(lockers.len());
        let listed: Vec<String> = down
            .iter()
            .map(|(node, why)| format!("{node}: {why}"))
            .collect();
        let refused_login = down.iter().any(|(_, why)| is_auth(why));
        // A client that may wait goes on with too few nodes (they connect
        // again on each call), unless waiting cannot mend it.
        if up < need && (!wait || refused_login) {
            let mut message = format!(
                "only {up} of {} Redis nodes answered but {need} are needed for a quorum; {}",
                lockers.len(),
                listed.join("; ")
            );
            if refused_login {
                message.push_str(&format!(" ({AUTH_ADVICE})"));
            }
            let code = if refused_login { AUTH } else { UNAVAILABLE };
            return Err(Failure::new(code, message));
        }
        if up < need {
            crate::words::say(&format!(
                "only {up} of {} Redis nodes answered but {need} are needed; \
                 waiting for them ({})",
                lockers.len(),
                listed.join("; ")
            ));
        } else if !down.is_empty() {
            crate::words::warn(&format!(
                "not answering, continuing with a quorum of the rest: {}",
                listed.join("; ")
            ));
        }
        Ok(lockers)
    }

    /// The Redis nodes of `urls` (each with how messages name it), checked
    /// and ready to connect: nothing is sent anywhere yet.
    pub struct Prepared {
        config: RedisConfig,
        urls: Vec<String>,
        lockers: Vec<RedisLocker>,
    }

    /// Checks every URL of `urls` (label, URL) and the settings they share
    /// before anything is sent anywhere. `validity` as for [`connect`].
    pub fn prepare(
        args: &ClientArgs,
        urls: &[(String, String)],
        validity: Option<Duration>,
    ) -> Result<Prepared, Failure> {
        let plain: Vec<String> = urls.iter().map(|(_, url)| url.clone()).collect();
        let config = config(args, &plain, validity)?;
        let mut lockers: Vec<RedisLocker> = Vec::with_capacity(urls.len());
        for (label, url) in urls {
            let locker = RedisLocker::new(url, config.clone())
                .map_err(|e| Failure::usage(format!("{label} ({}): {e}", redact(url))))?;
            let endpoint = locker.endpoint();
            // Host names are case-blind: `LOCALHOST:6379` is `localhost:6379`.
            if lockers
                .iter()
                .any(|l| l.endpoint().eq_ignore_ascii_case(&endpoint))
            {
                return Err(Failure::usage(format!(
                    "Redis node {endpoint} is listed twice; each node counts once towards the \
                     quorum, even with another database number"
                )));
            }
            lockers.push(locker);
        }
        Ok(Prepared {
            config,
            urls: plain,
            lockers,
        })
    }

    impl Prepared {
        /// Every node, in the order given, connected at once when it
        /// answers, each with why it did not (`None` when it did),
        /// whatever how many answered. A node that did not answer
        /// connects again on each later call.
        pub async fn connect(self, args: &ClientArgs) -> Vec<(RedisLocker, Option<String>)> {
            // Each connection makes a handful of calls, each bounded by the
            // connect timeout; this bounds the whole.
            let limit = args.connect_timeout.saturating_mul(5);
            let config = &self.config;
            let connects = self
                .urls
                .iter()
                .map(|url| tokio::time::timeout(limit, RedisLocker::connect(url, config.clone())));
            let mut nodes = Vec::with_capacity(self.lockers.len());
            for (unconnected, result) in self.lockers.into_iter().zip(join_all(connects).await) {
                nodes.push(match result {
                    Ok(Ok(connected)) => (connected, None),
                    Ok(Err(err)) => (unconnected, Some(reason(&err))),
                    Err(_) => (unconnected, Some("Redis did not answer in time".into())),
                });
            }
            nodes
        }
    }

    /// The settings every node shares.
    fn config(
        args: &ClientArgs,
        urls: &[String],
        validity: Option<Duration>,
    ) -> Result<RedisConfig, Failure> {
        let mut config = RedisConfig::default();
        if let Some(prefix) = &args.redis.redis_prefix {
            if prefix.is_empty() {
                return Err(Failure::usage(
                    "--redis-prefix is empty; lock keys would mix with the database's other keys: \
                     pass a prefix such as myapp-locks:",
                ));
            }
            config.prefix = prefix.clone();
        }
        if let Some(validity) = validity {
            config.validity = validity;
        }
        // A restarted Redis refuses new grants until every lock it may have
        // forgotten was refreshed back or expired: one validity.
        config.quarantine = config.validity;
        config.call_timeout = args.connect_timeout;
        if let Some(ca) = &args.redis.redis_ca {
            if !urls.iter().any(|u| scheme(u) == "rediss") {
                return Err(Failure::usage(
                    "--redis-ca is given but no Redis URL uses TLS: write rediss:// for the nodes \
                     that serve TLS",
                ));
            }
            let pem = std::fs::read(ca).map_err(|e| {
                Failure::usage(format!(
                    "cannot read the --redis-ca file {}: {e}",
                    crate::node_urls::path_shown(ca)
                ))
            })?;
            config.tls_root_cert = Some(pem);
        }
        Ok(config)
    }

    /// Why a node did not answer. Errors of the library name the node by
    /// `host:port` only; this keeps just the reason.
    fn reason(err: &quorum_lock::Error) -> String {
        match err {
            quorum_lock::Error::LockerUnavailable { reason, .. } => reason.clone(),
            other => other.to_string(),
        }
    }

    /// Whether `reason` says the server refused the credentials: a wrong
    /// password or user, or none given to a server that requires one (its
    /// NOAUTH refuses the first command, INFO).
    pub fn is_auth(reason: &str) -> bool {
        [
            "AuthenticationFailed",
            "NOAUTH",
            "WRONGPASS",
            "NoPermission",
        ]
        .iter()
        .any(|word| reason.contains(word))
    }

    fn scheme(url: &str) -> String {
        url.split_once("://")
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default()
    }
}
