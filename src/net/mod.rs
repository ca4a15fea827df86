//! The network transport (feature `net`): [`LockServer`] serves a
//! [`LocalLocker`](crate::LocalLocker) over TCP and [`RemoteLocker`] is the
//! [`NetLocker`](crate::NetLocker) that talks to one.
//!
//! The protocol is length-prefixed frames over one persistent TCP
//! connection per server, each frame a postcard-encoded message; requests
//! carry ids so many calls share the connection. PROTOCOL.md in the
//! repository is the specification, with the measurements that chose it.
//!
//! Every connection starts with a handshake carrying a shared secret: the
//! client token allows locking, unlocking and refreshing by uid, the admin
//! token also allows listing and forcing resources open.
//!
//! ```
//! use std::sync::Arc;
//! use quorum_lock::{Dsync, LocalLocker, NetLocker};
//! use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
//! for _ in 0..3 {
//!     let server = LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new("secret"))?;
//!     let (addr, serve) = server.bind("127.0.0.1:0".parse()?, std::future::pending()).await?;
//!     tokio::spawn(serve);
//!     lockers.push(Arc::new(RemoteLocker::connect(addr.to_string(), RemoteConfig::new("secret")).await?));
//! }
//! let ds = Dsync::new(lockers)?;
//! let guard = ds.rw_mutex(["over-the-wire"])?.lock().await?;
//! guard.unlock().await?;
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod ceiling;
mod client;
mod closings;
mod config;
mod conn;
mod connect;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod decoding;
mod door;
mod expiry;
mod framing;
mod io;
mod labels;
mod ledger;
mod malformed;
mod metrics;
mod peer_log;
mod pushes;
mod queueing;
mod recorders;
mod refusals;
mod requests;
mod sampler;
mod server;
mod session;
mod sink;
mod sniff;
mod state;
#[cfg(feature = "tls")]
mod tls;
mod token;
mod waits;
mod wire;

pub use client::{RemoteConfig, RemoteLocker, ServerHealth};
pub use config::{
    MemoryBudget, ServerConfig, CONNECTION_OVERHEAD, DOOR, EVICTING, TLS_HANDSHAKE_BUFFER,
};
pub use connect::connect_all;
pub use server::{listen, LockServer, ServerStats, LISTEN_BACKLOG};
#[cfg(feature = "tls")]
pub use tls::{ClientTls, ServerTls};
pub use wire::{
    MAX_FRAME, MAX_HELLO_FRAME, MAX_OWNER_LEN, MAX_SOURCE_LEN, MAX_TOKEN_LEN, MAX_UID_LEN,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
