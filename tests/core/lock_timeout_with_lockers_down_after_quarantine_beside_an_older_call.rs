//! Reproduces a past break: lockers that refused a wait for quarantine and then went down still read as "in quarantine" for as long as another lock's call, sent to them just before the refusal came back, stays open; the wait gives up with `Quarantined`, not `QuorumUnavailable`.
//!
//! docs/guarantees.md ("Why a wait waits"): "a locker that refused for
//! quarantine and then leaves a call unanswered for too long (below)
//! counts as unreachable, not as in quarantine"; "A locker that has not
//! answered counts as still answering for twice as long as its latest
//! answer took, counted from the earliest call it has left unanswered".
//!
//! Three in-process lockers, all restarted (in quarantine for 60 s), every
//! call delayed 50 ms; rounds wait 10 s for answers. Handle A waits on
//! "job" with a 9 s deadline; 10 ms later handle B of the same client
//! waits on "other". A's first calls come back at 50 ms, refused for
//! quarantine; at 55 ms the three crash, while B's calls (asked at 10 ms)
//! are still on their way: from then on nothing is answered. At 8.9 s the
//! lockers have left A's calls unanswered for almost 8.9 s, yet A reads
//! them as three lockers in quarantine and gives up with
//! `Error::Quarantined`. The rule that turns a locker that refused for
//! quarantine into an unreachable one looks only at its earliest open
//! call, and asks that it was asked after the refusal: B's call, asked
//! 40 ms before it, keeps the refusal standing until that call's own 10 s
//! timeout. Without B (the test of 3abe609) A reads them as unreachable.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_wait_in_quarantine::{client_h, ended, restarted, status_now, wait_for_job};
use quorum_lock::{Error, Timeouts, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 7283;

#[tokio::test(start_paused = true)]
async fn lockers_down_after_refusing_for_quarantine_read_as_unreachable_beside_an_older_call() {
    let cluster = restarted(SEED, Some(Duration::from_millis(50)));
    let client = client_h(&cluster, SEED)
        .timeouts(Timeouts {
            acquire: Duration::from_secs(10),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let (mutex, wait) = wait_for_job(&client, Duration::from_secs(9));
    sleep(Duration::from_millis(10)).await;
    let other = client.rw_mutex(["other"]).unwrap();
    let other_wait = tokio::spawn(async move {
        other
            .lock_timeout(Duration::from_secs(20))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(45)).await;
    let before = status_now(&mutex, "55ms, before the crash");
    assert_eq!(before.reason(), WaitReason::Quarantine, "{before}");
    cluster.crash(&[0, 1, 2]).unwrap();
    sleep(Duration::from_millis(8_845)).await;
    let status = status_now(&mutex, "8.9s, 8.845s after the crash");
    let result = ended(wait).await;
    other_wait.abort();
    assert_eq!(
        status.reason(),
        WaitReason::NoQuorum,
        "the lockers have answered nothing for 8.845s: {status}"
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
