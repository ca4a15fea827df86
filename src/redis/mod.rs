//! `RedisLocker`: one Redis server as a [`NetLocker`] (feature `redis`),
//! with the rules of [`LocalLocker`](crate::LocalLocker), each call one
//! atomic Lua script, or one plain `SET NX PX` for a grant of one free
//! resource on a server past its quarantine (the fast path: see
//! `scripts.rs` and `docs/redis.md`).
//!
//! Every resource is a hash under the key prefix holding its holders, with
//! their deadlines on the Redis server's clock, and its waiters' places in
//! line. Every script first drops the holders and places whose deadline
//! passed, so one reader that stops refreshing expires on its own even
//! while others refresh, and the key itself expires with its last holder
//! or place (`PEXPIRE`), so nothing outlives its holders.
//!
//! * **Restarts.** Each new connection reads when the server started
//!   (`INFO server`). A Redis server that started less than
//!   [`RedisConfig::quarantine`] ago refuses new grants, as a restarted lock
//!   server does, because it may have forgotten (no persistence) or lost the
//!   last second of (`appendfsync everysec`) the locks it had granted;
//!   holders that refresh get their entries back meanwhile.
//! * **Waiting.** Places in line are ordered by ticket, as in `LocalLocker`,
//!   and a waiter is woken over pub/sub (see `waits.rs`), with the bounded
//!   re-check as the safety net.
//! * **Quarantine (rule Q of the restart design).** While the node is in quarantine,
//!   no answer of it counts: `lock`, `lock_wait`, `refresh` and `fence` all
//!   answer the quarantine error, even to a uid that holds its entries
//!   (they are refreshed, and a refresh that names its mode re-creates
//!   missing ones where the resources are free, so the holder has them back
//!   afterwards). A grant or refresh that a coordinator counted from this
//!   node can thus never rest on an entry the node forgot in a restart.
//! * **Fencing (rule F).** A token is
//!   `max(hw + 1, floor, TIME)`: `hw` is the node's high-water mark (one
//!   key, never expiring: the highest token the node ever drew), `TIME` the
//!   server's clock in ns. A floor more than [`FENCE_CLOCK_TOLERANCE`]
//!   ahead of that clock is refused, and a counter at `u64::MAX` is an
//!   error, never a repeated token. See [`FENCE_QUARANTINE`] for why tokens
//!   keep growing through a restart that lost the mark (no persistence, an
//!   older snapshot, the last second of `appendfsync everysec`).
//! * **Election.** A leader's proclamation is a field of its resource's
//!   hash, named by its uid, that goes with the holder's entry; a read
//!   reports it only while that uid holds the key exclusively. Scripts
//!   that store or drop one publish on `<prefix>~leader`, and the lockers
//!   that observe turn that into `PushEvent::Changed` for the watches they
//!   keep in memory (`watches.rs`); an expiry no script saw, and a notice
//!   lost on pub/sub, reach the observer by its re-check.
//! * **Eviction.** A server that may evict keys (`maxmemory` set with a
//!   `maxmemory-policy` other than `noeviction`) is refused: an evicted lock
//!   key is a silently lost lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::redis::{AsyncConnectionConfig, Client, Script, ToRedisArgs};
use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::QUARANTINE_REASON;
use crate::locker::proclamation::{election_resource, Proclamation, WatchArgs, MAX_VALUE_LEN};
use crate::locker::wait::{PushEvent, WaitArgs, WaitReply};
use crate::{Error, LockArgs, LockInfo, LockMode, NetLocker};

mod feed;
mod link;
mod scripts;
mod waits;
mod watches;

use feed::{Listeners, Which};
use link::{Link, Live};
use waits::{Waiter, Waits};
use watches::Watches;

/// The longest validity handed to Redis: far beyond any lease, and far
/// inside what `PEXPIRE` accepts. Longer validities and quarantines
/// (`Duration::MAX` included) are clamped to it.
const LONGEST_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The fencing clock tolerance, the same as every locker's: see
/// [`crate::FENCE_CLOCK_TOLERANCE`].
pub use crate::quorum::fencing::FENCE_CLOCK_TOLERANCE;

/// How long after a Redis node started it draws no fencing token, at least
/// (the client's [`RedisConfig::quarantine`] when that is longer; nothing
/// when that is zero, which promises the node never granted before).
///
/// Why a token drawn after a restart is above every token drawn before it,
/// with no other assumption about clients or other nodes: every token the
/// node drew at a moment `t` is at most its clock then plus
/// [`FENCE_CLOCK_TOLERANCE`] (a floor above that is refused, `TIME` is
/// below it, and `hw + 1` was itself bounded when drawn), plus one per
/// draw in between. A restart that lost the mark happens after `t`; the
/// first draw after it comes at least `FENCE_QUARANTINE` after the start,
/// on the node's own clock, and is at least its clock then. With a clock
/// that stepped back by at most the tolerance across the restart, that is
/// at least `clock(t) - tolerance + 4 × tolerance`, above
/// `clock(t) + tolerance` by two tolerances: two billion draws' worth.
pub use crate::quorum::fencing::FENCE_QUARANTINE;

