//! Reproduces a past break: a `try_lock` counted the refusal of a locker that announced a validity shorter than the lease while its lock call was on its way, and said `WouldBlock` (held elsewhere) where that locker counts as down and too few lockers answered.
//!
//! docs/guarantees.md ("Settings cannot panic"): a server that announces a
//! shorter validity later "counts as a locker that is down, with that
//! message as the reason". "Why a wait waits": "A locker that no longer
//! honours the lease is not counted on, whatever it said" is how the code
//! files it (src/lock/wait_status.rs), and "A `try_lock` ... that stops
//! because grants can no longer make the quorum says `WouldBlock` when the
//! lock is held elsewhere by the rule above (lockers enough for a quorum
//! answered or are still answering, and some refused), and otherwise names
//! its lockers as here". The rustdoc of `DRWMutex::try_lock`: `WouldBlock`
//! when held elsewhere, `QuorumUnavailable` when too few lockers answered.
//!
//! The scene: three lockers (write quorum 2). "y" holds "res" on locker 0,
//! which announces a 1 s validity (shorter than x's 60 s lease) only once
//! x's lock call has reached it; locker 1 is down; locker 2 grants. Of the
//! lockers x may count on, only locker 2 answered: too few for a quorum,
//! so x's `try_lock` must not say the lock is held elsewhere. Had locker 0
//! announced its validity a moment earlier, the same round ends with the
//! lease message; it ends with `WouldBlock` because the refusal arrived
//! after the announcement.
//!
//! Suspected cause: src/lock/round.rs `Round::decide` turns only a grant
//! (`Ok(true)`) of a locker failing `Coordinator::honours_lease` into a
//! failure; its refusal (`Ok(false)`) is tallied, and
//! `Tally::failure` (src/quorum/mod.rs) calls the round a `Conflict` once
//! `answered() >= quorum` (a grant plus that refusal), before the status
//! that would file it out of reach is read.
#![cfg(feature = "testing")]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::common::shrinking::{Announcing, Learns, Scripted};
use crate::common::{self, args, Behaviour, FaultyLocker};
use quorum_lock::{Error, LocalLocker, NetLocker};

const SEED: u64 = 42_101;

#[tokio::test(start_paused = true)]
async fn try_lock_does_not_count_the_refusal_of_a_locker_that_announced_a_shorter_validity_on_its_way(
) {
    eprintln!("seed {SEED}");
    let node0 = Arc::new(LocalLocker::named("node-0"));
    let y = args("y", &["res"]);
    assert!(
        node0.lock(&y).await.expect("answers"),
        "y holds res on locker 0"
    );
    let node1 = FaultyLocker::wrap(Arc::new(LocalLocker::named("node-1")));
    node1.set(Behaviour::Fail);
    let node2 = Arc::new(LocalLocker::named("node-2"));

    // Locker 0 announces no validity until a lock call of it arrived, then
    // 1 s (a server restarted with that validity, met on the connection
    // the call reconnected on).
    let x = common::seeded(
        vec![
            Arc::new(Scripted(Announcing {
                inner: node0.clone(),
                learned: Arc::new(AtomicBool::new(false)),
                learns: Learns::WhenALockArrives,
                announces: Some(Duration::from_secs(1)),
            })) as Arc<dyn NetLocker>,
            node1.clone(),
            node2.clone(),
        ],
        "x",
        SEED,
    );
    let got = tokio::time::timeout(
        Duration::from_secs(30),
        x.rw_mutex(["res"]).unwrap().try_lock(),
    )
    .await
    .expect("try_lock ends");
    let got = got.map(|_| ());
    eprintln!("x's try_lock: {got:?}");
    assert!(
        !matches!(got, Err(Error::WouldBlock)),
        "try_lock said WouldBlock, counting the refusal of locker 0, which announced a 1 s \
         validity (shorter than the 60 s lease) while the call was on its way and counts as \
         down; with locker 1 down only locker 2 answered: {got:?}"
    );
    assert!(
        got.is_err(),
        "one grant of three is no write quorum: {got:?}"
    );
}
