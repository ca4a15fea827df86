//! Reproduces a past break: a second permit of one handle, sharing a count whose token an earlier permit had drawn, drew its slot's fencing token after the count was forced open and a process of another count was admitted.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::Error;

use crate::election_support::client;

const SEED: u64 = 41;

/// The names of the count's read lock for `k = 2` (binary 10, in ten
/// digits).
fn count_names(name: &str) -> Vec<String> {
    (0..10)
        .map(|bit| format!("semaphore/{name}/count-bit/{bit}/{}", (2usize >> bit) & 1))
        .collect()
}

/// One handle (k = 2) holds both permits, which share its count lock. The
/// first permit draws its token (and so the count's). An administrator
/// then forces the count open and a process with k = 3 is admitted,
/// taking slot 2. The second permit has never drawn a token.
/// `SemaphorePermit::fencing_token`: "The first call also draws the
/// count's token, as a lock guard's first draw does, so a count forced
/// open before its next refresh fails it with `LockLost` too";
/// docs/semaphore.md: once a permit is lost (a count forced open), its
/// `fencing_token()` answers `LockLost`, "when the count was forced open
/// ..., a process with another `k` may hold the semaphore then". The
/// second permit's first call reuses the count's token drawn before the
/// force and hands out its slot's token while a k = 3 process holds the
/// semaphore.
#[tokio::test(start_paused = true)]
async fn a_second_permit_whose_shared_count_was_forced_open_draws_no_fencing_token() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");

    let jobs = a.semaphore("jobs", 2).unwrap();
    let first = jobs.acquire().await.unwrap();
    let second = jobs.acquire().await.unwrap();
    eprintln!("slots {:?} and {:?}", first.slots(), second.slots());
    first.fencing_token().await.expect("the first permit draws");

    assert_eq!(a.force_unlock(count_names("jobs")).await.unwrap(), 3);
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        b.semaphore("jobs", 3).unwrap().acquire(),
    )
    .await
    .expect("the other count is admitted")
    .unwrap();
    eprintln!("a process with k = 3 holds slots {:?}", other.slots());

    let token = second.fencing_token().await;
    eprintln!(
        "the second k = 2 permit: is_lost {}, fencing_token {token:?}",
        second.is_lost()
    );
    assert_eq!(
        token,
        Err(Error::LockLost),
        "the count the second k = 2 permit shares was forced open and a k = 3 process holds \
         the semaphore, yet the permit's first draw hands out its slot's token"
    );
    drop(other);
}
