//! `RedisLocker`: one Redis server as a [`NetLocker`] (feature `redis`),
//! with the rules of [`LocalLocker`](crate::LocalLocker), each call one
//! atomic Lua script.
//!
//! Every resource is a hash under the key prefix holding the lock's mode
//! and, per holder, its deadline, owner, source and grant time. Deadlines
//! are on the Redis server's clock (`TIME`), and every script first drops
//! the holders whose deadline passed, so one reader that stops refreshing
//! expires on its own even while others refresh. The key itself expires
//! with its last holder (`PEXPIRE`), so nothing outlives its holders.
//!
//! Not yet here (issue #12): detecting a Redis restart without persistence
//! and quarantining the node, waiting in line with pub/sub pushes, fencing
//! tokens, TLS and the command line. Until then a `Dsync` over Redis nodes
//! polls, and a node that restarts empty may grant a held lock at once:
//! run Redis with persistence, and with `maxmemory-policy noeviction`, since
//! an evicted lock key is a silently lost lock.

use std::time::Duration;

use tokio::time::Instant;

use ::redis::aio::ConnectionManager;
use ::redis::Script;
use async_trait::async_trait;

use crate::{Error, LockArgs, LockInfo, LockMode, NetLocker};

mod scripts;

use scripts::{FORCE, LIST, LOCK, PRELUDE, REFRESH, UNLOCK};

/// The longest validity handed to Redis: far beyond any lease, and far
/// inside what `PEXPIRE` accepts.
const LONGEST_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How a [`RedisLocker`] connects and keeps entries.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// Prepended to every resource name to form its key.
    pub prefix: String,
    /// How long an entry that is not refreshed is kept.
    pub validity: Duration,
    /// How long one call may take before it counts as failed.
    pub call_timeout: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            prefix: "quorum-lock:".into(),
            validity: Duration::from_secs(60),
            call_timeout: Duration::from_secs(5),
        }
    }
}

struct Scripts {
    lock: Script,
    unlock: Script,
    refresh: Script,
    force: Script,
    list: Script,
}

impl Scripts {
    fn new() -> Scripts {
        let with_prelude = |body: &str| Script::new(&format!("{PRELUDE}\n{body}"));
        Scripts {
            lock: with_prelude(LOCK),
            unlock: with_prelude(UNLOCK),
            refresh: with_prelude(REFRESH),
            force: with_prelude(FORCE),
            list: with_prelude(LIST),
        }
    }
}

/// One Redis server as a locker.
///
/// # Cancel safety
///
/// Every `NetLocker` call is cancel safe in the trait's sense: it is one
/// script that Redis runs atomically, so a dropped call was applied
/// entirely or not at all, and the caller cannot tell which. The
/// coordinator counts such a call as unknown and unlocks its uid, and an
/// entry nobody unlocks expires with its deadline.
///
/// ```no_run
/// use std::sync::Arc;
/// use quorum_lock::redis::{RedisConfig, RedisLocker};
/// use quorum_lock::{Dsync, NetLocker};
///
/// # async fn run() -> Result<(), quorum_lock::Error> {
/// let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
/// for url in ["redis://127.0.0.1:6379", "redis://127.0.0.1:6380", "redis://127.0.0.1:6381"] {
///     lockers.push(Arc::new(RedisLocker::connect(url, RedisConfig::default()).await?));
/// }
/// let ds = Dsync::builder(lockers).build()?;
/// # Ok(())
/// # }
/// ```
pub struct RedisLocker {
    conn: ConnectionManager,
    config: RedisConfig,
    /// `host:port`, never the credentials of the URL.
    endpoint: String,
    scripts: Scripts,
}

impl RedisLocker {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is kept of a connection that was not finished.
    pub async fn connect(url: &str, config: RedisConfig) -> Result<RedisLocker, Error> {
        let client = ::redis::Client::open(url).map_err(|e| {
            // The URL may hold a password: say what is wrong, not what it was.
            Error::InvalidArgument(format!(
                "not a Redis URL ({:?}); expected redis://[user:password@]host:port[/db]",
                e.kind()
            ))
        })?;
        let endpoint = client.get_connection_info().addr.to_string();
        let manager = ::redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(config.call_timeout)
            .set_response_timeout(config.call_timeout)
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_with_config(client, manager)
            .await
            .map_err(|e| unavailable(&endpoint, &e))?;
        Ok(RedisLocker {
            conn,
            config,
            endpoint,
            scripts: Scripts::new(),
        })
    }

    fn keys(&self, args: &LockArgs) -> Vec<String> {
        args.resources
            .iter()
            .map(|r| format!("{}{r}", self.config.prefix))
            .collect()
    }

