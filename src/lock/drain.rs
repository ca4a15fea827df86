//! The per-locker queues' drain tasks: sending the unlocks that failed,
//! or are on their way, until they land or stop mattering; and waiting for
//! them (`Dsync::finish_releases`).
//!
//! Invariants: see `unlock_queue`; at most one drain task per runtime and
//! queue; a drain task dropped unfinished hands its queue to the
//! coordinator's own runtime; a batch overdue on a task that is no longer
//! driven is sent again by any other.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::lock::acquisition::Acquisition;
use crate::lock::coordinator::{Coordinator, PendingUnlock};
use crate::lock::fanout::call_locker;
use crate::lock::per_locker::PerLocker;
use crate::lock::telemetry::CallKind;
use crate::quorum::clock::after;
use crate::{Error, LockArgs, LockMode};

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
pub(crate) const SLOW_LOCKER_FACTOR: u32 = 2;

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
pub(crate) async fn unlock_call(
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

pub(crate) fn unlock_kind(mode: LockMode) -> CallKind {
    match mode {
        LockMode::Write => CallKind::Unlock,
        LockMode::Read => CallKind::RUnlock,
    }
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
    queue_unlock_unless_landed(coord, index, pending, runtime, false);
}

/// [`queue_unlock`] of a release's own unlock, after its own send failed
/// or its task was dropped: not when a `finish_releases` call already saw
/// a copy of it land (`QueueState::saw_land`).
pub(crate) fn queue_release_retry(
    coord: &Arc<Coordinator>,
    index: usize,
    pending: PendingUnlock,
    runtime: Option<Handle>,
) {
    queue_unlock_unless_landed(coord, index, pending, runtime, true);
}

fn queue_unlock_unless_landed(
    coord: &Arc<Coordinator>,
    index: usize,
    pending: PendingUnlock,
    runtime: Option<Handle>,
    unless_landed: bool,
) {
    let mut queue = coord.unlock_retries[index].lock();
    if unless_landed && queue.saw_land(&pending.args.uid) {
        return;
    }
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
        landed: Vec::new(),
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
    // This call's number: it takes back each unlock on its way once (see
    // `QueueState::reclaim_stale`), and forgets having done so as it ends.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = Call {
        coord,
        number: CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    };
    let mut first_look = true;
    loop {
        // Unlocks queued with no drain task here get one. What is waited
        // for is unlocks queued or being sent, and the other releases: a
        // drain task with nothing to send, on a runtime that is idle,
        // holds nothing up.
        // Queued and being sent, counted together under each queue's lock:
        // a drain task moves a failed batch from one to the other under it.
        // Unlocks on their way elsewhere are taken back at the first look
        // (so that a zero bound still sends them) and at each look before
        // the bound, then sent from here, where they are driven; the look
        // after that counts what is left.
        let mut taken = Vec::new();
        let hurry = (first_look || tokio::time::Instant::now() < until)
            .then_some((call.number, &mut taken));
        first_look = false;
        let queued = drain_queued(coord, handle, hurry);
        if !taken.is_empty() {
            send_taken(coord, taken, until).await;
            continue;
        }
        let running = outstanding.count();
        let pending = queued + running;
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
        drain_queued(coord, &handle, None);
    }
}

/// Unlocks a `finish_releases` call took back, per queue, with the id of
/// the batch they are recorded in (in flight, from the moment they are
/// taken: see [`drain_queued`]).
type Taken = Vec<(usize, u64, Vec<PendingUnlock>)>;

/// A running `finish_releases` call, by its number: ended (or dropped), it
/// takes its number off the unlocks it took back.
struct Call<'a> {
    coord: &'a Coordinator,
    number: u64,
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        for queue in &self.coord.unlock_retries {
            queue.lock().forget_call(self.number);
        }
    }
}