/// How a [`RedisLocker`] connects and keeps entries.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::redis::RedisConfig;
///
/// let config = RedisConfig {
///     prefix: "billing-locks:".into(),
///     ..RedisConfig::default()
/// };
/// assert_eq!(config.quarantine, config.validity);
/// assert_eq!(config.validity, Duration::from_secs(60));
/// ```
#[derive(Clone)]
pub struct RedisConfig {
    /// Prepended to every resource name to form its key, and to the name
    /// of the locker's pub/sub channel.
    pub prefix: String,
    /// How long an entry that is not refreshed is kept. Values beyond ten
    /// years (`Duration::MAX` included) are taken as ten years.
    pub validity: Duration,
    /// How long after the Redis server started it refuses new grants, and
    /// every other answer that would count (see the module docs). Shorter
    /// than this client's validity, it is taken as that validity; keep it
    /// at least the validity of every client (the default equals the
    /// default validity): a server that restarted may have lost locks that
    /// are still held, and they have all been refreshed back or expired
    /// once a validity has passed. Fencing tokens are refused for at least
    /// [`FENCE_QUARANTINE`] whatever this is, unless it is zero. Zero is
    /// only safe for a server that never granted a lock nor drew a token
    /// before it started, such as in tests. Values beyond ten years are
    /// taken as ten years.
    pub quarantine: Duration,
    /// How long connecting, and then each call, may take before it counts
    /// as failed.
    pub call_timeout: Duration,
    /// The certificate authority, in PEM, that a `rediss://` server's
    /// certificate must chain to; `None` uses the system's trust store.
    pub tls_root_cert: Option<Vec<u8>>,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            prefix: "quorum-lock:".into(),
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(60),
            call_timeout: Duration::from_secs(5),
            tls_root_cert: None,
        }
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("prefix", &self.prefix)
            .field("validity", &self.validity)
            .field("quarantine", &self.quarantine)
            .field("call_timeout", &self.call_timeout)
            .field("tls_root_cert", &self.tls_root_cert.as_ref().map(|_| "…"))
            .finish()
    }
}

struct Scripts {
    lock: Script,
    wait: Script,
    unlock: Script,
    refresh: Script,
    fence: Script,
    force: Script,
    list: Script,
    proclaim: Script,
    leader: Script,
}

impl Scripts {
    /// The Lua source of every script, each with the shared prelude.
    fn sources() -> [String; 9] {
        [
            scripts::LOCK,
            scripts::WAIT,
            scripts::UNLOCK,
            scripts::REFRESH,
            scripts::FENCE,
            scripts::FORCE,
            scripts::LIST,
            scripts::PROCLAIM,
            scripts::LEADER,
        ]
        .map(|body| {
            // The fast path of an unlock runs before the prelude, so it
            // pays for none of the prelude's definitions.
            let head = if body == scripts::UNLOCK {
                scripts::UNLOCK_HEAD
            } else {
                ""
            };
            format!("{head}\n{}\n{body}", scripts::PRELUDE)
        })
    }

    /// Scripts for `sources`, in the order [`sources`](Self::sources) gives.
    fn new(sources: &[String; 9]) -> Scripts {
        let [lock, wait, unlock, refresh, fence, force, list, proclaim, leader] = sources;
        Scripts {
            lock: Script::new(lock),
            wait: Script::new(wait),
            unlock: Script::new(unlock),
            refresh: Script::new(refresh),
            fence: Script::new(fence),
            force: Script::new(force),
            list: Script::new(list),
            proclaim: Script::new(proclaim),
            leader: Script::new(leader),
        }
    }
}

/// One Redis server as a locker.
///
/// Build one per Redis node and hand them to a [`Dsync`](crate::Dsync):
/// the coordinator then grants at a quorum of Redis nodes, refreshes held
/// locks and reports their loss, exactly as over lock servers.
///
/// # Cancel safety
///
/// Every `NetLocker` call is cancel safe in the trait's sense: it is one
/// script that Redis runs atomically (or a `SET NX` that changes nothing
/// unless it grants, then maybe one script), so a dropped call was applied
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
///     lockers.push(Arc::new(RedisLocker::new(url, RedisConfig::default())?));
/// }
/// let ds = Dsync::builder(lockers).build()?;
/// let guard = ds.rw_mutex(["invoices/2026-11"])?.lock().await?;
/// // ... the work the lock protects ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub struct RedisLocker {
    shared: Arc<Shared>,
    /// The pub/sub listeners: the waiters', started by the first wait that
    /// wants pushes, and the observers', started by the first watch.
    listeners: Mutex<Listeners>,
}

