//! One acquire attempt: a fresh uid sent to every locker at once, decided as
//! soon as a quorum grants or can no longer grant.
//!
//! Each round uses its own uid. Were retries to reuse one, the background
//! release of a failed round could arrive after the next round's grant on the
//! same locker and silently remove it, leaving the holder counting a grant
//! that no longer exists.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::lock::acquisition::{Acquisition, Target};
use crate::lock::coordinator::Coordinator;
use crate::lock::fanout::{answered_now, call_locker, poll_deadline, CallSet, Started};
use crate::lock::per_locker::PerLocker;
use crate::lock::release::{abandon, release_one, Owed};
use crate::lock::telemetry::CallKind;
use crate::lock::wait_status::{WaitReason, WaitStatus};
use crate::quorum::clock::after;
use crate::quorum::clock::Sleep;
use crate::quorum::{Answer, Tally, Verdict};
use crate::{Error, LockMode};

fn classify(result: &Result<bool, Error>) -> Answer {
    match result {
        Ok(true) => Answer::Granted,
        Ok(false) => Answer::Refused,
        Err(_) => Answer::Failed,
    }
}

/// The lock call to locker `index`, including its own bookkeeping. A locker
/// that answers at once is called here, and allocates nothing unless its
/// grant must be undone.
fn lock_call(
    state: Arc<Acquisition>,
    index: usize,
    deadline: Instant,
) -> Started<Result<bool, Error>> {
    let coord = &state.coord;
    if let Err(err) = coord.honours_lease(index) {
        // Nothing is sent, so there is nothing more to undo.
        state.record_unsent(index);
        return Started::Answered(Err(err));
    }
    let kind = CallKind::grant(state.mode);
    if let Some(now) = coord.lockers[index].immediate() {
        let result = answered_now(coord, index, kind, now.lock_now(&state.args, state.mode));
        return match settle(&state, index, &result) {
            None => Started::Answered(result),
            Some(target) => Started::Running(Box::pin(async move {
                release_one(&state, target).await;
                result
            })),
        };
    }
    // Owed from here: dropped in flight (its runtime shut down), the call
    // may still be applied, so its unlock is queued.
    let owed = Owed::new(&state, index);
    Started::Running(Box::pin(async move {
        let locker = &state.coord.lockers[index];
        let call = match state.mode {
            LockMode::Write => locker.lock(&state.args),
            LockMode::Read => locker.rlock(&state.args),
        };
        let result = call_locker(&state.coord, index, kind, call, deadline).await;
        // Recorded first: a release in between still sees the call. Its
        // undo counts as the call's: until it ends, a release watches this
        // locker (the undo may stall on a runtime that is no longer driven).
        let undo = settle(&state, index, &result);
        if let Some(target) = undo {
            release_one(&state, target).await;
        }
        owed.settled();
        result
    }))
}

/// Records the answer of locker `index` to a lock call. Returns the
/// release to make when the acquisition was released meanwhile and the
/// locker may hold the grant.
fn settle(state: &Acquisition, index: usize, result: &Result<bool, Error>) -> Option<Target> {
    if let Err(err) = result {
        let locker = state.coord.lockers[index].endpoint();
        tracing::debug!(uid = %state.args.uid, %locker, %err, "lock call failed");
        if !err.never_sent() {
            state.note_failed_send(index);
        }
    }
    let answer = classify(result);
    state.record(index, answer).then_some(Target {
        index,
        granted: answer == Answer::Granted,
    })
}

/// An acquire attempt in progress. Dropping it before it is granted, whether
/// because it failed or because the caller was cancelled, releases every
/// grant it got or will still get.
pub(crate) struct Round {
    state: Arc<Acquisition>,
    calls: CallSet<Result<bool, Error>>,
    handle: Handle,
    deadline: Instant,
    won: bool,
}

impl Round {
    pub(crate) fn start(
        coord: &Arc<Coordinator>,
        handle: &Handle,
        resources: &Arc<[String]>,
        source: &Arc<str>,
        mode: LockMode,
    ) -> Round {
        let n = coord.lockers.len();
        let state = Acquisition::begin(coord, resources, source, mode);
        let started = state.started;
        let deadline = after(started, coord.timeouts.acquire);
        let calls = (0..n).map(|i| lock_call(state.clone(), i, deadline));
        Round {
            calls: CallSet::uncounted(coord, calls),
            state,
            handle: handle.clone(),
            deadline,
            won: false,
        }
    }

    pub(crate) fn uid(&self) -> &str {
        &self.state.args.uid
    }

    /// What the round knows; a wait tracks it for its status.
    pub(crate) fn state(&self) -> &Arc<Acquisition> {
        &self.state
    }

