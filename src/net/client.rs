//! `RemoteLocker`: the `NetLocker` for one lock server, over one persistent
//! connection that is re-established in the background when it breaks.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::conn::{Connection, Dialing};
use super::peer_log::PeerLog;
use super::pushes::Pushes;
use super::wire::{self, Op, Reply};
use crate::error::NOT_CONNECTED;
use crate::{Error, NetLocker, RetryPolicy};

mod listing;
mod net_locker;
mod reconnect;
mod reopen;
mod shared;
use listing::lock_infos;
use reconnect::{open, reconnect_later};

/// How a [`RemoteLocker`] talks to its server.
///
/// ```
/// use quorum_lock::net::RemoteConfig;
/// let config = RemoteConfig::new("client-secret");
/// assert!(config.call_timeout > config.connect_timeout);
/// ```
#[derive(Clone)]
pub struct RemoteConfig {
    /// The shared secret the server expects (client or admin token).
    pub token: String,
    /// Longest wait for a connection and its handshake. Default 2 s.
    pub connect_timeout: Duration,
    /// Longest wait for the reply to one call. Default 5 s.
    pub call_timeout: Duration,
    /// Backoff between reconnection attempts. Default 50 ms growing to 2 s.
    pub reconnect: RetryPolicy,
    /// The newest protocol version to offer. Default
    /// [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION), with a fallback to
    /// the newest older version a server names when it rejects this one
    /// (any from 2 up). Set 2 to behave as a version-2 client: waiting by
    /// polling, no fencing tokens.
    pub protocol_version: u16,
    /// Connect with TLS (feature `tls`): the CAs to trust, the client's
    /// own certificate for servers that require one, and the name to
    /// expect, by default the host of the endpoint. Default: plain TCP.
    #[cfg(feature = "tls")]
    pub tls: Option<super::ClientTls>,
}

