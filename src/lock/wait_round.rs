//! One wait in line: a fresh uid with the wait's ticket, sent to every
//! locker, won when a quorum has granted it, whether in the replies or later
//! by pushes.
//!
//! Lockers with queues keep the waiter's place and grant it when its turn
//! comes; lockers without are asked again after a backoff. Every locker is
//! also asked again each `Timeouts::wait_recheck`, which renews the place
//! and any grant already made, and stands in for a push that was lost.
//!
//! A wait that holds some grants and learns that an older waiter is queued
//! behind one of them (a wound) gives every grant back and starts over with
//! a new uid and the same ticket, so it keeps its place in line. That is
//! what keeps two waits that each got part of the lockers from waiting for
//! each other forever: the younger one always steps back.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::lock::acquisition::{Acquisition, Target, Win};
use crate::lock::coordinator::Coordinator;
use crate::lock::fanout::{answered_now, call_locker, CallSet, Started};
use crate::lock::per_locker::PerLocker;
use crate::lock::release::{abandon, release_one, Owed};
use crate::lock::telemetry::CallKind;
use crate::locker::wait::{Ticket, WaitArgs, WaitReply, Wake};
use crate::quorum::clock::after;
use crate::quorum::clock::Sleep;
use crate::quorum::Answer;
use crate::{Error, LockMode};

/// The shortest pause before asking a locker without a queue again, so that
/// a zero `RetryPolicy` cannot make a wait spin without yielding.
const MIN_POLL: Duration = Duration::from_millis(1);

/// How a wait ended, when it did not win.
#[derive(Debug)]
pub(crate) enum WaitEnd {
    /// An older waiter needs one of this wait's grants: start over.
    Wounded,
    /// A locker without a queue refused and the others could not make a
    /// quorum: give everything back and start over after a backoff, as a
    /// polling round does. Nothing would make a waiter holding grants on
    /// such a locker step back for an older one, so holding on could
    /// deadlock.
    Refused,
    /// A quorum granted, but too long ago for the lease to trust: its
    /// replies were lost while its pushes came, or the task was stalled.
    /// Give everything back and start over with the same ticket, rather
    /// than hand out a guard that is lost already.
    Stale,
    /// A permanent error: give up.
    Failed(Error),
}

/// What one request of the wait learned.
struct Outcome {
    answer: Answer,
    permanent: Option<Error>,
}

/// The request of the wait to locker `index`. `sent` is a moment no later
/// than the request leaves (the round's start, for the first requests, saves
/// reading the clock); `renew` says the locker granted already. A locker
/// that answers at once is asked here, and allocates nothing unless its
/// grant or place must be undone.
fn wait_call(
    state: Arc<Acquisition>,
    index: usize,
    ticket: Ticket,
    sent: Option<Instant>,
    renew: bool,
) -> Started<Outcome> {
    let coord = &state.coord;
    let locker = &coord.lockers[index];
    let stamp = state.stamp();
    let sent = sent.unwrap_or_else(|| coord.clock.now());
    if let Err(err) = coord.honours_lease(index) {
        // Nothing is sent, so there is nothing more to undo; a grant or a
        // place this locker gave before stays recorded, for the release.
        state.record_unsent(index);
        return Started::Answered(Outcome {
            answer: Answer::Failed,
            permanent: Some(err),
        });
    }
    // A locker without queues need not count a repeated lock call as a
    // refresh, so its grant is renewed by refreshing it.
    let refresh = renew && !locker.queues();
    if let Some(now) = locker.immediate() {
        let result = if refresh {
            let held = now.refresh_now(&state.args, state.mode);
            answered_now(coord, index, CallKind::Refresh, held).map(granted_if)
        } else {
            let wait = wait_args(&state, index, ticket);
            let reply = now.lock_wait_now(&state.args, state.mode, &wait);
            answered_now(coord, index, CallKind::LockWait, reply)
        };
        let (outcome, undo) = settle(&state, index, result, sent, stamp);
        return match undo {
            None => Started::Answered(outcome),
            Some(target) => Started::Running(Box::pin(async move {
                release_one(&state, target).await;
                outcome
            })),
        };
    }
    // Owed from here: dropped in flight (its runtime shut down), the call
    // may still be applied, so its unlock is queued.
    let owed = Owed::new(&state, index);
    Started::Running(Box::pin(async move {
        let coord = &state.coord;
        let locker = &coord.lockers[index];
        let deadline = after(sent, coord.timeouts.acquire);
        let result = if refresh {
            let call = locker.refresh_mode(&state.args, state.mode);
            call_locker(coord, index, CallKind::Refresh, call, deadline)
                .await
                .map(granted_if)
        } else {
            let wait = wait_args(&state, index, ticket);
            let call = locker.lock_wait(&state.args, state.mode, &wait);
            call_locker(coord, index, CallKind::LockWait, call, deadline).await
        };
        // Recorded first: a release in between still sees the call. Its
        // undo counts as the call's (see `round::lock_call`).
        let (outcome, undo) = settle(&state, index, result, sent, stamp);
        if let Some(target) = undo {
            release_one(&state, target).await;
        }
        owed.settled();
        outcome
    }))
}

