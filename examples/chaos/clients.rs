//! The clients of a chaos run: each has its own `Dsync` (one `RemoteLocker`
//! per server, through the client's own proxies) and, until the run ends,
//! locks, works and unlocks random names, recording everything on the
//! ledger.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{Dsync, Error, FencingGate, LockMode};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use crate::ledger::{Attempt, End, Grant, Ledger};

/// How long an acquire may take before it counts as not granted.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The names clients fight over: few, so that they collide often.
pub const NAMES: usize = 8;

/// One gate per name, as a resource that checks fencing tokens would keep.
pub type Gates = Arc<HashMap<String, FencingGate>>;

pub fn gates() -> Gates {
    Arc::new((0..NAMES).map(|i| (name(i), FencingGate::new())).collect())
}

fn name(i: usize) -> String {
    format!("chaos/{i}")
}

/// What one client does, for `seed`, until `stop`.
pub async fn run(
    client: usize,
    ds: Dsync,
    seed: u64,
    stop: Instant,
    refresh: Duration,
    ledger: Arc<Ledger>,
    gates: Gates,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ (client as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    while Instant::now() < stop {
        let first = rng.random_range(0..NAMES);
        let mut names = vec![name(first)];
        if rng.random_bool(0.2) {
            let second = (first + rng.random_range(1..NAMES)) % NAMES;
            names.push(name(second));
        }
        let mode = if rng.random_bool(0.7) {
            LockMode::Write
        } else {
            LockMode::Read
        };
        // From nothing to beyond the refresh interval.
        let hold = match rng.random_range(0..4) {
            0 => Duration::ZERO,
            1 => Duration::from_millis(rng.random_range(1..50)),
            2 => refresh / 2,
            _ => refresh * 3 / 2,
        };
        let fence = rng.random_bool(0.5);
        let Ok(mutex) = ds.rw_mutex(names.iter().map(String::as_str)) else {
            continue;
        };
        let at = Instant::now();
        match mode {
            LockMode::Write => match mutex.lock_timeout(ACQUIRE_TIMEOUT).await {
                Ok(guard) if guard.is_lost() => {
                    // Its grants came back after its deadline: the holder
                    // sees at once that it holds nothing, and acts on nothing.
                    ledger.attempt(Attempt { at, granted: false });
                    ledger.lost_at_birth();
                    let _ = guard.unlock().await;
                }
                Ok(guard) => {
                    let from = Instant::now();
                    ledger.attempt(Attempt { at, granted: true });
                    let token = if fence {
                        guard.fencing_token().await.ok()
                    } else {
                        None
                    };
                    if let Some(token) = token {
                        for name in &names {
                            if gates[name].admit(token).is_err() && !guard.is_lost() {
                                ledger.refused_token(format!(
                                    "client {client} uid {} token {token} on {name}",
                                    guard.uid()
                                ));
                            }
                        }
                    }
                    let (end, until) = work(hold, from, || guard.is_lost()).await;
                    ledger.grant(Grant {
                        client,
                        uid: guard.uid().to_owned(),
                        resources: names.clone(),
                        mode,
                        from,
                        until,
                        end,
                        token,
                    });
                    let _ = guard.unlock().await;
                }
                Err(err) => failed(&ledger, at, &err).await,
            },
            LockMode::Read => match mutex.read_timeout(ACQUIRE_TIMEOUT).await {
                Ok(guard) if guard.is_lost() => {
                    // Its grants came back after its deadline: the holder
                    // sees at once that it holds nothing, and acts on nothing.
                    ledger.attempt(Attempt { at, granted: false });
                    ledger.lost_at_birth();
                    let _ = guard.unlock().await;
                }
                Ok(guard) => {
                    let from = Instant::now();
                    ledger.attempt(Attempt { at, granted: true });
                    let token = if fence {
                        guard.fencing_token().await.ok()
                    } else {
                        None
                    };
                    let (end, until) = work(hold, from, || guard.is_lost()).await;
                    ledger.grant(Grant {
                        client,
                        uid: guard.uid().to_owned(),
                        resources: names.clone(),
                        mode,
                        from,
                        until,
                        end,
                        token,
                    });
                    let _ = guard.unlock().await;
                }
                Err(err) => failed(&ledger, at, &err).await,
            },
        }
    }
}

/// Holds the lock for `hold`, or until it is lost, acting in slices of at
/// most `SLICE` and checking `is_lost()` before each, as careful code
/// does. Returns how the hold ended and the last instant the holder saw
/// its lock still held: that is the end of its belief, and the library
/// promises that nobody else can be granted the lock before it (plus the
/// safety margin). Ending the belief at a later observation, such as a
/// `lost()` wake-up delayed by a busy runtime or by a slow fencing-token
/// call, would blame the library for the client's lateness.
async fn work(hold: Duration, from: Instant, is_lost: impl Fn() -> bool) -> (End, Instant) {
    const SLICE: Duration = Duration::from_millis(10);
    let mut seen_held = from;
    loop {
        let now = Instant::now();
        if is_lost() {
            return (End::Lost, seen_held);
        }
        seen_held = now;
        let done = now.saturating_duration_since(from);
        if done >= hold {
            return (End::Released, seen_held);
        }
        tokio::time::sleep((hold - done).min(SLICE)).await;
    }
}

/// Records a failed attempt; after an error that came at once (the
/// cluster refused outright), waits a little before the next try.
async fn failed(ledger: &Ledger, at: Instant, err: &Error) {
    ledger.attempt(Attempt { at, granted: false });
    if at.elapsed() < Duration::from_millis(50) {
        tracing::debug!("acquire failed at once: {err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
