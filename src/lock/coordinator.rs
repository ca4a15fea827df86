//! What every lock of one `Dsync` shares: the lockers, the settings, the
//! backoff jitter and the queues of unlocks waiting to be retried.
//!
//! This module sits below every other part of the coordinator (`mutex`,
//! `round`, `guard`, `keeper`, `refresh`, `release`), so that data flows one
//! way: each of those uses only what sits below it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::rngs::SmallRng;
use tokio::time::Instant;

use crate::lock::telemetry::Telemetry;
pub(crate) use crate::lock::unlock_queue::{PendingUnlock, QueueState, UnlockQueue};
use crate::quorum::clock::Clock;
use crate::{Error, Lease, NetLocker, RetryPolicy, Timeouts, Waiting};

/// The most failures kept standing per locker for
/// `Coordinator::failed_since`. Only failures not over, and not outdone by
/// another in both when their call was asked and when they speak from,
/// are kept, so this many stand only when as many calls failed in an
/// order that makes each one news, with no answer between them.
const KEPT_FAILURES: usize = 64;

/// The shortest wait between background retries.
pub(crate) const MIN_BACKGROUND_WAIT: Duration = Duration::from_millis(10);

/// The least time a locker that has answered before may leave a call
/// unanswered and still count as answering. Twice its latest answer alone
/// is a few hundred microseconds on loopback, which one busy scheduler
/// tick crosses: a held lock would then read as out of reach at the very
/// moment a re-check and a deadline meet.
pub(crate) const LEAST_PATIENCE: Duration = Duration::from_millis(100);

/// The shared core of a `Dsync`.
pub(crate) struct Coordinator {
    pub(crate) lockers: Box<[Arc<dyn NetLocker>]>,
    pub(crate) owner: Arc<str>,
    pub(crate) timeouts: Timeouts,
    pub(crate) retry: RetryPolicy,
    pub(crate) lease: Lease,
    pub(crate) waiting: Waiting,
    /// One queue per locker, in the order of `lockers`.
    pub(crate) unlock_retries: Box<[UnlockQueue]>,
    /// What it records through the `metrics` facade (nothing without the
    /// feature).
    pub(crate) telemetry: Telemetry,
    /// Per locker, the latest call that failed and why: what a wait that
    /// ends without the lock reports (see `wait_status`). Written only when
    /// a call fails, so answered calls pay nothing for it.
    failures: Box<[Mutex<Option<FailureNote>>]>,
    /// Per locker, its latest refusal for quarantine: it stands beside a
    /// later failure of another kind (a connection refused for a moment),
    /// which may end sooner.
    quarantines: Box<[Mutex<Option<FailureNote>>]>,
    /// Per locker, the failures that may still count against it by the
    /// calls asked since some moment (see `failed_since`): none over, and
    /// none that another of them outdoes in both when its call was asked
    /// and when it speaks from ([`FailureNote::evidence`]); at most
    /// [`KEPT_FAILURES`].
    standing: Box<[Mutex<Vec<FailureNote>>]>,
    /// Per locker, how long its latest answered call took, in nanoseconds
    /// plus one (0: none answered yet): a wait tells a locker that is slow
    /// to answer its latest call from one that is out of reach by it. One
    /// relaxed store per answered call.
    answer_times: Box<[AtomicU64]>,
    /// Per locker, how many calls it answered on their first poll: with
    /// the latest answer to a call that waited (`call_records`), tells
    /// whether a locker answered since a failure. One relaxed add per such
    /// call.
    answers_at_once: Box<[AtomicU64]>,
    /// Per locker, the number of the latest call asked of it ([`CallSeq`]):
    /// one relaxed add per call.
    call_seqs: Box<[AtomicU64]>,
    /// Per locker, the number of the latest-asked call it answered that a
    /// locker in quarantine refuses (all but releases and refreshes); 0:
    /// none. A number above a quarantine refusal's says that quarantine is
    /// over: the call was asked after the refused one, so the answer is
    /// news of the locker since the refusal, whenever it arrived (a grant
    /// given before a restart and delivered after it is not). One relaxed
    /// max per such call.
    grant_answered_seq: Box<[AtomicU64]>,
    /// Per locker, when a call that had to wait was last answered, and the
    /// calls on their way to it. Touched only by calls not answered on
    /// their first poll, off the in-process path.
    call_records: Box<[Mutex<CallRecord>]>,
    /// The releases handed to the runtime that have not finished yet; see
    /// [`Outstanding`].
    pub(crate) outstanding: Arc<Outstanding>,
    /// Where background work started outside any runtime runs.
    pub(crate) own_runtime: Arc<crate::lock::own_runtime::OwnRuntime>,
    rng: Mutex<SmallRng>,
    /// The clock the coordinator measures leases, deadlines and waits on:
    /// tokio's, unless a test gave it another (`DsyncBuilder::clock`).
    /// Every instant kept in the coordinator's state is on this clock.
    pub(crate) clock: Clock,
}

