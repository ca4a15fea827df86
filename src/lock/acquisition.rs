//! What one acquisition knows, shared by the round that makes it, the
//! calls still in flight, the guard that holds it, the keeper that refreshes
//! it and the releases that end it: its uid and arguments, and how each
//! locker answered.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::task::Waker;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::lock::coordinator::Coordinator;
use crate::lock::loss::{HeldOff, Holder, LossSignal};
use crate::lock::per_locker::PerLocker;
use crate::locker::wait::{PushEvent, PushSink};
use crate::quorum::clock::after;
use crate::quorum::{read_quorum, write_quorum, Answer};
use crate::{LockArgs, LockMode};

/// What one acquisition knows about each locker, shared by the caller, the
/// calls still in flight and, once granted, the guard.
pub(crate) struct Acquisition {
    pub(crate) coord: Arc<Coordinator>,
    pub(crate) args: LockArgs,
    pub(crate) mode: LockMode,
    /// When the lock calls were sent. Every grant happened after this, so
    /// no locker can expire the entry before `started + validity`.
    pub(crate) started: Instant,
    /// The fencing token, once a holder asked for it.
    pub(crate) token: OnceCell<u64>,
    /// Orders requests and recorded grants: see [`record_reply`](Self::record_reply).
    stamps: AtomicU64,
    slots: Mutex<Slots>,
    /// Woken each time a lock or wait call settles (answered or dropped):
    /// for `release::watch_stragglers`.
    calls_settled: tokio::sync::Notify,
    /// The record a straggler watch keeps on the queues of the lockers it
    /// watches (`release::watch_stragglers`; dropping it ends the record).
    /// It ends when the last call settles, wherever that happens: the
    /// watch's own runtime may no longer be driven (a guard dropped as its
    /// `block_on` returned) while the calls settle on the runtime that sent
    /// them, and `finish_releases` must not wait for a record of calls that
    /// ended.
    watch_record: Mutex<Option<Box<dyn Send>>>,
    /// The held lock's loss signal, set once when its guard is made (see
    /// [`Loss`]): inline, so a lock costs one allocation for both.
    loss: OnceLock<LossSignal>,
}

impl Acquisition {
    /// A new acquisition of `resources` in `mode` with a fresh uid, starting
    /// now: what one round or one wait sends to every locker.
    pub(crate) fn begin(
        coord: &Arc<Coordinator>,
        resources: &Arc<[String]>,
        source: &Arc<str>,
        mode: LockMode,
    ) -> Arc<Acquisition> {
        let n = coord.lockers.len();
        let quorum = match mode {
            LockMode::Write => write_quorum(n),
            LockMode::Read => read_quorum(n),
        };
        let args = LockArgs {
            uid: fresh_uid(),
            resources: resources.clone(),
            owner: coord.owner.clone(),
            source: source.clone(),
            quorum,
        };
        Arc::new(Acquisition::new(
            coord.clone(),
            args,
            mode,
            coord.clock.now(),
        ))
    }

    pub(crate) fn new(
        coord: Arc<Coordinator>,
        args: LockArgs,
        mode: LockMode,
        started: Instant,
    ) -> Self {
        let n = coord.lockers.len();
        Acquisition {
            coord,
            args,
            mode,
            started,
            token: OnceCell::new(),
            stamps: AtomicU64::new(0),
            calls_settled: tokio::sync::Notify::new(),
            watch_record: Mutex::new(None),
            loss: OnceLock::new(),
            slots: Mutex::new(Slots {
                slots: PerLocker::from_elem(
                    Slot {
                        answer: None,
                        alive_since: started,
                        granted_stamp: 0,
                        refreshes_out: 0,
                        refresh_reached: false,
                        calls_out: 0,
                        failed_sent: false,
                    },
                    n,
                ),
                released: false,
                wounded: false,
                held: false,
                trust_from: started,
                waker: None,
                held_off: None,
            }),
        }
    }
}

/// A random version-4 UUID in its hyphenated form: formatted on the stack,
/// so the uid costs one allocation, its `Arc<str>`.
fn fresh_uid() -> Arc<str> {
    let mut text = uuid::Uuid::encode_buffer();
    Arc::from(&*uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text))
}

