//! Running one call per locker at once, and handing the stragglers to the
//! runtime when the caller stops waiting for them.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::lock::coordinator::{CallSeq, Coordinator, Outstanding, Waited};
use crate::lock::own_runtime::OwnRuntime;
use crate::lock::per_locker::PerLocker;
use crate::lock::telemetry::CallKind;
use crate::quorum::clock::{Clock, Sleep};
use crate::quorum::deadline::{gather, within, FanOutTimer};
use crate::Error;

/// One in-flight call. It owns what it needs, so it can outlive its caller.
pub(crate) type Call<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A call as it was started: answered already, by a locker that answers at
/// once (see [`ImmediateLocker`](crate::ImmediateLocker)), or in flight.
/// An answered call allocates nothing.
pub(crate) enum Started<T> {
    Answered(T),
    Running(Call<T>),
}

enum Slot<T> {
    Answered(T),
    Running(Call<T>),
    Done,
}

impl<T> From<Started<T>> for Slot<T> {
    fn from(started: Started<T>) -> Self {
        match started {
            Started::Answered(out) => Slot::Answered(out),
            Started::Running(call) => Slot::Running(call),
        }
    }
}

/// The calls of one fan-out, polled together.
///
/// Each call must finish its own bookkeeping (recording a grant, undoing it)
/// inside its future, or before it is added as answered. That is what makes
/// dropping a `CallSet` safe: the calls still running are moved to a
/// background task and complete there, so a grant that arrives after the
/// caller gave up is still seen and undone.
pub(crate) struct CallSet<T: Send + 'static> {
    /// Inline up to the usual cluster sizes: a fan-out whose lockers all
    /// answered at once allocates nothing.
    calls: PerLocker<Slot<T>>,
    running: usize,
    /// Set while the caller waits for the calls; cleared when a quorum
    /// settled them ([`CallSet::settle`]). Calls note it as they are asked
    /// (see [`WAITED`]). Made when a running call is first polled: calls
    /// answered at once never ask for it.
    waited: Option<Waited>,
    /// [`CallSet::settle`] was called: a flag made after it starts cleared.
    settled: bool,
    /// What becomes of the calls still running when the set is dropped.
    handoff: Handoff,
    /// Wakes the caller at the earliest deadline of a call still running.
    timer: FanOutTimer,
    /// The runtime that first polled a running call (its id), once one
    /// did: the one a dropped set's calls may stay on.
    home: Option<Option<tokio::runtime::Id>>,
}

/// What a dropped [`CallSet`] does with its calls still running.
enum Handoff {
    /// They are dropped: their late effect is unwanted.
    Drop,
    /// Handed on ([`CallSet::handoff_runtime`]), counted among the
    /// coordinator's outstanding releases (a straggler may be a grant it
    /// must undo).
    Counted(Arc<Outstanding>, Arc<OwnRuntime>),
    /// Handed on, not counted, so that a call stuck on a
    /// runtime no longer driven holds nothing up: a lock or wait call,
    /// which its acquisition's release watches and records on the lockers'
    /// queues (`release::watch_stragglers`), and covers by others; or an
    /// election's read or proclamation, which no release waits for (a late
    /// read leaves a watch that ends with its time to live; a late
    /// proclamation is stored with an entry its holder holds, or refused).
    Uncounted(Arc<OwnRuntime>),
}