impl RemoteConfig {
    /// Default timeouts with `token`.
    pub fn new(token: impl Into<String>) -> Self {
        RemoteConfig {
            token: token.into(),
            connect_timeout: Duration::from_secs(2),
            call_timeout: Duration::from_secs(5),
            reconnect: RetryPolicy {
                initial: Duration::from_millis(50),
                max: Duration::from_secs(2),
            },
            protocol_version: wire::PROTOCOL_VERSION,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("token", &"<redacted>")
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("reconnect", &self.reconnect)
            .field("protocol_version", &self.protocol_version)
            .finish()
    }
}

struct Shared {
    endpoint: String,
    config: RemoteConfig,
    conn: Mutex<Option<Arc<Connection>>>,
    /// When the next attempt to connect is due, and who makes it.
    reconnecting: Mutex<reconnect::Schedule>,
    /// Set when the connection ended in a way that says nothing against
    /// the server, with no wait or watch registered: the server closed it
    /// in good order (for idleness), or the runtime its tasks ran on shut
    /// down. The next call connects, rather than a background task at once,
    /// so that the server's slot stays free and a runtime per call works.
    reopen_next: AtomicBool,
    /// The reopen under way after such a close, if any; calls arriving
    /// meanwhile wait for its connection.
    reopening: Mutex<Option<reopen::Reopen>>,
    /// Names the reconnect and reopen tasks, so that one superseded (its
    /// runtime was not driven) knows it.
    next_claim: AtomicU64,
    next_id: AtomicU64,
    /// The server's validity in nanoseconds plus one, from the last
    /// handshake; 0 until one succeeded.
    validity: AtomicU64,
    /// Where pushes for waiting uids go, across reconnects.
    pushes: Arc<Pushes>,
    /// Why the latest attempt to connect failed; cleared by a connection.
    connect_error: Mutex<Option<Error>>,
    /// How many connections in a row the server broke, by sending what is
    /// no response, within [`SETTLED`](reconnect::SETTLED) of their opening. The background
    /// reconnect starts its backoff there, so that a server that accepts
    /// each connection and then garbles it is not reconnected to at the
    /// first backoff step for ever.
    short_lived: AtomicU32,
    /// The throttled log lines about what this server sends.
    log: Arc<PeerLog>,
    /// The sockets of attempts still in their handshake: shut down when a
    /// connection is installed or the locker is dropped.
    dialing: Arc<Dialing>,
}

impl Drop for Shared {
    /// The reader task holds the connection, so without this a dropped
    /// locker would keep its socket open until the server closed it.
    fn drop(&mut self) {
        let conn = self
            .conn
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(conn) = conn {
            conn.close();
        }
        // An attempt parked in its handshake holds its socket, and a slot
        // on the server, for as long as its runtime lives.
        self.dialing.close();
    }
}

/// A [`NetLocker`] that forwards every call to a [`LockServer`](super::LockServer).
///
/// While the server is unreachable, calls fail at once with
/// [`Error::LockerUnavailable`] instead of waiting, so a dead node never
/// slows an acquire; a background task keeps probing with backoff and the
/// next call after it reconnects goes through.
///
/// # Runtimes
///
/// A locker may be used from any tokio runtime (with the time and I/O
/// drivers enabled). The connection's reader and writer tasks, and the
/// reconnect task, run on the runtime that started them: [`connect`]'s,
/// or that of the call that found the connection down. When that runtime
/// shuts down, the connection is gone but the locker still counts as
/// online ([`is_online`]: nothing says its server is out of reach), and
/// the next call connects again from its own runtime, as after an idle
/// close; so a runtime per call works. A current-thread runtime runs those
/// tasks only inside its `block_on`; if the connection lives on one that
/// is idle but not dropped, a call waits out
/// [`RemoteConfig::call_timeout`] (and, when bytes wait unread in the
/// socket, 20 ms more, to tell a reader that is not driven from an answer
/// that just arrived), fails with
/// [`Error::LockerUnavailable`] saying so, the socket is shut down (the
/// server frees its slot), and the locker reconnects from the caller's
/// runtime.
///
/// While the server is out of reach, the attempts to connect follow one
/// backoff, kept by the locker rather than by a task: each failed attempt
/// moves it a step on, only a connection resets it. The background task
/// makes them when its runtime runs it. When none does (its runtime shut
/// down, is idle, or is driven only inside each call's `block_on`, which
/// a call to an offline locker ends before the task runs), the first call
/// that finds an attempt overdue starts it as a task of its own on its
/// runtime; a task that has shown no progress for longer than its longest
/// step (the reconnect policy's ceiling or the connect timeout, whichever
/// is longer, and 250 ms) counts as not running. Calls fail at once unless
/// such an attempt, or one after an idle close or a runtime that shut
/// down, is under way: then they wait for it, and a caller that gives up
/// does not stop it. One parked on an idle runtime they wait for at most
/// [`RemoteConfig::connect_timeout`] and 250 ms from its start, then start
/// another. No task holds the locker while
/// it waits for a connection: a locker dropped meanwhile closes its
/// connection at once, and shuts down the socket of any attempt still in
/// its handshake (one parked on an idle runtime would otherwise keep its
/// slot on the server for as long as that runtime lives); so does a
/// connection installed, for the attempts that would only have opened a
/// connection to close as late.
///
/// [`connect`]: RemoteLocker::connect
/// [`is_online`]: NetLocker::is_online
///
/// [`connect_all`](super::connect_all) makes one per server of a cluster;
/// one at a time:
///
/// ```no_run
/// use std::sync::Arc;
/// use quorum_lock::{Dsync, NetLocker};
/// use quorum_lock::net::{RemoteConfig, RemoteLocker};
///
/// # async fn run() -> Result<(), quorum_lock::Error> {
/// let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
/// for addr in ["10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"] {
///     let locker = RemoteLocker::connect(addr, RemoteConfig::new("secret")).await?;
///     if let Some(why) = locker.connect_error() {
///         eprintln!("{addr} is offline for now: {why}");
///     }
///     lockers.push(Arc::new(locker));
/// }
/// let ds = Dsync::new(lockers)?;
/// # Ok(())
/// # }
/// ```
pub struct RemoteLocker {
    shared: Arc<Shared>,
}

impl RemoteLocker {
    /// Makes a locker for the server at `endpoint` (`host:port`) and tries
    /// to connect once. An unreachable server is not an error: the locker
    /// starts offline and keeps trying in the background, and
    /// [`connect_error`](Self::connect_error) says why it is offline. Nor
    /// is a TLS handshake refused over a certificate ([`Error::Tls`]),
    /// since the server may be given a new one; nor is a server that speaks
    /// no protocol version this client offers (the locker stays offline
    /// and `connect_error` says to raise
    /// [`RemoteConfig::protocol_version`] when a newer version both speak
    /// exists, else to upgrade the client or the server). A
    /// server that rejects the token is an error: [`Error::Unauthorized`]. So is a
    /// token longer than [`MAX_TOKEN_LEN`](super::MAX_TOKEN_LEN), a
    /// [`RemoteConfig::protocol_version`] this build does not speak, or,
    /// with TLS, an endpoint whose host is no name a certificate can carry
    /// (and no `ClientTls::server_name` is set):
    /// [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a connection being set up when the future is dropped is
    /// closed.
    pub async fn connect(
        endpoint: impl Into<String>,
        config: RemoteConfig,
    ) -> Result<RemoteLocker, Error> {
        let version = config.protocol_version;
        if config.token.len() > wire::MAX_TOKEN_LEN {
            return Err(Error::InvalidArgument(format!(
                "the token is {} bytes; a handshake holds at most {}",
                config.token.len(),
                wire::MAX_TOKEN_LEN
            )));
        }
        if !wire::speaks(version) {
            return Err(Error::InvalidArgument(format!(
                "protocol version {version} is not spoken by this client; set \
                 RemoteConfig::protocol_version to {} to {}",
                wire::MIN_PROTOCOL_VERSION,
                wire::PROTOCOL_VERSION
            )));
        }
        let endpoint = endpoint.into();
        super::connect::refuse_url(&endpoint)?;
        // What a peer says is never shown with the token in it.
        crate::locker::secrets::remember(config.token.as_bytes());
        #[cfg(feature = "tls")]
        if let Some(tls) = &config.tls {
            tls.name_for(&endpoint)?;
        }
        let shared = Arc::new(Shared {
            endpoint,
            config,
            conn: Mutex::new(None),
            reconnecting: Mutex::default(),
            reopen_next: AtomicBool::new(false),
            reopening: Mutex::new(None),
            next_claim: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            validity: AtomicU64::new(0),
            pushes: Arc::default(),
            connect_error: Mutex::new(None),
            short_lived: AtomicU32::new(0),
            dialing: Arc::default(),
            log: Arc::default(),
        });
        match open(&shared).await {
            Ok(conn) => {
                shared.install(conn);
            }
            Err(err @ Error::Unauthorized { .. }) => return Err(err),
            Err(err) => {
                tracing::warn!(endpoint = %shared.endpoint, %err, "cannot connect to the lock server; retrying in the background");
                shared.note_connect_error(Some(err));
                // This attempt failed too: the backoff moves a step on.
                reconnect::failed_attempt(&shared);
                reconnect_later(&shared);
            }
        }
        Ok(RemoteLocker { shared })
    }

