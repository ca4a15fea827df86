//! `ServerConfig`: a lock server's settings and limits, and the memory
//! budget they add up to. The limits bound what peers can make the server
//! hold; the size of a connection's push queue sits here beside them, as
//! the budget counts it.

use std::time::Duration;

use super::ledger::KEPT;
use super::waits::WAITER_OVERHEAD;

/// How many pushes may wait for the connection's task to write them. A
/// client that does not read fills it; further pushes are dropped, and
/// its waiters learn of their grants when they ask again.
pub(crate) const PUSH_QUEUE: usize = 256;

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

/// How many connections that had sent nothing when no slot was free may
/// wait, without a slot, for their first bytes (at most 100 ms each): a
/// client's handshake can be a moment behind its connection, and a flood
/// of silent connections must not keep it out. They hold a descriptor
/// each and nothing else.
pub const DOOR: usize = 256;

/// Settings of a [`LockServer`](super::LockServer).
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
    pub(super) client_token: String,
    pub(super) admin_token: Option<String>,
    /// Most lock ids (uids) one connection may hold locks under at once;
    /// beyond it, lock requests of a new uid are refused with an error.
    /// Several locks under one uid count once here (the byte limits below
    /// count each). Default 100,000.
    pub max_entries_per_connection: usize,
    /// Most bytes the locks granted over one connection may take in the lock
    /// table (names, uid, owner and source, plus the table's worst-case cost
    /// per name and per lock, about 900 and 560 bytes); beyond it, new locks
    /// are refused with an error. Default 64 MiB: about 39,000 single-name
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
    /// past it the oldest are forgotten early. The uids forced open take at
    /// most half of it, apart: releases never push them out. Default
    /// 64 MiB, about 500,000 UUID uids.
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
    /// theirs. Default 4; with 0 nothing is kept for the admin, who then
    /// competes with the clients (the command line refuses 0).
    pub admin_reserve: usize,
    /// Most connections authenticated with the client token from one IP
    /// address, loopback included; a connection beyond it is rejected in
    /// its handshake, saying why. Connections with the admin token are not
    /// counted. Default 64.
    pub max_connections_per_address: usize,
    /// Most connections that had sent nothing when they were accepted while
    /// every slot was taken, waiting without a slot (at most 100 ms each)
    /// for their first bytes, which then take the place of a silent
    /// connection: a client's handshake can be a moment behind its
    /// connection, and a flood of silent connections must not keep it out.
    /// Each holds a descriptor and nothing else; 0 closes such connections
    /// at once. Default [`DOOR`] (256).
    pub door: usize,
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
            door: DOOR,
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
    ///   with TLS (a ClientHello rustls keeps while it waits for its end),
    ///   plus 1 KiB for each of the `door` connections waiting for their
    ///   first bytes without a slot;
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
        // A connection at the door holds its socket's registration and its
        // place in the door's list: far below 1 KiB.
        let door = self.door.saturating_mul(1024);
        let unauthenticated = conns.saturating_mul(per_peer).saturating_add(door);
        let waiters = self
            .max_waiters_per_connection
            .saturating_mul(WAITER_OVERHEAD)
            .saturating_add(PUSH_QUEUE * (super::MAX_UID_LEN + PUSH_OVERHEAD));
        let per_client = (2 * super::MAX_FRAME + CONNECTION_OVERHEAD + tls).saturating_add(waiters);
        let client = conns
            .saturating_mul(per_client)
            .saturating_add(door)
            .saturating_add(self.max_lock_bytes)
            .saturating_add(KEPT)
            .saturating_add(self.max_released_bytes);
        MemoryBudget {
            unauthenticated,
            client,
        }
    }

    /// Every connection that may be open at once, in its handshake or
    /// authenticated, besides those being evicted.
    pub(super) fn slots(&self) -> usize {
        self.max_connections.saturating_add(self.admin_reserve)
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
            .field("door", &self.door)
            .field("idle_timeout", &self.idle_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("remember_released", &self.remember_released)
            .finish_non_exhaustive()
    }
}
