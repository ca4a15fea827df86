//! The clients of a chaos run: each has its own `Dsync` (one `RemoteLocker`
//! per server, through the client's own proxies) and, until the run ends,
//! locks, works and unlocks random names, recording everything on the
//! ledger.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{Dsync, Error, FencingGate, LockMode, ReadGuard, WriteGuard};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use crate::ledger::{Attempt, End, Grant, Ledger};

/// How long an acquire may take before it counts as not granted.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many names `clients` fight over by default: few enough that they
/// collide often (about two clients per name, never fewer than 8 names),
/// and not so few that waiting in line behind others, rather than faults,
/// decides whether an acquire makes its timeout.
pub fn default_names(clients: usize) -> usize {
    (clients / 2).max(8)
}

/// One gate per name, as a resource that checks fencing tokens would keep.
pub type Gates = Arc<HashMap<String, FencingGate>>;

pub fn gates(names: usize) -> Gates {
    Arc::new((0..names).map(|i| (name(i), FencingGate::new())).collect())
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
    let names_count = gates.len().max(1);
    let mut rng = StdRng::seed_from_u64(seed ^ (client as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    while Instant::now() < stop {
        let first = rng.random_range(0..names_count);
        let mut names = vec![name(first)];
        if names_count > 1 && rng.random_bool(0.2) {
            let second = (first + rng.random_range(1..names_count)) % names_count;
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
        let one = One {
            client,
            names: &names,
            mode,
            hold,
            fence,
            at,
            ledger: &ledger,
            gates: &gates,
        };
        match mode {
            LockMode::Write => match mutex.lock_timeout(ACQUIRE_TIMEOUT).await {
                Ok(guard) => one.held(guard).await,
                Err(err) => one.failed(&err).await,
            },
            LockMode::Read => match mutex.read_timeout(ACQUIRE_TIMEOUT).await {
                Ok(guard) => one.held(guard).await,
                Err(err) => one.failed(&err).await,
            },
        }
    }
}

/// What the client does with either kind of guard.
trait Guard {
    fn uid(&self) -> &str;
    fn is_lost(&self) -> bool;
    async fn token(&self) -> Option<u64>;
    async fn release(self);
}

macro_rules! guard {
    ($guard:ty) => {
        impl Guard for $guard {
            fn uid(&self) -> &str {
                <$guard>::uid(self)
            }
            fn is_lost(&self) -> bool {
                <$guard>::is_lost(self)
            }
            async fn token(&self) -> Option<u64> {
                self.fencing_token().await.ok()
            }
            async fn release(self) {
                let _ = self.unlock().await;
            }
        }
    };
}

guard!(WriteGuard);
guard!(ReadGuard);

/// One acquire of one client, and what it records.
struct One<'a> {
    client: usize,
    names: &'a [String],
    mode: LockMode,
    hold: Duration,
    fence: bool,
    at: Instant,
    ledger: &'a Ledger,
    gates: &'a Gates,
}

impl One<'_> {
    /// Records the attempt, ended now: granted, or not and why.
    fn attempt(&self, failure: Option<String>) -> Instant {
        let ended = Instant::now();
        self.ledger.attempt(Attempt {
            at: self.at,
            ended,
            client: self.client,
            resources: self.names.to_vec(),
            mode: self.mode,
            granted: failure.is_none(),
            failure,
        });
        ended
    }

    /// Records a failed attempt; after an error that came at once (the
    /// cluster refused outright), waits a little before the next try.
    async fn failed(&self, err: &Error) {
        self.attempt(Some(err.to_string()));
        if self.at.elapsed() < Duration::from_millis(50) {
            tracing::debug!("acquire failed at once: {err}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn held(&self, guard: impl Guard) {
        let ledger = self.ledger;
        if guard.is_lost() {
            // Its grants came back after its deadline: the holder sees at
            // once that it holds nothing, and acts on nothing.
            self.attempt(Some("lost when granted".into()));
            ledger.lost_at_birth();
            guard.release().await;
            return;
        }
        let from = self.attempt(None);
        let token = if self.fence {
            guard.token().await
        } else {
            None
        };
        // Only a writer's token goes through the resource's gate: readers
        // share, so their tokens come in any order.
        if let (Some(token), LockMode::Write) = (token, self.mode) {
            for name in self.names {
                if self.gates[name].admit(token).is_err() && !guard.is_lost() {
                    ledger.refused_token(format!(
                        "client {} uid {} token {token} on {name}",
                        self.client,
                        guard.uid()
                    ));
                }
            }
        }
        let (end, until) = work(self.hold, from, || guard.is_lost()).await;
        ledger.grant(Grant {
            client: self.client,
            uid: guard.uid().to_owned(),
            resources: self.names.to_vec(),
            mode: self.mode,
            from,
            until,
            end,
            token,
        });
        guard.release().await;
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
