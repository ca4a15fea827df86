//! Releasing an acquisition on its lockers: one locker, all of them in the
//! background, or all of them while the caller waits for a quorum to
//! confirm; the unlocks that fail go to the per-locker queues that `drain`
//! retries.
//!
//! # Why nothing is left on a reachable locker
//!
//! An unlock that fails is not dropped. It goes to its locker's queue and is
//! retried with backoff until it lands or until the locker must have expired
//! the entry by itself: the longer of the coordinator's and the locker's
//! validity after the release began (capped by `Timeouts::release_retry`).
//! Nothing can refresh the entry in between, since a released or failed
//! acquisition is never refreshed again, so when the retries stop the entry
//! is gone either way. This covers grants whose reply was lost: a lock call
//! that failed may have been applied, so it is unlocked like a grant.
//!
//! Unlocking is by uid and every round has its own uid, so a late unlock can
//! only ever remove the entry it was meant for. One queue per locker, drained
//! by one task per runtime, keeps a refusing or hung locker from facing one
//! retry loop per failed round (the unlock storm an earlier version caused):
//! it sees a probe per backoff step, and the batch once a probe lands.

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::Poll;

use tokio::runtime::Handle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::lock::acquisition::{Acquisition, Target};
use crate::lock::coordinator::{Coordinator, PendingUnlock};
use crate::lock::drain::{
    batch_deadline, first_send_give_up, give_up_at, owe_batch, owe_batch_until,
    queue_release_retry, queue_unlock, unlock_call, unlock_kind, unlock_may_land_later,
    STRAGGLER_GRACE,
};
use crate::lock::fanout::{answered_now, poll_deadline, CallSet, Started};
use crate::lock::per_locker::PerLocker;
use crate::lock::telemetry::Names;
use crate::quorum::clock::after;
use crate::Error;

/// Unlocks `target`. A locker that granted gets retries within the unlock
/// deadline, so that `unlock()` can count it; whatever still fails after that
/// (at once, for a locker whose lock call failed) goes to the locker's retry
/// queue. Returns whether the locker confirmed that it no longer holds the
/// entry: both "released" and "did not hold it" count, which is what makes
/// unlock idempotent.
///
/// The unlock is owed from the moment this is called: dropped before it
/// has run its course (never polled, or its task gone with its runtime),
/// it goes to the locker's retry queue instead ([`Owed`]).
pub(crate) fn release_one(
    state: &Arc<Acquisition>,
    target: Target,
) -> impl Future<Output = bool> + Send + 'static + use<> {
    let began = state.coord.clock.now();
    owed_release(state.clone(), target, began, None)
}

/// [`release_after`] under an [`Owed`] made now.
fn owed_release(
    state: Arc<Acquisition>,
    target: Target,
    began: Instant,
    failed: Option<Error>,
) -> impl Future<Output = bool> + Send + 'static {
    let owed = Owed {
        state: state.clone(),
        index: target.index,
        began,
        armed: true,
        call: false,
    };
    async move {
        let confirmed = release_after(&state, target, began, failed).await;
        owed.settled();
        confirmed
    }
}

/// An unlock owed to one locker until its release has run its course
/// (confirmed, queued for retry, or given up). Dropped before that, it
/// queues the unlock for retry: a release task that never ran or went with
/// its runtime leaves the unlock to the next drain task on any runtime, or
/// to `Dsync::finish_releases`, never to nobody. An unlock sent twice is
/// harmless: it is by uid.
pub(crate) struct Owed {
    state: Arc<Acquisition>,
    index: usize,
    began: Instant,
    armed: bool,
    /// A lock or wait call's, counted in flight until it settles
    /// (`Acquisition::call_sent`); else a release's.
    call: bool,
}

impl Owed {
    /// An unlock of `state` owed to locker `index` from now: also what a
    /// lock call in flight owes, since it may be applied (a straggler that
    /// its runtime's end drops before it can undo its grant).
    /// Counts the call in flight until [`settled`](Self::settled) or
    /// dropped.
    pub(crate) fn new(state: &Arc<Acquisition>, index: usize) -> Self {
        state.call_sent(index);
        Owed {
            state: state.clone(),
            index,
            began: state.coord.clock.now(),
            armed: true,
            call: true,
        }
    }