/// Why a call to one locker failed, and when.
#[derive(Clone, Debug)]
pub(crate) struct FailureNote {
    pub(crate) at: Instant,
    /// When the failed call was asked: a locker that answered a request
    /// sent later was heard from since, whenever this was noted.
    pub(crate) asked: Instant,
    pub(crate) error: Error,
    /// How many calls the locker had answered on their first poll when
    /// this one failed: a later count says it answered since.
    answers_before: u64,
    /// The number of the failed call ([`CallSeq`]): answers to calls asked
    /// after it end a refusal for quarantine.
    seq: CallSeq,
}

impl FailureNote {
    /// From when the failure speaks of the locker: a call that timed out
    /// says it was silent since it was asked, so an answer to a later call
    /// outweighs it, whenever the timeout was noted; any other failure (a
    /// connection refused, a refusal) speaks of the moment it was noted.
    pub(crate) fn evidence(&self) -> Instant {
        match self.error {
            Error::LockerTimeout { .. } => self.asked,
            _ => self.at,
        }
    }
}

/// The order in which calls were asked of one locker: numbered from 1 as
/// they are asked (an answer given at once is numbered as it is given).
pub(crate) type CallSeq = u64;

/// What a wait reads of one locker's calls: see `Coordinator::call_times`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallTimes {
    /// When a call that had to wait was last answered.
    pub(crate) answered_at: Option<Instant>,
    /// When the earliest call still on its way to the locker was asked,
    /// whatever it answered since: it has left that call unanswered for
    /// so long. A call the caller stopped waiting for (a refresh round, a
    /// fencing draw, an acquire round or a leader read that a quorum
    /// settled), or that failed (its failure is noted), is not on its way.
    pub(crate) silent_since: Option<Instant>,
}

/// See `Coordinator::call_records`.
#[derive(Debug, Default)]
struct CallRecord {
    answered_at: Option<Instant>,
    /// The calls on their way, by when they were asked (and a number, to
    /// tell apart calls asked at one instant), each with whether its
    /// caller still waits for it (`None`: a caller that waits to the end).
    /// Bounded by the calls to the locker at once.
    open: BTreeMap<(Instant, u64), Option<Waited>>,
    next: u64,
}

/// Whether the caller of a fan-out still waits for its calls: cleared
/// when a quorum settled it and its stragglers run on in the background
/// (see `fanout::CallSet`). A straggler is no call the locker "left
/// unanswered": nobody waits for it.
pub(crate) type Waited = Arc<AtomicBool>;

impl CallRecord {
    /// The earliest call (asked at `from` or later, when given) that its
    /// caller still waits for.
    fn earliest_waited(&self, from: Option<Instant>) -> Option<Instant> {
        let waited = |(key, waited): (&(Instant, u64), &Option<Waited>)| {
            waited
                .as_ref()
                .is_none_or(|w| w.load(Ordering::Relaxed))
                .then_some(key.0)
        };
        match from {
            Some(from) => self.open.range((from, 0)..).find_map(waited),
            None => self.open.iter().find_map(waited),
        }
    }
}

