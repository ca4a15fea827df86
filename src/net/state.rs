//! What every connection of one server shares (`ServerState`), the role a
//! token grants, and the `Slot` a connection holds while it is served.
//! A slot is counted when it is made and uncounted when dropped, so the
//! connection counts stay right however a connection's task ends.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio_util::sync::CancellationToken;

use super::config::ServerConfig;
use super::labels::Limit;
use super::ledger::Ledger;
use super::metrics::ServerMetrics;
use super::recorders::Recorders;
use super::refusals::{Busy, Cause, RefusalLog};
use super::token::{Digest, TokenHasher};
use super::waits::{Place, Waits};
use crate::local::released::Released;
use crate::locker::wait::Ticket;
use crate::LocalLocker;

/// What a connection may do, decided by the token it presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Lock, unlock, refresh and force-unlock by uid: a uid is a random
    /// capability, so a client can only touch locks it took.
    Client,
    /// Everything, including listing and forcing resources open.
    Admin,
}

/// The configured tokens' digests ([`super::token`]), made once.
pub(super) struct Tokens {
    pub(super) hasher: TokenHasher,
    pub(super) client: Digest,
    pub(super) admin: Option<Digest>,
}

impl Tokens {
    pub(super) fn new(config: &ServerConfig) -> Self {
        let hasher = TokenHasher::new();
        Tokens {
            client: hasher.digest(&config.client_token),
            admin: config.admin_token.as_deref().map(|t| hasher.digest(t)),
            hasher,
        }
    }

    /// The role `token` grants. Both digests are compared whatever the
    /// first answers, so the time taken does not say which token matched.
    pub(super) fn role_of(&self, token: &str) -> Option<Role> {
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

/// What every connection of one server shares.
pub(crate) struct ServerState {
    pub(crate) locker: Arc<LocalLocker>,
    pub(crate) config: ServerConfig,
    pub(crate) ledger: Ledger,
    pub(crate) shutdown: CancellationToken,
    /// Connections being served, authenticated or not.
    pub(crate) connections: AtomicUsize,
    /// Connections authenticated with the client token.
    pub(super) clients: AtomicUsize,
    /// Connections admitted, of either role: the slots no flood can take.
    pub(super) authenticated: AtomicUsize,
    /// Connections authenticated with the client token, by address.
    pub(super) per_address: Mutex<HashMap<IpAddr, usize>>,
    /// Connections still in their handshake, oldest first.
    pub(super) pending: Mutex<VecDeque<Pending>>,
    pub(super) tokens: Tokens,
    /// Throttles the warnings about refused connections.
    pub(crate) refusals: RefusalLog,
    pub(super) next_conn: AtomicU64,
    /// Each open connection's places in line, by connection id: where a
    /// waiter that reconnected keeps its place now (see
    /// [`place_of`](Self::place_of)).
    pub(super) waits: Mutex<HashMap<u64, Weak<Mutex<Waits>>>>,
    /// Which connections record each waiter's places (see [`Recorders`]).
    pub(super) recorders: Arc<Recorders>,
    /// Empty without the feature `metrics`.
    pub(crate) metrics: ServerMetrics,
    /// Held by a force by uid alone while it walks the whole table (see
    /// `Session::force_everywhere`): one at a time for the whole server.
    pub(super) walking: tokio::sync::Mutex<()>,
    /// Ends the places of closed connections (see `closings.rs`).
    pub(super) closings: super::closings::Closings,
}

impl ServerState {
    /// The uids released recently: the record of the locker served, kept
    /// with the server's limits (`remember_released`, `max_released_bytes`).
    pub(crate) fn released(&self) -> &Released {
        self.locker.released()
    }

    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The role `token` grants.
    pub(crate) fn role_of(&self, token: &str) -> Option<Role> {
        self.tokens.role_of(token)
    }

    pub(super) fn per_address(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.per_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The names and ticket of the place that connection `conn` keeps for
    /// `uid`, if it is open and keeps one.
    pub(super) fn place_of(&self, conn: u64, uid: &str) -> Option<(Arc<[String]>, Ticket)> {
        let waits = self
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&conn)?
            .upgrade()?;

        waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .place_of(uid)
    }

    /// Takes the record of the place that connection `conn` keeps for
    /// `uid`, if it is open and keeps one: the uid was released over
    /// another connection, which ended the place in the table.
    pub(super) fn take_place_of(&self, conn: u64, uid: &str) -> Option<Place> {
        let waits = self
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&conn)?
            .upgrade()?;
        let mut waits = waits.lock().unwrap_or_else(PoisonError::into_inner);
        waits.end(uid)
    }

    /// Takes the records of the places that connection `conn` keeps for
    /// `uid` or under `ticket` on none but `names` (any, with `None`): the
    /// same waiter asked again for them over another connection, and the
    /// table replaced those places on every one of their names (a place is
    /// the connection's it was asked over last), or granted its request.
    pub(super) fn take_places_replaced(
        &self,
        conn: u64,
        uid: &str,
        ticket: Ticket,
        names: Option<&[String]>,
    ) -> Vec<Place> {
        let waits = self
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&conn)
            .and_then(Weak::upgrade);
        let Some(waits) = waits else {
            return Vec::new();
        };
        let mut waits = waits.lock().unwrap_or_else(PoisonError::into_inner);
        waits.end_replaced(uid, ticket, names)
    }