    /// Its call ran its course: nothing is owed any more. A lock or wait
    /// call's is settled after its answer is recorded, so that a release
    /// in between sees the call in flight.
    pub(crate) fn settled(mut self) {
        self.armed = false;
        if self.call {
            self.state.call_settled(self.index);
        }
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        // Only once the acquisition is released: a call of a lock that is
        // held (a won round's straggler, a won wait's re-check) may renew
        // what the lock counts on, and its release will target it.
        let released = self.armed && self.state.call_dropped(self.index, self.call);
        if released {
            // Drained on the current runtime, on its clock (a test's paused
            // one too); one shutting down hands its queue to the
            // coordinator's own runtime (see `Draining`'s drop).
            let coord = &self.state.coord;
            // A lost lock's entries are held for its holder.
            let holder = self.state.held_off(coord.clock.now());
            let pending = PendingUnlock {
                args: self.state.args.clone(),
                mode: self.state.mode,
                give_up: owed_give_up(coord, self.index, self.began, &holder),
                holder,
                tried: false,
                hurried: Default::default(),
            };
            // A release's own (not a lock call's, which may still be
            // applied): moot if a `finish_releases` call saw a copy land.
            if self.call {
                queue_unlock(coord, self.index, pending, Handle::try_current().ok());
            } else {
                queue_release_retry(coord, self.index, pending, Handle::try_current().ok());
            }
            if self.call {
                // Queued: the call is out no more, and a straggler watch's
                // record need not stand for it.
                self.state.dropped_call_queued(self.index);
            }
        }
    }
}

/// [`release_one`], begun at `began`, when `failed` is the error of a first
/// attempt already made.
async fn release_after(
    state: &Arc<Acquisition>,
    target: Target,
    began: Instant,
    mut failed: Option<Error>,
) -> bool {
    let coord = &state.coord;
    let locker = &coord.lockers[target.index];
    let give_up = give_up_at(coord, target.index, began);
    if failed.is_none()
        && let Some(held_off) = state.held_off(coord.clock.now())
    {
        // A lost lock whose holder may still work under it: queued, to
        // be sent once the margin has passed or the holder let go.
        let holder = Some(held_off);
        let pending = PendingUnlock {
            args: state.args.clone(),
            mode: state.mode,
            give_up: owed_give_up(coord, target.index, began, &holder),
            holder,
            tried: false,
            hurried: Default::default(),
        };
        queue_unlock(coord, target.index, pending, Handle::try_current().ok());
        return false;
    }
    let inline_until = after(began, coord.timeouts.unlock).min(give_up);
    let mut attempt = 0;
    loop {
        let err = match failed.take() {
            Some(err) => err,
            None => match unlock_call(coord, target.index, &state.args, state.mode).await {
                Ok(()) => {
                    unlock_landed(coord, target.index, &state.args.uid);
                    return true;
                }
                Err(err) => err,
            },
        };
        if !unlock_may_land_later(&err) {
            tracing::warn!(uid = %state.args.uid, locker = %locker.endpoint(), %err,
                "cannot release; the entry stays until the lock server expires it");
            coord.telemetry.release_given_up(1);
            return false;
        }
        let wait = coord.background_backoff(attempt);
        if !target.granted || after(coord.clock.now(), wait) >= inline_until {
            tracing::debug!(uid = %state.args.uid, locker = %locker.endpoint(), %err,
                "release failed; retrying in the background");
            retry_later(coord, target.index, state, give_up);
            return false;
        }
        tracing::debug!(uid = %state.args.uid, locker = %locker.endpoint(), %err, ?wait, "release failed, retrying");
        coord.clock.sleep(wait).await;
        coord.telemetry.release_retried(1);
        attempt += 1;
    }
}

