//! Reproduces a past break: lockers that refused a wait for quarantine read as "asked a moment ago" (and the wait gives up with `Timeout`, exit 75) once another lock's call failed on them for another reason and its release was answered, though they are still in quarantine and nothing is asked of them.
//!
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands until the time it said was left has passed, or until it answers
//! a call a locker in quarantine refuses"; "A wait that gives up among
//! lockers all in quarantine therefore says `Quarantined`". The rustdoc of
//! `WaitReason::Answering`: lockers "asked a moment ago and have not all
//! answered". `DRWMutex::lock_timeout`: `Error::Quarantined` "when too many
//! lockers were in quarantine after a restart".
//!
//! Three in-process lockers, all restarted (in quarantine for 60 s). A
//! wait on "job" with a 1 s deadline is refused by each for quarantine.
//! At 900 ms nodes 0 and 1 refuse connections for a moment: a `try_lock`
//! on "other" through the same client fails there ("connection refused"),
//! and its release is answered once they are healed. Only the latest
//! failure of a locker is kept, so that blip replaced the refusal for
//! quarantine the wait had noted, and the answer to the release ended the
//! blip: from then on the wait reads nodes 0 and 1 as "still answering",
//! `WaitReason::Answering` ("asked a moment ago, waiting for 2 of 3
//! lockers to answer"), though nothing is asked of them and they said they
//! refuse grants for 59 s more. At its deadline the wait gives up with
//! `Timeout`, which the command line reports as held elsewhere (exit 75),
//! instead of `Quarantined` (exit 69, with the time left).
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_in_quarantine::{client_h, ended, restarted, status_now, wait_for_job};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 11;

#[tokio::test(start_paused = true)]
async fn a_wait_in_quarantine_still_says_quarantine_after_another_lock_failed_there_for_a_moment() {
    let cluster = restarted(SEED, None);
    let client = client_h(&cluster, SEED).build().unwrap();
    let (mutex, wait) = wait_for_job(&client, Duration::from_secs(1));
    let other = client.rw_mutex(["other"]).unwrap();
    sleep(Duration::from_millis(900)).await;
    let before = status_now(&mutex, "900ms");
    assert_eq!(before.reason(), WaitReason::Quarantine, "{before}");
    cluster.set_refuse(true, &[0, 1]).unwrap();
    let tried = other.try_lock().await.map(|_guard| ());
    eprintln!("try_lock on another name while nodes 0 and 1 refuse connections: {tried:?}");
    cluster.heal(&[0, 1]).unwrap();
    sleep(Duration::from_millis(50)).await;
    let status = status_now(&mutex, "950ms");
    let result = ended(wait).await;
    assert_ne!(
        status.reason(),
        WaitReason::Answering,
        "nothing is asked of the lockers, which refused for quarantine 59s more: {status}"
    );
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "every locker is in quarantine for 59s more; expected Quarantined, got {result:?}"
    );
}
