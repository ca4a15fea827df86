//! What `Semaphore::waiting` says while the head of the line's count check
//! is refused by a check held elsewhere (one left behind by another
//! acquirer), every locker up and answering within 10 ms, through the
//! attempts at the count and the read-outs between them.
//!
//! The rustdoc of `Semaphore::waiting`: "between two attempts at the
//! count, what the last attempt saw. While it waits for a lock, its reason
//! is the one `acquire_timeout` would give up with then"; the rustdoc of
//! `WaitStatus::granted`: "Lockers that granted this wait", and of
//! `held_elsewhere`: "Lockers that refused it or queued it behind another
//! owner".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{three_answering_in_10_ms, CheckHeldElsewhere};
use tokio::time::{sleep, Instant};

const SEED: u64 = 3651;

/// Fails: once the check was refused (at 20 ms), the read-out's reads
/// (granted: no other count holds a slot) are the locks the acquire
/// "waits" on, the first of a batch borrowing the grants of the read
/// before it; and the next attempt's count read borrows the read-out's
/// grants. In those windows (51-60 ms, 71-80 ms, 98-107 ms) `waiting()`
/// reads "granted by 3 of 3 lockers, waiting for the grant to be
/// confirmed" (`held_elsewhere` 0), where the last attempt at the count
/// saw its check held elsewhere on all three.
#[tokio::test(start_paused = true)]
async fn waiting_behind_a_count_check_held_elsewhere_never_says_granted() {
    eprintln!("seed {SEED}");
    let cluster = three_answering_in_10_ms(SEED);
    // One of the flipped digits of 2, which a count-2 check write-locks.
    let held = CheckHeldElsewhere::new(&cluster, SEED).await;
    let sem = held.semaphore();
    let acquiring = sem.clone();
    let start = Instant::now();
    let acquire = tokio::spawn(async move { acquiring.acquire().await });
    let mut seen_held = false;
    let mut wrong = Vec::new();
    for _ in 0..1500 {
        sleep(Duration::from_millis(1)).await;
        let Some(status) = sem.waiting() else {
            continue;
        };
        if status.held_elsewhere > 0 {
            seen_held = true;
        } else if seen_held {
            wrong.push((start.elapsed(), status.to_string()));
        }
    }
    assert!(
        seen_held,
        "waiting() never said the check is held elsewhere"
    );
    assert!(
        !acquire.is_finished(),
        "the check held elsewhere keeps the acquire waiting"
    );
    acquire.abort();
    assert!(
        wrong.is_empty(),
        "after the check was refused, waiting() said {} times that nothing is held \
         elsewhere, the first at {:?}: {:?}",
        wrong.len(),
        wrong.first().map(|w| w.0),
        wrong.first().map(|w| &w.1)
    );
}
