//! Reproduces a past break: a client with the ordinary token force-unlocks uids of its own that it never held (allowed: the force names a uid), each remembered among the forced uids, and so pushes out of that record the uid of a lock an admin forced open; the forced lock's refreshes and locks then succeed again within the validity.
//!
//! docs/lock-servers.md, "Threat model", "A compromised client": after an
//! admin forces a lock open "the server then treats that lock as
//! released, refusing its refreshes, locks and waits for
//! `remember_released` (the validity). It keeps the uids it forced open
//! apart from the releases, so that no flood of releases (of uids held or
//! not ...) can make it forget them; only a larger force can, past half of
//! `max_released_bytes`." The client token "may ... unlock", and "Every
//! release, refresh and force-unlock names the lock's uid ...; a
//! force-unlock without a uid needs the admin token".
//!
//! What happens instead: a force-unlock naming a uid is a client's right
//! (`src/net/requests.rs`: only one without a uid is forbidden), and the
//! server records its uid as forced (`Released::remember_forced`), with
//! the admin's forces, in the half of `max_released_bytes` kept for them,
//! forgetting the oldest first. A client's flood of force-unlocks of uids
//! nobody holds (free: nothing is charged) is the flood of releases the
//! split was made against, under another name: the admin's forced uid goes,
//! and the lock's holder refreshes what the force left and takes the
//! forced name back.
//!
//! A lock server on a loopback port (validity 10 s, `max_released_bytes`
//! 64 KiB, an admin token); the client holds a lock on two names, the admin
//! forces one open by name, the client force-unlocks 300 uids it never
//! held, then refreshes the lock on the name left and locks the forced
//! name again under the same uid, well within the validity. Real time
//! (sockets), every call bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockArgs, NetLocker};

use crate::lockers;
use crate::loopback;
use crate::node::TOKEN;

const ADMIN: &str = "admin-secret";
const LIMIT: Duration = Duration::from_secs(5);
const VALIDITY: Duration = Duration::from_secs(10);

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "culprit".into(),
        source: "tests/net/a_lock_forced_open_stays_refused_after_a_client_forces_open_uids_of_its_own.rs"
            .into(),
        quorum: 1,
    }
}

async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, call)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within {LIMIT:?}"))
}

#[tokio::test]
async fn a_lock_forced_open_stays_refused_after_a_client_forces_open_uids_of_its_own() {
    let locker = lockers::without_quarantine("client-forces", VALIDITY);
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_released_bytes = 64 * 1024;
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let (bound, _stop) = loopback::serve(server).await;
    let addr = bound.to_string();
    let started = tokio::time::Instant::now();

    let culprit = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(TOKEN)),
    )
    .await
    .expect("connect");
    let admin = bounded(
        "connect",
        RemoteLocker::connect(addr.clone(), RemoteConfig::new(ADMIN)),
    )
    .await
    .expect("admin connects");

    let lock = args("culprit-lock", &["held/a", "held/b"]);
    assert_eq!(bounded("lock", culprit.lock(&lock)).await, Ok(true));
    // The admin forces the first name open.
    assert_eq!(
        bounded("force", admin.force_unlock(&args("", &["held/a"]))).await,
        Ok(true),
        "forced open"
    );
    let left = args("culprit-lock", &["held/b"]);
    let forced_name = args("culprit-lock", &["held/a"]);
    assert_eq!(
        bounded("refresh", culprit.refresh(&left)).await,
        Ok(false),
        "refused right after the force"
    );

    // The client force-unlocks uids of its own that nothing holds.
    for i in 0..300 {
        let name = format!("flood/{i}");
        let never_held = args(&format!("flood-uid-{i:04}"), &[name.as_str()]);
        let forced = bounded("force", culprit.force_unlock(&never_held)).await;
        assert!(
            forced.is_ok(),
            "a force naming a uid is the client's: {forced:?}"
        );
    }

    let refreshed = bounded("refresh", culprit.refresh(&left)).await;
    let relocked = bounded("lock", culprit.lock(&forced_name)).await;
    assert!(
        started.elapsed() < VALIDITY,
        "the test ran past the validity: {:?}",
        started.elapsed()
    );
    assert_eq!(
        (refreshed, relocked),
        (Ok(false), Ok(false)),
        "the lock forced open is refreshed and locked again (refresh, lock) after the client \
         force-unlocked 300 uids of its own"
    );
}
