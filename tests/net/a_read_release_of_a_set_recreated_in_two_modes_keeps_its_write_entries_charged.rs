//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) and against the whole server
//! (1 GiB). A lock stays counted until it is released (a release in the
//! other mode, which removes no entry, leaves it counted, [...]), or until
//! it expired".
//!
//! In quarantine a refresh with a mode re-creates the missing entries of
//! its names in that mode and refreshes the ones its uid holds, in
//! whatever mode they are: a refresh for the write lock of names of which
//! the uid reads one leaves the set with write entries beside that read
//! entry. A read release of the set then removes the read entry (so the
//! server calls it a removal, and gives back the set's whole charge) and
//! leaves every write entry standing, charged by nothing. Under a fresh
//! uid each round, a client piles up write entries far past what its
//! connection's cap admits, for as long as they live.
//! A 5 s validity, a 60 s quarantine, a 64 KiB cap per connection, an
//! admin token for the listing. Real time (sockets), every call and loop
//! bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

use crate::capped::{self, bounded, ADMIN};
use crate::node::TOKEN;

fn args(uid: &str, names: &[String], owner: usize) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "o".repeat(owner).into(),
        source: "s".into(),
        quorum: 1,
    }
}

/// Ten names the write refresh re-creates, and the one read beside them.
fn names(prefix: &str, i: usize) -> Vec<String> {
    let mut all: Vec<String> = (0..10).map(|j| format!("{prefix}/{i:03}/{j}")).collect();
    all.push(format!("{prefix}/{i:03}/r"));
    all
}

#[tokio::test]
async fn a_read_release_of_a_set_recreated_in_two_modes_keeps_its_write_entries_charged() {
    let locker = Arc::new(LocalLocker::with_config(
        "recreated-in-two-modes",
        LockerConfig {
            validity: Duration::from_secs(5),
            quarantine: Duration::from_secs(60),
        },
    ));
    // A restarted server: in quarantine for the whole scene.
    locker.restart();
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_bytes_per_connection = 64 * 1024;
    let (addr, _stop) = capped::serve(locker, config).await;
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");

    // How many such write sets one connection may hold: a probe fills
    // its cap with write refreshes re-creating them.
    let probe = capped::connect(&addr, TOKEN).await;
    let mut most = 0;
    for i in 0..200 {
        let lock = args(&format!("p{i:03}"), &names("p", i), 512);
        match bounded("refresh", probe.refresh_mode(&lock, LockMode::Write)).await {
            Err(err) if err.to_string().contains("refresh refused") => break,
            // Re-created, answered with the quarantine error.
            _ => most += 1,
        }
    }
    assert!((1..200).contains(&most), "the probe fills its cap: {most}");
    let probed = bounded("list", admin.locks()).await.expect("listing");
    let probe_writes = probed.iter().filter(|e| e.uid.starts_with('p')).count();
    assert_eq!(
        probe_writes,
        11 * most,
        "the probe's refreshes re-created its entries"
    );

    let culprit = capped::connect(&addr, TOKEN).await;
    let mut rounds = 0;
    for i in 0..4 * most {
        let uid = format!("u{i:03}");
        let all = names("u", i);
        let read = args(&uid, &all[10..], 1);
        let _ = bounded("refresh", culprit.refresh_mode(&read, LockMode::Read)).await;
        let write = args(&uid, &all, 512);
        match bounded("refresh", culprit.refresh_mode(&write, LockMode::Write)).await {
            Err(err) if err.to_string().contains("refresh refused") => break,
            _ => {}
        }
        let _ = bounded("runlock", culprit.runlock(&args(&uid, &all, 1))).await;
        rounds += 1;
    }
    let listed = bounded("list", admin.locks()).await.expect("listing");
    let writes = listed
        .iter()
        .filter(|e| e.uid.starts_with('u') && e.mode == LockMode::Write && e.owner.len() == 512)
        .count();
    assert!(
        writes > 0,
        "the write refreshes re-created entries ({rounds} rounds)"
    );
    assert!(
        writes <= 10 * most,
        "a connection whose cap admits {most} sets of ten write entries (and a read one) holds \
         {writes} such write entries live after {rounds} rounds of a read release"
    );
}
