//! The lease keeper: refreshes every held lock of one `Dsync` on time and
//! declares a lock lost when it must.
//!
//! Held locks live in one table per `Dsync`; acquiring adds an entry and
//! releasing removes it, each a short mutex section, so a lock that is held
//! briefly costs no task, no timer and no refresh.
//!
//! # Lanes: no dependence on one runtime
//!
//! The work is done by *lanes*, one task on each tokio runtime that holds at
//! least one of the table's locks (the runtime a lock was acquired on, or the
//! one its guard was last watched from with `lost()` or `loss_token()`).
//! Every lane serves the whole table: it starts the refreshes that are due
//! and no other lane has started, and it declares the losses it sees. So as
//! long as any runtime that holds one of the locks is alive and driven, every
//! lock is refreshed, whichever runtime locked first. A lane ends when its
//! runtime holds no lock any more, or with its runtime.
//!
//! A refresh started by a lane whose runtime then stalls would block the
//! lock's refreshes; once it is past its deadline by [`STALE_AFTER`], or
//! halfway from its start to the loss deadline if that comes first, another
//! lane abandons it and starts a new one.
//!
//! When no lane runs at all (the only runtime is stalled, or the guard lives
//! in synchronous code after `block_on` returned), nothing is refreshed, but
//! the guard's loss signal still turns lost on time: its deadline, not the
//! keeper, decides.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::{AbortHandle, Abortable};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::runtime::{self, Handle};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::lock::acquisition::{Acquisition, Loss};
use crate::lock::refresh::{declare_lost, refresh_round, Refreshed};
use crate::lock::telemetry::{LossCause, RefreshOutcome};
use crate::quorum::clock::after;
use crate::quorum::clock::Clock;

/// How long past its deadline a refresh started by another lane may run
/// before this lane gives up on it and starts a new one.
const STALE_AFTER: Duration = Duration::from_secs(1);

/// Identifies one registered lock; the generation guards against a slot
/// that was freed and reused while a refresh for its old lock was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseKey {
    index: usize,
    generation: u64,
}

struct Leased {
    state: Arc<Acquisition>,
    signal: Loss,
    /// The runtime whose lane counts this lock as its own: where it was
    /// acquired.
    runtime: runtime::Id,
    /// Further runtimes its guard was watched from, which count it too.
    /// Empty, and so free, for most locks.
    adopted: Vec<runtime::Id>,
    next_refresh: Instant,
    unconfirmed: u32,
    in_flight: Option<InFlight>,
}

/// A refresh round under way.
struct InFlight {
    abort: AbortHandle,
    lane: u64,
    round: u64,
    /// When another lane may take over.
    stale_at: Instant,
}

/// One keeper task, on one runtime.
struct Lane {
    id: u64,
    runtime: runtime::Id,
    /// Locks counted as this runtime's.
    held: usize,
    wake: Arc<Notify>,
    /// When the lane will wake next; `None` while it sleeps without timer.
    next_wake: Option<Instant>,
}

#[derive(Default)]
struct Table {
    slots: Vec<(u64, Option<Leased>)>,
    free: Vec<usize>,
    generation: u64,
    lanes: Vec<Lane>,
    next_lane: u64,
    next_round: u64,
}

impl Table {
    /// Counts one more lock for `runtime`. Returns a lane to spawn when the
    /// runtime has none yet.
    fn count(&mut self, runtime: runtime::Id, keeper: &Arc<Keeper>) -> Option<LaneTask> {
        if let Some(lane) = self.lanes.iter_mut().find(|l| l.runtime == runtime) {
            lane.held += 1;
            return None;
        }
        self.next_lane += 1;
        let wake = Arc::new(Notify::new());
        self.lanes.push(Lane {
            id: self.next_lane,
            runtime,
            held: 1,
            wake: wake.clone(),
            next_wake: None,
        });
        Some(LaneTask {
            keeper: keeper.clone(),
            id: self.next_lane,
            wake,
        })
    }

