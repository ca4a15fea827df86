//! How a `Semaphore` acquire runs: the line, the count and its check, the
//! slots, and what is released, confirmed, when an acquire gives up.

use std::sync::Arc;

use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};

use super::names::{held_names, permit_names, slots_below, Digit, MAX_PERMITS, SPELL_BASE};
use super::{Patience, Semaphore, SemaphorePermit, Taken, COUNT_CHECKS, READ_OUT_EVERY};
use crate::{DRWMutex, Error, ReadGuard, WriteGuard};

impl Semaphore {
    pub(super) async fn take(
        &self,
        m: usize,
        patience: Patience,
    ) -> Result<SemaphorePermit, Error> {
        if m == 0 || m > self.permits() {
            return Err(Error::invalid(format!(
                "asked for {m} permits of semaphore {:?}, which has {}; ask for 1 to {}",
                self.name,
                self.permits(),
                self.permits()
            )));
        }
        loop {
            let queue = match patience {
                Patience::Forever => self.queue.lock().await?,
                Patience::OneRound => self.queue.try_lock().await?,
            };
            let taking = async {
                match patience {
                    Patience::Forever => self.take_waiting(m).await,
                    Patience::OneRound => self.take_once(m).await,
                }
            };
            let lost = queue.lost();
            let (count, slots) = tokio::select! {
                taken = taking => match taken {
                    Ok(taken) => taken,
                    Err(err) => {
                        release_line(queue).await;
                        return Err(err);
                    }
                },
                () = lost => {
                    // The line moved on without us (a partition, a stall):
                    // what we would take now could be an earlier waiter's
                    // turn. Give it all back and queue again.
                    tracing::debug!(semaphore = %self.name, "lost the place at the head of the line; queueing again");
                    if patience == Patience::OneRound {
                        return Err(Error::WouldBlock);
                    }
                    continue;
                }
            };
            // From here on only calls: the line's confirmed release.
            crate::lock::wait_watch::calls_only();
            release_line(queue).await;
            tracing::debug!(semaphore = %self.name, slots = slots.len(), "permits granted");
            let permit = SemaphorePermit::new(self.name.clone(), slots, count);
            if permit.is_lost() {
                // Lost while the line's release was confirmed (up to the
                // unlock timeout): never hand out a lost permit. Its parts
                // go back in the background; queue again.
                tracing::debug!(semaphore = %self.name, "lost while leaving the line; queueing again");
                drop(permit);
                if patience == Patience::OneRound {
                    return Err(Error::WouldBlock);
                }
                continue;
            }
            return Ok(permit);
        }
    }

    /// The count and `m` slots for the head of the line, waiting for them.
    /// The count first: a count that disagrees must be the answer before
    /// any slot is taken, and the head is ready to wait on the slots one
    /// round later.
    async fn take_waiting(&self, m: usize) -> Result<Taken, Error> {
        let (count, check) = self.count_lock(Patience::Forever).await?;
        let (slots, ()) = futures::join!(
            self.take_slots(m, Patience::Forever),
            release_check_if(check)
        );
        match slots {
            Ok(slots) => self.renew_lost(m, count, slots).await,
            Err(err) => {
                release_shared(count).await;
                Err(err)
            }
        }
    }

    /// The count and `m` slots in one round. Both are asked at once; a
    /// count that disagrees is the answer to give even when the slots are
    /// all held too. What is not kept is released, confirmed.
    async fn take_once(&self, m: usize) -> Result<Taken, Error> {
        let (counted, slots) = futures::join!(
            self.count_lock(Patience::OneRound),
            self.take_slots(m, Patience::OneRound)
        );
        match (counted, slots) {
            (Ok((count, check)), Ok(slots)) => {
                release_check_if(check).await;
                if count.is_lost() || slots.iter().any(|(_, slot)| slot.is_lost()) {
                    // Lost between the two answers: one round is all a try
                    // makes.
                    futures::join!(release_shared(count), release_slots(slots));
                    return Err(Error::WouldBlock);
                }
                Ok((count, slots))
            }
            (Ok((count, check)), Err(err)) => {
                futures::join!(release_shared(count), release_check_if(check));
                Err(err)
            }
            (Err(err), Ok(slots)) => {
                release_slots(slots).await;
                Err(err)
            }
            (Err(err), Err(_)) => Err(err),
        }
    }

