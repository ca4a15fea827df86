//! `LockServer`: serves one `LocalLocker` to authenticated clients over
//! framed TCP, in the caller's runtime or in the `quorum-lock` binary.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::config::{ServerConfig, EVICTING};
use super::door::{has_spoken, Door, Leaving, DOOR_TICK, SILENT_GRACE};
use super::labels::Limit;
use super::ledger::{Ledger, Limits};
use super::metrics::ServerMetrics;
use super::refusals::{Cause, RefusalLog};
use super::session::accept;
use super::state::{Pending, ServerState, Slot, Tokens};
use crate::locker::throttled::Throttled;
use crate::{Error, LocalLocker};

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
    /// client token is empty or the admin token equals it, a token is
    /// longer than [`MAX_TOKEN_LEN`](super::MAX_TOKEN_LEN), or the locker's
    /// validity is zero.
    pub fn new(locker: Arc<LocalLocker>, config: ServerConfig) -> Result<Self, Error> {
        if config.client_token.is_empty() {
            return Err(Error::InvalidArgument(
                "the client token must not be empty".into(),
            ));
        }
        let longest = config
            .client_token
            .len()
            .max(config.admin_token.as_deref().map_or(0, str::len));
        if longest > super::MAX_TOKEN_LEN {
            return Err(Error::InvalidArgument(format!(
                "a token of {longest} bytes cannot be presented: a client's handshake holds at \
                 most {} bytes of token; use a shorter one",
                super::MAX_TOKEN_LEN
            )));
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
        if validity.is_zero() {
            return Err(Error::InvalidArgument(
                "the locker's validity must be above zero: with none, every entry would expire \
                 as it is granted"
                    .into(),
            ));
        }
        // What peers send is never logged with the server's tokens in it.
        crate::locker::secrets::remember(config.client_token.as_bytes());
        if let Some(admin) = &config.admin_token {
            crate::locker::secrets::remember(admin.as_bytes());
        }
        let remember = config.remember_released.unwrap_or(validity);
        // One record of released uids serves the server and its locker.
        locker
            .released()
            .set_limits(remember, config.max_released_bytes);
        let ledger = Ledger::new(Limits {
            // An expired entry or place keeps its memory until the
            // locker's next expiry pass: its charge stays until then.
            lapse: crate::local::charge_lapse(validity),
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
                authenticated: AtomicUsize::new(0),
                per_address: Mutex::default(),
                refusals: RefusalLog::default(),
                ledger,
                config,
                shutdown: CancellationToken::new(),
                connections: AtomicUsize::new(0),
                pending: Mutex::default(),
                waits: Mutex::default(),
                recorders: Arc::default(),
                next_conn: AtomicU64::new(1),
                metrics: ServerMetrics::new(),
                walking: tokio::sync::Mutex::const_new(()),
                closings: Default::default(),
            }),
        })
    }

    /// Accepts connections on `listener` until `shutdown` resolves, then
    /// stops accepting, lets each connection finish the batch it is
    /// handling, and returns.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future stops accepting and ends the connections
    /// already accepted at once, mid-batch if need be: their clients see
    /// the connection closed (and a call in flight fails as unavailable),
    /// as when a server process dies. What the table holds stays. Resolve
    /// `shutdown` instead for a clean stop, which lets each connection
    /// finish the batch it is handling.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        tracing::info!(listen = %local, "lock server accepting connections");
        // Stops when this future ends or is dropped.
        let _sampler = super::sampler::sampler(&self.state);
        let state = Arc::downgrade(&self.state);
        let _expiry = super::expiry::start(&self.state.locker, move || {
            if let Some(state) = state.upgrade() {
                state.ledger.sweep();
            }
        });
        let mut sessions = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut failed = Throttled::default();
        let mut failures = 0u32;
        let mut door = Door::new(self.state.config.door);
        let mut door_tick = tokio::time::interval(DOOR_TICK);
        door_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        failures = 0;
                        let spoke = has_spoken(&stream);
                        match self.slot(peer.ip(), spoke) {
                            Ok(slot) => {
                                sessions.spawn(accept(stream, peer, slot));
                            }
                            Err(Cause::Flood) => {
                                // Its handshake may be a moment behind its
                                // connection: it waits at the door, without a
                                // slot, for its first bytes; one that spoke,
                                // for a slot the handshakes in progress give
                                // up within their grace.
                                match door.push(stream, peer, spoke) {
                                    None => {}
                                    Some(Leaving::Closed(out, cause)) => self.refused(cause, out),
                                    Some(Leaving::Spoke(out)) => match self.slot(out.peer.ip(), true) {
                                        Ok(slot) => {
                                            sessions.spawn(accept(out.stream, out.peer, slot));
                                        }
                                        Err(Cause::Flood) => self.refused(Cause::NoSlotAtDoor, out.peer),
                                        Err(cause) => self.refused(cause, out.peer),
                                    },
                                }
                            }
                            Err(cause) => {
                                // Closed at once: its descriptor is free again
                                // before the next accept. The client sees the
                                // connection closed during the handshake and
                                // retries later.
                                drop(stream);
                                self.refused(cause, peer);
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
                _ = door_tick.tick(), if !door.is_empty() => {
                    self.let_in_from_door(&mut door, &mut sessions);
                }
                Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            }
        }
        drop(door);
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

    /// Takes a connection slot. When all are taken, a newcomer that spoke
    /// closes one that has not authenticated: one whose handshake was
    /// refused first, then one that has sent nothing for [`SILENT_GRACE`],
    /// then the oldest one in its handshake that had that grace to finish
    /// it. A silent newcomer, or one for which none may go yet, waits at
    /// the door (`Cause::Flood`). A client sends its handshake (or its TLS
    /// hello) as soon as it is connected and completes it within a round
    /// trip, so peers with the client token or none can neither hold it
    /// out with silent connections nor evict it mid-handshake; a flood of
    /// connections that speak competes with it for a turn at the door.
    /// Otherwise, why not: every slot holds an authenticated connection,
    /// or so many were evicted that the evicted ones have not all closed
    /// yet (a flood of peers that do not authenticate).
    fn slot(&self, peer: IpAddr, spoke: bool) -> Result<Slot, Cause> {
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
            let victim = {
                let mut pending = state.pending();
                // Only a newcomer that spoke evicts: a silent one waits at
                // the door for its first bytes, so that it cannot take a
                // slot ahead of one that spoke there. One that was refused
                // goes first (it is closing anyway), then a silent one,
                // then the oldest in its handshake; the last two only once
                // they had `SILENT_GRACE` to speak or to finish (a client
                // sends its handshake at once and completes it within a
                // round trip): else a flood of connections that speak, with
                // the client token or none, would evict the admin's before
                // it is through.
                let old = |p: &Pending| p.accepted.elapsed() >= SILENT_GRACE;
                let at = if spoke {
                    pending
                        .iter()
                        .position(|p| p.refused)
                        .or_else(|| pending.iter().position(|p| !p.spoke && old(p)))
                        .or_else(|| pending.iter().position(old))
                } else {
                    None
                };
                match at {
                    Some(at) => pending.remove(at),
                    None if pending.is_empty() => None,
                    None => {
                        // The newcomer waits at the door for one to end.
                        drop(pending);
                        state.connections.fetch_sub(1, Ordering::AcqRel);
                        return Err(Cause::Flood);
                    }
                }
            };
            let Some(victim) = victim else {
                state.connections.fetch_sub(1, Ordering::AcqRel);
                // Nobody waits for a handshake: every slot is held by an
                // authenticated connection, or by one evicted or refused
                // that has not closed yet (a flood; raising the limit
                // would not help).
                return Err(if state.authenticated.load(Ordering::Acquire) >= limit {
                    Cause::AllAuthenticated
                } else {
                    Cause::Flood
                });
            };
            victim.evict.cancel();
            state.metrics.refused_by(Limit::MaxConnections);
        }
        let id = state.next_conn.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        state.pending().push_back(Pending {
            id,
            evict: evicted.clone(),
            spoke,
            accepted: tokio::time::Instant::now(),
            refused: false,
        });
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

    /// Counts and logs a connection closed for `cause`.
    fn refused(&self, cause: Cause, peer: SocketAddr) {
        self.state.metrics.refused_by(Limit::MaxConnections);
        self.log_full(cause, peer);
    }

    /// Lets in the connections at the door that spoke meanwhile, and closes
    /// those that stayed silent for [`SILENT_GRACE`] and those that spoke
    /// but found no slot for twice as long.
    fn let_in_from_door(&self, door: &mut Door, sessions: &mut JoinSet<()>) {
        let mut again = Vec::new();
        for waiting in door.take_ready() {
            let (peer, since) = (waiting.peer, waiting.since);
            match self.slot(peer.ip(), true) {
                Ok(slot) => {
                    sessions.spawn(accept(waiting.stream, peer, slot));
                }
                // Every slot holds a handshake still within its grace:
                // wait for one to end, as long as two graces (a slot's
                // holder may have come to it at the same instant).
                Err(Cause::Flood) if since.elapsed() < 2 * SILENT_GRACE => {
                    again.push(waiting);
                }
                Err(Cause::Flood) => self.refused(Cause::NoSlotAtDoor, peer),
                Err(cause) => self.refused(cause, peer),
            }
        }
        door.put_back(again);
        for peer in door.close_expired() {
            self.refused(Cause::SilentAtDoor, peer);
        }
    }

    /// Warns, throttled, that a connection was closed at once for `cause`.
    fn log_full(&self, cause: Cause, peer: SocketAddr) {
        let Some(refused) = self.state.refusals.due(cause) else {
            return;
        };
        let config = &self.state.config;
        let (clients, reserve) = (config.max_connections, config.admin_reserve);
        match cause {
            Cause::SilentAtDoor => tracing::warn!(
                %peer,
                refused,
                "closed connections that sent nothing while every slot was taken (at once, or \
                 after 100 ms at the door; `refused` counts them since the last such line)"
            ),
            Cause::DoorFull => tracing::warn!(
                %peer,
                refused,
                door = config.door,
                "closed silent connections waiting for their first bytes to make room for \
                 newer ones: more than `door` connections that send nothing arrive within \
                 100 ms (`refused` counts them since the last such line)"
            ),
            Cause::NoSlotAtDoor => tracing::warn!(
                %peer,
                refused,
                door = config.door,
                "closed connections that sent their first bytes but found no slot at the door \
                 (none freed within 200 ms, or none when more than `door` waited and newer \
                 ones pushed them out): every slot held a connection in its handshake, given 100 ms to \
                 finish it, or a flood of new ones took the slots first (`refused` counts them \
                 since the last such line)"
            ),
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
        let listener = listen(addr)?;
        let local = listener.local_addr()?;
        Ok((local, self.serve(listener, shutdown)))
    }
}

/// How many connections the kernel may hold for the server before it
/// accepts them (Linux caps it at `net.core.somaxconn`, 4096 by default).
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` for a [`LockServer`], with a queue of
/// [`LISTEN_BACKLOG`] connections not yet accepted, where
/// `TcpListener::bind` keeps 128: when the server's task is held up, a
/// burst of connections (a flood's) fills a short queue, and the kernel
/// then drops new ones, a client's or the admin's among them, until the
/// server catches up.
///
/// Must be called within a Tokio runtime.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = quorum_lock::net::listen("127.0.0.1:0".parse().unwrap())?;
/// assert!(listener.local_addr()?.port() > 0);
/// # Ok(())
/// # }
/// ```
pub fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind`: a restarted server binds its port again at
    // once, while connections of the previous one are in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
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
        self.state.released().bytes()
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
