//! Connections to a lock server of this binary's tests, authenticated
//! with the test token, and the server they are made to.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::LockerConfig;
use tokio::net::TcpStream;

use crate::node::{start_over, Node, TOKEN};
use crate::wire::{authenticate_as, VERSION_6};

/// A server over a locker whose entries last 1 s, which closes no idle
/// connection, and `N` connections authenticated to it at protocol
/// version 6: the scenes that follow a place's charge through its grant
/// and its end.
pub async fn one_second_node_and<const N: usize>() -> (Node, [TcpStream; N]) {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let locker = LockerConfig {
        validity: Duration::from_secs(1),
        ..LockerConfig::default()
    };
    let node = start_over(locker, config).await;
    let connections = authenticated(&node).await;
    (node, connections)
}

/// `N` connections to `node`, each authenticated with [`TOKEN`] at
/// protocol version 6.
pub async fn authenticated<const N: usize>(node: &Node) -> [TcpStream; N] {
    let mut connections = Vec::with_capacity(N);
    for _ in 0..N {
        let (stream, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
        connections.push(stream);
    }
    let Ok(connections) = connections.try_into() else {
        unreachable!("{N} connections made")
    };
    connections
}
