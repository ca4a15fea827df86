#![cfg(feature = "testing")]
//! Edge cases found by an adversarial review of the #9 hardening: stalled
//! lanes, idle runtimes, retry storms, slow backoffs and endless settings.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant as StdInstant};

use crate::runtime_support::{current_thread, multi_thread};
use quorum_lock::testing::{CallKind, FaultyLocker, Latency};
use quorum_lock::{
    Dsync, Error, Lease, LocalLocker, LockerConfig, NetLocker, RetryPolicy, Timeouts,
};

const VALIDITY: Duration = Duration::from_secs(2);

fn nodes(validity: Duration) -> Vec<Arc<FaultyLocker>> {
    let config = LockerConfig {
        validity,
        quarantine: validity,
    };
    (0..3)
        .map(|i| {
            Arc::new(FaultyLocker::local(
                Arc::new(LocalLocker::with_config(format!("n{i}"), config)),
                i,
            ))
        })
        .collect()
}

fn as_lockers(nodes: &[Arc<FaultyLocker>]) -> Vec<Arc<dyn NetLocker>> {
    nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect()
}

fn short_lease() -> Lease {
    Lease {
        validity: VALIDITY,
        refresh_interval: Duration::from_millis(200),
        safety_margin: Duration::from_millis(500),
    }
}

fn entries(nodes: &[Arc<FaultyLocker>]) -> Vec<usize> {
    nodes
        .iter()
        .map(|n| n.local_locker().unwrap().snapshot().len())
        .collect()
}

/// Regression: a refresh round grabbed by a lane whose runtime then stalls can only
/// be taken over at `round deadline + 1 s`, and the round deadline is
/// `min(give_up, now + Timeouts::refresh)`. With the default
/// `Timeouts::refresh` (5 s) and any lease whose `trusted_for -
/// refresh_interval` is under ~6 s, the takeover comes after the loss: the
/// lock is declared lost although another runtime that holds it is alive,
/// driven and the lockers are healthy.
#[test]
fn a_round_stuck_on_a_stalled_lane_is_taken_over_before_the_loss() {
    let nodes = nodes(VALIDITY);
    for n in &nodes {
        // Rounds take a little while, as over a network.
        n.set_latency(Latency::Fixed(Duration::from_millis(100)));
    }
    let ds = Dsync::builder(as_lockers(&nodes))
        .lease(short_lease())
        .timeouts(Timeouts {
            acquire: Duration::from_millis(500),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let a = current_thread();
    let watcher = a.block_on(async {
        let t0 = tokio::time::Instant::now();
        let guard = ds.rw_mutex(["x"]).unwrap().lock().await.unwrap();
        // Lane A starts the first refresh at started + 200 ms; its calls
        // wait 100 ms in latency, so it is in flight at t0 + 250 ms.
        tokio::time::sleep_until(t0 + Duration::from_millis(250)).await;
        // Another runtime, alive and driven, now holds the lock too.
        let lost = guard.lost();
        let watcher = thread::spawn(move || {
            current_thread().block_on(async {
                tokio::time::timeout(Duration::from_secs(3), lost)
                    .await
                    .is_ok()
            })
        });
        // Runtime A's only thread stalls (GC, swap, a blocking call).
        thread::sleep(Duration::from_millis(3500));
        (watcher, guard)
    });
    let (watcher, guard) = watcher;
    let fired = watcher.join().unwrap();
    assert!(
        !fired,
        "lost() fired although a driven runtime held the lock and every locker was healthy"
    );
    drop(guard);
}

/// Regression: the retry queue's drain task runs on the runtime of the first
/// failure. If that runtime is alive but no longer driven (a current-thread
/// runtime used with `block_on` at start-up), `draining` stays true for
/// ever, so every later failed unlock on that locker, from any runtime, is
/// queued and never retried: entries stay on healed, reachable lockers
/// until they expire, and other clients wait.
#[test]
fn failed_unlocks_are_retried_even_if_the_first_drain_runtime_went_idle() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes))
        .timeouts(Timeouts {
            acquire: Duration::from_millis(200),
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    // Start-up, on a runtime that is then left idle: a failed try_lock
    // leaves unlocks to retry on nodes 0 and 1.
    let idle = current_thread();
    idle.block_on(async {
        nodes[0].set_refuse(true);
        nodes[1].set_refuse(true);
        let err = ds
            .rw_mutex(["startup"])
            .unwrap()
            .try_lock()
            .await
            .unwrap_err();
        assert!(matches!(err, Error::QuorumUnavailable { .. }), "{err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    for n in &nodes {
        n.heal();
    }
    // The application's real runtime.
    let busy = multi_thread();
    busy.block_on(async {
        let guard = ds.rw_mutex(["job"]).unwrap().lock().await.unwrap();
        nodes[0].set_refuse(true);
        nodes[1].set_refuse(true);
        let err = guard.unlock().await.unwrap_err();
        assert!(matches!(err, Error::ReleaseUnconfirmed { .. }), "{err}");
        // The straggling inline retries give up after Timeouts::unlock.
        tokio::time::sleep(Duration::from_millis(400)).await;
        for n in &nodes {
            n.heal();
        }
        // The queue's backoff is at most RetryPolicy::max (1 s).
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            entries(&nodes),
            [0, 0, 0],
            "the healed lockers still hold the released lock"
        );
    });
    drop(idle);
}

/// Regression: a guard dropped (or `unlock()`ed straggler calls) releases on the
/// runtime that *acquired*: `Held::drop` spawns on `self.handle`. If that
/// runtime is alive but idle (used once with `block_on` at start-up), the
/// release never runs: the entries stay on every locker for the full
/// validity and every other client waits, although the guard was dropped
/// inside a running runtime.
#[test]
fn dropping_a_guard_releases_even_if_the_acquiring_runtime_is_idle() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes)).build().unwrap();
    let startup = current_thread();
    let guard = startup.block_on(async { ds.rw_mutex(["leader"]).unwrap().lock().await.unwrap() });
    let main = multi_thread();
    main.block_on(async move {
        drop(guard);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            entries(&nodes),
            [0, 0, 0],
            "the dropped guard's lock is still held on the lockers"
        );
    });
    drop(startup);
}

