//! Where waits report their rounds, so that a wait can say why it waits
//! ([`WaitBoard`], for `DRWMutex::waiting`) and an operation made of
//! several locks can say why it gave up ([`give_up_after`], for a
//! semaphore's acquire or a campaign with a deadline).
//!
//! Invariants:
//! - an operation's locks that wait at the same time (a semaphore's count
//!   and its check, its slots) each report on a [`Lane`] of their own; the
//!   grant of one never hides why another still waits or why it failed;
//! - a lane is gone when its wait is: a wait dropped unfinished (the
//!   slots not needed after enough were granted) says nothing afterwards;
//! - an operation that gives up reads why before its waits are dropped.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use smallvec::SmallVec;
use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::error::{seconds, Unreachable};
use crate::lock::acquisition::Acquisition;
use crate::lock::wait_status::{WaitReason, WaitStatus};
use crate::quorum::clock::Clock;
use crate::quorum::Answer;
use crate::Error;

tokio::task_local! {
    /// The watch of an operation made of several waits and rounds (a
    /// semaphore's acquire, an election's campaign) run with a deadline:
    /// the locks it takes on the way report to it (see [`outer`]).
    static OPERATION: Arc<Watched>;
}

/// The watch of the operation the current task runs with a deadline, if
/// any; the waits and rounds of its locks report to it too.
pub(crate) fn outer() -> Option<WaitWatch> {
    OPERATION
        .try_with(|watched| WaitWatch {
            watched: watched.clone(),
        })
        .ok()
}

/// Awaits `operation` for at most `timeout`. One that gives up fails with
/// the error that says why, from what its own waits and rounds reported
/// (not another operation's on the same handle): `Error::Timeout` only when
/// the lock was held elsewhere, the last retryable error of a one-round
/// step (a fencing token, a count check) when that is what it retried.
///
/// An operation that has every lock it waits for calls [`calls_only`]: from
/// then on it only makes calls to the lockers (an election's term and
/// proclamation, a semaphore's release of its line), so running out of
/// time there means they did not answer, not that a holder was in the way.
pub(crate) async fn give_up_after<T>(
    clock: &Clock,
    timeout: Duration,
    operation: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    WaitWatch::new(clock)
        .run(clock, Some(timeout), operation)
        .await
}

/// The current task's operation has every lock it waits for: see
/// [`give_up_after`].
pub(crate) fn calls_only() {
    if let Some(watch) = outer() {
        let mut rounds = watch.rounds();
        rounds.calls_only = true;
        // Nothing waits for a grant any more.
        rounds.ended.clear();
    }
}

/// The current task's operation tries a step again: the failure noted
/// for the step before is no reason any more, whatever the new try finds.
pub(crate) fn retrying() {
    if let Some(watch) = outer() {
        watch.rounds().failed = None;
    }
}

/// Notes `err`, retried by the current task's operation, on its watch.
pub(crate) fn note_retry(err: &Error) {
    if let Some(watch) = outer() {
        watch.note(err);
    }
}

/// Where the acquires of one lock handle (and its clones) say why they
/// wait, for [`DRWMutex::waiting`](crate::DRWMutex::waiting): the latest
/// wait that still runs reports.
#[derive(Default)]
pub(crate) struct WaitBoard {
    /// The waits posted, by when they began (oldest first), each with its
    /// place in that order; those that ended are pruned.
    waits: Mutex<Vec<(u64, Weak<Watched>)>>,
    /// The waits still in their first poll (not posted yet) that have
    /// begun a round, by place: a reader on another thread sees them while
    /// that poll runs (a locker's call may take a while to leave), without
    /// a watch made for every lock. Kept inline for two at once, so that no
    /// lock allocates for it.
    first_poll: Mutex<SmallVec<[FirstPoll; 2]>>,
    /// The place of the next wait to begin.
    begun: AtomicU64,
}

/// A wait in its first poll, as the board shows it.
struct FirstPoll {
    place: u64,
    began: Instant,
    round: Weak<Acquisition>,
}

impl WaitBoard {
    /// A new wait begins: it reports until it ends, or until a later one
    /// begins and while that one runs.
    pub(crate) fn begin(&self, clock: &Clock) -> WaitWatch {
        let watch = WaitWatch::new(clock);
        self.post(self.begun.fetch_add(1, Ordering::Relaxed), &watch.watched);
        watch
    }