impl<T: Send + 'static> CallSet<T> {
    pub(crate) fn new(coord: &Coordinator, calls: impl IntoIterator<Item = Started<T>>) -> Self {
        Self::build(
            Handoff::Counted(coord.outstanding.clone(), coord.own_runtime.clone()),
            calls,
        )
    }

    /// A set of lock or wait calls, or of an election's reads or
    /// proclamations: those still running when it is dropped go on on that
    /// runtime, not counted among the outstanding releases (see
    /// [`Handoff::Uncounted`]).
    pub(crate) fn uncounted(
        coord: &Coordinator,
        calls: impl IntoIterator<Item = Started<T>>,
    ) -> Self {
        Self::build(Handoff::Uncounted(coord.own_runtime.clone()), calls)
    }

    /// A set whose unfinished calls are simply dropped with it: for calls
    /// whose late effect is unwanted, such as a refresh after a release.
    pub(crate) fn dropping(calls: impl IntoIterator<Item = Call<T>>) -> Self {
        Self::build(Handoff::Drop, calls.into_iter().map(Started::Running))
    }

    fn build(handoff: Handoff, calls: impl IntoIterator<Item = Started<T>>) -> Self {
        let calls: PerLocker<Slot<T>> = calls.into_iter().map(Slot::from).collect();
        CallSet {
            running: calls.len(),
            calls,
            handoff,
            waited: None,
            settled: false,
            timer: FanOutTimer::default(),
            home: None,
        }
    }

    /// Calls that have not finished yet.
    pub(crate) fn running(&self) -> usize {
        self.running
    }

    /// Whether call `index` is still running.
    pub(crate) fn is_running(&self, index: usize) -> bool {
        self.calls
            .get(index)
            .is_some_and(|slot| !matches!(slot, Slot::Done))
    }

    /// The caller has what it needed from these calls (a quorum settled
    /// the round, or granted the wait): those still running are
    /// stragglers nobody waits for, so their silence says nothing of their
    /// lockers. A set dropped without this (its caller cancelled or gave
    /// up, and may say why it waited, from these calls, right after) leaves
    /// its calls counted until they end, by their own deadline at most.
    pub(crate) fn settle(&mut self) {
        self.settled = true;
        if let Some(waited) = &self.waited {
            waited.store(false, Ordering::Relaxed);
        }
    }

    /// Starts `call` in slot `index`, which must have finished.
    pub(crate) fn restart(&mut self, index: usize, call: Started<T>) {
        if let Some(slot @ Slot::Done) = self.calls.get_mut(index) {
            *slot = call.into();
            self.running += 1;
        }
    }

    /// Polls every unfinished call once and passes each result that is ready
    /// to `done`, with the call's index. Polling all of them, rather than
    /// stopping at the first result, means lockers that answer at once are
    /// all counted in the same pass and never need a background task.
    ///
    /// The calls' deadlines are kept by one timer of the set's (see
    /// `quorum::deadline`): a call waiting for a reply arms none of its own.
    pub(crate) fn poll_all(&mut self, cx: &mut Context<'_>, done: impl FnMut(usize, T)) {
        let mut timer = std::mem::take(&mut self.timer);
        timer.poll_calls(cx, |cx| self.poll_each(cx, done));
        self.timer = timer;
    }

    /// [`poll_all`](Self::poll_all) for a caller that polls a timer of its
    /// own on `clock` whenever it waits: returns the earliest deadline the
    /// calls still running asked to be woken at (on `clock`), which the
    /// caller's timer must not be later than, so that the set arms no
    /// second timer. On a clock other than tokio's the set keeps its own
    /// timer, and this returns `None`.
    pub(crate) fn poll_all_waking_by(
        &mut self,
        cx: &mut Context<'_>,
        clock: &Clock,
        done: impl FnMut(usize, T),
    ) -> Option<Instant> {
        match clock {
            Clock::Tokio => gather(cx, |cx| self.poll_each(cx, done)).1,
            #[cfg(feature = "testing")]
            Clock::Drift(_) => {
                self.poll_all(cx, done);
                None
            }
        }
    }

    fn poll_each(&mut self, cx: &mut Context<'_>, mut done: impl FnMut(usize, T)) {
        for (index, slot) in self.calls.iter_mut().enumerate() {
            let out = match std::mem::replace(slot, Slot::Done) {
                Slot::Done => continue,
                Slot::Answered(out) => out,
                Slot::Running(mut call) => {
                    self.home
                        .get_or_insert_with(|| Handle::try_current().ok().map(|h| h.id()));
                    let waited = self
                        .waited
                        .get_or_insert_with(|| Arc::new(AtomicBool::new(!self.settled)));
                    match polled_for(waited, || call.as_mut().poll(cx)) {
                        Poll::Ready(out) => out,
                        Poll::Pending => {
                            *slot = Slot::Running(call);
                            continue;
                        }
                    }
                }
            };
            self.running -= 1;
            done(index, out);
        }
    }
}

