//! Reproduces a past break: a uid holding a read lock that waits for a write lock on the same names gets a place the table keeps beside its entries, charged nothing, so a connection keeps places past its byte limit.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, start_over, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, LockerConfig, NetLocker, Ticket, WaitArgs, WaitReply};

/// The 200 names of `uid`'s lock.
fn names(uid: &str) -> Vec<String> {
    (0..200).map(|i| format!("{uid}-n{i}")).collect()
}

/// docs/lock-servers.md: "A place is charged as a lock is while its
/// connection keeps it", and per connection at most
/// `max_bytes_per_connection`. A client fills its connection's byte limit
/// with read locks of 200 names, then asks, under each of those uids, to
/// wait for a write lock on the same names. The table cannot grant it (a
/// uid holding a name in one mode conflicts with itself in the other) and
/// keeps a place on every name beside the uid's read entries. The charge
/// per name (`NAME_OVERHEAD`, src/local/table/budget.rs) covers "the
/// larger of what an entry and a place add", not both, and the place keeps
/// its own request's list of names alive beside the lock's; but the ledger
/// finds the set already charged and charges nothing for the places. Bounded: each call 10 s, 200 locks and places, all
/// well within the 60 s validity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_beside_its_uids_own_read_lock_is_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 2 * 1024 * 1024;
    let node = start_over(LockerConfig::default(), config).await;
    let locker = node.locker.clone();
    let stats = node.stats.clone();
    let client = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .unwrap();
    let mut kept = 0;
    while kept < 200 {
        let uid = format!("a{kept}");
        let lock = args(&uid, &names(&uid));
        let granted = tokio::time::timeout(Duration::from_secs(10), client.rlock(&lock))
            .await
            .expect("an answer within 10 s");
        match granted {
            Ok(true) => kept += 1,
            _ => break,
        }
    }
    assert!(kept > 0 && kept < 200, "the byte limit refused lock {kept}");
    let charged = stats.lock_bytes();
    let mut places = 0;
    for i in 0..kept {
        let uid = format!("a{i}");
        let wait = WaitArgs {
            ticket: Ticket::now(),
            place_ttl: Duration::from_secs(60),
            wake: None,
        };
        let reply = tokio::time::timeout(
            Duration::from_secs(10),
            client.lock_wait(&args(&uid, &names(&uid)), LockMode::Write, &wait),
        )
        .await
        .expect("an answer within 10 s");
        if matches!(reply, Ok(WaitReply::Refused | WaitReply::Queued)) {
            places += 1;
        }
    }
    let waiting = locker.waiting();
    assert!(
        waiting == 0 || stats.lock_bytes() > charged,
        "the connection held {kept} read locks up to its byte limit ({charged} bytes charged), \
         then kept {places} places beside them under the same uids ({waiting} places on names) \
         for {} bytes charged",
        stats.lock_bytes()
    );
    drop(node);
}
