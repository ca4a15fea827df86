//! Reproduces a past break: a permit of two slots (`acquire_many(2)`) whose `fencing_token()` had drawn its first slot's token handed out a first token for its second slot through `fencing_tokens()` after its count was forced open and a process of another count was admitted.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::Error;

use crate::election_support::client;

const SEED: u64 = 49_004;

/// The names of the count's read lock for `k = 2` (binary 10, in ten
/// digits).
fn count_names(name: &str) -> Vec<String> {
    (0..10)
        .map(|bit| format!("semaphore/{name}/count-bit/{bit}/{}", (2usize >> bit) & 1))
        .collect()
}

/// A handle with k = 2 holds both permits as one permit
/// (`acquire_many(2)`). Its `fencing_token()` draws slot 0's token (and
/// confirms the count). An administrator then forces the count open and a
/// process with k = 3 is admitted, taking slot 2: three holders of a
/// semaphore whose holders believe it has two permits. The permit's slot 1
/// has never had a token.
///
/// docs/semaphore.md: "once it is [lost], `fencing_token()`,
/// `fencing_tokens()` and `unlock()` answer `Error::LockLost`, as a lock
/// guard's do, even while its slot's own lock still stands (when the count
/// was forced open or missed its refreshes, a process with another `k` may
/// hold the semaphore then). Each permit's first `fencing_token()` asks a
/// quorum afresh whether the count is still held, so a count forced open
/// since its last refresh gives it no token". A lock guard's first draw
/// asks a quorum whether the lock is held; slot 1's first draw here asks
/// about slot 1 only, and hands out a token drawn after the count was
/// forced open, with the k = 3 process holding.
#[tokio::test(start_paused = true)]
async fn a_permit_of_two_slots_whose_count_was_forced_open_after_its_first_token_draws_no_token_for_its_other_slot(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");

    let jobs = a.semaphore("jobs", 2).unwrap();
    let both = jobs.acquire_many(2).await.unwrap();
    assert_eq!(both.slots(), [0, 1]);
    let first = both.fencing_token().await.expect("slot 0's token");

    assert_eq!(a.force_unlock(count_names("jobs")).await.unwrap(), 3);
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        b.semaphore("jobs", 3).unwrap().acquire(),
    )
    .await
    .expect("the other count is admitted")
    .unwrap();
    eprintln!("a process with k = 3 holds slots {:?}", other.slots());

    let tokens = both.fencing_tokens().await;
    eprintln!(
        "the k = 2 permit: first token {first}, is_lost {}, fencing_tokens {tokens:?}",
        both.is_lost()
    );
    assert!(
        matches!(tokens, Err(Error::LockLost))
            || tokens
                .as_ref()
                .is_ok_and(|t| t.iter().all(|&(slot, _)| slot == 0)),
        "the count of the k = 2 permit was forced open and a k = 3 process holds the semaphore, \
         yet fencing_tokens() hands out a first token for slot 1: {tokens:?}"
    );
    drop(other);
}
