//! The lease keeper: one background task per `Dsync` that refreshes every
//! held lock on time and declares a lock lost when it must.
//!
//! Held locks live in a small slab. Acquiring adds an entry and releasing
//! removes it, each a short mutex section, so a lock that is held briefly
//! costs no task, no timer and no refresh. The task sleeps until the
//! earliest refresh or loss deadline in the table, and only wakes for a new
//! lock when that lock is due before everything already there.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use futures::future::{AbortHandle, Abortable};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use crate::dsync::Coordinator;
use crate::refresh::{declare_lost, refresh_round, Refreshed};
use crate::round::RoundState;

/// Identifies one registered lock; the generation guards against a slot
/// that was freed and reused while a refresh for its old lock was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseKey {
    index: usize,
    generation: u64,
}

struct Leased {
    state: Arc<RoundState>,
    lost: CancellationToken,
    /// When the last refresh that a quorum confirmed was sent.
    confirmed_sent: Instant,
    next_refresh: Instant,
    unconfirmed: u32,
    in_flight: Option<AbortHandle>,
}

#[derive(Default)]
struct Table {
    slots: Vec<(u64, Option<Leased>)>,
    free: Vec<usize>,
    generation: u64,
    /// Whether a keeper task is alive to serve this table.
    running: bool,
    /// When the keeper will wake next; `None` while it sleeps without timer.
    next_wake: Option<Instant>,
}

/// The table of held locks of one coordinator, shared with its keeper task.
#[derive(Default)]
pub(crate) struct Keeper {
    table: Mutex<Table>,
    wake: Notify,
}

