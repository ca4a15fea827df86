//! `SemaphorePermit`: one or more of a semaphore's permits, held until it
//! is dropped or unlocked.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use futures::future::{join_all, select_all, FutureExt};
use tokio_util::sync::CancellationToken;

use crate::{Error, ReadGuard, WriteGuard};

/// Permits of a [`Semaphore`](crate::Semaphore), held until the permit is
/// dropped (released in the background) or [`unlock`](Self::unlock)ed.
///
/// A permit is made of locks: the write lock on each of its slots
/// (`semaphore/NAME/permit/I`, with the two `held/I/..` names that spell
/// the semaphore's count for the slot) and the read lock on the count,
/// which the permits of one handle and its clones share while any is held.
/// Both are refreshed in the background like any lock, and the permit is
/// lost as soon as either is: [`is_lost`](Self::is_lost),
/// [`lost`](Self::lost) and [`loss_token`](Self::loss_token) say so before
/// another holder can be given the slot.
#[must_use = "the permit is released as soon as it is dropped"]
pub struct SemaphorePermit {
    name: Arc<str>,
    /// Ordered by slot.
    slots: Vec<(usize, WriteGuard)>,
    /// Shared by the permits this handle (and its clones) hold at once.
    count: CountShare,
    /// Set once this permit's first token draw found the count held by a
    /// quorum, asked afresh: another permit's earlier draw vouches only
    /// for the moment it was made.
    count_confirmed: AtomicBool,
    token: OnceLock<CancellationToken>,
}

