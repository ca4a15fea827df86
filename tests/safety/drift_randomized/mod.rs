#![cfg(feature = "testing")]
//! Randomized drift test: lockers' and clients' clocks run at different
//! rates, and their wall clocks at different offsets, both changed while
//! the clients lock (`testing::DriftClock`).
//!
//! * Within the drift bound of docs/guarantees.md (a locker's clock runs
//!   less than `validity / (validity − safety_margin)` = 1.2 times as fast
//!   as a holder's), under the lock test's faults (partitions of a holder
//!   from a majority, slow, lossy, refusing and hanging nodes, restarts),
//!   no two holders ever believe they hold conflicting locks at once, no
//!   holder loses its lock without being told, and fencing tokens grow.
//! * Beyond it (a holder's clock at half speed, or two lockers' at double
//!   speed, while the holder is cut off from them), second holders do
//!   occur, and the test asserts that they did; yet every write that a
//!   `FencingGate` accepted is in the order of its holder's acquisition,
//!   and fencing tokens still grow from holder to holder.
//!
//! `DRIFT_SEEDS` (default 12, 6 in a debug build) seeds of `DRIFT_OPS`
//! (default 60) lock operations each, over all clients; `DRIFT_SEED=n`
//! runs seed `n` alone.

mod beyond;
mod within;

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::harness::lease;
use crate::safety_randomized::env_or;
use quorum_lock::testing::{DriftClock, TestCluster};
use quorum_lock::Dsync;

/// Upper bound on clock and fault steps, in case the workers never finish.
const MAX_STEPS: usize = 1_000_000;

const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 6 } else { 12 };

pub(super) fn settings() -> (Vec<u64>, usize) {
    let ops = env_or("DRIFT_OPS", 60) as usize;
    let seeds = match std::env::var("DRIFT_SEED") {
        Ok(_) => vec![env_or("DRIFT_SEED", 0)],
        Err(_) => (0..env_or("DRIFT_SEEDS", DEFAULT_SEEDS)).collect(),
    };
    (seeds, ops)
}

pub(super) fn replay(seed: u64, ops: usize, test: &str) -> String {
    format!(
        "replay: DRIFT_SEED={seed} DRIFT_OPS={ops} cargo test --all-features --test safety drift_randomized::{test}"
    )
}

/// A client of `cluster` named `owner` whose clock is `clock`.
pub(super) fn client(cluster: &TestCluster, owner: &str, seed: u64, clock: &DriftClock) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(owner)
        .rng_seed(seed)
        .lease(lease())
        .clock(clock.clone())
        .build()
        .expect("valid client settings")
}

/// Takes one op from the shared budget; `false` when none is left.
pub(super) fn take_op(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// Runs `run` for every seed, spread over the cores, each on its own
/// paused current-thread runtime (made by `run`), in seed order. A seed
/// that panics gives `None`.
pub(super) fn run_seeds<R: Send>(
    seeds: &[u64],
    run: impl Fn(u64) -> R + Sync,
) -> Vec<(u64, Option<R>)> {
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out: Vec<(u64, Option<R>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.min(seeds.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    while let Some(&seed) = seeds.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let result =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed)));
                        out.push((seed, result.ok()));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("seed runner"))
            .collect()
    });
    out.sort_by_key(|(seed, _)| *seed);
    out
}

pub(super) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}
