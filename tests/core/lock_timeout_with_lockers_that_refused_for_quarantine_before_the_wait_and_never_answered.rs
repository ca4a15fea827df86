//! Reproduces a past break: a `lock_timeout` shorter than a round trip, begun after another lock of the client was refused for quarantine by lockers that had never answered it anything else, gives up with `Timeout` ("asked a moment ago") instead of `Quarantined`: their refusal is dropped as a failure "of a locker never heard from".
//!
//! docs/guarantees.md ("Why a wait waits"): a wait reads, "for lockers
//! whose call failed, or that have not answered yet, the latest failure any
//! call of this client noted for that locker since it last answered (so a
//! locker another lock's call just found down counts as down, even while
//! this wait's own call to it is on its way ...)". "A refusal for
//! quarantine ... stands until the time it said was left has passed, or
//! until it answers a call a locker in quarantine refuses"; the wait gives
//! up with `Error::Quarantined` "when lockers in quarantine after a restart
//! are what keeps a quorum from granting", and with `Timeout` for lockers
//! "asked a moment ago" only when "nothing is known against the lockers".
//!
//! Three lockers, quorum 2, every call answered after 50 ms. Nodes 0 and 1
//! restart at 0 s (in quarantine for 60 s). At 1 s a `try_lock` of another
//! lock of the same client is refused for quarantine by both (the first
//! the client ever heard of them) and fails with `Quarantined`. At 2 s a
//! `lock_timeout` of 40 ms begins: its calls are on their way at the
//! deadline. Nodes 0 and 1 refused a second ago and have 59 s of quarantine
//! left, yet `waiting()` says "asked a moment ago, waiting for 3 of 3
//! lockers to answer" and the wait gives up with `Timeout`.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 17;

#[tokio::test(start_paused = true)]
async fn a_quarantine_refusal_of_another_lock_stands_while_the_wait_is_asked() {
    let seed = SEED;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .unwrap();
    let client = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(seed)
        .build()
        .unwrap();
    let endpoints: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    cluster.lockers()[0].restart();
    cluster.lockers()[1].restart();
    sleep(Duration::from_secs(1)).await;
    let tried = client
        .rw_mutex(["other"])
        .unwrap()
        .try_lock()
        .await
        .map(|_g| ());
    eprintln!("the other lock's try at 1s: {tried:?}");
    assert!(matches!(tried, Err(Error::Quarantined { .. })), "{tried:?}");
    sleep(Duration::from_secs(1)).await;
    let mutex = client.rw_mutex(["r"]).unwrap();
    let waiter = mutex.clone();
    let wait = tokio::spawn(async move {
        waiter
            .lock_timeout(Duration::from_millis(40))
            .await
            .map(|_guard| ())
    });
    sleep(Duration::from_millis(20)).await;
    let status = mutex.waiting();
    eprintln!(
        "waiting at 2.02s: {:?}",
        status.as_ref().map(|s| (s.to_string(), s.reason()))
    );
    let result = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the wait ends at its deadline")
        .unwrap();
    eprintln!("gave up at 2.04s with: {result:?}");
    let left = cluster.lockers()[0].quarantine_left();
    assert!(
        left.is_some_and(|l| l > Duration::from_secs(50)),
        "{left:?}"
    );
    let Err(Error::Quarantined { quarantined, .. }) = &result else {
        panic!(
            "{} and {} refused for quarantine a second ago and have about 58s of it \
             left: expected Quarantined, got {result:?} (waiting() said {:?})",
            endpoints[0],
            endpoints[1],
            status.map(|s| s.to_string())
        );
    };
    assert_eq!(quarantined, &endpoints[..2]);
    assert_eq!(status.map(|s| s.reason()), Some(WaitReason::Quarantine));
}
