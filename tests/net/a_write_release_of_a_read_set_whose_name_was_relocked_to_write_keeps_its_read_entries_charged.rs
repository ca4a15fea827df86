//! docs/lock-servers.md, "Limits and memory": "A lock stays counted until
//! it is released (a release in the other mode, which removes no entry,
//! leaves it counted, [...]), or until it expired".
//!
//! A uid read-locks a set of eleven names, releases its read entry on
//! the first name alone and write-locks that name as a set of its own.
//! A write release of the eleven names then removes that one write entry,
//! which the server takes for the release of the eleven-name set: it gives
//! back the set's whole charge, while the read entries on the other ten
//! names stand, charged by nothing, until they expire. Under a fresh uid
//! each round, one connection piles them up past its cap.
//!
//! A server that remembers no released uid (`remember_released` of zero)
//! stands in for a record that a flood of releases made forget them, so
//! that the uid may lock again after its read release. A 5 s validity, a
//! 64 KiB cap per connection, an admin token for the listing. Real time
//! (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, LockMode, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::lockers;
use crate::node::TOKEN;

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "o".repeat(512).into(),
        source: "s".into(),
        quorum: 1,
    }
}

/// The name relocked for writing, and ten names read beside it.
fn names(prefix: &str, i: usize) -> Vec<String> {
    let mut all = vec![format!("{prefix}/{i:03}/w")];
    all.extend((0..10).map(|j| format!("{prefix}/{i:03}/{j}")));
    all
}

#[tokio::test]
async fn a_write_release_of_a_read_set_whose_name_was_relocked_to_write_keeps_its_read_entries_charged(
) {
    let locker = lockers::without_quarantine("relocked-to-write", Duration::from_secs(5));
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_bytes_per_connection = 64 * 1024;
    config.remember_released = Some(Duration::ZERO);
    let (addr, _stop) = capped::serve(locker, config).await;
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");

    // How many such read sets one connection may hold.
    let probe = capped::connect(&addr, TOKEN).await;
    let mut most = 0;
    for i in 0..200 {
        match bounded(
            "rlock",
            probe.rlock(&args(&format!("p{i:03}"), &names("p", i))),
        )
        .await
        {
            Ok(true) => most += 1,
            _ => break,
        }
    }
    assert!((1..200).contains(&most), "the probe fills its cap: {most}");

    let culprit = capped::connect(&addr, TOKEN).await;
    let mut rounds = 0;
    for i in 0..4 * most {
        let uid = format!("u{i:03}");
        let all = names("u", i);
        if bounded("rlock", culprit.rlock(&args(&uid, &all))).await != Ok(true) {
            break;
        }
        let first = &all[..1];
        assert_eq!(
            bounded("runlock", culprit.runlock(&args(&uid, first))).await,
            Ok(true)
        );
        assert_eq!(
            bounded("lock", culprit.lock(&args(&uid, first))).await,
            Ok(true),
            "the name read alone is free for the uid's write lock"
        );
        assert_eq!(
            bounded("unlock", culprit.unlock(&args(&uid, &all))).await,
            Ok(true),
            "the write release removes the write entry"
        );
        rounds += 1;
    }
    let listed = bounded("list", admin.locks()).await.expect("listing");
    let reads = listed
        .iter()
        .filter(|e| e.uid.starts_with('u') && e.mode == LockMode::Read)
        .count();
    assert!(reads > 0, "the read entries stand ({rounds} rounds)");
    assert!(
        reads <= 11 * most,
        "a connection whose cap admits {most} read locks of eleven names holds {reads} read \
         entries live after {rounds} rounds of a write release"
    );
}
