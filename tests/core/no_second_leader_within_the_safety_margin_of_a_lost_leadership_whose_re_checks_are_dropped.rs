//! Reproduces a past break: a lost leadership whose campaign's re-checks were dropped after the loss (their runtime shut down) had its election lock unlocked at once by their owed unlocks, so a second candidate led a fraction of a second after the loss, while the first still held its `Leadership`, within the safety margin.
//!
//! docs/guarantees.md, "Leader election": "one leader at a time, a leader
//! that learns of its loss before anyone else can lead (a safety margin
//! before, less the drift between clocks)"; "A lost lock is freed once its
//! holder lets go": "The entries of a lost lock are force-unlocked a safety
//! margin after the loss is declared ... the margin is the holder's time
//! to notice and stop the work the lock protects". docs/election.md: a
//! `Leadership` "learns of its loss before anyone else can lead".
//!
//! What happens instead: three lockers. "x" leads election "e"; "w"
//! campaigns on runtime A, and its re-checks (about 1 s in) are delivered
//! 20 s late on every link. x resigns and the lockers push w its grants:
//! w leads while the three re-checks are in flight, stragglers on A,
//! which is then left idle. The leadership's refresh runs on runtime B
//! (its loss token is taken there). Lockers 1 and 2 stop answering w for
//! a while, so only locker 0 confirms its refreshes: B's keeper declares
//! the lead lost (which begins its release), and its clean-up waits out
//! the 2 s margin. w keeps its `Leadership`. Lockers 1 and 2 answer again
//! just after, and A is shut down: the stragglers are dropped armed with
//! their `release::Owed` (src/lock/wait_round.rs `wait_call`), and since
//! the acquisition is released, `Owed::drop` queues a plain unlock
//! (`holder: None`) on every locker, sent at once by the `Dsync`'s own
//! runtime. "z"'s `try_campaign` then leads a fraction of a second after
//! w's loss was declared, with most of w's 2 s margin left.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, Lease, NetLocker};

const SEED: u64 = 36_305;

#[test]
fn no_second_leader_within_the_safety_margin_of_a_lost_leadership_whose_re_checks_are_dropped() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let late = Arc::new(AtomicBool::new(false));
    let cut = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let (late, cut, delayed) = (late.clone(), cut.clone(), delayed.clone());
            Arc::new(Relay::new(l, move |kind, _| {
                if i >= 1 && cut.load(Ordering::SeqCst) {
                    Route::Lost("the locker does not answer w".into())
                } else if kind == CallKind::Lock && late.load(Ordering::SeqCst) {
                    delayed.fetch_add(1, Ordering::SeqCst);
                    Route::Late(Duration::from_secs(20))
                } else {
                    Route::Forward
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let margin = Duration::from_secs(2);
    let w = Dsync::builder(links)
        .owner("w")
        .rng_seed(SEED + 1)
        .lease(Lease {
            validity: Duration::from_secs(6),
            safety_margin: margin,
            refresh_interval: Duration::from_millis(200),
        })
        .build()
        .expect("valid coordinator");
    let x = common::seeded(cluster.net_lockers(), "x", SEED);
    let z = common::seeded(cluster.net_lockers(), "z", SEED + 2);

    let main = common::runtime();
    let mut leading_x =
        main.block_on(async { x.election("e").unwrap().campaign(&b"x"[..]).await.unwrap() });

    let a = common::runtime();
    let election = w.election("e").unwrap();
    let wait = a.spawn(async move { election.campaign(&b"w"[..]).await });
    a.block_on(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        late.store(true, Ordering::SeqCst);
        // Every locker is re-checked about 1 s in; wait until all three are.
        for _ in 0..100 {
            if delayed.load(Ordering::SeqCst) >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    late.store(false, Ordering::SeqCst);
    let in_flight = delayed.load(Ordering::SeqCst);
    assert!(
        in_flight >= 3,
        "w's re-checks are on their way: {in_flight}"
    );
    main.block_on(async { leading_x.resign().await.unwrap() });
    let leading = a
        .block_on(async { tokio::time::timeout(Duration::from_secs(2), wait).await })
        .expect("w is pushed its grants")
        .expect("the wait task ends")
        .expect("w leads");
    let uid = leading.uid().to_string();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "w's lead is on every locker"
    );

    // From here A is not driven: its stragglers wait there. The leadership's
    // refresh runs on B, where its loss token is taken; lockers 1 and 2
    // stop answering w for a while.
    let b = common::runtime();
    b.block_on(async {
        drop(leading.loss_token());
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
    cut.store(true, Ordering::SeqCst);
    let lost_at = b.block_on(async {
        for _ in 0..500 {
            if leading.is_lost() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Instant::now()
    });
    assert!(leading.is_lost(), "only locker 0 confirms w's refreshes");
    // Let B's keeper declare it (which begins the release and starts the
    // clean-up that waits out the margin).
    b.block_on(async { tokio::time::sleep(Duration::from_millis(100)).await });
    let before = holding(cluster.lockers(), &uid);
    // Lockers 1 and 2 answer w again.
    cut.store(false, Ordering::SeqCst);

    a.shutdown_timeout(Duration::from_secs(1));
    b.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    let after = holding(cluster.lockers(), &uid);
    let second = b.block_on(async {
        z.election("e")
            .unwrap()
            .try_campaign(&b"z"[..])
            .await
            .map(|l| {
                let term = l.term();
                std::mem::forget(l);
                term
            })
    });
    let at = lost_at.elapsed();
    eprintln!(
        "w lost; its entries {before:?}, after A shut down {after:?}; {at:?} after the loss \
         z's try_campaign gave {second:?}"
    );
    assert!(
        at >= margin || second.is_err(),
        "w's leading is held and its loss was declared only {at:?} ago (safety margin {margin:?}), \
         yet its entries went from {before:?} to {after:?} and z leads election \
         \"e\" (term {second:?})"
    );
    drop(leading);
}
