//! `LockServer`: serves one `LocalLocker` to authenticated clients over
//! framed TCP, in the caller's runtime or in the `quorum-lock` binary.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::ledger::{Ledger, Limits};
use super::metrics::{Limit, ServerMetrics};
use super::refusals::{Cause, RefusalLog};
use super::released::Released;
use super::session::{accept, PUSH_QUEUE};
use super::token::{Digest, TokenHasher};
use super::waits::WAITER_OVERHEAD;
use crate::{Error, LocalLocker};

/// What a connection may do, decided by the token it presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Lock, unlock, refresh and force-unlock by uid: a uid is a random
    /// capability, so a client can only touch locks it took.
    Client,
    /// Everything, including listing and forcing resources open.
    Admin,
}

const MIB: usize = 1024 * 1024;

/// What a connection costs the server besides the frames it sends: its
/// task, socket buffers on our side, the codec's buffers and, with TLS, the
/// TLS session. An upper estimate, checked by the `net_limits` budget test.
pub const CONNECTION_OVERHEAD: usize = 64 * 1024;

/// What a connection's TLS handshake may hold besides
/// [`CONNECTION_OVERHEAD`], with TLS: rustls buffers a handshake message
/// until it is complete, up to 64 KiB (its limit, 65,535 bytes, in a
/// buffer grown by doubling), and a peer without a token can keep one
/// that way until the handshake timeout.
pub const TLS_HANDSHAKE_BUFFER: usize = 64 * 1024;

/// What one queued push costs besides its uid: the queue slot and the
/// uid's allocation.
const PUSH_OVERHEAD: usize = 64;

/// How many connections may be open beyond `max_connections` while the
/// ones evicted to make room for them are closing.
pub const EVICTING: usize = 8;

/// Settings of a [`LockServer`].
///
/// The limits bound the server's memory whatever its peers send; see
/// [`memory_budget`](Self::memory_budget) for what they add up to.
///
/// ```
/// use quorum_lock::net::ServerConfig;
/// let config = ServerConfig::new("client-secret").admin_token("admin-secret");
/// assert_eq!(config.max_entries_per_connection, 100_000);
/// assert_eq!(config.max_connections, 512);
/// ```
#[derive(Clone)]
pub struct ServerConfig {
    client_token: String,
    admin_token: Option<String>,
    /// Most locks one connection may hold at once; beyond it, lock requests
    /// are refused with an error. Default 100,000.
    pub max_entries_per_connection: usize,
    /// Most bytes the locks granted over one connection may take in the lock
    /// table (names, uid, owner and source, plus the table's worst-case cost
    /// per name and per lock, about 900 and 380 bytes); beyond it, new locks
    /// are refused with an error. Default 64 MiB: about 48,000 single-name
    /// locks with short names and UUID uids.
    pub max_bytes_per_connection: usize,
    /// Most bytes all locks together may take in the lock table, counted as
    /// for `max_bytes_per_connection`, with the values leaders proclaimed
    /// (up to 4 KiB each) and observers' watches (PROTOCOL.md, "Limits"). A lock stays counted until it is
    /// released or expires, also after its connection closed, so a client
    /// cannot escape the limits by reconnecting. Default 1 GiB.
    pub max_lock_bytes: usize,
    /// Most connections authenticated with the client token at once; one
    /// beyond it is rejected in its handshake, saying so. With
    /// `admin_reserve`, also bounds the connections served at once,
    /// authenticated or not (`max_connections + admin_reserve`), so that
    /// the server never runs out of file descriptors: when all those are
    /// taken, a new connection replaces the oldest one still in its
    /// handshake, and when all are authenticated, it is closed as soon as
    /// it is accepted. Default 512.
    pub max_connections: usize,
    /// Most bytes of released uids remembered (see `remember_released`);
    /// past it the oldest are forgotten early. Default 64 MiB, about 500,000
    /// UUID uids.
    pub max_released_bytes: usize,
    /// Most places in line one connection may hold at once: waits that are
    /// queued for a lock (protocol version 3), and the reservations that
    /// keep version-2 pollers' turns. Beyond it, a waiting lock request is
    /// refused with an error of kind `Unavailable`, and a version-2 lock is
    /// asked without a reservation. Places are charged to the lock table's
    /// limits as locks are. Default 1024.
    pub max_waiters_per_connection: usize,
    /// Connections kept beyond `max_connections` for handshakes and for
    /// connections that present the admin token: clients with the client
    /// token hold at most `max_connections` at once, so an operator can
    /// always connect with the admin token, however many clients hold
    /// theirs. Default 4.
    pub admin_reserve: usize,
    /// Most connections authenticated with the client token from one IP
    /// address, loopback included; a connection beyond it is rejected in
    /// its handshake, saying why. Connections with the admin token are not
    /// counted. Default 64.
    pub max_connections_per_address: usize,
    /// How long a connection authenticated with the client token may stay
    /// silent while it holds nothing on the server (no lock, no place in
    /// line, no watch) before the server closes it, freeing its slot.
    /// [`RemoteLocker`](super::RemoteLocker) opens a new connection with
    /// its next call. `None` keeps such connections open. Default 5 min.
    pub idle_timeout: Option<Duration>,
    /// How long a client has to authenticate after connecting. Default 5 s.
    pub handshake_timeout: Duration,
    /// How long a released uid is remembered, so that a lock or refresh
    /// arriving after its own release is refused. Default: the locker's
    /// validity.
    pub remember_released: Option<Duration>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::ServerTls>,
}

