//! Reproduces a past break: `finish_releases` returns `Ok` at once while a lost lock's clean-up, owed and due within its bound (at the safety margin), has not been sent: the clean-up task waiting for the margin is recorded nowhere, though the same clean-up, had its task's runtime shut down, would be queued and waited for.
//!
//! docs/guarantees.md, "A lost lock is freed once its holder lets go": the
//! entries of a lost lock are force-unlocked a safety margin after the
//! loss; "from the declaration on, every unlock of that lock waits for the
//! margin or the holder, whatever sends it ... Each is queued until then.
//! ... `Dsync::finish_releases(bound)` waits for these releases, and every
//! other one handed to the background, before a process exits."
//! `Dsync::finish_releases` (rustdoc): "Waits, at most `within`, until
//! every release this client ... handed to the background has finished:
//! ... the entries of lost locks". "Any runtime": "Every unlock is owed
//! from the moment its release is planned: ... and so does a lost lock's
//! clean-up".
//!
//! The scene (paused time): a lock on three lockers is lost (refreshes to
//! lockers 1 and 2 hang until the loss is declared; then they answer
//! again, their entries still there); its guard is kept. Right after,
//! `finish_releases` with a bound of twice the safety margin returns `Ok`
//! at once, every entry still in place; the clean-up is sent only later,
//! at the margin.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common;
use quorum_lock::testing::TestCluster;
use quorum_lock::Lease;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn finish_releases_waits_for_the_clean_up_of_a_lost_lock_whose_guard_is_still_held() {
    let seed = 61_005;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    let ds = common::seeded(cluster.net_lockers(), "h", seed);
    let guard = ds.rw_mutex(["lost"]).unwrap().lock().await.unwrap();
    let uid = guard.uid().to_owned();
    let lost = guard.lost();
    cluster.set_hang(true, &[1, 2]).unwrap();
    lost.await;
    cluster.set_hang(false, &[1, 2]).unwrap();
    let lost_at = Instant::now();
    assert!(guard.is_lost(), "control: the lock is lost");
    assert_eq!(
        common::holding(cluster.lockers(), &uid),
        [true, true, true],
        "control: its entries are kept for the safety margin"
    );

    let margin = Lease::default().safety_margin;
    let finished = ds.finish_releases(margin * 2).await;
    let waited = lost_at.elapsed();
    let left = common::holding(cluster.lockers(), &uid);
    eprintln!(
        "finish_releases({:?}): {finished:?} after {waited:?}; lockers holding: {left:?}",
        margin * 2
    );

    // Control: the clean-up is owed, and sent at the margin.
    tokio::time::sleep_until(lost_at + margin + Duration::from_secs(1)).await;
    let later = common::holding(cluster.lockers(), &uid);
    assert_eq!(
        later,
        [false, false, false],
        "control: the clean-up runs at the margin"
    );

    assert!(
        finished.is_ok() && !left.iter().any(|h| *h),
        "a lost lock's clean-up is owed and falls due at the safety margin ({margin:?}), \
         within finish_releases' bound ({:?}), yet it returned {finished:?} after {waited:?} \
         with the lockers holding the lost lock's entries {left:?}: the clean-up task waiting \
         for the margin is recorded on no queue, so finish_releases does not wait for it",
        margin * 2
    );
    drop(guard);
}