    /// The handle's count lock: the one its permits share if it is not
    /// lost, else a new one with the check that admitted it (to release
    /// before the line moves on).
    async fn count_lock(
        &self,
        patience: Patience,
    ) -> Result<(Arc<ReadGuard>, Option<WriteGuard>), Error> {
        if let Some(count) = self.held_count() {
            return Ok((count, None));
        }
        let (count, check) = self.join_count(patience).await?;
        Ok((self.keep_count(count), Some(check)))
    }

    /// Takes again, still at the head of the line, any part of a permit
    /// that was lost while the rest was taken (a slot wait can last as long
    /// as the holders hold): an acquire never returns a lost permit, as a
    /// lock never returns a lost guard.
    async fn renew_lost(
        &self,
        m: usize,
        mut count: Arc<ReadGuard>,
        mut slots: Vec<(usize, WriteGuard)>,
    ) -> Result<Taken, Error> {
        loop {
            if count.is_lost() {
                tracing::debug!(semaphore = %self.name, "the count was lost while waiting for a slot; taking it again");
                match self.count_lock(Patience::Forever).await {
                    Ok((fresh, check)) => {
                        release_check_if(check).await;
                        count = fresh;
                    }
                    Err(err) => {
                        release_slots(slots).await;
                        return Err(err);
                    }
                }
                continue;
            }
            if slots.iter().any(|(_, slot)| slot.is_lost()) {
                tracing::debug!(semaphore = %self.name, "a slot was lost while waiting for another; taking one again");
                // A lost slot's release runs in the background.
                slots.retain(|(_, slot)| !slot.is_lost());
                match self.take_slots(m - slots.len(), Patience::Forever).await {
                    Ok(more) => slots.extend(more),
                    Err(err) => {
                        futures::join!(release_slots(slots), release_shared(count));
                        return Err(err);
                    }
                }
                continue;
            }
            return Ok((count, slots));
        }
    }

    /// The count's read lock that a permit of this handle holds now, if
    /// it is not lost. Reusing it is as safe as taking a new one: it was
    /// taken and checked by an acquirer at the head of the line, and every
    /// permit that shares it is lost when it is.
    fn held_count(&self) -> Option<Arc<ReadGuard>> {
        let kept = self
            .shared
            .count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.upgrade().filter(|count| !count.is_lost())
    }

    /// Shares a newly taken count with the handle's later acquires.
    fn keep_count(&self, count: ReadGuard) -> Arc<ReadGuard> {
        let count = Arc::new(count);
        *self
            .shared
            .count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::downgrade(&count);
        count
    }

