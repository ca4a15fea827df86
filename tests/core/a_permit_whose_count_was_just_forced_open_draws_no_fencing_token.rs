//! Reproduces a past break: a permit whose count was forced open, with a process of another count admitted, still drew its slot's fencing token before its next refresh, where a lock guard forced open draws none.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::Error;

use crate::election_support::client;

const SEED: u64 = 21;

/// The names of the count's read lock for `k = 2` (binary 10, in ten
/// digits).
fn count_names(name: &str) -> Vec<String> {
    (0..10)
        .map(|bit| format!("semaphore/{name}/count-bit/{bit}/{}", (2usize >> bit) & 1))
        .collect()
}

/// An administrator forces a plain lock open: its guard's first fencing
/// draw right after answers `LockLost` (the lockers no longer hold it).
/// The same administrator forces a permit's count open (k = 2), and a
/// process with k = 3 is admitted at once, taking slot 1. docs/semaphore.md:
/// "A permit is lost as soon as any of its locks is, a slot's or the
/// count's; once it is, `fencing_token()`, `fencing_tokens()` and
/// `unlock()` answer `Error::LockLost`, as a lock guard's do, even while
/// its slot's own lock still stands (when the count was forced open ...,
/// a process with another `k` may hold the semaphore then)". The permit,
/// whose count no locker holds any more, draws its slot's token all the
/// same until its next refresh of the count (10 s later) finds it gone.
#[tokio::test(start_paused = true)]
async fn a_permit_whose_count_was_just_forced_open_draws_no_fencing_token() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");

    let guard = a.rw_mutex(["plain"]).unwrap().lock().await.unwrap();
    assert_eq!(a.force_unlock(vec!["plain".to_string()]).await.unwrap(), 3);
    let guard_token = guard.fencing_token().await;
    eprintln!("a lock guard forced open draws: {guard_token:?}");
    assert_eq!(guard_token, Err(Error::LockLost));

    let permit = a.semaphore("jobs", 2).unwrap().acquire().await.unwrap();
    assert_eq!(a.force_unlock(count_names("jobs")).await.unwrap(), 3);
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        b.semaphore("jobs", 3).unwrap().acquire(),
    )
    .await
    .expect("the other count is admitted")
    .unwrap();
    eprintln!("a process with k = 3 holds slots {:?}", other.slots());
    let token = permit.fencing_token().await;
    let tokens = permit.fencing_tokens().await;
    eprintln!(
        "the k = 2 permit: is_lost {}, fencing_token {token:?}, fencing_tokens {tokens:?}",
        permit.is_lost()
    );
    assert!(
        token == Err(Error::LockLost) && tokens == Err(Error::LockLost),
        "the count of the k = 2 permit was forced open and a k = 3 process holds the semaphore, \
         yet the permit draws fencing_token {token:?}, fencing_tokens {tokens:?} (a lock guard \
         forced open draws {guard_token:?})"
    );
    drop(other);
}
