//! Opening a client's connection, and opening it again in the background
//! after it broke: a task per client at most, with a backoff that a
//! server breaking every connection at once cannot reset.
//!
//! Invariants:
//! - No task holds the locker (`Arc<Shared>`) while it waits for a
//!   connection: a locker dropped meanwhile is dropped, and what the task
//!   opens late is closed.
//! - The task may be spawned on a runtime that then stops being driven (or
//!   is driven only inside each call's `block_on`). It notes the time
//!   before each sleep and each attempt, both bounded (the backoff's
//!   ceiling, the connect timeout); one that has noted nothing for longer
//!   counts as parked, and the next call that finds the locker offline
//!   makes the attempt itself, at most once per such period. A superseded
//!   task ends at its next note.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::{RemoteConfig, Shared};
use crate::net::conn::{instant_after, Connection, Ended};
use crate::net::peer_log::PeerLog;
use crate::net::pushes::Pushes;
use crate::Error;

/// How long a connection must have lasted for the next reconnect to start
/// its backoff from the first step again.
pub(super) const SETTLED: Duration = Duration::from_secs(10);

/// What opening a connection needs, taken from the locker without holding
/// it.
pub(super) struct Dial {
    shared: Weak<Shared>,
    endpoint: String,
    config: RemoteConfig,
    pushes: Arc<Pushes>,
    log: Arc<PeerLog>,
}

impl Dial {
    pub(super) fn new(shared: &Arc<Shared>) -> Dial {
        Dial {
            shared: Arc::downgrade(shared),
            endpoint: shared.endpoint.clone(),
            config: shared.config.clone(),
            pushes: shared.pushes.clone(),
            log: shared.log.clone(),
        }
    }

    /// Opens a connection (not installed), and the locker, if it still
    /// exists; a connection opened for a locker dropped meanwhile is
    /// closed.
    pub(super) async fn open(self) -> Result<(Arc<Connection>, Arc<Shared>), Error> {
        let weak = self.shared.clone();
        let opened = Instant::now();
        let conn = Connection::open(
            &self.endpoint,
            &self.config,
            self.pushes,
            self.log,
            move |ended| {
                let Some(shared) = weak.upgrade() else { return };
                on_close(&shared, ended, opened);
            },
        )
        .await;
        let Some(shared) = self.shared.upgrade() else {
            if let Ok(conn) = conn {
                conn.close();
            }
            return Err(Error::LockerUnavailable {
                endpoint: self.endpoint,
                reason: "the locker was dropped while it connected".to_owned(),
            });
        };
        let conn = conn?;
        let nanos = u64::try_from(conn.validity().as_nanos()).unwrap_or(u64::MAX);
        shared.validity.store(nanos, Ordering::Release);
        Ok((conn, shared))
    }
}

pub(super) async fn open(shared: &Arc<Shared>) -> Result<Arc<Connection>, Error> {
    Dial::new(shared).open().await.map(|(conn, _)| conn)
}

/// What a connection's end means for the next one.
fn on_close(shared: &Arc<Shared>, ended: Ended, opened: Instant) {
    let idle_close = ended == Ended::Quietly && shared.pushes.is_idle();
    // A connection the server ended soon counts against the backoff of the
    // background reconnect that follows: sent what is no response, reset,
    // or closed while waits were registered on it. One that lasted, or
    // that the server closed for idleness (the next call opens it again,
    // nothing loops), starts it afresh. One ended on this side (a dropped
    // runtime, an unanswered call) says nothing of the server.
    if opened.elapsed() >= SETTLED || idle_close {
        shared.short_lived.store(0, Ordering::Release);
    } else if ended != Ended::Otherwise {
        let _ = shared
            .short_lived
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(1))
            });
    }
    // Another connection is live (this one was left over from a late
    // reopen or reconnect): nothing to mend.
    if shared.live().is_some() {
        return;
    }
    // A connection the server closed in good order while no wait was
    // registered on it (it closes those that stay silent and hold
    // nothing) is opened again by the next call, not at once: else the
    // client would take the slot straight back, for nothing.
    if idle_close {
        shared.closed_idle.store(true, Ordering::Release);
    } else {
        reconnect_later(shared);
    }
}

