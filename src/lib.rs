//! Distributed read/write locks over a quorum of lock servers, in the style of
//! MinIO's dsync.
//!
//! A [`Dsync`] coordinator sends every lock, unlock and refresh call in
//! parallel to `n` [`NetLocker`]s, one per lock-server node, and grants the
//! lock when a quorum agrees: `⌊n/2⌋ + 1` nodes for a write, `⌈n/2⌉` for a
//! read (see [`quorum`] for why those numbers are safe). [`LocalLocker`] is
//! the in-process lock table; a lock server exposes one over the network.
//!
//! ```
//! use std::sync::Arc;
//! use quorum_lock::{Dsync, LocalLocker, NetLocker};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), quorum_lock::Error> {
//! // An in-process five-node cluster; in production each locker is a server.
//! let lockers: Vec<Arc<dyn NetLocker>> =
//!     (0..5).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect();
//! let ds = Dsync::new(lockers)?;
//!
//! let mutex = ds.rw_mutex(["invoices/2026-11"])?;
//! let guard = mutex.lock().await?; // exclusive, granted by 3 of 5 nodes
//! // ... do the work the lock protects ...
//! guard.unlock().await?;
//! # Ok(())
//! # }
//! ```
//!
#![cfg_attr(
    not(feature = "net"),
    doc = "Over the network (feature `net`), each node runs a lock server and the
coordinator reaches each through a remote locker: see the `net` module.
"
)]
#![cfg_attr(
    feature = "net",
    doc = r##"
Over the network (feature `net`), each node runs a lock server (the
`quorum-lock server` command, or [`LockServer`](net::LockServer) inside a
program) and the coordinator reaches each through a
[`RemoteLocker`](net::RemoteLocker); [`net::connect_all`] makes one per
server. Servers that are down are not an error: their lockers connect in
the background, and the cluster works while a quorum is up.

```
use quorum_lock::Dsync;
use quorum_lock::net::{connect_all, RemoteConfig};
# use std::sync::Arc;
# use quorum_lock::LocalLocker;
# use quorum_lock::net::{LockServer, ServerConfig};

# #[tokio::main(flavor = "current_thread")]
# async fn main() -> Result<(), Box<dyn std::error::Error>> {
# // Three lock servers in this process, where a cluster has three machines.
# let mut nodes = Vec::new();
# for _ in 0..3 {
#     let server = LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new("s3cret"))?;
#     let (addr, serve) = server.bind("127.0.0.1:0".parse()?, std::future::pending()).await?;
#     tokio::spawn(serve);
#     nodes.push(addr.to_string());
# }
// The same servers on every client (in any order):
// ["10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070"], say.
let lockers = connect_all(&nodes, RemoteConfig::new("s3cret")).await?;
let ds = Dsync::new(lockers)?;

let guard = ds.rw_mutex(["invoices/2026-11"])?.lock().await?; // granted by 2 of 3 servers
// ... do the work the lock protects ...
guard.unlock().await?;
# Ok(())
# }
```
"##
)]
#![cfg_attr(
    feature = "tls",
    doc = "With the feature `tls` the connections can be TLS, mutual TLS too:
