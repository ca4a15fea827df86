//! Reproduces a past break: a semaphore acquire that gives up while its place in line is released names, as out of reach ("refusing new grants"), a locker that answered that release after its refusal for quarantine, and counts one answer fewer.
//!
//! docs/guarantees.md ("Why a wait waits"), of `acquire_timeout`: "After a
//! grant, a locker is out of reach when a call to it failed since, with no
//! answer after, or when it has left a call unanswered for twice as long as
//! its latest answer took; with too few of the others, the operation gives
//! up with `QuorumUnavailable` naming those out of reach and why". The
//! rustdoc of `Semaphore::waiting`: once the acquire "only confirms that
//! its place in line was released ... `acquire_timeout` can still give up,
//! with `Error::QuorumUnavailable`, when the lockers do not answer".
//!
//! Three lockers, quorum 2: nodes 1 and 2 answer after 100 ms, node-0
//! after 200 ms. Once the acquire holds every lock it needs (its
//! `waiting()` turns `None`) it releases its place in line. Right then
//! node-0 restarts (in quarantine for 60 s) and, now answering after 10 ms,
//! refuses another lock's `try_lock` of the same client for quarantine;
//! 200 ms after it was asked, it answers the release of the line (a locker
//! in quarantine answers releases). Nodes 1 and 2 crash 50 ms after the
//! grant, with the release on its way, and never answer it. At the
//! deadline node-0 is the one locker that answered since the grant; the
//! error names it out of reach as well ("refusing new grants for another
//! 59.9s"), with 0 answered.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{acquire_ended, spawn_acquire};
use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::time::{sleep, Instant};

const SEED: u64 = 11;

#[tokio::test(start_paused = true)]
async fn a_locker_that_answered_the_release_is_not_named_out_of_reach() {
    let seed = SEED;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(200)), &[0])
        .unwrap();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(100)), &[1, 2])
        .unwrap();
    let client = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed)
        .build()
        .unwrap();
    let endpoints: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    let t0 = Instant::now();
    let (semaphore, acquire) = spawn_acquire(&client, Duration::from_millis(1_500));
    // Until the acquire holds every lock it needs: its status turns None.
    let mut seen = false;
    let mut granted_at = None;
    for _ in 0..1_500 {
        sleep(Duration::from_millis(1)).await;
        match semaphore.waiting() {
            Some(_) => seen = true,
            None if seen => {
                granted_at = Some(t0.elapsed());
                break;
            }
            None => {}
        }
    }
    let granted_at = granted_at.expect("the acquire gets every lock it needs");
    eprintln!("every lock held at {granted_at:?}; the line's release is on its way");
    let unlocks_before = cluster.nodes()[0].stats(CallKind::Unlock).seen;
    cluster.lockers()[0].restart();
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0])
        .unwrap();
    let other = client.rw_mutex(["other"]).unwrap();
    let tried = tokio::spawn(async move { other.try_lock().await.map(|_guard| ()) });
    sleep(Duration::from_millis(50)).await;
    cluster.crash(&[1, 2]).unwrap();
    let result = acquire_ended(acquire).await;
    eprintln!("gave up at {:?} with: {result:?}", t0.elapsed());
    let tried = tokio::time::timeout(Duration::from_secs(5), tried)
        .await
        .expect("the try ends")
        .unwrap();
    eprintln!("the other lock's try: {tried:?}");
    assert!(t0.elapsed() > granted_at + Duration::from_millis(200));
    let unlocks = cluster.nodes()[0].stats(CallKind::Unlock).seen - unlocks_before;
    eprintln!("unlocks node-0 saw after the grant: {unlocks}");
    assert!(unlocks >= 1, "node-0 was asked the release of the line");
    assert!(!cluster.nodes()[0].is_down());
    let Err(Error::QuorumUnavailable {
        answered,
        unreachable,
        ..
    }) = &result
    else {
        panic!("expected QuorumUnavailable, got {result:?}");
    };
    let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
    assert_eq!(
        named,
        [endpoints[1].as_str(), endpoints[2].as_str()],
        "{} answered the release of the line after its refusal: {result:?}",
        endpoints[0]
    );
    assert_eq!(*answered, 1, "{result:?}");
}
