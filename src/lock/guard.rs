//! `WriteGuard` and `ReadGuard`: proof of a held lock, released on `unlock`
//! or, in the background, on drop.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::lock::acquisition::{Acquisition, Loss};
use crate::lock::drain::owe_batch;
use crate::lock::keeper::{Keeper, LeaseKey};
use crate::lock::own_runtime::on_own_runtime;
use crate::lock::refresh::{clean_up_after_holder, clean_up_now, note_lost};
use crate::lock::release::{release_all, release_confirmed};
use crate::lock::telemetry::LossCause;
use crate::quorum::fence::draw_token;
use crate::Error;

/// What both guard types hold.
struct Held {
    state: Arc<Acquisition>,
    /// The runtime the lock was acquired on; drop releases there, so dropping
    /// a guard works from any thread, inside a runtime or not.
    handle: Handle,
    /// When the lock is lost; the keeper moves it forward on each refresh.
    signal: Loss,
    keeper: Arc<Keeper>,
    lease: LeaseKey,
    released: bool,
}

impl Held {
    fn new(state: Arc<Acquisition>, handle: Handle, keeper: Arc<Keeper>) -> Self {
        let trusted_for = state.coord.lease.trusted_for();
        let signal = Loss::start(
            &state,
            state.coord.clock.clone(),
            state.trust_from(),
            trusted_for,
        );
        let lease = keeper.register(&handle, state.clone(), signal.clone());
        Held {
            state,
            handle,
            signal,
            keeper,
            lease,
            released: false,
        }
    }

    async fn fencing_token(&self) -> Result<u64, Error> {
        if self.signal.check() {
            return Err(Error::LockLost);
        }
        let state = &self.state;
        let token = *state.token.get_or_try_init(|| draw_token(state)).await?;
        if self.signal.check() {
            return Err(Error::LockLost);
        }
        Ok(token)
    }

    /// Asks a quorum of lockers afresh whether they still hold the lock,
    /// with a fencing draw whose token is not kept: `LockLost` when they
    /// do not (forced open since the last refresh, say), whatever token
    /// an earlier draw left.
    async fn confirm_held(&self) -> Result<(), Error> {
        if self.signal.check() {
            return Err(Error::LockLost);
        }
        draw_token(&self.state).await?;
        if self.signal.check() {
            return Err(Error::LockLost);
        }
        Ok(())
    }

    /// The token kept by an earlier draw, or one drawn now and not kept
    /// (see [`keep_token`](Self::keep_token)): for a caller whose call may
    /// still fail or be cancelled after this draw, and which must then
    /// leave no token behind.
    async fn token_unkept(&self) -> Result<u64, Error> {
        if self.signal.check() {
            return Err(Error::LockLost);
        }
        let token = match self.state.token.get() {
            Some(&kept) => kept,
            None => draw_token(&self.state).await?,
        };
        if self.signal.check() {
            return Err(Error::LockLost);
        }
        Ok(token)
    }

    /// Keeps `token` (from [`token_unkept`](Self::token_unkept)) as this
    /// lock's token, unless one is kept already; returns the one kept.
    fn keep_token(&self, token: u64) -> u64 {
        match self.state.token.set(token) {
            Ok(()) => token,
            Err(_) => self.state.token.get().copied().unwrap_or(token),
        }
    }

    async fn unlock(mut self) -> Result<(), Error> {
        self.released = true;
        self.signal.holder_stopped();
        let registered = self.keeper.remove(self.lease);
        let here = Handle::try_current();
        if self.signal.check() {
            if registered {
                // No lane saw the deadline pass: declare it as a lane would.
                note_lost(&self.state, &self.signal, LossCause::RefreshMissed);
            }
            // The holder has let go: the entries go now, here (outside any
            // runtime on the coordinator's own), unless the lane's clean-up
            // has begun; a lane's task may sit on a runtime that is idle or
            // gone.
            clean_up_now(&self.state, &self.signal).await;
            return Err(Error::LockLost);
        }
        if here.is_ok() {
            return release_confirmed(self.state.clone()).await;
        }
        // Polled outside a runtime (another executor, a plain thread): the
        // release needs tokio's timers, and the acquiring runtime may no
        // longer be driven, so it runs on the coordinator's own.
        let (done, result) = tokio::sync::oneshot::channel();
        let state = self.state.clone();
        on_own_runtime(&self.state.coord.own_runtime, move |_| async move {
            let _ = done.send(release_confirmed(state).await);
        })?;
        result.await.unwrap_or(Err(Error::NoRuntime))
    }

