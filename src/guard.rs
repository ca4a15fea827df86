//! `WriteGuard` and `ReadGuard`: proof of a held lock, released on `unlock`
//! or, in the background, on drop.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::keeper::LeaseKey;
use crate::release::{release_all, release_confirmed};
use crate::round::RoundState;
use crate::Error;

/// What both guard types hold.
struct Held {
    state: Arc<RoundState>,
    /// The runtime the lock was acquired on; drop releases there, so dropping
    /// a guard works from any thread, inside a runtime or not.
    handle: Handle,
    /// Cancelled by the keep-alive task when the lock is lost.
    lost: CancellationToken,
    lease: LeaseKey,
    released: bool,
}

impl Held {
    fn new(state: Arc<RoundState>, handle: Handle) -> Self {
        let lost = CancellationToken::new();
        let coord = &state.coord;
        let lease = coord
            .keeper
            .register(coord, &handle, state.clone(), lost.clone());
        Held {
            state,
            handle,
            lost,
            lease,
            released: false,
        }
    }

    async fn unlock(mut self) -> Result<(), Error> {
        self.released = true;
        self.state.coord.keeper.remove(self.lease);
        if self.lost.is_cancelled() {
            // The keeper already removed the entries.
            return Err(Error::LockLost);
        }
        let release = release_confirmed(self.state.clone(), self.handle.clone());
        if Handle::try_current().is_ok() {
            return release.await;
        }
        // Polled outside a runtime (another executor, a plain thread): the
        // release needs tokio's timers, so run it on the runtime that
        // acquired the lock and wait for it from here.
        match self.handle.spawn(release).await {
            Ok(result) => result,
            Err(_) => Err(Error::NoRuntime),
        }
    }

    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.lost.clone().cancelled_owned()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.state.coord.keeper.remove(self.lease);
        let plan = self.state.begin_release();
        if !plan.targets.is_empty() {
            // Spawning never blocks; on a runtime that has shut down the task
            // is dropped and the lock servers expire the entries instead.
            self.handle
                .spawn(release_all(self.state.clone(), plan.targets));
        }
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("resources", &self.state.args.resources)
            .field("uid", &self.state.args.uid)
            .field("lost", &self.lost.is_cancelled())
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
            pub(crate) fn new(state: Arc<RoundState>, handle: Handle) -> Self {
                $name { held: Held::new(state, handle) }
            }

            /// The locked resource names, sorted.
            pub fn resources(&self) -> &[String] {
                &self.held.state.args.resources
            }

            /// The uid of this acquisition, as the lockers know it.
            pub fn uid(&self) -> &str {
                &self.held.state.args.uid
            }

            /// How many lockers are known to hold this lock right now.
            pub fn granted_by(&self) -> usize {
                self.held.state.granted()
            }

            /// Releases the lock and waits until a quorum of lockers confirms it.
            ///
            /// Returns [`Error::LockLost`] when the lock had already been lost,
            /// so the caller learns that the protected work was not
            /// protected to the end, and [`Error::ReleaseUnconfirmed`] when
            /// too few lockers could be reached in time. The release is then retried in the
            /// background for `Timeouts::release_retry`, and entries that still
            /// remain expire on the lock servers.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe. Once this future has been created the lock is being
            /// released: dropping it before or after it is first polled hands
            /// the outstanding unlock calls to the runtime.
            pub async fn unlock(self) -> Result<(), Error> {
                self.held.unlock().await
            }

            /// Whether the lock is known to be lost: a quorum of lockers no
            /// longer holds it, or none confirmed a refresh for
            /// `Lease::validity - Lease::safety_margin`. Other clients may be
            /// granted it soon.
            pub fn is_lost(&self) -> bool {
                self.held.lost.is_cancelled()
            }

            /// Resolves when the lock is lost. Race it against the work the
            /// lock protects, and stop that work when it fires. It fires
            /// at least `Lease::safety_margin` before any locker can expire
            /// the lock, and never while a quorum keeps confirming it.
            pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
                self.held.lost()
            }

            /// A token that is cancelled when the lock is lost. It is a child
            /// token: cancelling it yourself does not mark the lock lost.
            pub fn loss_token(&self) -> CancellationToken {
                self.held.lost.child_token()
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
