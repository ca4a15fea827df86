//! What a `Dsync` records through the [`metrics`](https://docs.rs/metrics)
//! facade (feature `metrics`): the names, their labels, and the handles
//! registered once per `Dsync`, so that the lock path pays an atomic add or
//! a bucket push, never a registry lookup. Without the feature every type
//! here is empty and every method an inline no-op.
//!
//! The application installs the recorder (for example
//! `metrics-exporter-prometheus`) before it builds its `Dsync`: handles are
//! taken from the recorder installed at build time. Labels never carry a
//! resource name, a uid or an owner, whose number has no bound; the
//! `locker` label is the locker's endpoint, one value per node.

use std::fmt;

use crate::{Error, LockMode};

/// Resource names for a span or a log line: at most three, each cut to 64
/// bytes, then how many more there are, so that a lock on many long names
/// cannot flood the logs.
pub(crate) struct Names<'a>(pub(crate) &'a [String]);

impl fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 3;
        const LONGEST: usize = 64;
        for (i, name) in self.0.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let mut cut = name.len().min(LONGEST);
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            f.write_str(&name[..cut])?;
            if cut < name.len() {
                f.write_str("…")?;
            }
        }
        if self.0.len() > SHOWN {
            write!(f, " (+{} more)", self.0.len() - SHOWN)?;
        }
        Ok(())
    }
}

/// The `outcome` of an acquire that ended with `result`, for spans and logs.
pub(crate) fn outcome<T>(result: &Result<T, Error>) -> &'static str {
    AcquireOutcome::of(result).label()
}

/// The metric names, as exported; docs/metrics.md lists them with their meaning.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub mod names {
    /// Histogram, seconds, by `mode` and `outcome`: how long `lock()`,
    /// `read()`, `try_*` and `*_timeout` took.
    pub const ACQUIRE_SECONDS: &str = "quorum_lock_acquire_seconds";
    /// Counter, by `mode`: rounds and waits started by acquires (a retry, a
    /// wound or a stale wait starts another).
    pub const ACQUIRE_ROUNDS: &str = "quorum_lock_acquire_rounds_total";
    /// Histogram, seconds, by `locker` and `call`: calls that had to wait for
    /// their answer (every remote call; in-process calls answer at once and
    /// are not timed).
    pub const LOCKER_CALL_SECONDS: &str = "quorum_lock_locker_call_seconds";
    /// Counter, by `locker`, `call` and `error` (`timeout`, `unavailable`,
    /// `quarantined`, `other`).
    pub const LOCKER_ERRORS: &str = "quorum_lock_locker_errors_total";
    /// Gauge, by `locker`: 1 while its last call was answered, 0 after a
    /// timeout or an unreachable node.
    pub const LOCKER_ONLINE: &str = "quorum_lock_locker_online";
    /// Gauge, by `locker`: 1 after it refused a grant because it restarted
    /// recently, 0 once it answers a grant request otherwise.
    pub const LOCKER_QUARANTINED: &str = "quorum_lock_locker_quarantined";
    /// Counter, by `outcome` (`confirmed`, `unconfirmed`, `not_found`,
    /// `late`): refresh rounds of held locks.
    pub const REFRESHES: &str = "quorum_lock_refreshes_total";
    /// Counter, by `cause` (`refresh_missed`, `not_found`): held locks lost.
    pub const LOCKS_LOST: &str = "quorum_lock_locks_lost_total";
    /// Gauge: locks held now by this process's `Dsync`s.
    pub const LOCKS_HELD: &str = "quorum_lock_locks_held";
    /// Counter: unlock calls sent again after one failed.
    pub const RELEASE_RETRIES: &str = "quorum_lock_release_retries_total";
    /// Counter: unlocks given up after a permanent error, or once the
    /// locker must have expired the entry by itself.
    pub const RELEASES_GIVEN_UP: &str = "quorum_lock_releases_given_up_total";
}