    /// Counts the lock as held by the current runtime too, so that its lane
    /// refreshes it even if the acquiring runtime is no longer driven.
    fn adopt_here(&self) {
        if let Ok(handle) = Handle::try_current() {
            self.keeper.adopt(self.lease, &handle);
        }
    }

    fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let keeper = self.keeper.clone();
        let lease = self.lease;
        let signal = self.signal.clone();
        async move {
            if let Ok(handle) = Handle::try_current() {
                keeper.adopt(lease, &handle);
            }
            crate::lock::loss::LossSignal::lost(signal).await;
        }
    }

    fn loss_token(&self) -> CancellationToken {
        self.adopt_here();
        self.signal.child_token()
    }

    /// Releases the lock like `unlock`, but keeps the guard (an
    /// election's resign, which the caller may retry): the lock counts as
    /// lost from the start, since the lockers may free it at any moment
    /// after, and is no longer refreshed. The first call sends the release
    /// to every locker that granted, retrying failures in the background
    /// as `unlock` does; a later call, after one that was not confirmed,
    /// sends the unlock to every locker again. `Ok` once a quorum confirmed.
    async fn release_keeping(&self) -> Result<(), Error> {
        // The holder lets go (a resign): a lost lock's entries are no
        // longer held for it.
        self.signal.holder_stopped();
        self.signal.declare();
        self.keeper.remove(self.lease);
        Handle::try_current().map_err(|_| Error::NoRuntime)?;
        if self.state.is_released() {
            return crate::lock::release::release_again(self.state.clone()).await;
        }
        release_confirmed(self.state.clone()).await
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.signal.holder_stopped();
        self.keeper.remove(self.lease);
        let plan = self.state.begin_release();
        crate::lock::release::watch_stragglers(&self.state, &plan.in_flight, &self.handle);
        // Lost (not released by a resign, which declares too): its
        // clean-up task may sit on a runtime that is idle or gone.
        if plan.targets.is_empty() && self.state.was_lost() {
            clean_up_after_holder(&self.state, &self.signal, &self.handle);
        }
        if !plan.targets.is_empty() {
            // On the runtime dropping the guard if there is one; outside
            // any, on the coordinator's own, since the acquiring runtime may
            // be gone or no longer driven. Each unlock is owed from here:
            // a task dropped unrun or cut short (its runtime shut down)
            // queues what it had not done, for the next drain task or
            // `finish_releases` (see `release::release_one`).
            // Counted by its queues as a batch in flight, not among the
            // outstanding releases: if this runtime is no longer driven,
            // another sends it once it is overdue (see `OwedBatch`).
            let owed = owe_batch(&self.state, plan.targets.iter().map(|t| t.index));
            let release = release_all(self.state.clone(), plan.targets);
            let task = async move {
                release.await;
                drop(owed);
            };
            match Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(task);
                }
                Err(_) => {
                    // Without a runtime for it, the task is dropped unrun
                    // and its unlocks are queued.
                    let _ = on_own_runtime(&self.state.coord.own_runtime, move |_| task);
                }
            }
        }
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("resources", &self.state.args.resources)
            .field("uid", &self.state.args.uid)
            .field("lost", &self.signal.is_declared())
            .finish()
    }
}