struct Slots {
    /// `None` while the locker has not answered. Inline in the
    /// acquisition's own allocation on the usual cluster sizes.
    slots: PerLocker<Slot>,
    /// Set once the acquisition is abandoned or released. Any grant that is
    /// recorded afterwards must be undone by whoever records it.
    released: bool,
    /// An older waiter waits behind one of this wait's grants.
    wounded: bool,
    /// The wait won: wounds no longer matter.
    held: bool,
    /// Where the holder's trust starts, fixed when the wait wins.
    trust_from: Instant,
    /// The task waiting for replies and pushes.
    waker: Option<Waker>,
    /// Set when the lock is declared lost: until the safety margin has
    /// passed (the instant) or the holder let go (its loss signal), no
    /// unlock of this uid may be sent, whatever sends it (see
    /// [`Acquisition::held_off`]).
    held_off: Option<Instant>,
}

/// The loss signal of a held lock, kept in its acquisition's allocation.
///
/// Invariant: a `Loss` exists only for an acquisition whose signal is set
/// ([`Loss::start`] sets it), so dereferencing one always finds it.
#[derive(Clone)]
pub(crate) struct Loss(Arc<Acquisition>);

impl Loss {
    /// The loss signal of `state`, a lock held from `base` and lost at
    /// `base + trusted_for` unless refreshed: set here, once per
    /// acquisition (one guard is made per acquisition).
    pub(crate) fn start(
        state: &Arc<Acquisition>,
        clock: crate::quorum::clock::Clock,
        base: Instant,
        trusted_for: std::time::Duration,
    ) -> Loss {
        state
            .loss
            .get_or_init(|| LossSignal::new(clock, base, trusted_for));
        Loss(state.clone())
    }
}

impl Deref for Loss {
    type Target = LossSignal;

    fn deref(&self) -> &LossSignal {
        // Set by `Loss::start`, the only way to make a `Loss`, and never
        // unset.
        self.0
            .loss
            .get()
            .expect("a Loss is made only after its signal is set")
    }
}

impl Loss {
    /// The hold of this lost lock on its entries until `not_before`.
    pub(crate) fn held_off(&self, not_before: Instant) -> HeldOff {
        let holder: Weak<dyn Holder> = Arc::downgrade(&self.0) as Weak<dyn Holder>;
        HeldOff { not_before, holder }
    }
}

impl Holder for Acquisition {
    fn holder_has_stopped(&self) -> bool {
        self.loss.get().is_some_and(LossSignal::holder_has_stopped)
    }
}

/// What an acquisition knows about one locker.
#[derive(Clone, Copy)]
struct Slot {
    /// `None` while the locker has not answered.
    answer: Option<Answer>,
    /// A moment before which no grant or refresh of this uid happened that
    /// the locker still counts from: the send time of the latest request it
    /// answered. A grant's entry lives at least the validity after this,
    /// which is what the holder's trust starts from.
    alive_since: Instant,
    /// The stamp at which its grant was recorded: a later reply counts only
    /// if its request was sent after that, since an earlier one may have
    /// been answered before the grant was pushed.
    granted_stamp: u64,
    /// Refreshes sent to it whose outcome is not known yet.
    refreshes_out: u32,
    /// A refresh may have reached it and been applied: sent, and neither
    /// answered "not held" nor failed before it was sent. A locker in
    /// quarantine re-creates a missing entry on a refresh, so one that
    /// refused the grant may hold the entry since.
    refresh_reached: bool,
    /// A lock or wait call to it failed after it may have been sent (timed
    /// out, its reply lost, dropped in flight): that request may still
    /// arrive and be granted, whatever the locker answers a later call (a
    /// locker without queues refuses a retry while the lock is held
    /// elsewhere, then grants the late first request).
    failed_sent: bool,
    /// Lock and wait calls sent to it that have neither settled (their
    /// answer recorded) nor been dropped: whatever its last answer says, a
    /// call still on its way may grant.
    calls_out: u32,
}

impl Slot {
    /// Whether the locker may hold this uid's entry, its call having
    /// answered `answer`: anything but a refusal may be a grant, and a
    /// refusal that arrived after a refresh was sent there (a lock call's
    /// late reply) may have been undone by that refresh, as
    /// [`Acquisition::begin_release`] counts it.
    fn may_hold_after(&self, answer: Answer) -> bool {
        let refreshed = self.refresh_reached || self.refreshes_out > 0;
        match answer {
            Answer::Refused => refreshed || self.failed_sent,
            Answer::Failed | Answer::Granted | Answer::Queued => true,
        }
    }
}