/// How an acquire ended, the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireOutcome {
    Granted,
    WouldBlock,
    Timeout,
    QuorumUnavailable,
    Cancelled,
    Failed,
}

impl AcquireOutcome {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    const ALL: [AcquireOutcome; 6] = [
        AcquireOutcome::Granted,
        AcquireOutcome::WouldBlock,
        AcquireOutcome::Timeout,
        AcquireOutcome::QuorumUnavailable,
        AcquireOutcome::Cancelled,
        AcquireOutcome::Failed,
    ];

    fn of<T>(result: &Result<T, Error>) -> Self {
        match result {
            Ok(_) => AcquireOutcome::Granted,
            Err(Error::WouldBlock) => AcquireOutcome::WouldBlock,
            Err(Error::Timeout) => AcquireOutcome::Timeout,
            Err(Error::QuorumUnavailable { .. } | Error::Quarantined { .. }) => {
                AcquireOutcome::QuorumUnavailable
            }
            Err(_) => AcquireOutcome::Failed,
        }
    }

    fn label(self) -> &'static str {
        match self {
            AcquireOutcome::Granted => "granted",
            AcquireOutcome::WouldBlock => "would_block",
            AcquireOutcome::Timeout => "timeout",
            AcquireOutcome::QuorumUnavailable => "quorum_unavailable",
            AcquireOutcome::Cancelled => "cancelled",
            AcquireOutcome::Failed => "error",
        }
    }
}

/// A locker call, the `call` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    Lock,
    RLock,
    Unlock,
    RUnlock,
    Refresh,
    ForceUnlock,
    LockWait,
    Fence,
}

impl CallKind {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    const ALL: [CallKind; 8] = [
        CallKind::Lock,
        CallKind::RLock,
        CallKind::Unlock,
        CallKind::RUnlock,
        CallKind::Refresh,
        CallKind::ForceUnlock,
        CallKind::LockWait,
        CallKind::Fence,
    ];

    /// The grant call for `mode`.
    pub(crate) fn grant(mode: LockMode) -> Self {
        match mode {
            LockMode::Write => CallKind::Lock,
            LockMode::Read => CallKind::RLock,
        }
    }

    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            CallKind::Lock => "lock",
            CallKind::RLock => "rlock",
            CallKind::Unlock => "unlock",
            CallKind::RUnlock => "runlock",
            CallKind::Refresh => "refresh",
            CallKind::ForceUnlock => "force_unlock",
            CallKind::LockWait => "lock_wait",
            CallKind::Fence => "fence",
        }
    }

    /// Whether an answer to it says the locker is out of quarantine.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn grants(self) -> bool {
        matches!(self, CallKind::Lock | CallKind::RLock | CallKind::LockWait)
    }
}

/// The outcome of a refresh round, the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefreshOutcome {
    Confirmed,
    Unconfirmed,
    NotFound,
    /// Confirmed, but after the holder's deadline had passed.
    Late,
}

/// Why a held lock was lost, the `cause` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LossCause {
    /// No quorum confirmed a refresh before the deadline.
    RefreshMissed,
    /// A quorum no longer holds it: expired, forced open, or restarted.
    NotFound,
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn mode_index(mode: LockMode) -> usize {
    match mode {
        LockMode::Write => 0,
        LockMode::Read => 1,
    }
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn mode_label(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Write => "write",
        LockMode::Read => "read",
    }
}

/// A moment to measure from; reads the clock only with the feature on.
#[derive(Clone, Copy)]
pub(crate) struct Stopwatch {
    #[cfg(feature = "metrics")]
    started: tokio::time::Instant,
}

impl Stopwatch {
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn start() -> Self {
        Stopwatch {
            #[cfg(feature = "metrics")]
            started: tokio::time::Instant::now(),
        }
    }

