//! Reproduces a past break: a waiting lock against lockers all in quarantine gave up with `Timeout` ("asked a moment ago") when another lock of the same coordinator had just been released on those lockers: their answer to that unlock made their quarantine refusals count as over.
//!
//! `DRWMutex::lock_timeout`'s rustdoc: it gives up with
//! "[`Error::Quarantined`] when too many lockers were in quarantine after a
//! restart"; `WaitReason::Answering` is for lockers "asked a moment ago"
//! that "have not all answered". Three in-process lockers, all restarted
//! (in quarantine for 60 s), the default waiting in line. A wait on "job"
//! with a 1 s deadline is refused by every locker with the quarantine
//! error, again at each retry. At 999 ms a `try_lock` on "other" through
//! the same coordinator is refused the same way (and says so: its error
//! is `Quarantined`), and its round is released: each locker answers the
//! unlock. From then on the wait on "job" reads each locker as having
//! answered since its refusal, hence as "still answering", and gives up
//! with `Timeout`, which the command line reports as "held elsewhere"
//! (exit 75). Nothing about the lockers changed: they are still in
//! quarantine for 59 s.
//!
//! The command line's flaky `outcomes::a_wait_in_quarantine_says_so_with_
//! the_time_left` is the same break with the wait's own release: at the
//! deadline the wait is dropped before the error is read, and its release
//! (spawned on another worker) can be answered first; see
//! `lock_timeout_in_quarantine_racing_its_own_release`.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_in_quarantine::{client_h, ended, restarted, status_now, wait_for_job};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 4;

#[tokio::test(start_paused = true)]
async fn a_wait_in_quarantine_still_fails_with_quarantined_after_another_lock_was_released_there() {
    let cluster = restarted(SEED, None);
    let client = client_h(&cluster, SEED).build().unwrap();
    let (mutex, wait) = wait_for_job(&client, Duration::from_secs(1));
    let other = client.rw_mutex(["other"]).unwrap();
    sleep(Duration::from_millis(999)).await;
    let tried = other.try_lock().await.map(|_guard| ());
    eprintln!("try_lock on another name: {tried:?}");
    assert!(
        matches!(tried, Err(Error::Quarantined { .. })),
        "the try is refused for quarantine: {tried:?}"
    );
    // Let the try's release run.
    tokio::task::yield_now().await;
    let status = status_now(&mutex, "999ms");
    let result = ended(wait).await;
    assert_eq!(
        status.reason(),
        WaitReason::Quarantine,
        "every locker still refuses with its quarantine error: {status}"
    );
    match result {
        Err(Error::Quarantined { quarantined, .. }) => {
            assert_eq!(quarantined, ["node-0", "node-1", "node-2"])
        }
        other => panic!("expected Error::Quarantined naming the three lockers, got {other:?}"),
    }
}
