//! Counting semaphores against in-process lockers: at most `k` holders,
//! first come first served, a count that must agree, several permits at
//! once, cancellation, loss, the listing, and the three-way split that a
//! counter of holders per locker cannot survive.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, SemaphorePermit};
use tokio::time::{sleep, timeout};

use crate::election_support::client;

/// Tasks that hold a permit of one semaphore right now, and the most seen.
#[derive(Default)]
struct Occupancy {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Occupancy {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn at_most_k_hold_and_waiters_are_served_in_the_order_they_came() {
    let cluster = TestCluster::new(5, 1);
    let ds = client(&cluster, "a");
    let sem = ds.semaphore("rebuilds", 2).expect("valid semaphore");
    let occupancy = Arc::new(Occupancy::default());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (sem, occupancy, order) = (sem.clone(), occupancy.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let permit = sem.acquire().await.expect("granted in turn");
            occupancy.enter();
            order.lock().unwrap().push(i);
            sleep(Duration::from_millis(200)).await;
            assert!(!permit.is_lost());
            occupancy.leave();
            permit.unlock().await.expect("released");
        }));
        // Each waiter is in line before the next one comes.
        sleep(Duration::from_millis(10)).await;
    }
    for task in tasks {
        task.await.expect("no panic");
    }
    assert_eq!(occupancy.most.load(Ordering::SeqCst), 2);
    assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.total_entries(),
        0,
        "{:#?}",
        cluster.lockers()[0].snapshot()
    );
}

#[tokio::test(start_paused = true)]
async fn a_different_count_is_refused_while_held_and_accepted_after() {
    let cluster = TestCluster::new(3, 2);
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");
    let held = a.semaphore("jobs", 2).unwrap().acquire().await.unwrap();
    for permits in [1, 3, 4, 7, 1000] {
        let other = b.semaphore("jobs", permits).unwrap();
        let tried = other.try_acquire().await.unwrap_err();
        assert_eq!(
            tried,
            Error::PermitsMismatch {
                name: "jobs".into(),
                permits,
                in_use: Some(2)
            },
            "try_acquire with {permits}"
        );
        assert!(!tried.is_retryable());
        let waited = timeout(Duration::from_secs(30), other.acquire())
            .await
            .expect("refused at once, not after waiting");
        assert!(
            matches!(waited, Err(Error::PermitsMismatch { .. })),
            "{waited:?}"
        );
    }
    // The same count is welcome, and the other one once the holder left.
    let same = b.semaphore("jobs", 2).unwrap().try_acquire().await.unwrap();
    held.unlock().await.unwrap();
    same.unlock().await.unwrap();
    let three = b.semaphore("jobs", 3).unwrap();
    let permits: Vec<SemaphorePermit> = vec![
        three.try_acquire().await.unwrap(),
        three.try_acquire().await.unwrap(),
        three.try_acquire().await.unwrap(),
    ];
    assert_eq!(three.try_acquire().await.unwrap_err(), Error::WouldBlock);
    drop(permits);
    sleep(Duration::from_secs(60)).await;
    assert_eq!(cluster.total_entries(), 0);
}

