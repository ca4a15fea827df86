//! Reproduces a past break: connections closing behind the clean-up thread give their slots back but keep their sockets, so a client with the client token makes the server hold more sockets than max_connections + admin_reserve.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{args, places_on, remote, start, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::NetLocker;

/// Sockets of the server's side still open on `port` (established, or
/// closed by the peer and not yet by the server), from /proc/net/tcp:
/// each a descriptor of the server's.
fn server_sockets(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let local = cols
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            local == Some(port) && matches!(cols.get(3), Some(&"01") | Some(&"08"))
        })
        .count()
}

/// `ServerConfig::max_connections`: "With `admin_reserve`, also bounds the
/// connections served at once (`max_connections + admin_reserve`), so that
/// the server never runs out of file descriptors" (`ulimit -n` lowers
/// it). A server of `CLOSING + 1` client slots, 1 for the admin, no door.
/// A holder keeps "held"; a client with the client token fills the other
/// slots with connections of 1,001 places on it each (over the 1,000 names
/// a close ends on the spot) and closes them: their clean-ups, each walking
/// a line of thousands of places 1,001 times, keep the server's one
/// clean-up thread busy. The client opens as many connections again at
/// once. The break: each closed connection gave its slot back at once but
/// kept its socket until its clean-up was done, so the server held nearly
/// twice its bound of sockets, and as many more as the client opened while
/// the clean-ups ran (with a real `ulimit -n`, `accept` then fails, the
/// admin's included). Bounded: each connect 1 s, 20 s in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closing_behind_the_clean_up_thread_keep_the_server_within_its_descriptors() {
    const CLOSING: usize = 5;
    let mut config = ServerConfig::new(TOKEN);
    config.max_connections = CLOSING + 1;
    config.admin_reserve = 1;
    config.door = 0;
    let node = start(config).await;
    let port: u16 = node.addr.rsplit(':').next().unwrap().parse().unwrap();
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let mut line = Vec::new();
    for conn in 0..CLOSING {
        let client = remote(&node).await;
        places_on(&client, &format!("line{conn}"), 1001, &held).await;
        line.push(client);
    }
    assert_eq!(node.locker.waiting(), CLOSING * 1001);
    drop(line);
    let closed = Instant::now();
    let mut again = Vec::new();
    while again.len() < CLOSING && closed.elapsed() < Duration::from_secs(20) {
        let mut config = RemoteConfig::new(TOKEN);
        config.connect_timeout = Duration::from_secs(1);
        match RemoteLocker::connect(node.addr.clone(), config).await {
            Ok(client) if client.is_online() => again.push(client),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    let sockets = server_sockets(port);
    let waiting = node.locker.waiting();
    assert!(
        sockets <= CLOSING + 2,
        "the server held {sockets} sockets for a server of {} slots, {} connections opened \
         after {CLOSING} closed {:?} before, whose places were not all ended ({waiting} places \
         left)",
        CLOSING + 2,
        again.len(),
        closed.elapsed()
    );
    drop(again);
    drop(holder);
}
