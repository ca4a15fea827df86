//! Reproduces a past break: a permit whose first fencing draw was cancelled after its slot's token was drawn handed that token out on the next call, asking nobody, after the slot was forced open and another holder was given it.
//!
//! `SemaphorePermit::fencing_token` is "Cancel safe, as
//! `WriteGuard::fencing_token`", whose rustdoc says: "A call dropped before
//! it finished leaves no token behind; the next call draws one", and a
//! draw "Fails with `Error::LockLost` when the lock is lost". The permit
//! draws the slot's token and checks the count side by side: when the
//! slot's draw ends first and the call is then dropped (the count's check
//! still on its way), the slot's guard has cached a token the permit never
//! handed out. The next call hands out that cached token without asking a
//! quorum whether the slot is still held, though it was forced open in
//! between and another process holds it; a `WriteGuard` whose first draw
//! came then would have been refused with `LockLost`.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Error, NetLocker};

const SEED: u64 = 4303;

/// One permit (k = 2). Its first `fencing_token()` is cancelled while the
/// count's check is held up on the way back and the slot's draw is
/// answered. An administrator then forces the permit's slot open and a
/// process of the same count takes both slots. The permit's next
/// `fencing_token()` should fail with `LockLost`.
#[tokio::test(start_paused = true)]
async fn a_permit_whose_first_draw_was_cancelled_draws_no_fencing_token_after_its_slot_was_forced_open(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let slow = Arc::new(AtomicBool::new(false));
    let relayed: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|inner| {
            let slow = slow.clone();
            Arc::new(Relay::new(inner, move |kind, args| {
                let count = args.resources.iter().any(|r| r.contains("/count-bit/"));
                if kind == CallKind::Fence && count && slow.load(Ordering::SeqCst) {
                    Route::SlowReply(Duration::from_secs(3))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let a = Dsync::builder(relayed)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    let b = Dsync::builder(cluster.net_lockers())
        .owner("b")
        .rng_seed(SEED + 1)
        .build()
        .expect("valid coordinator");

    let permit = tokio::time::timeout(
        Duration::from_secs(5),
        a.semaphore("jobs", 2).unwrap().acquire(),
    )
    .await
    .expect("in time")
    .expect("a free permit");
    let slot = permit.slots()[0];
    eprintln!("slot {slot}");

    slow.store(true, Ordering::SeqCst);
    let cancelled = tokio::time::timeout(Duration::from_millis(500), permit.fencing_token()).await;
    assert!(
        cancelled.is_err(),
        "the count's check is held up for 3 s: {cancelled:?}"
    );
    slow.store(false, Ordering::SeqCst);

    let forced = a
        .force_unlock([
            format!("semaphore/jobs/permit/{slot}"),
            format!("semaphore/jobs/held/{slot}/0/2"),
            format!("semaphore/jobs/held/{slot}/1/0"),
        ])
        .await
        .unwrap();
    eprintln!("forced open {forced} entries of the permit's slot");
    assert!(
        forced >= 2,
        "the slot was forced open on a quorum: {forced}"
    );
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        b.semaphore("jobs", 2).unwrap().acquire_many(2),
    )
    .await
    .expect("in time")
    .expect("the other process takes both slots, the permit's among them");
    eprintln!("the other process holds slots {:?}", other.slots());
    assert!(other.slots().contains(&slot));

    let token = tokio::time::timeout(Duration::from_secs(5), permit.fencing_token())
        .await
        .expect("in time");
    eprintln!(
        "the first permit: is_lost {}, fencing_token {token:?}; the other's tokens {:?}",
        permit.is_lost(),
        other.fencing_tokens().await
    );
    assert_eq!(
        token,
        Err(Error::LockLost),
        "the permit's slot was forced open and another process holds it, yet the permit's \
         first token handed out is the one its cancelled call drew, asked of nobody"
    );
    drop(other);
}
