//! The clocks the library reads: the monotonic clock a coordinator or a
//! `LocalLocker` measures leases, timeouts and expiry on, and the process's
//! wall clock for fencing tokens (the wall clock read once, plus monotonic
//! time since, so that it never steps back while the process lives and
//! follows tokio's paused clock in tests).
//!
//! [`Clock::Tokio`] is tokio's clock, which every user gets. The `testing`
//! feature adds [`Clock::Drift`], a clock that runs at a chosen rate and
//! offset from tokio's (see `testing::DriftClock`); without that feature the
//! enum has one variant, and every method compiles to the tokio call it
//! wraps.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// `at + duration`, or a point about 30 years away when that overflows.
///
/// Every setting may be `Duration::MAX`, which is how people write "no
/// limit"; deadlines built from settings go through here so that such a
/// value means "never" instead of a panic.
pub(crate) fn after(at: Instant, duration: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
    at.checked_add(duration.min(FAR))
        .unwrap_or_else(|| at.checked_add(FAR / 1_000).unwrap_or(at))
}

/// The wall clock, in nanoseconds since the Unix epoch, at `at`, read
/// against one anchor for the whole process: every `LocalLocker` of a
/// process, and every coordinator, then runs on the same clock (the
/// anchor's wall clock plus monotonic time since), however far apart they
/// were built, also on tokio's paused clock in tests.
pub(crate) fn anchored_wall(at: Instant) -> u64 {
    static ANCHOR: std::sync::OnceLock<(u64, Instant)> = std::sync::OnceLock::new();
    let &(wall, anchor) = ANCHOR.get_or_init(|| (wall_clock_nanos(), Instant::now()));
    match at.checked_duration_since(anchor) {
        Some(after) => wall.saturating_add(nanos_of(after)),
        None => wall.saturating_sub(nanos_of(anchor.saturating_duration_since(at))),
    }
}

pub(crate) fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds since the Unix epoch; 0 for a clock set before it.
fn wall_clock_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The clock one coordinator or one `LocalLocker` runs on. Cheap to clone.
///
/// Every instant it hands out is on this clock, and must only be compared
/// with instants of the same clock, or slept until through it.
#[derive(Clone, Default)]
pub(crate) enum Clock {
    /// tokio's clock (the monotonic clock, or tokio's paused clock in tests).
    #[default]
    Tokio,
    /// A clock running at its own rate and offset (testing only).
    #[cfg(feature = "testing")]
    Drift(crate::testing::DriftClock),
}

/// A timeout on a [`Clock`] expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl Clock {
    /// The current instant on this clock.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        match self {
            Clock::Tokio => Instant::now(),
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => clock.now(),
        }
    }

    /// The wall clock of the host this clock belongs to, in nanoseconds
    /// since the Unix epoch, at `at` (an instant of this clock).
    pub(crate) fn wall_at(&self, at: Instant) -> u64 {
        self.shift_wall(anchored_wall(at))
    }

    /// `wall`, read on the process's anchored wall clock at an instant of
    /// this clock, as this host's wall clock shows it (its offset added).
    #[inline]
    pub(crate) fn shift_wall(&self, wall: u64) -> u64 {
        match self {
            Clock::Tokio => wall,
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => clock.shift_wall(wall),
        }
    }

    /// The wall clock now: see [`wall_at`](Self::wall_at).
    pub(crate) fn wall_now(&self) -> u64 {
        self.wall_at(self.now())
    }

    /// The instant of tokio's clock at which this clock shows `at`, as far
    /// as its current rate tells: for a timer that tokio runs, or an
    /// instant shown to code that reads tokio's clock.
    pub(crate) fn to_tokio(&self, at: Instant) -> Instant {
        match self {
            Clock::Tokio => at,
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => clock.tokio_instant(at),
        }
    }

    /// Resolves once this clock shows `deadline` or later.
    pub(crate) fn sleep_until(&self, deadline: Instant) -> Sleep {
        let timer = match self {
            Clock::Tokio => Timer::Tokio(Box::pin(tokio::time::sleep_until(deadline))),
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => Timer::Drift {
                sleep: Box::pin(clock.clone().sleep_until(deadline)),
                clock: clock.clone(),
            },
        };
        Sleep { deadline, timer }
    }

    /// Resolves once this clock shows `deadline`, as
    /// [`sleep_until`](Self::sleep_until) does, without boxing a tokio
    /// timer: for a timer awaited in place.
    pub(crate) async fn wait_until(&self, deadline: Instant) {
        match self {
            Clock::Tokio => tokio::time::sleep_until(deadline).await,
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => clock.clone().sleep_until(deadline).await,
        }
    }

    /// Waits for `duration` on this clock.
    pub(crate) async fn sleep(&self, duration: Duration) {
        match self {
            Clock::Tokio => tokio::time::sleep(duration).await,
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => {
                let deadline = after(clock.now(), duration);
                clock.clone().sleep_until(deadline).await;
            }
        }
    }

    /// Awaits `future`, giving up with [`Elapsed`] once this clock shows
    /// `deadline`. The future is polled first, as `tokio::time::timeout_at`
    /// does.
    pub(crate) async fn timeout_at<F: Future>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        match self {
            Clock::Tokio => tokio::time::timeout_at(deadline, future)
                .await
                .map_err(|_| Elapsed),
            #[cfg(feature = "testing")]
            Clock::Drift(clock) => {
                tokio::select! {
                    biased;
                    out = future => Ok(out),
                    () = clock.clone().sleep_until(deadline) => Err(Elapsed),
                }
            }
        }
    }

    /// [`timeout_at`](Self::timeout_at) `duration` from now.
    pub(crate) async fn timeout<F: Future>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        match self {
            Clock::Tokio => tokio::time::timeout(duration, future)
                .await
                .map_err(|_| Elapsed),
            #[cfg(feature = "testing")]
            Clock::Drift(_) => {
                let deadline = after(self.now(), duration);
                self.timeout_at(deadline, future).await
            }
        }
    }
}

/// A timer on a [`Clock`], from [`Clock::sleep_until`]. Unpin, so that it
/// can be kept in a field and polled by hand.
pub(crate) struct Sleep {
    deadline: Instant,
    timer: Timer,
}

enum Timer {
    Tokio(Pin<Box<tokio::time::Sleep>>),
    #[cfg(feature = "testing")]
    Drift {
        sleep: Pin<Box<dyn Future<Output = ()> + Send + Sync>>,
        clock: crate::testing::DriftClock,
    },
}

impl Sleep {
    /// When it fires, on its clock.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Sets it to fire at `deadline` instead; a tokio timer is reused.
    pub(crate) fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        match &mut self.timer {
            Timer::Tokio(sleep) => sleep.as_mut().reset(deadline),
            #[cfg(feature = "testing")]
            Timer::Drift { sleep, clock } => *sleep = Box::pin(clock.clone().sleep_until(deadline)),
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.get_mut().timer {
            Timer::Tokio(sleep) => sleep.as_mut().poll(cx),
            #[cfg(feature = "testing")]
            Timer::Drift { sleep, .. } => sleep.as_mut().poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn after_saturates_instead_of_panicking() {
        let now = Instant::now();
        assert_eq!(
            after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let never = after(now, Duration::MAX);
        assert!(never > now + Duration::from_secs(365 * 86_400));
        assert_eq!(after(now, Duration::ZERO), now);
    }
}
