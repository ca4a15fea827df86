//! Reproduces a past break: a semaphore acquire whose count and count check were both refused for quarantine gives up with `Timeout` ("asked a moment ago, waiting for lockers to answer") once the count alone could be granted, while the check still cannot be for the quarantine of the lockers it names.
//!
//! The rustdoc of `Semaphore::waiting`: "Of locks it waits on at once (the
//! count and its check, the slots), the one the lockers cannot grant says
//! why, else one held elsewhere"; "its reason is the one `acquire_timeout`
//! would give up with then". docs/guarantees.md ("Why a wait waits"):
//! "Locks of one operation that wait at the same time (a semaphore's count
//! and its check, its slots) each keep their own status ... of those, the
//! one that too few lockers can grant says why, then one that lockers in
//! quarantine hold up, then one held elsewhere"; and a step refused for
//! quarantine gives up "with what its lockers say at that moment".
//!
//! Four lockers: the count is a read lock (quorum 2), its check a write
//! lock (quorum 3). Node-0 restarted at 0 s (in quarantine until 60 s).
//! At 59 s an acquire with a 2 s deadline takes its place in line (nodes
//! 1, 2, 3; node-2 answers after 100 ms, the others after 10 ms); right
//! after, nodes 1 and 2 restart (in quarantine until about 119 s). The
//! count and the check are refused for quarantine by nodes 0, 1 and 2; the
//! check is decided first (two refusals rule out its quorum), the count
//! last (when node-2's refusal arrives), and the next attempt is seconds of
//! backoff away. At 60 s node-0 is out of quarantine: the count could now
//! be granted by nodes 0 and 3, the check still cannot (nodes 1 and 2 are
//! in quarantine for about 58 s more). (Already at 59.6 s `waiting()` speaks
//! for the count: "3 of 4 lockers are in quarantine ..., for 395ms more; 2
//! needed".) At the 61 s deadline the acquire
//! should give up with `Quarantined { [node-1, node-2], left: ~58s }`, the
//! check's reason; it gives up with `Timeout`, the count's.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{acquire_as_nodes_restart, acquire_ended, quarantine_left};
use quorum_lock::{Error, WaitReason};
use tokio::time::sleep;

const SEED: u64 = 5;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_names_the_check_held_up_by_quarantine() {
    let seed = SEED;
    eprintln!("seed {seed}");
    // The line is granted at 59.1 s (node-2's answer completes the quorum
    // of three); the count and its check are asked then, and nodes 1 and 2
    // restart.
    let (cluster, _client, semaphore, acquire) =
        acquire_as_nodes_restart(seed, Duration::from_secs(2)).await;
    let endpoints: Vec<String> = cluster.net_lockers().iter().map(|l| l.endpoint()).collect();
    sleep(Duration::from_millis(500)).await;
    let before = semaphore.waiting();
    eprintln!(
        "waiting at 59.6s: {:?}",
        before.as_ref().map(|s| (s.to_string(), s.reason()))
    );
    sleep(Duration::from_millis(1_394)).await;
    let left = quarantine_left(&cluster);
    eprintln!("at 60.999s, quarantine left per locker: {left:?}");
    let status = semaphore.waiting();
    eprintln!(
        "waiting at 60.999s: {:?}",
        status.as_ref().map(|s| (s.to_string(), s.reason()))
    );
    let result = acquire_ended(acquire).await;
    eprintln!("gave up at 61s with: {result:?}");
    assert!(left[0].is_none() && left[1].is_some() && left[2].is_some());
    let Err(Error::Quarantined {
        quarantined, left, ..
    }) = &result
    else {
        panic!(
            "the count check (write quorum 3) cannot be granted while {} and {} are in \
             quarantine, and nothing is asked of any locker: expected Quarantined, got \
             {result:?} (waiting() said {:?})",
            endpoints[1],
            endpoints[2],
            status.map(|s| s.to_string())
        );
    };
    assert_eq!(quarantined, &[endpoints[1].clone(), endpoints[2].clone()]);
    assert!(
        left.is_some_and(|l| l > Duration::from_secs(50)),
        "{result:?}"
    );
    assert_eq!(status.map(|s| s.reason()), Some(WaitReason::Quarantine));
}