[`net::ServerTls`] and [`net::ClientTls`].
"
)]
//!
//! # How acquiring works
//!
//! `lock()` and `read()` wait in line ([`Waiting::Push`], the default). The
//! waiter draws a [`Ticket`] and sends a fresh uid with it to every locker at
//! once. A locker grants at once when the lock is free and nobody older
//! waits for it; otherwise it keeps the waiter's place, ordered by ticket,
//! grants it when its turn comes and pushes the news. The waiter holds the
//! lock once a quorum has granted, by reply or by push. A wait whose partial
//! grants block an older waiter gives them back and waits again with the
//! same ticket, so two waiters never wait for each other. Lockers without
//! queues are polled with a jittered, growing, capped backoff, which is also
//! how `try_lock()` and [`Waiting::Poll`] work: one round, decided as soon as
//! a quorum granted or can no longer grant, partial grants released in the
//! background.
//!
//! # Guarantees and limits
//!
//! * **Mutual exclusion while the lock servers are healthy.** Quorums
//!   intersect, and a locker never grants conflicting modes, so two
//!   conflicting holders cannot both be granted by the same lockers.
//! * **No leaked grants from cancellation.** Dropping an acquire future,
//!   an unlock future or a guard never leaves an entry on a locker: the
//!   outstanding calls finish on the runtime and undo what they granted.
//! * **Fencing tokens.** Like every lease-based lock (dsync, Redlock, etcd),
//!   a holder that stalls longer than the lock's validity can lose the lock
//!   without noticing in time. [`WriteGuard::fencing_token`] gives a token
//!   that grows between conflicting holders; a resource that checks it
//!   ([`FencingGate`]) refuses the stalled holder's late work.
//! * **Lock servers keep state in memory.** A server that restarts forgets
//!   its entries, and refuses new grants for a while to make up for it;
//!   the repository's docs/guarantees.md states the fault model (its
//!   assumptions and what is not guaranteed).
//!
//! # Cancel safety
//!
//! Every async method documents its cancel safety in a `# Cancel safety`
//! section, as `tokio::sync` does. All of them are cancel safe.
//!
//! # Runtime
//!
//! The library needs a tokio runtime with the time driver enabled. Calling
//! an acquire outside one returns [`Error::NoRuntime`] instead of panicking.
//!
//! It does not depend on any one runtime. Held locks are refreshed by one
//! background task on each runtime that holds one of a [`Dsync`]'s locks,
//! and each of those tasks serves every lock, so a lock is kept alive as
//! long as any such runtime is alive and driven. When none is (the process
//! stalled, or a guard is kept in synchronous code after `block_on`
//! returned), nothing is refreshed, but the guard still reports the loss on
//! time: [`WriteGuard::is_lost`] reads the clock against the lock's own
//! deadline rather than waiting to be told. Check it before acting on the
//! protected resource.

#![warn(missing_docs)]

mod election;
mod error;
mod groups;
mod local;
mod lock;
mod locker;
#[cfg(feature = "net")]
pub mod net;
pub mod quorum;
#[cfg(feature = "redis")]
pub mod redis;
mod reentrant;
mod semaphore;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod sql;
#[cfg(feature = "testing")]
pub mod testing;

pub use election::{Election, Leader, Leadership, Observer, ELECTION_PREFIX};
pub use error::{Error, Unreachable};
pub use groups::{GroupedMutex, GroupedReadGuard, GroupedWriteGuard, Groups};
pub use local::{LocalLocker, LockerConfig};
pub use lock::admin::{ClusterLock, ForceUnlocked};
pub use lock::config::{Lease, RetryPolicy, Timeouts, Waiting};
pub use lock::dsync::{Dsync, DsyncBuilder};
pub use lock::guard::{ReadGuard, WriteGuard};
pub use lock::mutex::DRWMutex;
/// The names of the metrics a `Dsync` records (feature `metrics`).
#[cfg(feature = "metrics")]
pub use lock::telemetry::names as metric_names;
pub use lock::wait_status::{Quarantined, WaitReason, WaitStatus};
pub use locker::args::{
    LockArgs, LockMode, MAX_OWNER_LEN, MAX_RESOURCES, MAX_RESOURCE_NAME_LEN, MAX_SOURCE_LEN,
    MAX_UID_LEN,
};
pub use locker::immediate::ImmediateLocker;
pub use locker::proclamation::{Proclamation, WatchArgs, MAX_VALUE_LEN};
pub use locker::redact::redact_url;
pub use locker::secrets::{mask_secrets, remember_secret};
pub use locker::wait::{PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake};
pub use locker::{LockInfo, NetLocker};
pub use quorum::fencing::{FencingGate, StaleToken, FENCE_CLOCK_TOLERANCE, FENCE_QUARANTINE};
pub use reentrant::{Holder, ReentrantGuard};
pub use semaphore::{Semaphore, SemaphorePermit, MAX_PERMITS, SEMAPHORE_PREFIX};

/// Compiles and runs the README's Rust snippets as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Compiles the Rust snippets of docs/semaphore.md as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/semaphore.md")]
pub struct SemaphoreDocDoctests;

/// Compiles the Rust snippets of docs/groups.md as doc tests (the one
/// that connects to lock servers only where the feature `net` is on).
#[cfg(all(doctest, feature = "net"))]
#[doc = include_str!("../docs/groups.md")]
pub struct GroupsDocDoctests;
