//! A coordinator's owner goes with every lock call, and every locker takes
//! at most `MAX_OWNER_LEN` bytes of it: an owner over that is refused when
//! the coordinator is built, as an owner with a control character is,
//! rather than built into a coordinator whose every lock a lock server
//! refuses.
//!
//! Reproduces a past break: the coordinator was built, and every lock was refused.
#![cfg(feature = "net")]

use std::sync::Arc;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig, MAX_OWNER_LEN};
use quorum_lock::{Dsync, LocalLocker, NetLocker};

const TOKEN: &str = "client-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_longer_than_the_lock_protocol_carries_is_refused_by_build() {
    let server = LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new(TOKEN))
        .expect("valid config");
    let (addr, run) = server
        .bind("127.0.0.1:0".parse().unwrap(), std::future::pending::<()>())
        .await
        .expect("bind loopback");
    let running = tokio::spawn(run);
    let remote = RemoteLocker::connect(addr.to_string(), RemoteConfig::new(TOKEN))
        .await
        .expect("connect");
    let lockers = vec![Arc::new(remote) as Arc<dyn NetLocker>];

    let owner = "o".repeat(MAX_OWNER_LEN + 88);
    let built = Dsync::builder(lockers.clone()).owner(owner).build();
    let refused_at_lock = match &built {
        Ok(ds) => Some(
            ds.rw_mutex(["reports"])
                .expect("a mutex")
                .lock()
                .await
                .err(),
        ),
        Err(_) => None,
    };
    running.abort();
    let err = match built {
        Err(err) => err.to_string(),
        Ok(_) => panic!(
            "a coordinator with an owner of {} bytes was built (at most {MAX_OWNER_LEN} are \
             allowed); its lock then ended with {refused_at_lock:?}",
            MAX_OWNER_LEN + 88
        ),
    };
    assert!(err.contains("600 bytes"), "{err}");
}
