//! Deadlines of calls polled together: one timer per fan-out instead of
//! one per call.
//!
//! A call with a deadline must be woken when its deadline passes, even if
//! nothing else happens. A timer per call costs a registration in tokio's
//! timer wheel and its removal, each under a lock that both workers take:
//! over TCP a lock and unlock on 5 lock servers made 20 of them (the
//! coordinator's deadline and the connection's call timeout, per locker
//! call).
//!
//! So a fan-out that polls its calls together ([`gather`]) lets each
//! pending call ask it for a wake-up at the call's deadline ([`within`]),
//! and sees to one: its owner's own timer (a round's deadline) set no
//! later than the earliest deadline asked, or one timer of the fan-out's
//! ([`FanOutTimer`]). A lock and unlock then arm only the timers of the
//! wait (or round) and of the release, which they had anyway
//! (BENCHMARKS.md, "One timer per fan-out").
//!
//! Invariants:
//! * A call asks only when the waker it is polled with will wake the
//!   fan-out's own task: the fan-out polls every running call each time
//!   its task is woken, so the call is polled again once its deadline has
//!   passed, and sees it. Polled through anything that installs a waker
//!   of its own (a `FuturesUnordered`, which polls only what was woken),
//!   or outside any fan-out (a straggler handed to a task of its own), a
//!   call polls a timer of its own, made on the runtime polling it, and
//!   made again if another runtime polls it later ([`RuntimeSleep`]; the
//!   drifting test clock's timers are made the same way).
//! * A call asks again at every poll, and ends once tokio's clock (read
//!   once per poll of the fan-out) shows its deadline: an early or
//!   spurious wake only polls it. As with `tokio::time::timeout_at`, a
//!   deadline is not judged on a cooperative budget spent before the call
//!   was polled: the task yields first, and an answer held back looks
//!   again.
//! * The fan-out (or its owner) arms its timer after every poll in which a
//!   call asked, before it waits, so the timer is never later than the
//!   earliest deadline of a call that is still pending and did not arm a
//!   timer of its own.
//! * A call that outlives its fan-out is polled next by the task it is
//!   handed to, outside any fan-out: it polls its own timer from then on,
//!   on that task's runtime, which has timers (`CallSet`'s drop hands its
//!   calls to the runtime that polled them or to the coordinator's own).

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::time::{Instant, Sleep};

/// A call's deadline passed before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// The fan-out polling its calls on this thread: its task's waker, the
/// earliest deadline its calls asked for during this poll, and the clock
/// as read once for the whole poll (when the first call asked).
struct Gathering {
    waker: Waker,
    earliest: Option<Instant>,
    now: Option<Instant>,
}

/// What a call polled by a fan-out is told.
enum Asked {
    /// No fan-out wakes it (see [`ask_fan_out`]).
    NoFanOut,
    /// The fan-out's timer will wake it at its deadline.
    Woken,
    /// Its deadline has passed.
    Passed,
}

thread_local! {
    static GATHERING: RefCell<Option<Gathering>> = const { RefCell::new(None) };
}

/// Asks the fan-out polling this call, if any, to wake its task at
/// `deadline`. [`Asked::NoFanOut`] when there is none, or when `cx` would
/// wake another task or only part of one (see the module's invariants).
fn ask_fan_out(cx: &Context<'_>, deadline: Instant) -> Asked {
    GATHERING.with(|g| match &mut *g.borrow_mut() {
        Some(gathering) if gathering.waker.will_wake(cx.waker()) => {
            if deadline <= *gathering.now.get_or_insert_with(Instant::now) {
                return Asked::Passed;
            }
            gathering.earliest = Some(gathering.earliest.map_or(deadline, |e| e.min(deadline)));
            Asked::Woken
        }
        _ => Asked::NoFanOut,
    })
}

