//! The bound of a counting semaphore under contention, for any lockers:
//! six workers take a permit of `k = 2` three times each, holding it 20 ms,
//! and never more than two hold one at once.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::Dsync;

/// Runs the six workers, each on the client `client(i)` makes, and checks
/// that at most two held a permit of "uploads" at once, and two did.
pub async fn at_most_two_of_six_workers_hold<F, Fut>(client: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Dsync>,
{
    let most = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let ds = client(i).await;
        let (most, now) = (most.clone(), now.clone());
        tasks.push(tokio::spawn(async move {
            let sem = ds.semaphore("uploads", 2).unwrap();
            for _ in 0..3 {
                let permit = tokio::time::timeout(Duration::from_secs(20), sem.acquire())
                    .await
                    .expect("granted in time")
                    .expect("granted");
                let inside = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(inside, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert!(!permit.is_lost());
                now.fetch_sub(1, Ordering::SeqCst);
                permit.unlock().await.expect("released");
            }
        }));
    }
    for t in tasks {
        t.await.expect("no panic");
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
}
