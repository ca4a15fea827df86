//! Reproduces a past break: a lock server over a `LocalLocker` whose validity is `Duration::MAX` ("never") panics as it is built, adding the charges' lapse to the validity.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::loopback;
use crate::node::{args, TOKEN};
use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockerConfig, NetLocker};

/// docs/guarantees.md, "Settings cannot panic": "Every `Duration` in ...
/// `LockerConfig` may be `Duration::MAX` ("no limit")", and "a validity
/// too long to add to the clock means "never"". A lock server serves such
/// a locker: it is built, binds, grants a lock and releases it. The break:
/// `LockServer::new` computes the charges' lapse as `validity + 2 ×
/// min(1 s, validity)` (`local::charge_lapse`), which overflows and
/// panics before the server exists. Bounded: each call 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_server_over_a_locker_of_endless_validity_serves_locks() {
    let config = LockerConfig {
        validity: Duration::MAX,
        ..LockerConfig::default()
    };
    let locker = Arc::new(LocalLocker::with_config("endless", config));
    let built =
        std::panic::catch_unwind(|| LockServer::new(locker.clone(), ServerConfig::new(TOKEN)));
    let server = match built {
        Ok(server) => server.expect("a validity of Duration::MAX is a valid config"),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            panic!("LockServer::new panicked over a locker of validity Duration::MAX: {message}");
        }
    };
    let (bound, stop, serving) = loopback::serve_with_its_task(server).await;
    let client = tokio::time::timeout(
        Duration::from_secs(10),
        RemoteLocker::connect(bound.to_string(), RemoteConfig::new(TOKEN)),
    )
    .await
    .expect("connected within 10 s")
    .expect("connect");
    let lock = args("endless-holder", &["endless".to_string()]);
    let granted = tokio::time::timeout(Duration::from_secs(10), client.lock(&lock))
        .await
        .expect("an answer within 10 s");
    assert_eq!(granted, Ok(true), "the lock is granted");
    let released = tokio::time::timeout(Duration::from_secs(10), client.unlock(&lock))
        .await
        .expect("an answer within 10 s");
    assert_eq!(released, Ok(true), "the lock is released");
    drop(stop);
    let _ = tokio::time::timeout(Duration::from_secs(10), serving).await;
}