    /// A new wait of one lock begins, as with [`begin`](Self::begin), but
    /// its watch is made and posted only when the wait first waits (see
    /// [`BoardWatch`]).
    pub(crate) fn begin_lazily<'a>(&'a self, clock: &'a Clock) -> BoardWatch<'a> {
        BoardWatch {
            board: self,
            clock,
            place: self.begun.fetch_add(1, Ordering::Relaxed),
            began: clock.now(),
            state: Mutex::new(Posting::Unposted {
                current: None,
                previous: None,
            }),
        }
    }

    /// Posts `watched`, the watch of the wait that took `place`, among
    /// the others by when they began.
    fn post(&self, place: u64, watched: &Arc<Watched>) {
        let mut waits = self.waits.lock().unwrap_or_else(PoisonError::into_inner);
        // Bounded by the waits that run at once through this handle.
        waits.retain(|(_, wait)| wait.strong_count() > 0);
        let at = waits.partition_point(|&(other, _)| other < place);
        waits.insert(at, (place, Arc::downgrade(watched)));
    }

    /// The status of the latest wait that still runs and has begun a
    /// round: one that has not yet (parked before its first, say) knows
    /// nothing, and an older wait still waiting speaks for the handle.
    pub(crate) fn status(&self) -> Option<WaitStatus> {
        /// A wait still running, as the board holds it.
        enum Running {
            Posted(Arc<Watched>),
            FirstPoll(Instant, Arc<Acquisition>),
        }
        let mut running: Vec<(u64, Running)> = self
            .waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(place, wait)| Some((*place, Running::Posted(wait.upgrade()?))))
            .collect();
        running.extend(
            self.first_polls()
                .iter()
                .filter_map(|f| Some((f.place, Running::FirstPoll(f.began, f.round.upgrade()?)))),
        );
        // The latest first.
        running.sort_by_key(|(place, _)| std::cmp::Reverse(*place));
        running.iter().find_map(|(_, wait)| match wait {
            Running::Posted(wait) => wait.status(),
            Running::FirstPoll(began, round) => Some(WaitStatus::of(
                &round.coord,
                round.args.quorum,
                (&round.answers(), &round.answered_since()),
                (*began, round.started),
                &[],
            )),
        })
    }

    fn first_polls(&self) -> MutexGuard<'_, SmallVec<[FirstPoll; 2]>> {
        self.first_poll
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The wait at `place`, in its first poll, began the round `round`.
    fn in_first_poll(&self, place: u64, began: Instant, round: &Arc<Acquisition>) {
        let round = Arc::downgrade(round);
        let mut polls = self.first_polls();
        match polls.iter_mut().find(|f| f.place == place) {
            Some(f) => f.round = round,
            None => polls.push(FirstPoll {
                place,
                began,
                round,
            }),
        }
    }

    /// The wait at `place` was posted, or ended in its first poll.
    fn first_poll_over(&self, place: u64) {
        self.first_polls().retain(|f| f.place != place);
    }
}

/// The watch of one wait of a lock handle, posted on its board only once
/// the wait waits (its acquire returned `Pending` once): one granted or
/// refused in its first poll, as lockers that answer at once decide it,
/// costs no allocation. Until then it keeps the rounds it was told of, and
/// posts them with it; meanwhile the board's list of first polls shows its
/// latest round to a reader on another thread.
pub(crate) struct BoardWatch<'a> {
    board: &'a WaitBoard,
    clock: &'a Clock,
    /// Its place among the waits of the board, by when it began.
    place: u64,
    began: Instant,
    state: Mutex<Posting>,
}

enum Posting {
    /// Not posted yet: the latest round and the one before it.
    Unposted {
        current: Option<Arc<Acquisition>>,
        previous: Option<Arc<Acquisition>>,
    },
    Posted(WaitWatch),
}

impl Drop for BoardWatch<'_> {
    fn drop(&mut self) {
        let posting = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if matches!(
            posting,
            Posting::Unposted {
                current: Some(_),
                ..
            }
        ) {
            self.board.first_poll_over(self.place);
        }
    }
}

