//! Reproduces: a waiter asking again under the same uid for fewer names, over a connection whose byte limit its current place fills, is refused, though only the narrower place stands afterwards.
//!
//! docs/lock-servers.md, "Limits and memory": "A waiter that asks again
//! over its connection with the same ticket under a new uid (or with the
//! same uid for other names) keeps the places of its newest request only,
//! on every name, and only those are charged"; and "Two requests are
//! admitted before the table answers, and so may be refused over a full
//! connection though what would stand afterwards fits: a waiter asking
//! again with its ticket under a new uid ..., and a wait the table would
//! grant at once on a connection that keeps as many places as it may".
//! The same uid asking for other names is neither.
//!
//! Scene: a first server measures what U's place on "x" and "y" is
//! charged. A second allows each connection exactly that. Over B, V locks
//! "x" and "y". Over A, U waits (pushed, ticket (1,1)) for "x" and "y":
//! queued, A full. U asks again, same uid and ticket, for "x" alone: what
//! would stand afterwards (U's place on "x") is less than A's limit, and
//! the request is to be queued. Real time (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate_as, call, lock_request, lock_wait_request, OP_LOCK, QUEUED, REPLY_BOOL,
    REPLY_WAIT, VERSION_6,
};

const TTL: Duration = Duration::from_secs(30);

/// What U's lock on `names` is charged.
async fn charge(names: &[&str]) -> usize {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(
        call(&mut a, 1, &lock_request(1, OP_LOCK, "U", names)).await,
        [REPLY_BOOL, 1]
    );
    node.stats.lock_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_narrowed_over_a_connection_its_place_fills_is_renewed() {
    let wide = charge(&["x", "y"]).await;
    let narrow = charge(&["x"]).await;
    assert!(narrow < wide, "{narrow} < {wide}");
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    config.max_bytes_per_connection = wide;
    let node = start(config).await;
    let (mut a, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();
    let (mut b, _) = authenticate_as(&node.addr, TOKEN, VERSION_6).await.unwrap();

    assert_eq!(
        call(&mut b, 1, &lock_request(1, OP_LOCK, "V", &["x", "y"])).await,
        [REPLY_BOOL, 1],
        "V locks x and y over B"
    );
    let first = call(
        &mut a,
        1,
        &lock_wait_request(1, "U", &["x", "y"], (1, 1), TTL, true),
    )
    .await;
    assert_eq!(
        first[..2],
        [REPLY_WAIT, QUEUED],
        "U waits for x and y: {first:?}"
    );
    let again = call(
        &mut a,
        2,
        &lock_wait_request(2, "U", &["x"], (1, 1), TTL, true),
    )
    .await;
    assert_eq!(
        again[..2],
        [REPLY_WAIT, QUEUED],
        "U asks again for x alone over A, whose limit ({wide} bytes) holds its place on x and y \
         and so the narrower place ({narrow} bytes) that would stand alone afterwards: refused \
         with {:?}",
        String::from_utf8_lossy(&again)
    );
    drop((a, b));
}
