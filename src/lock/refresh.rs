//! One refresh of a held lock on every locker, and what happens when the
//! lock turns out to be lost. The keeper decides when.
//!
//! The holder counts from when the last *confirmed* refresh was *sent*. A
//! locker that confirmed it received it after that instant and expires the
//! entry no sooner than `validity` later, so declaring the loss at
//! `validity - safety_margin` after the send always comes first. dsync
//! instead ignores lockers it cannot reach, so a partitioned holder never
//! learns it lost the lock; here a silent locker simply does not confirm.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use tokio::runtime::Handle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::lock::acquisition::{Acquisition, Loss};
use crate::lock::coordinator::PendingUnlock;
use crate::lock::drain::{owe_batch, queue_unlock};
use crate::lock::fanout::{call_locker, Call, CallSet};
use crate::lock::per_locker::PerLocker;
use crate::lock::release::owed_give_up;
use crate::lock::telemetry::{CallKind, LossCause, Names};
use crate::quorum::clock::after;
use crate::quorum::{Answer, Tally};

/// How one refresh round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refreshed {
    /// A quorum confirmed the lock.
    Confirmed,
    /// So many lockers answered "unknown uid" that no quorum can confirm it
    /// any more: the lock is gone.
    NotFound,
    /// Too few confirmations, mostly for lack of answers; try again soon.
    Unconfirmed,
}

/// Sends one refresh to every locker and waits until a quorum confirmed,
/// enough said "not found" that none can, or every call ended, at the
/// latest at `deadline`.
pub(crate) async fn refresh_round(state: Arc<Acquisition>, deadline: Instant) -> Refreshed {
    let span = tracing::debug_span!(
        "refresh",
        uid = %state.args.uid,
        resources = %Names(&state.args.resources),
        outcome = tracing::field::Empty,
    );
    let outcome = refresh_calls(state, deadline)
        .instrument(span.clone())
        .await;
    span.record("outcome", tracing::field::debug(outcome));
    outcome
}

async fn refresh_calls(state: Arc<Acquisition>, deadline: Instant) -> Refreshed {
    let n = state.coord.lockers.len();
    let quorum = state.args.quorum;
    // A refresh that lands after the lock was released could re-create the
    // entry on a restarted locker, so stragglers are dropped, not finished.
    let mut calls = CallSet::dropping((0..n).map(|i| refresh_call(state.clone(), i, deadline)));
    let mut answers: PerLocker<Option<Answer>> = PerLocker::from_elem(None, n);
    let coord = &state.coord;
    poll_fn(|cx| {
        calls.poll_all(cx, |index, answer| answers[index] = Some(answer));
        // Taken anew at each look: a confirmation of a locker that has
        // announced a shorter validity since counts as "not held".
        let mut tally = Tally::new(n, quorum);
        for (index, answer) in answers.iter().enumerate() {
            if let Some(answer) = answer {
                tally.record(match answer {
                    Answer::Granted if !coord.lease_honoured(index) => Answer::Refused,
                    answer => *answer,
                });
            }
        }
        if tally.granted() >= quorum {
            Poll::Ready(Refreshed::Confirmed)
        } else if tally.refused() > n - quorum {
            Poll::Ready(Refreshed::NotFound)
        } else if calls.running() == 0 {
            Poll::Ready(Refreshed::Unconfirmed)
        } else {
            Poll::Pending
        }
    })
    .await
}

fn refresh_call(state: Arc<Acquisition>, index: usize, deadline: Instant) -> Call<Answer> {
    Box::pin(async move {
        let locker = &state.coord.lockers[index];
        if let Err(err) = state.coord.honours_lease(index) {
            // Its confirmation would not be worth the lease: it counts as
            // "not held" (the entry it keeps may go before the holder's
            // trust ends), so that it and lockers that lost the entry
            // together tell the holder of its loss.
            tracing::warn!(uid = %state.args.uid, locker = %locker.endpoint(), %err, "refresh not counted");
            return Answer::Refused;
        }
        // Counted by the release plan from before it is sent until it is
        // known not to have been applied: a refresh re-creates a missing
        // entry on a locker in quarantine, also where the grant had been
        // refused, and a dropped straggler may still arrive.
        let Some(sent) = state.refresh_sending(index) else {
            return Answer::Failed;
        };
        let call = locker.refresh_mode(&state.args, state.mode);
        let result = call_locker(&state.coord, index, CallKind::Refresh, call, deadline).await;
        sent.settle(match &result {
            Ok(held) => *held,
            Err(err) => !err.never_sent(),
        });
        match result {
            // A locker that announced a shorter validity while the call was
            // on its way: its confirmation is worth no more than before.
            Ok(true) if !state.coord.lease_honoured(index) => Answer::Refused,
            Ok(true) => Answer::Granted,
            Ok(false) => Answer::Refused,
            Err(err) => {
                tracing::debug!(uid = %state.args.uid, locker = %locker.endpoint(), %err, "refresh failed");
                Answer::Failed
            }
        }
    })
}