    /// Counts one lock fewer for `runtime`; a lane left with none is woken
    /// so that it ends.
    fn uncount(&mut self, runtime: runtime::Id) {
        if let Some(lane) = self.lanes.iter_mut().find(|l| l.runtime == runtime) {
            lane.held = lane.held.saturating_sub(1);
            if lane.held == 0 {
                lane.wake.notify_one();
            }
        }
    }

    /// Wakes every lane that would otherwise sleep past `at`.
    fn wake_before(&mut self, at: Instant) {
        for lane in &self.lanes {
            if lane.next_wake.is_none_or(|wake| at < wake) {
                lane.wake.notify_one();
            }
        }
    }

    fn take(&mut self, key: LeaseKey) -> Option<Leased> {
        let slot = self.slots.get_mut(key.index)?;
        if slot.0 != key.generation {
            return None;
        }
        let leased = slot.1.take()?;
        leased.state.coord.telemetry.held(-1);
        self.free.push(key.index);
        if let Some(in_flight) = &leased.in_flight {
            in_flight.abort.abort();
        }
        self.uncount(leased.runtime);
        for runtime in &leased.adopted {
            self.uncount(*runtime);
        }
        Some(leased)
    }
}

/// The table of held locks of one coordinator, shared with its lanes.
#[derive(Default)]
pub(crate) struct Keeper {
    table: Mutex<Table>,
    /// The coordinator's clock, which every instant in the table is on.
    clock: Clock,
}