/// Regression: `release_one` retries a granted unlock inline with
/// `coord.backoff`, not `background_backoff`, so with a zero (or 1 ns)
/// `RetryPolicy` — accepted by `build()` — it hammers a refusing locker in a
/// tight loop for the whole `Timeouts::unlock`, also in the background after
/// a guard drop.
#[test]
fn a_zero_retry_policy_does_not_storm_a_refusing_locker_on_unlock() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes))
        .retry(RetryPolicy {
            initial: Duration::ZERO,
            max: Duration::ZERO,
        })
        .timeouts(Timeouts {
            unlock: Duration::from_millis(500),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let rt = current_thread();
    rt.block_on(async {
        let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
        nodes[0].set_refuse(true);
        let before = nodes[0].stats(CallKind::Unlock).seen;
        let started = StdInstant::now();
        drop(guard);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let calls = nodes[0].stats(CallKind::Unlock).seen - before;
        assert!(
            calls < 200,
            "{calls} unlock calls to one refusing locker in {:?}",
            started.elapsed()
        );
    });
}

/// Regression: `RetryPolicy` is documented as the backoff between failed acquire
/// rounds and release calls, but the keeper also uses it after an
/// unconfirmed refresh. A slow acquire backoff (here 10 min) makes one
/// transient refresh failure cost the lock although the lockers were back a
/// second later, long before the deadline. `build()` accepts it.
#[tokio::test(start_paused = true)]
async fn a_slow_acquire_backoff_does_not_cost_a_lock_after_one_failed_refresh() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes))
        .retry(RetryPolicy {
            initial: Duration::from_secs(600),
            max: Duration::from_secs(600),
        })
        .rng_seed(1)
        .build()
        .unwrap();
    let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(9_900)).await;
    nodes[0].set_refuse(true);
    nodes[1].set_refuse(true);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    nodes[0].heal();
    nodes[1].heal();
    // 40 s are left before the deadline, with healthy lockers.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        !guard.is_lost(),
        "lost after a 1 s blip, 40 s before its deadline"
    );
    guard.unlock().await.unwrap();
}

