#![cfg(feature = "net")]
//! A remote locker that was offline when the `Dsync` was built announces its
//! validity later; a lease longer than it must still never be trusted.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Dsync, Error, NetLocker};

use crate::lockers;

const TOKEN: &str = "t0ken";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_longer_than_a_late_servers_validity_is_not_trusted() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    // The server is not up yet: the locker starts offline.
    let remote = RemoteLocker::connect(addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .unwrap();
    let holder = match Dsync::builder(vec![Arc::new(remote) as Arc<dyn NetLocker>])
        .owner("holder")
        .build()
    {
        Ok(ds) => ds,
        Err(_) => return, // refusing an unknown validity would be fine
    };
    // The server comes up, keeping entries for 2 s only.
    let locker = lockers::without_quarantine("late", Duration::from_secs(2));
    let server = LockServer::new(locker, ServerConfig::new(TOKEN)).unwrap();
    let (_, serve) = server
        .bind(addr.parse().unwrap(), std::future::pending())
        .await
        .unwrap();
    tokio::spawn(serve);
    // Once the server has announced its validity, the holder refuses to
    // count on it: a clear error instead of a lock it would trust too long.
    let mut last = None;
    for _ in 0..50 {
        match holder.rw_mutex(["a"]).unwrap().try_lock().await {
            Ok(_) => panic!("granted a lock the server keeps for less than the lease"),
            Err(err @ Error::InvalidArgument(_)) => {
                last = Some(err);
                break;
            }
            Err(err) => {
                last = Some(err);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let err = last.expect("at least one attempt");
    assert!(
        matches!(&err, Error::InvalidArgument(msg) if msg.contains("must not exceed the validity of locker")),
        "{err}"
    );
}
