//! `DriftClock`: a host's clock that runs at its own rate and offset from
//! the test's (tokio's) clock, changeable while the test runs.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::quorum::clock::after;
use crate::Error;

/// Rates are kept in parts per billion: integer arithmetic, so that a
/// timer set for an instant of this clock never wakes before it.
const BILLION: u128 = 1_000_000_000;

/// The slowest and the fastest rate a clock may run at.
const RATES: std::ops::RangeInclusive<f64> = 0.001..=1000.0;

/// The clock of one host in a test: it runs at `rate` times the speed of
/// tokio's clock (the test's own, usually paused), and its wall clock is
/// `offset` ahead of the one the test's process reads. Both can be changed
/// at any time from any thread, and a change takes effect at once for every
/// instant read and every timer set on the clock.
///
/// Give one to a [`LocalLocker`](crate::LocalLocker) with
/// [`LocalLocker::with_clock`](crate::LocalLocker::with_clock) (or build a
/// [`TestCluster`](super::TestCluster) with
/// [`with_clocks`](super::TestCluster::with_clocks)), and to a client with
/// [`DsyncBuilder::clock`](crate::DsyncBuilder::clock). The lock table then
/// measures expiry, quarantine and waiting places on it, and the client its
/// leases, timeouts, refreshes and backoffs: see the [module
/// docs](super#clocks-that-drift) for what it models.
///
/// The clock never steps: a new rate applies from the instant it is set,
/// so the time it shows is continuous and only ever grows. Only the wall
/// clock steps, when the offset changes.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::testing::DriftClock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// let clock = DriftClock::new();
/// let start = clock.now();
/// clock.set_rate(2.0)?; // this host's clock now runs twice as fast
/// tokio::time::sleep(Duration::from_secs(10)).await;
/// assert_eq!(clock.now() - start, Duration::from_secs(20));
/// clock.set_rate(0.5)?;
/// tokio::time::sleep(Duration::from_secs(10)).await;
/// assert_eq!(clock.now() - start, Duration::from_secs(25));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DriftClock {
    shared: Arc<Shared>,
}

struct Shared {
    segment: Mutex<Segment>,
    /// Bumped at every change of rate, so that timers set at the old rate
    /// wake and set themselves again.
    changes: watch::Sender<u64>,
}

/// The clock since its last change of rate: it showed `local` when tokio's
/// clock showed `tokio`, and runs at `ppb` billionths of tokio's speed.
#[derive(Debug, Clone, Copy)]
struct Segment {
    tokio: Instant,
    local: Instant,
    ppb: u64,
    /// Nanoseconds the wall clock is ahead of the process's (negative:
    /// behind).
    offset: i64,
}

impl Segment {
    /// What this clock shows when tokio's shows `at` (not before `tokio`).
    fn local_at(&self, at: Instant) -> Instant {
        let since = at.saturating_duration_since(self.tokio).as_nanos();
        let scaled = since.saturating_mul(u128::from(self.ppb)) / BILLION;
        after(self.local, nanos(scaled))
    }

    /// The first instant of tokio's clock at which this clock shows `at`
    /// or later, at the current rate.
    fn tokio_at(&self, at: Instant) -> Instant {
        match at.checked_duration_since(self.local) {
            None => self
                .tokio
                .checked_sub(unscale(self.local - at, self.ppb))
                .unwrap_or(self.tokio),
            Some(ahead) => after(self.tokio, unscale(ahead, self.ppb)),
        }
    }
}

