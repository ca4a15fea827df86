//! The unlocks a locker owes: one queue per locker, shared by every
//! runtime of a `Dsync`, drained by at most one task per runtime (see
//! `release::drain`).
//!
//! Invariants: an unlock is in `pending` or in a drain task's batch (with
//! a copy in `in_flight`) until it lands, is given up as expired, or fails
//! for good; a batch not finished by its `until` goes back to `pending`
//! for any drain task to send (its task's runtime may no longer be
//! driven; an unlock sent twice is harmless, it goes by uid); a lost
//! lock's clean-up is not sent before its holder let go or its margin
//! passed (`PendingUnlock::is_due`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::{LockArgs, LockMode};

/// One unlock that failed and waits for its locker to come back.
#[derive(Clone)]
pub(crate) struct PendingUnlock {
    pub(crate) args: LockArgs,
    pub(crate) mode: LockMode,
    /// After this the locker has expired the entry by itself.
    pub(crate) give_up: Instant,
    /// A lost lock's clean-up waits for its holder: not sent before
    /// `not_before` unless the holder let go of its guard.
    pub(crate) holder: Option<crate::lock::loss::HeldOff>,
    /// Whether a call tried it already (and failed, sent or not: a
    /// refused connection is a try). One no call tried is tried once even
    /// past `give_up`: a release found late (a batch overdue on a runtime
    /// no longer driven) still gets its one try, whatever
    /// `Timeouts::release_retry` says.
    pub(crate) tried: bool,
    /// The running `Dsync::finish_releases` calls that took this unlock
    /// back, each to send it itself at once (see [`InFlight::hurry`]):
    /// each call does so once, so that neither one call at each of its
    /// looks nor calls from each other send a slow locker the same unlock
    /// again and again. A call ending takes its number off
    /// ([`QueueState::forget_call`]), so this holds no more numbers than
    /// calls are running.
    pub(crate) hurried: smallvec::SmallVec<[u64; 2]>,
}

impl PendingUnlock {
    /// Whether it may be sent at `now`.
    pub(crate) fn is_due(&self, now: Instant) -> bool {
        self.holder
            .as_ref()
            .is_none_or(|held| now >= held.not_before || held.holder_has_stopped())
    }

    /// Takes in `twin`, a copy of the same unlock, both due: tried once
    /// more if either was never tried, retried as long as either would be.
    fn absorb(&mut self, twin: PendingUnlock) {
        self.tried &= twin.tried;
        self.give_up = self.give_up.max(twin.give_up);
        self.add_calls(&twin.hurried);
    }

    fn add_calls(&mut self, calls: &[u64]) {
        for call in calls {
            if !self.hurried.contains(call) {
                self.hurried.push(*call);
            }
        }
    }
}

/// The unlocks a locker owes, drained by at most one task per runtime.
///
/// Funnelling retries through one queue per locker, instead of one retry
/// loop per failed call, is what keeps a locker that refuses or hangs for a
/// while from being hit by an unlock storm: however many rounds failed
/// against it, it sees one batch per backoff step.
#[derive(Default)]
pub(crate) struct UnlockQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
pub(crate) struct QueueState {
    pub(crate) pending: Vec<PendingUnlock>,
    /// The tasks draining the queue: at most one per runtime, so that a
    /// runtime that is no longer driven cannot hold the retries hostage.
    pub(crate) drainers: Vec<(tokio::runtime::Id, u64)>,
    /// The last drainer id handed out.
    pub(crate) next_drainer: u64,
    /// The batches drain tasks took from `pending` and are sending: with
    /// `pending`, what `Dsync::finish_releases` waits for (a drain task
    /// with nothing to send, on an idle runtime, holds nothing up).
    pub(crate) in_flight: Vec<InFlight>,
    /// Unlocks taken back from the batches of their tasks (overdue, or
    /// hurried), by the task's id and the unlock's uid, while those tasks
    /// may still be sending them: the copies stand for them, so such a
    /// task, when it ends, queues none of them again (else a task that goes
    /// on sending, driven, would have every failure of its batch queued
    /// twice, and again at each look). By uid: an unlock goes by uid, so
    /// two of one uid to one locker do what one does.
    pub(crate) copied: Vec<(u64, Arc<str>)>,
    /// Uids whose unlock a `finish_releases` call saw land while copies of
    /// it taken back from other tasks' batches were still recorded
    /// (`copied`): the release those copies came from, still running,
    /// queues none of it again when its own send fails afterwards (see
    /// [`saw_land`](Self::saw_land)). Kept as long as such copies are.
    pub(crate) landed_copies: Vec<Arc<str>>,
}

/// A copy of the batch one drain task is sending.
pub(crate) struct InFlight {
    /// The drain task's id.
    pub(crate) drainer: u64,
    /// By when the batch is sent, unless its task stopped being driven.
    pub(crate) until: Instant,
    /// Whether `Dsync::finish_releases` sends it again at once rather than
    /// once overdue: a release's unlocks, a drain task's batch of due ones
    /// or what another `finish_releases` call sends (sent twice, harmless:
    /// by uid), not a straggler's, whose lock call may still be on its way.
    pub(crate) hurry: bool,
    /// One unlock inline: a release's record names one per locker, and
    /// recording it costs no allocation.
    pub(crate) unlocks: Unlocks,
}

