//! Attempts to connect made for calls: after the server closed the
//! connection for idleness or the runtime under it shut down (the next
//! call connects), and when an attempt of the reconnect's schedule is
//! overdue with no task making it. Calls made meanwhile wait for the
//! attempt under way.
//!
//! Invariants:
//! - A reopen runs as a task of its own, so a caller that stops waiting (a
//!   timeout, a `select!`) does not stop it: on a runtime that is driven
//!   it ends within the connect timeout, with a connection installed or
//!   with the locker offline, why noted, and the background reconnect
//!   started.
//! - One attempt is under way at a time, unless the one under way has
//!   outlived the connect timeout (its runtime is not driven); a newer one
//!   is then started beside it. One that ends late with a connection
//!   installs it only where nothing is live ([`Shared::install`]); one
//!   that fails while a connection is live changes nothing.
//! - The reopen flag is cleared by an installed connection or by a failed
//!   attempt, however late, so `is_online()` is true while the attempt
//!   runs and false once one failed with nothing live.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::reconnect::{self, reconnect_later, Dial};
use super::Shared;
use crate::net::conn::{instant_after, Connection, GIVEN_UP_REASON};
use crate::Error;

/// How long past the connect timeout a reopen may run before a caller
/// counts it as parked on a runtime nobody drives: room for the task to
/// be scheduled and for its result to be seen.
const GRACE: Duration = Duration::from_millis(250);

type Outcome = Option<Result<Arc<Connection>, Error>>;

/// The reopen under way.
pub(super) struct Reopen {
    id: u64,
    started: Instant,
    outcome: watch::Receiver<Outcome>,
}

/// The connection of the attempt under way, or of one this call starts
/// when the next call is to connect (after an idle close, or a runtime
/// that shut down under the connection) or an attempt of the reconnect's
/// schedule is overdue with no task making it. `None` when none is called
/// for (or one ended without a connection and without an error of its own
/// to report): the caller fails at once.
///
/// Cancel safe: the attempt is a task of its own and goes on without the
/// caller.
pub(super) async fn attempt(shared: &Arc<Shared>) -> Option<Result<Arc<Connection>, Error>> {
    // First the attempt under way; if it outlives its time, one of our own,
    // which runs on this (driven) runtime and so ends in time.
    for _ in 0..2 {
        if let Some(conn) = shared.live() {
            return Some(Ok(conn));
        }
        let (mut outcome, deadline) = join_or_start(shared)?;
        let ended = tokio::time::timeout_at(deadline, outcome.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|ended| ended.ok().map(|ended| ended.clone()));
        if let Some(Some(Err(err))) = ended
            && !is_given_up(&err)
        {
            return Some(Err(err));
        }
        // Otherwise a connection (live or not: the next round looks), an
        // attempt the locker gave up, one dropped with its runtime, or
        // one out of time.
    }
    shared.live().map(Ok)
}

/// The attempt under way, unless it outlived its time, else a new one if
/// one is called for; and when to stop waiting for it.
fn join_or_start(shared: &Arc<Shared>) -> Option<(watch::Receiver<Outcome>, Instant)> {
    let patience = shared.config.connect_timeout.saturating_add(GRACE);
    let now = Instant::now();
    let mut slot = shared
        .reopening
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(reopen) = slot.as_ref() {
        let deadline = instant_after(reopen.started, patience);
        // One that has ended (its claim not yet dropped) is no attempt
        // under way: its connection ended before it was installed, say.
        let ended = reopen.outcome.borrow().is_some();
        if now < deadline && !ended {
            return Some((reopen.outcome.clone(), deadline));
        }
    }
    let called_for = (shared.reopen_next.load(Ordering::Acquire)
        && reconnect::may_reopen(shared, now))
        || reconnect::overdue(shared, now);
    if !called_for {
        return None;
    }
    let id = shared.next_claim.fetch_add(1, Ordering::Relaxed);
    reconnect::take_over(shared, id, now, patience);
    let (tx, rx) = watch::channel(None);
    *slot = Some(Reopen {
        id,
        started: now,
        outcome: rx.clone(),
    });
    drop(slot);
    // Made before the spawn and owned by the task, so the slot is freed
    // however the task ends, even dropped unrun with its runtime.
    let claim = ReopenClaim {
        shared: Arc::downgrade(shared),
        id,
    };
    let weak = Arc::downgrade(shared);
    let endpoint = shared.endpoint.clone();
    tokio::spawn(async move {
        let _claim = claim;
        let ended = reopen(&weak, endpoint, id).await;
        let _ = tx.send(Some(ended));
    });
    Some((rx, instant_after(now, patience)))
}

/// Holds the locker only before and after the attempt, never while it
/// waits: a locker dropped meanwhile is dropped.
async fn reopen(weak: &Weak<Shared>, endpoint: String, id: u64) -> Result<Arc<Connection>, Error> {
    let dial = match weak.upgrade() {
        Some(shared) => Dial::new(&shared),
        None => {
            return Err(Error::LockerUnavailable {
                endpoint,
                reason: "the locker was dropped".to_owned(),
            })
        }
    };
    match dial.open().await {
        Ok((conn, shared)) => {
            tracing::debug!(endpoint = %shared.endpoint, "reconnected after the server closed an idle connection");
            // Freed before anything that may start the background task.
            reconnect::free(&shared, id);
            let conn = shared.install(conn);
            let shared = &shared;
            if !conn.is_alive() {
                // It ended before it was installed (its runtime shut down,
                // or the server closed it): its close decided what comes
                // next, and callers look again.
                reconnect::mend_a_dead_install(shared, &conn);
            }
            Ok(conn)
        }
        Err(err) => {
            let Some(shared) = weak.upgrade() else {
                return Err(err);
            };
            let shared = &shared;
            reconnect::free(shared, id);
            // A connection opened meanwhile (a newer reopen, the background
            // reconnect): this failure says nothing about the server now.
            if let Some(conn) = shared.live() {
                return Ok(conn);
            }
            // Given up by the locker itself: no word on the server either.
            if is_given_up(&err) {
                return Err(err);
            }
            // Else this failure is the latest word on the server, however
            // late it comes: a newer attempt that connects sets the locker
            // online again.
            shared.reopen_next.store(false, Ordering::Release);
            shared.note_connect_error(Some(err.clone()));
            reconnect::failed_attempt(shared);
            if !matches!(err, Error::Unauthorized { .. }) {
                reconnect_later(shared);
            }
            Err(err)
        }
    }
}

/// Whether `err` is that of an attempt the locker gave up itself.
fn is_given_up(err: &Error) -> bool {
    matches!(err, Error::LockerUnavailable { reason, .. } if reason == GIVEN_UP_REASON)
}

/// Frees the attempt slot when its task ends or is dropped, unless a
/// newer attempt holds it.
struct ReopenClaim {
    shared: Weak<Shared>,
    id: u64,
}

impl Drop for ReopenClaim {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut slot = shared
            .reopening
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|reopen| reopen.id == self.id) {
            *slot = None;
        }
        drop(slot);
        // Dropped unfinished (with its runtime): the next call, or task,
        // makes the attempt.
        reconnect::free(&shared, self.id);
    }
}