macro_rules! guard {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[must_use = concat!("the ", $what, " lock is released as soon as the guard is dropped")]
        pub struct $name {
            held: Held,
        }

        impl $name {
            pub(crate) fn new(state: Arc<Acquisition>, handle: Handle, keeper: Arc<Keeper>) -> Self {
                $name { held: Held::new(state, handle, keeper) }
            }

            /// The locked resource names, sorted.
            pub fn resources(&self) -> &[String] {
                &self.held.state.args.resources
            }

            /// The uid of this acquisition, as the lockers know it.
            pub fn uid(&self) -> &str {
                &self.held.state.args.uid
            }

            /// The arguments every locker call of this lock sends.
            #[allow(dead_code)]
            pub(crate) fn args(&self) -> &crate::LockArgs {
                &self.held.state.args
            }

            /// Cancels `token` when this lock is lost (see
            /// `LossSignal::link`), refreshing it on the current runtime
            /// too, as `loss_token` does.
            #[allow(dead_code)]
            pub(crate) fn link_loss(&self, token: CancellationToken) {
                self.held.adopt_here();
                self.held.signal.link(token);
            }

            /// See `Held::token_unkept`.
            #[allow(dead_code)]
            pub(crate) async fn token_unkept(&self) -> Result<u64, Error> {
                self.held.token_unkept().await
            }

            /// See `Held::keep_token`.
            #[allow(dead_code)]
            pub(crate) fn keep_token(&self, token: u64) -> u64 {
                self.held.keep_token(token)
            }

            /// Whether a draw kept a token for this lock already.
            #[allow(dead_code)]
            pub(crate) fn has_kept_token(&self) -> bool {
                self.held.state.token.get().is_some()
            }

            /// See `Held::confirm_held`.
            #[allow(dead_code)]
            pub(crate) async fn confirm_held(&self) -> Result<(), Error> {
                self.held.confirm_held().await
            }

            /// See `Held::release_keeping`.
            #[allow(dead_code)]
            pub(crate) async fn release_keeping(&self) -> Result<(), Error> {
                self.held.release_keeping().await
            }

            /// How many lockers are known to hold this lock right now.
            pub fn granted_by(&self) -> usize {
                self.held.state.granted()
            }

            /// The fencing token of this lock: strictly greater than the
            /// token of every holder before it whose lock conflicted with
            /// this one, on each of its resources. Send it with every write
            /// to the protected resource and let the resource refuse older
            /// tokens ([`FencingGate`](crate::FencingGate)); that stops a
            /// holder that paused past its lease, which no lease can.
            ///
            /// Drawn on the first call, from a quorum of lockers (one round
            /// trip, two when the lockers disagree), and the same on every
            /// later call. Locks that never ask pay nothing. Fails with
            /// [`Error::LockLost`] when the lock is lost,
            /// [`Error::Unsupported`] when a locker cannot draw tokens, and
            /// [`Error::QuorumUnavailable`] when too few lockers answered
            /// ([`Error::Quarantined`] when lockers refusing for quarantine
            /// are what keeps a quorum); the last two may succeed when
            /// called again.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe. A call dropped before it finished leaves no
            /// token behind; the next call draws one. Tokens drawn and not
            /// returned only make later tokens larger.
            pub async fn fencing_token(&self) -> Result<u64, Error> {
                self.held.fencing_token().await
            }

            /// Releases the lock and waits until a quorum of lockers confirms it.
            ///
            /// Returns [`Error::LockLost`] when the lock had already been lost,
            /// so the caller learns that the protected work was not
            /// protected to the end, and [`Error::ReleaseUnconfirmed`] when
            /// too few lockers could be reached in time. The release is then
            /// retried in the background until the lockers must have expired
            /// the entries anyway (see `Timeouts::release_retry`).
            ///
            /// It runs on the current tokio runtime; polled outside one (a
            /// plain thread, another executor), it runs on a runtime the
            /// `Dsync` keeps for such work (one thread, started the first
            /// time it is needed, ended with the `Dsync`), so it works even
            /// when the runtime that acquired the lock is gone or no longer
            /// driven. Dropping the guard instead releases on the current
            /// runtime, or outside any on that same runtime.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe. Once this future has been created the lock is being
            /// released: dropping it before or after it is first polled hands
            /// the outstanding unlock calls to the runtime.
            pub async fn unlock(self) -> Result<(), Error> {
                self.held.unlock().await
            }

            /// Whether the lock is lost: a quorum of lockers no longer holds
            /// it, or no quorum confirmed a refresh for
            /// `Lease::validity - Lease::safety_margin` since the last
            /// confirmed refresh was sent. Other clients may be granted it
            /// soon.
            ///
            /// This is the check that check-then-act code relies on. It
            /// reads the clock itself, so it turns true on time even if no
            /// refresh ran: after the holder's thread stalled, when the
            /// runtime that keeps the lock is not being driven, or when the
            /// guard is held in synchronous code. While it returns `false`,
            /// no locker can have freed the lock for at least
            /// `Lease::safety_margin` (given the clock assumptions in
            /// [`Lease`](crate::Lease)). Once `true`, it stays `true`.
            pub fn is_lost(&self) -> bool {
                self.held.signal.check()
            }

            /// Resolves when the lock is lost. Race it against the work the
            /// lock protects, and stop that work when it fires. It fires
            /// before any locker can expire the lock: `Lease::safety_margin`
            /// before with clocks that run at the same rate, less what
            /// lockers' clocks running faster take within the drift bound
            /// (docs/guarantees.md, the assumptions); and never while a
            /// quorum keeps confirming it.
            ///
            /// The future keeps its own timer at the loss deadline while it
            /// is polled on a tokio runtime, and counts the lock as held by
            /// that runtime, whose keeper then refreshes it too. Polled
            /// outside a runtime it waits for the keeper's word instead.
            pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
                self.held.lost()
            }

            /// A token that is cancelled when the lock is lost. It is a child
            /// token: cancelling it yourself does not mark the lock lost.
            ///
            /// The token is cancelled on time by the keeper, which this call
            /// makes run on the current runtime as well (if there is one).
            /// A plain `is_cancelled()` on it cannot look at the clock: after
            /// a stall of the whole process, or in synchronous code while no
            /// runtime runs, it can lag behind the deadline until a runtime
            /// runs again. Check-then-act code must ask
            /// [`is_lost`](Self::is_lost) instead, which reads the clock.
            pub fn loss_token(&self) -> CancellationToken {
                self.held.loss_token()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.held.fmt(f)
            }
        }
    };
}