struct Shared {
    link: Arc<Link>,
    config: RedisConfig,
    /// `host:port`, never the credentials of the URL.
    endpoint: String,
    scripts: Scripts,
    waits: Waits,
    watches: Watches,
    /// Whether the fast path of a grant (a plain `SET NX PX`) is used;
    /// cleared for good when the server refuses `SET` (an ACL without it).
    fast: AtomicBool,
    paths: PathCounters,
}

/// How often each path was taken, for tests and benchmarks.
#[derive(Default)]
struct PathCounters {
    fast_grants: AtomicU64,
    fast_misses: AtomicU64,
    script_grants: AtomicU64,
    fast_unlocks: AtomicU64,
    script_unlocks: AtomicU64,
}

/// How often a [`RedisLocker`] took each path of a call (feature
/// `testing`): the fast path of a grant (`SET NX PX`, no script) and of an
/// unlock (a compare-and-delete before the unlock script's prelude), and
/// the full scripts.
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedisPaths {
    /// Grants made by the fast path.
    pub fast_grants: u64,
    /// Fast-path attempts that found the key there, and ran the script.
    pub fast_misses: u64,
    /// Grant calls (`lock`, `rlock`, `lock_wait` and turns) answered by
    /// the full script, whatever they answered.
    pub script_grants: u64,
    /// Unlocks of a fast-path key by the unlock's fast path.
    pub fast_unlocks: u64,
    /// Unlock calls that ran the full unlock script.
    pub script_unlocks: u64,
}

impl RedisLocker {
    /// A locker for the Redis server at `url`, connected on first use.
    ///
    /// `url` is `redis://[user:password@]host:port[/db]`, or `rediss://` for
    /// TLS. Nothing is sent yet: a server that cannot be reached counts as
    /// a locker that does not grant until it can, as any locker does. Use
    /// [`connect`](Self::connect) to find out at once.
    pub fn new(url: &str, config: RedisConfig) -> Result<RedisLocker, Error> {
        let bad_url = |e: ::redis::RedisError| {
            // The URL may hold a password: say what is wrong, not what it was.
            Error::InvalidArgument(format!(
                "not a usable Redis URL ({:?}); expected redis://[user:password@]host:port[/db] or rediss://…",
                e.kind()
            ))
        };
        let client = match &config.tls_root_cert {
            Some(pem) => Client::build_with_tls(
                url,
                ::redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
            None => Client::open(url),
        }
        .map_err(bad_url)?;
        if config.validity.is_zero() {
            return Err(Error::invalid("a RedisLocker needs a validity above zero"));
        }
        if config.call_timeout.is_zero() {
            return Err(Error::invalid(
                "a RedisLocker needs a call timeout above zero",
            ));
        }
        let endpoint = client.get_connection_info().addr().to_string();
        let connection = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.call_timeout))
            .set_response_timeout(Some(config.call_timeout));
        let channel = format!("{}~push:{}", config.prefix, uuid::Uuid::new_v4().simple());
        let leader_channel = format!("{}~leader", config.prefix);
        let sources = Scripts::sources();
        let scripts = Scripts::new(&sources);
        Ok(RedisLocker {
            shared: Arc::new(Shared {
                link: Arc::new(Link::new(
                    client,
                    connection,
                    endpoint.clone(),
                    sources.to_vec(),
                )),
                config,
                endpoint,
                scripts,
                waits: Waits::new(channel),
                watches: Watches::new(leader_channel),
                fast: AtomicBool::new(true),
                paths: PathCounters::default(),
            }),
            listeners: Mutex::new([None, None]),
        })
    }

    /// Like [`new`](Self::new), then connects and checks the server: that
    /// it answers, is Redis 6 or later, and does not evict keys.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is kept of a connection that was not finished.
    pub async fn connect(url: &str, config: RedisConfig) -> Result<RedisLocker, Error> {
        let locker = RedisLocker::new(url, config)?;
        locker.shared.link.live().await?;
        Ok(locker)
    }

    /// How much longer the Redis server refuses new grants after it
    /// started, as this locker counts it ([`RedisConfig::quarantine`],
    /// raised to the validity, from the server's start on its own clock);
    /// `None` when it grants. Connects first if there is no connection.
    ///
    /// The quarantine is the client's setting, not the server's: a client
    /// configured with another quarantine or validity counts another end.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn quarantine_left(&self) -> Result<Option<Duration>, Error> {
        let shared = &self.shared;
        let live = shared.link.live().await?;
        let Some(end) = shared.quarantine_end_ms(&live, Quarantine::Grants) else {
            return Ok(None);
        };
        let mut conn = live.conn.clone();
        let (secs, micros): (u64, u64) = ::redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(|e| shared.link.failed(&live, &e))?;
        // The scripts' clock: whole milliseconds of the server's TIME.
        let now = secs.saturating_mul(1000).saturating_add(micros / 1000);
        Ok((now < end).then(|| Duration::from_millis(end - now)))
    }

    /// How often each path of a call was taken so far (feature `testing`).
    #[cfg(feature = "testing")]
    pub fn paths(&self) -> RedisPaths {
        let p = &self.shared.paths;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RedisPaths {
            fast_grants: get(&p.fast_grants),
            fast_misses: get(&p.fast_misses),
            script_grants: get(&p.script_grants),
            fast_unlocks: get(&p.fast_unlocks),
            script_unlocks: get(&p.script_unlocks),
        }
    }

    /// Starts the pub/sub listener of `which` if it is not running;
    /// whether its messages reach this locker.
    async fn listening(&self, which: Which) -> bool {
        feed::listening(&self.listeners, &self.shared, which).await
    }
}

