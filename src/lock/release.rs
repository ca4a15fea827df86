//! Releasing an acquisition on its lockers: one locker, all of them in the
//! background, or all of them while the caller waits for a quorum to
//! confirm; and the per-locker queues that retry unlocks that failed.
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
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::lock::acquisition::{Acquisition, Target};
use crate::lock::config::after;
use crate::lock::coordinator::{Coordinator, PendingUnlock};
use crate::lock::fanout::{answered_now, call_locker, CallSet, Started};
use crate::lock::per_locker::PerLocker;
use crate::lock::telemetry::{CallKind, Names};
use crate::{Error, LockArgs, LockMode};

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
) -> impl Future<Output = bool> + Send + 'static {
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
        if self.armed && self.state.call_dropped(self.index, self.call) {
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
            };
            queue_unlock(coord, self.index, pending, Handle::try_current().ok());
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
    if failed.is_none() {
        if let Some(held_off) = state.held_off(coord.clock.now()) {
            // A lost lock whose holder may still work under it: queued, to
            // be sent once the margin has passed or the holder let go.
            let holder = Some(held_off);
            let pending = PendingUnlock {
                args: state.args.clone(),
                mode: state.mode,
                give_up: owed_give_up(coord, target.index, began, &holder),
                holder,
            };
            queue_unlock(coord, target.index, pending, Handle::try_current().ok());
            return false;
        }
    }
    let inline_until = after(began, coord.timeouts.unlock).min(give_up);
    let mut attempt = 0;
    loop {
        let err = match failed.take() {
            Some(err) => err,
            None => match unlock_call(coord, target.index, &state.args, state.mode).await {
                Ok(()) => return true,
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
/// (on the current runtime, outside any on the coordinator's own, failing
/// that on `handle`'s), every locker that granted it or may hold its grant
/// or place.
pub(crate) fn abandon(state: &Arc<Acquisition>, handle: &Handle) {
    let plan = state.begin_release();
    watch_stragglers(state, &plan.in_flight, handle);
    if !plan.targets.is_empty() {
        tracing::debug!(uid = %state.args.uid, lockers = plan.targets.len(), "undoing partial grants and places");
        let counted = state.coord.outstanding.begin();
        let release = release_all(state.clone(), plan.targets);
        // Where it was dropped, or outside any runtime on the
        // coordinator's own: `handle`'s may be idle or gone.
        let handle = crate::lock::own_runtime::background(&state.coord.own_runtime, handle);
        handle.spawn(async move {
            release.await;
            drop(counted);
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
    holder: &Option<crate::lock::acquisition::HeldOff>,
) -> Instant {
    let from = since.max(coord.clock.now());
    let from = holder
        .as_ref()
        .map_or(from, |(not_before, _)| from.max(*not_before));
    give_up_at(coord, index, from)
}

/// Whether an unlock that failed with `err` may land if sent again within
/// its retry window. Errors that are permanent for a lock call are not
/// all permanent for its unlock: a lock server given a new certificate
/// (`Tls`) or token (`Unauthorized`) takes the unlock then, and the entry
/// would otherwise stay until it expires. Only a call the locker can never
/// take (invalid arguments, an operation it lacks) is given up at once.
pub(crate) fn unlock_may_land_later(err: &Error) -> bool {
    err.is_retryable() || matches!(err, Error::Tls { .. } | Error::Unauthorized { .. })
}

/// How many times the locker's validity, on the coordinator's clock, an
/// unlock is retried for: a locker whose clock runs slower than ours keeps
/// an entry longer than its validity as we count it, and one running at
/// half our rate or faster has expired it by then. (Beyond that rate the
/// entry outlives the retries and waits for its expiry.)
const SLOW_LOCKER_FACTOR: u32 = 2;

/// When retrying an unlock that began at `began` stops mattering: the locker
/// has expired the entry by then (twice the longer of its and the lease's
/// validity, for a locker whose clock runs slow), unless
/// `Timeouts::release_retry` says to stop sooner.
pub(crate) fn give_up_at(coord: &Coordinator, index: usize, began: Instant) -> Instant {
    let validity = coord.lockers[index]
        .validity()
        .map_or(coord.lease.validity, |v| v.max(coord.lease.validity));
    let window = validity.saturating_mul(SLOW_LOCKER_FACTOR);
    after(began, window.min(coord.timeouts.release_retry))
}

/// One unlock call with its deadline.
async fn unlock_call(
    coord: &Coordinator,
    index: usize,
    args: &LockArgs,
    mode: LockMode,
) -> Result<(), Error> {
    let locker = &coord.lockers[index];
    let call = match mode {
        LockMode::Write => locker.unlock(args),
        LockMode::Read => locker.runlock(args),
    };
    let kind = unlock_kind(mode);
    let deadline = after(coord.clock.now(), coord.timeouts.unlock);
    call_locker(coord, index, kind, call, deadline)
        .await
        .map(|_| ())
}

fn unlock_kind(mode: LockMode) -> CallKind {
    match mode {
        LockMode::Write => CallKind::Unlock,
        LockMode::Read => CallKind::RUnlock,
    }
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
    queue_unlock(
        coord,
        index,
        PendingUnlock {
            args: state.args.clone(),
            mode: state.mode,
            give_up,
            holder: None,
        },
        Handle::try_current().ok(),
    );
}

/// Queues `pending` on locker `index`'s retry queue, and starts a drain
/// task on `runtime` (outside any, on the coordinator's own) unless that
/// runtime has one already.
pub(crate) fn queue_unlock(
    coord: &Arc<Coordinator>,
    index: usize,
    pending: PendingUnlock,
    runtime: Option<Handle>,
) {
    let mut queue = coord.unlock_retries[index].lock();
    queue.pending.push(pending);
    match runtime.or_else(|| coord.own_runtime.handle()) {
        Some(handle) => start_drainer(coord, index, queue, &handle),
        // No runtime to be had: the next drain task on any runtime, or
        // `finish_releases`, sends it; at worst the entry expires.
        None => drop(queue),
    }
}

/// Starts a drain task for queue `index` on `handle`'s runtime, unless that
/// runtime has one already.
fn start_drainer(
    coord: &Arc<Coordinator>,
    index: usize,
    mut queue: std::sync::MutexGuard<'_, crate::lock::coordinator::QueueState>,
    handle: &Handle,
) {
    let runtime = handle.id();
    if queue.drainers.iter().any(|(r, _)| *r == runtime) {
        return;
    }
    queue.next_drainer += 1;
    let id = queue.next_drainer;
    queue.drainers.push((runtime, id));
    drop(queue);
    handle.spawn(drain(Draining {
        coord: coord.clone(),
        index,
        id,
        batch: Vec::new(),
        finished: false,
    }));
}

/// Waits, at most `within`, until every release handed to the background
/// has ended, starting a drain task on `handle` for unlocks queued with no
/// task left to send them; `Error::ReleasesPending` when some remain.
/// What `Dsync::finish_releases` does.
pub(crate) async fn finish(
    coord: &Arc<Coordinator>,
    handle: &Handle,
    within: Duration,
) -> Result<(), Error> {
    // A drain task ending is not announced: a wait with only unlocks left
    // looks again after this long.
    const LOOK_AGAIN: Duration = Duration::from_millis(20);
    let until = after(tokio::time::Instant::now(), within);
    let outstanding = &coord.outstanding;
    loop {
        // Unlocks queued with no drain task here get one. What is waited
        // for is unlocks queued or being sent, and the other releases: a
        // drain task with nothing to send, on a runtime that is idle,
        // holds nothing up.
        let queued = drain_queued(coord, handle);
        let sending: usize = coord
            .unlock_retries
            .iter()
            .map(|queue| queue.lock().sending())
            .sum();
        let running = outstanding.count();
        let pending = queued + sending + running;
        if pending == 0 {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        if now >= until {
            return Err(Error::ReleasesPending {
                pending,
                waited: within,
            });
        }
        let look = after(now, LOOK_AGAIN).min(until);
        if running == 0 {
            tokio::time::sleep_until(look).await;
        } else {
            let _ = tokio::time::timeout_at(look, outstanding.idle()).await;
        }
    }
}

/// Starts a drain task for every queue that holds unlocks, on the current
/// runtime or, outside any, on the coordinator's own: for a holder that
/// let go of a lost lock whose clean-up waits there for it.
pub(crate) fn kick_queued(coord: &Arc<Coordinator>) {
    if let Some(handle) = Handle::try_current()
        .ok()
        .or_else(|| coord.own_runtime.handle())
    {
        drain_queued(coord, &handle);
    }
}

/// Starts, on the current runtime, a drain task for every queue that holds
/// unlocks, and returns how many unlocks they hold. A queue whose drainer
/// went with its runtime (the private one of an `unlock()` outside any
/// runtime, say) is otherwise left until a later failure starts one.
pub(crate) fn drain_queued(coord: &Arc<Coordinator>, handle: &Handle) -> usize {
    let own = coord.own_runtime.started_id();
    let now = coord.clock.now();
    let mut queued = 0;
    for index in 0..coord.unlock_retries.len() {
        let mut queue = coord.unlock_retries[index].lock();
        // A batch overdue on a task that is no longer driven is sent here.
        queue.reclaim_stale(now);
        if queue.pending.is_empty() {
            continue;
        }
        queued += queue.pending.len();
        // A queue the coordinator's own runtime drains (one a runtime
        // handed over as it shut down) stays with it: that runtime is
        // always driven, and judges the unlocks on the clock they were
        // handed over on, not on this runtime's (a test's paused clock).
        if own.is_some_and(|own| queue.drainers.iter().any(|(r, _)| *r == own)) {
            continue;
        }
        start_drainer(coord, index, queue, handle);
    }
    queued
}

/// The unlocks of a dropped guard's release, recorded as a batch in flight
/// on each target's queue while its task sends them: if that task's
/// runtime stops being driven (a guard dropped as its `block_on` returns),
/// the batch is overdue after twice the unlock timeout and any drain task,
/// or `Dsync::finish_releases`, sends it. Dropped (the release ended, or
/// its task was dropped), it removes the records: what failed is queued by
/// then (see [`release_one`]).
pub(crate) struct OwedBatch {
    coord: Arc<Coordinator>,
    /// Per target locker, the batch's id in its queue.
    ids: PerLocker<(usize, u64)>,
}

/// Records the unlocks of `state` on `targets` as an [`OwedBatch`].
pub(crate) fn owe_batch(state: &Acquisition, targets: &PerLocker<Target>) -> OwedBatch {
    let coord = &state.coord;
    let now = coord.clock.now();
    let until = after(
        now,
        coord
            .timeouts
            .unlock
            .saturating_mul(2)
            .saturating_add(STRAGGLER_GRACE),
    );
    let ids = targets
        .iter()
        .map(|target| {
            let mut queue = coord.unlock_retries[target.index].lock();
            queue.next_drainer += 1;
            let id = queue.next_drainer;
            let unlock = PendingUnlock {
                args: state.args.clone(),
                mode: state.mode,
                give_up: give_up_at(coord, target.index, now),
                holder: None,
            };
            queue.take_batch(id, until, std::slice::from_ref(&unlock));
            (target.index, id)
        })
        .collect();
    OwedBatch {
        coord: coord.clone(),
        ids,
    }
}

impl Drop for OwedBatch {
    fn drop(&mut self) {
        for &(index, id) in &self.ids {
            self.coord.unlock_retries[index].lock().finish_batch(id);
        }
    }
}

/// One drain task. Dropping it, however the task ends (including with its
/// runtime, in the middle of a batch), puts the unlocks it holds back in the
/// queue and removes it from the drainers, so that the next failure on that
/// runtime starts a new one and the others can send what it held.
struct Draining {
    coord: Arc<Coordinator>,
    index: usize,
    id: u64,
    batch: Vec<PendingUnlock>,
    /// Set when it ends with its queue empty; dropped otherwise, its
    /// runtime shut down or dropped it, and what is left is handed over.
    finished: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        let mut queue = self.coord.unlock_retries[self.index].lock();
        queue.pending.append(&mut self.batch);
        queue.finish_batch(self.id);
        queue.drainers.retain(|(_, id)| *id != self.id);
        // Dropped unfinished with unlocks left: its runtime is shutting
        // down (or dropped the task). The coordinator's own runtime takes
        // them over, unless this was it, whatever drainers other runtimes
        // have: those may be idle, and never run again.
        if self.finished || queue.pending.is_empty() {
            return;
        }
        let Some(own) = self.coord.own_runtime.handle() else {
            return;
        };
        if Handle::try_current().is_ok_and(|here| here.id() == own.id()) {
            return;
        }
        start_drainer(&self.coord, self.index, queue, &own);
    }
}

async fn drain(mut task: Draining) {
    let coord = task.coord.clone();
    let index = task.index;
    let endpoint = || coord.lockers[index].endpoint();
    let mut attempt = 0u32;
    loop {
        coord.clock.sleep(coord.background_backoff(attempt)).await;
        let now = coord.clock.now();
        {
            let mut queue = coord.unlock_retries[index].lock();
            queue.reclaim_stale(now);
            // Another task's batch still on its way keeps this one going:
            // if that task stops being driven, this one sends the batch
            // once it is overdue.
            if queue.pending.is_empty() && queue.in_flight.is_empty() {
                // Off the drainers under the same lock that saw the queue
                // empty: an unlock queued just after must start a new
                // drainer, not count on this one, which is ending.
                let id = task.id;
                queue.drainers.retain(|(_, drainer)| *drainer != id);
                task.finished = true;
                return;
            }
            let pending = std::mem::take(&mut queue.pending);
            let (live, expired): (Vec<_>, Vec<_>) =
                pending.into_iter().partition(|p| now < p.give_up);
            // A lost lock's clean-up still waiting for its holder stays.
            let (due, waiting): (Vec<_>, Vec<_>) = live.into_iter().partition(|p| p.is_due(now));
            queue.pending = waiting;
            if !expired.is_empty() {
                tracing::debug!(locker = %endpoint(), unlocks = expired.len(),
                    "stopped retrying unlocks: the locker has expired those entries by now");
                coord.telemetry.release_given_up(expired.len());
            }
            // A probe and then the rest, each within the unlock timeout.
            let until = after(
                now,
                coord.timeouts.unlock.saturating_mul(2) + STRAGGLER_GRACE,
            );
            queue.take_batch(task.id, until, &due);
            task.batch = due;
        }
        let Some(probe) = task.batch.first() else {
            continue;
        };
        // Probe with one unlock first: a locker that is still down costs one
        // call per backoff step, however many unlocks it owes.
        coord.telemetry.release_retried(1);
        let failed = match unlock_call(&coord, index, &probe.args, probe.mode).await {
            Ok(()) => {
                let rest = &task.batch[1..];
                coord.telemetry.release_retried(rest.len());
                let results = futures::future::join_all(
                    rest.iter()
                        .map(|p| unlock_call(&coord, index, &p.args, p.mode)),
                )
                .await;
                let mut failed = Vec::new();
                for (pending, result) in std::mem::take(&mut task.batch)
                    .into_iter()
                    .skip(1)
                    .zip(results)
                {
                    match result {
                        Ok(()) => {}
                        Err(err) if unlock_may_land_later(&err) => failed.push(pending),
                        Err(err) => give_up_on(&coord, &pending, &err, &endpoint()),
                    }
                }
                failed
            }
            Err(err) if unlock_may_land_later(&err) => std::mem::take(&mut task.batch),
            Err(err) => {
                give_up_on(&coord, probe, &err, &endpoint());
                task.batch.drain(1..).collect()
            }
        };
        attempt = if failed.is_empty() {
            0
        } else {
            attempt.saturating_add(1)
        };
        let mut queue = coord.unlock_retries[index].lock();
        queue.pending.extend(failed);
        queue.finish_batch(task.id);
        task.batch.clear();
    }
}

fn give_up_on(coord: &Coordinator, pending: &PendingUnlock, err: &Error, endpoint: &str) {
    coord.telemetry.release_given_up(1);
    tracing::warn!(uid = %pending.args.uid, locker = %endpoint, %err,
        "cannot release; the entry stays until the lock server expires it");
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
    let began = coord.clock.now();
    let kind = unlock_kind(state.mode);
    let result = now.unlock_now(&state.args, state.mode);
    match answered_now(coord, target.index, kind, result) {
        Ok(_) => Started::Answered(true),
        Err(err) => Started::Running(Box::pin(owed_release(state, target, began, Some(err)))),
    }
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

/// How long past the longest a lock call runs a straggler is given to
/// settle before [`watch_stragglers`] unlocks its locker.
const STRAGGLER_GRACE: Duration = Duration::from_millis(100);

/// Watches the lockers of `in_flight`, whose lock or wait call of the
/// released `state` was still on its way at the release, until each call
/// settles (answered, it undid its own grant; dropped, it queued its
/// unlock). One still on its way once it must have ended (its deadline,
/// `Timeouts::acquire` after it was sent, plus a grace) sits on a runtime
/// that is no longer driven and would never undo the grant its locker may
/// have applied: its locker is unlocked then. Runs on the current runtime,
/// outside any on the coordinator's own (`fallback`'s failing that),
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
    let counted = coord.outstanding.begin();
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
        drop(counted);
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
                };
                queue_unlock(coord, index, pending, Handle::try_current().ok());
            }
        }
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
    let targets = plan
        .targets
        .into_iter()
        .map(|i| release_call(state.clone(), i));
    let mut calls = CallSet::new(&state.coord, targets);
    let mut timer = None;
    poll_fn(|cx| {
        calls.poll_all(cx, |_, ok| confirmed += usize::from(ok));
        if confirmed >= quorum || calls.running() == 0 {
            return Poll::Ready(());
        }
        let timer = timer.get_or_insert_with(|| state.coord.clock.sleep_until(deadline));
        Pin::new(timer).poll(cx)
    })
    .await;
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