impl BoardWatch<'_> {
    fn state(&self) -> MutexGuard<'_, Posting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The wait started a round (a new uid) with `state`.
    pub(crate) fn track(&self, state: &Arc<Acquisition>) {
        match &mut *self.state() {
            Posting::Unposted { current, previous } => {
                if let Some(before) = current.replace(state.clone()) {
                    *previous = Some(before);
                }
                self.board.in_first_poll(self.place, self.began, state);
            }
            Posting::Posted(watch) => watch.track(state),
        }
    }

    /// Makes the watch with the rounds told so far and posts it, once.
    fn posted(&self) -> WaitWatch {
        let mut posting = self.state();
        let (current, previous) = match &mut *posting {
            Posting::Posted(watch) => {
                return WaitWatch {
                    watched: watch.watched.clone(),
                }
            }
            Posting::Unposted { current, previous } => (current.take(), previous.take()),
        };
        let mut rounds = Rounds::default();
        if let Some(current) = current {
            rounds.lanes.push(LaneRounds {
                id: ALONE,
                current,
                previous,
            });
        }
        let watched = Arc::new(Watched {
            began: self.began,
            clock: self.clock.clone(),
            rounds: Mutex::new(rounds),
        });
        self.board.post(self.place, &watched);
        self.board.first_poll_over(self.place);
        *posting = Posting::Posted(WaitWatch {
            watched: watched.clone(),
        });
        WaitWatch { watched }
    }

    /// Runs `wait`, posting the watch the first time it waits.
    pub(crate) async fn watching<T>(&self, wait: impl Future<Output = T>) -> T {
        let mut wait = std::pin::pin!(wait);
        std::future::poll_fn(|cx| {
            let polled = wait.as_mut().poll(cx);
            if polled.is_pending() && matches!(*self.state(), Posting::Unposted { .. }) {
                self.posted();
            }
            polled
        })
        .await
    }

    /// The error for a wait that gave up now.
    pub(crate) fn gave_up(&self) -> Error {
        self.posted().gave_up()
    }
}

/// One wait's rounds, or one operation's, as far as its status needs them.
/// Dropped with the wait, which takes it off the board.
pub(crate) struct WaitWatch {
    watched: Arc<Watched>,
}

/// The lane a wait of one lock reports on when it waits alone: a lock
/// handle's own wait.
const ALONE: u64 = 0;

impl WaitWatch {
    fn new(clock: &Clock) -> WaitWatch {
        WaitWatch {
            watched: Arc::new(Watched {
                began: clock.now(),
                clock: clock.clone(),
                rounds: Mutex::new(Rounds::default()),
            }),
        }
    }