/// Polls the timer of a fan-out's owner (a round, a release), set for the
/// earlier of the owner's `deadline` and `wake`, the earliest deadline its
/// calls asked for ([`CallSet::poll_all_waking_by`]). `Ready` once
/// `deadline` has passed; a call's earlier deadline wakes the task to
/// poll the calls again, and they end.
pub(crate) fn poll_deadline(
    cx: &mut Context<'_>,
    clock: &Clock,
    timer: &mut Option<Sleep>,
    deadline: Instant,
    wake: Option<Instant>,
) -> Poll<()> {
    let at = wake.map_or(deadline, |wake| wake.min(deadline));
    let timer = timer.get_or_insert_with(|| clock.sleep_until(at));
    if timer.deadline() != at {
        timer.reset(at);
    }
    match Pin::new(timer).poll(cx) {
        Poll::Ready(()) if at >= deadline => Poll::Ready(()),
        Poll::Ready(()) => {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Poll::Pending => Poll::Pending,
    }
}

impl<T: Send + 'static> CallSet<T> {
    /// The calls still running, taken out of the set.
    fn take_running(&mut self) -> Vec<Call<T>> {
        self.running = 0;
        // Answered calls finished their bookkeeping when they were started.
        self.calls
            .drain(..)
            .filter_map(|slot| match slot {
                Slot::Running(call) => Some(call),
                Slot::Answered(_) | Slot::Done => None,
            })
            .collect()
    }

    /// Where the calls still running go when the set is dropped: the
    /// current runtime if it is the one that polled them (or none did),
    /// which has timers and is being driven; otherwise (dropped on another
    /// runtime, or outside any) the coordinator's own, since the one that
    /// polled them may be gone, idle, or the current one without timers,
    /// and a call's timer is made on the runtime that polls it
    /// (`quorum::deadline::within`). `None` when the set drops its calls,
    /// or no runtime of the coordinator's can be started: they are
    /// dropped then, and a lock or release call dropped in flight queues
    /// its unlock (`release::Owed`).
    fn handoff_runtime(&self) -> Option<Handle> {
        let own = match &self.handoff {
            Handoff::Drop => return None,
            Handoff::Counted(_, own) | Handoff::Uncounted(own) => own,
        };
        match (Handle::try_current(), self.home) {
            (Ok(current), None) => Some(current),
            (Ok(current), Some(home)) if home == Some(current.id()) => Some(current),
            _ => own.handle(),
        }
    }

    /// Hands the unfinished calls on, as dropping the set does, but
    /// recorded by `owed` (dropped once they finish) instead of counted
    /// among the outstanding releases: `owed` records them on the lockers'
    /// queues with a deadline, so that if the runtime they run on is no
    /// longer driven another sends them once they are overdue, and
    /// `Dsync::finish_releases` is not held up by a task that never runs.
    pub(crate) fn hand_off_owed<O: Send + 'static>(mut self, owed: O) {
        let Some(handle) = self.handoff_runtime() else {
            return;
        };
        let rest = self.take_running();
        if rest.is_empty() {
            return;
        }
        handle.spawn(async move {
            finish_all(rest).await;
            drop(owed);
        });
    }
}

impl<T: Send + 'static> Drop for CallSet<T> {
    fn drop(&mut self) {
        if matches!(self.handoff, Handoff::Drop) || self.running == 0 {
            return;
        }
        let rest = self.take_running();
        if rest.is_empty() {
            return;
        }
        let Some(handle) = self.handoff_runtime() else {
            return;
        };
        let counted = match &self.handoff {
            Handoff::Counted(outstanding, _) => Some(outstanding.begin()),
            Handoff::Drop | Handoff::Uncounted(_) => None,
        };
        handle.spawn(async move {
            finish_all(rest).await;
            drop(counted);
        });
    }
}