impl ServerConfig {
    /// Settings with the token every client must present.
    pub fn new(client_token: impl Into<String>) -> Self {
        ServerConfig {
            client_token: client_token.into(),
            admin_token: None,
            max_entries_per_connection: 100_000,
            max_bytes_per_connection: 64 * MIB,
            max_lock_bytes: 1024 * MIB,
            max_connections: 512,
            max_released_bytes: 64 * MIB,
            max_waiters_per_connection: 1024,
            admin_reserve: 4,
            max_connections_per_address: 64,
            idle_timeout: Some(Duration::from_secs(300)),
            handshake_timeout: Duration::from_secs(5),
            remember_released: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Serves TLS only, with these settings (feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: super::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The token that also allows listing and forcing locks open. Without
    /// one, nobody can.
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.admin_token = Some(token.into());
        self
    }

    /// The most memory, in bytes, that peers can make the server use beyond
    /// its baseline, derived from the limits:
    ///
    /// * `unauthenticated`: peers without a token can only open connections
    ///   and send a [`MAX_HELLO_FRAME`](super::MAX_HELLO_FRAME) each:
    ///   `(max_connections + admin_reserve + EVICTING) × (MAX_HELLO_FRAME +
    ///   CONNECTION_OVERHEAD)`, plus [`TLS_HANDSHAKE_BUFFER`] per connection
    ///   with TLS (a ClientHello rustls keeps while it waits for its end);
    /// * `client`: with the client token, add a request of up to
    ///   [`MAX_FRAME`](super::MAX_FRAME) being read and one being decoded
    ///   per connection (`2 × MAX_FRAME + CONNECTION_OVERHEAD` each, and
    ///   `TLS_HANDSHAKE_BUFFER` with TLS, which covers its record buffers), the
    ///   connection's record of its waiters (512 bytes per
    ///   `max_waiters_per_connection`) and its queue of pushes not yet
    ///   written (at most 256 of a uid each), the lock table
    ///   (`max_lock_bytes`, which also pays for places in line, leaders'
    ///   proclamations and observers' watches: each name is
    ///   charged what it costs the table at worst, as malloc lays it out;
    ///   the table gives back the room of entries that went, so this holds
    ///   after a peak too, except for each shard's room while nearly empty,
    ///   about 600 KiB in all, which is added) and the remembered releases
    ///   (`max_released_bytes`). `Health` and
    ///   `Status` count the table without copying it.
    ///
    /// The admin token is trusted: a listing of a full table is not bounded
    /// here. `tests/net_memory.rs` checks the lock table's part with a
    /// counting allocator under the costliest requests per byte charged.
    ///
    /// ```
    /// let budget = quorum_lock::net::ServerConfig::new("t").memory_budget();
    /// assert!(budget.unauthenticated < budget.client);
    /// ```
    pub fn memory_budget(&self) -> MemoryBudget {
        let conns = self.slots().saturating_add(EVICTING);
        #[cfg(feature = "tls")]
        let tls = if self.tls.is_some() {
            TLS_HANDSHAKE_BUFFER
        } else {
            0
        };
        #[cfg(not(feature = "tls"))]
        let tls = 0;
        let per_peer = super::MAX_HELLO_FRAME + CONNECTION_OVERHEAD + tls;
        let unauthenticated = conns.saturating_mul(per_peer);
        let waiters = self
            .max_waiters_per_connection
            .saturating_mul(WAITER_OVERHEAD)
            .saturating_add(PUSH_QUEUE * (super::MAX_UID_LEN + PUSH_OVERHEAD));
        let per_client = (2 * super::MAX_FRAME + CONNECTION_OVERHEAD + tls).saturating_add(waiters);
        let client = conns
            .saturating_mul(per_client)
            .saturating_add(self.max_lock_bytes)
            .saturating_add(super::ledger::KEPT)
            .saturating_add(self.max_released_bytes);
        MemoryBudget {
            unauthenticated,
            client,
        }
    }

    /// Every connection that may be open at once, in its handshake or
    /// authenticated, besides those being evicted.
    fn slots(&self) -> usize {
        self.max_connections.saturating_add(self.admin_reserve)
    }
}

/// The configured tokens' digests ([`super::token`]), made once.
struct Tokens {
    hasher: TokenHasher,
    client: Digest,
    admin: Option<Digest>,
}

impl Tokens {
    fn new(config: &ServerConfig) -> Self {
        let hasher = TokenHasher::new();
        Tokens {
            client: hasher.digest(&config.client_token),
            admin: config.admin_token.as_deref().map(|t| hasher.digest(t)),
            hasher,
        }
    }

    /// The role `token` grants. Both digests are compared whatever the
    /// first answers, so the time taken does not say which token matched.
    fn role_of(&self, token: &str) -> Option<Role> {
        let presented = self.hasher.digest(token);
        let client = self.client.matches(&presented);
        let admin = self.admin.is_some_and(|admin| admin.matches(&presented));
        match (admin, client) {
            (true, _) => Some(Role::Admin),
            (false, true) => Some(Role::Client),
            (false, false) => None,
        }
    }
}

/// What [`ServerConfig::memory_budget`] derives from the limits, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    /// Most that peers without a valid token can add.
    pub unauthenticated: usize,
    /// Most that peers with the client token can add, lock table included.
    pub client: usize,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("client_token", &"<redacted>")
            .field(
                "admin_token",
                &self.admin_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "max_entries_per_connection",
                &self.max_entries_per_connection,
            )
            .field("max_bytes_per_connection", &self.max_bytes_per_connection)
            .field("max_lock_bytes", &self.max_lock_bytes)
            .field("max_connections", &self.max_connections)
            .field("max_released_bytes", &self.max_released_bytes)
            .field(
                "max_waiters_per_connection",
                &self.max_waiters_per_connection,
            )
            .field("admin_reserve", &self.admin_reserve)
            .field(
                "max_connections_per_address",
                &self.max_connections_per_address,
            )
            .field("idle_timeout", &self.idle_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("remember_released", &self.remember_released)
            .finish_non_exhaustive()
    }
}

/// What every connection of one server shares.
pub(crate) struct ServerState {
    pub(crate) locker: Arc<LocalLocker>,
    pub(crate) config: ServerConfig,
    pub(crate) released: Released,
    pub(crate) ledger: Ledger,
    pub(crate) shutdown: CancellationToken,
    /// Connections being served, authenticated or not.
    pub(crate) connections: AtomicUsize,
    /// Connections authenticated with the client token.
    clients: AtomicUsize,
    /// Connections authenticated with the client token, by address.
    per_address: Mutex<HashMap<IpAddr, usize>>,
    /// Connections still in their handshake, oldest first.
    pending: Mutex<VecDeque<(u64, CancellationToken)>>,
    tokens: Tokens,
    /// Throttles the warnings about refused connections.
    pub(crate) refusals: RefusalLog,
    next_conn: AtomicU64,
    /// Empty without the feature `metrics`.
    pub(crate) metrics: ServerMetrics,
}

impl ServerState {
    fn pending(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, CancellationToken)>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The role `token` grants.
    pub(crate) fn role_of(&self, token: &str) -> Option<Role> {
        self.tokens.role_of(token)
    }