impl Drop for RedisLocker {
    fn drop(&mut self) {
        let listeners = self
            .listeners
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for task in listeners.iter_mut().filter_map(Option::take) {
            task.abort();
        }
    }
}

impl std::fmt::Debug for RedisLocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLocker")
            .field("endpoint", &self.shared.endpoint)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// Which quarantine end a script is given, if any.
#[derive(Clone, Copy)]
enum Quarantine {
    /// The script does not look at the quarantine.
    None,
    /// When grants and refreshes count again: [`RedisConfig::quarantine`].
    Grants,
    /// When tokens may be drawn again: see [`FENCE_QUARANTINE`].
    Fencing,
}

/// How a script answered: granted, refused, queued, or in quarantine.
fn answer(endpoint: &str, code: i64) -> Result<i64, Error> {
    if code < 0 {
        let left = Duration::from_millis(code.unsigned_abs());
        return Err(Error::LockerUnavailable {
            endpoint: endpoint.to_owned(),
            reason: format!(
                "Redis started recently and may have lost locks it granted; {QUARANTINE_REASON} for another {left:?}"
            ),
        });
    }
    Ok(code)
}

impl Shared {
    fn keys(&self, args: &LockArgs) -> Vec<String> {
        args.resources
            .iter()
            .map(|r| format!("{}{r}", self.config.prefix))
            .collect()
    }