    #[cfg(feature = "metrics")]
    fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// One acquire being measured. Finished with its result; dropped
/// unfinished (the caller dropped the future), it counts as cancelled.
pub(crate) struct AcquireRecord<'a> {
    #[cfg(feature = "metrics")]
    telemetry: &'a Telemetry,
    #[cfg(feature = "metrics")]
    mode: LockMode,
    #[cfg(feature = "metrics")]
    watch: Stopwatch,
    #[cfg(feature = "metrics")]
    done: bool,
    #[cfg(not(feature = "metrics"))]
    _telemetry: std::marker::PhantomData<&'a Telemetry>,
}

impl AcquireRecord<'_> {
    /// Counts one more round or wait.
    #[inline]
    pub(crate) fn round(&self) {
        #[cfg(feature = "metrics")]
        self.telemetry.rounds[mode_index(self.mode)].increment(1);
    }

    /// Records how the acquire ended.
    #[inline]
    pub(crate) fn finish<T>(mut self, result: &Result<T, Error>) {
        self.record(AcquireOutcome::of(result));
    }

    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn record(&mut self, outcome: AcquireOutcome) {
        #[cfg(feature = "metrics")]
        if !self.done {
            self.done = true;
            // `ALL` lists the variants in declaration order, so the
            // discriminant is the index of the outcome's handle.
            if let Some(h) = self.telemetry.acquire[mode_index(self.mode)].get(outcome as usize) {
                h.record(self.watch.seconds());
            }
        }
    }
}

impl Drop for AcquireRecord<'_> {
    fn drop(&mut self) {
        self.record(AcquireOutcome::Cancelled);
    }
}

#[cfg(not(feature = "metrics"))]
pub(crate) use self::off::Telemetry;
#[cfg(feature = "metrics")]
pub(crate) use self::on::Telemetry;

/// The recording build.
#[cfg(feature = "metrics")]
mod on {
    use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
    use std::time::Duration;

    use tokio::time::Instant;

    use ::metrics::{
        counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
        Gauge, Histogram, Unit,
    };

    use super::{
        mode_label, names, AcquireOutcome, AcquireRecord, CallKind, LossCause, RefreshOutcome,
        Stopwatch,
    };
    use crate::{Error, LockMode};

    /// Which of the two gauges' values a locker last had, to write a gauge
    /// only when it changes: the write is the costly part when many tasks
    /// share it.
    const UNKNOWN: u8 = 2;

    /// At most one call per locker and call kind is timed in this span.
    ///
    /// Timing every call costs more than the rest of the metrics together
    /// at tens of thousands of locks a second: each sample is a write to a
    /// histogram shared by every thread, and the recorder folds each one
    /// later. Below a thousand calls a second per locker and kind, which
    /// is most services, every call is still timed. Which call is timed
    /// depends on when it starts, not on how long it takes, so the
    /// histogram's quantiles stay those of all calls; its `_count` is the
    /// number of timed calls.
    pub(crate) const CALL_SAMPLE_INTERVAL: Duration = Duration::from_millis(1);

    struct CallHandles {
        seconds: Histogram,
        /// When the next call may be timed, in ns after `Telemetry::epoch`.
        next_timed: AtomicU64,
        timeout: Counter,
        unavailable: Counter,
        quarantined: Counter,
        other: Counter,
    }

    struct LockerHandles {
        calls: Vec<CallHandles>,
        online: Gauge,
        online_now: AtomicU8,
        quarantined: Gauge,
        quarantined_now: AtomicU8,
    }

    impl LockerHandles {
        fn set(gauge: &Gauge, now: &AtomicU8, on: bool) {
            let value = u8::from(on);
            if now.load(Ordering::Relaxed) != value {
                now.store(value, Ordering::Relaxed);
                gauge.set(f64::from(value));
            }
        }
    }