/// Runs handed-off `calls` to their end. One that panics (a locker's own
/// timer, made on a runtime since shut down, panics when polled) is dropped
/// as a runtime shutting down would drop it (a lock call then queues its
/// unlock, `release::Owed`), and the others go on.
async fn finish_all<T>(calls: Vec<Call<T>>) {
    use futures::FutureExt as _;
    let calls = calls
        .into_iter()
        .map(|call| std::panic::AssertUnwindSafe(call).catch_unwind());
    futures::future::join_all(calls).await;
}

thread_local! {
    /// The `waited` flag of the fan-out polling its calls on this thread:
    /// a call asked then is noted with it.
    static WAITED: RefCell<Option<Waited>> = const { RefCell::new(None) };
}

/// Runs `poll` with `waited` as the fan-out whose call is polled.
fn polled_for<R>(waited: &Waited, poll: impl FnOnce() -> R) -> R {
    // Restored however `poll` ends: a locker's call that panics unwinds
    // through here to whatever catches it (the runtime's task harness, a
    // handed-off call's `catch_unwind`), and the thread goes on polling
    // other tasks, whose calls must not be noted with this fan-out's flag.
    struct Restore(Option<Option<Waited>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(before) = self.0.take() {
                WAITED.with(|w| *w.borrow_mut() = before);
            }
        }
    }
    let _restore = Restore(Some(WAITED.with(|w| w.replace(Some(waited.clone())))));
    poll()
}

/// The fan-out a call asked now belongs to, if any.
fn current_waited() -> Option<Waited> {
    WAITED.with(|w| w.borrow().clone())
}

/// Awaits one locker call, failing it with [`Error::LockerTimeout`] when
/// `clock` shows `deadline`. A call that is ready on its first poll (every
/// in-process locker) never touches the timer.
pub(crate) async fn call_with_deadline<F, T>(
    clock: &Clock,
    call: F,
    deadline: Instant,
    endpoint: impl FnOnce() -> String,
) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    let mut call = std::pin::pin!(call);
    if let Poll::Ready(out) = futures::poll!(call.as_mut()) {
        return out;
    }
    let started = clock.now();
    // On tokio's clock a fan-out polling the call keeps its deadline (see
    // `quorum::deadline`); another clock keeps its own timers.
    let out = match clock {
        Clock::Tokio => within(deadline, call).await.map_err(|_| ()),
        #[cfg(feature = "testing")]
        Clock::Drift(_) => clock.timeout_at(deadline, call).await.map_err(|_| ()),
    };
    match out {
        Ok(out) => out,
        Err(()) => Err(Error::LockerTimeout {
            endpoint: endpoint(),
            after: deadline.saturating_duration_since(started),
        }),
    }
}

/// [`call_with_deadline`] for a `kind` call to locker `index` of `coord`,
/// recorded in its telemetry: the latency of a call that had to wait, and
/// how it ended. A call answered on its first poll is not timed, which
/// keeps the clock off the in-process fast path, and waiting calls are
/// timed at most once a millisecond per locker and kind (see
/// `telemetry::CALL_SAMPLE_INTERVAL`).
pub(crate) async fn call_locker<F, T>(
    coord: &Coordinator,
    index: usize,
    kind: CallKind,
    call: F,
    deadline: Instant,
) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    noted_call(coord, index, Some(kind), call, deadline).await
}

