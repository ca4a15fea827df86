//! Reproduces a past break: after an admin forced open one name of each of a client's nine-name locks, the client refreshes one remaining name first, is charged again for that one name only, and then keeps all eight remaining names alive by refreshing them together, uncharged, filling the lock table's cap again on top of them.
//!
//! docs/lock-servers.md, "A compromised client": a lock on more names than
//! were forced "keeps its entries on the others until they expire, and is
//! charged for them again when its client refreshes it". The server charges
//! again the set the first refresh names, and only when the uid has no
//! charge; a later refresh naming more of the uid's entries finds a charge
//! and adds nothing. So the entries its refreshes keep alive are charged as
//! one name each lock, and the client holds more than `max_lock_bytes`
//! lets one client take, for as long as it refreshes.
//!
//! A server with a 64 KiB lock table, a 1 s validity and an admin token; a
//! client fills the table with locks on nine names each, the admin forces
//! the first name of each open, the client refreshes each lock's second
//! name alone, then the eight names left together every 200 ms for three
//! validities, then fills the table again. Real time (sockets), every call
//! bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::ServerConfig;
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::node::TOKEN;

const VALIDITY: Duration = Duration::from_secs(1);

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "culprit".into(),
        source: "tests/net/entries_left_by_a_partial_force_are_charged_whole_whatever_the_first_refresh_names.rs"
            .into(),
        quorum: 1,
    }
}

/// The names of each lock that fills the table.
const NINE: [&str; 9] = ["0", "1", "2", "3", "4", "5", "6", "7", "8"];

#[tokio::test]
async fn entries_left_by_a_partial_force_are_charged_whole_whatever_the_first_refresh_names() {
    let locker = Arc::new(LocalLocker::with_config(
        "partial-force",
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
    ));
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 64 * 1024;
    let (addr, _stop) = capped::serve(locker.clone(), config).await;

    let culprit = capped::connect(&addr, TOKEN).await;
    let first = capped::fill(&culprit, "1", &NINE, args).await;
    assert!(
        first.len() >= 2,
        "the first fill takes locks: {}",
        first.len()
    );
    let admin = capped::connect(&addr, ADMIN).await;
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

    // The client refreshes each lock's second name alone, then the eight
    // names left together for three validities. (The server refuses them
    // now: a uid forced open is one it released. What is checked is that
    // the client stays within its cap, whatever the refreshes answer.)
    for lock in &first {
        let one = args(&lock.uid, &lock.resources[1..2]);
        let _ = bounded("refresh", culprit.refresh(&one)).await;
    }
    let left: Vec<LockArgs> = first
        .iter()
        .map(|lock| args(&lock.uid, &lock.resources[1..]))
        .collect();
    let until = tokio::time::Instant::now() + 3 * VALIDITY;
    while tokio::time::Instant::now() < until {
        for lock in &left {
            let _ = bounded("refresh", culprit.refresh(lock)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Then fills the table again.
    let second = capped::fill(&culprit, "2", &NINE, args).await;
    let listed = bounded("list", admin.locks()).await.expect("listing");
    let left_over = listed
        .iter()
        .filter(|l| l.resource.starts_with("hog/1/"))
        .count();
    // What the force left and the client kept refreshing is charged to
    // it again: with it, the client stays within its cap.
    assert!(
        listed.len() <= at_the_cap,
        "{left_over} entries left by the force outlived three validities, charged as one name \
         a lock; the client then took {} more locks ({} entries in the table, {at_the_cap} at the cap)",
        second.len(),
        listed.len()
    );
}