/// Bug (extreme settings): `after()` clamps every duration to 30 years, and
/// the `LocalLocker` expires entries with `after(refreshed, validity)`, so a
/// locker configured for a validity over 30 years (e.g. `Duration::MAX`,
/// "never") frees an entry after 30 years, while a holder with the same
/// `Lease::validity` (accepted by `build()`) trusts its lock for ever.
#[tokio::test(start_paused = true)]
async fn a_locker_never_frees_a_lock_its_holder_still_trusts() {
    let nodes = nodes(Duration::MAX);
    let ds = Dsync::builder(as_lockers(&nodes))
        .lease(Lease {
            validity: Duration::MAX,
            // Few refreshes, so that paused time gets through 31 years.
            refresh_interval: Duration::from_secs(20 * 365 * 86_400),
            ..Lease::default()
        })
        .timeouts(Timeouts {
            refresh: Duration::MAX,
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    // The holder is cut off from two lockers: it cannot refresh them.
    nodes[0].partition(ds.owner());
    nodes[1].partition(ds.owner());
    tokio::time::sleep(Duration::from_secs(31 * 365 * 86_400)).await;
    let rival = Dsync::builder(as_lockers(&nodes))
        .owner("rival")
        .lease(Lease {
            validity: Duration::MAX,
            ..Lease::default()
        })
        .build()
        .unwrap();
    let got = rival.rw_mutex(["a"]).unwrap().try_lock().await;
    assert!(
        got.is_err() || guard.is_lost(),
        "a rival was granted the lock while the holder's is_lost() is false"
    );
}

/// Suspected: with `Timeouts::unlock = Duration::MAX` (documented as
/// allowed, "no limit"), a granted locker's unlock is retried inline by
/// `release_one` until `inline_until` (30 years), never reaching the queue
/// and its validity-bounded `give_up`: one retry loop per released lock,
/// for ever, against a locker that refuses.
#[tokio::test(start_paused = true)]
async fn unlock_retries_stop_once_the_locker_must_have_expired_the_entry() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes))
        .timeouts(Timeouts {
            unlock: Duration::MAX,
            ..Timeouts::default()
        })
        .rng_seed(3)
        .build()
        .unwrap();
    let guard = ds.rw_mutex(["a"]).unwrap().lock().await.unwrap();
    nodes[0].set_refuse(true);
    guard.unlock().await.unwrap();
    // Well past the validity: the entry has expired by itself.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let before = nodes[0].stats(CallKind::Unlock).seen;
    tokio::time::sleep(Duration::from_secs(600)).await;
    let calls = nodes[0].stats(CallKind::Unlock).seen - before;
    assert_eq!(
        calls, 0,
        "{calls} unlock calls long after the entry expired"
    );
}

/// Same root cause as the idle-runtime drop: `unlock()` polled outside a
/// runtime spawns the release on the acquiring runtime and waits for it; if
/// that is a current-thread runtime not being driven, `unlock()` never
/// returns.
#[test]
fn unlock_from_synchronous_code_returns() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes)).build().unwrap();
    let rt = current_thread();
    let guard = rt.block_on(async { ds.rw_mutex(["s"]).unwrap().lock().await.unwrap() });
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let result = futures::executor::block_on(guard.unlock());
        let _ = tx.send(result);
    });
    let result = rx.recv_timeout(Duration::from_secs(3));
    assert!(result.is_ok(), "unlock() from synchronous code hangs");
    drop(rt);
}

/// The drain task takes the whole batch out of the queue before it calls;
/// when its runtime shuts down mid-call, the batch is dropped with the task
/// (`Draining::drop` only resets `draining`), so those unlocks are never
/// retried, even by the next drain.
#[test]
fn a_drain_dropped_with_its_runtime_does_not_lose_its_batch() {
    let nodes = nodes(Duration::from_secs(60));
    let ds = Dsync::builder(as_lockers(&nodes))
        .timeouts(Timeouts {
            unlock: Duration::from_millis(300),
            ..Timeouts::default()
        })
        .build()
        .unwrap();
    let a = current_thread();
    a.block_on(async {
        let guard = ds.rw_mutex(["a1"]).unwrap().lock().await.unwrap();
        nodes[0].set_hang(true);
        guard.unlock().await.unwrap();
        // The straggler times out, queues, and the drain probes (and hangs).
        tokio::time::sleep(Duration::from_millis(1000)).await;
    });
    drop(a);
    nodes[0].heal();
    let b = multi_thread();
    b.block_on(async {
        let guard = ds.rw_mutex(["b1"]).unwrap().lock().await.unwrap();
        nodes[0].set_refuse(true);
        guard.unlock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        nodes[0].heal();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let left: Vec<String> = nodes[0]
            .local_locker()
            .unwrap()
            .snapshot()
            .into_iter()
            .map(|e| e.resource)
            .collect();
        assert!(left.is_empty(), "node 0 still holds {left:?}");
    });
}