    fn ms(duration: Duration) -> String {
        let duration = duration.min(LONGEST_VALIDITY);
        u64::try_from(duration.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
            .to_string()
    }

    fn validity_ms(&self) -> String {
        Self::ms(self.config.validity)
    }

    /// The key of this node's fencing high-water mark: the prefix alone.
    /// Resource names are never empty, so no resource's key is this one.
    fn mark_key(&self) -> &str {
        &self.config.prefix
    }

    /// When the quarantine `which` of the server behind `live` ends, in ms
    /// on its clock, counted from its start (`Epoch::boot_ms`, taken at or
    /// after the true start, so the quarantine never ends early).
    fn quarantine_end(&self, live: &Live, which: Quarantine) -> Option<String> {
        self.quarantine_end_ms(live, which)
            .map(|end| end.to_string())
    }

    /// [`quarantine_end`](Self::quarantine_end) as a number.
    fn quarantine_end_ms(&self, live: &Live, which: Quarantine) -> Option<u64> {
        // A quarantine shorter than the validity cannot be safe (a lock
        // granted before the restart is trusted for up to a validity), so
        // it is raised to it; zero stays "none".
        let configured = match self.config.quarantine {
            zero if zero.is_zero() => zero,
            quarantine => quarantine.max(self.config.validity),
        }
        .min(LONGEST_VALIDITY);
        let quarantine = match which {
            Quarantine::None => return None,
            Quarantine::Grants => configured,
            Quarantine::Fencing if configured.is_zero() => configured,
            Quarantine::Fencing => configured.max(FENCE_QUARANTINE),
        };
        if quarantine.is_zero() {
            // No quarantine at all, not even the second `boot_ms` may lie
            // ahead of the server's clock.
            return Some(0);
        }
        // At most ten years: fits u64 ms, and a Lua double exactly.
        let quarantine = u64::try_from(quarantine.as_millis()).unwrap_or(u64::MAX);
        Some(live.epoch.boot_ms.saturating_add(quarantine))
    }

    /// Checks `args` as every locker must: resources within the limits,
    /// unless `any_uid` a uid, and text a listing can show.
    fn checked(args: &LockArgs, any_uid: bool) -> Result<(), Error> {
        args.validate_resources()?;
        if !any_uid && args.uid.is_empty() {
            return Err(Error::InvalidArgument("empty lock uid".into()));
        }
        args.validate_text()
    }

    /// Runs `script` on `keys` with `head`, then the end of the quarantine
    /// `which` of the server behind the connection it runs on (unless
    /// `Quarantine::None`), then `tail`, then the leader channel (every
    /// script's last argument: see `scripts.rs`).
    ///
    /// `EVALSHA` is built as one command, rather than through
    /// `ScriptInvocation`, which copies every argument twice. Scripts are
    /// loaded when a connection is made; on `NOSCRIPT` (a flushed script
    /// cache) they are loaded again and the call runs once more.
    async fn run<T: ::redis::FromRedisValue, H: ToRedisArgs + Sync>(
        &self,
        script: &Script,
        keys: &[String],
        head: &[H],
        which: Quarantine,
        tail: &[&str],
    ) -> Result<T, Error> {
        let live = self.link.live().await?;
        self.run_on(live, script, keys, head, which, tail).await
    }

    /// [`run`](Self::run) on the connection `live`.
    async fn run_on<T: ::redis::FromRedisValue, H: ToRedisArgs + Sync>(
        &self,
        mut live: Live,
        script: &Script,
        keys: &[String],
        head: &[H],
        which: Quarantine,
        tail: &[&str],
    ) -> Result<T, Error> {
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(script.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(head);
        if let Some(end) = self.quarantine_end(&live, which) {
            cmd.arg(end);
        }
        cmd.arg(tail).arg(&self.watches.feed.channel);
        match cmd.query_async(&mut live.conn).await {
            Err(err)
                if err.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript) =>
            {
                self.link.reload_scripts(&live).await?;
                cmd.query_async(&mut live.conn).await
            }
            other => other,
        }
        .map_err(|e| self.link.failed(&live, &e))
    }

    /// The fast path of a grant: one resource whose key is absent, so
    /// nobody holds or waits for it, on a server past its quarantine.
    /// One plain `SET key value NX PX validity`, no script and no clock:
    /// the value names the holder (see `scripts.rs`) and the key's expiry
    /// is its deadline. Whether it granted; when not (more than one
    /// resource, the key is there, no grant script on this connection has
    /// answered outside the quarantine yet, or the fast path is off) the
    /// caller runs the full script.
    #[allow(clippy::too_many_arguments)]
    async fn grant_fast(
        &self,
        live: &Live,
        keys: &[String],
        args: &LockArgs,
        mode: LockMode,
        validity: &str,
        ticket: &str,
        channel: &str,
    ) -> Result<bool, Error> {
        let [key] = keys else { return Ok(false) };
        // Past the quarantine, as a script on this connection has seen.
        if !self.fast.load(Ordering::Relaxed) || !live.granting.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let value = fast_value(args, mode, validity, ticket, channel);
        let mut conn = live.conn.clone();
        let set: Result<::redis::Value, _> = ::redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(validity)
            .query_async(&mut conn)
            .await;
        match set {
            Ok(::redis::Value::Nil) => {
                self.paths.fast_misses.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Ok(::redis::Value::Okay) => {
                self.paths.fast_grants.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Ok(other) => Err(Error::LockerUnavailable {
                endpoint: self.endpoint.clone(),
                reason: format!("Redis answered SET NX with {other:?}"),
            }),
            // An ACL without SET: the scripts still work, so they do it all.
            Err(err)
                if err.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoPerm) =>
            {
                self.fast.store(false, Ordering::Relaxed);
                tracing::warn!(
                    locker = %self.endpoint,
                    "Redis refuses SET to this user; every grant runs the lock script instead of the fast path"
                );
                Ok(false)
            }
            Err(err) => Err(self.link.failed(live, &err)),
        }
    }

    async fn grant(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        Self::checked(args, false)?;
        let validity = self.validity_ms();
        let keys = self.keys(args);
        let live = self.link.live().await?;
        if self
            .grant_fast(&live, &keys, args, mode, &validity, "", "")
            .await?
        {
            return Ok(true);
        }
        self.paths.script_grants.fetch_add(1, Ordering::Relaxed);
        let argv = grant_argv(args, mode, &validity);
        let granting = live.granting.clone();
        let code = self
            .run_on(
                live,
                &self.scripts.lock,
                &keys,
                &argv,
                Quarantine::Grants,
                &[],
            )
            .await?;
        let code = answer(&self.endpoint, code)?;
        // Any answer but the quarantine's: the server's clock is past it.
        granting.store(true, Ordering::Relaxed);
        Ok(code == 1)
    }

    /// A waiting lock call, or (`turn`) a turn taken for a waiter after a
    /// push.
    async fn wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        ticket: &str,
        place_ttl: Duration,
        channel: &str,
        turn: bool,
    ) -> Result<i64, Error> {
        let validity = self.validity_ms();
        let keys = self.keys(args);
        let live = self.link.live().await?;
        // A turn needs the waiter's place, which lives in the key: never
        // the fast path.
        if !turn
            && self
                .grant_fast(&live, &keys, args, mode, &validity, ticket, channel)
                .await?
        {
            return Ok(1);
        }
        self.paths.script_grants.fetch_add(1, Ordering::Relaxed);
        let place_ttl = Self::ms(place_ttl);
        let argv = grant_argv(args, mode, &validity);
        let tail = [ticket, &place_ttl, channel, if turn { "1" } else { "0" }];
        let granting = live.granting.clone();
        let code = self
            .run_on(
                live,
                &self.scripts.wait,
                &keys,
                &argv,
                Quarantine::Grants,
                &tail,
            )
            .await?;
        let code = answer(&self.endpoint, code)?;
        // A turn may answer 0 before the script looks at the clock; any
        // other answer but the quarantine's says the clock is past it.
        if !turn {
            granting.store(true, Ordering::Relaxed);
        }
        Ok(code)
    }

    /// Asks again for `waiter` after a push said its turn may have come;
    /// whether it was granted.
    async fn take_turn(&self, waiter: &Waiter) -> Result<bool, Error> {
        let code = self
            .wait(
                &waiter.args,
                waiter.mode,
                &waiter.ticket,
                waiter.place_ttl,
                &self.waits.feed.channel,
                true,
            )
            .await?;
        Ok(code == 1)
    }

    async fn release(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        Self::checked(args, false)?;
        self.waits.forget(&args.uid);
        let code: i64 = self
            .run(
                &self.scripts.unlock,
                &self.keys(args),
                &[fast_head(&args.uid, mode)],
                Quarantine::None,
                &[],
            )
            .await?;
        let path = match code {
            2 => &self.paths.fast_unlocks,
            _ => &self.paths.script_unlocks,
        };
        path.fetch_add(1, Ordering::Relaxed);
        Ok(code >= 1)
    }

    async fn refresh(&self, args: &LockArgs, mode: Option<LockMode>) -> Result<bool, Error> {
        Self::checked(args, false)?;
        let validity = self.validity_ms();
        let mode = mode.map_or("", mode_arg);
        let argv = [&*args.uid, &validity, mode, &*args.owner, &*args.source];
        let code: i64 = self
            .run(
                &self.scripts.refresh,
                &self.keys(args),
                &argv,
                Quarantine::Grants,
                &[],
            )
            .await?;
        Ok(answer(&self.endpoint, code)? == 1)
    }

    /// Every key under the prefix, in batches of `SCAN`.
    async fn scan(&self) -> Result<Vec<String>, Error> {
        let mut live = self.link.live().await?;
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
                .query_async(&mut live.conn)
                .await
                .map_err(|e| self.link.failed(&live, &e))?;
            // The fencing high-water mark is under the prefix too, and is
            // no resource.
            keys.extend(batch.into_iter().filter(|k| k != self.mark_key()));
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    async fn list(&self) -> Result<Vec<LockInfo>, Error> {
        let mut infos = Vec::new();
        let validity = u64::try_from(self.config.validity.as_millis()).unwrap_or(u64::MAX);
        for batch in self.scan().await?.chunks(100) {
            let out: Vec<String> = self
                .run(
                    &self.scripts.list,
                    batch,
                    &[] as &[&str],
                    Quarantine::None,
                    &[],
                )
                .await?;
            let Some((server_now, rows)) = out.split_first() else {
                continue;
            };
            let server_now: u64 = server_now.parse().unwrap_or(0);
            let here = Instant::now();
            // A time on the server's clock, as an instant on ours.
            let at = |ms: u64| {
                let ago = server_now.saturating_sub(ms);
                here.checked_sub(Duration::from_millis(ago)).unwrap_or(here)
            };
            for row in rows.chunks_exact(7) {
                let deadline: u64 = row[6].parse().unwrap_or(0);
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
                    acquired: at(row[5].parse().unwrap_or(server_now)),
                    refreshed: at(deadline.saturating_sub(validity)),
                });
            }
        }
        infos.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
        Ok(infos)
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

/// The arguments every granting script starts with: uid, mode, validity
/// in ms, owner, source.
fn grant_argv<'a>(args: &'a LockArgs, mode: LockMode, validity: &'a str) -> [&'a str; 5] {
    [
        &args.uid,
        mode_arg(mode),
        validity,
        &args.owner,
        &args.source,
    ]
}

fn mode_arg(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Write => "w",
        LockMode::Read => "r",
    }
}

