//! Reproduces a past break: after an admin forced open one name of each of a client's two-name locks, the client keeps the other names' entries alive and uncharged for as long as it likes by refreshing each lock's whole set, and fills the lock table's cap again on top of them.
//!
//! docs/lock-servers.md, "A compromised client": forcing a name open gives
//! back at once the charge of every lock that held it, and "a lock on more
//! names than were forced keeps its entries on the others, uncharged,
//! until they expire within the validity". A refresh of the whole set
//! finds the forced name missing, so it answers `false`, but it refreshes
//! the entries it still finds, and since it found one it is not a refresh
//! "that refreshes nothing": the charge it would need is gone, and the
//! server neither charges the entries again nor drops them. They never
//! expire while the client refreshes, and the ledger no longer counts them:
//! the table holds more than `max_lock_bytes` lets one client take.
//!
//! A server with a 16 KiB lock table, a 1 s validity and an admin token; a
//! client fills the table with locks on two names each, the admin forces
//! the first name of each open (as `quorum-lock force-unlock NAME` does),
//! the client refreshes each lock's two names every 200 ms for three
//! validities, then fills the table again. Real time (sockets), every
//! call bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};
use tokio::sync::oneshot;

use crate::node::TOKEN;

const ADMIN: &str = "admin-secret";
const LIMIT: Duration = Duration::from_secs(5);
const VALIDITY: Duration = Duration::from_secs(1);

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "culprit".into(),
        source: "tests/net/entries_left_by_a_partial_force_count_against_the_client_however_it_refreshes.rs"
            .into(),
        quorum: 1,
    }
}

async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, call)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within {LIMIT:?}"))
}

/// Locks `hog/{round}/{i}/a` and `.../b` under fresh uids until the server
/// refuses one; the locks it granted (none when the cap is reached).
async fn fill(culprit: &RemoteLocker, round: &str) -> Vec<LockArgs> {
    let mut held = Vec::new();
    for i in 0..2000 {
        let names = [format!("hog/{round}/{i}/a"), format!("hog/{round}/{i}/b")];
        let lock = args(&format!("hog-{round}-{i}"), &names);
        match bounded("lock", culprit.lock(&lock)).await {
            Ok(true) => held.push(lock),
            _ => break,
        }
    }
    assert!(held.len() < 2000, "the table fills: {} locks", held.len());
    held
}

#[tokio::test]
async fn entries_left_by_a_partial_force_count_against_the_client_however_it_refreshes() {
    let locker = Arc::new(LocalLocker::with_config(
        "partial-force",
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
    ));
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 16 * 1024;
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (_stop, stopped) = oneshot::channel::<()>();
    let (bound, serve) = server
        .bind("127.0.0.1:0".parse().expect("an address"), async {
            let _ = stopped.await;
        })
        .await
        .expect("bind loopback");
    tokio::spawn(serve);
    let addr = bound.to_string();

    let culprit = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(TOKEN)),
    )
    .await
    .expect("connect");
    let first = fill(&culprit, "1").await;
    assert!(!first.is_empty(), "the first fill takes locks");
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");
    let at_the_cap = bounded("list", admin.locks()).await.expect("listing").len();

    // The admin forces the first name of each lock open.
    for lock in &first {
        let by_name = args("", &lock.resources[..1]);
        assert_eq!(
            bounded("force", admin.force_unlock(&by_name)).await,
            Ok(true),
            "forced open"
        );
    }

    // The client refreshes each lock's whole set for three validities.
    let until = tokio::time::Instant::now() + 3 * VALIDITY;
    while tokio::time::Instant::now() < until {
        for lock in &first {
            let _ = bounded("refresh", culprit.refresh(lock)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Then fills the table again.
    let second = fill(&culprit, "2").await;
    let listed = bounded("list", admin.locks()).await.expect("listing");
    let left_over = listed
        .iter()
        .filter(|l| l.resource.starts_with("hog/1/"))
        .count();
    // What the force left and the client kept refreshing is charged to
    // it again: with it, the client stays within its cap.
    assert!(
        listed.len() <= at_the_cap,
        "{left_over} entries left by the force outlived three validities, uncharged; the \
         client then took {} more locks ({} entries in the table, {at_the_cap} at the cap)",
        second.len(),
        listed.len()
    );
}