/// A refresh sent to one locker, counted by the acquisition's release
/// plan until it is settled; see [`Acquisition::refresh_sending`].
pub(crate) struct RefreshSent {
    state: Arc<Acquisition>,
    index: usize,
    settled: bool,
}

impl RefreshSent {
    /// The refresh ended: `applied` unless the locker answered "not held"
    /// or the call failed before it was sent.
    pub(crate) fn settle(mut self, applied: bool) {
        self.settled = true;
        self.end(applied);
    }

    fn end(&self, applied: bool) {
        let mut slots = self.state.slots();
        if let Some(slot) = slots.slots.get_mut(self.index) {
            slot.refreshes_out = slot.refreshes_out.saturating_sub(1);
            slot.refresh_reached |= applied;
        }
    }
}

impl Drop for RefreshSent {
    fn drop(&mut self) {
        if !self.settled {
            // Dropped on its way: it may still arrive.
            self.end(true);
        }
    }
}

/// Whether a wait has won; see [`Acquisition::try_win`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Win {
    /// Not (yet) a quorum of grants, or given up.
    Open,
    /// The caller holds the lock.
    Won,
    /// A quorum granted, but every quorum of those grants is older than the
    /// lease trusts: the lock would be lost before the caller saw it.
    Stale,
}

/// A locker to unlock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target {
    pub(crate) index: usize,
    /// Whether it granted. A locker whose call failed may or may not hold
    /// the entry, so it is unlocked too, but without the quick retries a
    /// waiting `unlock()` gives a grant: its retries go straight to the
    /// locker's background queue.
    pub(crate) granted: bool,
}

/// Who to unlock when an acquisition ends.
#[derive(Default)]
pub(crate) struct ReleasePlan {
    /// Lockers that granted, or failed in a way that may hide a grant.
    pub(crate) targets: PerLocker<Target>,
    /// Lockers that refused: they never held this uid.
    pub(crate) refused: usize,
    /// Lockers with a lock or wait call still in flight.
    pub(crate) in_flight: PerLocker<usize>,
}

impl Acquisition {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records locker `index`'s answer. Returns `true` when the acquisition
    /// was already released and the answer may be a grant, so the caller
    /// must unlock that locker itself.
    pub(crate) fn record(&self, index: usize, answer: Answer) -> bool {
        let mut slots = self.slots();
        let released = slots.released;
        let slot = &mut slots.slots[index];
        slot.answer = Some(answer);
        released && slot.may_hold_after(answer)
    }

    /// A lock or wait call to locker `index` failed after it may have been
    /// sent: see `Slot::failed_sent`. Called before its answer is recorded.
    pub(crate) fn note_failed_send(&self, index: usize) {
        if let Some(slot) = self.slots().slots.get_mut(index) {
            slot.failed_sent = true;
        }
    }

    /// Records that a call to locker `index` was refused before it was
    /// sent (the locker no longer honours the lease): that locker counts as
    /// down (a failure) where it never answered, not as a refusal, which
    /// would end a wait that a quorum of the others can still win, giving
    /// up its places in line. A grant or a place it gave before stays
    /// recorded, for the release to undo; [`try_win`](Self::try_win) does
    /// not count such a grant.
    pub(crate) fn record_unsent(&self, index: usize) {
        if let Some(slot) = self.slots().slots.get_mut(index)
            && slot.answer.is_none()
        {
            slot.answer = Some(Answer::Failed);
        }
    }

    /// A stamp for a request about to be sent: see [`record_reply`](Self::record_reply).
    pub(crate) fn stamp(&self) -> u64 {
        self.stamps.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Records a waiting request's answer from locker `index`: the request
    /// was sent at `sent` with `stamp`. A grant recorded after the request
    /// was sent (pushed while it was in flight) wins over a stale "queued".
    /// A failed request leaves a grant counted (the entry lives its validity
    /// whether or not this request arrived), unless `forgot`: the locker
    /// said it restarted since, and so may have forgotten the grant.
    /// Returns `true` when the acquisition was already released and the
    /// locker may hold a grant or a place, so the caller must unlock it.
    pub(crate) fn record_reply(
        &self,
        index: usize,
        answer: Answer,
        sent: Instant,
        stamp: u64,
        forgot: bool,
    ) -> bool {
        let mut slots = self.slots();
        let released = slots.released;
        let slot = &mut slots.slots[index];
        let granted = slot.answer == Some(Answer::Granted);
        let stale = granted && stamp < slot.granted_stamp;
        if answer != Answer::Failed && !stale {
            slot.alive_since = slot.alive_since.max(sent);
        }
        if forgot || !(stale || granted && answer == Answer::Failed) {
            slot.answer = Some(answer);
        }
        if answer == Answer::Granted {
            slot.granted_stamp = self.stamp();
        }
        released && slot.may_hold_after(answer)
    }

    /// Registers the task to wake when an answer or a push arrives.
    pub(crate) fn set_waker(&self, waker: &std::task::Waker) {
        let mut slots = self.slots();
        if !slots.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            slots.waker = Some(waker.clone());
        }
    }