    fn rounds(&self) -> MutexGuard<'_, Rounds> {
        self.watched.rounds()
    }

    /// The wait started a round (a new uid) with `state`.
    pub(crate) fn track(&self, state: &Arc<Acquisition>) {
        self.rounds().track(ALONE, state);
    }

    /// Runs `operation` watched by this watch: the locks it takes report
    /// to it. With a `timeout`, gives up as [`give_up_after`] says.
    pub(crate) async fn run<T>(
        self,
        clock: &Clock,
        timeout: Option<Duration>,
        operation: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let scoped = std::pin::pin!(OPERATION.scope(self.watched.clone(), operation));
        let Some(timeout) = timeout else {
            return scoped.await;
        };
        tokio::select! {
            biased;
            result = scoped => result,
            // Why it gave up is read while its waits still stand: dropping
            // them takes their lanes off the watch.
            () = clock.sleep(timeout) => Err(match self.gave_up() {
                Error::Timeout => self.after_grant().unwrap_or(Error::Timeout),
                err => err,
            }),
        }
    }

    /// A lane for one lock of the operation, which may wait beside others.
    pub(crate) fn lane(&self) -> Lane {
        let now = self.watched.clock.now();
        let mut rounds = self.rounds();
        rounds.next_lane += 1;
        rounds.latest_lane_at = Some(now);
        Lane {
            watched: self.watched.clone(),
            id: rounds.next_lane,
        }
    }

    /// A step of the operation failed with `err` and will be tried again:
    /// if the operation gives up before anything else happens, that is why.
    pub(crate) fn note(&self, err: &Error) {
        let at = self.watched.clock.now();
        self.rounds().failed = Some((err.clone(), at));
    }

    /// What the wait knows now; `None` before its first round.
    pub(crate) fn status(&self) -> Option<WaitStatus> {
        self.watched.status()
    }

    /// The error for a wait that gave up now.
    pub(crate) fn gave_up(&self) -> Error {
        let failed = self.rounds().failed.clone();
        match failed {
            // A one-round refusal, given up on: held elsewhere.
            Some((Error::WouldBlock, _)) => Error::Timeout,
            // A refusal for quarantine a backoff ago may be over, or the
            // lockers it named gone meanwhile: what the wait's lockers say
            // now decides, as `waiting()` would say it; else the refusal,
            // its time left counted to now.
            Some((err @ Error::Quarantined { .. }, at)) => match self.status() {
                Some(status) => status.into_error(),
                // Refused in a call after its grant (a term, a
                // proclamation): how its lockers stand since the grant
                // decides, as for one that ran out of time in those calls.
                None if self.rounds().calls_only => {
                    self.judged_after_grant().unwrap_or_else(|| {
                        aged(err, self.watched.clock.now().saturating_duration_since(at))
                    })
                }
                // A quarantine that ended while the operation backed off
                // held nothing up at the end: the deadline came first.
                None => match aged(err, self.watched.clock.now().saturating_duration_since(at)) {
                    Error::Quarantined {
                        left: Some(left), ..
                    } if left.is_zero() => Error::Timeout,
                    err => err,
                },
            },
            // A call after the grant (a term, a proclamation) found too few
            // lockers, and the operation backed off: whether they answered
            // since decides, as for one that ran out of time in those calls.
            Some((err @ Error::QuorumUnavailable { .. }, _)) if self.rounds().calls_only => {
                self.judged_after_grant().unwrap_or(err)
            }
            Some((err, _)) => err,
            None => self.status().map_or(Error::Timeout, WaitStatus::into_error),
        }
    }

    /// An operation that got its lock and then ran out of time in the calls
    /// that follow (a term, a proclamation, a count check) waited for no
    /// holder. How its lockers stand decides, by the calls asked since the
    /// grant: one whose latest failure was of such a call, with no answer
    /// after it, or that has left one unanswered too long
    /// (`Coordinator::too_long`), is out
    /// of reach; one with a call on its way for less is still answering;
    /// any other answered what it was asked. Too few answered or
    /// answering: `QuorumUnavailable`, naming those out of reach. Else the
    /// deadline came first: `Timeout`.
    fn after_grant(&self) -> Option<Error> {
        if self.rounds().failed.is_some() {
            return None;
        }
        self.judged_after_grant()
    }

    /// How the lockers of an operation that got its lock stand by the calls
    /// asked since the grant, as [`after_grant`](Self::after_grant) says;
    /// `None` unless the operation has every lock it waits for.
    fn judged_after_grant(&self) -> Option<Error> {
        let rounds = self.rounds();
        if !rounds.calls_only || !rounds.lanes.is_empty() {
            return None;
        }
        let (state, at) = rounds.granted.clone()?;
        drop(rounds);
        let coord = &state.coord;
        let now = coord.clock.now();
        let mut unreachable = Vec::new();
        // Lockers that refused a call since the grant for quarantine (a
        // term draw, a proclamation): what keeps the quorum, if they are
        // enough to make it, as a wait would say.
        let mut refused = Vec::new();
        for (index, locker) in coord.lockers.iter().enumerate() {
            // Whether it answers what it is asked (a release, a term), not
            // whether it grants: a refusal for quarantine that an answer
            // followed is over here.
            // Only calls asked since the grant count, as for a locker that
            // queued a wait: an older call, failing or silent, is no news
            // of a locker that granted.
            // A refusal for quarantine stands as long as its time, whatever
            // answers came since (a release of this lock or another one):
            // the locker still refuses grants.
            let note = coord.failed_since(index, at, true).or_else(|| {
                coord
                    .failed_since(index, at, false)
                    .filter(|note| note.error.is_quarantine())
            });
            if let Some(note) = note {
                if note.error.is_quarantine() {
                    // A refusal whose time is up holds nothing up any
                    // more: the locker answered, and counts as one that
                    // answers.
                    let over = note
                        .error
                        .quarantine_time_left()
                        .is_some_and(|left| now.saturating_duration_since(note.at) >= left);
                    if !over {
                        refused.push((index, note.error, note.at));
                    }
                    continue;
                }
                unreachable.push(Unreachable {
                    endpoint: locker.endpoint(),
                    reason: note.error.locker_reason(),
                });
                continue;
            }
            let Some(since) = coord.open_since(index, at) else {
                continue;
            };
            let silent = now.saturating_duration_since(since);
            if coord.too_long(index, silent) {
                unreachable.push(Unreachable {
                    endpoint: locker.endpoint(),
                    reason: format!("no answer yet after {}", seconds(silent)),
                });
            }
        }
        let quorum = state.args.quorum;
        let answered = coord
            .lockers
            .len()
            .saturating_sub(unreachable.len() + refused.len());
        if answered >= quorum {
            return Some(Error::Timeout);
        }
        if !refused.is_empty() && answered + refused.len() >= quorum {
            let named: Vec<String> = unreachable.iter().map(|u| u.endpoint.clone()).collect();
            return Some(
                coord.short_of_quorum(at, (answered, 0, quorum), &refused, |i| {
                    !named.contains(&coord.lockers[i].endpoint())
                }),
            );
        }
        // Too few even with them: lockers whose refusal for quarantine
        // stands answered, as a wait counts them, and are not out of reach.
        Some(Error::QuorumUnavailable {
            answered: answered + refused.len(),
            quorum,
            lockers: coord.lockers.len(),
            unreachable,
        })
    }
}

