//! The waiters and observers of one `SqlLocker`, kept in this process, and
//! how they learn that something changed.
//!
//! * **Waiters.** A waiter's place in the table names this locker's
//!   channel. On PostgreSQL, a transaction that may have made it the
//!   waiter's turn (a release, an expiry it noticed) sends `T<uid>` on that
//!   channel with `pg_notify`, delivered at commit; one that queues an
//!   older waiter behind a younger grant sends `W<uid>`. The locker's
//!   `LISTEN` connection receives them: on a turn it asks again for the
//!   waiter with a call that grants only while the waiter still has its
//!   place, and pushes the grant on only when it was made. MySQL and
//!   MariaDB have no notifications: there the locker reads the lines of
//!   the resources its waiters wait on every `poll_interval` (one
//!   statement, no locks), and at once when a call of another locker rang
//!   its doorbell (`doorbell.rs`), and acts on what the notifications would
//!   have said.
//! * **Observers** (leader election). The locker reads the leader of each
//!   watched resource every `poll_interval`, on both databases, and pushes
//!   `Changed` once to each watch whose read reported something else.
//!
//! A notification is lost when the listening connection drops; a poll can
//! miss a change that came and went between two reads. Both cost a waiter
//! or observer one re-check by its coordinator (`Timeouts::wait_recheck`),
//! never a lock: a grant is only ever made by a call under the resource's
//! row lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::locker::proclamation::WatchArgs;
use crate::locker::wait::{PushEvent, Wake};
use crate::{Error, LockArgs, LockMode};

/// Most watches one locker keeps; more are refused, so that a caller that
/// registers without end cannot grow the process without bound.
const MAX_WATCHES: usize = 100_000;

/// A wait this locker may have to push to.
#[derive(Clone)]
pub(super) struct Waiter {
    pub args: LockArgs,
    pub mode: LockMode,
    pub ticket: String,
    pub place_ttl: Duration,
    pub wake: Wake,
    seen: Instant,
    /// Whether a wound was pushed already (polling pushes one per grant).
    wounded: bool,
}

/// One observer's watch on a resource.
struct Watch {
    uid: Arc<str>,
    wake: Wake,
    until: Instant,
    /// What the read that registered it reported (a leader's uid and
    /// stamp, or `None`); `None` outer while the read has not answered.
    seen: Option<Option<(String, String)>>,
    id: u64,
}

#[derive(Default)]
struct Inner {
    waiters: HashMap<Arc<str>, Waiter>,
    /// How many of `waiters` name each resource (a name listed twice by
    /// one waiter counts twice): kept with `waiters`, by
    /// [`Inner::insert`], [`Inner::remove`] and [`Inner::drop_stale`].
    per_name: HashMap<String, usize>,
    watches: HashMap<String, Vec<Watch>>,
    watch_count: usize,
    next_id: u64,
}

#[derive(Default)]
pub(super) struct Waits {
    inner: Mutex<Inner>,
    /// Woken when a wait registers: a MySQL locker's doorbell (see
    /// `doorbell.rs`) connects only while there are waiters.
    pub waiting: Arc<tokio::sync::Notify>,
}

impl Inner {
    fn count(&mut self, waiter: &Waiter, up: bool) {
        for name in waiter.args.resources.iter() {
            if up {
                *self.per_name.entry(name.clone()).or_default() += 1;
            } else if let Some(n) = self.per_name.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    self.per_name.remove(name);
                }
            }
        }
    }

    fn insert(&mut self, uid: Arc<str>, waiter: Waiter) {
        self.count(&waiter, true);
        if let Some(old) = self.waiters.insert(uid, waiter) {
            self.count(&old, false);
        }
    }

    fn remove(&mut self, uid: &str) {
        if let Some(old) = self.waiters.remove(uid) {
            self.count(&old, false);
        }
    }

    /// Forgets the waits that have not asked for two place lifetimes:
    /// their coordinators unlocked or died.
    fn drop_stale(&mut self, now: Instant) {
        let stale: Vec<Arc<str>> = self
            .waiters
            .iter()
            .filter(|(_, w)| now.duration_since(w.seen) >= w.place_ttl.saturating_mul(2))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            self.remove(&uid);
        }
    }
}

impl Waits {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers a wait, so that turns and wounds of its uid reach it.
    pub(super) fn register(
        &self,
        args: &LockArgs,
        mode: LockMode,
        ticket: String,
        place_ttl: Duration,
        wake: Wake,
    ) {
        let now = Instant::now();
        let mut inner = self.lock();
        // A wait that has not asked for two place lifetimes is over: its
        // coordinator unlocked or died.
        if inner.waiters.len() >= 1024 {
            inner.drop_stale(now);
        }
        let wounded = inner
            .waiters
            .get(&args.uid)
            .is_some_and(|w| w.wounded && w.ticket == ticket);
        inner.insert(
            args.uid.clone(),
            Waiter {
                args: args.clone(),
                mode,
                ticket,
                place_ttl,
                wake,
                seen: now,
                wounded,
            },
        );
        drop(inner);
        self.waiting.notify_one();
    }