/// Gives up an acquisition that did not win: unlocks, in the background
/// (on `handle`'s runtime if it is the current one, otherwise on the
/// coordinator's own: `own_runtime::background`), every locker that
/// granted it or may hold its grant or place.
pub(crate) fn abandon(state: &Arc<Acquisition>, handle: &Handle) {
    let plan = state.begin_release();
    watch_stragglers(state, &plan.in_flight, handle);
    if !plan.targets.is_empty() {
        tracing::debug!(uid = %state.args.uid, lockers = plan.targets.len(), "undoing partial grants and places");
        // Counted by its queues as a batch on its way, as a dropped
        // guard's release is: if the runtime it runs on is no longer
        // driven, another sends it once it is overdue.
        let owed = owe_batch(state, plan.targets.iter().map(|t| t.index));
        let release = release_all(state.clone(), plan.targets);
        // Where it was dropped if that is `handle`'s runtime, otherwise on
        // the coordinator's own: `handle`'s may be idle or gone.
        let handle = crate::lock::own_runtime::background(&state.coord.own_runtime, handle);
        handle.spawn(async move {
            release.await;
            drop(owed);
        });
    }
}

/// When retrying an owed unlock of locker `index`, owed since `since` and
/// queued now, stops mattering: counted from now, not from `since`, since
/// the lock may have been refreshed on that locker until now (a call
/// parked while its guard was held and refreshed); and for a lost lock's
/// unlock held for its `holder`, from when it falls due, so that the
/// retry window (`Timeouts::release_retry`) starts when it may be sent.
pub(crate) fn owed_give_up(
    coord: &Coordinator,
    index: usize,
    since: Instant,
    holder: &Option<crate::lock::loss::HeldOff>,
) -> Instant {
    let from = since.max(coord.clock.now());
    let from = holder
        .as_ref()
        .map_or(from, |held| from.max(held.not_before));
    // Owed, never sent: one send at least, whatever the retry window.
    first_send_give_up(coord, index, from)
}

/// Queues the unlock of `state` on locker `index`, begun at `began`, for
/// the retry queue to send until it lands or stops mattering.
pub(crate) fn retry_unlock(state: &Acquisition, index: usize, began: Instant) {
    let coord = &state.coord;
    retry_later(coord, index, state, give_up_at(coord, index, began));
}

/// Queues the unlock of `state` on locker `index`, and starts a drain task
/// on the current runtime unless that runtime has one already.
fn retry_later(coord: &Arc<Coordinator>, index: usize, state: &Acquisition, give_up: Instant) {
    queue_release_retry(
        coord,
        index,
        PendingUnlock {
            args: state.args.clone(),
            mode: state.mode,
            give_up,
            holder: None,
            tried: true,
            hurried: Default::default(),
        },
        Handle::try_current().ok(),
    );
}

/// Releases `targets` and waits for all of them; meant to be spawned. Each
/// unlock is owed from this call on (see [`release_one`]).
pub(crate) fn release_all(
    state: Arc<Acquisition>,
    targets: PerLocker<Target>,
) -> impl Future<Output = ()> + Send + 'static {
    let calls: Vec<_> = targets
        .into_iter()
        .map(|target| release_one(&state, target))
        .collect();
    async move {
        futures::future::join_all(calls).await;
    }
}

/// The release of `target`, made here when its locker answers at once: a
/// confirmed release then allocates nothing.
fn release_call(state: Arc<Acquisition>, target: Target) -> Started<bool> {
    let coord = &state.coord;
    let Some(now) = coord.lockers[target.index].immediate() else {
        return Started::Running(Box::pin(release_one(&state, target)));
    };
    let kind = unlock_kind(state.mode);
    let result = now.unlock_now(&state.args, state.mode);
    match answered_now(coord, target.index, kind, result) {
        Ok(_) => {
            unlock_landed(coord, target.index, &state.args.uid);
            Started::Answered(true)
        }
        Err(err) => {
            // Read only now, off the path of a confirmed release: the
            // call took no time to speak of, and the retries' give-up
            // (a validity after this) only moves as much later.
            let began = coord.clock.now();
            Started::Running(Box::pin(owed_release(state, target, began, Some(err))))
        }
    }
}

