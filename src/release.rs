//! Releasing an acquisition on its lockers: one locker with bounded retries,
//! all of them in the background, or all of them while the caller waits for
//! a quorum to confirm.

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::Poll;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::fanout::{call_with_deadline, Call, CallSet};
use crate::round::{RoundState, Target};
use crate::{Error, LockMode};

/// Unlocks `target`, retrying failures with backoff until
/// `timeouts.release_retry` has passed if it granted; once otherwise. Returns whether the locker confirmed
/// that it no longer holds the entry: both "released" and "did not hold it"
/// count, which is what makes unlock idempotent.
pub(crate) async fn release_one(state: &RoundState, target: Target) -> bool {
    let index = target.index;
    let coord = &state.coord;
    let locker = &coord.lockers[index];
    let give_up = Instant::now() + coord.timeouts.release_retry;
    let mut attempt = 0;
    loop {
        let call = match state.mode {
            LockMode::Write => locker.unlock(&state.args),
            LockMode::Read => locker.runlock(&state.args),
        };
        let deadline = Instant::now() + coord.timeouts.unlock;
        let err = match call_with_deadline(call, deadline, || locker.endpoint()).await {
            Ok(_) => return true,
            Err(err) => err,
        };
        let wait = coord.backoff(attempt);
        if !target.granted {
            tracing::debug!(uid = %state.args.uid, locker = %locker.endpoint(), %err,
                "unlock of an unconfirmed grant failed; leaving it to the server");
            return false;
        }
        if !err.is_retryable() || Instant::now() + wait >= give_up {
            tracing::warn!(
                uid = %state.args.uid,
                resources = ?state.args.resources,
                locker = %locker.endpoint(),
                %err,
                "giving up on release; the entry stays until the lock server expires it"
            );
            return false;
        }
        tracing::debug!(uid = %state.args.uid, locker = %locker.endpoint(), %err, ?wait, "release failed, retrying");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// Releases `targets` and waits for all of them; meant to be spawned.
pub(crate) async fn release_all(state: Arc<RoundState>, targets: Vec<Target>) {
    let calls = targets
        .into_iter()
        .map(|target| release_one(&state, target));
    futures::future::join_all(calls).await;
}

fn release_call(state: Arc<RoundState>, target: Target) -> Call<bool> {
    Box::pin(async move { release_one(&state, target).await })
}

/// Releases the acquisition and waits, at most `timeouts.unlock`, until a
/// quorum of lockers is known not to hold it. Releases that are still retrying
/// when this returns go on in the background.
///
/// Cancel safe: the release calls are handed to the runtime if this future is
/// dropped.
pub(crate) async fn release_confirmed(state: Arc<RoundState>, handle: Handle) -> Result<(), Error> {
    let plan = state.begin_release();
    let lockers = state.coord.lockers.len();
    let quorum = state.args.quorum;
    let mut confirmed = plan.refused;
    let deadline = Instant::now() + state.coord.timeouts.unlock;
    let targets = plan
        .targets
        .into_iter()
        .map(|i| release_call(state.clone(), i));
    let mut calls = CallSet::new(handle, targets);
    let mut timer = None;
    poll_fn(|cx| {
        calls.poll_all(cx, |_, ok| confirmed += usize::from(ok));
        if confirmed >= quorum || calls.running() == 0 {
            return Poll::Ready(());
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        timer.as_mut().poll(cx)
    })
    .await;
    tracing::debug!(uid = %state.args.uid, resources = ?state.args.resources, confirmed, quorum, "released");
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