/// How long past its longest step a reconnect task may be silent before
/// it counts as parked on a runtime nobody drives.
const GRACE: Duration = Duration::from_millis(250);

/// The background reconnect under way (or the call making the attempt in
/// its place): which, and when it last showed progress.
pub(super) struct Beat {
    id: u64,
    at: Instant,
}

/// The longest a running reconnect goes without a note: a sleep or an
/// attempt, and some room.
fn patience(config: &RemoteConfig) -> Duration {
    config
        .reconnect
        .max
        .max(config.connect_timeout)
        .saturating_add(GRACE)
}

/// Claims the reconnect slot for a new task or attempt, unless the one
/// holding it shows progress.
fn claim(shared: &Shared) -> Option<u64> {
    let now = Instant::now();
    let patience = patience(&shared.config);
    let mut slot = shared
        .reconnecting
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if slot
        .as_ref()
        .is_some_and(|beat| now < instant_after(beat.at, patience))
    {
        return None;
    }
    let id = shared.next_claim.fetch_add(1, Ordering::Relaxed);
    *slot = Some(Beat { id, at: now });
    Some(id)
}

/// In place of a reconnect task that shows no progress (its runtime is
/// not driven, or only inside each call's `block_on`, which ends before
/// the task runs), this call connects itself; `None` when no such task
/// holds the slot. While it does, and for the patience after a failure,
/// other calls fail at once; after a failure it starts the background
/// reconnect on its own runtime.
///
/// Cancel safe: a connection being opened is closed, and the slot counts
/// as parked again after its patience.
pub(super) async fn instead_of_a_parked_reconnect(
    shared: &Arc<Shared>,
) -> Option<Result<Arc<Connection>, Error>> {
    let held = shared
        .reconnecting
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some();
    if !held {
        return None;
    }
    let id = claim(shared)?;
    match Dial::new(shared).open().await {
        Ok((conn, shared)) => {
            let conn = shared.install(conn);
            free(&shared, id);
            if conn.is_alive() {
                Some(Ok(conn))
            } else {
                reconnect_later(&shared);
                None
            }
        }
        Err(err) => {
            tracing::debug!(endpoint = %shared.endpoint, %err, "reconnect in place of a parked task failed");
            free(shared, id);
            if let Some(conn) = shared.live() {
                return Some(Ok(conn));
            }
            shared.note_connect_error(Some(err.clone()));
            // Onwards from this call's runtime, which may be driven.
            if !matches!(err, Error::Unauthorized { .. }) {
                reconnect_later(shared);
            }
            Some(Err(err))
        }
    }
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
    let Some(id) = claim(shared) else { return };
    // Created before the spawn and owned by the task, so the slot is freed
    // however the task ends, including when it is dropped unrun because
    // its runtime is shutting down.
    let claim = Reconnecting {
        shared: Arc::downgrade(shared),
        id,
    };
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let policy = shared.config.reconnect;
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
            let dial = match weak.upgrade() {
                Some(shared) => Dial::new(&shared),
                None => return,
            };
            match dial.open().await {
                Ok((conn, shared)) => {
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
                    // its `on_close` while this task still held the slot.
                    if !conn.is_alive() {
                        reconnect_later(&shared);
                    }
                    return;
                }
                Err(err) => {
                    let Some(shared) = weak.upgrade() else { return };
                    // A connection opened meanwhile (a reopen, a call in
                    // this task's place), or a newer attempt that will
                    // report: nothing to report.
                    if shared.live().is_some() || !claim.beat() {
                        return;
                    }
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

/// Frees the reconnect slot, unless a newer claim holds it.
fn free(shared: &Shared, id: u64) {
    let mut slot = shared
        .reconnecting
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if slot.as_ref().is_some_and(|beat| beat.id == id) {
        *slot = None;
    }
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
        if let Some(shared) = self.shared.upgrade() {
            free(&shared, self.id);
        }
    }
}
