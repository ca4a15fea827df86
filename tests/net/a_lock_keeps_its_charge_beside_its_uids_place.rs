//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released, or until it expired"; "A place is charged as a lock is
//! while its connection keeps it", and one a uid keeps "beside its own
//! lock on the same names (waiting for the write lock while it holds the
//! read lock) is charged apart from that lock"; and a release "in the
//! wrong mode removes nothing and must not make the entries free of
//! charge" (src/net/requests.rs).
//!
//! In each scene a client with the client token takes, round after round
//! under new uids, a lock of 200 names, gives its uid a place in line, and
//! then does what once dropped the lock's charge with the place's. Each
//! reproduces a past break, in which the connection held lock after lock
//! far past `max_bytes_per_connection`. Bounded: each call 10 s, at most
//! 60 rounds, well within the 60 s validity.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, reservation, start, TOKEN};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, WaitReply};

const LIMIT: usize = 2 * 1024 * 1024;

/// The 200 names of `uid`'s lock.
fn names(uid: &str) -> Vec<String> {
    (0..200).map(|i| format!("{uid}-n{i}")).collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scene {
    /// A read lock, a wait for the write lock on its names, then a write
    /// release, which ends the place and removes no entry.
    WriteReleaseOfAReadLockWaitingToWrite,
    /// A write lock, a wait to read a name someone else holds, then a read
    /// release of the write lock's names, which removes nothing.
    ReadReleaseOfAWriteLockWaitingToRead,
    /// A read lock, a wait for the write lock on its names, then a wait for
    /// the write lock on those names and one more, which supersedes the
    /// older place on the names it renews.
    WaitForMoreNamesBesideAReadLock,
}

async fn rounds(scene: Scene) {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = LIMIT;
    let node = start(config).await;
    let connect = || RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN));
    let blocked = vec!["blocked".to_string()];
    let holder = connect().await.unwrap();
    assert!(holder.lock(&args("holder", &blocked)).await.unwrap());
    let client = connect().await.unwrap();
    let mode = match scene {
        Scene::ReadReleaseOfAWriteLockWaitingToRead => LockMode::Write,
        _ => LockMode::Read,
    };
    let within = Duration::from_secs(10);
    // What one lock of 200 names is charged, alone on the server.
    let mut lock_charge = 0;
    let (mut granted, mut kept) = (0, 0);
    for round in 0..60 {
        let uid = format!("u{round}");
        let lock = args(&uid, &names(&uid));
        let before = node.stats.lock_bytes();
        let call = match mode {
            LockMode::Write => tokio::time::timeout(within, client.lock(&lock)).await,
            LockMode::Read => tokio::time::timeout(within, client.rlock(&lock)).await,
        };
        if !matches!(call.expect("an answer within 10 s"), Ok(true)) {
            break;
        }
        granted += 1;
        if round == 0 {
            lock_charge = node.stats.lock_bytes() - before;
        }
        let (wanted, wanted_mode) = match scene {
            Scene::ReadReleaseOfAWriteLockWaitingToRead => (args(&uid, &blocked), LockMode::Read),
            _ => (lock.clone(), LockMode::Write),
        };
        let waited = tokio::time::timeout(
            within,
            client.lock_wait(&wanted, wanted_mode, &reservation()),
        )
        .await
        .expect("an answer within 10 s");
        // A place beside a read lock is charged apart: it may be what
        // reaches the limit.
        if scene != Scene::ReadReleaseOfAWriteLockWaitingToRead
            && let Err(err) = &waited
            && err.to_string().contains("over its limit")
        {
            break;
        }
        assert!(
            matches!(waited, Ok(WaitReply::Refused | WaitReply::Queued)),
            "round {round}: the uid keeps a place, not {waited:?}"
        );
        match scene {
            Scene::WriteReleaseOfAReadLockWaitingToWrite => {
                let released = tokio::time::timeout(within, client.unlock(&lock)).await;
                let released = released.expect("an answer within 10 s");
                assert!(
                    matches!(released, Ok(false)),
                    "round {round}: a write release of a read lock removes no entry, not \
                     {released:?}"
                );
            }
            Scene::ReadReleaseOfAWriteLockWaitingToRead => {
                let released = tokio::time::timeout(within, client.runlock(&lock)).await;
                let released = released.expect("an answer within 10 s");
                assert!(
                    matches!(released, Ok(false)),
                    "round {round}: a read release of a write lock removes nothing, not \
                     {released:?}"
                );
            }
            Scene::WaitForMoreNamesBesideAReadLock => {
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
            }
        }
        kept += 1;
    }
    eprintln!("{scene:?}: {granted} locks granted, {kept} rounds kept, {lock_charge} bytes a lock");
    assert!(lock_charge > 0, "the first lock was charged");
    // Every lock granted still stands in the table.
    let standing = node
        .locker
        .snapshot()
        .iter()
        .filter(|info| info.uid.starts_with('u') && info.mode == mode)
        .count();
    assert_eq!(standing, granted * 200, "the locks still stand");
    let charged = node.stats.lock_bytes();
    match scene {
        Scene::WaitForMoreNamesBesideAReadLock => {
            let places = node.locker.waiting();
            assert!(places >= kept * 201, "the places still stand ({places})");
            // Each kept round holds a read lock of 200 names and a place on
            // 201: at least twice a read lock's charge, all on this
            // connection.
            assert!(
                kept * 2 * lock_charge <= LIMIT,
                "the connection keeps {kept} read locks of 200 names, each beside a place on 201 \
                 names ({standing} entries, {places} places), past its limit of {LIMIT} bytes at \
                 {lock_charge} bytes a read lock: the server charges {charged} bytes in all, each \
                 read lock's charge dropped when its uid asked again to wait for more names"
            );
        }
        _ => assert!(
            granted * lock_charge <= LIMIT,
            "the connection holds {granted} {mode:?} locks of 200 names ({standing} entries) past \
             its limit of {LIMIT} bytes at {lock_charge} bytes a lock: the server charges \
             {charged} bytes in all, each lock's charge dropped with its place by a release \
             ({scene:?}) that removed no entry"
        ),
    }
    drop((client, holder));
}

/// Reproduces a past break: a uid holding a read lock that gives up its
/// wait for the write lock on the same names with a write release lost the
/// read lock's charge too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_release_giving_up_a_wait_beside_a_read_lock_keeps_the_read_locks_charge() {
    rounds(Scene::WriteReleaseOfAReadLockWaitingToWrite).await;
}

/// Reproduces a past break: a read release naming a uid's write lock
/// removes nothing, yet dropped the lock's charge because the uid waited to
/// read elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_release_of_a_write_lock_keeps_its_charge_while_its_uid_waits_to_read() {
    rounds(Scene::ReadReleaseOfAWriteLockWaitingToRead).await;
}

/// Reproduces a past break: a uid holding a read lock and waiting for the
/// write lock on its names that asked again to wait for more names lost the
/// read lock's charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_more_names_beside_a_read_lock_keeps_the_read_locks_charge() {
    rounds(Scene::WaitForMoreNamesBesideAReadLock).await;
}
