//! Reproduces a past break: a uid holding a read lock that gives up its wait for the write lock on the same names with a write release loses the read lock's charge too, so a connection holds read locks past its byte limit.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, reservation, start, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// The 200 names of `uid`'s lock.
fn names(uid: &str) -> Vec<String> {
    (0..200).map(|i| format!("{uid}-n{i}")).collect()
}

/// docs/lock-servers.md: "A lock stays counted until it is released, or
/// until it expired", and a place "one a uid keeps beside its own lock on
/// the same names (waiting for the write lock while it holds the read
/// lock) is charged apart from that lock". A client with the client token
/// takes a read lock of 200 names under a uid, asks under the same uid to
/// wait for the write lock on them (a place beside its read entries), then
/// gives the wait up with a write release (`Unlock`) of those names. The
/// release ends the place but removes no entry (it answers false: the uid
/// reads), yet the server drops the read lock's charge with the place's.
/// Repeated under new uids, the connection holds read lock after read
/// lock, far past `max_bytes_per_connection`. Bounded: each call 10 s, 40
/// rounds, well within the 60 s validity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_release_giving_up_a_wait_beside_a_read_lock_keeps_the_read_locks_charge() {
    const LIMIT: usize = 2 * 1024 * 1024;
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = LIMIT;
    let node = start(config).await;
    let client = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .unwrap();
    let within = Duration::from_secs(10);
    let mut held = 0;
    for round in 0..40 {
        let uid = format!("r{round}");
        let lock = args(&uid, &names(&uid));
        let granted = tokio::time::timeout(within, client.rlock(&lock))
            .await
            .expect("an answer within 10 s");
        if !matches!(granted, Ok(true)) {
            break;
        }
        held += 1;
        let waited = tokio::time::timeout(
            within,
            client.lock_wait(&lock, LockMode::Write, &reservation()),
        )
        .await
        .expect("an answer within 10 s");
        // The place beside the read lock is charged apart: it may be what
        // reaches the limit.
        if let Err(err) = &waited
            && err.to_string().contains("over its limit")
        {
            break;
        }
        assert!(
            matches!(waited, Ok(WaitReply::Refused | WaitReply::Queued)),
            "round {round}: the uid keeps a place beside its read lock, not {waited:?}"
        );
        let released = tokio::time::timeout(within, client.unlock(&lock))
            .await
            .expect("an answer within 10 s");
        assert!(
            matches!(released, Ok(false)),
            "round {round}: a write release of a read lock removes no entry, not {released:?}"
        );
    }
    // Every read lock granted still stands in the table.
    let standing = node
        .locker
        .snapshot()
        .iter()
        .filter(|info| info.uid.starts_with('r') && info.mode == LockMode::Read)
        .count();
    assert_eq!(standing, held * 200, "the read locks still stand");
    assert!(
        held < 40,
        "the connection holds {held} read locks of 200 names ({standing} entries) past its \
         limit of {LIMIT} bytes: the server charges {} bytes in all, each lock's charge dropped \
         with its place beside it by a write release that removed no entry",
        node.stats.lock_bytes()
    );
    drop(client);
}
