//! Reproduces a past break: a fencing draw that stopped short of its quorum counted, in its error, a locker that announced a shorter validity after answering its token: `answered` included it and `unreachable` did not name it.
//!
//! docs/guarantees.md, "Settings cannot panic": a server that announces a
//! shorter validity later "is not counted on: it counts as a locker that
//! is down". `Error::QuorumUnavailable::answered`: "for a fencing draw ...
//! a token drawn"; `unreachable`: "The lockers that did not answer, each
//! with why". README: "`unreachable` names each and why". A fencing draw's
//! `ask` (src/quorum/fence.rs) drops such a locker's token from its tally
//! once it announces, but still files it as `Counted` for the error; when
//! it announced before answering, the draw instead fails with its lease
//! error.
//!
//! The scene: three lockers; x holds "res" on all three. Lockers 1 and 2
//! hang. x's first `fencing_token()` gets locker 0's token at once and
//! waits for the others; locker 0 then announces a validity of 1 s. The
//! draw runs out of time: of the lockers x may count on, none answered.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::shrinking::Announcing;
use quorum_lock::testing::FaultyLocker;
use quorum_lock::{Error, LocalLocker, NetLocker};

const SEED: u64 = 4402;

#[tokio::test(start_paused = true)]
async fn a_fencing_draw_that_stops_short_does_not_count_a_locker_that_announced_a_shorter_validity_after_answering(
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
    let x = common::seeded(
        vec![
            node0.clone() as Arc<dyn NetLocker>,
            node1.clone(),
            node2.clone(),
        ],
        "x",
        SEED,
    );
    let x_guard = tokio::time::timeout(Duration::from_secs(5), x.rw_mutex(["res"]).unwrap().lock())
        .await
        .expect("in time")
        .expect("x locks");

    node1.set_hang(true);
    node2.set_hang(true);
    let draw = async {
        tokio::time::timeout(Duration::from_secs(60), x_guard.fencing_token())
            .await
            .expect("the draw ends within its refresh timeout")
    };
    let announce = async {
        // Locker 0 has answered its token by now; it then announces 1 s.
        tokio::time::sleep(Duration::from_millis(50)).await;
        learned.store(true, Ordering::SeqCst);
    };
    let (token, ()) = tokio::join!(draw, announce);
    eprintln!("x's first fencing_token: {token:?}");
    let node0_name = node0.endpoint();
    match &token {
        Err(Error::QuorumUnavailable {
            answered,
            unreachable,
            ..
        }) => {
            let named = unreachable.iter().any(|u| u.endpoint == node0_name);
            assert!(
                *answered == 0 && named,
                "locker 0 announced a validity shorter than the lease and counts as down, yet the \
                 draw's error counts {answered} locker(s) as answered and names unreachable \
                 {unreachable:?}, without {node0_name}"
            );
        }
        Err(Error::InvalidArgument(_)) | Err(Error::LockLost) => {}
        other => panic!("no quorum of lockers x may count on drew a token: {other:?}"),
    }
}