    /// The connection, if it is alive.
    fn live(&self) -> Option<Arc<Connection>> {
        self.shared.live()
    }

    /// The live connection; a new one when the server closed the last one
    /// for idleness; otherwise an error after starting a reconnect.
    ///
    /// Cancel safe: an attempt to connect goes on as a task of its own.
    async fn connection(&self) -> Result<Arc<Connection>, Error> {
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        self.shared.until_its_end_is_judged().await;
        if let Some(opened) = reopen::attempt(&self.shared).await {
            return opened;
        }
        match self.live() {
            Some(conn) => Ok(conn),
            None => {
                // After a close that the next call mends (for idleness,
                // or before the connection served a call), no background
                // task: a call reopens once the backoff's step allows.
                if !self.shared.reopen_next.load(Ordering::Acquire) {
                    reconnect_later(&self.shared);
                }
                let next = self.shared.what_follows();
                // Why the latest attempt failed, so that what a failed
                // lock reports for this server says more than "not
                // connected": a wrong port, a TLS mismatch, a refusal.
                let reason = match self.shared.connect_error() {
                    Some(err) => format!("{NOT_CONNECTED} ({}), {next}", err.locker_reason()),
                    None => format!("{NOT_CONNECTED}, {next}"),
                };
                Err(Error::LockerUnavailable {
                    endpoint: self.shared.endpoint.clone(),
                    reason,
                })
            }
        }
    }

    async fn call(&self, op: Op) -> Result<Reply, Error> {
        let conn = self.connection().await?;
        self.call_on(&conn, op).await
    }

