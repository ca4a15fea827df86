//! Reproduces a past break: a resign returned `Ok` counting a polled locker's earlier refusal as a confirmation while the campaign's retry to it had been granted there, so `leader()` still read the resigned leader on a write quorum of lockers.
//!
//! docs/election.md, "Observers see the truth, in order": "After a
//! `resign()` that returned `Ok`, `leader()` returns `None` or a newer
//! leader: the resigned term is on fewer lockers than a write quorum from
//! then on". `WriteGuard::unlock` (and a resign) is `Ok` once "a quorum of
//! lockers confirms" the release.
//!
//! What happens instead: three lockers; locker 2 keeps no queues (it is
//! polled), and "y" holds the election's lock there. l campaigns: locker
//! 1 grants at once, locker 0's grant is slow (300 ms), locker 2 refuses.
//! The wait asks locker 2 again after a backoff; y has let go by then, so
//! locker 2 grants, but its reply is slow. Locker 0's grant wins the
//! campaign; l draws its term and proclaims on all three lockers (locker 2
//! holds its entry). l resigns while locker 2's reply is still on its way,
//! and its unlock to locker 1 is lost. The release counts locker 0's
//! confirmation and locker 2 by its last answer, the refusal ("they never
//! held this uid", `Acquisition::begin_release`): two of three, so
//! `resign()` returns `Ok`. Lockers 1 and 2 still hold l's entry and
//! value, a write quorum, and `leader()` reports the resigned leader.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Hooked, Optional};
use crate::common::{self, args, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{ImmediateLocker, LockMode, NetLocker};

const SEED: u64 = 36_314;

#[tokio::test(start_paused = true)]
async fn a_confirmed_resign_counts_no_locker_whose_retry_was_granted_on_its_way() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let y = args("y", &["election/e"]);
    let local2 = cluster.lockers()[2].clone();
    assert!(
        local2
            .lock_now(&y, LockMode::Write)
            .expect("locker 2 answers"),
        "y holds the election's lock on locker 2"
    );
    let calls_to_2 = Arc::new(AtomicUsize::new(0));
    let cut = Arc::new(AtomicBool::new(false));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let inner = if i == 2 {
                Hooked::new(l)
                    .lacking(&[Optional::LockWait, Optional::Queues])
                    .shared()
            } else {
                l
            };
            let (calls_to_2, local2, y, cut) =
                (calls_to_2.clone(), local2.clone(), y.clone(), cut.clone());
            Arc::new(Relay::new(inner, move |kind, a| {
                if &*a.owner != "l" {
                    return Route::Forward;
                }
                match (i, kind) {
                    (1, CallKind::Unlock) if cut.load(Ordering::SeqCst) => {
                        Route::Lost("the unlock to locker 1 is lost".into())
                    }
                    (0, CallKind::Lock) => Route::SlowReply(Duration::from_millis(300)),
                    (2, CallKind::Lock) if calls_to_2.fetch_add(1, Ordering::SeqCst) >= 1 => {
                        // The retry: y has let go by the time it arrives.
                        let _ = local2.unlock_now(&y, LockMode::Write);
                        Route::SlowReply(Duration::from_secs(30))
                    }
                    _ => Route::Forward,
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let l = common::seeded(lockers, "l", SEED);
    let reader = common::seeded(cluster.net_lockers(), "r", SEED + 1);

    let mut leading = tokio::time::timeout(
        Duration::from_secs(5),
        l.election("e").unwrap().campaign(b"l".to_vec()),
    )
    .await
    .expect("in time")
    .expect("l leads");
    let uid = leading.uid().to_owned();
    let term = leading.term();
    let asked = calls_to_2.load(Ordering::SeqCst);
    let before = holding(cluster.lockers(), &uid);
    eprintln!("l leads in term {term}; locker 2 asked {asked} times; entries {before:?}");
    assert!(asked >= 2, "locker 2 was asked again: {asked} calls");
    assert_eq!(
        before,
        [true, true, true],
        "locker 2 granted the retry, whose reply is on its way"
    );

    cut.store(true, Ordering::SeqCst);
    let resigned = leading.resign().await;
    let after = holding(cluster.lockers(), &uid);
    let read = reader.election("e").unwrap().leader().await;
    eprintln!("resign gave {resigned:?}; entries {after:?}; leader() gave {read:?}");
    assert!(
        resigned.is_err() || !matches!(&read, Ok(Some(leader)) if leader.term == term),
        "resign() returned Ok, yet lockers {after:?} still hold l's entry and leader() reads the \
         resigned leader of term {term}: {read:?}"
    );
}