fn granted_if(held: bool) -> WaitReply {
    if held {
        WaitReply::Granted
    } else {
        WaitReply::Refused
    }
}

/// What a waiting request to locker `index` carries beside the lock's
/// arguments: the ticket, how long a place lasts, and where to push.
fn wait_args(state: &Arc<Acquisition>, index: usize, ticket: Ticket) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: state.coord.place_ttl(),
        wake: Some(Wake::new(state.clone(), index)),
    }
}

/// Records the reply of locker `index` to a waiting request sent at `sent`
/// with `stamp`. Returns the outcome, and the release to make when the wait
/// was given up meanwhile and the locker may hold a grant or a place.
fn settle(
    state: &Acquisition,
    index: usize,
    result: Result<WaitReply, Error>,
    sent: Instant,
    stamp: u64,
) -> (Outcome, Option<Target>) {
    let answer = match &result {
        Ok(WaitReply::Granted) => Answer::Granted,
        Ok(WaitReply::Queued) => Answer::Queued,
        Ok(WaitReply::Refused) => Answer::Refused,
        Err(err) => {
            let locker = state.coord.lockers[index].endpoint();
            tracing::debug!(uid = %state.args.uid, %locker, %err, "waiting lock call failed");
            if !err.never_sent() {
                state.note_failed_send(index);
            }
            Answer::Failed
        }
    };
    // A locker in quarantine restarted since it granted, if it did:
    // the grant may be gone, so it no longer counts.
    let forgot = matches!(&result, Err(err) if err.is_quarantine());
    let undo = state
        .record_reply(index, answer, sent, stamp, forgot)
        .then_some(Target {
            index,
            granted: answer == Answer::Granted,
        });
    let outcome = Outcome {
        answer,
        permanent: result.err().filter(|err| !err.is_retryable()),
    };
    (outcome, undo)
}

/// A wait in progress. Dropping it before it wins releases every grant and
/// place it has or will still get, as dropping a `Round` does.
pub(crate) struct WaitRound {
    state: Arc<Acquisition>,
    calls: CallSet<Outcome>,
    handle: Handle,
    ticket: Ticket,
    /// Per locker: when to ask again once its call has finished.
    due: PerLocker<Instant>,
    /// Failed retries so far, for the backoff.
    misses: u32,
    /// When lockers that refused or failed are asked again, all together
    /// so that a retry reaches every one of them, as a polling round does.
    retry_at: Option<Instant>,
    /// Per locker: whether its latest call failed with a permanent error
    /// (a certificate refused, a lease it cannot honour). Such a locker
    /// counts as down and is asked again like a failing one; the wait ends
    /// with that error only once too few lockers are left for a quorum.
    barred: PerLocker<bool>,
    /// The latest permanent error, for when the wait ends with one.
    barred_by: Option<Error>,
    won: bool,
}

impl WaitRound {
    pub(crate) fn start(
        coord: &Arc<Coordinator>,
        handle: &Handle,
        resources: &Arc<[String]>,
        source: &Arc<str>,
        mode: LockMode,
        ticket: Ticket,
    ) -> WaitRound {
        let n = coord.lockers.len();
        let state = Acquisition::begin(coord, resources, source, mode);
        let started = state.started;
        let calls = (0..n).map(|i| wait_call(state.clone(), i, ticket, Some(started), false));
        WaitRound {
            calls: CallSet::uncounted(coord, calls),
            state,
            handle: handle.clone(),
            ticket,
            due: PerLocker::from_elem(started, n),
            misses: 0,
            retry_at: None,
            barred: PerLocker::from_elem(false, n),
            barred_by: None,
            won: false,
        }
    }