    fn per_address(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.per_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn forget_pending(&self, id: u64) {
        let mut pending = self.pending();
        if let Some(at) = pending.iter().position(|(p, _)| *p == id) {
            pending.remove(at);
        }
    }
}

/// Holds one of the `max_connections` slots while a connection is served.
pub(crate) struct Slot {
    state: Arc<ServerState>,
    /// Names the connection in the ledger and in `pending`.
    id: u64,
    /// Cancelled to close the connection while it is still unauthenticated,
    /// to make room for a new one.
    evicted: CancellationToken,
    /// Whether the peer authenticated, for the connection gauges.
    authenticated: AtomicBool,
    /// The peer's address, counted in `per_address` once admitted as a
    /// client.
    peer: IpAddr,
    /// The role the connection was admitted with.
    admitted: OnceLock<Role>,
}

/// Why [`Slot::admit`] refused an authenticated connection.
pub(crate) struct Busy {
    pub(crate) cause: Cause,
    /// For the client, starting with [`BUSY`](super::wire::BUSY).
    pub(crate) reason: String,
}

impl Slot {
    pub(crate) fn state(&self) -> &Arc<ServerState> {
        &self.state
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Resolves when the server closes this connection to make room.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// The peer authenticated as `role`: it keeps its slot unless its
    /// role has no room left. A client needs one of the `max_connections`
    /// and room in its address's share; an admin may use any slot, the
    /// reserve included.
    pub(crate) fn admit(&self, role: Role) -> Result<(), Busy> {
        let state = &self.state;
        let config = &state.config;
        if role == Role::Client {
            let mut per_address = state.per_address();
            let held = per_address.get(&self.peer).copied().unwrap_or(0);
            if held >= config.max_connections_per_address {
                state.metrics.refused_by(Limit::ConnectionsPerAddress);
                return Err(Busy {
                    cause: Cause::AddressFull,
                    reason: format!(
                        "{}{held} connections from {} already, the most one address may hold \
                         (--max-connections-per-address); close one or try again later",
                        super::wire::BUSY,
                        self.peer
                    ),
                });
            }
            let limit = config.max_connections;
            let free = state
                .clients
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < limit).then_some(n + 1)
                })
                .is_ok();
            if !free {
                state.metrics.refused_by(Limit::MaxConnections);
                return Err(Busy {
                    cause: Cause::ClientsFull,
                    reason: format!(
                        "{}all {limit} client connections are in use; try again later",
                        super::wire::BUSY
                    ),
                });
            }
            *per_address.entry(self.peer).or_default() += 1;
        }
        let _ = self.admitted.set(role);
        state.forget_pending(self.id);
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            state.metrics.connection_authenticated();
        }
        Ok(())
    }
}