guard!(
    /// Proof that this task holds the exclusive lock of a
    /// [`DRWMutex`](crate::DRWMutex).
    ///
    /// The guard is owned and `'static`: move it into a task, keep it in a
    /// struct, or hold it across `.await`. Prefer [`unlock`](Self::unlock),
    /// which reports whether the release was confirmed; dropping the guard
    /// releases in the background on the runtime that acquired it, never
    /// blocks and never panics, even outside a runtime.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let guard = ds.rw_mutex(["ledger"])?.lock().await?;
    /// let work = tokio::spawn(async move {
    ///     // ... write the ledger while holding `guard` ...
    ///     guard.unlock().await
    /// });
    /// work.await.expect("task panicked")?;
    /// # Ok(())
    /// # }
    /// ```
    WriteGuard,
    "write"
);

guard!(
    /// Proof that this task holds a shared lock of a
    /// [`DRWMutex`](crate::DRWMutex); other readers may hold it too, writers
    /// may not.
    ///
    /// Owned and `'static` like [`WriteGuard`], with the same release rules.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let config = ds.rw_mutex(["config"])?;
    /// let a = config.read().await?;
    /// let b = config.read().await?; // readers share
    /// assert_ne!(a.uid(), b.uid());
    /// a.unlock().await?;
    /// b.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    ReadGuard,
    "read"
);