impl Keeper {
    /// The table of a coordinator that runs on `clock`.
    pub(crate) fn new(clock: Clock) -> Keeper {
        Keeper {
            table: Mutex::default(),
            clock,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts keeping `state` alive from the runtime of `handle`; `signal`
    /// is declared lost if it is lost.
    pub(crate) fn register(
        self: &Arc<Self>,
        handle: &Handle,
        state: Arc<Acquisition>,
        signal: Loss,
    ) -> LeaseKey {
        let next_refresh = after(state.trust_from(), state.coord.lease.refresh_interval);
        let due = signal
            .deadline()
            .map_or(next_refresh, |d| d.min(next_refresh));
        let runtime = handle.id();
        state.coord.telemetry.held(1);
        let mut table = self.table();
        table.generation += 1;
        let generation = table.generation;
        let leased = Leased {
            state,
            signal,
            runtime,
            adopted: Vec::new(),
            next_refresh,
            unconfirmed: 0,
            in_flight: None,
        };
        let index = match table.free.pop() {
            Some(index) => {
                table.slots[index] = (generation, Some(leased));
                index
            }
            None => {
                table.slots.push((generation, Some(leased)));
                table.slots.len() - 1
            }
        };
        let spawn = table.count(runtime, self);
        table.wake_before(due);
        drop(table);
        // Outside the table lock: a runtime that is shutting down drops the
        // task at once, and the lane's drop takes the lock.
        if let Some(lane) = spawn {
            handle.spawn(run(lane));
        }
        LeaseKey { index, generation }
    }

    /// Counts the lock as held by the runtime of `handle` too, so that a
    /// guard moved to another runtime is refreshed from there.
    pub(crate) fn adopt(self: &Arc<Self>, key: LeaseKey, handle: &Handle) {
        let runtime = handle.id();
        let mut table = self.table();
        let Some(leased) = table
            .slots
            .get_mut(key.index)
            .filter(|s| s.0 == key.generation)
            .and_then(|s| s.1.as_mut())
        else {
            return;
        };
        if leased.runtime == runtime || leased.adopted.contains(&runtime) {
            return;
        }
        leased.adopted.push(runtime);
        let spawn = table.count(runtime, self);
        drop(table);
        if let Some(lane) = spawn {
            handle.spawn(run(lane));
        }
    }

    /// Stops keeping a lock alive (it was released). A refresh in flight
    /// for it is abandoned. Returns whether it was still registered, that is
    /// whether no lane has taken it out as lost.
    pub(crate) fn remove(&self, key: LeaseKey) -> bool {
        self.table().take(key).is_some()
    }
}

type RoundFuture = Abortable<Pin<Box<dyn Future<Output = Settled> + Send>>>;

/// The outcome of one refresh round, with what identifies it.
struct Settled {
    key: LeaseKey,
    round: u64,
    sent: Instant,
    outcome: Refreshed,
}

enum Step {
    Sleep(Option<Instant>),
    Exit,
}

/// Starts the refreshes that are due, takes out the locks whose loss is due
/// into `lost`, and says when to look again, or that this lane should end.
fn tick(
    keeper: &Keeper,
    lane: u64,
    now: Instant,
    rounds: &mut FuturesUnordered<RoundFuture>,
    lost: &mut Vec<Leased>,
) -> Step {
    let mut table = keeper.table();
    let Some(mine) = table.lanes.iter().position(|l| l.id == lane) else {
        return Step::Exit;
    };
    if table.lanes[mine].held == 0 {
        table.lanes.swap_remove(mine);
        return Step::Exit;
    }
    let mut wake: Option<Instant> = None;
    let mut earliest = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
    let mut due = Vec::new();
    let mut next_round = table.next_round;
    for index in 0..table.slots.len() {
        let generation = table.slots[index].0;
        let Some(leased) = table.slots[index].1.as_mut() else {
            continue;
        };
        let key = LeaseKey { index, generation };
        let give_up = leased.signal.deadline();
        if leased.signal.is_declared() || give_up.is_some_and(|at| now >= at) {
            due.push(key);
            continue;
        }
        if let Some(at) = give_up {
            earliest(at);
        }
        if let Some(in_flight) = &leased.in_flight {
            if in_flight.lane == lane || now < in_flight.stale_at {
                if in_flight.lane != lane {
                    earliest(in_flight.stale_at);
                }
                continue;
            }
            tracing::debug!(uid = %leased.state.args.uid, "a refresh stalled on another runtime; starting a new one");
            in_flight.abort.abort();
            leased.in_flight = None;
        }
        if now < leased.next_refresh {
            earliest(leased.next_refresh);
            continue;
        }
        let timeouts = &leased.state.coord.timeouts;
        let deadline = give_up.map_or(after(now, timeouts.refresh), |at| {
            at.min(after(now, timeouts.refresh))
        });
        next_round += 1;
        let round = next_round;
        let (abort, registration) = AbortHandle::new_pair();
        // Another lane may take over once the round is overdue, but always
        // by halfway to the loss, so that a takeover can still save it.
        let overdue = after(deadline, STALE_AFTER);
        let stale_at = give_up.map_or(overdue, |at| {
            overdue.min(now + at.saturating_duration_since(now) / 2)
        });
        leased.in_flight = Some(InFlight {
            abort,
            lane,
            round,
            stale_at,
        });
        let state = leased.state.clone();
        let future: Pin<Box<dyn Future<Output = Settled> + Send>> = Box::pin(async move {
            let outcome = refresh_round(state, deadline).await;
            Settled {
                key,
                round,
                sent: now,
                outcome,
            }
        });
        rounds.push(Abortable::new(future, registration));
    }
    table.next_round = next_round;
    for key in due {
        if let Some(leased) = table.take(key) {
            lost.push(leased);
        }
    }
    if let Some(me) = table.lanes.iter_mut().find(|l| l.id == lane) {
        me.next_wake = wake;
    }
    Step::Sleep(wake)
}

/// Records the outcome of a refresh round. Returns the lock, and why, if
/// the round showed it is lost.
fn settle(keeper: &Keeper, done: Settled) -> Option<(Leased, LossCause)> {
    let mut table = keeper.table();
    let leased = table
        .slots
        .get_mut(done.key.index)
        .filter(|s| s.0 == done.key.generation)
        .and_then(|s| s.1.as_mut())?;
    // Released meanwhile, or a round another lane took over from.
    if leased.in_flight.as_ref().map(|f| f.round) != Some(done.round) {
        return None;
    }
    leased.in_flight = None;
    let lease = leased.state.coord.lease;
    let telemetry = &leased.state.coord.telemetry;
    match done.outcome {
        Refreshed::Confirmed if leased.signal.extend(done.sent, lease.trusted_for()) => {
            telemetry.refreshed(RefreshOutcome::Confirmed);
            leased.next_refresh = after(done.sent, lease.refresh_interval);
            leased.unconfirmed = 0;
            None
        }
        // Confirmed, but only after the holder's deadline had passed.
        Refreshed::Confirmed => {
            telemetry.refreshed(RefreshOutcome::Late);
            table.take(done.key).map(|l| (l, LossCause::RefreshMissed))
        }
        Refreshed::Unconfirmed => {
            telemetry.refreshed(RefreshOutcome::Unconfirmed);
            // The backoff, but never so long that the retry would come after
            // half the time left, or later than a regular refresh: one
            // failed round must not cost a lock whose lockers recovered.
            let now = leased.state.coord.clock.now();
            let left = leased
                .signal
                .deadline()
                .map_or(Duration::MAX, |at| at.saturating_duration_since(now) / 2);
            let wait = leased
                .state
                .coord
                .background_backoff(leased.unconfirmed)
                .min(lease.refresh_interval)
                .min(left);
            leased.unconfirmed = leased.unconfirmed.saturating_add(1);
            leased.next_refresh = after(now, wait);
            tracing::warn!(uid = %leased.state.args.uid, resources = ?leased.state.args.resources,
                "refresh not confirmed by a quorum, retrying");
            None
        }
        Refreshed::NotFound => {
            telemetry.refreshed(RefreshOutcome::NotFound);
            table.take(done.key).map(|l| (l, LossCause::NotFound))
        }
    }
}

/// A lane's identity; dropping it, however the task ends (including with
/// its runtime, or unrun when spawned on a runtime that is shutting down),
/// removes the lane and frees its refreshes for the other lanes.
struct LaneTask {
    keeper: Arc<Keeper>,
    id: u64,
    wake: Arc<Notify>,
}

impl Drop for LaneTask {
    fn drop(&mut self) {
        let mut table = self.keeper.table();
        table.lanes.retain(|l| l.id != self.id);
        for (_, leased) in table.slots.iter_mut() {
            if let Some(leased) = leased
                && leased.in_flight.as_ref().is_some_and(|f| f.lane == self.id)
            {
                leased.in_flight = None;
            }
        }
        // The others may sleep past refreshes this lane would have made.
        for lane in &table.lanes {
            lane.wake.notify_one();
        }
    }
}

async fn run(lane: LaneTask) {
    let keeper = lane.keeper.clone();
    let wake = lane.wake.clone();
    let mut rounds = FuturesUnordered::new();
    let mut lost = Vec::new();
    loop {
        let step = tick(&keeper, lane.id, keeper.clock.now(), &mut rounds, &mut lost);
        // Declared outside the table lock: cancelling wakes the holders.
        let handle = Handle::current();
        for leased in lost.drain(..) {
            declare_lost(
                &leased.state,
                &leased.signal,
                LossCause::RefreshMissed,
                &handle,
            );
        }
        let Step::Sleep(next) = step else { return };
        tokio::select! {
            () = async { keeper.clock.wait_until(next.unwrap_or_else(|| keeper.clock.now())).await }, if next.is_some() => {}
            () = wake.notified() => {}
            Some(done) = rounds.next(), if !rounds.is_empty() => {
                if let Ok(done) = done
                    && let Some((leased, cause)) = settle(&keeper, done) {
                        declare_lost(&leased.state, &leased.signal, cause, &handle);
                    }
            }
        }
    }
}
