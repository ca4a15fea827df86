//! The connection of a `RedisLocker` to its Redis server: made on first
//! use, made again after it breaks, and checked each time it is made.
//!
//! Every new connection first reads `INFO server` and the server clock, so
//! the locker always knows when the server it talks to started. A Redis
//! server that restarts breaks every connection to it, so no call can reach
//! a restarted server without passing through here first: this is where a
//! restart is detected, and the start time found here is what the scripts
//! use to refuse new grants during the quarantine.
//!
//! A new connection also loads the locker's scripts. A restarted server has
//! none, and loading them inside a call would cost the call two more round
//! trips; the coordinator drops a slow node's call once a quorum answered,
//! so a restarted node's refresh could be dropped every time before its
//! script was loaded, and never re-create the holder's entry during the
//! quarantine.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ::redis::aio::MultiplexedConnection;
use ::redis::{AsyncConnectionConfig, Client, RedisError};
use futures::future::{BoxFuture, FutureExt, Shared};

use crate::locker::throttled::SharedThrottle;
use crate::Error;

/// What a connection found out about the server when it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Epoch {
    /// `run_id` from `INFO server`: new on every start of the server.
    pub run_id: String,
    /// When the server started, in ms on its own clock, at or after the
    /// true start (see [`Link::epoch`]).
    pub boot_ms: u64,
}

/// A live connection and the epoch of the server behind it.
#[derive(Clone)]
pub(super) struct Live {
    pub conn: MultiplexedConnection,
    pub epoch: Arc<Epoch>,
    /// Set once a grant script run on this connection answered something
    /// other than the quarantine: the server's clock was then past the
    /// quarantine's end as the locker counts it (and scripts run). Only
    /// then may the fast path of a grant (no script, so no clock check) be
    /// taken. A restart breaks the connection, and the next one starts
    /// with this unset.
    pub granting: Arc<AtomicBool>,
    generation: u64,
}

/// A connection attempt that runs as its own task, shared by the callers
/// waiting for it.
type Connecting = Shared<BoxFuture<'static, Result<Live, Error>>>;

pub(super) struct Link {
    client: Client,
    config: AsyncConnectionConfig,
    endpoint: String,
    current: Mutex<Option<Live>>,
    /// The connection being made, if one is: every caller awaits the same.
    connecting: Mutex<Option<Connecting>>,
    generation: AtomicU64,
    /// The run id of the last epoch seen, to log a restart once.
    last_run_id: Mutex<Option<String>>,
    /// The last problem logged, so a persistent one is logged once.
    reported: Mutex<Option<String>>,
    /// Throttles [`Link::report`]'s lines.
    warnings: SharedThrottle,
    /// Whether a warning about the eviction policy (it cannot be read, or
    /// it would evict once a limit is set) was written: it is said once.
    eviction_unknown_said: AtomicBool,
    /// Throttles the warning that the server restarted.
    restarts: SharedThrottle,
    /// The Lua source of every script the locker runs, loaded on connect.
    scripts: Vec<String>,
}