/// A batch's unlocks: see [`InFlight::unlocks`].
pub(crate) type Unlocks = smallvec::SmallVec<[PendingUnlock; 1]>;

impl QueueState {
    /// How many unlocks this locker is owed at `now`: being sent, or
    /// queued and due (a lost lock's clean-up held back for a holder that
    /// still holds its guard is a lock still held), one per uid however
    /// many copies of it are queued or on their way (a call's and its
    /// release's, say): one that lands frees the entry for all of them.
    pub(crate) fn owed(&self, now: Instant) -> usize {
        let in_flight = self.in_flight.iter().flat_map(|batch| batch.unlocks.iter());
        // Not one given up: tried, and past its retry window (a drain
        // task drops it at its next look).
        let due = self
            .pending
            .iter()
            .filter(|p| p.is_due(now) && (now < p.give_up || !p.tried));
        let uids: std::collections::HashSet<&str> =
            in_flight.chain(due).map(|p| &*p.args.uid).collect();
        uids.len()
    }

    /// Makes a drain task's batch of `due` unlocks: one per uid and mode
    /// (copies queued by a call and by the release it took them from are
    /// one unlock, sent once), each marked with the `finish_releases`
    /// calls that took back a copy of it still on its way (those sent it
    /// already, and do not take it back again: once per call).
    pub(crate) fn one_per_uid(&self, due: Vec<PendingUnlock>) -> Vec<PendingUnlock> {
        let (mut batch, seen) = merged(due);
        for copy in self.in_flight.iter().flat_map(|b| b.unlocks.iter()) {
            if let Some(&at) = seen.get(&key_of(copy)) {
                batch[at].add_calls(&copy.hurried);
            }
        }
        batch
    }

    /// Records the batch drain task `drainer` takes, to be sent by `until`.
    pub(crate) fn take_batch(
        &mut self,
        drainer: u64,
        until: Instant,
        hurry: bool,
        unlocks: &[PendingUnlock],
    ) {
        self.in_flight.push(InFlight {
            drainer,
            until,
            hurry,
            unlocks: unlocks.iter().cloned().collect(),
        });
    }

    /// Drain task `drainer` is done with its batch (sent, given up, or put
    /// back in `pending`). Returns the uids of its unlocks taken back from
    /// it meanwhile: their copies are queued, and what failed of them must
    /// not be queued again (see [`Copied::keeps`]).
    pub(crate) fn finish_batch(&mut self, drainer: u64) -> Copied {
        self.in_flight.retain(|batch| batch.drainer != drainer);
        let mut uids = Vec::new();
        self.copied.retain(|(id, uid)| {
            let ours = *id == drainer;
            if ours {
                uids.push(uid.clone());
            }
            !ours
        });
        if !self.landed_copies.is_empty() {
            let copied = &self.copied;
            self.landed_copies
                .retain(|uid| copied.iter().any(|(_, c)| c == uid));
        }
        Copied(uids)
    }

    /// Puts back in `pending` every batch not sent by its `until`: its
    /// drain task's runtime may no longer be driven, and any other drain
    /// task may send it. With `hurry` (the runtime a `finish_releases`
    /// call runs on, and the call's number), also takes back every batch
    /// marked to be hurried that holds an unlock this call has not taken
    /// back yet, but those a drain task on that runtime sends (it is
    /// driven), and returns their unlocks, marked as taken by this call,
    /// for the call to send itself. The task of a batch taken back may
    /// still be sending it; it queues nothing of it again (`copied`).
    pub(crate) fn reclaim_stale(
        &mut self,
        now: Instant,
        hurry: Option<(tokio::runtime::Id, u64)>,
    ) -> Vec<PendingUnlock> {
        let drainers = &self.drainers;
        let hurried = |batch: &InFlight| {
            hurry.is_some_and(|(here, call)| {
                batch.hurry
                    && batch.unlocks.iter().any(|u| !u.hurried.contains(&call))
                    && !drainers
                        .iter()
                        .any(|&(at, id)| at == here && id == batch.drainer)
            })
        };
        let mut taken = Vec::new();
        let mut kept = Vec::new();
        for mut batch in std::mem::take(&mut self.in_flight) {
            if batch.until <= now {
                let drainer = batch.drainer;
                self.copied
                    .extend(batch.unlocks.iter().map(|u| (drainer, u.args.uid.clone())));
                self.pending.extend(batch.unlocks);
            } else if hurried(&batch) {
                // Only the unlocks this call has not taken yet: those it
                // took before stay with the batch's task, which may send
                // them (once per call, even beside newer unlocks).
                let call = hurry.map(|(_, call)| call).unwrap_or_default();
                let (mut mine, rest): (Unlocks, Unlocks) = batch
                    .unlocks
                    .into_iter()
                    .partition(|u| !u.hurried.contains(&call));
                for unlock in &mut mine {
                    unlock.hurried.push(call);
                    self.copied.push((batch.drainer, unlock.args.uid.clone()));
                }
                taken.extend(mine);
                batch.unlocks = rest;
                if !batch.unlocks.is_empty() {
                    kept.push(batch);
                }
            } else {
                kept.push(batch);
            }
        }
        self.in_flight = kept;
        // Copies of one unlock on their way in several batches (another
        // call's and a drain task's, say) are taken in one look: sent once.
        merged(taken).0
    }

