//! Opening a client's connection, and opening it again in the background
//! after it broke: a task per client at most, with a backoff that a
//! server breaking every connection at once cannot reset.
//!
//! Invariants:
//! - No task holds the locker (`Arc<Shared>`) while it waits for a
//!   connection: a locker dropped meanwhile is dropped, and what the task
//!   opens late is closed.
//! - The schedule (the backoff's step, when the next attempt is due, who
//!   makes it) lives in the locker, not in a task: a task may die with its
//!   runtime (a runtime per call), never run (a runtime driven only inside
//!   each call's `block_on`), or park (a runtime nobody drives). A task
//!   notes the time before each sleep and each attempt, both bounded (the
//!   backoff's ceiling, the connect timeout); one that has noted nothing
//!   for longer counts as parked. A call that finds an attempt overdue and
//!   no task showing progress starts it as a task of its own, which calls
//!   wait for ([`super::reopen`]), and becomes the runner until it ends;
//!   other calls fail at once. A superseded task ends at its next note, so
//!   a step of the backoff gets one attempt.
//! - After a close the next call mends (`reopen_next`: for idleness, or
//!   before the connection served a call), no task is started: a call
//!   reopens once the backoff's step allows.
//! - A connection that died before it was installed leaves what its
//!   `on_close` decided as it was.
//! - Each failed attempt, a task's or a call's, moves the backoff a step
//!   on; only a connection resets it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::{RemoteConfig, Shared};
use crate::net::conn::{instant_after, Connection, Dialing, Ended};
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
    dialing: Arc<Dialing>,
}

impl Dial {
    pub(super) fn new(shared: &Arc<Shared>) -> Dial {
        Dial {
            shared: Arc::downgrade(shared),
            endpoint: shared.endpoint.clone(),
            config: shared.config.clone(),
            pushes: shared.pushes.clone(),
            log: shared.log.clone(),
            dialing: shared.dialing.clone(),
        }
    }

    /// Opens a connection (not installed), and the locker, if it still
    /// exists; a connection opened for a locker dropped meanwhile is
    /// closed.
    ///
    /// Cancel safe: a connection being set up when the future is dropped
    /// is closed, as [`Connection::open`] does.
    pub(super) async fn open(self) -> Result<(Arc<Connection>, Arc<Shared>), Error> {
        let weak = self.shared.clone();
        let opened = Instant::now();
        let conn = Connection::open(
            &self.endpoint,
            &self.config,
            self.pushes,
            self.log,
            &self.dialing,
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
        // One above the nanoseconds, so that 0 stays "no handshake yet"
        // and a validity of zero is told apart from it.
        let nanos = u64::try_from(conn.validity().as_nanos()).unwrap_or(u64::MAX - 1);
        shared
            .validity
            .store(nanos.saturating_add(1), Ordering::Release);
        Ok((conn, shared))
    }
}

pub(super) async fn open(shared: &Arc<Shared>) -> Result<Arc<Connection>, Error> {
    Dial::new(shared).open().await.map(|(conn, _)| conn)
}

/// What a connection's end means for the next one.
fn on_close(shared: &Arc<Shared>, ended: Ended, opened: Instant) {
    let lasted = opened.elapsed() >= SETTLED;
    // A close in good order with nothing registered is an idle close: the
    // server closes connections that stay silent and hold nothing. With
    // calls waiting, only when the connection had lasted (one closed soon
    // under a call is a server that closes when asked).
    let idle_close = shared.pushes.is_idle()
        && match ended {
            Ended::Quietly | Ended::QuietlyUnused => true,
            Ended::QuietlyUnderCalls => lasted,
            _ => false,
        };
    // A connection the server ended soon counts against the backoff: the
    // background reconnect's, or the next call's reopen's (below). One that
    // lasted, or that served calls before the server closed it for
    // idleness, starts it afresh. One ended on this side (a dropped
    // runtime, an unanswered call) says nothing of the server.
    let short_lived = if lasted || (idle_close && ended == Ended::Quietly) {
        shared.short_lived.store(0, Ordering::Release);
        0
    } else if !matches!(ended, Ended::Otherwise | Ended::Abandoned) {
        let before = shared
            .short_lived
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(1))
            })
            .unwrap_or(0);
        before.saturating_add(1)
    } else {
        shared.short_lived.load(Ordering::Acquire)
    };
    // Another connection is live (this one was left over from a late
    // reopen or reconnect): nothing to mend.
    if shared.live().is_some() {
        return;
    }
    // A connection closed for idleness is opened again by the next call,
    // not at once: else the client would take the slot straight back, for
    // nothing. So is one whose runtime shut down, waits or not: a
    // background task would be spawned on that runtime, and die with it.
    if idle_close || ended == Ended::Abandoned {
        // The second (or later) in a row closed soon before it served a
        // call: a server that closes every connection as it welcomes it,
        // or an idle timeout shorter than the calls' spacing. The next
        // call reopens, but not before the backoff's step.
        if ended == Ended::QuietlyUnused && !lasted && short_lived >= 2 {
            let mut schedule = schedule(shared);
            let wait = shared
                .config
                .reconnect
                .delay(schedule.step(short_lived), &mut rand::rng());
            schedule.due = Some(instant_after(Instant::now(), wait));
        }
        shared.reopen_next.store(true, Ordering::Release);
    } else {
        reconnect_later(shared);
    }
}

