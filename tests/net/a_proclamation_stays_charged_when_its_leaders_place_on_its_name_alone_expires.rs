//! docs/lock-servers.md, "Limits and memory": "a leader's proclamation
//! counts its value, name and uid plus about 840 bytes against the
//! leader's lock, and goes with its release"; "A place that ends without
//! a grant gives its charge back" (the place's charge, not the
//! proclamation's).
//!
//! `u` holds the write lock on "a" and "c" (one set) and proclaims on "a"
//! with a 4 KiB value: the ledger charges the proclamation under the hash
//! of the one-name set ["a"]. `u` then waits, for 300 ms and without
//! pushes, to read "a" (which it holds for writing, so it keeps a place):
//! the set ["a"] is charged for the place alone (`SetCharge::for_place`).
//! When the place expires, `end_places` gives that charge back, as it
//! should, but by `release_if_charged_to`, which drops `Gone::Set` of the
//! hash of ["a"]: every set charge under that hash and the proclamation
//! charged under it too. The proclamation stands in the table, with `u`'s
//! write entry on "a", and nothing charges it for as long as `u`
//! refreshes its lock. Real time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LockMode, NetLocker, Proclamation, Ticket, WaitArgs, WaitReply};

use crate::node::{args, remote, reservation, start, TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proclamation_stays_charged_when_its_leaders_place_on_its_name_alone_expires() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let client = remote(&node).await;
    let within = Duration::from_secs(5);
    let lock = args("u", &["a".to_owned(), "c".to_owned()]);
    let call = tokio::time::timeout(within, client.lock(&lock));
    assert!(call
        .await
        .expect("u's write lock on a and c: an answer within 5 s")
        .unwrap());
    let election = args("u", &["a".to_owned()]);
    let p = Proclamation::new(1, 0, vec![b'x'; 4096]).expect("a proclamation");
    let call = tokio::time::timeout(within, client.proclaim(&election, &p));
    assert_eq!(
        call.await.expect("u's proclamation: an answer within 5 s"),
        Ok(true),
        "u holds a for writing: its proclamation is kept"
    );
    let before = node.stats.lock_bytes();

    let short = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_millis(300),
        wake: None,
    };
    let call = tokio::time::timeout(within, client.lock_wait(&election, LockMode::Read, &short));
    let waited = call.await.expect("u's wait: an answer within 5 s").unwrap();
    assert!(
        matches!(waited, WaitReply::Queued | WaitReply::Refused),
        "u holds a for writing: its read wait keeps a place, not {waited:?}"
    );
    assert!(node.stats.lock_bytes() > before, "the place is charged");

    // A connection looks for its expired places at most once a second.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // The next wait settles the expired place; its own lock (on a free
    // name, granted at once) is released again.
    let free = args("x", &["d".to_owned()]);
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
        let call = tokio::time::timeout(within, client.refresh(&lock));
        assert!(call
            .await
            .expect("u's refresh: an answer within 5 s")
            .unwrap());
    }
    assert_eq!(node.locker.waiting(), 0, "the place expired from the table");
    let call = tokio::time::timeout(within, client.leader(&election, None));
    let leader = call.await.expect("the leader of a: an answer within 5 s");
    assert!(
        matches!(&leader, Ok(Some(_))),
        "u's write entry on a stands, and its proclamation with it: {leader:?}"
    );
    let now = node.stats.lock_bytes();
    assert!(
        now >= before,
        "u's write lock on a and c and its proclamation on a stand in the table, refreshed, and \
         were charged {before} bytes; after u's read place on a expired the server charges {now} \
         bytes: the place's end gave the proclamation's charge back with its own"
    );
}