/// Unlocks a `finish_releases` call took back from drain tasks on other
/// runtimes, or from other calls (whose runtimes may no longer be
/// driven), sent from the call itself, each once, by `until` at the
/// latest: recorded on their queues as batches in flight, which another
/// call may take back once in turn, and put back in the queue when they
/// fail and may land later, or when the call ends first (dropped, or its
/// bound reached).
async fn send_taken(coord: &Arc<Coordinator>, taken: Taken, until: tokio::time::Instant) {
    let mut sending = Sending {
        coord: coord.clone(),
        batches: taken
            .into_iter()
            .map(|(index, id, unlocks)| {
                (index, id, unlocks.into_iter().map(|p| (p, None)).collect())
            })
            .collect(),
    };
    // Each outcome is recorded as it comes: at the bound, those that landed
    // are known to have (and are not counted, nor queued, again).
    let mut calls = futures::stream::FuturesUnordered::new();
    for (batch, (index, _, unlocks)) in sending.batches.iter().enumerate() {
        coord.telemetry.release_retried(unlocks.len());
        for (slot, (p, _)) in unlocks.iter().enumerate() {
            let (index, args, mode) = (*index, p.args.clone(), p.mode);
            calls.push(async move { (batch, slot, unlock_call(coord, index, &args, mode).await) });
        }
    }
    while let Ok(Some((batch, slot, result))) =
        tokio::time::timeout_at(until, futures::StreamExt::next(&mut calls)).await
    {
        let Some((index, _, unlocks)) = sending.batches.get_mut(batch) else {
            continue;
        };
        let Some((unlock, outcome)) = unlocks.get_mut(slot) else {
            continue;
        };
        if result.is_ok() {
            // Known at once to every other call and task, not when this
            // call's last send ends: its other copies are moot from now.
            coord.unlock_retries[*index]
                .lock()
                .landed(std::slice::from_ref(&unlock.args.uid));
        }
        *outcome = Some(result);
    }
}

/// What a `finish_releases` call sends itself (see [`send_taken`]): per
/// queue, its batch's id and unlocks, each with its outcome once known.
/// Dropped, it ends the batches, putting back in the queue every unlock
/// that did not land and may land later.
struct Sending {
    coord: Arc<Coordinator>,
    #[allow(clippy::type_complexity)]
    batches: Vec<(usize, u64, Vec<(PendingUnlock, Option<Result<(), Error>>)>)>,
}

impl Drop for Sending {
    fn drop(&mut self) {
        for (index, id, unlocks) in self.batches.drain(..) {
            let endpoint = || self.coord.lockers[index].endpoint();
            let mut again = Vec::new();
            let mut landed = Vec::new();
            for (pending, outcome) in unlocks {
                match outcome {
                    Some(Ok(())) => landed.push(pending.args.uid),
                    Some(Err(err)) if !unlock_may_land_later(&err) => {
                        give_up_on(&self.coord, &pending, &err, &endpoint());
                    }
                    // Failed for now: tried once, retried within its
                    // window.
                    Some(Err(_)) => again.push(PendingUnlock {
                        tried: true,
                        ..pending
                    }),
                    // Cut short with no answer (the call's bound, or the
                    // call dropped): not known to have reached the locker,
                    // so not a try. An unlock no one tried keeps its one
                    // try, however late.
                    None => again.push(pending),
                }
            }
            let mut queue = self.coord.unlock_retries[index].lock();
            let copied = queue.finish_batch(id);
            // Copies of them elsewhere (another call's, which may never run
            // again) hold nothing up any more.
            queue.landed(&landed);
            // Those another call took a copy of are left to that copy; but
            // that call may never be polled again (nor dropped), and its
            // copy is sent only once overdue, by a drain task that reclaims
            // it: one must run.
            let before = again.len();
            again.retain(|p| copied.keeps(p));
            let copies_out =
                again.len() < before && !(queue.in_flight.is_empty() && queue.pending.is_empty());
            if again.is_empty() && !copies_out {
                continue;
            }
            queue.pending.extend(again);
            // A drain task sends them from here (this call may be dropped
            // for good, or at its bound), or sends the copies once overdue:
            // this runtime's, unless the `Dsync`'s own drains the queue (see
            // `drain_queued`).
            let own = self.coord.own_runtime.started_id();
            if own.is_some_and(|own| queue.drainers.iter().any(|(r, _)| *r == own)) {
                continue;
            }
            match Handle::try_current()
                .ok()
                .or_else(|| self.coord.own_runtime.handle())
            {
                Some(handle) => start_drainer(&self.coord, index, queue, &handle),
                None => drop(queue),
            }
        }
    }
}