/// A call to one locker that was not answered on its first poll, on its
/// way until this is dropped: answered, failed, or given up by its caller.
pub(crate) struct AskedCall<'a> {
    coord: &'a Coordinator,
    index: usize,
    asked: Instant,
    key: (Instant, u64),
    waited: Option<Waited>,
    /// How many calls the locker had answered at once when this was asked.
    answers_at_ask: u64,
}

impl AskedCall<'_> {
    /// When the call was asked.
    pub(crate) fn asked(&self) -> Instant {
        self.asked
    }

    /// How many calls the locker had answered at once when this was asked.
    pub(crate) fn answers_at_ask(&self) -> u64 {
        self.answers_at_ask
    }

    /// Whether its caller stopped waiting for it (a straggler of a settled
    /// fan-out).
    pub(crate) fn is_straggler(&self) -> bool {
        self.waited
            .as_ref()
            .is_some_and(|w| !w.load(Ordering::Relaxed))
    }

    /// The locker answered, at `at`.
    pub(crate) fn answered(self, at: Instant) {
        self.coord
            .note_answer(self.index, at.saturating_duration_since(self.asked));
        if let Some(slot) = self.coord.call_records.get(self.index) {
            let mut record = slot.lock().unwrap_or_else(PoisonError::into_inner);
            record.answered_at = record.answered_at.max(Some(at));
        }
    }
}

impl AskedCall<'_> {
    /// The locker refused for quarantine, at `at`: an answer as far as how
    /// long its answers take, though a failure for everything else.
    pub(crate) fn refused(self, at: Instant) {
        self.coord
            .note_answer(self.index, at.saturating_duration_since(self.asked));
    }
}

impl Drop for AskedCall<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.coord.call_records.get(self.index) {
            slot.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .open
                .remove(&self.key);
        }
    }
}

impl Coordinator {
    pub(crate) fn new(
        lockers: Vec<Arc<dyn NetLocker>>,
        owner: Arc<str>,
        timeouts: Timeouts,
        retry: RetryPolicy,
        lease: Lease,
        waiting: Waiting,
        rng: SmallRng,
    ) -> Self {
        let lockers_len = lockers.len();
        let unlock_retries = lockers.iter().map(|_| UnlockQueue::default()).collect();
        let telemetry = Telemetry::new(lockers.iter().map(|l| l.endpoint()));
        Coordinator {
            lockers: lockers.into_boxed_slice(),
            owner,
            timeouts,
            retry,
            lease,
            waiting,
            failures: (0..lockers_len).map(|_| Mutex::new(None)).collect(),
            quarantines: (0..lockers_len).map(|_| Mutex::new(None)).collect(),
            standing: (0..lockers_len).map(|_| Mutex::default()).collect(),
            answer_times: (0..lockers_len).map(|_| AtomicU64::new(0)).collect(),
            answers_at_once: (0..lockers_len).map(|_| AtomicU64::new(0)).collect(),
            call_seqs: (0..lockers_len).map(|_| AtomicU64::new(0)).collect(),
            grant_answered_seq: (0..lockers_len).map(|_| AtomicU64::new(0)).collect(),
            call_records: (0..lockers_len)
                .map(|_| Mutex::new(CallRecord::default()))
                .collect(),
            outstanding: Arc::default(),
            own_runtime: Arc::default(),
            unlock_retries,
            telemetry,
            rng: Mutex::new(rng),
            clock: Clock::Tokio,
        }
    }

