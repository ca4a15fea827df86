//! Reproduces a past break: on a lock server in quarantine, a client with the ordinary token force-unlocks uids of its own that nobody holds, each recorded among the forced uids of the quarantine's record and of the server's released uids, which pushes out the uid of a lock an admin forced open by name; its next refresh re-creates the entry the admin forced open.
//!
//! docs/lock-servers.md, "Threat model", "A compromised client": the
//! server "keeps the uids it forced open apart from the releases, so that
//! no flood of releases (of uids held or not ...) can make it forget
//! them; only a larger force can, past half of `max_released_bytes`. This
//! holds in the quarantine after a restart too, whether the admin forced a
//! lock open by its uid or by name: the quarantine's own record keeps
//! forced uids apart from releases as well, so a refresh never re-creates
//! what was forced open." And "Limits and memory": "the ids of locks an
//! admin forced open take at most half of it, and releases never push
//! them out". The client token's force-unlock must name a uid ("a
//! force-unlock without a uid needs the admin token").
//!
//! What happens instead: a client's force-unlock naming a uid is allowed,
//! and it is recorded as a force: `Released::remember_forced` on the
//! server, and `LocalLocker::release` with no mode calls
//! `note_ended(uid, true)`, which in quarantine puts the uid in the forced
//! half of `src/local/ended.rs` (4 MiB, oldest forgotten first) and in the
//! forced half of `released.rs`. Force-unlocks of uids nobody holds cost
//! the client nothing, so 16,000 of 128-byte uids push the admin's forced
//! uid out of both, and a refresh naming its mode re-creates the name the
//! admin forced open.
//!
//! As `a_lock_forced_open_in_quarantine_stays_refused_after_a_flood_of_releases`
//! (a LocalLocker restarted into a 120 s quarantine, validity 60 s, behind
//! a lock server with an admin token, on a loopback port), with
//! `max_released_bytes` at 4 MiB, the flood being force-unlocks instead of
//! unlocks. Real time (sockets); every call bounded, the flood 64 calls at
//! a time.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use quorum_lock::net::ServerConfig;
use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

use crate::capped::{self, bounded, ADMIN, LIMIT};
use crate::node::TOKEN;

/// Force-unlocks of 128-byte uids nobody holds: more than the forced half
/// of the quarantine's record (4 MiB at 128 + 160 bytes each: 14,563) and
/// of the server's released uids (2 MiB at 128 + 512 bytes each: 3,276).
const FLOOD: usize = 16_000;

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "culprit".into(),
        source:
            "tests/net/a_lock_forced_open_in_quarantine_stays_refused_after_a_client_forces_open_uids_of_its_own.rs"
                .into(),
        quorum: 1,
    }
}

/// Whether `uid` holds an entry on `name` in the locker's table.
fn holds(locker: &LocalLocker, uid: &str, name: &str) -> bool {
    locker
        .snapshot()
        .iter()
        .any(|e| e.uid == uid && e.resource == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_forced_open_in_quarantine_stays_refused_after_a_client_forces_open_uids_of_its_own()
{
    let locker = Arc::new(LocalLocker::with_config(
        "restarted",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(120),
        },
    ));
    locker.restart();
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_released_bytes = 4 << 20;
    let (addr, _stop) = capped::serve(locker.clone(), config).await;
    let culprit = capped::connect(&addr, TOKEN).await;
    let admin = capped::connect(&addr, ADMIN).await;

    // In quarantine a refresh naming its mode re-creates the entries (it
    // answers the quarantine, which must not count).
    let lock = args("culprit-lock-uid", &["forced/0", "forced/1"]);
    let _ = bounded("refresh", culprit.refresh_mode(&lock, LockMode::Write)).await;
    assert!(locker.is_quarantined(), "the locker is in quarantine");
    assert!(
        holds(&locker, &lock.uid, "forced/0") && holds(&locker, &lock.uid, "forced/1"),
        "the refresh in quarantine re-created the lock: {:#?}",
        locker.snapshot()
    );

    // The admin forces its first name open; a refresh does not bring it
    // back.
    let by_name = args("", &["forced/0"]);
    assert_eq!(
        bounded("force", admin.force_unlock(&by_name)).await,
        Ok(true),
        "forced open"
    );
    let _ = bounded("refresh", culprit.refresh_mode(&lock, LockMode::Write)).await;
    assert!(
        !holds(&locker, &lock.uid, "forced/0"),
        "a refresh right after the force re-created the name forced open"
    );

    // The client force-unlocks uids of its own that nothing holds, 64 at a
    // time.
    let culprit = &culprit;
    let failed = futures::stream::iter(0..FLOOD)
        .map(|i| async move {
            let uid = format!("{i:0128}");
            let name = format!("flood/{i}");
            let never_held = args(&uid, &[name.as_str()]);
            !matches!(
                tokio::time::timeout(LIMIT, culprit.force_unlock(&never_held)).await,
                Ok(Ok(_))
            )
        })
        .buffer_unordered(64)
        .filter(|failed| std::future::ready(*failed))
        .count();
    let failed = tokio::time::timeout(Duration::from_secs(90), failed)
        .await
        .expect("the flood ends within 90 s");
    assert_eq!(
        failed, 0,
        "force-unlocks that failed or did not end within {LIMIT:?}"
    );
    assert!(
        locker.is_quarantined(),
        "the flood ended within the quarantine"
    );

    // Its next refresh names the lock's names again.
    let _ = bounded("refresh", culprit.refresh_mode(&lock, LockMode::Write)).await;
    assert!(
        !holds(&locker, &lock.uid, "forced/0"),
        "after {FLOOD} force-unlocks by the client of uids nobody held, a refresh of the lock the admin forced \
         open re-created the name it forced open: {:#?}",
        locker
            .snapshot()
            .iter()
            .filter(|e| e.resource.starts_with("forced/"))
            .collect::<Vec<_>>()
    );
}
