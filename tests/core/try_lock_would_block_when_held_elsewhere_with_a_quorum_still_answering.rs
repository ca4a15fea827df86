//! Reproduces a past break: a `try_lock` refused by one locker (held elsewhere), with two lockers refusing connections and two more a little slow (answered this client before), stopped at once with `QuorumUnavailable` naming the two slow lockers "no answer yet", where a quorum is reachable and a `lock_timeout` in the same state says `Timeout`.
//!
//! `DRWMutex::try_lock`: "Fails with `Error::WouldBlock` when it is held
//! elsewhere and with `Error::QuorumUnavailable` when too few lockers
//! answered within `Timeouts::acquire`". `Error::QuorumUnavailable`:
//! "while too few lockers were reachable". docs/guarantees.md ("Why a wait
//! waits"): `Timeout` (for one round, `WouldBlock`) "when the lock is held
//! elsewhere: a quorum answered or is still answering and some have it
//! taken by another owner"; a locker with a call on its way counts as
//! still answering for twice its latest answer and at least 100 ms.
//!
//! Five lockers, quorum three. Owner "o" holds the lock everywhere. Nodes 1
//! and 2 refuse connections; nodes 3 and 4 answer 20 ms late (and answered
//! this client before). The try_lock hears node 0's refusal and the two
//! refused connections at once; nodes 0, 3 and 4 are reachable, a quorum,
//! and node 0 has the lock taken by another owner.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::sleep;

const SEED: u64 = 38_001;

#[tokio::test(start_paused = true)]
async fn try_lock_would_block_when_held_elsewhere_with_a_quorum_still_answering() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let o = Dsync::builder(cluster.net_lockers())
        .owner("o")
        .rng_seed(SEED + 1)
        .build()
        .unwrap();
    // h is heard from every locker once, 20 ms late on nodes 3 and 4.
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(20)), &[3, 4])
        .unwrap();
    {
        let warm = h.rw_mutex(["warm"]).unwrap();
        let g = warm.lock_timeout(Duration::from_secs(1)).await.unwrap();
        sleep(Duration::from_millis(50)).await;
        g.unlock().await.unwrap();
        sleep(Duration::from_millis(100)).await;
    }
    let om = o.rw_mutex(["r"]).unwrap();
    let _held = om.lock_timeout(Duration::from_secs(1)).await.unwrap();
    sleep(Duration::from_millis(100)).await;
    cluster.set_refuse(true, &[1, 2]).unwrap();

    let m = h.rw_mutex(["r"]).unwrap();
    let tried = tokio::time::timeout(Duration::from_secs(10), m.try_lock())
        .await
        .expect("the try_lock ends")
        .map(|_g| ());
    eprintln!("try_lock: {tried:?}");

    sleep(Duration::from_millis(200)).await;
    let m2 = h.rw_mutex(["r"]).unwrap();
    let (waited, status) = tokio::join!(
        tokio::time::timeout(
            Duration::from_secs(10),
            m2.lock_timeout(Duration::from_millis(10))
        ),
        async {
            sleep(Duration::from_millis(5)).await;
            m2.waiting()
        }
    );
    let waited = waited.expect("the wait gives up").map(|_g| ());
    eprintln!(
        "lock_timeout(10ms): {waited:?}; waiting() at 5ms: {status:?} / {}",
        status.as_ref().map(ToString::to_string).unwrap_or_default()
    );
    if let Err(Error::QuorumUnavailable { unreachable, .. }) = &tried {
        let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
        panic!(
            "nodes 0, 3 and 4 are reachable (3 and 4 answer 20 ms late, as they answered \
             before), node 0 has the lock taken by another owner: the round found it held \
             elsewhere, yet try_lock says {tried:?}, naming {named:?} unreachable; \
             lock_timeout in the same state says {waited:?}"
        );
    }
    assert!(matches!(tried, Err(Error::WouldBlock)), "{tried:?}");
}
