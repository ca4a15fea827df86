//! The observers' watches of one `RedisLocker` (leader election), kept in
//! this process, and the change notices that fire them.
//!
//! Every script that stores a proclamation, or drops one (a release, a
//! forced unlock, an expired holder it noticed), publishes the resource's
//! key on the prefix's leader channel (`<prefix>~leader`). A locker that
//! has watches subscribes to that channel and, for each notice, pushes
//! [`PushEvent::Changed`] once to every live watch on that key; the
//! observer reads again, which registers its watch again.
//!
//! What this cannot see: an entry that expires while no script runs on
//! its key (the key's `PEXPIRE` takes it silently), and a notice lost while
//! the subscription reconnects. The observer's periodic re-check
//! (`Timeouts::wait_recheck`) finds both; a subscription that comes back
//! fires every watch at once, so only what happens while it is down waits
//! for that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::config::after;
use crate::proclamation::WatchArgs;
use crate::wait::{PushEvent, Wake};
use crate::Error;

use super::feed::Feed;

/// Most watches one resource keeps in one locker; more are refused, so
/// that a caller that registers without end cannot grow the process
/// without bound (the same limit as `LocalLocker`'s).
pub(super) const MAX_WATCHES_PER_RESOURCE: usize = 10_000;

struct Watch {
    uid: Arc<str>,
    wake: Wake,
    expires: Instant,
}

#[derive(Default)]
struct Watching {
    /// By the resource's key (prefix and name), as the notices name it.
    by_key: HashMap<String, Vec<Watch>>,
    /// Watches kept in all.
    count: usize,
    /// `count` after the last sweep; the next sweep runs at twice this.
    swept_at: usize,
}

pub(super) struct Watches {
    /// The leader channel of the locker's prefix, and whether this locker
    /// is subscribed to it.
    pub feed: Feed,
    watching: Mutex<Watching>,
}

impl Watches {
    pub(super) fn new(channel: String) -> Watches {
        Watches {
            feed: Feed::new(channel),
            watching: Mutex::new(Watching::default()),
        }
    }

    fn watching(&self) -> MutexGuard<'_, Watching> {
        self.watching.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps a one-shot watch of `uid` on `key`, replacing an earlier one
    /// of the same uid there; lapses after `watch.ttl`.
    pub(super) fn register(
        &self,
        key: &str,
        uid: &Arc<str>,
        watch: &WatchArgs,
    ) -> Result<(), Error> {
        let now = Instant::now();
        let mut watching = self.watching();
        if watching.count >= watching.swept_at.max(64) * 2 {
            watching.by_key.retain(|_, list| {
                list.retain(|w| w.expires > now);
                !list.is_empty()
            });
            watching.count = watching.by_key.values().map(Vec::len).sum();
            watching.swept_at = watching.count;
        }
        let list = watching.by_key.entry(key.to_owned()).or_default();
        let before = list.len();
        list.retain(|w| w.expires > now && w.uid != *uid);
        let full = list.len() >= MAX_WATCHES_PER_RESOURCE;
        if !full {
            list.push(Watch {
                uid: uid.clone(),
                wake: watch.wake.clone(),
                expires: after(now, watch.ttl),
            });
        }
        let after_len = list.len();
        let empty = list.is_empty();
        if empty {
            watching.by_key.remove(key);
        }
        watching.count = (watching.count + after_len).saturating_sub(before);
        if full {
            return Err(Error::invalid(format!(
                "{MAX_WATCHES_PER_RESOURCE} observers already watch {key:?} through this \
                 locker; observe through fewer handles"
            )));
        }
        Ok(())
    }

    /// Acts on a notice of the leader channel: `payload` is the key whose
    /// leader may have changed.
    pub(super) fn on_message(&self, payload: &[u8]) {
        let Ok(key) = std::str::from_utf8(payload) else {
            return;
        };
        let fired = {
            let mut watching = self.watching();
            let fired = watching.by_key.remove(key).unwrap_or_default();
            watching.count = watching.count.saturating_sub(fired.len());
            fired
        };
        deliver(fired);
    }

    /// Fires every watch: notices may have been lost.
    pub(super) fn fire_all(&self) {
        let fired: Vec<Watch> = {
            let mut watching = self.watching();
            watching.count = 0;
            watching.by_key.drain().flat_map(|(_, list)| list).collect()
        };
        deliver(fired);
    }

    /// How many watches are kept (lapsed ones not yet swept included).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.watching().count
    }
}

/// Pushes one change to each live watch, after the mutex is let go.
fn deliver(fired: Vec<Watch>) {
    let now = Instant::now();
    for watch in fired {
        if watch.expires > now {
            watch.wake.notify(&watch.uid, PushEvent::Changed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(Default)]
    struct Inbox(Mutex<Vec<(usize, String, PushEvent)>>);

    impl crate::PushSink for Inbox {
        fn push(&self, slot: usize, uid: &str, event: PushEvent) {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
                slot,
                uid.to_owned(),
                event,
            ));
        }
    }

    impl Inbox {
        fn take(&self) -> Vec<(usize, String, PushEvent)> {
            std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
        }
    }

    fn args(inbox: &Arc<Inbox>, slot: usize, ttl: Duration) -> WatchArgs {
        WatchArgs {
            ttl,
            wake: Wake::new(inbox.clone(), slot),
        }
    }

    #[tokio::test]
    async fn a_notice_fires_each_watch_of_its_key_once() {
        let watches = Watches::new("p~leader".into());
        let inbox = Arc::new(Inbox::default());
        let ttl = Duration::from_secs(30);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        // The same uid again replaces its watch.
        watches.register("p:e", &a, &args(&inbox, 1, ttl)).unwrap();
        watches.register("p:e", &b, &args(&inbox, 2, ttl)).unwrap();
        watches
            .register("p:other", &a, &args(&inbox, 3, ttl))
            .unwrap();
        assert_eq!(watches.len(), 3);
        watches.on_message(b"p:e");
        let mut got = inbox.take();
        got.sort_by_key(|(slot, _, _)| *slot);
        assert_eq!(
            got,
            [
                (1, "a".to_owned(), PushEvent::Changed),
                (2, "b".to_owned(), PushEvent::Changed)
            ]
        );
        // One-shot: a second notice finds nothing to fire.
        watches.on_message(b"p:e");
        assert!(inbox.take().is_empty());
        assert_eq!(watches.len(), 1);
        watches.fire_all();
        assert_eq!(inbox.take(), [(3, "a".to_owned(), PushEvent::Changed)]);
        assert_eq!(watches.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_lapses_after_its_ttl() {
        let watches = Watches::new("p~leader".into());
        let inbox = Arc::new(Inbox::default());
        let uid: Arc<str> = "a".into();
        watches
            .register("p:e", &uid, &args(&inbox, 0, Duration::from_secs(1)))
            .unwrap();
        tokio::time::advance(Duration::from_secs(2)).await;
        watches.on_message(b"p:e");
        assert!(inbox.take().is_empty(), "a lapsed watch was fired");
        // Lapsed watches are swept once enough are registered.
        for i in 0..200 {
            let uid: Arc<str> = format!("u{i}").into();
            watches
                .register(
                    &format!("p:{i}"),
                    &uid,
                    &args(&inbox, 0, Duration::from_secs(1)),
                )
                .unwrap();
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        for i in 0..200 {
            let uid: Arc<str> = format!("v{i}").into();
            watches
                .register(
                    &format!("q:{i}"),
                    &uid,
                    &args(&inbox, 0, Duration::from_secs(60)),
                )
                .unwrap();
        }
        assert!(watches.len() < 400, "lapsed watches were never swept");
    }
}
