//! A semaphore permit is lost as soon as any of its locks is (a slot, or
//! the count it shares), and a lost permit vouches for nothing: no fencing
//! token, and every loss signal fires, whichever lock went first.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, SemaphorePermit};
use tokio::time::{sleep, timeout, Instant};

use crate::election_support::client;

/// The names of the count's read lock for `k = 2` (binary 10, in ten
/// digits).
fn count_names(name: &str) -> Vec<String> {
    (0..10)
        .map(|bit| format!("semaphore/{name}/count-bit/{bit}/{}", (2usize >> bit) & 1))
        .collect()
}

async fn assert_no_token(permit: &SemaphorePermit) {
    assert!(permit.is_lost());
    assert_eq!(permit.fencing_token().await, Err(Error::LockLost));
    assert_eq!(permit.fencing_tokens().await, Err(Error::LockLost));
}

/// An administrator forces the count open: the permit's next refresh of
/// the count finds it gone and the permit is lost, while its slot is still
/// held and refreshed. A client with another count is then admitted, and
/// the lost permit must not hand out its slot's token (drawn before, or
/// drawn now).
#[tokio::test(start_paused = true)]
async fn a_permit_whose_count_was_forced_open_gives_no_fencing_token() {
    let cluster = TestCluster::new(3, 21);
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");
    let drawn = a.semaphore("jobs", 2).unwrap().acquire().await.unwrap();
    let fresh = a.semaphore("jobs", 2).unwrap().acquire().await.unwrap();
    drawn.fencing_token().await.unwrap();
    assert_eq!(a.force_unlock(count_names("jobs")).await.unwrap(), 3);
    // The count's next refresh (every 10 s) finds it gone.
    sleep(Duration::from_secs(11)).await;
    let other = timeout(
        Duration::from_secs(5),
        b.semaphore("jobs", 3).unwrap().acquire(),
    )
    .await
    .expect("the other count is admitted")
    .unwrap();
    for permit in [&drawn, &fresh] {
        assert_no_token(permit).await;
    }
    assert!(!other.is_lost());
    drop(other);
}

/// The count's refreshes are lost while a slot's still count: one handle's
/// second permit reuses the count of its first, so the count is older than
/// the second permit's slot. Cut off from every locker, the count's trust
/// runs out first; from the instant the permit says it is lost, its token
/// must be refused.
#[tokio::test(start_paused = true)]
async fn a_permit_whose_count_missed_its_refreshes_gives_no_fencing_token() {
    let cluster = TestCluster::new(3, 22);
    let a = client(&cluster, "a");
    let sem = a.semaphore("jobs", 2).unwrap();
    let first = sem.acquire().await.unwrap();
    sleep(Duration::from_secs(5)).await;
    let second = sem.acquire().await.unwrap();
    second.fencing_token().await.unwrap();
    drop(first);
    // After the count's refresh at 10 s and the slot's at 15 s.
    sleep(Duration::from_secs(12)).await;
    cluster.partition("a", &[0, 1, 2]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !second.is_lost() {
        assert!(Instant::now() < deadline, "the permit was never lost");
        sleep(Duration::from_millis(100)).await;
    }
    assert_no_token(&second).await;
}

/// `loss_token()` asked outside any runtime still follows every lock of
/// the permit, the count included: it is watched on the runtime the permit
/// was acquired on.
#[tokio::test(start_paused = true)]
async fn a_loss_token_taken_outside_a_runtime_follows_the_count() {
    let cluster = TestCluster::new(3, 23);
    let a = client(&cluster, "a");
    let permit = a.semaphore("jobs", 2).unwrap().acquire().await.unwrap();
    let token = std::thread::scope(|s| s.spawn(|| permit.loss_token()).join().unwrap());
    assert_eq!(a.force_unlock(count_names("jobs")).await.unwrap(), 3);
    timeout(Duration::from_secs(30), token.cancelled())
        .await
        .expect("the token is cancelled when the count is lost");
    assert!(permit.is_lost());
}