/// One lock's waits within an operation (see [`WaitWatch::lane`]). Dropped
/// unfinished, it leaves the operation's status: a wait cancelled because
/// the operation no longer needs it is not why the operation waits.
pub(crate) struct Lane {
    watched: Arc<Watched>,
    id: u64,
}

impl Lane {
    /// The lock started a round (a new uid) with `state`.
    pub(crate) fn track(&self, state: &Arc<Acquisition>) {
        self.watched.rounds().track(self.id, state);
    }

    /// The lock's acquire ended with `result`: granted, or refused in a way
    /// the operation may retry (its reason if the operation gives up next).
    pub(crate) fn ended(&self, result: &Result<(Arc<Acquisition>, Handle), Error>) {
        let mut rounds = self.watched.rounds();
        let lane = rounds.take_lane(self.id);
        match result {
            // A grant ends only this lock's wait: a lock waiting beside it,
            // or one that failed beside it since the round began, still
            // says why the operation waits.
            Ok((state, _)) => {
                rounds.granted = Some((state.clone(), state.coord.clock.now()));
                // What an earlier attempt at this lock saw before it gave
                // up is over; another lock's is not.
                rounds
                    .ended
                    .retain(|(ended, _)| ended.current.args.resources != state.args.resources);
            }
            Err(err) if err.is_retryable() => {
                rounds.failed = Some((err.clone(), self.watched.clock.now()));
                // Beside what the operation's other locks that gave up in
                // the same attempt saw (a semaphore's count and its check),
                // in place of this lock's earlier attempt.
                if let Some(lane) = lane {
                    let now = self.watched.clock.now();
                    let since = rounds.latest_lane_at.unwrap_or(now);
                    let resources = lane.current.args.resources.clone();
                    rounds.ended.retain(|(ended, at)| {
                        *at >= since && ended.current.args.resources != resources
                    });
                    rounds.ended.push((lane, now));
                }
            }
            Err(_) => {}
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.watched.rounds().take_lane(self.id);
    }
}

struct Watched {
    began: Instant,
    /// The coordinator's clock, which `began` and `Rounds::failed` are on.
    clock: Clock,
    rounds: Mutex<Rounds>,
}

#[derive(Default)]
struct Rounds {
    /// The locks waiting now, each with its latest round. A lock's own
    /// wait has one, kept inline.
    lanes: SmallVec<[LaneRounds; 1]>,
    /// The locks that gave up unfinished in the latest attempt: what they
    /// saw stands for the operation while no waiting lock says more (see
    /// `Watched::status`).
    /// With when each gave up: only those that gave up since the latest
    /// lock began count (the locks of the latest attempt).
    ended: Vec<(LaneRounds, Instant)>,
    next_lane: u64,
    /// When the latest lock of the operation began waiting.
    latest_lane_at: Option<Instant>,
    /// The error of the latest step that failed and will be retried, when
    /// that came after the latest round began, and when it failed.
    failed: Option<(Error, Instant)>,
    /// The latest lock of the operation that was granted, and when.
    granted: Option<(Arc<Acquisition>, Instant)>,
    /// The operation said it has every lock it waits for.
    calls_only: bool,
}

#[derive(Clone)]
struct LaneRounds {
    id: u64,
    current: Arc<Acquisition>,
    /// This lock's round before: its answers stand in for lockers the
    /// current round has not heard from yet.
    previous: Option<Arc<Acquisition>>,
}

impl Rounds {
    fn track(&mut self, id: u64, state: &Arc<Acquisition>) {
        match self.lanes.iter_mut().find(|lane| lane.id == id) {
            Some(lane) => lane.previous = Some(std::mem::replace(&mut lane.current, state.clone())),
            None => self.lanes.push(LaneRounds {
                id,
                current: state.clone(),
                previous: None,
            }),
        }
        self.failed = None;
        self.calls_only = false;
    }

