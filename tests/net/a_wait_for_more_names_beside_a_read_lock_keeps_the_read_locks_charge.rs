//! Reproduces a past break: a uid holding a read lock and waiting for the write lock on its names that asks again to wait for more names loses the read lock's charge, so a connection holds read locks and places past its byte limit.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, reservation, start, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// The 200 names of `uid`'s read lock.
fn names(uid: &str) -> Vec<String> {
    (0..200).map(|i| format!("{uid}-n{i}")).collect()
}

/// docs/lock-servers.md: "A lock stays counted until it is released ...
/// or until it expired", "A place is charged as a lock is while its
/// connection keeps it", and one a uid keeps "beside its own lock on the
/// same names (waiting for the write lock while it holds the read lock) is
/// charged apart from that lock". A client with the client token takes a
/// read lock of 200 names under a uid, waits under the same uid for the
/// write lock on them (a place beside its read entries), then asks again
/// under that uid to wait for the write lock on those names and one more.
/// The newer request supersedes the older place on names it renews, and
/// the server drops the older place's set charge, which is also the read
/// lock's: the read entries still stand beside a place on 201 names, and
/// only the place is charged. Repeated under new uids, the connection
/// keeps about twice what its `max_bytes_per_connection` allows. Bounded:
/// each call 10 s, at most 60 rounds, well within the 60 s validity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_more_names_beside_a_read_lock_keeps_the_read_locks_charge() {
    const LIMIT: usize = 2 * 1024 * 1024;
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = LIMIT;
    let node = start(config).await;
    let client = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .unwrap();
    let within = Duration::from_secs(10);
    // What one read lock of 200 names is charged, alone on the server.
    let mut read_charge = 0;
    let mut kept = 0;
    for round in 0..60 {
        let uid = format!("r{round}");
        let lock = args(&uid, &names(&uid));
        let before = node.stats.lock_bytes();
        let granted = tokio::time::timeout(within, client.rlock(&lock))
            .await
            .expect("an answer within 10 s");
        if !matches!(granted, Ok(true)) {
            break;
        }
        if round == 0 {
            read_charge = node.stats.lock_bytes() - before;
        }
        let waited = tokio::time::timeout(
            within,
            client.lock_wait(&lock, LockMode::Write, &reservation()),
        )
        .await
        .expect("an answer within 10 s");
        if !matches!(waited, Ok(WaitReply::Refused | WaitReply::Queued)) {
            break;
        }
        let mut more_names = names(&uid);
        more_names.push(format!("{uid}-more"));
        let more = args(&uid, &more_names);
        let waited = tokio::time::timeout(
            within,
            client.lock_wait(&more, LockMode::Write, &reservation()),
        )
        .await
        .expect("an answer within 10 s");
        if !matches!(waited, Ok(WaitReply::Refused | WaitReply::Queued)) {
            break;
        }
        kept += 1;
    }
    assert!(read_charge > 0, "the first read lock was charged");
    // Every read lock of a round still stands in the table, with its
    // uid's place on 201 names.
    let standing = node
        .locker
        .snapshot()
        .iter()
        .filter(|info| info.uid.starts_with('r') && info.mode == LockMode::Read)
        .count();
    assert!(standing >= kept * 200, "the read locks still stand");
    let places = node.locker.waiting();
    assert!(places >= kept * 201, "the places still stand ({places})");
    // Each kept round holds a read lock of 200 names and a place on 201:
    // at least twice a read lock's charge, all on this connection.
    assert!(
        kept * 2 * read_charge <= LIMIT,
        "the connection keeps {kept} read locks of 200 names, each beside a place on 201 names \
         ({standing} entries, {places} places), past its limit of {LIMIT} bytes at {read_charge} \
         bytes a read lock: the server charges {} bytes in all, each read lock's charge dropped \
         when its uid asked again to wait for more names",
        node.stats.lock_bytes()
    );
    drop(client);
}
