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

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::redis::{AsyncConnectionConfig, Client, Script};
use async_trait::async_trait;

use crate::locker::proclamation::{election_resource, Proclamation, WatchArgs};
use crate::locker::wait::{PushEvent, WaitArgs, WaitReply};
use crate::{Error, LockArgs, LockInfo, LockMode, NetLocker};

mod calls;
mod config;
mod feed;
mod link;
mod scripts;
mod waits;
mod watches;

use calls::{answer, mode_arg, stamp, ticket_arg, unstamp, Quarantine};
pub use config::RedisConfig;

use feed::{Listeners, Which};
use link::Link;
use waits::Waits;
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
        // What the server says is never shown with the password in it.
        crate::locker::secrets::remember_url(url);
        let bad_url = |e: ::redis::RedisError| {
            // The URL may hold a password: say what is wrong, not what it was.
            Error::InvalidArgument(format!(
                "not a usable Redis URL ({:?}); expected redis://[user:password@]host:port[/db] or rediss://…",
                e.kind()
            ))
        };
        if crate::locker::redact::at_after_host_part(url) {
            // Read as the parser would, the user name is the host and the
            // password's start a port: refuse, rather than connect there
            // and name that "host" in every message.
            return Err(Error::invalid(
                "a Redis URL with an `@` after its host part: a password that holds `/`, `?` \
                 or `#` must be percent-encoded (`%2F`, `%3F`, `%23`) (the URL is not shown: \
                 it may hold a password)",
            ));
        }
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
        let get = |c: &AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
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
            // The server's words: escaped, a secret quoted masked.
            Some(resource) => format!("resource \"{}\"", crate::locker::escape_peer_text(resource)),
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
                 {FENCE_CLOCK_TOLERANCE:?} (its clock plus that is {} ns): clocks out of \
                 sync, or a client sent a bogus floor",
                shared.endpoint,
                crate::locker::escape_peer_text(&value)
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