    pub(crate) fn uid(&self) -> &str {
        &self.state.args.uid
    }

    /// What the wait knows; the acquire tracks it for its status.
    pub(crate) fn state(&self) -> &Arc<Acquisition> {
        &self.state
    }

    /// Waits until a quorum granted (`Ok`), an older waiter wounded this
    /// wait, or so many lockers returned a permanent error that the rest
    /// cannot make a quorum (the latest such error).
    pub(crate) async fn wait(&mut self) -> Result<(), WaitEnd> {
        let coord = self.state.coord.clone();
        let recheck = coord.wait_recheck();
        let n = coord.lockers.len();
        let mut timer: Option<Sleep> = None;
        let WaitRound {
            state,
            calls,
            ticket,
            due,
            misses,
            retry_at,
            barred,
            barred_by,
            ..
        } = self;
        let quorum = state.args.quorum;
        // Registering the waker costs a lock, so it is done only before
        // returning `Pending`, and followed by one more look at what a push
        // may have changed in between.
        let parked = |cx: &mut std::task::Context<'_>| {
            state.set_waker(cx.waker());
            state.try_win() == Win::Open && !state.is_wounded()
        };
        poll_fn(|cx| loop {
            let mut clock: Option<Instant> = None;
            let mut now = || *clock.get_or_insert_with(|| coord.clock.now());
            // The calls' deadlines are kept by the wait's own timer (see
            // `quorum::deadline`).
            let wake = calls.poll_all_waking_by(cx, &coord.clock, |index, outcome| {
                let now = now();
                due[index] = match outcome.answer {
                    Answer::Granted | Answer::Queued => after(now, recheck),
                    Answer::Refused | Answer::Failed => match *retry_at {
                        Some(at) if at > now => at,
                        _ => {
                            let pause = coord.backoff(*misses).max(MIN_POLL);
                            *misses = misses.saturating_add(1);
                            let at = after(now, pause);
                            *retry_at = Some(at);
                            at
                        }
                    },
                };
                barred[index] = outcome.permanent.is_some();
                if let Some(err) = outcome.permanent {
                    *barred_by = Some(err);
                }
            });
            // One locker refusing for good is one locker down, as in a
            // one-round try where a quorum's verdict comes first: the wait
            // goes on while the others can still make a quorum.
            let left = n - barred.iter().filter(|b| **b).count();
            if left < quorum
                && let Some(err) = barred_by.take()
            {
                return Poll::Ready(Err(WaitEnd::Failed(err)));
            }
            match state.try_win() {
                Win::Won => {
                    // A quorum granted: the calls still running are
                    // stragglers nobody waits for.
                    calls.settle();
                    return Poll::Ready(Ok(()));
                }
                Win::Stale => return Poll::Ready(Err(WaitEnd::Stale)),
                Win::Open => {}
            }
            if state.is_wounded() {
                return Poll::Ready(Err(WaitEnd::Wounded));
            }
            if calls.running() == 0 && state.refused_without_place() {
                return Poll::Ready(Err(WaitEnd::Refused));
            }
            let mut asked = false;
            for (index, due) in due.iter().enumerate() {
                if !calls.is_running(index) && *due <= now() {
                    let renew = state.answer(index) == Some(Answer::Granted);
                    calls.restart(index, wait_call(state.clone(), index, *ticket, None, renew));
                    asked = true;
                }
            }
            if asked {
                continue;
            }
            let next = (0..n)
                .filter(|&i| !calls.is_running(i))
                .map(|i| due[i])
                .chain(wake)
                .min();
            let Some(next) = next else {
                if parked(cx) {
                    return Poll::Pending;
                }
                continue;
            };
            let timer = timer.get_or_insert_with(|| coord.clock.sleep_until(next));
            if timer.deadline() != next {
                timer.reset(next);
            }
            if Pin::new(timer).poll(cx).is_pending() {
                if parked(cx) {
                    return Poll::Pending;
                }
                continue;
            }
        })
        .await
    }

    /// Keeps the grants: the caller now holds the lock.
    pub(crate) fn into_held(mut self) -> Arc<Acquisition> {
        self.won = true;
        self.state.clone()
    }
}

impl Drop for WaitRound {
    fn drop(&mut self) {
        if self.won {
            return;
        }
        abandon(&self.state, &self.handle);
    }
}
