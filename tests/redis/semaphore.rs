//! Counting semaphores on three Redis nodes: at most `k` holders, waiters
//! pushed their permits through the nodes' notices, a different count
//! refused, and the nodes' listing naming who holds which permit.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::Arc;
use std::time::Duration;

use crate::six_workers_on_two_permits::at_most_two_of_six_workers_hold;
use quorum_lock::{Dsync, Error, NetLocker};

use crate::redis_support::{locker, RedisServer};

async fn client(servers: &[RedisServer], owner: &str) -> Dsync {
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for server in servers {
        lockers.push(locker(server, Duration::from_secs(60)).await);
    }
    Dsync::builder(lockers)
        .owner(owner)
        .build()
        .expect("valid settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_k_hold_on_redis_nodes_and_the_listing_names_them() {
    let Some(servers) = RedisServer::start_many(3) else {
        return;
    };
    at_most_two_of_six_workers_hold(|i| {
        let servers = &servers;
        async move { client(servers, &format!("worker-{i}")).await }
    })
    .await;

    let a = client(&servers, "host-a").await;
    let held = a.semaphore("uploads", 2).unwrap().acquire().await.unwrap();
    let listing = a.lockers()[0].locks().await.expect("the listing");
    let resource = format!("semaphore/uploads/permit/{}", held.slots()[0]);
    assert!(
        listing
            .iter()
            .any(|e| e.resource == resource && e.owner == "host-a"),
        "{resource} held by host-a in {listing:#?}"
    );
    let b = client(&servers, "host-b").await;
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