impl SemaphorePermit {
    pub(super) fn new(
        name: Arc<str>,
        mut slots: Vec<(usize, WriteGuard)>,
        count: Arc<ReadGuard>,
    ) -> Self {
        slots.sort_unstable_by_key(|(slot, _)| *slot);
        SemaphorePermit {
            name,
            slots,
            count: CountShare { count: Some(count) },
            count_confirmed: AtomicBool::new(false),
            token: OnceLock::new(),
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many permits this holds.
    pub fn permits(&self) -> usize {
        self.slots.len()
    }

    /// The slots this permit holds, in `0..k`, ascending. Listings show
    /// slot `i` as the resource `semaphore/NAME/permit/i`.
    pub fn slots(&self) -> Vec<usize> {
        self.slots.iter().map(|(slot, _)| *slot).collect()
    }

    /// The uid of the lock on the first slot, as the lockers know it.
    pub fn uid(&self) -> &str {
        self.slots.first().map_or("", |(_, guard)| guard.uid())
    }

    /// The fencing token of the first slot (see
    /// [`fencing_tokens`](Self::fencing_tokens) for a permit of several).
    ///
    /// It is the fencing token of that slot's write lock: strictly greater
    /// than the token of every earlier holder of the same slot. Holders of
    /// other slots hold at the same time and have tokens of their own, so a
    /// resource that checks tokens keeps the highest token seen *per slot*
    /// (one [`FencingGate`](crate::FencingGate) per slot): that refuses a
    /// permit holder that paused past its lease once the slot's next holder
    /// has written.
    ///
    /// Fails with [`Error::LockLost`] whenever the permit is lost
    /// ([`is_lost`](Self::is_lost)): any of its locks, the count it shares
    /// included, even while the slot's own lock still stands (a process
    /// with another count may hold the semaphore then); otherwise as
    /// [`WriteGuard::fencing_token`]. The first call of each permit also
    /// asks a quorum of lockers afresh whether they still hold the count
    /// (a fencing draw, as a lock guard's first draw is), so a count forced
    /// open before its next refresh fails it with `LockLost` too, even when
    /// another permit sharing the count drew before. Nothing is kept until
    /// a call hands out its token: a call cancelled or failed half-way
    /// leaves the next one to ask a quorum again.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`WriteGuard::fencing_token`].
    pub async fn fencing_token(&self) -> Result<u64, Error> {
        let first = self.slots.get(..1).unwrap_or_default();
        let tokens = self.tokens_of(first).await?;
        tokens
            .first()
            .map(|&(_, token)| token)
            .ok_or(Error::LockLost)
    }

    /// The fencing token of each slot, as `(slot, token)`, ascending by
    /// slot; see [`fencing_token`](Self::fencing_token). Fails with
    /// [`Error::LockLost`] whenever the permit is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`WriteGuard::fencing_token`].
    pub async fn fencing_tokens(&self) -> Result<Vec<(usize, u64)>, Error> {
        self.tokens_of(&self.slots).await
    }

    /// The tokens of `slots`. Nothing is kept until every draw of the call
    /// succeeded and the permit still stands: a call cancelled or failed
    /// half-way leaves no slot's token and no count confirmation behind,
    /// so the next call asks a quorum again, as a guard's next draw does.
    async fn tokens_of(&self, slots: &[(usize, WriteGuard)]) -> Result<Vec<(usize, u64)>, Error> {
        if slots.is_empty() || self.is_lost() {
            return Err(Error::LockLost);
        }
        // A slot without a token kept yet gets its first one from this
        // call: the count is asked afresh then too, as for the permit's
        // first token, since it may have been forced open since (a permit
        // of several slots draws each slot's first token when asked).
        let first_of_a_slot = slots.iter().any(|(_, g)| !g.has_kept_token());
        let confirmed = self.count_confirmed.load(Ordering::Acquire) && !first_of_a_slot;
        let (count, tokens) = futures::join!(
            self.count_held(confirmed),
            join_all(slots.iter().map(|(_, g)| g.token_unkept()))
        );
        count?;
        let tokens = tokens.into_iter().collect::<Result<Vec<u64>, Error>>()?;
        if self.is_lost() {
            return Err(Error::LockLost);
        }
        let kept = slots
            .iter()
            .zip(tokens)
            .map(|((slot, guard), token)| (*slot, guard.keep_token(token)))
            .collect();
        self.count_confirmed.store(true, Ordering::Release);
        Ok(kept)
    }

    /// Whether the count is still held: asked of a quorum afresh until one
    /// of this permit's draws has handed out a token, and whenever a draw
    /// hands out a slot's first (`confirmed` false then; the
    /// count's cached token is another permit's and may predate a forced
    /// open), later from its loss signal. The caller marks the permit
    /// confirmed only once it hands out a token, so a draw cancelled or
    /// failed after the count's check leaves the next one asking again.
    async fn count_held(&self, confirmed: bool) -> Result<(), Error> {
        if !confirmed {
            self.count.confirm().await?;
        }
        if self.count.is_lost() {
            return Err(Error::LockLost);
        }
        Ok(())
    }

    /// Whether the permit is lost: the lock on one of its slots or on the
    /// count is lost (see [`WriteGuard::is_lost`]). Once `true`, it stays
    /// `true`.
    pub fn is_lost(&self) -> bool {
        self.count.is_lost() || self.slots.iter().any(|(_, g)| g.is_lost())
    }

    /// Resolves when the permit is lost; see [`WriteGuard::lost`]. It fires
    /// before any locker can free a slot of this permit to someone else.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let mut losses: Vec<_> = self.slots.iter().map(|(_, g)| g.lost().boxed()).collect();
        losses.push(self.count.lost());
        async move {
            select_all(losses).await;
        }
    }

    /// A token that is cancelled when the permit is lost. It is a child
    /// token: cancelling it yourself does not mark the permit lost.
    ///
    /// Each of the permit's locks (every slot and the count) cancels it
    /// when it is lost, with no task of its own, so it works called outside
    /// any runtime, whichever runtime acquired the permit. As
    /// with [`WriteGuard::loss_token`], check-then-act code must ask
    /// [`is_lost`](Self::is_lost), which reads the clock.
    pub fn loss_token(&self) -> CancellationToken {
        let token = self.token.get_or_init(|| {
            let token = CancellationToken::new();
            for (_, slot) in &self.slots {
                slot.link_loss(token.clone());
            }
            match &self.count.count {
                Some(count) => count.link_loss(token.clone()),
                None => token.cancel(),
            }
            token
        });
        token.child_token()
    }

    /// Releases every lock of the permit and waits until a quorum of
    /// lockers confirms each release.
    ///
    /// Returns [`Error::LockLost`] when the permit had been lost (the work
    /// done under it was not protected to the end), and otherwise the first
    /// failure of a release (see [`WriteGuard::unlock`]); releases that were
    /// not confirmed are retried in the background.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Once this future exists the permit is being released:
    /// dropping it hands the outstanding releases to the runtime.
    pub async fn unlock(self) -> Result<(), Error> {
        let lost = self.is_lost();
        let SemaphorePermit {
            slots, mut count, ..
        } = self;
        // The count's read lock goes with the last permit that shares it.
        // `Arc::into_inner` hands it to exactly one of the permits that let
        // go at once on several threads; with `try_unwrap` both could fail
        // and the last drop would release it unconfirmed.
        let count = async move {
            match count.count.take().and_then(Arc::into_inner) {
                Some(count) => count.unlock().await,
                None => Ok(()),
            }
        };
        let (slots, count) =
            futures::join!(join_all(slots.into_iter().map(|(_, g)| g.unlock())), count);
        if lost {
            return Err(Error::LockLost);
        }
        slots
            .into_iter()
            .chain(std::iter::once(count))
            .find(Result::is_err)
            .unwrap_or(Ok(()))
    }
}

impl fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("name", &self.name)
            .field("slots", &self.slots())
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// A permit's share of its handle's count lock. The permit that lets go of
/// the last share releases the lock, on the runtime it is dropped on, or
/// outside any runtime on one the library keeps for such work: the lock
/// itself may have been taken by another permit, on a runtime that is gone
/// or idle.
struct CountShare {
    /// `None` once `unlock` took it.
    count: Option<Arc<ReadGuard>>,
}

impl CountShare {
    fn is_lost(&self) -> bool {
        self.count.as_ref().is_none_or(|count| count.is_lost())
    }

    /// Asks a quorum of lockers afresh whether they still hold the count,
    /// for a permit about to hand out its first slot token: a count forced
    /// open since its last refresh fails it with `LockLost`, as a lock
    /// guard's first draw does, even when another permit sharing the
    /// count drew its token before.
    async fn confirm(&self) -> Result<(), Error> {
        match &self.count {
            Some(count) => count.confirm_held().await,
            None => Err(Error::LockLost),
        }
    }

    fn lost(&self) -> futures::future::BoxFuture<'static, ()> {
        match &self.count {
            Some(count) => count.lost().boxed(),
            None => futures::future::ready(()).boxed(),
        }
    }
}

impl Drop for CountShare {
    fn drop(&mut self) {
        let Some(count) = self.count.take().and_then(Arc::into_inner) else {
            return;
        };
        // The guard's own drop releases on the current runtime, or outside
        // any on a runtime of its own (the home runtime may be gone).
        drop(count);
    }
}