    /// How locker `index` answered last.
    pub(crate) fn answer(&self, index: usize) -> Option<Answer> {
        self.slots().slots[index].answer
    }

    /// How each locker answered last, in the order of the lockers.
    ///
    /// A grant that no request has renewed for the lease's trust window
    /// reads as failed: the wait keeps counting it for its win (the win
    /// checks its age), but the locker may have expired it since, and
    /// saying it still grants would blame a holder for a locker that is
    /// out of reach.
    pub(crate) fn answers(&self) -> Vec<Option<Answer>> {
        let now = self.coord.clock.now();
        let trusted_for = self.coord.lease.trusted_for();
        self.slots()
            .slots
            .iter()
            .map(|s| match s.answer {
                Some(Answer::Granted) if after(s.alive_since, trusted_for) <= now => {
                    Some(Answer::Failed)
                }
                answer => answer,
            })
            .collect()
    }

    /// For each locker, the send time of the latest request it answered
    /// (see `Slot::alive_since`): calls asked before it are no news of a
    /// locker that answered it.
    pub(crate) fn answered_since(&self) -> Vec<Instant> {
        self.slots().slots.iter().map(|s| s.alive_since).collect()
    }

    /// Whether a locker refused without keeping a place in line.
    pub(crate) fn refused_without_place(&self) -> bool {
        self.slots()
            .slots
            .iter()
            .any(|s| s.answer == Some(Answer::Refused))
    }

    /// Whether an older waiter asked this wait to step back.
    pub(crate) fn is_wounded(&self) -> bool {
        self.slots().wounded
    }

    /// Wins the wait if a quorum granted, it is still open and the lock
    /// those grants make is still trusted; fixes where the holder's trust
    /// starts.
    ///
    /// The trust starts at the quorum-th latest `alive_since` among the
    /// lockers that granted, not at the earliest: a conflicting grant needs
    /// all but `quorum - 1` of this wait's grants gone (a writer needs `W`
    /// lockers free, a reader `R`, and `n - W < R`, `n - R < W`), and no
    /// grant goes before the validity after its `alive_since`. So a locker
    /// whose grant came only by push, long after its last answered request,
    /// does not cut short a lock that a quorum of fresh grants holds.
    ///
    /// A quorum of grants may still all be older than the lease trusts: a
    /// locker's replies time out while its pushes arrive, or the task was
    /// stalled. Handing that out would give the caller a guard lost before
    /// it saw it, so the wait reports [`Win::Stale`] and stays open, for the
    /// caller to give its grants back and wait again.
    pub(crate) fn try_win(&self) -> Win {
        let mut slots = self.slots();
        if slots.held {
            return Win::Won;
        }
        if slots.released {
            return Win::Open;
        }
        let quorum = self.args.quorum.max(1);
        // A grant of a locker that no longer honours the lease (it
        // restarted announcing a shorter validity, say) is not counted on.
        let coord = &self.coord;
        let granted = || {
            slots
                .slots
                .iter()
                .enumerate()
                .filter(|(index, slot)| {
                    slot.answer == Some(Answer::Granted) && coord.lease_honoured(*index)
                })
                .map(|(_, slot)| slot.alive_since)
        };
        if granted().count() < quorum {
            return Win::Open;
        }
        // The quorum-th latest: the latest moment that at least `quorum`
        // grants are alive since. Quadratic, without allocating, on this
        // hot path; n is small.
        let Some(trust_from) = granted()
            .filter(|&since| granted().filter(|&other| other >= since).count() >= quorum)
            .max()
        else {
            return Win::Open;
        };
        let trusted_for = self.coord.lease.trusted_for();
        if after(trust_from, trusted_for) <= self.coord.clock.now() {
            return Win::Stale;
        }
        slots.held = true;
        slots.trust_from = trust_from;
        Win::Won
    }