    /// Numbers a call asked of locker `index` now: see [`CallSeq`].
    pub(crate) fn next_call_seq(&self, index: usize) -> CallSeq {
        self.call_seqs
            .get(index)
            .map_or(0, |seq| seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1))
    }

    /// Remembers that a call to locker `index`, asked at `asked` (its
    /// number `seq`) when it had answered `answers_at_ask` calls at once,
    /// failed with `error`.
    pub(crate) fn note_failure(
        &self,
        index: usize,
        error: &Error,
        (asked, seq): (Instant, CallSeq),
        answers_at_ask: u64,
    ) {
        if let Some(slot) = self.failures.get(index) {
            let note = FailureNote {
                at: self.clock.now(),
                asked,
                error: error.clone(),
                // A timeout speaks from when its call was asked: answers
                // given at once since then come after it.
                answers_before: match error {
                    Error::LockerTimeout { .. } => answers_at_ask,
                    _ => self.answered_at_once(index),
                },
                seq,
            };
            if let Some(standing) = self.standing.get(index) {
                let mut standing = standing.lock().unwrap_or_else(PoisonError::into_inner);
                // A failure over stays over (answers do not unhappen; a
                // quarantine's time does not come back); one asked no later
                // and speaking from no later than another says nothing more
                // for any moment asked about.
                standing.retain(|kept| {
                    let outdone = kept.asked <= note.asked && kept.evidence() <= note.evidence();
                    !(outdone || self.is_over(index, kept))
                });
                let outdone = standing
                    .iter()
                    .any(|kept| kept.asked >= note.asked && kept.evidence() >= note.evidence());
                if !outdone {
                    if standing.len() >= KEPT_FAILURES {
                        // The one asked earliest answers the fewest
                        // questions ("since when?").
                        if let Some(earliest) = standing
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, kept)| kept.asked)
                            .map(|(at, _)| at)
                        {
                            standing.swap_remove(earliest);
                        }
                    }
                    standing.push(note.clone());
                }
            }
            if error.is_quarantine()
                && let Some(quarantine) = self.quarantines.get(index)
            {
                *quarantine.lock().unwrap_or_else(PoisonError::into_inner) = Some(note.clone());
            }
            // An older call that timed out late is no news beside a
            // failure seen since: the latest evidence stands.
            let mut latest = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if latest
                .as_ref()
                .is_none_or(|kept| kept.evidence() <= note.evidence())
            {
                *latest = Some(note);
            }
        }
    }

    /// Remembers that locker `index` answered a call (refusals included)
    /// that took `took`.
    pub(crate) fn note_answer(&self, index: usize, took: Duration) {
        if let Some(slot) = self.answer_times.get(index) {
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX - 1);
            slot.store(nanos.saturating_add(1), Ordering::Relaxed);
        }
    }

    /// A call to locker `index`, asked at `at`, was not answered on its
    /// first poll: it is on its way until the returned record is dropped,
    /// and waited for while `waited` (when given) is set.
    pub(crate) fn note_asked(
        &self,
        index: usize,
        at: Instant,
        waited: Option<Waited>,
    ) -> AskedCall<'_> {
        let mut key = (at, 0);
        if let Some(slot) = self.call_records.get(index) {
            let mut record = slot.lock().unwrap_or_else(PoisonError::into_inner);
            key.1 = record.next;
            record.next = record.next.wrapping_add(1);
            record.open.insert(key, waited.clone());
        }
        AskedCall {
            coord: self,
            index,
            asked: at,
            key,
            waited,
            answers_at_ask: self.answered_at_once(index),
        }
    }

    /// See [`CallTimes`].
    pub(crate) fn call_times(&self, index: usize) -> CallTimes {
        let Some(slot) = self.call_records.get(index) else {
            return CallTimes::default();
        };
        let record = slot.lock().unwrap_or_else(PoisonError::into_inner);
        CallTimes {
            answered_at: record.answered_at,
            silent_since: record.earliest_waited(None),
        }
    }

    /// When the earliest call still on its way to locker `index` that was
    /// asked at `at` or later was asked.
    pub(crate) fn open_since(&self, index: usize, at: Instant) -> Option<Instant> {
        let slot = self.call_records.get(index)?;
        let record = slot.lock().unwrap_or_else(PoisonError::into_inner);
        record.earliest_waited(Some(at))
    }

    /// Locker `index` answered a call on its first poll.
    pub(crate) fn note_answered_at_once(&self, index: usize) {
        self.note_answer(index, Duration::ZERO);
        if let Some(count) = self.answers_at_once.get(index) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Locker `index` answered call number `seq`, one that a locker in
    /// quarantine refuses (see `fanout::answer_ends_quarantine`).
    pub(crate) fn note_grant_answer(&self, index: usize, seq: CallSeq) {
        if let Some(latest) = self.grant_answered_seq.get(index) {
            latest.fetch_max(seq, Ordering::Relaxed);
        }
    }

    /// Whether locker `index` answered a call asked after call `seq` that
    /// a locker in quarantine refuses.
    fn grant_answered_after(&self, index: usize, seq: CallSeq) -> bool {
        self.grant_answered_seq
            .get(index)
            .is_some_and(|latest| latest.load(Ordering::Relaxed) > seq)
    }

    pub(crate) fn answered_at_once(&self, index: usize) -> u64 {
        self.answers_at_once
            .get(index)
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// Whether locker `index` answered a call after `note`, its latest
    /// failure: then that failure is over.
    pub(crate) fn answered_after(&self, index: usize, note: &FailureNote) -> bool {
        self.answered_at_once(index) != note.answers_before
            || self
                .call_times(index)
                .answered_at
                .is_some_and(|answered| answered > note.evidence())
    }

    /// Whether locker `index` had answered any call before `note`.
    pub(crate) fn answered_before(&self, index: usize, note: &FailureNote) -> bool {
        note.answers_before > 0
            || self
                .call_times(index)
                .answered_at
                .is_some_and(|answered| answered <= note.at)
    }

    /// Whether leaving a call unanswered for `silent` puts locker `index`
    /// out of reach: for twice as long as its latest answer took, and at
    /// least [`LEAST_PATIENCE`], or at once when it never answered.
    pub(crate) fn too_long(&self, index: usize, silent: Duration) -> bool {
        self.answer_time(index)
            .is_none_or(|took| silent >= took.saturating_mul(2).max(LEAST_PATIENCE))
    }

    /// Whether what locker `index` said to a request sent at `since` (a
    /// refusal, a place in line) is no news of it any more: a call of this
    /// client found it failing since, with no answer after, or it has left
    /// a call asked since unanswered too long. Calls asked before `since`
    /// do not count: it answered a later request.
    pub(crate) fn gone_since(&self, index: usize, since: Instant, now: Instant) -> bool {
        self.failed_since(index, since, false).is_some()
            || self
                .open_since(index, since)
                .is_some_and(|asked| self.too_long(index, now.saturating_duration_since(asked)))
    }

    /// The latest failure of locker `index` that is not over: one that no
    /// answer followed, or a refusal for quarantine that neither the time
    /// it said was left nor an answer to a call a locker in quarantine
    /// refuses (a grant, a refusal as held elsewhere, a term, a value, a
    /// leader read) has ended. A locker in quarantine answers releases and
    /// refreshes while it refuses grants, so those say nothing of it.
    ///
    /// A refusal for quarantine followed by a failure of another kind (a
    /// connection refused for a moment) stands again once that one is
    /// over, for as long as it would have stood alone.
    pub(crate) fn current_failure(&self, index: usize) -> Option<FailureNote> {
        let latest = self.failure(index)?;
        if !self.is_over(index, &latest) {
            return Some(latest);
        }
        let quarantine = self
            .quarantines
            .get(index)?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        (!self.is_over(index, &quarantine)).then_some(quarantine)
    }

    /// A failure of locker `index` of a call asked at `since` or later that
    /// is not over (no answer followed it, of any kind when `answers_only`,
    /// else as [`current_failure`](Self::current_failure) judges), if any:
    /// the latest noted, or else the latest noted of those kept standing.
    pub(crate) fn failed_since(
        &self,
        index: usize,
        since: Instant,
        answers_only: bool,
    ) -> Option<FailureNote> {
        let standing = |note: &FailureNote| {
            note.asked >= since
                && if answers_only {
                    !self.answered_after(index, note)
                } else {
                    !self.is_over(index, note)
                }
        };
        let latest = if answers_only {
            self.unanswered_failure(index)
        } else {
            self.current_failure(index)
        };
        latest.filter(|note| note.asked >= since).or_else(|| {
            self.standing
                .get(index)?
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|note| standing(note))
                .max_by_key(|note| note.at)
                .cloned()
        })
    }

    /// The latest failure of locker `index` that no answer of any kind
    /// followed, refusals for quarantine too: whether it answers what it
    /// is asked now, not whether it grants.
    pub(crate) fn unanswered_failure(&self, index: usize) -> Option<FailureNote> {
        self.failure(index)
            .filter(|note| !self.answered_after(index, note))
    }

    /// Whether `note`, a failure of locker `index`, is over: see
    /// [`current_failure`](Self::current_failure).
    fn is_over(&self, index: usize, note: &FailureNote) -> bool {
        if note.error.is_quarantine() {
            self.grant_answered_after(index, note.seq)
                // A refusal that did not say for how long stands until a
                // grant answer ends it.
                || note
                    .error
                    .quarantine_time_left()
                    .is_some_and(|left| self.clock.now().saturating_duration_since(note.at) >= left)
        } else {
            self.answered_after(index, note)
        }
    }

    /// How long the latest call locker `index` answered took; `None`
    /// before it answered any.
    pub(crate) fn answer_time(&self, index: usize) -> Option<Duration> {
        let stored = self.answer_times.get(index)?.load(Ordering::Relaxed);
        stored.checked_sub(1).map(Duration::from_nanos)
    }

    /// The latest failure of a call to locker `index`, if any failed.
    pub(crate) fn failure(&self, index: usize) -> Option<FailureNote> {
        self.failures
            .get(index)
            .and_then(|slot| slot.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// The error of a one-round operation that began at `since`, of the
    /// `quorum` it needs got `answered` answers and still awaits
    /// `answering` (calls on their way when it stopped), with `refused`
    /// the refusals for quarantine among its failures (locker index, the
    /// error, when it came): `Error::Quarantined` when those lockers are
    /// what keeps the quorum (with the time until enough of them are out
    /// of it, counted to now), as a wait says; else `QuorumUnavailable`,
    /// naming the lockers that did not answer (`answered_by` says which
    /// did).
    pub(crate) fn short_of_quorum(
        &self,
        since: Instant,
        (answered, answering, quorum): (usize, usize, usize),
        refused: &[(usize, Error, Instant)],
        answered_by: impl Fn(usize) -> bool,
    ) -> Error {
        let lockers = self.lockers.len();
        let reachable = answered.saturating_add(answering);
        if !refused.is_empty() && reachable.saturating_add(refused.len()) >= quorum {
            let now = self.clock.now();
            let needed = quorum.saturating_sub(reachable).max(1);
            let mut left: Vec<Option<Duration>> = refused
                .iter()
                .map(|(_, e, at)| {
                    e.quarantine_time_left()
                        .map(|left| left.saturating_sub(now.saturating_duration_since(*at)))
                })
                .collect();
            left.sort_by_key(|l| l.unwrap_or(Duration::MAX));
            return Error::Quarantined {
                quarantined: refused
                    .iter()
                    .map(|(index, _, _)| self.lockers[*index].endpoint())
                    .collect(),
                left: left.get(needed - 1).copied().flatten(),
                quorum,
                lockers,
            };
        }
        Error::QuorumUnavailable {
            answered,
            quorum,
            lockers,
            unreachable: self.unreachable_since(since, answered_by),
        }
    }

    /// The lockers that did not answer the operation (`answered` says
    /// which did) whose latest call failed at or after `since`, each with
    /// why: for an operation that began then and found too few answers.
    pub(crate) fn unreachable_since(
        &self,
        since: Instant,
        answered: impl Fn(usize) -> bool,
    ) -> Vec<crate::Unreachable> {
        (0..self.lockers.len())
            .filter(|&index| !answered(index))
            .filter_map(|index| {
                let note = self.failure(index).filter(|note| note.at >= since)?;
                Some(crate::Unreachable {
                    endpoint: self.lockers[index].endpoint(),
                    reason: note.error.locker_reason(),
                })
            })
            .collect()
    }

    /// How often a waiter in line repeats its request.
    pub(crate) fn wait_recheck(&self) -> Duration {
        self.timeouts.wait_recheck_for(&self.lease)
    }

    /// How long a locker keeps a waiter's place without hearing from it.
    pub(crate) fn place_ttl(&self) -> Duration {
        self.wait_recheck().saturating_mul(3)
    }

    /// A jittered wait before retry number `attempt`.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        self.retry.delay(attempt, &mut *rng)
    }

    /// Refuses to count on locker `index` when it keeps entries for less
    /// than the lease's validity: a holder would trust its lock after that
    /// locker freed it. `build()` checks the validities known then; this
    /// catches a server that announced a shorter one later (it was offline
    /// at build time, or restarted with another `--validity`).
    pub(crate) fn honours_lease(&self, index: usize) -> Result<(), Error> {
        let locker = &self.lockers[index];
        match locker.validity() {
            Some(validity) if !self.lease_honoured(index) => Err(Error::InvalidArgument(format!(
                "lease: validity ({:?}) must not exceed the validity of locker {} ({validity:?}), \
                 or a holder would trust its lock after that locker had freed it; \
                 lower Lease::validity or raise the server's validity",
                self.lease.validity,
                locker.endpoint()
            ))),
            _ => Ok(()),
        }
    }

    /// Whether locker `index` keeps entries at least the lease's validity
    /// (see [`honours_lease`](Self::honours_lease)); a grant of one that
    /// does not is not counted on.
    pub(crate) fn lease_honoured(&self, index: usize) -> bool {
        self.lockers[index]
            .validity()
            .is_none_or(|validity| validity >= self.lease.validity)
    }

    /// The wait before a background retry (a refresh or an unlock): the
    /// backoff, but never less than [`MIN_BACKGROUND_WAIT`]. A caller who
    /// sets a zero `RetryPolicy` chooses to poll for their own acquire; a
    /// background task must not spin against a locker that keeps failing.
    pub(crate) fn background_backoff(&self, attempt: u32) -> Duration {
        self.backoff(attempt).max(MIN_BACKGROUND_WAIT)
    }
}

/// Counts the releases that run in the background (an abandoned wait's
/// grants, a dropped guard, a lost lock's entries; unlocks queued for a
/// retry are counted by their queues), so that a process about to exit can
/// wait for them: see `Dsync::finish_releases`.
#[derive(Default)]
pub(crate) struct Outstanding {
    count: std::sync::atomic::AtomicUsize,
    done: tokio::sync::Notify,
}

impl Outstanding {
    /// Counts one release until the returned token is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> ReleaseToken {
        self.count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        ReleaseToken(self.clone())
    }

    /// Releases still running.
    pub(crate) fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until no release is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so that a release that
            // ends in between still wakes this waiter.
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One counted background release; see [`Outstanding`].
pub(crate) struct ReleaseToken(Arc<Outstanding>);

impl Drop for ReleaseToken {
    fn drop(&mut self) {
        if self
            .0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            self.0.done.notify_waiters();
        }
    }
}