/// An unlock of `uid` landed on locker `index` (a release's, answered at
/// once or later, or a lost lock's forced clean-up): a copy of it that a
/// `finish_releases` call took back and saw fail is moot now. Every way an
/// unlock of a release lands goes through here.
pub(crate) fn unlock_landed(coord: &Coordinator, index: usize, uid: &Arc<str>) {
    coord.unlock_retries[index].lock().landed_if_copied(uid);
}

/// Releases the acquisition and waits, at most `timeouts.unlock`, until a
/// quorum of lockers is known not to hold it. Releases that still fail when
/// this returns are retried in the background.
///
/// Cancel safe: the release calls are handed to the runtime if this future is
/// dropped.
pub(crate) async fn release_confirmed(state: Arc<Acquisition>) -> Result<(), Error> {
    let span = tracing::debug_span!(
        "release",
        uid = %state.args.uid,
        resources = %Names(&state.args.resources),
    );
    release_quorum(state).instrument(span).await
}

/// Sends the unlock of an acquisition whose release already began to every
/// locker again, and waits as [`release_confirmed`] does: a retry of a
/// release that was not confirmed (an election's resign), since the first
/// release's plan went to its targets once.
pub(crate) async fn release_again(state: Arc<Acquisition>) -> Result<(), Error> {
    let targets = (0..state.coord.lockers.len())
        .map(|index| Target {
            index,
            granted: true,
        })
        .collect();
    let plan = crate::lock::acquisition::ReleasePlan {
        targets,
        ..Default::default()
    };
    release_plan(state, plan).await
}

async fn release_quorum(state: Arc<Acquisition>) -> Result<(), Error> {
    let plan = state.begin_release();
    if let Ok(handle) = Handle::try_current() {
        watch_stragglers(&state, &plan.in_flight, &handle);
    }
    release_plan(state, plan).await
}

/// Watches the lockers of `in_flight`, whose lock or wait call of the
/// released `state` was still on its way at the release, until each call
/// settles (answered, it undid its own grant; dropped, it queued its
/// unlock). One still on its way once it must have ended (its deadline,
/// `Timeouts::acquire` after it was sent, plus a grace) sits on a runtime
/// that is no longer driven and would never undo the grant its locker may
/// have applied: its locker is unlocked then. Runs on the current runtime
/// if it is `fallback`'s, otherwise on the coordinator's own
/// (`own_runtime::background`),
/// counted among the outstanding releases; ends as soon as every call
/// settled. Owed: cut short (its runtime shut down), it queues the unlocks
/// of the calls still on their way.
pub(crate) fn watch_stragglers(state: &Arc<Acquisition>, in_flight: &[usize], fallback: &Handle) {
    if in_flight.is_empty() {
        return;
    }
    let coord = state.coord.clone();
    let deadline = after(
        coord.clock.now(),
        coord.timeouts.acquire.saturating_add(STRAGGLER_GRACE),
    );
    // Recorded on the stragglers' queues as on their way until the watch
    // ends, not counted among the outstanding releases: if this runtime is
    // no longer driven (a guard dropped as its `block_on` returns), the
    // records are overdue once the watch would have sent the unlocks, and
    // any drain task or `finish_releases` sends them.
    // The record ends with the watch, or as the last call settles, on
    // whichever runtime that happens (`Acquisition::keep_watch_record`).
    state.keep_watch_record(Box::new(owe_batch_until(
        state,
        in_flight.iter().copied(),
        batch_deadline(&coord, deadline),
        // Not before the watch would: a straggler's lock call may still be
        // on its way, and an unlock that overtakes it frees nothing.
        false,
    )));
    let mut owed = StragglersOwed {
        state: state.clone(),
        in_flight: in_flight.to_vec(),
        began: coord.clock.now(),
        armed: true,
    };
    let handle = crate::lock::own_runtime::background(&coord.own_runtime, fallback);
    handle.spawn(async move {
        let state = owed.state.clone();
        loop {
            let settles = state.a_call_settles();
            tokio::pin!(settles);
            settles.as_mut().enable();
            owed.in_flight.retain(|&index| state.in_flight(index));
            if owed.in_flight.is_empty() {
                break;
            }
            tokio::select! {
                () = settles => {}
                () = coord.clock.sleep_until(deadline) => {
                    let releases = owed.in_flight.iter().map(|&index| {
                        release_one(&state, Target { index, granted: false })
                    });
                    futures::future::join_all(releases).await;
                    break;
                }
            }
        }
        owed.settled();
        drop(state.take_watch_record());
    });
}