/// [`call_locker`], with telemetry only for calls of a `kind` it counts
/// (`None`: an election's calls, which it does not). Either way the call
/// is noted for why waits wait: asked, answered or failed.
pub(crate) async fn noted_call<F, T>(
    coord: &Coordinator,
    index: usize,
    kind: Option<CallKind>,
    call: F,
    deadline: Instant,
) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    let mut call = std::pin::pin!(call);
    let seq = coord.next_call_seq(index);
    if let Poll::Ready(out) = futures::poll!(call.as_mut()) {
        if let Some(kind) = kind {
            coord.telemetry.locker_call(index, kind, None, &out);
        }
        return noted_now(coord, index, kind, seq, out);
    }
    let watch = kind.and_then(|kind| coord.telemetry.call_stopwatch(index, kind));
    let asked = coord.note_asked(index, coord.clock.now(), current_waited());
    let endpoint = || {
        coord
            .lockers
            .get(index)
            .map_or_else(String::new, |l| l.endpoint())
    };
    let out = call_with_deadline(&coord.clock, call, deadline, endpoint).await;
    if let Some(kind) = kind {
        coord.telemetry.locker_call(index, kind, watch, &out);
    }
    match &out {
        Ok(_) => {
            asked.answered(coord.clock.now());
            if answer_ends_quarantine(kind) {
                coord.note_grant_answer(index, seq);
            }
        }
        Err(err) => {
            // A straggler nobody waited for that ran out its deadline says
            // nothing of the locker either.
            let unheeded = asked.is_straggler() && matches!(err, Error::LockerTimeout { .. });
            let (at, answers_at_ask) = (asked.asked(), asked.answers_at_ask());
            if err.is_quarantine() {
                asked.refused(coord.clock.now());
            }
            if !unheeded {
                coord.note_failure(index, err, (at, seq), answers_at_ask);
            }
        }
    }
    out
}

/// Whether an answer to a call of `kind` (`None`: an election's term,
/// value or leader read) says the locker is out of quarantine: one in
/// quarantine refuses every call but releases and refreshes.
fn answer_ends_quarantine(kind: Option<CallKind>) -> bool {
    !matches!(
        kind,
        Some(CallKind::Unlock | CallKind::RUnlock | CallKind::ForceUnlock | CallKind::Refresh)
    )
}

/// Notes the answer locker `index` of `coord` gave at once to a call of
/// `kind`.
fn noted_now<T>(
    coord: &Coordinator,
    index: usize,
    kind: Option<CallKind>,
    seq: CallSeq,
    out: Result<T, Error>,
) -> Result<T, Error> {
    match &out {
        Ok(_) => {
            coord.note_answered_at_once(index);
            if answer_ends_quarantine(kind) {
                coord.note_grant_answer(index, seq);
            }
        }
        Err(err) => {
            if err.is_quarantine() {
                // Refused at once: as quick as an answer, for timing.
                coord.note_answer(index, std::time::Duration::ZERO);
            }
            let now = coord.clock.now();
            coord.note_failure(index, err, (now, seq), coord.answered_at_once(index));
        }
    }
    out
}

/// Records the answer of a `kind` call that locker `index` of `coord` gave
/// at once, as [`call_locker`] records one that was ready on its first poll:
/// counted in the telemetry, untimed, and a failure noted.
pub(crate) fn answered_now<T>(
    coord: &Coordinator,
    index: usize,
    kind: CallKind,
    out: Result<T, Error>,
) -> Result<T, Error> {
    coord.telemetry.locker_call(index, kind, None, &out);
    let seq = coord.next_call_seq(index);
    noted_now(coord, index, Some(kind), seq, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that panics while its fan-out polls it leaves the thread as
    /// it found it (noted by a review: the fan-out's flag stayed set, so
    /// calls the thread polled later for other tasks would have been noted
    /// with it).
    #[test]
    fn a_call_panicking_under_its_fan_out_leaves_no_flag_on_the_thread() {
        let outer: Waited = Arc::new(AtomicBool::new(true));
        let inner: Waited = Arc::new(AtomicBool::new(false));
        polled_for(&outer, || {
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                polled_for(&inner, || panic!("a locker's call panics"))
            }));
            assert!(unwound.is_err());
            let now = current_waited().expect("the outer fan-out's flag");
            assert!(Arc::ptr_eq(&now, &outer), "the inner flag was left behind");
        });
        assert!(current_waited().is_none(), "a flag was left on the thread");
    }
}