    /// The handles of one `Dsync`.
    pub(crate) struct Telemetry {
        /// What `CallHandles::next_timed` counts from.
        epoch: Instant,
        pub(super) acquire: [Vec<Histogram>; 2],
        pub(super) rounds: [Counter; 2],
        lockers: Vec<LockerHandles>,
        refreshes: [Counter; 4],
        lost: [Counter; 2],
        held: Gauge,
        release_retries: Counter,
        releases_given_up: Counter,
    }

    fn describe() {
        describe_histogram!(
            names::ACQUIRE_SECONDS,
            Unit::Seconds,
            "How long acquires took, by mode and outcome"
        );
        describe_counter!(
            names::ACQUIRE_ROUNDS,
            "Rounds and waits started by acquires, by mode"
        );
        describe_histogram!(
            names::LOCKER_CALL_SECONDS,
            Unit::Seconds,
            "Latency of locker calls that waited for their answer, by locker and call; at most one call per locker and call a millisecond is timed"
        );
        describe_counter!(
            names::LOCKER_ERRORS,
            "Failed locker calls, by locker, call and error"
        );
        describe_gauge!(
            names::LOCKER_ONLINE,
            "1 while the locker's last call was answered, 0 after a timeout or an unreachable node"
        );
        describe_gauge!(
            names::LOCKER_QUARANTINED,
            "1 after the locker refused a grant because it restarted recently"
        );
        describe_counter!(names::REFRESHES, "Refresh rounds of held locks, by outcome");
        describe_counter!(names::LOCKS_LOST, "Held locks lost, by cause");
        describe_gauge!(names::LOCKS_HELD, "Locks held now");
        describe_counter!(
            names::RELEASE_RETRIES,
            "Unlock calls sent again after one failed"
        );
        describe_counter!(
            names::RELEASES_GIVEN_UP,
            "Unlocks given up; the entry stays until the locker expires it"
        );
    }

    impl Telemetry {
        pub(crate) fn new(endpoints: impl Iterator<Item = String>) -> Self {
            describe();
            let modes = [LockMode::Write, LockMode::Read];
            let acquire = modes.map(|mode| {
                AcquireOutcome::ALL
                    .iter()
                    .map(|o| {
                        histogram!(names::ACQUIRE_SECONDS, "mode" => mode_label(mode), "outcome" => o.label())
                    })
                    .collect()
            });
            let rounds =
                modes.map(|mode| counter!(names::ACQUIRE_ROUNDS, "mode" => mode_label(mode)));
            let lockers = endpoints
                .map(|endpoint| {
                    let calls = CallKind::ALL
                        .iter()
                        .map(|kind| {
                            let error = |e: &'static str| {
                                counter!(names::LOCKER_ERRORS, "locker" => endpoint.clone(), "call" => kind.label(), "error" => e)
                            };
                            CallHandles {
                                seconds: histogram!(names::LOCKER_CALL_SECONDS, "locker" => endpoint.clone(), "call" => kind.label()),
                                next_timed: AtomicU64::new(0),
                                timeout: error("timeout"),
                                unavailable: error("unavailable"),
                                quarantined: error("quarantined"),
                                other: error("other"),
                            }
                        })
                        .collect();
                    LockerHandles {
                        calls,
                        online: gauge!(names::LOCKER_ONLINE, "locker" => endpoint.clone()),
                        online_now: AtomicU8::new(UNKNOWN),
                        quarantined: gauge!(names::LOCKER_QUARANTINED, "locker" => endpoint.clone()),
                        quarantined_now: AtomicU8::new(UNKNOWN),
                    }
                })
                .collect();
            let refreshes = ["confirmed", "unconfirmed", "not_found", "late"]
                .map(|o| counter!(names::REFRESHES, "outcome" => o));
            let lost =
                ["refresh_missed", "not_found"].map(|c| counter!(names::LOCKS_LOST, "cause" => c));
            Telemetry {
                epoch: Instant::now(),
                acquire,
                rounds,
                lockers,
                refreshes,
                lost,
                held: gauge!(names::LOCKS_HELD),
                release_retries: counter!(names::RELEASE_RETRIES),
                releases_given_up: counter!(names::RELEASES_GIVEN_UP),
            }
        }