    /// Whether any wait is remembered.
    #[cfg(feature = "mysql")]
    pub(super) fn has_waiters(&self) -> bool {
        !self.lock().waiters.is_empty()
    }

    /// Forgets the wait of `uid`: it released or gave up.
    pub(super) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Whether a wait other than `uid`'s names any of `names`: a hint
    /// that the resource has a line (or a holder that waited), so that a
    /// call goes straight to its full transaction instead of first trying
    /// the one-round-trip routine, which answers only where there is
    /// none. Either path decides the same; a wrong hint costs a round
    /// trip.
    pub(super) fn others_wait_on(&self, names: &[String], uid: &str) -> bool {
        let inner = self.lock();
        let mine = |name: &String| {
            inner.waiters.get(uid).map_or(0, |w| {
                w.args.resources.iter().filter(|n| *n == name).count()
            })
        };
        names
            .iter()
            .any(|name| inner.per_name.get(name).is_some_and(|n| *n > mine(name)))
    }

    pub(super) fn waiter(&self, uid: &str) -> Option<Waiter> {
        self.lock().waiters.get(uid).cloned()
    }

    /// Marks a wound pushed to `uid`; whether it was the first.
    pub(super) fn first_wound(&self, uid: &str) -> bool {
        match self.lock().waiters.get_mut(uid) {
            Some(w) if !w.wounded => {
                w.wounded = true;
                true
            }
            _ => false,
        }
    }

    /// The resources that waiters and watches look at, sorted.
    pub(super) fn watched_names(&self, waiters: bool) -> Vec<String> {
        let now = Instant::now();
        let mut inner = self.lock();
        inner.drop_stale(now);
        let mut names: Vec<String> = inner.watches.keys().cloned().collect();
        if waiters {
            for w in inner.waiters.values() {
                names.extend(w.args.resources.iter().cloned());
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// The waiters with the uids of `uids`.
    pub(super) fn waiters_among(&self, uids: &[String]) -> Vec<Waiter> {
        let inner = self.lock();
        uids.iter()
            .filter_map(|uid| inner.waiters.get(uid.as_str()).cloned())
            .collect()
    }

    /// Keeps a watch of `uid` on `name`, replacing an older one of the
    /// same uid; its id, for [`settle`](Self::settle).
    pub(super) fn watch(
        &self,
        name: &str,
        uid: &Arc<str>,
        watch: &WatchArgs,
    ) -> Result<u64, Error> {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.watch_count >= MAX_WATCHES {
            let mut count = 0;
            for list in inner.watches.values_mut() {
                list.retain(|w| w.until > now);
                count += list.len();
            }
            inner.watches.retain(|_, list| !list.is_empty());
            inner.watch_count = count;
            if count >= MAX_WATCHES {
                return Err(Error::invalid(format!(
                    "this locker keeps {MAX_WATCHES} watches already; observers must let theirs lapse"
                )));
            }
        }
        inner.next_id += 1;
        let id = inner.next_id;
        let list = inner.watches.entry(name.to_owned()).or_default();
        let before = list.len();
        list.retain(|w| w.uid != *uid && w.until > now);
        let removed = before - list.len();
        list.push(Watch {
            uid: uid.clone(),
            wake: watch.wake.clone(),
            until: now + watch.ttl,
            seen: None,
            id,
        });
        inner.watch_count = inner.watch_count + 1 - removed.min(inner.watch_count + 1);
        Ok(id)
    }

    /// Records what the read of watch `id` reported; `None` when it failed
    /// (the watch then fires at the next poll).
    pub(super) fn settle(&self, name: &str, id: u64, seen: Option<Option<(String, String)>>) {
        let mut inner = self.lock();
        if let Some(w) = inner
            .watches
            .get_mut(name)
            .and_then(|list| list.iter_mut().find(|w| w.id == id))
        {
            w.seen = Some(seen.unwrap_or(Some((String::from("\u{0}"), String::new()))));
        }
    }

    /// Pushes `Changed` once to every settled watch on `name` whose read
    /// reported something other than `now`, and drops them; lapsed watches
    /// go too.
    pub(super) fn leader_is(&self, name: &str, now: &Option<(String, String)>) {
        let at = Instant::now();
        let mut fired = Vec::new();
        {
            let mut inner = self.lock();
            let Some(list) = inner.watches.get_mut(name) else {
                return;
            };
            let before = list.len();
            list.retain(|w| {
                if w.until <= at {
                    return false;
                }
                match &w.seen {
                    Some(seen) if seen != now => {
                        fired.push((w.wake.clone(), w.uid.clone()));
                        false
                    }
                    _ => true,
                }
            });
            let removed = before - list.len();
            if list.is_empty() {
                inner.watches.remove(name);
            }
            inner.watch_count = inner.watch_count.saturating_sub(removed);
        }
        for (wake, uid) in fired {
            wake.notify(&uid, PushEvent::Changed);
        }
    }
}