    /// Takes the read lock on this handle's count after checking that
    /// nobody holds another; returns the check still held, for the caller
    /// to release (confirmed) before the line moves on, so that the next
    /// acquirer's check does not meet it.
    async fn join_count(&self, patience: Patience) -> Result<(ReadGuard, WriteGuard), Error> {
        let mut attempt = 0u32;
        let mut refusals = 0u32;
        let mut read_out: Option<tokio::time::Instant> = None;
        loop {
            let (count, check) =
                futures::join!(self.count.try_read(), self.other_counts.try_lock());
            let failure = match (count, check) {
                (Ok(count), Ok(check)) => return Ok((count, check)),
                (Ok(count), Err(err)) => {
                    release_read(count).await;
                    err
                }
                (Err(err), Ok(check)) => {
                    release_check(check).await;
                    err
                }
                (Err(err), Err(_)) => err,
            };
            if failure != Error::WouldBlock {
                if patience == Patience::Forever && failure.is_retryable() {
                    tokio::time::sleep(self.coord.backoff(attempt)).await;
                    attempt = attempt.saturating_add(1);
                    continue;
                }
                return Err(failure);
            }
            attempt = attempt.saturating_add(1);
            refusals = refusals.saturating_add(1);
            // Refused by a holder of another count, or by checks: one left
            // behind by an acquirer whose release did not reach every
            // locker (it expires within the lockers' validity), or one
            // whose release a locker has not processed yet, which the
            // retries outlast. Only a read-out tells.
            if patience == Patience::OneRound && refusals >= COUNT_CHECKS {
                return Err(Error::WouldBlock);
            }
            if read_out.is_none_or(|at| at.elapsed() >= READ_OUT_EVERY) {
                read_out = Some(tokio::time::Instant::now());
                if let Some(in_use) = self.count_in_use().await {
                    return Err(Error::PermitsMismatch {
                        name: self.name.to_string(),
                        permits: self.permits(),
                        in_use: Some(in_use),
                    });
                }
            }
            tokio::time::sleep(self.coord.backoff(attempt)).await;
        }
    }

    /// Reads out the count another process holds from the `held` names of
    /// the slots, where each slot's lock spells its holder's count in two
    /// digits of base [`SPELL_BASE`]: for each value of a digit that this
    /// handle's count does not have, one read lock on that value's names
    /// over the slots a count with it can hold. Only a process of another
    /// count write-locks those, so a refusal is one; read locks left behind
    /// by other read-outs refuse nothing. The high digit first: it bounds
    /// the slots the low digit is read over. `None` when nothing was
    /// refused.
    ///
    /// The slots from `slots_below(own high digit)` up are never taken by
    /// a process of this count: when one read lock on them is granted,
    /// every other count's slot locks are below, and only those slots'
    /// names are read (about 3,000 names for a small count instead of
    /// 18,000).
    async fn count_in_use(&self) -> Option<usize> {
        let own = self.permits();
        let mine = slots_below(Digit::High.of(own));
        let reach = if mine < MAX_PERMITS {
            let beyond = self
                .queue
                .sibling(permit_names(&self.base, mine..MAX_PERMITS));
            match beyond.try_read().await {
                Ok(nobody) => {
                    release_read(nobody).await;
                    mine
                }
                // Someone of another count there, or no answer: read all.
                Err(_) => MAX_PERMITS,
            }
        } else {
            MAX_PERMITS
        };
        let high = self
            .refused_values(Digit::High, own, |value| slots_below(value).min(reach))
            .await;
        let top = high.unwrap_or(0).max(Digit::High.of(own));
        let low = self
            .refused_values(Digit::Low, own, |_| slots_below(top).min(reach))
            .await;
        if high.is_none() && low.is_none() {
            return None;
        }
        let high = high.unwrap_or(Digit::High.of(own));
        let low = low.unwrap_or(Digit::Low.of(own));
        Some(high * SPELL_BASE + low)
    }

    /// The largest value of `digit`, other than `own`'s, whose `held` names
    /// over `slots(value)` slots a read lock could not be granted on (in
    /// one round each, all at once); the read locks granted are released,
    /// confirmed.
    async fn refused_values(
        &self,
        digit: Digit,
        own: usize,
        slots: impl Fn(usize) -> usize,
    ) -> Option<usize> {
        let values: Vec<usize> = (0..SPELL_BASE)
            // A high digit no count up to MAX_PERMITS has is never held.
            .filter(|&v| {
                v != digit.of(own) && (digit == Digit::Low || v * SPELL_BASE <= MAX_PERMITS)
            })
            .collect();
        let reads: Vec<DRWMutex> = values
            .iter()
            .map(|&v| {
                self.queue
                    .sibling(held_names(&self.base, digit, v, slots(v)))
            })
            .collect();
        let tried = join_all(reads.iter().map(DRWMutex::try_read)).await;
        let refused = values
            .iter()
            .zip(&tried)
            .filter(|(_, t)| matches!(t, Err(Error::WouldBlock)))
            .map(|(&v, _)| v)
            .max();
        join_all(tried.into_iter().flatten().map(release_read)).await;
        refused
    }