impl Drop for Slot {
    /// Also when the task is aborted at shutdown.
    fn drop(&mut self) {
        self.state.ledger.close(self.id);
        self.state.forget_pending(self.id);
        self.state.connections.fetch_sub(1, Ordering::AcqRel);
        if self.admitted.get() == Some(&Role::Client) {
            self.state.clients.fetch_sub(1, Ordering::AcqRel);
            let mut per_address = self.state.per_address();
            if let Some(held) = per_address.get_mut(&self.peer) {
                *held -= 1;
                if *held == 0 {
                    per_address.remove(&self.peer);
                }
            }
        }
        let authenticated = *self.authenticated.get_mut();
        self.state.metrics.connection_closed(authenticated);
    }
}

/// Serves a [`LocalLocker`] over the network.
///
/// Each connection is served by one task that handles its requests in
/// order, inline, and writes all the replies to one read batch at once.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::LocalLocker;
/// use quorum_lock::net::{LockServer, ServerConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new("secret"))?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = tokio::spawn(server.serve(listener, async { let _ = stopped.await; }));
/// // ... serve clients ...
/// let _ = stop.send(());
/// running.await?;
/// # Ok(())
/// # }
/// ```
pub struct LockServer {
    state: Arc<ServerState>,
}

impl LockServer {
    /// A server for `locker`. Fails with [`Error::InvalidArgument`] when the
    /// client token is empty or the admin token equals it.
    pub fn new(locker: Arc<LocalLocker>, config: ServerConfig) -> Result<Self, Error> {
        if config.client_token.is_empty() {
            return Err(Error::InvalidArgument(
                "the client token must not be empty".into(),
            ));
        }
        if config
            .admin_token
            .as_deref()
            .is_some_and(|a| a.is_empty() || a == config.client_token)
        {
            return Err(Error::InvalidArgument(
                "the admin token must be non-empty and differ from the client token".into(),
            ));
        }
        if config.max_connections == 0 {
            return Err(Error::InvalidArgument(
                "max_connections must be at least 1".into(),
            ));
        }
        if config.max_connections_per_address == 0 {
            return Err(Error::InvalidArgument(
                "max_connections_per_address must be at least 1".into(),
            ));
        }
        if config.idle_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidArgument(
                "idle_timeout must be more than zero; None keeps idle connections open".into(),
            ));
        }
        if config.max_waiters_per_connection == 0 {
            return Err(Error::InvalidArgument(
                "max_waiters_per_connection must be at least 1: clients of protocol version 3 \
                 wait in line"
                    .into(),
            ));
        }
        let validity = locker.config().validity;
        let remember = config.remember_released.unwrap_or(validity);
        let ledger = Ledger::new(Limits {
            validity,
            total_bytes: config.max_lock_bytes,
            bytes_per_connection: config.max_bytes_per_connection,
            locks_per_connection: config.max_entries_per_connection,
        });
        let tokens = Tokens::new(&config);
        Ok(LockServer {
            state: Arc::new(ServerState {
                locker,
                tokens,
                clients: AtomicUsize::new(0),
                per_address: Mutex::default(),
                refusals: RefusalLog::default(),
                released: Released::new(remember, config.max_released_bytes),
                ledger,
                config,
                shutdown: CancellationToken::new(),
                connections: AtomicUsize::new(0),
                pending: Mutex::default(),
                next_conn: AtomicU64::new(1),
                metrics: ServerMetrics::new(),
            }),
        })
    }

    /// Accepts connections on `listener` until `shutdown` resolves, then
    /// stops accepting, lets each connection finish the batch it is
    /// handling, and returns.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future stops accepting, but the connections already
    /// accepted keep being served until their clients disconnect; resolve
    /// `shutdown` instead for a clean stop.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        tracing::info!(listen = %local, "lock server accepting connections");
        // Stops when this future ends or is dropped.
        let _sampler = super::metrics::sampler(&self.state);
        let _expiry = super::expiry::start(&self.state.locker);
        let mut sessions = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut failed = Throttled::default();
        let mut failures = 0u32;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        failures = 0;
                        match self.slot(peer.ip()) {
                            Ok(slot) => {
                                sessions.spawn(accept(stream, peer, slot));
                            }
                            Err(cause) => {
                                // Closed at once: its descriptor is free again
                                // before the next accept. The client sees the
                                // connection closed during the handshake and
                                // retries later.
                                drop(stream);
                                self.state.metrics.refused_by(Limit::MaxConnections);
                                self.log_full(cause, peer);
                            }
                        }
                    }
                    Err(err) => {
                        // Out of file descriptors and the like: back off, longer
                        // the longer it lasts, so the loop never spins.
                        failures = failures.saturating_add(1);
                        failed.note(|n| tracing::warn!(%err, failed = n, "accept failed"));
                        let backoff = Duration::from_millis(10u64 << failures.min(6));
                        tokio::time::sleep(backoff).await;
                    }
                },
                Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            }
        }
        tracing::info!(listen = %local, "lock server shutting down");
        self.state.shutdown.cancel();
        let grace = tokio::time::sleep(Duration::from_secs(5));
        tokio::pin!(grace);
        while !sessions.is_empty() {
            tokio::select! {
                _ = sessions.join_next() => {}
                () = &mut grace => { sessions.abort_all(); break; }
            }
        }
    }

    /// A handle on the server's counters, for metrics and tests; it stays
    /// valid while the server runs.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            state: self.state.clone(),
        }
    }

    /// Takes a connection slot. When all are taken, the connection that
    /// has waited longest for its handshake is closed to make room: a
    /// client completes its handshake within a round trip, so peers
    /// without a token can only keep it out by opening connections faster
    /// than that, not by holding idle ones for the handshake timeout.
    /// Otherwise, why not: every slot holds an authenticated connection,
    /// or so many were evicted that the evicted ones have not all closed
    /// yet (a flood of peers that do not authenticate).
    fn slot(&self, peer: IpAddr) -> Result<Slot, Cause> {
        let state = &self.state;
        let limit = state.config.slots();
        let free = state
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok();
        if !free {
            // The evicted connection gives its slot back only when its task
            // next runs; until then both are open. A flood must not pile
            // such pairs up, or the descriptors would run out after all.
            let room = state
                .connections
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < limit + EVICTING).then_some(n + 1)
                })
                .is_ok();
            if !room {
                return Err(Cause::Flood);
            }
            let Some((_, oldest)) = state.pending().pop_front() else {
                state.connections.fetch_sub(1, Ordering::AcqRel);
                return Err(Cause::AllAuthenticated);
            };
            oldest.cancel();
            state.metrics.refused_by(Limit::MaxConnections);
        }
        let id = state.next_conn.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        state.pending().push_back((id, evicted.clone()));
        state.metrics.connection_opened();
        Ok(Slot {
            state: state.clone(),
            id,
            evicted,
            authenticated: AtomicBool::new(false),
            peer,
            admitted: OnceLock::new(),
        })
    }

    /// Warns, throttled, that a connection was closed at once for `cause`.
    fn log_full(&self, cause: Cause, peer: SocketAddr) {
        let Some(refused) = self.state.refusals.due(cause) else {
            return;
        };
        let config = &self.state.config;
        let (clients, reserve) = (config.max_connections, config.admin_reserve);
        match cause {
            Cause::Flood => tracing::warn!(
                %peer,
                refused,
                "connections arrive faster than those closed to make room for them go away: \
                 a flood of connections that do not authenticate; closing new ones at once \
                 (`refused` counts them since the last such line)"
            ),
            _ => tracing::warn!(
                %peer,
                refused,
                clients,
                reserve,
                "every connection slot holds an authenticated connection (the admin reserve \
                 included); closing new connections at once (raise --max-connections, or \
                 --admin-reserve if admins need more; `refused` counts them since the last \
                 such line)"
            ),
        }
    }

    /// Binds `addr` and serves until `shutdown` resolves. Returns the bound
    /// address once listening, and a future that runs the server.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it before it resolves closes the listener.
    /// The returned server future behaves as [`serve`](Self::serve).
    pub async fn bind(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<(SocketAddr, impl Future<Output = ()> + Send)> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        Ok((local, self.serve(listener, shutdown)))
    }
}