    /// Where the holder's trust in the lock starts: when the round was sent
    /// for a lock granted on the reply, later for one that waited in line.
    pub(crate) fn trust_from(&self) -> Instant {
        self.slots().trust_from
    }

    /// Marks the acquisition released and says which lockers to unlock.
    /// Lockers with a call still in flight are listed apart, for
    /// `release::watch_stragglers` in case it never finishes (a call that
    /// finishes undoes its own grant); one whose last answer was a refusal
    /// is not counted as refused. A second call returns an empty plan.
    pub(crate) fn begin_release(&self) -> ReleasePlan {
        let mut slots = self.slots();
        if slots.released {
            return ReleasePlan::default();
        }
        slots.released = true;
        let mut plan = ReleasePlan::default();
        for (index, slot) in slots.slots.iter().enumerate() {
            // A call on its way may grant whatever the last answer said:
            // watched until it settles (it undoes its own grant then), and
            // never counted as a refusal.
            let calling = slot.calls_out > 0;
            if calling {
                plan.in_flight.push(index);
            }
            match &slot.answer {
                Some(Answer::Refused) if calling => {}
                // A refresh that may have reached it, or is still on its
                // way, may have re-created the entry: released like a
                // failed grant. Only a refusal no refresh can have undone
                // counts as released at once.
                Some(Answer::Refused) if slot.may_hold_after(Answer::Refused) => {
                    plan.targets.push(Target {
                        index,
                        granted: false,
                    })
                }
                Some(Answer::Refused) => plan.refused += 1,
                Some(answer @ (Answer::Granted | Answer::Failed | Answer::Queued)) => {
                    plan.targets.push(Target {
                        index,
                        granted: *answer == Answer::Granted,
                    })
                }
                None => {}
            }
        }
        plan
    }

    /// A refresh is about to be sent to locker `index`. `None` once the
    /// release has begun: its plan is made, so nothing may be sent that it
    /// does not cover. Otherwise the ticket counts the refresh as possibly
    /// applied there until it is settled otherwise, also if it is dropped
    /// unanswered (a round that a quorum settled drops its stragglers, and
    /// the request may still arrive).
    pub(crate) fn refresh_sending(self: &Arc<Self>, index: usize) -> Option<RefreshSent> {
        let mut slots = self.slots();
        if slots.released {
            return None;
        }
        let slot = slots.slots.get_mut(index)?;
        slot.refreshes_out = slot.refreshes_out.saturating_add(1);
        Some(RefreshSent {
            state: self.clone(),
            index,
            settled: false,
        })
    }

    /// A call to locker `index` that may have been applied (a lock, a wait,
    /// an unlock) was dropped in flight. Returns whether its unlock must be
    /// sent now: the acquisition is released. Otherwise it is held (a won
    /// round's straggler, a re-check of a won wait) and the locker may
    /// hold what the lock counts on: the release plan will target it.
    /// `counted`: a lock or wait call counted by [`call_sent`](Self::call_sent),
    /// which stops counting here when the lock is held; when it is released,
    /// the caller queues the unlock first and then calls
    /// [`dropped_call_queued`](Self::dropped_call_queued), so that the call
    /// is counted out until its unlock is queued (a straggler watch's
    /// record stands for it until then).
    pub(crate) fn call_dropped(&self, index: usize, counted: bool) -> bool {
        let mut slots = self.slots();
        let released = slots.released;
        if let Some(slot) = slots.slots.get_mut(index) {
            if slot.answer != Some(Answer::Granted) {
                slot.answer = Some(Answer::Failed);
            }
            if counted {
                slot.failed_sent = true;
                if !released {
                    slot.calls_out = slot.calls_out.saturating_sub(1);
                }
            }
        }
        drop(slots);
        if counted && !released {
            self.calls_settled.notify_waiters();
        }
        released
    }

    /// The unlock a counted call dropped after the release owes is queued:
    /// the call is no longer out (see [`call_dropped`](Self::call_dropped)).
    pub(crate) fn dropped_call_queued(&self, index: usize) {
        self.call_settled(index);
    }

    /// The lock was declared lost at a moment whose safety margin ends at
    /// `not_before`: from now on every unlock of it waits for that, or for
    /// its holder to let go. Freeing the entries sooner would let another
    /// client in while the holder may still be doing the work the lock
    /// protects (docs/guarantees.md, "A lost lock is freed once its holder
    /// lets go"): the same rule for the clean-up, a straggler's undo, a
    /// dropped call's owed unlock and a re-check that failed after the loss.
    ///
    /// `loss` (this acquisition's own signal) shows the signal is set.
    pub(crate) fn hold_off(&self, not_before: Instant, loss: &Loss) {
        debug_assert!(std::ptr::eq(Arc::as_ptr(&loss.0), self));
        let mut slots = self.slots();
        if slots.held_off.is_none() {
            slots.held_off = Some(not_before);
        }
    }