impl Link {
    pub(super) fn new(
        client: Client,
        config: AsyncConnectionConfig,
        endpoint: String,
        scripts: Vec<String>,
    ) -> Link {
        Link {
            client,
            config,
            endpoint,
            current: Mutex::new(None),
            connecting: Mutex::new(None),
            generation: AtomicU64::new(0),
            last_run_id: Mutex::new(None),
            reported: Mutex::new(None),
            warnings: SharedThrottle::default(),
            eviction_unknown_said: AtomicBool::new(false),
            restarts: SharedThrottle::default(),
            scripts,
        }
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// The current connection, made first if there is none.
    ///
    /// The connection is made by a task of its own, so a caller that is
    /// dropped meanwhile does not stop it. This matters: the coordinator
    /// drops the calls of a slow node once a quorum answered, and a node
    /// that has to reconnect is always the slow one, so a connection made
    /// inside the call would never be finished.
    pub(super) async fn live(self: &Arc<Self>) -> Result<Live, Error> {
        if let Some(live) = self.peek() {
            return Ok(live);
        }
        let attempt = {
            let mut connecting = lock(&self.connecting);
            // Connected while this caller took the lock.
            if let Some(live) = self.peek() {
                return Ok(live);
            }
            match connecting.as_ref() {
                Some(attempt) => attempt.clone(),
                None => {
                    let link = self.clone();
                    let task = tokio::spawn(async move {
                        let made = link.connect().await;
                        match &made {
                            Ok(live) => *lock(&link.current) = Some(live.clone()),
                            Err(err) => link.report(err),
                        }
                        *lock(&link.connecting) = None;
                        made
                    });
                    let endpoint = self.endpoint.clone();
                    let attempt = async move {
                        task.await.unwrap_or_else(|_| {
                            Err(Error::LockerUnavailable {
                                endpoint,
                                reason: "the connection attempt ended with its runtime".into(),
                            })
                        })
                    }
                    .boxed()
                    .shared();
                    *connecting = Some(attempt.clone());
                    attempt
                }
            }
        };
        let made = attempt.clone().await;
        if made.is_err() {
            // A task that ended with its runtime cannot clear its attempt.
            let mut connecting = lock(&self.connecting);
            if connecting.as_ref().is_some_and(|a| a.ptr_eq(&attempt)) {
                *connecting = None;
            }
        }
        made
    }

    fn peek(&self) -> Option<Live> {
        lock(&self.current).clone()
    }

    /// Loads every script again on `live`, after a call heard `NOSCRIPT`
    /// (the script cache was flushed). The load runs as a task of its own,
    /// for the reason [`live`](Self::live) connects in one: the caller may
    /// be dropped before it finishes.
    pub(super) async fn reload_scripts(self: &Arc<Self>, live: &Live) -> Result<(), Error> {
        let link = self.clone();
        let mut conn = live.conn.clone();
        let task = tokio::spawn(async move { link.load_scripts(&mut conn).await });
        task.await.unwrap_or_else(|_| {
            Err(Error::LockerUnavailable {
                endpoint: self.endpoint.clone(),
                reason: "loading the lock scripts ended with its runtime".into(),
            })
        })
    }

    /// Notes a failed call on `live`: a broken connection is dropped, so
    /// the next call connects again and checks the server again.
    pub(super) fn failed(&self, live: &Live, err: &RedisError) -> Error {
        if err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error() {
            let mut current = lock(&self.current);
            if current
                .as_ref()
                .is_some_and(|c| c.generation == live.generation)
            {
                *current = None;
            }
        }
        let error = unavailable(&self.endpoint, err);
        self.report(&error);
        error
    }

    /// Whether a connection is up right now.
    pub(super) fn is_up(&self) -> bool {
        lock(&self.current).is_some()
    }

    /// Logs `error` unless it is the problem logged last, and at most once
    /// a second: a server that takes every connection and drops it at the
    /// first call makes a new connection, and a new problem, per call.
    pub(super) fn report(&self, error: &Error) {
        let text = error.to_string();
        let mut reported = lock(&self.reported);
        if reported.as_deref() != Some(text.as_str()) {
            self.warnings.note(|count| {
                tracing::warn!(
                    locker = %self.endpoint,
                    count,
                    "{text} (`count` problems since the last such line)"
                );
            });
            *reported = Some(text);
        }
    }

    async fn connect(&self) -> Result<Live, Error> {
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|e| unavailable(&self.endpoint, &e))?;
        let epoch = self.epoch(&mut conn).await?;
        self.check_eviction(&mut conn).await?;
        self.load_scripts(&mut conn).await?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        {
            let mut last = lock(&self.last_run_id);
            match last.as_deref() {
                Some(before) if before != epoch.run_id => {
                    // A real restart is rare; a server that says another
                    // run_id at every connection is not, and is throttled.
                    self.restarts.note(|count| {
                        tracing::warn!(
                            locker = %self.endpoint,
                            count,
                            "Redis restarted (its run_id changed); it refuses new grants until \
                             its quarantine ends (`count` restarts since the last such line)"
                        );
                    });
                }
                _ => {}
            }
            *last = Some(epoch.run_id.clone());
        }
        *lock(&self.reported) = None;
        tracing::debug!(
            locker = %self.endpoint,
            // The server's words: escaped for the log.
            run_id = %crate::locker::escape_peer_text(&epoch.run_id),
            boot_ms = epoch.boot_ms,
            "connected to Redis"
        );
        Ok(Live {
            conn,
            epoch: Arc::new(epoch),
            granting: Arc::new(AtomicBool::new(false)),
            generation,
        })
    }

