//! When a semaphore answers `PermitsMismatch`, and when it must not: never
//! to clients that all opened it with the same count, whatever the lockers
//! were left holding by releases that missed them; and for a client with
//! another count, once it reaches the head of the line.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error, LockMode, Semaphore};
use tokio::time::{sleep, timeout, Instant};

use crate::a_semaphore_check_left_behind::leave_a_count_check_on_locker_2;
use crate::election_support::client;

fn sem(ds: &Dsync, permits: usize) -> Semaphore {
    ds.semaphore("jobs", permits).unwrap()
}

/// Lock calls (read and write) that locker `i` has seen.
fn lock_calls(cluster: &TestCluster, i: usize) -> u64 {
    let node = &cluster.nodes()[i];
    node.stats(CallKind::Lock).seen + node.stats(CallKind::RLock).seen
}

/// Three lockers, every client opens the semaphore with 2.
///
/// 1. `a`'s count check is applied on locker 2 with its reply lost, and
///    `a` is cut off from locker 2 before the release that follows the
///    call's deadline: a check is left on locker 2 (until it expires).
///    Locker 0 goes down. Every count check is now refused (locker 2
///    refuses, locker 0 is silent), so the acquirers read the counts in
///    use out of the lockers.
/// 2. `b` reads them out; locker 1 answers it slowly, and `b` is cut off
///    from locker 1 between the answer and the release: `b`'s read-out is
///    left on locker 1.
/// 3. `d` reads them out in turn, meets what `b` left, and must not take
///    it for a holder of another count: it waits until the check left by
///    `a` expires and is granted.
#[tokio::test(start_paused = true)]
async fn a_count_read_out_whose_release_missed_a_locker_is_never_taken_for_another_count() {
    let cluster = TestCluster::new(3, 11);
    let h = client(&cluster, "h");
    let c = client(&cluster, "c");
    let a = client(&cluster, "a");
    let b = client(&cluster, "b");
    let d = client(&cluster, "d");

    // 1. `a`'s check is left on locker 2, locker 0 is down, and `c` holds
    // a permit.
    let c_permit = leave_a_count_check_on_locker_2(&cluster, &h, &c, &a).await;
    assert!(
        cluster.lockers()[2]
            .snapshot()
            .iter()
            .any(|e| e.owner == "a"
                && e.mode == LockMode::Write
                && e.resource.starts_with("semaphore/jobs/count-bit/")),
        "set-up: a's check is left on locker 2"
    );

    // 2. Locker 1 answers after 200 ms: `b`'s read-out is answered there
    // 200 ms after it was sent, and released 200 ms later.
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(200)), &[1])
        .unwrap();
    let b_task = tokio::spawn({
        let s = sem(&b, 2);
        async move { s.acquire().await }
    });
    // A read-out is ten or more lock calls at once (one per digit, or per
    // value of a digit); a check is one lock and one read lock.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = lock_calls(&cluster, 1);
    loop {
        sleep(Duration::from_millis(10)).await;
        let now = lock_calls(&cluster, 1);
        if now - seen >= 10 {
            break;
        }
        seen = now;
        assert!(
            Instant::now() < deadline,
            "set-up: b never read the count out"
        );
    }
    // The read-out's calls to locker 1 are under way: its release there
    // will be lost.
    cluster.partition("b", &[1]).unwrap();
    sleep(Duration::from_millis(250)).await;
    cluster.heal_partition("b", &[1]).unwrap();
    cluster.set_latency(Latency::None, &[1]).unwrap();
    b_task.abort();
    assert!(
        b_task.await.unwrap_err().is_cancelled(),
        "b is still waiting for a's check to expire"
    );

    // 3. `d`, with the same count, reads the counts out in turn.
    let d_task = tokio::spawn({
        let s = sem(&d, 2);
        async move { s.acquire().await }
    });
    sleep(Duration::from_millis(500)).await;
    assert!(
        cluster.lockers()[1]
            .snapshot()
            .iter()
            .any(|e| e.owner == "b" && e.resource.starts_with("semaphore/jobs/held/")),
        "set-up: b's read-out is left on locker 1: {:#?}",
        cluster.lockers()[1].snapshot()
    );
    // Granted once the check `a` left on locker 2 (and `a`'s slot there)
    // expire, within the lockers' validity (60 s).
    let got = timeout(Duration::from_secs(90), d_task)
        .await
        .expect("granted once a's leftovers expired")
        .unwrap();
    assert!(
        got.is_ok(),
        "every client opened the semaphore with 2 and a slot is free, yet: {got:?}"
    );
    drop(c_permit);
}

/// With nobody in line, a client with another count is told at once.
#[tokio::test(start_paused = true)]
async fn another_count_is_refused_at_once_when_nobody_is_in_line() {
    let cluster = TestCluster::new(3, 12);
    let h = client(&cluster, "h");
    let r = client(&cluster, "r");
    let held = sem(&h, 2).acquire().await.unwrap();
    let began = Instant::now();
    let refused = sem(&r, 3).acquire().await.unwrap_err();
    assert_eq!(
        refused,
        Error::PermitsMismatch {
            name: "jobs".into(),
            permits: 3,
            in_use: Some(2)
        }
    );
    // In-process lockers answer at once: the line, one check, one
    // read-out, no backoff.
    assert!(
        began.elapsed() < Duration::from_millis(100),
        "{:?}",
        began.elapsed()
    );
    drop(held);
}

/// A client with another count waits in line like everyone else: behind
/// a head that waits for a slot it learns nothing, and is refused once
/// it is at the head itself.
#[tokio::test(start_paused = true)]
async fn another_count_waits_behind_the_head_of_the_line_before_it_is_refused() {
    let cluster = TestCluster::new(3, 13);
    let h = client(&cluster, "h");
    let w = client(&cluster, "w");
    let r = client(&cluster, "r");
    let h1 = sem(&h, 2).acquire().await.unwrap();
    let h2 = sem(&h, 2).acquire().await.unwrap();
    // `w` (same count) waits at the head of the line for a slot.
    let w_task = tokio::spawn({
        let s = sem(&w, 2);
        async move { s.acquire().await }
    });
    sleep(Duration::from_millis(10)).await;
    let r_task = tokio::spawn({
        let s = sem(&r, 3);
        async move { s.acquire().await }
    });
    sleep(Duration::from_secs(50)).await;
    assert!(!w_task.is_finished() && !r_task.is_finished());
    // A slot frees: `w` takes it and leaves the line, `r` reaches the head
    // and is refused.
    drop(h1);
    let w_permit = timeout(Duration::from_secs(5), w_task)
        .await
        .expect("w granted")
        .unwrap()
        .unwrap();
    let refused = timeout(Duration::from_secs(1), r_task)
        .await
        .expect("refused once at the head")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::PermitsMismatch {
                permits: 3,
                in_use: Some(2),
                ..
            }
        ),
        "{refused:?}"
    );
    drop((h2, w_permit));
}