/// Awaits `future`, giving up with [`Elapsed`] once tokio's clock shows
/// `deadline`, as `tokio::time::timeout_at` does: the future is polled
/// first, and a deadline is judged under the task's cooperative budget,
/// unless the future spent it in that poll. Polled by a fan-out
/// ([`FanOutTimer::poll_calls`], [`gather`]), it arms no timer: the
/// fan-out's wakes it.
///
/// Cancel safe as `future` is: dropping it drops `future` and the timer.
pub(crate) async fn within<F>(deadline: Instant, mut future: F) -> Result<F::Output, Elapsed>
where
    F: Future + Unpin,
{
    // Made only when no fan-out wakes the call, on the runtime that polls
    // it then, and made again if another runtime polls it later: a call
    // handed over from a runtime since shut down or left idle (see
    // `CallSet`'s drop) must not keep a timer in that runtime's wheel,
    // which would panic or never fire.
    let mut sleep = RuntimeSleep::new(deadline);
    let mut own = false;
    poll_fn(|cx| {
        let had_budget = tokio::task::coop::has_budget_remaining();
        if let Poll::Ready(out) = Pin::new(&mut future).poll(cx) {
            return Poll::Ready(Ok(out));
        }
        let spent_here = had_budget && !tokio::task::coop::has_budget_remaining();
        if !own {
            // The clock is read once per poll of the fan-out, not per call.
            match ask_fan_out(cx, deadline) {
                Asked::Woken => return Poll::Pending,
                // As `timeout_at`, whose timer would not fire on a budget
                // spent before this call was polled: the task yields, and
                // an answer that came in time but was held back by the
                // budget is looked at again before the call gives up.
                Asked::Passed if !had_budget => {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Asked::Passed => return Poll::Ready(Err(Elapsed)),
                Asked::NoFanOut => own = true,
            }
        }
        let fired = if spent_here {
            // The future spent the budget itself: the timer is looked at
            // regardless, as `timeout_at` does.
            Pin::new(&mut tokio::task::unconstrained(sleep.timer())).poll(cx)
        } else {
            sleep.timer().poll(cx)
        };
        fired.map(|()| Err(Elapsed))
    })
    .await
}

/// A tokio timer for `deadline` that belongs to the runtime polling it:
/// made at its first poll, and made again when another runtime polls it
/// (one it was made on may have shut down, which panics its timers, or gone
/// idle, which never fires them). Boxed, and made only when polled: the
/// fan-outs of the lock path never make one.
pub(crate) struct RuntimeSleep {
    deadline: Instant,
    made: Option<(Option<tokio::runtime::Id>, Pin<Box<Sleep>>)>,
}

impl RuntimeSleep {
    pub(crate) fn new(deadline: Instant) -> Self {
        RuntimeSleep {
            deadline,
            made: None,
        }
    }

    /// The timer of the current runtime, to poll now.
    pub(crate) fn timer(&mut self) -> Pin<&mut Sleep> {
        let here = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
        let deadline = self.deadline;
        if !matches!(&self.made, Some((made_on, _)) if *made_on == here) {
            self.made = None;
        }
        let (_, timer) = self
            .made
            .get_or_insert_with(|| (here, Box::pin(tokio::time::sleep_until(deadline))));
        timer.as_mut()
    }
}

impl Future for RuntimeSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.timer().poll(cx)
    }
}

/// Runs `poll`, which polls a fan-out's calls with `cx`, and returns
/// with its output the earliest deadline they asked for ([`within`]): the
/// caller must see to it that its task is woken by then (it polls a timer
/// set no later, before it returns `Pending`), and then polls the calls
/// again; [`FanOutTimer`] does so.
pub(crate) fn gather<R>(
    cx: &mut Context<'_>,
    poll: impl FnOnce(&mut Context<'_>) -> R,
) -> (R, Option<Instant>) {
    let outer = GATHERING.with(|g| {
        g.borrow_mut().replace(Gathering {
            waker: cx.waker().clone(),
            earliest: None,
            now: None,
        })
    });
    // Restored however `poll` ends (a panicking call unwinds through
    // here): a fan-out further out keeps its own gathering.
    struct Restore(Option<Option<Gathering>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                GATHERING.with(|g| *g.borrow_mut() = outer);
            }
        }
    }
    let restore = Restore(Some(outer));
    let out = poll(cx);
    let ours = GATHERING.with(|g| g.borrow_mut().take());
    drop(restore);
    (out, ours.and_then(|g| g.earliest))
}

/// The one timer of a fan-out, armed for the earliest deadline its
/// pending calls asked for.
#[derive(Default)]
pub(crate) struct FanOutTimer {
    sleep: Option<Pin<Box<Sleep>>>,
}