        #[inline]
        pub(crate) fn acquire(&self, mode: LockMode) -> AcquireRecord<'_> {
            AcquireRecord {
                telemetry: self,
                mode,
                watch: Stopwatch::start(),
                done: false,
            }
        }

        /// A stopwatch for a call to locker `index` that has to wait, unless
        /// another call of that locker and kind was timed less than
        /// [`CALL_SAMPLE_INTERVAL`] ago.
        #[inline]
        pub(crate) fn call_stopwatch(&self, index: usize, kind: CallKind) -> Option<Stopwatch> {
            let call = self.lockers.get(index)?.calls.get(kind as usize)?;
            let now = Instant::now();
            let at = u64::try_from(now.saturating_duration_since(self.epoch).as_nanos())
                .unwrap_or(u64::MAX);
            let next = call.next_timed.load(Ordering::Relaxed);
            if at < next {
                return None;
            }
            let interval = u64::try_from(CALL_SAMPLE_INTERVAL.as_nanos()).unwrap_or(u64::MAX);
            // Of calls starting together, the one that moves the mark is timed.
            call.next_timed
                .compare_exchange(
                    next,
                    at.saturating_add(interval),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .ok()?;
            Some(Stopwatch { started: now })
        }

        /// Records a finished locker call; `waited` is `None` for a call
        /// that was not timed (answered on its first poll, or not sampled).
        #[inline]
        pub(crate) fn locker_call<T>(
            &self,
            index: usize,
            kind: CallKind,
            waited: Option<Stopwatch>,
            result: &Result<T, Error>,
        ) {
            let Some(locker) = self.lockers.get(index) else {
                return;
            };
            // Registered in the order of `CallKind::ALL`, the declaration
            // order: the discriminant is the index.
            let Some(call) = locker.calls.get(kind as usize) else {
                return;
            };
            if let Some(watch) = waited {
                call.seconds.record(watch.seconds());
            }
            match result {
                Ok(_) => {
                    LockerHandles::set(&locker.online, &locker.online_now, true);
                    if kind.grants() {
                        LockerHandles::set(&locker.quarantined, &locker.quarantined_now, false);
                    }
                }
                Err(err) if err.is_quarantine() => {
                    call.quarantined.increment(1);
                    LockerHandles::set(&locker.online, &locker.online_now, true);
                    LockerHandles::set(&locker.quarantined, &locker.quarantined_now, true);
                }
                Err(Error::LockerTimeout { .. }) => {
                    call.timeout.increment(1);
                    LockerHandles::set(&locker.online, &locker.online_now, false);
                }
                Err(Error::LockerUnavailable { .. }) => {
                    call.unavailable.increment(1);
                    LockerHandles::set(&locker.online, &locker.online_now, false);
                }
                Err(_) => call.other.increment(1),
            }
        }

        #[inline]
        pub(crate) fn refreshed(&self, outcome: RefreshOutcome) {
            let i = match outcome {
                RefreshOutcome::Confirmed => 0,
                RefreshOutcome::Unconfirmed => 1,
                RefreshOutcome::NotFound => 2,
                RefreshOutcome::Late => 3,
            };
            self.refreshes[i].increment(1);
        }

        #[inline]
        pub(crate) fn lost(&self, cause: LossCause) {
            let i = match cause {
                LossCause::RefreshMissed => 0,
                LossCause::NotFound => 1,
            };
            self.lost[i].increment(1);
        }

        #[inline]
        pub(crate) fn held(&self, delta: i8) {
            if delta >= 0 {
                self.held.increment(f64::from(delta));
            } else {
                self.held.decrement(f64::from(-delta));
            }
        }

        #[inline]
        pub(crate) fn release_retried(&self, calls: usize) {
            self.release_retries.increment(calls as u64);
        }

        #[inline]
        pub(crate) fn release_given_up(&self, unlocks: usize) {
            self.releases_given_up.increment(unlocks as u64);
        }
    }
}