/// Live counters of a [`LockServer`], from [`LockServer::stats`].
#[derive(Clone)]
pub struct ServerStats {
    state: Arc<ServerState>,
}

impl ServerStats {
    /// Connections being served, authenticated or not.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::Acquire)
    }

    /// Bytes the lock table is charged for, as limited by
    /// [`ServerConfig::max_lock_bytes`].
    pub fn lock_bytes(&self) -> usize {
        self.state.ledger.total()
    }

    /// Bytes of remembered released uids, as limited by
    /// [`ServerConfig::max_released_bytes`].
    pub fn released_bytes(&self) -> usize {
        self.state.released.bytes()
    }
}

impl std::fmt::Debug for ServerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStats")
            .field("connections", &self.connections())
            .field("lock_bytes", &self.lock_bytes())
            .field("released_bytes", &self.released_bytes())
            .finish()
    }
}

/// Logs a recurring event at most once a second, with how often it
/// happened meanwhile, so that a flood cannot flood the log too.
#[derive(Default)]
struct Throttled {
    since: u64,
    last: Option<tokio::time::Instant>,
}

impl Throttled {
    fn note(&mut self, log: impl FnOnce(u64)) {
        self.since += 1;
        let now = tokio::time::Instant::now();
        if self
            .last
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1))
        {
            log(self.since);
            self.since = 0;
            self.last = Some(now);
        }
    }
}
