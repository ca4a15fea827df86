//! Reproduces a past break: a semaphore acquire whose count and count check were both refused for quarantine gives up with `Quarantined` counting the time left for the count's read quorum (under a second), while its check needs a write quorum still in quarantine for about a minute.
//!
//! The rustdoc of `Error::Quarantined::left`: "How long until enough of
//! them are out of quarantine for a quorum". The rustdoc of
//! `Semaphore::waiting`: "Of locks it waits on at once (the count and its
//! check, the slots), the one the lockers cannot grant says why". docs/
//! guarantees.md ("Why a wait waits"): of locks of one operation that wait
//! at the same time (a semaphore's count and its check), "the one that too
//! few lockers can grant says why, then one that lockers in quarantine hold
//! up"; `Error::Quarantined` is given "with the time left".
//!
//! Four lockers: the count is a read lock (quorum 2), its check a write
//! lock (quorum 3). Node-0 restarted at 0 s (in quarantine until 60 s).
//! At 59 s an acquire with a 600 ms deadline takes its place in line
//! (nodes 1, 2, 3; node-2 answers after 100 ms, the others after 10 ms);
//! right after, nodes 1 and 2 restart (in quarantine until about 119 s).
//! The count and its check are refused for quarantine by nodes 0, 1 and 2
//! (the count decided last), and the next attempt is seconds of backoff
//! away. At the 59.6 s deadline the permit cannot be had before the check
//! can, when nodes 1 and 2 leave quarantine about 59 s later; the acquire
//! gives up with `Quarantined { quorum: 2, left: ~400ms }`: the count's
//! quorum, and the time until node-0 alone leaves quarantine.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::a_semaphore_acquire::{acquire_as_nodes_restart, acquire_ended, quarantine_left};
use quorum_lock::Error;
use tokio::time::sleep;

const SEED: u64 = 5;

#[tokio::test(start_paused = true)]
async fn acquire_timeout_gives_the_time_left_of_the_check_held_up_by_quarantine() {
    let seed = SEED;
    eprintln!("seed {seed}");
    // The line is granted at 59.1 s; the count and its check are asked
    // then, and nodes 1 and 2 restart.
    let (cluster, _client, semaphore, acquire) =
        acquire_as_nodes_restart(seed, Duration::from_millis(600)).await;
    sleep(Duration::from_millis(494)).await;
    let left = quarantine_left(&cluster);
    eprintln!("at 59.599s, quarantine left per locker: {left:?}");
    let status = semaphore.waiting();
    eprintln!(
        "waiting at 59.599s: {:?}",
        status
            .as_ref()
            .map(|s| (s.to_string(), s.reason(), s.quarantine_left()))
    );
    let result = acquire_ended(acquire).await;
    eprintln!("gave up at 59.6s with: {result:?}");
    let check_left = left[1].zip(left[2]).map(|(a, b)| a.min(b));
    assert!(check_left.is_some_and(|l| l > Duration::from_secs(50)));
    let Err(Error::Quarantined { left, quorum, .. }) = &result else {
        panic!("expected Quarantined, got {result:?}");
    };
    assert!(
        left.is_some_and(|l| l > Duration::from_secs(50)),
        "the check (write quorum 3) can be granted only once node-1 or node-2 leaves \
         quarantine, in {check_left:?}; the error says {left:?} (quorum {quorum}): {result:?}"
    );
}
