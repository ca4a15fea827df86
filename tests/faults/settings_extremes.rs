#![cfg(feature = "testing")]
//! Every `Duration` in `Timeouts`, `Lease`, `RetryPolicy` and `LockerConfig`
//! either works or is refused by `build()` with a message naming the broken
//! relation. `Duration::MAX` is how people write "no
//! limit", so it must never panic, now or later in a background task.
//!
//! A panic hook counts panics on every thread, so a panic in the keeper or a
//! release task fails the test too. Replay one case with `SETTINGS_SEED=n`.

use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use quorum_lock::testing::FaultyLocker;
use quorum_lock::{
    Dsync, Error, Lease, LocalLocker, LockerConfig, NetLocker, RetryPolicy, Timeouts,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, timeout};

static PANICS: AtomicUsize = AtomicUsize::new(0);

const EXTREMES: [Duration; 8] = [
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_millis(300),
    Duration::from_secs(1),
    Duration::from_secs(10),
    Duration::from_secs(60),
    Duration::MAX,
];

fn pick(rng: &mut SmallRng) -> Duration {
    EXTREMES[rng.random_range(0..EXTREMES.len())]
}

/// Settings drawn mostly from the extremes, sometimes from the defaults, so
/// that both refusals and working combinations are common.
struct Settings {
    locker: LockerConfig,
    lease: Lease,
    timeouts: Timeouts,
    retry: RetryPolicy,
}

fn draw(rng: &mut SmallRng) -> Settings {
    let mut d = |default: Duration| {
        if rng.random_bool(0.5) {
            default
        } else {
            pick(rng)
        }
    };
    let (l, t, r, c) = (
        Lease::default(),
        Timeouts::default(),
        RetryPolicy::default(),
        LockerConfig::default(),
    );
    Settings {
        locker: LockerConfig {
            validity: d(c.validity),
            quarantine: d(c.quarantine),
        },
        lease: Lease {
            validity: d(l.validity),
            refresh_interval: d(l.refresh_interval),
            safety_margin: d(l.safety_margin),
        },
        timeouts: Timeouts {
            acquire: d(t.acquire),
            unlock: d(t.unlock),
            release_retry: d(t.release_retry),
            refresh: d(t.refresh),
            force_unlock: d(t.force_unlock),
            wait_recheck: d(t.wait_recheck),
        },
        retry: RetryPolicy {
            initial: d(r.initial),
            max: d(r.max),
        },
    }
}

/// The relations the documentation promises `build()` enforces, written
/// out independently of the library's own checks.
fn consistent(s: &Settings) -> bool {
    let l = &s.lease;
    let t = &s.timeouts;
    let trusted_for = l.validity.saturating_sub(l.safety_margin);
    l.refresh_interval >= Duration::from_millis(1)
        && !l.safety_margin.is_zero()
        && l.safety_margin < l.validity
        && l.refresh_interval < trusted_for
        && ![t.acquire, t.unlock, t.refresh, t.force_unlock].contains(&Duration::ZERO)
        && t.acquire < trusted_for
        && l.validity <= s.locker.validity
}

async fn scenario(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let s = draw(&mut rng);
    let nodes: Vec<Arc<FaultyLocker>> = (0..3)
        .map(|i| {
            let local = Arc::new(LocalLocker::with_config(format!("n{i}"), s.locker));
            Arc::new(FaultyLocker::local(local, seed + i))
        })
        .collect();
    if rng.random_bool(0.3) {
        nodes[2].restart();
    }
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();
    let built = Dsync::builder(lockers)
        .lease(s.lease)
        .timeouts(s.timeouts)
        .retry(s.retry)
        .rng_seed(seed)
        .build();
    let ds = match built {
        Err(Error::InvalidArgument(msg)) => {
            assert!(
                !consistent(&s),
                "seed {seed}: refused consistent settings: {msg}"
            );
            assert!(
                ["lease:", "timeouts:"].iter().any(|p| msg.starts_with(p)),
                "seed {seed}: the message does not name what is wrong: {msg}"
            );
            return;
        }
        Err(other) => panic!("seed {seed}: unexpected error {other}"),
        Ok(ds) => {
            assert!(
                consistent(&s),
                "seed {seed}: accepted inconsistent settings"
            );
            ds
        }
    };
    let m = ds.rw_mutex(["r"]).unwrap();
    // A zero backoff (the caller's choice) polls without ever letting
    // paused time advance, so only a single round is tried then.
    let waits = !s.retry.ceiling(0).is_zero();
    let acquired = if waits {
        timeout(Duration::from_secs(30), m.lock_timeout(Duration::MAX)).await
    } else {
        Ok(m.try_lock().await)
    };
    if let Ok(Ok(guard)) = acquired {
        let token = guard.loss_token();
        let mut was_lost = false;
        for _ in 0..rng.random_range(0..6) {
            let on = rng.random_bool(0.5);
            for node in &nodes[..2] {
                node.set_refuse(on);
            }
            sleep(pick(&mut rng).min(Duration::from_secs(40))).await;
            let lost = guard.is_lost();
            assert!(
                !was_lost || lost,
                "seed {seed}: is_lost() went back to false"
            );
            was_lost = lost;
            if lost {
                assert!(guard.lost().now_or_never().is_some(), "seed {seed}");
                assert!(token.is_cancelled(), "seed {seed}");
            }
        }
        for node in &nodes {
            node.set_refuse(false);
        }
        let _ = timeout(Duration::from_secs(30), guard.unlock()).await;
    }
    let _ = m.try_read().await.map(drop);
    let _ = timeout(Duration::from_secs(30), ds.force_unlock(["r"])).await;
    // Let background refreshes, retries and force releases run their course.
    sleep(Duration::from_secs(120)).await;
}

#[test]
fn extreme_durations_work_or_are_refused() {
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let replay = std::env::var("SETTINGS_SEED").is_ok();
    let seeds: Vec<u64> = match std::env::var("SETTINGS_SEED") {
        Ok(seed) => vec![seed.parse().expect("SETTINGS_SEED is a number")],
        Err(_) => (0..400).collect(),
    };
    let mut accepted = 0;
    for seed in seeds {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(scenario(seed));
        drop(runtime);
        assert_eq!(
            PANICS.load(Ordering::SeqCst),
            0,
            "seed {seed} panicked (replay with SETTINGS_SEED={seed})"
        );
        let mut rng = SmallRng::seed_from_u64(seed);
        accepted += usize::from(consistent(&draw(&mut rng)));
    }
    assert!(
        replay || accepted > 20,
        "only {accepted} combinations were accepted: the test checks too little"
    );
}
