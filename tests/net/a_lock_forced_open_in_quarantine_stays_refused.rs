//! On a lock server in quarantine, a lock an admin forced open by name
//! stays refused whatever the client floods the server with: a refresh
//! never re-creates what was forced open. docs/lock-servers.md, "Threat
//! model", "A compromised client": "forcing a name open gives back at once
//! the charge of every lock that held it, and the server then treats that
//! lock as released ... It keeps the uids it forced open apart from the
//! releases, so that no flood of releases (of uids held or not ...) can
//! make it forget them; only a larger force can, past half of
//! `max_released_bytes`. This holds in the quarantine after a restart too,
//! whether the admin forced a lock open by its uid or by name: the
//! quarantine's own record keeps forced uids apart from releases as well,
//! so a refresh never re-creates what was forced open."
//!
//! Each scene: a LocalLocker restarted into a 120 s quarantine (validity
//! 60 s) behind a lock server with an admin token, on a loopback port. In
//! quarantine a refresh naming its mode re-creates a lock's missing
//! entries (it answers the quarantine, which must not count); the admin
//! forces one of its names open; the client floods the server, 64 calls at
//! a time; its next refresh must not bring the name back. Real time
//! (sockets); every call bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

use crate::capped::{self, bounded, ADMIN, LIMIT};
use crate::node::TOKEN;

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "culprit".into(),
        source: "tests/net/a_lock_forced_open_in_quarantine_stays_refused.rs".into(),
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

/// The scene, with the server's `config`, the client's flood `count`
/// calls of `call(culprit, i)` (each `true` when it failed or did not end
/// within [`LIMIT`]), described as `what`.
async fn forced_then_flooded(
    config: ServerConfig,
    count: usize,
    what: &str,
    call: impl AsyncFn(&RemoteLocker, usize) -> bool,
) {
    let locker = Arc::new(LocalLocker::with_config(
        "restarted",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(120),
        },
    ));
    locker.restart();
    let (addr, _stop) = capped::serve(locker.clone(), config.admin_token(ADMIN)).await;
    let culprit = capped::connect(&addr, TOKEN).await;
    let admin = capped::connect(&addr, ADMIN).await;

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

    let culprit_ref = &culprit;
    let failed = futures::stream::iter(0..count)
        .map(|i| call(culprit_ref, i))
        .buffer_unordered(64)
        .filter(|failed| std::future::ready(*failed))
        .count();
    let failed = tokio::time::timeout(Duration::from_secs(90), failed)
        .await
        .expect("the flood ends within 90 s");
    assert_eq!(
        failed, 0,
        "{what} that failed or did not end within {LIMIT:?}"
    );
    assert!(
        locker.is_quarantined(),
        "the flood ended within the quarantine"
    );

    // Its next refresh names the lock's names again.
    let _ = bounded("refresh", culprit.refresh_mode(&lock, LockMode::Write)).await;
    assert!(
        !holds(&locker, &lock.uid, "forced/0"),
        "after {count} {what} of uids nobody held, a refresh of the lock the admin forced open \
         re-created the name it forced open: {:#?}",
        locker
            .snapshot()
            .iter()
            .filter(|e| e.resource.starts_with("forced/"))
            .collect::<Vec<_>>()
    );
}

/// Reproduces a past break: on a lock server in quarantine, a client whose lock an admin forced open by name floods it with releases of uids it never held, which pushes its uid out of the quarantine's record of ended uids, and its next refresh re-creates the entry the admin forced open.
///
/// In quarantine, a force by name recorded the uids it took the names
/// from only in the quarantine's record of ended uids (`note_ended` sends
/// them to `src/local/ended.rs`, not to the forced part of `released.rs`),
/// shared with every release, 8 MiB, oldest forgotten first: about 50,000
/// releases of 8-byte uids nobody holds (free: nothing is charged for
/// them) pushed the forced uid out. The flood: 56,000 such releases, more
/// than the record keeps at 8 + 160 bytes each (49,932).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_forced_open_in_quarantine_stays_refused_after_a_flood_of_releases() {
    let release = async |culprit: &RemoteLocker, i: usize| {
        let name = format!("flood/{i}");
        let never_held = args(&format!("{i:08}"), &[name.as_str()]);
        tokio::time::timeout(LIMIT, culprit.unlock(&never_held))
            .await
            .is_err()
    };
    forced_then_flooded(ServerConfig::new(TOKEN), 56_000, "releases", release).await;
}

/// Reproduces a past break: on a lock server in quarantine, a client with the ordinary token force-unlocks uids of its own that nobody holds, each recorded among the forced uids of the quarantine's record and of the server's released uids, which pushes out the uid of a lock an admin forced open by name; its next refresh re-creates the entry the admin forced open.
///
/// "Limits and memory": "the ids of locks an admin forced open take at
/// most half of it, and releases never push them out"; the client token's
/// force-unlock must name a uid. A client's force-unlock naming a uid was
/// recorded as a force (`Released::remember_forced` on the server, and
/// `note_ended(uid, true)` in the forced half of `src/local/ended.rs`,
/// 4 MiB): 16,000 of 128-byte uids, more than the forced half of the
/// quarantine's record (4 MiB at 128 + 160 bytes each: 14,563) and of the
/// server's released uids at a `max_released_bytes` of 4 MiB (2 MiB at
/// 128 + 512 bytes each: 3,276), pushed the admin's forced uid out of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_forced_open_in_quarantine_stays_refused_after_a_client_forces_open_uids_of_its_own()
{
    let mut config = ServerConfig::new(TOKEN);
    config.max_released_bytes = 4 << 20;
    let force = async |culprit: &RemoteLocker, i: usize| {
        let name = format!("flood/{i}");
        let never_held = args(&format!("{i:0128}"), &[name.as_str()]);
        !matches!(
            tokio::time::timeout(LIMIT, culprit.force_unlock(&never_held)).await,
            Ok(Ok(_))
        )
    };
    forced_then_flooded(config, 16_000, "force-unlocks", force).await;
}