impl Keeper {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts keeping `state` alive; `lost` is cancelled if it is lost.
    pub(crate) fn register(
        self: &Arc<Self>,
        coord: &Arc<Coordinator>,
        handle: &Handle,
        state: Arc<RoundState>,
        lost: CancellationToken,
    ) -> LeaseKey {
        let next_refresh = state.started + coord.lease.refresh_interval;
        let mut table = self.table();
        table.generation += 1;
        let generation = table.generation;
        let leased = Leased {
            confirmed_sent: state.started,
            state,
            lost,
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
        if !table.running {
            table.running = true;
            table.next_wake = None;
            handle.spawn(run(Arc::downgrade(coord), self.clone()));
        } else if table.next_wake.map_or(true, |wake| next_refresh < wake) {
            self.wake.notify_one();
        }
        LeaseKey { index, generation }
    }

    /// Stops keeping a lock alive (it was released). A refresh in flight
    /// for it is abandoned.
    pub(crate) fn remove(&self, key: LeaseKey) {
        let mut table = self.table();
        if let Some(leased) = take(&mut table, key) {
            if let Some(in_flight) = leased.in_flight {
                in_flight.abort();
            }
        }
    }

    /// Wakes the keeper so that it notices its coordinator is gone.
    pub(crate) fn shutdown(&self) {
        self.wake.notify_one();
    }
}

fn take(table: &mut Table, key: LeaseKey) -> Option<Leased> {
    let slot = table.slots.get_mut(key.index)?;
    if slot.0 != key.generation {
        return None;
    }
    let leased = slot.1.take()?;
    table.free.push(key.index);
    Some(leased)
}

type RoundFuture =
    Abortable<std::pin::Pin<Box<dyn Future<Output = (LeaseKey, Instant, Refreshed)> + Send>>>;

/// Starts the refreshes that are due, takes out the locks whose loss is due
/// into `lost`, and returns when to look again.
fn tick(
    keeper: &Keeper,
    now: Instant,
    rounds: &mut FuturesUnordered<RoundFuture>,
    lost: &mut Vec<Leased>,
) -> Option<Instant> {
    let mut table = keeper.table();
    let mut wake: Option<Instant> = None;
    let mut earliest = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
    let mut due = Vec::new();
    for index in 0..table.slots.len() {
        let generation = table.slots[index].0;
        let Some(leased) = table.slots[index].1.as_mut() else {
            continue;
        };
        let key = LeaseKey { index, generation };
        let give_up = leased.confirmed_sent + leased.state.coord.lease.trusted_for();
        if now >= give_up {
            due.push(key);
            continue;
        }
        earliest(give_up);
        if leased.in_flight.is_some() {
            continue;
        }
        if now >= leased.next_refresh {
            let (abort, registration) = AbortHandle::new_pair();
            leased.in_flight = Some(abort);
            let state = leased.state.clone();
            let round: std::pin::Pin<Box<dyn Future<Output = _> + Send>> =
                Box::pin(async move { (key, now, refresh_round(state).await) });
            rounds.push(Abortable::new(round, registration));
        } else {
            earliest(leased.next_refresh);
        }
    }
    for key in due {
        if let Some(leased) = take(&mut table, key) {
            if let Some(in_flight) = &leased.in_flight {
                in_flight.abort();
            }
            lost.push(leased);
        }
    }
    table.next_wake = wake;
    wake
}

/// Records the outcome of a refresh round sent at `sent`. Returns the lock
/// if the round showed it is lost.
fn settle(keeper: &Keeper, key: LeaseKey, sent: Instant, outcome: Refreshed) -> Option<Leased> {
    let mut table = keeper.table();
    let slot = table
        .slots
        .get_mut(key.index)
        .filter(|s| s.0 == key.generation)?;
    // A missing entry was released while the refresh was running.
    let leased = slot.1.as_mut()?;
    leased.in_flight = None;
    let lease = leased.state.coord.lease;
    match outcome {
        Refreshed::Confirmed => {
            leased.confirmed_sent = sent;
            leased.next_refresh = sent + lease.refresh_interval;
            leased.unconfirmed = 0;
            None
        }
        Refreshed::Unconfirmed => {
            let wait = leased.state.coord.backoff(leased.unconfirmed);
            leased.unconfirmed = leased.unconfirmed.saturating_add(1);
            leased.next_refresh = Instant::now() + wait;
            tracing::warn!(uid = %leased.state.args.uid, resources = ?leased.state.args.resources,
                "refresh not confirmed by a quorum, retrying");
            None
        }
        Refreshed::NotFound => take(&mut table, key),
    }
}

/// Clears `running` however the task ends, including runtime shutdown, so
/// the next registration starts a new keeper.
struct Running(Arc<Keeper>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut table = self.0.table();
        table.running = false;
        // The refresh rounds died with this task; let the next keeper start
        // new ones instead of waiting for these.
        for (_, leased) in table.slots.iter_mut() {
            if let Some(leased) = leased {
                leased.in_flight = None;
            }
        }
    }
}

async fn run(coord: Weak<Coordinator>, keeper: Arc<Keeper>) {
    let running = Running(keeper);
    let keeper = &running.0;
    let mut rounds = FuturesUnordered::new();
    let mut lost = Vec::new();
    loop {
        let wake = tick(keeper, Instant::now(), &mut rounds, &mut lost);
        // Declared outside the table lock: cancelling wakes the holders.
        for leased in lost.drain(..) {
            declare_lost(
                &leased.state,
                &leased.lost,
                "no quorum confirmed a refresh in time",
            );
        }
        if wake.is_none() && rounds.is_empty() && coord.strong_count() == 0 {
            return;
        }
        tokio::select! {
            () = async { sleep_until(wake.unwrap_or_else(Instant::now)).await }, if wake.is_some() => {}
            () = keeper.wake.notified() => {}
            Some(done) = rounds.next(), if !rounds.is_empty() => {
                if let Ok((key, sent, outcome)) = done {
                    if let Some(leased) = settle(keeper, key, sent, outcome) {
                        declare_lost(&leased.state, &leased.lost, "a quorum of lockers no longer hold the lock");
                    }
                }
            }
        }
    }
}