    async fn call_on(&self, conn: &Connection, op: Op) -> Result<Reply, Error> {
        if op.since() > conn.version() {
            // The callers check first; this keeps a slip from reaching a
            // server that would close the connection over it.
            return Err(Error::Unsupported {
                endpoint: self.shared.endpoint.clone(),
                what: format!("protocol version {} requests", op.since()),
            });
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        match conn.call(id, op, self.shared.config.call_timeout).await {
            // Cut off by the connection's end: say what follows, as the
            // end was judged.
            Err(Error::LockerUnavailable { endpoint, reason })
                if reason == crate::net::conn::CLOSED_BEFORE_THE_REPLY =>
            {
                // The caller may wake before the end is judged.
                self.shared.until_judged(conn).await;
                let next = self.shared.what_follows();
                Err(Error::LockerUnavailable {
                    endpoint,
                    reason: format!("{reason}; {next}"),
                })
            }
            other => other,
        }
    }

    async fn call_bool(&self, op: Op) -> Result<bool, Error> {
        self.call(op).await?.into_result(&self.shared.endpoint)
    }

    /// Sends a release of `args.uid`; from now on no push reaches its wait.
    async fn release(&self, op: Op, uid: &str) -> Result<bool, Error> {
        self.shared.pushes.forget(uid);
        self.call_bool(op).await
    }

    /// The live connection, if its server speaks leader election
    /// (protocol version 5); [`Error::Unsupported`] at once otherwise.
    async fn election_connection(&self) -> Result<Arc<Connection>, Error> {
        let conn = self.connection().await?;
        if conn.version() < wire::V5 {
            tracing::debug!(endpoint = %self.shared.endpoint, version = conn.version(), "the lock server is too old for leader election");
            return Err(Error::Unsupported {
                endpoint: self.shared.endpoint.clone(),
                what: "leader election".into(),
            });
        }
        Ok(conn)
    }

    /// The protocol version of the current connection, `None` while
    /// disconnected. 2 means the server has neither queues with pushed
    /// wake-ups nor fencing tokens; below 4, it cannot say how long its
    /// quarantine lasts ([`status`](Self::status)); below 5, it has no
    /// leader election ([`NetLocker::proclaim`], [`NetLocker::leader`]).
    pub fn protocol_version(&self) -> Option<u16> {
        let conn = self
            .shared
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        conn.as_ref().filter(|c| c.is_alive()).map(|c| c.version())
    }

    /// Why the latest attempt to connect failed, while the locker has no
    /// connection; `None` once one succeeded, and before the first attempt
    /// ended. Lets a caller say why a server is unreachable: a call made
    /// meanwhile fails only with "not connected".
    pub fn connect_error(&self) -> Option<Error> {
        if self.is_online() {
            return None;
        }
        self.shared
            .connect_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks the server whether it is in quarantine and how many entries it holds.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn health(&self) -> Result<(bool, u64), Error> {
        match self.call(Op::Health).await? {
            Reply::Health {
                quarantined,
                entries,
            } => Ok((quarantined, entries)),
            other => Err(other.into_error(&self.shared.endpoint)),
        }
    }

    /// Asks the server whether it is in quarantine, for how much longer,
    /// and how many entries it holds. A server of protocol version 2 or 3
    /// is asked for its [`health`](Self::health) instead and cannot say
    /// how long its quarantine lasts:
    /// [`ServerHealth::quarantine_left`] is then `None`. Any token may ask.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn status(&self) -> Result<ServerHealth, Error> {
        let conn = self.connection().await?;
        if conn.version() < wire::V4 {
            return match self.call_on(&conn, Op::Health).await? {
                Reply::Health {
                    quarantined,
                    entries,
                } => Ok(ServerHealth {
                    quarantined,
                    quarantine_left: None,
                    entries,
                }),
                other => Err(other.into_error(&self.shared.endpoint)),
            };
        }
        match self.call_on(&conn, Op::Status).await? {
            Reply::Status {
                quarantine_left,
                entries,
            } => Ok(ServerHealth {
                quarantined: quarantine_left.is_some(),
                quarantine_left,
                entries,
            }),
            other => Err(other.into_error(&self.shared.endpoint)),
        }
    }
}

/// What a lock server says about itself: [`RemoteLocker::status`].
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::net::ServerHealth;
///
/// fn describe(health: &ServerHealth) -> String {
///     match (health.quarantined, health.quarantine_left) {
///         (false, _) => format!("granting, {} entries", health.entries),
///         (true, Some(left)) => format!("in quarantine for {left:?} more"),
///         (true, None) => "in quarantine".to_owned(),
///     }
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerHealth {
    /// Whether the server refuses new grants because it started recently
    /// (`LockerConfig::quarantine`, the server's `--validity`).
    pub quarantined: bool,
    /// How long the quarantine still lasts, as the server saw it when it
    /// answered; `None` when not in quarantine, or when the server speaks
    /// a protocol older than version 4 and cannot say.
    pub quarantine_left: Option<Duration>,
    /// How many entries (one per resource and holder) the server holds.
    pub entries: u64,
}
