//! One lock server over a fresh `LocalLocker` on a free loopback port, for
//! the tests of this binary that look at the server's table and limits.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerStats};
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, Ticket, WaitArgs};
use tokio::sync::oneshot;

/// The client token every test here configures.
pub const TOKEN: &str = "client-secret";

/// A running server: its address, its table, its counters. It stops when
/// this is dropped.
pub struct Node {
    pub addr: String,
    pub locker: Arc<LocalLocker>,
    pub stats: ServerStats,
    _stop: oneshot::Sender<()>,
}

/// Starts a server with `config` on 127.0.0.1, on a port of its own.
pub async fn start(config: ServerConfig) -> Node {
    start_over(LockerConfig::default(), config).await
}

/// [`start`], over a locker of `locker_config` (a short validity, say).
pub async fn start_over(locker_config: LockerConfig, config: ServerConfig) -> Node {
    let locker = Arc::new(LocalLocker::with_config("local", locker_config));
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let stats = server.stats();
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound, serve) = server
        .bind("127.0.0.1:0".parse().expect("an address"), async {
            let _ = stopped.await;
        })
        .await
        .expect("bind loopback");
    tokio::spawn(serve);
    Node {
        addr: bound.to_string(),
        locker,
        stats,
        _stop: stop,
    }
}

/// A client connection to `node` with [`TOKEN`].
pub async fn remote(node: &Node) -> RemoteLocker {
    RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .expect("connect")
}

/// Arguments of `uid` on `names`, as a test of places in line sends them.
pub fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "places".into(),
        source: "tests/net".into(),
        quorum: 1,
    }
}

/// 200 names of step `step`, and the held name, so that a wait on them
/// keeps a reservation.
pub fn names(step: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..200).map(|i| format!("s{step:03}-{i:04}")).collect();
    names.push("held".to_string());
    names
}

/// A wait without pushes, whose place the server keeps for 60 s.
pub fn reservation() -> WaitArgs {
    reservation_with(Ticket::now())
}

/// [`reservation`] under `ticket`: a waiter asking again keeps its ticket.
pub fn reservation_with(ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(60),
        wake: None,
    }
}

/// The places `node`'s table keeps once the clean-ups of the connections
/// closed so far ran: a sentinel connection keeps a place on `on` (held by
/// someone else) and closes, and its clean-up runs after theirs (they run
/// in the order handed over); then the count is read until `settled`
/// says so, for half a second at most.
pub async fn places_once_clean_ups_ran(
    node: &Node,
    step: usize,
    on: &[String],
    settled: impl Fn(usize) -> bool,
) -> usize {
    use quorum_lock::{LockMode, NetLocker, WaitReply};
    let sentinel = remote(node).await;
    let sentinel_uid = format!("sentinel{step}");
    let reply = sentinel
        .lock_wait(&args(&sentinel_uid, on), LockMode::Write, &reservation())
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Refused, "step {step}: the sentinel waits");
    drop(sentinel);
    let mut places = node.locker.waiting();
    for _ in 0..50 {
        if settled(places) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        places = node.locker.waiting();
    }
    places
}

/// `conns` connections to `node`, each keeping as many places as its
/// limits let it (within the defaults) on requests of 1,000 names: 999
/// of its own and `held`, which someone else must hold so that each wait
/// keeps a reservation. About 61,000 places on names per connection.
pub async fn heavy_connections(node: &Node, conns: usize) -> Vec<RemoteLocker> {
    use quorum_lock::{LockMode, NetLocker, WaitReply};
    let mut heavy = Vec::new();
    for conn in 0..conns {
        let client = remote(node).await;
        for place in 0..1024 {
            let mut names: Vec<String> = (0..999).map(|i| format!("c{conn}p{place}n{i}")).collect();
            names.push("held".to_string());
            let reply = client
                .lock_wait(
                    &args(&format!("c{conn}p{place}"), &names),
                    LockMode::Write,
                    &reservation(),
                )
                .await;
            match reply {
                Ok(WaitReply::Refused) => {}
                Ok(other) => panic!("a reservation, not {other:?}"),
                Err(_) => break, // the connection's limits
            }
        }
        heavy.push(client);
    }
    heavy
}

/// Keeps `count` places on `held` over `client`, under uids `prefix-i`,
/// 50 requests in flight at a time: a long line, each place a reservation.
pub async fn places_on(client: &RemoteLocker, prefix: &str, count: usize, held: &[String]) {
    use quorum_lock::{LockMode, NetLocker, WaitReply};
    for chunk in (0..count).collect::<Vec<_>>().chunks(50) {
        let waits = chunk.iter().map(|i| {
            let uid = format!("{prefix}-{i}");
            async move {
                client
                    .lock_wait(&args(&uid, held), LockMode::Write, &reservation())
                    .await
            }
        });
        for reply in futures::future::join_all(waits).await {
            assert_eq!(reply.unwrap(), WaitReply::Refused, "a reservation");
        }
    }
}
