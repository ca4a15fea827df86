//! A refresh that reaches entries nothing charges for (what a force by name left of a lock, on a server that remembers no released or forced uid) is charged within the limits: over the cap it is refused with an error that says so, and leaves no charge behind.
//!
//! The flood of releases that once pushed forced uids out of the record of
//! released uids (`a_lock_forced_open_by_name_stays_refused_after_a_flood_of_releases`)
//! can no longer do so; a server with `remember_released` of zero stands
//! in for a record that forgot them, so that the refresh reaches the
//! ledger. A 64 KiB lock table, a 1 s validity, an admin token. Real time
//! (sockets), every call bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::node::TOKEN;

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "culprit".into(),
        source: "tests/net/a_refresh_reaching_entries_nothing_charges_is_refused_over_the_cap.rs"
            .into(),
        quorum: 1,
    }
}

/// The names of each lock that fills the table.
const NINE: [&str; 9] = ["0", "1", "2", "3", "4", "5", "6", "7", "8"];

#[tokio::test]
async fn a_refresh_reaching_entries_nothing_charges_is_refused_over_the_cap() {
    let locker = Arc::new(LocalLocker::with_config(
        "uncharged-refresh",
        LockerConfig {
            validity: Duration::from_secs(1),
            quarantine: Duration::ZERO,
        },
    ));
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_lock_bytes = 64 * 1024;
    config.remember_released = Some(Duration::ZERO);
    let (addr, _stop) = capped::serve(locker, config).await;
    let culprit = capped::connect(&addr, TOKEN).await;
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr, RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");

    let first = capped::fill(&culprit, "1", &NINE, args).await;
    assert!(first.len() >= 2, "the first fill takes locks");
    for lock in &first {
        let by_name = args("", &lock.resources[..1]);
        assert_eq!(
            bounded("force", admin.force_unlock(&by_name)).await,
            Ok(true)
        );
    }
    let second = capped::fill(&culprit, "2", &NINE, args).await;
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
