//! Reproduces a past break: `Semaphore::acquire_timeout` that gives up after the quarantine its latest step was refused for has ended (by the time the locker said) fails with `Error::Quarantined { left: Some(0ns) }`, naming a locker out of quarantine, while `waiting()` a moment before says the lockers are still answering (`Timeout`).
//!
//! The rustdoc of `Semaphore::waiting`: "While it waits for a lock, its
//! reason is the one `acquire_timeout` would give up with then". The
//! rustdoc of `Error::Quarantined::quarantined`: "The lockers in
//! quarantine"; of `left`: "How long until enough of them are out of
//! quarantine for a quorum". docs/guarantees.md ("Why a wait waits"): a
//! refusal for quarantine "stands until the time it said was left has
//! passed"; `Error::Quarantined` is the error "when lockers in quarantine
//! after a restart are what keeps a quorum from granting".
//!
//! Three in-process lockers, each call delayed 50 ms, retries backing off
//! up to 10 s. Locker 0 restarts at 0 s (in quarantine until 60 s). At
//! 58.5 s an acquire with a 2 s deadline begins; its place in line is
//! granted by lockers 1 and 2, and at 58.56 s locker 1 restarts while the
//! count's calls are on their way (the calls to it are lost and time out
//! at 59.55 s). That step fails as `Quarantined { [node-0], left: 450ms }`
//! (node-0 refused for quarantine, node-2 granted) and the next is seconds
//! of backoff away. At 60 s node-0 is out of quarantine; at 60.499 s
//! `waiting()` says "asked a moment ago, waiting for 2 of 3 lockers to
//! answer (node-0, node-1)" (`Answering`: `Timeout`), and at the deadline
//! the acquire gives up with the step's error aged to nothing:
//! `Quarantined { quarantined: ["node-0"], left: Some(0ns) }`, a locker
//! named in quarantine half a second after it said it would leave it.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{acquire_ended, retrying_every, spawn_acquire};
use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 1;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_after_the_quarantine_it_was_refused_for_ended() {
    let seed = SEED;
    eprintln!("seed {seed}");
    let cluster = TestCluster::new(3, seed);
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(50)), &[0, 1, 2])
        .unwrap();
    let client = retrying_every(&cluster, seed, Duration::from_secs(10))
        .build()
        .unwrap();
    let endpoints: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    cluster.restart(&[0]).unwrap();
    sleep(Duration::from_millis(58_500)).await;
    let (semaphore, acquire) = spawn_acquire(&client, Duration::from_secs(2));
    sleep(Duration::from_millis(60)).await;
    cluster.restart(&[1]).unwrap();
    sleep(Duration::from_millis(1_939)).await;
    let locker_0_left = cluster.lockers()[0].quarantine_left();
    let locker_1_left = cluster.lockers()[1].quarantine_left();
    eprintln!("at 60.499s: locker 0 quarantine left {locker_0_left:?}, locker 1 {locker_1_left:?}");
    let status = semaphore.waiting();
    eprintln!(
        "waiting at 60.499s: {:?}",
        status.as_ref().map(|s| (s.to_string(), s.reason()))
    );
    let result = acquire_ended(acquire).await;
    eprintln!("gave up at 60.5s with: {result:?}");
    assert_eq!(locker_0_left, None, "locker 0 is out of quarantine by then");
    if let Err(Error::Quarantined {
        quarantined, left, ..
    }) = &result
    {
        assert!(
            !quarantined.contains(&endpoints[0]),
            "the error names {} as in quarantine, though its quarantine ended at 60s \
             (as it said): {result:?}",
            endpoints[0]
        );
        assert_ne!(
            *left,
            Some(Duration::ZERO),
            "Quarantined with no time left: the quarantine is over, so it is not what \
             keeps the quorum from granting"
        );
    }
    if let Some(status) = status
        && status.reason() != WaitReason::Quarantine
    {
        assert!(
            !matches!(result, Err(Error::Quarantined { .. })),
            "waiting() a millisecond before said {:?} ({status}), yet acquire_timeout \
                 gave up with {result:?}",
            status.reason()
        );
    }
}