    /// Makes connection `conn`'s places known to the other connections.
    pub(super) fn register_waits(&self, conn: u64, waits: &Arc<Mutex<Waits>>) {
        self.waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(conn, Arc::downgrade(waits));
    }

    /// Connection `conn` closed.
    pub(super) fn forget_waits(&self, conn: u64) {
        let mut waits = self.waits.lock().unwrap_or_else(PoisonError::into_inner);
        waits.remove(&conn);
        if waits.capacity() > 64 && waits.len() < waits.capacity() / 4 {
            waits.shrink_to_fit();
        }
    }

    /// Marks connection `id` as one that sent its first bytes: in its
    /// handshake, no longer silent.
    pub(super) fn spoke_pending(&self, id: u64) {
        if let Some(p) = self.pending().iter_mut().find(|p| p.id == id) {
            p.spoke = true;
        }
    }

    /// Marks connection `id`, whose handshake was refused, as the next to
    /// evict after the silent ones.
    pub(super) fn refused_pending(&self, id: u64) {
        if let Some(p) = self.pending().iter_mut().find(|p| p.id == id) {
            p.refused = true;
        }
    }

    pub(super) fn forget_pending(&self, id: u64) {
        let mut pending = self.pending();
        if let Some(at) = pending.iter().position(|p| p.id == id) {
            pending.remove(at);
        }
    }
}

/// A connection in its handshake, which a newer one may evict.
pub(super) struct Pending {
    pub(super) id: u64,
    pub(super) evict: CancellationToken,
    /// Whether it has sent something (when it was accepted, or since): a
    /// client opens with its handshake at once, so one that has not is the
    /// first to go.
    pub(super) spoke: bool,
    pub(super) accepted: tokio::time::Instant,
    /// Its handshake was refused: it is only telling the peer why, and
    /// goes before any connection still in its handshake.
    pub(super) refused: bool,
}

/// Holds one of the `max_connections` slots while a connection is served.
pub(crate) struct Slot {
    pub(super) state: Arc<ServerState>,
    /// Names the connection in the ledger and in `pending`.
    pub(super) id: u64,
    /// Cancelled to close the connection while it is still unauthenticated,
    /// to make room for a new one.
    pub(super) evicted: CancellationToken,
    /// Whether the peer authenticated, for the connection gauges.
    pub(super) authenticated: AtomicBool,
    /// The peer's address, counted in `per_address` once admitted as a
    /// client.
    pub(super) peer: IpAddr,
    /// The role the connection was admitted with.
    pub(super) admitted: OnceLock<Role>,
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
            state.authenticated.fetch_add(1, Ordering::AcqRel);
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
        if authenticated {
            self.state.authenticated.fetch_sub(1, Ordering::AcqRel);
        }
        self.state.metrics.connection_closed(authenticated);
    }
}