/// How long past its longest step a reconnect task may be silent before
/// it counts as parked on a runtime nobody drives.
const GRACE: Duration = Duration::from_millis(250);

/// When the next attempt to connect is due, and who makes it. The
/// schedule lives here, not in a task, so that it outlives tasks that die
/// with their runtime (a runtime per call) or never run (a runtime driven
/// only inside each call's `block_on`): a call that finds an attempt
/// overdue and no task showing progress makes it itself.
pub(super) struct Schedule {
    /// The task (or call) making the attempts: which, and when it last
    /// showed progress.
    runner: Option<Beat>,
    /// Attempts failed since the last connection: the backoff's step.
    failed: u32,
    /// When the next attempt is due; `None` when none is scheduled.
    due: Option<Instant>,
    /// Wakes a sleeping task when the runner changes (a connection came
    /// in, a call took over); dropped with the locker, which wakes them
    /// too, so that none sleeps on for a locker that is gone.
    wake: tokio::sync::watch::Sender<()>,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            runner: None,
            failed: 0,
            due: None,
            wake: tokio::sync::watch::Sender::new(()),
        }
    }
}

struct Beat {
    id: u64,
    at: Instant,
    /// How long it may go without a note before it counts as parked: a
    /// task's longest step, or a call's attempt's connect timeout.
    patience: Duration,
}

impl Schedule {
    /// Forgets the failures, the attempt due and the runner: a connection
    /// is in. A task still sleeping towards an attempt ends at its next
    /// note, so that it neither keeps calls from reopening after this
    /// connection's close nor dials on the old step.
    pub(super) fn connected(&mut self) {
        self.failed = 0;
        self.due = None;
        self.runner = None;
        self.wake.send_replace(());
    }

    /// Whether a runner showed progress within its patience.
    fn running(&self, now: Instant) -> bool {
        self.runner
            .as_ref()
            .is_some_and(|beat| now < instant_after(beat.at, beat.patience))
    }

    fn is_runner(&self, id: u64) -> bool {
        self.runner.as_ref().is_some_and(|beat| beat.id == id)
    }

    /// Notes a failed attempt and when the next one is due.
    fn failed(&mut self, config: &RemoteConfig, short_lived: u32, now: Instant) {
        self.failed = self.failed.saturating_add(1);
        let wait = config
            .reconnect
            .delay(self.step(short_lived), &mut rand::rng());
        self.due = Some(instant_after(now, wait));
    }

    /// The backoff's step: failed attempts, or connections the server
    /// broke soon, whichever is more. Its ceiling stops growing long
    /// before 64 steps.
    fn step(&self, short_lived: u32) -> u32 {
        self.failed.max(short_lived).min(64)
    }
}

fn schedule(shared: &Shared) -> std::sync::MutexGuard<'_, Schedule> {
    shared
        .reconnecting
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
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

/// Whether a call may open the connection now that the next call is to
/// (after an idle close): not before the attempt due, and not beside a
/// task making the attempts, so that each step of the backoff gets one.
pub(super) fn may_reopen(shared: &Shared, now: Instant) -> bool {
    let schedule = schedule(shared);
    schedule.due.is_none_or(|due| due <= now) && !schedule.running(now)
}

/// Whether an attempt is overdue with no task making it: a call makes it
/// then ([`super::reopen::attempt`]).
pub(super) fn overdue(shared: &Shared, now: Instant) -> bool {
    let schedule = schedule(shared);
    schedule.due.is_some_and(|due| due <= now) && !schedule.running(now)
}

/// Notes an attempt made for calls that failed: the backoff moves a step
/// on, and the next attempt is due after it.
pub(super) fn failed_attempt(shared: &Shared) {
    let short_lived = shared.short_lived.load(Ordering::Acquire);
    schedule(shared).failed(&shared.config, short_lived, Instant::now());
}

/// Starts the background reconnection on the current runtime, unless a
/// task showing progress runs it. It follows the schedule: the attempt
/// due, or one after the backoff's step. It stops when it connects, when
/// the token is rejected, when the locker is dropped, or when a newer task
/// supersedes it. Without a current runtime it only schedules: the next
/// call, which runs on one, starts it or makes the attempt.
pub(super) fn reconnect_later(shared: &Arc<Shared>) {
    let now = Instant::now();
    let runtime = tokio::runtime::Handle::try_current().ok();
    let id = {
        let mut schedule = schedule(shared);
        if schedule.due.is_none() {
            let short_lived = shared.short_lived.load(Ordering::Acquire);
            let step = schedule.step(short_lived);
            let wait = shared.config.reconnect.delay(step, &mut rand::rng());
            schedule.due = Some(instant_after(now, wait));
        }
        if runtime.is_none() || schedule.running(now) {
            return;
        }
        let id = shared.next_claim.fetch_add(1, Ordering::Relaxed);
        schedule.runner = Some(Beat {
            id,
            at: now,
            patience: patience(&shared.config),
        });
        (id, schedule.wake.subscribe())
    };
    let Some(runtime) = runtime else { return };
    // Created before the spawn and owned by the task, so the runner is
    // cleared however the task ends, including when it is dropped unrun
    // because its runtime is shutting down.
    let (id, wake) = id;
    let claim = Reconnecting {
        shared: Arc::downgrade(shared),
        id,
        wake,
    };
    let weak: Weak<Shared> = Arc::downgrade(shared);
    runtime.spawn(async move {
        let mut claim = claim;
        reconnect(&mut claim, &weak).await;
    });
}