#[tokio::test(start_paused = true)]
async fn many_permits_come_together_and_later_requests_wait_behind_them() {
    let cluster = TestCluster::new(5, 3);
    let ds = client(&cluster, "a");
    let sem = ds.semaphore("pool", 3).unwrap();
    let one = sem.acquire().await.unwrap();
    let big = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire_many(3).await }
    });
    sleep(Duration::from_millis(50)).await;
    let small = tokio::spawn({
        let sem = sem.clone();
        async move { sem.acquire().await }
    });
    sleep(Duration::from_millis(50)).await;
    // Two slots are free, but the head of the line needs three.
    assert!(!big.is_finished() && !small.is_finished());
    assert_eq!(sem.try_acquire().await.unwrap_err(), Error::WouldBlock);
    one.unlock().await.unwrap();
    let big = timeout(Duration::from_secs(5), big)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(big.permits(), 3);
    assert_eq!(big.slots(), vec![0, 1, 2]);
    sleep(Duration::from_millis(50)).await;
    assert!(!small.is_finished());
    big.unlock().await.unwrap();
    let small = timeout(Duration::from_secs(5), small)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(small.permits(), 1);
    for bad in [0, 4] {
        assert!(matches!(
            sem.acquire_many(bad).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            sem.try_acquire_many(bad).await,
            Err(Error::InvalidArgument(_))
        ));
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_acquire_leaves_nothing_behind() {
    let cluster = TestCluster::new(5, 4);
    let ds = client(&cluster, "a");
    let sem = ds.semaphore("s", 1).unwrap();
    let held = sem.acquire().await.unwrap();
    for ms in [0, 1, 5, 50, 500] {
        let waited = sem.acquire_timeout(Duration::from_millis(ms)).await;
        assert_eq!(waited.unwrap_err(), Error::Timeout);
    }
    drop(held);
    sleep(Duration::from_secs(60)).await;
    assert_eq!(
        cluster.total_entries(),
        0,
        "{:#?}",
        cluster.lockers()[0].snapshot()
    );
    // And the semaphore still works.
    drop(sem.try_acquire().await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_holder_learns_of_its_loss_before_its_slot_is_given_again() {
    let cluster = TestCluster::new(5, 5);
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");
    let held = a.semaphore("s", 1).unwrap().acquire().await.unwrap();
    let token = held.loss_token();
    let lost_at = tokio::spawn({
        let lost = held.lost();
        async move {
            lost.await;
            tokio::time::Instant::now()
        }
    });
    let waiter = tokio::spawn(async move {
        let permit = b.semaphore("s", 1).unwrap().acquire().await.unwrap();
        (tokio::time::Instant::now(), permit)
    });
    sleep(Duration::from_millis(100)).await;
    cluster.partition("a", &[0, 1, 2, 3, 4]).unwrap();
    let (granted_at, permit) = timeout(Duration::from_secs(300), waiter)
        .await
        .unwrap()
        .unwrap();
    let lost_at = lost_at.await.unwrap();
    assert!(held.is_lost() && token.is_cancelled());
    assert!(
        lost_at < granted_at,
        "lost at {lost_at:?}, granted again at {granted_at:?}"
    );
    assert!(!permit.is_lost());
    assert_eq!(held.unlock().await.unwrap_err(), Error::LockLost);
}

#[tokio::test(start_paused = true)]
async fn the_listing_shows_who_holds_which_permit_and_tokens_grow_per_slot() {
    let cluster = TestCluster::new(3, 6);
    let a = client(&cluster, "host-a");
    let b = client(&cluster, "host-b");
    let pa = a.semaphore("s", 2).unwrap().acquire().await.unwrap();
    let pb = b.semaphore("s", 2).unwrap().acquire().await.unwrap();
    let listing = cluster.lockers()[0].snapshot();
    for (permit, owner) in [(&pa, "host-a"), (&pb, "host-b")] {
        let resource = format!("semaphore/s/permit/{}", permit.slots()[0]);
        assert!(
            listing
                .iter()
                .any(|e| e.resource == resource && e.owner == owner),
            "{resource} held by {owner} in {listing:#?}"
        );
    }
    let slot = pa.slots()[0];
    let first = pa.fencing_token().await.unwrap();
    assert_eq!(pa.fencing_tokens().await.unwrap(), vec![(slot, first)]);
    drop(pa);
    sleep(Duration::from_secs(1)).await;
    let again = a.semaphore("s", 2).unwrap().acquire().await.unwrap();
    assert_eq!(again.slots(), vec![slot]);
    assert!(again.fencing_token().await.unwrap() > first);
    drop(pb);
}

/// The split: three lockers, two permits, and three holders who
/// each reach a different pair of lockers. A counter of holders on each
/// locker grants all three (each locker counts two, each holder has a
/// majority); the semaphore grants two and keeps the third waiting.
#[tokio::test(start_paused = true)]
async fn the_three_way_split_admits_two_where_a_counter_per_locker_admits_three() {
    let reach: [(&str, [usize; 2]); 3] = [("a", [0, 1]), ("b", [1, 2]), ("c", [0, 2])];

    // A counter per locker: grant while fewer than k hold.
    let mut counts = [0usize; 3];
    let mut admitted = 0;
    for (_, pair) in reach {
        let grants = pair
            .iter()
            .filter(|&&i| {
                let ok = counts[i] < 2;
                counts[i] += usize::from(ok);
                ok
            })
            .count();
        admitted += usize::from(grants >= 2);
    }
    assert_eq!(admitted, 3, "the counter design admits all three");

    // The semaphore, with each holder cut off from the third locker.
    let cluster = TestCluster::new(3, 7);
    let mut permits = Vec::new();
    for (owner, pair) in &reach[..2] {
        let cut: Vec<usize> = (0..3).filter(|i| !pair.contains(i)).collect();
        cluster.partition(owner, &cut).unwrap();
        let ds = client(&cluster, owner);
        let permit = timeout(
            Duration::from_secs(5),
            ds.semaphore("s", 2).unwrap().acquire(),
        )
        .await
        .expect("a free slot on its pair")
        .unwrap();
        permits.push(permit);
    }
    let (owner, pair) = reach[2];
    let cut: Vec<usize> = (0..3).filter(|i| !pair.contains(i)).collect();
    cluster.partition(owner, &cut).unwrap();
    let ds: Dsync = client(&cluster, owner);
    let third = ds.semaphore("s", 2).unwrap();
    assert_eq!(third.try_acquire().await.unwrap_err(), Error::WouldBlock);
    assert!(timeout(Duration::from_secs(20), third.acquire())
        .await
        .is_err());
    assert!(permits.iter().all(|p| !p.is_lost()));
}
