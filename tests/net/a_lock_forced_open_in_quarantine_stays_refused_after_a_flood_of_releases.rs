//! Reproduces a past break: on a lock server in quarantine, a client whose lock an admin forced open by name floods it with releases of uids it never held, which pushes its uid out of the quarantine's record of ended uids, and its next refresh re-creates the entry the admin forced open.
//!
//! docs/lock-servers.md, "A compromised client": "forcing a name open
//! gives back at once the charge of every lock that held it, and the
//! server then treats that lock as released, refusing its refreshes, locks
//! and waits for `remember_released` (the validity). It keeps the uids it
//! forced open apart from the releases, so that no flood of releases (of
//! uids held or not: a release is remembered even when nothing holds its
//! uid, since it may have overtaken its lock) can make it forget them;
//! only a larger force can, past half of `max_released_bytes`."
//!
//! What happens instead: while the locker is in quarantine (after a
//! restart, for `quarantine`), a force by name records the uids it took
//! the names from only in the quarantine's record of ended uids
//! (`LocalLocker::note_ended` sends them to `src/local/ended.rs`, not to
//! the forced part of `released.rs`; the server's own
//! `remember_forced(args.uid)` has an empty uid for a force by name). That
//! record is shared with every release, holds 8 MiB, and forgets its
//! oldest first, so about 50,000 releases of 8-byte uids nobody holds
//! (free: nothing is charged for them) push the forced uid out. A refresh
//! that names its mode re-creates, in quarantine, every missing entry of
//! a uid the record does not hold: the name the admin forced open is held
//! by the forced lock again, and stays held for as long as the client
//! refreshes it.
//!
//! A LocalLocker restarted into a 120 s quarantine (validity 60 s) behind
//! a lock server with an admin token, on a loopback port. Real time
//! (sockets); every call bounded, the flood 64 calls at a time.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use quorum_lock::net::ServerConfig;
use quorum_lock::{LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};

use crate::capped::{self, bounded, ADMIN, LIMIT};
use crate::node::TOKEN;

/// Releases of uids nobody holds: more than the quarantine's record of
/// 8 MiB keeps at 8 + 160 bytes each (49,932).
const FLOOD: usize = 56_000;

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
            "tests/net/a_lock_forced_open_in_quarantine_stays_refused_after_a_flood_of_releases.rs"
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
async fn a_lock_forced_open_in_quarantine_stays_refused_after_a_flood_of_releases() {
    let locker = Arc::new(LocalLocker::with_config(
        "restarted",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(120),
        },
    ));
    locker.restart();
    let config = ServerConfig::new(TOKEN).admin_token(ADMIN);
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

    // The client releases uids it never held, 64 at a time.
    let culprit = &culprit;
    let failed = futures::stream::iter(0..FLOOD)
        .map(|i| async move {
            let uid = format!("{i:08}");
            let name = format!("flood/{i}");
            let never_held = args(&uid, &[name.as_str()]);
            tokio::time::timeout(LIMIT, culprit.unlock(&never_held))
                .await
                .is_err()
        })
        .buffer_unordered(64)
        .filter(|timed_out| std::future::ready(*timed_out))
        .count();
    let failed = tokio::time::timeout(Duration::from_secs(90), failed)
        .await
        .expect("the flood ends within 90 s");
    assert_eq!(failed, 0, "releases that did not end within {LIMIT:?}");
    assert!(
        locker.is_quarantined(),
        "the flood ended within the quarantine"
    );

    // Its next refresh names the lock's names again.
    let _ = bounded("refresh", culprit.refresh_mode(&lock, LockMode::Write)).await;
    assert!(
        !holds(&locker, &lock.uid, "forced/0"),
        "after {FLOOD} releases of uids nobody held, a refresh of the lock the admin forced \
         open re-created the name it forced open: {:#?}",
        locker
            .snapshot()
            .iter()
            .filter(|e| e.resource.starts_with("forced/"))
            .collect::<Vec<_>>()
    );
}
