//! The loss-first promise on any runtime and after any stall. The runtime
//! itself is the subject here, so these tests
//! use real time with short leases; their outcome does not depend on timing
//! beyond margins of hundreds of milliseconds.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::runtime_support::{current_thread, multi_thread};
use futures::FutureExt;
use quorum_lock::{Dsync, Error, Lease, LocalLocker, LockerConfig, NetLocker, Timeouts};

/// Lockers keep an unrefreshed entry for 2 s.
const VALIDITY: Duration = Duration::from_secs(2);

fn lockers() -> Vec<Arc<dyn NetLocker>> {
    let config = LockerConfig {
        validity: VALIDITY,
        quarantine: VALIDITY,
    };
    (0..3)
        .map(|i| Arc::new(LocalLocker::with_config(format!("n{i}"), config)) as Arc<dyn NetLocker>)
        .collect()
}

/// Refresh every 200 ms; lost 1.5 s after the last confirmed refresh.
fn client(lockers: &[Arc<dyn NetLocker>], owner: &str) -> Dsync {
    Dsync::builder(lockers.to_vec())
        .owner(owner)
        .lease(Lease {
            validity: VALIDITY,
            refresh_interval: Duration::from_millis(200),
            safety_margin: Duration::from_millis(500),
        })
        .timeouts(Timeouts {
            acquire: Duration::from_millis(200),
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings")
}

/// Whether a rival client, on its own thread and runtime, is granted `name`.
fn rival_takes(lockers: &[Arc<dyn NetLocker>], name: &str) -> bool {
    let rival = client(lockers, "rival");
    let name = name.to_owned();
    thread::spawn(move || {
        current_thread().block_on(async {
            match rival.rw_mutex([name]).unwrap().try_lock().await {
                Ok(guard) => {
                    guard.unlock().await.unwrap();
                    true
                }
                Err(Error::WouldBlock) => false,
                Err(err) => panic!("rival: {err}"),
            }
        })
    })
    .join()
    .expect("rival thread")
}

#[test]
fn a_lock_outlives_the_runtime_that_locked_first() {
    let lockers = lockers();
    let ds = client(&lockers, "holder");
    let first = current_thread();
    let early = first.block_on(async { ds.rw_mutex(["early"]).unwrap().lock().await.unwrap() });
    let second = multi_thread();
    let late = second.block_on(async { ds.rw_mutex(["late"]).unwrap().lock().await.unwrap() });
    drop(first);
    drop(early);
    // Two validities: the lock must have been refreshed from the second runtime.
    thread::sleep(VALIDITY * 2);
    assert!(!late.is_lost(), "lost although its runtime kept running");
    assert!(
        !rival_takes(&lockers, "late"),
        "granted to a rival while held"
    );
    second.block_on(late.unlock()).unwrap();
}

#[test]
fn an_idle_first_runtime_does_not_starve_the_locks_of_a_busy_one() {
    let lockers = lockers();
    let ds = client(&lockers, "holder");
    // Used once at start-up, then never driven again (but alive).
    let idle = current_thread();
    idle.block_on(async {
        let g = ds.rw_mutex(["startup"]).unwrap().lock().await.unwrap();
        g.unlock().await.unwrap();
    });
    let busy = multi_thread();
    let held = busy.block_on(async { ds.rw_mutex(["job"]).unwrap().lock().await.unwrap() });
    thread::sleep(VALIDITY * 2);
    assert!(!held.is_lost(), "lost although a driven runtime held it");
    assert!(
        !rival_takes(&lockers, "job"),
        "granted to a rival while held"
    );
    busy.block_on(held.unlock()).unwrap();
    drop(idle);
}

#[test]
fn a_guard_kept_in_synchronous_code_reports_its_loss_before_a_rival_wins() {
    let lockers = lockers();
    let ds = client(&lockers, "holder");
    let rt = current_thread();
    let guard = rt.block_on(async { ds.rw_mutex(["sync"]).unwrap().lock().await.unwrap() });
    // Nothing drives `rt` now, so nothing refreshes the lock. Wait until a
    // rival is granted it (the entries expire after the validity)...
    let mut rival_won = false;
    for _ in 0..60 {
        thread::sleep(Duration::from_millis(100));
        if rival_takes(&lockers, "sync") {
            rival_won = true;
            break;
        }
        // ...and until then the guard may or may not say lost, but once it
        // says so it must keep saying so.
    }
    assert!(rival_won, "the entries never expired");
    assert!(
        guard.is_lost(),
        "a rival was granted the lock but is_lost() is false"
    );
    assert!(
        guard.lost().now_or_never().is_some(),
        "lost() did not resolve"
    );
    assert_eq!(rt.block_on(guard.unlock()), Err(Error::LockLost));
}

#[test]
fn a_stalled_holder_sees_its_loss_as_soon_as_it_wakes() {
    let lockers = lockers();
    let ds = client(&lockers, "holder");
    let rt = current_thread();
    rt.block_on(async {
        let guard = ds.rw_mutex(["stall"]).unwrap().lock().await.unwrap();
        let token = guard.loss_token();
        // The runtime's only thread stalls (GC, swap, SIGSTOP) for longer
        // than the validity: no refresh and no keeper can run meanwhile.
        thread::sleep(VALIDITY + Duration::from_millis(500));
        assert!(
            rival_takes(&lockers, "stall"),
            "a rival should win during the stall"
        );
        assert!(guard.is_lost(), "first look after the stall must say lost");
        assert!(guard.lost().now_or_never().is_some());
        // The token cannot read the clock, but is_lost() declared the loss.
        assert!(token.is_cancelled());
        assert_eq!(guard.unlock().await, Err(Error::LockLost));
    });
}

#[test]
fn lost_fires_on_time_without_a_keeper() {
    let lockers = lockers();
    let ds = client(&lockers, "holder");
    let locking = current_thread();
    let guard = locking.block_on(async { ds.rw_mutex(["watched"]).unwrap().lock().await.unwrap() });
    // The acquiring runtime is never driven again; the lost() future is
    // awaited on another one, which counts the lock as its own from then on
    // and so keeps refreshing it: it must not fire while the lock is fine.
    let watcher = current_thread();
    let fired = watcher.block_on(async {
        tokio::time::timeout(VALIDITY * 2, guard.lost())
            .await
            .is_ok()
    });
    assert!(
        !fired,
        "lost() fired although the watching runtime refreshed the lock"
    );
    assert!(!rival_takes(&lockers, "watched"));
    watcher.block_on(guard.unlock()).unwrap();
}