impl FanOutTimer {
    /// Runs `poll`, which polls the fan-out's calls with `cx`, gathering
    /// the deadlines they ask for ([`within`]), then arms the timer for
    /// the earliest, so that the task is woken then and polls them again.
    pub(crate) fn poll_calls<R>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> R,
    ) -> R {
        let (out, earliest) = gather(cx, poll);
        if let Some(earliest) = earliest {
            self.arm(cx, earliest);
        }
        out
    }

    fn arm(&mut self, cx: &mut Context<'_>, at: Instant) {
        let sleep = match &mut self.sleep {
            Some(sleep) => {
                // A timer set earlier than needed fires early; the calls
                // then only look at their deadlines again. One that fired
                // is set anew.
                if sleep.deadline() > at || sleep.is_elapsed() {
                    sleep.as_mut().reset(at);
                }
                sleep
            }
            None => self.sleep.insert(Box::pin(tokio::time::sleep_until(at))),
        };
        if sleep.as_mut().poll(cx).is_ready() {
            // The deadline passed while the calls were polled: poll them
            // again, and they see it.
            cx.waker().wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream::{FuturesUnordered, StreamExt};

    use super::*;

    /// A fan-out of calls that never finish: each ends by its deadline,
    /// with one timer armed by the fan-out.
    #[tokio::test(start_paused = true)]
    async fn calls_polled_by_a_fan_out_end_at_their_deadlines() {
        let start = Instant::now();
        let deadlines = [30, 10, 20].map(|ms| start + Duration::from_millis(ms));
        let mut calls: Vec<_> = deadlines
            .iter()
            .map(|&d| Box::pin(within(d, futures::future::pending::<()>())))
            .collect();
        let mut ended: Vec<(usize, Duration)> = Vec::new();
        let mut timer = FanOutTimer::default();
        poll_fn(|cx| {
            timer.poll_calls(cx, |cx| {
                for (i, call) in calls.iter_mut().enumerate() {
                    if ended.iter().any(|(j, _)| *j == i) {
                        continue;
                    }
                    if let Poll::Ready(out) = call.as_mut().poll(cx) {
                        assert_eq!(out, Err(Elapsed));
                        ended.push((i, start.elapsed()));
                    }
                }
            });
            if ended.len() == calls.len() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        let ms: Vec<(usize, u128)> = ended.iter().map(|(i, d)| (*i, d.as_millis())).collect();
        assert_eq!(ms, vec![(1, 10), (2, 20), (0, 30)]);
    }

    /// A call polled through a `FuturesUnordered` inside a fan-out's call
    /// (another waker: it polls only what was woken) arms its own timer,
    /// and still ends at its deadline.
    #[tokio::test(start_paused = true)]
    async fn a_call_behind_a_waker_of_its_own_arms_its_own_timer() {
        let start = Instant::now();
        let inner: FuturesUnordered<_> = [start + Duration::from_millis(40)]
            .into_iter()
            .map(|d| within(d, Box::pin(futures::future::pending::<()>())))
            .collect();
        let mut call = Box::pin(async move { inner.collect::<Vec<_>>().await });
        let mut timer = FanOutTimer::default();
        let fan_out = poll_fn(|cx| timer.poll_calls(cx, |cx| call.as_mut().poll(cx)));
        // Had it asked the fan-out, nothing would poll it again: the
        // fan-out's wake polls only the outer call.
        let out = tokio::time::timeout(Duration::from_secs(1), fan_out)
            .await
            .expect("the call behind its own waker never ended");
        assert_eq!(out, vec![Err(Elapsed)]);
        assert_eq!(start.elapsed(), Duration::from_millis(40));
    }

    /// Outside any fan-out a call times out by its own timer, and a call
    /// that finishes in time gives its output.
    #[tokio::test(start_paused = true)]
    async fn a_call_alone_keeps_its_own_deadline() {
        let start = Instant::now();
        let late = within(
            start + Duration::from_millis(5),
            Box::pin(tokio::time::sleep(Duration::from_millis(50))),
        )
        .await;
        assert_eq!(late, Err(Elapsed));
        assert_eq!(start.elapsed(), Duration::from_millis(5));
        let quick = within(
            Instant::now() + Duration::from_millis(50),
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                7
            }),
        )
        .await;
        assert_eq!(quick, Ok(7));
    }

    /// A fan-out polled inside another's call gathers for itself; the
    /// outer one keeps what its own calls asked.
    #[tokio::test(start_paused = true)]
    async fn a_fan_out_inside_a_call_of_another_keeps_the_outer_gathering() {
        let start = Instant::now();
        let mut outer_call = Box::pin(within(
            start + Duration::from_millis(25),
            futures::future::pending::<()>(),
        ));
        let mut inner_call = Box::pin(within(
            start + Duration::from_millis(60),
            futures::future::pending::<()>(),
        ));
        let mut inner_timer = FanOutTimer::default();
        let mut nested = Box::pin(poll_fn(move |cx| {
            inner_timer.poll_calls(cx, |cx| inner_call.as_mut().poll(cx))
        }));
        let mut outer_timer = FanOutTimer::default();
        let first = poll_fn(|cx| {
            outer_timer.poll_calls(cx, |cx| {
                let _ = nested.as_mut().poll(cx);
                outer_call.as_mut().poll(cx)
            })
        })
        .await;
        assert_eq!(first, Err(Elapsed));
        assert_eq!(start.elapsed(), Duration::from_millis(25));
        assert_eq!(nested.await, Err(Elapsed));
        assert_eq!(start.elapsed(), Duration::from_millis(60));
    }
}
