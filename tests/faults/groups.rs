#![cfg(feature = "testing")]
//! Locks over names of several groups (`Groups`, two clusters of three
//! nodes) under faults: a minority down in every group keeps the lock; a
//! group lost tells the holder before anyone else gets that group's names;
//! an acquisition that cannot take a later group leaves nothing in the
//! earlier ones; clients contending while minorities come and go never
//! hold a name together.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{client, instant_of, nodes_holding};
use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, Groups, LockerConfig};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, sleep_until, timeout, Instant};

const SEED: u64 = 97;

/// Groups "a" and "b", three nodes each, named apart.
fn clusters(seed: u64) -> (TestCluster, TestCluster) {
    let config = LockerConfig::default();
    (
        TestCluster::named("a", 3, seed, config),
        TestCluster::named("b", 3, seed + 1, config),
    )
}

/// A client of both groups whose calls carry `owner`, which is what
/// `TestCluster::partition` cuts off.
fn grouped(a: &TestCluster, b: &TestCluster, owner: &str, seed: u64) -> Groups {
    Groups::new([
        ("a", client(a, owner, seed)),
        ("b", client(b, owner, seed + 1)),
    ])
    .expect("two groups")
}

/// One name that lives in group "a" and one in group "b".
fn a_name_in_each(groups: &Groups) -> (String, String) {
    let first_in = |id: &str| {
        (0..1000)
            .map(|i| format!("jobs/{i}"))
            .find(|name| groups.group_of(name) == id)
            .unwrap_or_else(|| panic!("no name of 1000 lives in group {id}"))
    };
    (first_in("a"), first_in("b"))
}

