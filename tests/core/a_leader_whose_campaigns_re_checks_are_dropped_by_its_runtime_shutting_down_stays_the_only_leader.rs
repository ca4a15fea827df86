//! Reproduces a past break: a campaign won while its re-checks were still on their way, whose runtime then shut down, had its election lock's entries unlocked by those re-checks' owed unlocks, so a second candidate became leader while the first still led, not lost.
//!
//! docs/election.md, "One leader at a time": "Two `Leadership`s whose
//! `is_lost()` is false at the same instant do not exist: each is a write
//! lock on the same resource. A leader learns that it lost the lead ...
//! before any locker can free it for the next candidate". docs/guarantees.md,
//! "Any runtime": "every held lock is refreshed ... as long as any runtime
//! that holds one of the locks is alive and driven, whichever runtime
//! locked first and whether or not that one still exists."
//!
//! What happens instead: "a" leads; "b" campaigns on runtime A, its
//! re-checks (about 1 s in) delivered 20 s late on every link. "a" resigns
//! and the lockers push b its grants: b wins while its three re-checks
//! are in flight, and they become stragglers on A. b keeps its leadership
//! (its refresh runs on runtime B, where `lost()` is used) and A is shut
//! down: the stragglers are dropped armed with their `release::Owed`
//! (src/lock/wait_round.rs), whose unlocks remove b's election lock on
//! every locker. "c" then wins `try_campaign` while b, not lost, leads.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, holding};
use quorum_lock::testing::TestCluster;
use quorum_lock::NetLocker;

const SEED: u64 = 36_294;

#[test]
fn a_leader_whose_campaigns_re_checks_are_dropped_by_its_runtime_shutting_down_stays_the_only_leader(
) {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let late = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let links: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .map(|l| common::late_locks(l, late.clone(), delayed.clone(), Duration::from_secs(20)))
        .collect();
    let a_ds = common::seeded(cluster.net_lockers(), "a", SEED);
    let b_ds = common::seeded(links, "b", SEED + 1);
    let c_ds = common::seeded(cluster.net_lockers(), "c", SEED + 2);

    let main = common::runtime();
    let mut a_lead = main.block_on(async {
        a_ds.election("e")
            .unwrap()
            .campaign(b"a".to_vec())
            .await
            .unwrap()
    });

    let rt_a = common::runtime();
    let election = b_ds.election("e").unwrap();
    let campaign = rt_a.spawn(async move { election.campaign(b"b".to_vec()).await });
    rt_a.block_on(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        late.store(true, Ordering::SeqCst);
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
        "b's re-checks are on their way: {in_flight}"
    );
    main.block_on(async { a_lead.resign().await.unwrap() });
    let b_lead = rt_a
        .block_on(async { tokio::time::timeout(Duration::from_secs(2), campaign).await })
        .expect("b is pushed its grants")
        .expect("the campaign task ends")
        .expect("b leads");
    let uid = b_lead.uid().to_string();
    assert_eq!(
        holding(cluster.lockers(), &uid),
        [true, true, true],
        "b holds every locker"
    );

    let rt_b = common::runtime();
    let lost = rt_b.block_on(async {
        // Its loss token makes B refresh it (a `lost()` future would have
        // to be polled there to do so).
        drop(b_lead.loss_token());
        tokio::time::sleep(Duration::from_millis(10)).await;
        b_lead.is_lost()
    });
    assert!(!lost, "b leads");
    rt_a.shutdown_timeout(Duration::from_secs(1));
    let shut = Instant::now();

    let mut second = None;
    let mut left = holding(cluster.lockers(), &uid);
    while shut.elapsed() < Duration::from_secs(3) {
        left = holding(cluster.lockers(), &uid);
        if left.iter().filter(|h| **h).count() < 2 {
            second = Some(rt_b.block_on(async {
                c_ds.election("e")
                    .unwrap()
                    .try_campaign(b"c".to_vec())
                    .await
                    .map(|lead| {
                        let term = lead.term();
                        std::mem::forget(lead);
                        term
                    })
            }));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let b_lost = b_lead.is_lost();
    eprintln!(
        "{:?} after A shut down: b's entries {left:?}, b (term {}) lost {b_lost}, c's try_campaign {second:?}",
        shut.elapsed(),
        b_lead.term()
    );
    assert!(
        left.iter().filter(|h| **h).count() >= 2 && (b_lost || !matches!(second, Some(Ok(_)))),
        "b leads (term {}, lost: {b_lost}), yet {:?} after its campaign's runtime shut down its \
         election lock's entries are {left:?} and c's try_campaign gave {second:?}",
        b_lead.term(),
        shut.elapsed()
    );
    drop(b_lead);
}
