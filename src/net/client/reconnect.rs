//! Opening a client's connection, and opening it again in the background
//! after it broke: a task per client at most, with a backoff that a
//! server breaking every connection at once cannot reset.
//!
//! The task may be spawned on a runtime that then stops being driven. It
//! notes the time before each sleep and each attempt, both bounded (the
//! backoff's ceiling, the connect timeout); one that has noted nothing for
//! longer counts as parked, and the next call that finds the locker
//! offline starts another. A superseded task ends at its next note.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Shared;
use crate::net::conn::{Connection, Ended};
use crate::Error;

/// How long a connection must have lasted for the next reconnect to start
/// its backoff from the first step again.
pub(super) const SETTLED: Duration = Duration::from_secs(10);

pub(super) async fn open(shared: &Arc<Shared>) -> Result<Arc<Connection>, Error> {
    let weak = Arc::downgrade(shared);
    let config = &shared.config;
    let pushes = shared.pushes.clone();
    let log = shared.log.clone();
    let opened = tokio::time::Instant::now();
    let conn = Connection::open(&shared.endpoint, config, pushes, log, move |ended| {
        let Some(shared) = weak.upgrade() else { return };
        // Only a connection the server broke by sending what is no
        // response counts against the backoff, and only if it broke soon;
        // one it closed in good order (for idleness), or that lasted, was
        // a healthy one. A reset or a dropped runtime says neither.
        match ended {
            Ended::Garbled if opened.elapsed() < SETTLED => {
                let _ = shared
                    .short_lived
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        Some(n.saturating_add(1))
                    });
            }
            Ended::Otherwise if opened.elapsed() < SETTLED => {}
            _ => shared.short_lived.store(0, Ordering::Release),
        }
        // Another connection is live (this one was left over from a late
        // reopen or reconnect): nothing to mend.
        if shared.live().is_some() {
            return;
        }
        // A connection the server closed because it was silent and held
        // nothing is opened again by the next call, not at once: else the
        // client would take the slot straight back, for nothing.
        if ended == Ended::Quietly && shared.pushes.is_idle() {
            shared.closed_idle.store(true, Ordering::Release);
        } else {
            reconnect_later(&shared);
        }
    })
    .await?;
    let nanos = u64::try_from(conn.validity().as_nanos()).unwrap_or(u64::MAX);
    shared.validity.store(nanos, Ordering::Release);
    Ok(conn)
}

/// How long past its longest step a reconnect task may be silent before
/// it counts as parked on a runtime nobody drives.
const GRACE: Duration = Duration::from_millis(250);

/// The background reconnect under way: which, and when it last showed
/// progress.
pub(super) struct Beat {
    id: u64,
    at: Instant,
}

/// Starts the background reconnection on the current runtime, unless one
/// is already running (and not parked). It stops when it succeeds, when
/// the token is rejected, when the locker is dropped, or when a newer one
/// supersedes it. Without a current runtime it does nothing: the next
/// call, which runs on one, starts it.
pub(super) fn reconnect_later(shared: &Arc<Shared>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let policy = shared.config.reconnect;
    // The longest a running task goes without a note: a sleep or an
    // attempt.
    let patience = policy
        .max
        .max(shared.config.connect_timeout)
        .saturating_add(GRACE);
    let id = {
        let now = Instant::now();
        let mut slot = shared
            .reconnecting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot
            .as_ref()
            .is_some_and(|beat| now < later(beat.at, patience))
        {
            return;
        }
        let id = shared.next_claim.fetch_add(1, Ordering::Relaxed);
        *slot = Some(Beat { id, at: now });
        id
    };
    // Created before the spawn and owned by the task, so the slot is freed
    // however the task ends, including when it is dropped unrun because
    // its runtime is shutting down.
    let claim = Reconnecting {
        shared: Arc::downgrade(shared),
        id,
    };
    let weak: Weak<Shared> = Arc::downgrade(shared);
    // The backoff's ceiling stops growing long before 64 steps.
    let first = shared.short_lived.load(Ordering::Acquire).min(64);
    runtime.spawn(async move {
        let claim = claim;
        for attempt in first.. {
            let wait = policy.delay(attempt, &mut rand::rng());
            if !claim.beat() {
                return;
            }
            tokio::time::sleep(wait).await;
            if !claim.beat() {
                return;
            }
            let Some(shared) = weak.upgrade() else { return };
            match open(&shared).await {
                Ok(conn) => {
                    shared.log.reconnected.note(|count| {
                        tracing::info!(
                            endpoint = %shared.endpoint,
                            count,
                            "reconnected to lock server (`count` times since the last such line)"
                        );
                    });
                    let conn = shared.install(conn);
                    drop(claim);
                    // A connection that died before it was installed ran
                    // its `on_close` while this task still held the flag.
                    if !conn.is_alive() {
                        reconnect_later(&shared);
                    }
                    return;
                }
                Err(err) => {
                    tracing::debug!(endpoint = %shared.endpoint, %err, attempt, "reconnect failed");
                    let rejected = matches!(err, Error::Unauthorized { .. });
                    if rejected {
                        tracing::error!(endpoint = %shared.endpoint, %err, "lock server rejects our token; giving up");
                    } else if matches!(err, Error::Tls { .. }) && shared.connect_error() != Some(err.clone()) {
                        // Said once, not at every attempt: it lasts until
                        // somebody changes a certificate.
                        tracing::warn!(endpoint = %shared.endpoint, %err, "TLS refused; retrying in the background");
                    }
                    shared.note_connect_error(Some(err));
                    if rejected {
                        return;
                    }
                }
            }
        }
    });
}

/// `at + wait`, or far enough ahead when that is past what an instant
/// holds (a connect timeout of years).
pub(super) fn later(at: Instant, wait: Duration) -> Instant {
    at.checked_add(wait)
        .unwrap_or_else(|| at + Duration::from_secs(86_400 * 365))
}

/// Frees the reconnect slot when the reconnect task ends or is dropped,
/// unless a newer task holds it.
struct Reconnecting {
    shared: Weak<Shared>,
    id: u64,
}

impl Reconnecting {
    /// Notes progress; false when a newer task superseded this one (or
    /// the locker is gone), which must then end.
    fn beat(&self) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let mut slot = shared
            .reconnecting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(beat) if beat.id == self.id => {
                beat.at = Instant::now();
                true
            }
            _ => false,
        }
    }
}

impl Drop for Reconnecting {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut slot = shared
            .reconnecting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_some_and(|beat| beat.id == self.id) {
            *slot = None;
        }
    }
}