    /// The unlocks of `uids` landed (sent by a `finish_releases` call): an
    /// unlock goes by uid, so their copies queued or on their way with
    /// other tasks or calls (but a straggler watch's) are moot. Those go,
    /// noted as taken back from their tasks (which then queue none of them
    /// again).
    pub(crate) fn landed(&mut self, uids: &[Arc<str>]) {
        if uids.is_empty() {
            return;
        }
        self.pending.retain(|p| !uids.contains(&p.args.uid));
        // Not a straggler watch's record: it stands for a lock call that may
        // still grant after this unlock landed.
        for batch in self.in_flight.iter_mut().filter(|batch| batch.hurry) {
            let drainer = batch.drainer;
            let copied = &mut self.copied;
            batch.unlocks.retain(|u| {
                let moot = uids.contains(&u.args.uid);
                if moot {
                    copied.push((drainer, u.args.uid.clone()));
                }
                !moot
            });
        }
        self.in_flight.retain(|batch| !batch.unlocks.is_empty());
        for uid in uids {
            if !self.landed_copies.contains(uid) && self.copied.iter().any(|(_, c)| c == uid) {
                self.landed_copies.push(uid.clone());
            }
        }
    }

    /// Whether an unlock of `uid` landed (sent by a `finish_releases`
    /// call) while its release, whose batch the call took it from, still
    /// runs: a retry of that release's own is moot, as its queued copies
    /// were made at the landing. The landing ends the release as the
    /// release's own landing would have: what an unlock that landed does
    /// not cover (a lock call of the uid still on its way) has its own
    /// undo, queued by the call's `Owed`, which this does not touch.
    pub(crate) fn saw_land(&self, uid: &str) -> bool {
        self.landed_copies.iter().any(|landed| &**landed == uid)
    }

    /// The unlock of `uid` landed, sent by its release:
    /// if a `finish_releases` call took back a copy of it (which it may
    /// have queued again when its own send failed), that copy is moot, as
    /// in [`landed`](Self::landed). Only then: the check costs a look at
    /// the copies taken back, usually none, where `landed` walks the
    /// queue.
    pub(crate) fn landed_if_copied(&mut self, uid: &Arc<str>) {
        // A copy queued again after the batch it was taken from ended is no
        // longer recorded as taken back: found in the queue instead (empty
        // but while a locker fails, so the look costs nothing then).
        if self.copied.iter().any(|(_, copied)| copied == uid)
            || self.pending.iter().any(|p| p.args.uid == *uid)
        {
            self.landed(std::slice::from_ref(uid));
        }
    }

    /// The `finish_releases` call numbered `call` ended: its number goes
    /// from every unlock here that it took back.
    pub(crate) fn forget_call(&mut self, call: u64) {
        let in_flight = self.in_flight.iter_mut().flat_map(|b| b.unlocks.iter_mut());
        for unlock in self.pending.iter_mut().chain(in_flight) {
            unlock.hurried.retain(|c| *c != call);
        }
    }
}

/// What makes copies one unlock: its uid and mode (write or not).
type Key = (Arc<str>, bool);

/// Where each unlock of a merged list is, by its [`Key`].
type Places = std::collections::HashMap<Key, usize>;

fn key_of(unlock: &PendingUnlock) -> Key {
    (unlock.args.uid.clone(), unlock.mode == LockMode::Write)
}

/// `unlocks` with the copies of each one merged ([`PendingUnlock::absorb`]),
/// in their first copy's order, and where each one is.
fn merged(unlocks: impl IntoIterator<Item = PendingUnlock>) -> (Vec<PendingUnlock>, Places) {
    let mut merged: Vec<PendingUnlock> = Vec::new();
    let mut seen = Places::new();
    for unlock in unlocks {
        match seen.get(&key_of(&unlock)) {
            Some(&at) => merged[at].absorb(unlock),
            None => {
                seen.insert(key_of(&unlock), merged.len());
                merged.push(unlock);
            }
        }
    }
    (merged, seen)
}

/// The uids of a batch's unlocks that were taken back from its task: see
/// [`QueueState::finish_batch`].
#[must_use]
pub(crate) struct Copied(Vec<Arc<str>>);

impl Copied {
    /// Whether `unlock`, which failed in its task, is to be queued again:
    /// not when a copy of it was taken back and queued.
    pub(crate) fn keeps(&self, unlock: &PendingUnlock) -> bool {
        !self.0.contains(&unlock.args.uid)
    }
}

impl UnlockQueue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
