//! Why `Semaphore::acquire_timeout` gives up when the head of the line's
//! count check keeps being refused by a check held elsewhere (one left
//! behind by another acquirer), with every locker up and answering within
//! 10 ms. The rustdoc of `acquire_timeout`: "`Error::Timeout` when the
//! permits (or the line) were held elsewhere, `Error::Quarantined` or
//! `Error::QuorumUnavailable` when the lockers could not grant"; and
//! docs/guarantees.md: "`Error::Timeout` only when the lock is held
//! elsewhere and that alone keeps it from being granted ...
//! `Error::QuorumUnavailable`, naming each unreachable locker and why,
//! otherwise". Each attempt at the count is a new one-round try, so a
//! deadline that lands while one is in flight finds no answers yet.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{three_answering_in_10_ms, CheckHeldElsewhere};
use quorum_lock::Error;

const SEED: u64 = 4242;

/// One acquire_timeout of `timeout` against a check held elsewhere.
async fn give_up_after(timeout: Duration) -> Result<(), Error> {
    let cluster = three_answering_in_10_ms(SEED);
    // One of the flipped digits of 2, which a count-2 check write-locks.
    let held = CheckHeldElsewhere::new(&cluster, SEED).await;
    let result = held.semaphore().acquire_timeout(timeout).await.map(drop);
    drop(held.left_behind);
    result
}

#[tokio::test(start_paused = true)]
async fn acquire_timeout_behind_a_count_check_held_elsewhere_says_timeout_whenever_it_gives_up() {
    eprintln!("seed {SEED}");
    let mut wrong = Vec::new();
    // Deadlines 1 ms apart around two attempts at the count.
    for ms in (90..140u64).chain(1180..1230) {
        match give_up_after(Duration::from_millis(ms)).await {
            Err(Error::Timeout) => {}
            other => wrong.push((ms, format!("{other:?}"))),
        }
    }
    assert!(
        wrong.is_empty(),
        "every locker is up and answers within 10 ms; only a check held elsewhere refuses, \
         yet {} of 100 deadlines (ms: {:?}) gave another error, the first: {:?}",
        wrong.len(),
        wrong.iter().map(|(ms, _)| *ms).collect::<Vec<_>>(),
        wrong.first()
    );
}