/// Tells the holder, stops future releases from counting this lock, and
/// removes whatever is left of it on the lockers once the safety margin
/// has passed.
pub(crate) fn declare_lost(
    state: &Arc<Acquisition>,
    signal: &Loss,
    cause: LossCause,
    handle: &Handle,
) {
    note_lost(state, signal, cause);
    spawn_cleanup(state, signal, handle);
}

/// Tells the holder and stops future releases from counting this lock,
/// leaving the clean-up to the caller.
pub(crate) fn note_lost(state: &Arc<Acquisition>, signal: &Loss, cause: LossCause) {
    let why = match cause {
        LossCause::RefreshMissed => "no quorum confirmed a refresh before the holder's deadline",
        LossCause::NotFound => {
            "a quorum of lockers no longer hold it (expired, forced open, or restarted)"
        }
    };
    tracing::warn!(uid = %state.args.uid, resources = ?state.args.resources, owner = %state.args.owner, why, "lock lost");
    state.coord.telemetry.lost(cause);
    signal.declare();
    // Before the release is marked: whatever finds it released from here
    // (a straggler's undo, a dropped call's owed unlock) sees the hold.
    let not_before = after(state.coord.clock.now(), state.coord.lease.safety_margin);
    state.hold_off(not_before, signal);
    state.begin_release();
}

/// Removes what is left of a lost lock once the safety margin has passed,
/// or at once when its holder lets go.
fn spawn_cleanup(state: &Arc<Acquisition>, signal: &Loss, handle: &Handle) {
    // The entries are removed only after the safety margin, as expiry would:
    // freeing them at once would let another client in (a reader, when the
    // holder still reaches half of an even cluster) before the holder has
    // had the margin to stop the work the lock protects. A holder that
    // dropped or unlocked its guard has stopped that work, as it has when
    // it drops a guard that is not lost, so from then on nothing is left to
    // protect and the entries go at once.
    let state = state.clone();
    let signal = signal.clone();
    let declared = state.coord.clock.now();
    let mut owed = CleanupOwed {
        state: state.clone(),
        signal: signal.clone(),
        not_before: after(declared, state.coord.lease.safety_margin),
        declared,
        armed: true,
        claimed: false,
    };
    handle.spawn(async move {
        tokio::select! {
            () = state.coord.clock.sleep(state.coord.lease.safety_margin) => {}
            () = signal.holder_gone() => {}
        }
        // Recorded on the lockers' queues from here, not while it waits (a
        // holder that lets go does the clean-up itself if this task has not
        // begun it, `clean_up_after_holder`), and never counted among the
        // outstanding releases: if this runtime stops being driven midway,
        // any drain task or `finish_releases` sends the unlocks (by uid:
        // what the force-unlocks would do; twice is harmless).
        if signal.claim_cleanup() {
            // Ours now: cut short, it queues its unlocks.
            owed.claimed = true;
            let recorded = owe_batch(&state, 0..state.coord.lockers.len());
            force_release(state).await;
            signal.cleanup_finished();
            drop(recorded);
        }
        owed.settled();
    });
}

/// The clean-up of a lost lock whose holder let go, owed from now (due at
/// once): `None` when another has claimed it.
fn claim_after_holder(state: &Arc<Acquisition>, signal: &Loss) -> Option<CleanupOwed> {
    if !signal.claim_cleanup() {
        // Begun, or queued (its task dropped): the queue's unlocks are now
        // due; send them.
        crate::lock::drain::kick_queued(&state.coord);
        if signal.cleanup_is_done() {
            return None;
        }
        // Begun and not ended: its force-unlocks may sit on a runtime no
        // longer driven. The holder has let go, so they are sent again
        // from here (by uid: twice is harmless).
    }
    let now = state.coord.clock.now();
    Some(CleanupOwed {
        state: state.clone(),
        signal: signal.clone(),
        not_before: now,
        declared: now,
        armed: true,
        claimed: true,
    })
}

