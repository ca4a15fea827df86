//! `Leadership`: proof that this candidate leads an election, with its term
//! and value, kept alive like a write lock and given up by `resign`.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::calls::proclaim_round;
use crate::lock::coordinator::Coordinator;
use crate::locker::proclamation::Proclamation;
use crate::{Error, LockArgs, WriteGuard};

/// Proof that this candidate leads an election, returned by
/// [`Election::campaign`](crate::Election::campaign).
///
/// It is a write lock on the election's resource, and behaves like a
/// [`WriteGuard`]: refreshed in the background, [`is_lost`](Self::is_lost)
/// turns true and [`lost`](Self::lost) fires before any other candidate can
/// be granted the lead, and dropping it resigns in the background. Its
/// [`term`](Self::term) is the lock's fencing token: strictly greater than
/// the term of every earlier leader of the election, so the resources the
/// leader drives can refuse a deposed leader's late work
/// ([`FencingGate`](crate::FencingGate)).
///
/// While it leads, it sends its current value to the lockers again every
/// `Lease::refresh_interval`, so that a locker that restarted (and forgot
/// it) reports it again once its quarantine is over.
#[must_use = "the leadership is resigned as soon as it is dropped"]
pub struct Leadership {
    /// `None` once a resign was confirmed.
    guard: Option<WriteGuard>,
    coord: Arc<Coordinator>,
    args: LockArgs,
    values: Arc<Mutex<Values>>,
    /// Re-sends the current value while leading; aborted on resign and drop.
    repeater: Option<JoinHandle<()>>,
}

/// The leader's value, and the sequence numbers it has used.
struct Values {
    /// The value it proclaimed last, as the lockers should report it.
    current: Proclamation,
    /// The highest `seq` ever sent: a proclamation that was cancelled or
    /// failed may be on some lockers with it, so every later one, the
    /// repeater's too, goes above it.
    highest_sent: u64,
    /// A `proclaim` call is under way; the repeater leaves the value alone.
    in_flight: bool,
}

impl Values {
    /// The current value under a `seq` above every one sent, when a
    /// proclamation that did not finish may have reached some lockers: the
    /// lockers then report the current value again, not the abandoned one.
    fn next_repeat(&mut self) -> Proclamation {
        if !self.in_flight && self.current.seq < self.highest_sent {
            self.highest_sent += 1;
            self.current.seq = self.highest_sent;
        }
        self.current.clone()
    }
}

/// Ends a `proclaim` call, however it ends (a cancelled one included).
struct InFlight(Arc<Mutex<Values>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.0).in_flight = false;
    }
}

