//! Reproduces a past break: lockers that refused a wait for quarantine and then went down (every call left unanswered) still read as "in quarantine" for the whole time they had said was left, and the wait gave up with `Quarantined`, not `QuorumUnavailable` naming them as silent.
//!
//! docs/guarantees.md ("Why a wait waits"): a locker that has not answered
//! "counts as still answering for twice as long as its latest answer took,
//! counted from the earliest call it has left unanswered ... and as
//! unreachable after that ("no answer yet after 300ms")"; a wait that gives
//! up fails with "`Error::QuorumUnavailable`, naming each locker that did
//! not answer and why, when too few lockers answer". A refusal for
//! quarantine stands "whatever it answered since" — an answer, that is:
//! not a silence of many seconds.
//!
//! Three in-process lockers, all restarted (in quarantine for 60 s), the
//! default waiting, rounds that wait 10 s for answers (`Timeouts::acquire`).
//! A wait on "job" with a 9 s deadline is refused by every locker for
//! quarantine. At 1 s all three crash: every call to them hangs from then
//! on. At 8.9 s they have left the wait's calls unanswered for 7.9 s,
//! against answers that took no time; yet the wait reads them as three
//! lockers in quarantine "for 51s more", and gives up with
//! `Error::Quarantined`, so an operator is told to wait out a quarantine on
//! hosts that are gone. They read so until a round's call to them fails
//! (the round's timeout), however long that is. (So also before the fix
//! of 63fc3f0; since it, an answer in between no longer ends the refusal
//! either, so nothing but that timeout does.)
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_in_quarantine::{client_h, ended, restarted, status_now, wait_for_job};
use quorum_lock::{Error, Timeouts, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 3641;

#[tokio::test(start_paused = true)]
async fn lockers_that_went_down_after_refusing_for_quarantine_read_as_unreachable() {
    let cluster = restarted(SEED, None);
    let client = client_h(&cluster, SEED)
        .timeouts(Timeouts {
            acquire: Duration::from_secs(10),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let (mutex, wait) = wait_for_job(&client, Duration::from_secs(9));
    sleep(Duration::from_secs(1)).await;
    let before = status_now(&mutex, "1s, before the crash");
    assert_eq!(before.reason(), WaitReason::Quarantine, "{before}");
    cluster.crash(&[0, 1, 2]).unwrap();
    sleep(Duration::from_millis(7_900)).await;
    let status = status_now(&mutex, "8.9s, 7.9s after the crash");
    let result = ended(wait).await;
    assert_eq!(
        status.reason(),
        WaitReason::NoQuorum,
        "the lockers have been silent for 7.9s: {status}"
    );
    match result {
        Err(Error::QuorumUnavailable { unreachable, .. }) => {
            let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
            assert_eq!(named, ["node-0", "node-1", "node-2"], "{unreachable:?}");
        }
        other => {
            panic!("expected QuorumUnavailable naming the three silent lockers, got {other:?}")
        }
    }
}
