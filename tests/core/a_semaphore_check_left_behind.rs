//! The scene of the semaphore tests whose count check is left behind on a
//! locker (`semaphore_count_check_and_limits.rs`, `semaphore_mismatch.rs`):
//! three lockers, every client opens "jobs" with 2 permits, and `a`'s
//! check is left on locker 2 while locker 0 is down. Paused time.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, SemaphorePermit};
use tokio::time::{sleep, timeout};

/// With both permits held by `h`, `c` at the head of the line and `a`
/// behind it, locker 2 applies everything and answers nothing: `c` takes
/// slot 0 and leaves the line; `a` takes the line and checks the count
/// (applied on locker 2, unanswered), then takes slot 1 and leaves the
/// line (that unlock lands on locker 2). `a` is then cut off from locker
/// 2 before its check call gives up (1 s) and sends the release there;
/// locker 2 answers again. Locker 0 goes down (one of three: the mutex
/// does not mind) and `a` gives its permit back. Returns `c`'s permit.
pub async fn leave_a_count_check_on_locker_2(
    cluster: &TestCluster,
    h: &Dsync,
    c: &Dsync,
    a: &Dsync,
) -> SemaphorePermit {
    let sem = |ds: &Dsync| ds.semaphore("jobs", 2).unwrap();
    let h1 = sem(h).acquire().await.unwrap();
    let h2 = sem(h).acquire().await.unwrap();
    let c_task = tokio::spawn({
        let s = sem(c);
        async move { s.acquire().await }
    });
    sleep(Duration::from_millis(10)).await;
    let a_task = tokio::spawn({
        let s = sem(a);
        async move { s.acquire().await }
    });
    sleep(Duration::from_millis(10)).await;
    cluster.drop_replies(1.0, true, &[2]).unwrap();
    drop(h1);
    let c_permit = timeout(Duration::from_secs(5), c_task)
        .await
        .expect("c granted")
        .unwrap()
        .unwrap();
    sleep(Duration::from_millis(50)).await;
    drop(h2);
    let a_permit = timeout(Duration::from_secs(5), a_task)
        .await
        .expect("a granted")
        .unwrap()
        .unwrap();
    sleep(Duration::from_millis(50)).await;
    cluster.partition("a", &[2]).unwrap();
    cluster.drop_replies(0.0, true, &[2]).unwrap();
    sleep(Duration::from_secs(2)).await;
    cluster.crash(&[0]).unwrap();
    drop(a_permit);
    sleep(Duration::from_millis(100)).await;
    c_permit
}
