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

use crate::lock::acquisition::Acquisition;
use crate::lock::config::after;
use crate::lock::coordinator::PendingUnlock;
use crate::lock::fanout::{call_locker, Call, CallSet};
use crate::lock::loss::LossSignal;
use crate::lock::release::{give_up_at, queue_unlock};
use crate::lock::telemetry::{CallKind, LossCause, Names};
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
    let mut tally = Tally::new(n, quorum);
    poll_fn(|cx| {
        calls.poll_all(cx, |_, answer| tally.record(answer));
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
            // Its confirmation would not be worth the lease: it does not count.
            tracing::warn!(uid = %state.args.uid, locker = %locker.endpoint(), %err, "refresh not counted");
            return Answer::Failed;
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
    signal: &Arc<LossSignal>,
    cause: LossCause,
    handle: &Handle,
) {
    let why = match cause {
        LossCause::RefreshMissed => "no quorum confirmed a refresh before the holder's deadline",
        LossCause::NotFound => {
            "a quorum of lockers no longer hold it (expired, forced open, or restarted)"
        }
    };
    tracing::warn!(uid = %state.args.uid, resources = ?state.args.resources, owner = %state.args.owner, why, "lock lost");
    state.coord.telemetry.lost(cause);
    signal.declare();
    state.begin_release();
    // The entries are removed only after the safety margin, as expiry would:
    // freeing them at once would let another client in (a reader, when the
    // holder still reaches half of an even cluster) before the holder has
    // had the margin to stop the work the lock protects. A holder that
    // dropped or unlocked its guard has stopped that work, as it has when
    // it drops a guard that is not lost, so from then on nothing is left to
    // protect and the entries go at once.
    let state = state.clone();
    let signal = signal.clone();
    let counted = state.coord.outstanding.begin();
    let declared = state.coord.clock.now();
    let owed = CleanupOwed {
        state: state.clone(),
        signal: signal.clone(),
        not_before: after(declared, state.coord.lease.safety_margin),
        declared,
        armed: true,
    };
    handle.spawn(async move {
        tokio::select! {
            () = state.coord.clock.sleep(state.coord.lease.safety_margin) => {}
            () = signal.holder_gone() => {}
        }
        force_release(state).await;
        owed.settled();
        drop(counted);
    });
}

/// A lost lock's clean-up, owed from the loss's declaration. Dropped before
/// it ran (its task went with its runtime, or never ran), it queues an
/// unlock on every locker instead, each sent once the safety margin has
/// passed or the holder let go, as the task would have: nothing frees the
/// lock sooner, and nothing leaves it to expiry on a locker that answers.
struct CleanupOwed {
    state: Arc<Acquisition>,
    signal: Arc<LossSignal>,
    not_before: Instant,
    declared: Instant,
    armed: bool,
}

impl CleanupOwed {
    fn settled(mut self) {
        self.armed = false;
    }
}

impl Drop for CleanupOwed {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let coord = &self.state.coord;
        for index in 0..coord.lockers.len() {
            let pending = PendingUnlock {
                args: self.state.args.clone(),
                mode: self.state.mode,
                give_up: give_up_at(coord, index, self.declared),
                holder: Some((self.not_before, self.signal.clone())),
            };
            queue_unlock(coord, index, pending, None);
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
        if let Err(err) = result {
            if err.is_retryable() {
                crate::lock::release::retry_unlock(&state, index, began);
            }
        }
    }
}