/// The unlocks a straggler watch owes: see [`watch_stragglers`].
struct StragglersOwed {
    state: Arc<Acquisition>,
    in_flight: Vec<usize>,
    began: Instant,
    armed: bool,
}

impl StragglersOwed {
    /// Every call settled, or its locker was sent the unlock.
    fn settled(mut self) {
        self.armed = false;
    }
}

impl Drop for StragglersOwed {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let coord = &self.state.coord;
        for &index in &self.in_flight {
            if self.state.in_flight(index) {
                let holder = self.state.held_off(coord.clock.now());
                let pending = PendingUnlock {
                    args: self.state.args.clone(),
                    mode: self.state.mode,
                    give_up: owed_give_up(coord, index, self.began, &holder),
                    holder,
                    tried: false,
                    hurried: Default::default(),
                };
                queue_unlock(coord, index, pending, Handle::try_current().ok());
            }
        }
    }
}

/// A release's calls. Those still running when it ends (a quorum
/// confirmed, time ran out, or its caller was cancelled) go on on the
/// current runtime, recorded on their lockers' queues as a batch on its
/// way: if that runtime is no longer driven (an `unlock()` in a `block_on`
/// that returns), another sends them once overdue.
struct OwedCalls<'a> {
    calls: CallSet<bool>,
    state: &'a Acquisition,
    lockers_of: PerLocker<Target>,
}

impl Drop for OwedCalls<'_> {
    fn drop(&mut self) {
        if self.calls.running() == 0 {
            return;
        }
        let calls = std::mem::replace(&mut self.calls, CallSet::dropping(std::iter::empty()));
        let running = self
            .lockers_of
            .iter()
            .enumerate()
            .filter(|&(at, _)| calls.is_running(at))
            .map(|(_, target)| target.index);
        let owed = owe_batch(self.state, running);
        calls.hand_off_owed(owed);
    }
}

async fn release_plan(
    state: Arc<Acquisition>,
    plan: crate::lock::acquisition::ReleasePlan,
) -> Result<(), Error> {
    let lockers = state.coord.lockers.len();
    let quorum = state.args.quorum;
    let mut confirmed = plan.refused;
    let deadline = after(state.coord.clock.now(), state.coord.timeouts.unlock);
    // Kept to name the lockers of calls still running at the end (a
    // copy inline on the usual cluster sizes).
    let lockers_of = plan.targets.clone();
    let targets = plan
        .targets
        .into_iter()
        .map(|i| release_call(state.clone(), i));
    let mut owed = OwedCalls {
        calls: CallSet::new(&state.coord, targets),
        state: &state,
        lockers_of,
    };
    let calls = &mut owed.calls;
    let mut timer = None;
    let clock = &state.coord.clock;
    poll_fn(|cx| {
        // The calls' deadlines are kept by this timer (see
        // `quorum::deadline`).
        let wake = calls.poll_all_waking_by(cx, clock, |_, ok| confirmed += usize::from(ok));
        if confirmed >= quorum || calls.running() == 0 {
            return Poll::Ready(());
        }
        poll_deadline(cx, clock, &mut timer, deadline, wake)
    })
    .await;
    drop(owed);
    tracing::debug!(confirmed, quorum, "released");
    if confirmed >= quorum {
        Ok(())
    } else {
        Err(Error::ReleaseUnconfirmed {
            confirmed,
            quorum,
            lockers,
        })
    }
}
