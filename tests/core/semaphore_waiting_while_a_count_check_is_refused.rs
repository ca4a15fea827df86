//! What `Semaphore::waiting()` says while the head of the line's count
//! check keeps being refused by a check held elsewhere (one left behind by
//! another acquirer, which expires within the lockers' validity), with
//! every locker up. docs/semaphore.md: "`waiting()` says why the handle's
//! latest acquire waits ...; between two attempts at the count, what the
//! last attempt saw." and the rustdoc of `Semaphore::waiting`: "`None`
//! when it is not waiting ... between two attempts at the count, what the
//! last attempt saw".
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{three_answering_in_10_ms, CheckHeldElsewhere};
use quorum_lock::WaitReason;
use tokio::time::{sleep, Instant};

const SEED: u64 = 4242;

#[tokio::test(start_paused = true)]
async fn waiting_while_the_count_check_is_held_elsewhere_says_held_elsewhere_between_and_during_attempts(
) {
    eprintln!("seed {SEED}");
    let cluster = three_answering_in_10_ms(SEED);
    // A check of a count-2 acquirer write-locks the flipped digits of 2;
    // one of them, held elsewhere, refuses every check of this handle.
    let held = CheckHeldElsewhere::new(&cluster, SEED).await;
    let sem = held.semaphore();
    let waiter = sem.clone();
    let acquire = tokio::spawn(async move { waiter.acquire().await });
    let start = Instant::now();
    sleep(Duration::from_millis(100)).await;
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(7) {
        assert!(
            !acquire.is_finished(),
            "the acquire ended: {:?}",
            acquire.await
        );
        seen.push((
            start.elapsed().as_millis(),
            sem.waiting().map(|status| status.reason()),
        ));
        sleep(Duration::from_millis(10)).await;
    }
    acquire.abort();
    drop(held.left_behind);
    let wrong: Vec<_> = seen
        .iter()
        .filter(|(_, reason)| *reason != Some(WaitReason::HeldElsewhere))
        .collect();
    assert!(
        wrong.is_empty(),
        "the acquire waits only because its count check is held elsewhere, yet waiting() \
         said (ms since the acquire began, reason), of {} looks every 10 ms: {wrong:?}",
        seen.len()
    );
}