    /// Whether the lock was declared lost (see [`hold_off`](Self::hold_off)).
    pub(crate) fn was_lost(&self) -> bool {
        self.slots().held_off.is_some()
    }

    /// The hold of a lost lock on its entries, while it lasts at `now`:
    /// `None` for a lock not lost, or once the margin passed or the holder
    /// let go.
    pub(crate) fn held_off(self: &Arc<Self>, now: Instant) -> Option<HeldOff> {
        let not_before = self.slots().held_off?;
        let holder: Weak<dyn Holder> = Arc::downgrade(self) as Weak<dyn Holder>;
        let held = HeldOff { not_before, holder };
        (now < not_before && !held.holder_has_stopped()).then_some(held)
    }

    /// Whether a lock or wait call to locker `index` has neither settled
    /// nor been dropped.
    pub(crate) fn in_flight(&self, index: usize) -> bool {
        self.slots()
            .slots
            .get(index)
            .is_some_and(|slot| slot.calls_out > 0)
    }

    /// A lock or wait call to locker `index` is about to be sent: see
    /// [`call_settled`](Self::call_settled).
    pub(crate) fn call_sent(&self, index: usize) {
        if let Some(slot) = self.slots().slots.get_mut(index) {
            slot.calls_out = slot.calls_out.saturating_add(1);
        }
    }

    /// A call counted by [`call_sent`](Self::call_sent) settled: its answer
    /// is recorded (or it was dropped, see [`call_dropped`](Self::call_dropped)).
    pub(crate) fn call_settled(&self, index: usize) {
        if let Some(slot) = self.slots().slots.get_mut(index) {
            slot.calls_out = slot.calls_out.saturating_sub(1);
        }
        self.end_watch_record_if_settled();
        self.calls_settled.notify_waiters();
    }

    /// Ends the straggler watch's record (see `watch_record`) once no lock
    /// or wait call is out: called after a call settled, or after a call
    /// dropped in flight queued the unlock it owes (never before: the
    /// record stands for that unlock until it is queued).
    pub(crate) fn end_watch_record_if_settled(&self) {
        if self.slots().slots.iter().all(|slot| slot.calls_out == 0) {
            drop(self.take_watch_record());
        }
    }

    /// Keeps `record` until every lock or wait call settled (see
    /// `watch_record`); ended at once when none is out now.
    pub(crate) fn keep_watch_record(&self, record: Box<dyn Send>) {
        *self
            .watch_record
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(record);
        self.end_watch_record_if_settled();
    }

    /// The straggler watch's record, taken to end it.
    pub(crate) fn take_watch_record(&self) -> Option<Box<dyn Send>> {
        self.watch_record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Resolves at the next [`call_settled`](Self::call_settled) after it
    /// was enabled.
    pub(crate) fn a_call_settles(&self) -> tokio::sync::futures::Notified<'_> {
        self.calls_settled.notified()
    }

    /// Whether a release has begun.
    pub(crate) fn is_released(&self) -> bool {
        self.slots().released
    }

    /// The lockers that currently hold a grant for this acquisition.
    pub(crate) fn granted(&self) -> usize {
        let slots = self.slots();
        slots
            .slots
            .iter()
            .filter(|s| s.answer == Some(Answer::Granted))
            .count()
    }
}

impl PushSink for Acquisition {
    fn push(&self, slot: usize, uid: &str, event: PushEvent) {
        if uid != &*self.args.uid || slot >= self.coord.lockers.len() {
            return;
        }
        let mut slots = self.slots();
        match event {
            PushEvent::Granted => {
                // A grant pushed after the release is undone by the unlock
                // already sent for the place it was granted from.
                let stamp = self.stamp();
                let slot = &mut slots.slots[slot];
                slot.answer = Some(Answer::Granted);
                slot.granted_stamp = stamp;
            }
            PushEvent::Wounded if !slots.held => slots.wounded = true,
            PushEvent::Wounded | PushEvent::Changed => return,
        }
        if let Some(waker) = slots.waker.take() {
            drop(slots);
            waker.wake();
        }
    }
}
