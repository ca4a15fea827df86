//! The election's rounds over every locker: storing a proclamation and
//! reading who leads. Each returns as
//! soon as its answer is decided and hands the calls still running to the
//! runtime, so the lockers that were slow still get them.

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::lock::coordinator::Coordinator;
use crate::lock::fanout::{noted_call, Call, CallSet, Started};
use crate::lock::wait_status::{RoundEnd, WaitStatus};
use crate::locker::proclamation::{Proclamation, WatchArgs};
use crate::locker::wait::{PushSink, Wake};
use crate::quorum::clock::after;
use crate::quorum::write_quorum;
use crate::{Error, LockArgs};

use super::tally::{Tally, Verdict};

/// Runs `call` on every locker at once until `decide` returns an answer,
/// or every call ended, or `deadline` passed, or `hurry` was notified and
/// the instant its function names passed (`None` in those three cases; the
/// function says `None` while the round may not end early yet).
async fn fan_out<T, R>(
    coord: &Arc<Coordinator>,
    deadline: Instant,
    call: impl Fn(usize) -> Call<Result<T, Error>>,
    mut decide: impl FnMut(usize, Result<T, Error>) -> Option<R>,
    hurry: Option<(&Notify, &EndAt<'_>)>,
) -> Option<R>
where
    T: Send + 'static,
{
    let calls = (0..coord.lockers.len()).map(call);
    let mut calls = match Handle::try_current() {
        // Not counted among the outstanding releases: an election's reads
        // and proclamations release nothing, and a call left on a runtime
        // no longer driven must hold up no `finish_releases`.
        Ok(_) => CallSet::uncounted(coord, calls.map(Started::Running)),
        Err(_) => CallSet::dropping(calls),
    };
    let mut timer = None;
    let mut decided = None;
    let mut asked = hurry.map(|(notify, end_at)| (Box::pin(notify.notified()), end_at));
    let mut hurried: Option<&EndAt<'_>> = None;
    let mut early: Option<(Instant, crate::quorum::clock::Sleep)> = None;
    poll_fn(|cx| {
        calls.poll_all(cx, |index, result| {
            if decided.is_none() {
                decided = decide(index, result);
            }
        });
        if decided.is_some() || calls.running() == 0 {
            return Poll::Ready(());
        }
        if let Some((notified, end_at)) = asked.as_mut()
            && notified.as_mut().poll(cx).is_ready()
        {
            hurried = Some(*end_at);
            asked = None;
        }
        if let Some(at) = hurried.and_then(|end_at| end_at()) {
            if coord.clock.now() >= at {
                return Poll::Ready(());
            }
            if early.as_ref().is_none_or(|(set, _)| *set != at) {
                early = Some((at, coord.clock.sleep_until(at)));
            }
            if let Some((_, sleep)) = early.as_mut()
                && std::pin::Pin::new(sleep).poll(cx).is_ready()
            {
                return Poll::Ready(());
            }
        }
        let timer = timer.get_or_insert_with(|| coord.clock.sleep_until(deadline));
        std::pin::Pin::new(timer).poll(cx)
    })
    .await;
    // Decided, or ended early or at its deadline: nobody waits for the
    // calls still running.
    calls.settle();
    decided
}

/// One locker call with its deadline, owning what it needs.
fn owned_call<T, F>(
    coord: &Arc<Coordinator>,
    index: usize,
    deadline: Instant,
    f: impl FnOnce(Arc<dyn crate::NetLocker>) -> F + Send + 'static,
) -> Call<Result<T, Error>>
where
    F: std::future::Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    let locker = coord.lockers[index].clone();
    let coord = coord.clone();
    // Noted as every other call is (asked, answered or failed), so that an
    // error that names the unreachable lockers can say why, and a wait can
    // tell a locker still answering from one out of reach.
    Box::pin(async move { noted_call(&coord, index, None, f(locker), deadline).await })
}