    /// Takes `m` slots; called only by the head of the line.
    async fn take_slots(
        &self,
        m: usize,
        patience: Patience,
    ) -> Result<Vec<(usize, WriteGuard)>, Error> {
        if patience == Patience::OneRound {
            let tries = join_all(self.slots.iter().map(DRWMutex::try_lock)).await;
            let mut taken = Vec::with_capacity(m);
            let mut extra = Vec::new();
            let mut failure = Error::WouldBlock;
            for (slot, tried) in tries.into_iter().enumerate() {
                match tried {
                    Ok(guard) if taken.len() < m => taken.push((slot, guard)),
                    Ok(guard) => extra.push(guard),
                    Err(Error::WouldBlock) => {}
                    Err(err) => failure = err,
                }
            }
            if taken.len() < m {
                extra.extend(taken.drain(..).map(|(_, guard)| guard));
            }
            // Confirmed, so that the slots are free for the next attempt
            // when this call returns.
            join_all(extra.into_iter().map(release_check)).await;
            return if taken.len() == m {
                Ok(taken)
            } else {
                Err(failure)
            };
        }
        if m == 1 {
            // One slot first, in turn: when permits are free this costs one
            // call per locker where waiting on all of them costs `k`, and
            // `k - 1` releases after. When none is free it costs a round.
            let slot = self
                .shared
                .next_slot
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                % self.slots.len();
            match self.slots[slot].try_lock().await {
                Ok(guard) => return Ok(vec![(slot, guard)]),
                Err(err) if !err.is_retryable() => return Err(err),
                Err(_) => {}
            }
        }
        let mut waits: FuturesUnordered<_> = self
            .slots
            .iter()
            .enumerate()
            .map(|(slot, mutex)| async move { (slot, mutex.lock().await) })
            .collect();
        let mut taken = Vec::with_capacity(m);
        while let Some((slot, granted)) = waits.next().await {
            taken.push((slot, granted?));
            if taken.len() == m {
                // The other waits end here, releasing their places and any
                // grant that arrived meanwhile.
                return Ok(taken);
            }
        }
        Err(Error::WouldBlock)
    }
}

/// Releases the line and waits for the lockers to confirm. The next in
/// line is pushed its grant as soon as they process it; waiting makes a
/// `try_acquire` that follows this call find the line free.
async fn release_line(queue: WriteGuard) {
    if let Err(err) = queue.unlock().await {
        tracing::debug!(%err, "the release of the line is not confirmed yet");
    }
}

/// Releases a count that no permit will hold, if no other permit shares
/// it, confirmed.
async fn release_shared(count: Arc<ReadGuard>) {
    // `into_inner`, not `try_unwrap`: of shares let go at once on several
    // threads, exactly one gets the lock to release.
    if let Some(count) = Arc::into_inner(count) {
        release_read(count).await;
    }
}

/// Releases slots that will not be kept, confirmed.
async fn release_slots(slots: Vec<(usize, WriteGuard)>) {
    join_all(slots.into_iter().map(|(_, slot)| release_check(slot))).await;
}

/// Releases a count check, if one was taken.
async fn release_check_if(check: Option<WriteGuard>) {
    if let Some(check) = check {
        release_check(check).await;
    }
}

/// Releases a read lock of the count that will not be kept, confirmed.
async fn release_read(count: ReadGuard) {
    if let Err(err) = count.unlock().await {
        tracing::debug!(%err, "the release of a count is not confirmed yet");
    }
}

/// Releases a lock taken only to check (the count, or a slot beyond those
/// asked for) and waits for the lockers to confirm, so that the next
/// attempt, ours or the next acquirer's, does not meet it.
async fn release_check(check: WriteGuard) {
    if let Err(err) = check.unlock().await {
        tracing::debug!(%err, "the release of a check is not confirmed yet");
    }
}
