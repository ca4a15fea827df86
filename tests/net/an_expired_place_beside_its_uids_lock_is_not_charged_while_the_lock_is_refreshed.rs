//! Reproduces a past break: a place that expired beside an entry of its uid kept its set's charge, which every refresh of the uid's lock then kept alive, so the connection was charged for a place the table no longer kept.
//!
//! docs/lock-servers.md: "A place is charged as a lock is while its
//! connection keeps it", and a charge goes when the place ends without a
//! grant. `u` holds "a" and waits, for 300 ms, for "a" and "b" (held by
//! another uid). The place expires; the server settles it at the
//! connection's next wait. Its set's charge stayed because `u` held an
//! entry on "a", although `u`'s own lock on "a" pays for that entry, and
//! each refresh of `u` touched the orphaned charge with the rest. Real
//! time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_place_beside_its_uids_lock_is_not_charged_while_the_lock_is_refreshed() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let (client, other) = (remote(&node).await, remote(&node).await);
    let within = Duration::from_secs(5);
    let (a, b) = (["a".to_owned()], ["b".to_owned()]);
    let held = args("u", &a);
    let call = tokio::time::timeout(within, client.lock(&held));
    assert!(call
        .await
        .expect("u's lock on a: an answer within 5 s")
        .unwrap());
    let theirs = args("v", &b);
    let call = tokio::time::timeout(within, other.lock(&theirs));
    assert!(call
        .await
        .expect("v's lock on b: an answer within 5 s")
        .unwrap());
    let both = args("u", &["a".to_owned(), "b".to_owned()]);
    let before = node.stats.lock_bytes();
    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    let call = tokio::time::timeout(within, client.lock_wait(&both, LockMode::Write, &short));
    let waited = call.await.expect("u's wait: an answer within 5 s").unwrap();
    assert!(
        matches!(waited, WaitReply::Queued | WaitReply::Refused),
        "{waited:?}"
    );
    assert!(node.stats.lock_bytes() > before, "the place is charged");

    // A connection looks for its expired places at most once a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // The connection's next wait settles the expired place; its own lock
    // (on a free name, granted at once) is released again.
    let free = args("x", &["c".to_owned()]);
    let wait = reservation();
    let call = tokio::time::timeout(within, client.lock_wait(&free, LockMode::Write, &wait));
    assert_eq!(
        call.await.expect("x's wait: an answer within 5 s").unwrap(),
        WaitReply::Granted
    );
    let call = tokio::time::timeout(within, client.unlock(&free));
    assert!(call
        .await
        .expect("x's release: an answer within 5 s")
        .unwrap());
    for _ in 0..3 {
        let call = tokio::time::timeout(within, client.refresh(&held));
        assert!(call
            .await
            .expect("u's refresh: an answer within 5 s")
            .unwrap());
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    assert_eq!(
        node.stats.lock_bytes(),
        before,
        "after u's place on a and b expired, the server still charges its bytes (u's lock on a \
         and v's on b were charged {before} bytes before the wait)"
    );
}
