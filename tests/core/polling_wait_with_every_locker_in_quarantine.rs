//! Reproduces a past break: a polling wait (`Waiting::Poll`) against lockers all in quarantine said "asked a moment ago" and gave up with `Timeout`, because the release of each failed round, answered by the lockers, made their quarantine refusals count as over.
//!
//! `DRWMutex::lock_timeout`'s rustdoc: it gives up with
//! "[`Error::Quarantined`] when too many lockers were in quarantine after a
//! restart", and `DRWMutex::waiting` says why the wait waits ("held
//! elsewhere, lockers in quarantine, or too few reachable"). Three
//! in-process lockers, all restarted (in quarantine for 60 s), a polling
//! coordinator: every round is refused with the quarantine error by every
//! locker. Each failed round is dropped, and its release sends an unlock to
//! every locker that failed; a locker in quarantine answers an unlock, and
//! that answer is taken as "answered since the failure". From then on the
//! wait reads every locker as "still answering" (`WaitReason::Answering`),
//! and a deadline gives `Error::Timeout`, which the command line reports
//! as "held elsewhere" (exit 75) instead of 69.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_in_quarantine::{client_h, ended, restarted, status_now, wait_for_job};
use quorum_lock::{Error, WaitReason, Waiting};
use tokio::time::sleep;

const SEED: u64 = 3607;

#[tokio::test(start_paused = true)]
async fn a_polling_wait_against_lockers_all_in_quarantine_says_quarantine_and_fails_with_quarantined(
) {
    let cluster = restarted(SEED, None);
    let client = client_h(&cluster, SEED)
        .waiting(Waiting::Poll)
        .build()
        .unwrap();
    let (mutex, wait) = wait_for_job(&client, Duration::from_secs(1));
    sleep(Duration::from_millis(900)).await;
    let status = status_now(&mutex, "900ms");
    let result = ended(wait).await;
    assert_eq!(
        status.reason(),
        WaitReason::Quarantine,
        "every locker refuses with its quarantine error: {status}"
    );
    assert_eq!(status.quarantined.len(), 3, "{status}");
    match result {
        Err(Error::Quarantined { quarantined, .. }) => {
            assert_eq!(quarantined, ["node-0", "node-1", "node-2"])
        }
        other => panic!("expected Error::Quarantined naming the three lockers, got {other:?}"),
    }
}
