//! Pushed wake-ups for the waiters of one `RedisLocker`, over Redis pub/sub.
//!
//! Each locker subscribes to a channel of its own under the key prefix. A
//! waiter's place in Redis names that channel, and the scripts publish on
//! it: `T<uid>` when a release or an expiry may have made it the waiter's
//! turn, `W<uid>` when an older waiter queued behind a grant of `uid`. On a
//! turn the locker asks again for the waiter, with a script that grants
//! only while the waiter still has its place, and pushes the grant on to
//! the waiter only when it was made. A waiter that gave up has unlocked
//! its uid, which removed its place, so it is never granted behind its back.
//!
//! Pub/sub delivers at most once: a message lost while the subscription
//! reconnects (or cannot connect at all) costs that waiter one re-check
//! (`Timeouts::wait_recheck`), never a lock, and never a deadlock. A waiter
//! names this locker's channel whether or not the subscription is up, so a
//! grant made while it was down can be wounded by push once it is back;
//! and the re-check of a waiter holding a grant that an older waiter is
//! queued behind is answered as a wound (`WAIT`'s answer 3), which the
//! locker delivers through the waiter's own wake, as if it had been pushed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::locker::wait::{PushEvent, Wake};
use crate::{LockArgs, LockMode};

use super::feed::Feed;
use super::Shared;

/// A wait this locker may have to push to.
#[derive(Clone)]
pub(super) struct Waiter {
    pub args: LockArgs,
    pub mode: LockMode,
    pub ticket: String,
    pub place_ttl: Duration,
    pub wake: Wake,
    seen: Instant,
}

pub(super) struct Waits {
    /// The pub/sub channel of this locker, and whether it is subscribed.
    pub feed: Feed,
    waiters: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    by_uid: HashMap<Arc<str>, Waiter>,
    /// Size after the last sweep; the next sweep runs at twice this.
    swept_at: usize,
}

impl Waits {
    pub(super) fn new(channel: String) -> Waits {
        Waits {
            feed: Feed::new(channel),
            waiters: Mutex::new(Waiting::default()),
        }
    }

    /// Remembers a wait, so pushes for its uid reach it.
    pub(super) fn register(
        &self,
        args: &LockArgs,
        mode: LockMode,
        ticket: String,
        place_ttl: Duration,
        wake: Wake,
    ) {
        let now = Instant::now();
        let mut waiting = lock(&self.waiters);
        if waiting.by_uid.len() >= waiting.swept_at.max(64) * 2 {
            // A wait that has not asked for two place lifetimes is over;
            // its coordinator unlocked or died.
            waiting
                .by_uid
                .retain(|_, w| now.duration_since(w.seen) < w.place_ttl * 2);
            waiting.swept_at = waiting.by_uid.len();
        }
        waiting.by_uid.insert(
            args.uid.clone(),
            Waiter {
                args: args.clone(),
                mode,
                ticket,
                place_ttl,
                wake,
                seen: now,
            },
        );
    }

    /// Forgets the wait of `uid`: it released or gave up.
    pub(super) fn forget(&self, uid: &str) {
        lock(&self.waiters).by_uid.remove(uid);
    }

    fn get(&self, uid: &str) -> Option<Waiter> {
        lock(&self.waiters).by_uid.get(uid).cloned()
    }

    /// Acts on a message of the waits' channel; `shared` is the locker
    /// these waits belong to, which asks again for a waiter on its turn.
    pub(super) async fn on_message(&self, shared: &Arc<Shared>, payload: &[u8]) {
        let Some((&kind, uid)) = payload.split_first() else {
            return;
        };
        let Ok(uid) = std::str::from_utf8(uid) else {
            return;
        };
        let Some(waiter) = self.get(uid) else {
            return;
        };
        match kind {
            b'W' => waiter.wake.notify(uid, PushEvent::Wounded),
            b'T' => match shared.take_turn(&waiter).await {
                Ok(true) => waiter.wake.notify(uid, PushEvent::Granted),
                Ok(false) => {}
                Err(err) => {
                    tracing::debug!(locker = %shared.endpoint, %uid, "turn not taken: {err}")
                }
            },
            _ => {}
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
