//! Reproduces a past break: a campaign whose term draw found two of three lockers refusing connections, and that gave up in its backoff after both had come back and answered calls of the same client, said `QuorumUnavailable` naming them "connection refused", where a lock wait in the same state says `Timeout`.
//!
//! docs/guarantees.md ("Why a wait waits"): "After a grant, the operation
//! only makes calls (a term, a proclamation, a count check): a locker is
//! out of reach when a call asked since the grant failed with no answer
//! after ...; with too few of the others, with `QuorumUnavailable` naming
//! those out of reach and why; otherwise with `Timeout` (its calls were
//! answered, or are still coming)". "A failure is over once the locker
//! answered a call after it." `Error::QuorumUnavailable`: "while too few
//! lockers were reachable".
//!
//! Three lockers, quorum two, a retry backoff of 1 s. Answers 10 ms late.
//! The campaign's lock calls are on their way when nodes 1 and 2 start to
//! refuse connections; it is granted by all three, and its
//! term draw fails at once (two connections refused, node 0's answer
//! still on its way). It backs off. 100 ms later nodes 1
//! and 2 are back, and a lock of "x" through the same client is granted
//! by all three and released. The campaign gives up at 300 ms, in its
//! backoff: every locker answers.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error, RetryPolicy};
use tokio::time::{sleep, Instant};

const SEED: u64 = 38_002;

#[tokio::test(start_paused = true)]
async fn campaign_timeout_in_backoff_after_the_lockers_of_a_failed_term_draw_answered_again() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .retry(RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(1),
        })
        .build()
        .unwrap();
    // Every locker has answered this client before.
    {
        let warm = h.rw_mutex(["warm"]).unwrap();
        let g = warm.lock_timeout(Duration::from_secs(1)).await.unwrap();
        g.unlock().await.unwrap();
    }
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();
    let election = h.election("e").unwrap();
    let began = Instant::now();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"v".to_vec(), Duration::from_millis(300))
            .await
            .map(|_leadership| ())
    });
    // The lock calls are on their way (answered at 10 ms); the term draw
    // that follows the grant finds nodes 1 and 2 refusing connections.
    sleep(Duration::from_millis(5)).await;
    cluster.set_refuse(true, &[1, 2]).unwrap();
    sleep(Duration::from_millis(100)).await;
    eprintln!(
        "at {:?}: fence calls seen {}",
        began.elapsed(),
        cluster.stats(CallKind::Fence).seen
    );
    cluster.set_refuse(false, &[1, 2]).unwrap();
    let x = h.rw_mutex(["x"]).unwrap();
    let g = x.lock_timeout(Duration::from_millis(100)).await;
    eprintln!(
        "lock of 'x' at {:?}: {:?}",
        began.elapsed(),
        g.as_ref().map(|_| ())
    );
    g.unwrap().unlock().await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), campaign)
        .await
        .expect("gives up")
        .unwrap();
    eprintln!("campaign gave up at {:?} with {result:?}", began.elapsed());
    let waited = tokio::time::timeout(
        Duration::from_secs(10),
        h.rw_mutex(["y"])
            .unwrap()
            .lock_timeout(Duration::from_millis(50)),
    )
    .await
    .expect("the wait gives up")
    .map(|_guard| ());
    eprintln!("a lock wait of 'y' in the same state: {waited:?}");
    assert!(
        !matches!(&result, Err(Error::QuorumUnavailable { .. })),
        "nodes 1 and 2 refused the term draw's connections but answered (granted and released \
         'x') since: every locker is reachable, and the campaign ran out of time in its backoff; \
         yet it says {result:?}"
    );
}
