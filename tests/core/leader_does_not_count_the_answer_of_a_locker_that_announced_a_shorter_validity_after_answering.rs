//! Reproduces a past break: `Election::leader` counted toward its write quorum the answer of a locker that announced a validity shorter than the lease after it answered, before the quorum was made.
//!
//! docs/guarantees.md, "Settings cannot panic": a server that announces a
//! shorter validity later "is not counted on: it counts as a locker that
//! is down". `Election::leader`: "Fails with [`Error::QuorumUnavailable`]
//! when fewer than a write quorum answered"; docs/election.md: it "reports
//! a leader only when a write quorum of the answers carries its term".
//! A proclamation and a fencing draw tally their answers anew at each
//! answer, since a locker may announce a shorter validity after it
//! answered; `read_round` (src/election/calls.rs) checks each answer only
//! as it arrives.
//!
//! The scene: three lockers; x leads election "e" on all three. Locker 1
//! then answers 100 ms late and locker 2 hangs. Another client asks who
//! leads: locker 0 answers at once, announces 1 s at 50 ms, and locker 1's
//! answer at 100 ms makes a "quorum" of locker 0 and locker 1, of which
//! only locker 1 may be counted on.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::shrinking::Announcing;
use quorum_lock::testing::{FaultyLocker, Latency};
use quorum_lock::{LocalLocker, NetLocker};

const SEED: u64 = 4611;

#[tokio::test(start_paused = true)]
async fn leader_does_not_count_the_answer_of_a_locker_that_announced_a_shorter_validity_after_answering(
) {
    eprintln!("seed {SEED}");
    let learned = Arc::new(AtomicBool::new(false));
    let node0 = Announcing::one_second_once("node-0", &learned);
    let node1 = Arc::new(FaultyLocker::local(
        Arc::new(LocalLocker::named("node-1")),
        SEED,
    ));
    let node2 = Arc::new(FaultyLocker::local(
        Arc::new(LocalLocker::named("node-2")),
        SEED + 1,
    ));
    let lockers = vec![
        node0.clone() as Arc<dyn NetLocker>,
        node1.clone(),
        node2.clone(),
    ];
    let x = common::seeded(lockers.clone(), "x", SEED);
    // Built while locker 0 still announces nothing (a build refuses it after).
    let o = common::seeded(lockers, "o", SEED + 2);
    let _leading = tokio::time::timeout(
        Duration::from_secs(5),
        x.election("e").expect("a valid name").campaign(&b"one"[..]),
    )
    .await
    .expect("in time")
    .expect("x leads");

    node1.set_latency(Latency::Fixed(Duration::from_millis(100)));
    node2.set_hang(true);
    let read = async {
        tokio::time::timeout(
            Duration::from_secs(60),
            o.election("e").expect("a valid name").leader(),
        )
        .await
        .expect("the read ends within its timeout")
    };
    let announce = async {
        // Locker 0 has answered the read by now; it then announces 1 s.
        tokio::time::sleep(Duration::from_millis(50)).await;
        learned.store(true, Ordering::SeqCst);
    };
    let (read, ()) = tokio::join!(read, announce);
    eprintln!("o's leader(): {read:?}");
    assert_eq!(node0.validity(), Some(Duration::from_secs(1)));
    assert!(
        read.is_err(),
        "of the lockers o may count on, only locker 1 answered (locker 0 announced 1 s after its \
         answer, before the quorum was made; locker 2 hangs), yet leader() gave {read:?}, \
         counting locker 0's answer toward its write quorum"
    );
}