    /// Reads when the server started: `TIME` minus `uptime_in_seconds`.
    async fn epoch(&self, conn: &mut MultiplexedConnection) -> Result<Epoch, Error> {
        // `why` may quote the server's own words (its version): escaped, so
        // that a hostile server's text cannot drive a terminal or a log.
        let not_redis = |why: String| Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            reason: crate::locker::escape_peer_text(&format!("not a usable Redis server: {why}")),
        };
        let info: String = ::redis::cmd("INFO")
            .arg("server")
            .query_async(conn)
            .await
            .map_err(|e| match e.code() {
                // A server error, such as NOAUTH when the URL has no password.
                Some(_) => unavailable(&self.endpoint, &e),
                None => not_redis(format!("INFO server failed ({:?})", e.kind())),
            })?;
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let (Some(run_id), Some(uptime)) = (field("run_id"), field("uptime_in_seconds")) else {
            return Err(not_redis("INFO server has no run_id or uptime".into()));
        };
        let major = field("redis_version")
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0);
        if major < 6 {
            return Err(not_redis(format!(
                "version {} is too old; Redis 6 or later is needed",
                field("redis_version").unwrap_or("unknown")
            )));
        }
        let uptime: u64 = uptime
            .parse()
            .map_err(|_| not_redis("INFO server has an unreadable uptime".into()))?;
        let (secs, _micros): (u64, u64) = ::redis::cmd("TIME")
            .query_async(conn)
            .await
            .map_err(|e| unavailable(&self.endpoint, &e))?;
        // Redis counts the uptime as its cached clock's whole seconds minus
        // the whole second it started in (a server that started at 10.9 s
        // reports 1 s at 11.1 s, more than the 0.2 s that passed), so now
        // minus the uptime can be up to a second before the true start. The
        // start is before the end of the second it began in: the whole
        // seconds of the cached clock (at most `TIME`'s) minus the uptime,
        // plus one. That is at or after the true start, and at most a
        // second after it, so a quarantine counted from it ends late, never
        // early.
        let boot_ms = secs
            .saturating_sub(uptime)
            .saturating_add(1)
            .saturating_mul(1000);
        Ok(Epoch {
            run_id: run_id.to_owned(),
            boot_ms,
        })
    }

    /// Loads every script in one pipeline, so that the first call on this
    /// connection runs its script at once instead of hearing `NOSCRIPT`.
    async fn load_scripts(&self, conn: &mut MultiplexedConnection) -> Result<(), Error> {
        if self.scripts.is_empty() {
            return Ok(());
        }
        let mut pipe = ::redis::pipe();
        for source in &self.scripts {
            pipe.cmd("SCRIPT").arg("LOAD").arg(source);
        }
        let loaded: Result<Vec<String>, RedisError> = pipe.query_async(conn).await;
        match loaded {
            Ok(_) => Ok(()),
            // An ACL without SCRIPT: the scripts may still have been loaded
            // by someone else, and a call that finds them missing says so.
            Err(err) if err.code().is_some() => {
                self.report(&unavailable(&self.endpoint, &err));
                Ok(())
            }
            Err(err) => Err(unavailable(&self.endpoint, &err)),
        }
    }

    /// Refuses a server that may evict keys: an evicted lock key is a lock
    /// lost without anyone being told.
    async fn check_eviction(&self, conn: &mut MultiplexedConnection) -> Result<(), Error> {
        let config: Result<Vec<String>, _> = ::redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory*")
            .query_async(conn)
            .await;
        let Ok(config) = config else {
            // Said once per locker: the setting does not change with the
            // connection.
            if !self.eviction_unknown_said.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    locker = %self.endpoint,
                    "cannot read maxmemory-policy (CONFIG GET is not allowed here); make sure it is noeviction, or lock keys may be evicted silently"
                );
            }
            return Ok(());
        };
        let setting = |name: &str| {
            config
                .chunks_exact(2)
                .find(|pair| pair[0] == name)
                .map(|pair| pair[1].as_str())
        };
        let policy = setting("maxmemory-policy").unwrap_or("noeviction");
        let limit = setting("maxmemory").unwrap_or("0");
        if policy == "noeviction" {
            return Ok(());
        }
        if limit == "0" {
            // Said once per locker, as the warning above.
            if !self.eviction_unknown_said.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    locker = %self.endpoint,
                    policy = %crate::locker::escape_peer_text(policy),
                    "maxmemory-policy is not noeviction; harmless while maxmemory is 0, but lock keys would be evicted silently once a limit is set"
                );
            }
            return Ok(());
        }
        Err(Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            // The settings are the server's words: escaped.
            reason: crate::locker::escape_peer_text(&format!(
                "this Redis may evict lock keys (maxmemory-policy {policy} with maxmemory {limit}), \
                 and an evicted key is a lock lost silently; set maxmemory-policy noeviction"
            )),
        })
    }
}

/// A failed Redis call as a locker error, without the URL (it may hold a
/// password).
pub(super) fn unavailable(endpoint: &str, err: &RedisError) -> Error {
    let reason = if err.is_timeout() {
        "Redis did not answer in time".to_owned()
    } else if err.is_connection_refusal() {
        "Redis refused the connection; is redis-server running on this port?".to_owned()
    } else if err.kind() == ::redis::ErrorKind::Parse {
        "the server does not speak the Redis protocol; is this the port of a Redis server?"
            .to_owned()
    } else if let Some(code) = err.code() {
        // A server error: its code and text name what was refused (for
        // example NOPERM for an ACL without EVALSHA), never a password.
        let detail: String = err.detail().unwrap_or("").chars().take(200).collect();
        format!("Redis refused the call: {code} {detail}")
    } else {
        format!("Redis call failed: {:?} ({})", err.kind(), err.category())
    };
    Error::LockerUnavailable {
        endpoint: endpoint.to_owned(),
        // The server's words, escaped: a hostile server's text must not
        // drive the terminal that shows the error or the log.
        reason: crate::locker::escape_peer_text(&reason),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