fn lock(values: &Mutex<Values>) -> std::sync::MutexGuard<'_, Values> {
    values.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Leadership {
    pub(super) fn new(guard: WriteGuard, coord: Arc<Coordinator>, p: Proclamation) -> Self {
        let args = guard.args().clone();
        let values = Arc::new(Mutex::new(Values {
            highest_sent: p.seq,
            current: p,
            in_flight: false,
        }));
        let repeater = tokio::runtime::Handle::try_current().ok().map(|handle| {
            handle.spawn(repeat(
                coord.clone(),
                args.clone(),
                values.clone(),
                guard.loss_token(),
            ))
        });
        Leadership {
            guard: Some(guard),
            coord,
            args,
            values,
            repeater,
        }
    }

    /// The term of this leadership: the election's fencing token, greater
    /// than every earlier leader's.
    pub fn term(&self) -> u64 {
        self.current().term
    }

    /// The value this leader proclaimed last.
    pub fn value(&self) -> Arc<[u8]> {
        self.current().value
    }

    /// The uid of the leader's lock, as the lockers list it.
    pub fn uid(&self) -> &str {
        &self.args.uid
    }

    fn current(&self) -> Proclamation {
        lock(&self.values).current.clone()
    }

    /// Replaces the leader's value, for [`Election::leader`] and the
    /// observers to report.
    ///
    /// Succeeds once a write quorum of lockers stored it with the leader's
    /// entry. Fails with [`Error::LockLost`] when this leadership was lost
    /// or resigned before the call (its lease ran out, or it was
    /// superseded), and then sends nothing; with [`Error::InvalidArgument`]
    /// for a value longer than [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN);
    /// and with [`Error::QuorumUnavailable`] when too few lockers answered
    /// ([`Error::Quarantined`] when lockers refusing for quarantine are
    /// what keeps a quorum).
    /// In the last case the lockers that answered keep the new value and
    /// the leader keeps re-sending it, so it may still take effect: call
    /// again to be sure. When the lease runs out *during* the call, it
    /// fails with [`Error::LockLost`] too, but lockers that still held the
    /// entry may have stored the value: observers may report it, with this
    /// term, until those lockers free the entry.
    ///
    /// [`Election::leader`]: crate::Election::leader
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it finished, the new value may have
    /// reached some lockers; the leader's next re-send (within
    /// `Lease::refresh_interval`) puts its previous value back on every
    /// locker, above the abandoned one, and a later `proclaim` goes above
    /// both.
    pub async fn proclaim(&mut self, value: impl Into<Arc<[u8]>>) -> Result<(), Error> {
        if self.is_lost() {
            return Err(Error::LockLost);
        }
        let next = {
            let mut values = lock(&self.values);
            let next = Proclamation::new(values.current.term, values.highest_sent + 1, value)?;
            values.highest_sent = next.seq;
            values.in_flight = true;
            next
        };
        let in_flight = InFlight(self.values.clone());
        let result = proclaim_round(&self.coord, &self.args, &next).await;
        let mut values = lock(&self.values);
        let outcome = match result {
            Ok(true) if !self.is_lost() => {
                values.current = next;
                Ok(())
            }
            Ok(_) => Err(Error::LockLost),
            Err(err) => {
                // Re-sent by the repeater, so that it takes effect on every
                // locker if this call is not repeated.
                values.current = next;
                Err(err)
            }
        };
        drop(values);
        drop(in_flight);
        outcome
    }

    /// Gives up the lead and waits until a write quorum of lockers freed it.
    ///
    /// From the first call on, this leadership no longer counts:
    /// [`is_lost`](Self::is_lost) is true and [`lost`](Self::lost) fires,
    /// since the lockers may free it (and grant the next candidate) at any
    /// moment after. If too few lockers confirm ([`Error::ReleaseUnconfirmed`]),
    /// the leadership keeps its uid and grants: calling `resign` again sends
    /// the release again, and dropping it keeps retrying in the background
    /// until the lockers must have expired the entries. A confirmed resign
    /// makes later calls return `Ok` at once.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Once called, the leadership no longer counts; a call
    /// dropped before it finished leaves the release to a later call or to
    /// the drop.
    pub async fn resign(&mut self) -> Result<(), Error> {
        let Some(guard) = &self.guard else {
            return Ok(());
        };
        if let Some(repeater) = self.repeater.take() {
            repeater.abort();
        }
        guard.release_keeping().await?;
        // Confirmed by a quorum; lockers that did not confirm yet are
        // retried in the background, and dropping the guard sends nothing
        // more.
        self.guard = None;
        Ok(())
    }

    /// Whether this leadership is lost or resigned; see
    /// [`WriteGuard::is_lost`]. Check it before acting as the leader.
    pub fn is_lost(&self) -> bool {
        self.guard.as_ref().is_none_or(WriteGuard::is_lost)
    }

    /// Resolves when this leadership is lost or resigned; see
    /// [`WriteGuard::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let lost = self.guard.as_ref().map(WriteGuard::lost);
        async move {
            if let Some(lost) = lost {
                lost.await;
            }
        }
    }

    /// A token cancelled when this leadership is lost or resigned; see
    /// [`WriteGuard::loss_token`].
    pub fn loss_token(&self) -> CancellationToken {
        match &self.guard {
            Some(guard) => guard.loss_token(),
            None => {
                let token = CancellationToken::new();
                token.cancel();
                token
            }
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(repeater) = self.repeater.take() {
            repeater.abort();
        }
        // The guard's own drop releases the entries in the background.
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.current();
        f.debug_struct("Leadership")
            .field("resource", &self.args.resources[0])
            .field("term", &p.term)
            .field("seq", &p.seq)
            .field("uid", &self.args.uid)
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// Re-sends the leader's latest proclamation every refresh interval until
/// the leadership is lost, for lockers that missed it or forgot it.
async fn repeat(
    coord: Arc<Coordinator>,
    args: LockArgs,
    values: Arc<Mutex<Values>>,
    lost: CancellationToken,
) {
    loop {
        tokio::select! {
            () = lost.cancelled() => return,
            () = tokio::time::sleep(coord.lease.refresh_interval) => {}
        }
        let p = lock(&values).next_repeat();
        if let Err(err) = proclaim_round(&coord, &args, &p).await {
            tracing::debug!(uid = %args.uid, %err, "re-sending the leader's value failed");
        }
    }
}
