//! The network transport in one process (feature `net`): the wire format
//! against malformed and hostile input, the server's limits, races between
//! connections, reconnects, connecting to a cluster, TLS (per-node names,
//! mutual TLS), and the validity a server announces.

#[cfg(feature = "net")]
#[path = "../net_support/wire.rs"]
mod wire;

mod connect;
mod expiry;
mod fuzz;
mod late_validity;
mod limits;
mod races;
mod reconnect;
mod tls;
mod transport;