/// The tokio duration in which a clock at `ppb` advances `d`, rounded up.
fn unscale(d: Duration, ppb: u64) -> Duration {
    let ppb = u128::from(ppb.max(1));
    nanos(d.as_nanos().saturating_mul(BILLION).div_ceil(ppb))
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

impl DriftClock {
    /// A clock that shows tokio's time now and runs at its speed, with no
    /// offset, until told otherwise.
    pub fn new() -> DriftClock {
        let (changes, _) = watch::channel(0);
        let now = Instant::now();
        DriftClock {
            shared: Arc::new(Shared {
                segment: Mutex::new(Segment {
                    tokio: now,
                    local: now,
                    ppb: BILLION as u64,
                    offset: 0,
                }),
                changes,
            }),
        }
    }

    fn segment(&self) -> MutexGuard<'_, Segment> {
        self.shared
            .segment
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The current instant on this clock.
    pub fn now(&self) -> Instant {
        self.segment().local_at(Instant::now())
    }

    /// From now on, runs at `rate` times the speed of tokio's clock
    /// (`2.0`: twice as fast, `0.5`: half as fast), kept to a billionth.
    /// The time it shows does not jump. Timers already set on the clock
    /// wake at the new rate. Fails with [`Error::InvalidArgument`] for a
    /// rate outside `0.001..=1000`.
    pub fn set_rate(&self, rate: f64) -> Result<(), Error> {
        Self::check_rate(rate)?;
        {
            let mut segment = self.segment();
            let now = Instant::now();
            segment.local = segment.local_at(now);
            segment.tokio = now;
            segment.ppb = (rate * BILLION as f64).round() as u64;
        }
        self.shared.changes.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    /// Fails as [`set_rate`](Self::set_rate) does for a rate it refuses.
    pub(crate) fn check_rate(rate: f64) -> Result<(), Error> {
        if RATES.contains(&rate) {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "clock rate {rate} is not within {}..={}",
            RATES.start(),
            RATES.end()
        )))
    }

    /// The rate it runs at, relative to tokio's clock.
    pub fn rate(&self) -> f64 {
        self.segment().ppb as f64 / BILLION as f64
    }

    /// Sets how far this host's wall clock (the one fencing tokens are drawn
    /// against) is ahead of the test process's, in nanoseconds; negative
    /// for behind. Changing it steps the wall clock; the monotonic clock
    /// that leases are measured on has no offset to speak of and is not
    /// affected.
    pub fn set_offset_nanos(&self, offset: i64) {
        self.segment().offset = offset;
    }

    /// The offset of the wall clock, in nanoseconds: see
    /// [`set_offset_nanos`](Self::set_offset_nanos).
    pub fn offset_nanos(&self) -> i64 {
        self.segment().offset
    }

    /// `wall`, a wall clock reading of the process, shifted by the offset.
    pub(crate) fn shift_wall(&self, wall: u64) -> u64 {
        wall.saturating_add_signed(self.offset_nanos())
    }

    /// The instant of tokio's clock at which this clock shows `at`, at the
    /// current rate.
    pub(crate) fn tokio_instant(&self, at: Instant) -> Instant {
        self.segment().tokio_at(at)
    }

    /// Resolves once this clock shows `deadline`, whatever rates it runs at
    /// meanwhile.
    pub(crate) async fn sleep_until(self, deadline: Instant) {
        let mut changes = self.shared.changes.subscribe();
        loop {
            let wake = {
                let segment = self.segment();
                if segment.local_at(Instant::now()) >= deadline {
                    return;
                }
                segment.tokio_at(deadline)
            };
            tokio::select! {
                // Made on the runtime polling it (a call handed on from a
                // runtime since shut down or idle polls it elsewhere).
                () = crate::quorum::deadline::RuntimeSleep::new(wake) => {}
                // A new rate: set the timer again. The sender lives as long
                // as the clock, which this future holds.
                _ = changes.changed() => {}
            }
        }
    }
}

impl Default for DriftClock {
    fn default() -> Self {
        DriftClock::new()
    }
}

impl fmt::Debug for DriftClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let segment = *self.segment();
        f.debug_struct("DriftClock")
            .field("rate", &(segment.ppb as f64 / BILLION as f64))
            .field("offset_nanos", &segment.offset)
            .finish_non_exhaustive()
    }
}