/// [`clean_up_after_holder`], waited for: by an `unlock()` that found its
/// lock lost, so that the entries are gone (or their unlocks queued) when
/// it returns. Outside any runtime it runs on the coordinator's own.
///
/// Cancel safe: dropped, what it had not done is queued (`CleanupOwed`).
pub(crate) async fn clean_up_now(state: &Arc<Acquisition>, signal: &Loss) {
    let Some(owed) = claim_after_holder(state, signal) else {
        return;
    };
    // Recorded on the lockers' queues, as every clean-up is: if the
    // caller's runtime stops driving this call, any drain task or
    // `finish_releases` sends the unlocks.
    let recorded = owe_batch(state, 0..state.coord.lockers.len());
    let cleaned = state.clone();
    let finished = signal.clone();
    let work = async move {
        force_release(cleaned).await;
        finished.cleanup_finished();
        owed.settled();
        drop(recorded);
    };
    if Handle::try_current().is_ok() {
        work.await;
        return;
    }
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let spawned =
        crate::lock::own_runtime::on_own_runtime(&state.coord.own_runtime, move |_| async move {
            work.await;
            let _ = done.send(());
        });
    // Without a runtime for it, `work` was dropped unrun and its unlocks
    // are queued.
    if spawned.is_ok() {
        let _ = finished.await;
    }
}

/// Removes what is left of a lost lock once its holder let go, unless the
/// clean-up [`declare_lost`] started has begun: that task may sit on a
/// runtime that is no longer driven, or is gone. On the current runtime if
/// it is `fallback`'s (the acquiring one), otherwise on the coordinator's
/// own (`own_runtime::background`). Safe at once: the holder has
/// stopped the work the lock protected.
pub(crate) fn clean_up_after_holder(state: &Arc<Acquisition>, signal: &Loss, fallback: &Handle) {
    let Some(owed) = claim_after_holder(state, signal) else {
        return;
    };
    let handle = crate::lock::own_runtime::background(&state.coord.own_runtime, fallback);
    // Recorded on every locker's queue as on its way, as a dropped guard's
    // release is, not counted among the outstanding releases: if this
    // runtime is no longer driven (a guard dropped as its `block_on`
    // returns), another sends the unlocks once they are overdue (an unlock
    // by uid does what the force-unlock would; twice is harmless). The
    // holder let go: nothing holds them off.
    let recorded = owe_batch(state, 0..state.coord.lockers.len());
    let (state, signal) = (state.clone(), signal.clone());
    handle.spawn(async move {
        force_release(state).await;
        signal.cleanup_finished();
        owed.settled();
        drop(recorded);
    });
}

/// A lost lock's clean-up, owed from the loss's declaration. Dropped before
/// it ran (its task went with its runtime, or never ran), it queues an
/// unlock on every locker instead, each sent once the safety margin has
/// passed or the holder let go, as the task would have: nothing frees the
/// lock sooner, and nothing leaves it to expiry on a locker that answers.
struct CleanupOwed {
    state: Arc<Acquisition>,
    signal: Loss,
    not_before: Instant,
    declared: Instant,
    armed: bool,
    /// Whether its holder claimed the clean-up already; otherwise its drop
    /// claims it, unless another has.
    claimed: bool,
}

impl CleanupOwed {
    fn settled(mut self) {
        self.armed = false;
    }
}

impl Drop for CleanupOwed {
    fn drop(&mut self) {
        if !self.armed || !(self.claimed || self.signal.claim_cleanup()) {
            return;
        }
        let coord = &self.state.coord;
        for index in 0..coord.lockers.len() {
            let holder = Some(self.signal.held_off(self.not_before));
            let pending = PendingUnlock {
                args: self.state.args.clone(),
                mode: self.state.mode,
                give_up: owed_give_up(coord, index, self.declared, &holder),
                holder,
                tried: false,
                hurried: Default::default(),
            };
            queue_unlock(coord, index, pending, Handle::try_current().ok());
        }
    }
}

/// Removes what is left of a lost lock on every locker. One that cannot
/// be reached gets the unlock through its retry queue, as any failed
/// release does, until it lands or the locker must have expired the entry.
async fn force_release(state: Arc<Acquisition>) {
    let coord = &state.coord;
    let began = coord.clock.now();
    let deadline = after(began, coord.timeouts.force_unlock);
    let calls = coord.lockers.iter().enumerate().map(|(index, locker)| {
        let call = locker.force_unlock(&state.args);
        call_locker(coord, index, CallKind::ForceUnlock, call, deadline)
    });
    let results = futures::future::join_all(calls).await;
    for (index, result) in results.into_iter().enumerate() {
        match result {
            Ok(_) => crate::lock::release::unlock_landed(coord, index, &state.args.uid),
            Err(err) if crate::lock::drain::unlock_may_land_later(&err) => {
                crate::lock::release::retry_unlock(&state, index, began);
            }
            Err(_) => {}
        }
    }
}
