//! Connections kept for the next call: a call hands its connection back
//! here, not to the pool, which would test it with a round trip of its
//! own (sqlx 0.8 pings every connection it takes back): one round trip
//! more per call, for the server and for this process.
//!
//! Invariants:
//! - a connection is kept only after its call succeeded; a call that
//!   failed, timed out or was dropped mid-way drops its connection, which
//!   the pool then tests (and closes when broken), as before;
//! - every connection of the locker's own calls and tasks comes through
//!   [`Warm::take`], so a connection is never kept while a taker waits
//!   for the pool: it goes to the pool then, which hands it on (a taker
//!   never races the pool against the kept ones: dropping the pool's
//!   future would abandon a connection it was opening, and a server
//!   forks a process for each);
//! - a connection kept and unused for [`IDLE`] goes back to the pool (a
//!   task of its own sees to it while anything is kept, whatever else the
//!   locker runs), as does one of every [`ROUND`] kept, so that the pool's
//!   idle timeout and lifetime still apply to connections in steady use.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool};

/// How long a kept connection waits for a call before it goes back to
/// the pool.
pub(super) const IDLE: Duration = Duration::from_secs(10);

/// One connection of this many kept goes back to the pool instead: the
/// pool's test and its lifetime rule then reach every connection in use.
const ROUND: u32 = 256;

#[derive(Default)]
pub(in crate::sql) struct Warm {
    state: Mutex<State>,
    count: AtomicU32,
    /// Whether a task is set to hand back the connections left unused
    /// (see [`keep`](Self::keep)).
    pruning: AtomicBool,
}

#[derive(Default)]
struct State {
    /// The kept connections, oldest first, each with when it was kept.
    kept: VecDeque<(Instant, PoolConnection<Any>)>,
    /// Takers waiting for the pool: while there is one, a connection is
    /// given back to the pool, which hands it to them, not kept.
    waiting: usize,
}

impl Warm {
    /// A connection: the one kept last, or else the pool's.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it returns, it holds no connection and
    /// counts as waiting no more.
    pub(in crate::sql) async fn take(
        &self,
        pool: &AnyPool,
    ) -> Result<PoolConnection<Any>, sqlx::Error> {
        {
            let mut state = self.lock();
            if let Some((_, conn)) = state.kept.pop_back() {
                return Ok(conn);
            }
            // Counted under the same lock as the look: a connection kept
            // after it goes to the pool, and so to this taker.
            state.waiting += 1;
        }
        let _waiting = Waiting(self);
        pool.acquire().await
    }

    /// Keeps `conn`, whose call succeeded, for the next call; or gives it
    /// back to the pool when a taker waits there. Then, unless one is set
    /// already, sets a task to hand back whatever stays unused for
    /// [`IDLE`]: a locker whose calls stop keeps nothing for longer.
    pub(in crate::sql) fn keep(self: &Arc<Self>, conn: PoolConnection<Any>) {
        self.keep_one(conn);
        if !self.pruning.swap(true, Ordering::AcqRel) {
            tokio::spawn(Self::prune_while_kept(Arc::downgrade(self)));
        }
    }

    /// Hands back each kept connection once it has been unused for
    /// [`IDLE`], for as long as anything is kept and the locker lives.
    async fn prune_while_kept(warm: Weak<Warm>) {
        let mut at = Instant::now() + IDLE;
        loop {
            tokio::time::sleep_until(at).await;
            let Some(warm) = warm.upgrade() else { return };
            warm.prune();
            // Next when the oldest connection left turns stale.
            if let Some((since, _)) = warm.lock().kept.front() {
                at = *since + IDLE;
                continue;
            }
            warm.pruning.store(false, Ordering::Release);
            // A connection kept between the look and the store found the
            // task still set, and set none: this one goes on for it.
            if warm.lock().kept.is_empty() || warm.pruning.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    fn keep_one(&self, conn: PoolConnection<Any>) {
        if self.count.fetch_add(1, Ordering::Relaxed) % ROUND == ROUND - 1 {
            return; // dropped: back to the pool, which tests it
        }
        let now = Instant::now();
        let (given_back, stale) = {
            let mut state = self.lock();
            if state.waiting > 0 {
                (Some(conn), Vec::new())
            } else {
                state.kept.push_back((now, conn));
                (None, Self::stale(&mut state.kept, now))
            }
        };
        drop((given_back, stale));
    }

    /// Hands the connections unused for [`IDLE`] back to the pool.
    fn prune(&self) {
        let stale = Self::stale(&mut self.lock().kept, Instant::now());
        drop(stale);
    }

    fn stale(
        kept: &mut VecDeque<(Instant, PoolConnection<Any>)>,
        now: Instant,
    ) -> Vec<PoolConnection<Any>> {
        let mut stale = Vec::new();
        while kept
            .front()
            .is_some_and(|(since, _)| now.duration_since(*since) >= IDLE)
        {
            stale.extend(kept.pop_front().map(|(_, conn)| conn));
        }
        stale
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A taker waiting for the pool, counted until it has a connection or is
/// dropped.
struct Waiting<'a>(&'a Warm);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.waiting = state.waiting.saturating_sub(1);
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        // A pooled connection dropped goes back to the pool by a task of
        // the driver, which panics outside a Tokio runtime: there, each is
        // taken out of the pool and closed where it is.
        if tokio::runtime::Handle::try_current().is_err() {
            for (_, conn) in self.lock().kept.drain(..) {
                drop(conn.detach());
            }
        }
    }
}