/// Stores `p` with the entry `args.uid` holds on every locker. `Ok(true)`
/// once a write quorum stored it, `Ok(false)` once too many lockers said the
/// uid holds nothing there for a quorum to be possible.
pub(crate) async fn proclaim_round(
    coord: &Arc<Coordinator>,
    args: &LockArgs,
    p: &Proclamation,
) -> Result<bool, Error> {
    let n = coord.lockers.len();
    let quorum = write_quorum(n);
    let began = coord.clock.now();
    let deadline = after(began, coord.timeouts.refresh);
    let (mut stored, mut not_held, mut failed) = (0, 0, 0);
    let mut stored_by: Vec<usize> = Vec::with_capacity(n);
    let mut permanent = None;
    let mut ends = vec![RoundEnd::Pending; n];
    let decided = fan_out(
        coord,
        deadline,
        |index| {
            let (args, p) = (args.clone(), p.clone());
            owned_call(coord, index, deadline, move |locker| async move {
                locker.proclaim(&args, &p).await
            })
        },
        |index, mut result| {
            // A locker that no longer honours the lease (it announced a
            // shorter validity) is not counted on: it counts as down, as
            // in every other round.
            if matches!(result, Ok(true))
                && let Err(err) = coord.honours_lease(index)
            {
                result = Err(err);
            }
            if let Some(end) = ends.get_mut(index) {
                *end = match &result {
                    Ok(true) => RoundEnd::Counted,
                    Ok(false) => RoundEnd::Declined,
                    Err(err) => RoundEnd::Failed(err.clone()),
                };
            }
            match result {
                Ok(true) => stored_by.push(index),
                Ok(false) => not_held += 1,
                Err(err) => {
                    if !err.is_retryable() {
                        permanent = Some(err);
                    }
                    failed += 1;
                }
            }
            // Tallied anew at each answer: a locker may announce a
            // shorter validity after it stored the value.
            stored_by.retain(|&index| {
                let honoured = coord.lease_honoured(index);
                if !honoured {
                    failed += 1;
                    if let (Some(end), Err(err)) = (ends.get_mut(index), coord.honours_lease(index))
                    {
                        *end = RoundEnd::Failed(err);
                    }
                }
                honoured
            });
            stored = stored_by.len();
            if stored >= quorum {
                Some(true)
            } else if not_held > n - quorum {
                Some(false)
            } else {
                None
            }
        },
        None,
    )
    .await;
    match (decided, permanent) {
        (Some(decided), _) => Ok(decided),
        (None, Some(err)) => Err(err),
        (None, None) => {
            tracing::debug!(
                stored,
                not_held,
                failed,
                "proclamation not confirmed by a quorum"
            );
            // Judged as a wait judges its lockers; only lockers that
            // stored the value count as answered: one that does not hold
            // the lock vouches for nothing.
            Err(WaitStatus::of_round(coord, quorum, &ends, began).unavailable())
        }
    }
}

/// What a read of every locker found.
pub(crate) struct Reading {
    /// The leader a write quorum of answers confirmed, `None` when such a
    /// quorum confirmed that nobody leads.
    pub(crate) leader: Option<Proclamation>,
}

/// When a hurried round may end: `None` while it may not yet.
type EndAt<'a> = dyn Fn() -> Option<Instant> + Sync + 'a;

/// A locker that has not answered any read yet, in [`Watching::took`].
pub(crate) const NEVER_ANSWERED: u64 = u64::MAX;

/// What an observer's read asks besides the answers: a watch on each
/// locker, and to end early when it is told to hurry.
pub(crate) struct Watching<'a> {
    /// Told of every change a locker pushes.
    pub(crate) sink: &'a Arc<dyn PushSink>,
    /// How long each locker keeps the watch.
    pub(crate) ttl: std::time::Duration,
    /// Once notified, the read ends, settled or not, as soon as a write
    /// quorum of lockers answered and each locker still silent had twice
    /// as long as its last answer took: the lockers changed since it
    /// began, so a fresh read learns more than a locker that stopped (a
    /// stopped process holds a call until its deadline), while one that
    /// is only slow, and may be the one that settles the read, gets its
    /// time.
    pub(crate) hurry: &'a Notify,
    /// Per locker, how long its last answer to a read took, in
    /// microseconds ([`NEVER_ANSWERED`] before its first); kept from read
    /// to read, and also set by answers that come after their read ended.
    pub(crate) took: &'a Arc<[AtomicU64]>,
}

