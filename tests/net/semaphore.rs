//! Counting semaphores over three lock servers on loopback: at most `k`
//! holders, waiters pushed their permits, a different count refused, and
//! the servers' listing naming who holds which permit.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::loopback;
use crate::six_workers_on_two_permits::at_most_two_of_six_workers_hold;
use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Dsync, Error, LocalLocker, NetLocker};
use tokio::sync::oneshot;

const TOKEN: &str = "semaphore-secret";
const ADMIN: &str = "semaphore-admin";

async fn servers(n: usize) -> (Vec<String>, Vec<oneshot::Sender<()>>) {
    let mut addrs = Vec::new();
    let mut stops = Vec::new();
    for _ in 0..n {
        let server = LockServer::new(
            Arc::new(LocalLocker::new()),
            ServerConfig::new(TOKEN).admin_token(ADMIN),
        )
        .expect("valid config");
        let (bound, stop) = loopback::serve(server).await;
        addrs.push(bound.to_string());
        stops.push(stop);
    }
    (addrs, stops)
}

async fn client(addrs: &[String], owner: &str) -> Dsync {
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for addr in addrs {
        let locker = RemoteLocker::connect(addr, RemoteConfig::new(TOKEN))
            .await
            .expect("connect to the test server");
        lockers.push(Arc::new(locker));
    }
    Dsync::builder(lockers)
        .owner(owner)
        .build()
        .expect("valid settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_k_hold_over_lock_servers_and_the_listing_names_them() {
    let (addrs, _stops) = servers(3).await;
    at_most_two_of_six_workers_hold(|i| {
        let addrs = &addrs;
        async move { client(addrs, &format!("worker-{i}")).await }
    })
    .await;

    let a = client(&addrs, "host-a").await;
    let held = a.semaphore("uploads", 2).unwrap().acquire().await.unwrap();
    // The permit is held by a quorum of the servers, not necessarily by
    // the first: its grant there may still be on its way, or have lost to
    // a place in line. Each server's listing is read until one names it.
    let resource = format!("semaphore/uploads/permit/{}", held.slots()[0]);
    let mut listings = Vec::new();
    let named = 'found: {
        for _ in 0..50 {
            listings.clear();
            for addr in &addrs {
                let admin = RemoteLocker::connect(addr, RemoteConfig::new(ADMIN))
                    .await
                    .expect("connect as the admin");
                let listing = admin.locks().await.expect("the listing");
                if listing
                    .iter()
                    .any(|e| e.resource == resource && e.owner == "host-a")
                {
                    break 'found true;
                }
                listings.push(listing);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    assert!(named, "{resource} held by host-a in {listings:#?}");
    let b = client(&addrs, "host-b").await;
    let refused = b.semaphore("uploads", 5).unwrap().try_acquire().await;
    assert!(
        matches!(
            refused,
            Err(Error::PermitsMismatch {
                permits: 5,
                in_use: Some(2),
                ..
            })
        ),
        "{refused:?}"
    );
    held.unlock().await.unwrap();
}