    fn validity_ms(&self) -> u64 {
        let validity = self.config.validity.min(LONGEST_VALIDITY);
        u64::try_from(validity.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Checks `args` as every locker must: resources within the limits and,
    /// unless `any_uid`, a uid.
    fn checked(args: &LockArgs, any_uid: bool) -> Result<(), Error> {
        args.validate_resources()?;
        if !any_uid && args.uid.is_empty() {
            return Err(Error::InvalidArgument("empty lock uid".into()));
        }
        Ok(())
    }

    async fn run(&self, script: &Script, keys: &[String], args: &[&str]) -> Result<bool, Error> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        let mut conn = self.conn.clone();
        let answer: i64 = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| unavailable(&self.endpoint, &e))?;
        Ok(answer == 1)
    }

    async fn grant(&self, args: &LockArgs, mode: &str) -> Result<bool, Error> {
        Self::checked(args, false)?;
        let validity = self.validity_ms().to_string();
        let argv = [&*args.uid, mode, &validity, &*args.owner, &*args.source];
        self.run(&self.scripts.lock, &self.keys(args), &argv).await
    }

    async fn release(&self, args: &LockArgs, mode: &str) -> Result<bool, Error> {
        Self::checked(args, false)?;
        self.run(&self.scripts.unlock, &self.keys(args), &[&args.uid, mode])
            .await
    }

    /// Every key under the prefix, in batches of `SCAN`.
    async fn scan(&self) -> Result<Vec<String>, Error> {
        let mut conn = self.conn.clone();
        let pattern = format!("{}*", escape_glob(&self.config.prefix));
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut conn)
                .await
                .map_err(|e| unavailable(&self.endpoint, &e))?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }
}

fn unavailable(endpoint: &str, err: &::redis::RedisError) -> Error {
    Error::LockerUnavailable {
        endpoint: endpoint.to_owned(),
        reason: format!("Redis call failed: {:?} ({})", err.kind(), err.category()),
    }
}

/// `prefix` with the glob characters of `SCAN MATCH` escaped.
fn escape_glob(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn mode_arg(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Write => "w",
        LockMode::Read => "r",
    }
}

#[async_trait]
impl NetLocker for RedisLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.grant(args, mode_arg(LockMode::Write)).await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.grant(args, mode_arg(LockMode::Read)).await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.release(args, mode_arg(LockMode::Write)).await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.release(args, mode_arg(LockMode::Read)).await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        Self::checked(args, false)?;
        let validity = self.validity_ms().to_string();
        self.run(
            &self.scripts.refresh,
            &self.keys(args),
            &[&args.uid, &validity],
        )
        .await
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        if args.uid.is_empty() {
            Self::checked(args, true)?;
            return self.run(&self.scripts.force, &self.keys(args), &[""]).await;
        }
        let mut removed = false;
        for batch in self.scan().await?.chunks(100) {
            removed |= self.run(&self.scripts.force, batch, &[&args.uid]).await?;
        }
        Ok(removed)
    }

    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        let mut conn = self.conn.clone();
        let mut infos = Vec::new();
        for batch in self.scan().await?.chunks(100) {
            let mut invocation = self.scripts.list.prepare_invoke();
            for key in batch {
                invocation.key(key);
            }
            let out: Vec<String> = invocation
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&self.endpoint, &e))?;
            let Some((server_now, rows)) = out.split_first() else {
                continue;
            };
            let server_now: u64 = server_now.parse().unwrap_or(0);
            let here = Instant::now();
            let at = |ms: &str| {
                let ago = server_now.saturating_sub(ms.parse().unwrap_or(server_now));
                here.checked_sub(Duration::from_millis(ago)).unwrap_or(here)
            };
            for row in rows.chunks_exact(7) {
                let validity = self.validity_ms();
                let deadline: u64 = row[6].parse().unwrap_or(0);
                let refreshed_ms = deadline.saturating_sub(validity).to_string();
                infos.push(LockInfo {
                    resource: row[0]
                        .strip_prefix(&self.config.prefix)
                        .unwrap_or(&row[0])
                        .to_owned(),
                    uid: row[1].clone(),
                    mode: if row[2] == "w" {
                        LockMode::Write
                    } else {
                        LockMode::Read
                    },
                    owner: row[3].clone(),
                    source: row[4].clone(),
                    acquired: at(&row[5]),
                    refreshed: at(&refreshed_ms),
                });
            }
        }
        infos.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
        Ok(infos)
    }

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn is_online(&self) -> bool {
        true
    }

    fn is_local(&self) -> bool {
        false
    }

    fn validity(&self) -> Option<Duration> {
        Some(self.config.validity.min(LONGEST_VALIDITY))
    }
}
