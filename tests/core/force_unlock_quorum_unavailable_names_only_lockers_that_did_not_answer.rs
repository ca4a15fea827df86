//! Reproduces a past break: `force_unlock` that too few lockers answered named, among the unreachable, a locker that had answered it, because another call of the client found that locker failing before the force-unlock ended (three named unreachable of three lockers, beside one answered).
//!
//! The rustdoc of `Error::QuorumUnavailable` (src/error.rs): "`unreachable`
//! names each locker that did not answer and why". The operations that
//! end in this error after a fan-out of their own (`force_unlock`, a
//! fencing draw, a proclamation, a leader read, the lock listing) fill it
//! from `Coordinator::unreachable_since(began)`: every locker whose latest
//! failure of any call of the client was noted since the operation began,
//! whether or not it answered the operation.
//!
//! Three lockers. The client sends `force_unlock(["x"])` (deadline
//! 300 ms): node 0 answers at once, the calls to nodes 1 and 2 hang. At
//! 100 ms node 0 refuses connections and a `try_lock` of "y" by the same
//! client finds it so. At 300 ms the force-unlock gives up: one of three
//! answered, and it names all three as unreachable.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, Timeouts};
use tokio::time::{sleep, Instant};

const SEED: u64 = 7_323;

#[tokio::test(start_paused = true)]
async fn force_unlock_quorum_unavailable_names_only_lockers_that_did_not_answer() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .timeouts(Timeouts {
            force_unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let start = Instant::now();
    cluster.set_hang(true, &[1, 2]).unwrap();
    let admin = h.clone();
    let forced = tokio::spawn(async move { admin.force_unlock(["x"]).await });
    sleep(Duration::from_millis(100)).await;
    cluster.set_refuse(true, &[0]).unwrap();
    let other = h.rw_mutex(["y"]).unwrap();
    let tried = tokio::spawn(async move { other.try_lock().await.map(|_g| ()) });
    let result = tokio::time::timeout(Duration::from_secs(5), forced)
        .await
        .expect("the force-unlock ends at its deadline")
        .unwrap();
    eprintln!("force_unlock ended at {:?}: {result:?}", start.elapsed());
    let _ = tokio::time::timeout(Duration::from_secs(5), tried).await;
    match result {
        Err(Error::QuorumUnavailable {
            answered,
            unreachable,
            ..
        }) => {
            let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
            assert_eq!(answered, 1, "node 0 answered the force-unlock");
            assert!(
                !named.contains(&"node-0"),
                "node 0 answered the force-unlock, yet it is named unreachable: {named:?}"
            );
            assert_eq!(named.len(), 2, "nodes 1 and 2 did not answer: {named:?}");
        }
        other => panic!("one locker of three answered: {other:?}"),
    }
}
