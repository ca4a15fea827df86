//! Reproduces a past break: unlocks made outside any runtime each left a drain task of their own on their private runtime, so a locker that refused was probed by every one of them per backoff step instead of once.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "The queue
//! probes a failing locker with one unlock per backoff step, however many
//! it owes." src/lock/release.rs, module docs: "One queue per locker ...
//! keeps a refusing or hung locker from facing one retry loop per failed
//! round (the unlock storm an earlier version caused): it sees a probe per
//! backoff step". A backoff step is never shorter than 10 ms
//! (`MIN_BACKGROUND_WAIT`), here exactly 10 ms (`RetryPolicy` with
//! `initial == max == 10 ms`).
//!
//! What happens instead: every `unlock()` outside a runtime runs on a
//! runtime of its own (`on_own_runtime`), and the unlock its refusing
//! locker owes starts a drain task there, one per runtime. Sixteen
//! unlocks leave sixteen drain tasks on one queue; each takes what the
//! queue holds, probes, fails at once and puts it back, so the locker sees
//! about sixteen probes per 10 ms step.
#![cfg(feature = "testing")]

use crate::common;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use quorum_lock::testing::CallKind;
use quorum_lock::{RetryPolicy, Timeouts};

const SEED: u64 = 3628;
const UNLOCKS: usize = 16;

#[test]
fn a_failing_locker_is_probed_once_per_backoff_step_after_unlocks_outside_a_runtime() {
    eprintln!("seed {SEED}");
    let validity = Duration::from_secs(10);
    let (cluster, builder) = common::three_lockers_and_a_lease(
        SEED,
        validity,
        Duration::from_secs(2),
        Duration::from_secs(1),
    );
    let ds = builder
        .retry(RetryPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(10),
        })
        .timeouts(Timeouts {
            unlock: Duration::from_millis(100),
            ..Timeouts::default()
        })
        .build()
        .expect("valid coordinator");
    let acquiring = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let guards = acquiring.block_on(async {
        let mut guards = Vec::new();
        for i in 0..UNLOCKS {
            let guard = tokio::time::timeout(
                Duration::from_secs(5),
                ds.rw_mutex([format!("r{i}")]).unwrap().try_lock(),
            )
            .await
            .expect("in time")
            .expect("all three grant");
            guards.push(guard);
        }
        guards
    });
    cluster.set_refuse(true, &[2]).expect("node 2 exists");
    for guard in guards {
        // Lockers 0 and 1 confirm; locker 2's unlock goes to its queue.
        block_on(guard.unlock()).expect("a quorum confirms");
    }
    // Past every release's own retries (its 100 ms unlock deadline): from
    // here only the queue calls locker 2.
    std::thread::sleep(Duration::from_millis(400));
    let node = &cluster.nodes()[2];
    let start = Instant::now();
    let before = node.stats(CallKind::Unlock).seen;
    std::thread::sleep(Duration::from_millis(600));
    let probes = node.stats(CallKind::Unlock).seen - before;
    let elapsed = start.elapsed();
    let steps = elapsed.as_millis() as u64 / 10 + 2;
    eprintln!("{probes} unlock calls to the refusing locker in {elapsed:?} (at most {steps} backoff steps), owing {UNLOCKS}");
    assert!(
        probes <= steps,
        "the refusing locker saw {probes} unlock probes in {elapsed:?}, more than one per 10 ms \
         backoff step ({steps})"
    );
    cluster.heal_all();
    drop(acquiring);
}