    fn take_lane(&mut self, id: u64) -> Option<LaneRounds> {
        let at = self.lanes.iter().position(|lane| lane.id == id)?;
        Some(self.lanes.swap_remove(at))
    }
}

impl Watched {
    fn rounds(&self) -> MutexGuard<'_, Rounds> {
        self.rounds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why the wait waits. Of several locks waiting at once, the one whose
    /// wait would last longest says why: too few lockers reachable for it
    /// (no quarantine ending helps), else lockers in quarantine, else held
    /// elsewhere. When none of those, the locks that gave up unfinished
    /// in the latest attempt say what they saw, chosen the same way, else
    /// the latest of them (between two attempts, or while the next one's
    /// answers are still coming); else the answers still coming, or grants
    /// waiting to be confirmed.
    fn status(&self) -> Option<WaitStatus> {
        let (lanes, ended) = {
            let rounds = self.rounds();
            (rounds.lanes.clone(), rounds.ended.clone())
        };
        let running: Vec<WaitStatus> = lanes.iter().map(|lane| self.status_of(lane)).collect();
        if let Some(pick) = longest(&running) {
            return running.into_iter().nth(pick);
        }
        // Of the locks that gave up in the latest attempt, the same way.
        let ended: Vec<WaitStatus> = ended.iter().map(|(lane, _)| self.status_of(lane)).collect();
        if let Some(pick) = longest(&ended).or_else(|| ended.len().checked_sub(1)) {
            return ended.into_iter().nth(pick);
        }
        running.into_iter().next()
    }

    fn status_of(&self, lane: &LaneRounds) -> WaitStatus {
        let mut answers = lane.current.answers();
        let mut since = lane.current.answered_since();
        if let Some(previous) = &lane.previous {
            // A refusal (or a place in line) of the round before stands in
            // for a locker this round has not heard from yet, unless that
            // locker has since been found failing or gone silent too long;
            // a grant of the round before does not, since a round that
            // failed gave it back.
            let coord = &lane.current.coord;
            let now = coord.clock.now();
            let answered = previous.answered_since();
            for (index, (answer, before)) in answers.iter_mut().zip(previous.answers()).enumerate()
            {
                let held = matches!(before, Some(Answer::Refused | Answer::Queued));
                let before_since = answered.get(index).copied().unwrap_or(previous.started);
                if answer.is_none() && held && !coord.gone_since(index, before_since, now) {
                    *answer = before;
                    if let Some(at) = since.get_mut(index) {
                        *at = before_since;
                    }
                }
            }
        }
        WaitStatus::of(
            &lane.current.coord,
            lane.current.args.quorum,
            (&answers, &since),
            (self.began, lane.current.started),
            &[],
        )
    }
}

/// `err`, noted `elapsed` ago, as it stands now: a refusal for quarantine
/// has that much less time left.
fn aged(err: Error, elapsed: Duration) -> Error {
    match err {
        Error::Quarantined {
            quarantined,
            left,
            quorum,
            lockers,
        } => Error::Quarantined {
            quarantined,
            left: left.map(|left| left.saturating_sub(elapsed)),
            quorum,
            lockers,
        },
        err => err,
    }
}

/// Of the statuses of locks waiting (or given up) at once, the one whose
/// wait would last longest: too few lockers reachable, else lockers in
/// quarantine, else held elsewhere; `None` when none says so.
fn longest(statuses: &[WaitStatus]) -> Option<usize> {
    let first = |wanted: fn(&WaitStatus) -> bool| statuses.iter().position(wanted);
    first(|s| s.reason() == WaitReason::NoQuorum)
        .or_else(|| first(|s| s.reason() == WaitReason::Quarantine))
        .or_else(|| first(|s| s.held_elsewhere > 0 && s.reason() == WaitReason::HeldElsewhere))
}