#[tokio::test(start_paused = true)]
async fn a_grouped_lock_holds_through_a_minority_crash_in_every_group() {
    for write in [true, false] {
        let seed = SEED + u64::from(write);
        let ctx = format!("seed {seed}, write {write}");
        let (a, b) = clusters(seed);
        let holder = grouped(&a, &b, "holder", seed);
        let other = grouped(&a, &b, "other", seed + 10);
        let (x, y) = a_name_in_each(&holder);
        let mine = holder.rw_mutex([&x, &y]).expect("a grouped mutex");
        let theirs = other.rw_mutex([&x, &y]).expect("a grouped mutex");
        let t0 = Instant::now();
        let guard = match write {
            true => Guarded::Write(mine.lock().await.expect("the first lock")),
            false => Guarded::Read(mine.read().await.expect("the first read lock")),
        };

        // Between two refreshes, so that the crash costs one of them.
        sleep_until(t0 + Duration::from_secs(25)).await;
        a.crash(&[0]).expect("crash");
        b.crash(&[2]).expect("crash");
        sleep(Duration::from_secs(40)).await;
        assert!(!guard.is_lost(), "{ctx}: lost with a minority down");
        let once = theirs.try_lock().await.map(|_| ());
        assert!(
            matches!(once, Err(Error::WouldBlock)),
            "{ctx}: a competing try_lock returned {once:?}"
        );

        a.restart(&[0]).expect("restart");
        b.restart(&[2]).expect("restart");
        sleep(Duration::from_secs(15)).await;
        assert!(!guard.is_lost(), "{ctx}: lost while a minority restarted");
        let waited = theirs
            .lock_timeout(Duration::from_secs(3))
            .await
            .map(|_| ());
        assert!(
            matches!(waited, Err(Error::Timeout)),
            "{ctx}: a competing lock_timeout returned {waited:?}"
        );

        guard.unlock().await.expect("unlock");
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            (a.total_entries(), b.total_entries()),
            (0, 0),
            "{ctx}: entries left after the unlock"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_holder_is_told_it_lost_a_group_before_anyone_else_gets_its_names() {
    let seed = SEED + 20;
    let (a, b) = clusters(seed);
    let holder = grouped(&a, &b, "holder", seed);
    let other = grouped(&a, &b, "other", seed + 10);
    let (x, y) = a_name_in_each(&holder);
    let t0 = Instant::now();
    let guard = holder
        .rw_mutex([&x, &y])
        .expect("a grouped mutex")
        .lock()
        .await
        .expect("the first lock");
    let lost_at = instant_of(guard.lost());

    // The holder can no longer reach a majority of group b.
    sleep_until(t0 + Duration::from_secs(25)).await;
    b.partition("holder", &[0, 1]).expect("partition");
    let taker = other.rw_mutex([&y]).expect("a mutex");
    let granted_at = tokio::spawn(async move {
        let guard = taker.lock().await;
        (Instant::now(), guard.map(|g| g.is_lost()))
    });
    let (granted, lost_then) = timeout(Duration::from_secs(300), granted_at)
        .await
        .expect("the other client got y within 300 s")
        .expect("the task ran");
    let lost = lost_at.await.expect("the loss was seen");
    assert_eq!(lost_then.ok(), Some(false), "the other client's lock");
    assert!(
        lost < granted,
        "seed {seed}: the holder was told at {:?}, after the other client got y at {:?}",
        lost - t0,
        granted - t0
    );
    assert!(guard.is_lost());

    // Group a's part is still the holder's until it lets go of the guard.
    let x_mutex = other.rw_mutex([&x]).expect("a mutex");
    let once = x_mutex.try_lock().await.map(|_| ());
    assert!(
        matches!(once, Err(Error::WouldBlock)),
        "seed {seed}: x was free before the holder let go: {once:?}"
    );
    let _ = guard.unlock().await;
    let again = x_mutex.try_lock().await.expect("x after the unlock");
    again.unlock().await.expect("unlock");
}

#[tokio::test(start_paused = true)]
async fn an_acquisition_that_cannot_take_a_later_group_leaves_nothing_in_the_earlier() {
    let seed = SEED + 30;
    let (a, b) = clusters(seed);
    let holder = grouped(&a, &b, "holder", seed);
    let other = grouped(&a, &b, "other", seed + 10);
    let (x, y) = a_name_in_each(&holder);
    // Groups are taken in the order of their ids: a first, then b.
    b.partition("holder", &[0, 1, 2]).expect("partition");
    let mutex = holder.rw_mutex([&x, &y]).expect("a grouped mutex");

    let timed = mutex.lock_timeout(Duration::from_secs(5)).await.map(|_| ());
    assert!(timed.is_err(), "seed {seed}: granted without group b");
    let tried = mutex.try_lock().await.map(|_| ());
    assert!(tried.is_err(), "seed {seed}: granted without group b");
    assert_eq!(
        a.total_entries(),
        0,
        "seed {seed}: group a keeps entries after the failed acquisitions"
    );
    let free = other
        .dsync("a")
        .expect("group a")
        .rw_mutex([&x])
        .expect("a mutex")
        .try_lock()
        .await
        .expect("x is free at once");
    assert!(nodes_holding(&a, free.uid(), std::slice::from_ref(&x)).len() >= 2);
    free.unlock().await.expect("unlock");
}

#[tokio::test(start_paused = true)]
async fn clients_over_two_groups_never_hold_a_name_together_while_minorities_are_cut_off() {
    const CLIENTS: usize = 3;
    const ROUNDS: usize = 15;
    let seed = SEED + 40;
    let (a, b) = clusters(seed);
    let a = Arc::new(a);
    let b = Arc::new(b);
    let inside: Arc<Mutex<Vec<(usize, Instant, Instant)>>> = Arc::default();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (a, b, inside) = (a.clone(), b.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let owner = format!("client-{c}");
            let groups = grouped(&a, &b, &owner, seed + 100 * c as u64);
            let (x, y) = a_name_in_each(&groups);
            let mutex = groups.rw_mutex([&x, &y]).expect("a grouped mutex");
            let mut rng = SmallRng::seed_from_u64(seed + c as u64);
            let mut held = 0;
            for _ in 0..ROUNDS {
                // This client loses one node of each group, a minority.
                let (na, nb) = (rng.random_range(0..3), rng.random_range(0..3));
                a.partition(&owner, &[na]).expect("partition");
                b.partition(&owner, &[nb]).expect("partition");
                if let Ok(guard) = mutex.lock_timeout(Duration::from_secs(20)).await {
                    let start = Instant::now();
                    sleep(Duration::from_millis(rng.random_range(10..2000))).await;
                    assert!(!guard.is_lost(), "seed {seed}: client {c} lost its lock");
                    inside.lock().unwrap().push((c, start, Instant::now()));
                    guard.unlock().await.expect("unlock");
                    held += 1;
                }
                a.heal_partition(&owner, &[na]).expect("heal");
                b.heal_partition(&owner, &[nb]).expect("heal");
                sleep(Duration::from_millis(rng.random_range(0..50))).await;
            }
            held
        }));
    }
    let mut held = 0;
    for task in tasks {
        held += timeout(Duration::from_secs(3600), task)
            .await
            .expect("the clients finished within an hour")
            .expect("a client ran");
    }
    let mut spans = inside.lock().unwrap().clone();
    spans.sort_by_key(|s| s.1);
    for pair in spans.windows(2) {
        assert!(
            pair[1].1 >= pair[0].2,
            "seed {seed}: client {} entered before client {} left",
            pair[1].0,
            pair[0].0
        );
    }
    assert!(
        held >= CLIENTS * ROUNDS / 2,
        "seed {seed}: only {held} of {} rounds got the lock",
        CLIENTS * ROUNDS
    );
}

/// A grouped guard of either mode.
enum Guarded {
    Write(quorum_lock::GroupedWriteGuard),
    Read(quorum_lock::GroupedReadGuard),
}

impl Guarded {
    fn is_lost(&self) -> bool {
        match self {
            Guarded::Write(g) => g.is_lost(),
            Guarded::Read(g) => g.is_lost(),
        }
    }

    async fn unlock(self) -> Result<(), Error> {
        match self {
            Guarded::Write(g) => g.unlock().await,
            Guarded::Read(g) => g.unlock().await,
        }
    }
}