/// A proclamation's term and seq as 40 digits, so that Lua compares them
/// as strings in the order of the numbers.
fn stamp(p: &Proclamation) -> String {
    format!("{:020}{:020}", p.term, p.seq)
}

/// A stored proclamation: its stamp, then its value. `None` when it is not
/// one that [`stamp`] and the `PROCLAIM` script wrote.
fn unstamp(stored: &[u8]) -> Option<Proclamation> {
    let (stamp, value) = (stored.get(..40)?, stored.get(40..)?);
    let number = |digits: &[u8]| -> Option<u64> {
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    if value.len() > MAX_VALUE_LEN {
        return None;
    }
    Proclamation::new(number(&stamp[..20])?, number(&stamp[20..])?, value).ok()
}

/// The value of a fast-path key: the tag, the mode, then uid, validity,
/// owner, source, ticket and channel, each as its length in bytes, `:` and
/// its bytes (the layout `scripts.rs` describes and the scripts read).
/// The uid comes first, so the unlock script recognises its holder by a
/// prefix it builds from the uid and mode alone.
fn fast_value(
    args: &LockArgs,
    mode: LockMode,
    validity: &str,
    ticket: &str,
    channel: &str,
) -> String {
    let mut value = fast_head(&args.uid, mode);
    value.reserve(32 + args.owner.len() + args.source.len() + ticket.len() + channel.len());
    for field in [validity, &*args.owner, &*args.source, ticket, channel] {
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = write!(value, "{}:{field}", field.len());
    }
    value
}

/// The first bytes of the fast-path value of `uid` in `mode`: what the
/// unlock script compares (and reads the uid and mode from).
fn fast_head(uid: &str, mode: LockMode) -> String {
    format!("{}{}{}:{uid}", scripts::FAST_TAG, mode_arg(mode), uid.len())
}

/// A ticket as 40 digits, so that Lua compares tickets as strings in the
/// order of the numbers.
fn ticket_arg(wait: &WaitArgs) -> String {
    format!("{:020}{:020}", wait.ticket.at, wait.ticket.tiebreak)
}

#[async_trait]
impl NetLocker for RedisLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.grant(args, LockMode::Write).await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.grant(args, LockMode::Read).await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.release(args, LockMode::Write).await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.release(args, LockMode::Read).await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.refresh(args, None).await
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.shared.refresh(args, Some(mode)).await
    }

    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        Shared::checked(args, false)?;
        if wait.place_ttl.is_zero() {
            return Err(Error::invalid(
                "a place in line needs a place_ttl above zero",
            ));
        }
        let ticket = ticket_arg(wait);
        // A waiter with a wake always names this locker's channel, in its
        // place and in any grant it gets, even while the subscription is
        // down: a push published then is lost like any push, and the
        // waiter's re-check stands in for it. So a place is `Queued` (and
        // unlocked by a waiter that gives up) whether or not pushes arrive,
        // and a grant made meanwhile can be wounded by push once the
        // subscription is back. Only a reservation (no wake) names none.
        let channel = match &wait.wake {
            Some(wake) => {
                // Starts the listener if it is not running; the first wait
                // waits for its subscription, so its first turn is not lost.
                self.listening(Which::Waits).await;
                self.shared.waits.register(
                    args,
                    mode,
                    ticket.clone(),
                    wait.place_ttl,
                    wake.clone(),
                );
                self.shared.waits.feed.channel.as_str()
            }
            None => "",
        };
        let code = self
            .shared
            .wait(args, mode, &ticket, wait.place_ttl, channel, false)
            .await?;
        Ok(match (code, &wait.wake) {
            (1, _) => WaitReply::Granted,
            // Wounded: the uid holds a grant here that an older waiter is
            // queued behind. The script answers so on every re-check, so a
            // wound whose push was lost (no subscription, a reconnect, a
            // grant recorded without a channel by an earlier version) is
            // acted on at the waiter's next re-check at the latest: the
            // wound is delivered through the waiter's own wake, exactly as
            // a pushed one, and the waiter gives its grants back.
            (3, Some(wake)) => {
                wake.notify(&args.uid, PushEvent::Wounded);
                WaitReply::Queued
            }
            (2, _) => WaitReply::Queued,
            // A reservation, which the caller must ask about again (or
            // unlock): kept, but never granted by itself.
            _ => WaitReply::Refused,
        })
    }

    fn queues(&self) -> bool {
        true
    }

    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        Shared::checked(args, false)?;
        let shared = &self.shared;
        let floor_arg = floor.to_string();
        let tolerance = FENCE_CLOCK_TOLERANCE.as_secs().to_string();
        let mut keys = shared.keys(args);
        keys.push(shared.mark_key().to_owned());
        let argv = [&*args.uid, mode_arg(mode), &floor_arg];
        let (kind, value): (i64, String) = shared
            .run(
                &shared.scripts.fence,
                &keys,
                &argv,
                Quarantine::Fencing,
                &[&tolerance],
            )
            .await?;
        let counter = |key: &str| match key.strip_prefix(&shared.config.prefix) {
            Some("") | None => "this node's high-water mark".to_owned(),
            Some(resource) => format!("resource {resource:?}"),
        };
        match kind {
            1 => value
                .parse::<u64>()
                .map(Some)
                .map_err(|_| Error::LockerUnavailable {
                    endpoint: shared.endpoint.clone(),
                    reason: "Redis answered a fencing token that does not fit 64 bits".into(),
                }),
            0 => Ok(None),
            2 => Err(Error::InvalidArgument(format!(
                "fencing floor {floor} is ahead of the clock of Redis {} by more than \
                 {FENCE_CLOCK_TOLERANCE:?} (its clock plus that is {value} ns): clocks out of \
                 sync, or a client sent a bogus floor",
                shared.endpoint
            ))),
            3 => Err(Error::InvalidArgument(format!(
                "the fencing counter of {} on Redis {} is at u64::MAX and cannot grow",
                counter(&value),
                shared.endpoint
            ))),
            4 => Err(Error::LockerUnavailable {
                endpoint: shared.endpoint.clone(),
                reason: format!(
                    "the fencing counter of {} is not a token; was the key written by hand?",
                    counter(&value)
                ),
            }),
            code if code < 0 => answer(&shared.endpoint, code).map(|_| None),
            other => Err(Error::LockerUnavailable {
                endpoint: shared.endpoint.clone(),
                reason: format!("the fencing script answered an unknown kind {other}"),
            }),
        }
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let shared = &self.shared;
        match (args.uid.is_empty(), args.resources.is_empty()) {
            (true, true) => Err(Error::invalid(
                "force_unlock needs a uid, resource names, or both",
            )),
            (true, false) => {
                Shared::checked(args, true)?;
                let code: i64 = shared
                    .run(
                        &shared.scripts.force,
                        &shared.keys(args),
                        &[""],
                        Quarantine::None,
                        &[],
                    )
                    .await?;
                Ok(code == 1)
            }
            (false, false) => {
                Shared::checked(args, false)?;
                shared.waits.forget(&args.uid);
                let code: i64 = shared
                    .run(
                        &shared.scripts.force,
                        &shared.keys(args),
                        &[&*args.uid],
                        Quarantine::None,
                        &[],
                    )
                    .await?;
                Ok(code == 1)
            }
            (false, true) => {
                args.validate_text()?;
                shared.waits.forget(&args.uid);
                let mut removed = false;
                for batch in shared.scan().await?.chunks(100) {
                    let code: i64 = shared
                        .run(
                            &shared.scripts.force,
                            batch,
                            &[&*args.uid],
                            Quarantine::None,
                            &[],
                        )
                        .await?;
                    removed |= code == 1;
                }
                Ok(removed)
            }
        }
    }

    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        Shared::checked(args, false)?;
        election_resource(args)?;
        proclamation.validate()?;
        let shared = &self.shared;
        let stamp = stamp(proclamation);
        let head: [&[u8]; 3] = [args.uid.as_bytes(), stamp.as_bytes(), &proclamation.value];
        let code: i64 = shared
            .run(
                &shared.scripts.proclaim,
                &shared.keys(args),
                &head,
                Quarantine::Grants,
                &[],
            )
            .await?;
        Ok(answer(&shared.endpoint, code)? == 1)
    }

    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        Shared::checked(args, false)?;
        election_resource(args)?;
        let shared = &self.shared;
        let keys = shared.keys(args);
        let registered = match watch {
            // The watch is kept before the read, so a change that comes
            // after the read is pushed (its notice reports another state
            // than the read; see `watches.rs`). The first watch waits for
            // the subscription; while it is down the observer's re-check
            // stands in for the pushes.
            Some(watch) => {
                self.listening(Which::Watches).await;
                Some(shared.watches.register(&keys[0], &args.uid, watch)?)
            }
            None => None,
        };
        let read = async {
            let (kind, found): (i64, Vec<u8>) = shared
                .run(
                    &shared.scripts.leader,
                    &keys,
                    &[] as &[&str],
                    Quarantine::Grants,
                    &[],
                )
                .await?;
            match answer(&shared.endpoint, kind)? {
                1 => unstamp(&found)
                    .map(Some)
                    .ok_or_else(|| Error::LockerUnavailable {
                        endpoint: shared.endpoint.clone(),
                        reason: "Redis holds a proclamation this library cannot read; was \
                                 the key written by hand?"
                            .into(),
                    }),
                _ => Ok(None),
            }
        }
        .await;
        // A call dropped before this leaves its watch unsettled: it then
        // keeps the notices it hears (a few) and lapses with its ttl; the
        // observer's re-check reads again meanwhile.
        if let Some(id) = registered {
            match &read {
                Ok(found) => {
                    let seen = found.as_ref().map(|p| {
                        let mut seen = [0u8; 40];
                        seen.copy_from_slice(stamp(p).as_bytes());
                        seen
                    });
                    shared.watches.settle(&keys[0], id, seen);
                }
                Err(_) => shared.watches.unsettled(&keys[0], id),
            }
        }
        read
    }

    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        self.shared.list().await
    }

    fn endpoint(&self) -> String {
        self.shared.endpoint.clone()
    }

    fn is_online(&self) -> bool {
        self.shared.link.is_up()
    }

    fn is_local(&self) -> bool {
        false
    }

    fn validity(&self) -> Option<Duration> {
        Some(self.shared.config.validity.min(LONGEST_VALIDITY))
    }
}
