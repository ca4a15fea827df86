//! A refresh that reaches entries nothing charges for (what a force by name left of a lock, on a server that remembers no released or forced uid) is charged within the limits: over the cap it is refused with an error that says so, and leaves no charge behind.
//!
//! The flood of releases that once pushed forced uids out of the record of
//! released uids (`a_lock_forced_open_by_name_stays_refused_after_a_flood_of_releases`)
//! can no longer do so; a server with `remember_released` of zero stands
//! in for a record that forgot them, so that the refresh reaches the
//! ledger. A 64 KiB lock table, a 1 s validity, an admin token. Real time
//! (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::NetLocker;

use crate::capped::{self, bounded, ADMIN};
use crate::forced_by_name;
use crate::node::TOKEN;

#[tokio::test]
async fn a_refresh_reaching_entries_nothing_charges_is_refused_over_the_cap() {
    let args = forced_by_name::culprit_args(
        "tests/net/a_refresh_reaching_entries_nothing_charges_is_refused_over_the_cap.rs",
    );
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 64 * 1024;
    config.remember_released = Some(Duration::ZERO);
    let (addr, _stop) = forced_by_name::serve("uncharged-refresh", config).await;
    let culprit = capped::connect(&addr, TOKEN).await;
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr, RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");

    let first = capped::fill(&culprit, "1", &forced_by_name::NINE, args).await;
    assert!(first.len() >= 2, "the first fill takes locks");
    forced_by_name::force_the_first_name_of_each(&admin, &first, args).await;
    let second = capped::fill(&culprit, "2", &forced_by_name::NINE, args).await;
    assert!(!second.is_empty(), "the force gave the room back");

    // Each refresh of what the force left needs a charge the cap has no
    // room for: refused, saying what.
    for lock in &first {
        let left = args(&lock.uid, &lock.resources[1..]);
        match bounded("refresh", culprit.refresh(&left)).await {
            Err(err) => {
                let shown = err.to_string();
                assert!(
                    shown.contains("refresh refused") && shown.contains("lock table is full"),
                    "the error says what was refused and why: {shown}"
                );
            }
            other => panic!("a refresh over the cap was answered {other:?}"),
        }
    }

    // The refusals left no charge: releasing one lock of the refill makes
    // room for one more lock.
    let freed = &second[0];
    assert_eq!(bounded("unlock", culprit.unlock(freed)).await, Ok(true));
    let names: Vec<String> = (0..9).map(|n| format!("after/{n}")).collect();
    assert_eq!(
        bounded("lock", culprit.lock(&args("hog-2-0", &names))).await,
        Ok(true),
        "the room a release gave back is there"
    );
}