/// Starts, on the current runtime, a drain task for every queue that holds
/// unlocks, and returns how many unlocks they hold, queued or being sent. A queue whose drainer
/// went with its runtime (the private one of an `unlock()` outside any
/// runtime, say) is otherwise left until a later failure starts one. With
/// `hurry` (a `finish_releases` call's number, and where it collects
/// them), a release's unlocks on their way with a drain task of another
/// runtime, or with another call, are taken back, per queue, for the call
/// to send now rather than once overdue, once per call: that task may sit
/// on a runtime no longer driven, and the caller wants them done.
pub(crate) fn drain_queued(
    coord: &Arc<Coordinator>,
    handle: &Handle,
    mut hurry: Option<(u64, &mut Taken)>,
) -> usize {
    let own = coord.own_runtime.started_id();
    let now = coord.clock.now();
    let mut queued = 0;
    for index in 0..coord.unlock_retries.len() {
        let mut queue = coord.unlock_retries[index].lock();
        // A batch overdue on a task that is no longer driven is sent here.
        let here = hurry.as_ref().map(|(call, _)| (handle.id(), *call));
        let taken = queue.reclaim_stale(now, here);
        if let Some((_, hurried)) = hurry.as_mut().filter(|_| !taken.is_empty()) {
            // Recorded as the call's batch in flight under the same lock
            // that took them, so that no look of another call finds them
            // nowhere.
            queue.next_drainer += 1;
            let id = queue.next_drainer;
            queue.take_batch(id, batch_deadline(coord, now), true, &taken);
            hurried.push((index, id, taken));
        }
        queued += queue.owed(now);
        if queue.pending.is_empty() {
            continue;
        }
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
/// then (see `release::release_one`).
pub(crate) struct OwedBatch {
    coord: Arc<Coordinator>,
    /// Per target locker, the batch's id in its queue.
    ids: PerLocker<(usize, u64)>,
}

/// Records the unlocks of a release of `state` on the lockers `indices`
/// as an [`OwedBatch`], due within a batch's time from now, and sent again
/// at once by `Dsync::finish_releases`.
pub(crate) fn owe_batch(
    state: &Acquisition,
    indices: impl IntoIterator<Item = usize>,
) -> OwedBatch {
    let until = batch_deadline(&state.coord, state.coord.clock.now());
    owe_batch_until(state, indices, until, true)
}

/// Records the unlocks of `state` on the lockers `indices` as an
/// [`OwedBatch`] whose task sends them, or sees them settled, by `until`:
/// after that any drain task or `Dsync::finish_releases` sends them
/// (before that too with `hurry`: see `InFlight::hurry`).
pub(crate) fn owe_batch_until(
    state: &Acquisition,
    indices: impl IntoIterator<Item = usize>,
    until: Instant,
    hurry: bool,
) -> OwedBatch {
    let coord = &state.coord;
    let ids = indices
        .into_iter()
        .map(|index| {
            let mut queue = coord.unlock_retries[index].lock();
            queue.next_drainer += 1;
            let id = queue.next_drainer;
            let unlock = PendingUnlock {
                args: state.args.clone(),
                mode: state.mode,
                // Never sent yet: its retry window, if it must be sent
                // again, starts once it is overdue.
                give_up: first_send_give_up(coord, index, until),
                holder: None,
                tried: false,
                hurried: Default::default(),
            };
            queue.take_batch(id, until, hurry, std::slice::from_ref(&unlock));
            (index, id)
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
            // What failed of it is queued by its release (`release_one`).
            let _released_by_its_release = self.coord.unlock_retries[index].lock().finish_batch(id);
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
    /// The uids of its batch that landed: not handed back if it is
    /// dropped mid-batch.
    landed: Vec<Arc<str>>,
    /// Set when it ends with its queue empty; dropped otherwise, its
    /// runtime shut down or dropped it, and what is left is handed over.
    finished: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        let mut queue = self.coord.unlock_retries[self.index].lock();
        let copied = queue.finish_batch(self.id);
        let landed = &self.landed;
        self.batch
            .retain(|p| copied.keeps(p) && !landed.contains(&p.args.uid));
        queue.pending.append(&mut self.batch);
        queue.drainers.retain(|(_, id)| *id != self.id);
        // Dropped unfinished with unlocks left, or another task's batch on
        // its way (which this one would have sent once overdue): its
        // runtime is shutting down (or dropped the task). The
        // coordinator's own runtime takes them over, unless this was it,
        // whatever drainers other runtimes have: those may be idle, and
        // never run again.
        if self.finished || (queue.pending.is_empty() && queue.in_flight.is_empty()) {
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
            let _none_taken = queue.reclaim_stale(now, None);
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
            // One no call tried is tried once, however late.
            let (live, expired): (Vec<_>, Vec<_>) = pending
                .into_iter()
                .partition(|p| now < p.give_up || !p.tried);
            // A lost lock's clean-up still waiting for its holder stays.
            let (due, waiting): (Vec<_>, Vec<_>) = live.into_iter().partition(|p| p.is_due(now));
            queue.pending = waiting;
            if !expired.is_empty() {
                tracing::debug!(locker = %endpoint(), unlocks = expired.len(),
                    "stopped retrying unlocks: the locker has expired those entries by now");
                coord.telemetry.release_given_up(expired.len());
            }
            // A probe and then the rest, each within the unlock timeout;
            // nothing to send, nothing on its way. Hurried by
            // `finish_releases`: each is due and being sent (twice is
            // harmless, by uid), and this task's runtime may stop being
            // driven with it.
            let due = queue.one_per_uid(due);
            if !due.is_empty() {
                queue.take_batch(task.id, batch_deadline(&coord, now), true, &due);
            }
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
                // Known at once: its copies elsewhere (queued, or taken
                // back by a call) are moot.
                coord.unlock_retries[index]
                    .lock()
                    .landed(std::slice::from_ref(&probe.args.uid));
                task.landed.push(probe.args.uid.clone());
                let rest = &task.batch[1..];
                coord.telemetry.release_retried(rest.len());
                // Each one that lands is off the batch's record at once: it
                // is owed no more, whatever the others still do.
                let coord = &coord;
                let mut calls: futures::stream::FuturesUnordered<_> =
                    rest.iter()
                        .enumerate()
                        .map(|(at, p)| async move {
                            (at, unlock_call(coord, index, &p.args, p.mode).await)
                        })
                        .collect();
                let mut results: Vec<Option<Result<(), Error>>> =
                    std::iter::repeat_with(|| None).take(rest.len()).collect();
                while let Some((at, result)) = futures::StreamExt::next(&mut calls).await {
                    if let (Ok(()), Some(p)) = (&result, rest.get(at)) {
                        coord.unlock_retries[index]
                            .lock()
                            .landed(std::slice::from_ref(&p.args.uid));
                        task.landed.push(p.args.uid.clone());
                    }
                    if let Some(slot) = results.get_mut(at) {
                        *slot = Some(result);
                    }
                }
                drop(calls);
                let mut failed = Vec::new();
                for (pending, result) in std::mem::take(&mut task.batch)
                    .into_iter()
                    .skip(1)
                    .zip(results)
                {
                    match result {
                        Some(Ok(())) => {}
                        Some(Err(err)) if !unlock_may_land_later(&err) => {
                            give_up_on(coord, &pending, &err, &endpoint());
                        }
                        // Failed for now (every call ends, so one with no
                        // outcome is not expected; it is retried too).
                        _ => failed.push(PendingUnlock {
                            tried: true,
                            ..pending
                        }),
                    }
                }
                failed
            }
            // Only the probe was tried: the rest keep whether they ever were
            // (one no call tried is still tried once, however late).
            Err(err) if unlock_may_land_later(&err) => {
                let mut batch = std::mem::take(&mut task.batch);
                if let Some(probe) = batch.first_mut() {
                    probe.tried = true;
                }
                batch
            }
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
        let copied = queue.finish_batch(task.id);
        queue
            .pending
            .extend(failed.into_iter().filter(|p| copied.keeps(p)));
        task.batch.clear();
        task.landed.clear();
    }
}

fn give_up_on(coord: &Coordinator, pending: &PendingUnlock, err: &Error, endpoint: &str) {
    coord.telemetry.release_given_up(1);
    tracing::warn!(uid = %pending.args.uid, locker = %endpoint, %err,
        "cannot release; the entry stays until the lock server expires it");
}

/// When retrying an unlock never sent yet, begun at `from`, stops
/// mattering: as [`give_up_at`], but never before one batch could send it
/// (a `Timeouts::release_retry` of zero turns off retries of failed
/// unlocks, not the first send).
pub(crate) fn first_send_give_up(coord: &Coordinator, index: usize, from: Instant) -> Instant {
    give_up_at(coord, index, from).max(batch_deadline(coord, from))
}

/// By when a batch of unlocks taken at `now` is sent, unless its task
/// stopped being driven: a probe and then the rest, each within the
/// unlock timeout, and a little.
pub(crate) fn batch_deadline(coord: &Coordinator, now: Instant) -> Instant {
    after(
        now,
        coord
            .timeouts
            .unlock
            .saturating_mul(2)
            .saturating_add(STRAGGLER_GRACE),
    )
}

/// How long past the longest a call runs a straggler (or a batch of
/// unlocks on its way) is given to settle before another sends it.
pub(crate) const STRAGGLER_GRACE: Duration = Duration::from_millis(100);
