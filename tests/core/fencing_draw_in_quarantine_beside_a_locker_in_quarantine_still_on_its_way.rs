//! Reproduces a past break: a fencing draw that stopped early with its call still on its way to a locker whose refusal for quarantine stands counted that locker neither as answering nor as in quarantine, and gave up with `QuorumUnavailable` (not naming it) where a wait in the same state says `Quarantined`.
//!
//! docs/guarantees.md ("Why a wait waits"): for lockers "that have not
//! answered yet, the latest failure any call of this client noted for that
//! locker since it last answered" counts, and a refusal for quarantine
//! "stands until the time it said was left has passed, or until it answers
//! a call a locker in quarantine refuses"; "when lockers that refused such
//! a call for quarantine would make the quorum with those that answered,
//! the operation gives up with `Quarantined`, as a wait does (so do a
//! fencing draw and a proclamation that find them so)"; `QuorumUnavailable`
//! names "each locker that did not answer and why".
//!
//! Five lockers, quorum three. `h` holds "r". Node 4 restarts and refuses
//! a try_lock of "x" for quarantine; then its answers take 1 s. Node 1
//! restarts too, nodes 2 and 3 refuse connections. A fencing draw for "r"
//! gets a token from node 0, a refusal for quarantine from node 1 and two
//! refused connections, and stops with its call to node 4 a moment on its
//! way. Node 0 with nodes 1 and 4 in quarantine would make the quorum: a
//! lock wait in that state (deadline 50 ms, below any patience) gives up
//! with `Quarantined`, naming nodes 1 and 4.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::Instant;

const SEED: u64 = 16_051;

#[tokio::test(start_paused = true)]
async fn fencing_draw_in_quarantine_beside_a_locker_in_quarantine_still_on_its_way() {
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(5, SEED);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let start = Instant::now();
    let guard = tokio::time::timeout(Duration::from_secs(5), h.rw_mutex(["r"]).unwrap().lock())
        .await
        .expect("a free lock is granted")
        .unwrap();

    cluster.restart(&[4]).unwrap();
    let x = tokio::time::timeout(
        Duration::from_secs(5),
        h.rw_mutex(["x"]).unwrap().try_lock(),
    )
    .await
    .expect("a try_lock ends");
    eprintln!(
        "try_lock of 'x' with node 4 in quarantine: {:?}",
        x.as_ref().map(|_| ())
    );
    drop(x);
    tokio::time::sleep(Duration::from_millis(10)).await;

    cluster
        .set_latency(Latency::Fixed(Duration::from_secs(1)), &[4])
        .unwrap();
    cluster.restart(&[1]).unwrap();
    cluster.set_refuse(true, &[2, 3]).unwrap();

    let drawn = tokio::time::timeout(Duration::from_secs(10), guard.fencing_token())
        .await
        .expect("the draw ends");
    eprintln!("fencing draw at {:?}: {drawn:?}", start.elapsed());

    let waiter = h.rw_mutex(["third"]).unwrap();
    let waited = tokio::time::timeout(
        Duration::from_secs(10),
        waiter.lock_timeout(Duration::from_millis(50)),
    )
    .await
    .expect("the wait ends at its deadline")
    .map(|_guard| ());
    eprintln!("a lock wait in the same state gave up with: {waited:?}");

    assert!(
        matches!(&waited, Err(Error::Quarantined { quarantined, .. }) if quarantined.len() == 2),
        "the state this test means: node 0 answers, nodes 1 and 4 in quarantine, \
         nodes 2 and 3 out of reach: {waited:?}"
    );
    assert!(
        matches!(&drawn, Err(Error::Quarantined { .. })),
        "node 0 drew a token, node 1 refused the draw for quarantine and node 4's refusal \
         for quarantine stands while the draw's call to it is a moment on its way: \
         {drawn:?}"
    );
    drop(guard);
}