/// The build without the feature: nothing to hold, nothing to do.
#[cfg(not(feature = "metrics"))]
mod off {
    use super::{AcquireRecord, CallKind, LossCause, RefreshOutcome, Stopwatch};
    use crate::{Error, LockMode};

    pub(crate) struct Telemetry;

    impl Telemetry {
        #[inline(always)]
        pub(crate) fn new(_endpoints: impl Iterator<Item = String>) -> Self {
            Telemetry
        }

        #[inline(always)]
        pub(crate) fn acquire(&self, _mode: LockMode) -> AcquireRecord<'_> {
            AcquireRecord {
                _telemetry: std::marker::PhantomData,
            }
        }

        #[inline(always)]
        pub(crate) fn call_stopwatch(&self, _index: usize, _kind: CallKind) -> Option<Stopwatch> {
            None
        }

        #[inline(always)]
        pub(crate) fn locker_call<T>(
            &self,
            _index: usize,
            _kind: CallKind,
            _waited: Option<Stopwatch>,
            _result: &Result<T, Error>,
        ) {
        }

        #[inline(always)]
        pub(crate) fn refreshed(&self, _outcome: RefreshOutcome) {}

        #[inline(always)]
        pub(crate) fn lost(&self, _cause: LossCause) {}

        #[inline(always)]
        pub(crate) fn held(&self, _delta: i8) {}

        #[inline(always)]
        pub(crate) fn release_retried(&self, _calls: usize) {}

        #[inline(always)]
        pub(crate) fn release_given_up(&self, _unlocks: usize) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Handles are looked up by discriminant, so `ALL` must list the
    /// variants in declaration order.
    #[test]
    fn all_lists_variants_in_declaration_order() {
        for (i, kind) in CallKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?}");
        }
        for (i, outcome) in AcquireOutcome::ALL.iter().enumerate() {
            assert_eq!(*outcome as usize, i, "{outcome:?}");
        }
    }

    /// Waiting calls are timed at most once per interval for each locker
    /// and call kind, and every locker and kind has its own interval.
    #[cfg(feature = "metrics")]
    #[tokio::test(start_paused = true)]
    async fn waiting_calls_are_timed_once_per_interval_per_locker_and_kind() {
        use self::on::CALL_SAMPLE_INTERVAL;
        let telemetry = Telemetry::new(["a".to_owned(), "b".to_owned()].into_iter());
        let timed = |index, kind| telemetry.call_stopwatch(index, kind).is_some();
        assert!(timed(0, CallKind::Lock), "the first call is timed");
        assert!(!timed(0, CallKind::Lock), "a second one at once is not");
        assert!(timed(1, CallKind::Lock), "another locker has its own");
        assert!(timed(0, CallKind::Unlock), "another kind has its own");
        tokio::time::advance(CALL_SAMPLE_INTERVAL / 2).await;
        assert!(!timed(0, CallKind::Lock), "still within the interval");
        tokio::time::advance(CALL_SAMPLE_INTERVAL / 2).await;
        assert!(timed(0, CallKind::Lock), "timed again once it has passed");
        assert!(
            telemetry.call_stopwatch(7, CallKind::Lock).is_none(),
            "no such locker"
        );
    }

    #[test]
    fn names_are_cut_and_counted() {
        let long = "x".repeat(100);
        let names: Vec<String> = vec!["a".into(), long, "c".into(), "d".into(), "e".into()];
        let shown = Names(&names).to_string();
        assert_eq!(shown, format!("a,{}…,c (+2 more)", "x".repeat(64)));
        let multibyte = vec!["é".repeat(40)];
        assert_eq!(
            Names(&multibyte).to_string(),
            format!("{}…", "é".repeat(32))
        );
    }
}
