//! Reproduces a past break: lockers in quarantine whose refusals each take 20 ms read as unreachable ("no answer yet after 3ms") whenever the wait's next call to them is on its way, and a wait that gives up then fails with `QuorumUnavailable`, not `Quarantined`.
//!
//! docs/guarantees.md ("Why a wait waits"): a refusal for quarantine
//! "stands until the time it said was left has passed, or until it answers
//! a call a locker in quarantine refuses"; "A wait that gives up among
//! lockers all in quarantine therefore says `Quarantined`"; only "a locker
//! that refused for quarantine and then leaves a call unanswered for too
//! long" counts as unreachable, and "A locker that has not answered counts
//! as still answering for twice as long as its latest answer took".
//!
//! Three in-process lockers, all restarted (in quarantine for 60 s), each
//! call delayed 20 ms; a fresh client waits on "job" with a deadline of
//! 2.49 s. Every locker refuses every round for quarantine, in 20 ms. From
//! the first refusals on, `waiting()` is sampled every 10 ms: whenever the
//! wait's next call is on its way (a few ms after it was asked, well below
//! twice the 20 ms an answer takes), the three read as unreachable, "no
//! answer yet after 3ms". The time an answer took is kept for granted or
//! refused calls only, not for refusals for quarantine, so a locker that
//! has only refused for quarantine counts as never having answered, and
//! any call on its way makes it "silent too long" at once. The deadline
//! at 2.49 s falls in such a moment, and the wait gives up with
//! `QuorumUnavailable` naming the three as silent ("no answer yet after
//! 19ms"), so an operator (the CLI's `run --timeout` prints the error) is
//! told the hosts are unreachable, not that they are in quarantine for
//! another 57 s.
#![cfg(feature = "testing")]

use crate::common;
use std::time::Duration;

use crate::a_wait_in_quarantine::{client_h, restarted, wait_for_job};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 5117;

#[tokio::test(start_paused = true)]
async fn lockers_in_quarantine_answering_late_read_as_in_quarantine() {
    let cluster = restarted(SEED, Some(Duration::from_millis(20)));
    let client = client_h(&cluster, SEED).build().unwrap();
    let (mutex, wait) = wait_for_job(&client, Duration::from_millis(2_490));
    // Until the first refusals the lockers have never answered this
    // client: unreachable at once, as documented. From then on they have.
    let mut first_quarantine = None;
    let mut wrong = Vec::new();
    for step in 1..=248u64 {
        sleep(Duration::from_millis(10)).await;
        let Some(status) = mutex.waiting() else {
            continue;
        };
        if status.reason() == WaitReason::Quarantine {
            first_quarantine.get_or_insert(step * 10);
        } else if first_quarantine.is_some() {
            eprintln!("at {}ms: {status}", step * 10);
            wrong.push((step * 10, status.to_string()));
        }
    }
    let result = common::ended(wait).await;
    eprintln!("first read as in quarantine at {first_quarantine:?}ms; gave up with: {result:?}");
    assert!(first_quarantine.is_some(), "never read as in quarantine");
    assert!(
        wrong.is_empty(),
        "every locker refuses for quarantine in 20ms, yet after the first refusals the wait read \
         otherwise {} times, first at {:?}",
        wrong.len(),
        wrong.first()
    );
    assert!(
        matches!(result, Err(Error::Quarantined { .. })),
        "expected Quarantined, got {result:?}"
    );
}