/// The background reconnect's attempts, each when due, until one
/// connects, the locker is gone, a newer task supersedes this one, or the
/// token is rejected.
async fn reconnect(claim: &mut Reconnecting, weak: &Weak<Shared>) {
    for attempt in 0u32.. {
        // Until the attempt is due; a call's failed attempt may have put
        // it later meanwhile.
        loop {
            let Some(wait) = claim.until_due() else {
                return;
            };
            if wait.is_zero() {
                break;
            }
            // Woken early when the runner changes, and for good when the
            // locker is dropped (the sender goes with it).
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                changed = claim.wake.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
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
                free(&shared, claim.id);
                // A connection that died before it was installed ran its
                // `on_close` while this task still held the schedule.
                mend_a_dead_install(&shared, &conn);
                return;
            }
            Err(err) => {
                let Some(shared) = weak.upgrade() else { return };
                // A connection opened meanwhile (a reopen, a call in this
                // task's place), or a newer runner that will report:
                // nothing to report.
                if shared.live().is_some() {
                    return;
                }
                {
                    let mut schedule = schedule(&shared);
                    if !schedule.is_runner(claim.id) {
                        return;
                    }
                    let short_lived = shared.short_lived.load(Ordering::Acquire);
                    schedule.failed(&shared.config, short_lived, Instant::now());
                }
                // Whatever said the next call would connect, this attempt
                // found the server out of reach.
                shared.reopen_next.store(false, Ordering::Release);
                tracing::debug!(endpoint = %shared.endpoint, %err, attempt, "reconnect failed");
                let rejected = matches!(err, Error::Unauthorized { .. });
                if rejected {
                    tracing::error!(endpoint = %shared.endpoint, %err, "lock server rejects our token; only calls try again, with backoff");
                } else if matches!(err, Error::Tls { .. })
                    && shared.connect_error() != Some(err.clone())
                {
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
}

/// After an attempt installed `conn` and freed the runner: a connection
/// that died first ran its `on_close` while the runner still stood, which
/// then started no task. Unless the next call is to reopen (an idle
/// close), one starts now.
pub(super) fn mend_a_dead_install(shared: &Arc<Shared>, conn: &Connection) {
    if !conn.is_alive() && !shared.reopen_next.load(Ordering::Acquire) {
        // The attempt due was this one's: the next is drawn afresh, a step
        // on (the close counted against the backoff), in one go, so that a
        // task never finds none due meanwhile.
        {
            let short_lived = shared.short_lived.load(Ordering::Acquire);
            let mut schedule = schedule(shared);
            let wait = shared
                .config
                .reconnect
                .delay(schedule.step(short_lived), &mut rand::rng());
            schedule.due = Some(instant_after(Instant::now(), wait));
        }
        reconnect_later(shared);
    }
}

/// An attempt made for calls (`id`, [`super::reopen`]) makes the
/// schedule's attempt: it becomes the runner, so that a task parked before
/// it (on a runtime driven only inside calls, say) ends at its next note
/// instead of dialling beside it.
pub(super) fn take_over(shared: &Shared, id: u64, now: Instant, patience: Duration) {
    let mut schedule = schedule(shared);
    schedule.wake.send_replace(());
    schedule.runner = Some(Beat {
        id,
        at: now,
        patience,
    });
}

/// Clears the runner, unless a newer one took over.
pub(super) fn free(shared: &Shared, id: u64) {
    let mut schedule = schedule(shared);
    if schedule.is_runner(id) {
        schedule.runner = None;
    }
}

/// Clears the runner when the reconnect task ends or is dropped, unless a
/// newer task took over. The schedule stays: an attempt overdue is made
/// by the next call, or the next task.
struct Reconnecting {
    shared: Weak<Shared>,
    id: u64,
    wake: tokio::sync::watch::Receiver<()>,
}

impl Reconnecting {
    /// Notes progress and says how long until the attempt due; `None`
    /// when a newer runner took over (or the locker is gone), and this
    /// task must end.
    fn until_due(&self) -> Option<Duration> {
        let shared = self.shared.upgrade()?;
        let now = Instant::now();
        let mut schedule = schedule(&shared);
        let beat = schedule.runner.as_mut().filter(|beat| beat.id == self.id)?;
        beat.at = now;
        // No attempt due: a connection came in meanwhile (it resets the
        // schedule), and this task's work is done.
        let due = schedule.due?;
        Some(due.saturating_duration_since(now))
    }
}

impl Drop for Reconnecting {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            free(&shared, self.id);
        }
    }
}