    /// Waits until a quorum granted (`Ok`), or until the round can no longer
    /// succeed: [`Error::WouldBlock`] when enough lockers answered but some
    /// refused, or when the lock is held elsewhere as a wait judges it
    /// (lockers enough for a quorum answered or are still answering, and
    /// some refused); else [`Error::QuorumUnavailable`] or
    /// [`Error::Quarantined`] when too few answered in time, or then the
    /// latest permanent error a locker returned.
    pub(crate) async fn decide(&mut self) -> Result<(), Error> {
        let n = self.state.coord.lockers.len();
        let quorum = self.state.args.quorum;
        // Each locker's answer, and whether its call failed for good (a
        // certificate refused, say).
        let mut answers: PerLocker<Option<Answer>> = PerLocker::from_elem(None, n);
        let mut barred: PerLocker<bool> = PerLocker::from_elem(false, n);
        let mut permanent: Option<Error> = None;
        // Why calls failed, for the error of a round too few answered
        // (allocated only when one fails).
        let mut failed: Vec<(usize, Error)> = Vec::new();
        let mut timer: Option<Sleep> = None;
        let clock = &self.state.coord.clock;
        let calls = &mut self.calls;
        let deadline = self.deadline;
        let coord = &self.state.coord;
        // The tally of the answers so far, taken anew at each look: a
        // locker that no longer honours the lease (it announced a shorter
        // validity, even after it answered) is not counted on, whatever it
        // said: it counts as down (a grant it gave stays recorded, for the
        // release to undo).
        let tally_now = |answers: &[Option<Answer>]| {
            let mut tally = Tally::new(n, quorum);
            for (index, answer) in answers.iter().enumerate() {
                if let Some(answer) = answer {
                    tally.record(if coord.lease_honoured(index) {
                        *answer
                    } else {
                        Answer::Failed
                    });
                }
            }
            tally
        };
        let mut tally = Tally::new(n, quorum);
        let verdict = poll_fn(|cx| {
            // The calls' deadlines are kept by the round's own timer (see
            // `quorum::deadline`).
            let wake = calls.poll_all_waking_by(cx, clock, |index, result| {
                answers[index] = Some(classify(&result));
                match result {
                    Err(err) if !err.is_retryable() => {
                        barred[index] = true;
                        failed.push((index, err.clone()));
                        permanent = Some(err);
                    }
                    Err(err) => failed.push((index, err)),
                    Ok(_) => {}
                }
            });
            tally = tally_now(&answers);
            if let Some(verdict) = tally.verdict() {
                return Poll::Ready(verdict);
            }
            match poll_deadline(cx, clock, &mut timer, deadline, wake) {
                Poll::Ready(()) => Poll::Ready(tally.failure()),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        calls.settle();
        // A locker that fails for good, or no longer honours the lease, is
        // one locker down: the quorum's verdict comes first, and its error
        // is the round's only when the others cannot make a quorum, as a
        // wait judges.
        let left = (0..n)
            .filter(|&i| !barred[i] && coord.lease_honoured(i))
            .count();
        let permanent = permanent.or_else(|| (0..n).find_map(|i| coord.honours_lease(i).err()));
        match verdict {
            Verdict::Granted => Ok(()),
            Verdict::Conflict => Err(Error::WouldBlock),
            Verdict::Unavailable => {
                let state = &self.state;
                let answers = state.answers();
                let since = state.answered_since();
                let status = WaitStatus::of(
                    &state.coord,
                    quorum,
                    (&answers, &since),
                    (state.started, state.started),
                    &failed,
                );
                // Grants can no longer make the quorum, but the lock is
                // held elsewhere by the rule a wait applies (a quorum
                // answered or is still answering, some holding it): a
                // refusal, not an outage.
                if status.held_elsewhere > 0 && status.reason() == WaitReason::HeldElsewhere {
                    Err(Error::WouldBlock)
                } else if let Some(err) = permanent.filter(|_| left < quorum) {
                    Err(err)
                } else {
                    Err(status.unavailable())
                }
            }
        }
        .inspect(|()| tracing::trace!(granted = tally.granted(), "round granted"))
    }

    /// Keeps the grants: the caller now holds the lock. Calls still in flight
    /// finish in the background and record late grants, which the eventual
    /// release also undoes.
    pub(crate) fn into_held(mut self) -> Arc<Acquisition> {
        self.won = true;
        self.state.clone()
    }
}

impl Drop for Round {
    fn drop(&mut self) {
        if self.won {
            return;
        }
        abandon(&self.state, &self.handle);
    }
}