/// Reads the leader from the lockers, registering a watch through
/// `watching` on each when given. Decided when the answers settle it (see
/// [`Tally`]): a leader is reported only when a write quorum of answers
/// carries its term, so a copy an old leader left on a few lockers (a
/// resign or a cancelled campaign whose unlock missed them) is never taken
/// for a leader. Answers from a locker in quarantine do not count (it may
/// have forgotten a leader).
pub(crate) async fn read_round(
    coord: &Arc<Coordinator>,
    args: &LockArgs,
    watching: Option<Watching<'_>>,
) -> Result<Reading, Error> {
    let n = coord.lockers.len();
    let quorum = write_quorum(n);
    let began = coord.clock.now();
    let deadline = after(began, coord.timeouts.acquire);
    let mut tally = Tally::default();
    // Each answer so far, by locker, tallied anew at each.
    let mut found_by: Vec<(usize, Option<Proclamation>)> = Vec::with_capacity(n);
    // Answers so far and who is still silent, for `hurry`'s check while
    // `tally` is borrowed.
    let answers = AtomicUsize::new(0);
    let silent: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(true)).collect();
    let end_at = || {
        if answers.load(Ordering::Relaxed) < quorum {
            return None;
        }
        let took = watching.as_ref()?.took;
        let wait = (0..n)
            .filter(|&i| silent[i].load(Ordering::Relaxed))
            .map(|i| took[i].load(Ordering::Relaxed))
            .filter(|&micros| micros != NEVER_ANSWERED)
            .max()
            .map_or(std::time::Duration::ZERO, |micros| {
                std::time::Duration::from_micros(micros.saturating_mul(2))
            });
        Some(after(began, wait))
    };
    let mut failed = 0;
    let mut permanent = None;
    let mut last_err = None;
    // How each locker ended the read, for the error of one that too few
    // answered: judged as a wait judges its lockers.
    let mut ends: Vec<RoundEnd> = vec![RoundEnd::Pending; n];
    let decided = fan_out(
        coord,
        deadline,
        |index| {
            let args = args.clone();
            let watch = watching.as_ref().map(|w| WatchArgs {
                ttl: w.ttl,
                wake: Wake::new(w.sink.clone(), index),
            });
            let took = watching.as_ref().map(|w| (w.took.clone(), coord.clone()));
            owned_call(coord, index, deadline, move |locker| async move {
                let result = locker.leader(&args, watch.as_ref()).await;
                if let Some((took, coord)) = took {
                    let micros = coord
                        .clock
                        .now()
                        .saturating_duration_since(began)
                        .as_micros();
                    took[index].store(
                        u64::try_from(micros).unwrap_or(NEVER_ANSWERED - 1),
                        Ordering::Relaxed,
                    );
                }
                result
            })
        },
        |index, mut result| {
            silent[index].store(false, Ordering::Relaxed);
            // A locker that no longer honours the lease is not counted on:
            // it counts as down, as in every other round.
            if result.is_ok()
                && let Err(err) = coord.honours_lease(index)
            {
                result = Err(err);
            }
            if let Some(end) = ends.get_mut(index) {
                *end = match &result {
                    Ok(_) => RoundEnd::Counted,
                    Err(err) => RoundEnd::Failed(err.clone()),
                };
            }
            match result {
                Ok(found) => found_by.push((index, found)),
                Err(err) => {
                    failed += 1;
                    if !err.is_retryable() {
                        permanent = Some(err.clone());
                    }
                    last_err = Some(err);
                }
            }
            // Tallied anew at each answer: a locker may announce a
            // shorter validity after it answered.
            found_by.retain(|(index, _)| {
                let honoured = coord.lease_honoured(*index);
                if !honoured {
                    failed += 1;
                    if let (Some(end), Err(err)) =
                        (ends.get_mut(*index), coord.honours_lease(*index))
                    {
                        *end = RoundEnd::Failed(err);
                    }
                }
                honoured
            });
            tally = Tally::default();
            for (_, found) in &found_by {
                tally.add(found.clone());
            }
            answers.store(tally.answered(), Ordering::Relaxed);
            match tally.verdict(n, quorum) {
                Verdict::Decided(leader) => Some(Ok(leader)),
                Verdict::ValueSplit { term } => Some(Err(term)),
                Verdict::Open { .. } => None,
            }
        },
        watching.as_ref().map(|w| (w.hurry, &end_at as &EndAt<'_>)),
    )
    .await;
    match decided {
        Some(Ok(leader)) => return Ok(Reading { leader }),
        Some(Err(term)) => {
            return Err(Error::LeaderValueUnsettled {
                term,
                answered: tally.answered(),
                quorum,
                lockers: n,
            })
        }
        None => {}
    }
    if let Some(err) = permanent {
        return Err(err);
    }
    let answered = tally.answered();
    tracing::debug!(
        answered,
        failed,
        ?last_err,
        "leader not settled by the answers"
    );
    match tally.verdict(n, quorum) {
        Verdict::Open {
            term: Some(term),
            holding,
        } if answered >= quorum => Err(Error::LeaderUnsettled {
            term,
            holding,
            answered,
            quorum,
            lockers: n,
            unreachable: coord.unreachable_since(began, |i| matches!(ends[i], RoundEnd::Counted)),
        }),
        // Too few answered: lockers in quarantine, out of reach or still
        // answering are named as a wait names them.
        _ => Err(WaitStatus::of_round(coord, quorum, &ends, began).unavailable()),
    }
}
