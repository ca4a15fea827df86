//! Reproduces a past break: a read release naming a uid's write lock removes nothing, yet drops the lock's charge because the uid waited to read elsewhere, so a connection holds write locks past its byte limit.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, reservation, start, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// The 200 names of `uid`'s write lock.
fn names(uid: &str) -> Vec<String> {
    (0..200).map(|i| format!("{uid}-n{i}")).collect()
}

/// docs/lock-servers.md: "Locks count against their connection (100,000
/// locks or 64 MiB) ... A lock stays counted until it is released, or
/// until it expired", and a release "in the wrong mode removes nothing and
/// must not make the entries free of charge" (src/net/requests.rs). A
/// client with the client token takes a write lock of 200 names under a
/// uid, asks under the same uid to wait to read a name someone else holds
/// (a place in line), and sends a read release (`RUnlock`) naming the
/// write lock's names. The release removes nothing (a writer cannot
/// release through `runlock`, it answers false), but since the uid's place
/// was a read wait, the server takes the release as having left nothing
/// of the uid and drops the write lock's charge. Repeated under new uids,
/// the connection holds write lock after write lock, far past
/// `max_bytes_per_connection`, each standing its validity. Bounded: each
/// call 10 s, 40 rounds, well within the 60 s validity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_release_of_a_write_lock_keeps_its_charge_while_its_uid_waits_to_read() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 2 * 1024 * 1024;
    let node = start(config).await;
    let connect = || RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN));
    let holder = connect().await.unwrap();
    let blocked = vec!["blocked".to_string()];
    assert!(holder.lock(&args("holder", &blocked)).await.unwrap());
    let client = connect().await.unwrap();
    let within = Duration::from_secs(10);
    let mut held = 0;
    for round in 0..40 {
        let uid = format!("w{round}");
        let lock = args(&uid, &names(&uid));
        let granted = tokio::time::timeout(within, client.lock(&lock))
            .await
            .expect("an answer within 10 s");
        if !matches!(granted, Ok(true)) {
            break;
        }
        held += 1;
        let waited = tokio::time::timeout(
            within,
            client.lock_wait(&args(&uid, &blocked), LockMode::Read, &reservation()),
        )
        .await
        .expect("an answer within 10 s");
        assert!(
            matches!(waited, Ok(WaitReply::Refused | WaitReply::Queued)),
            "round {round}: the uid keeps a place, not {waited:?}"
        );
        let released = tokio::time::timeout(within, client.runlock(&lock))
            .await
            .expect("an answer within 10 s");
        assert!(
            matches!(released, Ok(false)),
            "round {round}: a read release of a write lock removes nothing, not {released:?}"
        );
    }
    // Every write lock granted still stands in the table.
    let standing = node
        .locker
        .snapshot()
        .iter()
        .filter(|info| info.uid.starts_with('w') && info.mode == LockMode::Write)
        .count();
    assert_eq!(standing, held * 200, "the write locks still stand");
    assert!(
        held < 40,
        "the connection holds {held} write locks of 200 names ({standing} entries) past its \
         limit of {} bytes: the server charges {} bytes in all, each lock's charge dropped by a \
         read release that removed nothing",
        2 * 1024 * 1024,
        node.stats.lock_bytes()
    );
    drop(client);
    drop(holder);
}
